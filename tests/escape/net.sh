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

# AF_VSOCK reaches the host past any network namespace; the policy has no
# rule that could allow or deny it.  40 is AF_VSOCK, 17 AF_PACKET, 16
# AF_NETLINK (protocol 0 NETLINK_ROUTE, 9 NETLINK_AUDIT).
test_raw_socket_of_a_family_no_rule_can_allow_is_refused_by_the_kernel_layer() {
    out=$(native -- "$ESC" socket 40) || true
    assert_eq "$out" "fail EAFNOSUPPORT" "vsock"
    out=$(native -- "$ESC" socket 17) || true
    assert_eq "$out" "fail EAFNOSUPPORT" "packet"
    # garbage in the upper half of the register does not slip past
    out=$(native -- "$ESC" socket 0x100000028) || true
    assert_eq "$out" "fail EAFNOSUPPORT" "vsock with high bits"
    out=$(native -- "$ESC" socket 16 9) || true
    assert_eq "$out" "fail EPROTONOSUPPORT" "netlink audit"
}

test_raw_sockets_the_policy_governs_and_netlink_route_still_open() {
    assert_eq "$(native -- "$ESC" socket 2)" ok "AF_INET"
    assert_eq "$(native -- "$ESC" socket 1)" ok "AF_UNIX"
    assert_eq "$(native -- "$ESC" socket 10)" ok "AF_INET6"
    assert_eq "$(native -- "$ESC" socket 16 0)" ok "NETLINK_ROUTE"
    # what libc does with NETLINK_ROUTE: getaddrinfo with AI_ADDRCONFIG,
    # if_nameindex
    out=$(native -- python3 -c '
import socket
print(len(socket.getaddrinfo("localhost", 80, flags=socket.AI_ADDRCONFIG)) > 0)
print(any(n == "lo" for _, n in socket.if_nameindex()))')
    assert_eq "$out" "True
True" "getaddrinfo and if_nameindex"
}

test_the_guard_refuses_a_vsock_socket_and_records_it() {
    out=$(guard --isolation none -- python3 -c '
import socket
try:
    socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
    print("opened")
except OSError as e:
    print(e.strerror)') || true
    assert_eq "$out" "Address family not supported by protocol"
    expect_row op=connect decision=deny layer=guard "target=socket(AF_VSOCK)"
}

run_tests
