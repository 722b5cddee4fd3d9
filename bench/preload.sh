#!/bin/sh
# bench/preload.sh: the guard's own cost, as ratios against bare runs in the
# same run (no isolation: only libsbx-preload.so and the audit ring).
#   open+close loop of an allowed workspace file (bench/openloop)
#   start-up of `true` (policy load per process)
# Bare and guarded runs are interleaved; each figure is the median of 5.
# Usage: sh bench/preload.sh   (BUILD=build by default)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/${BUILD:-build}"
LIB="$B/lib/libsbx-preload.so"
N=${N:-200000}
T=$(mktemp -d /tmp/sbx-bench.XXXXXX)
export SBX_RUNTIME_DIR="$T/run" SBX_AUDIT_DB="$T/state/audit.db" PATH="$B/bin:$PATH"
trap 'kill $(cat "$T/run/sbx-auditd.pid" 2>/dev/null) 2>/dev/null; rm -rf "$T"' EXIT INT TERM
mkdir -p "$T/ws" && echo data > "$T/ws/file"
printf 'version: 1\nname: bench\n' > "$T/policy.yaml"
cp "$B/bench/openloop" "$T/ws/"    # files.exec allows the workspace

guarded() {
    (cd "$T/ws" && "$B/tests/progs/preload_agent" bench env LD_PRELOAD="$LIB" SBX_PRELOAD="$LIB" \
        SBX_POLICY_FILE="$T/policy.yaml" SBX_WORKSPACE="$T/ws" "$@")
}
median() { sort -n | sed -n 3p; }

bare_open="" guard_open="" bare_true="" guard_true=""
for i in 1 2 3 4 5; do
    bare_open="$bare_open $("$T/ws/openloop" "$T/ws/file" "$N" | cut -d' ' -f1)"
    guard_open="$guard_open $(guarded ./openloop "$T/ws/file" "$N" | cut -d' ' -f1)"
    # 100 starts of `true`, in ns per start, timed inside one shell
    s=$(date +%s%N); j=0; while [ $j -lt 100 ]; do /bin/true; j=$((j + 1)); done
    bare_true="$bare_true $(( ($(date +%s%N) - s) / 100 ))"
    s=$(date +%s%N)
    guarded sh -c 'j=0; while [ $j -lt 100 ]; do /bin/true; j=$((j + 1)); done'
    guard_true="$guard_true $(( ($(date +%s%N) - s) / 100 ))"
done
bo=$(echo $bare_open | tr ' ' '\n' | median); go=$(echo $guard_open | tr ' ' '\n' | median)
bt=$(echo $bare_true | tr ' ' '\n' | median); gt=$(echo $guard_true | tr ' ' '\n' | median)
echo "open+close loop: bare ${bo} ns, guarded ${go} ns, ratio $(echo "scale=2; $go / $bo" | bc)"
echo "start-up of true: bare $((bt / 1000)) us, guarded $((gt / 1000)) us, ratio $(echo "scale=2; $gt / $bt" | bc)"
