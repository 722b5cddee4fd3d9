#!/bin/sh
# The README's policy-writing workflow: run the agent under audit.yaml,
# then read what it would have been denied.  `sbx-audit stats` counts the
# would-be denials of an audit-mode run (recorded as allowed, reason
# "audit: ...") instead of showing "0 denied" (#14).
. "$(dirname "$0")/../lib.sh"

test_stats_of_an_audit_mode_run_counts_the_would_be_denials() {
    secret
    rc=0
    guard --isolation none --name aud --policy "$POLICIES/audit.yaml" -- \
        sh -c 'cat .env; cat .env; cat /etc/hostname' >/dev/null 2>&1 || rc=$?
    assert_eq "$rc" 0 "audit mode denies nothing"
    out=$(sbx-audit stats --agent aud)
    assert_contains "$out" "(0 denied, 2 would be denied)"
    assert_contains "$out" "denials and would-be denials by op: open-read 2"
    assert_contains "$out" "/.env"
    # an enforcing run reads as before
    guard --isolation none --name enf --policy "$POLICIES/default.yaml" -- cat .env \
        >/dev/null 2>&1 || true
    out=$(sbx-audit stats --agent enf)
    assert_contains "$out" "(1 denied)"
    assert_contains "$out" "denials by op: open-read 1"
    assert_not_contains "$out" "would be denied"
}

run_tests
