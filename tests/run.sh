#!/bin/sh
# Runs every test: the cmocka unit tests (build/tests/test_*), then the
# integration, escape and workload tests (tests/integration/*.sh,
# tests/escape/*.sh, tests/workloads/*.sh, tests/serve/*.sh).
# Each test gets its own SBX_RUNTIME_DIR and SBX_AUDIT_DB, so runs never see
# each other or the user's store.  Ends with "N passed, N failed, N skipped"
# (a skipped test said why it could not run here; it is not a pass) and
# exits non-zero if anything failed.
#   TESTS=pattern sh tests/run.sh   runs only the tests whose file matches
set -u
BUILD=${BUILD:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_ABS=$(cd "$ROOT/$BUILD" 2>/dev/null && pwd) || { echo "run.sh: no build in $BUILD; run make" >&2; exit 2; }
export SBX_BUILD="$BUILD_ABS" SBX_ROOT="$ROOT"
pattern=${TESTS:-}
passed=0 failed=0 skipped=0 failures=""
# Test files live under the build directory, not /tmp: the shipped policies
# allow writing /tmp, so "outside the workspace" must be somewhere else.
mkdir -p "$BUILD_ABS/test-tmp"
tmpbase=$(mktemp -d "$BUILD_ABS/test-tmp/run.XXXXXX")
trap 'rm -rf "$tmpbase"' EXIT INT TERM

count_cmocka() { # $1 = log: the passed, failed and skipped counts of one binary
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$1" | tail -n 1)
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$1" | tail -n 1)
    k=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test(s), listed below.*/\1/p' "$1" | tail -n 1)
    echo "${p:-0} ${f:-0} ${k:-0}"
}

for t in "$BUILD_ABS"/tests/test_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    case "$name" in *"$pattern"*) ;; *) continue ;; esac
    work="$tmpbase/$name"; mkdir -p "$work"
    log="$work/log"
    SBX_RUNTIME_DIR="$work/run" SBX_AUDIT_DB="$work/state/audit.db" TMPDIR="$work" \
        "$t" >"$log" 2>&1
    rc=$?
    cat "$log"
    set -- $(count_cmocka "$log")
    passed=$((passed + $1)); failed=$((failed + $2)); skipped=$((skipped + $3))
    if [ $rc -ne 0 ] && [ "$2" -eq 0 ]; then
        failed=$((failed + 1)); failures="$failures $name(exit $rc)"
    elif [ "$2" -ne 0 ]; then
        failures="$failures $name"
    fi
done

for s in "$ROOT"/tests/integration/*.sh "$ROOT"/tests/escape/*.sh "$ROOT"/tests/workloads/*.sh \
         "$ROOT"/tests/serve/*.sh; do
    [ -f "$s" ] || continue
    name=$(basename "$(dirname "$s")")/$(basename "$s" .sh)
    case "$name" in *"$pattern"*) ;; *) continue ;; esac
    work="$tmpbase/$(echo "$name" | tr / _)"; mkdir -p "$work"
    log="$work/log"
    echo "== $name"
    SBX_TEST_TMP="$work" sh "$s" >"$log" 2>&1
    rc=$?
    cat "$log"
    p=$(grep -c '^ok ' "$log"); f=$(grep -c '^not ok ' "$log"); k=$(grep -c '^skip ' "$log")
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + k))
    if [ "$f" -ne 0 ]; then failures="$failures $name"; fi
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
        failed=$((failed + 1)); failures="$failures $name(exit $rc)"
    fi
done

[ -n "$failures" ] && echo "failed:$failures"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
