/*
 * compat.c — the few libbsd and libmd functions the policy engine and the
 * emitter use, written on libc alone, for the preload only: linking those
 * two libraries would cost every process of the agent two more libraries to
 * map and relocate (preload/lazylib.h says why that matters).  The Makefile
 * links this file into the preload and leaves it out of libsbx-common.a: the
 * tools and the daemon use the real ones; these follow the same documented
 * behaviour.  Hidden, like everything in the preload but its interposers.
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

char *SHA256Data(const uint8_t *data, size_t len, char *out)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char d[32];
    audit_sha256(data, len, d);
    for (size_t i = 0; i < 32; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[64] = '\0';
    return out;
}
