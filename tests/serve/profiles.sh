#!/bin/sh
# policies/serve/: the shipped profiles of sbx-serve say what SERVE.md's
# "Profiles" says (imports, blocklist, stages, memory, timeout), keep the
# request's kernel policy closed (no network, /tmp the only writable place),
# match the configurations the runner's own tests use, and load with
# sbx-policy.
. "$(dirname "$0")/../lib.sh"

PY=/usr/bin/python3
export DRIVE="$SBX_ROOT/tests/serve/drive_runner.py"

# profile_py CODE: runs CODE with `minimal` and `ds` (data-science with its
# extends: resolved by hand: allowed imports and blocklist add up, other
# keys replace) as parsed YAML.
profile_py() {
    rc=0
    "$PY" -c 'import copy, sys
try:
    import yaml
except ImportError:
    sys.exit(77)
d = sys.argv[1] + "/serve/"
minimal = yaml.safe_load(open(d + "minimal.yaml"))
own = yaml.safe_load(open(d + "data-science.yaml"))
assert own["extends"] == "minimal", own.get("extends")
def merge(parent, child, path=()):
    out = copy.deepcopy(parent)
    for k, v in child.items():
        if path + (k,) in (("serve", "allowed_imports"), ("serve", "blocklist")):
            out[k] = out.get(k, []) + v
        elif isinstance(v, dict) and isinstance(out.get(k), dict) and path + (k,) != ("serve", "stages"):
            out[k] = merge(out[k], v, path + (k,))
        else:
            out[k] = v
    return out
ds = merge(minimal, {k: v for k, v in own.items() if k != "extends"})
exec(sys.argv[2])' "$POLICIES" "$1" || rc=$?
    [ $rc -ne 77 ] || skip "python3-yaml missing (make deps)"
    return $rc
}

test_minimal_is_serve_mds_minimal_profile() {
    profile_py '
s = minimal["serve"]
assert minimal["name"] == "minimal" and minimal["version"] == 1
assert s["allowed_imports"] == "collections csv datetime decimal fractions functools itertools json math operator random re statistics string textwrap typing".split(), s["allowed_imports"]
assert s["stages"] == {"ast_scan": "enforce"} and s["runtime_hooks"] == "enforce"
assert s["timeout_max"] == "30s" and s.get("blocklist", []) == [] and s.get("pre_imports", []) == []
assert minimal["limits"]["memory"] == "512MiB"
'
}

test_data_science_extends_minimal_with_three_imports_and_22_blocked_pairs() {
    profile_py '
s = ds["serve"]
assert ds["name"] == "data-science"
assert len(s["allowed_imports"]) == 19 and {"numpy", "pandas", "scipy"} <= set(s["allowed_imports"])
assert s["pre_imports"] == ["numpy", "pandas", "scipy"]
want = ["numpy.ctypeslib", "numpy.frompyfunc"] + ["pandas." + a for a in (
    "read_pickle read_sql read_sql_query read_sql_table read_html read_fwf read_clipboard "
    "read_excel read_feather read_parquet read_orc read_sas read_spss read_stata read_gbq "
    "read_hdf").split()] + ["scipy.io." + a for a in "loadmat savemat mmread mmwrite".split()]
assert s["blocklist"] == want, s["blocklist"]
assert s["stages"] == {"ast_scan": "enforce", "blocklist_audit": "enforce"}
assert ds["limits"]["memory"] == "800MiB"
assert s["timeout_max"] == "30s" and s["runtime_hooks"] == "enforce"
'
}

test_a_requests_kernel_policy_has_no_network_and_writes_only_tmp() {
    profile_py '
for p in (minimal, ds):
    n = p["network"]
    assert n["connect"]["allow"] == [] and n["bind"]["allow"] == [], n
    w = p["files"]["write"]["allow"]
    assert w == ["/tmp/**", "/dev/null"], w
    r = p["files"]["read"]["allow"]
    # "**" is the workspace, which sbx-serve sets to the runner directory
    assert not any(x.startswith("~") for x in r), r
    assert all(x.startswith("/usr/") or "python3" in x for x in p["files"]["exec"]["allow"])
    assert p["env"]["pass"] == [] and p["isolation"] == "required"
    for k in ("processes", "open_files", "cpu"):
        assert p["limits"][k] not in (None, "unlimited"), k
    assert p["files"]["max_write_bytes"] == "64MiB"
'
}

test_the_runner_tests_use_the_profiles_configuration() {
    profile_py '
import importlib.util, os
spec = importlib.util.spec_from_file_location("drive", os.environ["DRIVE"])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
for yml, cfg in ((minimal, m.MINIMAL), (ds, m.DATA_SCIENCE)):
    s = yml["serve"]
    assert sorted(s["allowed_imports"]) == cfg["allowed_imports"]
    assert s.get("pre_imports", []) == cfg["pre_imports"]
    assert [b.rsplit(".", 1) for b in s.get("blocklist", [])] == cfg["blocklist"]
    assert [{"name": k, "mode": v} for k, v in s["stages"].items()] == cfg["stages"]
'
}

test_sbx_policy_loads_both_profiles() {
    for f in "$POLICIES/serve/minimal.yaml" "$POLICIES/serve/data-science.yaml"; do
        rc=0; out=$(sbx-policy check "$f" 2>&1) || rc=$?
        case "$out" in
            *'unknown key "serve"'*) skip "this sbx-policy does not know serve: yet" ;;
            *'unknown key "extends"'*) skip "this sbx-policy does not know extends: yet" ;;
        esac
        assert_eq "$rc" 0 "sbx-policy check $f: $out"
    done
}

run_tests
