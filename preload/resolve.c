/*
 * resolve.c — the real libc functions behind our interposers, and system
 * calls that do not go through libc.
 *
 * dlsym may itself call calloc and, in some glibc versions, open files; it
 * runs "inside the guard" so that any call it makes to an interposed
 * function passes straight through.
 */
#include <dlfcn.h>
#include <errno.h>

#include "guard.h"

/* Set while this thread is inside dlsym: a call dlsym makes to a function
 * we interpose must not look a symbol up again (that would recurse); it
 * gets NULL and uses a raw system call instead. */
static __thread int resolving __attribute__((tls_model("initial-exec")));

void *guard_real(_Atomic(void *) *slot, const char *name)
{
    void *p = atomic_load_explicit(slot, memory_order_acquire);
    if (p)
        return p;
    if (resolving)
        return NULL;
    resolving = 1;
    /* Two threads may both look the symbol up; both get the same answer,
     * so the race is harmless and needs no lock (fork-safe). */
    guard_depth_add(1);
    p = dlsym(RTLD_NEXT, name);
    guard_depth_add(-1);
    resolving = 0;
    if (p)
        atomic_store_explicit(slot, p, memory_order_release);
    return p;
}

#if defined(__x86_64__)
long guard_raw(long nr, long a, long b, long c, long d, long e, long f)
{
    long ret;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}
#elif defined(__aarch64__)
long guard_raw(long nr, long a, long b, long c, long d, long e, long f)
{
    register long x8 __asm__("x8") = nr;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    register long x4 __asm__("x4") = e;
    register long x5 __asm__("x5") = f;
    __asm__ volatile("svc 0"
                     : "+r"(x0)
                     : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                     : "memory");
    return x0;
}
#else
#error "libsbx-preload: raw system calls are written for x86_64 and aarch64 only"
#endif

long guard_sys(long nr, long a, long b, long c, long d, long e, long f)
{
    long r = guard_raw(nr, a, b, c, d, e, f);
    if (r < 0 && r > -4096) {
        errno = (int)-r;
        return -1;
    }
    return r;
}
