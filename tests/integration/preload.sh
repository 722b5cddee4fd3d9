#!/bin/sh
# The guard (libsbx-preload.so) inside real programs: each test writes a
# policy, runs programs with the preload and the SBX_* variables sbx-guard
# would hand down, and checks what they could and could not do.
. "$(dirname "$0")/../lib.sh"

LIB="$SBX_BUILD/lib/libsbx-preload.so"
CALL="$PROGS/agent_preload_call"
# Under `make sanitize` the test programs carry ASan, which wants to be the
# first library; the preload must come first (it is what is being tested).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"

# A policy for the tests: the shipped defaults, plus what the test adds.
policy() {
    {
        echo "version: 1"
        echo "name: preload-test"
        cat
    } > "$T/policy.yaml"
}

# guarded CMD...: runs CMD under the preload as agent "t", the way sbx-guard
# would start it (preload_agent registers the agent with a real sbx-auditd
# and hands the run id and token down; env puts the preload in place so that
# preload_agent itself is not guarded).
guarded() {
    "$PROGS/preload_agent" t env LD_PRELOAD="$LIB" SBX_PRELOAD="$LIB" \
        SBX_POLICY_FILE="$T/policy.yaml" SBX_POLICY_ORIGIN=policy.yaml SBX_WORKSPACE="$WS" \
        "$@"
}

# row_with OP DECISION TEXT: the first row of agent t's with OP and
# DECISION containing TEXT.
row_with() {
    rows --agent t | grep "\"op\":\"$1\"" | grep "\"decision\":\"$2\"" | grep -F -- "$3" | head -n 1
}

test_cat_python_and_sh_cannot_read_dotenv() {
    policy </dev/null; secret TOPSECRET
    out=$(guarded cat .env 2>&1) && fail "cat succeeded"
    assert_not_contains "$out" TOPSECRET
    assert_contains "$out" "Permission denied"
    out=$(guarded python3 -c 'print(open(".env").read())' 2>&1) && fail "python3 succeeded"
    assert_not_contains "$out" TOPSECRET
    assert_contains "$out" PermissionError
    out=$(guarded sh -c 'cat < .env' 2>&1) && fail "sh succeeded"
    assert_not_contains "$out" TOPSECRET
    out=$(guarded sh -c 'cat ./sub/../.env' 2>&1) || true
    assert_not_contains "$out" TOPSECRET
    r=$(row_with open-read deny "\"target\":\"$WS/.env\"")
    assert_contains "$r" '"rule":"files.read.deny \"**/.env\" default.yaml:'
    assert_contains "$r" '"layer":"guard"'
    assert_contains "$r" '"errno":13'
    # Allowed calls are recorded too.
    assert_contains "$(rows --agent t)" '"target":"/usr/bin/cat","target2":"cat ./sub/../.env","decision":"allow"'
}

test_allowed_reads_and_writes_work() {
    policy </dev/null
    echo hello > "$WS/a.txt"
    assert_eq "$(guarded cat a.txt)" hello
    guarded sh -c 'echo written > b.txt; mkdir -p d/e; mv b.txt d/e/c.txt; cp d/e/c.txt f.txt; rm -r d'
    assert_eq "$(cat "$WS/f.txt")" written
    assert_file_absent "$WS/d"
}

test_write_outside_workspace_creates_nothing() {
    # The defaults allow /tmp, where the tests run: the workspace only here.
    policy <<'Y'
files:
  write:
    allow: ["**"]
Y
    out=$(guarded sh -c "echo x > $T/outside.txt" 2>&1) && fail "write succeeded: $out"
    assert_file_absent "$T/outside.txt"
    assert_eq "$(guarded "$CALL" open_write "$T/o2")" "err EACCES"
    assert_eq "$(guarded "$CALL" creat "$T/o3")" "err EACCES"
    assert_eq "$(guarded "$CALL" fopen "$T/o4" w)" "err EACCES"
    assert_eq "$(guarded "$CALL" mkdir "$T/o5")" "err EACCES"
    guarded python3 -c "open('$T/o6', 'w')" 2>/dev/null && fail "python3 wrote"
    for f in o2 o3 o4 o5 o6; do assert_file_absent "$T/$f"; done
}

# (mv also checks that a guarded call made by another library's constructor
# before ours, libselinux reading /proc/filesystems, leaves the guard on.)
test_rm_mv_ln_chmod_on_protected_paths_denied() {
    policy <<'Y'
files:
  write:
    deny: ["protected/**"]
Y
    mkdir -p "$WS/protected" && echo keep > "$WS/protected/f"
    mode=$(stat -c %a "$WS/protected/f")
    guarded rm -f protected/f 2>/dev/null && fail "rm succeeded"
    guarded mv protected/f moved 2>/dev/null && fail "mv succeeded"
    guarded mv "$WS/protected" gone 2>/dev/null && fail "mv dir succeeded"
    guarded ln -s /etc/passwd protected/l 2>/dev/null && fail "ln -s succeeded"
    guarded chmod 777 protected/f 2>/dev/null && fail "chmod succeeded"
    guarded truncate -s 0 protected/f 2>/dev/null && fail "truncate succeeded"
    assert_eq "$(cat "$WS/protected/f")" keep
    assert_file_absent "$WS/moved"
    assert_file_absent "$WS/protected/l"
    assert_eq "$(stat -c %a "$WS/protected/f")" "$mode" "mode after chmod"
}

test_moving_or_linking_a_secret_is_denied() {
    policy </dev/null; secret TOPSECRET
    assert_eq "$(guarded "$CALL" rename .env plain)" "err EACCES"
    assert_eq "$(guarded "$CALL" link .env plain)" "err EACCES"
    assert_file_absent "$WS/plain"
}

test_each_file_entry_point_is_guarded() {
    policy </dev/null; secret TOPSECRET
    for op in open open_rdwr sys_open sys_openat2 opendir; do
        assert_eq "$(guarded "$CALL" $op .env)" "err EACCES" "$op"
    done
    assert_eq "$(guarded "$CALL" openat "$WS" .env)" "err EACCES" openat
    assert_eq "$(guarded "$CALL" fopen .env r)" "err EACCES" fopen
    assert_eq "$(guarded "$CALL" sys_getpid x)" "ok 0" "syscall() passes other numbers"
}

test_symlink_to_a_secret_is_denied() {
    policy </dev/null; secret TOPSECRET
    ln -s .env "$WS/innocent"
    mkdir -p "$WS/dir" && ln -s .. "$WS/dir/up"
    out=$(guarded cat innocent 2>&1) && fail "cat through a symlink succeeded"
    assert_not_contains "$out" TOPSECRET
    out=$(guarded cat dir/up/.env 2>&1) && fail "cat through a dir symlink succeeded"
    assert_not_contains "$out" TOPSECRET
}

test_reopen_through_proc_self_fd_is_judged() {
    policy </dev/null; secret TOPSECRET
    # The outer shell opens the secret; the guarded program only has the fd.
    out=$(guarded cat /proc/self/fd/3 3<"$WS/.env" 2>&1) && fail "reopen succeeded"
    assert_not_contains "$out" TOPSECRET
    echo fine > "$WS/ok.txt"
    assert_eq "$(guarded cat /proc/self/fd/3 3<"$WS/ok.txt")" fine
}

# files.exec.deny for a program every machine has.
exec_policy() {
    policy <<'Y'
files:
  exec:
    deny: ["/usr/bin/id"]
commands:
  deny:
    - match: 'forbidden-word'
      reason: test
Y
}

test_a_denied_exec_leaves_the_caller_running() {
    exec_policy
    out=$(guarded "$CALL" execve /usr/bin/id id)
    assert_eq "$out" "err EACCES"
    out=$(guarded "$CALL" execvp id id)
    assert_eq "$out" "err EACCES"
    out=$(guarded sh -c 'id; echo "still here $?"' 2>/dev/null)
    assert_contains "$out" "still here 126"
    out=$(guarded sh -c '/bin/echo forbidden-word; echo "still here $?"' 2>/dev/null)
    assert_eq "$out" "still here 126"
}

test_execvp_of_a_script_without_hashbang_and_an_empty_argv_runs_it_with_sh() {
    # execvp's ENOEXEC fallback runs "/bin/sh PROG ARGV[1..]": with an empty
    # ARGV there is no argv[n] to copy the closing NULL from.
    policy </dev/null
    mkdir -p "$WS/bin"
    printf 'echo "sh ran it with $# arguments"\n' > "$WS/bin/no-hashbang"
    chmod +x "$WS/bin/no-hashbang"
    out=$(PATH="$WS/bin:$PATH" guarded "$CALL" execvp no-hashbang 2>&1)
    assert_eq "$out" "sh ran it with 0 arguments"
}

test_syscall_execve_and_fexecve_are_judged() {
    exec_policy
    assert_eq "$(guarded "$CALL" sys_execve /usr/bin/id id)" "err EACCES"
    assert_eq "$(guarded "$CALL" fexecve /usr/bin/id id)" "err EACCES"
    assert_eq "$(guarded "$CALL" sys_execve /bin/echo echo forbidden-word)" "err EACCES"
    assert_eq "$(guarded "$CALL" fexecve /bin/echo echo fine)" "fine"
}

test_posix_spawn_system_popen_are_judged() {
    exec_policy
    assert_eq "$(guarded "$CALL" posix_spawn /bin/echo echo forbidden-word)" "err EACCES"
    assert_eq "$(guarded "$CALL" posix_spawnp echo echo forbidden-word)" "err EACCES"
    assert_eq "$(guarded "$CALL" posix_spawnp id id)" "err EACCES"
    assert_eq "$(guarded "$CALL" system 'echo forbidden-word')" "err EACCES"
    assert_eq "$(guarded "$CALL" popen 'echo forbidden-word')" "err EACCES"
    assert_eq "$(guarded "$CALL" posix_spawnp sh sh -c 'exit 4')" "ok 4"
    assert_eq "$(guarded "$CALL" system 'exit 5')" "ok 5"
    out=$(guarded "$CALL" popen 'echo fine')
    assert_contains "$out" fine
}

test_dropping_the_preload_env_does_not_escape() {
    policy </dev/null; secret TOPSECRET
    out=$(guarded "$CALL" exec_unset /bin/cat cat .env 2>&1) || true
    assert_not_contains "$out" TOPSECRET
    out=$(guarded "$CALL" exec_noenv /bin/cat cat "$WS/.env" 2>&1) || true
    assert_not_contains "$out" TOPSECRET
    out=$(guarded "$CALL" exec_unset /bin/sh sh -c 'echo "$LD_PRELOAD $SBX_POLICY_FILE"')
    assert_contains "$out" "$LIB $T/policy.yaml"
    r=$(row_with exec allow '"flags":2')
    assert_contains "$r" "restored"
    out=$(guarded env -u LD_PRELOAD sh -c 'cat .env' 2>&1) || true
    assert_not_contains "$out" TOPSECRET
    out=$(guarded env LD_PRELOAD= SBX_POLICY_FILE=/dev/null sh -c 'cat .env' 2>&1) || true
    assert_not_contains "$out" TOPSECRET
}

# A listener outside the guard on a free loopback port, written to $T/port.
listen() {
    python3 - "$T/port" >/dev/null 2>&1 <<'PY' &
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1]))
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
s.settimeout(20)
try:
    while True:
        c, _ = s.accept(); c.close()
except Exception:
    pass
PY
    i=0; while [ ! -f "$T/port" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
}

test_connect_judged_by_address_and_by_name() {
    listen; port=$(cat "$T/port")
    policy <<Y
network:
  connect:
    allow: ["localhost:$port"]
    deny: ["127.0.0.1:$port"]
Y
    # Judged by the address: the deny rule wins.
    assert_eq "$(guarded "$CALL" connect 127.0.0.1 "$port")" "err EACCES"
    policy <<Y
network:
  connect:
    allow: ["localhost:$port"]
Y
    # Resolved from "localhost": the name rule allows it.
    assert_eq "$(guarded "$CALL" resolve_connect localhost "$port")" "ok 0"
    r=$(row_with connect allow "\"target\":\"127.0.0.1:$port\"")
    assert_contains "$r" '"target2":"localhost"'
    # By bare address, without resolving first: "localhost" is loopback
    # whatever the process resolved before (issue 15), so the same answer.
    assert_eq "$(guarded "$CALL" connect 127.0.0.1 "$port")" "ok 0"
    # Another port of the loopback is no rule's.
    assert_eq "$(guarded "$CALL" connect 127.0.0.1 $((port + 1)))" "err EACCES"
    policy <<Y
network:
  connect:
    allow: ["127.0.0.1:$port"]
Y
    assert_eq "$(guarded "$CALL" connect 127.0.0.1 "$port")" "ok 0"
    assert_eq "$(guarded "$CALL" sendto 127.0.0.2 9)" "err EACCES"
    kill %1 2>/dev/null || true
}

test_unix_connect_and_bind_follow_the_policy() {
    # Socket paths are short (108 bytes): not under the test's directory.
    U=$(mktemp -d /tmp/sbxu.XXXXXX)
    policy <<Y
network:
  connect:
    allow: ["unix:$U/*"]
    deny: ["unix:$U/denied.sock"]
  bind:
    allow: ["127.0.0.1:40000-40100"]
Y
    assert_eq "$(guarded "$CALL" unix_connect "$U/denied.sock")" "err EACCES"
    # No such socket: the kernel refuses it (ENOENT), not the guard.
    out=$(guarded "$CALL" unix_connect "$U/ok.sock") || true
    assert_eq "$out" "err ENOENT"
    assert_eq "$(guarded "$CALL" unix_connect /run/docker.sock)" "err EACCES"
    assert_eq "$(guarded "$CALL" bind 127.0.0.1 40050)" "ok 0"
    assert_eq "$(guarded "$CALL" bind 0.0.0.0 40050)" "err EACCES"
    assert_eq "$(guarded "$CALL" bind 127.0.0.1 22)" "err EACCES"
    rm -rf "$U"
}

test_truncate_above_max_write_fails_efbig() {
    policy <<'Y'
files:
  max_write_bytes: 1KiB
Y
    echo x > "$WS/f"
    assert_eq "$(guarded "$CALL" truncate f 4096)" "err EFBIG"
    assert_eq "$(guarded "$CALL" ftruncate f 4096)" "err EFBIG"
    assert_eq "$(guarded "$CALL" truncate f 100)" "ok 0"
    assert_eq "$(stat -c %s "$WS/f")" 100
}

test_notify_prints_one_line_per_denial() {
    policy </dev/null; secret TOPSECRET
    out=$(SBX_NOTIFY=1 guarded cat .env 2>&1) || true
    assert_contains "$out" 'sbx: denied open-read .env (files.read.deny "**/.env", default.yaml:'
}

test_audit_mode_allows_and_records_audit() {
    policy <<'Y'
mode: audit
Y
    secret TOPSECRET
    out=$(SBX_NOTIFY=1 guarded cat .env 2>&1)
    assert_contains "$out" TOPSECRET
    assert_contains "$out" "sbx: audit: would deny open-read .env"
    r=$(row_with open-read allow "\"target\":\"$WS/.env\"")
    assert_contains "$r" '"reason":"audit: '
    assert_contains "$r" '"flags":1'
}

test_unloadable_policy_denies_everything() {
    echo "version: 2" > "$T/policy.yaml"
    echo hi > "$WS/a"
    out=$(guarded "$CALL" open a 2>&1) || true
    assert_contains "$out" "err EACCES"
    assert_contains "$out" "policy could not be loaded"
    assert_contains "$(row_with policy-error deny '"target":"policy.yaml"')" "version"
    assert_contains "$(row_with open-read deny "\"target\":\"$WS/a\"")" "could not be loaded"
}

test_no_audit_channel_fails_closed() {
    policy </dev/null
    echo hi > "$WS/a"
    out=$(env LD_PRELOAD="$LIB" SBX_POLICY_FILE="$T/policy.yaml" SBX_WORKSPACE="$WS" \
          SBX_AGENT_ID=nobody SBX_AGENT_TOKEN=nothing "$CALL" open a 2>&1) || true
    assert_contains "$out" "err EACCES"
    assert_contains "$out" "audit channel is unavailable"
}

test_a_refused_ring_fails_closed_even_without_waiting_for_the_answer() {
    # SBX_RING_ASYNC (what sbx-guard hands down) lets a process go on while
    # its ring is being registered; a wrong token is refused all the same,
    # and from then on every guarded call fails closed, and nothing of it
    # is stored.
    policy </dev/null
    echo hi > "$WS/a"
    out=$("$PROGS/preload_agent" t env LD_PRELOAD="$LIB" SBX_POLICY_FILE="$T/policy.yaml" \
          SBX_WORKSPACE="$WS" SBX_RING_ASYNC=1 SBX_AGENT_TOKEN=not-the-token \
          "$CALL" open_until_denied a 2>&1) || true
    assert_contains "$out" "err EACCES"
    assert_contains "$out" "refused this process's event ring"
    assert_not_contains "$(rows --agent t)" '"target":"'"$WS/a"'"'
}

test_soft_kill_makes_guarded_calls_fail_eperm() {
    policy </dev/null
    echo data > "$WS/ok.txt"
    guarded python3 -c '
import os, time
print(open("ok.txt").read().strip(), flush=True)
while not os.path.exists("go"):
    time.sleep(0.02)
try:
    open("ok.txt")
    print("opened")
except OSError as e:
    print("errno", e.errno)
' > "$T/out" 2>&1 &
    i=0; while ! grep -q data "$T/out" && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
    sbx-kill t --soft --reason "test" > /dev/null
    touch "$WS/go"
    wait
    assert_contains "$(cat "$T/out")" "errno 1"
    r=$(row_with open-read deny '"flags":8')
    assert_contains "$r" "agent has been killed"
}

test_no_policy_file_means_no_guard() {
    secret TOPSECRET
    assert_eq "$(env LD_PRELOAD="$LIB" cat .env)" TOPSECRET
}

test_threads_and_fork_never_deadlock() {
    policy </dev/null
    echo x > "$WS/f"
    cp "$PROGS/agent_mt_fork" "$WS/"    # files.exec allows the workspace
    i=0
    while [ $i -lt 20 ]; do
        out=$(guarded timeout 20 ./agent_mt_fork "$WS/f" 30) || fail "round $i: $out (exit $?)"
        i=$((i + 1))
    done
}

test_python_git_and_make_work_unchanged() {
    policy </dev/null
    guarded python3 -c 'import json, email, asyncio, sqlite3, subprocess; subprocess.run(["true"], check=True)'
    # Not at the workspace root: the defaults deny writing .git/config there.
    mkdir "$WS/repo"
    guarded sh -c 'cd repo && git init -q . && git config user.email t@t && git config user.name t &&
                   echo a > a && git add a && git commit -qm first && git log --oneline' > "$T/git.out"
    assert_contains "$(cat "$T/git.out")" first
    mkdir -p "$WS/proj"
    printf 'int main(void) { return 0; }\n' > "$WS/proj/main.c"
    printf 'all: prog\nprog: main.o\n\t$(CC) -o $@ main.o\nmain.o: main.c\n\t$(CC) -c main.c\n' \
        > "$WS/proj/Makefile"
    guarded make -s -C proj > "$T/make.out" 2>&1 || { cat "$T/make.out"; fail "make failed"; }
    guarded ./proj/prog
}

run_tests
