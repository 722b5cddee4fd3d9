/* test_dns_stub.c — the DNS stub's pieces that need no network: reading
 * queries and answers, what it remembers and for how long, and which names
 * it answers for a policy. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "iso_int.h"

static struct policy *load(const char *yaml)
{
    struct policy_options opt = { .workspace = "/tmp", .home = "/tmp" };
    struct policy_diag diag;
    struct policy *p = policy_load_buffer("t.yaml", yaml, strlen(yaml), &opt, &diag);
    if (p == NULL)
        fail_msg("policy: %s", diag.count ? diag.msg[0] : "?");
    return p;
}

/* A query for NAME of TYPE into M; its length. */
static size_t query(unsigned char *m, const char *name, unsigned type)
{
    size_t o = 12;
    memset(m, 0, 12);
    m[0] = 0x12; m[1] = 0x34; m[2] = 0x01; m[5] = 1;
    for (const char *p = name; *p;) {
        const char *dot = strchr(p, '.');
        size_t l = dot ? (size_t)(dot - p) : strlen(p);
        m[o++] = (unsigned char)l;
        memcpy(m + o, p, l);
        o += l;
        p += l + (dot ? 1 : 0);
    }
    m[o++] = 0;
    m[o++] = (unsigned char)(type >> 8); m[o++] = (unsigned char)type;
    m[o++] = 0; m[o++] = 1;
    return o;
}

/* Appends an answer record (owner: a pointer to the question) to M. */
static size_t answer(unsigned char *m, size_t n, unsigned type, const void *rdata,
                     unsigned rdlen, unsigned ttl)
{
    unsigned char rr[12] = { 0xc0, 12, (unsigned char)(type >> 8), (unsigned char)type, 0, 1,
                             (unsigned char)(ttl >> 24), (unsigned char)(ttl >> 16),
                             (unsigned char)(ttl >> 8), (unsigned char)ttl,
                             (unsigned char)(rdlen >> 8), (unsigned char)rdlen };
    memcpy(m + n, rr, sizeof rr);
    memcpy(m + n + sizeof rr, rdata, rdlen);
    m[2] |= 0x80;
    m[7] = (unsigned char)(m[7] + 1);
    return n + sizeof rr + rdlen;
}

struct found { int n; int family[8]; unsigned char addr[8][16]; unsigned ttl[8]; };

static void collect(void *ctx, int family, const unsigned char *addr, uint32_t ttl)
{
    struct found *f = ctx;
    f->family[f->n] = family;
    memcpy(f->addr[f->n], addr, family == AF_INET ? 4 : 16);
    f->ttl[f->n++] = ttl;
}

static void test_a_query_gives_its_name_lowercased_and_its_type(void **state)
{
    unsigned char m[512];
    char name[ISO_DNS_NAME];
    uint16_t type;
    size_t end, n = query(m, "Api.Example.COM", 28);
    (void)state;
    assert_int_equal(iso_dns_parse_query(m, n, name, sizeof name, &type, &end), 0);
    assert_string_equal(name, "api.example.com");
    assert_int_equal(type, 28);
    assert_int_equal(end, n);
}

static void test_malformed_queries_and_unnameable_names_are_refused(void **state)
{
    unsigned char m[512];
    char name[ISO_DNS_NAME];
    uint16_t type;
    size_t end, n = query(m, "a.example.com", 1);
    (void)state;
    assert_int_equal(iso_dns_parse_query(m, n - 5, name, sizeof name, &type, &end), -1);
    m[12] = 60;     /* a label longer than the message */
    assert_int_equal(iso_dns_parse_query(m, n, name, sizeof name, &type, &end), -1);
    n = query(m, "a:b.example.com", 1);  /* a character no rule could name */
    assert_int_equal(iso_dns_parse_query(m, n, name, sizeof name, &type, &end), -1);
    n = query(m, "a.example.com", 1);
    m[2] |= 0x80;   /* a response is not a query */
    assert_int_equal(iso_dns_parse_query(m, n, name, sizeof name, &type, &end), -1);
}

static void test_every_a_and_aaaa_of_an_answer_is_found_with_its_ttl(void **state)
{
    unsigned char m[1024];
    unsigned char a4[4] = { 127, 0, 0, 5 }, a6[16] = { [15] = 1 };
    struct found f = { 0 };
    size_t n = query(m, "svc.test", 1);
    (void)state;
    n = answer(m, n, 5, "\3cdn\4test\0", 10, 300);  /* a CNAME on the way */
    n = answer(m, n, 1, a4, 4, 20);
    n = answer(m, n, 28, a6, 16, 3600);
    assert_int_equal(iso_dns_parse_answers(m, n, "svc.test", collect, &f), 0);
    assert_int_equal(f.n, 2);
    assert_int_equal(f.family[0], AF_INET);
    assert_memory_equal(f.addr[0], a4, 4);
    assert_int_equal(f.ttl[0], 20);
    assert_int_equal(f.family[1], AF_INET6);
    assert_int_equal(f.ttl[1], 3600);
}

static void test_an_answer_to_another_question_or_cut_short_teaches_nothing(void **state)
{
    unsigned char m[1024];
    unsigned char a4[4] = { 10, 0, 0, 1 };
    struct found f = { 0 };
    size_t n = query(m, "evil.test", 1);
    (void)state;
    n = answer(m, n, 1, a4, 4, 60);
    assert_int_equal(iso_dns_parse_answers(m, n, "svc.test", collect, &f), -1);
    assert_int_equal(iso_dns_parse_answers(m, n - 2, "evil.test", collect, &f), -1);
    assert_int_equal(f.n, 0);
}

static struct sockaddr_in sin4(const char *ip)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(443);
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

static void test_a_remembered_address_names_its_hosts_until_it_expires(void **state)
{
    unsigned char a[4] = { 192, 0, 2, 7 };
    struct sockaddr_in s = sin4("192.0.2.7"), other = sin4("192.0.2.8");
    struct sockaddr_in6 mapped;
    char names[4][ISO_DNS_NAME];
    (void)state;
    iso_dns_forget();
    iso_dns_remember("a.test", AF_INET, a, 300, 1000);
    iso_dns_remember("b.test", AF_INET, a, 1, 1000);     /* a CDN's short TTL */
    iso_dns_remember("a.test", AF_INET, a, 300, 1000);   /* the same again: one name */
    assert_int_equal(iso_dns_names_at((struct sockaddr *)&s, 2000, names, 4), 2);
    assert_int_equal(iso_dns_names_at((struct sockaddr *)&other, 2000, names, 4), 0);
    /* The IPv4-mapped form of the address is the address. */
    memset(&mapped, 0, sizeof mapped);
    mapped.sin6_family = AF_INET6;
    inet_pton(AF_INET6, "::ffff:192.0.2.7", &mapped.sin6_addr);
    assert_int_equal(iso_dns_names_at((struct sockaddr *)&mapped, 2000, names, 4), 2);
    /* A TTL of 1 s is kept for the floor of a minute, then forgotten. */
    assert_int_equal(iso_dns_names_at((struct sockaddr *)&s, 1000 + 59000, names, 4), 2);
    assert_int_equal(iso_dns_names_at((struct sockaddr *)&s, 1000 + 61000, names, 4), 1);
    assert_string_equal(names[0], "a.test");
    assert_int_equal(iso_dns_names_at((struct sockaddr *)&s, 1000 + 301000, names, 4), 0);
    /* /etc/hosts entries are for ever. */
    iso_dns_remember("h.test", AF_INET, a, UINT32_MAX, 0);
    assert_int_equal(iso_dns_names_at((struct sockaddr *)&s, UINT64_MAX - 1, names, 4), 1);
    iso_dns_forget();
}

static void test_the_stub_answers_the_names_a_rule_allows_and_a_deny_rule_wins(void **state)
{
    struct policy *p = load("version: 1\nnetwork:\n  connect:\n"
                            "    allow: [\"api.example.com:443\", \"*.cdn.test\", \"*:8443\"]\n"
                            "    deny: [\"evil.test\"]\n");
    struct policy *ip = load("version: 1\nnetwork:\n  connect:\n    allow: [\"10.0.0.0/8:443\"]\n");
    struct policy_verdict v;
    (void)state;
    assert_true(iso_dns_name_allowed(p, "api.example.com", &v));
    assert_true(iso_dns_name_allowed(p, "x.cdn.test", &v));
    assert_true(iso_dns_name_allowed(p, "anything.test", &v));     /* *:8443 */
    assert_false(iso_dns_name_allowed(p, "evil.test", &v));
    assert_int_equal(v.rule->list, POLICY_CONNECT_DENY);
    assert_false(iso_dns_name_allowed(ip, "api.example.com", &v)); /* addresses only */
    policy_free(p);
    policy_free(ip);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_query_gives_its_name_lowercased_and_its_type),
        cmocka_unit_test(test_malformed_queries_and_unnameable_names_are_refused),
        cmocka_unit_test(test_every_a_and_aaaa_of_an_answer_is_found_with_its_ttl),
        cmocka_unit_test(test_an_answer_to_another_question_or_cut_short_teaches_nothing),
        cmocka_unit_test(test_a_remembered_address_names_its_hosts_until_it_expires),
        cmocka_unit_test(test_the_stub_answers_the_names_a_rule_allows_and_a_deny_rule_wins),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
