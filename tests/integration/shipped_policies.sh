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

run_tests
