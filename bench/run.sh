#!/bin/sh
# make bench: the guard's cost, as ratios against bare runs in the same run.
# Micro-benchmarks are the build/bench/bench_* programs; the macro workloads
# (open+close loop, python imports, git status, make -j2, start-up, and
# isolation native vs none) are timed by bench/macro.py.
# These machines are noisy: every figure is a median over several runs, and
# bare and guarded runs are interleaved so that drift hits both alike.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
B="$ROOT/$BUILD"
echo "== micro-benchmarks"
for b in "$B"/bench/bench_*; do
    [ -x "$b" ] || continue
    "$b" || echo "$(basename "$b"): failed (exit $?)"
done
echo "== macro workloads (median over rounds of guarded / bare in the same round)"
python3 "$ROOT/bench/macro.py" --build "$B" "$@"
echo "== network (connect and DNS; bench/net.py)"
python3 "$ROOT/bench/net.py" --build "$B"
echo "== audit export (bench/export.sh)"
sh "$ROOT/bench/export.sh"
