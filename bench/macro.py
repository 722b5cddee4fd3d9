#!/usr/bin/env python3
"""Macro benchmarks for `make bench`: each workload bare, under sbx-guard
with --isolation none (the guard alone), and with --isolation native (guard
plus kernel layer), in rounds that run each once back to back; the figure
is the median over rounds of the ratio (or difference) to bare in the same
round.

Every run under sbx-guard records its decisions in a private store (full
audit), in a temporary SBX_RUNTIME_DIR/SBX_AUDIT_DB.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def timed(cmd, cwd, env):
    """Wall time of CMD; for a program that prints "N ns per ...", its own
    per-operation figure (so start-up does not hide the loop's cost).  The
    CPU time rerun reports ("(cpu C ms)") is left in timed.cpu, else None."""
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.decode()[-400:]}")
    # The last line: what the workload itself printed comes before it.
    lines = r.stdout.decode(errors="replace").strip().splitlines()
    out = lines[-1].split() if lines else []
    timed.cpu = float(out[5]) / 1e3 if len(out) >= 7 and out[4] == "(cpu" else None
    if len(out) >= 3 and out[1] == "ns" and out[2] == "per":
        return float(out[0]) / 1e9
    if len(out) >= 3 and out[1] == "ms" and out[2] == "per":
        return float(out[0]) / 1e3
    return dt


def daemon_cpu(env):
    """sbx-auditd's CPU time so far, in seconds, or None."""
    try:
        pid = int(open(os.path.join(env["SBX_RUNTIME_DIR"], "sbx-auditd.pid")).read().strip())
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def settle(env):
    """Waits (at most 2 s) until sbx-auditd has used no CPU for 30 ms: the
    rows of the run before are stored.  Otherwise a run overlaps the daemon
    storing the previous run's 2,000 to 100,000 rows, which is that run's
    cost, not this one's; on a 2-core machine it showed as noise of 0.3x
    and more in the open loop."""
    pf = os.path.join(env["SBX_RUNTIME_DIR"], "sbx-auditd.pid")
    try:
        pid = int(open(pf).read().strip())
    except (OSError, ValueError):
        return

    def cpu():
        try:
            f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            return int(f[11]) + int(f[12])
        except (OSError, IndexError, ValueError):
            return None
    deadline = time.monotonic() + 2
    last = cpu()
    while last is not None and time.monotonic() < deadline:
        time.sleep(0.03)
        now = cpu()
        if now == last:
            return
        last = now


def make_git_repo(d, files=3000):
    os.makedirs(d)
    for i in range(files):
        sub = os.path.join(d, f"dir{i % 30}")
        os.makedirs(sub, exist_ok=True)
        with open(os.path.join(sub, f"f{i}.txt"), "w") as f:
            f.write(f"file {i}\n")
    env = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@x",
               GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@x")
    for c in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "init"]):
        subprocess.run(c, cwd=d, env=env, check=True)


def make_c_project(d, files=50):
    os.makedirs(d)
    objs = []
    for i in range(files):
        with open(os.path.join(d, f"f{i}.c"), "w") as f:
            f.write(f"int f{i}(int x) {{ return x * {i} + 1; }}\n")
        objs.append(f"f{i}.o")
    with open(os.path.join(d, "main.c"), "w") as f:
        f.write("int main(void) { return 0; }\n")
    with open(os.path.join(d, "Makefile"), "w") as f:
        f.write(f"prog: main.o {' '.join(objs)}\n\tcc -o $@ $^\n"
                "%.o: %.c\n\tcc -O1 -c $< -o $@\nclean:\n\trm -f *.o prog\n")


# The npm workload's package set: a few packages with a few dependencies
# (debug -> ms; chalk@4 -> ansi-styles, supports-color, has-flag, ...),
# 12 packages in node_modules.
NPM_DEPS = {"semver": "7.6.3", "debug": "4.3.7", "chalk": "4.1.2",
            "commander": "12.1.0", "minimist": "1.2.8", "is-number": "7.0.0"}


def prepare_npm(cache_dir, d, env):
    """A project in D whose `npm install --offline` finds everything in
    CACHE_DIR (kept between runs of the bench, filled from the registry the
    first time).  Returns None, or why the workload is skipped."""
    import json
    os.makedirs(d)
    with open(os.path.join(d, "package.json"), "w") as f:
        json.dump({"name": "sbx-bench", "version": "1.0.0", "private": True,
                   "dependencies": NPM_DEPS}, f)
    if not shutil.which("npm"):
        return "npm is not installed"
    o = ["--no-audit", "--no-fund", "--no-update-notifier", "--cache", cache_dir]
    # Offline first: a cache filled by an earlier run needs no network.
    r = subprocess.run(["npm", "install", "--offline"] + o, cwd=d, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if r.returncode != 0:
        try:
            r = subprocess.run(["npm", "install"] + o, cwd=d, env=env, timeout=180,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        except subprocess.TimeoutExpired:
            return "the npm registry did not answer within 180 s"
        if r.returncode != 0:
            return "the npm registry was never reachable (npm install failed: " + \
                r.stderr.decode(errors="replace").strip().splitlines()[-1][:120] + ")"
    shutil.rmtree(os.path.join(d, "node_modules"))
    # The agent's own npm cache, ~/.npm, as the default policy expects it.
    home_npm = os.path.join(env["HOME"], ".npm")
    shutil.rmtree(home_npm, ignore_errors=True)
    shutil.copytree(cache_dir, home_npm, symlinks=True)
    return None


def prepare_wheel(d, env):
    """D/wheels holds a pure-Python wheel (written with zipfile: no build
    backend needed) and D/venv.tmpl a venv to copy fresh for each run."""
    import base64
    import hashlib
    import zipfile
    os.makedirs(os.path.join(d, "wheels"))
    name, ver = "sbx_bench_pkg", "1.0"
    files = {f"{name}/__init__.py": "from .core import *\n",
             f"{name}/core.py": "".join(f"def f{i}(x):\n    return x * {i}\n" for i in range(200)),
             f"{name}-{ver}.dist-info/METADATA":
                 f"Metadata-Version: 2.1\nName: {name}\nVersion: {ver}\n",
             f"{name}-{ver}.dist-info/WHEEL":
                 "Wheel-Version: 1.0\nGenerator: sbx-bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    for i in range(30):
        files[f"{name}/m{i}.py"] = f"VALUE = {i}\n"
    record = []
    whl = os.path.join(d, "wheels", f"{name}-{ver}-py3-none-any.whl")
    with zipfile.ZipFile(whl, "w", zipfile.ZIP_DEFLATED) as z:
        for path, text in files.items():
            data = text.encode()
            h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{path},sha256={h},{len(data)}")
            z.writestr(path, data)
        record.append(f"{name}-{ver}.dist-info/RECORD,,")
        z.writestr(f"{name}-{ver}.dist-info/RECORD", "\n".join(record) + "\n")
    r = subprocess.run(["/usr/bin/python3", "-m", "venv", os.path.join(d, "venv.tmpl")],
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if r.returncode != 0:
        return "python3 -m venv failed: " + r.stderr.decode(errors="replace")[-200:]
    return None


def prepare_crate(d):
    """A crate with no dependencies and some code for rustc to compile."""
    os.makedirs(os.path.join(d, "src"))
    with open(os.path.join(d, "Cargo.toml"), "w") as f:
        f.write('[package]\nname = "sbx-bench"\nversion = "0.1.0"\nedition = "2021"\n\n'
                '[dependencies]\n')
    mods = []
    for i in range(8):
        with open(os.path.join(d, "src", f"m{i}.rs"), "w") as f:
            for j in range(40):
                f.write(f"pub fn f{j}(v: &[u64]) -> u64 {{ v.iter().map(|x| x * {j} + {i})"
                        f".filter(|x| x % 3 != 0).sum() }}\n")
        mods.append(f"mod m{i};")
    with open(os.path.join(d, "src", "main.rs"), "w") as f:
        f.write("#![allow(dead_code)]\n" + "\n".join(mods) + "\nfn main() {\n    let v: Vec<u64> = (0..100).collect();\n"
                + "".join(f"    println!(\"{{}}\", m{i}::f{i}(&v));\n" for i in range(8)) + "}\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--only", default="",
                    help="run the workloads whose name has this (or one of A,B,...)")
    ap.add_argument("--verbose", action="store_true", help="print every sample")
    ap.add_argument("--modes", default="none,native",
                    help="of none, native, native-open (native, opens supervised), bwrap, "
                         "gvisor (added to the default when runsc is installed)")
    ap.add_argument("--cache", default="",
                    help="where downloads for the workloads are kept between runs "
                         "(default: BUILD/bench-cache)")
    a = ap.parse_args()
    # Absolute: the workloads run with their own working directory.
    a.build = os.path.abspath(a.build)
    guard = os.path.join(a.build, "bin", "sbx-guard")
    # Under the build directory, not /tmp: the kernel layer gives the agent
    # a private /tmp, which would hide the home (~/.npm) it is granted.
    tmp = tempfile.mkdtemp(prefix="sbx-bench-", dir=a.build)
    ws = os.path.join(tmp, "ws")
    os.makedirs(ws)
    env = dict(os.environ, SBX_RUNTIME_DIR=os.path.join(tmp, "run"),
               SBX_AUDIT_DB=os.path.join(tmp, "state", "audit.db"), HOME=os.path.join(tmp, "home"))
    os.makedirs(env["HOME"])
    # Debian's cargo and rustc: a rustup proxy in ~/.cargo/bin looks for its
    # toolchain in the real home, which the runs do not have.
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "/usr/bin:/bin").split(os.pathsep)
                                  if not p.rstrip("/").endswith("/.cargo/bin"))
    policy = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "policies", "default.yaml")
    make_git_repo(os.path.join(ws, "repo"))
    make_c_project(os.path.join(ws, "cproj"))
    # Run from the workspace: the default policy runs programs from the
    # system and the workspace, not from the build tree.
    openloop = os.path.join(ws, "openloop")
    shutil.copy(os.path.join(a.build, "bench", "openloop"), openloop)
    rerun = os.path.join(ws, "rerun")
    shutil.copy(os.path.join(a.build, "bench", "rerun"), rerun)
    with open(os.path.join(ws, "data.txt"), "w") as f:
        f.write("x\n")
    # Six directories deep, for opens the guard resolves (O_CREAT).
    deep = os.path.join("src", "pkg", "lib", "mod", "sub", "data.txt")
    os.makedirs(os.path.join(ws, os.path.dirname(deep)))
    with open(os.path.join(ws, deep), "w") as f:
        f.write("x\n")
    # The toolchain workloads (issue 14): npm from its cache, pip from a
    # local wheel, cargo of a crate with no dependencies.
    cache = os.path.abspath(a.cache or os.path.join(a.build, "bench-cache"))
    npmproj, pyproj, crate = (os.path.join(ws, n) for n in ("npmproj", "pyproj", "crate"))
    skipped = {}
    only = a.only.split(",")
    if any(o in n for o in only for n in ("npm install", "pip install", "cargo build")):
        skipped["npm install"] = prepare_npm(os.path.join(cache, "npm"), npmproj, env)
        skipped["pip install"] = prepare_wheel(pyproj, env)
        prepare_crate(crate)
        cargo = "/usr/bin/cargo" if os.path.exists("/usr/bin/cargo") else shutil.which("cargo")
        skipped["cargo build"] = None if cargo else "cargo is not installed"

    # The macro workloads run as a command of a guarded agent: `rerun` is
    # the agent, started once under sbx-guard, and runs the workload
    # INNER times (posix_spawnp, as an agent's tool call does); it reports
    # the median.  Bare, the same `rerun` runs without sbx-guard.  That
    # ratio is what the guard costs per command; sbx-guard's own start-up
    # happens once per agent and is the "start-up" line.  The "with
    # start-up" columns run a fresh sbx-guard for every single run.
    inner = "5"
    def session(cmd, pre=None, n=inner):
        return [rerun, n] + (["-p", " ".join(pre)] if pre else []) + ["--"] + cmd
    py = ["/usr/bin/python3", "-c", "import json, email, http.client, decimal, asyncio"]
    gs = ["git", "status", "--porcelain"]
    mk, mkclean = ["make", "-s", "-j2", "prog"], ["make", "-s", "clean"]
    repo, cproj = os.path.join(ws, "repo"), os.path.join(ws, "cproj")
    work = [
        # 2,000 opens fit in the agent's event ring: the guard's own cost.
        # 100,000 opens run for longer than the ring lasts: then the agent
        # waits for sbx-auditd to store rows (the store's throughput).
        ("open+close loop (2000)", [openloop, "data.txt", "2000"], ws, None),
        ("open+close loop (100000)", [openloop, "data.txt", "100000"], ws, None),
        # O_CREAT: decided on the resolved path, before the call.
        ("open(O_CREAT) loop (2000, deep)", [openloop, deep, "2000", "create"], ws, None),
        ("python3 imports", session(py), ws, None),
        ("git status (3000 files)", session(gs), repo, None),
        ("make -j2 (50 C files)", session(mk, mkclean), cproj, None),
        # A fresh sbx-guard: what an agent pays once.  Under gvisor, the
        # bare `runsc do true` of the same round is printed below it.
        ("start-up: true", ["true"], ws, None),
        # Seconds each: one timed run per session.  PRE makes the state
        # fresh (no node_modules, a new venv, no target/) bare, before
        # sbx-guard starts: copying a venv under the guard is 2,000 rows
        # for sbx-auditd, which the CPU figure would charge to pip.
        ("npm install (offline, 12 pkgs)",
         session(["npm", "install", "--offline", "--no-audit", "--no-fund",
                  "--no-update-notifier"], None, "1"), npmproj, ["rm", "-rf", "node_modules"]),
        ("pip install (local wheel, venv)",
         session(["venv/bin/python", "-m", "pip", "install", "-q", "--no-index",
                  "--find-links", "wheels", "sbx_bench_pkg"], None, "1"), pyproj,
         ["sh", "-c", "rm -rf venv && cp -a venv.tmpl venv"]),
        ("cargo build (no deps)",
         session(["/usr/bin/cargo" if os.path.exists("/usr/bin/cargo") else "cargo", "build", "-q",
                  "--offline"], None, "1"), crate, ["rm", "-rf", "target"]),
    ]
    work = [w for w in work if any(o in w[0] for o in only)]
    for w in list(work):
        why = next((v for k, v in skipped.items() if w[0].startswith(k) and v), None)
        if why:
            print(f"{w[0]:32} skipped: {why}")
            work.remove(w)
    modes = [m for m in a.modes.split(",") if m]
    # gVisor beside none and native where runsc is there (issue 17).
    if a.modes == ap.get_default("modes") and shutil.which("runsc"):
        modes.append("gvisor")
    # One unmeasured run of each, to warm caches and start the daemon.
    for name, cmd, cwd, pre in work:
        if pre:
            subprocess.run(pre, cwd=cwd, env=env)
        timed(cmd, cwd, env)
    print(f"{'workload':32} {'bare':>10} " + " ".join(f"{m:>18}" for m in modes))
    for name, cmd, cwd, pre in work:
        if not os.path.exists(cmd[0]) and cmd[0].startswith("/"):
            print(f"{name:32} skipped ({cmd[0]} not built)")
            continue
        samples = {"bare": []}
        cpu = {"bare": []}
        dcpu = {}
        # gVisor's own floor: runsc with no bundle of ours, no guard.
        floor = [] if name.startswith("start-up") and "gvisor" in modes else None
        for m in modes:
            samples[m] = []
            cpu[m] = []
            dcpu[m] = []
        try:
            for _ in range(a.runs):
                for m in ["bare"] + modes:
                    # 100,000 opens under gVisor's ptrace platform take
                    # minutes a run: left out (the 2,000 say the ratio).
                    if m == "gvisor" and "100000" in name:
                        continue
                    # The toolchain workloads (issue 14) are measured under
                    # none and native; under gVisor each would take minutes
                    # a round, and issue 17 asks for python, git and make.
                    if m == "gvisor" and name.endswith(")") and \
                            any(k in name for k in ("npm", "pip", "cargo")):
                        continue
                    if pre:
                        subprocess.run(pre, cwd=cwd, env=env)
                    settle(env)
                    # native-open: native with every open supervised
                    # (SBX_SUPERVISE_OPEN=1, docs/isolation.md)
                    iso = "native" if m == "native-open" else m
                    menv = dict(env, SBX_SUPERVISE_OPEN="1") if m == "native-open" else env
                    c = cmd if m == "bare" else [guard, "--policy", policy, "--isolation", iso,
                                                 "--workspace", ws, "--no-notify", "--"] + cmd
                    d0 = daemon_cpu(env) if m != "bare" else None
                    samples[m].append(timed(c, cwd, menv))
                    if m == "gvisor" and floor is not None:
                        floor.append(timed(["runsc", "--rootless", "--network=none", "do",
                                            "true"], cwd, env) - samples["bare"][-1])
                    if timed.cpu is not None:
                        # The agent's CPU and what sbx-auditd spent storing
                        # its rows (measured once it is idle again).
                        if d0 is not None:
                            settle(env)
                            d1 = daemon_cpu(env)
                            d = max(0.0, d1 - d0) if d1 is not None else 0.0
                            timed.cpu += d
                            dcpu[m].append(d)
                        cpu[m].append(timed.cpu)
        except RuntimeError as e:
            print(f"{name:32} failed: {e}")
            continue
        if a.verbose:
            for m in samples:
                print(f"  {m:8}", " ".join(f"{x * 1000:.2f}" for x in samples[m]))
        bare = statistics.median(samples["bare"])
        cols = []
        # Each round runs bare and every mode back to back, within a second:
        # the ratio (or the difference) is taken inside a round, then the
        # median over rounds.  This machine drifts between a fast and a slow
        # state for seconds at a time (bare open+close: ~750 or ~1400 ns);
        # a ratio of medians mixes rounds of both states.
        for m in modes:
            if not samples[m]:
                cols.append(f"{'skipped':>11} ({m})")
                continue
            pairs = list(zip(samples[m], samples["bare"]))
            if name.startswith("start-up"):
                d = statistics.median(g - b for g, b in pairs)
                cols.append(f"+{d * 1000:6.1f} ms ({m})")
            else:
                r = statistics.median(g / b for g, b in pairs)
                cols.append(f"{r:5.2f}x ({m:>6})")
        # what the kernel layer adds to the guard alone (issue 5's figure)
        if "none" in samples and "native" in samples and not name.startswith("start-up"):
            r = statistics.median(n / g for n, g in zip(samples["native"], samples["none"]))
            cols.append(f"{r:5.2f}x (native/none)")
        if samples.get("none") and samples.get("gvisor") and not name.startswith("start-up"):
            r = statistics.median(v / g for v, g in zip(samples["gvisor"], samples["none"]))
            cols.append(f"{r:5.2f}x (gvisor/none)")
        if "native" in samples and "native-open" in samples and not name.startswith("start-up"):
            r = statistics.median(o / n for o, n in zip(samples["native-open"], samples["native"]))
            cols.append(f"{r:5.2f}x (open/native)")
        shown = f"{bare * 1e9:6.0f}ns/op" if name.startswith("open") else f"{bare * 1000:8.1f}ms"
        print(f"{name:32} {shown:>10} " + " ".join(f"{c:>18}" for c in cols))
        if floor:
            print(f"{'  bare runsc do true':32} {'':>10} " +
                  " ".join(f"{'':>18}" for _ in range(modes.index("gvisor"))) +
                  f" +{statistics.median(floor) * 1000:6.1f} ms (runsc)")
        # The same for CPU time (the agent's processes, and sbx-auditd's
        # for its rows): what the guard costs in work, which a loaded
        # machine stretches less than the wall time.
        if all(len(cpu[m]) == len(samples[m]) for m in cpu) and cpu["bare"] and \
                name.endswith(")") and any(k in name for k in ("npm", "pip", "cargo")):
            ccols = [f"{statistics.median(g / b for g, b in zip(cpu[m], cpu['bare'])):5.2f}x ({m:>6})"
                     if cpu[m] else f"{'skipped':>11} ({m})" for m in modes]
            bare_cpu = f"{statistics.median(cpu['bare']) * 1000:8.1f}ms"
            print(f"{'  cpu time':32} {bare_cpu:>10} " + " ".join(f"{c:>18}" for c in ccols))
            # sbx-auditd's part of it (10 ms ticks): what storing the rows,
            # and waking up to look for them, cost.
            if any(dcpu.values()):
                dcols = [f"{statistics.median(dcpu[m]) * 1000:6.0f} ms ({m:>6})" if dcpu[m]
                         else f"{'-':>18}" for m in modes]
                print(f"{'  of which sbx-auditd':32} {'':>10} " + " ".join(f"{c:>18}" for c in dcols))
    pf = os.path.join(env["SBX_RUNTIME_DIR"], "sbx-auditd.pid")
    if os.path.exists(pf):
        try:
            os.kill(int(open(pf).read().strip()), 15)
        except (ValueError, OSError):
            pass
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
