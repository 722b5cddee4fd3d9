#!/bin/sh
# When env.pass drops a variable the caller has set and agents commonly need
# to reach the network (CA bundles, proxies), sbx-guard says so once at
# start, naming the variables and how to pass them; a variable passed, or
# one not set, is not named (#14, "Messages that help").
. "$(dirname "$0")/../lib.sh"

# clean CMD...: runs CMD with none of the variables the notice is about set
# (the machine running the tests may set some: a CI behind a proxy).
clean() {
    env -u NODE_EXTRA_CA_CERTS -u SSL_CERT_FILE -u SSL_CERT_DIR -u REQUESTS_CA_BUNDLE \
        -u CURL_CA_BUNDLE -u PIP_CERT -u GIT_SSL_CAINFO -u HTTPS_PROXY -u HTTP_PROXY \
        -u NO_PROXY -u https_proxy -u http_proxy -u no_proxy "$@"
}

test_guard_names_dropped_ca_and_proxy_variables_once_with_the_fix() {
    printf 'version: 1\nenv:\n  pass: [PATH, HOME, HTTPS_PROXY]\n' > "$T/p.yaml"
    rc=0
    out=$(clean NODE_EXTRA_CA_CERTS=/etc/ssl/corp.pem GIT_SSL_CAINFO=/etc/ssl/corp.pem \
          HTTPS_PROXY=http://proxy:3128 SOME_OTHER=1 \
          sbx-guard --no-notify --isolation none --policy "$T/p.yaml" -- \
          sh -c 'echo "node=${NODE_EXTRA_CA_CERTS:-unset} proxy=${HTTPS_PROXY:-unset}"' 2>&1) || rc=$?
    assert_eq "$rc" 0 "exit status: $out"
    # the policy passes HTTPS_PROXY: it reaches the agent and is not named
    assert_contains "$out" "node=unset proxy=http://proxy:3128"
    assert_contains "$out" "sbx-guard: env.pass of $T/p.yaml drops NODE_EXTRA_CA_CERTS, GIT_SSL_CAINFO (set here, not passed to the agent); to pass them: env: pass: {add: [NODE_EXTRA_CA_CERTS, GIT_SSL_CAINFO]}"
    assert_eq "$(printf '%s\n' "$out" | grep -c 'drops')" 1 "the notice is said once"
    assert_not_contains "$out" "SOME_OTHER"
}

test_guard_says_nothing_when_the_policy_passes_what_is_set() {
    printf 'version: 1\nenv:\n  pass: {add: [NODE_EXTRA_CA_CERTS]}\n' > "$T/p.yaml"
    rc=0
    out=$(clean NODE_EXTRA_CA_CERTS=/etc/ssl/corp.pem sbx-guard --no-notify --isolation none --policy "$T/p.yaml" -- \
          sh -c 'echo "node=$NODE_EXTRA_CA_CERTS"' 2>&1) || rc=$?
    assert_eq "$rc" 0 "exit status: $out"
    assert_contains "$out" "node=/etc/ssl/corp.pem"
    assert_not_contains "$out" "drops"
    out=$(clean sbx-guard --no-notify --isolation none --policy "$T/p.yaml" -- true 2>&1)
    assert_not_contains "$out" "drops"
    # the default passes the CA bundles and the proxies
    out=$(clean NODE_EXTRA_CA_CERTS=/x PIP_CERT=/x GIT_SSL_CAINFO=/x CURL_CA_BUNDLE=/x \
          HTTPS_PROXY=http://p:1 no_proxy=localhost \
          sbx-guard --no-notify --isolation none --policy "$POLICIES/default.yaml" -- true 2>&1)
    assert_not_contains "$out" "drops"
}

run_tests
