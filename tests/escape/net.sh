#!/bin/sh
# Network escapes under --isolation native: the supervisor (every connect,
# also of static programs), Landlock's TCP port rules and the net namespace.
. "$(dirname "$0")/../lib.sh"
DNS_RESPONDER="$(cd "$(dirname "$0")/../progs" && pwd)/dns_responder.py"

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

# listen NAME FAMILY ADDR [PORT]: a tiny HTTP/1.0 server of the test on ADDR
# (4 or 6: PORT or a free port on that loopback address; unix: the socket
# path), in the host's namespace; sets PORT_NAME.  Killed when the test ends.
listen() {
    python3 -c '
import socket, sys, os
fam, addr, out = sys.argv[1:4]
if fam == "unix":
    s = socket.socket(socket.AF_UNIX); s.bind(addr)
else:
    s = socket.socket(socket.AF_INET6 if fam == "6" else socket.AF_INET); s.bind((addr, int(sys.argv[4]) if len(sys.argv) > 4 else 0))
s.listen(16)
with open(out + ".tmp", "w") as f:
    f.write("0" if fam == "unix" else str(s.getsockname()[1]))
os.rename(out + ".tmp", out)
while True:
    try:
        c, _ = s.accept(); c.settimeout(1)
        try: c.recv(65536)
        except OSError: pass
        c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nhi\n")
        # FIN, then read what the client still sends until it closes: a
        # close with its request unread (it came after the first recv gave
        # up) would be a reset, and the client could lose the answer.
        c.shutdown(socket.SHUT_WR); c.settimeout(2)
        try:
            while c.recv(65536): pass
        except OSError: pass
        c.close()
    except OSError:
        pass
' "$2" "$3" "$T/port.$1" ${4:+"$4"} >/dev/null 2>&1 &
    echo $! >>"$T/listeners"
    i=0
    while [ ! -f "$T/port.$1" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    [ -f "$T/port.$1" ] || fail "listener $1 did not start"
    eval "PORT_$1=$(cat "$T/port.$1")"
    trap 'kill $(cat "$T/listeners") 2>/dev/null; stop_daemon' EXIT
}

# loop_policy ALLOW...: connect.allow is exactly ALLOW.
loop_policy() {
    {
        printf 'version: 1\nname: loopback\nnetwork:\n  connect:\n    allow: ['
        sep=
        for a in "$@"; do printf '%s"%s"' "$sep" "$a"; sep=", "; done
        printf ']\n    deny: []\n  bind:\n    allow: []\n'
    } >"$T/loop.yaml"
}

test_a_loopback_only_policy_reaches_the_hosts_allowed_service_under_native() {
    listen a 4 127.0.0.1
    loop_policy "127.0.0.1:$PORT_a"
    out=$(native --policy "$T/loop.yaml" -- "$ESC" connect 127.0.0.1 "$PORT_a")
    assert_eq "$out" "ok" "static program"
    out=$(native --policy "$T/loop.yaml" -- curl -s http://127.0.0.1:"$PORT_a"/)
    assert_eq "$out" "hi" "curl"
    out=$(native --policy "$T/loop.yaml" -- python3 -c \
        "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$PORT_a/').read().decode().strip())")
    assert_eq "$out" "hi" "python"
    out=$(native --policy "$T/loop.yaml" -- bash -c \
        "exec 3<>/dev/tcp/127.0.0.1/$PORT_a; printf 'GET / HTTP/1.0\r\n\r\n' >&3; tail -n 1 <&3")
    assert_eq "$out" "hi" "bash /dev/tcp"
    expect_row op=connect decision=allow layer=supervisor target=127.0.0.1:$PORT_a
    expect_row op=start "reason~netns"
}

test_another_loopback_port_with_a_host_listener_is_refused_and_recorded_by_the_supervisor() {
    listen a 4 127.0.0.1
    listen b 4 127.0.0.1
    loop_policy "127.0.0.1:$PORT_a"
    out=$(native --policy "$T/loop.yaml" -- "$ESC" connect 127.0.0.1 "$PORT_b") || true
    assert_eq "$out" "fail EACCES" "static program"
    expect_row op=connect decision=deny layer=supervisor target=127.0.0.1:$PORT_b
    rc=0; native --policy "$T/loop.yaml" -- curl -s http://127.0.0.1:"$PORT_b"/ || rc=$?
    [ "$rc" -ne 0 ] || fail "curl reached a loopback port the policy does not allow"
}

test_ipv6_loopback_reaches_the_hosts_allowed_service_under_native() {
    python3 -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2>/dev/null \
        || skip "no IPv6 loopback on this machine"
    listen a 6 ::1
    loop_policy "[::1]:$PORT_a"
    out=$(native --policy "$T/loop.yaml" -- "$ESC" connect ::1 "$PORT_a")
    assert_eq "$out" "ok" "static program"
    out=$(native --policy "$T/loop.yaml" -- curl -s "http://[::1]:$PORT_a/")
    assert_eq "$out" "hi" "curl"
    out=$(native --policy "$T/loop.yaml" -- "$ESC" connect 127.0.0.1 "$PORT_a") || true
    assert_eq "$out" "fail EACCES" "127.0.0.1 is not ::1"
}

test_localhost_rule_allows_127_0_0_1_whatever_was_resolved_before() {
    listen a 4 127.0.0.1
    loop_policy "localhost:$PORT_a"
    # A static program never resolves anything: the supervisor decides.
    out=$(native --policy "$T/loop.yaml" -- "$ESC" connect 127.0.0.1 "$PORT_a")
    assert_eq "$out" "ok" "static program under native"
    # The guard alone, with no resolution of localhost before the connect.
    out=$(guard --isolation none --policy "$T/loop.yaml" -- python3 -c "
import socket; s = socket.create_connection(('127.0.0.1', $PORT_a)); print('ok')")
    assert_eq "$out" "ok" "guard without a prior lookup"
    out=$(sbx-policy explain "$T/loop.yaml" connect "127.0.0.1:$PORT_a")
    assert_contains "$out" "allow connect 127.0.0.1:$PORT_a"
    out=$(sbx-policy explain "$T/loop.yaml" connect "[::1]:$PORT_a")
    assert_contains "$out" "allow connect"
    rc=0; out=$(sbx-policy explain "$T/loop.yaml" connect "10.0.0.1:$PORT_a") || rc=$?
    assert_eq "$rc" 1 "localhost is not another address"
}

test_an_allowed_unix_socket_under_tmp_is_reachable_and_another_is_refused() {
    d=$(mktemp -d /tmp/sbxu.XXXXXX)
    echo "$d" >"$T/sockdir"
    listen a unix "$d/ok.sock"
    listen b unix "$d/no.sock"
    loop_policy "unix:$d/ok.sock"
    out=$(native --policy "$T/loop.yaml" -- "$ESC" unix "$d/ok.sock")
    assert_eq "$out" "ok" "allowed socket, static program"
    out=$(native --policy "$T/loop.yaml" -- "$ESC" unix "$d/no.sock") || true
    assert_contains "$out" "fail" "socket outside the allow list"
    out=$(native --policy "$T/loop.yaml" -- python3 -c "
import socket; s = socket.socket(socket.AF_UNIX)
try:
    s.connect('$d/no.sock'); print('reached')
except OSError as e: print('refused', e.errno)") || true
    assert_eq "$out" "refused 13" "python to a socket outside the allow list"
    expect_row op=connect decision=deny target=unix:$d/no.sock
    rm -rf "$d"
}

test_a_loopback_only_policy_reaches_the_hosts_allowed_service_under_bwrap() {
    command -v bwrap >/dev/null 2>&1 || skip "bubblewrap (bwrap) is not installed"
    listen a 4 127.0.0.1
    listen b 4 127.0.0.1
    loop_policy "localhost:$PORT_a"
    out=$(guard --isolation bwrap --policy "$T/loop.yaml" -- curl -s http://localhost:"$PORT_a"/)
    assert_eq "$out" "hi" "curl"
    rc=0; guard --isolation bwrap --policy "$T/loop.yaml" -- curl -s http://127.0.0.1:"$PORT_b"/ || rc=$?
    [ "$rc" -ne 0 ] || fail "curl reached a loopback port the policy does not allow"
    expect_row op=connect decision=deny layer=guard target=127.0.0.1:$PORT_b
}

test_an_allowed_unix_socket_is_reachable_under_bwrap() {
    command -v bwrap >/dev/null 2>&1 || skip "bubblewrap (bwrap) is not installed"
    d=$(mktemp -d /tmp/sbxu.XXXXXX)
    listen a unix "$d/ok.sock"
    loop_policy "unix:$d/ok.sock"
    out=$(guard --isolation bwrap --policy "$T/loop.yaml" -- python3 -c "
import socket; s = socket.socket(socket.AF_UNIX); s.connect('$d/ok.sock'); s.sendall(b'x'); print(s.recv(64).decode().split()[-1])")
    assert_eq "$out" "hi"
    rm -rf "$d"
}

# ---- host names, through sbx's DNS stub (native) ------------------------------

# dns NAME=ADDR...: a test DNS server on 127.0.0.1 answering those names
# (tests/progs/dns_responder.py), made the stub's upstream.
dns() {
    python3 "$DNS_RESPONDER" "$T/dnsport" "$@" >/dev/null 2>&1 &
    echo $! >>"$T/listeners"
    i=0
    while [ ! -f "$T/dnsport" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    [ -f "$T/dnsport" ] || fail "the test DNS server did not start"
    SBX_DNS_UPSTREAM="127.0.0.1:$(cat "$T/dnsport")"
    export SBX_DNS_UPSTREAM
    trap 'kill $(cat "$T/listeners") 2>/dev/null; stop_daemon' EXIT
}

# net_policy ALLOW DENY: connect.allow and connect.deny as YAML lists.
net_policy() {
    printf 'version: 1\nname: names\nnetwork:\n  connect:\n    allow: %s\n    deny: %s\n  bind:\n    allow: []\n' \
        "$1" "$2" >"$T/names.yaml"
}

test_an_allowed_host_name_is_reached_by_every_program_under_native() {
    listen a 4 127.0.0.5
    dns "svc.test=127.0.0.5"
    net_policy "[\"svc.test:$PORT_a\"]" "[]"
    out=$(native --policy "$T/names.yaml" -- curl -s http://svc.test:"$PORT_a"/)
    assert_eq "$out" "hi" "curl"
    out=$(native --policy "$T/names.yaml" -- python3 -c \
        "import urllib.request; print(urllib.request.urlopen('http://svc.test:$PORT_a/').read().decode().strip())")
    assert_eq "$out" "hi" "python"
    out=$(native --policy "$T/names.yaml" -- bash -c \
        "exec 3<>/dev/tcp/svc.test/$PORT_a; printf 'GET / HTTP/1.0\r\n\r\n' >&3; tail -n 1 <&3")
    assert_eq "$out" "hi" "bash /dev/tcp"
    out=$(native --policy "$T/names.yaml" -- /bin/busybox wget -q -O - http://svc.test:"$PORT_a"/)
    assert_eq "$out" "hi" "static busybox wget"
    # A static program that resolved nothing is refused the same address;
    # after a resolution in the same run (busybox's own resolver) it is let
    # through: the kernel layer holds the name rule through the stub.
    out=$(native --policy "$T/names.yaml" -- "$ESC" connect 127.0.0.5 "$PORT_a") || true
    assert_eq "$out" "fail EACCES" "an IP literal no allowed name resolved to"
    expect_row op=connect decision=deny layer=supervisor target=127.0.0.5:$PORT_a "reason~resolved"
    out=$(native --policy "$T/names.yaml" -- /bin/busybox sh -c \
        "/bin/busybox nslookup svc.test >/dev/null 2>&1; $ESC connect 127.0.0.5 $PORT_a")
    assert_eq "$out" "ok" "static program after the name was resolved"
    expect_row op=connect decision=allow layer=supervisor target=127.0.0.5:$PORT_a target2=svc.test
}

test_another_address_on_an_allowed_names_port_is_refused_and_recorded() {
    listen a 4 127.0.0.5
    listen b 4 127.0.0.6 "$PORT_a"
    dns "svc.test=127.0.0.5" "other.test=127.0.0.6"
    net_policy "[\"svc.test:$PORT_a\"]" "[]"
    out=$(native --policy "$T/names.yaml" -- "$ESC" connect 127.0.0.6 "$PORT_a") || true
    assert_eq "$out" "fail EACCES" "static program"
    expect_row op=connect decision=deny layer=supervisor target=127.0.0.6:$PORT_a
    out=$(native --policy "$T/names.yaml" -- /bin/busybox nc -w 2 127.0.0.6 "$PORT_a" </dev/null 2>&1) || true
    assert_contains "$out" "Permission denied" "static busybox nc"
    rc=0; native --policy "$T/names.yaml" -- curl -s http://other.test:"$PORT_a"/ || rc=$?
    [ "$rc" -ne 0 ] || fail "curl reached a name the policy does not allow"
    expect_row op=connect decision=deny layer=supervisor target=dns:other.test target2=other.test
    if grep -qx other.test "$T/dnsport.log" 2>/dev/null; then
        fail "a refused name reached the upstream resolver"
    fi
}

test_an_allowed_name_on_another_port_is_refused() {
    listen a 4 127.0.0.5
    listen b 4 127.0.0.5
    dns "svc.test=127.0.0.5"
    net_policy "[\"svc.test:$PORT_a\"]" "[]"
    rc=0; out=$(native --policy "$T/names.yaml" -- curl -s http://svc.test:"$PORT_b"/) || rc=$?
    [ "$rc" -ne 0 ] || fail "curl reached $PORT_b with only $PORT_a allowed"
    expect_row op=connect decision=deny target=127.0.0.5:$PORT_b
}

test_a_deny_rule_for_a_name_wins_over_a_wildcard_port_rule() {
    listen a 4 127.0.0.5
    dns "svc.test=127.0.0.5" "evil.test=127.0.0.5"
    net_policy "[\"*:$PORT_a\"]" "[\"evil.test\"]"
    out=$(native --policy "$T/names.yaml" -- curl -s http://svc.test:"$PORT_a"/)
    assert_eq "$out" "hi" "an allowed name"
    rc=0; native --policy "$T/names.yaml" -- curl -s http://evil.test:"$PORT_a"/ || rc=$?
    [ "$rc" -ne 0 ] || fail "curl reached a denied name"
    expect_row op=connect decision=deny target=dns:evil.test "rule~evil.test"
}

test_an_allowed_name_with_an_ipv6_loopback_address_is_reached() {
    python3 -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2>/dev/null \
        || skip "no IPv6 loopback on this machine"
    listen a 6 ::1
    dns "six.test=::1"
    net_policy "[\"six.test:$PORT_a\"]" "[]"
    out=$(native --policy "$T/names.yaml" -- curl -s -6 http://six.test:"$PORT_a"/)
    assert_eq "$out" "hi" "curl over IPv6"
    expect_row op=connect decision=allow layer=supervisor "target=[::1]:$PORT_a" target2=six.test
}

test_a_nonblocking_connect_to_an_allowed_name_gives_einprogress_and_keeps_its_options() {
    listen a 4 127.0.0.5
    dns "svc.test=127.0.0.5"
    net_policy "[\"svc.test:$PORT_a\"]" "[]"
    out=$(native --policy "$T/names.yaml" -- python3 -c "
import socket, select, errno
ip = socket.gethostbyname('svc.test')
s = socket.socket(); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1); s.setblocking(False)
e = s.connect_ex((ip, $PORT_a))
select.select([], [s], [], 5)
print(errno.errorcode.get(e, e) if e else 0, s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR),
      s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0, s.getblocking())
s.setblocking(True); s.sendall(b'GET / HTTP/1.0\r\n\r\n'); print(s.recv(100).split()[-1].decode())")
    assert_eq "$out" "EINPROGRESS 0 True False
hi"
}

# udp_sink NAME ADDR: a UDP listener on ADDR (a free port: PORT_NAME) that
# appends each datagram it receives, and a newline, to $T/udp.NAME.
udp_sink() {
    python3 -c '
import socket, sys, os
s = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 0))
open(sys.argv[2] + ".port.tmp", "w").write(str(s.getsockname()[1]))
os.rename(sys.argv[2] + ".port.tmp", sys.argv[2] + ".port")
while True:
    d, _ = s.recvfrom(65536)
    with open(sys.argv[2], "ab") as f: f.write(d + b"\n")
' "$2" "$T/udp.$1" >/dev/null 2>&1 &
    echo $! >>"$T/listeners"
    i=0
    while [ ! -f "$T/udp.$1.port" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    [ -f "$T/udp.$1.port" ] || fail "udp listener $1 did not start"
    eval "PORT_$1=$(cat "$T/udp.$1.port")"
    trap 'kill $(cat "$T/listeners") 2>/dev/null; stop_daemon' EXIT
}

test_udp_reaches_only_allowed_destinations_with_sendto_and_sendmsg() {
    udp_sink ok 127.0.0.8
    udp_sink no 127.0.0.9
    net_policy "[\"127.0.0.8:$PORT_ok\"]" "[]"
    out=$(native --policy "$T/names.yaml" -- python3 -c "
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
print(s.sendto(b'sendto-ok', ('127.0.0.8', $PORT_ok)))
print(s.sendmsg([b'sendmsg-', b'ok'], [], 0, ('127.0.0.8', $PORT_ok)))
for f in (lambda: s.sendto(b'sendto-no', ('127.0.0.9', $PORT_no)),
          lambda: s.sendmsg([b'sendmsg-no'], [], 0, ('127.0.0.9', $PORT_no))):
    try: f(); print('sent')
    except OSError as e: print(e.errno)")
    assert_eq "$out" "9
10
13
13"
    out=$(native --policy "$T/names.yaml" -- "$ESC" udp 127.0.0.9 "$PORT_no") || true
    assert_eq "$out" "fail EACCES" "static program"
    sleep 0.3
    assert_eq "$(cat "$T/udp.ok" 2>/dev/null)" "sendto-ok
sendmsg-ok" "what arrived at the allowed sink"
    [ ! -s "$T/udp.no" ] || fail "a datagram reached a destination the policy does not allow"
    expect_row op=send decision=deny layer=supervisor target=127.0.0.9:$PORT_no
}

test_the_agents_own_loopback_server_is_reached_inside_its_namespace() {
    listen a 4 127.0.0.1
    printf 'version: 1\nname: own\nnetwork:\n  connect:\n    allow: ["127.0.0.1"]\n  bind:\n    allow: ["127.0.0.1:0", "127.0.0.1:1024-65535"]\n' >"$T/own.yaml"
    out=$(native --policy "$T/own.yaml" -- python3 -c "
import socket, threading
s = socket.socket(); s.bind(('127.0.0.1', $PORT_a)); s.listen(1)
def serve():
    c, _ = s.accept(); c.sendall(b'inside'); c.close()
threading.Thread(target=serve).start()
c = socket.create_connection(('127.0.0.1', $PORT_a)); print(c.recv(16).decode())")
    assert_eq "$out" "inside" "the agent's own server on the port the host also listens on"
    out=$(native --policy "$T/own.yaml" -- curl -s http://127.0.0.1:"$PORT_a"/)
    assert_eq "$out" "hi" "without a server of its own, the host's"
}

run_tests
