/*
 * failalloc.h — allocation-failure injection for a unit test binary.
 *
 * A test that includes this header (once, in its one .c file) is linked
 * with the allocator wrapped (Makefile: FAILALLOC_LDFLAGS, -Wl,--wrap=...),
 * so every malloc, calloc, realloc, reallocarray, strdup and asprintf made
 * by sbx's own code (the static libraries and the test) goes through the
 * wrappers below; allocations inside shared libraries (libc's own, libyaml,
 * PCRE2, cmocka) do not.  failalloc_arm(N) makes the N-th wrapped
 * allocation from now fail (0: the next one), and every one after it too,
 * as a real out-of-memory would; failalloc_arm(-1) disarms.
 *
 * The usual test: for N = 0, 1, 2, ... arm N, run the code under test, and
 * check that it failed cleanly (no crash, no double free, no leak under
 * make sanitize), until a run completes with no injected failure.
 */
#ifndef SBX_FAILALLOC_H
#define SBX_FAILALLOC_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t sz);
void *__real_realloc(void *p, size_t n);
void *__real_reallocarray(void *p, size_t n, size_t sz);
char *__real_strdup(const char *s);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t sz);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_reallocarray(void *p, size_t n, size_t sz);
char *__wrap_strdup(const char *s);
int __wrap_asprintf(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int __wrap___asprintf_chk(char **out, int flag, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static long failalloc_countdown = -1;   /* allocations left before failing */
static bool failalloc_hit;              /* an injected failure happened */

static inline void failalloc_arm(long n)
{
    failalloc_countdown = n;
    failalloc_hit = false;
}

/* True if this allocation is to fail (and says so in errno). */
static bool failalloc_now(void)
{
    if (failalloc_countdown < 0)
        return false;
    if (failalloc_countdown > 0) {
        failalloc_countdown--;
        return false;
    }
    failalloc_hit = true;
    errno = ENOMEM;
    return true;
}

void *__wrap_malloc(size_t n)
{
    return failalloc_now() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t sz)
{
    return failalloc_now() ? NULL : __real_calloc(n, sz);
}

void *__wrap_realloc(void *p, size_t n)
{
    return failalloc_now() ? NULL : __real_realloc(p, n);
}

void *__wrap_reallocarray(void *p, size_t n, size_t sz)
{
    return failalloc_now() ? NULL : __real_reallocarray(p, n, sz);
}

char *__wrap_strdup(const char *s)
{
    return failalloc_now() ? NULL : __real_strdup(s);
}

int __wrap_asprintf(char **out, const char *fmt, ...)
{
    if (failalloc_now())
        return -1;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(out, fmt, ap);
    va_end(ap);
    return n;
}

/* With _FORTIFY_SOURCE, glibc's headers turn asprintf into this. */
int __wrap___asprintf_chk(char **out, int flag, const char *fmt, ...)
{
    (void)flag;
    if (failalloc_now())
        return -1;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(out, fmt, ap);
    va_end(ap);
    return n;
}

#endif
