/* test_net.c — network rules: parsing and deciding connect and bind. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include <cmocka.h>

#include "policy.h"

static struct policy *pol;

static const char *yaml =
    "version: 1\n"
    "network:\n"
    "  connect:\n"
    "    allow:\n"
    "      - 10.1.2.3:8080\n"                 /* ip:port */
    "      - 10.9.9.9\n"                      /* bare ip: any port */
    "      - 192.168.0.0/16:443\n"            /* CIDR with port */
    "      - 172.16.0.0/12\n"                 /* CIDR, any port */
    "      - '[2001:db8::1]:443'\n"           /* v6 */
    "      - '[fd00::]/8:22'\n"               /* v6 CIDR */
    "      - api.example.com:443\n"
    "      - '*.github.com:443'\n"
    "      - 'unix:/run/app/*.sock'\n"
    "      - 'unix:@dbus-*'\n"
    "      - '*:8443'\n"
    "      - 10.7.0.1:9000-9100\n"
    "      - localhost:8765\n"
    "    deny:\n"
    "      - 192.168.66.0/24\n"
    "      - evil.github.com\n"
    "      - 10.1.2.3:8080\n"                 /* deny beats the allow above */
    "      - 10.9.9.9:25\n"
    "  bind:\n"
    "    allow: ['127.0.0.1:1024-65535', 'unix:sockets/**']\n"
    "    deny: []\n";

static int setup(void **state)
{
    (void)state;
    struct policy_options opt = { .workspace = "/", .home = "/root" };
    struct policy_diag diag;
    pol = policy_load_buffer("net.yaml", yaml, strlen(yaml), &opt, &diag);
    if (pol == NULL)
        for (unsigned i = 0; i < diag.count && i < POLICY_DIAG_MAX; i++)
            fprintf(stderr, "%s\n", diag.msg[i]);
    return pol ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    policy_free(pol);
    return 0;
}

static enum sbx_decision v4(enum sbx_op op, const char *ip, int port, const char *host)
{
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    struct policy_verdict v;
    assert_int_equal(inet_pton(AF_INET, ip, &sin.sin_addr), 1);
    return policy_decide_net(pol, op, (struct sockaddr *)&sin, sizeof(sin), host, &v);
}

static enum sbx_decision v6(const char *ip, int port, const char *host)
{
    struct sockaddr_in6 s6 = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port) };
    struct policy_verdict v;
    assert_int_equal(inet_pton(AF_INET6, ip, &s6.sin6_addr), 1);
    return policy_decide_net(pol, SBX_OP_CONNECT, (struct sockaddr *)&s6, sizeof(s6), host, &v);
}

static enum sbx_decision text(enum sbx_op op, const char *t)
{
    struct policy_verdict v;
    assert_int_equal(policy_decide_net_text(pol, op, t, &v), 0);
    return v.decision;
}

static void test_net_ip_port_rule_matches_only_its_port(void **state)
{
    (void)state;
    assert_int_equal(v4(SBX_OP_CONNECT, "10.7.0.1", 9050, NULL), SBX_ALLOW);
    assert_int_equal(v4(SBX_OP_CONNECT, "10.7.0.1", 9101, NULL), SBX_DENY);
    assert_int_equal(v4(SBX_OP_CONNECT, "10.7.0.2", 9050, NULL), SBX_DENY);
}

static void test_net_bare_ip_matches_any_port(void **state)
{
    (void)state;
    assert_int_equal(v4(SBX_OP_CONNECT, "10.9.9.9", 1, NULL), SBX_ALLOW);
    assert_int_equal(v4(SBX_OP_CONNECT, "10.9.9.9", 65535, NULL), SBX_ALLOW);
    assert_int_equal(v4(SBX_OP_CONNECT, "10.9.9.9", 25, NULL), SBX_DENY);
}

static void test_net_cidr_matches_its_range(void **state)
{
    (void)state;
    assert_int_equal(v4(SBX_OP_CONNECT, "192.168.1.1", 443, NULL), SBX_ALLOW);
    assert_int_equal(v4(SBX_OP_CONNECT, "192.168.1.1", 80, NULL), SBX_DENY);
    assert_int_equal(v4(SBX_OP_CONNECT, "192.169.1.1", 443, NULL), SBX_DENY);
    assert_int_equal(v4(SBX_OP_CONNECT, "172.31.255.255", 5, NULL), SBX_ALLOW);
    assert_int_equal(v4(SBX_OP_CONNECT, "172.32.0.0", 5, NULL), SBX_DENY);
}

static void test_net_deny_beats_allow(void **state)
{
    (void)state;
    assert_int_equal(v4(SBX_OP_CONNECT, "10.1.2.3", 8080, NULL), SBX_DENY);
    assert_int_equal(v4(SBX_OP_CONNECT, "192.168.66.7", 443, NULL), SBX_DENY);
    assert_int_equal(v4(SBX_OP_CONNECT, "192.168.67.7", 443, NULL), SBX_ALLOW);
}

static void test_net_ipv6_addresses_and_cidrs(void **state)
{
    (void)state;
    assert_int_equal(v6("2001:db8::1", 443, NULL), SBX_ALLOW);
    assert_int_equal(v6("2001:db8::2", 443, NULL), SBX_DENY);
    assert_int_equal(v6("fd12:3456::1", 22, NULL), SBX_ALLOW);
    assert_int_equal(v6("fe80::1", 22, NULL), SBX_DENY);
}

static void test_net_ipv4_mapped_ipv6_is_judged_as_ipv4(void **state)
{
    (void)state;
    assert_int_equal(v6("::ffff:10.9.9.9", 80, NULL), SBX_ALLOW);
    assert_int_equal(v6("::ffff:192.168.66.1", 443, NULL), SBX_DENY);
}

static void test_net_names_match_case_insensitively_only_with_a_host(void **state)
{
    (void)state;
    assert_int_equal(v4(SBX_OP_CONNECT, "93.184.216.34", 443, "api.example.com"), SBX_ALLOW);
    assert_int_equal(v4(SBX_OP_CONNECT, "93.184.216.34", 443, "API.Example.COM."), SBX_ALLOW);
    assert_int_equal(v4(SBX_OP_CONNECT, "93.184.216.34", 443, NULL), SBX_DENY);
    assert_int_equal(v4(SBX_OP_CONNECT, "93.184.216.34", 80, "api.example.com"), SBX_DENY);
}

static void test_net_localhost_means_loopback_whatever_was_resolved(void **state)
{
    (void)state;
    /* No name known (a static program, or nothing resolved yet). */
    assert_int_equal(v4(SBX_OP_CONNECT, "127.0.0.1", 8765, NULL), SBX_ALLOW);
    assert_int_equal(v4(SBX_OP_CONNECT, "127.9.9.9", 8765, NULL), SBX_ALLOW);
    assert_int_equal(v6("::1", 8765, NULL), SBX_ALLOW);
    assert_int_equal(v6("::ffff:127.0.0.1", 8765, NULL), SBX_ALLOW);
    /* The same after the process resolved localhost. */
    assert_int_equal(v4(SBX_OP_CONNECT, "127.0.0.1", 8765, "localhost"), SBX_ALLOW);
    /* Only loopback, only that port: a hosts file cannot widen it. */
    assert_int_equal(v4(SBX_OP_CONNECT, "10.0.0.5", 8765, "localhost"), SBX_DENY);
    assert_int_equal(v4(SBX_OP_CONNECT, "10.0.0.5", 8765, NULL), SBX_DENY);
    assert_int_equal(v4(SBX_OP_CONNECT, "127.0.0.1", 8766, NULL), SBX_DENY);
    assert_int_equal(text(SBX_OP_CONNECT, "localhost:8765"), SBX_ALLOW);
    assert_int_equal(text(SBX_OP_CONNECT, "127.0.0.1:8765"), SBX_ALLOW);
}

static void test_net_wildcard_names_match_subdomains_only(void **state)
{
    (void)state;
    assert_int_equal(v4(SBX_OP_CONNECT, "1.2.3.4", 443, "api.github.com"), SBX_ALLOW);
    assert_int_equal(v4(SBX_OP_CONNECT, "1.2.3.4", 443, "a.b.github.com"), SBX_ALLOW);
    assert_int_equal(v4(SBX_OP_CONNECT, "1.2.3.4", 443, "github.com"), SBX_DENY);
    assert_int_equal(v4(SBX_OP_CONNECT, "1.2.3.4", 443, "notgithub.com"), SBX_DENY);
    assert_int_equal(v4(SBX_OP_CONNECT, "1.2.3.4", 443, "evil.github.com"), SBX_DENY);
}

static void test_net_any_host_rule_matches_every_address(void **state)
{
    (void)state;
    assert_int_equal(v4(SBX_OP_CONNECT, "8.8.8.8", 8443, NULL), SBX_ALLOW);
    assert_int_equal(v6("2606:4700::1111", 8443, NULL), SBX_ALLOW);
}

static enum sbx_decision un(enum sbx_op op, const char *path, bool abstract)
{
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    struct policy_verdict v;
    size_t n = strlen(path);
    if (abstract) {
        memcpy(sun.sun_path + 1, path, n);
        n++;
    } else {
        memcpy(sun.sun_path, path, n + 1);
        n++;
    }
    return policy_decide_net(pol, op, (struct sockaddr *)&sun,
                             (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n), NULL, &v);
}

static void test_net_unix_sockets_match_unix_globs(void **state)
{
    (void)state;
    assert_int_equal(un(SBX_OP_CONNECT, "/run/app/web.sock", false), SBX_ALLOW);
    assert_int_equal(un(SBX_OP_CONNECT, "/run/app/sub/web.sock", false), SBX_DENY);
    assert_int_equal(un(SBX_OP_CONNECT, "/run/docker.sock", false), SBX_DENY);
    assert_int_equal(un(SBX_OP_CONNECT, "dbus-123", true), SBX_ALLOW);
    assert_int_equal(un(SBX_OP_CONNECT, "other", true), SBX_DENY);
    assert_int_equal(un(SBX_OP_BIND, "/sockets/a/b.sock", false), SBX_ALLOW);  /* workspace "/" */
}

static void test_net_bind_uses_the_bind_lists(void **state)
{
    (void)state;
    assert_int_equal(v4(SBX_OP_BIND, "127.0.0.1", 8000, NULL), SBX_ALLOW);
    assert_int_equal(v4(SBX_OP_BIND, "127.0.0.1", 80, NULL), SBX_DENY);
    assert_int_equal(v4(SBX_OP_BIND, "0.0.0.0", 8000, NULL), SBX_DENY);
    assert_int_equal(v4(SBX_OP_CONNECT, "127.0.0.1", 8000, NULL), SBX_DENY);
}

static void test_net_text_targets_are_decided_like_addresses(void **state)
{
    (void)state;
    struct policy_verdict v;
    assert_int_equal(text(SBX_OP_CONNECT, "api.example.com:443"), SBX_ALLOW);
    assert_int_equal(text(SBX_OP_CONNECT, "10.9.9.9:25"), SBX_DENY);
    assert_int_equal(text(SBX_OP_CONNECT, "[2001:db8::1]:443"), SBX_ALLOW);
    assert_int_equal(text(SBX_OP_CONNECT, "unix:/run/app/x.sock"), SBX_ALLOW);
    assert_int_equal(text(SBX_OP_SEND, "8.8.8.8:8443"), SBX_ALLOW);
    assert_int_equal(policy_decide_net_text(pol, SBX_OP_CONNECT, "host:99999", &v), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(policy_decide_net_text(pol, SBX_OP_CONNECT, "hostonly", &v), -1);
}

static void test_net_other_families_are_not_governed(void **state)
{
    (void)state;
    struct sockaddr sa = { .sa_family = AF_NETLINK };
    struct policy_verdict v;
    assert_int_equal(policy_decide_net(pol, SBX_OP_BIND, &sa, sizeof(sa), NULL, &v), SBX_ALLOW);
    assert_string_equal(v.rule->section, "network");
}

static void bad_rule(const char *rule, const char *msg_part)
{
    char y[256];
    struct policy_options opt = { .workspace = "/", .home = "/root" };
    struct policy_diag diag;
    snprintf(y, sizeof(y), "version: 1\nnetwork:\n  connect:\n    allow: ['%s']\n", rule);
    struct policy *p = policy_load_buffer("n.yaml", y, strlen(y), &opt, &diag);
    assert_null(p);
    assert_int_equal(diag.count, 1);
    if (strstr(diag.msg[0], msg_part) == NULL || strncmp(diag.msg[0], "n.yaml:4:13: ", 13) != 0)
        fail_msg("%s: %s", rule, diag.msg[0]);
}

static void test_net_bad_rules_are_errors_with_their_position(void **state)
{
    (void)state;
    bad_rule("host:70000", "port out of range");
    bad_rule("10.0.0.0/33", "CIDR prefix");
    bad_rule("10.0.0.300", "bad IP address");
    bad_rule("[::1", "unclosed");
    bad_rule("[zz::1]:80", "bad IPv6");
    bad_rule("a*b.com:443", "only as the first label");
    bad_rule("host:", "empty port");
    bad_rule("host:9-1", "port range");
    bad_rule("unix:", "empty unix");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_net_ip_port_rule_matches_only_its_port),
        cmocka_unit_test(test_net_bare_ip_matches_any_port),
        cmocka_unit_test(test_net_cidr_matches_its_range),
        cmocka_unit_test(test_net_deny_beats_allow),
        cmocka_unit_test(test_net_ipv6_addresses_and_cidrs),
        cmocka_unit_test(test_net_ipv4_mapped_ipv6_is_judged_as_ipv4),
        cmocka_unit_test(test_net_names_match_case_insensitively_only_with_a_host),
        cmocka_unit_test(test_net_localhost_means_loopback_whatever_was_resolved),
        cmocka_unit_test(test_net_wildcard_names_match_subdomains_only),
        cmocka_unit_test(test_net_any_host_rule_matches_every_address),
        cmocka_unit_test(test_net_unix_sockets_match_unix_globs),
        cmocka_unit_test(test_net_bind_uses_the_bind_lists),
        cmocka_unit_test(test_net_text_targets_are_decided_like_addresses),
        cmocka_unit_test(test_net_other_families_are_not_governed),
        cmocka_unit_test(test_net_bad_rules_are_errors_with_their_position),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
