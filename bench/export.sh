#!/bin/sh
# bench/export.sh: how fast sbx-audit export ships rows to a stock rsyslogd
# over RELP on loopback (imrelp, omfile), and to a JSON-lines file.  The
# rsyslogd is this script's own (its configuration, port and output in a
# temporary directory); the rows are written by tests/progs/emit_storm
# through a real sbx-auditd.  Usage: bench/export.sh [ROWS] (default 100000)
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
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$D/rsyslog.conf" <<CONF
global(workDirectory="$D" maxMessageSize="64k")
module(load="imrelp")
input(type="imrelp" port="$PORT" address="127.0.0.1")
template(name="raw" type="string" string="%rawmsg%\n")
action(type="omfile" file="$D/collector.log" template="raw")
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
relp=$("$B/bin/sbx-audit" export --to "relp://127.0.0.1:$PORT" 2>&1 | sed -n 's/.*(\([0-9]*\) rows\/s).*/\1/p')
file=$("$B/bin/sbx-audit" export --to "file:$D/out.jsonl" 2>&1 | sed -n 's/.*(\([0-9]*\) rows\/s).*/\1/p')
got=$(grep -c 'sbx@32473' "$D/collector.log")
echo "audit: export ${relp:-?} events/s over RELP to rsyslog (${got} of $N+ rows arrived); ${file:-?} events/s to a JSON-lines file (fsync per 2000)"
