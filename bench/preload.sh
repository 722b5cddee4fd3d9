#!/bin/sh
# bench/preload.sh: the guard's own cost, as ratios against bare runs in the
# same run (no isolation: only libsbx-preload.so and the audit ring).
#   open+close loop of an allowed workspace file (bench/openloop), short
#     (3000 opens: the event ring never fills; the guard plus the audit
#     ring, with sbx-auditd storing rows on the other core) and sustained
#     (N opens: bounded by how fast sbx-auditd stores rows, since every
#     decision is recorded).  The guard alone: build/bench/bench_guard_open.
#   start-up of `true` and of `cat FILE`, 100 each from one shell (the
#     shell's fork + exec event; the policy loads only in a process that
#     makes a guarded call, so cat pays for it and true does not)
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

# starts CMD: 100 runs of CMD from one shell, ns per run
starts() {
    s=$(date +%s%N)
    "$@" sh -c 'j=0; while [ $j -lt 100 ]; do '"$CMD"' >/dev/null; j=$((j + 1)); done'
    echo $(( ($(date +%s%N) - s) / 100 ))
}
nothing() { (cd "$T/ws" && "$@"); }

report() { # WHAT BARE-LIST GUARDED-LIST UNIT DIV
    b=$(echo $2 | tr ' ' '\n' | median); g=$(echo $3 | tr ' ' '\n' | median)
    echo "$1: bare $((b / $5)) $4, guarded $((g / $5)) $4, ratio $(echo "scale=2; $g / $b" | bc)"
}

bs="" gs="" bl="" gl="" bt="" gt="" bc_="" gc=""
for i in 1 2 3 4 5; do
    bs="$bs $("$T/ws/openloop" "$T/ws/file" 3000 | cut -d' ' -f1)"
    gs="$gs $(guarded ./openloop "$T/ws/file" 3000 | cut -d' ' -f1)"
    bl="$bl $("$T/ws/openloop" "$T/ws/file" "$N" | cut -d' ' -f1)"
    gl="$gl $(guarded ./openloop "$T/ws/file" "$N" | cut -d' ' -f1)"
    CMD=/bin/true
    bt="$bt $(starts nothing)"; gt="$gt $(starts guarded)"
    CMD="/bin/cat $T/ws/file"
    bc_="$bc_ $(starts nothing)"; gc="$gc $(starts guarded)"
done
report "open+close, 3000 (ring never fills)" "$bs" "$gs" ns 1
report "open+close, $N (sustained, store-bound)" "$bl" "$gl" ns 1
report "start-up of true" "$bt" "$gt" us 1000
report "start-up of cat FILE" "$bc_" "$gc" us 1000
