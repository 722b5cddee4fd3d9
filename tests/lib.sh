# tests/lib.sh: sourced by the shell tests.  A test file defines functions
# named test_* and ends with `run_tests`.  Each test runs in a subshell in a
# fresh directory with its own SBX_RUNTIME_DIR, SBX_AUDIT_DB and workspace;
# it passes when it returns 0.  Output: "ok - NAME" / "not ok - NAME".
set -u
SBX_BUILD=${SBX_BUILD:-$(cd "$(dirname "$0")/../../build" && pwd)}
SBX_ROOT=${SBX_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN="$SBX_BUILD/bin"
PROGS="$SBX_BUILD/tests/progs"
POLICIES="$SBX_ROOT/policies"
export PATH="$BIN:/usr/local/bin:/usr/bin:/bin"

fail() { echo "FAIL: $*" >&2; return 1; }

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

run_tests() {
    base=${SBX_TEST_TMP:-$(mktemp -d /tmp/sbx-t.XXXXXX)}
    for t in $(grep -o '^test_[a-zA-Z0-9_]*' "$0" | sort -u); do
        if [ -n "${ONLY:-}" ] && [ "$t" != "$ONLY" ]; then continue; fi
        d="$base/$t"; rm -rf "$d"; mkdir -p "$d/ws" "$d/run" "$d/state" "$d/home"
        (
            export SBX_RUNTIME_DIR="$d/run" SBX_AUDIT_DB="$d/state/audit.db"
            export WS="$d/ws" T="$d" HOME="$d/home"
            cd "$d/ws" || exit 1
            trap stop_daemon EXIT
            set -e
            "$t"
        ) >"$d/out" 2>&1
        rc=$?
        if [ $rc -eq 0 ]; then
            echo "ok - $t"
        else
            echo "not ok - $t"
            sed 's/^/#   /' "$d/out" | tail -n 40
        fi
    done
}
