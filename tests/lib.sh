# tests/lib.sh: sourced by the shell tests.  A test file defines functions
# named test_* and ends with `run_tests`.  Each test runs in a subshell in a
# fresh directory with its own SBX_RUNTIME_DIR, SBX_AUDIT_DB and workspace;
# it passes when it returns 0, and is skipped when it calls `skip REASON`.
# Output: "ok - NAME" / "not ok - NAME" / "skip - NAME: REASON"; run.sh
# counts a skip as a skip, never as a pass.
set -u
SBX_BUILD=${SBX_BUILD:-$(cd "$(dirname "$0")/../../build" && pwd)}
SBX_ROOT=${SBX_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN="$SBX_BUILD/bin"
PROGS="$SBX_BUILD/tests/progs"
POLICIES="$SBX_ROOT/policies"
export PATH="$BIN:/usr/local/bin:/usr/bin:/bin"

fail() { echo "FAIL: $*" >&2; return 1; }

# skip REASON: ends the test as skipped: what it needs is not on this
# machine.  Call it from the test's own body (in a $(...) or a pipeline it
# would only end that subshell).
SKIP_RC=77
skip() { echo "$*" >"$T/skip-reason"; exit $SKIP_RC; }

# assert_eq GOT WANT [WHAT]
assert_eq() { [ "$1" = "$2" ] || fail "${3:-value}: got '$1', want '$2'"; }
# assert_contains HAYSTACK NEEDLE [WHAT]
assert_contains() { case "$1" in *"$2"*) ;; *) fail "${3:-output} does not contain '$2': $1" ;; esac; }
assert_not_contains() { case "$1" in *"$2"*) fail "${3:-output} contains '$2': $1" ;; *) ;; esac; }
assert_file_absent() { [ ! -e "$1" ] || fail "$1 exists"; }
assert_file_present() { [ -e "$1" ] || fail "$1 does not exist"; }

# Stops the daemon that a test started (its pid file lives in the runtime dir).
stop_daemon() {
    pf="$SBX_RUNTIME_DIR/sbx-auditd.pid"
    [ -f "$pf" ] || return 0
    pid=$(cat "$pf" 2>/dev/null) || return 0
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    i=0
    while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    kill -KILL "$pid" 2>/dev/null || true
}

# guard ARGS...: sbx-guard without notices (tests read stderr themselves).
guard() { sbx-guard --no-notify "$@"; }

# secret [TEXT]: puts a .env holding TEXT (default SECRET_TOKEN_x) in the
# workspace: the file every shipped policy denies reading.
secret() { echo "${1:-SECRET_TOKEN_x}" >"$WS/.env"; }

# The static escape program (tests/progs/static_escape), run from the
# workspace, where the default policy lets the agent run what it builds.
ESC=./esc
esc_in_place() { [ -x "$WS/esc" ] || cp "$PROGS/static_escape" "$WS/esc"; }
# native ARGS...: sbx-guard --isolation native ARGS, with ./esc in place.
native() { esc_in_place; guard --isolation native "$@"; }

# rows ARGS...: the store's rows as JSON lines (sbx-audit query --format json).
rows() { sbx-audit query --format json --limit 100000 "$@"; }

# has_row FIELD=VALUE... : true if some row has every FIELD equal to VALUE,
# or, for FIELD~VALUE, containing VALUE.  Reads JSON lines on stdin.
has_row() {
    python3 -c '
import json, sys
conds = sys.argv[1:]
for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    r = json.loads(line)
    ok = True
    for c in conds:
        if "~" in c and ("=" not in c or c.index("~") < c.index("=")):
            k, v = c.split("~", 1)
            ok = ok and v in str(r.get(k, ""))
        else:
            k, v = c.split("=", 1)
            ok = ok and str(r.get(k, "")) == v
    if ok:
        sys.exit(0)
sys.exit(1)
' "$@"
}

# expect_row FIELD=VALUE...: fails the test unless the store has such a row.
expect_row() {
    rows >"$T/rows.json" || fail "sbx-audit query failed"
    has_row "$@" <"$T/rows.json" || { cat "$T/rows.json" >&2; fail "no row with $*"; }
}

run_tests() {
    if [ -z "${SBX_TEST_TMP:-}" ]; then
        mkdir -p "$SBX_BUILD/test-tmp"
        SBX_TEST_TMP=$(mktemp -d "$SBX_BUILD/test-tmp/one.XXXXXX")
    fi
    base=$SBX_TEST_TMP
    for t in $(grep -o '^test_[a-zA-Z0-9_]*' "$0" | sort -u); do
        if [ -n "${ONLY:-}" ] && [ "$t" != "$ONLY" ]; then continue; fi
        d="$base/$t"; rm -rf "$d"; mkdir -p "$d/ws" "$d/state" "$d/home"
        # Socket paths are limited to 108 bytes: the runtime dir is short.
        rt=$(mktemp -d /tmp/sbxr.XXXXXX)
        (
            export SBX_RUNTIME_DIR="$rt" SBX_AUDIT_DB="$d/state/audit.db"
            export WS="$d/ws" T="$d" HOME="$d/home"
            cd "$d/ws" || exit 1
            trap stop_daemon EXIT
            set -e
            "$t"
        ) >"$d/out" 2>&1
        rc=$?
        rm -rf "$rt"
        if [ $rc -eq 0 ]; then
            echo "ok - $t"
        elif [ $rc -eq $SKIP_RC ] && [ -f "$d/skip-reason" ]; then
            echo "skip - $t: $(cat "$d/skip-reason")"
        else
            echo "not ok - $t"
            sed 's/^/#   /' "$d/out" | tail -n 40
        fi
    done
}
