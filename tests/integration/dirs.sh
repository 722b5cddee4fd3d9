#!/bin/sh
# The runtime directory and the store's directory belong to the user alone:
# every tool refuses one that another user owns (squatted: created first in
# /tmp), that group or others can write, or that is a symbolic link, and
# sends nothing into it.
. "$(dirname "$0")/../lib.sh"

REFUSED="refusing to use it"

# seed_store: a store with one run in it, then an empty runtime dir again
# (sbx-audit agents needs a store to list).
seed_store() {
    guard --policy "$POLICIES/default.yaml" --name seed -- /bin/true
    stop_daemon
    rm -rf "$SBX_RUNTIME_DIR"; mkdir -m 0700 "$SBX_RUNTIME_DIR"
}

need_root() { [ "$(id -u)" = 0 ] || skip "needs root to give a directory to another uid"; }

# every_tool_refuses_runtime DIR: each tool that uses the runtime directory
# refuses it with the message and leaves nothing in it.
every_tool_refuses_runtime() {
    rc=0; guard --policy "$POLICIES/default.yaml" -- /bin/true 2>"$T/err" || rc=$?
    assert_eq "$rc" 125 "sbx-guard exit"
    assert_contains "$(cat "$T/err")" "$REFUSED" "sbx-guard's stderr"
    assert_contains "$(cat "$T/err")" "runtime directory $1" "sbx-guard's stderr"
    rc=0; timeout 5 sbx-auditd 2>"$T/err" || rc=$?
    assert_eq "$rc" 1 "sbx-auditd exit"
    assert_contains "$(cat "$T/err")" "$REFUSED" "sbx-auditd's stderr"
    rc=0; sbx-kill somebody 2>"$T/err" || rc=$?
    assert_eq "$rc" 1 "sbx-kill exit"
    assert_contains "$(cat "$T/err")" "$REFUSED" "sbx-kill's stderr"
    assert_not_contains "$(cat "$T/err")" "no agent is running" "sbx-kill's stderr"
    # sbx-audit reads the store; it says why it cannot tell who is running
    sbx-audit agents >/dev/null 2>"$T/err" || true
    assert_contains "$(cat "$T/err")" "$REFUSED" "sbx-audit agents' stderr"
    # nothing was sent into the directory: no socket, no registration
    assert_eq "$(ls -A "$1" | wc -l)" 0 "entries in $1"
}

test_every_tool_refuses_a_runtime_dir_owned_by_another_user() {
    need_root
    seed_store
    chown 65534:65534 "$SBX_RUNTIME_DIR"
    every_tool_refuses_runtime "$SBX_RUNTIME_DIR"
    assert_contains "$(cat "$T/err")" "owned by uid 65534"
}

test_every_tool_refuses_a_runtime_dir_writable_by_others() {
    seed_store
    chmod 0777 "$SBX_RUNTIME_DIR"
    every_tool_refuses_runtime "$SBX_RUNTIME_DIR"
    assert_contains "$(cat "$T/err")" "writable by others"
}

test_every_tool_refuses_a_runtime_dir_writable_by_its_group() {
    seed_store
    chmod 0770 "$SBX_RUNTIME_DIR"
    every_tool_refuses_runtime "$SBX_RUNTIME_DIR"
    assert_contains "$(cat "$T/err")" "writable by its group"
}

test_every_tool_refuses_a_runtime_dir_that_is_a_symlink() {
    mkdir -m 0700 "$T/elsewhere"
    rmdir "$SBX_RUNTIME_DIR"; ln -s "$T/elsewhere" "$SBX_RUNTIME_DIR"
    rc=0; guard --policy "$POLICIES/default.yaml" -- /bin/true 2>"$T/err" || rc=$?
    assert_eq "$rc" 125 "sbx-guard exit"
    assert_contains "$(cat "$T/err")" "is a symbolic link"
    rc=0; sbx-kill somebody 2>"$T/err" || rc=$?
    assert_contains "$(cat "$T/err")" "is a symbolic link"
    rc=0; timeout 5 sbx-auditd 2>"$T/err" || rc=$?
    assert_eq "$rc" 1 "sbx-auditd exit"
    assert_contains "$(cat "$T/err")" "is a symbolic link"
    assert_eq "$(ls -A "$T/elsewhere" | wc -l)" 0 "entries behind the link"
}

test_the_default_runtime_dir_in_tmp_created_first_by_another_user_is_refused() {
    need_root
    command -v setpriv >/dev/null || skip "setpriv is not installed"
    # The issue's case: XDG_RUNTIME_DIR unset, so /tmp/sbx-$UID; the squatter
    # (nobody) made it first.  The victim is an unprivileged uid of its own.
    victim=$((40000 + $$ % 20000))
    squat=/tmp/sbx-$victim
    rm -rf "$squat"; mkdir -m 0777 "$squat"; chown 65534:65534 "$squat"
    chmod 0777 "$T"; mkdir -m 0777 "$T/vhome"
    rc=0
    setpriv --reuid "$victim" --regid "$victim" --clear-groups \
        env -u SBX_RUNTIME_DIR -u XDG_RUNTIME_DIR -u SBX_AUDIT_DB HOME="$T/vhome" \
        "$BIN/sbx-kill" somebody 2>"$T/err" || rc=$?
    owner=$(stat -c %u "$squat"); n=$(ls -A "$squat" | wc -l)
    rm -rf "$squat"
    assert_eq "$rc" 1 "sbx-kill exit"
    assert_contains "$(cat "$T/err")" "runtime directory $squat is owned by uid 65534"
    assert_eq "$owner" 65534 owner
    assert_eq "$n" 0 "entries in $squat"
}

test_sbx_audit_and_the_daemon_refuse_a_store_dir_writable_by_others() {
    mkdir -p "$T/state"; chmod 0777 "$T/state"
    rc=0; sbx-audit query 2>"$T/err" || rc=$?
    assert_eq "$rc" 1 "sbx-audit exit"
    assert_contains "$(cat "$T/err")" "audit store's directory $T/state is writable by others"
    rc=0; timeout 5 sbx-auditd 2>"$T/err" || rc=$?
    assert_eq "$rc" 1 "sbx-auditd exit"
    assert_contains "$(cat "$T/err")" "audit store's directory $T/state is writable by others"
    rc=0; guard --policy "$POLICIES/default.yaml" -- /bin/true 2>"$T/err" || rc=$?
    assert_eq "$rc" 125 "sbx-guard exit"
    assert_contains "$(cat "$T/err")" "audit store's directory"
    assert_file_absent "$T/state/audit.db"
}

test_sbx_audit_refuses_a_store_dir_owned_by_another_user() {
    need_root
    mkdir -p "$T/state"; chown 65534:65534 "$T/state"
    rc=0; sbx-audit stats 2>"$T/err" || rc=$?
    assert_eq "$rc" 1 "sbx-audit exit"
    assert_contains "$(cat "$T/err")" "is owned by uid 65534"
}

test_a_private_runtime_dir_and_store_dir_work_and_missing_ones_are_made_0700() {
    rmdir "$SBX_RUNTIME_DIR"
    rm -rf "$T/state"
    guard --policy "$POLICIES/default.yaml" --name ok -- /bin/true
    assert_eq "$(stat -c %a "$SBX_RUNTIME_DIR")" 700 "runtime dir mode"
    assert_eq "$(stat -c %a "$T/state")" 700 "store dir mode"
    expect_row agent=ok op=exit
    # a store dir readable by others (0755, the usual umask) is fine
    chmod 0755 "$T/state"
    sbx-audit query >/dev/null
    out=$(sbx-kill nobody-here 2>&1) || true
    assert_not_contains "$out" "$REFUSED"
}

run_tests
