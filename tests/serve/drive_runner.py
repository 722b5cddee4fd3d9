"""Drives tools/serve-runner.py over its fds 3 and 4 as sbx-serve would
(docs/serve-protocol.md), without sbx-serve.  Used by tests/serve/runner_rules.sh.

  drive_runner.py check [--profile minimal|data-science] [--config JSON] < TABLE
      TABLE: cases separated by lines "----"; each case is the code, a line
      "=>", then the expected violation messages, one per line (none: the
      code passes); a line "STAGE: MESSAGE" also wants that stage.  Every case goes through one validator; a mismatch is
      printed and the exit status is 1.
  drive_runner.py exec [--profile P] [--config JSON] [--timeout S] < CODE
      Runs CODE in a single-use runner; prints one JSON object:
      {"exit": N, "stdout": ..., "stderr": ..., "ready": {...}}.
  drive_runner.py raw check|exec < BYTES
      Sends BYTES as they are on fd 3 (then EOF); prints each line the
      runner wrote on fd 4, then "exit N".
  drive_runner.py api URL [--token T] < TABLE
      The same table through a running sbx-serve: each case is POSTed to
      URL/execute; a case with violations wants 400 and exactly
      {"error": "Code validation failed", "violations": [...]}, a case
      without wants 200.
  drive_runner.py bench [--profile P] N < CODE
      Checks CODE N times through one validator; prints the p50 and p99 of
      one request's round trip and the runner's own scan time, in µs.
"""
import json
import os
import subprocess
import sys
import time

ROOT = os.environ.get("SBX_ROOT") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
RUNNER = os.path.join(ROOT, "tools", "serve-runner.py")
PYTHON = os.environ.get("SBX_PYTHON", "/usr/bin/python3")

MINIMAL = {
    "allowed_imports": sorted("collections csv datetime decimal fractions functools itertools json "
                              "math operator random re statistics string textwrap typing".split()),
    "pre_imports": [],
    "blocklist": [],
    "stages": [{"name": "ast_scan", "mode": "enforce"}],
    "runtime_hooks": "enforce",
}
DATA_SCIENCE = dict(MINIMAL)
DATA_SCIENCE.update({
    "allowed_imports": sorted(MINIMAL["allowed_imports"] + ["numpy", "pandas", "scipy"]),
    "pre_imports": ["numpy", "pandas", "scipy"],
    "blocklist": [["numpy", "ctypeslib"], ["numpy", "frompyfunc"]]
    + [["pandas", a] for a in (
        "read_pickle read_sql read_sql_query read_sql_table read_html read_fwf read_clipboard "
        "read_excel read_feather read_parquet read_orc read_sas read_spss read_stata read_gbq "
        "read_hdf").split()]
    + [["scipy.io", a] for a in "loadmat savemat mmread mmwrite".split()],
    "stages": [{"name": "ast_scan", "mode": "enforce"}, {"name": "blocklist_audit", "mode": "enforce"}],
})
PROFILES = {"minimal": MINIMAL, "data-science": DATA_SCIENCE}


class Runner:
    def __init__(self, mode, config):
        r3, w3 = os.pipe()          # sbx-serve -> runner (the runner's fd 3)
        r4, w4 = os.pipe()          # runner -> sbx-serve (the runner's fd 4)

        def child_fds():
            # Through fresh copies: r3 or w4 may already be 3 or 4, and a
            # dup2 onto itself would keep its close-on-exec flag.
            a, b = os.dup(r3), os.dup(w4)
            os.dup2(a, 3)
            os.dup2(b, 4)

        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
        self.proc = subprocess.Popen(
            [PYTHON, "-I", "-B", RUNNER, mode], stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
            close_fds=False, preexec_fn=child_fds)
        os.close(r3)
        os.close(w4)
        self.w = os.fdopen(w3, "wb", buffering=0)
        self.r = os.fdopen(r4, "rb")
        self.send(config)
        self.ready = self.recv()

    def send(self, obj):
        self.w.write((json.dumps(obj) + "\n").encode())

    def recv(self):
        line = self.r.readline()
        return json.loads(line) if line else None

    def close(self):
        self.w.close()
        self.r.close()


def config_from(args):
    cfg = MINIMAL
    if "--profile" in args:
        cfg = PROFILES[args[args.index("--profile") + 1]]
    cfg = json.loads(json.dumps(cfg))
    if "--config" in args:
        cfg.update(json.loads(args[args.index("--config") + 1]))
    return cfg


def parse_table(text):
    cases = []
    for block in text.split("\n----\n"):
        if not block.strip():
            continue
        code, sep, want = block.partition("\n=>")
        if not sep:
            raise SystemExit(f"drive_runner: a case without '=>': {block!r}")
        cases.append((code, [w for w in want.split("\n") if w.strip()]))
    return cases


def cmd_check(args):
    cases = parse_table(sys.stdin.read())
    r = Runner("check", config_from(args))
    if not r.ready or not r.ready.get("ready"):
        print(f"validator not ready: {r.ready}")
        return 1
    bad = 0
    for i, (code, want) in enumerate(cases):
        r.send({"id": i, "code": code})
        got = r.recv()
        staged = [w.split(": ", 1)[0] in ("ast_scan", "blocklist_audit") for w in want]
        msgs = [f'{v["stage"]}: {v["message"]}' if st else v["message"]
                for v, st in zip(got["violations"], staged + [False] * len(got["violations"]))]
        if got.get("id") != i or msgs != want:
            bad += 1
            print(f"MISMATCH for code {code!r}\n  want {json.dumps(want)}\n  got  {json.dumps(msgs)}")
        for v in got["violations"]:
            line = v.get("line")
            m = v["message"]
            if not isinstance(line, int) or v.get("stage") not in ("ast_scan", "blocklist_audit") \
                    or not (m.startswith(f"Line {line}: ") or m.endswith(f"(line {line})")):
                bad += 1
                print(f"malformed violation {v}")
    r.close()
    rc = r.proc.wait(timeout=10)
    err = r.proc.stderr.read().decode()
    if rc != 0 or err:
        print(f"validator exit {rc}, stderr {err!r}")
        bad += 1
    print(f"{len(cases)} cases, {bad} mismatches")
    return 1 if bad else 0


def cmd_exec(args):
    code = sys.stdin.read()
    timeout = float(args[args.index("--timeout") + 1]) if "--timeout" in args else 20
    r = Runner("exec", config_from(args))
    ready = r.ready
    if ready and ready.get("ready"):
        r.send({"id": 1, "code": code})
    r.close()
    try:
        out, err = r.proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        r.proc.kill()
        out, err = r.proc.communicate()
    print(json.dumps({"exit": r.proc.returncode, "stdout": out.decode("utf-8", "replace"),
                      "stderr": err.decode("utf-8", "replace"), "ready": ready}))
    return 0


def cmd_api(args):
    import urllib.error
    import urllib.request
    url = args[0].rstrip("/") + "/execute"
    headers = {"Content-Type": "application/json"}
    if "--token" in args:
        headers["Authorization"] = "Bearer " + args[args.index("--token") + 1]
    bad = 0
    cases = parse_table(sys.stdin.read())
    for code, want in cases:
        want = [w.split(": ", 1)[1] if w.split(": ", 1)[0] in ("ast_scan", "blocklist_audit") else w
                for w in want]
        req = urllib.request.Request(url, json.dumps({"code": code}).encode(), headers)
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                status, body = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, body = e.code, e.read()
        try:
            got = json.loads(body)
        except ValueError:
            got = body.decode("utf-8", "replace")
        expect = {"error": "Code validation failed", "violations": want} if want else None
        if want and (status != 400 or got != expect):
            bad += 1
            print(f"MISMATCH for code {code!r}\n  want 400 {json.dumps(expect)}\n  got  {status} {json.dumps(got)}")
        elif not want and (status != 200 or not isinstance(got, dict)
                           or sorted(got) != ["exit_code", "stderr", "stdout", "timed_out"]):
            bad += 1
            print(f"MISMATCH for code {code!r}\n  want 200 and a result\n  got  {status} {json.dumps(got)}")
    print(f"{len(cases)} cases, {bad} mismatches")
    return 1 if bad else 0


def cmd_raw(args):
    mode = args[0]
    r3, w3 = os.pipe()
    r4, w4 = os.pipe()

    def child_fds():
        a, b = os.dup(r3), os.dup(w4)
        os.dup2(a, 3)
        os.dup2(b, 4)

    proc = subprocess.Popen([PYTHON, "-I", "-B", RUNNER, mode], stdin=subprocess.DEVNULL,
                            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                            close_fds=False, preexec_fn=child_fds)
    os.close(r3)
    os.close(w4)
    data = sys.stdin.buffer.read()
    try:
        while data:
            data = data[os.write(w3, data):]
    except BrokenPipeError:
        pass
    os.close(w3)
    with os.fdopen(r4, "rb") as r:
        for line in r:
            print(line.decode().rstrip("\n"))
    print(f"exit {proc.wait(timeout=20)}")
    return 0


def cmd_bench(args):
    n = int(args[0])
    code = sys.stdin.read()
    r = Runner("check", config_from(args))
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        r.send({"id": i, "code": code})
        r.recv()
        times.append((time.perf_counter() - t0) * 1e6)
    r.close()
    r.proc.wait()
    times.sort()
    # The scan alone, in this process (same code, no pipes).
    import importlib.util
    spec = importlib.util.spec_from_file_location("serve_runner", RUNNER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cfg = config_from(args)
    chk = mod.Checker(cfg["allowed_imports"], cfg["blocklist"], [s["name"] for s in cfg["stages"]])
    scan = []
    for _ in range(n):
        t0 = time.perf_counter()
        chk.check(code)
        scan.append((time.perf_counter() - t0) * 1e6)
    scan.sort()
    print(f"round trip p50 {times[n // 2]:.0f} us p99 {times[n * 99 // 100]:.0f} us; "
          f"scan p50 {scan[n // 2]:.0f} us p99 {scan[n * 99 // 100]:.0f} us ({n} requests)")
    return 0


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    cmd, args = sys.argv[1], sys.argv[2:]
    return {"check": cmd_check, "exec": cmd_exec, "raw": cmd_raw, "api": cmd_api,
            "bench": cmd_bench}[cmd](args)


if __name__ == "__main__":
    sys.exit(main())
