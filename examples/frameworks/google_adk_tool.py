"""The `run_code` tool for Google ADK, backed by sbx-serve.

    SANDBOX_URL=http://localhost:8000 python3 google_adk_tool.py 'print(6 * 7)'

`run_code` is plain Python (urllib, no framework): it POSTs the code to
SANDBOX_URL/execute and returns what the program printed, or the error
text of a refused request.  `build_agent` imports Google ADK only when it is
called, so this file imports (and its HTTP part is tested) without it.
"""
import json
import os
import urllib.error
import urllib.request

SANDBOX_URL = os.environ.get("SANDBOX_URL", "http://localhost:8000")
CLIENT_TIMEOUT = 35         # seconds: the longest execution (30 s) and some slack


def run_code(code: str, timeout: float = 10) -> str:
    """Execute Python code in a secure sandbox and return its output.

    Only the standard library's safe modules are available; print what you
    want to see.  Args: code: the Python source; timeout: seconds (max 30).
    """
    req = urllib.request.Request(
        f"{SANDBOX_URL}/execute",
        data=json.dumps({"code": code, "timeout": timeout}).encode(),
        headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=CLIENT_TIMEOUT) as resp:
            result = json.load(resp)
    except urllib.error.HTTPError as e:
        return f"Error: sandbox returned HTTP {e.code}: {e.read().decode('utf-8', 'replace')}"
    except (urllib.error.URLError, TimeoutError, OSError) as e:
        return f"Error: sandbox unreachable at {SANDBOX_URL}: {e}"
    out = result["stdout"]
    if result["stderr"]:
        out += f"\nSTDERR:\n{result['stderr']}"
    if result["timed_out"]:
        out += "\n(timed out)"
    elif result["exit_code"] != 0:
        out += f"\n(exit code {result['exit_code']})"
    return out


def build_agent(model="gemini-2.0-flash"):
    """A Google ADK agent; ADK takes a plain function as a tool and reads
    its docstring and type hints."""
    from google.adk.agents import Agent

    return Agent(name="coder", model=model,
                 instruction="Answer by writing Python and running it with run_code.",
                 tools=[run_code])


if __name__ == "__main__":
    import sys
    print(run_code(sys.argv[1] if len(sys.argv) > 1 else
                   'import math\nprint(f"pi = {math.pi}")'))
