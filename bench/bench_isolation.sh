#!/bin/sh
# bench/bench_isolation.sh — what --isolation native costs over --isolation
# none (the same guard, the same policy, only the kernel layer differs).
#   sh bench/bench_isolation.sh [RUNS]        (BUILD=build by default)
# Start-up is `sbx-guard -- true`: reported as milliseconds added.  Macro
# workloads (python imports, git status on a 2000-file repository, and a
# session of 20 git status in one agent, where start-up is paid once as in a
# real agent session) are reported as the ratio native / none.  Every figure is the median of RUNS
# interleaved runs (none, native, none, ...), so drift hits both alike.
# Targets: <= 30 ms added at start-up, <= 1.05x on the macro workloads.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
RUNS=${1:-11}
GUARD="$ROOT/$BUILD/bin/sbx-guard"
[ -x "$GUARD" ] || { echo "bench_isolation: build first (make)" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sbx-bench-iso.XXXXXX")
rt=$(mktemp -d /tmp/sbxb.XXXXXX)
trap 'kill $(cat "$rt/sbx-auditd.pid" 2>/dev/null) 2>/dev/null; rm -rf "$tmp" "$rt"' EXIT INT TERM
export SBX_RUNTIME_DIR="$rt" SBX_AUDIT_DB="$tmp/state/audit.db" HOME="$tmp/home"
mkdir -p "$tmp/ws/repo" "$HOME"
cd "$tmp/ws/repo"
i=0
while [ $i -lt 2000 ]; do
    d="d$((i % 20))"; mkdir -p "$d"; echo "file $i" >"$d/f$i"; i=$((i + 1))
done
git init -q . && git add -A && git -c user.email=b@x -c user.name=b commit -qm init

python3 - "$GUARD" "$RUNS" "$tmp/ws" <<'PY'
import statistics, subprocess, sys, time
guard, runs, ws = sys.argv[1], int(sys.argv[2]), sys.argv[3]
work = [
    ("start-up: sbx-guard -- true", ["true"], ws),
    ("python3 -c 'import json, email, asyncio'",
     ["/usr/bin/python3", "-c", "import json, email, asyncio"], ws),
    ("git status (2000 files)", ["git", "status", "--porcelain"], ws + "/repo"),
    ("session: 20 x git status in one agent", ["/bin/sh", "-c",
     "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do git status --porcelain; done"],
     ws + "/repo"),
]
def run(mode, cmd, cwd):
    t0 = time.perf_counter()
    r = subprocess.run([guard, "--isolation", mode, "--no-notify", "--"] + cmd, cwd=cwd,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"{mode} {' '.join(cmd)}: exit {r.returncode}: {r.stderr.decode()[-300:]}")
    return dt
for name, cmd, cwd in work:          # warm caches and the daemon
    run("none", cmd, cwd); run("native", cmd, cwd)
print(f"{'workload':44} {'none':>9} {'native':>9}  cost of native")
for name, cmd, cwd in work:
    s = {"none": [], "native": []}
    for _ in range(runs):
        for m in ("none", "native"):
            s[m].append(run(m, cmd, cwd))
    a, b = statistics.median(s["none"]), statistics.median(s["native"])
    cost = f"+{(b - a) * 1000:.1f} ms" if name.startswith("start-up") else f"{b / a:.3f}x"
    print(f"{name:44} {a * 1000:7.1f}ms {b * 1000:7.1f}ms  {cost}")
PY
