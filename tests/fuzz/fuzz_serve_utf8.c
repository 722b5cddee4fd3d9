/*
 * fuzz_serve_utf8.c — libFuzzer harness for serve_utf8, which sbx-serve runs
 * on every byte a sandboxed program prints before the bytes become JSON.
 *
 * The program is hostile: whatever it writes, the answer must be valid
 * UTF-8 by a strict reading (no overlong forms, no surrogates, nothing
 * above U+10FFFF), text that already was valid must pass unchanged, the
 * conversion is idempotent, the suffix follows, and the result is never
 * more than three bytes per input byte (one U+FFFD each at worst).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve_text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Length of the valid sequence at S[0..N), or 0: written from RFC 3629's
 * table, independently of serve_text.c. */
static size_t valid_seq(const uint8_t *s, size_t n)
{
    uint8_t c = s[0];
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF;

    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return len;
}

static bool all_valid(const uint8_t *s, size_t n)
{
    for (size_t i = 0, k; i < n; i += k)
        if ((k = valid_seq(s + i, n - i)) == 0)
            return false;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char suffix[] = "\n[truncated]";
    size_t outlen = 0, againlen = 0;
    char *out, *again;

    out = serve_utf8((const char *)data, size, suffix, &outlen);
    if (out == NULL)
        abort();
    if (outlen < sizeof suffix - 1 || outlen > 3 * size + sizeof suffix - 1)
        abort();
    if (memcmp(out + outlen - (sizeof suffix - 1), suffix, sizeof suffix - 1) != 0)
        abort();
    if (!all_valid((const uint8_t *)out, outlen))
        abort();
    if (all_valid(data, size)
        && (outlen - (sizeof suffix - 1) != size || memcmp(out, data, size) != 0))
        abort();
    again = serve_utf8(out, outlen, NULL, &againlen);
    if (again == NULL || againlen != outlen || memcmp(again, out, outlen) != 0)
        abort();
    free(again);
    free(out);
    return 0;
}
