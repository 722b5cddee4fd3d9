/*
 * cwd.c — the calls that change the current directory, or may change it
 * where the guard cannot see, so that the directory path.c remembers for
 * judging relative paths is never used after it is out of date.
 *
 * chdir, fchdir, chroot and setns are not judged (moving around is not
 * access; what is opened afterwards is): they only make every thread
 * forget, before the call (so no lookup overlaps it with an old entry
 * taken during the call) and after it.  nftw(FTW_CHDIR) and fts without
 * FTS_NOCHDIR change directory through libc's internal calls, and a
 * clone(CLONE_VM) child that is not a thread sharing our directory
 * (CLONE_THREAD and CLONE_FS) runs on our memory with a directory of its
 * own: after any of those, this process asks the kernel every time.
 */
#include <errno.h>
#include <fts.h>
#include <ftw.h>
#include <sched.h>
#include <stdarg.h>
#include <unistd.h>

#include "guard.h"

REAL_SLOT(chdir);
REAL_SLOT(fchdir);
REAL_SLOT(chroot);
REAL_SLOT(setns);
REAL_SLOT(nftw);
REAL_SLOT(nftw64);
REAL_SLOT(fts_open);
REAL_SLOT(clone);

/* Calls the real NAME between two notes that the working directory may
 * have changed; with FLUSH, the remembered directories are forgotten after
 * it too (chroot, setns: every path may now mean something else). */
#define AROUND_CALL(flush, name, ...)               \
    do {                                            \
        __typeof__(&name) real = REAL(name);        \
        if (!real) {                                \
            errno = ENOSYS;                         \
            return -1;                              \
        }                                           \
        guard_cwd_changed();                        \
        int rc_ = real(__VA_ARGS__);                \
        int e_ = errno;                             \
        guard_cwd_changed();                        \
        if (flush)                                  \
            policy_path_cache_flush();              \
        errno = e_;                                 \
        return rc_;                                 \
    } while (0)
#define AROUND(name, ...) AROUND_CALL(false, name, __VA_ARGS__)
#define AROUND_FLUSH(name, ...) AROUND_CALL(true, name, __VA_ARGS__)

SBX_EXPORT int chdir(const char *path)
{
    AROUND(chdir, path);
}

SBX_EXPORT int fchdir(int fd)
{
    AROUND(fchdir, fd);
}

/* A new root or mount namespace: the directories policy/path.c remembers
 * may name other files now (it is told after the call too: a thread may
 * resolve meanwhile). */
SBX_EXPORT int chroot(const char *path)
{
    policy_path_cache_flush();
    AROUND_FLUSH(chroot, path);
}

SBX_EXPORT int setns(int fd, int nstype)
{
    policy_path_cache_flush();
    AROUND_FLUSH(setns, fd, nstype);
}

/* The real NAME, after switching the memory off when COND holds. */
#define OFF_IF(name, fail, cond, ...)               \
    do {                                            \
        __typeof__(&name) real = REAL(name);        \
        if (!real) {                                \
            errno = ENOSYS;                         \
            return fail;                            \
        }                                           \
        if (cond)                                   \
            guard_cwd_memo_off();                   \
        return real(__VA_ARGS__);                   \
    } while (0)

SBX_EXPORT int nftw(const char *dir, __nftw_func_t fn, int fds, int flags)
{
    OFF_IF(nftw, -1, flags & FTW_CHDIR, dir, fn, fds, flags);
}

SBX_EXPORT int nftw64(const char *dir, __nftw64_func_t fn, int fds, int flags)
{
    OFF_IF(nftw64, -1, flags & FTW_CHDIR, dir, fn, fds, flags);
}

SBX_EXPORT FTS *fts_open(char *const *argv, int options,
                         int (*compar)(const FTSENT **, const FTSENT **))
{
    OFF_IF(fts_open, NULL, !(options & FTS_NOCHDIR), argv, options, compar);
}

REAL_SLOT(fts64_open);

SBX_EXPORT FTS64 *fts64_open(char *const *argv, int options,
                             int (*compar)(const FTSENT64 **, const FTSENT64 **))
{
    OFF_IF(fts64_open, NULL, !(options & FTS_NOCHDIR), argv, options, compar);
}

/* glibc's clone reads parent_tid, tls and child_tid from the registers
 * whatever the flags say; so do we, and pass them on unchanged.  A child
 * on our memory that is not a thread, or a thread with its own directory,
 * could fill in (or read) a remembered directory that is not its own. */
SBX_EXPORT int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    pid_t *ptid = va_arg(ap, pid_t *);
    void *tls = va_arg(ap, void *);
    pid_t *ctid = va_arg(ap, pid_t *);
    va_end(ap);
    __typeof__(&clone) real = REAL(clone);
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    if ((flags & CLONE_VM) && (!(flags & CLONE_THREAD) || !(flags & CLONE_FS)))
        guard_cwd_memo_off();
    return real(fn, stack, flags, arg, ptid, tls, ctid);
}
