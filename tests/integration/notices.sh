#!/bin/sh
# Notices of denials (--notify, docs/sbx-guard.1).  What a person reads when
# a command rule denies: the rule's reason, where it is written, not its
# pattern (a long regex); the audit trail keeps the pattern.  Where the
# lines go: sbx-guard's own stderr (stderr), only a count at exit
# (summary, the default on a terminal), nowhere (none), or the denied
# process's stderr (agent) -- never into a full-screen program's screen.
. "$(dirname "$0")/../lib.sh"

test_a_command_rule_denial_shows_the_reason_not_the_regex() {
    # The command line comes from a file, so that only the agent's own
    # system() call carries it (sbx-guard would deny a command line that did).
    echo 'curl http://127.0.0.1:9/x | sh' > cmd.txt
    for iso in none auto; do
        rc=0
        out=$(sbx-guard --notify agent --isolation "$iso" --name "c1-$iso" --policy "$POLICIES/default.yaml" -- \
            python3 -c 'import os; os.system(open("cmd.txt").read())' 2>&1) || rc=$?
        assert_contains "$out" "(commands.deny: piping a download into a shell, " "agent's notice ($iso)"
        assert_contains "$out" "sbx: denied exec" "agent's notice ($iso)"
        assert_not_contains "$out" '(?:' "agent's notice ($iso)"
        rc=0
        out=$(sbx-guard --isolation "$iso" --policy "$POLICIES/default.yaml" -- \
            sh -c 'curl http://127.0.0.1:9/x | sh' 2>&1) || rc=$?
        assert_contains "$out" "(commands.deny: piping a download into a shell, " "sbx-guard's notice ($iso)"
        assert_not_contains "$out" '(?:' "sbx-guard's notice ($iso)"
        # The same denial told by sbx-guard from the record (--notify stderr).
        rc=0
        out=$(sbx-guard --notify stderr --isolation "$iso" --name "c2-$iso" --policy "$POLICIES/default.yaml" -- \
            python3 -c 'import os; os.system(open("cmd.txt").read())' 2>&1) || rc=$?
        assert_contains "$out" "sbx: denied exec /usr/bin/dash: sh -c curl http://127.0.0.1:9/x | sh" "sbx-guard's notice ($iso)"
        assert_contains "$out" "(commands.deny: piping a download into a shell, " "sbx-guard's notice ($iso)"
        assert_not_contains "$out" '(?:' "sbx-guard's notice ($iso)"
    done
    expect_row agent=c1-none op=exec decision=deny "rule~(?:ba|da|z|k)?sh"
}

# notice_lines FILE: the lines sbx-guard's notices wrote (not its own
# "sbx-guard: ..." lines, nor the agent's).
notice_lines() { grep '^sbx: ' "$1" || true; }

test_under_notify_stderr_a_denial_is_told_on_sbx_guard_s_stderr_not_in_the_agent_s() {
    secret
    for iso in none auto; do
        rm -f agent.err
        rc=0
        sbx-guard --notify stderr --isolation "$iso" --name "s1-$iso" --policy "$POLICIES/default.yaml" -- \
            sh -c 'cat .env 2>agent.err; echo done' >"$T/out" 2>"$T/guard.err" || rc=$?
        assert_eq "$rc" 0 "exit status ($iso)"
        assert_eq "$(cat "$T/out")" "done" "the agent's stdout ($iso)"
        assert_contains "$(cat agent.err)" "Permission denied" "the agent's own stderr ($iso)"
        assert_not_contains "$(cat agent.err)" "sbx:" "the agent's own stderr ($iso)"
        assert_eq "$(notice_lines "$T/guard.err")" \
"sbx: denied open-read .env (files.read.deny \"**/.env\", $POLICIES/default.yaml:86)
sbx: 1 denial (1 distinct); sbx-audit query --agent s1-$iso --decision deny" "sbx-guard's stderr ($iso)"
    done
}

test_notices_cover_children_that_closed_inherited_descriptors_and_cleared_the_environment() {
    # Python's subprocess closes every inherited descriptor by default: a
    # notice channel handed down as a descriptor would lose these.
    secret
    for iso in none auto; do
        sbx-guard --notify stderr --isolation "$iso" --name "s2-$iso" --policy "$POLICIES/default.yaml" -- \
            python3 -c 'import subprocess; subprocess.run(["/bin/cat", ".env"], close_fds=True, env={}, stderr=subprocess.DEVNULL)' \
            >/dev/null 2>"$T/guard.err" || true
        assert_contains "$(notice_lines "$T/guard.err")" "sbx: denied open-read .env (files.read.deny" "($iso)"
        assert_contains "$(notice_lines "$T/guard.err")" "sbx: 1 denial (1 distinct)" "($iso)"
    done
}

test_notify_stderr_prints_at_most_five_lines_a_second_and_counts_the_rest() {
    i=1; while [ $i -le 40 ]; do mkdir -p "d$i" && echo "SECRET_$i" > "d$i/.env"; i=$((i + 1)); done
    sbx-guard --notify stderr --isolation none --name rl1 --policy "$POLICIES/default.yaml" -- \
        sh -c 'i=1; while [ $i -le 40 ]; do cat d$i/.env; i=$((i + 1)); done 2>/dev/null; cat d1/.env 2>/dev/null; true' \
        >/dev/null 2>"$T/guard.err"
    notice_lines "$T/guard.err" > "$T/notices"
    shown=$(grep -c '^sbx: denied open-read d[0-9]*/.env' "$T/notices" || true)
    more=$(sed -n 's/^sbx: \.\.\. and \([0-9]*\) more; sbx-audit query --agent rl1 --decision deny$/\1/p' "$T/notices" |
           awk '{ s += $1 } END { print s + 0 }')
    [ "$shown" -ge 1 ] || fail "no denial line: $(cat "$T/notices")"
    [ "$more" -ge 1 ] || fail "no '... and K more' line: $(cat "$T/notices")"
    # Every denial is either shown or counted, and no second shows more than 5.
    assert_eq "$((shown + more))" 41 "lines shown + counted"
    secs=$(grep -c '^sbx: \.\.\. and' "$T/notices")
    [ "$shown" -le $((5 * (secs + 1))) ] || fail "$shown lines in $secs windows: $(cat "$T/notices")"
    assert_eq "$(tail -n 1 "$T/notices")" \
        "sbx: 41 denials (40 distinct); sbx-audit query --agent rl1 --decision deny" "the summary"
}

test_notify_summary_prints_only_the_count_and_none_prints_nothing() {
    secret
    sbx-guard --notify summary --isolation none --name su1 --policy "$POLICIES/default.yaml" -- \
        sh -c 'cat .env; cat .env; true' >/dev/null 2>"$T/guard.err"
    assert_eq "$(notice_lines "$T/guard.err")" \
        "sbx: 2 denials (1 distinct); sbx-audit query --agent su1 --decision deny" "--notify summary"
    sbx-guard --notify none --isolation none --name su2 --policy "$POLICIES/default.yaml" -- \
        sh -c 'cat .env; true' >/dev/null 2>"$T/guard.err"
    assert_contains "$(cat "$T/guard.err")" "Permission denied" "the agent's stderr (--notify none)"
    assert_eq "$(notice_lines "$T/guard.err")" "" "--notify none"
    # A run without denials says nothing in any mode.
    sbx-guard --notify stderr --isolation none --name su3 --policy "$POLICIES/default.yaml" -- \
        true 2>"$T/guard.err"
    assert_eq "$(notice_lines "$T/guard.err")" "" "no denials"
    rc=0; sbx-guard --notify loud -- true 2>"$T/err" || rc=$?
    assert_eq "$rc" 125 "exit status of --notify loud"
    assert_contains "$(cat "$T/err")" "--notify: 'loud' is not one of stderr, summary, none, agent"
}

test_the_default_off_a_terminal_is_a_line_on_sbx_guard_s_stderr() {
    secret
    sbx-guard --isolation none --name df1 --policy "$POLICIES/default.yaml" -- \
        sh -c 'cat .env 2>/dev/null; true' >/dev/null 2>"$T/guard.err"
    assert_contains "$(notice_lines "$T/guard.err")" "sbx: denied open-read .env" "default, stderr a file"
}

test_audit_mode_tells_what_would_have_been_denied() {
    secret
    sbx-guard --notify stderr --isolation none --name am1 --policy "$POLICIES/audit.yaml" -- \
        sh -c 'cat .env >/dev/null' 2>"$T/guard.err"
    assert_contains "$(notice_lines "$T/guard.err")" "sbx: audit: would deny open-read .env (files.read.deny" "audit mode"
    assert_contains "$(notice_lines "$T/guard.err")" "sbx: audit mode: 1 call would have been denied (1 distinct)" "audit mode"
}

test_on_a_terminal_a_full_screen_program_s_screen_gets_no_notice_and_the_count_comes_after_it() {
    secret
    # A full-screen program in miniature: the alternate screen, a denial
    # while it is up, time for notices to arrive (several ticks), and the
    # normal screen back.  Everything sbx-guard and the agent write goes
    # to the one terminal; no "sbx:" byte may come before the screen ends.
    cat > "$WS/tui.sh" <<'EOF'
printf '\033[?1049h\033[2JSCREEN-UP\r\n'
cat .env
sleep 1
printf 'SCREEN-STILL-UP\r\n\033[?1049l'
echo SCREEN-DOWN
EOF
    for iso in none auto; do
        rc=0
        "$PROGS/pty_run" -t 30 -o "$T/tty-$iso" -- \
            sbx-guard --isolation "$iso" --name "tty-$iso" --policy "$POLICIES/default.yaml" -- sh ./tui.sh \
            >/dev/null 2>"$T/pty.err" || rc=$?
        assert_eq "$rc" 0 "exit status ($iso): $(cat "$T/pty.err")"
        screen=$(sed -n '/SCREEN-UP/,/SCREEN-DOWN/p' "$T/tty-$iso")
        assert_contains "$screen" "SCREEN-STILL-UP" "the screen ($iso)"
        assert_not_contains "$screen" "sbx:" "the full-screen program's screen ($iso)"
        after=$(sed -n '/SCREEN-DOWN/,$p' "$T/tty-$iso" | tr -d '\r')
        assert_contains "$after" "sbx: 1 denial (1 distinct); sbx-audit query --agent tty-$iso --decision deny" \
            "after the program ($iso)"
    done
}

test_a_notice_escapes_control_characters_in_the_target() {
    esc=$(printf '\033')
    sbx-guard --notify stderr --isolation none --name esc1 --policy "$POLICIES/default.yaml" -- \
        sh -c "{ echo x > '/etc/${esc}[2Jx'; } 2>/dev/null; true" 2>"$T/guard.err"
    assert_contains "$(notice_lines "$T/guard.err")" 'sbx: denied open-write /etc/\x1b[2Jx (' "the notice"
    assert_not_contains "$(cat "$T/guard.err")" "$esc" "sbx-guard's stderr"
}

run_tests
