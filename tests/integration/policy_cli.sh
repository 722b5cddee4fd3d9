#!/bin/sh
# sbx-policy: check on every shipped policy, errors with line:col, explain.
. "$(dirname "$0")/../lib.sh"

test_check_accepts_every_shipped_policy() {
    for f in "$POLICIES"/*.yaml; do
        out=$(sbx-policy check "$f")
        assert_contains "$out" "enforce" "summary of $f" || assert_contains "$out" "audit" "summary of $f"
    done
}

test_check_names_line_and_column_of_a_typo() {
    printf 'version: 1\nfiles:\n  read:\n    alow: ["**"]\n' > typo.yaml
    rc=0; err=$(sbx-policy check typo.yaml 2>&1 >/dev/null) || rc=$?
    assert_eq "$rc" 1 "exit status"
    assert_contains "$err" 'typo.yaml:4:5: unknown key "alow" in files.read (did you mean "allow"?)'
}

test_check_reports_every_error_of_a_file() {
    printf 'version: 1\nmode: enforcing\nlimits:\n  memory: 10 MB\n' > two.yaml
    rc=0; err=$(sbx-policy check two.yaml 2>&1 >/dev/null) || rc=$?
    assert_eq "$rc" 1 "exit status"
    assert_contains "$err" "two.yaml:2:7: mode:"
    assert_contains "$err" "two.yaml:4:11: limits.memory: bad size"
}

# deep_policy FILE: 100,000 nested "[" (200 KB), which libyaml took over a
# minute to load.
deep_policy() {
    python3 -c 'import sys; n = 100000
open(sys.argv[1], "w").write("version: 1\nfiles:\n  read:\n    allow: " + "[" * n + "]" * n + "\n")' "$1"
}

test_a_deeply_nested_policy_is_refused_in_under_a_second_with_its_place() {
    deep_policy deep.yaml
    start=$(date +%s%N)
    rc=0; err=$(timeout 10 sbx-policy check deep.yaml 2>&1 >/dev/null) || rc=$?
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    assert_eq "$rc" 1 "exit status"
    assert_contains "$err" "deep.yaml:4:41: nested deeper than 32 levels"
    [ "$ms" -lt 1000 ] || fail "took $ms ms"
}

test_sbx_guard_refuses_a_deeply_nested_dot_sbx_yaml_at_once() {
    # the case of a cloned repository: ./.sbx.yaml is picked up by default
    deep_policy .sbx.yaml
    start=$(date +%s%N)
    rc=0; err=$(timeout 10 sbx-guard --no-notify -- /bin/true 2>&1) || rc=$?
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    assert_eq "$rc" 125 "exit status"
    assert_contains "$err" ".sbx.yaml:4:41: nested deeper than 32 levels"
    [ "$ms" -lt 1000 ] || fail "took $ms ms"
}

test_explain_denies_reading_dotenv_and_names_the_rule() {
    echo SECRET=1 > .env
    rc=0; out=$(sbx-policy explain "$POLICIES/default.yaml" open-read ./.env) || rc=$?
    assert_eq "$rc" 1 "exit status"
    assert_contains "$out" "deny open-read $(pwd -P)/.env"
    assert_contains "$out" 'files.read.deny "**/.env"'
    assert_contains "$out" "layers: guard"
}

test_explain_allows_reading_a_source_file() {
    mkdir -p src && echo 'int main;' > src/main.c
    out=$(sbx-policy explain "$POLICIES/default.yaml" open-read src/main.c)
    assert_contains "$out" "allow open-read $(pwd -P)/src/main.c"
}

test_explain_denies_a_recursive_delete_of_home_in_bash_c() {
    rc=0; out=$(sbx-policy explain "$POLICIES/default.yaml" exec "bash -lc 'rm -rf ~'") || rc=$?
    assert_eq "$rc" 1 "exit status"
    assert_contains "$out" "recursive delete"
}

test_explain_denies_cloud_metadata_and_allows_https() {
    rc=0; sbx-policy explain "$POLICIES/default.yaml" connect 169.254.169.254:80 >/dev/null || rc=$?
    assert_eq "$rc" 1 "metadata"
    sbx-policy explain "$POLICIES/default.yaml" connect api.example.com:443 >/dev/null
}

test_explain_with_a_bad_op_exits_2() {
    rc=0; sbx-policy explain "$POLICIES/default.yaml" frobnicate x 2>/dev/null || rc=$?
    assert_eq "$rc" 2 "exit status"
}

test_help_prints_usage_and_exits_0() {
    out=$(sbx-policy --help)
    assert_contains "$out" "usage: sbx-policy check [--expanded] [--workspace DIR] FILE..."
    rc=0; sbx-policy 2>/dev/null || rc=$?
    assert_eq "$rc" 2 "no arguments"
}

# The examples of docs/policy.md ("Checking and explaining" and "Errors")
# are real output: run each command and compare, line by line (a line the
# doc shortens with "..." is compared up to the "...").
doc_examples() { # prints "CMD<TAB>expected-line" for each output line
    awk '
        /^```/ { inblk = !inblk; cmd = ""; next }
        !inblk { next }
        /^\$ sbx-policy / { cmd = substr($0, 3); next }
        /^\$ / { cmd = ""; next }
        cmd != "" && $0 != "" { print cmd "\t" $0 }
    ' "$SBX_ROOT/docs/policy.md"
}

test_docs_examples_are_real_output() {
    mkdir -p "$T/proj/src" && echo K=1 > "$T/proj/.env"
    proj=$(cd "$T/proj" && pwd -P)
    cd "$SBX_ROOT"
    # the bad.yaml of the Errors section, written as the doc shows it
    awk '/^\$ cat bad.yaml/ { on = 1; next } /^\$ / { on = 0 } on' docs/policy.md > "$T/bad.yaml"
    n=0 last=""
    doc_examples | while IFS="$(printf '\t')" read -r cmd want; do
        if [ "$cmd" != "$last" ]; then
            cmdline=$(echo "$cmd" | sed "s|/tmp/proj|$proj|g; s| bad.yaml| $T/bad.yaml|")
            got=$(eval "$cmdline" 2>&1 | sed "s|$proj|/tmp/proj|g; s|$T/bad.yaml|bad.yaml|g; s|workspace [^;]*;|workspace W;|") || true
            last=$cmd
            i=0
        fi
        i=$((i + 1))
        line=$(printf '%s\n' "$got" | sed -n "${i}p")
        want=$(printf '%s\n' "$want" | sed "s|workspace [^;]*;|workspace W;|")
        case "$want" in
            *...*) pre=${want%%...*}; case "$line" in "$pre"*) ;; *) fail "$cmd: line $i: got '$line', want '$want'"; touch "$T/bad"; exit 1 ;; esac ;;
            *) [ "$line" = "$want" ] || { fail "$cmd: line $i: got '$line', want '$want'"; touch "$T/bad"; exit 1; } ;;
        esac
        n=$((n + 1))
        echo "$n" > "$T/count"
    done
    [ ! -e "$T/bad" ] || return 1
    [ "$(cat "$T/count")" -ge 15 ] || fail "only $(cat "$T/count") example lines compared"
}

run_tests
