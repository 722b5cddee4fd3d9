/*
 * gvisor.c — ISO_GVISOR: the agent in gVisor's user-space kernel (runsc).
 *
 * For code nobody trusts: the agent's system calls never reach the host
 * kernel, they are served by gVisor's Sentry, and files by its gofer.  The
 * policy is compiled into an OCI bundle (config.json in a private
 * directory of the runtime dir) and `runsc run` starts it:
 *   - the host's / read-only as the root, then the mount plan of mounts.c
 *     in its order: /tmp a tmpfs, the write roots bound writable, sbx's
 *     own store and runtime directories covered with an empty tmpfs (the
 *     guard's policy copy and the event ring bound back, one file each),
 *     deny-read files covered by an empty mode-0000 file, deny-read
 *     directories by an empty mode-0000 tmpfs;
 *   - --network=none when the policy connects and binds to loopback at
 *     most (a loopback of the sandbox's own: the host's loopback services
 *     are out of reach, unlike native), else the host's network;
 *   - the policy's rlimits, set by the Sentry on the agent (not on runsc:
 *     a Go runtime under RLIMIT_AS would not start);
 *   - no capabilities, no_new_privs, no host Unix sockets (--host-uds
 *     stays none: events.sock and control.sock are unreachable);
 *   - sbx's seccomp list (iso_seccomp_oci) as the bundle's linux.seccomp,
 *     which the Sentry enforces on the agent (--oci-seccomp).
 * What gVisor cannot carry: Landlock (ENOSYS inside) and the seccomp
 * supervisor (user notification is EINVAL inside), so the layers say
 * neither.  The guard inside cannot hand a ring to sbx-auditd (a sandbox
 * cannot pass descriptors out): sbx-guard relays one shared ring file
 * (REQ->ring_file; tools/guard_ring.c, docs/isolation.md "gVisor").
 * runsc runs as rootless with cgroups ignored: it needs no privilege, and
 * the limits come from rlimits as in every other mode.
 */
#include "iso_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bsd/stdlib.h>
#include <bsd/string.h>

#include "path.h"

/* runsc run's log, in the bundle (see iso_gvisor_argv). */
#define GVISOR_RUN_LOG "run.log"

const char *iso_runsc_path(void)
{
    static const char *const where[] = { "/usr/bin/runsc", "/usr/local/bin/runsc",
                                         "/usr/sbin/runsc" };
    /* SBX_RUNSC names the one to use (a test makes it missing with it). */
    const char *env = getenv("SBX_RUNSC");
    if (env && env[0])
        return env[0] == '/' && access(env, X_OK) == 0 ? env : NULL;
    for (size_t i = 0; i < sizeof where / sizeof where[0]; i++)
        if (access(where[i], X_OK) == 0)
            return where[i];
    return NULL;
}

/* ---- a small JSON writer: config.json is the only thing it writes ------ */

struct jbuf {
    char *s;
    size_t n, cap;
    bool oom;
};

static void jraw(struct jbuf *b, const char *s, size_t len)
{
    if (b->oom)
        return;
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + len + 1)
            cap *= 2;
        char *ns = realloc(b->s, cap);
        if (ns == NULL) {
            b->oom = true;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, len);
    b->n += len;
    b->s[b->n] = '\0';
}

static void jlit(struct jbuf *b, const char *s)
{
    jraw(b, s, strlen(s));
}

static void jfmt(struct jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jfmt(struct jbuf *b, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        jraw(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* A JSON string: quotes, backslashes and control bytes escaped; other
 * bytes as they are (paths and arguments are bytes, not always UTF-8, and
 * runsc's Go decoder keeps invalid sequences as U+FFFD: such a path would
 * name another file, so it is refused by iso_gvisor_bundle instead). */
static void jstr(struct jbuf *b, const char *s)
{
    jlit(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char esc[2] = { '\\', (char)*p };
            jraw(b, esc, 2);
        } else if (*p < 0x20) {
            jfmt(b, "\\u%04x", *p);
        } else {
            jraw(b, (const char *)p, 1);
        }
    }
    jlit(b, "\"");
}

static void jmount(struct jbuf *b, bool *first, const char *dst, const char *type,
                   const char *src, const char *opts)
{
    jlit(b, *first ? "\n  " : ",\n  ");
    *first = false;
    jlit(b, "{\"destination\": ");
    jstr(b, dst);
    jlit(b, ", \"type\": ");
    jstr(b, type);
    jlit(b, ", \"source\": ");
    jstr(b, src);
    jlit(b, ", \"options\": [");
    /* OPTS: comma-separated, none with a comma or quote of its own */
    const char *o = opts;
    bool f = true;
    while (o && *o) {
        const char *c = strchr(o, ',');
        size_t len = c ? (size_t)(c - o) : strlen(o);
        jlit(b, f ? "\"" : ", \"");
        jraw(b, o, len);
        jlit(b, "\"");
        f = false;
        o = c ? c + 1 : NULL;
    }
    jlit(b, "]}");
}

/* Valid UTF-8 (see jstr). */
static bool utf8_ok(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = *p < 0x80 ? 0 : (*p & 0xe0) == 0xc0 ? 1 : (*p & 0xf0) == 0xe0 ? 2
                : (*p & 0xf8) == 0xf0 ? 3 : -1;
        if (n < 0)
            return false;
        p++;
        for (int i = 0; i < n; i++, p++)
            if ((*p & 0xc0) != 0x80)
                return false;
    }
    return true;
}

static bool under_a_hide(const struct iso_mounts *mp, const char *path)
{
    for (size_t i = 0; i < mp->n_hide; i++)
        if (policy_path_under(path, mp->hide[i]))
            return true;
    return false;
}

/* Whether the sandbox would not see PATH: under a directory the plan
 * hides, or under the host's /tmp where the sandbox has its own. */
static bool hidden(const struct iso_mounts *mp, const char *path)
{
    return under_a_hide(mp, path) || (mp->private_tmp && policy_path_under(path, "/tmp"));
}

/* Whether keep I is bound back by keeps(): hidden, there (*ST), not
 * bound already, and not inside a write root (bound writable). */
static bool keep_bound(const struct iso_mounts *mp, size_t i, struct stat *st)
{
    const char *k = mp->keep[i];
    if (!hidden(mp, k) || stat(k, st) < 0 || !(S_ISREG(st->st_mode) || S_ISDIR(st->st_mode)))
        return false;           /* events.sock among them: not reachable here */
    for (size_t j = 0; j < i; j++)
        if (strcmp(mp->keep[j], k) == 0)
            return false;
    for (size_t j = 0; j < mp->n; j++)
        if (iso_mounts_rw_from_host(mp, &mp->m[j]) && policy_path_under(k, mp->m[j].path))
            return false;
    return true;
}

/* What the plan hides and the sandbox needs, bound back read-only (the
 * ring writable), each once, none inside another: the guard's files, and
 * the workspace under /tmp when the policy does not make it writable
 * (runsc does not start in a working directory it cannot find).  Once is
 * enough: runsc mounts in the order of the destination's length (a stable
 * sort), so a keep comes after every directory above it, and a second
 * bind of the same file was ~3 ms of start-up for nothing (each bind is a
 * gofer connection of its own). */
static void keeps(struct jbuf *b, bool *first, const struct iso_request *req,
                  const struct iso_mounts *mp)
{
    for (size_t i = 0; i < mp->n_keep; i++) {
        struct stat st, other;
        bool inside = false;
        if (!keep_bound(mp, i, &st))
            continue;
        for (size_t j = 0; j < mp->n_keep && !inside; j++)
            inside = strcmp(mp->keep[j], mp->keep[i]) != 0
                     && policy_path_under(mp->keep[i], mp->keep[j]) && keep_bound(mp, j, &other);
        if (!inside)
            jmount(b, first, mp->keep[i], "bind", mp->keep[i],
                   S_ISDIR(st.st_mode) ? "rbind,ro" : "bind,ro");
    }
    if (req->ring_file && hidden(mp, req->ring_file))
        jmount(b, first, req->ring_file, "bind", req->ring_file, "bind,rw");
}

/* Whether NAME matches the last component of some files.exec.deny glob:
 * the cheap test before the full decision (the walk looks at every
 * program of the system, ~1,300 here, and sbx-guard's start-up pays it). */
static bool name_may_be_denied(const struct policy *p, const char *name)
{
    const struct policy_rule *r;
    size_t n = policy_rules(p, POLICY_EXEC_DENY, &r);
    for (size_t i = 0; i < n; i++) {
        const char *g = r[i].pattern ? r[i].pattern : r[i].text;
        const char *last = g ? strrchr(g, '/') : NULL;
        last = last ? last + 1 : g;
        if (last && (strcmp(last, "**") == 0 || fnmatch(last, name, FNM_PERIOD) == 0))
            return true;
    }
    return false;
}

/* files.exec.deny without a supervisor: each program in the system's
 * program directories that the policy denies running is bound onto itself
 * noexec (gVisor honours it: execve gives EACCES, reading stays allowed).
 * Only those directories, only what exists at start: a copy elsewhere or
 * a program made later runs (docs/isolation.md says so). */
static void exec_denies(struct jbuf *b, bool *first, const struct iso_request *req)
{
    static const char *const dirs[] = { "/usr/bin", "/usr/sbin", "/bin", "/sbin",
                                        "/usr/local/bin", "/usr/local/sbin" };
    char seen[sizeof dirs / sizeof dirs[0]][4096];
    size_t nseen = 0;

    for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++) {
        char real[4096];
        bool dup = false;
        if (realpath(dirs[d], real) == NULL)
            continue;
        for (size_t i = 0; i < nseen; i++)
            dup = dup || strcmp(seen[i], real) == 0;
        if (dup)
            continue;       /* /bin is /usr/bin on a merged-/usr system */
        strlcpy(seen[nseen++], real, sizeof seen[0]);
        DIR *dir = opendir(real);
        if (dir == NULL)
            continue;
        struct dirent *de;
        while ((de = readdir(dir)) != NULL) {
            char path[4096 + 256];
            struct stat st;
            struct policy_verdict v;
            if (de->d_name[0] == '.')
                continue;
            if (!name_may_be_denied(req->policy, de->d_name))
                continue;
            snprintf(path, sizeof path, "%s/%s", real, de->d_name);
            char *const argv[] = { path, NULL };
            if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode) || !utf8_ok(path)
                || policy_decide_exec(req->policy, path, argv, &v) != SBX_DENY)
                continue;
            jmount(b, first, path, "bind", path, "bind,ro,noexec");
        }
        closedir(dir);
    }
}

char *iso_gvisor_config(const struct iso_request *req, const struct iso_mounts *mp,
                        const char *empty_file, bool net_none, char *err, size_t errsz)
{
    struct jbuf b = { 0 };
    struct iso_rlimit rl[ISO_RLIMIT_MAX];
    size_t nrl = iso_rlimits(req->policy, rl);
    char cwd[4096];
    bool first = true;

    if (getcwd(cwd, sizeof cwd) == NULL)
        strlcpy(cwd, req->workspace ? req->workspace : "/", sizeof cwd);
    for (size_t i = 0; req->argv[i]; i++)
        if (!utf8_ok(req->argv[i])) {
            iso_errf(err, errsz, "gvisor: argument %zu is not UTF-8 (an OCI bundle is JSON)", i);
            return NULL;
        }
    for (size_t i = 0; i < mp->n; i++)
        if (!utf8_ok(mp->m[i].path)) {
            iso_errf(err, errsz, "gvisor: %s is not UTF-8: it cannot be named in the bundle",
                     mp->m[i].path);
            return NULL;
        }

    jlit(&b, "{\"ociVersion\": \"1.0.0\",\n \"hostname\": \"sbx\",\n");
    /* The host's root, read-only: writes go only where a mount below lets
     * them (a policy that may write anywhere keeps it writable). */
    jlit(&b, " \"root\": {\"path\": \"/\", \"readonly\": ");
    jlit(&b, mp->all_ro ? "true},\n" : "false},\n");
    jlit(&b, " \"process\": {\n  \"terminal\": false,\n");
    jfmt(&b, "  \"user\": {\"uid\": %u, \"gid\": %u},\n", (unsigned)geteuid(),
         (unsigned)getegid());
    jlit(&b, "  \"args\": [");
    for (size_t i = 0; req->argv[i]; i++) {
        if (i)
            jlit(&b, ", ");
        jstr(&b, req->argv[i]);
    }
    jlit(&b, "],\n  \"env\": [");
    bool f = true;
    for (size_t i = 0; req->envp[i]; i++) {
        if (!utf8_ok(req->envp[i]) || strchr(req->envp[i], '=') == NULL)
            continue;       /* not expressible; never a variable of ours */
        jlit(&b, f ? "" : ", ");
        f = false;
        jstr(&b, req->envp[i]);
    }
    jlit(&b, "],\n  \"cwd\": ");
    jstr(&b, cwd);
    /* No capabilities at all, and no way to gain any. */
    jlit(&b, ",\n  \"capabilities\": {\"bounding\": [], \"effective\": [], "
             "\"inheritable\": [], \"permitted\": [], \"ambient\": []},\n");
    jlit(&b, "  \"noNewPrivileges\": true,\n  \"rlimits\": [");
    for (size_t i = 0; i < nrl; i++) {
        jlit(&b, i ? ", " : "");
        jfmt(&b, "{\"type\": \"%s\", \"hard\": %llu, \"soft\": %llu}", rl[i].name,
             (unsigned long long)rl[i].value, (unsigned long long)rl[i].value);
    }
    jlit(&b, "]\n },\n \"mounts\": [");
    jmount(&b, &first, "/proc", "proc", "proc", "");
    jmount(&b, &first, "/dev", "tmpfs", "tmpfs", "");
    jmount(&b, &first, "/sys", "sysfs", "sysfs", "nosuid,noexec,nodev,ro");
    if (mp->private_tmp)
        jmount(&b, &first, "/tmp", "tmpfs", "tmpfs", "mode=1777");
    /* The write roots (the keeps under the private /tmp come below). */
    for (size_t i = 0; i < mp->n; i++)
        if (iso_mounts_rw_from_host(mp, &mp->m[i]))
            jmount(&b, &first, mp->m[i].path, "bind", mp->m[i].path,
                   strstr(mp->m[i].why, "noexec") ? "rbind,rw,noexec" : "rbind,rw");
    /* sbx's own directories: an empty tmpfs, with back the single files
     * the guard reads (and the ring it writes). */
    for (size_t i = 0; i < mp->n_hide; i++)
        if (!mp->private_tmp || !policy_path_under(mp->hide[i], "/tmp"))
            jmount(&b, &first, mp->hide[i], "tmpfs", "tmpfs", "mode=755,ro");
    keeps(&b, &first, req, mp);
    /* The caller's FIFOs (sbx-serve's channels), under the private /tmp. */
    for (size_t i = 0; i < req->n_binds; i++)
        jmount(&b, &first, req->binds[i].dst, "bind", req->binds[i].src, "bind,rw");
    for (size_t i = 0; i < mp->n; i++) {
        switch (mp->m[i].kind) {
        case ISO_MNT_MASK_FILE:
            jmount(&b, &first, mp->m[i].path, "bind", empty_file, "bind,ro");
            break;
        case ISO_MNT_MASK_DIR:
            jmount(&b, &first, mp->m[i].path, "tmpfs", "tmpfs", "mode=000,ro");
            break;
        case ISO_MNT_RO:
            jmount(&b, &first, mp->m[i].path, "bind", mp->m[i].path, "rbind,ro");
            break;
        default:
            break;
        }
    }
    exec_denies(&b, &first, req);
    jlit(&b, "\n ],\n \"linux\": {\"namespaces\": [{\"type\": \"pid\"}, {\"type\": \"ipc\"}, "
             "{\"type\": \"uts\"}, {\"type\": \"mount\"}");
    if (net_none)
        jlit(&b, ", {\"type\": \"network\"}");
    /* sbx's seccomp list, enforced by the Sentry on the agent (runsc
     * --oci-seccomp): calls gVisor itself implements (io_uring, unshare of
     * a user namespace, keyrings, ...) are refused as natively. */
    char *sc = iso_seccomp_oci(true);
    if (sc == NULL) {
        free(b.s);
        iso_errf(err, errsz, "gvisor: out of memory");
        return NULL;
    }
    jlit(&b, "],\n \"seccomp\": ");
    jlit(&b, sc);
    free(sc);
    jlit(&b, "}\n}\n");
    if (b.oom) {
        free(b.s);
        iso_errf(err, errsz, "gvisor: out of memory");
        return NULL;
    }
    return b.s;
}

char **iso_gvisor_argv(const char *bundle, const char *id, bool net_none, bool host_fifo,
                       char *err, size_t errsz)
{
    const char *runsc = iso_runsc_path();
    char root[4200], bflag[4200], log[4200];
    if (runsc == NULL) {
        iso_errf(err, errsz, "gvisor: runsc is not installed (apt-get install runsc, "
                 "or scripts/deps.sh)");
        return NULL;
    }
    snprintf(root, sizeof root, "--root=%s/state", bundle);
    snprintf(bflag, sizeof bflag, "--bundle=%s", bundle);
    snprintf(log, sizeof log, "--debug-log=%s/" GVISOR_RUN_LOG, bundle);
    /* --debug-log with --debug-command=run (and no --debug): runsc run's
     * own info lines, ~40, into the bundle, among them the agent's wait
     * status (iso_child_cleanup); the Sentry and the gofer log nothing
     * more than without it. */
    const char *v[] = { runsc, "--rootless", "--ignore-cgroups", root,
                        net_none ? "--network=none" : "--network=host",
                        "--host-uds=none", host_fifo ? "--host-fifo=open" : "", "--oci-seccomp",
                        log, "--debug-command=run", "run", bflag, id, NULL };
    size_t n = sizeof v / sizeof v[0], k = 0;
    char **out = calloc(n, sizeof *out);
    if (out == NULL)
        goto oom;
    for (size_t i = 0; i + 1 < n; i++)
        if (v[i][0] && (out[k++] = strdup(v[i])) == NULL)   /* "": not this flag */
            goto oom;
    return out;
oom:
    iso_argv_free(out);
    iso_errf(err, errsz, "gvisor: out of memory");
    return NULL;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    (void)remove(path);
    return 0;
}

/* The agent's wait status as `runsc run` logged it on its way out
 * ("... main.go:NNN] Exiting with status: 15", the Go unix.WaitStatus as a
 * number): runsc itself exits 128+N when the agent died of signal N, the
 * shell's way, which an agent's own `exit 143` also gives. */
static void read_run_status(struct iso_child *child)
{
    static const char key[] = "] Exiting with status: ";
    char path[sizeof child->bundle + 32], line[512];
    FILE *f;

    snprintf(path, sizeof path, "%s/" GVISOR_RUN_LOG, child->bundle);
    f = fopen(path, "re");
    if (f == NULL)
        return;
    while (fgets(line, sizeof line, f)) {
        const char *k = strstr(line, key);
        const char *e = NULL;
        long long v;
        if (k == NULL)
            continue;
        line[strcspn(line, "\n")] = '\0';
        v = strtonum(k + sizeof key - 1, 0, 0xffff, &e);
        if (e == NULL) {
            child->run_status = (int)v;
            child->run_status_known = true;
        }
    }
    fclose(f);
}

void iso_child_cleanup(struct iso_child *child)
{
    if (child->bundle[0] == '\0')
        return;
    read_run_status(child);
    /* runsc's state of a sandbox that is gone, the bundle: ours alone. */
    (void)nftw(child->bundle, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    child->bundle[0] = '\0';
}

static int write_file(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return -1;
    size_t len = strlen(text);
    ssize_t w = len ? write(fd, text, len) : 0;
    int e = errno;
    close(fd);
    if (w != (ssize_t)len) {
        errno = w < 0 ? e : EIO;
        return -1;
    }
    return 0;
}

int iso_spawn_gvisor(const struct iso_request *req, struct iso_child *child,
                     char *err, size_t errsz)
{
    struct iso_mounts *mp = calloc(1, sizeof *mp);
    bool net_none = iso_net_loopback_only(req->policy);
    bool tty = iso_tty_foreground();
    char **argv = NULL, *config = NULL;
    char path[4300], id[64];
    const char *rt = req->runtime_dir ? req->runtime_dir : "/tmp";
    int pfd[2] = { -1, -1 }, rc = -1;
    pid_t pid;

    if (mp == NULL) {
        iso_errf(err, errsz, "gvisor: out of memory");
        return -1;
    }
    if (iso_runsc_path() == NULL) {
        iso_errf(err, errsz, "gvisor: runsc is not installed (apt-get install runsc, "
                 "or scripts/deps.sh)");
        goto out;
    }
    if (iso_mounts_plan(req, mp, err, errsz) < 0)
        goto out;
    if (mp->incomplete) {
        iso_errf(err, errsz, "gvisor: the deny-read cover is incomplete: %s; not starting",
                 mp->incomplete_why);
        goto out;
    }
    /* The bundle: private to us, in the runtime directory the agent cannot
     * see (hidden by the plan). */
    if ((size_t)snprintf(child->bundle, sizeof child->bundle, "%s/gvisor.XXXXXX", rt)
            >= sizeof child->bundle || mkdtemp(child->bundle) == NULL) {
        iso_errf(err, errsz, "gvisor: bundle directory in %s: %s", rt, strerror(errno));
        child->bundle[0] = '\0';
        goto out;
    }
    snprintf(path, sizeof path, "%s/empty", child->bundle);
    if (write_file(path, "", 0000) < 0) {
        iso_errf(err, errsz, "gvisor: %s: %s", path, strerror(errno));
        goto out;
    }
    config = iso_gvisor_config(req, mp, path, net_none, err, errsz);
    if (config == NULL)
        goto out;
    snprintf(path, sizeof path, "%s/config.json", child->bundle);
    if (write_file(path, config, 0600) < 0) {
        iso_errf(err, errsz, "gvisor: %s: %s", path, strerror(errno));
        goto out;
    }
    snprintf(path, sizeof path, "%s/state", child->bundle);
    if (mkdir(path, 0700) < 0) {
        iso_errf(err, errsz, "gvisor: %s: %s", path, strerror(errno));
        goto out;
    }
    /* The container id: unique per sandbox (the bundle's random suffix). */
    snprintf(id, sizeof id, "sbx-%d-%s", (int)getpid(), strrchr(child->bundle, '.') + 1);
    argv = iso_gvisor_argv(child->bundle, id, net_none, req->n_binds > 0, err, errsz);
    if (argv == NULL)
        goto out;
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        iso_errf(err, errsz, "pipe: %s", strerror(errno));
        goto out;
    }
    pid = fork();
    if (pid < 0) {
        iso_errf(err, errsz, "fork: %s", strerror(errno));
        goto out;
    }
    if (pid == 0) {
        const char *what = "";
        /* runsc itself starts with no environment of the agent's (no
         * LD_PRELOAD: the agent's variables are in config.json). */
        char *const envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
        int e;
        close(pfd[0]);
        /* No rlimits on runsc (the Sentry applies them to the agent); it
         * dies with sbx-guard, whatever kills sbx-guard. */
        if (setpgid(0, 0) < 0 || (tty && iso_take_terminal() < 0)
            || iso_child_basics(NULL, 0, pfd[1], &what) < 0
            || prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) {
            e = errno;
            goto child_fail;
        }
        /* gVisor writes a regular-file stdout or stderr at an offset of its
         * own, from 0, over what is there (sbx-guard's own lines); with
         * O_APPEND the host kernel puts its writes at the end. */
        for (int fd = 1; fd <= 2; fd++) {
            struct stat st;
            int fl = fcntl(fd, F_GETFL);
            if (fl >= 0 && !(fl & O_APPEND) && fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
                (void)fcntl(fd, F_SETFL, fl | O_APPEND);
        }
        /* argv[0] is runsc's path, the first flag added: a NULL argv never
         * gets here (the analyzer reaches NULL only through a count that
         * wraps around SIZE_MAX). */
        execve(argv[0], argv, envp); /* NOLINT(clang-analyzer-core.NonNullParamChecker) */
        e = errno;
        what = "exec runsc";
    child_fail:
        if (write(pfd[1], &e, sizeof e) < 0 || write(pfd[1], what, strlen(what)) < 0)
            _exit(127);
        _exit(127);
    }
    close(pfd[1]);
    pfd[1] = -1;
    (void)setpgid(pid, pid);
    {
        char buf[sizeof(int) + 200];
        ssize_t n;
        do
            n = read(pfd[0], buf, sizeof buf - 1);
        while (n < 0 && errno == EINTR);
        if (n > 0) {
            int e = 0;
            if (n >= (ssize_t)sizeof e)
                memcpy(&e, buf, sizeof e);
            buf[n] = '\0';
            iso_errf(err, errsz, "gvisor: %s: %s", n > (ssize_t)sizeof e ? buf + sizeof e : "?",
                     strerror(e));
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
            goto out;
        }
    }
    child->pid = pid;
    child->notify_fd = -1;
    /* The sandbox's processes are runsc's descendants, so sbx-guard's
     * sweep of its descendants ends them all; there is no init of ours to
     * kill first. */
    child->pidns = false;
    child->status_fd = -1;
    snprintf(child->layers, sizeof child->layers,
             "%sgvisor,pidns,mntns,ipcns,utsns%s,seccomp,rlimits",
             child->guard ? "guard," : "", net_none ? ",netns" : "");
    rc = 0;
out:
    if (rc < 0)
        iso_child_cleanup(child);
    if (pfd[0] >= 0)
        close(pfd[0]);
    if (pfd[1] >= 0)
        close(pfd[1]);
    iso_argv_free(argv);
    free(config);
    iso_mounts_free(mp);
    free(mp);
    return rc;
}
