/*
 * path.c — turning what a program passed into the absolute path the policy
 * judges, without allocating.
 *
 * Two ways: lexical (fold ".", "..", "//" against the current directory or
 * the directory a dirfd names; one system call at most) and resolved
 * (policy_path_resolve: symlinks followed, one system call per component).
 * The lexical path is the real one exactly when no symlink lies on the way;
 * file.c checks that for free with openat2(RESOLVE_NO_SYMLINKS), the other
 * calls resolve every time (guard_judge_path).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>

#include "guard.h"

/* Appends the components of P to OUT[0..*LEN), folding as it goes. */
static int fold_into(char *out, size_t outsz, size_t *len, const char *p)
{
    while (*p) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        const char *c = p;
        while (*p && *p != '/')
            p++;
        size_t n = (size_t)(p - c);
        if (n == 1 && c[0] == '.')
            continue;
        if (n == 2 && c[0] == '.' && c[1] == '.') {
            while (*len > 0 && out[*len - 1] != '/')
                (*len)--;
            if (*len > 0)
                (*len)--;
            continue;
        }
        if (*len + 1 + n >= outsz) {
            errno = ENAMETOOLONG;
            return -1;
        }
        out[(*len)++] = '/';
        memcpy(out + *len, c, n);
        *len += n;
    }
    return 0;
}

int guard_fold(const char *base, const char *path, char *out, size_t outsz)
{
    size_t len = 0;
    if (outsz < 2) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (path[0] != '/' && base && fold_into(out, outsz, &len, base) < 0)
        return -1;
    if (fold_into(out, outsz, &len, path) < 0)
        return -1;
    if (len == 0)
        out[len++] = '/';
    out[len] = '\0';
    return 0;
}

/* "/proc/self/fd/N" into BUF. */
static void proc_fd_name(int fd, char *buf, size_t size)
{
    struct sbuf s;
    sbuf_init(&s, buf, size);
    sbuf_add(&s, "/proc/self/fd/");
    sbuf_add_uint(&s, (unsigned long)fd);
}

int guard_fd_path(int fd, char *out, size_t outsz)
{
    char name[40];
    if (fd < 0) {
        errno = EBADF;
        return -1;
    }
    proc_fd_name(fd, name, sizeof name);
    long n = guard_sys(SYS_readlinkat, AT_FDCWD, (long)name, (long)out, (long)outsz - 1, 0, 0);
    if (n < 0) {
        if (errno == ENOENT)    /* no such descriptor: what the kernel says */
            errno = EBADF;
        return -1;
    }
    if ((size_t)n >= outsz - 1) {
        errno = ENAMETOOLONG;
        return -1;
    }
    out[n] = '\0';
    return 0;
}

int guard_dirfd_path(int dirfd, char *out, size_t outsz)
{
    if (dirfd == AT_FDCWD) {
        long n = guard_sys(SYS_getcwd, (long)out, (long)outsz, 0, 0, 0, 0);
        if (n < 0)
            return -1;
        if (out[0] != '/') {    /* "(unreachable)": outside our root */
            errno = ENOENT;
            return -1;
        }
        return 0;
    }
    if (guard_fd_path(dirfd, out, outsz) < 0)
        return -1;
    if (out[0] != '/') {        /* a pipe, a socket, an anonymous inode */
        errno = ENOTDIR;
        return -1;
    }
    size_t n = strlen(out);
    static const char deleted[] = " (deleted)";
    if (n >= sizeof deleted && strcmp(out + n - (sizeof deleted - 1), deleted) == 0) {
        errno = ENOENT;
        return -1;
    }
    return 0;
}

int guard_lexical(int dirfd, const char *path, char *out, size_t outsz)
{
    if (!path) {
        errno = EFAULT;
        return -1;
    }
    if (!path[0]) {
        errno = ENOENT;
        return -1;
    }
    if (path[0] == '/')
        return guard_fold(NULL, path, out, outsz);
    char base[GUARD_PATH_MAX];
    if (guard_dirfd_path(dirfd, base, sizeof base) < 0)
        return -1;
    return guard_fold(base, path, out, outsz);
}

int guard_resolve(int dirfd, const char *path, bool nofollow, char *out, size_t outsz)
{
    char base[GUARD_PATH_MAX] = "/";
    if (path[0] != '/' && guard_dirfd_path(dirfd, base, sizeof base) < 0)
        return -1;
    return policy_path_resolve(base, path, nofollow, out, outsz);
}

bool guard_verdict_final(const struct guard_verdict *gv)
{
    const struct policy_rule *r = gv->v.rule;
    if (gv->v.decision == SBX_ALLOW && !gv->v.audit)
        return true;
    /* "No allow rule matches" says nothing yet: the policy resolves the
     * roots of its rules (the root of "/lib/..." is /usr/lib on a merged-/usr
     * system), so only the resolved path can be matched against them. */
    return !r || !(r->list == POLICY_READ_ALLOW || r->list == POLICY_WRITE_ALLOW ||
                   r->list == POLICY_EXEC_ALLOW);
}

int guard_judge_path(enum sbx_op op, int dirfd, const char *path, bool nofollow,
                     bool also_read, struct guard_judged *j)
{
    j->note[0] = '\0';
    if (guard_lexical(dirfd, path, j->lex, sizeof j->lex) < 0)
        return errno;
    bool allowed = guard_decide_path(op, j->lex, also_read, &j->gv) == SBX_ALLOW &&
                   !j->gv.v.audit;
    /* An explicit deny of the name the program used stands, whatever the
     * name points to ("**" + "/.env" catches a symlink named .env). */
    if (!guard_policy || (!allowed && guard_verdict_final(&j->gv)))
        return 0;
    if (guard_resolve(dirfd, path, nofollow, j->res, sizeof j->res) < 0)
        return errno;
    if (strcmp(j->res, j->lex) == 0)
        return 0;
    /* The path the kernel will reach decides. */
    guard_decide_path(op, j->res, also_read, &j->gv);
    struct sbuf s;
    sbuf_init(&s, j->note, sizeof j->note);
    sbuf_add(&s, "through a symlink from ");
    sbuf_add(&s, j->lex);
    return 0;
}

int guard_path_op(enum sbx_op op, int dirfd, const char *path, bool nofollow,
                  bool also_read, const char *target2)
{
    struct guard_judged j;
    int err = guard_judge_path(op, dirfd, path, nofollow, also_read, &j);
    if (err)
        return err;
    return guard_record(&j.gv, target2, 0, j.note);
}
