#!/bin/sh
# Escape attempts on files, under --isolation native.  Each attempt is made
# by a program the preload cannot see into (a static binary making bare
# system calls, or busybox-static), so only the kernel layer can stop it:
# mounts (masks, read-only binds, hidden store), Landlock, seccomp.  Each test
# also checks the supervisor's record of what ran (layer "supervisor").
. "$(dirname "$0")/../lib.sh"
BB=/bin/busybox

test_audit_mode_under_native_denies_nothing_and_still_hides_the_store() {
    # mode: audit records what enforce mode would deny and denies nothing,
    # in the kernel layer too: no covered files, no read-only mounts, no
    # Landlock file rules.  What protects sbx itself stays: the store's
    # directory is hidden even from a static program.
    echo secret >.env
    mkdir -p .git/hooks
    out=$(guard --isolation native --name aud --policy "$POLICIES/audit.yaml" -- /bin/sh -c \
        "cat .env; $BB cat .env; echo hook > .git/hooks/pre-commit && echo wrote; $BB cat $SBX_AUDIT_DB" \
        2>&1) || true
    assert_eq "$(printf '%s\n' "$out" | grep -c '^secret$')" 2 "times .env was read"
    assert_contains "$out" wrote
    assert_file_present .git/hooks/pre-commit
    assert_not_contains "$out" "SQLite format"
    expect_row agent=aud op=open-read decision=allow "target~/.env" "reason~audit:"
    expect_row agent=aud op=open-write decision=allow "target~/.git/hooks/pre-commit" "reason~audit:"
}

test_static_program_cannot_read_a_deny_file() {
    echo secret >.env
    out=$(native -- /bin/sh -c "$ESC read .env") || true
    assert_eq "$out" "fail EACCES"
    expect_row op=exec layer=supervisor "target~/esc" decision=allow
}

test_static_openat2_cannot_read_a_deny_file() {
    echo secret >.env
    out=$(native -- "$ESC" openat2 .env) || true
    assert_eq "$out" "fail EACCES"
}

test_busybox_cannot_read_ssh_keys_or_env_files() {
    mkdir -p "$HOME/.ssh" sub
    echo PRIVATE >"$HOME/.ssh/id_rsa"
    echo secret >sub/.env
    out=$(native -- "$BB" sh -c "$BB cat $HOME/.ssh/id_rsa; $BB cat sub/.env" 2>&1) || true
    assert_not_contains "$out" "PRIVATE"
    assert_not_contains "$out" "secret"
    out=$(native -- "$BB" ls "$HOME/.ssh" 2>/dev/null) || true
    assert_not_contains "$out" "id_rsa"
}

test_static_program_cannot_write_outside_the_workspace() {
    mkdir -p "$T/outside"
    out=$(native -- "$ESC" write "$T/outside/x") || true
    assert_contains "$out" "fail"
    assert_file_absent "$T/outside/x"
    out=$(native -- "$BB" sh -c "echo x >$T/outside/y; echo x >/etc/sbx-escape" 2>&1) || true
    assert_file_absent "$T/outside/y"
    assert_file_absent /etc/sbx-escape
}

test_static_program_cannot_read_or_run_outside_the_allowed_roots() {
    # Neither masked nor hidden by a mount: only Landlock's read and
    # execute rules stand between the agent and these.
    mkdir -p "$T/outside"
    echo private >"$T/outside/notes.txt"
    cp "$PROGS/static_escape" "$T/outside/prog"
    # Where the test directory is under /tmp (a checkout in /tmp), the
    # sandbox's private /tmp hides it first: ENOENT.  Elsewhere Landlock
    # refuses it: EACCES.  Either way nothing is read or run.
    case "$T" in /tmp/*) want="fail ENOENT" ;; *) want="fail EACCES" ;; esac
    out=$(native -- "$ESC" read "$T/outside/notes.txt") || true
    assert_eq "$out" "$want"
    out=$(native -- "$ESC" exec "$T/outside/prog" read /etc/hostname) || true
    assert_eq "$out" "$want"
}

test_workspace_stays_writable() {
    out=$(native -- "$ESC" write ./inside)
    assert_eq "$out" "ok"
    assert_file_present inside
}

test_dotdot_and_symlink_out_of_the_workspace_fail() {
    mkdir -p "$T/outside"
    ln -s "$T/outside" out
    out=$(native -- "$ESC" write "../outside/a") || true
    assert_contains "$out" "fail"
    out=$(native -- "$ESC" write "out/b") || true
    assert_contains "$out" "fail"
    assert_file_absent "$T/outside/a"
    assert_file_absent "$T/outside/b"
}

test_symlink_to_a_deny_file_does_not_read_it() {
    echo secret >.env
    out=$(native -- "$ESC" symlink .env link) || true
    assert_eq "$out" "fail EACCES"
}

test_proc_self_root_does_not_reach_past_the_mounts() {
    echo secret >.env
    mkdir -p "$T/outside"
    out=$(native -- "$ESC" read "/proc/self/root$WS/.env") || true
    assert_eq "$out" "fail EACCES"
    out=$(native -- "$ESC" write "/proc/self/root$T/outside/c") || true
    assert_contains "$out" "fail"
    assert_file_absent "$T/outside/c"
}

test_protected_file_cannot_be_renamed_linked_or_rewritten() {
    mkdir -p .git
    echo original >.git/config
    out=$(native -- "$ESC" rename .git/config moved) || true
    assert_contains "$out" "fail"
    out=$(native -- "$ESC" link .git/config hard) || true
    assert_contains "$out" "fail"
    out=$(native -- "$ESC" write .git/config) || true
    assert_contains "$out" "fail"
    assert_eq "$(cat .git/config)" "original"
    assert_file_absent moved
    assert_file_absent hard
}

test_audit_store_is_out_of_reach() {
    guard --isolation none -- true    # creates the store
    assert_file_present "$SBX_AUDIT_DB"
    out=$(native -- "$ESC" read "$SBX_AUDIT_DB") || true
    assert_contains "$out" "fail"
    out=$(native -- "$BB" ls -A "$(dirname "$SBX_AUDIT_DB")" 2>&1) || true
    assert_not_contains "$out" "audit.db"
}

test_control_socket_is_out_of_reach_and_events_socket_alone_is_there() {
    out=$(native -- "$ESC" unix "$SBX_RUNTIME_DIR/control.sock") || true
    assert_contains "$out" "fail"
    expect_row op=connect decision=deny layer=supervisor "target~control.sock"
    out=$(native -- "$BB" ls -A "$SBX_RUNTIME_DIR")
    assert_not_contains "$out" "control.sock"
    assert_not_contains "$out" "sbx-auditd.pid"
    assert_contains "$out" "events.sock"
}

# ---- the deny cover is complete whatever the tree ------------------------

# big_tree DIR N: N small files under DIR (a node_modules-like tree).
big_tree() {
    python3 - "$1" "$2" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(root, "pkg%03d" % (i // 100), "lib")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%05d.js" % i), "w") as f:
        f.write("x")
PY
}

test_static_program_cannot_read_a_env_file_at_depth_14() {
    d=a/b/c/d/e/f/g/h/i/j/k/l/m/n
    mkdir -p "$d"
    echo secret >"$d/.env"
    out=$(native -- "$ESC" read "$d/.env") || true
    assert_eq "$out" "fail EACCES"
}

test_static_program_can_read_none_of_300_pem_files() {
    # Private keys by name (the default denies *key*.pem; a certificate or
    # a CA bundle .pem is public).
    mkdir -p certs
    i=0
    while [ $i -lt 300 ]; do
        echo KEY >"certs/k$i-key.pem"
        echo "certs/k$i-key.pem" >>list.txt
        i=$((i + 1))
    done
    out=$(native -- "$ESC" readlist list.txt) || true
    assert_contains "$out" "readable 0 of 300"
}

test_static_program_can_read_none_of_40_env_files_beside_a_25000_file_tree() {
    big_tree node_modules 25000
    i=0
    while [ $i -lt 40 ]; do
        mkdir -p "svc$i/config"
        echo secret >"svc$i/config/.env"
        echo "svc$i/config/.env" >>list.txt
        i=$((i + 1))
    done
    out=$(native -- "$ESC" readlist list.txt) || true
    assert_contains "$out" "readable 0 of 40"
}

test_a_cover_past_its_budget_is_refused_under_native_and_said_under_auto() {
    big_tree node_modules 5000
    echo secret >.env
    rc=0
    SBX_COVER_BUDGET_MS=1 native -- "$ESC" read .env >"$T/out" 2>"$T/err" || rc=$?
    assert_eq "$rc" 125 "exit status under native"
    assert_not_contains "$(cat "$T/out")" ok
    assert_contains "$(cat "$T/err")" "cover is incomplete"
    assert_contains "$(cat "$T/err")" "budget"
    rc=0
    SBX_COVER_BUDGET_MS=1 guard --isolation auto --name auto -- /bin/true 2>"$T/err" || rc=$?
    assert_eq "$rc" 0 "exit status under auto"
    assert_contains "$(cat "$T/err")" "WARNING: the deny-read cover is incomplete"
    expect_row agent=auto op=start "reason~cover-incomplete" "reason~budget"
}

# ---- supervised opens (SBX_SUPERVISE_OPEN=1): deny files made after start -

test_a_env_file_created_after_start_is_unreadable_to_a_static_program_with_supervised_opens() {
    echo secret >notes.txt
    out=$(SBX_SUPERVISE_OPEN=1 native -- /bin/sh -c "$ESC rename notes.txt .env; $ESC read .env; $ESC openat2 .env") || true
    assert_eq "$out" "ok
fail EACCES
fail EACCES"
    expect_row op=open-read decision=deny layer=supervisor "target~/.env" "rule~files.read.deny"
    expect_row op=start "reason~supervisor-open"
}

test_a_hard_link_made_before_start_is_unreadable_with_supervised_opens() {
    echo secret >.env
    ln .env notes.txt
    out=$(SBX_SUPERVISE_OPEN=1 native -- "$ESC" read notes.txt) || true
    assert_eq "$out" "fail EACCES"
    expect_row op=open-read decision=deny layer=supervisor "target~/notes.txt" "reason~hard link"
}

test_swapping_a_symlink_between_an_allowed_file_and_a_new_env_file_never_leaks_it_with_supervised_opens() {
    # The supervisor opens the file itself and hands the descriptor in
    # (SECCOMP_IOCTL_NOTIF_ADDFD): what it judged is what the agent gets.
    # The old check-then-carry-on let the kernel open the path again, and
    # a child swapping the symlink in a loop won that race.
    echo allowed >notes.txt
    out=$(SBX_SUPERVISE_OPEN=1 native -- /bin/sh -c \
        "echo SECRET >made.txt && $ESC rename made.txt .env >/dev/null; $ESC symrace link notes.txt .env 3000") || true
    assert_contains "$out" ": 0 with SECRET"
    reads=$(printf '%s\n' "$out" | sed -n 's/^read \([0-9]*\):.*/\1/p')
    [ "${reads:-0}" -gt 100 ] || fail "the allowed file was read only ${reads:-0} times: $out"
    expect_row op=open-read decision=deny layer=supervisor "target~/.env" "rule~files.read.deny"
}

test_sbx_guard_says_at_start_when_deny_files_made_later_are_held_by_the_guard_only() {
    err=$(native -- /bin/true 2>&1 >/dev/null) || true
    assert_contains "$err" "a deny-read file created after start is refused by the guard only"
    err=$(SBX_SUPERVISE_OPEN=1 native -- /bin/true 2>&1 >/dev/null) || true
    assert_not_contains "$err" "created after start"
}

test_supervised_opens_give_a_static_program_its_own_proc_self_stdin_and_new_files() {
    # What the supervisor opens for the agent is what the agent would have
    # opened: /proc/self is the caller, /dev/stdin its own descriptor, a
    # file it creates has its umask, /proc/mounts its own mounts.
    echo hello >notes.txt
    out=$(SBX_SUPERVISE_OPEN=1 native -- "$BB" sh -c '
        umask 027
        read -r me _ </proc/self/stat; [ "$me" = $$ ] && echo self-is-me
        echo piped | "$0" cat /dev/stdin
        "$0" grep -q " /proc proc " /proc/mounts && echo mounts-read
        "$0" cat /proc/self/cwd/notes.txt
        "$0" cp notes.txt made.txt && "$0" stat -c mode-%a made.txt
        "$0" cat /proc/nonexistent 2>&1 | "$0" grep -q "No such file" && echo enoent' "$BB") || true
    assert_eq "$out" "self-is-me
piped
mounts-read
hello
mode-640
enoent" "what the agent read"
}

test_supervised_opens_give_a_static_program_no_more_than_landlock_would() {
    # The supervisor is outside the agent's Landlock domain: what it opens
    # for the agent is checked against the agent's rules by name, so a
    # file outside every read root stays out of reach.
    mkdir -p "$T/outside"
    echo private >"$T/outside/notes.txt"
    case "$T" in /tmp/*) want="fail ENOENT" ;; *) want="fail EACCES" ;; esac
    out=$(SBX_SUPERVISE_OPEN=1 native -- "$ESC" read "$T/outside/notes.txt") || true
    assert_eq "$out" "$want"
    out=$(SBX_SUPERVISE_OPEN=1 native -- "$ESC" openat2 "$T/outside/notes.txt") || true
    assert_eq "$out" "$want"
    ln -s "$T/outside/notes.txt" link.txt
    out=$(SBX_SUPERVISE_OPEN=1 native -- "$ESC" read link.txt) || true
    assert_eq "$out" "$want"
}

test_supervised_opens_leave_ordinary_work_alone() {
    git init -q .
    echo hello >README
    out=$(SBX_SUPERVISE_OPEN=1 native -- /bin/sh -c 'git add README && git -c user.email=a@example.com -c user.name=agent commit -q -m first && git log --oneline && python3 -c "print(open(\"README\").read().strip())"') || true
    assert_contains "$out" first
    assert_contains "$out" hello
}

run_tests
