#!/bin/sh
# sbx-serve's C side over real HTTP (a unix socket, curl, python3's json):
# statuses, the 4-key result, limits, the queue, the token, the request id,
# /metrics, kills, audit rows, SIGTERM, the output cap and the timeout.
# The runner here is a small one written by each test (check: imports
# outside the allowed list and eval/exec are violations; exec: runs the
# code), so that these tests judge the service, not the runner; the
# runner's own rules are tests/serve/'s.
. "$(dirname "$0")/../lib.sh"

# The test runner (docs/serve-protocol.md).  PERMISSIVE=1 reports no
# violations (the kernel layer alone is under test).
write_runner() {
    mkdir -p "$T/runner"
    cat > "$T/runner/runner.py" <<'PY'
import ast, json, os, sys
permissive = os.path.basename(__file__) == "permissive.py"
mode = sys.argv[1]
rf, wf = open(3, "rb"), open(4, "w")
cfg = json.loads(rf.readline())
allowed = set(cfg["allowed_imports"])
wf.write(json.dumps({"ready": True, "pid": os.getpid(), "python": sys.version.split()[0]}) + "\n")
wf.flush()
def check(code):
    if permissive:
        return []
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        return [{"stage": "ast_scan", "line": e.lineno, "message": "SyntaxError: %s (line %d)" % (e.msg, e.lineno)}]
    v = []
    for n in ast.walk(tree):
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in n.names] if isinstance(n, ast.Import) else [n.module or ""]
            for name in names:
                if name.split(".")[0] not in allowed:
                    v.append((n.lineno, n.col_offset, "Line %d: import of '%s' is not allowed (not in allowed imports)" % (n.lineno, name.split(".")[0])))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("eval", "exec"):
            v.append((n.lineno, n.col_offset, "Line %d: call to '%s()' is not allowed" % (n.lineno, n.func.id)))
    return [{"stage": "ast_scan", "line": l, "message": m} for l, c, m in sorted(v)]
if mode == "check":
    for line in rf:
        req = json.loads(line)
        wf.write(json.dumps({"id": req["id"], "violations": check(req["code"])}) + "\n")
        wf.flush()
    sys.exit(0)
req = json.loads(rf.readline())
rf.close()
wf.close()
sys.stdout.reconfigure(line_buffering=True)
code = compile(req["code"], "<code>", "exec")
try:
    exec(code, {"__name__": "__main__"})
except SystemExit:
    raise
except BaseException:
    import traceback
    e = sys.exc_info()
    traceback.print_exception(e[0], e[1], e[2].tb_next)
    sys.stdout.flush()
    os._exit(1)
PY
    cp "$T/runner/runner.py" "$T/runner/permissive.py"
}

# The profile: minimal, as a policy.
write_profile() {
    cat > "$T/minimal.yaml" <<'EOF2'
version: 1
name: minimal
description: Standard library only, no files, no network (test copy).
mode: enforce
isolation: optional
files:
  read:
    allow: [/usr/**, /lib/**, /lib64/**, /etc/**, /tmp/**, /dev/null, /dev/urandom, /proc/self/**, "**"]
    deny: []
  write:
    allow: [/tmp/**, /dev/null]
    deny: []
  exec:
    allow: [/usr/bin/python3*]
  max_write_bytes: 16MiB
network:
  connect: {allow: [], deny: []}
  bind: {allow: [], deny: []}
limits:
  memory: 512MiB
  cpu: 60s
  processes: 64
  open_files: 256
env:
  pass: []
  set: {}
EOF2
    # Once the loader parses serve: (policy_serve), the profile says it;
    # until then a policy named minimal gets SERVE.md's values.
    cp "$T/minimal.yaml" "$T/probe.yaml"
    cat >> "$T/probe.yaml" <<'EOF2'
serve:
  allowed_imports: [collections, csv, datetime, decimal, fractions, functools, itertools, json,
                    math, operator, random, re, statistics, string, textwrap, typing]
  stages: {ast_scan: enforce}
  runtime_hooks: enforce
EOF2
    if sbx-policy check "$T/probe.yaml" >/dev/null 2>&1; then
        mv "$T/probe.yaml" "$T/minimal.yaml"
    fi
}

SOCK=
# serve [ARGS...]: starts sbx-serve on a unix socket with the test runner
# (RUNNER=permissive.py for the permissive one); waits until it answers.
serve() {
    write_runner
    write_profile
    SOCK="$SBX_RUNTIME_DIR/serve.sock"   # short: socket paths are at most 108 bytes
    # The test runner has no zygote mode: a pool of fresh sandboxes (the
    # fork server is tested with the real runner, tests/serve/api.sh).
    SBX_SERVE_RUNNER="$T/runner/${RUNNER:-runner.py}" \
        sbx-serve --listen "unix:$SOCK" --profile "$T/minimal.yaml" --fork-server off "$@" \
        2>"$T/serve.log" &
    SERVE_PID=$!
    i=0
    until curl -sf --unix-socket "$SOCK" http://x/healthz >/dev/null 2>&1; do
        kill -0 $SERVE_PID 2>/dev/null || { cat "$T/serve.log" >&2; fail "sbx-serve did not start"; return 1; }
        [ $i -lt 600 ] || { cat "$T/serve.log" >&2; fail "sbx-serve did not answer"; return 1; }
        sleep 0.1; i=$((i + 1))
    done
    trap 'kill $SERVE_PID 2>/dev/null || true; wait $SERVE_PID 2>/dev/null || true; stop_daemon' EXIT
}

# post JSON [CURL ARGS...]: POST /execute; prints the body, then a last
# line "HTTP STATUS".
post() {
    body=$1; shift
    curl -s --unix-socket "$SOCK" -w '\nHTTP %{http_code}' -H 'Content-Type: application/json' \
        "$@" -X POST --data-binary "$body" http://x/execute
}
status_of() { printf '%s\n' "$1" | tail -n 1 | cut -d' ' -f2; }
body_of() { printf '%s\n' "$1" | sed '$d'; }
# js BODY EXPR: evaluates the python expression EXPR with d = the JSON.
js() { printf '%s' "$1" | python3 -c "import json,sys; d=json.load(sys.stdin); print($2)"; }

test_serve_answers_health_profile_and_a_run_with_exactly_the_four_keys() {
    serve
    h=$(curl -s -D "$T/hdr" --unix-socket "$SOCK" http://x/healthz)
    assert_eq "$h" '{"status":"ok"}'
    grep -qi '^X-Request-Id: [0-9a-f]\{16\}' "$T/hdr" || fail "no request id: $(cat "$T/hdr")"
    p=$(curl -s --unix-socket "$SOCK" http://x/profile)
    assert_eq "$(js "$p" 'd["name"], len(d["allowed_imports"]), d["allowed_imports"] == sorted(d["allowed_imports"]), sorted(d)')" \
        "minimal 16 True ['allowed_imports', 'blocklist_entries', 'description', 'name', 'scan_stages']"
    r=$(post '{"code":"print(1)"}' -D "$T/hdr2")
    assert_eq "$(status_of "$r")" 200
    assert_eq "$(body_of "$r")" '{"stdout":"1\n","stderr":"","exit_code":0,"timed_out":false}'
    rid=$(sed -n 's/^X-Request-Id: \([0-9a-f]*\).*/\1/ip' "$T/hdr2")
    [ -n "$rid" ] || fail "no request id on /execute"
    grep -q " $rid POST /execute 200 " "$T/serve.log" || fail "no access log line: $(cat "$T/serve.log")"
    assert_eq "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$SOCK" http://x/nope)" 404
    assert_eq "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$SOCK" http://x/execute)" 405
    m=$(curl -s --unix-socket "$SOCK" http://x/metrics)
    assert_contains "$m" 'sbx_serve_requests_total{code="200"}'
    assert_contains "$m" 'sbx_serve_execute_duration_seconds_count 1'
    assert_contains "$m" 'sbx_serve_executions_running 0'
}

test_serve_answers_422_for_malformed_requests_and_400_for_blank_code() {
    serve
    for b in '{"code":' '[1]' '{}' '{"code":1}' '{"code":"x","timeout":0}' \
             '{"code":"x","timeout":31}' '{"code":"x","timeout":"2"}' '{"code":"x","timeout":-1}'; do
        r=$(post "$b")
        assert_eq "$(status_of "$r")" 422 "status for $b"
        assert_eq "$(js "$(body_of "$r")" 'type(d["detail"]).__name__, len(d["detail"]) > 0, list(d)')" \
            "list True ['detail']" "422 body for $b"
    done
    r=$(post '{"code":1,"timeout":99}')
    assert_eq "$(js "$(body_of "$r")" '[x["loc"][-1] for x in d["detail"]]')" "['code', 'timeout']"
    r=$(post '{"code":"  \n\t "}')
    assert_eq "$(status_of "$r")" 400
    assert_eq "$(body_of "$r")" '{"error":"No code provided"}'
    r=$(post '{"code":"print(2)","extra":true,"timeout":30}')
    assert_eq "$(status_of "$r")" 200 "unknown fields are ignored"
}

test_serve_rejects_failing_code_with_every_violation_in_source_order() {
    serve
    r=$(post '{"code":"import os\nx = 1\neval(\"1\")\nimport socket"}')
    assert_eq "$(status_of "$r")" 400
    assert_eq "$(body_of "$r")" '{"error":"Code validation failed","violations":["Line 1: import of '"'os'"' is not allowed (not in allowed imports)","Line 3: call to '"'eval()'"' is not allowed","Line 4: import of '"'socket'"' is not allowed (not in allowed imports)"]}'
    r=$(post '{"code":"def f(:\n"}')
    assert_eq "$(status_of "$r")" 400
    assert_contains "$(body_of "$r")" 'SyntaxError: '
    # The rejection is a row of the validator's agent, with the code's hash.
    sha=$(printf 'import os\nx = 1\neval("1")\nimport socket' | sha256sum | cut -d' ' -f1)
    sleep 0.5
    expect_row op=exec decision=deny "target~sha256:$sha" "reason~verdict rejected"
}

test_serve_keeps_exit_codes_tracebacks_and_the_exact_timeout_text() {
    serve
    r=$(body_of "$(post '{"code":"x = 1\n1/0"}')")
    assert_eq "$(js "$r" 'd["exit_code"], d["timed_out"], "File \"<code>\", line 2" in d["stderr"], d["stderr"].splitlines()[-1]')" \
        "1 False True ZeroDivisionError: division by zero"
    r=$(body_of "$(post '{"code":"raise SystemExit(3)"}')")
    assert_eq "$(js "$r" 'd["exit_code"]')" 3
    r=$(body_of "$(post '{"code":"print(\"before\")\nwhile True: pass","timeout":1}')")
    assert_eq "$r" '{"stdout":"before\n","stderr":"Execution timed out after 1.0s","exit_code":-9,"timed_out":true}'
    r=$(body_of "$(post '{"code":"while True: pass","timeout":0.25}')")
    assert_eq "$(js "$r" 'd["stderr"]')" "Execution timed out after 0.25s"
}

test_serve_caps_each_stream_at_51200_bytes_exactly() {
    serve
    for n in 51199 51200 51201; do
        r=$(body_of "$(post "{\"code\":\"print('x' * ($n - 1))\"}")")
        want=$([ $n -le 51200 ] && echo "$n False" || echo "51200 True")
        assert_eq "$(js "$r" 'len(d["stdout"].replace("\n[output truncated at 50 KB]", "")), d["stdout"].endswith("\n[output truncated at 50 KB]")')" \
            "$want" "stdout of $n bytes"
        # SystemExit(TEXT) prints TEXT and a newline on stderr.
        r=$(body_of "$(post "{\"code\":\"raise SystemExit('y' * ($n - 1))\"}")")
        assert_eq "$(js "$r" 'len(d["stderr"].replace("\n[output truncated at 50 KB]", "")), d["stderr"].endswith("\n[output truncated at 50 KB]"), d["exit_code"]')" \
            "$want 1" "stderr of $n bytes"
    done
}

test_serve_memory_stays_bounded_under_a_1_gb_print_flood() {
    RUNNER=permissive.py serve
    rss() { awk '/^VmRSS/ { print $2 }' /proc/$SERVE_PID/status; }
    before=$(rss)
    r=$(body_of "$(post '{"code":"s = \"x\" * (1 << 20)\nfor i in range(1024): print(s)","timeout":30}')")
    after=$(rss)
    assert_eq "$(js "$r" 'len(d["stdout"]), d["stdout"].endswith("[output truncated at 50 KB]")')" "51228 True"
    [ $((after - before)) -lt 20000 ] || fail "RSS grew from $before kB to $after kB"
}

test_serve_the_timeout_kills_a_grandchild_and_nothing_stays_for_the_next_request() {
    RUNNER=permissive.py serve
    post '{"code":"import os, time\nif os.fork() == 0:\n    time.sleep(0.5)\n    open(\"/tmp/marker\", \"w\").write(\"x\")\n    time.sleep(60)\nelse:\n    print(os.getpid(), flush=True)\n    while True: pass","timeout":1}' >"$T/r1"
    assert_eq "$(js "$(body_of "$(cat "$T/r1")")" 'd["timed_out"], d["stdout"]')" "True 2"
    sleep 1
    # The sandbox's pid namespace is gone: no python of it is left.
    pgrep -f "$T/runner/permissive.py exec" >"$T/left" || true
    n=$(wc -l <"$T/left")
    kill -0 $SERVE_PID || fail "server died"
    # The next request sees a fresh /tmp, its own pid 1 tree, no marker.
    # (sbx's runtime directory, when it lies under /tmp, shows there as an
    # empty mount point: sbx-guard's agents see the same.)
    r=$(body_of "$(post '{"code":"import os\nprint(os.path.exists(\"/tmp/marker\"), [f for f in os.listdir(\"/tmp\") if not f.startswith(\"sbxr.\")], os.getpid())"}')")
    assert_eq "$(js "$r" 'd["stdout"].strip()')" "False [] 2"
    # Only the warm sandboxes' runners remain (the pool, not the killed one).
    [ "$n" -le 4 ] || fail "$n runners left: $(cat "$T/left")"
}

test_serve_the_sandbox_has_no_network_and_an_empty_environment() {
    RUNNER=permissive.py serve
    r=$(body_of "$(post '{"code":"import os, socket\nprint(sorted(k for k in os.environ if not k.startswith((\"SBX_\", \"LD_PRELOAD\"))))\ntry:\n    socket.create_connection((\"127.0.0.1\", 1), timeout=2)\nexcept OSError as e:\n    print(\"refused\", e.errno)\nprint(open(\"/etc/hostname\").read() if False else \"\")"}')")
    assert_contains "$(js "$r" 'd["stdout"]')" "['HOME', 'LANG', 'PATH', 'TMPDIR']"
    assert_contains "$(js "$r" 'd["stdout"]')" "refused 13"   # EACCES: seccomp refuses the socket
    # Invalid UTF-8 becomes U+FFFD (one per invalid sequence), the rest is kept.
    r=$(body_of "$(post '{"code":"import sys\nsys.stdout.buffer.write(b\"a\\xffb\\xe2\\x82\")"}')")
    assert_eq "$(js "$r" 'ascii(d["stdout"])')" "'a\\ufffdb\\ufffd'"
}

test_serve_queue_overflow_answers_503_with_retry_after() {
    serve --max-concurrent 1 --queue 0 --pool 1
    post '{"code":"while True: pass","timeout":3}' >"$T/long" &
    lp=$!
    sleep 1
    r=$(post '{"code":"print(1)"}' -D "$T/hdr")
    assert_eq "$(status_of "$r")" 503
    grep -qi '^Retry-After: 1' "$T/hdr" || fail "no Retry-After: $(cat "$T/hdr")"
    wait $lp
    assert_eq "$(js "$(body_of "$(cat "$T/long")")" 'd["timed_out"]')" True
    m=$(curl -s --unix-socket "$SOCK" http://x/metrics)
    assert_contains "$m" 'sbx_serve_requests_total{code="503"} 1'
}

test_serve_refuses_a_body_over_the_limit_with_413() {
    serve
    python3 -c 'import json; print(json.dumps({"code": "#" * (1 << 21)}))' >"$T/big.json"
    assert_eq "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$SOCK" -X POST \
        --data-binary @"$T/big.json" http://x/execute)" 413
    assert_eq "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$SOCK" http://x/healthz)" 200
}

test_serve_requires_the_bearer_token_when_given_one_but_not_on_healthz() {
    echo "s3cret-token-123" >"$T/token"
    serve --token-file "$T/token"
    assert_eq "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$SOCK" http://x/healthz)" 200
    assert_eq "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$SOCK" http://x/profile)" 401
    r=$(post '{"code":"print(1)"}' -H 'Authorization: Bearer wrong-token-1234')
    assert_eq "$(status_of "$r")" 401
    r=$(post '{"code":"print(1)"}' -H 'Authorization: Bearer s3cret-token-123')
    assert_eq "$(status_of "$r")" 200
}

test_serve_sbx_kill_ends_a_running_request_and_the_audit_store_has_its_rows() {
    serve
    post '{"code":"print(\"started\", flush=True)\nwhile True: pass","timeout":20}' -D "$T/hdr" >"$T/r" &
    rp=$!
    i=0
    until rows --op exec 2>/dev/null | grep -q '"decision":"allow"'; do
        [ $i -lt 100 ] || fail "the request did not start"
        sleep 0.1; i=$((i + 1))
    done
    agent=$(rows --op exec | python3 -c 'import json,sys; print([json.loads(l)["agent"] for l in sys.stdin if "allow" in l][-1])')
    out=$(sbx-kill --reason "test says stop" "$agent")
    assert_contains "$out" "killed $agent"
    wait $rp
    r=$(body_of "$(cat "$T/r")")
    assert_eq "$(js "$r" 'd["stdout"], d["exit_code"], d["timed_out"]')" "started
 -9 False"
    assert_contains "$(js "$r" 'd["stderr"]')" "test says stop"
    rid=$(sed -n 's/^X-Request-Id: \([0-9a-f]*\).*/\1/ip' "$T/hdr")
    assert_eq "serve-$rid" "$agent" "the request id names the agent"
    sha=$(printf 'print("started", flush=True)\nwhile True: pass' | sha256sum | cut -d' ' -f1)
    sleep 0.5
    expect_row agent="$agent" op=exec "target~sha256:$sha" "reason~verdict ok"
    expect_row agent="$agent" op=exit "target~exit -9"
    expect_row agent="$agent" op=open-read layer=guard
    # --all reaches every sandbox, idle ones too; the service goes on.
    sbx-kill --all >/dev/null
    r=$(post '{"code":"print(5)"}')
    assert_eq "$(body_of "$r")" '{"stdout":"5\n","stderr":"","exit_code":0,"timed_out":false}'
}

test_serve_sigterm_lets_the_running_request_finish_then_stops() {
    serve
    post '{"code":"print(1, flush=True)\nwhile True: pass","timeout":2}' >"$T/r" &
    rp=$!
    sleep 0.7
    kill -TERM $SERVE_PID
    wait $rp
    assert_eq "$(js "$(body_of "$(cat "$T/r")")" 'd["timed_out"], d["stdout"]')" "True 1"
    rc=0; wait $SERVE_PID || rc=$?
    assert_eq "$rc" 0 "exit status after SIGTERM"
    assert_contains "$(cat "$T/serve.log")" "sbx-serve: stopped"
}

test_serve_killed_with_sigkill_leaves_no_sandbox_behind() {
    serve
    assert_eq "$(status_of "$(post '{"code":"print(1)"}')")" 200
    [ "$(pgrep -f "$T/runner/runner.py" | wc -l)" -gt 0 ] || fail "no warm sandbox to look for"
    kill -KILL $SERVE_PID
    i=0
    while pgrep -f "$T/runner/runner.py" >/dev/null; do
        [ $i -lt 100 ] || fail "runners left: $(pgrep -af "$T/runner/runner.py")"
        sleep 0.1; i=$((i + 1))
    done
}

test_serve_verify_passes_against_sbx_serve_itself() {
    serve
    out=$(sbx-serve --verify "unix:$SOCK") || fail "verify failed: $out"
    assert_contains "$out" "6 of 6 checks passed"
    # Against nothing: every check fails, exit 1.
    rc=0; out=$(sbx-serve --verify "unix:$T/none.sock") || rc=$?
    assert_eq "$rc" 1
    assert_contains "$out" "0 of 6 checks passed"
}

run_tests
