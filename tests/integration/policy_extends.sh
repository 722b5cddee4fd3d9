#!/bin/sh
# A policy built on another with extends: and list edits runs end to end
# under sbx-guard: the child's additions and removals hold in the agent,
# the parents' rules and the default's secrets still hold, and the start
# row's policy hash covers every file of the chain (docs/policy.md).
. "$(dirname "$0")/../lib.sh"

# base.yaml (in another directory) lets the agent write /tmp only through
# its own list; child.yaml adds a write root and removes /tmp.
make_chain() {
    mkdir -p "$T/pol/sub" "$T/extra"
    cat >"$T/pol/base.yaml" <<EOB
version: 1
files:
  write:
    allow: ["./**", "/tmp/**"]
env:
  pass: {add: [SBX_TEST_PASSED]}
EOB
    cat >"$T/pol/sub/child.yaml" <<EOC
version: 1
extends: ../base.yaml
files:
  write:
    allow: {add: ["$T/extra/**"], remove: ["/tmp/**"]}
EOC
}

test_a_chained_policy_holds_its_edits_and_the_defaults_secrets_in_the_agent() {
    make_chain
    secret SECRET_TOKEN_chain
    for iso in none auto; do
        rc=0
        out=$(SBX_TEST_PASSED=yes guard --isolation "$iso" --name "c-$iso" \
            --policy "$T/pol/sub/child.yaml" -- sh -c "
                echo made > '$T/extra/f-$iso' && echo ws > 'w-$iso' && echo \"pass=\$SBX_TEST_PASSED\"
                if echo x > /tmp/sbx-chain-$$-$iso 2>/dev/null; then echo TMP-WRITTEN; fi
                cat .env" 2>&1) || rc=$?
        [ "$rc" -ne 0 ] || fail "$iso: cat .env succeeded: $out"
        assert_eq "$(cat "$T/extra/f-$iso")" made "$iso: the child's write root"
        assert_eq "$(cat "w-$iso")" ws "$iso: the parent's write root"
        assert_contains "$out" "pass=yes" "$iso: the parent's env.pass edit"
        assert_not_contains "$out" TMP-WRITTEN "$iso: /tmp was removed by the child"
        assert_not_contains "$out" SECRET_TOKEN "$iso"
        rm -f "/tmp/sbx-chain-$$-$iso"
        expect_row "agent=c-$iso" op=open-read decision=deny "target~/.env"
    done
    want=$(cat "$T/pol/sub/child.yaml" "$T/pol/base.yaml" | sha256sum | cut -d' ' -f1)
    got=$(sqlite3 "$SBX_AUDIT_DB" "select policy_sha256 from agents where name = 'c-none'")
    assert_eq "$got" "$want" "the start row's policy hash covers the chain"
}

test_sbx_guard_refuses_a_chain_with_a_mistake_in_the_parent_at_its_line() {
    make_chain
    printf 'version: 1\nfiles:\n  write:\n    alow: []\n' >"$T/pol/base.yaml"
    rc=0
    out=$(guard --policy "$T/pol/sub/child.yaml" -- true 2>&1) || rc=$?
    assert_eq "$rc" 125 "exit status"
    assert_contains "$out" "base.yaml:4:5: unknown key \"alow\" in files.write (did you mean \"allow\"?)"
}

test_expanded_chain_prints_every_key_with_its_file_and_checks_the_same() {
    make_chain
    sbx-policy check --expanded "$T/pol/sub/child.yaml" >"$T/expanded.yaml"
    out=$(cat "$T/expanded.yaml")
    assert_contains "$out" "# Made of: $T/pol/sub/child.yaml <- $T/pol/sub/../base.yaml <- default.yaml"
    assert_contains "$out" "'./**'  # $T/pol/sub/../base.yaml:4"
    assert_contains "$out" "'$T/extra/**'  # $T/pol/sub/child.yaml:5"
    assert_contains "$out" "'SBX_TEST_PASSED'  # $T/pol/sub/../base.yaml:6"
    assert_not_contains "$out" "'/tmp/**'  # $T/pol"
    # the same name, and the same counts of every list
    a=$(sbx-policy check --workspace "$WS" "$T/pol/sub/child.yaml" | sed 's/^[^:]*: //')
    b=$(sbx-policy check --workspace "$WS" "$T/expanded.yaml" | sed 's/^[^:]*: //')
    assert_eq "$b" "$a" "summary of the expansion"
}

run_tests
