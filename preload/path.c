/*
 * path.c — turning what a program passed into the absolute path the policy
 * judges, without allocating.
 *
 * Two ways: lexical (fold ".", "..", "//" against the current directory or
 * the directory a dirfd names; one system call at most) and resolved
 * (policy_path_resolve: symlinks followed, one system call per component).
 * What folding and resolving mean is policy/path.h's, shared with the
 * supervisor and the tools; this file only finds the base a call is
 * relative to (getcwd, a dirfd) and walks PATH without libc's help.
 * The lexical path is the real one exactly when no symlink lies on the way;
 * file.c checks that for free with openat2(RESOLVE_NO_SYMLINKS), the other
 * calls resolve every time (guard_judge_path).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "guard.h"

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

/* ---- the current directory, remembered for a moment ----------------------
 *
 * A relative path is judged as the current directory plus the path, and
 * getcwd(2) is a system call: about a quarter of what the guard adds to an
 * open.  So each thread remembers the directory it last asked for, until
 * the coarse monotonic clock has moved on by CWD_TTL_NS (at most one tick
 * of it, 1-4 ms), and forgets it at once when this process changes it:
 * chdir, fchdir, chroot and setns (through libc or syscall()) and rename
 * (a directory above the current one may have moved) bump `cwd_gen`, which
 * every remembered entry must match.  What only a bounded memory covers,
 * and why that is acceptable:
 *  - another process renames a directory above ours: judged on the old
 *    name for at most one clock tick (4 ms with Debian's HZ=250).  getcwd-then-open has the same race, only
 *    narrower; and a rename the guard lets through cannot make the current
 *    directory's contents protected (both ends of a rename are judged, the
 *    source also for reading);
 *  - the program changes directory with its own system call instruction:
 *    that program is past the guard anyway (the kernel layer's business).
 * Where this process may change directory out of our sight, the memory is
 * switched off for good (`cwd_off`): a vfork child or a clone(CLONE_VM)
 * child shares our memory but not necessarily our directory, and nftw and
 * fts change directory with libc's internal calls.
 *
 * Per thread, because threads can have their own directory (unshare
 * CLONE_FS) and so no lock is shared.  A signal handler on the same thread
 * may interrupt a read or a write: `ver` is odd while an entry is written
 * and changes with every write, so a read that overlapped a write is
 * thrown away and a write is never nested in another. */
#define CWD_TTL_NS 1000000ull           /* 1 ms: the next tick, at most 4 ms */
#define CWD_MEMO_MAX 1024               /* longer directories: asked every time */

static _Atomic unsigned long cwd_gen = 1;
static atomic_bool cwd_off;

struct cwd_memo {
    _Atomic unsigned ver;
    unsigned long gen;                  /* cwd_gen when it was asked; 0: none */
    unsigned long long born;            /* CLOCK_MONOTONIC_COARSE ns, before asking */
    size_t len;
    char path[CWD_MEMO_MAX];
};
static __thread struct cwd_memo cwd_memo __attribute__((tls_model("initial-exec")));

void guard_cwd_changed(void)
{
    atomic_fetch_add(&cwd_gen, 1);
}

void guard_cwd_memo_off(void)
{
    atomic_store(&cwd_off, true);
    /* policy/path.c's remembered directories stay: they are absolute, and
     * each is checked by its (dev, ino) before use, which a child sharing
     * our memory cannot change for us; a new root or namespace (chroot,
     * setns, pivot_root) empties them for both (cwd.c). */
}

/* The coarse clock: a read of the vDSO's last tick, ~8 ns against ~36 ns
 * for CLOCK_MONOTONIC on the virtual machines we measured, on every
 * relative open.  Its resolution is the kernel's tick (1-4 ms). */
static unsigned long long mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static bool cwd_recall(char *out, size_t outsz)
{
    struct cwd_memo *m = &cwd_memo;
    if (atomic_load_explicit(&cwd_off, memory_order_relaxed))
        return false;
    unsigned v = atomic_load_explicit(&m->ver, memory_order_relaxed);
    if (v & 1u)
        return false;
    atomic_signal_fence(memory_order_acquire);
    size_t n = m->len;
    if (m->gen != atomic_load(&cwd_gen) || n == 0 || n >= outsz || n >= CWD_MEMO_MAX ||
        mono_ns() - m->born >= CWD_TTL_NS)
        return false;
    memcpy(out, m->path, n);
    out[n] = '\0';
    atomic_signal_fence(memory_order_acquire);
    return atomic_load_explicit(&m->ver, memory_order_relaxed) == v;
}

static void cwd_remember(const char *path, unsigned long gen, unsigned long long born)
{
    struct cwd_memo *m = &cwd_memo;
    size_t n = strlen(path);
    if (n >= CWD_MEMO_MAX || atomic_load_explicit(&cwd_off, memory_order_relaxed))
        return;
    unsigned v = atomic_load_explicit(&m->ver, memory_order_relaxed);
    if ((v & 1u) || !atomic_compare_exchange_strong(&m->ver, &v, v + 1))
        return;
    atomic_signal_fence(memory_order_release);
    memcpy(m->path, path, n);
    m->len = n;
    m->born = born;
    m->gen = gen;
    atomic_signal_fence(memory_order_release);
    atomic_store_explicit(&m->ver, v + 2, memory_order_relaxed);
}

int guard_dirfd_path(int dirfd, char *out, size_t outsz)
{
    if (dirfd == AT_FDCWD) {
        if (cwd_recall(out, outsz))
            return 0;
        /* The generation and the time are taken before asking: a change
         * made while we ask leaves an entry that is already out of date. */
        unsigned long gen = atomic_load(&cwd_gen);
        unsigned long long born = mono_ns();
        long n = guard_sys(SYS_getcwd, (long)out, (long)outsz, 0, 0, 0, 0);
        if (n < 0)
            return -1;
        if (out[0] != '/') {    /* "(unreachable)": outside our root */
            errno = ENOENT;
            return -1;
        }
        cwd_remember(out, gen, born);
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
        return policy_path_lexical(NULL, path, out, outsz);
    /* The base comes from the kernel (getcwd, or the link of a dirfd), so
     * it is absolute and already folded: it goes into OUT as it is, and
     * only the program's part is folded onto it. */
    if (guard_dirfd_path(dirfd, out, outsz) < 0)
        return -1;
    return policy_path_fold_onto(out, outsz, strlen(out), path);
}

int guard_resolve(int dirfd, const char *path, bool nofollow, char *out, size_t outsz)
{
    char base[GUARD_PATH_MAX] = "/";
    if (path[0] != '/' && guard_dirfd_path(dirfd, base, sizeof base) < 0)
        return -1;
    return policy_path_resolve(base, path, nofollow, out, outsz);
}

int guard_probe_exec(const char *candidate)
{
    struct stat st;
    if (guard_raw(SYS_newfstatat, AT_FDCWD, (long)candidate, (long)&st, 0, 0, 0) != 0)
        return ENOENT;
    if (!S_ISREG(st.st_mode) || guard_raw(SYS_faccessat, AT_FDCWD, (long)candidate, X_OK, 0, 0, 0))
        return EACCES;
    return 0;
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
        return errno == ENAMETOOLONG ? guard_record_toolong(op, path) : errno;
    bool allowed = guard_decide_path(op, j->lex, also_read, &j->gv) == SBX_ALLOW &&
                   !j->gv.v.audit;
    /* An explicit deny of the name the program used stands, whatever the
     * name points to ("**" + "/.env" catches a symlink named .env). */
    if (!guard_policy || (!allowed && guard_verdict_final(&j->gv)))
        return 0;
    if (guard_resolve(dirfd, path, nofollow, j->res, sizeof j->res) < 0)
        return errno == ENAMETOOLONG ? guard_record_toolong(op, path) : errno;
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
