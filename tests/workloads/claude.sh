#!/bin/sh
# Claude Code's CLI from npm, installed as `npm install -g --prefix ~/.local`
# puts it (~/.local/bin/claude -> ~/.local/lib/node_modules/...): its
# version, its help, and its full-screen TUI on a pseudo-terminal reaching
# the "Unable to connect" screen without a key.  HTTPS_PROXY points at a
# closed loopback port, so the screen is the same with or without a
# network, and nothing leaves the machine.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.inc"

# Pinned, so that a new release cannot change what the test sees; npm
# fetches it (about 80 MB) once per build directory.
CLAUDE_SPEC=@anthropic-ai/claude-code@2.1.197
CLAUDE_CACHE="$WL_CACHE/claude"

claude_install() {
    need_cmd node npm
    [ -x "$CLAUDE_CACHE/lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe" ] && return 0
    mkdir -p "$WL_CACHE"
    rm -rf "$CLAUDE_CACHE.tmp"
    if ! timeout 300 npm install -g --prefix "$CLAUDE_CACHE.tmp" --cache "$WL_CACHE/npm" \
            --no-audit --no-fund --no-update-notifier "$CLAUDE_SPEC" >"$T/npm.log" 2>&1; then
        tail -n 5 "$T/npm.log"
        rm -rf "$CLAUDE_CACHE.tmp"
        skip "Claude Code does not install from the npm registry here (npm install $CLAUDE_SPEC failed)"
    fi
    "$CLAUDE_CACHE.tmp/bin/claude" --version >/dev/null 2>&1 ||
        skip "Claude Code installed but does not run on this machine"
    mv "$CLAUDE_CACHE.tmp" "$CLAUDE_CACHE"
}

# Each home gets the installation by hard links (it is large), laid out as
# npm made it.
claude_home() {
    mkdir -p "$1.home/.local"
    cp -al "$CLAUDE_CACHE/lib" "$1.home/.local/lib"
    cp -a "$CLAUDE_CACHE/bin" "$1.home/.local/bin"
}

test_claude_version_and_help_behave_as_bare() {
    claude_install
    cat > "$T/claude.sh" <<'EOF'
set -e
export HTTPS_PROXY=http://127.0.0.1:9
~/.local/bin/claude --version
~/.local/bin/claude --help | head -n 3
EOF
    same_as_bare claude.sh claude_home
}

test_claude_tui_reaches_the_unable_to_connect_screen_as_bare() {
    claude_install
    cat > "$T/tui.sh" <<'EOF'
export HTTPS_PROXY=http://127.0.0.1:9
~/.local/bin/claude
echo "claude $?" > result
EOF
    WL_STEPS='expect:Welcome to Claude Code
expect:Unable to connect'
    same_as_bare tui.sh claude_home
}

run_tests
