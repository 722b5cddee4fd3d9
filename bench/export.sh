#!/bin/sh
# bench/export.sh: how fast sbx-audit export ships rows to a stock rsyslogd
# on loopback, over RELP (imrelp) and TCP syslog (imtcp, octet counting),
# and to a JSON-lines file.  The rsyslogd is this script's own (its
# configuration, ports and output in a temporary directory); the rows are
# written by tests/progs/emit_storm through a real sbx-auditd.
#
# RELP: every row acknowledged by rsyslogd (sbx-audit's own rate: a batch
# counts once its last answer came).  TCP: rows over the time until the
# collector's file holds them all (TCP has no answer).  File: fsync per
# batch.  The CPU each side spent per event is printed too: on a shared
# 2-core machine the rate follows the load of the others, the cost less.
#
# The collector's configuration is a throughput one: a direct main queue
# (imrelp hands each message to the action itself, no queue hop) and
# omfile writing asynchronously in 256k buffers; the tests use the
# durable one (written before acknowledged).  Usage: bench/export.sh [ROWS]
# (SBX_BENCH_EXPORTER=PATH: another build's sbx-audit as the exporter, to
# compare two builds on the same collector.)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${BUILD:-build}"
N=${1:-100000}
RSYSLOGD=$(command -v rsyslogd || echo /usr/sbin/rsyslogd)
if [ ! -x "$RSYSLOGD" ] || ! ls /usr/lib/*/rsyslog/imrelp.so >/dev/null 2>&1; then
    echo "audit: export: skipped (rsyslog and rsyslog-relp are not installed: make deps)"
    exit 0
fi
D=$(mktemp -d "$B/bench-export.XXXXXX")
R=$(mktemp -d /tmp/sbxb.XXXXXX)
chmod 700 "$D" "$R"
export SBX_AUDIT_DB="$D/state/audit.db" SBX_RUNTIME_DIR="$R"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=$(port)
TPORT=$(port)
cat >"$D/rsyslog.conf" <<CONF
global(workDirectory="$D" maxMessageSize="64k")
main_queue(queue.type="Direct")
module(load="imrelp")
module(load="imtcp")
template(name="raw" type="string" string="%rawmsg%\n")
ruleset(name="relp") {
    action(type="omfile" file="$D/collector.log" template="raw"
           asyncWriting="on" ioBufferSize="256k" flushOnTXEnd="off" flushInterval="1")
}
ruleset(name="tcp") {
    action(type="omfile" file="$D/tcp.log" template="raw" ioBufferSize="256k")
}
input(type="imrelp" port="$PORT" address="127.0.0.1" ruleset="relp")
input(type="imtcp" port="$TPORT" address="127.0.0.1" ruleset="tcp")
CONF
"$RSYSLOGD" -n -f "$D/rsyslog.conf" -i "$D/rsyslogd.pid" >"$D/rsyslogd.err" 2>&1 &
RS=$!
cleanup() {
    kill "$RS" 2>/dev/null; wait "$RS" 2>/dev/null
    [ -f "$R/sbx-auditd.pid" ] && kill "$(cat "$R/sbx-auditd.pid")" 2>/dev/null
    sleep 0.2
    rm -rf "$D" "$R"
}
trap cleanup EXIT
"$B/tests/progs/emit_storm" bench "$N" 1 0 >/dev/null
i=0
until python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$PORT" 2>/dev/null; do
    i=$((i + 1)); [ $i -lt 100 ] || { echo "audit: export: rsyslogd did not start"; exit 1; }; sleep 0.1
done
ROWS=$(sqlite3 "$SBX_AUDIT_DB" "select count(*) from events")
# run_export URL [COLLECTOR-FILE]: sbx-audit export to URL; prints its
# rate (or, with a collector file, the rate until the file has every row),
# the exporter's and rsyslogd's CPU microseconds per row.
run_export() {
    python3 - "${SBX_BENCH_EXPORTER:-$B/bin/sbx-audit}" "$1" "${2:-}" "$ROWS" "$RS" <<'PY'
import os, re, resource, subprocess, sys, time
exe, url, coll, rows, rs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
def rs_cpu():
    f = open("/proc/%s/stat" % rs).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
c0, t0 = rs_cpu(), time.monotonic()
out = subprocess.run([exe, "export", "--to", url], capture_output=True, text=True).stderr
m = re.search(r"\((\d+) rows/s\)", out)
rate = m.group(1) if m else "?"
if coll:
    def count():
        try:
            return sum(1 for l in open(coll, encoding="utf-8", errors="replace") if "sbx@32473" in l)
        except OSError:
            return 0
    while count() < rows and time.monotonic() - t0 < 120:
        time.sleep(0.02)
    rate = "%d" % (rows / (time.monotonic() - t0))
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(rate, "%.1f" % ((ru.ru_utime + ru.ru_stime) / rows * 1e6), "%.1f" % ((rs_cpu() - c0) / rows * 1e6))
PY
}
set -- $(run_export "relp://127.0.0.1:$PORT")
relp=$1 relp_cpu=$2 relp_rs=$3
set -- $(run_export "tcp://127.0.0.1:$TPORT" "$D/tcp.log")
tcp=$1 tcp_cpu=$2 tcp_rs=$3
set -- $(run_export "file:$D/out.jsonl")
file=$1 file_cpu=$2
sleep 1.2    # omfile's asynchronous flush (flushInterval 1)
got=$(grep -c 'sbx@32473' "$D/collector.log")
echo "audit: export RELP ${relp} events/s to rsyslog (${got} of ${ROWS} rows arrived; CPU per event: exporter ${relp_cpu} us, rsyslogd ${relp_rs} us)"
echo "audit: export TCP  ${tcp} events/s to rsyslog, until written (CPU per event: exporter ${tcp_cpu} us, rsyslogd ${tcp_rs} us)"
echo "audit: export file ${file} events/s to a JSON-lines file, fsync per batch (CPU per event: ${file_cpu} us)"
