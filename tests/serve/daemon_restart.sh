#!/bin/sh
# sbx-serve when sbx-auditd is SIGKILLed under it: the request running then
# is ended (nothing runs unrecorded) and says so; every sandbox the dead
# daemon had registered (fork servers, waiting children, validators, the
# running request) has its end recorded by the daemon started next, with the
# rows sent for it that the dead one might not have stored; later requests
# run as before; the chain verifies.
. "$(dirname "$0")/../lib.sh"

tests_of_this_file() { grep -o '^test_[a-zA-Z0-9_]*' "$0" | sort -u; }
if [ ! -x "$BIN/sbx-serve" ]; then
    for t in $(tests_of_this_file); do echo "skip - $t: sbx-serve not built"; done
    exit 0
fi

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# serve_up: sbx-serve (profile minimal) on a free port, its own TMPDIR
# (its fork servers empty theirs); $URL and $SPID once /healthz answers.
serve_up() {
    port=$(free_port)
    mkdir -p "$T/srvtmp"
    TMPDIR="$T/srvtmp" sbx-serve --listen "127.0.0.1:$port" >"$T/serve.log" 2>&1 &
    SPID=$!
    # A failed assertion ends the test at once: the service goes with it.
    trap 'kill -TERM "$SPID" 2>/dev/null || true; stop_daemon' EXIT
    URL="http://127.0.0.1:$port"
    i=0
    until curl -sf --max-time 2 "$URL/healthz" >/dev/null 2>&1; do
        kill -0 "$SPID" 2>/dev/null || { cat "$T/serve.log" >&2; fail "sbx-serve did not start"; }
        [ $i -lt 300 ] || fail "sbx-serve did not answer /healthz"
        sleep 0.1; i=$((i + 1))
    done
}

serve_down() {
    kill -TERM "$SPID" 2>/dev/null || return 0
    i=0
    while kill -0 "$SPID" 2>/dev/null && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
}

execute() { curl -s --max-time 30 -XPOST "$URL/execute" -H 'Content-Type: application/json' -d "$1"; }

test_a_daemon_sigkilled_under_sbx_serve_stops_the_running_request_and_every_sandbox_end_is_recorded() {
    serve_up
    assert_contains "$(execute '{"code":"print(1)"}')" '"exit_code":0'
    # About two seconds of work, killed from under it after half a second.
    execute '{"code":"x = 0\nfor i in range(40000000):\n    x += i\nprint(x)"}' >"$T/long.json" &
    cpid=$!
    sleep 0.6
    kill -KILL "$(cat "$SBX_RUNTIME_DIR/sbx-auditd.pid")"
    wait "$cpid" || true
    long=$(cat "$T/long.json")
    assert_contains "$long" "Execution stopped: sbx-auditd went away during the run"
    assert_contains "$long" '"exit_code":-9'
    for i in 1 2 3; do
        out=$(execute '{"code":"print(3)"}')
        assert_contains "$out" '"stdout":"3\n"' "request $i after the restart"
    done
    serve_down
    cat "$T/serve.log"
    assert_not_contains "$(cat "$T/serve.log")" "is not recorded"
    rows >"$T/rows.json"
    # Every agent that started has ended; the stopped request's end names
    # why; its exec row is there.
    python3 - "$T/rows.json" <<'EOF' || fail "see above"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
started = {r["agent"] for r in rows if r["op"] == "start"}
ended = {r["agent"] for r in rows if r["op"] == "exit"}
missing = sorted(started - ended)
print(f"{len(started)} agents started, {len(ended)} ended")
if missing:
    sys.exit(f"no end recorded for {missing}")
stopped = [r for r in rows if r["op"] == "exit" and "sbx-auditd went away during the run" in (r["target"] or "")]
if len(stopped) != 1:
    sys.exit(f"want one stopped request, got {stopped}")
agent = stopped[0]["agent"]
if not any(r["op"] == "exec" and r["agent"] == agent for r in rows):
    sys.exit(f"no exec row for {agent}")
if not any("recorded after sbx-auditd restarted" in (r["target"] or "") for r in rows if r["op"] == "exit"):
    sys.exit("no end recorded by the restarted daemon")
EOF
    out=$(sbx-audit verify) || fail "verify: $out"
    assert_contains "$out" "chain intact"
}

run_tests
