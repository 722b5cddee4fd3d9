#!/bin/sh
# sbx-serve over real HTTP (curl, python3's json and urllib) against
# started services: every endpoint of SERVE.md, the static rules with their
# exact messages, the output cap, the timeout, exit statuses, isolation
# between requests, bounds (concurrency, body size, 422s), the runtime
# hooks, escapes held by the kernel layer alone (a profile whose Python
# guards only observe), the audit rows, sbx-kill and --verify.
#
# Services are started once for the file, one per profile (minimal,
# data-science, and two written here: "hooks" with ast_scan observing and
# the runtime hooks on, "observe" with every Python guard observing), on
# free loopback ports, and stopped at the end.  Without build/bin/sbx-serve
# every test is a skip.
. "$(dirname "$0")/../lib.sh"

PY=/usr/bin/python3
DRIVE="$SBX_ROOT/tests/serve/drive_runner.py"

tests_of_this_file() { grep -o '^test_[a-zA-Z0-9_]*' "$0" | sort -u; }
if [ ! -x "$BIN/sbx-serve" ]; then
    for t in $(tests_of_this_file); do echo "skip - $t: sbx-serve not built"; done
    exit 0
fi

# ---- the services -----------------------------------------------------------

if [ -z "${SBX_TEST_TMP:-}" ]; then
    mkdir -p "$SBX_BUILD/test-tmp"
    SBX_TEST_TMP=$(mktemp -d "$SBX_BUILD/test-tmp/one.XXXXXX")
fi
export SBX_TEST_TMP
SRV="$SBX_TEST_TMP/servers"
mkdir -p "$SRV/state"
SERVE_RT=$(mktemp -d /tmp/sbxs.XXXXXX)     # short: sockets live here
SERVE_DB="$SRV/state/audit.db"

free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# serve_start NAME ARGS...: sbx-serve ARGS on a free port, with the shared
# runtime dir and store and a variable of its own that no request may see;
# $SRV/NAME.url once /healthz answers, else $SRV/NAME.log says why.
serve_start() {
    name=$1; shift
    port=$(free_port)
    SBX_RUNTIME_DIR="$SERVE_RT" SBX_AUDIT_DB="$SERVE_DB" SBX_SERVE_TEST_SECRET=leaked-from-the-service \
        "$BIN/sbx-serve" --listen "127.0.0.1:$port" "$@" >"$SRV/$name.log" 2>&1 &
    echo $! >"$SRV/$name.pid"
    i=0
    while [ $i -lt 600 ]; do
        if curl -sf --max-time 2 "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; then
            echo "http://127.0.0.1:$port" >"$SRV/$name.url"
            return 0
        fi
        kill -0 "$(cat "$SRV/$name.pid")" 2>/dev/null || return 1
        sleep 0.1; i=$((i + 1))
    done
    return 1
}

serve_stop_all() {
    for pf in "$SRV"/*.pid; do
        [ -f "$pf" ] || continue
        pid=$(cat "$pf"); rm -f "$pf"
        kill -TERM "$pid" 2>/dev/null || continue
        i=0
        while kill -0 "$pid" 2>/dev/null && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
        kill -KILL "$pid" 2>/dev/null || true
    done
    SBX_RUNTIME_DIR="$SERVE_RT" stop_daemon
    rm -rf "$SERVE_RT"
}
trap serve_stop_all EXIT INT TERM

# A profile FILE: minimal's, with its stages and runtime hooks replaced
# (written in full so that it does not depend on extends:).
profile_variant() { # NAME STAGES HOOKS
    sed -e "s/^name: minimal/name: $1/" \
        -e "s/^  stages: {ast_scan: enforce}/  stages: $2/" \
        -e "s/^  runtime_hooks: enforce/  runtime_hooks: $3/" \
        "$POLICIES/serve/minimal.yaml" >"$SRV/$1.yaml"
}
profile_variant hooks "{ast_scan: observe}" enforce
profile_variant observe "{ast_scan: observe}" observe

serve_start minimal --profile minimal --max-concurrent 2 || true
serve_start hooks --profile "$SRV/hooks.yaml" --max-concurrent 2 || true
serve_start observe --profile "$SRV/observe.yaml" --max-concurrent 2 || true
if "$PY" -c 'import numpy, pandas, scipy' 2>/dev/null; then
    serve_start data-science --profile data-science --max-concurrent 1 || true
else
    echo "numpy, pandas or scipy missing (make deps)" >"$SRV/data-science.log"
fi

# need NAME: URL of that service.  A service that did not start fails the
# test (a defect), unless what it needs is not installed here (a skip).
need() {
    if [ ! -f "$SRV/$1.url" ]; then
        if grep -q "missing (make deps)" "$SRV/$1.log" 2>/dev/null; then
            skip "sbx-serve --profile $1 cannot start here: $(tail -c 300 "$SRV/$1.log" | tr '\n' ' ')"
        fi
        echo "FAIL: sbx-serve --profile $1 did not start: $(tail -c 300 "$SRV/$1.log" | tr '\n' ' ')" >&2
        exit 1
    fi
    URL=$(cat "$SRV/$1.url")
}

# ---- requests ---------------------------------------------------------------

# post URL FILE: POSTs FILE as JSON; the answer in $T/status, $T/hdr, $T/body.
post() {
    curl -sS -o "$T/body" -D "$T/hdr" -w '%{http_code}' -H 'Content-Type: application/json' \
        --data-binary @"$2" --max-time 90 "$1" >"$T/status"
}
# execute CODE [TIMEOUT]: POST $URL/execute {"code": CODE, "timeout": TIMEOUT}.
execute() {
    "$PY" -c 'import json, sys
d = {"code": sys.argv[1]}
if len(sys.argv) > 2:
    d["timeout"] = json.loads(sys.argv[2])
sys.stdout.write(json.dumps(d))' "$@" >"$T/req.json"
    post "$URL/execute" "$T/req.json"
}
get() { curl -sS -o "$T/body" -D "$T/hdr" -w '%{http_code}' --max-time 30 "$URL$1" >"$T/status"; }
status() { cat "$T/status"; }
# body_is EXPR: the Python expression EXPR holds of the answer `b`.
body_is() {
    "$PY" -c 'import json, sys
raw = open(sys.argv[1], "rb").read()
try:
    b = json.loads(raw)
except ValueError:
    b = raw.decode("utf-8", "replace")
ok = eval(sys.argv[2])
if not ok:
    print("answer", json.dumps(b)[:3000], "fails:", sys.argv[2], file=sys.stderr)
sys.exit(0 if ok else 1)' "$T/body" "$1"
}
expect_status() { assert_eq "$(status)" "$1" "HTTP status" || { head -c 2000 "$T/body" >&2; return 1; }; }
RESULT_KEYS='sorted(b) == ["exit_code", "stderr", "stdout", "timed_out"]'

# ---- the endpoints ----------------------------------------------------------

test_healthz_answers_status_ok() {
    need minimal
    get /healthz
    expect_status 200
    body_is 'b == {"status": "ok"}'
}

test_profile_names_the_profile_its_sorted_imports_blocklist_and_stages() {
    need minimal
    get /profile
    expect_status 200
    body_is 'set(b) >= {"name", "description", "allowed_imports", "blocklist_entries", "scan_stages"}'
    body_is 'b["name"] == "minimal" and b["blocklist_entries"] == 0'
    body_is 'b["allowed_imports"] == sorted("collections csv datetime decimal fractions functools itertools json math operator random re statistics string textwrap typing".split())'
    body_is 'set(b["scan_stages"]) == {"pre", "post"} and "ast_scan" in b["scan_stages"]["pre"] + b["scan_stages"]["post"]'
}

test_data_science_profile_has_19_imports_and_22_blocked_pairs() {
    need data-science
    get /profile
    expect_status 200
    body_is 'b["name"] == "data-science" and b["blocklist_entries"] == 22 and len(b["allowed_imports"]) == 19'
    body_is 'b["allowed_imports"] == sorted(b["allowed_imports"]) and {"numpy", "pandas", "scipy", "json"} <= set(b["allowed_imports"])'
    body_is '{"ast_scan", "blocklist_audit"} <= set(b["scan_stages"]["pre"] + b["scan_stages"]["post"])'
}

test_execute_answers_exactly_the_four_keys() {
    need minimal
    execute 'import math
print(f"pi = {math.pi}")'
    expect_status 200
    body_is "$RESULT_KEYS"
    body_is 'b == {"stdout": "pi = 3.141592653589793\n", "stderr": "", "exit_code": 0, "timed_out": False}'
    grep -qi '^x-request-id: ..' "$T/hdr" || fail "no X-Request-Id header: $(cat "$T/hdr")"
}

test_unknown_fields_are_ignored_and_the_timeout_may_be_fractional_up_to_30() {
    need minimal
    printf '{"code": "print(1)", "language": "python", "timeout": 30}' >"$T/req.json"
    post "$URL/execute" "$T/req.json"
    expect_status 200 && body_is 'b["stdout"] == "1\n"'
    printf '{"code": "print(2)", "timeout": 0.5}' >"$T/req.json"
    post "$URL/execute" "$T/req.json"
    expect_status 200 && body_is 'b["stdout"] == "2\n"'
}

test_blank_code_is_400_no_code_provided() {
    need minimal
    for c in '' '   ' '
	 
'; do
        execute "$c"
        expect_status 400
        body_is 'b == {"error": "No code provided"}'
    done
}

test_malformed_json_missing_code_wrong_types_and_bad_timeouts_are_422() {
    need minimal
    for body in '{' 'not json' '[]' '"print(1)"' '{}' '{"timeout": 2}' '{"code": 1}' '{"code": null}' \
                '{"code": ["print(1)"]}' '{"code": "print(1)", "timeout": 0}' \
                '{"code": "print(1)", "timeout": -1}' '{"code": "print(1)", "timeout": 30.5}' \
                '{"code": "print(1)", "timeout": 31}' '{"code": "print(1)", "timeout": "soon"}' \
                '{"code": "print(1)", "timeout": null}'; do
        printf '%s' "$body" >"$T/req.json"
        post "$URL/execute" "$T/req.json"
        assert_eq "$(status)" 422 "status for $body" || return 1
        body_is 'isinstance(b, dict) and isinstance(b.get("detail"), list) and len(b["detail"]) > 0' || return 1
    done
}

test_a_body_too_large_is_413() {
    need minimal
    "$PY" -c 'import json; print(json.dumps({"code": "x = 1\n" + "#" * (8 << 20)}))' >"$T/req.json"
    post "$URL/execute" "$T/req.json"
    expect_status 413
}

test_metrics_are_prometheus_text() {
    need minimal
    get /metrics
    expect_status 200
    grep -q '^# TYPE ' "$T/body" || fail "no # TYPE line: $(head -c 500 "$T/body")"
}

# ---- the static check through the API -----------------------------------------

test_each_static_rule_answers_400_with_its_exact_message() {
    need minimal
    "$PY" "$DRIVE" api "$URL" >"$T/api.out" 2>&1 <<'EOF' || { cat "$T/api.out" >&2; return 1; }
import math
print(f"pi = {math.pi}")
=>
----
import os
=>
Line 1: import of 'os' is not allowed (not in allowed imports)
----
from . import x
=>
Line 1: import of '.' is not allowed (not in allowed imports)
----
eval("1+1")
=>
Line 1: call to 'eval()' is not allowed
----
f = getattr
=>
Line 1: reference to 'getattr' is not allowed
----
x = (1).__class__
=>
Line 1: access to '__class__' attribute is not allowed
----
y = [__builtins__]
=>
Line 1: reference to '__builtins__' is not allowed
----
d = {}
d["__globals__"]
=>
Line 2: subscript access with key '__globals__' is not allowed (blocked attribute name)
----
s = "__subclasses__"
=>
Line 1: string literal '__subclasses__' matches a blocked attribute name
----
g = (i for i in [1])
g.gi_frame
g["f_locals"]
=>
Line 2: access to 'gi_frame' attribute is not allowed (frame/generator introspection)
Line 3: subscript access with key 'f_locals' is not allowed (frame introspection)
----
import random
random._os
=>
Line 2: access to '_os' attribute is not allowed (module reference)
----
import string
string.Formatter().vformat("{0}", [1], {})
=>
Line 2: access to 'vformat' attribute is not allowed (dangerous function)
----
subprocess.run(["id"])
=>
Line 1: call to 'subprocess.run()' is not allowed (module 'subprocess' is blocked)
----
os.fork()
=>
Line 1: call to 'os.fork()' is not allowed
----
import operator
operator.attrgetter("__globals__")
operator.methodcaller("__reduce__")
=>
Line 2: dynamic attribute access to '__globals__' via attrgetter() is not allowed
Line 3: dynamic access to dunder '__reduce__' via methodcaller() is not allowed
----
t = "{0.__globals__}"
=>
Line 1: string contains format spec accessing a blocked attribute
----
k = "AKIAABCDEFGHIJKLMNOP"
p = "password = 'hunter2hunter2hunter2'"
m = "-----BEGIN PRIVATE KEY-----"
h = "d41d8cd98f00b204e9800998ecf8427e"
=>
Line 1: string literal matches AWS access key ID pattern
Line 2: string literal matches generic secret assignment pattern
Line 3: string literal matches PEM private key pattern
Line 4: string literal matches high-entropy hex string pattern
----
p = "../../etc/passwd"
=>
Line 1: string literal contains path traversal sequence ('../')
----
uid = 1
q1 = f"SELECT * FROM t WHERE id = {uid}"
q2 = "DELETE FROM t WHERE id = %s" % uid
q3 = "UPDATE t SET a = {}".format(uid)
=>
Line 2: potential SQL injection via f-string containing SQL keywords
Line 3: potential SQL injection via %-formatting containing SQL keywords
Line 4: potential SQL injection via .format() on a string containing SQL keywords
----
pickle.loads(b"")
shelve.open("db")
hashlib.md5(b"")
=>
Line 1: call to 'pickle.loads()' is unsafe deserialization
Line 2: call to 'shelve.open()' is unsafe deserialization
Line 3: call to 'hashlib.md5()' uses weak cryptography
----
import os
import subprocess
x = eval("1")
os.system("id")
print(().__class__.__bases__[0].__subclasses__())
=>
Line 1: import of 'os' is not allowed (not in allowed imports)
Line 2: import of 'subprocess' is not allowed (not in allowed imports)
Line 3: call to 'eval()' is not allowed
Line 4: call to 'os.system()' is not allowed
Line 5: access to '__class__' attribute is not allowed
Line 5: access to '__bases__' attribute is not allowed
Line 5: access to '__subclasses__' attribute is not allowed
----
def f(:
    pass
=>
SyntaxError: invalid syntax (line 1)
----
import os
print("a"
=>
SyntaxError: '(' was never closed (line 2)
EOF
}

test_the_data_science_blocklist_answers_400_with_its_messages() {
    need data-science
    "$PY" "$DRIVE" api "$URL" >"$T/api.out" 2>&1 <<'EOF' || { cat "$T/api.out" >&2; return 1; }
import pandas as pd
df = pd.read_pickle("x.pkl")
=>
Line 2: access to 'pandas.read_pickle' is blocked by profile
----
from pandas import read_sql
import numpy as np
np.ctypeslib
f = np.frompyfunc(abs, 1, 1)
=>
Line 1: access to 'pandas.read_sql' is blocked by profile
Line 3: access to 'numpy.ctypeslib' is blocked by profile
Line 4: access to 'numpy.frompyfunc' is blocked by profile
----
import numpy as np
import pandas as pd
print(pd.DataFrame({"a": np.arange(3)}).a.sum())
=>
EOF
    execute 'import numpy as np
print(np.arange(4).sum())'
    expect_status 200 && body_is 'b["stdout"] == "6\n" and b["exit_code"] == 0'
}

test_an_observed_stage_runs_the_code_anyway() {
    need observe
    execute 'x = eval("1+1")
print(x)'
    expect_status 200
    body_is 'b["stdout"] == "2\n" and b["exit_code"] == 0'
}

# ---- results ---------------------------------------------------------------------

test_each_stream_is_capped_at_51200_bytes_while_51200_itself_is_whole() {
    need minimal
    for n in 51199 51200 51201 200000; do
        execute "print(\"x\" * $n, end=\"\")"
        expect_status 200 || return 1
        if [ $n -le 51200 ]; then
            body_is "b[\"stdout\"] == \"x\" * $n and b[\"exit_code\"] == 0" || return 1
        else
            body_is 'b["stdout"] == "x" * 51200 + "\n[output truncated at 50 KB]"' || return 1
        fi
        # stderr: SystemExit("x" * (n - 1)) prints the text and a newline.
        execute "raise SystemExit(\"x\" * ($n - 1))"
        expect_status 200 || return 1
        if [ $n -le 51200 ]; then
            body_is "b[\"stderr\"] == \"x\" * ($n - 1) + \"\\n\" and b[\"exit_code\"] == 1" || return 1
        else
            body_is 'b["stderr"] == "x" * 51200 + "\n[output truncated at 50 KB]" and b["exit_code"] == 1' || return 1
        fi
    done
}

test_output_is_made_valid_utf8() {
    need observe
    execute 'import sys
sys.stdout.buffer.write(b"a\xffb\xc3\xa9")
sys.stdout.flush()'
    expect_status 200
    body_is 'b["stdout"] == "a\ufffdb\u00e9"'
}

test_a_timeout_answers_the_exact_text_minus_9_and_keeps_stdout() {
    need minimal
    execute 'print("before the loop")
while True:
    pass' 2
    expect_status 200
    body_is 'b == {"stdout": "before the loop\n", "stderr": "Execution timed out after 2.0s", "exit_code": -9, "timed_out": True}'
    execute 'while True: pass' 1.5
    body_is 'b["stderr"] == "Execution timed out after 1.5s" and b["timed_out"] is True'
    # The default timeout is 10 s, written 10.0.
    execute 'while True: pass'
    body_is 'b["stderr"] == "Execution timed out after 10.0s" and b["exit_code"] == -9'
}

test_exit_codes_follow_systemexit_and_exceptions() {
    need minimal
    execute 'raise SystemExit(7)'
    body_is 'b["exit_code"] == 7 and b["timed_out"] is False'
    execute 'raise SystemExit(None)'
    body_is 'b["exit_code"] == 0'
    execute 'raise SystemExit("bye")'
    body_is 'b["exit_code"] == 1 and b["stderr"] == "bye\n"'
    execute 'x = 1
y = 2
raise ValueError("boom")'
    body_is 'b["exit_code"] == 1 and "File \"<code>\", line 3" in b["stderr"] and "ValueError: boom" in b["stderr"]'
    body_is '"serve-runner" not in b["stderr"]'
}

test_a_grandchild_that_outlives_the_timeout_is_gone() {
    need observe
    mark="sbx-grandchild-$$-$(date +%s)"
    execute "import os, time
if os.fork() == 0:
    if os.fork() == 0:
        os.execv('/usr/bin/python3', ['python3', '-c', 'import time; time.sleep(60)', '$mark'])
    os._exit(0)
time.sleep(60)" 3 &
    cpid=$!
    i=0 seen=no
    while [ $i -lt 25 ]; do
        if pgrep -f "$mark" >/dev/null; then seen=yes; break; fi
        sleep 0.1; i=$((i + 1))
    done
    wait $cpid || true
    assert_eq "$seen" yes "the grandchild ran" || { cat "$T/body" >&2; return 1; }
    body_is 'b["timed_out"] is True and b["exit_code"] == -9'
    sleep 0.5
    if pgrep -f "$mark" >/dev/null; then fail "the grandchild survived: $(pgrep -af "$mark")"; fi
}

test_nothing_is_left_from_one_request_to_the_next() {
    need observe
    execute 'import os
open("/tmp/left-behind", "w").write("x")
os.environ["SBX_LEFT"] = "1"
remembered = 41
print(os.path.exists("/tmp/left-behind"))'
    body_is 'b["stdout"] == "True\n"'
    execute 'import os
print(os.path.exists("/tmp/left-behind"), os.environ.get("SBX_LEFT"), "remembered" in globals())
print(sorted(os.listdir("/tmp")), sorted(os.environ))'
    body_is 'b["stdout"].startswith("False None False\n")'
    body_is '"left-behind" not in b["stdout"] and "SBX_LEFT" not in b["stdout"]'
    body_is '"SBX_SERVE_TEST_SECRET" not in b["stdout"] and "leaked" not in b["stdout"]'
}

# ---- the fork server: what one request cannot reach of another ------------

test_a_module_changed_by_one_request_is_pristine_in_the_next() {
    need observe
    execute 'import json
json.dumps = lambda *a, **k: "poisoned"
print(json.dumps(1))'
    body_is 'b["stdout"] == "poisoned\n"'
    execute 'import json
print(json.dumps(1))'
    body_is 'b["stdout"] == "1\n"'
}

test_a_request_finds_nothing_of_its_childs_warm_up() {
    # A waiting child compiles a line and writes an empty string to its
    # stdout before its request comes (serve-runner.py _rehearse): the
    # code still starts in an empty namespace with nothing printed, and
    # its own first line is line 1 of its tracebacks.
    need observe
    execute 'print(sorted(k for k in globals() if not k.startswith("__")))
print(__name__)
raise ValueError("first")'
    body_is 'b["stdout"] == "[]\n__main__\n" and b["exit_code"] == 1'
    body_is 'b["stderr"].startswith("Traceback") and "line 3" in b["stderr"] and "rehearsal" not in b["stderr"]'
}

test_two_requests_at_once_do_not_share_tmp() {
    need observe
    mark="sbx-at-once-$$"
    "$PY" -c 'import json, sys
sys.stdout.write(json.dumps({"code": "import os, time\nopen(\"/tmp/%s\", \"w\").write(\"x\")\ntime.sleep(4)\nprint(os.path.exists(\"/tmp/%s\"))" % (sys.argv[1], sys.argv[1])}))' "$mark" >"$T/a.json"
    curl -sS -o "$T/a.body" -H 'Content-Type: application/json' --data-binary @"$T/a.json" \
        --max-time 60 "$URL/execute" &
    apid=$!
    sleep 1.5
    execute "import os
print(os.path.exists('/tmp/$mark'))"
    wait $apid
    body_is 'b["stdout"] == "False\n"'
    "$PY" -c 'import json, sys; b = json.load(open(sys.argv[1])); sys.exit(0 if b["stdout"] == "True\n" else 1)' "$T/a.body" ||
        { cat "$T/a.body" >&2; fail "the first request lost its own file"; }
}

test_a_request_cannot_signal_or_inspect_the_fork_server_nor_leave_its_group() {
    need observe
    execute 'import os
for what, f in (("signal", lambda: os.kill(os.getppid(), 0)),
                ("signal init", lambda: os.kill(1, 0)),
                ("environ", lambda: open(f"/proc/{os.getppid()}/environ", "rb").read()),
                ("setsid", os.setsid),
                ("setpgid", lambda: os.setpgid(0, 0))):
    try:
        f()
        print(what, "allowed")
    except PermissionError:
        print(what, "refused")'
    body_is 'b["stdout"] == "signal refused\nsignal init refused\nenviron refused\nsetsid refused\nsetpgid refused\n"'
}

test_concurrency_beyond_the_cap_is_refused_with_retry_after() {
    serve_start cap --profile minimal --max-concurrent 1 --queue 0 || {
        fail "sbx-serve --max-concurrent 1 --queue 0 did not start: $(tail -c 300 "$SRV/cap.log" | tr '\n' ' ')"
        return 1
    }
    URL=$(cat "$SRV/cap.url")
    printf '{"code": "while True: pass", "timeout": 8}' >"$T/long.json"
    curl -sS -o "$T/long.body" -w '%{http_code}' -H 'Content-Type: application/json' \
        --data-binary @"$T/long.json" --max-time 60 "$URL/execute" >"$T/long.status" &
    cpid=$!
    # Once the long request runs, the next one finds no slot and no queue.
    i=0 st=none
    while [ $i -lt 20 ]; do
        sleep 0.5
        execute 'print(1)'
        st=$(status)
        case "$st" in 429|503) break ;; esac
        i=$((i + 1))
    done
    case "$st" in 429|503) ;; *) fail "status $st beyond the cap: $(cat "$T/body")"; wait $cpid; return 1 ;; esac
    grep -qi '^retry-after: [0-9]' "$T/hdr" || fail "no Retry-After: $(cat "$T/hdr")"
    wait $cpid
    assert_eq "$(cat "$T/long.status")" 200 "the running request"
}

# ---- the runtime hooks (ast_scan observing, hooks on) --------------------------------

test_the_import_hook_refuses_imports_outside_the_list_and_lets_the_library_import() {
    need hooks
    execute 'import os'
    expect_status 200
    body_is 'b["exit_code"] == 1 and "ImportError: import of '"'"'os'"'"' blocked by sandbox" in b["stderr"]'
    execute 'import statistics, datetime
print(statistics.mean([1, 2, 3]), datetime.datetime.strptime("2024", "%Y").year)'
    body_is 'b["stdout"] == "2 2024\n" and b["exit_code"] == 0'
}

test_open_breakpoint_and_input_are_removed_and_getters_refuse_dunders() {
    need hooks
    for c in 'open("/etc/hostname")' 'breakpoint()' 'input()'; do
        execute "$c"
        body_is 'b["exit_code"] == 1 and "NameError" in b["stderr"]' || return 1
    done
    execute 'import operator
print(operator.attrgetter("real")(5))
operator.attrgetter("__cl" + "ass__")'
    body_is 'b["stdout"] == "5\n" and "RuntimeError: dunder attribute access blocked by sandbox" in b["stderr"]'
    execute 'import operator
operator.methodcaller("__reduce__")'
    body_is '"RuntimeError: dunder attribute access blocked by sandbox" in b["stderr"]'
}

# ---- escapes the kernel layer holds alone (every Python guard observing) ----------

test_reading_etc_shadow_is_refused() {
    need observe
    [ -r /etc/shadow ] || skip "this machine has no readable /etc/shadow"
    execute 'print(open("/etc/shadow").read())'
    body_is 'b["exit_code"] == 1 and "root:" not in b["stdout"]'
    body_is '"PermissionError" in b["stderr"] or "FileNotFoundError" in b["stderr"]'
}

test_a_socket_to_the_loopback_is_refused() {
    need observe
    port=${URL##*:}
    execute "import socket
s = socket.socket()
s.settimeout(3)
s.connect(('127.0.0.1', $port))
print('connected')"
    body_is 'b["exit_code"] == 1 and "connected" not in b["stdout"]'
}

test_a_fork_bomb_is_bounded_and_the_service_lives_on() {
    # As root too: RLIMIT_NPROC does not hold host root, so sbx-serve puts
    # each request in a pids cgroup of its own (docs/serve.md).
    need observe
    execute 'import os, time
n = 0
while n < 5000:
    try:
        pid = os.fork()
    except OSError as e:
        print("bounded", type(e).__name__)
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    n += 1
print(n < 5000)' 15
    body_is '"bounded" in b["stdout"] and b["stdout"].endswith("True\n")'
    execute 'print("alive")'
    body_is 'b["stdout"] == "alive\n"'
}

test_filling_tmp_is_bounded() {
    need observe
    execute 'chunk = b"x" * (1 << 20)
total = 0
try:
    for i in range(64):
        with open(f"/tmp/fill{i}", "wb") as f:
            for _ in range(1024):
                f.write(chunk)
                total += len(chunk)
except OSError as e:
    print("stopped", type(e).__name__, total >> 20)' 25
    body_is '"stopped" in b["stdout"]'
    execute 'print("alive")'
    body_is 'b["stdout"] == "alive\n"'
}

test_a_2gib_allocation_fails() {
    need observe
    execute 'x = bytearray(2 * 1024 ** 3)
print("allocated")'
    body_is 'b["exit_code"] != 0 and "allocated" not in b["stdout"] and "MemoryError" in b["stderr"]'
}

# ---- what sbx adds: audit rows, sbx-kill, --verify ------------------------------

test_each_request_leaves_an_audit_row_with_its_code_hash() {
    need minimal
    code="print('audit me $$')"
    execute "$code"
    expect_status 200
    sha=$(printf '%s' "$code" | sha256sum | cut -d' ' -f1)
    bad='eval("audit me too")'
    execute "$bad"
    expect_status 400
    sha2=$(printf '%s' "$bad" | sha256sum | cut -d' ' -f1)
    sleep 0.5
    SBX_AUDIT_DB="$SERVE_DB" SBX_RUNTIME_DIR="$SERVE_RT" sbx-audit query --format json --limit 100000 \
        >"$T/rows.json" || fail "sbx-audit query failed"
    grep "$sha" "$T/rows.json" | grep -q '"serve' || { tail -n 20 "$T/rows.json" >&2; fail "no serve row with $sha"; }
    grep "$sha2" "$T/rows.json" | grep -q "eval()" || { tail -n 20 "$T/rows.json" >&2; fail "no row of the rejected code with its violation"; }
    agent=$(grep "$sha" "$T/rows.json" | head -n 1 | "$PY" -c 'import json, sys; print(json.loads(sys.stdin.readline())["agent"])')
    SBX_AUDIT_DB="$SERVE_DB" SBX_RUNTIME_DIR="$SERVE_RT" sbx-audit query --agent "$agent" --format json \
        | grep -q "$sha" || fail "sbx-audit query --agent $agent does not find the row"
    SBX_AUDIT_DB="$SERVE_DB" SBX_RUNTIME_DIR="$SERVE_RT" sbx-audit verify >/dev/null || fail "sbx-audit verify"
}

test_sbx_kill_all_ends_a_running_request_whose_answer_says_so() {
    need minimal
    printf '{"code": "while True: pass", "timeout": 20}' >"$T/long.json"
    start=$(date +%s)
    curl -sS -o "$T/body" -w '%{http_code}' -H 'Content-Type: application/json' \
        --data-binary @"$T/long.json" --max-time 60 "$URL/execute" >"$T/status" &
    cpid=$!
    sleep 2
    SBX_RUNTIME_DIR="$SERVE_RT" SBX_AUDIT_DB="$SERVE_DB" sbx-kill --all --reason "api.sh" >"$T/kill.out" 2>&1 ||
        { cat "$T/kill.out" >&2; fail "sbx-kill --all failed"; }
    wait $cpid
    took=$(( $(date +%s) - start ))
    [ "$took" -lt 15 ] || fail "the request took ${took}s: not killed"
    expect_status 200
    body_is 'b["timed_out"] is False and b["exit_code"] < 0 and "killed" in b["stderr"]'
    # The service goes on.
    execute 'print("after the kill")'
    body_is 'b["stdout"] == "after the kill\n"'
}

test_verify_passes_against_sbx_serve_and_fails_against_nothing() {
    need minimal
    out=$(sbx-serve --verify "$URL" 2>&1) || fail "--verify exit $?: $out"
    n=$(printf '%s\n' "$out" | grep -c '✓') || true
    [ "$n" -ge 6 ] || fail "fewer than six ✓: $out"
    rc=0; out=$(sbx-serve --verify "http://127.0.0.1:$(free_port)" 2>&1) || rc=$?
    assert_eq "$rc" 1 "--verify against nothing"
    assert_contains "$out" "✗"
}

test_a_unix_socket_and_a_token_file_work() {
    sock="$SERVE_RT/t.sock"
    echo "s3cret-token-for-api" >"$T/token"
    SBX_RUNTIME_DIR="$SERVE_RT" SBX_AUDIT_DB="$SERVE_DB" sbx-serve --listen "unix:$sock" --profile minimal \
        --token-file "$T/token" --max-concurrent 1 >"$T/unix.log" 2>&1 &
    spid=$!
    i=0
    while [ $i -lt 600 ] && ! curl -sf --unix-socket "$sock" http://x/healthz >/dev/null 2>&1; do
        kill -0 $spid 2>/dev/null || break
        sleep 0.1; i=$((i + 1))
    done
    rc=0
    (
        set -e
        curl -sf --unix-socket "$sock" http://x/healthz >/dev/null || fail "/healthz over unix: $(tail -c 300 "$T/unix.log")"
        code=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$sock" -H 'Content-Type: application/json' \
            --data-binary '{"code": "print(1)"}' http://x/execute)
        assert_eq "$code" 401 "without the token"
        code=$(curl -s -o "$T/body" -w '%{http_code}' --unix-socket "$sock" -H 'Content-Type: application/json' \
            -H "Authorization: Bearer s3cret-token-for-api" --data-binary '{"code": "print(1)"}' http://x/execute)
        assert_eq "$code" 200 "with the token"
        body_is 'b["stdout"] == "1\n"'
    ) || rc=$?
    kill -TERM $spid 2>/dev/null; wait $spid 2>/dev/null || true
    return $rc
}

run_tests
