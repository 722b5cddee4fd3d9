#!/usr/bin/env python3
"""Network figures for `make bench`: 1,000 connect+close to a loopback
server, and 1,000 DNS queries, bare, under sbx-guard --isolation none, and
--isolation native, in rounds run back to back (bench/netloop.c measures
each operation; the figures are the medians over rounds of its p50 and
p99).

Under native every connect stops in the supervisor, which makes the
connection itself in the host's namespace and hands it in; a DNS query goes
to sbx's stub (127.0.0.53:53 in the agent's namespace), which judges the
name and forwards it.  Bare and none query the same upstream (a test DNS
server on loopback, tests/progs/dns_responder.py) directly.
"""
import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def server():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(1024)

    def loop():
        while True:
            try:
                c, _ = s.accept()
                c.close()
            except OSError:
                return
    threading.Thread(target=loop, daemon=True).start()
    return s.getsockname()[1]


def run(cmd, env, cwd):
    r = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.decode()[-300:]}")
    w = r.stdout.decode().split()
    return float(w[0]), float(w[3])     # "P50 ns p50, P99 ns p99"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, default=1000)
    a = ap.parse_args()
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    guard = os.path.join(a.build, "bin", "sbx-guard")
    tmp = tempfile.mkdtemp(prefix="sbx-bench-net-")
    ws = os.path.join(tmp, "ws")
    os.makedirs(ws)
    prog = os.path.join(ws, "netloop")
    shutil.copy(os.path.join(a.build, "bench", "netloop"), prog)
    port = server()
    portfile = os.path.join(tmp, "dnsport")
    dns = subprocess.Popen([sys.executable, os.path.join(root, "tests", "progs", "dns_responder.py"),
                            portfile, "bench.test=127.0.0.1"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        if os.path.exists(portfile):
            break
        time.sleep(0.05)
    dport = open(portfile).read().strip()
    policy = os.path.join(tmp, "net.yaml")
    with open(policy, "w") as f:
        f.write(f'version: 1\nname: bench-net\nnetwork:\n  connect:\n'
                f'    allow: ["127.0.0.1:{port}", "bench.test:{port}", "127.0.0.1:{dport}"]\n'
                f'  bind:\n    allow: []\n')
    env = dict(os.environ, SBX_RUNTIME_DIR=os.path.join(tmp, "run"),
               SBX_AUDIT_DB=os.path.join(tmp, "state", "audit.db"),
               SBX_DNS_UPSTREAM=f"127.0.0.1:{dport}")
    n = str(a.n)
    work = {
        "connect+close (loopback)": {m: ["./netloop", "connect", "127.0.0.1", str(port), n]
                                     for m in ("bare", "none", "native")},
        "DNS query (A, uncached)": {
            "bare": ["./netloop", "dns", "127.0.0.1", dport, "bench.test", n],
            "none": ["./netloop", "dns", "127.0.0.1", dport, "bench.test", n],
            "native": ["./netloop", "dns", "127.0.0.53", "53", "bench.test", n],
        },
    }
    try:
        print(f"{'workload':28} {'mode':>7} {'p50':>10} {'p99':>10}   (median of {a.rounds} rounds "
              f"of {a.n})")
        for name, cmds in work.items():
            got = {m: [] for m in cmds}
            for _ in range(a.rounds):
                for m, cmd in cmds.items():
                    c = cmd if m == "bare" else [guard, "--no-notify", "--policy", policy,
                                                  "--isolation", m, "--"] + cmd
                    got[m].append(run(c, env, ws))
            for m, v in got.items():
                p50 = statistics.median(x[0] for x in v) / 1000
                p99 = statistics.median(x[1] for x in v) / 1000
                print(f"{name:28} {m:>7} {p50:8.1f}us {p99:8.1f}us")
    finally:
        dns.kill()
        pf = os.path.join(env["SBX_RUNTIME_DIR"], "sbx-auditd.pid")
        if os.path.exists(pf):
            try:
                os.kill(int(open(pf).read().strip()), 15)
            except (ValueError, OSError):
                pass
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
