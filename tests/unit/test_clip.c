/* test_clip.c — texts clipped for the audit trail keep their head, a
 * marker with the whole length and hash, and whole UTF-8 characters. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "clip.h"

static void test_clip_copies_a_text_that_fits_unchanged(void **state)
{
    (void)state;
    char out[8];
    assert_string_equal(sbx_clip("1234567", 7, out, sizeof out), "1234567");
    assert_string_equal(sbx_clip("", 0, out, sizeof out), "");
}

static void test_clip_keeps_the_head_and_names_length_and_sha256(void **state)
{
    (void)state;
    char in[300], out[200];
    memset(in, 'a', sizeof in);
    const char *r = sbx_clip(in, sizeof in, out, sizeof out);
    /* sha256 of 300 'a' (python3 hashlib) */
    assert_int_equal(strlen(r), sizeof out - 1);
    const char *m = strstr(r, "...[truncated: 300 bytes, sha256 "
                           "9835fa6bf4e20a9b9ea812506302e98982721a6cf8d2cae67af57129bf21ae90]");
    assert_non_null(m);
    assert_string_equal(m + strlen(m) - 1, "]");
    for (const char *p = r; p < m; p++)
        assert_int_equal(*p, 'a');
}

static void test_clip_never_cuts_inside_a_utf8_character(void **state)
{
    (void)state;
    /* "é" is 2 bytes: 200 of them, cut so that the boundary falls inside
     * one for either parity of the room left. */
    char in[400];
    for (int i = 0; i < 200; i++)
        memcpy(in + 2 * i, "\xc3\xa9", 2);
    for (size_t outsz = SBX_CLIP_MARK_MAX + 10; outsz < SBX_CLIP_MARK_MAX + 14; outsz++) {
        char out[SBX_CLIP_MARK_MAX + 14];
        sbx_clip(in, sizeof in, out, outsz);
        const char *m = strstr(out, "...[truncated: 400 bytes");
        assert_non_null(m);
        assert_int_equal((m - out) % 2, 0);
        assert_true(strlen(out) < outsz);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clip_copies_a_text_that_fits_unchanged),
        cmocka_unit_test(test_clip_keeps_the_head_and_names_length_and_sha256),
        cmocka_unit_test(test_clip_never_cuts_inside_a_utf8_character),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
