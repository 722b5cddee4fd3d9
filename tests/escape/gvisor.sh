#!/bin/sh
# --isolation gvisor: the agent in gVisor's user-space kernel (runsc), the
# policy compiled into an OCI bundle, the guard's events relayed by
# sbx-guard.  Escape attempts are made by the static program (the guard is
# not in it), so only what gVisor and the bundle hold can stop them.
# Skipped, with the reason, where runsc is not installed or cannot start a
# sandbox here.
. "$(dirname "$0")/../lib.sh"

gv() { esc_in_place; guard --isolation gvisor "$@"; }

# Skips unless runsc starts a sandbox on this machine (the reason printed
# is runsc's own last line).
need_runsc() {
    command -v runsc >/dev/null 2>&1 || skip "runsc (gVisor) is not installed (apt-get install runsc)"
    if ! why=$(runsc --rootless --ignore-cgroups --network=none do /bin/true 2>&1); then
        skip "runsc cannot start a sandbox here: $(printf '%s\n' "$why" | tail -n 1)"
    fi
}

no_network_policy() {
    cat >"$T/nonet.yaml" <<'YAML'
version: 1
name: nonet
network:
  connect:
    allow: []
    deny: []
  bind:
    allow: []
YAML
}

test_gvisor_static_program_cannot_read_a_deny_file() {
    need_runsc
    echo secret >.env
    out=$(gv -- "$ESC" read .env) || true
    assert_eq "$out" "fail EACCES"
    out=$(gv -- "$ESC" read "$SBX_AUDIT_DB") || true
    assert_contains "$out" "fail"
}

test_gvisor_keeps_the_workspace_writable_and_the_rest_read_only() {
    need_runsc
    mkdir -p "$T/outside"
    out=$(gv -- "$ESC" write ./inside)
    assert_eq "$out" "ok"
    assert_file_present ./inside
    out=$(gv -- "$ESC" write "$T/outside/x") || true
    assert_contains "$out" "fail"
    assert_file_absent "$T/outside/x"
}

test_gvisor_raw_exec_of_a_denied_system_program_is_refused() {
    need_runsc
    # files.exec.deny names mount: its file is bound noexec in the sandbox.
    out=$(gv -- "$ESC" exec /usr/bin/mount --version) || true
    assert_eq "$out" "fail EACCES"
    # Reading it stays allowed, as the policy says.
    out=$(gv -- "$ESC" read /usr/bin/mount)
    assert_eq "$out" "ok"
}

test_gvisor_a_copy_of_a_denied_program_outside_the_system_directories_runs() {
    need_runsc
    # The limit, stated: only the programs in the system's program
    # directories at start are bound noexec (no supervisor judges execs
    # under gVisor).  A copy named mount in the workspace runs; the guard
    # inside it still sees and records what it does.
    cp /usr/bin/mount ./mount
    out=$(gv -- "$ESC" exec "$WS/mount" --version 2>&1) || true
    assert_contains "$out" "mount from util-linux"
}

test_gvisor_no_network_policy_gets_network_none() {
    need_runsc
    no_network_policy
    out=$(gv --policy "$T/nonet.yaml" -- "$ESC" connect 1.1.1.1 443) || true
    assert_contains "$out" "fail"
    out=$(gv --policy "$T/nonet.yaml" -- "$ESC" udp 1.1.1.1 53) || true
    assert_contains "$out" "fail"
    out=$(guard --isolation gvisor --policy "$T/nonet.yaml" --print-isolation -- true)
    assert_contains "$out" "--network=none"
    expect_row op=start "reason~gvisor" "reason~netns"
}

test_gvisor_sbx_kill_ends_the_whole_sandbox() {
    need_runsc
    rc=0
    guard --isolation gvisor --name gk -- /bin/sh -c 'sleep 60 & sleep 60' >"$T/o" 2>&1 &
    gpid=$!
    i=0
    until sbx-audit agents 2>/dev/null | grep -q gk || [ $i -gt 100 ]; do sleep 0.1; i=$((i + 1)); done
    sleep 0.5
    pgrep -f "$SBX_RUNTIME_DIR/gvisor" >/dev/null || fail "no runsc process for the sandbox"
    sbx-kill gk
    wait $gpid || rc=$?
    assert_eq "$rc" 137
    sleep 0.3
    left=$(pgrep -f "$SBX_RUNTIME_DIR/gvisor" || true)
    assert_eq "$left" "" "runsc processes left"
    assert_eq "$(ls -d "$SBX_RUNTIME_DIR"/gvisor.* 2>/dev/null || true)" "" "bundles left"
    expect_row agent=gk op=kill
}

test_gvisor_soft_kill_reaches_the_guard_inside() {
    need_runsc
    echo data >f.txt
    # The agent appends f.txt to out.txt twice a second; after the soft
    # kill its guarded calls (the shell's own opens) fail with EPERM.
    guard --isolation gvisor --name gs -- /bin/sh -c \
        'for i in $(seq 12); do cat f.txt >>out.txt; sleep 0.5; done' 2>>"$T/gs.err" &
    gpid=$!
    i=0
    until [ -s out.txt ] || [ $i -gt 100 ]; do sleep 0.1; i=$((i + 1)); done
    sbx-kill --soft gs
    wait $gpid || true
    assert_contains "$(cat "$T/gs.err")" "cannot create out.txt: Operation not permitted"
}

test_gvisor_an_agent_killed_by_its_own_signal_exits_and_is_recorded_as_natively() {
    need_runsc
    # runsc exits 128+N when the agent dies of signal N, as a shell does;
    # sbx-guard reads the signal from runsc's log, so the exit status and
    # the exit row are those of --isolation native.
    rn=0
    guard --isolation native --name sn -- /bin/sh -c 'kill -TERM $$' 2>/dev/null || rn=$?
    rg=0
    guard --isolation gvisor --name sg -- /bin/sh -c 'kill -TERM $$' 2>/dev/null || rg=$?
    assert_eq "$rn" 143 "native exit status"
    assert_eq "$rg" "$rn" "gvisor exit status"
    expect_row agent=sn op=exit "target=killed by signal 15 (Terminated)"
    expect_row agent=sg op=exit "target=killed by signal 15 (Terminated)"
    # An agent's own exit 143 stays an exit, not a signal.
    re=0
    guard --isolation gvisor --name se -- /bin/sh -c 'exit 143' 2>/dev/null || re=$?
    assert_eq "$re" 143 "gvisor exit 143"
    expect_row agent=se op=exit "target=exited 143"
}

test_gvisor_output_to_a_regular_file_keeps_sbx_guards_own_lines() {
    need_runsc
    guard --isolation gvisor --name go -- /bin/sh -c 'echo from-agent' >"$T/both" 2>&1
    assert_contains "$(cat "$T/both")" "sbx-guard: agent go"
    assert_contains "$(cat "$T/both")" "from-agent"
}

test_gvisor_timeout_ends_the_sandbox() {
    need_runsc
    cat >"$T/to.yaml" <<'YAML'
version: 1
name: to
limits:
  timeout: 1500ms
YAML
    rc=0
    guard --isolation gvisor --policy "$T/to.yaml" -- /bin/sleep 30 2>/dev/null || rc=$?
    assert_eq "$rc" 137
    assert_eq "$(pgrep -f "$SBX_RUNTIME_DIR/gvisor" || true)" "" "runsc processes left"
}

test_gvisor_guarded_calls_inside_are_recorded() {
    need_runsc
    echo secret >.env
    out=$(guard --isolation gvisor --name gr -- /bin/sh -c 'cat .env; echo done' 2>&1) || true
    assert_contains "$out" "done"
    assert_not_contains "$out" "secret"
    expect_row agent=gr op=open-read decision=deny layer=guard "target~/.env"
    expect_row agent=gr op=exec decision=allow layer=guard "target=/usr/bin/cat"
    expect_row agent=gr op=exit
}

test_gvisor_many_processes_record_through_one_relayed_ring() {
    need_runsc
    echo secret >.env
    # 40 processes, each denied once: every denial reaches the store.
    guard --isolation gvisor --name gm -- /bin/sh -c \
        'for i in $(seq 40); do cat .env 2>/dev/null & done; wait' || true
    n=$(rows --agent gm | grep '"op": *"open-read"' | grep -c '/\.env"' || true)
    assert_eq "$n" 40 "recorded denials"
}

test_gvisor_sandbox_holds_no_token_and_reaches_no_sbx_socket() {
    need_runsc
    out=$(guard --isolation gvisor -- /bin/sh -c 'echo "token=$SBX_AGENT_TOKEN"')
    assert_eq "$out" "token=relayed"
    out=$(gv -- "$ESC" unix "$SBX_RUNTIME_DIR/events.sock") || true
    assert_contains "$out" "fail"
    out=$(gv -- "$ESC" unix "$SBX_RUNTIME_DIR/control.sock") || true
    assert_contains "$out" "fail"
}

test_gvisor_start_row_layers_match_what_a_probe_finds_inside() {
    need_runsc
    # The probe: gVisor's kernel answers uname, Landlock is ENOSYS, a
    # seccomp filter with a listener (the supervisor's) is EINVAL, sbx's
    # seccomp list is in force (unshare of a user namespace, which gVisor
    # implements, is EPERM), and the policy's open_files limit is in force.
    cat >probe.py <<'PY'
import ctypes, errno, os, resource, struct
libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(444, None, 0, 1)          # landlock_create_ruleset(VERSION)
print("landlock", "ENOSYS" if r < 0 and ctypes.get_errno() == errno.ENOSYS else "abi%d" % r)
r = libc.syscall(272, 0x10000000)           # unshare(CLONE_NEWUSER)
print("unshare", errno.errorcode.get(ctypes.get_errno(), "?") if r < 0 else "ok")
libc.prctl(38, 1, 0, 0, 0)                  # PR_SET_NO_NEW_PRIVS
insn = struct.pack("HBBI", 0x06, 0, 0, 0x7fff0000)   # BPF_RET ALLOW
buf = ctypes.create_string_buffer(insn)
prog = struct.pack("HxxxxxxQ", 1, ctypes.addressof(buf))
pbuf = ctypes.create_string_buffer(prog)
r = libc.syscall(317, 1, 8, pbuf)           # seccomp(SET_MODE_FILTER, NEW_LISTENER)
print("seccomp-notify", errno.errorcode.get(ctypes.get_errno(), "?") if r < 0 else "ok")
print("release", os.uname().release)
print("nofile", resource.getrlimit(resource.RLIMIT_NOFILE)[0])
PY
    out=$(guard --isolation gvisor --name gp -- python3 probe.py)
    assert_contains "$out" "landlock ENOSYS"
    assert_contains "$out" "seccomp-notify EINVAL"
    assert_contains "$out" "unshare EPERM"
    assert_contains "$out" "release 4.4.0"
    assert_contains "$out" "nofile 4096"
    rows --agent gp >"$T/r.json"
    layers=$(python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("op") == "start" and "layers " in r.get("reason", ""):
        print(r["reason"].split("layers ", 1)[1].split(";")[0])
' "$T/r.json" | tail -n 1)
    assert_contains "$layers" "gvisor"
    assert_contains "$layers" "guard"
    assert_contains "$layers" "rlimits"
    assert_not_contains "$layers" "landlock"
    assert_not_contains "$layers" "supervisor"
    # The seccomp list (from the bundle), not the supervisor's filter.
    assert_contains "$layers" "seccomp,"
}

test_gvisor_missing_runsc_starts_nothing() {
    # No need_runsc: this is the machine without it.
    rc=0
    out=$(SBX_RUNSC=/nonexistent/runsc guard --isolation gvisor -- /bin/sh -c 'touch ran' 2>&1) \
        || rc=$?
    assert_eq "$rc" 125
    assert_contains "$out" "runsc is not installed"
    assert_file_absent ./ran
    expect_row op=exit "target~not started: gvisor: runsc is not installed"
}

test_a_policy_that_names_gvisor_runs_there_and_refuses_any_other_isolation() {
    need_runsc
    cat >"$T/gv.yaml" <<'YAML'
version: 1
name: gv
isolation: gvisor
YAML
    guard --policy "$T/gv.yaml" -- /bin/true
    expect_row op=start "reason~isolation gvisor: layers guard,gvisor"
    rc=0
    out=$(guard --policy "$T/gv.yaml" --isolation none -- /bin/sh -c 'touch ran' 2>&1) || rc=$?
    assert_eq "$rc" 125
    assert_contains "$out" "requires isolation gvisor"
    assert_file_absent ./ran
}

test_auto_never_picks_gvisor() {
    guard -- /bin/true
    rows >"$T/r.json"
    expect_row op=start "reason~isolation auto: layers"
    assert_not_contains "$(grep -o '"reason":"[^"]*"' "$T/r.json")" "gvisor"
    out=$(guard --print-isolation -- true)
    assert_not_contains "$out" "runsc"
}

test_gvisor_print_isolation_shows_the_runsc_command_line() {
    out=$(guard --isolation gvisor --print-isolation -- ./agent.py)
    assert_contains "$out" "--rootless"
    assert_contains "$out" " run --bundle="
    assert_contains "$out" '"args": ["./agent.py"]'
    assert_contains "$out" '"readonly": true'
    assert_contains "$out" "not available under gVisor: Landlock"
}

test_gvisor_a_read_only_workspace_under_tmp_is_there_and_stays_read_only() {
    need_runsc
    # The sandbox's /tmp is its own: a workspace under the host's /tmp
    # came back only as a write root, so under a policy that writes
    # nothing there runsc could not find its working directory and
    # nothing started.
    cat >"$T/ro.yaml" <<'YAML'
version: 1
name: ro
files:
  write:
    allow: [/dev/null]
    deny: []
YAML
    d=$(mktemp -d /tmp/sbx-gvws.XXXXXX)
    cp "$PROGS/static_escape" "$d/esc"
    echo inside >"$d/f.txt"
    out=$(cd "$d" && guard --isolation gvisor --policy "$T/ro.yaml" -- ./esc read f.txt 2>"$T/err") \
        || true
    err=$(cat "$T/err")
    out2=$(cd "$d" && guard --isolation gvisor --policy "$T/ro.yaml" -- ./esc write new.txt \
        2>/dev/null) || true
    made=no
    [ -e "$d/new.txt" ] && made=yes
    rm -rf "$d"
    assert_eq "$out" "ok" "a read in the workspace ($err)"
    assert_contains "$out2" "fail" "a write in the read-only workspace"
    assert_eq "$made" "no" "the file written"
}

test_gvisor_print_isolation_names_the_network_the_run_really_gets() {
    # --print-isolation printed --network=none for every policy the native
    # supervisor can serve, while the run took the host's network whenever
    # a rule names an outside address.  Each policy here: the runsc command
    # line printed against the one sbx-guard runs (a runsc that records its
    # arguments and fails).
    no_network_policy
    cat >"$T/outside.yaml" <<'YAML'
version: 1
name: outside
network:
  connect:
    allow: ["*:443"]
YAML
    printf '#!/bin/sh\nprintf "%%s\\n" "$*" >"%s"\nexit 1\n' "$T/runsc.args" >"$T/fake-runsc"
    chmod +x "$T/fake-runsc"
    for p in nonet outside; do
        printed=$(guard --isolation gvisor --policy "$T/$p.yaml" --print-isolation -- true \
            | grep -o -- '--network=[a-z]*' | head -n 1)
        rm -f "$T/runsc.args"
        SBX_RUNSC="$T/fake-runsc" guard --isolation gvisor --policy "$T/$p.yaml" -- true \
            >/dev/null 2>&1 || true
        [ -f "$T/runsc.args" ] || fail "$p: sbx-guard did not run the fake runsc"
        ran=$(grep -o -- '--network=[a-z]*' "$T/runsc.args")
        assert_eq "$printed" "$ran" "$p: the printed network"
    done
    assert_eq "$ran" "--network=host" "outside: the network"
}

test_gvisor_bundle_is_valid_json_with_the_deny_cover_and_sbx_hidden() {
    echo secret >.env
    guard --isolation gvisor --print-isolation -- /bin/true >"$T/p.txt"
    python3 - "$T/p.txt" "$WS/.env" "$SBX_RUNTIME_DIR" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
start = text.index("config.json (the OCI bundle):\n") + len("config.json (the OCI bundle):\n")
end = text.index("\nnot available under gVisor")
c = json.loads(text[start:end])
m = {x["destination"]: x for x in c["mounts"]}
# Each file or directory mounted once (a bind is a gofer connection, a
# few ms of start-up each).
d = [x["destination"] for x in c["mounts"]]
assert len(d) == len(set(d)), sorted(x for x in d if d.count(x) > 1)
env = m[sys.argv[2]]
assert env["type"] == "bind" and env["source"].endswith("/empty") and "ro" in env["options"], env
rt = sys.argv[3]
assert (rt in m and m[rt]["type"] == "tmpfs") or \
    (rt.startswith("/tmp/") and m["/tmp"]["type"] == "tmpfs"), "runtime dir not hidden"
assert c["root"] == {"path": "/", "readonly": True}, c["root"]
assert c["process"]["noNewPrivileges"] is True
assert all(v == [] for v in c["process"]["capabilities"].values())
assert not any(e.startswith("SBX_AGENT_TOKEN=") and e != "SBX_AGENT_TOKEN=relayed"
               for e in c["process"]["env"])
PY
}

test_gvisor_bundle_of_a_run_mounts_each_file_once() {
    need_runsc
    # The store's directory and the runtime directory both under /tmp, one
    # in the other: two hidden directories above the guard's files.  Each
    # of those files is bound back once (a bind is a gofer connection: a
    # few ms of start-up each).  runsc is a wrapper that keeps config.json.
    d=$(mktemp -d /tmp/sbxd.XXXXXX)
    cat >"$T/runsc" <<SH
#!/bin/sh
for a; do case \$a in --bundle=*) cp "\${a#--bundle=}/config.json" "$T/config.json";; esac; done
exec $(command -v runsc) "\$@"
SH
    chmod +x "$T/runsc"
    rc=0
    (
        export SBX_RUNTIME_DIR="$d/run" SBX_AUDIT_DB="$d/audit.db"
        SBX_RUNSC="$T/runsc" guard --isolation gvisor -- /bin/true 2>/dev/null || exit $?
        stop_daemon
    ) || rc=$?
    assert_eq "$rc" 0 "sbx-guard"
    python3 - "$T/config.json" "$d/run" <<'PY' || { rm -rf "$d"; fail "a destination mounted twice"; }
import json, sys
d = [x["destination"] for x in json.load(open(sys.argv[1]))["mounts"]]
kept = [x for x in d if x.startswith(sys.argv[2] + "/agents/")]
assert len(kept) >= 3, d                        # the policy, its image, the ring
assert len(d) == len(set(d)), sorted(x for x in d if d.count(x) > 1)
PY
    rm -rf "$d"
}

test_gvisor_posix_spawn_and_make_run_inside() {
    need_runsc
    # glibc's posix_spawn tries clone3 and falls back to clone only on
    # ENOSYS; runsc 20221219 answers every rule of the bundle's list with
    # EPERM, so clone3 is left to gVisor's own ENOSYS.  GNU make spawns its
    # recipes with posix_spawn.
    out=$(guard --isolation gvisor -- /usr/bin/python3 -c \
        'import os; p = os.posix_spawn("/bin/true", ["true"], {}); print(os.waitpid(p, 0)[1])')
    assert_eq "$out" "0"
    printf 'all:\n\techo made\n' >Makefile
    out=$(guard --isolation gvisor -- make -s)
    assert_eq "$out" "made"
}

test_gvisor_refuses_the_calls_of_sbx_seccomp_list_that_gvisor_implements() {
    need_runsc
    # gVisor serves io_uring and user namespaces itself; sbx's list, which
    # the Sentry enforces from the bundle (--oci-seccomp), refuses them.
    out=$(gv -- "$ESC" io_uring) || true
    assert_eq "$out" "fail EPERM"
    out=$(gv -- "$ESC" unshare) || true
    assert_eq "$out" "fail EPERM"
    out=$(gv -- "$ESC" read /etc/hostname)
    assert_eq "$out" "ok"
    expect_row op=start "reason~seccomp"
}

run_tests
