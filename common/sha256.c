/* sha256.c — SHA-256 with an SHA-NI block function where available, and a
 * portable one elsewhere (see sha256.h).  The padding and length encoding are FIPS 180-4's. */
#include "sha256.h"

#include <string.h>
#include <sys/types.h>

/* FIPS 180-4, 4.2.2 */
static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>


/* One 64-byte block with the SHA extensions.  The instructions keep the
 * state as two vectors, ABEF and CDGH; sha256rnds2 does two rounds, so
 * each group of four message words takes two calls, the second with the
 * upper half of the (message + K) vector moved down. */
__attribute__((target("sha,sse4.1,ssse3")))
static void block_ni(uint32_t state[8], const uint8_t *data)
{
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i t = _mm_loadu_si128((const __m128i *)&state[0]);       /* A B C D */
    __m128i s1 = _mm_loadu_si128((const __m128i *)&state[4]);      /* E F G H */
    t = _mm_shuffle_epi32(t, 0xB1);
    s1 = _mm_shuffle_epi32(s1, 0x1B);
    __m128i s0 = _mm_alignr_epi8(t, s1, 8);                         /* ABEF */
    s1 = _mm_blend_epi16(s1, t, 0xF0);                              /* CDGH */
    __m128i save0 = s0, save1 = s1, m[4];
    for (int g = 0; g < 16; g++) {
        __m128i w;
        if (g < 4) {
            w = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + (size_t)16 * g)), bswap);
        } else {
            /* W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16], four at a time */
            w = _mm_sha256msg1_epu32(m[g & 3], m[(g - 3) & 3]);
            w = _mm_add_epi32(w, _mm_alignr_epi8(m[(g - 1) & 3], m[(g - 2) & 3], 4));
            w = _mm_sha256msg2_epu32(w, m[(g - 1) & 3]);
        }
        m[g & 3] = w;
        __m128i k = _mm_add_epi32(w, _mm_loadu_si128((const __m128i *)&K[(size_t)4 * g]));
        s1 = _mm_sha256rnds2_epu32(s1, s0, k);
        s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(k, 0x0E));
    }
    s0 = _mm_add_epi32(s0, save0);
    s1 = _mm_add_epi32(s1, save1);
    t = _mm_shuffle_epi32(s0, 0x1B);                                /* F E B A */
    s1 = _mm_shuffle_epi32(s1, 0xB1);                               /* D C H G */
    s0 = _mm_blend_epi16(t, s1, 0xF0);                              /* D C B A */
    s1 = _mm_alignr_epi8(s1, t, 8);                                 /* H G F E */
    _mm_storeu_si128((__m128i *)&state[0], s0);
    _mm_storeu_si128((__m128i *)&state[4], s1);
}

static int have_ni = -1;

bool audit_sha256_accelerated(void)
{
    if (have_ni < 0) {
        unsigned a, b, c, d;
        bool sha = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29));
        bool sse41 = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 19)) && (c & (1u << 9));
        have_ni = sha && sse41;
    }
    return have_ni;
}
#else
bool audit_sha256_accelerated(void)
{
    return false;
}
#endif

static uint32_t ror(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

/* The portable block function (FIPS 180-4, 6.2.2). */
static void block_c(uint32_t st[8], const uint8_t *blk)
{
    uint32_t w[64];
    for (size_t i = 0; i < 16; i++)
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
                      K[i] + w[i];
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

static void block(uint32_t state[8], const uint8_t *data, bool ni)
{
#if defined(__x86_64__)
    if (ni) {
        block_ni(state, data);
        return;
    }
#else
    (void)ni;
#endif
    block_c(state, data);
}

static void digest(const void *data, size_t n, unsigned char out[32], bool ni)
{
    uint32_t st[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                       0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
    const uint8_t *p = data;
    size_t left = n;
    for (; left >= 64; left -= 64, p += 64)
        block(st, p, ni);
    /* The tail, the 0x80 byte, zeros, and the bit length (big-endian) in
     * one or two final blocks. */
    uint8_t last[128];
    memset(last, 0, sizeof last);
    memcpy(last, p, left);
    last[left] = 0x80;
    size_t len = left + 1 + 8 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)n * 8;
    for (int i = 0; i < 8; i++)
        last[len - 1 - i] = (uint8_t)(bits >> (8 * i));
    block(st, last, ni);
    if (len == 128)
        block(st, last + 64, ni);
    for (size_t i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(st[i] >> 24);
        out[4 * i + 1] = (uint8_t)(st[i] >> 16);
        out[4 * i + 2] = (uint8_t)(st[i] >> 8);
        out[4 * i + 3] = (uint8_t)st[i];
    }
}

void audit_sha256(const void *data, size_t n, unsigned char out[32])
{
    digest(data, n, out, audit_sha256_accelerated());
}

void audit_sha256_portable(const void *data, size_t n, unsigned char out[32])
{
    digest(data, n, out, false);
}
