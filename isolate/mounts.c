/*
 * mounts.c — the mount namespace: what the agent's file system looks like.
 *
 * Planned in sbx-guard (it may walk directories and allocate), applied by
 * the sandbox's init in a fresh user+mount namespace, in this order:
 *   1. every mount private, so nothing we do propagates back to the host;
 *   2. a private tmpfs on /tmp (another agent's or the user's temporary
 *      files are not the agent's business), binding back what must stay
 *      reachable even if it lives under /tmp: the workspace, the preload,
 *      the policy copy, events.sock, the current directory;
 *   3. the audit store's directory and the runtime directory covered with
 *      an empty read-only tmpfs, then events.sock (only it) bound back.
 *      Landlock cannot subtract these from an allowed root ("/", "/tmp"):
 *      this is what keeps them out of reach;
 *   4. everything read-only (recursively), then the write roots of the
 *      policy made writable again (nothing, with read_only: true): the
 *      nearest superset of files.write.allow that mounts can express;
 *      writable mounts are noexec unless an exec allow root overlaps them
 *      (code the agent writes cannot be mapped executable: this stops
 *      running downloaded programs through ld.so, which Landlock's EXECUTE
 *      right does not see);
 *   5. a fresh /proc for the new pid namespace;
 *   6. deny-read files that exist at start covered by an empty mode-0000
 *      file (directories: an empty mode-0000 tmpfs), write-deny paths that
 *      exist at start bound read-only onto themselves.  After step 4, so
 *      that it cannot make them writable again;
 *   7. the guard (the preload) replaced by a read-only, executable copy on
 *      a tmpfs of its own.  Last, so that neither a write root's noexec
 *      (step 4: sbx installed under /tmp, /var/tmp or any write root) nor a
 *      cover (step 6) can leave ld.so unable to map it, and so that the
 *      agent cannot change the library under its own later processes.
 *      What it loads (libc, ld.so) lives in the system's directories.
 * Step 6's list comes from cover.c, which walks the deny globs' roots to
 * the end or says why it could not.  What appears after start is not
 * covered by step 6: the guard decides it for dynamic programs.
 */
#include "iso_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bsd/string.h>

#include "path.h"
#include "paths.h"

static bool special_tree(const char *path)
{
    return policy_path_under(path, "/proc") || policy_path_under(path, "/sys")
           || policy_path_under(path, "/dev");
}

static bool hidden(const struct iso_mounts *mp, const char *path)
{
    for (size_t i = 0; i < mp->n_hide; i++)
        if (policy_path_under(path, mp->hide[i]))
            return true;
    return false;
}

bool iso_mounts_skip(const struct iso_mounts *mp, const char *path)
{
    return hidden(mp, path) || special_tree(path);
}

/* ---- the plan's table of mounts ------------------------------------------
 * A cover may hold tens of thousands of entries, and each new one must be
 * checked against the others (not twice; not under a masked directory):
 * a hash of (path, kind) makes that a few lookups per entry (one per
 * ancestor of the path) instead of a scan of the table. */

static size_t hash_of(const char *path, size_t len, enum iso_mnt_kind kind)
{
    uint64_t h = 14695981039346656037u;         /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)path[i]) * 1099511628211u;
    return (size_t)((h ^ (uint64_t)kind) * 1099511628211u);
}

/* Index in mp->m of PATH[0..LEN) with KIND, or -1. */
static long lookup(const struct iso_mounts *mp, const char *path, size_t len,
                   enum iso_mnt_kind kind)
{
    if (mp->index_cap == 0)
        return -1;
    for (size_t i = hash_of(path, len, kind) & (mp->index_cap - 1);; i = (i + 1) & (mp->index_cap - 1)) {
        size_t k = mp->index[i];
        if (k == 0)
            return -1;
        const struct iso_mnt *m = &mp->m[k - 1];
        if (m->kind == kind && strncmp(m->path, path, len) == 0 && m->path[len] == '\0')
            return (long)(k - 1);
    }
}

static void index_put(size_t *index, size_t cap, const struct iso_mnt *m, size_t k)
{
    size_t i = hash_of(m->path, strlen(m->path), m->kind) & (cap - 1);
    while (index[i] != 0)
        i = (i + 1) & (cap - 1);
    index[i] = k + 1;
}

/* Room for one more entry in the table and its index. */
static int grow(struct iso_mounts *mp)
{
    if (mp->n == mp->cap) {
        size_t cap = mp->cap ? mp->cap * 2 : 64;
        struct iso_mnt *m = reallocarray(mp->m, cap, sizeof *m);
        if (m == NULL)
            return -1;
        mp->m = m;
        mp->cap = cap;
    }
    if (2 * (mp->n + 1) >= mp->index_cap) {
        size_t cap = mp->index_cap ? mp->index_cap * 2 : 256;
        size_t *index = calloc(cap, sizeof *index);
        if (index == NULL)
            return -1;
        for (size_t k = 0; k < mp->n; k++)
            index_put(index, cap, &mp->m[k], k);
        free(mp->index);
        mp->index = index;
        mp->index_cap = cap;
    }
    return 0;
}

int iso_mounts_add(struct iso_mounts *mp, enum iso_mnt_kind kind, const char *path,
                   const char *why)
{
    size_t len = strlen(path);

    if (lookup(mp, path, len, kind) >= 0)
        return 0;
    /* Already masked (or under a masked directory): a read-only bind of it
     * would add nothing, and in bwrap (which binds from the host's view)
     * would uncover it. */
    if (kind != ISO_MNT_RW) {
        if (lookup(mp, path, len, ISO_MNT_MASK_FILE) >= 0)
            return 0;
        for (size_t l = len; l > 0; l--)
            if ((l == len || path[l] == '/') && lookup(mp, path, l, ISO_MNT_MASK_DIR) >= 0)
                return 0;
    }
    if (grow(mp) < 0)
        return -1;
    mp->m[mp->n].kind = kind;
    mp->m[mp->n].why = why;
    mp->m[mp->n].path = strdup(path);
    if (mp->m[mp->n].path == NULL)
        return -1;
    index_put(mp->index, mp->index_cap, &mp->m[mp->n], mp->n);
    mp->n++;
    return 0;
}

void iso_mounts_free(struct iso_mounts *mp)
{
    for (size_t i = 0; i < mp->n; i++)
        free(mp->m[i].path);
    free(mp->m);
    free(mp->index);
    free(mp->links);
    mp->links = NULL;
    mp->n_links = 0;
    mp->m = NULL;
    mp->index = NULL;
    mp->n = mp->cap = mp->index_cap = 0;
}

static void add_keep(struct iso_mounts *mp, const char *path)
{
    if (path == NULL || path[0] != '/' || mp->n_keep == sizeof mp->keep / sizeof mp->keep[0])
        return;
    for (size_t i = 0; i < mp->n_keep; i++)
        if (strcmp(mp->keep[i], path) == 0)
            return;
    strlcpy(mp->keep[mp->n_keep++], path, sizeof mp->keep[0]);
}

static bool exec_overlaps(const struct policy *p, const char *dir)
{
    const struct policy_rule *r;
    size_t n = policy_rules(p, POLICY_EXEC_ALLOW, &r);
    char root[4096];

    for (size_t i = 0; i < n; i++)
        if (r[i].pattern && policy_glob_root(r[i].pattern, root, sizeof root) == 0
            && (policy_path_under(root, dir) || policy_path_under(dir, root)))
            return true;
    return false;
}

/* The sockets of literal unix:/path allow rules that exist at start stay
 * reachable (a host service under the private /tmp, say): binding the
 * socket file keeps the inode that connect finds.  Globbed rules and
 * sockets made after start are not kept (docs/network.md). */
static void keep_unix_sockets(const struct policy *p, struct iso_mounts *mp)
{
    const struct policy_rule *r;
    size_t n = policy_rules(p, POLICY_CONNECT_ALLOW, &r);

    for (size_t i = 0; i < n; i++) {
        const char *path;
        struct stat st;
        if (r[i].net_kind != POLICY_NET_UNIX || strncmp(r[i].text, "unix:/", 6) != 0)
            continue;
        path = r[i].text + 5;
        if (strpbrk(path, "*?[{") != NULL || stat(path, &st) < 0 || !S_ISSOCK(st.st_mode)
            || hidden(mp, path))
            continue;
        add_keep(mp, path);
    }
}

int iso_mounts_plan(const struct iso_request *req, struct iso_mounts *mp,
                    char *err, size_t errsz)
{
    const struct policy *p = req->policy;
    const struct policy_info *pi = policy_info(p);
    char buf[4096];

    memset(mp, 0, sizeof *mp);
    mp->private_tmp = true;
    mp->new_proc = true;

    /* What must not be. */
    if (req->audit_db && req->audit_db[0] == '/') {
        strlcpy(buf, req->audit_db, sizeof buf);
        char *slash = strrchr(buf, '/');
        if (slash == buf) {
            iso_errf(err, errsz, "mounts: the audit store %s is in /: cannot hide its directory",
                     req->audit_db);
            return -1;
        }
        *slash = '\0';
        strlcpy(mp->hide[mp->n_hide++], buf, sizeof mp->hide[0]);
    }
    if (req->runtime_dir && req->runtime_dir[0] == '/') {
        if (strcmp(req->runtime_dir, "/") == 0) {
            iso_errf(err, errsz, "mounts: the runtime directory is /");
            return -1;
        }
        strlcpy(mp->hide[mp->n_hide++], req->runtime_dir, sizeof mp->hide[0]);
    }

    /* What must stay reachable: directories only outside the hidden ones
     * (binding them back would uncover what is hidden), single files
     * anywhere. */
    if (req->workspace && hidden(mp, req->workspace)) {
        iso_errf(err, errsz, "mounts: the workspace %s is inside the audit store's or the "
                 "runtime directory", req->workspace);
        return -1;
    }
    add_keep(mp, req->workspace);
    if (getcwd(buf, sizeof buf) && !hidden(mp, buf))
        add_keep(mp, buf);
    add_keep(mp, req->preload);
    if (req->preload && req->preload[0] == '/')
        strlcpy(mp->preload, req->preload, sizeof mp->preload);
    add_keep(mp, req->policy_copy);
    add_keep(mp, req->policy_image);
    if (req->runtime_dir) {
        snprintf(buf, sizeof buf, "%s/%s", req->runtime_dir, SBX_EVENTS_SOCK);
        add_keep(mp, buf);
    }
    keep_unix_sockets(p, mp);

    /* Audit mode denies nothing: no read-only mounts, nothing covered.
     * What protects sbx itself (above) stays. */
    if (pi->audit_mode)
        return 0;

    /* Read-only everywhere but the write roots. */
    mp->all_ro = true;
    if (!pi->read_only) {
        const struct policy_rule *r;
        size_t n = policy_rules(p, POLICY_WRITE_ALLOW, &r);
        for (size_t i = 0; i < n; i++) {
            struct stat st;
            if (r[i].pattern == NULL || policy_glob_root(r[i].pattern, buf, sizeof buf) < 0)
                continue;
            if (strcmp(buf, "/") == 0) {
                mp->all_ro = false;     /* the policy lets it write anywhere */
                break;
            }
            /* Not there at start: stays read-only (see landlock.c). */
            if (stat(buf, &st) < 0 || special_tree(buf) || hidden(mp, buf))
                continue;
            if (iso_mounts_add(mp, ISO_MNT_RW, buf, exec_overlaps(p, buf)
                               ? "files.write.allow" : "files.write.allow (noexec)") < 0) {
                iso_errf(err, errsz, "mounts: out of memory");
                return -1;
            }
        }
    }

    if (iso_cover_plan(req, mp) < 0) {
        iso_errf(err, errsz, "mounts: out of memory");
        return -1;
    }
    return 0;
}

/* ---- applied in the sandbox's init ---------------------------------------- */

struct keep_state {
    dev_t dev;
    ino_t ino;
    mode_t mode;
    int tree;                   /* detached clone, or -1 */
};

static int mkdir_p(const char *path)
{
    char buf[4096];

    strlcpy(buf, path, sizeof buf);
    for (char *s = buf + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                return -1;
            *s = '/';
        }
    if (mkdir(buf, 0755) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

/* Creates an empty file or directory at PATH to mount on. */
static int mountpoint(const char *path, bool dir)
{
    char parent[4096];
    char *slash;
    int fd;

    strlcpy(parent, path, sizeof parent);
    slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = '\0';
        if (mkdir_p(parent) < 0)
            return -1;
    }
    if (dir)
        return mkdir(path, 0755) < 0 && errno != EEXIST ? -1 : 0;
    fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

static int attach(int tree, const char *path)
{
    return move_mount(tree, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH);
}

/* Covers each of HIDES with a fresh tmpfs, then puts back every keep that
 * the covering made disappear.  RO: the covering tmpfs ends read-only. */
static int hide_and_restore(const struct iso_mounts *mp, const char *const *hides, size_t nh,
                            bool ro, const char *tmpfs_opts, char *err, size_t errsz)
{
    struct keep_state ks[sizeof mp->keep / sizeof mp->keep[0]];
    int rc = -1;

    /* Every descriptor is -1 before the first can fail: the cleanup closes
     * only what was opened (a stray close could take the pipe that carries
     * this very error back to sbx-guard). */
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        ks[i].tree = -1;
    for (size_t i = 0; i < mp->n_keep; i++) {
        struct stat st;
        if (stat(mp->keep[i], &st) < 0)
            continue;
        ks[i].dev = st.st_dev;
        ks[i].ino = st.st_ino;
        ks[i].mode = st.st_mode;
        ks[i].tree = open_tree(AT_FDCWD, mp->keep[i],
                               OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        if (ks[i].tree < 0) {
            iso_errf(err, errsz, "mounts: clone %s: %s", mp->keep[i], strerror(errno));
            goto out;
        }
    }
    for (size_t i = 0; i < nh; i++) {
        struct stat st;
        if (stat(hides[i], &st) < 0 || !S_ISDIR(st.st_mode))
            continue;           /* already gone from view */
        if (mount("tmpfs", hides[i], "tmpfs", MS_NOSUID | MS_NODEV, tmpfs_opts) < 0) {
            iso_errf(err, errsz, "mounts: tmpfs on %s: %s", hides[i], strerror(errno));
            goto out;
        }
    }
    /* Shortest first: the workspace before a keep inside it. */
    for (size_t len = 1; len < 4096; len++)
        for (size_t i = 0; i < mp->n_keep; i++) {
            struct stat st;
            if (ks[i].tree < 0 || strlen(mp->keep[i]) != len)
                continue;
            if (stat(mp->keep[i], &st) == 0 && st.st_dev == ks[i].dev && st.st_ino == ks[i].ino)
                continue;       /* still the same object */
            if (mountpoint(mp->keep[i], S_ISDIR(ks[i].mode)) < 0
                || attach(ks[i].tree, mp->keep[i]) < 0) {
                iso_errf(err, errsz, "mounts: keep %s: %s", mp->keep[i], strerror(errno));
                goto out;
            }
        }
    if (ro)
        for (size_t i = 0; i < nh; i++) {
            struct mount_attr a = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOEXEC };
            /* Not recursive: the keeps bound inside keep their own flags. */
            if (mount_setattr(AT_FDCWD, hides[i], 0, &a, sizeof a) < 0 && errno != ENOENT
                && errno != EINVAL) {
                iso_errf(err, errsz, "mounts: read-only %s: %s", hides[i], strerror(errno));
                goto out;
            }
        }
    rc = 0;
out:
    for (size_t i = 0; i < mp->n_keep; i++)
        if (ks[i].tree >= 0)
            close(ks[i].tree);
    return rc;
}

/* A detached tmpfs holding the empty, mode-0000 file and directory that
 * masks are cloned from.  It is never attached anywhere itself. */
static int mask_source(char *err, size_t errsz)
{
    int fs, mnt, fd;

    fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
    if (fs < 0 || fsconfig(fs, FSCONFIG_SET_STRING, "size", "4k", 0) < 0
        || fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0000", 0) < 0
        || fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
        iso_errf(err, errsz, "mounts: mask tmpfs: %s", strerror(errno));
        if (fs >= 0)
            close(fs);
        return -1;
    }
    mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
    close(fs);
    if (mnt < 0) {
        iso_errf(err, errsz, "mounts: mask mount: %s", strerror(errno));
        return -1;
    }
    fd = openat(mnt, "file", O_WRONLY | O_CREAT | O_CLOEXEC, 0);
    if (fd < 0 || mkdirat(mnt, "dir", 0) < 0 || fchmodat(mnt, "dir", 0, 0) < 0) {
        iso_errf(err, errsz, "mounts: mask files: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        close(mnt);
        return -1;
    }
    close(fd);
    /* Read-only once here, not per clone: a cover of thousands of files
     * costs one clone and one attach each. */
    {
        struct mount_attr a = { .attr_set = MOUNT_ATTR_RDONLY };
        if (mount_setattr(mnt, "", AT_EMPTY_PATH, &a, sizeof a) < 0) {
            iso_errf(err, errsz, "mounts: mask read-only: %s", strerror(errno));
            close(mnt);
            return -1;
        }
    }
    return mnt;
}

/* Clones FROM (a path relative to DIRFD), sets ATTR on the clone and
 * attaches it on PATH. */
static int bind_with(int dirfd, const char *from, const char *path, uint64_t set, uint64_t clr)
{
    struct mount_attr a = { .attr_set = set, .attr_clr = clr };
    int t = open_tree(dirfd, from, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE
                                   | (from[0] ? 0 : AT_EMPTY_PATH));
    int rc = -1;

    if (t < 0)
        return -1;
    if ((set || clr) && mount_setattr(t, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof a) < 0)
        goto out;
    rc = attach(t, path);
out:
    close(t);
    return rc;
}

/* Step 7: copies the preload at PATH into a fresh tmpfs, makes that
 * read-only (executable: the mount is ours, so no flag of the host's is
 * locked on it) and binds the copy over PATH. */
static int bind_guard(const char *path, char *err, size_t errsz)
{
    struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID
                                         | MOUNT_ATTR_NODEV };
    char buf[65536];
    int fs = -1, mnt = -1, in = -1, out = -1, rc = -1;
    ssize_t n;

    fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
    if (fs < 0 || fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0755", 0) < 0
        || fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0
        || (mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)) < 0) {
        iso_errf(err, errsz, "mounts: the guard's tmpfs: %s", strerror(errno));
        goto out;
    }
    in = open(path, O_RDONLY | O_CLOEXEC);
    out = openat(mnt, "libsbx-preload.so", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0555);
    if (in < 0 || out < 0) {
        iso_errf(err, errsz, "mounts: copy the guard %s: %s", path, strerror(errno));
        goto out;
    }
    while ((n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)n) != n) {
            n = -1;
            break;
        }
    /* A mount with a file open for writing cannot become read-only. */
    if (close(out) < 0)
        n = -1;
    out = -1;
    if (n < 0 || mount_setattr(mnt, "", AT_EMPTY_PATH, &ro, sizeof ro) < 0
        || bind_with(mnt, "libsbx-preload.so", path, 0, 0) < 0) {
        iso_errf(err, errsz, "mounts: bind the guard over %s: %s", path, strerror(errno));
        goto out;
    }
    rc = 0;
out:
    if (out >= 0)
        close(out);
    if (in >= 0)
        close(in);
    if (mnt >= 0)
        close(mnt);
    if (fs >= 0)
        close(fs);
    return rc;
}

int iso_mounts_apply(const struct iso_mounts *mp, char *err, size_t errsz)
{
    const char *tmp[1] = { "/tmp" };
    const char *hides[4];
    int masks = -1;

    /* 1. */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
        iso_errf(err, errsz, "mounts: make / private: %s", strerror(errno));
        return -1;
    }
    /* 2. */
    if (mp->private_tmp
        && hide_and_restore(mp, tmp, 1, false, "mode=1777", err, errsz) < 0)
        return -1;
    /* 3. */
    for (size_t i = 0; i < mp->n_hide; i++)
        hides[i] = mp->hide[i];
    if (hide_and_restore(mp, hides, mp->n_hide, true, "mode=0755,size=16k", err, errsz) < 0)
        return -1;
    /* 4. */
    if (mp->all_ro) {
        struct mount_attr a = { .attr_set = MOUNT_ATTR_RDONLY };
        if (mount_setattr(AT_FDCWD, "/", AT_RECURSIVE, &a, sizeof a) < 0) {
            iso_errf(err, errsz, "mounts: read-only /: %s", strerror(errno));
            return -1;
        }
        for (size_t i = 0; i < mp->n; i++) {
            if (mp->m[i].kind != ISO_MNT_RW)
                continue;
            bool noexec = strstr(mp->m[i].why, "noexec") != NULL;
            if (bind_with(AT_FDCWD, mp->m[i].path, mp->m[i].path,
                          noexec ? MOUNT_ATTR_NOEXEC : 0, MOUNT_ATTR_RDONLY) < 0) {
                iso_errf(err, errsz, "mounts: writable %s: %s", mp->m[i].path, strerror(errno));
                return -1;
            }
        }
    }
    /* 5. */
    if (mp->new_proc
        && mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
        iso_errf(err, errsz, "mounts: /proc: %s", strerror(errno));
        return -1;
    }
    /* vm.memfd_noexec is per pid namespace: 2 makes every memfd of the
     * agent non-executable and refuses MFD_EXEC.  Only a real root may
     * write it (the file is root's); for other users seccomp's MFD_EXEC
     * rule and the supervisor's memfd refusal stand alone. */
    if (mp->new_proc) {
        int fd = open("/proc/sys/vm/memfd_noexec", O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
            if (write(fd, "2\n", 2) < 0) {
                /* best effort, see above */
            }
            close(fd);
        }
    }
    /* The fresh /proc is writable; what in it acts on the whole machine is
     * not (as root, the agent is uid 0 on the host, capabilities or not, and
     * /proc/sysrq-trigger or /proc/sys only check the uid). */
    if (mp->new_proc) {
        static const char *const proc_ro[] = {
            "/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs",
        };
        for (size_t i = 0; i < sizeof proc_ro / sizeof proc_ro[0]; i++)
            if (bind_with(AT_FDCWD, proc_ro[i], proc_ro[i], MOUNT_ATTR_RDONLY, 0) < 0
                && errno != ENOENT) {
                iso_errf(err, errsz, "mounts: read-only %s: %s", proc_ro[i], strerror(errno));
                return -1;
            }
    }
    /* 6. */
    for (size_t i = 0; i < mp->n; i++) {
        const struct iso_mnt *m = &mp->m[i];
        int rc;

        if (m->kind == ISO_MNT_RW)
            continue;
        if ((m->kind == ISO_MNT_MASK_FILE || m->kind == ISO_MNT_MASK_DIR) && masks < 0
            && (masks = mask_source(err, errsz)) < 0)
            return -1;
        switch (m->kind) {
        case ISO_MNT_MASK_FILE:
            rc = bind_with(masks, "file", m->path, 0, 0);
            break;
        case ISO_MNT_MASK_DIR:
            rc = bind_with(masks, "dir", m->path, 0, 0);
            break;
        default:
            rc = bind_with(AT_FDCWD, m->path, m->path, MOUNT_ATTR_RDONLY, 0);
            break;
        }
        /* Gone since the plan was made (or under the private /tmp): fine. */
        if (rc < 0 && errno != ENOENT) {
            iso_errf(err, errsz, "mounts: cover %s: %s", m->path, strerror(errno));
            close(masks);
            return -1;
        }
    }
    if (masks >= 0)
        close(masks);
    /* 7. */
    if (mp->preload[0] && bind_guard(mp->preload, err, errsz) < 0)
        return -1;
    return 0;
}

static const char *kind_name(enum iso_mnt_kind k)
{
    switch (k) {
    case ISO_MNT_HIDE: return "hide (empty tmpfs)";
    case ISO_MNT_MASK_FILE: return "empty mode-0000 file over";
    case ISO_MNT_MASK_DIR: return "empty mode-0000 tmpfs over";
    case ISO_MNT_RO: return "read-only bind";
    case ISO_MNT_RW: return "writable bind";
    }
    return "?";
}

void iso_mounts_print(const struct iso_mounts *mp, FILE *out)
{
    fprintf(out, "mount namespace (private propagation):\n");
    if (mp->private_tmp)
        fprintf(out, "  tmpfs /tmp (private, mode 1777)\n");
    for (size_t i = 0; i < mp->n_hide; i++)
        fprintf(out, "  empty read-only tmpfs over %s\n", mp->hide[i]);
    for (size_t i = 0; i < mp->n_keep; i++)
        fprintf(out, "  kept reachable: %s\n", mp->keep[i]);
    if (mp->all_ro)
        fprintf(out, "  every mount read-only, except the writable binds below\n");
    if (mp->new_proc)
        fprintf(out, "  fresh /proc for the pid namespace (/proc/sys, /proc/sysrq-trigger, /proc/irq,\n"
                     "  /proc/bus, /proc/fs read-only; vm.memfd_noexec=2 in it where permitted)\n");
    for (size_t i = 0; i < mp->n; i++)
        fprintf(out, "  %s %s   (%s)\n", kind_name(mp->m[i].kind), mp->m[i].path, mp->m[i].why);
    if (mp->preload[0])
        fprintf(out, "  read-only, executable copy of the guard over %s\n", mp->preload);
    fprintf(out, "  deny cover: %lu entries walked, %lu covered in %u ms%s%s\n", mp->walked,
            mp->covered, mp->walk_ms, mp->incomplete ? "; INCOMPLETE: " : "",
            mp->incomplete ? mp->incomplete_why : "");
}
