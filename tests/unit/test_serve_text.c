/* test_serve_text.c — sbx-serve's output texts (serve_text.h): program
 * output becomes valid UTF-8 exactly as Python's errors="replace" decodes
 * it, and a timeout is written as Python writes a float. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "serve_text.h"

#define FFFD "\xEF\xBF\xBD"

static void check_utf8(const char *in, size_t len, const char *suffix, const char *want)
{
    size_t n = 0;
    char *out = serve_utf8(in, len, suffix, &n);

    assert_non_null(out);
    assert_int_equal(n, strlen(want));
    assert_memory_equal(out, want, n);
    assert_int_equal(out[n], '\0');
    free(out);
}

static void test_valid_utf8_passes_unchanged_and_the_suffix_follows(void **state)
{
    (void)state;
    check_utf8("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80z", 11, NULL,
               "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80z");
    check_utf8("", 0, NULL, "");
    check_utf8("x", 1, "\n[output truncated at 50 KB]", "x\n[output truncated at 50 KB]");
    /* A NUL byte is valid UTF-8 and stays (jansson writes \u0000). */
    size_t n = 0;
    char *out = serve_utf8("a\0b", 3, NULL, &n);
    assert_non_null(out);
    assert_int_equal(n, 3);
    assert_memory_equal(out, "a\0b", 3);
    free(out);
}

static void test_each_invalid_sequence_becomes_one_replacement_as_python_does(void **state)
{
    (void)state;
    /* b"a\xffb\xe2\x82".decode("utf-8", "replace") == "a\ufffdb\ufffd" */
    check_utf8("a\xff" "b\xe2\x82", 5, NULL, "a" FFFD "b" FFFD);
    /* a lone continuation byte, two of them */
    check_utf8("\x80\x80", 2, NULL, FFFD FFFD);
    /* overlong forms: C0/C1 never start a sequence; E0 80 is not E0 A0.. */
    check_utf8("\xC0\xAF", 2, NULL, FFFD FFFD);
    check_utf8("\xE0\x80\xAF", 3, NULL, FFFD FFFD FFFD);
    /* a surrogate (ED A0 80) and above U+10FFFF (F4 90 ..) */
    check_utf8("\xED\xA0\x80", 3, NULL, FFFD FFFD FFFD);
    check_utf8("\xF4\x90\x80\x80", 4, NULL, FFFD FFFD FFFD FFFD);
    /* a sequence cut by the next valid byte: one replacement, the byte kept */
    check_utf8("\xF0\x9F\x98" "A", 4, NULL, FFFD "A");
    /* cut at the end of the buffer (the cap cuts mid-character) */
    check_utf8("ok\xE2\x82", 4, NULL, "ok" FFFD);
    /* F5..FF never start one */
    check_utf8("\xF5\xFE", 2, NULL, FFFD FFFD);
}

static void test_a_float_is_written_as_python_writes_it(void **state)
{
    static const struct { double v; const char *want; } cases[] = {
        { 2, "2.0" }, { 30, "30.0" }, { 2.5, "2.5" }, { 0.1, "0.1" }, { 0.25, "0.25" },
        { 1.0 / 3, "0.3333333333333333" }, { 10, "10.0" }, { 0.001, "0.001" },
        { 29.999, "29.999" }, { 1e-5, "1e-05" },
    };
    char out[64];

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        serve_float_text(cases[i].v, out, sizeof out);
        assert_string_equal(out, cases[i].want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_utf8_passes_unchanged_and_the_suffix_follows),
        cmocka_unit_test(test_each_invalid_sequence_becomes_one_replacement_as_python_does),
        cmocka_unit_test(test_a_float_is_written_as_python_writes_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
