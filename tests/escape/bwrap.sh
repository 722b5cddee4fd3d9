#!/bin/sh
# --isolation bwrap: the same policy through bubblewrap (mounts, namespaces,
# the seccomp filter); skipped, and counted as skipped, where bubblewrap is
# not installed.
. "$(dirname "$0")/../lib.sh"

bw() { esc_in_place; guard --isolation bwrap "$@"; }

need_bwrap() { command -v bwrap >/dev/null 2>&1 || skip "bubblewrap (bwrap) is not installed"; }

test_bwrap_masks_deny_files_for_static_programs() {
    need_bwrap
    echo secret >.env
    out=$(bw -- "$ESC" read .env) || true
    assert_eq "$out" "fail EACCES"
}

test_bwrap_filter_refuses_io_uring_and_mount() {
    need_bwrap
    out=$(bw -- "$ESC" io_uring) || true
    assert_eq "$out" "fail EPERM"
    out=$(bw -- "$ESC" mount) || true
    assert_eq "$out" "fail EPERM"
}

test_bwrap_keeps_the_workspace_writable_and_the_rest_read_only() {
    need_bwrap
    mkdir -p "$T/outside"
    out=$(bw -- "$ESC" write ./inside)
    assert_eq "$out" "ok"
    out=$(bw -- "$ESC" write "$T/outside/x") || true
    assert_contains "$out" "fail"
    assert_file_absent "$T/outside/x"
}

test_bwrap_hides_the_store_and_reports_the_agents_status() {
    need_bwrap
    guard --isolation none -- true
    out=$(bw -- "$ESC" read "$SBX_AUDIT_DB") || true
    assert_contains "$out" "fail"
    rc=0; bw -- /bin/sh -c 'exit 5' || rc=$?
    assert_eq "$rc" 5
    expect_row op=start "reason~bwrap"
}

run_tests
