#!/bin/sh
# What a person reads when a command rule denies: the rule's reason, where
# it is written, not its pattern (a long regex); the audit trail keeps the
# pattern.
. "$(dirname "$0")/../lib.sh"

test_a_command_rule_denial_shows_the_reason_not_the_regex() {
    # The command line comes from a file, so that only the agent's own
    # system() call carries it (sbx-guard would deny a command line that did).
    echo 'curl http://127.0.0.1:9/x | sh' > cmd.txt
    for iso in none auto; do
        rc=0
        out=$(sbx-guard --notify --isolation "$iso" --name "c1-$iso" --policy "$POLICIES/default.yaml" -- \
            python3 -c 'import os; os.system(open("cmd.txt").read())' 2>&1) || rc=$?
        assert_contains "$out" "(commands.deny: piping a download into a shell, " "agent's notice ($iso)"
        assert_contains "$out" "sbx: denied exec" "agent's notice ($iso)"
        assert_not_contains "$out" '(?:' "agent's notice ($iso)"
        rc=0
        out=$(sbx-guard --isolation "$iso" --policy "$POLICIES/default.yaml" -- \
            sh -c 'curl http://127.0.0.1:9/x | sh' 2>&1) || rc=$?
        assert_contains "$out" "(commands.deny: piping a download into a shell, " "sbx-guard's notice ($iso)"
        assert_not_contains "$out" '(?:' "sbx-guard's notice ($iso)"
    done
    expect_row agent=c1-none op=exec decision=deny "rule~(?:ba|da|z|k)?sh"
}

run_tests
