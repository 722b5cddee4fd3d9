#!/bin/sh
# Terminal programs on a pseudo-terminal (tests/progs/pty_run types the
# keys, with a deadline: a hang fails the test, it never hangs the run).
# Programs that read the terminal at once, a pager, an editor and an
# interactive shell with job control behave under sbx as bare: the same
# exit status and the same "result" file.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.inc"

test_programs_that_read_the_terminal_at_once_behave_as_bare() {
    # Typed ahead: the lines wait in the terminal until each program reads.
    cat > "$T/read.sh" <<'EOF'
head -n 1 > result
read line; echo "read: $line" >> result
cat >> result
echo "status $?" >> result
EOF
    WL_STEPS='send:first line\r
send:second line\r
send:third line\r
sleep:300
send:\x04'
    same_as_bare read.sh
    assert_eq "$(cat "$T/bare/result")" "first line
read: second line
third line
status 0" "what the programs read"
}

numbered() { i=1; while [ $i -le 100 ]; do echo "line $i"; i=$((i + 1)); done > "$1/data.txt"; }

test_less_pages_a_file_as_bare() {
    need_cmd less
    cat > "$T/less.sh" <<'EOF'
less data.txt
echo "less $?" > result
EOF
    WL_STEPS='expect:line 1
send:G
expect:line 100
send:q'
    same_as_bare less.sh numbered
}

test_vim_edits_and_writes_a_file_as_bare() {
    need_cmd vim
    cat > "$T/vim.sh" <<'EOF'
vim -u NONE -N notes.txt
echo "vim $?" > result
cat notes.txt >> result
EOF
    WL_STEPS='expect:notes.txt
send:ihello from vim\e
sleep:200
send::wq\r'
    same_as_bare vim.sh
    assert_contains "$(cat "$T/auto/result")" "hello from vim" "the file vim wrote"
}

test_interactive_bash_job_control_behaves_as_bare() {
    need_cmd bash
    cat > "$T/bash.sh" <<'EOF'
bash --norc --noprofile -i
echo "bash $?" > result
EOF
    # Ctrl-C stops the foreground job, Ctrl-Z stops one, bg and fg resume
    # it, kill ends it; each answer comes back through the terminal.  A key
    # is sent only once the job is about to start (its go-N printed, which
    # the typed line itself does not show), then a pause: a Ctrl-C that
    # reached bash before the sleep was in the foreground would be lost.
    WL_STEPS='send:echo ready-$((40+2))\r
expect:ready-42
send:echo go-$((1+1)); sleep 30\r
expect:go-2
sleep:500
send:\x03
send:echo rc-$?\r
expect:rc-130
send:echo go-$((2+1)); sleep 31\r
expect:go-3
sleep:500
send:\x1a
expect:Stopped
send:bg\r
expect:sleep 31 &
send:jobs\r
expect:Running
send:kill %1\r
send:echo over-$((6*7))\r
expect:over-42
send:exit\r'
    same_as_bare bash.sh
}

# sbx-guard hands the terminal to the agent's group and takes it back when
# the agent ends, or when it could not start: the caller (here a script
# that then reads the terminal) is in the foreground again.
test_the_terminal_comes_back_after_the_agent_ends_or_fails_to_start() {
    printf '\177ELF' > not-a-program; chmod +x not-a-program
    for mode in none auto; do
        rm -f result
        rc=0
        "$PROGS/pty_run" -t 20 -o "$T/tty.$mode" 'send:one\r' 'send:two\r' -- sh -c "
            sbx-guard --no-notify --isolation $mode --policy '$POLICIES/default.yaml' -- true
            head -n 1 > result
            sbx-guard --no-notify --isolation $mode --policy '$POLICIES/default.yaml' -- ./not-a-program
            echo \"exit \$?\" >> result
            head -n 1 >> result" || rc=$?
        assert_eq "$rc" 0 "pty_run ($mode)" || { tr -d '\r' < "$T/tty.$mode" >&2; return 1; }
        assert_eq "$(cat result)" "one
exit 125
two" "what the caller read ($mode)"
    done
}

run_tests
