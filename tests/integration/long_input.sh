#!/bin/sh
# Inputs longer than a control message or PATH_MAX: whatever the kernel
# accepts runs and is recorded, clipped with a marker (and, where sbx clips
# it, the whole text's length and SHA-256).
. "$(dirname "$0")/../lib.sh"

DEFAULT="$POLICIES/default.yaml"

# row_field OP FIELD: FIELD of the first row of OP, from JSON rows on stdin.
row_field() {
    python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    if r["op"] == sys.argv[1]:
        print(r[sys.argv[2]] or "")
        break
' "$1" "$2"
}

test_a_command_line_of_100000_arguments_runs_and_is_recorded_clipped_with_its_hash() {
    start=$(date +%s)
    rc=0
    out=$(guard --policy "$DEFAULT" --name long -- /bin/sh -c 'echo $#' sh $(seq 1 100000)) || rc=$?
    took=$(( $(date +%s) - start ))
    assert_eq "$rc" 0 "exit status"
    assert_eq "$out" 100000 "arguments the agent got"
    [ "$took" -lt 10 ] || fail "took $took s"
    whole=$( (printf '/bin/sh -c echo $# sh'; seq 1 100000 | tr '\n' ' ' | sed 's/ $//; s/^/ /') )
    len=$(printf '%s' "$whole" | wc -c)
    sum=$(printf '%s' "$whole" | sha256sum | cut -d' ' -f1)
    target=$(rows --agent long | row_field start target)
    assert_contains "$target" '/bin/sh -c echo $# sh 1 2 3 '
    assert_contains "$target" "...[truncated: $len bytes, sha256 $sum]"
    cmd=$(sqlite3 "$SBX_AUDIT_DB" "select command from agents where name = 'long'")
    assert_contains "$cmd" "...[truncated: $len bytes, sha256 $sum]"
    expect_row agent=long op=exit target="exited 0"
}

test_one_argument_of_120_KiB_runs_and_is_recorded() {
    big=$(head -c 122880 /dev/zero | tr '\0' a)
    rc=0; out=$(guard --policy "$DEFAULT" --name big -- /bin/sh -c 'echo ${#1}' sh "$big") || rc=$?
    assert_eq "$rc" 0 "exit status"
    assert_eq "$out" 122880 "length the agent got"
    expect_row agent=big op=start "target~...[truncated: 122905 bytes, sha256 "
}

test_a_kill_with_a_100_KB_reason_still_kills_and_records_the_reason_clipped() {
    guard --policy "$DEFAULT" --name victim -- sleep 30 > "$T/g.out" 2>&1 &
    g=$!
    i=0
    until sbx-audit agents 2>/dev/null | grep -q '^victim .*running'; do
        sleep 0.1; i=$((i + 1)); [ $i -lt 100 ] || fail "victim never started"
    done
    reason=$(head -c 100000 /dev/zero | tr '\0' r)
    sum=$(printf '%s' "$reason" | sha256sum | cut -d' ' -f1)
    rc=0; out=$(sbx-kill victim --reason "$reason" 2>&1) || rc=$?
    assert_eq "$rc" 0 "sbx-kill exit"
    assert_contains "$out" "killed victim"
    rc=0; wait $g || rc=$?
    assert_eq "$rc" 137 "sbx-guard's exit status"
    kr=$(sqlite3 "$SBX_AUDIT_DB" "select kill_reason from agents where name = 'victim'")
    assert_contains "$kr" "rrrr...[truncated: 100000 bytes, sha256 $sum]"
    expect_row agent=victim op=kill "reason~...[truncated: 100000 bytes, sha256 $sum]"
}

test_a_path_longer_than_PATH_MAX_is_refused_with_a_row() {
    long=$(python3 -c 'print("/".join(["d" * 200] * 25))')
    out=$(guard --policy "$DEFAULT" --isolation none --name lp -- python3 -c '
import sys
try:
    open(sys.argv[1])
except OSError as e:
    print(e.strerror)' "$WS/$long/f") || true
    assert_eq "$out" "File name too long"
    rows --agent lp > "$T/rows.json"
    python3 - "$T/rows.json" "$WS/$long/f" <<'PY' || fail "no row for the long path"
import json, sys
want = sys.argv[2]
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["op"] == "open-read" and r["decision"] == "deny" and r["target"] == want \
            and "longer than PATH_MAX" in r["reason"] and r["errno"] == 36:
        sys.exit(0)
sys.exit(1)
PY
}

run_tests
