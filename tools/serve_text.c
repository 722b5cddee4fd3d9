/*
 * serve_text.c — UTF-8 repair, float text, error text and the clock
 * (serve_text.h).
 */
#include "serve_text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bsd/string.h>

/* Length of the valid UTF-8 sequence at S (of N bytes), or 0 (invalid at
 * its first byte) / -K (the first K bytes are a valid but cut prefix: one
 * replacement for them, as Python's "maximal subpart" rule says). */
static int utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    int need;
    unsigned char lo = 0x80, hi = 0xBF;

    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        need = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;           /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;           /* not above U+10FFFF */
    } else
        return 0;
    for (int i = 1; i <= need; i++) {
        if ((size_t)i >= n)
            return -i;
        unsigned char b = s[i];
        if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF))
            return -i;
    }
    return need + 1;
}

char *serve_utf8(const char *buf, size_t len, const char *suffix, size_t *outlen)
{
    size_t slen = suffix ? strlen(suffix) : 0;
    /* Each invalid byte becomes at most 3 bytes. */
    char *out = malloc(len * 3 + slen + 1), *p = out;
    const unsigned char *s = (const unsigned char *)buf;
    size_t i = 0;

    if (out == NULL)
        return NULL;
    while (i < len) {
        int k = utf8_seq(s + i, len - i);
        if (k > 0) {
            memcpy(p, s + i, (size_t)k);
            p += k;
            i += (size_t)k;
            continue;
        }
        memcpy(p, "\xEF\xBF\xBD", 3);
        p += 3;
        i += k == 0 ? 1 : (size_t)-k;
    }
    if (slen) {
        memcpy(p, suffix, slen);
        p += slen;
    }
    *p = '\0';
    *outlen = (size_t)(p - out);
    return out;
}

void serve_float_text(double v, char *out, size_t outsz)
{
    double a = v < 0 ? -v : v;

    /* The shortest text that reads back as V, like Python's repr: fixed
     * notation between 1e-4 and 1e16 (%g would write 30 as 3e+01),
     * exponent notation outside. */
    if (a == 0 || (a >= 1e-4 && a < 1e16)) {
        for (int d = 0; d <= 20; d++) {
            snprintf(out, outsz, "%.*f", d, v);
            if (strtod(out, NULL) == v)
                break;
        }
    } else {
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(out, outsz, "%.*g", prec, v);
            if (strtod(out, NULL) == v)
                break;
        }
    }
    if (strpbrk(out, ".eEni") == NULL)
        strlcat(out, ".0", outsz);
}

void serve_errf(char *err, size_t errsz, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, errsz, fmt, ap);
    va_end(ap);
}

double serve_now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
