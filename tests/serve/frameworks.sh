#!/bin/sh
# examples/frameworks/: the run_code tool of each framework (LangGraph,
# CrewAI, AutoGen, LlamaIndex, Google ADK) imports without its framework,
# speaks the API (POST SANDBOX_URL/execute, a 35 s client timeout, the
# error text of a non-200 answer) to a fake service, and gets "pi = 3.14"
# back from a running sbx-serve; run-agent.sh runs a tool under sbx-guard
# while sbx-serve runs.
. "$(dirname "$0")/../lib.sh"

PY=/usr/bin/python3
EX="$SBX_ROOT/examples/frameworks"
TOOLS="langgraph_tool crewai_tool autogen_tool llamaindex_tool google_adk_tool"
PI_CODE='import math
print(f"pi = {math.pi}")'

free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# call TOOL CODE: the tool module's run_code(CODE), with SANDBOX_URL as set.
call() {
    "$PY" -I -c 'import importlib.util, sys
spec = importlib.util.spec_from_file_location(sys.argv[2], f"{sys.argv[1]}/{sys.argv[2]}.py")
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
print(m.run_code(sys.argv[3]))' "$EX" "$1" "$2"
}

# wait_for URL: until URL answers (30 s at most).
wait_for() {
    i=0
    while ! curl -sf --max-time 2 "$1" >/dev/null 2>&1; do
        i=$((i + 1)); [ $i -lt 300 ] || return 1
        sleep 0.1
    done
}

test_each_tool_imports_without_its_framework_and_keeps_the_guides_settings() {
    for t in $TOOLS; do
        out=$(env -u SANDBOX_URL "$PY" -I -c 'import importlib.util, sys
spec = importlib.util.spec_from_file_location("t", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
print(m.SANDBOX_URL, m.CLIENT_TIMEOUT, callable(m.run_code), callable(m.build_agent))
print(sorted(n for n in sys.modules if n.split(".")[0] in
      ("langgraph", "langchain_core", "crewai", "autogen_core", "autogen_agentchat", "llama_index", "google")))' \
            "$EX/$t.py") || fail "$t does not import: $out"
        assert_eq "$out" "http://localhost:8000 35 True True
[]" "$t"
        grep -q 'urlopen(req, timeout=CLIENT_TIMEOUT)' "$EX/$t.py" || fail "$t: the request does not use the 35 s timeout"
    done
}

test_each_tool_formats_an_answer_and_reports_a_refusal_of_a_fake_service() {
    cat >"$T/fake.py" <<'EOF'
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

class H(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with open(sys.argv[2], "a") as log:
            log.write(json.dumps([self.path, self.headers["Content-Type"], body]) + "\n")
        if "eval" in body["code"]:
            status, answer = 400, {"error": "Code validation failed",
                                   "violations": ["Line 1: call to 'eval()' is not allowed"]}
        elif "loop" in body["code"]:
            status, answer = 200, {"stdout": "partial\n", "stderr": "Execution timed out after 2.0s",
                                   "exit_code": -9, "timed_out": True}
        else:
            status, answer = 200, {"stdout": "pi = 3.141592653589793\n", "stderr": "",
                                   "exit_code": 0, "timed_out": False}
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):
        pass

HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
EOF
    port=$(free_port)
    "$PY" "$T/fake.py" "$port" "$T/requests.log" &
    fpid=$!
    rc=0
    (
        set -e
        wait_for_post() {
            i=0
            while ! "$PY" -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$port" 2>/dev/null; do
                i=$((i + 1)); [ $i -lt 100 ] || return 1; sleep 0.1
            done
        }
        wait_for_post
        export SANDBOX_URL="http://127.0.0.1:$port"
        for t in $TOOLS; do
            out=$(call "$t" "$PI_CODE")
            assert_eq "$out" "pi = 3.141592653589793
" "$t: a 200 answer"
            out=$(call "$t" 'eval("1")')
            assert_contains "$out" "Error: sandbox returned HTTP 400" "$t: a refusal"
            assert_contains "$out" "call to 'eval()' is not allowed" "$t: a refusal"
            out=$(call "$t" 'loop()')
            assert_contains "$out" "Execution timed out after 2.0s" "$t: a timeout"
            assert_contains "$out" "(timed out)" "$t: a timeout"
        done
        n=$(grep -c '^\["/execute", "application/json", {"code": ' "$T/requests.log")
        assert_eq "$n" 15 "requests POSTed as JSON to /execute"
        SANDBOX_URL="http://127.0.0.1:$(free_port)"
        out=$(call langgraph_tool 'print(1)')
        assert_contains "$out" "Error: sandbox unreachable at $SANDBOX_URL" "nothing listening"
    ) || rc=$?
    kill "$fpid" 2>/dev/null; wait "$fpid" 2>/dev/null || true
    return $rc
}

test_each_tool_gets_pi_back_from_a_running_sbx_serve() {
    [ -x "$BIN/sbx-serve" ] || skip "sbx-serve not built"
    port=$(free_port)
    sbx-serve --listen "127.0.0.1:$port" --profile minimal --max-concurrent 2 >"$T/serve.log" 2>&1 &
    spid=$!
    rc=0
    (
        set -e
        wait_for "http://127.0.0.1:$port/healthz" || fail "sbx-serve did not start: $(tail -c 400 "$T/serve.log")"
        export SANDBOX_URL="http://127.0.0.1:$port"
        for t in $TOOLS; do
            out=$(call "$t" "$PI_CODE")
            assert_contains "$out" "pi = 3.14" "$t"
        done
        out=$(call crewai_tool 'import os')
        assert_contains "$out" "Error: sandbox returned HTTP 400" "a refused request"
        assert_contains "$out" "import of 'os' is not allowed (not in allowed imports)" "a refused request"
    ) || rc=$?
    kill -TERM "$spid" 2>/dev/null; wait "$spid" 2>/dev/null || true
    return $rc
}

test_run_agent_sh_runs_a_tool_under_sbx_guard_while_sbx_serve_runs() {
    [ -x "$BIN/sbx-serve" ] || skip "sbx-serve not built"
    if curl -s --max-time 1 http://127.0.0.1:8000/ >/dev/null 2>&1; then
        skip "something already listens on 127.0.0.1:8000"
    fi
    out=$(env -u SANDBOX_URL SBX_BIN="$BIN" sh "$EX/run-agent.sh" 2>&1) || fail "run-agent.sh: $out"
    assert_contains "$out" "pi = 3.14"
    expect_row agent=agent-langgraph_tool
    curl -s --max-time 1 http://127.0.0.1:8000/healthz >/dev/null 2>&1 && fail "run-agent.sh left sbx-serve running"
    true
}

run_tests
