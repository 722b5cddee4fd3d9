#!/bin/sh
# run-agent.sh — runs an agent built on one of the framework tools of this
# directory, the way sbx is meant to hold it:
#   1. sbx-serve answers run_code on localhost:8000 (started here unless one
#      already answers there; stopped at the end if started here);
#   2. the agent runs under sbx-guard with agent-policy.yaml: it may reach
#      sbx-serve and the model APIs, nothing else, and every file and
#      connection it touches is in the audit store.
#
#   examples/frameworks/run-agent.sh [--profile NAME] AGENT.py [ARGS...]
#   e.g. OPENAI_API_KEY=... examples/frameworks/run-agent.sh my_langgraph_agent.py
#
# With no AGENT.py it runs langgraph_tool.py's own demo (one run_code call,
# no model needed).  The agent's workspace (what it may read and write) is
# the directory of AGENT.py unless SBX_WORKSPACE names another.  SBX_BIN
# points at sbx's binaries (default: build/bin of this tree, else PATH).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${SBX_BIN:-$root/build/bin}
[ -x "$bin/sbx-serve" ] || bin=$(dirname "$(command -v sbx-serve || echo /usr/local/bin/sbx-serve)")
profile=minimal
if [ "${1:-}" = "--profile" ]; then profile=$2; shift 2; fi
agent=${1:-$here/langgraph_tool.py}
[ $# -gt 0 ] && shift

export SANDBOX_URL=${SANDBOX_URL:-http://localhost:8000}
serve_pid=""
cleanup() { [ -n "$serve_pid" ] && kill -TERM "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null; true; }
trap cleanup EXIT INT TERM

if ! curl -sf --max-time 2 "$SANDBOX_URL/healthz" >/dev/null 2>&1; then
    hostport=${SANDBOX_URL#*://}; hostport=${hostport%%/*}
    case "$hostport" in localhost:*) hostport=127.0.0.1:${hostport#localhost:} ;; esac
    "$bin/sbx-serve" --listen "$hostport" --profile "$profile" &
    serve_pid=$!
    i=0
    until curl -sf --max-time 2 "$SANDBOX_URL/healthz" >/dev/null 2>&1; do
        kill -0 "$serve_pid" 2>/dev/null || { echo "run-agent: sbx-serve did not start" >&2; exit 1; }
        i=$((i + 1)); [ $i -lt 300 ] || { echo "run-agent: sbx-serve does not answer" >&2; exit 1; }
        sleep 0.1
    done
fi

rc=0
agent=$(cd "$(dirname "$agent")" && pwd)/$(basename "$agent")
"$bin/sbx-guard" --policy "$here/agent-policy.yaml" --name "agent-$(basename "$agent" .py)" \
    --workspace "${SBX_WORKSPACE:-$(dirname "$agent")}" \
    -- python3 "$agent" "$@" || rc=$?
exit $rc
