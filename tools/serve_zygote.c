/*
 * serve_zygote.c — the fork server's server side (serve_zygote.h).
 */
#include "serve_zygote.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <dirent.h>

#include <bsd/stdlib.h>
#include <bsd/string.h>
#include <err.h>
#include <jansson.h>

#include "serve_pool.h"
#include "serve_text.h"

/* The zygote starts python with the pre-imports: as long as a pool
 * sandbox.  A fork answers in milliseconds; the bound is for a zygote that
 * hangs. */
#define READY_TIMEOUT_MS 30000
#define FORK_TIMEOUT_MS 10000

static uint64_t policy_limits_of(const struct policy *p)
{
    return policy_info(p)->limits.processes;
}

#define MAX_ZYGOTES 64

struct zygote {
    struct serve_box *box;      /* the zygote's sandbox, or NULL when down */
    pid_t host_pid;             /* the zygote's pid in our namespace */
    bool busy;                  /* serving a request (from take to discard) */
    bool forking;               /* its socket is in use (ask_fork) */
    struct serve_box *next;     /* its forked child waiting for a request, or NULL */
    pthread_t thread;           /* forks the next child (prepare_main) */
    bool thread_up;
    char last_err[256];         /* why the last preparation failed */
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t freed;       /* a prepared child became free */
    pthread_cond_t want;        /* a zygote needs its next child */
    struct zygote z[MAX_ZYGOTES];
    size_t n;
    int spawner;
    bool stop;
    const struct serve_spawn_cfg *cfg;
    char cg[128];               /* our pids cgroup ("" without) */
} zy = { .lock = PTHREAD_MUTEX_INITIALIZER, .freed = PTHREAD_COND_INITIALIZER,
         .want = PTHREAD_COND_INITIALIZER, .spawner = -1 };

static void close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}


/* Reads the small file PATH into BUF (NUL-terminated).  Length, or -1. */
static ssize_t read_small(const char *path, char *buf, size_t bufsz)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;

    if (fd < 0)
        return -1;
    n = read(fd, buf, bufsz - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return n;
}

static int write_small(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    ssize_t n;

    if (fd < 0)
        return -1;
    n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* The pid, in the innermost namespace of HOST_PID, of HOST_PID (the last
 * field of NSpid), or -1. */
static long inner_pid(long host_pid)
{
    char path[64], buf[2048];

    snprintf(path, sizeof path, "/proc/%ld/status", host_pid);
    if (read_small(path, buf, sizeof buf) < 0)
        return -1;
    char *l = strstr(buf, "\nNSpid:");
    if (l == NULL)
        return -1;
    l += 7;
    char *end = strchr(l, '\n');
    if (end)
        *end = '\0';
    char *last = strrchr(l, '\t');
    const char *e = NULL;
    long long v = strtonum(last ? last + 1 : l, 1, 1LL << 30, &e);
    return e ? -1 : (long)v;
}

/* The first child of HOST_PID (its main thread's), or -1. */
static long first_child(long host_pid)
{
    char path[96], buf[64];

    snprintf(path, sizeof path, "/proc/%ld/task/%ld/children", host_pid, host_pid);
    if (read_small(path, buf, sizeof buf) <= 0)
        return -1;
    buf[strcspn(buf, " \n")] = '\0';
    const char *e = NULL;
    long long v = strtonum(buf, 1, 1LL << 30, &e);
    return e ? -1 : (long)v;
}

/* A pidfd of the zygote's child whose pid in the zygote's namespace is
 * NS_PID, and its pid here in *HOST.  Found among the zygote's children
 * (/proc), checked again once the pidfd holds it (so a reused pid is never
 * taken).  The fd, or -1. */
static int child_pidfd(pid_t zhost, long ns_pid, pid_t *host)
{
    char path[96], *list = NULL;
    size_t cap = 1 << 16;
    int fd = -1;

    snprintf(path, sizeof path, "/proc/%ld/task/%ld/children", (long)zhost, (long)zhost);
    if ((list = malloc(cap)) == NULL || read_small(path, list, cap) < 0)
        goto out;
    for (char *save = NULL, *tok = strtok_r(list, " \n", &save); tok;
         tok = strtok_r(NULL, " \n", &save)) {
        const char *e = NULL;
        long hp = (long)strtonum(tok, 1, 1LL << 30, &e);
        if (e || inner_pid(hp) != ns_pid)
            continue;
        fd = (int)syscall(SYS_pidfd_open, hp, 0);
        if (fd >= 0 && inner_pid(hp) != ns_pid) {
            close(fd);
            fd = -1;
            continue;
        }
        *host = (pid_t)hp;
        break;
    }
out:
    free(list);
    return fd;
}

/* ---- a pids cgroup per request (as root: RLIMIT_NPROC does not hold host
 * root, docs/serve.md) ------------------------------------------------------ */

static void cg_setup(void)
{
    static const char *const bases[] = { "/sys/fs/cgroup/pids", "/sys/fs/cgroup" };
    struct stat st;

    zy.cg[0] = '\0';
    if (geteuid() != 0)
        return;
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++) {
        char probe[160];
        snprintf(probe, sizeof probe, "%s/cgroup.procs", bases[i]);
        if (stat(probe, &st) < 0)
            continue;
        snprintf(zy.cg, sizeof zy.cg, "%s/sbx-serve-%ld", bases[i], (long)getpid());
        if (mkdir(zy.cg, 0755) < 0 && errno != EEXIST) {
            zy.cg[0] = '\0';
            continue;
        }
        /* cgroup v2: our children get a pids.max only once the
         * controller is enabled below us (v1's pids hierarchy has it). */
        snprintf(probe, sizeof probe, "%s/cgroup.subtree_control", zy.cg);
        if (stat(probe, &st) == 0)
            (void)write_small(probe, "+pids");
        snprintf(probe, sizeof probe, "%s/pids.max", zy.cg);
        if (stat(probe, &st) == 0)
            return;
        rmdir(zy.cg);       /* a hierarchy without the pids controller */
        zy.cg[0] = '\0';
    }
    /* No silent hole: host root is exempt from RLIMIT_NPROC. */
    warnx("running as root without a pids cgroup (none at /sys/fs/cgroup/pids or "
          "/sys/fs/cgroup with the pids controller): the profile's process limit "
          "does not bind a request's processes; run sbx-serve as an unprivileged user");
}

/* Moves zygote B (HOST: its python) into a new pids cgroup of its own:
 * it runs one request at a time, so the cgroup bounds each request's
 * processes (and the zygote's few, which the limit counts in).  0, or -1
 * (errno). */
static int cg_enter(struct serve_box *b, pid_t host)
{
    char dir[192], path[224], num[32];
    uint64_t max = policy_limits_of(zy.cfg->policy);

    if (zy.cg[0] == '\0' || max == 0)
        return 0;
    max += 4;       /* the zygote itself */
    snprintf(dir, sizeof dir, "%s/zygote-%s", zy.cg, b->id);
    if (mkdir(dir, 0755) < 0)
        return -1;
    strlcpy(b->cgroup, dir, sizeof b->cgroup);
    snprintf(path, sizeof path, "%s/pids.max", dir);
    snprintf(num, sizeof num, "%llu", (unsigned long long)max);
    if (write_small(path, num) < 0)
        return -1;
    snprintf(path, sizeof path, "%s/cgroup.procs", dir);
    snprintf(num, sizeof num, "%ld", (long)host);
    return write_small(path, num);
}

void serve_zygote_cgroup_remove(struct serve_box *b)
{
    /* The kill is done; the kernel may still be tearing the processes
     * down: a few tries, then it stays for serve_zygote_stop. */
    for (int i = 0; i < 50 && b->cgroup[0]; i++) {
        if (rmdir(b->cgroup) == 0 || errno == ENOENT)
            b->cgroup[0] = '\0';
        else
            usleep(2000);
    }
}

/* Starts the sandbox of zygote Z (owned by the caller: busy, or during
 * start-up) without waiting for it; serve_zygote_ready waits. */
static int spawn_one(struct zygote *z, char *err, size_t errsz)
{
    struct serve_box *b = malloc(sizeof *b);

    if (b == NULL) {
        serve_errf(err, errsz, "out of memory");
        return -1;
    }
    if (serve_spawn_get(zy.spawner, SERVE_ZYGOTE, b, err, errsz) < 0) {
        free(b);
        return -1;
    }
    if (b->zsock < 0) {
        serve_errf(err, errsz, "the spawner sent a fork server without its socket");
        serve_pool_discard(b, 125, err);
        return -1;
    }
    z->box = b;
    return 0;
}

static int wait_one(struct zygote *z, char *err, size_t errsz)
{
    struct serve_box *b = z->box;

    z->box = NULL;
    if (serve_box_wait_ready(b, READY_TIMEOUT_MS, err, errsz) < 0) {
        serve_pool_discard(b, 125, err);
        return -1;
    }
    z->host_pid = (pid_t)first_child(b->pid);
    if (z->host_pid <= 0) {
        serve_errf(err, errsz, "cannot find the fork server's process");
        serve_pool_discard(b, 125, err);
        return -1;
    }
    if (cg_enter(b, z->host_pid) < 0) {
        serve_errf(err, errsz, "pids cgroup %s: %s", b->cgroup[0] ? b->cgroup : zy.cg,
                   strerror(errno));
        serve_pool_discard(b, 125, err);
        return -1;
    }
    z->box = b;
    return 0;
}

static int start_one(struct zygote *z, char *err, size_t errsz)
{
    return spawn_one(z, err, errsz) < 0 ? -1 : wait_one(z, err, errsz);
}

/* Z failed; it goes, with what it runs. */
static void down_one(struct zygote *z, const char *why)
{
    if (z->box == NULL)
        return;
    warnx("fork server %s: %s; starting another", z->box->name, why);
    serve_pool_discard(z->box, 125, why);
    z->box = NULL;
}

/* Sends the fork request (JSON and the child's four descriptors) and
 * reads the answer: 0 with *PIDFD and *PID, or -1 with ERR; *DEAD when the
 * zygote itself failed (not only this request). */
static const int *msg_fds(const struct serve_box *b)
{
    return b->zfds;
}

static int ask_fork(int zsock, const int *fds, const char *msg, long *pid, bool *dead,
                    char *err, size_t errsz)
{
    union { struct cmsghdr h; char buf[CMSG_SPACE(4 * sizeof(int))]; } u;
    struct iovec iov = { (void *)msg, strlen(msg) };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                         .msg_controllen = CMSG_SPACE(4 * sizeof(int)) };
    char reply[1024];
    json_t *o = NULL;
    int rc = -1;

    *dead = true;
    memset(&u, 0, sizeof u);
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(4 * sizeof(int));
    memcpy(CMSG_DATA(c), fds, 4 * sizeof(int));
    if (sendmsg(zsock, &mh, MSG_NOSIGNAL) < 0) {
        serve_errf(err, errsz, "the fork server is gone: %s", strerror(errno));
        return -1;
    }
    struct pollfd pf = { zsock, POLLIN, 0 };
    int r;
    do
        r = poll(&pf, 1, FORK_TIMEOUT_MS);
    while (r < 0 && errno == EINTR);
    if (r <= 0) {
        serve_errf(err, errsz, "the fork server did not answer");
        return -1;
    }
    union { struct cmsghdr h; char buf[CMSG_SPACE(4 * sizeof(int))]; } v;
    struct iovec riov = { reply, sizeof reply - 1 };
    struct msghdr rm = { .msg_iov = &riov, .msg_iovlen = 1, .msg_control = v.buf,
                         .msg_controllen = sizeof v.buf };
    ssize_t n = recvmsg(zsock, &rm, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    int got[4], ngot = 0;
    for (struct cmsghdr *k = CMSG_FIRSTHDR(&rm); n > 0 && k; k = CMSG_NXTHDR(&rm, k))
        if (k->cmsg_level == SOL_SOCKET && k->cmsg_type == SCM_RIGHTS) {
            size_t m = (k->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < m && ngot < 4; i++)
                memcpy(&got[ngot++], CMSG_DATA(k) + i * sizeof(int), sizeof(int));
        }
    if (n <= 0) {
        serve_errf(err, errsz, "the fork server %s", n == 0 ? "ended" : "failed to answer");
        goto out;
    }
    reply[n] = '\0';
    o = json_loads(reply, 0, NULL);
    const char *e = json_string_value(json_object_get(o, "error"));
    if (e != NULL) {
        *dead = false;          /* this request failed, the zygote goes on */
        serve_errf(err, errsz, "%s", e);
        goto out;
    }
    if (!json_is_integer(json_object_get(o, "pid"))) {
        serve_errf(err, errsz, "the fork server answered nonsense");
        goto out;
    }
    /* The child is found through /proc (serve_zygote_fork): a descriptor
     * sent back would cost the zygote a sendmsg, which the seccomp
     * supervisor must answer first. */
    *pid = (long)json_integer_value(json_object_get(o, "pid"));
    *dead = false;
    rc = 0;
out:
    for (int i = 0; i < ngot; i++)
        close(got[i]);
    json_decref(o);
    return rc;
}

/* Drops what BOX kept for its fork. */
static void fork_done(struct serve_box *b)
{
    for (int i = 0; i < 4; i++)
        close_fd(&b->zfds[i]);
    if (b->zmsg) {
        explicit_bzero(b->zmsg, strlen(b->zmsg));
        free(b->zmsg);
        b->zmsg = NULL;
    }
}

/* Registers the agent of zygote Z's next request and forks its child,
 * which enters its walls and waits for the code on its pipe (called by
 * Z's preparing thread only, while Z serves no request).  The box, or
 * NULL with ERR. */
static struct serve_box *prepare(struct zygote *z, char *err, size_t errsz)
{
    struct serve_box *b = calloc(1, sizeof *b);
    int out[2] = { -1, -1 }, errp[2] = { -1, -1 }, reqp[2] = { -1, -1 }, st[2] = { -1, -1 };
    char token[128] = "", *msg = NULL;
    json_t *o = NULL;
    long pid = 0;
    bool dead = false;
    int rc = -1;

    if (b == NULL) {
        serve_errf(err, errsz, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&b->ctl_lock, NULL);
    b->kind = SERVE_EXEC;
    b->group = true;
    for (int i = 0; i < 4; i++)
        b->zfds[i] = -1;
    b->pidfd = b->out = b->err = b->req = b->rep = -1;
    b->notify = b->status = b->ctl = b->zsock = -1;
    serve_new_id(b->id, sizeof b->id);
    snprintf(b->name, sizeof b->name, "serve-%s", b->id);
    /* The request's own agent, registered before its child exists: the
     * child's first event already belongs to it. */
    if (zy.cfg->audit) {
        char command[4096];
        snprintf(command, sizeof command, "%s -I -B %s zygote (a fork for one request)",
                 zy.cfg->python, zy.cfg->runner);
        if (serve_spawn_register(zy.cfg, b->name, command, &b->ctl, b->run_id,
                                 sizeof b->run_id, token, sizeof token, err, errsz) < 0)
            goto fail;
        strlcpy(b->token, token, sizeof b->token);
    } else {
        /* No store: the runner still needs non-empty strings. */
        strlcpy(b->run_id, "-", sizeof b->run_id);
        strlcpy(token, "-", sizeof token);
    }
    if (pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 || pipe2(reqp, O_CLOEXEC) < 0
        || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, st) < 0) {
        serve_errf(err, errsz, "pipe: %s", strerror(errno));
        goto fail;
    }
    o = json_pack("{s:s, s:s, s:s, s:s}", "id", b->id, "agent", b->name, "run_id", b->run_id,
                  "token", token);
    msg = o ? json_dumps(o, JSON_COMPACT) : NULL;
    explicit_bzero(token, sizeof token);
    if (msg == NULL) {
        serve_errf(err, errsz, "out of memory");
        goto fail;
    }
    b->zmsg = msg;
    msg = NULL;
    b->zfds[0] = reqp[0];
    b->zfds[1] = out[1];
    b->zfds[2] = errp[1];
    b->zfds[3] = st[1];
    b->out = out[0];
    b->err = errp[0];
    b->req = reqp[1];
    b->status = st[0];
    reqp[0] = out[1] = errp[1] = st[1] = -1;
    out[0] = errp[0] = reqp[1] = st[0] = -1;

    pthread_mutex_lock(&zy.lock);
    z->forking = true;
    pthread_mutex_unlock(&zy.lock);
    for (int attempt = 0; attempt < 2 && rc < 0; attempt++) {
        if (zy.stop) {
            serve_errf(err, errsz, "the service is stopping");
            break;
        }
        if (z->box == NULL && start_one(z, err, errsz) < 0)
            break;
        rc = ask_fork(z->box->zsock, msg_fds(b), b->zmsg, &pid, &dead, err, errsz);
        if (rc < 0 && !dead)
            break;
        if (rc < 0)
            down_one(z, err);
    }
    pid_t zhost = z->box ? z->host_pid : 0;
    if (rc == 0 && z->box != NULL)     /* it is: ask_fork ran on it */
        strlcpy(b->layers, z->box->layers, sizeof b->layers);
    pthread_mutex_lock(&zy.lock);
    z->forking = false;
    pthread_mutex_unlock(&zy.lock);
    fork_done(b);
    if (rc < 0)
        goto fail;
    /* Its pidfd, for the timeout and sbx-kill: the child waits for its
     * code, so it is there (unless something killed it). */
    pid_t host = 0;
    b->pidfd = child_pidfd(zhost, pid, &host);
    if (b->pidfd < 0) {
        serve_errf(err, errsz, "the fork server's child %ld is gone", pid);
        goto fail;
    }
    b->pid = host;
    b->ready = true;
    json_decref(o);
    return b;
fail:
    explicit_bzero(token, sizeof token);
    {
        int *all[] = { &out[0], &out[1], &errp[0], &errp[1], &reqp[0], &reqp[1], &st[0], &st[1] };
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            close_fd(all[i]);
    }
    if (msg)
        explicit_bzero(msg, strlen(msg));
    free(msg);
    json_decref(o);
    serve_pool_discard(b, 125, err);
    return NULL;
}

/* Zygote Z's preparing thread: whenever Z serves no request and has no
 * child waiting, it registers the next request's agent and forks its
 * child, off the requests' path (docs/serve.md "The fork server"). */
static void *prepare_main(void *arg)
{
    struct zygote *z = arg;
    unsigned failures = 0;

    pthread_mutex_lock(&zy.lock);
    while (!zy.stop) {
        if (z->busy || z->next != NULL) {
            pthread_cond_wait(&zy.want, &zy.lock);
            continue;
        }
        pthread_mutex_unlock(&zy.lock);
        char err[512];
        struct serve_box *b = prepare(z, err, sizeof err);
        pthread_mutex_lock(&zy.lock);
        if (b != NULL) {
            failures = 0;
            z->next = b;
            pthread_cond_broadcast(&zy.freed);
            continue;
        }
        strlcpy(z->last_err, err, sizeof z->last_err);
        if (failures++ % 20 == 0)
            warnx("fork server: %s", err);
        pthread_cond_broadcast(&zy.freed);     /* a waiting request may give up */
        struct timespec ts;
        serve_deadline(&ts, failures < 5 ? 50 : 500);
        if (!zy.stop)
            (void)pthread_cond_timedwait(&zy.want, &zy.lock, &ts);
    }
    pthread_mutex_unlock(&zy.lock);
    return NULL;
}

int serve_zygote_start(int spawner, const struct serve_spawn_cfg *cfg, size_t n,
                       char *err, size_t errsz)
{
    zy.spawner = spawner;
    zy.cfg = cfg;
    zy.n = n < 1 ? 1 : n > MAX_ZYGOTES ? MAX_ZYGOTES : n;
    cg_setup();
    /* All started first, then waited for: their pythons start in parallel. */
    for (size_t i = 0; i < zy.n; i++)
        if (spawn_one(&zy.z[i], err, errsz) < 0)
            return -1;
    for (size_t i = 0; i < zy.n; i++)
        if (wait_one(&zy.z[i], err, errsz) < 0)
            return -1;
    for (size_t i = 0; i < zy.n; i++) {
        if (pthread_create(&zy.z[i].thread, NULL, prepare_main, &zy.z[i]) != 0) {
            serve_errf(err, errsz, "cannot start the fork server's threads");
            return -1;
        }
        zy.z[i].thread_up = true;
    }
    return 0;
}

struct serve_box *serve_zygote_take(int timeout_ms, char *err, size_t errsz)
{
    struct timespec ts;
    struct serve_box *b = NULL;
    size_t slot = 0;

    serve_deadline(&ts, timeout_ms);
    /* A free zygote with its child waiting: one request at a time each
     * (the gate admits at most as many requests as there are zygotes). */
    pthread_mutex_lock(&zy.lock);
    for (;;) {
        for (slot = 0; slot < zy.n && (zy.z[slot].busy || zy.z[slot].next == NULL); slot++)
            ;
        if (slot < zy.n || zy.stop)
            break;
        if (pthread_cond_timedwait(&zy.freed, &zy.lock, &ts) == ETIMEDOUT)
            break;
    }
    if (slot < zy.n) {
        b = zy.z[slot].next;
        zy.z[slot].next = NULL;
        zy.z[slot].busy = true;
        b->zslot = (int)slot + 1;
    } else {
        const char *why = "";
        for (size_t i = 0; i < zy.n && !why[0]; i++)
            why = zy.z[i].last_err;
        serve_errf(err, errsz, "no fork server child became ready within %d ms%s%s",
                   timeout_ms, why[0] ? ": " : "", why);
    }
    pthread_mutex_unlock(&zy.lock);
    return b;
}

void serve_zygote_release(struct serve_box *box)
{
    if (box->zslot <= 0)
        return;
    fork_done(box);
    pthread_mutex_lock(&zy.lock);
    zy.z[box->zslot - 1].busy = false;
    /* Its next child is forked now: the zygote takes the order once this
     * request's processes are gone and /tmp is empty. */
    pthread_cond_broadcast(&zy.want);
    pthread_mutex_unlock(&zy.lock);
    box->zslot = 0;
}

size_t serve_zygote_ctl_fds(int *fds, size_t max)
{
    size_t n = 0;

    pthread_mutex_lock(&zy.lock);
    for (size_t i = 0; i < zy.n && n < max; i++)
        fds[n++] = zy.z[i].box && !zy.z[i].forking ? zy.z[i].box->ctl : -1;
    for (size_t i = 0; i < zy.n && n < max; i++)
        fds[n++] = zy.z[i].next && !zy.z[i].busy ? zy.z[i].next->ctl : -1;
    pthread_mutex_unlock(&zy.lock);
    return n;
}

/* FD has something to read (or its end): the poll that said so may have
 * seen another box with the same descriptor number, since replaced. */
static bool readable(int fd)
{
    struct pollfd pf = { fd, POLLIN, 0 };

    return fd >= 0 && poll(&pf, 1, 0) == 1 && (pf.revents & (POLLIN | POLLHUP | POLLERR));
}

/* A kill order for zygote I's waiting child (I >= the number of zygotes:
 * the child of zygote I - n) or for zygote I itself, whose waiting child
 * goes with it (sbx-kill --all reaches them too): confirmed and ended;
 * the preparing thread starts or forks another. */
void serve_zygote_on_ctl(size_t i)
{
    struct serve_box *b = NULL, *next = NULL;
    bool child = i >= zy.n;

    pthread_mutex_lock(&zy.lock);
    if (child) {
        i -= zy.n;
        if (i < zy.n && zy.z[i].next != NULL && !zy.z[i].busy && readable(zy.z[i].next->ctl)) {
            b = zy.z[i].next;
            zy.z[i].next = NULL;
        }
    } else if (zy.z[i].box != NULL && !zy.z[i].forking && readable(zy.z[i].box->ctl)) {
        b = zy.z[i].box;
        zy.z[i].box = NULL;
        if (!zy.z[i].busy) {
            next = zy.z[i].next;
            zy.z[i].next = NULL;
        }
    }
    pthread_mutex_unlock(&zy.lock);
    if (b == NULL)
        return;
    if (child) {
        serve_pool_kill_unused(b, "killed an idle sandbox", "killed while idle");
    } else {
        bool ordered = serve_pool_kill_unused(b, "killed the fork server", "killed");
        if (next != NULL)
            serve_pool_discard(next, 137, ordered ? "its fork server was killed"
                                                  : "its fork server ended: sbx-auditd went away");
    }
    pthread_mutex_lock(&zy.lock);
    pthread_cond_broadcast(&zy.want);
    pthread_mutex_unlock(&zy.lock);
}

size_t serve_zygote_up(void)
{
    size_t up = 0;

    pthread_mutex_lock(&zy.lock);
    for (size_t i = 0; i < zy.n; i++)
        up += zy.z[i].box != NULL && zy.z[i].next != NULL && !zy.z[i].busy;
    pthread_mutex_unlock(&zy.lock);
    return up;
}

void serve_zygote_stop(void)
{
    pthread_mutex_lock(&zy.lock);
    zy.stop = true;
    pthread_cond_broadcast(&zy.want);
    pthread_cond_broadcast(&zy.freed);
    pthread_mutex_unlock(&zy.lock);
    /* A thread may be in a fork order: bounded by FORK_TIMEOUT_MS. */
    for (size_t i = 0; i < zy.n; i++)
        if (zy.z[i].thread_up) {
            pthread_join(zy.z[i].thread, NULL);
            zy.z[i].thread_up = false;
        }
    pthread_mutex_lock(&zy.lock);
    for (size_t i = 0; i < zy.n; i++) {
        if (zy.z[i].next != NULL) {
            serve_pool_discard(zy.z[i].next, 0, "the service stopped before a request");
            zy.z[i].next = NULL;
        }
        if (zy.z[i].box != NULL) {
            serve_pool_discard(zy.z[i].box, 0, "the service stopped");
            zy.z[i].box = NULL;
        }
    }
    if (zy.cg[0]) {
        /* What serve_zygote_cgroup_remove left (its processes were still
         * going), then ours. */
        char cmd[512];
        DIR *d = opendir(zy.cg);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL)
            if (strncmp(e->d_name, "zygote-", 7) == 0) {
                snprintf(cmd, sizeof cmd, "%s/%s", zy.cg, e->d_name);
                (void)rmdir(cmd);
            }
        if (d)
            closedir(d);
        (void)rmdir(zy.cg);
    }
    pthread_mutex_unlock(&zy.lock);
}
