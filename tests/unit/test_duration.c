/* test_duration.c — one duration syntax (duration.h), and the three places
 * that take a duration agree on it: the policy's limits, sbx-audit --since
 * (auditfmt.h) and, through the same function, sbx-auditd --retain (its
 * command line is tested in tests/integration/cli.sh). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "auditfmt.h"
#include "duration.h"
#include "policy.h"

#define S 1000ull
#define M (60 * S)
#define H (60 * M)
#define D (24 * H)

static const struct { const char *text; uint64_t ms; } good[] = {
    { "250ms", 250 },       { "0ms", 0 },           { "0s", 0 },
    { "90s", 90 * S },      { "30m", 30 * M },      { "2h", 2 * H },
    { "7d", 7 * D },        { "1h30m", H + 30 * M }, { "1h 30m", H + 30 * M },
    { "2 h", 2 * H },       { "1d2h3m4s5ms", D + 2 * H + 3 * M + 4 * S + 5 },
    { "1m1ms", M + 1 },     { "10m ", 10 * M },     { "007s", 7 * S },
};

static const char *const bad[] = {
    "", " 5m", "30", "5", "m", "5x", "5 minutes", "1.5h", "-5m", "+5m", "5mm",
    "1h30", "5m s", "yesterday", "2026-12-02", "5M", "5S",
};

static void test_duration_parses_every_unit_and_their_combinations(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        uint64_t ms = 12345;
        if (sbx_duration_parse(good[i].text, &ms) != 0)
            fail_msg("\"%s\" was refused", good[i].text);
        if (ms != good[i].ms)
            fail_msg("\"%s\": got %llu ms, want %llu", good[i].text,
                     (unsigned long long)ms, (unsigned long long)good[i].ms);
    }
}

static void test_duration_refuses_a_bare_number_a_bad_unit_and_a_sign(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t ms = 12345;
        errno = 0;
        if (sbx_duration_parse(bad[i], &ms) == 0)
            fail_msg("\"%s\" was accepted as %llu ms", bad[i], (unsigned long long)ms);
        assert_int_equal(errno, EINVAL);
        assert_int_equal(ms, 12345);
    }
}

static void test_duration_reports_an_overflow_as_out_of_range(void **state)
{
    (void)state;
    uint64_t ms = 0;
    errno = 0;
    assert_int_equal(sbx_duration_parse("99999999999999999999ms", &ms), -1);
    assert_int_equal(errno, ERANGE);
    errno = 0;
    assert_int_equal(sbx_duration_parse("9999999999999999d", &ms), -1);
    assert_int_equal(errno, ERANGE);
    errno = 0;
    assert_int_equal(sbx_duration_parse("1844674407370955161ms1844674407370955161ms1844674407370955161ms1844674407370955161ms1844674407370955161ms1844674407370955161ms1844674407370955161ms1844674407370955161ms1844674407370955161ms1844674407370955161ms1844674407370955161ms", &ms), -1);
    assert_int_equal(errno, ERANGE);
    assert_int_equal(sbx_duration_parse("1844674407370955161ms", &ms), 0);
    assert_true(ms == 1844674407370955161ull);
}

static struct policy *load_timeout(const char *text, struct policy_diag *d)
{
    static const struct policy_options opt = { .workspace = "/", .home = "/root" };
    char y[256];
    snprintf(y, sizeof y, "version: 1\nlimits:\n  timeout: \"%s\"\n  cpu: \"%s\"\n", text, text);
    return policy_load_buffer("p.yaml", y, strlen(y), &opt, d);
}

static void test_the_policy_takes_exactly_the_same_durations(void **state)
{
    (void)state;
    struct policy_diag d;
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        struct policy *p = load_timeout(good[i].text, &d);
        if (p == NULL)
            fail_msg("the policy refused \"%s\": %s", good[i].text, d.count ? d.msg[0] : "");
        assert_true(policy_info(p)->limits.timeout_ms == good[i].ms);
        assert_true(policy_info(p)->limits.cpu_ms == good[i].ms);
        policy_free(p);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct policy *p = load_timeout(bad[i], &d);
        if (p != NULL)
            fail_msg("the policy accepted \"%s\"", bad[i]);
        assert_non_null(strstr(d.msg[0], "bad duration"));
    }
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void test_since_takes_exactly_the_same_durations_back_from_now(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        int64_t ns = 0, before = now_ns();
        if (afmt_parse_since(good[i].text, &ns) != 0)
            fail_msg("--since refused \"%s\"", good[i].text);
        int64_t after = now_ns(), want = (int64_t)good[i].ms * 1000000;
        assert_true(ns >= before - want && ns <= after - want);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t ns = 0;
        /* A date is a time, not a duration: --since takes both. */
        if (strcmp(bad[i], "2026-12-02") == 0)
            continue;
        if (afmt_parse_since(bad[i], &ns) == 0)
            fail_msg("--since accepted \"%s\"", bad[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_duration_parses_every_unit_and_their_combinations),
        cmocka_unit_test(test_duration_refuses_a_bare_number_a_bad_unit_and_a_sign),
        cmocka_unit_test(test_duration_reports_an_overflow_as_out_of_range),
        cmocka_unit_test(test_the_policy_takes_exactly_the_same_durations),
        cmocka_unit_test(test_since_takes_exactly_the_same_durations_back_from_now),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
