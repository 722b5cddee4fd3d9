/*
 * supervise_open.c — the supervisor's answer to opens (ISO_NOTIFY_OPEN).
 *
 * The mounts cover the deny-read files that exist at start (cover.c).  A
 * file created later under a deny-read name (a .env written by a tool the
 * agent runs, or copied in by another process of the user) has no cover,
 * and a static program, which the guard never sees, could read it.  With
 * opens notified, every open, openat, openat2 and creat of the agent stops
 * in the kernel until this code answers.
 *
 * An open that can read is done here, not by the kernel on the agent's
 * behalf: the path is opened in the agent's view (openat2 with
 * RESOLVE_IN_ROOT below /proc/PID/root: its mounts, its covers, its
 * private /tmp, its symlinks), the file actually opened is judged by its
 * real name (readlink of our own /proc/self/fd/N) and inode, and only then
 * is the descriptor handed in with SECCOMP_IOCTL_NOTIF_ADDFD (with
 * SECCOMP_ADDFD_FLAG_SEND, which is the answer).  The name judged is the
 * name of the file opened: neither a symlink swapped nor a path rewritten
 * in memory by another thread can make the agent read a file that was not
 * judged.  "Carry on" (SECCOMP_USER_NOTIF_FLAG_CONTINUE) is answered only
 * where the decision rests on the call's registers, which nothing can
 * change: O_PATH and write-only open, openat and creat (they cannot read).
 *
 * The opener must not have more than the agent: sbx-guard is outside the
 * agent's Landlock domain.  What else bounds the agent holds here too: the
 * walk is through the agent's own mounts (read-only binds, covers, hidden
 * directories), as the same user.  Landlock is applied again by name: the
 * real path must lie under a rule of the plan the agent was given
 * (iso_landlock_plan, canonicalised in the agent's view) with the rights
 * the open needs, or the answer is EACCES, as Landlock would answer.
 *
 * Judged: files.read.deny for an open that can read, files.write.deny for
 * one that can write, another name (hard link made before start) of a
 * deny-read file, sbx's hidden directories.  Not the allow lists: what
 * they mean is Landlock's (re-checked above), and judging them again by
 * glob would refuse what the kernel layer has always let through.
 *
 * Where our open must differ from the agent's own (docs/isolation.md):
 * /proc/self is the caller (rewritten to its pid in its own namespace);
 * /proc/PID/fd/N is reopened through our /proc/TID/root; a file created
 * gets the agent's umask (read from /proc/TID/status); a terminal opened
 * never becomes the caller's controlling terminal; a FIFO opened for
 * reading does not wait for a writer.
 */
#include "iso_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/landlock.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bsd/string.h>

/* Deny-read files that had other names at start (cover.c): an open of any
 * of their names is refused. */
static struct iso_inode *deny_links;
static size_t n_deny_links;

int iso_supervise_deny_inodes(const struct iso_inode *links, size_t n)
{
    struct iso_inode *copy = NULL;

    if (n && (copy = reallocarray(NULL, n, sizeof *copy)) == NULL)
        return -1;
    if (n)
        memcpy(copy, links, n * sizeof *copy);
    free(deny_links);
    deny_links = copy;
    n_deny_links = n;
    return 0;
}

/* Is ST one of the deny-read files' other names? */
static bool is_deny_link(const struct stat *st)
{
    for (size_t i = 0; i < n_deny_links; i++)
        if (deny_links[i].dev == st->st_dev && deny_links[i].ino == st->st_ino)
            return true;
    return false;
}

/* ---- what the agent was given: Landlock's rules and the hidden dirs --- */

#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#define LL_FILE_RIGHTS (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | \
                        LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE | \
                        LANDLOCK_ACCESS_FS_IOCTL_DEV)

struct ll_rule {
    char *path;                 /* as planned, then canonical in the agent's view */
    uint64_t access;
    bool dir;                   /* a file rule grants its own path only */
};
static struct ll_rule *ll_rules;
static size_t n_ll_rules;
static uint64_t ll_handled;
static bool ll_canonical;       /* paths resolved in the agent's view yet */
static int agent_root = -1;     /* O_PATH of the agent's root, once seen */
static char (*hides)[4096];
static size_t n_hides;
static char (*keeps)[4096];     /* reachable inside a hidden directory */
static size_t n_keeps;

int iso_supervise_plan(const struct iso_landlock *ll, const struct iso_mounts *mp)
{
    for (size_t i = 0; i < n_ll_rules; i++)
        free(ll_rules[i].path);
    free(ll_rules);
    free(hides);
    free(keeps);
    ll_rules = NULL;
    hides = keeps = NULL;
    n_ll_rules = n_hides = n_keeps = 0;
    ll_handled = ll && ll->abi > 0 ? ll->handled_fs : 0;
    ll_canonical = false;
    if (agent_root >= 0)
        close(agent_root);
    agent_root = -1;
    if (ll_handled && ll->n_rules) {
        if ((ll_rules = calloc(ll->n_rules, sizeof *ll_rules)) == NULL)
            return -1;
        for (size_t i = 0; i < ll->n_rules; i++, n_ll_rules++) {
            if ((ll_rules[i].path = strdup(ll->rules[i].path)) == NULL)
                return -1;
            ll_rules[i].access = ll->rules[i].access;
            ll_rules[i].dir = true;
        }
    }
    if (mp && mp->n_hide) {
        if ((hides = reallocarray(NULL, mp->n_hide, sizeof *hides)) == NULL)
            return -1;
        for (size_t i = 0; i < mp->n_hide; i++)
            strlcpy(hides[i], mp->hide[i], sizeof hides[i]);
        n_hides = mp->n_hide;
    }
    if (mp && mp->n_keep) {
        if ((keeps = reallocarray(NULL, mp->n_keep, sizeof *keeps)) == NULL)
            return -1;
        for (size_t i = 0; i < mp->n_keep; i++)
            strlcpy(keeps[i], mp->keep[i], sizeof keeps[i]);
        n_keeps = mp->n_keep;
    }
    return 0;
}

/* The name of our own descriptor FD: d_path in the view of the mount
 * namespace the file lives in, which for the agent's files is the agent's
 * view (its root is its namespace's root).  " (deleted)" is cut off. */
static int fd_name(int fd, char *out, size_t outsz)
{
    char p[64];
    ssize_t n;

    snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
    if ((n = readlink(p, out, outsz - 1)) < 0)
        return -1;
    out[n] = '\0';
    if ((size_t)n > 10 && strcmp(out + n - 10, " (deleted)") == 0)
        out[n - 10] = '\0';
    return 0;
}

/* Landlock's rules were added in the sandbox's view with open(O_PATH),
 * which follows symlinks (/bin -> usr/bin): name them as the kernel does,
 * once, through the agent's root.  A rule on a path that is not there
 * allows nothing (landlock.c skips it too). */
static void canonicalise_rules(int root)
{
    struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT };
    char real[PATH_MAX];

    ll_canonical = true;
    for (size_t i = 0; i < n_ll_rules; i++) {
        struct stat st;
        int fd = (int)syscall(SYS_openat2, root, ll_rules[i].path, &how, sizeof how);
        if (fd < 0) {
            ll_rules[i].access = 0;
            continue;
        }
        if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) {
            ll_rules[i].dir = false;
            ll_rules[i].access &= LL_FILE_RIGHTS;
        }
        if (fd_name(fd, real, sizeof real) == 0 && real[0] == '/') {
            char *c = strdup(real);
            if (c) {
                free(ll_rules[i].path);
                ll_rules[i].path = c;
            }
        }
        close(fd);
    }
}

/* Would the agent's Landlock domain give NEED on the file named REAL? */
static bool landlock_allows(const char *real, uint64_t need)
{
    uint64_t have = 0;

    need &= ll_handled;
    if (need == 0)
        return true;
    for (size_t i = 0; i < n_ll_rules; i++)
        if (ll_rules[i].dir ? policy_path_under(real, ll_rules[i].path)
                            : strcmp(real, ll_rules[i].path) == 0)
            have |= ll_rules[i].access;
    return (have & need) == need;
}

static bool is_hidden(const char *real)
{
    for (size_t i = 0; i < n_keeps; i++)
        if (policy_path_under(real, keeps[i]))
            return false;
    for (size_t i = 0; i < n_hides; i++)
        if (policy_path_under(real, hides[i]))
            return true;
    return false;
}

/* ---- the caller ------------------------------------------------------- */

struct caller {
    pid_t tid;                  /* in our namespace (the notification's) */
    long ns_tgid, ns_tid;       /* in its own pid namespace; 0 until read */
    int umask;                  /* -1 until read */
    int root;                   /* O_PATH of /proc/TID/root */
};

/* NStgid, NSpid and Umask from /proc/TID/status. */
static void read_status(struct caller *c)
{
    char p[64], line[256];
    FILE *f;

    if (c->ns_tgid)
        return;
    c->ns_tgid = c->ns_tid = -1;
    snprintf(p, sizeof p, "/proc/%d/status", (int)c->tid);
    if ((f = fopen(p, "re")) == NULL)
        return;
    while (fgets(line, sizeof line, f)) {
        long *into = strncmp(line, "NStgid:", 7) == 0 ? &c->ns_tgid
                   : strncmp(line, "NSpid:", 6) == 0 ? &c->ns_tid : NULL;
        if (strncmp(line, "Umask:", 6) == 0) {
            char *end;
            long u = strtol(line + 6, &end, 8);
            if (end != line + 6 && u >= 0 && u <= 0777)
                c->umask = (int)u;
        }
        if (into == NULL)
            continue;
        /* the last number: the namespace the process itself is in */
        for (char *s = strchr(line, ':') + 1, *end;; s = end) {
            long x = strtol(s, &end, 10);
            if (end == s)
                break;
            *into = x;
        }
    }
    fclose(f);
}

/* "/proc/self" and "/proc/thread-self" at the head of PATH: the caller's
 * own directory in its /proc (ours would be sbx-guard, which its /proc
 * does not show).  Rewritten in place. */
static int rewrite_self(struct caller *c, char *path, size_t size)
{
    char tmp[PATH_MAX * 2];
    const char *rest;
    int n;

    if (strncmp(path, "/proc/self", 10) == 0 && (path[10] == '/' || path[10] == '\0'))
        rest = path + 10;
    else if (strncmp(path, "/proc/thread-self", 17) == 0
             && (path[17] == '/' || path[17] == '\0'))
        rest = path + 17;
    else
        return 0;
    read_status(c);
    if (c->ns_tgid <= 0 || c->ns_tid <= 0) {
        errno = ENOENT;
        return -1;
    }
    if (rest == path + 10)
        n = snprintf(tmp, sizeof tmp, "/proc/%ld%s", c->ns_tgid, rest);
    else
        n = snprintf(tmp, sizeof tmp, "/proc/%ld/task/%ld%s", c->ns_tgid, c->ns_tid, rest);
    if (n < 0 || (size_t)n >= size) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(path, tmp, (size_t)n + 1);
    return 0;
}

/* The caller's path made absolute against its cwd or DIRFD, by text (the
 * kernel folds ".." as it walks; so does openat2). */
static int absolute(const struct caller *c, int dirfd, const char *path, char *out,
                    size_t outsz)
{
    char base[PATH_MAX], what[32];

    if (path[0] == '/') {
        if (strlcpy(out, path, outsz) >= outsz) {
            errno = ENAMETOOLONG;
            return -1;
        }
        return 0;
    }
    if (dirfd == AT_FDCWD)
        strlcpy(what, "cwd", sizeof what);
    else if (dirfd < 0) {
        errno = EBADF;
        return -1;
    } else
        snprintf(what, sizeof what, "fd/%d", dirfd);
    if (iso_sup_proc_link(c->tid, what, base, sizeof base) < 0) {
        errno = EBADF;
        return -1;
    }
    if (base[0] != '/') {       /* a pipe, a socket: not a directory */
        errno = ENOTDIR;
        return -1;
    }
    if (snprintf(out, outsz, "%s/%s", strcmp(base, "/") == 0 ? "" : base, path) >= (int)outsz) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

/* Is PATH "/proc/N/fd/K" or "/proc/N/task/T/fd/K" (a descriptor of a
 * process of the agent, as its /proc names it)? */
static bool is_fd_link(const char *path)
{
    const char *s = path;
    if (strncmp(s, "/proc/", 6) != 0)
        return false;
    s += 6;
    for (int part = 0; part < 2; part++) {
        if (*s < '0' || *s > '9')
            return false;
        while (*s >= '0' && *s <= '9')
            s++;
        if (strncmp(s, "/fd/", 4) == 0) {
            s += 4;
            if (*s < '0' || *s > '9')
                return false;
            while (*s >= '0' && *s <= '9')
                s++;
            return *s == '\0';
        }
        if (part == 0 && strncmp(s, "/task/", 6) == 0)
            s += 6;
        else
            return false;
    }
    return false;
}

/* ---- opening as the agent --------------------------------------------- */

#define OPEN_ATTEMPTS 4

/* ENOENT, and ABS's directory is there and its last name is not: the
 * common case (a search along a path), told apart in two system calls
 * from a symlink into the caller's /proc/self that we cannot walk. */
static bool plainly_missing(const struct caller *c, const char *abs)
{
    struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT };
    char dir[PATH_MAX];
    const char *slash = strrchr(abs, '/');
    struct stat st;
    bool missing;
    int dfd;

    if (slash == NULL || (size_t)(slash - abs) >= sizeof dir || slash[1] == '\0'
        || strcmp(slash + 1, ".") == 0 || strcmp(slash + 1, "..") == 0)
        return false;
    memcpy(dir, abs, (size_t)(slash - abs));
    dir[slash - abs] = '\0';
    dfd = (int)syscall(SYS_openat2, c->root, dir[0] ? dir : "/", &how, sizeof how);
    if (dfd < 0)
        return false;
    missing = fstatat(dfd, slash + 1, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT;
    close(dfd);
    return missing;
}

/* Opens ABS in the caller's view with FLAGS and RESOLVE.  Magic links
 * (/proc/N/fd/K, /proc/N/cwd, ...) are not followed by RESOLVE_IN_ROOT:
 * where the walk meets one (EXDEV) or a /proc/self it cannot see (ENOENT),
 * the path is resolved as the caller sees it, and a descriptor link is
 * reopened through our /proc/TID/root/proc/N/fd/K, the only magic link we
 * follow.  A descriptor, or -1 with errno (the agent's answer). */
static int open_in_view(struct caller *c, char *abs, size_t abssz, uint64_t flags,
                        uint64_t resolve, mode_t mode)
{
    struct open_how how = { .flags = flags, .mode = mode, .resolve = resolve | RESOLVE_IN_ROOT };
    bool tried_view = false, tried_proc = false;

    for (int attempt = 0; attempt < OPEN_ATTEMPTS; attempt++) {
        char view[48], r[PATH_MAX], host[PATH_MAX + 64];
        int fd, e;

        if (rewrite_self(c, abs, abssz) < 0)
            return -1;
        if (is_fd_link(abs)) {
            if (resolve & (RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH)) {
                errno = ELOOP;
                return -1;
            }
            if (snprintf(host, sizeof host, "/proc/%d/root%s", (int)c->tid, abs)
                >= (int)sizeof host) {
                errno = ENAMETOOLONG;
                return -1;
            }
            return open(host, (int)(flags & ~(uint64_t)O_CREAT), mode);
        }
        fd = (int)syscall(SYS_openat2, c->root, abs, &how, sizeof how);
        if (fd >= 0)
            return fd;
        e = errno;
        if (e == EAGAIN && !(resolve & RESOLVE_CACHED))
            continue;           /* a rename raced the walk: walk again */
        if (e != EXDEV && e != ENOENT) {
            errno = e == EXDEV ? ELOOP : e;
            return -1;
        }
        /* /proc/mounts -> self/mounts, /proc/net -> self/net: the links
         * of procfs's root name the caller's own directory. */
        if (strncmp(abs, "/proc/", 6) == 0 && !tried_proc) {
            const char *comp = abs + 6, *end = strchr(comp, '/');
            size_t cl = end ? (size_t)(end - comp) : strlen(comp);
            char lp[PATH_MAX], target[256];
            ssize_t tl;
            tried_proc = true;
            if (snprintf(lp, sizeof lp, "/proc/%d/root/proc/%.*s", (int)c->tid, (int)cl, comp)
                < (int)sizeof lp
                && (tl = readlink(lp, target, sizeof target - 1)) > 0) {
                target[tl] = '\0';
                if (target[0] != '/' && strstr(target, "..") == NULL
                    && snprintf(r, sizeof r, "/proc/%s%s", target, end ? end : "") < (int)sizeof r
                    && strlcpy(abs, r, abssz) < abssz)
                    continue;
            }
        }
        /* Through a symlink into /proc (/dev/stdin, /dev/fd/3, /etc/mtab):
         * resolved as the caller sees it, then opened again. */
        if (tried_view || (e == ENOENT && plainly_missing(c, abs))) {
            errno = e == EXDEV ? ELOOP : e;
            return -1;
        }
        tried_view = true;
        snprintf(view, sizeof view, "/proc/%d/root", (int)c->tid);
        struct policy_path_view v = { .root = view, .pid = c->tid };
        if (policy_path_resolve_in(&v, NULL, abs, 0, r, sizeof r) < 0 || strcmp(r, abs) == 0) {
            errno = e == EXDEV ? ELOOP : e;
            return -1;
        }
        if (strlcpy(abs, r, abssz) >= abssz) {
            errno = ENAMETOOLONG;
            return -1;
        }
    }
    errno = EAGAIN;
    return -1;
}

/* Creates the last component of ABS (known not to exist a moment ago)
 * for an open with FLAGS, exclusively: no symlink in its place is
 * followed, so the file opened is the one made now.  Judged before it is
 * made (the name and the directory it lands in).  A descriptor, or -1. */
static int create_in_view(struct caller *c, const char *abs, uint64_t flags, mode_t mode,
                          const struct iso_request *req, struct sbx_event_desc *ev,
                          bool *judged_deny, char *name, size_t namesz)
{
    struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT };
    char dir[PATH_MAX * 2];
    const char *base;
    char *slash;
    int dfd, fd = -1;

    if (strlcpy(dir, abs, sizeof dir) >= sizeof dir || (slash = strrchr(dir, '/')) == NULL) {
        errno = ENAMETOOLONG;
        return -1;
    }
    *slash = '\0';
    base = slash + 1;
    if (base[0] == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
        errno = EISDIR;
        return -1;
    }
    dfd = (int)syscall(SYS_openat2, c->root, dir[0] ? dir : "/", &how, sizeof how);
    if (dfd < 0)
        return -1;
    if (fd_name(dfd, dir, sizeof dir) < 0 || dir[0] != '/'
        || snprintf(name, namesz, "%s/%s", strcmp(dir, "/") == 0 ? "" : dir, base)
           >= (int)namesz) {
        errno = ENAMETOOLONG;
        goto out;
    }
    if (iso_open_judge(req, name, flags, ev)) {
        *judged_deny = true;
        errno = EACCES;
        goto out;
    }
    uint64_t need = LANDLOCK_ACCESS_FS_WRITE_FILE;
    if ((flags & O_ACCMODE) != O_WRONLY)
        need |= LANDLOCK_ACCESS_FS_READ_FILE;
    if ((flags & O_ACCMODE) == O_RDONLY)
        need &= ~(uint64_t)LANDLOCK_ACCESS_FS_WRITE_FILE;
    if (is_hidden(name) || !landlock_allows(dir, LANDLOCK_ACCESS_FS_MAKE_REG)
        || !landlock_allows(name, need)) {
        errno = EACCES;
        goto out;
    }
    /* Made with mode 0 and given the agent's mode & ~umask after: our own
     * umask is not the agent's, and umask() is the whole process's. */
    fd = openat(dfd, base, (int)((flags & ~(uint64_t)O_TRUNC) | O_CREAT | O_EXCL | O_CLOEXEC
                                 | O_NOCTTY | O_NONBLOCK), 0);
    if (fd >= 0) {
        read_status(c);
        if (fchmod(fd, (mode & 07777) & ~(mode_t)(c->umask >= 0 ? c->umask : 022)) < 0) {
            int e = errno;
            close(fd);
            fd = -1;
            errno = e;
        }
    }
out:
    {
        int e = errno;
        close(dfd);
        errno = e;
    }
    return fd;
}

/* ---- judging ---------------------------------------------------------- */

bool iso_open_judge(const struct iso_request *req, const char *name, uint64_t flags,
                    struct sbx_event_desc *ev)
{
    static char rule[512];
    struct policy_verdict v;
    bool reads = (flags & O_ACCMODE) != O_WRONLY && !(flags & O_PATH);
    bool writes = !(flags & O_PATH)
                  && ((flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC)));

    if (reads && policy_decide_path(req->policy, SBX_OP_OPEN_READ, name, &v) == SBX_DENY
        && v.rule && v.rule->list == POLICY_READ_DENY)
        ev->op = SBX_OP_OPEN_READ;
    else if (writes && policy_decide_path(req->policy, SBX_OP_OPEN_WRITE, name, &v) == SBX_DENY
             && v.rule && v.rule->list == POLICY_WRITE_DENY)
        ev->op = SBX_OP_OPEN_WRITE;
    else
        return false;
    ev->decision = SBX_DENY;
    ev->target = name;
    ev->reason = v.reason;
    if (policy_rule_format(v.rule, rule, sizeof rule) == 0)
        ev->rule = rule;
    return true;
}

/* Judges the file FD we opened for FLAGS, by what it is (NAME, ST): 0 to
 * hand it in, else the errno to answer (with *REPORT for a policy
 * denial). */
static int judge_opened(const struct iso_request *req, int fd, const struct stat *st,
                        uint64_t flags, struct sbx_event_desc *ev, bool *report,
                        char *name, size_t namesz)
{
    uint64_t need = 0;

    if (fd_name(fd, name, namesz) < 0)
        return EACCES;
    /* pipe:[..], socket:[..], anon_inode:, a memfd reopened: no name to
     * judge, and Landlock leaves these kernel-internal files alone too. */
    if (name[0] != '/' || strncmp(name, "/memfd:", 7) == 0)
        return 0;
    if (iso_open_judge(req, name, flags, ev)) {
        *report = true;
        return EACCES;
    }
    if (!(flags & O_PATH) && (flags & O_ACCMODE) != O_WRONLY && is_deny_link(st)) {
        ev->op = SBX_OP_OPEN_READ;
        ev->decision = SBX_DENY;
        ev->target = name;
        ev->reason = "another name (hard link) of a file under files.read.deny";
        *report = true;
        return EACCES;
    }
    if (is_hidden(name))
        return EACCES;
    if (!(flags & O_PATH)) {
        if ((flags & O_ACCMODE) != O_WRONLY)
            need |= S_ISDIR(st->st_mode) ? LANDLOCK_ACCESS_FS_READ_DIR
                                         : LANDLOCK_ACCESS_FS_READ_FILE;
        if ((flags & O_ACCMODE) != O_RDONLY)
            need |= LANDLOCK_ACCESS_FS_WRITE_FILE;
        if ((flags & O_TRUNC) && S_ISREG(st->st_mode))
            need |= LANDLOCK_ACCESS_FS_TRUNCATE;
    }
    if (!landlock_allows(name, need))
        return EACCES;
    return 0;
}

/* ---- the answer ------------------------------------------------------- */

int iso_answer_open(const struct iso_request *req, pid_t pid, long nr, const __u64 args[6],
                    struct iso_open_answer *ans, bool *report, struct sbx_event_desc *ev,
                    char *buf, size_t bufsz)
{
    char path[PATH_MAX], abs[PATH_MAX * 2];
    struct caller c = { .tid = pid, .umask = -1, .root = -1 };
    struct open_how how;
    int dirfd = AT_FDCWD, fd = -1, e = 0;
    uint64_t path_p, flags, resolve = 0;
    mode_t mode;
    bool registers = true, created = false;
    struct stat st;

    ans->fd = -1;
    ans->fd_flags = 0;
    ans->err = 0;
    *report = false;
    memset(&how, 0, sizeof how);
    switch (nr) {
    case SYS_open:
        path_p = args[0];
        flags = args[1];
        mode = (mode_t)args[2];
        break;
    case SYS_creat:
        path_p = args[0];
        flags = O_WRONLY | O_CREAT | O_TRUNC;
        mode = (mode_t)args[1];
        break;
    case SYS_openat:
        dirfd = (int)args[0];
        path_p = args[1];
        flags = args[2];
        mode = (mode_t)args[3];
        break;
    case SYS_openat2:
        /* open_how lives in the agent's memory: what we read now may not
         * be what the kernel would read, so nothing is "carried on". */
        registers = false;
        dirfd = (int)args[0];
        path_p = args[1];
        if (args[3] < sizeof how
            || iso_sup_read_mem(pid, args[2], &how, sizeof how) != (ssize_t)sizeof how) {
            ans->err = args[3] < sizeof how ? EINVAL : EFAULT;
            return 0;
        }
        flags = how.flags;
        mode = (mode_t)how.mode;
        resolve = how.resolve;
        break;
    default:
        return 0;
    }
    /* open and openat ignore flags they do not know; openat2 refuses
     * them, and it is what opens here. */
    if (registers)
        flags &= (uint64_t)(O_ACCMODE | O_CREAT | O_EXCL | O_NOCTTY | O_TRUNC | O_APPEND
                            | O_NONBLOCK | O_DSYNC | FASYNC | O_DIRECT | O_LARGEFILE
                            | O_DIRECTORY | O_NOFOLLOW | O_NOATIME | O_CLOEXEC | O_PATH
                            | __O_TMPFILE | O_SYNC);

    /* Cannot read: decided on the registers alone.  files.write.deny is
     * judged on the path as read (a race can still write one created
     * after start; docs/isolation.md), files.read.deny needs nothing. */
    if (registers && ((flags & O_PATH) || (flags & O_ACCMODE) == O_WRONLY)) {
        if (flags & O_PATH)
            return 0;
        if (iso_sup_read_str(pid, path_p, path, sizeof path) < 0 || path[0] == '\0'
            || absolute(&c, dirfd, path, abs, sizeof abs) < 0)
            return 0;           /* the kernel fails it the same way */
        iso_sup_resolve_in(pid, abs, buf, bufsz);
        if (iso_open_judge(req, buf, flags, ev)) {
            *report = true;
            ans->err = EACCES;
        }
        return 0;
    }

    if (iso_sup_read_str(pid, path_p, path, sizeof path) < 0) {
        ans->err = errno == ENAMETOOLONG ? ENAMETOOLONG : EFAULT;
        return 0;
    }
    if (path[0] == '\0') {
        ans->err = ENOENT;
        return 0;
    }
    if (absolute(&c, dirfd, path, abs, sizeof abs) < 0) {
        ans->err = errno;
        return 0;
    }
    /* The agent's root, opened once: every process of the agent has the
     * same one (it cannot chroot or pivot_root: no capabilities, and no
     * new namespaces), and an open of /proc/PID/root per call is a cost
     * each open of the agent pays. */
    if (agent_root < 0) {
        char root[48];
        snprintf(root, sizeof root, "/proc/%d/root", (int)pid);
        if ((agent_root = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
            ans->err = ESRCH;
            return 0;
        }
    }
    c.root = agent_root;
    if (!ll_canonical)
        canonicalise_rules(c.root);
    if (resolve & (RESOLVE_BENEATH | RESOLVE_IN_ROOT)) {
        /* Scoped to the caller's dirfd (cap-std and the like): walked from
         * that very directory, reopened through /proc; the scope keeps the
         * walk below it (no absolute symlink, no magic link, no ".." out),
         * so our view and the agent's cannot differ. */
        char dirp[64];
        if (dirfd == AT_FDCWD)
            snprintf(dirp, sizeof dirp, "/proc/%d/cwd", (int)pid);
        else
            snprintf(dirp, sizeof dirp, "/proc/%d/fd/%d", (int)pid, dirfd);
        if ((c.root = open(dirp, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
            ans->err = errno == ENOENT ? EBADF : errno;
            return 0;
        }
        how.flags = (flags & ~(uint64_t)(O_CREAT | O_EXCL | O_TRUNC | O_CLOEXEC))
                    | O_NOCTTY | O_NONBLOCK | O_CLOEXEC;
        how.mode = 0;
        if (flags & O_CREAT) {
            ans->err = EXDEV;   /* not made here: see docs/isolation.md */
            goto out;
        }
        fd = (int)syscall(SYS_openat2, c.root, path, &how, sizeof how);
        if (fd < 0) {
            ans->err = errno;
            goto out;
        }
        goto opened;
    }

    {
        /* Ours: never blocking (a FIFO without a writer would stop the
         * supervisor), never a controlling terminal, closed on our exec. */
        uint64_t ours = (flags & ~(uint64_t)(O_CREAT | O_EXCL | O_TRUNC | O_CLOEXEC))
                        | O_NOCTTY | O_NONBLOCK | O_CLOEXEC;
        for (int attempt = 0; attempt < OPEN_ATTEMPTS && fd < 0; attempt++) {
            char again[sizeof abs];
            strlcpy(again, abs, sizeof again);
            if (!((flags & O_CREAT) && (flags & O_EXCL))) {
                fd = open_in_view(&c, again, sizeof again, ours, resolve, 0);
                if (fd >= 0 || errno != ENOENT || !(flags & O_CREAT))
                    break;
            }
            if ((flags & __O_TMPFILE) == __O_TMPFILE)
                break;
            /* O_CREAT and nothing there: made here, exclusively. */
            strlcpy(again, abs, sizeof again);
            if (rewrite_self(&c, again, sizeof again) < 0)
                break;
            bool judged = false;
            fd = create_in_view(&c, again, flags, mode, req, ev, &judged, buf, bufsz);
            if (fd >= 0)
                created = true;
            if (judged) {
                *report = true;
                break;
            }
            if (fd >= 0 || errno != EEXIST || (flags & O_EXCL))
                break;
            /* made by someone else meanwhile: open it as it is */
        }
        e = errno;
    }
    if (fd < 0) {
        ans->err = e ? e : EACCES;
        goto out;
    }
opened:
    if (fstat(fd, &st) < 0) {
        ans->err = errno;
        goto out;
    }
    if (created)
        ;                       /* judged by name before it was made */
    else if ((ans->err = judge_opened(req, fd, &st, flags, ev, report, buf, bufsz)) != 0)
        goto out;
    if ((flags & __O_TMPFILE) == __O_TMPFILE) {
        read_status(&c);
        if (fchmod(fd, (mode & 07777) & ~(mode_t)(c.umask >= 0 ? c.umask : 022)) < 0) {
            ans->err = errno;
            goto out;
        }
    }
    if ((flags & O_TRUNC) && S_ISREG(st.st_mode) && (flags & O_ACCMODE) != O_RDONLY
        && ftruncate(fd, 0) < 0) {
        ans->err = errno;
        goto out;
    }
    /* Ours was opened O_NONBLOCK; the agent's file status flags are what
     * it asked for (F_SETFL sets exactly these). */
    if (!(flags & (O_NONBLOCK | O_PATH))
        && fcntl(fd, F_SETFL, (int)(flags & (O_APPEND | O_DIRECT | O_NOATIME))) < 0) {
        ans->err = errno;
        goto out;
    }
    ans->fd = fd;
    ans->fd_flags = (flags & O_CLOEXEC) ? O_CLOEXEC : 0;
    fd = -1;
out:
    if (fd >= 0)
        close(fd);
    if (c.root >= 0 && c.root != agent_root)
        close(c.root);
    return 0;
}
