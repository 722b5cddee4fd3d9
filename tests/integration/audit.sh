#!/bin/sh
# The audit path end to end: rings -> sbx-auditd -> store -> sbx-audit,
# and the kill switch.  Each test has its own runtime dir and store.
. "$(dirname "$0")/../lib.sh"

count() { sqlite3 "$SBX_AUDIT_DB" "$1"; }

test_100000_events_from_8_threads_and_4_children_are_stored_exactly_once() {
    out=$("$PROGS/emit_storm" storm 100008 8 4)
    assert_contains "$out" "emitted 100008 failed 0 bad_children 0"
    assert_eq "$(count "select count(*) from events where target like 'storm:%'")" 100008 rows
    assert_eq "$(count "select count(distinct target) from events where target like 'storm:%'")" 100008 unique
    # 8 threads share the parent's ring; each child reports as itself
    assert_eq "$(count "select count(distinct pid) from events where target like 'storm:%'")" 5 pids
    sbx-audit verify
}

test_rules_sent_by_reference_reach_every_row_in_parent_and_forked_child() {
    # 3 kinds: each text goes into the string table once per process (the
    # child's ring has its own table, which starts empty); 2000 kinds of
    # ~110 bytes: the 32 KiB table fills and the rest go inline.
    for kinds in 3 2000; do
        out=$("$PROGS/emit_storm" --keyed "k$kinds" 3000 "$kinds")
        assert_contains "$out" "keyed failed 0 child 0"
        python3 - "$SBX_AUDIT_DB" "$kinds" "k$kinds" <<'PY' || fail "rows with the wrong rule ($kinds kinds)"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
kinds = int(sys.argv[2])
rows = db.execute("select target, rule, reason, pid from events where target like 'keyed-%' "
                  "and agent = ?", (sys.argv[3],)).fetchall()
bad = [r for r in rows
       if not r[1].startswith("keyed-rule-%d padding" % (int(r[0].rsplit(":", 1)[1]) % kinds))
       or r[2] != "keyed reason"]
assert len(rows) == 9000, len(rows)
assert len({r[3] for r in rows}) == 2, "two processes"
if bad:
    print(len(bad), "bad rows, e.g.", bad[:3])
    sys.exit(1)
PY
    done
}

test_events_emitted_right_before_sigkill_are_all_kept() {
    out=$("$PROGS/emit_storm" --suicide victim 1000)
    assert_contains "$out" "child killed"
    assert_eq "$(count "select count(distinct target) from events where target like 'suicide:%'")" 1000
}

test_sigterm_drains_the_rings_and_commits_before_exit() {
    out=$("$PROGS/emit_storm" --term t 20000)
    assert_contains "$out" "emitted 20000 failed 0 daemon gone"
    assert_eq "$(count "select count(*) from events where target like 'term:%'")" 20000
    sbx-audit verify
}

test_after_a_daemon_crash_emits_fail_fast_and_committed_rows_verify() {
    out=$("$PROGS/emit_storm" --crash c1)
    # the ring takes what fits (8192 one-slot events); the first event
    # that finds it full and the daemon gone waits up to 3 s for a daemon
    # to take the run back (preload/emit.c: register_ring; nobody restarts
    # it here), then every event fails at once
    assert_contains "$out" "after crash: 1808 of 10000 failed"
    secs=$(echo "$out" | sed -n 's/.* in \([0-9.]*\) s.*/\1/p')
    python3 -c "import sys; sys.exit(0 if float('$secs') < 5 else 1)" || fail "took $secs s"
    assert_contains "$(sbx-audit verify)" "ok: 1001 rows, chain intact"
}

test_lifecycle_rows_keep_their_text_when_ring_rows_arrive_with_them() {
    # sbx-guard's start row reaches sbx-auditd while the agent's first
    # processes are already reporting; the daemon takes their rings' rows
    # first (so they come before the start in the store) and must not let
    # them overwrite the start row's own text on the way.
    for i in 1 2 3 4 5; do
        guard --isolation none --name life$i --policy "$POLICIES/default.yaml" -- \
            sh -c 'for f in 1 2 3 4 5 6 7 8 9 10; do cat /etc/hostname /nonexistent-$f; done' \
            >/dev/null 2>&1 || true
    done
    rows --op start > "$T/start.json"
    python3 - "$T/start.json" <<'PY'
import json, sys
bad = []
n = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    if not r["agent"].startswith("life"):
        continue
    n += 1
    if not r["target"].startswith("sh -c for f in") or not (r["reason"] or "").startswith(("isolation", "policy")):
        bad.append((r["agent"], r["target"], r["reason"]))
if n != 10:
    sys.exit(f"expected 10 start rows, found {n}")
if bad:
    sys.exit(f"start rows with another row's text: {bad}")
PY
}

test_query_json_is_one_parsable_object_per_line_and_filters() {
    "$PROGS/emit_storm" j1 1000 1 0 >/dev/null
    "$PROGS/emit_storm" j2 500 1 0 >/dev/null
    sbx-audit query --format json > all.json
    python3 -c '
import json, sys
rows = [json.loads(l) for l in open("all.json")]
need = {"id","ts","agent","pid","op","target","decision","rule","reason","layer","target2","errno","run_id","flags"}
assert all(need <= set(r) for r in rows), "missing keys"
assert all(r["ts"].endswith("Z") and "." in r["ts"] for r in rows)
assert len(rows) == 1000 + 500 + 4, len(rows)
ids = [r["id"] for r in rows]; assert ids == sorted(ids)
'
    sbx-audit query --agent j1 --decision deny --format json > deny.json
    python3 -c '
import json
rows = [json.loads(l) for l in open("deny.json")]
assert len(rows) == 100, len(rows)
assert all(r["agent"] == "j1" and r["decision"] == "deny" and r["errno"] == 13 for r in rows)
'
    assert_eq "$(sbx-audit query --op open-write --agent j2 --format json | wc -l)" 72 open-write
    assert_eq "$(sbx-audit query --op start --format json | wc -l)" 2 starts
    assert_eq "$(sbx-audit query --limit 3 --format json | wc -l)" 3 limit
    assert_eq "$(sbx-audit query --since 1h --agent j2 --format json | wc -l)" 502 since
    assert_eq "$(sbx-audit query --since 2000-01-01 --agent j2 --format json | wc -l)" 502 since-time
    assert_eq "$(sbx-audit query --since 2999-01-01T00:00:00Z --format json | wc -l)" 0 future
}

test_csv_has_a_header_and_quotes_per_rfc4180() {
    "$PROGS/emit_storm" c1 10 1 0 >/dev/null
    sbx-audit query --agent c1 --op open-read --limit 1 --format csv > out.csv
    head -n 1 out.csv | grep -q '^id,ts,agent,run_id,pid,uid,op,target,target2,decision,rule,reason,layer,errno,flags'
    python3 -c '
import csv
rows = list(csv.DictReader(open("out.csv", newline="")))
assert len(rows) == 1 and rows[0]["rule"] == "files.read.allow[0] \"**\"", rows
'
}

test_table_output_is_aligned_and_has_no_colour_when_piped() {
    "$PROGS/emit_storm" tbl 20 1 0 >/dev/null
    out=$(sbx-audit query --agent tbl --limit 5)
    assert_contains "$out" "DECISION"
    assert_not_contains "$out" "$(printf '\033')"
    # every line has DECISION's column at the same offset
    sbx-audit query --agent tbl --limit 5 | awk 'NR==1 { p = index($0, "DECISION") } NR>1 { s = substr($0, p, 5); if (s != "allow" && s != "deny ") exit 1 }'
}

test_tail_follows_new_rows_until_interrupted() {
    "$PROGS/emit_storm" before 5 1 0 >/dev/null
    sbx-audit tail --agent late --format json > tail.out 2>&1 &
    tp=$!
    sleep 0.3
    "$PROGS/emit_storm" late 50 1 0 >/dev/null
    sleep 0.5
    kill -INT $tp
    wait $tp
    assert_eq "$(grep -c '"agent":"late"' tail.out)" 52 followed
}

test_stats_and_agents_describe_the_store() {
    "$PROGS/emit_storm" st1 100 1 0 >/dev/null
    out=$(sbx-audit stats --agent st1)
    assert_contains "$out" "events     102 (10 denied)"
    assert_contains "$out" "denials by op:"
    assert_contains "$out" "store $SBX_AUDIT_DB:"
    out=$(sbx-audit agents)
    assert_contains "$out" "st1"
    assert_contains "$out" "0 (exited 0)"
}

test_sbx_kill_of_an_unknown_agent_fails_cleanly() {
    "$PROGS/emit_storm" other 10 1 0 >/dev/null   # starts the daemon
    rc=0; out=$(sbx-kill nosuch 2>&1) || rc=$?
    assert_eq "$rc" 1 exit
    assert_contains "$out" "no running agent named 'nosuch'"
}

test_sbx_kill_without_a_daemon_says_nothing_is_running() {
    rc=0; out=$(sbx-kill coder 2>&1) || rc=$?
    assert_eq "$rc" 1 exit
    assert_contains "$out" "no agent is running"
    assert_file_absent "$SBX_RUNTIME_DIR/sbx-auditd.pid"
}

test_sbx_kill_usage_errors_exit_2() {
    rc=0; sbx-kill >/dev/null 2>&1 || rc=$?; assert_eq "$rc" 2
    rc=0; sbx-kill a --all >/dev/null 2>&1 || rc=$?; assert_eq "$rc" 2
    rc=0; sbx-kill a --bogus >/dev/null 2>&1 || rc=$?; assert_eq "$rc" 2
}

test_a_killed_agent_s_guard_gets_the_kill_command_and_the_kill_is_recorded() {
    "$PROGS/emit_storm" --guard coder > guard.out &
    gp=$!
    i=0; until grep -q ready guard.out 2>/dev/null || [ $i -gt 100 ]; do sleep 0.05; i=$((i+1)); done
    out=$(sbx-kill coder --reason "deleting tests")
    assert_eq "$out" "killed coder (1 process)"
    wait $gp
    assert_contains "$(cat guard.out)" "cmd hard by=$(id -un) (uid $(id -u)) pid"
    assert_contains "$(cat guard.out)" "reason=deleting tests"
    row=$(sbx-audit query --op kill --format json)
    assert_contains "$row" '"reason":"by '
    assert_contains "$row" 'deleting tests"'
    assert_contains "$(sbx-audit agents)" "deleting tests"
}

# Waits (up to 10 s) until file $1 exists.
wait_file() {
    i=0; until [ -s "$1" ] || [ $i -gt 200 ]; do sleep 0.05; i=$((i+1)); done
    [ -s "$1" ] || fail "$1 never appeared"
}

# Waits (up to 10 s) until process $1 is gone (or a zombie).
wait_gone() {
    i=0
    while [ $i -le 200 ]; do
        st=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null) || st=
        { [ -z "$st" ] || [ "$st" = Z ]; } && return 0
        sleep 0.05; i=$((i+1))
    done
    fail "process $1 still runs"
}

test_sbx_kill_ends_an_agent_that_stopped_its_own_guard_and_records_it() {
    # Under none the agent can stop its guard; the guard then never
    # answers the kill, and the daemon kills the agent's registered
    # processes itself (a child included).
    guard --isolation none --name stopper -- sh -c '
        head -c0 /etc/hostname
        sh -c "head -c0 /etc/hostname; echo \$\$ > child.pid; exec sleep 60" &
        until [ -s child.pid ]; do sleep 0.05; done
        echo $$ > agent.pid
        kill -STOP $PPID
        wait' >guard.out 2>&1 &
    gp=$!
    wait_file agent.pid; wait_file child.pid
    # sbx-guard is the agent's parent ($gp is the shell that runs it).
    sg=$(sed -n 's/^PPid:[[:space:]]*//p' "/proc/$(cat agent.pid)/status")
    i=0; until grep -q '^State:.*T' "/proc/$sg/status" 2>/dev/null || [ $i -gt 100 ]; do
        sleep 0.05; i=$((i+1)); done
    rc=0; out=$(sbx-kill stopper --reason "stopped its guard" 2>&1) || rc=$?
    assert_eq "$rc" 0 "sbx-kill exit ($out)"
    assert_contains "$out" "did not answer"
    assert_contains "$out" "sbx-auditd killed its"
    wait_gone "$(cat agent.pid)"
    wait_gone "$(cat child.pid)"
    # The guard was continued: it sees its agent's end and exits.
    i=0; while kill -0 $gp 2>/dev/null && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
    kill -0 $gp 2>/dev/null && { kill -KILL $gp; fail "guard still runs"; }
    row=$(sbx-audit query --op kill --format json)
    assert_contains "$row" "dead man's switch"
    assert_contains "$row" "did not answer the kill"
    assert_contains "$row" "$(cat agent.pid)"
    assert_contains "$row" "$(cat child.pid)"
}

test_an_agent_that_stops_its_own_guard_is_ended_by_the_daemon_without_a_kill_request() {
    # Nobody asks for a kill: the daemon sees the guard stopped while its
    # agent runs on, and after 5 s ends the agent itself.
    guard --isolation none --name stopper2 -- sh -c '
        head -c0 /etc/hostname
        sh -c "head -c0 /etc/hostname; echo \$\$ > child.pid; exec sleep 60" &
        until [ -s child.pid ]; do sleep 0.05; done
        echo $$ > agent.pid
        kill -STOP $PPID
        while :; do head -c0 /etc/hostname; sleep 0.1; done' >guard.out 2>&1 &
    gp=$!
    wait_file agent.pid; wait_file child.pid
    wait_gone "$(cat agent.pid)"
    wait_gone "$(cat child.pid)"
    i=0; while kill -0 $gp 2>/dev/null && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
    kill -0 $gp 2>/dev/null && { kill -KILL $gp; fail "guard still runs"; }
    row=$(sbx-audit query --op kill --format json)
    assert_contains "$row" "dead man's switch"
    assert_contains "$row" "its guard was stopped"
    assert_contains "$row" "$(cat agent.pid)"
}

test_a_guard_stopped_together_with_its_agent_as_by_job_control_is_not_killed() {
    # ^Z stops the agent's process group; a guard stopped at the same time
    # leaves nothing running unguarded, and continuing them carries on.
    guard --isolation none --name ctrlz -- sh -c '
        head -c0 /etc/hostname
        echo $$ > agent.pid
        i=0; while [ $i -lt 40 ]; do head -c0 /etc/hostname; sleep 0.1; i=$((i+1)); done
        echo finished' >guard.out 2>&1 &
    gp=$!
    wait_file agent.pid
    ap=$(cat agent.pid)
    sg=$(sed -n 's/^PPid:[[:space:]]*//p' "/proc/$ap/status")   # sbx-guard
    pg=$(sed 's/.*) //' "/proc/$ap/stat" | cut -d' ' -f3)
    kill -STOP "$sg"; kill -STOP -- "-$pg" 2>/dev/null || kill -STOP "$ap"
    # SIGSTOP takes effect when the guard next runs; give a busy (sanitized)
    # guard a moment to reach the stopped state.
    i=0; until grep -q '^State:.*T' "/proc/$sg/status" || [ $i -gt 40 ]; do sleep 0.05; i=$((i+1)); done
    grep -q '^State:.*T' "/proc/$sg/status" || fail "sbx-guard ($sg) is not stopped"
    sleep 7     # longer than the 5 s after which a stopped guard is gone
    kill -CONT -- "-$pg" 2>/dev/null || kill -CONT "$ap"; kill -CONT "$sg"
    rc=0; wait $gp || rc=$?
    assert_eq "$rc" 0 "the agent's exit ($(cat guard.out))"
    assert_contains "$(cat guard.out)" finished
    assert_not_contains "$(sbx-audit query --op kill --format json)" "dead man's switch"
}

test_an_agent_that_kills_its_own_guard_is_ended_by_the_daemon_and_recorded() {
    guard --isolation none --name parricide -- sh -c '
        head -c0 /etc/hostname
        sh -c "head -c0 /etc/hostname; echo \$\$ > child.pid; exec sleep 60" &
        until [ -s child.pid ]; do sleep 0.05; done
        echo $$ > agent.pid
        kill -KILL $PPID
        wait' >guard.out 2>&1 &
    gp=$!
    wait_file agent.pid; wait_file child.pid
    rc=0; wait $gp || rc=$?
    assert_eq "$rc" 137 "the guard was SIGKILLed"
    wait_gone "$(cat agent.pid)"
    wait_gone "$(cat child.pid)"
    row=$(sbx-audit query --op kill --format json)
    assert_contains "$row" "dead man's switch"
    assert_contains "$row" "its guard died"
    assert_contains "$row" "$(cat agent.pid)"
    assert_contains "$(sbx-audit agents)" "its guard died"
}

test_a_soft_kill_reaches_the_rings() {
    "$PROGS/emit_storm" --guard soft1 > guard.out &
    gp=$!
    i=0; until grep -q ready guard.out 2>/dev/null || [ $i -gt 100 ]; do sleep 0.05; i=$((i+1)); done
    out=$(sbx-kill --all --soft --reason stop)
    assert_eq "$out" "soft-killed soft1"
    wait $gp
    assert_contains "$(cat guard.out)" "cmd soft"
    assert_contains "$(cat guard.out)" "killed-flag 1"
}

test_two_daemons_started_at_once_leave_one() {
    mkdir -p "$SBX_RUNTIME_DIR"
    sbx-auditd 2>d1.log & p1=$!
    sbx-auditd 2>d2.log & p2=$!
    sleep 0.5
    alive=0
    kill -0 $p1 2>/dev/null && alive=$((alive+1))
    kill -0 $p2 2>/dev/null && alive=$((alive+1))
    assert_eq "$alive" 1 "daemons alive"
    assert_contains "$(cat d1.log d2.log)" "already running"
    pid=$(cat "$SBX_RUNTIME_DIR/sbx-auditd.pid")
    { [ "$pid" = "$p1" ] || [ "$pid" = "$p2" ]; } || fail "pid file names $pid"
    "$PROGS/emit_storm" after 10 1 0 >/dev/null
}

test_a_stale_pid_file_and_socket_are_taken_over() {
    mkdir -p "$SBX_RUNTIME_DIR"
    echo 999999 > "$SBX_RUNTIME_DIR/sbx-auditd.pid"
    : > "$SBX_RUNTIME_DIR/control.sock"
    out=$("$PROGS/emit_storm" stale 10 1 0)
    assert_contains "$out" "failed 0"
}

test_verify_passes_then_names_a_tampered_row() {
    "$PROGS/emit_storm" v1 200 2 0 >/dev/null
    out=$(sbx-audit verify)
    assert_contains "$out" "ok: 202 rows, chain intact, head matches"
    stop_daemon
    sqlite3 "$SBX_AUDIT_DB" "update events set target = target || 'x' where id = 57"
    rc=0; out=$(sbx-audit verify 2>&1) || rc=$?
    assert_eq "$rc" 1 exit
    assert_contains "$out" "row 57"
}

test_a_failing_store_keeps_events_in_the_rings_and_loses_none() {
    mkdir -p "$SBX_RUNTIME_DIR"
    export SBX_AUDITD_FAULT_FILE="$T/disk-full"
    SBX_AUDITD_FAULT_FILE="$T/disk-full" sbx-auditd 2>d.log &
    i=0; until [ -S "$SBX_RUNTIME_DIR/control.sock" ] || [ $i -gt 100 ]; do sleep 0.05; i=$((i+1)); done
    "$PROGS/emit_storm" before 100 1 0 >/dev/null
    EMIT_STORM_GO="$T/go" "$PROGS/emit_storm" --suicide during 3000 > during.out 2>&1 &
    ep=$!
    sleep 0.3
    touch "$T/disk-full" "$T/go"
    # the events go into the ring (3000 < 4096 slots) while every commit fails
    sleep 1.5
    assert_contains "$(cat d.log)" "AUDIT STORE WRITE FAILED: injected fault"
    assert_eq "$(sqlite3 "$SBX_AUDIT_DB" "select count(*) from events where target like 'suicide:%'")" 0 "rows while failing"
    rm "$T/disk-full"
    wait $ep || true
    assert_contains "$(cat during.out)" "child killed"
    # the daemon retries every second
    i=0; until [ "$(sqlite3 "$SBX_AUDIT_DB" "select count(*) from events where target like 'suicide:%'")" = 3000 ] || [ $i -gt 60 ]; do sleep 0.05; i=$((i+1)); done
    assert_eq "$(sqlite3 "$SBX_AUDIT_DB" "select count(distinct target) || ' ' || count(*) from events where target like 'suicide:%'")" "3000 3000"
    assert_contains "$(sbx-audit verify)" "chain intact, head matches"
}

test_a_ring_that_stays_full_fails_closed_within_the_bound() {
    mkdir -p "$SBX_RUNTIME_DIR"
    SBX_AUDITD_FAULT_FILE="$T/disk-full" sbx-auditd 2>d.log &
    i=0; until [ -S "$SBX_RUNTIME_DIR/control.sock" ] || [ $i -gt 100 ]; do sleep 0.05; i=$((i+1)); done
    EMIT_STORM_GO="$T/go" "$PROGS/emit_storm" full 8300 1 0 > full.out 2>&1 &
    ep=$!
    sleep 0.3
    start=$(date +%s)
    touch "$T/disk-full" "$T/go"
    rc=0; wait $ep || rc=$?
    took=$(( $(date +%s) - start ))
    # 8192 fit the ring; one waits the 2 s bound, the other 107 fail at once
    assert_eq "$rc" 1 "emit_storm exit"
    assert_contains "$(cat full.out)" "emitted 8300 failed 108"
    [ "$took" -le 5 ] || fail "took $took s"
    rm "$T/disk-full"
    i=0; until [ "$(sqlite3 "$SBX_AUDIT_DB" "select count(*) from events where target like 'storm:%'")" = 8192 ] || [ $i -gt 60 ]; do sleep 0.05; i=$((i+1)); done
    assert_eq "$(sqlite3 "$SBX_AUDIT_DB" "select count(distinct target) from events where target like 'storm:%'")" 8192
}

test_retention_prunes_old_rows_and_the_chain_still_verifies() {
    "$PROGS/emit_storm" old 100 1 0 >/dev/null
    stop_daemon
    sleep 1.2
    sbx-auditd --retain 1s 2>d.log &
    i=0; until grep -q "pruned" d.log || [ $i -gt 100 ]; do sleep 0.05; i=$((i+1)); done
    assert_contains "$(cat d.log)" "retention: pruned 102 rows (1-102), recorded as row 103"
    # what is left is the row that records the removal
    assert_contains "$(sbx-audit verify)" "ok: 1 rows, chain intact, head matches (row 103); starts after row 102"
    "$PROGS/emit_storm" new 10 1 0 >/dev/null
    assert_contains "$(sbx-audit verify)" "ok: 13 rows, chain intact, head matches (row 115)"
    rc=0; sbx-auditd --retain forever 2>/dev/null || rc=$?
    assert_eq "$rc" 2 "bad --retain"
}

test_sbx_audit_usage_and_missing_store() {
    rc=0; sbx-audit query --decision maybe >/dev/null 2>&1 || rc=$?; assert_eq "$rc" 2
    rc=0; sbx-audit query --op fly >/dev/null 2>&1 || rc=$?; assert_eq "$rc" 2
    rc=0; sbx-audit query --since yesterday >/dev/null 2>&1 || rc=$?; assert_eq "$rc" 2
    rc=0; sbx-audit frobnicate >/dev/null 2>&1 || rc=$?; assert_eq "$rc" 2
    rc=0; out=$(sbx-audit query 2>&1) || rc=$?
    assert_eq "$rc" 1
    assert_contains "$out" "no audit store at $SBX_AUDIT_DB"
}

test_the_store_directory_is_created_private() {
    export SBX_AUDIT_DB="$T/state/new/audit.db"
    "$PROGS/emit_storm" p1 1 1 0 >/dev/null
    assert_eq "$(stat -c %a "$(dirname "$SBX_AUDIT_DB")")" 700 "store dir mode"
    assert_eq "$(stat -c %a "$SBX_AUDIT_DB")" 600 "store mode"
    assert_eq "$(stat -c %a "$SBX_RUNTIME_DIR/control.sock")" 600 "control.sock mode"
}

run_tests
