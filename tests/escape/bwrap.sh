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

test_bwrap_an_agent_killed_by_its_own_signal_exits_and_is_recorded_as_natively() {
    need_bwrap
    # bwrap's init exits 128+N when the agent dies of signal N, as an
    # agent's own `exit 128+N` does; sbx-guard's reporter inside passes the
    # real wait status out.
    for sig in SEGV:11:Segmentation TERM:15:Terminated; do
        name=${sig%%:*}; rest=${sig#*:}; num=${rest%%:*}; text=${rest#*:}
        rn=0
        guard --isolation native --name "n$name" -- /bin/sh -c "kill -$name \$\$" 2>/dev/null || rn=$?
        rb=0
        bw --name "b$name" -- /bin/sh -c "kill -$name \$\$" 2>/dev/null || rb=$?
        assert_eq "$rn" $((128 + num)) "native exit status for SIG$name"
        assert_eq "$rb" "$rn" "bwrap exit status for SIG$name"
        expect_row agent="n$name" op=exit "target~killed by signal $num ($text"
        expect_row agent="b$name" op=exit "target~killed by signal $num ($text"
    done
    # An agent's own exit 143 stays an exit, not a signal.
    re=0
    bw --name be -- /bin/sh -c 'exit 143' 2>/dev/null || re=$?
    assert_eq "$re" 143 "bwrap exit 143"
    expect_row agent=be op=exit "target=exited 143"
    # Neither the reporter's socket nor its program reaches the agent: the
    # same descriptors are open in it as under native (stdio, ls's own, the
    # guard's ring and socket).
    fn=$(guard --isolation native --name nf -- /bin/sh -c 'ls /proc/self/fd | tr "\n" " "')
    fb=$(bw --name bf -- /bin/sh -c 'ls /proc/self/fd | tr "\n" " "')
    assert_eq "$fb" "$fn" "descriptors open in the agent"
}

run_tests
