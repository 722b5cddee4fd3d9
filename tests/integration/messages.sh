#!/bin/sh
# What the tools say: text from agents and users is escaped before it
# reaches a terminal, refusals say what really happened, counts are true,
# and verify tells a copy of the store from the store.
. "$(dirname "$0")/../lib.sh"

DEFAULT="$POLICIES/default.yaml"
RLO=$(printf '\342\200\256')   # U+202E RIGHT-TO-LEFT OVERRIDE
ESC=$(printf '\033')

test_table_output_escapes_bidi_overrides_and_control_characters() {
    name="invoice${RLO}fdp.exe${ESC}[31m"
    guard --policy "$DEFAULT" --name bidi -- /bin/sh -c "cat './$name' 2>/dev/null; true"
    out=$(sbx-audit query --agent bidi)
    assert_contains "$out" 'invoice\u{202e}fdp.exe\x1b[31m' "the table"
    assert_not_contains "$out" "$RLO" "the table"
    assert_not_contains "$out" "$ESC" "the table"
    out=$(sbx-audit stats --agent bidi)
    assert_not_contains "$out" "$RLO" "stats"
    # JSON keeps the text, as escapes a terminal does not act on
    assert_contains "$(rows --agent bidi)" 'invoice\u202efdp.exe\u001b[31m' "the JSON"
}

test_a_bad_name_is_echoed_escaped() {
    rc=0; err=$(guard --name "a${RLO}b${ESC}[2J" -- /bin/true 2>&1) || rc=$?
    assert_eq "$rc" 125 "exit status"
    assert_contains "$err" "--name: 'a\\u{202e}b\\x1b[2J' must be"
    assert_not_contains "$err" "$ESC"
    assert_not_contains "$err" "$RLO"
}

test_sbx_kill_reports_how_many_processes_a_pid_namespace_held() {
    # durations unique to this run: the processes are found by them
    d1=$((3000 + $$ % 900)); d2=$((d1 + 1))
    guard --policy "$DEFAULT" --isolation auto --name many -- \
        /bin/sh -c "sleep $d1 & sleep $d2 & wait" > "$T/g.out" 2>&1 &
    g=$!
    i=0
    # anchored: sbx-guard's and sh's own command lines hold the text too
    until [ "$(pgrep -c -f "^sleep ($d1|$d2)\$" || true)" -ge 2 ]; do
        sleep 0.1; i=$((i + 1))
        [ $i -lt 100 ] || { kill $g; fail "agent never started"; }
    done
    out=$(sbx-kill many) || { kill $g; fail "sbx-kill failed: $out"; }
    wait $g || true
    n=$(echo "$out" | sed -n 's/.*killed \([0-9]*\) process.*/\1/p')
    [ "${n:-0}" -ge 3 ] || fail "sbx-kill said: $out"
}

test_a_client_of_another_uid_is_told_why_not_that_nothing_runs() {
    [ "$(id -u)" = 0 ] || skip "needs root to run a client as another uid"
    command -v setpriv >/dev/null || skip "setpriv is not installed"
    guard --policy "$DEFAULT" --name mine -- /bin/true
    # through the tools: the directory is not theirs
    chmod 0755 "$T" "$(dirname "$SBX_AUDIT_DB")"
    rc=0
    err=$(setpriv --reuid 65534 --regid 65534 --clear-groups "$BIN/sbx-kill" mine 2>&1) || rc=$?
    assert_eq "$rc" 1 "sbx-kill exit"
    assert_contains "$err" "runtime directory $SBX_RUNTIME_DIR is owned by uid 0, not by you (uid 65534)"
    assert_not_contains "$err" "not running"
    # and the daemon itself, reached past the directory, says why it hangs up
    chmod 0711 "$SBX_RUNTIME_DIR"; chmod 0666 "$SBX_RUNTIME_DIR/control.sock"
    out=$(setpriv --reuid 65534 --regid 65534 --clear-groups python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
s.settimeout(5)
print(s.recv(65536).decode())' "$SBX_RUNTIME_DIR/control.sock")
    chmod 0700 "$SBX_RUNTIME_DIR"
    assert_contains "$out" "sbx-auditd refuses you: it serves uid 0 and root, you are uid 65534"
}

test_stats_and_query_on_a_store_that_does_not_exist_fail_naming_it() {
    for cmd in stats query; do
        rc=0; out=$(sbx-audit $cmd 2>&1) || rc=$?
        assert_eq "$rc" 1 "sbx-audit $cmd exit"
        assert_contains "$out" "no audit store at $SBX_AUDIT_DB"
        assert_not_contains "$out" "no events"
    done
}

test_verify_of_a_backup_copy_checks_the_chain_and_says_what_it_could_not() {
    guard --policy "$DEFAULT" --name v -- /bin/true
    stop_daemon
    mkdir -m 0700 "$T/copy"
    sqlite3 "$SBX_AUDIT_DB" ".backup $T/copy/audit.db"
    rc=0; out=$(SBX_AUDIT_DB="$T/copy/audit.db" sbx-audit verify 2>&1) || rc=$?
    assert_eq "$rc" 0 "verify of the copy"
    assert_contains "$out" "chain intact; not checked: the end of the chain (this is a copy of $SBX_AUDIT_DB without its head file"
    # a row altered in the copy is still found
    sqlite3 "$T/copy/audit.db" "update events set target = 'x' where id = 2"
    rc=0; out=$(SBX_AUDIT_DB="$T/copy/audit.db" sbx-audit verify 2>&1) || rc=$?
    assert_eq "$rc" 1 "verify of an altered copy"
    assert_contains "$out" "row 2: content does not match its hash"
    # the copy with the head beside it is checked whole
    sqlite3 "$SBX_AUDIT_DB" ".backup $T/copy/audit.db"
    cp "$SBX_AUDIT_DB.head" "$T/copy/audit.db.head"
    assert_contains "$(SBX_AUDIT_DB="$T/copy/audit.db" sbx-audit verify)" "chain intact, head matches"
}

test_the_live_store_without_its_head_is_still_an_alarm() {
    guard --policy "$DEFAULT" --name v -- /bin/true
    stop_daemon
    mv "$SBX_AUDIT_DB.head" "$T/head.saved"
    rc=0; out=$(sbx-audit verify 2>&1) || rc=$?
    assert_eq "$rc" 1 "verify exit"
    assert_contains "$out" "verify FAILED: chain intact (3 rows) but the head file $SBX_AUDIT_DB.head is missing"
}

run_tests
