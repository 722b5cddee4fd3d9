#!/bin/sh
# deploy/: the Containerfile and the Kubernetes manifests of sbx-serve, read
# with python3-yaml (kubectl needs a cluster to validate): two replicas with
# /healthz probes, a Service on 8000, a NetworkPolicy that admits only pods
# labelled code-sandbox-client: "true" on 8000/TCP and allows no egress,
# and a non-root, read-only-root security context.
. "$(dirname "$0")/../lib.sh"

PY=/usr/bin/python3
K8S="$SBX_ROOT/deploy/k8s"

# k8s EXPR...: runs Python statements with `docs` (every document of
# deploy/k8s/*.yaml) and `one(kind)` (the single document of that kind).
k8s() {
    "$PY" -c 'import glob, sys
try:
    import yaml
except ImportError:
    sys.exit(77)
docs = []
for f in sorted(glob.glob(sys.argv[1] + "/*.yaml")):
    with open(f) as fh:
        docs += [d for d in yaml.safe_load_all(fh) if d is not None]
def one(kind):
    found = [d for d in docs if d.get("kind") == kind]
    assert len(found) == 1, f"{len(found)} documents of kind {kind}"
    return found[0]
exec(sys.argv[2])' "$K8S" "$1"
}
run_k8s() { rc=0; k8s "$1" || rc=$?; [ $rc -ne 77 ] || skip "python3-yaml missing (make deps)"; return $rc; }

test_every_manifest_is_a_well_formed_kubernetes_object() {
    run_k8s '
known = {("apps/v1", "Deployment"), ("v1", "Service"), ("networking.k8s.io/v1", "NetworkPolicy")}
assert len(docs) == 3, len(docs)
for d in docs:
    assert (d.get("apiVersion"), d.get("kind")) in known, (d.get("apiVersion"), d.get("kind"))
    assert isinstance(d.get("metadata", {}).get("name"), str) and d["metadata"]["name"], d
    assert isinstance(d.get("spec"), dict), d
    assert set(d) <= {"apiVersion", "kind", "metadata", "spec"}, sorted(d)
'
}

test_the_deployment_runs_two_replicas_probed_on_healthz() {
    run_k8s '
d = one("Deployment")
s = d["spec"]
assert s["replicas"] == 2, s["replicas"]
labels = s["template"]["metadata"]["labels"]
assert s["selector"]["matchLabels"].items() <= labels.items(), (s["selector"], labels)
(c,) = s["template"]["spec"]["containers"]
ports = {p.get("name"): p["containerPort"] for p in c["ports"]}
assert 8000 in ports.values() and all(p.get("protocol", "TCP") == "TCP" for p in c["ports"]), c["ports"]
for probe in ("livenessProbe", "readinessProbe"):
    g = c[probe]["httpGet"]
    port = ports.get(g["port"], g["port"])
    assert g["path"] == "/healthz" and port == 8000, (probe, g)
'
}

test_the_deployment_runs_as_non_root_on_a_read_only_root() {
    run_k8s '
d = one("Deployment")
pod = d["spec"]["template"]["spec"]
psc = pod.get("securityContext", {})
for c in pod["containers"]:
    sc = c["securityContext"]
    non_root = sc.get("runAsNonRoot", psc.get("runAsNonRoot"))
    uid = sc.get("runAsUser", psc.get("runAsUser"))
    assert non_root is True and isinstance(uid, int) and uid != 0, (non_root, uid)
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"] and not sc["capabilities"].get("add")
    assert not sc.get("privileged", False)
    # A read-only root needs its writable places as volumes: /tmp at least.
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    assert "/tmp" in mounts and "emptyDir" in vols[mounts["/tmp"]], (mounts, vols)
    assert all(not m.get("readOnly") or p != "/tmp" for p, m in ((m["mountPath"], m) for m in c["volumeMounts"]))
assert pod.get("hostNetwork", False) is False and pod.get("hostPID", False) is False
'
}

test_the_service_exposes_8000_to_the_deployments_pods() {
    run_k8s '
svc, d = one("Service"), one("Deployment")
labels = d["spec"]["template"]["metadata"]["labels"]
assert svc["spec"]["selector"].items() <= labels.items(), svc["spec"]["selector"]
(p,) = svc["spec"]["ports"]
assert p["port"] == 8000 and p.get("targetPort", 8000) in (8000, "http") and p.get("protocol", "TCP") == "TCP", p
assert svc["spec"].get("type", "ClusterIP") == "ClusterIP"
'
}

test_the_network_policy_admits_only_labelled_clients_on_8000_and_no_egress() {
    run_k8s '
np, d = one("NetworkPolicy"), one("Deployment")
s = np["spec"]
labels = d["spec"]["template"]["metadata"]["labels"]
assert s["podSelector"]["matchLabels"].items() <= labels.items(), s["podSelector"]
assert sorted(s["policyTypes"]) == ["Egress", "Ingress"], s["policyTypes"]
(rule,) = s["ingress"]
assert rule["from"] == [{"podSelector": {"matchLabels": {"code-sandbox-client": "true"}}}], rule["from"]
assert rule["ports"] == [{"protocol": "TCP", "port": 8000}], rule["ports"]
assert s.get("egress", []) == [], s.get("egress")
'
}

test_the_containerfile_builds_sbx_and_runs_sbx_serve_unprivileged_on_8000() {
    f="$SBX_ROOT/deploy/Containerfile"
    assert_file_present "$f"
    grep -q '^FROM debian:bookworm' "$f" || fail "not built on Debian"
    grep -q 'make .*all' "$f" || fail "does not build sbx"
    grep -q 'python3-numpy python3-pandas' "$f" || fail "no data-science packages"
    grep -q 'serve-runner.py' "$f" || fail "the runner is not installed"
    grep -q 'policies/serve' "$f" || fail "the serve profiles are not installed"
    user=$(sed -n 's/^USER \([0-9]*\).*/\1/p' "$f" | tail -n 1)
    [ -n "$user" ] && [ "$user" -ne 0 ] || fail "the last USER is not a non-root uid: '$user'"
    grep -q '^EXPOSE 8000' "$f" || fail "no EXPOSE 8000"
    grep -q '^ENTRYPOINT \["/usr/local/bin/sbx-serve", "--listen", "0.0.0.0:8000"\]' "$f" || fail "the entrypoint is not sbx-serve on 8000"
    # The runtime packages exist in this Debian (the image's base).
    if command -v apt-cache >/dev/null; then
        for p in $(sed -n '/^FROM debian:bookworm-slim$/,$p' "$f" | sed -n '/apt-get install/,/rm -rf/p' |
                   tr ' \\' '\n\n' | grep -E '^(lib|python3)[a-z0-9.+-]*$'); do
            apt-cache show "$p" >/dev/null 2>&1 || fail "no Debian package $p"
        done
    fi
}

run_tests
