#!/bin/sh
# Every policy in policies/ runs a real program end to end, under
# --isolation none and auto: a shell that reads the workspace, lists it,
# asks git and runs python3 (tools every shipped policy lets an agent run).
# An enforcing policy keeps .env unreadable; an audit-mode policy records
# the read as one the enforcing rules would have denied.
. "$(dirname "$0")/../lib.sh"

test_every_shipped_policy_runs_a_real_program_and_keeps_dotenv_from_it() {
    echo "notes of the project" > notes.txt
    echo SECRET_TOKEN_policies > .env
    git -c init.defaultBranch=main init -q . && git add notes.txt &&
        git -c user.name=t -c user.email=t@example.invalid commit -qm first
    n=0
    for p in "$POLICIES"/*.yaml; do
        name=$(basename "$p" .yaml)
        mode=$(sbx-policy check "$p" | grep -o 'enforce\|audit' | head -n 1)
        for iso in none auto; do
            n=$((n + 1))
            rc=0
            out=$(guard --isolation "$iso" --name "p$n" --policy "$p" -- sh -c '
                cat notes.txt; ls; git log --format=%s; python3 -c "print(6 * 7)"' 2>&1) || rc=$?
            assert_eq "$rc" 0 "$name under $iso: exit status" || { echo "$out" >&2; return 1; }
            assert_contains "$out" "notes of the project" "$name under $iso"
            assert_contains "$out" "first" "$name under $iso: git log"
            assert_contains "$out" "42" "$name under $iso: python3"
            assert_not_contains "$out" "audit channel is unavailable" "$name under $iso"
            rc=0
            out=$(guard --isolation "$iso" --name "s$n" --policy "$p" -- cat .env 2>&1) || rc=$?
            if [ "$mode" = enforce ]; then
                [ "$rc" -ne 0 ] || fail "$name under $iso: cat .env succeeded"
                assert_not_contains "$out" SECRET_TOKEN "$name under $iso"
                expect_row "agent=s$n" op=open-read decision=deny "target~/.env"
            else
                expect_row "agent=s$n" op=open-read decision=allow "target~/.env" "reason~audit:"
            fi
        done
    done
    [ "$n" -ge 6 ] || fail "only $n runs: where are the shipped policies?"
}

# Private keys stay unreadable in every enforcing shipped policy, presets
# included (they extend default.yaml and add only their agent's files).
test_every_enforcing_shipped_policy_keeps_private_keys_unreadable() {
    printf -- '-----BEGIN PRIVATE KEY-----\nSECRET_KEY_ws\n' > key.pem
    cp key.pem id_rsa
    mkdir -p "$HOME/.ssh" && cp key.pem "$HOME/.ssh/id_ed25519"
    n=0
    for p in "$POLICIES"/*.yaml; do
        name=$(basename "$p" .yaml)
        sbx-policy check "$p" | grep -q ': enforce;' || continue
        n=$((n + 1))
        rc=0
        out=$(guard --isolation auto --name "k$n" --policy "$p" -- \
            sh -c 'cat key.pem; cat id_rsa; cat ~/.ssh/id_ed25519; echo ran' 2>&1) || rc=$?
        assert_contains "$out" ran "$name: the shell ran"
        assert_not_contains "$out" SECRET_KEY "$name"
        expect_row "agent=k$n" op=open-read decision=deny "target~/key.pem"
    done
    [ "$n" -ge 6 ] || fail "only $n enforcing policies"
}

# The presets: each loads as an extension of the default and lets its agent
# use its own files, nothing more (sbx-policy explain decides as the guard).
test_agent_presets_allow_their_agents_files_and_keep_the_defaults_secrets() {
    allow() { rc=0; out=$(sbx-policy explain "$POLICIES/$1.yaml" "$2" "$3") || rc=$?
              assert_eq "$rc" 0 "$1: $2 $3: $out"; }
    deny() { rc=0; out=$(sbx-policy explain "$POLICIES/$1.yaml" "$2" "$3") || rc=$?
             assert_eq "$rc" 1 "$1: $2 $3: $out"; }
    for p in claude-code codex aider framework-agent; do
        [ -f "$POLICIES/$p.yaml" ] || fail "policies/$p.yaml is missing"
        sbx-policy check --expanded "$POLICIES/$p.yaml" | grep -q "^# Made of: .*$p.yaml <- default.yaml" ||
            fail "$p does not extend the default"
        for f in .env key.pem "$HOME/.ssh/id_ed25519" "$HOME/.aws/credentials"; do
            deny "$p" open-read "$f"
        done
        deny "$p" open-write "$HOME/.bashrc"
        deny "$p" connect 169.254.169.254:80
    done
    allow claude-code open-write "$HOME/.claude/projects/x.jsonl"
    allow claude-code open-write "$HOME/.claude.json"
    allow claude-code open-write "$HOME/.local/share/claude/versions/2.0.0"
    allow claude-code exec "$HOME/.local/share/claude/versions/2.0.0"
    deny codex open-write "$HOME/.claude.json"
    allow codex open-write "$HOME/.codex/sessions/a.jsonl"
    allow codex open-read "$HOME/.codex/config.toml"
    allow aider open-read "$HOME/.aider.conf.yml"
    allow aider open-write "$HOME/.aider/caches/x"
    allow aider exec "$HOME/.local/share/uv/tools/aider-chat/bin/aider"
    allow aider exec "$HOME/.local/share/pipx/venvs/aider-chat/bin/aider"
    allow framework-agent connect localhost:8000
    allow framework-agent connect 127.0.0.1:8000
    allow framework-agent connect api.openai.com:443
    allow framework-agent connect api.anthropic.com:443
    deny framework-agent connect 127.0.0.1:5432
    deny framework-agent connect example.com:443
    allow default connect example.com:443
}

# What the default policy calls a secret: private keys, credentials, .env
# files; a certificate or a CA bundle (pip's certifi/cacert.pem) is not one.
test_default_policy_denies_private_keys_and_credentials_not_public_certificates() {
    d="$POLICIES/default.yaml"
    for f in .env sub/.env.local key.pem privkey.pem tls-key.pem my_private.pem server.key \
             id_rsa .ssh/config cert.p12 store.pfx "$HOME/.ssh/id_ed25519" "$HOME/.npmrc" \
             "$HOME/.aws/credentials" "$HOME/.cache/huggingface/token"; do
        for op in open-read open-write; do
            rc=0; sbx-policy explain "$d" "$op" "$f" >/dev/null || rc=$?
            assert_eq "$rc" 1 "$op $f"
        done
    done
    for f in cacert.pem ca.pem fullchain.pem cert.pem \
             .venv/lib/python3.11/site-packages/pip/_vendor/certifi/cacert.pem \
             "$HOME/.npm/_cacache/index" "$HOME/.cache/pip/x" "$HOME/.cargo/registry/x"; do
        for op in open-read open-write; do
            rc=0; out=$(sbx-policy explain "$d" "$op" "$f") || rc=$?
            assert_eq "$rc" 0 "$op $f: $out"
        done
    done
    for f in "$HOME/.npm/_npx/1/node_modules/.bin/x" "$HOME/.local/lib/node_modules/x/cli.js" \
             "$HOME/.local/share/claude/versions/1"; do
        rc=0; out=$(sbx-policy explain "$d" exec "$f") || rc=$?
        assert_eq "$rc" 0 "exec $f: $out"
    done
}

test_default_policy_lets_ls_list_the_root_and_ps_see_processes() {
    for iso in none auto; do
        rc=0
        out=$(guard --isolation "$iso" --policy "$POLICIES/default.yaml" -- \
            sh -c 'ls / && ps -o pid,comm' 2>&1) || rc=$?
        assert_eq "$rc" 0 "ls / and ps under $iso: $out"
        assert_contains "$out" "usr" "ls / under $iso"
        assert_contains "$out" "COMMAND" "ps under $iso"
        assert_contains "$out" "ps" "ps under $iso"
        rc=0; guard --isolation "$iso" --policy "$POLICIES/default.yaml" -- \
            sh -c 'cat /proc/$$/environ' >/dev/null 2>&1 || rc=$?
        [ "$rc" -ne 0 ] || fail "a process's environment is readable under $iso"
    done
}

# The kernel layer grants only write roots that exist at start: sbx-guard
# creates a missing package-manager cache whose parent exists (~/.cache),
# and nothing else (~/go is not made for ~/go/pkg/mod).
test_missing_tool_caches_in_the_home_are_writable_under_the_kernel_layer() {
    rc=0
    out=$(guard --isolation auto --policy "$POLICIES/default.yaml" -- \
        sh -c 'mkdir -p ~/.cache/tool && echo cached > ~/.cache/tool/f && mkdir ~/.npm/_logs' 2>&1) || rc=$?
    assert_eq "$rc" 0 "writing ~/.cache and ~/.npm: $out"
    assert_eq "$(cat "$HOME/.cache/tool/f")" cached
    assert_file_absent "$HOME/go"
    assert_eq "$(stat -c %a "$HOME/.npm")" 700 "mode of the created ~/.npm"
}

# The same with the guard alone, so a tool sees the same home in every mode
# (pip checks the owner of its cache's nearest existing parent, which would
# be the hidden home); and a write root without a wildcard may be a file:
# it is not made a directory.
test_missing_tool_caches_are_made_with_the_guard_alone_and_files_are_not_made_directories() {
    mkdir -p "$HOME/.local/bin"
    rc=0
    out=$(guard --isolation none --policy "$POLICIES/claude-code.yaml" --         sh -c 'echo cached > ~/.cache/f && echo "{}" > ~/.claude.json' 2>&1) || rc=$?
    assert_eq "$rc" 0 "writing ~/.cache and ~/.claude.json: $out"
    assert_eq "$(cat "$HOME/.cache/f")" cached
    [ -f "$HOME/.claude.json" ] || fail "~/.claude.json is not a regular file"
    assert_file_absent "$HOME/.local/bin/claude"
    [ -d "$HOME/.cargo" ] || fail "~/.cargo (the root of cargo's lock files) was not made"
}

run_tests
