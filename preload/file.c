/*
 * file.c — opening files: the open family, fopen, opendir, mkstemp.
 *
 * The hot path (an open that creates and truncates nothing) costs one
 * getcwd at most, a policy lookup and one openat2 instead of the openat the
 * program asked for:
 *   1. fold the path lexically and decide on it; a denial ends here;
 *   2. open with openat2(RESOLVE_NO_SYMLINKS): if it succeeds (or fails for
 *      an ordinary reason) no symlink was on the way, so the lexical path
 *      was the real one, and the decision stands;
 *   3. otherwise (ELOOP: a symlink, a /proc/self/fd magic link; or openat2
 *      refusing flags that open ignores) decide on the resolved path too
 *      and make the program's call as it was given.
 * Opens with side effects (O_CREAT, O_TRUNC, O_TMPFILE) take step 3 at once:
 * the decision must be final and recorded before anything is created.
 *
 * Race (documented in the README): between step 3's check and the call a
 * symlink can be swapped in; the kernel layer (Landlock) is the wall.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "guard.h"

/* Fortified entry points (bits/fcntl2.h declares them only under
 * _FORTIFY_SOURCE). */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);

REAL_SLOT(openat);
REAL_SLOT(fopen);
REAL_SLOT(fopen64);
REAL_SLOT(freopen);
REAL_SLOT(freopen64);
REAL_SLOT(opendir);
REAL_SLOT(mkstemp);
REAL_SLOT(mkstemp64);
REAL_SLOT(mkostemp);
REAL_SLOT(mkostemp64);
REAL_SLOT(mkstemps);
REAL_SLOT(mkstemps64);
REAL_SLOT(mkostemps);
REAL_SLOT(mkostemps64);
REAL_SLOT(mkdtemp);

#ifndef __O_TMPFILE
#define __O_TMPFILE 020000000
#endif
#define O_TMPFILE_BITS (__O_TMPFILE | O_DIRECTORY)

/* The flags openat2 accepts (the kernel's VALID_OPEN_FLAGS, with the
 * kernel's value of O_LARGEFILE, which x86_64 userspace defines as 0).
 * open() ignores other bits; openat2 fails EINVAL on them. */
#define KERNEL_O_LARGEFILE 0100000
#define OPENAT2_VALID (O_ACCMODE | O_CREAT | O_EXCL | O_NOCTTY | O_TRUNC | O_APPEND | \
                       O_NONBLOCK | O_DSYNC | O_ASYNC | O_DIRECT | KERNEL_O_LARGEFILE | \
                       O_DIRECTORY | O_NOFOLLOW | O_NOATIME | O_CLOEXEC | O_PATH |       \
                       O_SYNC | __O_TMPFILE)

static bool has_mode(int flags)
{
    return (flags & O_CREAT) || (flags & O_TMPFILE_BITS) == O_TMPFILE_BITS;
}

static bool side_effects(int flags)
{
    return (flags & (O_CREAT | O_TRUNC)) || (flags & O_TMPFILE_BITS) == O_TMPFILE_BITS;
}

static enum sbx_op open_op(int flags)
{
    if ((flags & O_ACCMODE) == O_RDONLY && !side_effects(flags))
        return SBX_OP_OPEN_READ;
    return SBX_OP_OPEN_WRITE;
}

/* openat2 refused for a reason that says nothing about the file: take the
 * slow path.  (EPERM also when a seccomp filter refuses openat2.) */
static bool openat2_fallback(long err)
{
    return err == ELOOP || err == ENOSYS || err == EINVAL || err == E2BIG ||
           err == EPERM || err == EXDEV || err == EAGAIN;
}

static int pass_openat(int dirfd, const char *path, int flags, mode_t mode)
{
    __typeof__(&openat) f = REAL(openat);
    if (f)
        return f(dirfd, path, flags, mode);
    return (int)guard_sys(SYS_openat, dirfd, (long)path, flags, mode, 0, 0);
}

/* Entered (guard_enter was true); leaves before returning. */
static int guarded_openat(int dirfd, const char *path, int flags, mode_t mode)
{
    int saved = errno, err;
    enum sbx_op op = open_op(flags);
    bool also_read = (flags & O_ACCMODE) == O_RDWR;

    if (!side_effects(flags) && !(flags & ~OPENAT2_VALID) && guard_policy) {
        char lex[GUARD_PATH_MAX];
        struct guard_verdict gv;
        if (guard_lexical(dirfd, path, lex, sizeof lex) < 0) {
            err = errno == ENAMETOOLONG ? guard_record_toolong(op, path) : errno;
            goto fail;
        }
        enum sbx_decision d = guard_decide_path(op, lex, also_read, &gv);
        if (!guard_verdict_final(&gv))
            goto slow;          /* maybe allowed under its resolved name */
        if (d == SBX_DENY) {
            err = guard_benign_errno(op, flags, lex);
            if (!err)
                err = guard_record(&gv, NULL, 0, NULL);
            goto fail;
        }
        struct open_how how = {.flags = (unsigned)flags, .mode = 0,
                               .resolve = RESOLVE_NO_SYMLINKS};
        /* Outside the guard while the open may block (a FIFO, a slow file
         * system): a signal handler that opens a file meanwhile is guarded
         * like any other call. */
        guard_leave();
        long fd = guard_raw(SYS_openat2, dirfd, (long)path, (long)&how, sizeof how, 0, 0);
        guard_depth_add(1);
        if (fd >= 0 || !openat2_fallback(-fd)) {
            err = guard_record(&gv, NULL, 0, NULL);
            if (err) {
                if (fd >= 0)
                    guard_raw(SYS_close, fd, 0, 0, 0, 0, 0);
                goto fail;
            }
            guard_leave();
            if (fd < 0) {
                errno = (int)-fd;
                return -1;
            }
            errno = saved;
            return (int)fd;
        }
    }

slow:;
    struct guard_judged j;
    err = guard_judge_path(op, dirfd, path, (flags & O_NOFOLLOW) != 0, also_read, &j);
    if (!err && j.gv.v.decision == SBX_DENY)
        err = guard_benign_errno(op, flags, j.lex);
    if (!err)
        err = guard_record(&j.gv, NULL, 0, j.note);
    if (err)
        goto fail;
    guard_leave();
    errno = saved;
    return pass_openat(dirfd, path, flags, mode);
fail:
    guard_leave();
    errno = err;
    return -1;
}

static int do_openat(int dirfd, const char *path, int flags, mode_t mode)
{
    if (!guard_enter())
        return pass_openat(dirfd, path, flags, mode);
    return guarded_openat(dirfd, path, flags, mode);
}

#define MODE_ARG(flags, mode)                     \
    do {                                          \
        if (has_mode(flags)) {                    \
            va_list ap;                           \
            va_start(ap, flags);                  \
            (mode) = (mode_t)va_arg(ap, unsigned);\
            va_end(ap);                           \
        }                                         \
    } while (0)

SBX_EXPORT int open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    MODE_ARG(flags, mode);
    return do_openat(AT_FDCWD, path, flags, mode);
}

SBX_EXPORT int open64(const char *path, int flags, ...)
{
    mode_t mode = 0;
    MODE_ARG(flags, mode);
    return do_openat(AT_FDCWD, path, flags, mode);
}

SBX_EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    MODE_ARG(flags, mode);
    return do_openat(dirfd, path, flags, mode);
}

SBX_EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    MODE_ARG(flags, mode);
    return do_openat(dirfd, path, flags, mode);
}

/* The fortified versions abort on O_CREAT without a mode; we pass 0 and let
 * the kernel complain the way the unfortified call would. */
SBX_EXPORT int __open_2(const char *path, int flags)
{
    return do_openat(AT_FDCWD, path, flags, 0);
}

SBX_EXPORT int __open64_2(const char *path, int flags)
{
    return do_openat(AT_FDCWD, path, flags, 0);
}

SBX_EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
    return do_openat(dirfd, path, flags, 0);
}

SBX_EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
    return do_openat(dirfd, path, flags, 0);
}

SBX_EXPORT int creat(const char *path, mode_t mode)
{
    return do_openat(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

SBX_EXPORT int creat64(const char *path, mode_t mode)
{
    return do_openat(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

/* open(2) flags for an fopen MODE ("r", "w+", "ae", "wx", ...). */
static int fopen_flags(const char *mode)
{
    int flags;
    switch (mode ? mode[0] : 'r') {
    case 'w':
        flags = O_WRONLY | O_CREAT | O_TRUNC;
        break;
    case 'a':
        flags = O_WRONLY | O_CREAT | O_APPEND;
        break;
    default:
        flags = O_RDONLY;
        break;
    }
    for (const char *m = mode ? mode + 1 : ""; *m && *m != ','; m++)
        if (*m == '+')
            flags = (flags & ~O_ACCMODE) | O_RDWR;
    return flags;
}

/* Judges a stdio-style open of PATH.  0 or the errno to fail with.
 * Entered; leaves. */
static int judge_open_mode(int dirfd, const char *path, int flags)
{
    struct guard_judged j;
    int err = guard_judge_path(open_op(flags), dirfd, path, false,
                               (flags & O_ACCMODE) == O_RDWR, &j);
    /* The errno rule as for open(2): vim's fopen of a missing ~/.viminfo
     * is ENOENT, not a denial. */
    if (!err && j.gv.v.decision == SBX_DENY)
        err = guard_benign_errno(open_op(flags), flags, j.lex);
    if (!err)
        err = guard_record(&j.gv, NULL, 0, j.note);
    guard_leave();
    return err;
}

#define STDIO_OPEN(name, ...)                                        \
    do {                                                             \
        __typeof__(&name) real = REAL(name);                         \
        if (!real) {                                                 \
            errno = ENOSYS;                                          \
            return NULL;                                             \
        }                                                            \
        if (guard_enter()) {                                         \
            int saved = errno;                                       \
            int err = judge_open_mode(AT_FDCWD, path, fopen_flags(mode)); \
            if (err) {                                               \
                errno = err;                                         \
                return NULL;                                         \
            }                                                        \
            errno = saved;                                           \
        }                                                            \
        return real(__VA_ARGS__);                                    \
    } while (0)

SBX_EXPORT FILE *fopen(const char *path, const char *mode)
{
    STDIO_OPEN(fopen, path, mode);
}

SBX_EXPORT FILE *fopen64(const char *path, const char *mode)
{
    STDIO_OPEN(fopen64, path, mode);
}

SBX_EXPORT FILE *freopen(const char *path, const char *mode, FILE *stream)
{
    if (!path)                  /* changes the mode of STREAM only */
        return REAL(freopen)(path, mode, stream);
    STDIO_OPEN(freopen, path, mode, stream);
}

SBX_EXPORT FILE *freopen64(const char *path, const char *mode, FILE *stream)
{
    if (!path)
        return REAL(freopen64)(path, mode, stream);
    STDIO_OPEN(freopen64, path, mode, stream);
}

SBX_EXPORT DIR *opendir(const char *path)
{
    __typeof__(&opendir) real = REAL(opendir);
    if (!real) {
        errno = ENOSYS;
        return NULL;
    }
    if (guard_enter()) {
        int saved = errno;
        int err = judge_open_mode(AT_FDCWD, path, O_RDONLY | O_DIRECTORY);
        if (err) {
            errno = err;
            return NULL;
        }
        errno = saved;
    }
    return real(path);
}

/* mkstemp and friends create a file named after TEMPLATE from inside libc
 * (not through open): judge the template as a write (mkdtemp: a mkdir). */
static int judge_template(enum sbx_op op, const char *tmpl)
{
    if (!guard_enter())
        return 0;
    int saved = errno;
    struct guard_judged j;
    int err = guard_judge_path(op, AT_FDCWD, tmpl, false, false, &j);
    if (!err)
        err = guard_record(&j.gv, NULL, 0, j.note);
    guard_leave();
    errno = err ? err : saved;
    return err;
}

#define TEMPLATE_CALL(name, op, fail, ...)                           \
    do {                                                             \
        __typeof__(&name) real = REAL(name);                         \
        if (!real) {                                                 \
            errno = ENOSYS;                                          \
            return fail;                                             \
        }                                                            \
        if (judge_template(op, tmpl))                                \
            return fail;                                             \
        return real(__VA_ARGS__);                                    \
    } while (0)

SBX_EXPORT int mkstemp(char *tmpl)
{
    TEMPLATE_CALL(mkstemp, SBX_OP_OPEN_WRITE, -1, tmpl);
}

SBX_EXPORT int mkstemp64(char *tmpl)
{
    TEMPLATE_CALL(mkstemp64, SBX_OP_OPEN_WRITE, -1, tmpl);
}

SBX_EXPORT int mkostemp(char *tmpl, int flags)
{
    TEMPLATE_CALL(mkostemp, SBX_OP_OPEN_WRITE, -1, tmpl, flags);
}

SBX_EXPORT int mkostemp64(char *tmpl, int flags)
{
    TEMPLATE_CALL(mkostemp64, SBX_OP_OPEN_WRITE, -1, tmpl, flags);
}

SBX_EXPORT int mkstemps(char *tmpl, int suffixlen)
{
    TEMPLATE_CALL(mkstemps, SBX_OP_OPEN_WRITE, -1, tmpl, suffixlen);
}

SBX_EXPORT int mkstemps64(char *tmpl, int suffixlen)
{
    TEMPLATE_CALL(mkstemps64, SBX_OP_OPEN_WRITE, -1, tmpl, suffixlen);
}

SBX_EXPORT int mkostemps(char *tmpl, int suffixlen, int flags)
{
    TEMPLATE_CALL(mkostemps, SBX_OP_OPEN_WRITE, -1, tmpl, suffixlen, flags);
}

SBX_EXPORT int mkostemps64(char *tmpl, int suffixlen, int flags)
{
    TEMPLATE_CALL(mkostemps64, SBX_OP_OPEN_WRITE, -1, tmpl, suffixlen, flags);
}

SBX_EXPORT char *mkdtemp(char *tmpl)
{
    TEMPLATE_CALL(mkdtemp, SBX_OP_MKDIR, NULL, tmpl);
}
