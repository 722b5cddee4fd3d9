#!/bin/sh
# The command lines of every sbx program read alike: getopt_long options
# (--opt VALUE and --opt=VALUE), a missing value named with the option and
# the usage exit code, --help on stdout with exit 0, --version, and one
# duration syntax for the policy, sbx-audit --since and sbx-auditd --retain.
. "$(dirname "$0")/../lib.sh"

TOOLS="sbx-guard sbx-audit sbx-kill sbx-policy sbx-auditd sbx-serve"

# The usage exit code of each program (its man page, EXIT STATUS).
usage_code() { case "$1" in sbx-guard) echo 125 ;; *) echo 2 ;; esac; }

VERSION=$(sed -n 's/^#define SBX_VERSION "\(.*\)"$/\1/p' "$SBX_ROOT/common/version.h")

# run_daemon ARGS...: starts sbx-auditd with ARGS, waits until it holds its
# pid file, then stops it.  Fails if it exited instead.
run_daemon() {
    mkdir -p "$SBX_RUNTIME_DIR"
    sbx-auditd "$@" 2>"$T/d.log" &
    dp=$!
    i=0
    until [ -S "$SBX_RUNTIME_DIR/control.sock" ] || [ $i -gt 100 ]; do
        kill -0 $dp 2>/dev/null || { cat "$T/d.log" >&2; fail "sbx-auditd $* exited"; return 1; }
        sleep 0.05; i=$((i + 1))
    done
    kill -0 $dp 2>/dev/null || { cat "$T/d.log" >&2; fail "sbx-auditd $* exited"; return 1; }
    stop_daemon
    wait $dp || true
}

test_every_tool_prints_the_version_and_exits_0() {
    [ -n "$VERSION" ] || fail "no SBX_VERSION in common/version.h"
    for t in $TOOLS; do
        out=$($t --version) || fail "$t --version failed"
        assert_eq "$out" "$t $VERSION" "$t --version"
    done
}

test_every_tool_s_help_prints_its_usage_on_stdout_and_exits_0() {
    for t in $TOOLS; do
        out=$($t --help 2>"$T/err") || fail "$t --help failed"
        assert_contains "$out" "usage: $t" "$t --help"
        assert_contains "$out" "--version" "$t --help"
        assert_eq "$(cat "$T/err")" "" "$t --help stderr"
    done
    # And each command's own --help is the same text.
    assert_contains "$(sbx-audit query --help)" "usage: sbx-audit query"
    assert_contains "$(sbx-policy explain --help)" "usage: sbx-policy check"
}

test_a_missing_option_value_names_the_option_and_exits_with_the_usage_code() {
    # One case a line: the program, its arguments with _ for a space, and
    # the option whose value is missing.
    while read -r t args opt; do
        args=$(echo "$args" | tr _ ' ')
        rc=0; $t $args >"$T/out" 2>"$T/err" || rc=$?
        assert_eq "$rc" "$(usage_code "$t")" "exit status of $t $args"
        assert_contains "$(cat "$T/err")" "$t: option '$opt' requires an argument" "$t $args"
        assert_contains "$(cat "$T/err")" "usage: $t" "$t $args"
        assert_eq "$(cat "$T/out")" "" "stdout of $t $args"
    done <<'EOF2'
sbx-guard --policy --policy
sbx-guard --name=x_--policy --policy
sbx-guard --policy_--_true --policy
sbx-guard --workspace_--_true --workspace
sbx-audit query_--agent --agent
sbx-audit tail_--format_json_--since --since
sbx-audit stats_--agent --agent
sbx-kill --reason --reason
sbx-kill coder_--reason --reason
sbx-policy explain_--workspace --workspace
sbx-auditd --retain --retain
sbx-serve --profile --profile
EOF2
}

# synopsis_of_man PAGE: the SYNOPSIS of a man page as plain text, one
# synopsis a line, spaces folded (roff's font macros: .B and .I join their
# words with spaces, .BR, .RB, .IR, .RI, .BI, .IB alternate fonts without).
synopsis_of_man() {
    python3 - "$1" <<'PY'
import re, shlex, sys
out, cur, on = [], [], False
for line in open(sys.argv[1]):
    line = line.rstrip("\n")
    if line.startswith(".SH"):
        on = line.split(None, 1)[1].strip('"') == "SYNOPSIS"
        continue
    if not on:
        continue
    if line == ".br":
        out.append(" ".join(cur)); cur = []
        continue
    m = re.match(r"\.(B|I|BR|RB|IR|RI|BI|IB)\s+(.*)", line)
    if m:
        args = shlex.split(m.group(2).replace("\\", "\\\\"))
        text = (" " if m.group(1) in ("B", "I") else "").join(args)
    else:
        text = line
    text = re.sub(r"\\f[BIRP]", "", text).replace("\\-", "-").replace('\\(dq', '"')
    cur.append(text)
out.append(" ".join(cur))
for s in out:
    print(" ".join(s.split()))
PY
}

# synopsis_of_help TOOL: the usage lines of TOOL --help, one synopsis a line.
synopsis_of_help() {
    $1 --help | awk '
        /^$/ { exit }
        { sub(/^usage: /, ""); sub(/^ +/, "") }
        /^sbx-/ { if (s != "") print s; s = $0; next }
        { s = s " " $0 }
        END { if (s != "") print s }' | tr -s ' '
}

test_every_tool_s_help_and_man_page_give_the_same_synopsis() {
    for page in "$SBX_ROOT"/docs/sbx-*.[18]; do
        t=$(basename "$page" | sed 's/\.[18]$//')
        man=$(synopsis_of_man "$page")
        help=$(synopsis_of_help "$t")
        [ -n "$man" ] || fail "no SYNOPSIS in $page"
        assert_eq "$help" "$man" "$t --help against $page"
    done
}

test_an_unknown_option_or_argument_is_a_usage_error_on_every_tool() {
    for t in $TOOLS; do
        rc=0; $t --bogus >/dev/null 2>"$T/err" || rc=$?
        assert_eq "$rc" "$(usage_code "$t")" "$t --bogus"
        assert_contains "$(cat "$T/err")" "$t: unrecognized option '--bogus'"
    done
    rc=0; sbx-audit stats --since 1h 2>/dev/null || rc=$?; assert_eq "$rc" 2 "stats --since"
    rc=0; sbx-audit verify extra 2>"$T/err" || rc=$?; assert_eq "$rc" 2 "verify extra"
    assert_contains "$(cat "$T/err")" "sbx-audit: verify: unexpected argument 'extra'"
    rc=0; sbx-auditd extra 2>/dev/null || rc=$?; assert_eq "$rc" 2 "sbx-auditd extra"
    rc=0; sbx-kill a b 2>/dev/null || rc=$?; assert_eq "$rc" 2 "sbx-kill a b"
}

test_sbx_audit_takes_option_values_after_an_equals_sign_or_as_the_next_word() {
    "$PROGS/emit_storm" eq1 20 1 0 >/dev/null
    "$PROGS/emit_storm" eq2 20 1 0 >/dev/null
    a=$(sbx-audit query --agent eq1 --decision allow --op open-read --since 1h --limit 3 --format json)
    b=$(sbx-audit query --agent=eq1 --decision=allow --op=open-read --since=1h --limit=3 --format=json)
    assert_eq "$b" "$a" "query with --opt=value"
    assert_eq "$(echo "$a" | wc -l)" 3 "rows"
    echo "$a" | has_row agent=eq1 decision=allow op=open-read || fail "not eq1's reads: $a"
    assert_not_contains "$a" '"agent":"eq2"'
    assert_not_contains "$a" '"decision":"deny"'
    assert_eq "$(sbx-audit stats --agent=eq2)" "$(sbx-audit stats --agent eq2)" "stats"
    assert_contains "$(sbx-audit stats --agent=eq2)" "agent eq2"
    assert_not_contains "$(sbx-audit stats --agent=eq2)" "agent eq1"
}

test_sbx_policy_explain_takes_the_workspace_either_way() {
    mkdir -p "$T/other"
    a=$(sbx-policy explain --workspace "$T/other" "$POLICIES/default.yaml" open-write x.txt)
    b=$(sbx-policy explain --workspace="$T/other" "$POLICIES/default.yaml" open-write x.txt)
    assert_eq "$b" "$a"
    assert_contains "$a" "allow open-write $(cd "$T/other" && pwd -P)/x.txt"
    c=$(sbx-policy explain -w "$T/other" "$POLICIES/default.yaml" open-write x.txt)
    assert_eq "$c" "$a" "-w"
}

test_sbx_kill_takes_the_reason_either_way() {
    for form in equals word; do
        "$PROGS/emit_storm" --guard "k$form" > "$T/guard.$form" &
        gp=$!
        i=0; until grep -q ready "$T/guard.$form" 2>/dev/null || [ $i -gt 100 ]; do sleep 0.05; i=$((i+1)); done
        if [ $form = equals ]; then
            sbx-kill "k$form" --reason="why $form" >/dev/null
        else
            sbx-kill --reason "why $form" "k$form" >/dev/null
        fi
        wait $gp
        assert_contains "$(cat "$T/guard.$form")" "reason=why $form"
    done
}

test_sbx_guard_takes_option_values_either_way() {
    guard --isolation=none --name=eqguard --policy="$POLICIES/default.yaml" -- true
    guard --isolation none --name wordguard --policy "$POLICIES/default.yaml" -- true
    out=$(sbx-audit agents)
    assert_contains "$out" "eqguard"
    assert_contains "$out" "wordguard"
    expect_row agent=eqguard op=start
    expect_row agent=wordguard op=start
}

test_sbx_auditd_takes_the_retention_either_way() {
    run_daemon --retain=1h
    run_daemon --retain 1h
    run_daemon -r 1h
}

# One table, three parsers' callers: each form is a policy limit, a --since
# and a --retain; each bad form is refused by all three.
GOOD_DURATIONS="250ms 90s 30m 2h 7d 1h30m 1d2h3m4s5ms"
BAD_DURATIONS="30 5x 1.5h -5m 5minutes"

test_durations_take_the_same_forms_in_the_policy_since_and_retain() {
    "$PROGS/emit_storm" dur 5 1 0 >/dev/null
    stop_daemon
    for d in $GOOD_DURATIONS; do
        printf 'version: 1\nlimits:\n  timeout: %s\n  cpu: %s\n' "$d" "$d" > "$T/p.yaml"
        sbx-policy check "$T/p.yaml" >/dev/null || fail "the policy refused $d"
        sbx-audit query --since "$d" --format json >/dev/null || fail "--since refused $d"
    done
    # The rows are seconds old: a minute back covers them, a moment not.
    assert_eq "$(sbx-audit query --since 1m30s --agent dur --format json | wc -l)" 7 "rows within 90s"
    sleep 0.3
    assert_eq "$(sbx-audit query --since 250ms --agent dur --format json | wc -l)" 0 "rows within 250ms"
    # Last: a short retention deletes them.
    for d in $GOOD_DURATIONS; do
        run_daemon --retain "$d"
    done
    for d in $BAD_DURATIONS; do
        printf 'version: 1\nlimits:\n  timeout: %s\n' "$d" > "$T/p.yaml"
        rc=0; sbx-policy check "$T/p.yaml" >/dev/null 2>"$T/err" || rc=$?
        assert_eq "$rc" 1 "the policy with $d"
        assert_contains "$(cat "$T/err")" "bad duration"
        rc=0; sbx-audit query --since "$d" >/dev/null 2>&1 || rc=$?
        assert_eq "$rc" 2 "--since $d"
        rc=0; sbx-auditd --retain "$d" >/dev/null 2>"$T/err" || rc=$?
        assert_eq "$rc" 2 "--retain $d"
        assert_contains "$(cat "$T/err")" "sbx-auditd: --retain: '$d' is not a duration"
    done
}

run_tests
