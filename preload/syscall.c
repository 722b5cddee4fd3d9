/*
 * syscall.c — syscall(2) with the number of a guarded call goes to the
 * interposer of that call; every other number (and every call our own code
 * makes) goes to the kernel unchanged, with all six arguments forwarded.
 *
 * This catches programs that use libc's syscall() to get around the
 * wrappers (Go with cgo, some Rust crates, hand-written code); a program
 * that issues the instruction itself is the kernel layer's business.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "guard.h"

/* openat2 through syscall(): judged the careful way, then made as given. */
static long sys_openat2(long dirfd, long path, long how, long size)
{
    const struct open_how *h = (const struct open_how *)how;
    if (!h || (size_t)size < sizeof(uint64_t) || !guard_enter())
        return guard_sys(SYS_openat2, dirfd, path, how, size, 0, 0);
    int saved = errno;
    int flags = (int)h->flags;
    bool write = (flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC)) ||
                 (flags & O_TMPFILE) == O_TMPFILE;
    int err = guard_path_op(write ? SBX_OP_OPEN_WRITE : SBX_OP_OPEN_READ, (int)dirfd,
                            (const char *)path, (flags & O_NOFOLLOW) != 0,
                            (flags & O_ACCMODE) == O_RDWR, NULL);
    guard_leave();
    if (err) {
        errno = err;
        return -1;
    }
    errno = saved;
    return guard_sys(SYS_openat2, dirfd, path, how, size, 0, 0);
}

SBX_EXPORT long syscall(long nr, ...)
{
    va_list ap;
    va_start(ap, nr);
    long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long);
    long d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);
    va_end(ap);
    if (guard_inside())
        return guard_sys(nr, a, b, c, d, e, f);

#define P(x) ((const char *)(x))
    switch (nr) {
#ifdef SYS_open
    case SYS_open:
        return open(P(a), (int)b, (mode_t)c);
#endif
#ifdef SYS_creat
    case SYS_creat:
        return creat(P(a), (mode_t)b);
#endif
    case SYS_openat:
        return openat((int)a, P(b), (int)c, (mode_t)d);
    case SYS_openat2:
        return sys_openat2(a, b, c, d);
    case SYS_execve:
        return execve(P(a), (char *const *)b, (char *const *)c);
    case SYS_execveat:
        return execveat((int)a, P(b), (char *const *)c, (char *const *)d, (int)e);
    case SYS_socket:
        return socket((int)a, (int)b, (int)c);
    case SYS_connect:
        return connect((int)a, (const struct sockaddr *)b, (socklen_t)c);
    case SYS_bind:
        return bind((int)a, (const struct sockaddr *)b, (socklen_t)c);
    case SYS_sendto:
        return sendto((int)a, (const void *)b, (size_t)c, (int)d,
                      (const struct sockaddr *)e, (socklen_t)f);
    case SYS_sendmsg:
        return sendmsg((int)a, (const struct msghdr *)b, (int)c);
#ifdef SYS_unlink
    case SYS_unlink:
        return unlink(P(a));
#endif
    case SYS_unlinkat:
        return unlinkat((int)a, P(b), (int)c);
#ifdef SYS_rmdir
    case SYS_rmdir:
        return rmdir(P(a));
#endif
#ifdef SYS_mkdir
    case SYS_mkdir:
        return mkdir(P(a), (mode_t)b);
#endif
    case SYS_mkdirat:
        return mkdirat((int)a, P(b), (mode_t)c);
#ifdef SYS_mknod
    case SYS_mknod:
        return mknod(P(a), (mode_t)b, (dev_t)c);
#endif
    case SYS_mknodat:
        return mknodat((int)a, P(b), (mode_t)c, (dev_t)d);
#ifdef SYS_rename
    case SYS_rename:
        return rename(P(a), P(b));
#endif
    case SYS_renameat:
        return renameat((int)a, P(b), (int)c, P(d));
    case SYS_renameat2:
        return renameat2((int)a, P(b), (int)c, P(d), (unsigned)e);
#ifdef SYS_link
    case SYS_link:
        return link(P(a), P(b));
#endif
    case SYS_linkat:
        return linkat((int)a, P(b), (int)c, P(d), (int)e);
#ifdef SYS_symlink
    case SYS_symlink:
        return symlink(P(a), P(b));
#endif
    case SYS_symlinkat:
        return symlinkat(P(a), (int)b, P(c));
#ifdef SYS_chmod
    case SYS_chmod:
        return chmod(P(a), (mode_t)b);
#endif
    case SYS_fchmodat:
        return fchmodat((int)a, P(b), (mode_t)c, 0);
#ifdef SYS_fchmodat2
    case SYS_fchmodat2:
        return fchmodat((int)a, P(b), (mode_t)c, (int)d);
#endif
#ifdef SYS_chown
    case SYS_chown:
        return chown(P(a), (uid_t)b, (gid_t)c);
#endif
#ifdef SYS_lchown
    case SYS_lchown:
        return lchown(P(a), (uid_t)b, (gid_t)c);
#endif
    case SYS_fchownat:
        return fchownat((int)a, P(b), (uid_t)c, (gid_t)d, (int)e);
    case SYS_truncate:
        return truncate(P(a), (off_t)b);
    case SYS_ftruncate:
        return ftruncate((int)a, (off_t)b);
    case SYS_fallocate:
        return fallocate((int)a, (int)b, (off_t)c, (off_t)d);
    case SYS_utimensat:
        return utimensat((int)a, P(b), (const struct timespec *)c, (int)d);
#ifdef SYS_utimes
    case SYS_utimes:
        return utimes(P(a), (const struct timeval *)b);
#endif
#ifdef SYS_futimesat
    case SYS_futimesat:
        return futimesat((int)a, P(b), (const struct timeval *)c);
#endif
    /* Not judged, but the directory path.c remembers must follow (cwd.c). */
    case SYS_chdir:
        return chdir(P(a));
    case SYS_fchdir:
        return fchdir((int)a);
    case SYS_chroot:
        return chroot(P(a));
    case SYS_setns:
        return setns((int)a, (int)b);
    case SYS_pivot_root: {
        guard_cwd_changed();
        policy_path_cache_flush();
        long r = guard_sys(nr, a, b, c, d, e, f);
        int err = errno;
        guard_cwd_changed();
        policy_path_cache_flush();
        errno = err;
        return r;
    }
    case SYS_clone:
    case SYS_clone3:
#ifdef SYS_vfork
    case SYS_vfork:
#endif
        guard_cwd_memo_off();
        return guard_sys(nr, a, b, c, d, e, f);
    default:
        return guard_sys(nr, a, b, c, d, e, f);
    }
#undef P
}
