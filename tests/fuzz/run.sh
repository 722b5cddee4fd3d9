#!/bin/sh
# Runs each libFuzzer harness in $BUILD/fuzz for FUZZ_SECONDS (default 60)
# from its seeds (tests/fuzz/seeds/NAME and, for the policy loader, the
# shipped policies plus a deeply nested and a large generated file).  A
# crash, a leak, a sanitizer report or a timeout fails that harness; the
# input that did it is kept in $BUILD/fuzz/artifacts/.  Ends with
# "N passed, N failed".
set -u
BUILD=${BUILD:-build-fuzz}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SECONDS_EACH=${FUZZ_SECONDS:-60}
cd "$ROOT" || exit 2
passed=0 failed=0
art="$BUILD/fuzz/artifacts"
mkdir -p "$art"
for f in "$BUILD"/fuzz/fuzz_*; do
    [ -x "$f" ] || continue
    name=$(basename "$f")
    short=${name#fuzz_}
    corpus="$BUILD/fuzz/corpus/$short"
    mkdir -p "$corpus"
    [ -d "tests/fuzz/seeds/$short" ] && cp tests/fuzz/seeds/"$short"/* "$corpus"/ 2>/dev/null
    maxlen=4096
    case "$short" in
    policy_load)
        cp policies/*.yaml "$corpus"/
        # Structured, deep and large inputs: what a hostile .sbx.yaml tries.
        python3 -c 'print("version: 1\nfiles:\n  read:\n    allow: " + "[" * 5000 + "]" * 5000)' >"$corpus/deep.yaml"
        python3 -c '
print("version: 1\nfiles:\n  read:\n    deny:")
for i in range(3000):
    print("      - \"**/secret%d/**\"" % i)' >"$corpus/large.yaml"
        maxlen=65536 ;;
    esac
    log="$BUILD/fuzz/$short.log"
    echo "== fuzz $short (${SECONDS_EACH}s)"
    if "$f" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
           -max_len="$maxlen" -print_final_stats=1 -artifact_prefix="$art/$short-" \
           "$corpus" >"$log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
        echo "ok - fuzz_${short}_survives_hostile_input (${runs:-?} runs)"
        passed=$((passed + 1))
    else
        echo "not ok - fuzz_${short}_survives_hostile_input"
        grep -E 'ERROR|SUMMARY|Test unit written|==[0-9]+==' "$log" | head -n 20 | sed 's/^/#   /'
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
