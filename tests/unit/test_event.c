/* test_event.c — the event record encoding and the emitter's edges. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "event.h"

static unsigned char buf[SBX_REC_MAX];

static void round_trip(const struct sbx_event_desc *ev, struct sbx_event_view *v)
{
    size_t n = sbx_event_encode(ev, 1234567890123456789ull, buf, sizeof buf);
    assert_true(n > 0);
    assert_int_equal(sbx_event_decode(buf, n, v), 0);
}

static void assert_str(const struct sbx_event_view *v, int i, const char *want)
{
    if (!want) {
        assert_null(v->str[i]);
        return;
    }
    assert_non_null(v->str[i]);
    assert_int_equal(v->len[i], strlen(want));
    assert_memory_equal(v->str[i], want, v->len[i]);
}

static void test_every_field_round_trips_through_a_record(void **state)
{
    (void)state;
    struct sbx_event_desc ev = {
        .op = SBX_OP_RENAME, .decision = SBX_DENY, .layer = SBX_LAYER_KERNEL,
        .flags = SBX_EVF_AUDIT | SBX_EVF_ENV_RESTORED, .err = 13,
        .target = "/ws/a b.txt", .target2 = "/ws/c\xc3\xa9.txt",
        .rule = "files.write.deny[2] \".git/config\"", .reason = "write to a protected file",
    };
    struct sbx_event_view v;
    round_trip(&ev, &v);
    assert_int_equal(v.ts_ns, 1234567890123456789ull);
    assert_int_equal(v.op, SBX_OP_RENAME);
    assert_int_equal(v.decision, SBX_DENY);
    assert_int_equal(v.layer, SBX_LAYER_KERNEL);
    assert_int_equal(v.flags, SBX_EVF_AUDIT | SBX_EVF_ENV_RESTORED);
    assert_int_equal(v.err, 13);
    assert_str(&v, SBX_EV_TARGET, ev.target);
    assert_str(&v, SBX_EV_TARGET2, ev.target2);
    assert_str(&v, SBX_EV_RULE, ev.rule);
    assert_str(&v, SBX_EV_REASON, ev.reason);
}

static void test_null_and_empty_strings_stay_distinct(void **state)
{
    (void)state;
    struct sbx_event_desc ev = { .op = SBX_OP_EXEC, .target = "", .target2 = NULL,
                                 .rule = "", .reason = NULL };
    struct sbx_event_view v;
    round_trip(&ev, &v);
    assert_str(&v, SBX_EV_TARGET, "");
    assert_null(v.str[SBX_EV_TARGET2]);
    assert_str(&v, SBX_EV_RULE, "");
    assert_null(v.str[SBX_EV_REASON]);
}

static char *filled(size_t n, char c)
{
    char *s = malloc(n + 1);
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

static void test_path_max_target_is_kept_whole(void **state)
{
    (void)state;
    char *path = filled(4095, 'p');
    path[0] = '/';
    struct sbx_event_desc ev = { .op = SBX_OP_OPEN_READ, .target = path, .target2 = path };
    struct sbx_event_view v;
    round_trip(&ev, &v);
    assert_str(&v, SBX_EV_TARGET, path);
    assert_str(&v, SBX_EV_TARGET2, path);
    assert_false(v.flags & SBX_EVF_TRUNCATED);
    free(path);
}

static void test_oversized_strings_are_cut_with_a_marker_and_flagged(void **state)
{
    (void)state;
    char *huge = filled(1 << 20, 'x');
    struct sbx_event_desc ev = { .op = SBX_OP_EXEC, .target = huge, .target2 = huge,
                                 .rule = huge, .reason = huge };
    struct sbx_event_view v;
    round_trip(&ev, &v);
    assert_true(v.flags & SBX_EVF_TRUNCATED);
    const uint32_t max[] = { SBX_EV_TARGET_MAX, SBX_EV_TARGET2_MAX, SBX_EV_TEXT_MAX,
                             SBX_EV_TEXT_MAX };
    size_t ml = strlen(SBX_EV_CUT_MARK);
    for (int i = 0; i < SBX_EV_NSTR; i++) {
        assert_int_equal(v.len[i], max[i]);
        assert_memory_equal(v.str[i] + v.len[i] - ml, SBX_EV_CUT_MARK, ml);
        assert_int_equal(v.str[i][0], 'x');
    }
    free(huge);
}

static void test_a_string_one_byte_over_the_limit_is_cut(void **state)
{
    (void)state;
    char *s = filled(SBX_EV_TEXT_MAX + 1, 'r');
    struct sbx_event_desc ev = { .op = SBX_OP_EXEC, .reason = s };
    struct sbx_event_view v;
    round_trip(&ev, &v);
    assert_true(v.flags & SBX_EVF_TRUNCATED);
    assert_int_equal(v.len[SBX_EV_REASON], SBX_EV_TEXT_MAX);
    free(s);
    s = filled(SBX_EV_TEXT_MAX, 'r');
    ev.reason = s;
    round_trip(&ev, &v);
    assert_false(v.flags & SBX_EVF_TRUNCATED);
    free(s);
}

static void test_a_cut_never_splits_a_utf8_character(void **state)
{
    (void)state;
    /* "é" (2 bytes) repeated: wherever the cut falls, what is kept before
     * the marker must be whole characters. */
    size_t n = SBX_EV_TEXT_MAX * 2;
    char *s = malloc(n + 2);
    for (size_t i = 0; i + 1 < n + 1; i += 2) {
        s[i] = (char)0xc3;
        s[i + 1] = (char)0xa9;
    }
    s[n] = '\0';
    for (int shift = 0; shift < 2; shift++) {
        struct sbx_event_desc ev = { .op = SBX_OP_EXEC, .rule = s + shift };
        struct sbx_event_view v;
        round_trip(&ev, &v);
        size_t kept = v.len[SBX_EV_RULE] - strlen(SBX_EV_CUT_MARK);
        const unsigned char *k = (const unsigned char *)v.str[SBX_EV_RULE];
        /* the kept part ends with a whole character (the 2nd byte of é) */
        assert_true(kept > 0);
        assert_int_equal(k[kept - 1], 0xa9);
    }
    free(s);
}

static void test_encode_refuses_a_buffer_that_is_too_small(void **state)
{
    (void)state;
    struct sbx_event_desc ev = { .op = SBX_OP_OPEN_READ, .target = "/etc/passwd" };
    unsigned char small[16];
    assert_int_equal(sbx_event_encode(&ev, 1, small, sizeof small), 0);
}

static void test_decode_rejects_bad_lengths_enums_and_nul_bytes(void **state)
{
    (void)state;
    struct sbx_event_desc ev = { .op = SBX_OP_OPEN_READ, .target = "/abc", .reason = "r" };
    size_t n = sbx_event_encode(&ev, 1, buf, sizeof buf);
    struct sbx_event_view v;
    struct sbx_rec_hdr h;
    assert_int_equal(sbx_event_decode(buf, n, &v), 0);
    assert_int_equal(sbx_event_decode(buf, n - 1, &v), -1);    /* short */
    assert_int_equal(sbx_event_decode(buf, 8, &v), -1);        /* no header */
    memcpy(&h, buf, sizeof h);
    h.op = SBX_OP__COUNT;
    memcpy(buf, &h, sizeof h);
    assert_int_equal(sbx_event_decode(buf, n, &v), -1);
    h.op = SBX_OP_OPEN_READ;
    h.layer = SBX_LAYER__COUNT;
    memcpy(buf, &h, sizeof h);
    assert_int_equal(sbx_event_decode(buf, n, &v), -1);
    h.layer = 0;
    h.len[0] = 60000;                                          /* over the max */
    memcpy(buf, &h, sizeof h);
    assert_int_equal(sbx_event_decode(buf, n, &v), -1);
    h.len[0] = 4;
    h.has = 0;                                                 /* length without string */
    memcpy(buf, &h, sizeof h);
    assert_int_equal(sbx_event_decode(buf, n, &v), -1);
    h.has = 1 | 8;
    memcpy(buf, &h, sizeof h);
    buf[sizeof h + 1] = '\0';                                  /* NUL inside */
    assert_int_equal(sbx_event_decode(buf, n, &v), -1);
}

static void test_random_bytes_never_decode_out_of_bounds(void **state)
{
    (void)state;
    srand(7);
    for (int round = 0; round < 20000; round++) {
        size_t n = sizeof(struct sbx_rec_hdr) + (size_t)(rand() % 64);
        for (size_t i = 0; i < n; i++)
            buf[i] = (unsigned char)rand();
        struct sbx_rec_hdr h;
        memcpy(&h, buf, sizeof h);
        h.total = (uint32_t)n;     /* make some get past the first check */
        memcpy(buf, &h, sizeof h);
        struct sbx_event_view v;
        if (sbx_event_decode(buf, n, &v) == 0)
            for (int i = 0; i < SBX_EV_NSTR; i++)
                if (v.str[i])
                    assert_true(v.str[i] + v.len[i] <= (const char *)buf + n);
    }
}

/* ---- references into a ring's string table (sbx_event_expand) ---------- */

static unsigned char plain[SBX_REC_MAX];

/* Encodes EV with the given references through a plan, as the emitter
 * does; returns the record's size. */
static size_t encode_refs(const struct sbx_event_desc *ev, const uint32_t *refs)
{
    struct sbx_rec_plan plan;
    uint32_t total = sbx_event_plan(ev, 42, refs, &plan);
    size_t off = 0;
    for (unsigned i = 0; i < plan.nseg; i++) {
        memcpy(buf + off, plan.seg[i], plan.seglen[i]);
        off += plan.seglen[i];
    }
    assert_int_equal(off, total);
    return total;
}

static void test_a_referenced_rule_and_reason_expand_to_their_texts(void **state)
{
    (void)state;
    static char tab[256];
    memset(tab, 'x', sizeof tab);
    strcpy(tab + 10, "files.read.allow \"**\" default.yaml:18");
    strcpy(tab + 100, "matches files.read.allow");
    struct sbx_event_desc ev = { .op = SBX_OP_OPEN_READ, .target = "/ws/data.txt",
                                 .rule = "ignored: sent by reference", .reason = "ignored too" };
    uint32_t refs[SBX_EV_NSTR] = { SBX_EV_NOREF, SBX_EV_NOREF, 10, 100 };
    size_t n = encode_refs(&ev, refs);
    /* the references make the record small: header, target, 2 x 4 bytes */
    assert_int_equal(n, sizeof(struct sbx_rec_hdr) + strlen(ev.target) + 8);
    /* a record with references is not a plain record */
    struct sbx_event_view v;
    assert_int_equal(sbx_event_decode(buf, n, &v), -1);
    size_t m = sbx_event_expand(buf, n, tab, sizeof tab, plain, sizeof plain);
    assert_true(m > 0);
    assert_int_equal(sbx_event_decode(plain, m, &v), 0);
    assert_int_equal(v.ts_ns, 42);
    assert_int_equal(v.op, SBX_OP_OPEN_READ);
    assert_str(&v, SBX_EV_TARGET, "/ws/data.txt");
    assert_str(&v, SBX_EV_TARGET2, NULL);
    assert_str(&v, SBX_EV_RULE, "files.read.allow \"**\" default.yaml:18");
    assert_str(&v, SBX_EV_REASON, "matches files.read.allow");
    /* a record without references is copied as it is */
    size_t k = sbx_event_encode(&ev, 7, buf, sizeof buf);
    assert_int_equal(sbx_event_expand(buf, k, tab, sizeof tab, plain, sizeof plain), k);
    assert_memory_equal(plain, buf, k);
}

static void test_bad_references_are_refused(void **state)
{
    (void)state;
    static char tab[64];
    memset(tab, 0, sizeof tab);
    strcpy(tab, "rule");
    memset(tab + 8, 'y', sizeof tab - 8);       /* no NUL from 8 to the end */
    struct sbx_event_desc ev = { .op = SBX_OP_OPEN_READ, .target = "/t", .rule = "r" };
    uint32_t refs[SBX_EV_NSTR] = { SBX_EV_NOREF, SBX_EV_NOREF, 0, SBX_EV_NOREF };
    size_t n = encode_refs(&ev, refs);
    assert_true(sbx_event_expand(buf, n, tab, sizeof tab, plain, sizeof plain) > 0);
    /* past the table */
    refs[SBX_EV_RULE] = sizeof tab;
    n = encode_refs(&ev, refs);
    assert_int_equal(sbx_event_expand(buf, n, tab, sizeof tab, plain, sizeof plain), 0);
    refs[SBX_EV_RULE] = UINT32_MAX - 1;
    n = encode_refs(&ev, refs);
    assert_int_equal(sbx_event_expand(buf, n, tab, sizeof tab, plain, sizeof plain), 0);
    /* a text that runs to the table's end without a NUL */
    refs[SBX_EV_RULE] = 8;
    n = encode_refs(&ev, refs);
    assert_int_equal(sbx_event_expand(buf, n, tab, sizeof tab, plain, sizeof plain), 0);
    /* a reference whose length is not 4, or that names no string */
    refs[SBX_EV_RULE] = 0;
    n = encode_refs(&ev, refs);
    struct sbx_rec_hdr h;
    memcpy(&h, buf, sizeof h);
    h.len[SBX_EV_RULE] = 3;
    h.len[SBX_EV_TARGET] += 1;
    memcpy(buf, &h, sizeof h);
    assert_int_equal(sbx_event_expand(buf, n, tab, sizeof tab, plain, sizeof plain), 0);
    n = encode_refs(&ev, refs);
    memcpy(&h, buf, sizeof h);
    h.has &= (uint8_t)~(1u << SBX_EV_RULE);
    memcpy(buf, &h, sizeof h);
    assert_int_equal(sbx_event_expand(buf, n, tab, sizeof tab, plain, sizeof plain), 0);
    /* a text longer than a rule may be */
    static char big[2 * SBX_EV_TEXT_MAX];
    memset(big, 'z', sizeof big);
    big[sizeof big - 1] = '\0';
    n = encode_refs(&ev, refs);
    assert_int_equal(sbx_event_expand(buf, n, big, sizeof big, plain, sizeof plain), 0);
}

static void test_random_references_never_expand_out_of_bounds(void **state)
{
    (void)state;
    static char tab[128];
    srand(11);
    for (int round = 0; round < 20000; round++) {
        for (size_t i = 0; i < sizeof tab; i++)
            tab[i] = (char)(rand() % 4 == 0 ? 0 : 'a' + rand() % 26);
        struct sbx_event_desc ev = { .op = SBX_OP_OPEN_READ, .target = "/t", .rule = "r",
                                     .reason = "s" };
        uint32_t refs[SBX_EV_NSTR] = { SBX_EV_NOREF, SBX_EV_NOREF,
                                       (uint32_t)(rand() % 160), (uint32_t)(rand() % 160) };
        size_t n = encode_refs(&ev, refs);
        /* and damage a byte of the header or the body now and then */
        if (rand() % 2)
            buf[(size_t)rand() % n] = (unsigned char)rand();
        size_t m = sbx_event_expand(buf, n, tab, sizeof tab, plain, sizeof plain);
        struct sbx_event_view v;
        if (m > 0 && sbx_event_decode(plain, m, &v) == 0)
            for (int i = 0; i < SBX_EV_NSTR; i++)
                if (v.str[i])
                    assert_true(v.str[i] + v.len[i] <= (const char *)plain + m);
    }
}

static void test_emit_fails_cleanly_when_no_daemon_is_reachable(void **state)
{
    (void)state;
    assert_int_equal(sbx_emit_init("/nonexistent-sbx-dir", "run", "token"), 0);
    struct sbx_event_desc ev = { .op = SBX_OP_OPEN_READ, .target = "/x" };
    assert_int_equal(sbx_emit(&ev), -1);
    assert_int_equal(sbx_emit(&ev), -1);
    assert_false(sbx_emit_killed());
    assert_non_null(strstr(sbx_emit_error(), "cannot reach sbx-auditd"));
}

static void test_emit_init_refuses_missing_arguments(void **state)
{
    (void)state;
    assert_int_equal(sbx_emit_init("/tmp", "", "b"), -1);
    assert_non_null(strstr(sbx_emit_error(), "run id or token"));
    assert_int_equal(sbx_emit_init("/tmp", "a", NULL), -1);
    char longdir[5000];
    memset(longdir, 'd', sizeof longdir - 1);
    longdir[sizeof longdir - 1] = '\0';
    assert_int_equal(sbx_emit_init(longdir, "a", "b"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_field_round_trips_through_a_record),
        cmocka_unit_test(test_null_and_empty_strings_stay_distinct),
        cmocka_unit_test(test_path_max_target_is_kept_whole),
        cmocka_unit_test(test_oversized_strings_are_cut_with_a_marker_and_flagged),
        cmocka_unit_test(test_a_string_one_byte_over_the_limit_is_cut),
        cmocka_unit_test(test_a_cut_never_splits_a_utf8_character),
        cmocka_unit_test(test_encode_refuses_a_buffer_that_is_too_small),
        cmocka_unit_test(test_decode_rejects_bad_lengths_enums_and_nul_bytes),
        cmocka_unit_test(test_random_bytes_never_decode_out_of_bounds),
        cmocka_unit_test(test_a_referenced_rule_and_reason_expand_to_their_texts),
        cmocka_unit_test(test_bad_references_are_refused),
        cmocka_unit_test(test_random_references_never_expand_out_of_bounds),
        cmocka_unit_test(test_emit_fails_cleanly_when_no_daemon_is_reachable),
        cmocka_unit_test(test_emit_init_refuses_missing_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
