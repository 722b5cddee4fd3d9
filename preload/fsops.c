/*
 * fsops.c — calls that change the file system without opening a file:
 * unlink, rmdir, rename, link, symlink, mkdir, mknod, chmod, chown, utimes,
 * truncate (and the write-size limit on ftruncate and fallocate).
 *
 * Each is judged on the resolved path (guard_judge_path), with the last
 * component not followed where the call does not follow it (unlink, rmdir,
 * rename, link, symlink, lchown, AT_SYMLINK_NOFOLLOW).  rename and link are
 * judged at both ends; the source is also judged for reading, since moving
 * or hard-linking a file the agent may not read would hand it over under a
 * name it may read.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>
#include <utime.h>

#include "guard.h"

REAL_SLOT(unlink);
REAL_SLOT(unlinkat);
REAL_SLOT(remove);
REAL_SLOT(rmdir);
REAL_SLOT(mkdir);
REAL_SLOT(mkdirat);
REAL_SLOT(mkfifo);
REAL_SLOT(mkfifoat);
REAL_SLOT(mknod);
REAL_SLOT(mknodat);
REAL_SLOT(rename);
REAL_SLOT(renameat);
REAL_SLOT(renameat2);
REAL_SLOT(link);
REAL_SLOT(linkat);
REAL_SLOT(symlink);
REAL_SLOT(symlinkat);
REAL_SLOT(chmod);
REAL_SLOT(fchmodat);
REAL_SLOT(lchmod);
REAL_SLOT(chown);
REAL_SLOT(lchown);
REAL_SLOT(fchownat);
REAL_SLOT(utimensat);
REAL_SLOT(utimes);
REAL_SLOT(utime);
REAL_SLOT(lutimes);
REAL_SLOT(futimesat);
REAL_SLOT(truncate);
REAL_SLOT(truncate64);
REAL_SLOT(ftruncate);
REAL_SLOT(ftruncate64);
REAL_SLOT(fallocate);
REAL_SLOT(fallocate64);
REAL_SLOT(posix_fallocate);
REAL_SLOT(posix_fallocate64);

/* 0 to go on, or the errno the call fails with.  TARGET2 is recorded. */
static int judge_one(enum sbx_op op, int dirfd, const char *path, bool nofollow,
                     const char *target2)
{
    if (!guard_enter())
        return 0;
    int saved = errno;
    int err = guard_path_op(op, dirfd, path, nofollow, false, target2);
    guard_leave();
    errno = saved;
    return err;
}

#define ONE_PATH(name, op, dirfd, path, nofollow, ...)                 \
    do {                                                               \
        __typeof__(&name) real = REAL(name);                           \
        if (!real) {                                                   \
            errno = ENOSYS;                                            \
            return -1;                                                 \
        }                                                              \
        int err_ = judge_one(op, dirfd, path, nofollow, NULL);         \
        if (err_) {                                                    \
            errno = err_;                                              \
            return -1;                                                 \
        }                                                              \
        return real(__VA_ARGS__);                                      \
    } while (0)

/* Both ends of a rename or link: the row names the source as target and the
 * destination as target2, whichever end decided. */
static int judge_two(enum sbx_op op, int olddir, const char *oldpath, bool follow_old,
                     int newdir, const char *newpath)
{
    if (!guard_enter())
        return 0;
    int saved = errno;
    struct guard_judged a, b;
    int err = guard_judge_path(op, olddir, oldpath, !follow_old, true, &a);
    if (!err)
        err = guard_judge_path(op, newdir, newpath, true, false, &b);
    if (err)
        goto out;
    struct guard_verdict gv = a.gv;
    char note[600];
    struct sbuf s;
    sbuf_init(&s, note, sizeof note);
    if (a.gv.v.decision == SBX_DENY || (a.gv.v.audit && b.gv.v.decision != SBX_DENY)) {
        sbuf_add(&s, a.note);
    } else if (b.gv.v.decision == SBX_DENY || b.gv.v.audit) {
        gv = b.gv;
        sbuf_add(&s, "the destination ");
        sbuf_add(&s, b.gv.target);
        if (b.note[0]) {
            sbuf_add(&s, " ");
            sbuf_add(&s, b.note);
        }
    }
    gv.op = op;                 /* not open-read when the source's read decided */
    gv.target = a.lex;
    err = guard_record(&gv, b.lex, 0, note);
out:
    guard_leave();
    errno = saved;
    return err;
}

#define TWO_PATHS(name, op, od, op_, follow, nd, np, ...)            \
    do {                                                             \
        __typeof__(&name) real = REAL(name);                         \
        if (!real) {                                                 \
            errno = ENOSYS;                                          \
            return -1;                                               \
        }                                                            \
        int err_ = judge_two(op, od, op_, follow, nd, np);           \
        if (err_) {                                                  \
            errno = err_;                                            \
            return -1;                                               \
        }                                                            \
        int rc_ = real(__VA_ARGS__);                                 \
        if ((op) == SBX_OP_RENAME) {                                 \
            /* a directory above the cwd may have moved (path.c);   \
             * after the call: before it, another thread could      \
             * remember the old name again */                        \
            int e_ = errno;                                          \
            guard_cwd_changed();                                     \
            errno = e_;                                              \
        }                                                            \
        return rc_;                                                  \
    } while (0)

/* An empty path with AT_EMPTY_PATH names DIRFD itself: judged on its path. */
static const char *at_path(int dirfd, const char *path, int flags, char *buf, size_t size,
                           int *dfd)
{
    *dfd = dirfd;
    if ((flags & AT_EMPTY_PATH) && path && !path[0]) {
        if (guard_fd_path(dirfd, buf, size) < 0 || buf[0] != '/')
            return NULL;
        *dfd = AT_FDCWD;
        return buf;
    }
    return path;
}

SBX_EXPORT int unlink(const char *path)
{
    ONE_PATH(unlink, SBX_OP_UNLINK, AT_FDCWD, path, true, path);
}

SBX_EXPORT int unlinkat(int dirfd, const char *path, int flags)
{
    ONE_PATH(unlinkat, (flags & AT_REMOVEDIR) ? SBX_OP_RMDIR : SBX_OP_UNLINK, dirfd, path,
             true, dirfd, path, flags);
}

SBX_EXPORT int rmdir(const char *path)
{
    ONE_PATH(rmdir, SBX_OP_RMDIR, AT_FDCWD, path, true, path);
}

/* remove() is unlink or rmdir, whichever PATH needs. */
SBX_EXPORT int remove(const char *path)
{
    struct stat st;
    enum sbx_op op = SBX_OP_UNLINK;
    if (path && guard_raw(SYS_newfstatat, AT_FDCWD, (long)path, (long)&st,
                          AT_SYMLINK_NOFOLLOW, 0, 0) == 0 && S_ISDIR(st.st_mode))
        op = SBX_OP_RMDIR;
    ONE_PATH(remove, op, AT_FDCWD, path, true, path);
}

/* judge_one for mkdir, with the errno rule: a denied mkdir of a visible
 * path that exists fails with EEXIST, as without the policy (benign.c). */
static int judge_mkdir(int dirfd, const char *path)
{
    if (!guard_enter())
        return 0;
    int saved = errno;
    struct guard_judged j;
    int err = guard_judge_path(SBX_OP_MKDIR, dirfd, path, true, false, &j);
    if (!err && j.gv.v.decision == SBX_DENY)
        err = guard_benign_errno(SBX_OP_MKDIR, 0, j.lex);
    if (!err)
        err = guard_record(&j.gv, NULL, 0, j.note);
    guard_leave();
    errno = saved;
    return err;
}

SBX_EXPORT int mkdir(const char *path, mode_t mode)
{
    int err = judge_mkdir(AT_FDCWD, path);
    if (err) {
        errno = err;
        return -1;
    }
    return REAL(mkdir) ? REAL(mkdir)(path, mode) : (int)guard_sys(SYS_mkdir, (long)path, mode, 0, 0, 0, 0);
}

SBX_EXPORT int mkdirat(int dirfd, const char *path, mode_t mode)
{
    int err = judge_mkdir(dirfd, path);
    if (err) {
        errno = err;
        return -1;
    }
    return REAL(mkdirat) ? REAL(mkdirat)(dirfd, path, mode)
                         : (int)guard_sys(SYS_mkdirat, dirfd, (long)path, mode, 0, 0, 0);
}

SBX_EXPORT int mkfifo(const char *path, mode_t mode)
{
    ONE_PATH(mkfifo, SBX_OP_OPEN_WRITE, AT_FDCWD, path, true, path, mode);
}

SBX_EXPORT int mkfifoat(int dirfd, const char *path, mode_t mode)
{
    ONE_PATH(mkfifoat, SBX_OP_OPEN_WRITE, dirfd, path, true, dirfd, path, mode);
}

SBX_EXPORT int mknod(const char *path, mode_t mode, dev_t dev)
{
    ONE_PATH(mknod, SBX_OP_OPEN_WRITE, AT_FDCWD, path, true, path, mode, dev);
}

SBX_EXPORT int mknodat(int dirfd, const char *path, mode_t mode, dev_t dev)
{
    ONE_PATH(mknodat, SBX_OP_OPEN_WRITE, dirfd, path, true, dirfd, path, mode, dev);
}

SBX_EXPORT int rename(const char *oldpath, const char *newpath)
{
    TWO_PATHS(rename, SBX_OP_RENAME, AT_FDCWD, oldpath, false, AT_FDCWD, newpath,
              oldpath, newpath);
}

SBX_EXPORT int renameat(int olddir, const char *oldpath, int newdir, const char *newpath)
{
    TWO_PATHS(renameat, SBX_OP_RENAME, olddir, oldpath, false, newdir, newpath,
              olddir, oldpath, newdir, newpath);
}

SBX_EXPORT int renameat2(int olddir, const char *oldpath, int newdir, const char *newpath,
                         unsigned flags)
{
    TWO_PATHS(renameat2, SBX_OP_RENAME, olddir, oldpath, false, newdir, newpath,
              olddir, oldpath, newdir, newpath, flags);
}

SBX_EXPORT int link(const char *oldpath, const char *newpath)
{
    TWO_PATHS(link, SBX_OP_LINK, AT_FDCWD, oldpath, false, AT_FDCWD, newpath,
              oldpath, newpath);
}

/* linkat(fd, "", dir, name, AT_EMPTY_PATH) gives an open file a name (the
 * O_TMPFILE pattern): the source is judged by the path its fd names. */
SBX_EXPORT int linkat(int olddir, const char *oldpath, int newdir, const char *newpath,
                      int flags)
{
    char buf[GUARD_PATH_MAX];
    int odfd;
    const char *op_ = at_path(olddir, oldpath, flags, buf, sizeof buf, &odfd);
    if (!op_)
        op_ = "/proc/self/fd/(unnamed)";
    TWO_PATHS(linkat, SBX_OP_LINK, odfd, op_, (flags & AT_SYMLINK_FOLLOW) != 0,
              newdir, newpath, olddir, oldpath, newdir, newpath, flags);
}

/* A symlink is judged where it is created; what it points to is judged
 * whenever something opens through it. */
SBX_EXPORT int symlink(const char *target, const char *linkpath)
{
    __typeof__(&symlink) real = REAL(symlink);
    int err = judge_one(SBX_OP_SYMLINK, AT_FDCWD, linkpath, true, target);
    if (err) {
        errno = err;
        return -1;
    }
    return real(target, linkpath);
}

SBX_EXPORT int symlinkat(const char *target, int newdir, const char *linkpath)
{
    __typeof__(&symlinkat) real = REAL(symlinkat);
    int err = judge_one(SBX_OP_SYMLINK, newdir, linkpath, true, target);
    if (err) {
        errno = err;
        return -1;
    }
    return real(target, newdir, linkpath);
}

SBX_EXPORT int chmod(const char *path, mode_t mode)
{
    ONE_PATH(chmod, SBX_OP_CHMOD, AT_FDCWD, path, false, path, mode);
}

SBX_EXPORT int lchmod(const char *path, mode_t mode)
{
    ONE_PATH(lchmod, SBX_OP_CHMOD, AT_FDCWD, path, true, path, mode);
}

SBX_EXPORT int fchmodat(int dirfd, const char *path, mode_t mode, int flags)
{
    char buf[GUARD_PATH_MAX];
    int dfd;
    const char *p = at_path(dirfd, path, flags, buf, sizeof buf, &dfd);
    if (!p)
        return REAL(fchmodat)(dirfd, path, mode, flags);
    ONE_PATH(fchmodat, SBX_OP_CHMOD, dfd, p, (flags & AT_SYMLINK_NOFOLLOW) != 0,
             dirfd, path, mode, flags);
}

SBX_EXPORT int chown(const char *path, uid_t uid, gid_t gid)
{
    ONE_PATH(chown, SBX_OP_CHOWN, AT_FDCWD, path, false, path, uid, gid);
}

SBX_EXPORT int lchown(const char *path, uid_t uid, gid_t gid)
{
    ONE_PATH(lchown, SBX_OP_CHOWN, AT_FDCWD, path, true, path, uid, gid);
}

SBX_EXPORT int fchownat(int dirfd, const char *path, uid_t uid, gid_t gid, int flags)
{
    char buf[GUARD_PATH_MAX];
    int dfd;
    const char *p = at_path(dirfd, path, flags, buf, sizeof buf, &dfd);
    if (!p)
        return REAL(fchownat)(dirfd, path, uid, gid, flags);
    ONE_PATH(fchownat, SBX_OP_CHOWN, dfd, p, (flags & AT_SYMLINK_NOFOLLOW) != 0,
             dirfd, path, uid, gid, flags);
}

/* utimensat with a NULL path is futimens (an open file): not a path call. */
SBX_EXPORT int utimensat(int dirfd, const char *path, const struct timespec times[2],
                         int flags)
{
    if (!guard_opaque(path))
        return REAL(utimensat)(dirfd, path, times, flags);
    char buf[GUARD_PATH_MAX];
    int dfd;
    const char *p = at_path(dirfd, path, flags, buf, sizeof buf, &dfd);
    if (!p)
        return REAL(utimensat)(dirfd, path, times, flags);
    ONE_PATH(utimensat, SBX_OP_UTIMES, dfd, p, (flags & AT_SYMLINK_NOFOLLOW) != 0,
             dirfd, path, times, flags);
}

SBX_EXPORT int utimes(const char *path, const struct timeval tv[2])
{
    ONE_PATH(utimes, SBX_OP_UTIMES, AT_FDCWD, path, false, path, tv);
}

SBX_EXPORT int lutimes(const char *path, const struct timeval tv[2])
{
    ONE_PATH(lutimes, SBX_OP_UTIMES, AT_FDCWD, path, true, path, tv);
}

SBX_EXPORT int futimesat(int dirfd, const char *path, const struct timeval tv[2])
{
    if (!path)
        return REAL(futimesat)(dirfd, path, tv);
    ONE_PATH(futimesat, SBX_OP_UTIMES, dirfd, path, false, dirfd, path, tv);
}

SBX_EXPORT int utime(const char *path, const struct utimbuf *times)
{
    ONE_PATH(utime, SBX_OP_UTIMES, AT_FDCWD, path, false, path, times);
}

/* ---- write-size limit ---------------------------------------------------- */

/* RLIMIT_FSIZE (set by sbx-guard) makes the kernel refuse writes past
 * max_write_bytes; a truncate or fallocate to a larger size would still
 * grow the file, so those are refused here.  0, or EFBIG after recording. */
static int size_check(const char *path, int fd, off_t len)
{
    if (!guard_enter())
        return 0;
    /* After guard_enter: the policy (and its limit) loads at the first
     * guarded call. */
    if (!guard_max_write || len < 0 || (uint64_t)len <= guard_max_write) {
        guard_leave();
        return 0;
    }
    int saved = errno;
    char buf[GUARD_PATH_MAX], reason[160];
    if (!path)
        path = guard_fd_path(fd, buf, sizeof buf) == 0 ? buf : "(unknown file)";
    struct sbuf s;
    sbuf_init(&s, reason, sizeof reason);
    sbuf_add(&s, "length ");
    sbuf_add_uint(&s, (unsigned long)len);
    sbuf_add(&s, " is above files.max_write_bytes (");
    sbuf_add_uint(&s, (unsigned long)guard_max_write);
    sbuf_add(&s, ")");
    char abs[GUARD_PATH_MAX];
    if (path[0] != '/' && guard_lexical(AT_FDCWD, path, abs, sizeof abs) == 0)
        path = abs;
    int err = guard_record_plain(SBX_OP_TRUNCATE, SBX_DENY, path, NULL, EFBIG, reason);
    guard_leave();
    errno = saved;
    return err;
}

#define TRUNCATE_PATH(name)                                            \
    do {                                                               \
        __typeof__(&(name)) real = REAL(name);                         \
        int err_ = size_check(path, -1, len);                          \
        if (err_) {                                                    \
            errno = err_;                                              \
            return -1;                                                 \
        }                                                              \
        err_ = judge_one(SBX_OP_TRUNCATE, AT_FDCWD, path, false, NULL); \
        if (err_) {                                                    \
            errno = err_;                                              \
            return -1;                                                 \
        }                                                              \
        return real(path, len);                                        \
    } while (0)

SBX_EXPORT int truncate(const char *path, off_t len)
{
    TRUNCATE_PATH(truncate);
}

SBX_EXPORT int truncate64(const char *path, off64_t len)
{
    TRUNCATE_PATH(truncate64);
}

SBX_EXPORT int ftruncate(int fd, off_t len)
{
    int err = size_check(NULL, fd, len);
    if (err) {
        errno = err;
        return -1;
    }
    return REAL(ftruncate)(fd, len);
}

SBX_EXPORT int ftruncate64(int fd, off64_t len)
{
    int err = size_check(NULL, fd, len);
    if (err) {
        errno = err;
        return -1;
    }
    return REAL(ftruncate64)(fd, len);
}

/* Only the modes that can grow the file count. */
static off_t falloc_end(int mode, off_t off, off_t len)
{
    if (mode & (FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE))
        return 0;
    if (off < 0 || len < 0 || off > INT64_MAX - len)
        return 0;
    return off + len;
}

SBX_EXPORT int fallocate(int fd, int mode, off_t off, off_t len)
{
    int err = size_check(NULL, fd, falloc_end(mode, off, len));
    if (err) {
        errno = err;
        return -1;
    }
    return REAL(fallocate)(fd, mode, off, len);
}

SBX_EXPORT int fallocate64(int fd, int mode, off64_t off, off64_t len)
{
    int err = size_check(NULL, fd, falloc_end(mode, off, len));
    if (err) {
        errno = err;
        return -1;
    }
    return REAL(fallocate64)(fd, mode, off, len);
}

/* posix_fallocate returns the error instead of setting errno. */
SBX_EXPORT int posix_fallocate(int fd, off_t off, off_t len)
{
    int err = size_check(NULL, fd, falloc_end(0, off, len));
    if (err)
        return err;
    return REAL(posix_fallocate)(fd, off, len);
}

SBX_EXPORT int posix_fallocate64(int fd, off64_t off, off64_t len)
{
    int err = size_check(NULL, fd, falloc_end(0, off, len));
    if (err)
        return err;
    return REAL(posix_fallocate64)(fd, off, len);
}
