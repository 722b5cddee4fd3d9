/* test_compat.c — the preload's own strlcpy, strlcat, strtonum,
 * closefrom and SHA-256 (common/compat.c), which stand in for libbsd and
 * libmd inside the preload, behave as the originals are documented to. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../common/compat.c"

static void test_strlcpy_and_strlcat_truncate_and_return_the_full_length(void **state)
{
    (void)state;
    char b[8];
    assert_int_equal(strlcpy(b, "hello world", sizeof b), 11);
    assert_string_equal(b, "hello w");
    assert_int_equal(strlcpy(b, "hi", sizeof b), 2);
    assert_string_equal(b, "hi");
    assert_int_equal(strlcat(b, "-there", sizeof b), 8);
    assert_string_equal(b, "hi-ther");
    assert_int_equal(strlcpy(b, "x", 0), 1);
    memset(b, 'a', sizeof b);       /* not terminated within size */
    assert_int_equal(strlcat(b, "yz", sizeof b), sizeof b + 2);
}

static void test_strtonum_accepts_the_range_and_names_what_is_wrong(void **state)
{
    (void)state;
    const char *e;
    assert_int_equal(strtonum("443", 0, 65535, &e), 443);
    assert_null(e);
    assert_int_equal(strtonum("65536", 0, 65535, &e), 0);
    assert_string_equal(e, "too large");
    assert_int_equal(strtonum("-1", 0, 65535, &e), 0);
    assert_string_equal(e, "too small");
    assert_int_equal(strtonum("12x", 0, 65535, &e), 0);
    assert_string_equal(e, "invalid");
    assert_int_equal(strtonum("", 0, 65535, &e), 0);
    assert_string_equal(e, "invalid");
}

static void test_closefrom_closes_every_descriptor_from_the_one_given(void **state)
{
    (void)state;
    int a = open("/dev/null", O_RDONLY), b = dup2(a, 40), c = dup2(a, 41);
    assert_true(a >= 0 && b == 40 && c == 41);
    closefrom(41);
    assert_int_not_equal(fcntl(40, F_GETFD), -1);
    assert_int_equal(fcntl(41, F_GETFD), -1);
    close(40);
    close(a);
}

static void test_sha256_matches_the_fips_vectors_with_and_without_sha_ni(void **state)
{
    (void)state;
    char hex[65];
    assert_string_equal(SHA256Data((const uint8_t *)"abc", 3, hex),
                        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    assert_string_equal(SHA256Data((const uint8_t *)two, strlen(two), hex),
                        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* and the portable block function, which the preload uses on a CPU
     * without the SHA extensions */
    unsigned char d[32];
    audit_sha256_portable("abc", 3, d);
    assert_int_equal(d[0], 0xba);
    assert_int_equal(d[31], 0xad);
    audit_sha256_portable(two, strlen(two), d);
    assert_int_equal(d[0], 0x24);
    assert_int_equal(d[31], 0xc1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strlcpy_and_strlcat_truncate_and_return_the_full_length),
        cmocka_unit_test(test_strtonum_accepts_the_range_and_names_what_is_wrong),
        cmocka_unit_test(test_closefrom_closes_every_descriptor_from_the_one_given),
        cmocka_unit_test(test_sha256_matches_the_fips_vectors_with_and_without_sha_ni),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
