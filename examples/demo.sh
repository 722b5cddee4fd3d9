#!/bin/sh
# make demo: runs examples/agent.py under sbx-guard with the shipped default
# policy, shows the audit trail, then ends a second run with sbx-kill; then
# starts sbx-serve and runs SERVE.md's six checks against it (--verify).
# Everything lives in $BUILD/demo (a workspace, a fake home with a fake SSH
# key, and a private store), so the demo never touches your files or store.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
BIN="$ROOT/$BUILD/bin"
D="$ROOT/$BUILD/demo"
export PATH="$BIN:/usr/local/bin:/usr/bin:/bin"

rm -rf "$D" && mkdir -p "$D/ws/src" "$D/ws/tests" "$D/home/.ssh" "$D/state"
export SBX_RUNTIME_DIR="$D/run" SBX_AUDIT_DB="$D/state/audit.db" HOME="$D/home"
cleanup() {
    [ -n "${SERVER:-}" ] && kill "$SERVER" 2>/dev/null
    [ -n "${SERVE:-}" ] && kill "$SERVE" 2>/dev/null && wait "$SERVE" 2>/dev/null
    [ -f "$SBX_RUNTIME_DIR/sbx-auditd.pid" ] && kill "$(cat "$SBX_RUNTIME_DIR/sbx-auditd.pid")" 2>/dev/null
    true
}
trap cleanup EXIT INT TERM

printf 'def add(a, b):\n    return a + b\n' > "$D/ws/src/app.py"
cat > "$D/ws/tests/test_app.py" <<'PY'
import sys, unittest
sys.path.insert(0, "src")
from app import add
class T(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 2), 4)
PY
echo 'OPENAI_API_KEY=sk-demo-not-a-real-key' > "$D/ws/.env"
echo '-----BEGIN OPENSSH PRIVATE KEY----- (demo)' > "$D/home/.ssh/id_rsa"
cp "$ROOT/examples/agent.py" "$D/ws/agent.py"

# An allowed local service for the agent to call.
mkdir -p "$D/www" && echo hello > "$D/www/index.html"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 -m http.server "$PORT" --bind 127.0.0.1 --directory "$D/www" >/dev/null 2>&1 &
SERVER=$!
sleep 0.5

say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

cd "$D/ws"
say "sbx-guard --policy policies/default.yaml --name demo-coder --notify agent -- python3 agent.py --server $PORT"
sbx-guard --policy "$ROOT/policies/default.yaml" --name demo-coder --notify agent -- \
    python3 agent.py --server "$PORT" || echo "(agent exited $?)"

say "sbx-audit stats --agent demo-coder"
sbx-audit stats --agent demo-coder

say "sbx-audit query --agent demo-coder --decision deny"
sbx-audit query --agent demo-coder --decision deny

say "sbx-guard --name demo-looper -- python3 agent.py --loop &   # a second run, then the kill switch"
sbx-guard --policy "$ROOT/policies/default.yaml" --name demo-looper --no-notify -- \
    python3 agent.py --loop >"$D/looper.out" 2>&1 &
GUARD=$!
sleep 2
say "sbx-kill demo-looper --reason 'demo: stop the runaway agent'"
sbx-kill demo-looper --reason "demo: stop the runaway agent"
status=0
wait "$GUARD" || status=$?
echo "sbx-guard exited $status (137 = killed)"

say "sbx-audit query --agent demo-looper --op kill"
sbx-audit query --agent demo-looper --op kill

say "sbx-audit agents"
sbx-audit agents

say "sbx-audit verify"
sbx-audit verify

# The code-execution service on the same machinery, and the six checks.
SPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
say "sbx-serve --listen 127.0.0.1:$SPORT &   # the code-execution service"
sbx-serve --listen "127.0.0.1:$SPORT" >"$D/serve.log" 2>&1 &
SERVE=$!
i=0
until curl -sf "http://127.0.0.1:$SPORT/healthz" >/dev/null 2>&1; do
    kill -0 "$SERVE" 2>/dev/null && [ $i -lt 300 ] || { cat "$D/serve.log"; exit 1; }
    sleep 0.1; i=$((i + 1))
done
say "sbx-serve --verify http://127.0.0.1:$SPORT"
sbx-serve --verify "http://127.0.0.1:$SPORT"
kill "$SERVE"; wait "$SERVE" 2>/dev/null || true; SERVE=

printf '\nThe demo store is %s; to look around:\n  export SBX_AUDIT_DB=%s\n' "$SBX_AUDIT_DB" "$SBX_AUDIT_DB"
