/*
 * supervise_open.c — the supervisor's answer to opens (ISO_NOTIFY_OPEN).
 *
 * The mounts cover the deny-read files that exist at start (cover.c).  A
 * file created later under a deny-read name (a .env written by a tool the
 * agent runs, or copied in by another process of the user) has no cover,
 * and a static program, which the guard never sees, could read it.  With
 * opens notified, every open, openat, openat2 and creat of the agent stops
 * in the kernel until this code has resolved the path as the caller sees it
 * (its cwd or dirfd, its root, its mounts, symlinks) and matched it against
 * files.read.deny (files.write.deny too for an open that may write): a
 * match is refused with EACCES and recorded (layer supervisor); anything
 * else carries on under the kernel's own rules (Landlock, the mounts).
 *
 * Only the deny lists are judged here, not the allow lists: what the allow
 * lists mean is Landlock's to enforce, and judging it again by name would
 * refuse what the kernel layer has always let through (/proc/PID, devices).
 * Nor the protect list: sbx's own files are hidden by the mounts, and the
 * preload must read the policy copy that the list names.
 *
 * A deny-read file that had other names at start (a hard link made before
 * the run) is covered under its deny name only; its inode is noted by the
 * cover, and an open of any name of it is refused here too.
 *
 * What this does not make exact (docs/isolation.md): the decision is taken
 * on the path the caller passed, and "carry on" lets the kernel resolve it
 * again.  A second thread of a hostile static program that rewrites the
 * path in memory or renames a file between the two can still open a
 * deny-read file created after start.  Closing that race takes the open
 * being done by the supervisor and the descriptor handed in with
 * SECCOMP_IOCTL_NOTIF_ADDFD, from a process with the agent's own Landlock
 * domain and credentials; not done yet.
 */
#include "iso_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>

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

/* Is RESOLVED (in PID's view) one of the deny-read files' other names? */
static bool is_deny_link(pid_t pid, const char *resolved)
{
    char host[PATH_MAX + 64];
    struct stat st;

    if (n_deny_links == 0)
        return false;
    if (snprintf(host, sizeof host, "/proc/%d/root%s", (int)pid, resolved) >= (int)sizeof host
        || stat(host, &st) < 0)
        return false;
    for (size_t i = 0; i < n_deny_links; i++)
        if (deny_links[i].dev == st.st_dev && deny_links[i].ino == st.st_ino)
            return true;
    return false;
}

/* The caller's path made absolute against its cwd or DIRFD. */
static int absolute(pid_t pid, int dirfd, const char *path, char *out, size_t outsz)
{
    char base[PATH_MAX], what[32];

    if (path[0] == '/') {
        strlcpy(out, path, outsz);
        return 0;
    }
    if (dirfd == AT_FDCWD)
        strlcpy(what, "cwd", sizeof what);
    else
        snprintf(what, sizeof what, "fd/%d", dirfd);
    if (iso_sup_proc_link(pid, what, base, sizeof base) < 0)
        return -1;
    if (snprintf(out, outsz, "%s/%s", strcmp(base, "/") == 0 ? "" : base, path) >= (int)outsz) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

int iso_decide_open(const struct iso_request *req, pid_t pid, long nr, const __u64 args[6],
                    bool *deny, struct sbx_event_desc *ev, char *buf, size_t bufsz)
{
    static char rule[512];
    char path[PATH_MAX], abs[PATH_MAX * 2];
    int dirfd = AT_FDCWD;
    uint64_t path_p, flags;
    struct policy_verdict v;
    bool writes;

    *deny = false;
    switch (nr) {
    case SYS_open:
        path_p = args[0];
        flags = args[1];
        break;
    case SYS_creat:
        path_p = args[0];
        flags = O_WRONLY | O_CREAT | O_TRUNC;
        break;
    case SYS_openat:
        dirfd = (int)args[0];
        path_p = args[1];
        flags = args[2];
        break;
    case SYS_openat2: {
        struct open_how how;
        dirfd = (int)args[0];
        path_p = args[1];
        memset(&how, 0, sizeof how);
        if (args[3] < sizeof how.flags
            || iso_sup_read_mem(pid, args[2], &how, sizeof how.flags) != (ssize_t)sizeof how.flags) {
            errno = EFAULT;
            return -1;
        }
        flags = how.flags;
        break;
    }
    default:
        return 0;
    }
    if (iso_sup_read_str(pid, path_p, path, sizeof path) < 0)
        return -1;
    if (path[0] == '\0')
        return 0;                       /* AT_EMPTY_PATH or ENOENT: no name to judge */
    if (absolute(pid, dirfd, path, abs, sizeof abs) < 0)
        return -1;
    if (iso_sup_resolve_in(pid, abs, buf, bufsz) < 0)
        strlcpy(buf, abs, bufsz);
    writes = (flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC));

    /* files.read.deny for every open that can read (O_PATH cannot). */
    if (flags & O_PATH)
        return 0;
    ev->op = SBX_OP_OPEN_READ;
    if ((flags & O_ACCMODE) != O_WRONLY
        && policy_decide_path(req->policy, SBX_OP_OPEN_READ, buf, &v) == SBX_DENY
        && v.rule && v.rule->list == POLICY_READ_DENY)
        *deny = true;   /* NOLINT(bugprone-branch-clone): the read rule, then the write rule */
    else if (writes && (ev->op = SBX_OP_OPEN_WRITE, true)
             && policy_decide_path(req->policy, SBX_OP_OPEN_WRITE, buf, &v) == SBX_DENY
             && v.rule && v.rule->list == POLICY_WRITE_DENY)
        *deny = true;
    if (!*deny && (flags & O_ACCMODE) != O_WRONLY && is_deny_link(pid, buf)) {
        *deny = true;
        ev->op = SBX_OP_OPEN_READ;
        ev->decision = SBX_DENY;
        ev->target = buf;
        ev->reason = "another name (hard link) of a file under files.read.deny";
        return 0;
    }
    if (!*deny)
        return 0;
    ev->decision = SBX_DENY;
    ev->target = buf;
    ev->reason = v.reason;
    if (policy_rule_format(v.rule, rule, sizeof rule) == 0)
        ev->rule = rule;
    return 0;
}
