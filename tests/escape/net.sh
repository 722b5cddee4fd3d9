#!/bin/sh
# Network escapes under --isolation native: the supervisor (every connect,
# also of static programs), Landlock's TCP port rules and the net namespace.
. "$(dirname "$0")/../lib.sh"

loopback_policy() {
    cat >"$T/loop.yaml" <<'YAML'
version: 1
name: loopback
network:
  connect:
    allow: ["127.0.0.1:8000"]
    deny: []
  bind:
    allow: []
YAML
}

test_busybox_nc_to_a_denied_address_fails_and_is_recorded() {
    out=$(native -- /bin/busybox nc -w 1 169.254.169.254 80 </dev/null 2>&1) || true
    assert_contains "$out" "Permission denied"
    expect_row op=connect decision=deny layer=supervisor target=169.254.169.254:80
}

test_raw_connect_to_a_denied_address_fails() {
    out=$(native -- "$ESC" connect 169.254.169.254 80) || true
    assert_eq "$out" "fail EACCES"
}

test_raw_udp_datagram_to_a_denied_address_fails_and_is_recorded() {
    out=$(native -- /bin/sh -c "$ESC udp 169.254.169.254 53") || true
    assert_eq "$out" "fail EACCES"
    expect_row op=send decision=deny layer=supervisor target=169.254.169.254:53
}

test_loopback_only_policy_gets_a_net_namespace() {
    loopback_policy
    out=$(native --policy "$T/loop.yaml" -- "$ESC" connect 1.1.1.1 443) || true
    assert_contains "$out" "fail"
    expect_row op=start "reason~netns"
}

test_a_port_outside_the_allow_list_is_refused() {
    loopback_policy
    out=$(native --policy "$T/loop.yaml" -- "$ESC" connect 127.0.0.1 9) || true
    assert_eq "$out" "fail EACCES"
    expect_row op=connect decision=deny layer=supervisor target=127.0.0.1:9
}

run_tests
