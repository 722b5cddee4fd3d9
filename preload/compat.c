/*
 * compat.c — the few libbsd and libmd functions the policy engine and the
 * emitter use, for the preload only: linking those two libraries would cost
 * every process of the agent two more libraries to map and relocate
 * (lazylib.h says why that matters).  The tools and the daemon use the real
 * ones; these follow the same documented behaviour.  Hidden, like
 * everything in the preload but its interposers.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bsd/stdlib.h>
#include <bsd/string.h>
#include <bsd/unistd.h>
#include <sha2.h>

#include "sha256.h"

size_t strlcpy(char *dst, const char *src, size_t size)
{
    size_t n = strlen(src);
    if (size > 0) {
        size_t k = n < size - 1 ? n : size - 1;
        memcpy(dst, src, k);
        dst[k] = '\0';
    }
    return n;
}

size_t strlcat(char *dst, const char *src, size_t size)
{
    size_t d = strnlen(dst, size);
    if (d == size)
        return size + strlen(src);
    return d + strlcpy(dst + d, src, size - d);
}

long long strtonum(const char *s, long long min, long long max, const char **errstr)
{
    const char *why = NULL;
    long long v = 0;
    if (min > max) {
        why = "invalid";
    } else {
        char *end;
        errno = 0;
        v = strtoll(s, &end, 10);
        if (end == s || *end != '\0')
            why = "invalid";
        else if ((v == LLONG_MIN && errno == ERANGE) || v < min)
            why = "too small";
        else if ((v == LLONG_MAX && errno == ERANGE) || v > max)
            why = "too large";
    }
    if (errstr)
        *errstr = why;
    if (why) {
        errno = why[0] == 'i' ? EINVAL : ERANGE;
        return 0;
    }
    return v;
}

void closefrom(int lowfd)
{
    if (lowfd < 0)
        lowfd = 0;
    if (syscall(SYS_close_range, (unsigned)lowfd, ~0u, 0) == 0)
        return;
    long max = sysconf(_SC_OPEN_MAX);
    for (long fd = lowfd; fd < (max > 0 ? max : 1024); fd++)
        close((int)fd);
}

/* The portable block function (FIPS 180-4, 6.2.2) that sha256.c falls
 * back to without the SHA extensions. */
static const uint32_t k256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

void SHA256Transform(uint32_t st[8], const uint8_t blk[64])
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)blk[4 * i] << 24 | (uint32_t)blk[4 * i + 1] << 16 |
               (uint32_t)blk[4 * i + 2] << 8 | blk[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = st[0], b = st[1], c = st[2], d = st[3];
    uint32_t e = st[4], f = st[5], g = st[6], h = st[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) +
                      k256[i] + w[i];
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    st[0] += a; st[1] += b; st[2] += c; st[3] += d;
    st[4] += e; st[5] += f; st[6] += g; st[7] += h;
}

char *SHA256Data(const uint8_t *data, size_t len, char *out)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char d[32];
    audit_sha256(data, len, d);
    for (int i = 0; i < 32; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[64] = '\0';
    return out;
}
