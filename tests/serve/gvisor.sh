#!/bin/sh
# sbx-serve --isolation gvisor: each request's Python in gVisor's user-space
# kernel (runsc), its channels and the guard's events relayed by a keeper
# (tools/serve_gvisor.h).  One service for the file, on a free loopback
# port, stopped at the end.  Every test is a skip, with the reason, where
# sbx-serve is not built, runsc is not installed or cannot start a sandbox
# here.
. "$(dirname "$0")/../lib.sh"

PY=/usr/bin/python3

tests_of_this_file() { grep -o '^test_[a-zA-Z0-9_]*' "$0" | sort -u; }
skip_all() { for t in $(tests_of_this_file); do echo "skip - $t: $1"; done; exit 0; }
[ -x "$BIN/sbx-serve" ] || skip_all "sbx-serve not built"
command -v runsc >/dev/null 2>&1 || skip_all "runsc (gVisor) is not installed (apt-get install runsc)"
if ! why=$(runsc --rootless --ignore-cgroups --network=none do /bin/true 2>&1); then
    skip_all "runsc cannot start a sandbox here: $(printf '%s\n' "$why" | tail -n 1)"
fi

if [ -z "${SBX_TEST_TMP:-}" ]; then
    mkdir -p "$SBX_BUILD/test-tmp"
    SBX_TEST_TMP=$(mktemp -d "$SBX_BUILD/test-tmp/one.XXXXXX")
fi
export SBX_TEST_TMP
SRV="$SBX_TEST_TMP/servers-gvisor"
mkdir -p "$SRV/state"
SERVE_RT=$(mktemp -d /tmp/sbxg.XXXXXX)     # short: sockets live here
SERVE_DB="$SRV/state/audit.db"

free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

serve_stop() {
    [ -f "$SRV/gvisor.pid" ] || return 0
    pid=$(cat "$SRV/gvisor.pid"); rm -f "$SRV/gvisor.pid"
    kill -TERM "$pid" 2>/dev/null || return 0
    i=0
    while kill -0 "$pid" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.05; i=$((i + 1)); done
    kill -KILL "$pid" 2>/dev/null || true
}
cleanup() { serve_stop; SBX_RUNTIME_DIR="$SERVE_RT" stop_daemon; rm -rf "$SERVE_RT"; }
trap cleanup EXIT INT TERM

port=$(free_port)
SBX_RUNTIME_DIR="$SERVE_RT" SBX_AUDIT_DB="$SERVE_DB" \
    "$BIN/sbx-serve" --listen "127.0.0.1:$port" --isolation gvisor --max-concurrent 1 \
    >"$SRV/gvisor.log" 2>&1 &
echo $! >"$SRV/gvisor.pid"
i=0
while [ $i -lt 600 ]; do
    if curl -sf --max-time 2 "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; then
        echo "http://127.0.0.1:$port" >"$SRV/gvisor.url"
        break
    fi
    kill -0 "$(cat "$SRV/gvisor.pid")" 2>/dev/null || break
    sleep 0.1; i=$((i + 1))
done

need_service() {
    [ -f "$SRV/gvisor.url" ] || { tail -c 600 "$SRV/gvisor.log" >&2; fail "sbx-serve --isolation gvisor did not start"; return 1; }
    URL=$(cat "$SRV/gvisor.url")
}

# execute CODE [TIMEOUT]: the answer in $T/body, the HTTP status in $T/status.
execute() {
    "$PY" -c 'import json, sys
d = {"code": sys.argv[1]}
if len(sys.argv) > 2:
    d["timeout"] = json.loads(sys.argv[2])
sys.stdout.write(json.dumps(d))' "$@" >"$T/req.json"
    curl -sS -o "$T/body" -w '%{http_code}' -H 'Content-Type: application/json' \
        --data-binary @"$T/req.json" --max-time 90 "$URL/execute" >"$T/status"
}
body_is() {
    "$PY" -c 'import json, sys
b = json.load(open(sys.argv[1]))
ok = eval(sys.argv[2])
if not ok:
    print("answer", json.dumps(b)[:3000], "fails:", sys.argv[2], file=sys.stderr)
sys.exit(0 if ok else 1)' "$T/body" "$1"
}
serve_rows() { SBX_AUDIT_DB="$SERVE_DB" SBX_RUNTIME_DIR="$SERVE_RT" sbx-audit query --format json --limit 100000; }

test_a_request_in_gvisor_prints_and_exits_0() {
    need_service || return 1
    execute 'print(1)'
    assert_eq "$(cat "$T/status")" 200 "HTTP status"
    body_is 'b == {"stdout": "1\n", "stderr": "", "exit_code": 0, "timed_out": False}'
}

test_a_request_in_gvisor_that_runs_past_its_timeout_is_killed_and_the_service_goes_on() {
    need_service || return 1
    start=$(date +%s)
    execute 'print("before the loop")
while True:
    pass' 2
    took=$(( $(date +%s) - start ))
    assert_eq "$(cat "$T/status")" 200 "HTTP status"
    body_is 'b == {"stdout": "before the loop\n", "stderr": "Execution timed out after 2.0s", "exit_code": -9, "timed_out": True}'
    [ "$took" -lt 15 ] || fail "the request took ${took}s"
    execute 'print("after the timeout")'
    body_is 'b["stdout"] == "after the timeout\n" and b["exit_code"] == 0'
}

test_the_start_row_of_a_gvisor_request_says_gvisor_and_the_guards_events_are_recorded() {
    need_service || return 1
    code="print(sum(range($$)))"
    execute "$code"
    body_is 'b["exit_code"] == 0'
    sleep 0.5
    serve_rows >"$T/rows.json" || fail "sbx-audit query failed"
    sha=$(printf '%s' "$code" | sha256sum | cut -d' ' -f1)
    run=$("$PY" - "$T/rows.json" "$sha" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
hit = [r for r in rows if sys.argv[2] in (r.get("target") or "")]
print(hit[0]["run_id"] if hit else "")
PY
)
    [ -n "$run" ] || fail "no row with the code's hash $sha"
    "$PY" - "$T/rows.json" "$run" <<'PY' || fail "the rows of run $run are not those of a gvisor run"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l).get("run_id") == sys.argv[2]]
start = [r for r in rows if r["op"] == "start"]
exits = [r for r in rows if r["op"] == "exit"]
guard = [r for r in rows if r.get("layer") == "guard"]
ok = (len(start) == 1 and "layers gvisor" in start[0]["reason"]
      and "landlock" not in start[0]["reason"] and "supervisor" not in start[0]["reason"]
      and len(exits) == 1 and "exit 0" in exits[0]["target"]
      # the guard inside gVisor: its events reach the store through the relay
      and any(r["op"] == "open-read" for r in guard))
if not ok:
    print(json.dumps(rows[:5] + rows[-5:], indent=1)[:4000], file=sys.stderr)
sys.exit(0 if ok else 1)
PY
    SBX_AUDIT_DB="$SERVE_DB" SBX_RUNTIME_DIR="$SERVE_RT" sbx-audit verify >/dev/null || fail "sbx-audit verify"
}

test_when_stopped_the_gvisor_service_leaves_no_fifo_ring_or_bundle_behind() {
    # Runs last (the tests run in name order): it stops the shared service.
    need_service || return 1
    execute 'print(2)'
    body_is 'b["stdout"] == "2\n"'
    serve_stop
    # The keepers clean up as their sandboxes end: a moment after the stop.
    i=0
    while [ $i -lt 50 ] && ls -d "$SERVE_RT"/serve-gvisor.* "$SERVE_RT"/gvisor.* >/dev/null 2>&1; do
        sleep 0.1; i=$((i + 1))
    done
    left=$(ls -d "$SERVE_RT"/serve-gvisor.* "$SERVE_RT"/gvisor.* 2>/dev/null || true)
    assert_eq "$left" "" "left in the runtime directory"
}

run_tests
