#!/bin/sh
# Retention and the size cap of sbx-auditd, and its own log: old rows go in
# checkpointed steps recorded in the chain, never before an export sink
# acknowledged them, verify works across the removal, and the log stays
# small.  Each test has its own runtime dir and store.
. "$(dirname "$0")/../lib.sh"

count() { sqlite3 "$SBX_AUDIT_DB" "$1"; }
log() { cat "$SBX_RUNTIME_DIR/sbx-auditd.log" 2>/dev/null || true; }

# wait_for FILE TEXT: up to 10 s for TEXT to appear in FILE.
wait_for() {
    i=0
    until grep -q "$2" "$1" 2>/dev/null || [ $i -gt 200 ]; do sleep 0.05; i=$((i+1)); done
    grep -q "$2" "$1" || fail "$1 never said '$2'"
}

# start_daemon ARGS...: a daemon of our own, in the background, until it serves.
start_daemon() {
    sbx-auditd "$@" 2>>"$T/d.err" &
    i=0
    until [ -S "$SBX_RUNTIME_DIR/control.sock" ] || [ $i -gt 200 ]; do sleep 0.05; i=$((i+1)); done
    [ -S "$SBX_RUNTIME_DIR/control.sock" ] || fail "sbx-auditd did not start: $(cat "$T/d.err")"
}

test_an_auto_started_daemon_takes_its_retention_from_the_environment_and_verify_passes_after() {
    "$PROGS/emit_storm" old 100 1 0 >/dev/null
    stop_daemon
    sleep 1.2
    # started on demand by the agent's guard (here emit_storm), as sbx-guard does
    SBX_AUDITD_RETAIN=1s "$PROGS/emit_storm" new 10 1 0 >/dev/null
    wait_for "$SBX_RUNTIME_DIR/sbx-auditd.log" "retention: pruned"
    assert_contains "$(log)" "retention on (sbx-auditd --retain 1s)"
    assert_contains "$(log)" "retention: pruned 102 rows (1-102), recorded as row 103"
    assert_eq "$(count "select count(*) from events where id <= 102")" 0 "old rows left"
    assert_eq "$(count "select op || ' ' || layer || ' ' || target || ' ' || flags from events where id = 103")" \
        "retention sbx rows 1-102 102"
    assert_eq "$(count "select count(*) from checkpoints where last_id = 102 and row_id = 103")" 1
    out=$(sbx-audit verify)
    assert_contains "$out" "chain intact, head matches"
    assert_contains "$out" "starts after row 102"
    # the removal row is an event like the others
    assert_contains "$(sbx-audit query --op retention)" "rows 1-102"
}

test_verify_detects_tampering_after_a_removal() {
    "$PROGS/emit_storm" old 100 1 0 >/dev/null
    stop_daemon
    sleep 1.2
    start_daemon --retain 1s
    wait_for "$T/d.err" "retention: pruned"
    "$PROGS/emit_storm" new 10 1 0 >/dev/null
    stop_daemon
    sbx-audit verify >/dev/null
    # an altered checkpoint: the chain no longer starts where it says
    count "update checkpoints set last_hash = zeroblob(32)"
    rc=0; out=$(sbx-audit verify 2>&1) || rc=$?
    assert_eq "$rc" 1 "verify exit"
    assert_contains "$out" "verify FAILED: row 103"
    # a checkpoint moved forward over rows deleted behind it
    count "update checkpoints set last_id = 105, last_hash = (select prev_hash from events where id = 106); delete from events where id <= 105"
    rc=0; out=$(sbx-audit verify 2>&1) || rc=$?
    assert_eq "$rc" 1 "verify exit"
    assert_contains "$out" "verify FAILED: row 103: the checkpoint after row 105"
}

test_the_size_cap_holds_while_an_agent_keeps_writing() {
    start_daemon --max-size 1MiB
    for i in 1 2 3 4 5 6 7 8; do
        "$PROGS/emit_storm" "big$i" 8000 1 0 >/dev/null
    done
    wait_for "$T/d.err" "retention: pruned"
    sleep 1.5
    used=$(count "select (select page_count from pragma_page_count) - (select freelist_count from pragma_freelist_count)")
    psize=$(count "pragma page_size")
    [ $((used * psize)) -le 1048576 ] || fail "used $((used * psize)) bytes, cap 1 MiB"
    # 64,000 rows were written, about 10 MB: most are gone, the file stays near its cap
    size=$(stat -c %s "$SBX_AUDIT_DB")
    [ "$size" -le 3145728 ] || fail "store file $size bytes"
    [ "$(count "select count(*) from events")" -lt 32000 ] || fail "rows were not removed"
    assert_contains "$(count "select reason from events where op = 'retention' limit 1")" \
        "the store is over 90% of its size cap"
    sbx-audit verify >/dev/null
}

test_rows_an_export_sink_has_not_acknowledged_are_never_removed() {
    "$PROGS/emit_storm" old 100 1 0 >/dev/null
    stop_daemon
    # one sink has everything up to row 50, the other up to row 80
    count "insert into export_watermark(sink, row_id) values ('relp://collector:2514', 50), ('file:/var/log/sbx.json', 80)"
    sleep 1.2
    start_daemon --retain 1s
    wait_for "$T/d.err" "retention: pruned"
    assert_contains "$(cat "$T/d.err")" "retention: pruned 50 rows (1-50)"
    assert_contains "$(cat "$T/d.err")" "52 rows are due but kept until an export sink acknowledges them"
    assert_eq "$(count "select min(id) from events")" 51
    # the slower sink catches up: the rest goes
    count "update export_watermark set row_id = 102 where sink like 'relp%'"
    i=0; until [ "$(count "select min(id) from events")" -gt 51 ] || [ $i -gt 100 ]; do sleep 0.05; i=$((i+1)); done
    assert_eq "$(count "select min(id) from events")" 81
    sbx-audit verify >/dev/null
}

test_the_daemon_log_does_not_grow_per_commit() {
    "$PROGS/emit_storm" first 10 1 0 >/dev/null
    before=$(log | wc -l)
    # every agent's start and exit is a durable commit
    for i in $(seq 1 30); do "$PROGS/emit_storm" "a$i" 10 1 0 >/dev/null; done
    after=$(log | wc -l)
    [ $((after - before)) -le 2 ] || fail "the log grew by $((after - before)) lines for 30 agents: $(log | tail -5)"
    assert_eq "$(count "select count(*) from events where op = 'start'")" 31
}

test_the_daemon_log_is_rotated_at_its_cap_and_keeps_one_old_file() {
    for i in $(seq 1 16); do
        start_daemon --log "$T/d.log" --log-max 4KiB
        stop_daemon
    done
    assert_file_present "$T/d.log.1"
    assert_file_absent "$T/d.log.2"
    # a file passes the cap by the one line that crossed it, at most
    for f in "$T/d.log" "$T/d.log.1"; do
        [ "$(stat -c %s "$f")" -le 5120 ] || fail "$f is $(stat -c %s "$f") bytes"
        [ "$(stat -c %a "$f")" = 600 ] || fail "$f mode $(stat -c %a "$f")"
    done
    assert_contains "$(cat "$T/d.log" "$T/d.log.1")" "stopped; chain head"
}

test_bad_retention_options_are_refused_with_the_reason() {
    rc=0; sbx-auditd --max-size 12parsecs 2>err || rc=$?
    assert_eq "$rc" 2 "bad --max-size"
    assert_contains "$(cat err)" "--max-size: '12parsecs' is not a size"
    rc=0; SBX_AUDITD_RETAIN=forever sbx-auditd 2>err || rc=$?
    assert_eq "$rc" 2 "bad SBX_AUDITD_RETAIN"
    assert_contains "$(cat err)" "SBX_AUDITD_RETAIN: 'forever' is not a duration"
    # started on demand with a bad environment: the agent does not start
    rc=0; SBX_AUDITD_MAX_SIZE=1KiB "$PROGS/emit_storm" x 1 1 0 >/dev/null 2>&1 || rc=$?
    [ "$rc" -ne 0 ] || fail "emit_storm ran without a daemon"
    assert_contains "$(log)" "SBX_AUDITD_MAX_SIZE: '1KiB' is not a size of at least 1MiB"
}

run_tests
