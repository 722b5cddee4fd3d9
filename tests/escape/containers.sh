#!/bin/sh
# --isolation podman | docker: the agent in a container, the policy in the
# engine's flags.  Where the engine cannot run containers, sbx-guard must
# fail with the engine's own reason and exit 125, having started nothing;
# the tests that need a working engine skip with that reason printed.
. "$(dirname "$0")/../lib.sh"

IMAGE=${SBX_TEST_IMAGE:-debian:bookworm-slim}

# engine_reason ENGINE: prints why ENGINE cannot run containers here (as
# sbx-guard should say it), or nothing when it can.
engine_reason() {
    e=$1
    p=""
    for d in /usr/bin /usr/local/bin /bin; do [ -x "$d/$e" ] && { p="$d/$e"; break; }; done
    if [ -z "$p" ]; then echo "$e is not installed"; return; fi
    if ! out=$("$p" info 2>&1 >/dev/null); then
        printf '%s\n' "$out" | sed '/^ *$/d' | tail -n 1
        return
    fi
    if ! out=$("$p" run --rm --network=none "$IMAGE" true 2>&1); then
        printf '%s\n' "$out" | sed '/^ *$/d' | tail -n 1
    fi
}

need_engine() {
    why=$(engine_reason "$1")
    [ -z "$why" ] || skip "$1 cannot run containers here: $why"
}

where_it_cannot_run() {
    e=$1
    why=$(engine_reason "$e")
    [ -n "$why" ] || skip "$e runs containers here: the failure path is not reachable"
    rc=0
    out=$(guard --isolation "$e" --image "$IMAGE" -- /bin/sh -c 'touch ran' 2>&1) || rc=$?
    assert_eq "$rc" 125
    assert_contains "$out" "cannot start the agent: $e"
    # sbx-guard's probe is `info`; a run failure after it is the engine's
    # own message, printed by the engine.
    case "$why" in
        *"is not installed"*) assert_contains "$out" "$why" ;;
        *) assert_contains "$out" "$e" ;;
    esac
    assert_file_absent ./ran
    expect_row op=exit "target~not started: $e"
}

test_podman_where_it_cannot_run_fails_with_the_engines_reason_and_125() {
    where_it_cannot_run podman
}

test_docker_where_it_cannot_run_fails_with_the_engines_reason_and_125() {
    where_it_cannot_run docker
}

test_auto_never_picks_a_container_engine() {
    guard -- /bin/true
    expect_row op=start "reason~isolation auto: layers"
    rows >"$T/r.json"
    assert_not_contains "$(grep -o '"reason":"[^"]*"' "$T/r.json")" "podman"
    assert_not_contains "$(grep -o '"reason":"[^"]*"' "$T/r.json")" "docker"
}

test_print_isolation_shows_the_engine_command_line() {
    out=$(guard --isolation podman --image "$IMAGE" --print-isolation -- ./agent.py)
    assert_contains "$out" "run --rm"
    assert_contains "$out" "--cap-drop=ALL"
    assert_contains "$out" "--security-opt=no-new-privileges"
    assert_contains "$out" "$IMAGE ./agent.py"
}

test_print_isolation_names_the_network_the_engine_gets() {
    # As iso_spawn_container decides: none when every rule is loopback or
    # unix:, the host's when a rule names an outside address.
    printf 'version: 1\nname: nonet\nnetwork:\n  connect:\n    allow: []\n' >"$T/nonet.yaml"
    printf 'version: 1\nname: out\nnetwork:\n  connect:\n    allow: ["*:443"]\n' >"$T/out.yaml"
    out=$(guard --isolation podman --image "$IMAGE" --policy "$T/nonet.yaml" --print-isolation -- true)
    assert_contains "$out" " --network=none "
    out=$(guard --isolation docker --image "$IMAGE" --policy "$T/out.yaml" --print-isolation -- true)
    assert_contains "$out" " --network=host "
    assert_not_contains "$out" " --network=none "
}

test_the_workspace_is_bound_into_the_container_writable_or_read_only_as_the_policy_says() {
    # The image has no copy of the workspace: it was bound only as a write
    # root outside /tmp, so a read-only policy, or a workspace under /tmp,
    # ran the agent in an empty directory the engine made.
    printf 'version: 1\nname: ro\nfiles:\n  write:\n    allow: [/dev/null]\n    deny: []\n' >"$T/ro.yaml"
    printf 'version: 1\nname: rw\nfiles:\n  write:\n    allow: ["./**"]\n    deny: []\n' >"$T/rw.yaml"
    d=$(mktemp -d /tmp/sbx-ctws.XXXXXX)
    for ws in "$WS" "$d"; do
        ro=$(cd "$ws" && guard --isolation podman --image "$IMAGE" --policy "$T/ro.yaml" \
            --print-isolation -- true)
        rw=$(cd "$ws" && guard --isolation docker --image "$IMAGE" --policy "$T/rw.yaml" \
            --print-isolation -- true)
        assert_contains "$ro" " --volume=$ws:$ws:ro " "$ws, read-only policy"
        assert_contains "$rw" " --volume=$ws:$ws " "$ws, writable policy"
        assert_not_contains "$rw" " --volume=$ws:$ws:ro " "$ws, writable policy"
    done
    rm -rf "$d"
}

test_the_engines_get_sbx_seccomp_list_as_their_profile() {
    out=$(guard --isolation docker --image "$IMAGE" --print-isolation -- ./agent.py)
    assert_contains "$out" "--security-opt=seccomp=$SBX_RUNTIME_DIR/seccomp.XXXXXX.json"
    # The profile printed is the engines' JSON: allow by default, sbx's list
    # refused with its errno (clone3 ENOSYS so that runtimes fall back to
    # clone, whose namespace flags are refused).
    printf '%s\n' "$out" | /usr/bin/python3 -c '
import json, sys
text = sys.stdin.read()
start = text.index("{\"defaultAction\"")
prof, _ = json.JSONDecoder().raw_decode(text[start:])
by = {}
for r in prof["syscalls"]:
    for n in r["names"]:
        by.setdefault(n, []).append(r)
ok = (prof["defaultAction"] == "SCMP_ACT_ALLOW"
      and all(by[n][0]["errnoRet"] == 1 and "args" not in by[n][0]
              for n in ("ptrace", "mount", "unshare", "bpf", "io_uring_setup", "keyctl"))
      and by["clone3"][0]["errnoRet"] == 38
      and any(a["op"] == "SCMP_CMP_MASKED_EQ" and a["value"] == 0x10000000
              for r in by["clone"] for a in r["args"])
      and "read" not in by and "execve" not in by)
sys.exit(0 if ok else 1)' || fail "the printed profile is not sbx's list as an engine profile"
    assert_not_contains "$out" "engine's default"
}

in_engine() {
    e=$1
    need_engine "$e"
    echo secret >.env
    cp "$PROGS/static_escape" ./esc
    out=$(guard --isolation "$e" --image "$IMAGE" -- ./esc read .env) || true
    assert_eq "$out" "fail EACCES"
    out=$(guard --isolation "$e" --image "$IMAGE" --name "c$e" -- /bin/sh -c 'cat .env; echo done' 2>&1) \
        || true
    assert_contains "$out" "done"
    expect_row agent="c$e" op=open-read decision=deny layer=guard "target~/.env"
    # The engine gives the exit code only: a death by SIGSEGV is 139, and
    # the row says that it cannot tell it from an `exit 139`.
    rs=0
    guard --isolation "$e" --image "$IMAGE" --name "s$e" -- /bin/sh -c 'kill -SEGV $$' \
        >/dev/null 2>&1 || rs=$?
    assert_eq "$rs" 139
    expect_row agent="s$e" op=exit "target~exited 139 (or killed by signal 11"
    rc=0
    guard --isolation "$e" --image "$IMAGE" --name "k$e" -- /bin/sleep 60 >/dev/null 2>&1 &
    gpid=$!
    sleep 3
    sbx-kill "k$e"
    wait $gpid || rc=$?
    assert_eq "$rc" 137
    assert_eq "$("$e" ps -q --filter "name=sbx-" 2>/dev/null || true)" "" "containers left"
    assert_eq "$(ls "$SBX_RUNTIME_DIR"/seccomp.*.json 2>/dev/null || true)" "" "seccomp profiles left"
}

test_podman_runs_the_agent_guarded_recorded_and_killable() {
    in_engine podman
}

test_docker_runs_the_agent_guarded_recorded_and_killable() {
    in_engine docker
}

run_tests
