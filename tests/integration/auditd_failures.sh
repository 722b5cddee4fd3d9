#!/bin/sh
# sbx-auditd when things go wrong: descriptors run out, a second daemon
# reaches the same store, the store is emptied, removed or damaged, the
# disk fills.  Each test tries the failure again through the public
# commands and the test programs.
. "$(dirname "$0")/../lib.sh"

count() { sqlite3 "$SBX_AUDIT_DB" "$1"; }

# start_daemon [CMD PREFIX...]: starts sbx-auditd (stderr in d.log) and
# waits for its control socket.
start_daemon() {
    mkdir -p "$SBX_RUNTIME_DIR"
    "$@" sbx-auditd 2>>d.log &
    i=0; until [ -S "$SBX_RUNTIME_DIR/control.sock" ] || [ $i -gt 100 ]; do sleep 0.05; i=$((i+1)); done
    [ -S "$SBX_RUNTIME_DIR/control.sock" ] || { cat d.log >&2; fail "sbx-auditd did not start"; }
}

# hold_events N SECONDS: N connections to events.sock, held SECONDS.
hold_events() {
    python3 - "$SBX_RUNTIME_DIR/events.sock" "$1" "$2" <<'PY' &
import socket, sys, time
held = []
for _ in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.setblocking(False)
    try:
        s.connect(sys.argv[1])
    except BlockingIOError:
        pass
    held.append(s)
time.sleep(float(sys.argv[3]))
PY
}

test_out_of_descriptors_sbx_auditd_waits_keeps_serving_and_loses_nothing() {
    command -v prlimit >/dev/null || { echo "skip: no prlimit"; return 0; }
    start_daemon prlimit --nofile=40:40
    # 61 processes with a ring each want ~120 descriptors: the daemon runs
    # out, rests its listeners, and takes the rest as the first ones exit.
    out=$(timeout 60 "$PROGS/emit_storm" emf 3050 1 60) || fail "emit_storm: $out"
    assert_contains "$out" "emitted 3050 failed 0"
    assert_eq "$(count "select count(distinct target) from events where target like 'storm:%'")" 3050
    # Out of descriptors again, for 2 s: a new agent waits for them to come
    # back (its connections wait in the backlog), then runs and is stored.
    hold_events 60 2; hp=$!
    sleep 0.5
    out=$(timeout 60 "$PROGS/emit_storm" later 100 1 2) || fail "emit_storm: $out"
    assert_contains "$out" "emitted 99 failed 0"
    wait $hp || true
    assert_eq "$(count "select count(*) from events where agent = 'later' and op != 'start' and op != 'exit'")" 99
    lines=$(wc -l < d.log)
    [ "$lines" -lt 200 ] || { tail -5 d.log >&2; fail "$lines log lines"; }
    assert_contains "$(cat d.log)" "out of file descriptors; new connections wait"
    # SIGTERM while out of descriptors still stops it.
    hold_events 60 10; hp=$!
    sleep 0.5
    pid=$(cat "$SBX_RUNTIME_DIR/sbx-auditd.pid")
    kill -TERM "$pid"
    i=0; while kill -0 "$pid" 2>/dev/null && [ $i -lt 60 ]; do sleep 0.05; i=$((i+1)); done
    kill -0 "$pid" 2>/dev/null && fail "sbx-auditd ignored SIGTERM"
    kill "$hp" 2>/dev/null || true
    sbx-audit verify >/dev/null
}

# run_agent NAME: a guarded `true` (stderr in err.txt); its exit status.
run_agent() {
    rc=0
    guard --isolation none --name "$1" -- true 2>err.txt || rc=$?
    return $rc
}

# assert_refused_at_once WHAT: an agent started now exits 125 within 3 s,
# and sbx-guard's stderr names WHAT.
assert_refused_at_once() {
    start=$(date +%s)
    rc=0; run_agent refused || rc=$?
    took=$(( $(date +%s) - start ))
    assert_eq "$rc" 125 "guard exit"
    assert_contains "$(cat err.txt)" "$1" "sbx-guard's stderr"
    [ "$took" -le 3 ] || fail "took $took s"
}

test_a_second_daemon_on_the_same_store_refuses_at_once_and_the_first_serves_on() {
    run_agent first
    first=$SBX_RUNTIME_DIR
    SBX_RUNTIME_DIR=$(mktemp -d /tmp/sbxr.XXXXXX)
    rc=0; out=$(timeout 10 sbx-auditd 2>&1) || rc=$?
    [ "$rc" -ne 0 ] || fail "the second daemon exited 0"
    assert_contains "$out" "is written by another sbx-auditd (pid $(cat "$first/sbx-auditd.pid"))"
    # through sbx-guard: at once, with the reason
    assert_refused_at_once "one store has one writer"
    rm -rf "$SBX_RUNTIME_DIR"
    SBX_RUNTIME_DIR=$first
    run_agent second
    assert_eq "$(count "select count(*) from agents where name in ('first', 'second')")" 2
    sbx-audit verify >/dev/null
}

test_a_store_shorter_than_its_head_file_is_refused_and_kept() {
    "$PROGS/emit_storm" s1 100 1 0 >/dev/null
    stop_daemon
    count "delete from events where id > 50"
    cp "$SBX_AUDIT_DB.head" head.before
    assert_refused_at_once "AUDIT STORE TRUNCATED"
    assert_contains "$(cat err.txt)" "ends at row 50"
    assert_eq "$(count "select max(id) from events")" 50 "rows kept as found"
    cmp -s head.before "$SBX_AUDIT_DB.head" || fail "the head file changed"
}

test_a_store_removed_or_emptied_under_its_head_file_is_refused() {
    "$PROGS/emit_storm" s1 10 1 0 >/dev/null
    stop_daemon
    rm "$SBX_AUDIT_DB" "$SBX_AUDIT_DB-wal" "$SBX_AUDIT_DB-shm" 2>/dev/null || true
    assert_refused_at_once "AUDIT STORE MISSING"
    assert_file_absent "$SBX_AUDIT_DB"
    : > "$SBX_AUDIT_DB"
    assert_refused_at_once "is empty but its head file"
    assert_contains "$(cat "$SBX_AUDIT_DB.head")" "id 12"
}

test_a_store_with_garbage_mid_file_is_refused_with_the_cause() {
    "$PROGS/emit_storm" g1 5000 1 0 >/dev/null
    stop_daemon
    pages=$(count "pragma page_count")
    [ "$pages" -gt 20 ] || fail "only $pages pages"
    psize=$(count "pragma page_size")
    # one page in the middle overwritten (whole: the store's pages are
    # 16 KiB), the header left alone
    head -c "$psize" /dev/urandom | dd of="$SBX_AUDIT_DB" bs="$psize" seek=$((pages / 2)) conv=notrunc 2>/dev/null
    size=$(stat -c %s "$SBX_AUDIT_DB")
    assert_refused_at_once "AUDIT STORE DAMAGED"
    assert_eq "$(stat -c %s "$SBX_AUDIT_DB")" "$size" "store size"
}

test_an_unreadable_store_is_reported_by_sbx_guard_at_once() {
    mkdir -p "$(dirname "$SBX_AUDIT_DB")"
    head -c 65536 /dev/urandom > "$SBX_AUDIT_DB"
    assert_refused_at_once "sbx-auditd could not start"
    assert_contains "$(cat err.txt)" "$SBX_AUDIT_DB"
}

test_a_store_deleted_while_the_daemon_runs_is_an_alarm_and_guarded_calls_fail_closed() {
    run_agent before
    EMIT_STORM_GO="$T/go" "$PROGS/emit_storm" late 9000 1 0 > late.out 2>&1 &
    ep=$!
    i=0; until [ "$(count "select count(*) from agents where name = 'late'")" = 1 ] || [ $i -gt 100 ]; do sleep 0.05; i=$((i+1)); done
    # The store goes (moved away: as good as deleted for its path).
    mv "$SBX_AUDIT_DB" "$T/moved.db"
    # A new agent cannot be recorded: refused, with the reason.
    rc=0; run_agent after || rc=$?
    assert_eq "$rc" 125 "guard exit"
    assert_contains "$(cat err.txt)" "AUDIT STORE REMOVED"
    # A running agent's events go to its ring, not to the lost file; once
    # the ring is full its guarded calls fail closed.
    touch "$T/go"
    rc=0; wait $ep || rc=$?
    assert_eq "$rc" 1 "emit_storm exit"
    assert_contains "$(cat late.out)" "emitted 9000 failed 808"
    assert_contains "$(cat "$SBX_RUNTIME_DIR/sbx-auditd.log")" "AUDIT STORE REMOVED"
    assert_file_absent "$SBX_AUDIT_DB"
    # Put back, the store takes what the ring held: nothing of it is lost.
    mv "$T/moved.db" "$SBX_AUDIT_DB"
    i=0; until [ "$(count "select count(*) from events where target like 'storm:%'")" = 8192 ] || [ $i -gt 100 ]; do sleep 0.05; i=$((i+1)); done
    assert_eq "$(count "select count(distinct target) from events where target like 'storm:%'")" 8192
}

test_an_agent_ending_while_the_disk_is_full_is_recorded_once_the_disk_has_room() {
    start_daemon env SBX_AUDITD_FAULT_FILE="$T/disk-full"
    # The disk fills while the agent runs: its exit cannot be stored now.
    guard --isolation none --name df -- sh -c "sleep 1; exit 3" 2>err.txt &
    gp=$!
    i=0; until [ "$(count "select count(*) from agents where name = 'df'")" = 1 ] || [ $i -gt 100 ]; do sleep 0.05; i=$((i+1)); done
    touch "$T/disk-full"
    rc=0; wait $gp || rc=$?
    assert_eq "$rc" 3 "agent exit"
    sleep 0.5
    assert_eq "$(count "select count(*) from events where agent = 'df' and op = 'exit'")" 0 "exit rows while full"
    assert_eq "$(count "select count(*) from agents where name = 'df' and ended is null")" 1 "running while full"
    # Room again: the daemon retries every second and the end is there.
    rm "$T/disk-full"
    i=0; until [ "$(count "select count(*) from events where agent = 'df' and op = 'exit'")" = 1 ] || [ $i -gt 100 ]; do sleep 0.05; i=$((i+1)); done
    assert_eq "$(count "select count(*) from events where agent = 'df' and op = 'exit'")" 1 "exit rows"
    assert_eq "$(count "select exit_status from agents where name = 'df'")" 3 "exit status"
    # after the agent's own rows, as if nothing had happened
    assert_eq "$(count "select op from events where agent = 'df' order by id desc limit 1")" exit "last row"
    sbx-audit verify >/dev/null
}

test_a_kill_while_the_disk_is_full_is_recorded_once_the_disk_has_room() {
    start_daemon env SBX_AUDITD_FAULT_FILE="$T/disk-full"
    "$PROGS/emit_storm" --guard kf > guard.out &
    gp=$!
    i=0; until grep -q ready guard.out 2>/dev/null || [ $i -gt 100 ]; do sleep 0.05; i=$((i+1)); done
    touch "$T/disk-full"
    out=$(sbx-kill kf --reason "full disk")
    assert_contains "$out" "killed kf"
    wait $gp || true
    rm "$T/disk-full"
    i=0; until [ "$(count "select count(*) from events where agent = 'kf' and op = 'kill'")" = 1 ] || [ $i -gt 100 ]; do sleep 0.05; i=$((i+1)); done
    assert_eq "$(count "select count(*) from events where agent = 'kf' and op = 'kill'")" 1 "kill rows"
    assert_eq "$(count "select kill_reason from agents where name = 'kf'")" "full disk" "kill reason"
    assert_contains "$out" "could not record the kill yet (it is held"
    sbx-audit verify >/dev/null
}

test_a_killed_daemon_is_restarted_by_sbx_guard_and_the_agent_s_end_is_recorded() {
    # The python process reads a file before the crash and one after, then
    # exits before its ring is full: its ring goes to the new daemon.
    guard --isolation none --name phoenix -- sh -c 'python3 -c "
import time
open(\"/etc/hostname\").close()
time.sleep(1.5)
open(\"/etc/hosts\").close()
"; cat /etc/hostname >/dev/null; exit 4' 2>err.txt &
    gp=$!
    # once its first process is at work (its exec of sleep is stored)
    i=0; until [ "$(count "select count(*) from events where agent = 'phoenix' and target = '/etc/hostname'" 2>/dev/null)" = 1 ] || [ $i -gt 100 ]; do sleep 0.05; i=$((i+1)); done
    old=$(cat "$SBX_RUNTIME_DIR/sbx-auditd.pid")
    kill -KILL "$old"
    rc=0; wait $gp || rc=$?
    assert_eq "$rc" 4 "agent exit"
    assert_contains "$(cat err.txt)" "sbx-auditd died and was restarted; agent 'phoenix' is recorded again"
    new=$(cat "$SBX_RUNTIME_DIR/sbx-auditd.pid")
    [ "$new" != "$old" ] || fail "the same daemon"
    # its end, and what a process started after the restart did
    assert_eq "$(count "select count(*) from events where agent = 'phoenix' and op = 'exit'")" 1 "exit rows"
    assert_eq "$(count "select exit_status from agents where name = 'phoenix'")" 4 "exit status"
    assert_eq "$(count "select count(*) from events where agent = 'phoenix' and target = '/etc/hostname'")" 2 "the opens of hostname"
    assert_eq "$(count "select count(*) from events where agent = 'phoenix' and target = '/etc/hosts'")" 1 "python's open after the crash"
    sbx-audit verify >/dev/null
}

test_a_process_killed_while_the_daemon_is_down_loses_no_event_and_none_is_stored_twice() {
    # A python process of the agent records one open, then (the daemon
    # stopped: nothing drains its ring) 200 more, and is SIGKILLed; then
    # the daemon is SIGKILLed.  sbx-guard kept a copy of the ring and hands
    # it to the daemon it restarts, which takes the 200 from where the dead
    # one committed.
    for i in $(seq 1 200); do echo "$i" >"w$i.txt"; done
    guard --isolation none --name keeper -- sh -c 'python3 -c "
import os, time
open(\"/etc/hostname\").close()
open(\"pid\", \"w\").write(str(os.getpid()))
while not os.path.exists(\"go\"):
    time.sleep(0.01)
for i in range(1, 201):
    open(\"w%d.txt\" % i).close()
open(\"done\", \"w\").close()
time.sleep(60)
"; exit 3' 2>err.txt &
    gp=$!
    i=0; until [ -s pid ] && [ "$(count "select count(*) from events where agent = 'keeper' and target = '/etc/hostname'" 2>/dev/null)" = 1 ] || [ $i -gt 200 ]; do sleep 0.05; i=$((i+1)); done
    old=$(cat "$SBX_RUNTIME_DIR/sbx-auditd.pid")
    kill -STOP "$old"
    touch go
    i=0; until [ -e done ] || [ $i -gt 200 ]; do sleep 0.05; i=$((i+1)); done
    assert_file_present done
    kill -KILL "$(cat pid)"
    kill -KILL "$old"
    rc=0; wait $gp || rc=$?
    assert_eq "$rc" 3 "agent exit"
    assert_contains "$(cat err.txt)" "sbx-auditd died and was restarted; agent 'keeper' is recorded again"
    assert_contains "$(cat err.txt)" "handed over"
    assert_eq "$(count "select count(*) from events where agent = 'keeper' and target like '%/w%.txt' and op = 'open-read'")" 200 "the killed process's opens"
    assert_eq "$(count "select count(distinct target) from events where agent = 'keeper' and target like '%/w%.txt' and op = 'open-read'")" 200 "distinct opens"
    assert_eq "$(count "select count(*) from events where agent = 'keeper' and target = '/etc/hostname'")" 1 "the open of hostname (committed before: not twice)"
    assert_eq "$(count "select count(*) from events where agent = 'keeper' and op = 'exit'")" 1 "exit rows"
    sbx-audit verify >/dev/null
}

test_hostile_rings_handed_over_are_refused_with_a_reason_and_the_real_one_still_drains() {
    out=$("$PROGS/emit_storm" --handover hostile 300)
    assert_contains "$out" "adopt keep-from-agent: ERR msg=KEEP is for the agent's sbx-guard"
    assert_contains "$out" "adopt bad-magic: ERR"
    assert_contains "$out" "bad ring header (magic 0xdeadbeef"
    assert_contains "$out" "adopt huge: ERR"
    assert_contains "$out" "not a ring: 1073741824 bytes"
    if [ "$(id -u)" = 0 ]; then
        assert_contains "$out" "adopt other-uid: ERR"
        assert_contains "$out" "the ring belongs to uid 65534"
    fi
    assert_contains "$out" "adopt child: ok"
    assert_contains "$out" "adopt child-again: ok"
    assert_contains "$out" "child killed"
    log=$(cat "$SBX_RUNTIME_DIR/sbx-auditd.log")
    assert_contains "$log" "REFUSED a ring handed over by its guard (pid"
    assert_contains "$log" "took over the ring of pid"
    assert_eq "$(count "select count(*) from events where agent = 'hostile' and (target like 'before:%' or target like 'after:%')")" 600 "the child's rows"
    assert_eq "$(count "select count(distinct target) from events where agent = 'hostile' and (target like 'before:%' or target like 'after:%')")" 600 "distinct rows"
    sbx-audit verify >/dev/null
}

test_supervisor_rows_of_a_daemon_killed_mid_batch_are_all_stored_after_the_restart() {
    # Under native the seccomp supervisor in sbx-guard records each exec
    # (layer supervisor) over control.sock.  The daemon is SIGKILLed three
    # times while the agent runs 2,000 execs: sbx-guard keeps each row
    # until a commit of the daemon acknowledges it and sends the rest again
    # to the daemon it restarts, so every exec has its row, and a row is
    # stored twice only if it was committed in the instant before the kill
    # (at most the one batch the dead daemon had not acknowledged).
    cp /bin/true ./marker
    guard --isolation native --name supkill --policy "$POLICIES/default.yaml" -- sh -c \
        'i=0; while [ $i -lt 2000 ]; do ./marker "$i"; i=$((i+1)); done; : > done; exit 5' \
        2>err.txt &
    gp=$!
    q="select count(*) from events where agent = 'supkill' and layer = 'supervisor' and op = 'exec' and target2 like './marker %'"
    kills=0
    for at in 300 800 1300; do
        i=0; until [ "$(count "$q" 2>/dev/null || echo 0)" -ge $at ] || [ -e done ] || [ $i -gt 600 ]; do sleep 0.02; i=$((i+1)); done
        [ -e done ] && break
        kill -KILL "$(cat "$SBX_RUNTIME_DIR/sbx-auditd.pid")"
        kills=$((kills+1))
        # the new daemon is up before the next round counts
        i=0; until grep -q "agent 'supkill' is recorded again" err.txt 2>/dev/null && [ "$(grep -c "is recorded again" err.txt)" -ge $kills ] || [ $i -gt 400 ]; do sleep 0.02; i=$((i+1)); done
    done
    rc=0; wait $gp || rc=$?
    assert_eq "$rc" 5 "agent exit ($(cat err.txt))"
    [ $kills -ge 2 ] || fail "the agent ended before the daemon was killed twice (kills: $kills)"
    assert_eq "$(grep -c "sbx-auditd died and was restarted; agent 'supkill' is recorded again" err.txt)" $kills "restarts"
    distinct=$(count "select count(distinct target2) from events where agent = 'supkill' and layer = 'supervisor' and op = 'exec' and target2 like './marker %'")
    total=$(count "$q")
    assert_eq "$distinct" 2000 "execs with a supervisor row"
    # a duplicate is a row the dead daemon committed but had not yet
    # acknowledged: one batch at most per kill (a batch is ~50 ms: far
    # fewer than 100 execs here)
    [ $((total - distinct)) -le $((kills * 100)) ] || fail "$((total - distinct)) rows stored twice after $kills kills"
    assert_eq "$(count "select count(*) from events where agent = 'supkill' and op = 'exit'")" 1 "exit rows"
    sbx-audit verify >/dev/null
}

test_processes_registering_while_the_daemon_is_killed_again_and_again_fail_no_call_and_lose_no_row() {
    # 300 short processes (cat), each registering its own ring at its first
    # guarded call, while sbx-auditd is SIGKILLed five times: a process
    # whose registration is in flight when the daemon dies, or that starts
    # while none runs, registers again with the daemon sbx-guard starts in
    # its place (preload/emit.c: register_ring) instead of failing its
    # calls closed.  A new process registers without waiting for the
    # answer: one that reaches the new daemon before sbx-guard has taken
    # the run back is held for that run (auditd/rings.c: park), not
    # refused; and a cat that ends before the daemon handed its ring to
    # sbx-guard's keeper waits for that at exit (sbx_ring_hdr.kept), so a
    # daemon killed in between does not take the ring with it.  Every cat
    # succeeds and every open has its row.
    for i in $(seq 1 300); do echo "$i" >"r$i.txt"; done
    guard --isolation none --name churn -- sh -c \
        'i=1; bad=0; while [ $i -le 300 ]; do cat "r$i.txt" >/dev/null || bad=$((bad+1)); i=$((i+1)); done; echo $bad >bad; : >done; exit 6' \
        2>err.txt &
    gp=$!
    q="select count(distinct target) from events where agent = 'churn' and op = 'open-read' and target like '%/r%.txt'"
    kills=0
    for at in 30 80 130 180 230; do
        i=0; until [ "$(count "$q" 2>/dev/null || echo 0)" -ge $at ] || [ -e done ] || [ $i -gt 1000 ]; do sleep 0.02; i=$((i+1)); done
        [ -e done ] && break
        kill -KILL "$(cat "$SBX_RUNTIME_DIR/sbx-auditd.pid")"
        kills=$((kills+1))
        i=0; until [ "$(grep -c "is recorded again" err.txt 2>/dev/null)" -ge $kills ] || [ $i -gt 500 ]; do sleep 0.02; i=$((i+1)); done
    done
    rc=0; wait $gp || rc=$?
    assert_eq "$rc" 6 "agent exit ($(cat err.txt))"
    [ $kills -ge 3 ] || fail "the agent ended before the daemon was killed three times (kills: $kills)"
    assert_eq "$(cat bad)" 0 "cat processes that failed ($(cat err.txt))"
    got=$(count "$q")
    if [ "$got" != 300 ]; then
        for i in $(seq 1 300); do
            [ "$(count "select count(*) from events where agent = 'churn' and op = 'open-read' and target like '%/r$i.txt'")" -ge 1 ] || echo "no row for r$i.txt" >&2
        done
    fi
    assert_eq "$got" 300 "opens with a row"
    assert_eq "$(count "select count(*) from events where agent = 'churn' and op = 'exit'")" 1 "exit rows"
    sbx-audit verify >/dev/null
}

run_tests
