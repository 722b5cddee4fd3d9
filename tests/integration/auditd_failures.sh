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

run_tests
