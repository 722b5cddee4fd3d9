#!/bin/sh
# The audit trail leaving the machine: sbx-audit export and sbx-auditd
# --export to a real rsyslogd (imrelp, imtcp) that each test starts itself,
# on loopback ports of its own, with its own configuration and output file
# in the test directory: the system's rsyslog is never touched.
. "$(dirname "$0")/../lib.sh"

RSYSLOGD=$(command -v rsyslogd || echo /usr/sbin/rsyslogd)
IMRELP=$(ls /usr/lib/*/rsyslog/imrelp.so /usr/lib/rsyslog/imrelp.so 2>/dev/null | head -n 1)

need_rsyslog() {
    [ -x "$RSYSLOGD" ] || skip "rsyslogd is not installed (make deps installs rsyslog)"
    [ -n "$IMRELP" ] || skip "rsyslog's imrelp is not installed (make deps installs rsyslog-relp)"
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_rsyslog: rsyslogd in the foreground of a background job, RELP on
# $RELP_PORT and plain TCP on $TCP_PORT, every message as received into
# $T/collector.log.  The main queue is direct: a message is written before
# imrelp acknowledges it, so a collector SIGKILLed loses nothing it
# acknowledged (a stock configuration would use a disk-assisted queue).
start_rsyslog() {
    mkdir -p "$T/rs"
    [ -n "${RELP_PORT:-}" ] || RELP_PORT=$(free_port)
    [ -n "${TCP_PORT:-}" ] || TCP_PORT=$(free_port)
    cat >"$T/rs/rsyslog.conf" <<EOF
global(workDirectory="$T/rs" maxMessageSize="64k")
main_queue(queue.type="Direct")
module(load="imrelp")
module(load="imtcp")
input(type="imrelp" port="$RELP_PORT" address="127.0.0.1")
input(type="imtcp" port="$TCP_PORT" address="127.0.0.1")
template(name="raw" type="string" string="%rawmsg%\n")
action(type="omfile" file="$T/collector.log" template="raw")
EOF
    "$RSYSLOGD" -n -f "$T/rs/rsyslog.conf" -i "$T/rs/rsyslogd.pid" >"$T/rs/stderr" 2>&1 &
    RS_PID=$!
    i=0
    until python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' \
            "$RELP_PORT" 2>/dev/null; do
        i=$((i + 1))
        [ $i -lt 100 ] || { cat "$T/rs/stderr" >&2; fail "rsyslogd did not start"; return 1; }
        sleep 0.1
    done
}

stop_rsyslog() { # stop_rsyslog [SIGNAL]
    [ -n "${RS_PID:-}" ] || return 0
    kill -"${1:-TERM}" "$RS_PID" 2>/dev/null || true
    wait "$RS_PID" 2>/dev/null || true
    RS_PID=
}

cleanup() {
    stop_rsyslog KILL
    [ -z "${EXP_PID:-}" ] || kill -KILL "$EXP_PID" 2>/dev/null || true
    stop_daemon
}

# The store's newest row id, and an export watermark.
newest() { sqlite3 "$SBX_AUDIT_DB" "select coalesce(max(id), 0) from events"; }
mark_of() { sqlite3 "$SBX_AUDIT_DB" "select coalesce(max(row_id), 0) from export_watermark where sink = '$1'" 2>/dev/null || echo 0; }

# check_collector FILE MAXDUP: every row of the store arrived, no row
# arrived more than twice and at most MAXDUP rows twice, each agent's rows
# in order, every message an OCSF event of its op's class, every batch
# followed by its chain head.  Prints "rows N dup D heads H".
check_collector() {
    python3 - "$SBX_AUDIT_DB" "$1" "$2" <<'PY'
import json, re, sqlite3, sys
db, path, maxdup = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = {r[0]: (r[0], r[1], r[2].hex(), r[3], r[4])
         for r in sqlite3.connect(db).execute("select id, op, hash, decision, agent from events")}
classes = {"open-read": 1001, "open-write": 1001, "unlink": 1001, "rename": 1001, "mkdir": 1001,
           "exec": 1007, "start": 1007, "exit": 1007, "kill": 1007, "connect": 4001, "bind": 4001,
           "send": 4001}
seen, order, heads = {}, [], 0
sd = re.compile(r'^<(\d+)>1 \S+ \S+ sbx \S+ (\S+) \[sbx@32473 id="(\d+)" hash="([0-9a-f]{64})"[^\]]*\] (\{.*\})$')
hd = re.compile(r'^<\d+>1 \S+ \S+ sbx - sbx-head \[sbxhead@32473 id="(\d+)" hash="([0-9a-f]{64})"\] ')
for line in open(path, encoding="utf-8"):
    line = line.rstrip("\n")
    m = hd.match(line)
    if m:
        heads += 1
        i = int(m.group(1))
        assert store[i][2] == m.group(2), ("head hash", i)
        continue
    m = sd.match(line)
    assert m, ("not an sbx syslog line", line[:200])
    pri, msgid, i, h, msg = int(m.group(1)), m.group(2), int(m.group(3)), m.group(4), m.group(5)
    ev = json.loads(msg)
    sid, op, hash_, decision, agent = store[i]
    assert h == hash_ and ev["unmapped"]["sbx"]["hash"] == hash_, ("hash", i)
    assert msgid == op and ev["unmapped"]["sbx"]["op"] == op, ("op", i)
    assert ev["metadata"]["sequence"] == i and ev["metadata"]["version"].startswith("1.")
    if op in classes:
        assert ev["class_uid"] == classes[op], ("class", i, op, ev["class_uid"])
    assert ev["type_uid"] == ev["class_uid"] * 100 + ev["activity_id"]
    assert ev["action"] == ("Denied" if decision == "deny" else "Allowed"), ("action", i)
    assert pri == 13 * 8 + (4 if decision == "deny" else 5), ("pri", i, pri)
    assert ev["actor"]["authorizations"][0]["decision"] == decision
    assert ev["actor"].get("app_name") == agent
    seen[i] = seen.get(i, 0) + 1
    order.append((agent, i))
missing = sorted(set(store) - set(seen))
assert not missing, ("rows lost", len(missing), missing[:10])
dup = sum(n - 1 for n in seen.values())
assert max(seen.values()) <= 2, "a row arrived three times"
assert dup <= maxdup, ("duplicates", dup, "more than", maxdup)
# per agent, first arrivals in id order
last = {}
for agent, i in order:
    if seen[i] and i > last.get(agent, 0):
        last[agent] = i
    elif i < last.get(agent, 0) and seen[i] == 1:
        raise AssertionError(("out of order", agent, i))
assert heads > 0, "no chain heads"
print("rows %d dup %d heads %d" % (len(seen), dup, heads))
PY
}

test_every_row_reaches_rsyslog_over_relp_once_as_an_ocsf_event() {
    need_rsyslog
    trap cleanup EXIT
    start_rsyslog
    secret
    guard --name coder -- sh -c 'cat .env; echo hi > notes.txt; cat notes.txt; rm -rf .git/hooks' \
        >/dev/null 2>&1 || true
    "$PROGS/emit_storm" storm 20000 2 1 >/dev/null
    out=$(sbx-audit export --to "relp://127.0.0.1:$RELP_PORT" 2>&1)
    echo "$out"
    assert_contains "$out" "exported $(newest) rows"
    got=$(check_collector "$T/collector.log" 0)
    assert_eq "$got" "rows $(newest) dup 0 heads $(( ($(newest) + 1999) / 2000 ))"
    # the denied read: a File System Activity, denied, with its rule's file:line
    grep '"op":"open-read"' "$T/collector.log" | grep -q \
        '"action":"Denied".*"policy":{"name":"files.read.deny \\"\*\*/.env\\" [^"]*default.yaml:[0-9]*","uid":"[^"]*default.yaml:[0-9]*"' \
        || fail "no denied open-read with its rule in OCSF shape"
    # nothing new: a second export sends nothing
    out=$(sbx-audit export --to "relp://127.0.0.1:$RELP_PORT" 2>&1)
    assert_contains "$out" "exported 0 rows"
    sbx-audit verify --against "$T/collector.log"
}

test_query_format_ocsf_prints_one_event_per_row_with_agent_run_rule_and_hash() {
    secret
    guard --name coder -- sh -c 'cat .env' >/dev/null 2>&1 || true
    sbx-audit query --format ocsf >"$T/ocsf.json"
    python3 - "$T/ocsf.json" "$SBX_AUDIT_DB" <<'PY'
import json, sqlite3, sys
evs = [json.loads(l) for l in open(sys.argv[1])]
db = sqlite3.connect(sys.argv[2])
assert len(evs) == db.execute("select count(*) from events").fetchone()[0]
den = [e for e in evs if e["unmapped"]["sbx"]["op"] == "open-read" and e["action"] == "Denied"]
assert den, "no denied read"
e = den[0]
assert e["class_uid"] == 1001 and e["activity_name"] == "Read" and e["disposition"] == "Blocked"
assert e["status"] == "Failure" and e["status_code"] == "EACCES"
assert e["actor"]["app_name"] == "coder" and len(e["actor"]["session"]["uid"]) == 12
pol = e["actor"]["authorizations"][0]["policy"]
assert pol["uid"].endswith(":%d" % e["unmapped"]["sbx"]["rule_line"]), pol
assert len(e["unmapped"]["sbx"]["hash"]) == 64
starts = [x for x in evs if x["unmapped"]["sbx"]["op"] == "start"]
assert starts[0]["class_uid"] == 1007 and starts[0]["activity_name"] == "Launch"
PY
}

test_tcp_syslog_with_octet_counting_and_the_stdout_sink_carry_every_row() {
    need_rsyslog
    trap cleanup EXIT
    start_rsyslog
    "$PROGS/emit_storm" storm 3000 1 0 >/dev/null
    sbx-audit export --to "tcp://127.0.0.1:$TCP_PORT" 2>"$T/err"
    # plain TCP has no acknowledgement: wait until the collector wrote all
    i=0
    while [ "$(grep -c 'sbx@32473' "$T/collector.log" 2>/dev/null || echo 0)" -lt "$(newest)" ] && [ $i -lt 100 ]; do
        sleep 0.1; i=$((i + 1))
    done
    got=$(check_collector "$T/collector.log" 0)
    assert_contains "$got" "rows $(newest) dup 0"
    sbx-audit export --to - 2>/dev/null >"$T/lines.json"
    assert_eq "$(grep -c '"class_uid"' "$T/lines.json")" "$(newest)" "JSON lines"
    assert_eq "$(grep -c '"sbx_chain_head"' "$T/lines.json")" 2 "chain heads (2 batches)"
    sbx-audit verify --against "$T/lines.json"
}

test_a_collector_killed_mid_export_and_restarted_loses_no_row() {
    need_rsyslog
    trap cleanup EXIT
    start_rsyslog
    "$PROGS/emit_storm" storm 60000 2 0 >/dev/null
    url="relp://127.0.0.1:$RELP_PORT"
    sbx-audit export --follow --batch 500 --to "$url" 2>"$T/exp.err" &
    EXP_PID=$!
    i=0
    while [ "$(mark_of "$url")" -lt 5000 ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
    stop_rsyslog KILL
    at=$(mark_of "$url")
    [ "$at" -lt "$(newest)" ] || skip "the export finished before the collector was killed"
    sleep 1.5
    start_rsyslog
    i=0
    while [ "$(mark_of "$url")" -lt "$(newest)" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
    kill -TERM "$EXP_PID"; wait "$EXP_PID" || true; EXP_PID=
    cat "$T/exp.err"
    assert_contains "$(cat "$T/exp.err")" "delivering to $url again"
    got=$(check_collector "$T/collector.log" 500)
    echo "collector killed at watermark $at: $got"
    sbx-audit verify --against "$T/collector.log"
}

test_an_exporter_killed_mid_batch_sends_at_most_that_batch_twice() {
    need_rsyslog
    trap cleanup EXIT
    start_rsyslog
    "$PROGS/emit_storm" storm 60000 2 0 >/dev/null
    url="relp://127.0.0.1:$RELP_PORT"
    sbx-audit export --batch 1000 --to "$url" 2>/dev/null &
    EXP_PID=$!
    i=0
    while [ "$(mark_of "$url")" -lt 3000 ] && [ $i -lt 200 ]; do sleep 0.02; i=$((i + 1)); done
    # Freeze the collector so that the exporter is caught inside a batch
    # (frames sent, answers outstanding), kill it there, let the collector
    # go on with what it had received.
    kill -STOP "$RS_PID"
    sleep 0.5
    kill -KILL "$EXP_PID"; wait "$EXP_PID" 2>/dev/null || true; EXP_PID=
    kill -CONT "$RS_PID"
    at=$(mark_of "$url")
    [ "$at" -lt "$(newest)" ] || skip "the export finished before it was killed"
    sbx-audit export --batch 1000 --to "$url"
    got=$(check_collector "$T/collector.log" 1000)
    echo "exporter killed at watermark $at: $got"
}

test_a_full_disk_refusing_the_watermark_resends_the_batch_and_loses_nothing() {
    need_rsyslog
    trap cleanup EXIT
    start_rsyslog
    "$PROGS/emit_storm" storm 5000 1 0 >/dev/null
    url="relp://127.0.0.1:$RELP_PORT"
    touch "$T/full"
    if SBX_EXPORT_FAULT_FILE="$T/full" sbx-audit export --batch 1000 --to "$url" 2>"$T/err"; then
        fail "export succeeded on a full disk"
    fi
    assert_contains "$(cat "$T/err")" "disk is full"
    assert_eq "$(mark_of "$url")" 0 "watermark on a full disk"
    rm "$T/full"
    SBX_EXPORT_FAULT_FILE="$T/full" sbx-audit export --batch 1000 --to "$url"
    assert_eq "$(mark_of "$url")" "$(newest)" "watermark"
    got=$(check_collector "$T/collector.log" 1000)
    echo "$got"
}

test_the_daemon_with_export_ships_rows_as_they_are_committed_and_after_a_sigkill() {
    need_rsyslog
    trap cleanup EXIT
    start_rsyslog
    export SBX_AUDIT_EXPORT="relp://127.0.0.1:$RELP_PORT"
    secret
    guard --name first -- sh -c 'cat .env; true' >/dev/null 2>&1 || true
    i=0
    while [ "$(mark_of "$SBX_AUDIT_EXPORT")" -lt "$(newest)" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    assert_eq "$(mark_of "$SBX_AUDIT_EXPORT")" "$(newest)" "rows exported by the daemon"
    kill -KILL "$(cat "$SBX_RUNTIME_DIR/sbx-auditd.pid")"
    sleep 0.3
    guard --name second -- sh -c 'cat .env; true' >/dev/null 2>&1 || true
    i=0
    while [ "$(mark_of "$SBX_AUDIT_EXPORT")" -lt "$(newest)" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    got=$(check_collector "$T/collector.log" 0)
    assert_contains "$got" "rows $(newest) dup 0"
    grep -q 'agent="second"' "$T/collector.log" || fail "no rows of the second run"
}

test_verify_against_detects_a_row_removed_and_the_chain_rewritten_on_the_host() {
    need_rsyslog
    trap cleanup EXIT
    start_rsyslog
    secret
    guard --name coder -- sh -c 'cat .env; echo x > a; cat a' >/dev/null 2>&1 || true
    sbx-audit export --to "relp://127.0.0.1:$RELP_PORT"
    sbx-audit verify --against "$T/collector.log"
    stop_daemon
    # The host removes the denied read and rebuilds the chain and the head
    # file so that they agree: plain verify is satisfied.
    victim=$(sqlite3 "$SBX_AUDIT_DB" "select id from events where decision = 'deny' limit 1")
    [ -n "$victim" ] || fail "no denied row"
    mkdir -m 700 "$T/new"
    "$PROGS/store_rewrite" "$SBX_AUDIT_DB" "$T/new/audit.db" "$victim"
    # (keeping the exporter's watermark, which the store holds too; every
    # store has the table since retention reads it)
    sqlite3 "$T/new/audit.db" "attach '$SBX_AUDIT_DB' as old;
        insert into export_watermark select * from old.export_watermark;"
    rm -f "$SBX_AUDIT_DB" "$SBX_AUDIT_DB-wal" "$SBX_AUDIT_DB-shm" "$SBX_AUDIT_DB.head"
    mv "$T/new/audit.db" "$SBX_AUDIT_DB"
    mv "$T/new/audit.db.head" "$SBX_AUDIT_DB.head"
    sbx-audit verify
    if sbx-audit verify --against "$T/collector.log" 2>"$T/err"; then
        fail "verify --against passed on a rewritten store"
    fi
    assert_contains "$(cat "$T/err")" "verify --against FAILED: row $victim"
    # and the exporter, resuming, refuses to go on from its watermark
    if sbx-audit export --to "relp://127.0.0.1:$RELP_PORT" 2>"$T/err"; then
        fail "export resumed on a rewritten store"
    fi
    assert_contains "$(cat "$T/err")" "rows were removed after export"
}

run_tests
