/*
 * serve_spawn.c — the spawner process and the server's side of it
 * (serve_spawn.h).
 *
 * The spawner, for each request, in this order: registers the agent (so
 * the preload's rings are attributed to it from the first open), makes the
 * sandbox's five descriptors (fd 0 /dev/null, 1 and 2 pipes to the server,
 * 3 and 4 the runner's request and reply pipes), starts the runner under
 * the kernel layer with an emptied environment, writes the configuration
 * line (a pipe holds it: the runner reads it once python is up), closes
 * its own copies of the sandbox's ends and hands the rest to the server.
 * A failure is answered to the server with its text; the spawner goes on.
 */
#include "serve_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bsd/string.h>
#include <jansson.h>
#include <pthread.h>

#include "ctl.h"
#include "guard_env.h"
#include "paths.h"
#include "serve_gvisor.h"
#include "serve_sup.h"
#include "serve_text.h"

#ifndef PIDFD_SIGNAL_PROCESS_GROUP
#define PIDFD_SIGNAL_PROCESS_GROUP (1U << 2)    /* linux/pidfd.h, Linux 6.9 */
#endif

#define NFDS 9                  /* out, err, req, rep, notify, status, pidfd, ctl, zsock */

struct spawn_msg {              /* server -> spawner */
    int kind;
};

struct spawn_reply {            /* spawner -> server, with the fds */
    int ok;
    pid_t pid;
    unsigned present;           /* bit i: fd i of NFDS was sent */
    char id[24], name[40], run_id[64], layers[256];
    char token[72];             /* the run's secret, for serve_box_end_row */
    char err[512];
};

void serve_new_id(char *out, size_t outsz)
{
    unsigned char r[8];

    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t v = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
        memcpy(r, &v, sizeof r);
    }
    snprintf(out, outsz, "%02x%02x%02x%02x%02x%02x%02x%02x",
             r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
}

static int send_reply(int sock, const struct spawn_reply *rep, const int *fds)
{
    struct iovec iov = { (void *)rep, sizeof *rep };
    union { struct cmsghdr h; char buf[CMSG_SPACE(NFDS * sizeof(int))]; } u;
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
    int list[NFDS];
    unsigned n = 0;

    for (unsigned i = 0; i < NFDS; i++)
        if (rep->present & (1u << i))
            list[n++] = fds[i];
    if (n) {
        memset(&u, 0, sizeof u);
        msg.msg_control = u.buf;
        msg.msg_controllen = CMSG_SPACE(n * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(n * sizeof(int));
        memcpy(CMSG_DATA(c), list, n * sizeof(int));
    }
    return sendmsg(sock, &msg, MSG_NOSIGNAL) < 0 ? -1 : 0;
}

/* The environment SERVE-PROTOCOL promises the runner: the preload's
 * variables and PATH, LANG, HOME=TMPDIR=/tmp (the sandbox's private tmpfs);
 * nothing of sbx-serve's own. */
static char **sandbox_env(const struct serve_spawn_cfg *cfg, const char *name,
                          const char *run_id, const char *token)
{
    static char *const none[] = { NULL };
    static const char *const fixed[] = {
        "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/tmp", "TMPDIR=/tmp",
    };
    char **env, **more;
    size_t n = 0;

    if (cfg->preload) {
        struct guard_env_vars vars = {
            .preload = cfg->preload, .policy_copy = cfg->policy_copy,
            .policy_origin = cfg->policy_origin, .policy_image = cfg->policy_image,
            .workspace = cfg->workspace, .home = "/tmp",
            .runtime_dir = cfg->runtime_dir, .audit_db = cfg->audit_db,
            .agent = name, .agent_id = run_id, .agent_token = token, .notify = false,
        };
        env = guard_env_build(cfg->policy, none, &vars);
    } else {
        env = calloc(1, sizeof *env);
    }
    if (env == NULL)
        return NULL;
    while (env[n])
        n++;
    more = reallocarray(env, n + 5, sizeof *env);
    if (more == NULL) {
        guard_env_free(env);
        return NULL;
    }
    env = more;
    for (size_t i = 0; i < 4; i++) {
        if ((env[n] = strdup(fixed[i])) == NULL) {
            guard_env_free(env);
            return NULL;
        }
        env[++n] = NULL;
    }
    return env;
}

static void close_all(int *fds, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (fds[i] >= 0) {
            close(fds[i]);
            fds[i] = -1;
        }
}

static const char *kind_arg(int kind)
{
    return kind == SERVE_CHECK ? "check" : kind == SERVE_ZYGOTE ? "zygote" : "exec";
}

int serve_spawn_register(const struct serve_spawn_cfg *cfg, const char *name,
                         const char *command, int *ctl, char *run_id, size_t run_idsz,
                         char *token, size_t tokensz, char *err, size_t errsz)
{
    const struct policy_info *pi = policy_info(cfg->policy);
    char why[512];
    struct sbx_agent_reg reg = {
        .name = name, .policy_name = pi->name, .policy_sha256 = pi->sha256,
        .policy_file = pi->file, .workspace = cfg->workspace, .command = command,
        .layers = iso_mode_name(cfg->mode), .guard_pid = getpid(),
    };

    if ((*ctl = sbx_ctl_open(true, why, sizeof why)) < 0) {
        serve_errf(err, errsz, "cannot reach sbx-auditd: %s", why);
        return -1;
    }
    if (sbx_ctl_register(*ctl, &reg, run_id, run_idsz, token, tokensz, why, sizeof why) < 0) {
        serve_errf(err, errsz, "cannot register agent '%s': %s", name, why);
        sbx_ctl_close(*ctl);
        *ctl = -1;
        return -1;
    }
    return 0;
}

/* One sandbox for the server: everything in the file's header comment. */
static void spawn_one(const struct serve_spawn_cfg *cfg, int sock, int kind)
{
    struct spawn_reply rep;
    int fds[NFDS], mine[6] = { -1, -1, -1, -1, -1, -1 };
    int zs[2] = { -1, -1 };
    size_t nmine = kind == SERVE_ZYGOTE ? 6 : 5;
    int out[2] = { -1, -1 }, errp[2] = { -1, -1 }, reqp[2] = { -1, -1 }, repp[2] = { -1, -1 };
    char token[128] = "", why[512] = "";
    char **env = NULL;
    struct iso_child child;
    int ctl = -1;

    memset(&rep, 0, sizeof rep);
    for (int i = 0; i < NFDS; i++)
        fds[i] = -1;
    serve_new_id(rep.id, sizeof rep.id);
    snprintf(rep.name, sizeof rep.name, "%s%s",
             kind == SERVE_CHECK ? "serve-check-" : kind == SERVE_ZYGOTE ? "serve-zygote-"
                                                                         : "serve-", rep.id);

    if (cfg->audit) {
        char command[4096];
        snprintf(command, sizeof command, "%s -I -B %s %s", cfg->python, cfg->runner,
                 kind_arg(kind));
        if (serve_spawn_register(cfg, rep.name, command, &ctl, rep.run_id, sizeof rep.run_id,
                                 token, sizeof token, rep.err, sizeof rep.err) < 0)
            goto fail;
    }
    env = sandbox_env(cfg, rep.name, rep.run_id, token);
    if (cfg->audit)
        strlcpy(rep.token, token, sizeof rep.token);
    explicit_bzero(token, sizeof token);
    if (env == NULL) {
        serve_errf(rep.err, sizeof rep.err, "out of memory");
        goto fail;
    }
    if (pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 || pipe2(reqp, O_CLOEXEC) < 0
        || pipe2(repp, O_CLOEXEC) < 0
        || (mine[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0
        || (kind == SERVE_ZYGOTE
            && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, zs) < 0)) {
        serve_errf(rep.err, sizeof rep.err, "pipe: %s", strerror(errno));
        goto fail;
    }
    mine[1] = out[1];
    mine[2] = errp[1];
    mine[3] = reqp[0];
    mine[4] = repp[1];
    mine[5] = zs[1];
    {
        char *argv[] = { (char *)cfg->python, "-I", "-B", (char *)cfg->runner,
                         (char *)kind_arg(kind), NULL };
        struct iso_request req = {
            .policy = cfg->policy, .mode = cfg->mode, .workspace = cfg->workspace,
            .runtime_dir = cfg->runtime_dir, .audit_db = cfg->audit_db,
            .preload = cfg->preload, .policy_copy = cfg->policy_copy,
            .policy_image = cfg->policy_image, .argv = argv, .envp = env,
            .child_fds = mine, .n_child_fds = nmine, .no_inet_sockets = true,
        };
        /* The hook of --isolation gvisor (serve_gvisor.h): a keeper
         * process relays the runner's channels and the guard's ring. */
        int src = cfg->mode == ISO_GVISOR
                  ? serve_gvisor_spawn(&req, rep.run_id, &child, why, sizeof why)
                  : iso_spawn(&req, &child, why, sizeof why);
        if (src < 0) {
            serve_errf(rep.err, sizeof rep.err, "cannot start the sandbox: %s", why);
            goto fail;
        }
    }
    close_all(mine, 6);
    out[1] = errp[1] = reqp[0] = repp[1] = zs[1] = -1;
    /* From here a failure kills the started sandbox; its channels are
     * closed with the rest (fds[]). */
    fds[4] = child.notify_fd;
    fds[5] = child.status_fd;
    fds[6] = (int)syscall(SYS_pidfd_open, child.pid, 0);
    if (fds[6] < 0) {
        serve_errf(rep.err, sizeof rep.err, "pidfd_open: %s", strerror(errno));
        kill(child.pid, SIGKILL);
        goto fail;
    }
    /* The configuration waits in the pipe until the runner reads it. */
    size_t len = strlen(cfg->config_line);
    if (write(reqp[1], cfg->config_line, len) != (ssize_t)len) {
        serve_errf(rep.err, sizeof rep.err, "write the runner's configuration: %s", strerror(errno));
        kill(child.pid, SIGKILL);
        goto fail;
    }
    fds[0] = out[0];
    fds[1] = errp[0];
    fds[2] = reqp[1];
    fds[3] = repp[0];
    fds[7] = ctl;
    fds[8] = zs[0];
    out[0] = errp[0] = reqp[1] = repp[0] = zs[0] = -1;     /* fds[] owns them now */
    rep.ok = 1;
    rep.pid = child.pid;
    strlcpy(rep.layers, child.layers, sizeof rep.layers);
    for (int i = 0; i < NFDS; i++)
        if (fds[i] >= 0)
            rep.present |= 1u << i;
    (void)send_reply(sock, &rep, fds);
    close_all(fds, NFDS);
    guard_env_free(env);
    return;
fail:
    /* mine[1..4] are the pipes' child ends, closed below with the rest. */
    if (mine[0] >= 0)
        close(mine[0]);
    {
        int rest[] = { out[0], out[1], errp[0], errp[1], reqp[0], reqp[1], repp[0], repp[1],
                       zs[0], zs[1] };
        close_all(rest, sizeof rest / sizeof rest[0]);
    }
    close_all(fds, NFDS);
    if (ctl >= 0) {
        (void)sbx_ctl_exit(ctl, 125, rep.err);
        sbx_ctl_close(ctl);
    }
    guard_env_free(env);
    rep.ok = 0;
    rep.present = 0;
    (void)send_reply(sock, &rep, fds);
}

static __attribute__((noreturn)) void spawner_main(const struct serve_spawn_cfg *cfg, int sock)
{
    /* The server's end of the socket closing ends us; so does its death. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, SIG_IGN);    /* the server decides when we stop */
    signal(SIGTERM, SIG_DFL);
    /* Nothing of the server but our socket: the sandboxes we start must
     * not hold its listening socket or another sandbox's pipes. */
    if (sock > 3)
        (void)syscall(SYS_close_range, 3U, (unsigned)sock - 1, 0U);
    (void)syscall(SYS_close_range, (unsigned)sock + 1, ~0U, 0U);
    /* Relative paths of the sandbox are relative to its workspace. */
    if (chdir(cfg->workspace) < 0)
        _exit(1);
    for (;;) {
        struct pollfd pf = { sock, POLLIN, 0 };
        struct spawn_msg m;
        int r = poll(&pf, 1, 200);

        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
        if (r <= 0)
            continue;
        ssize_t n = recv(sock, &m, sizeof m, 0);
        if (n == 0 || (n < 0 && errno != EINTR))
            break;
        if (n == (ssize_t)sizeof m)
            spawn_one(cfg, sock, m.kind);
    }
    _exit(0);
}

int serve_spawner_start(const struct serve_spawn_cfg *cfg, int *sock, pid_t *pid,
                        char *err, size_t errsz)
{
    int sp[2];

    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
        serve_errf(err, errsz, "socketpair: %s", strerror(errno));
        return -1;
    }
    fflush(NULL);
    *pid = fork();
    if (*pid < 0) {
        serve_errf(err, errsz, "fork: %s", strerror(errno));
        close(sp[0]);
        close(sp[1]);
        return -1;
    }
    if (*pid == 0) {
        close(sp[0]);
        spawner_main(cfg, sp[1]);
    }
    close(sp[1]);
    *sock = sp[0];
    return 0;
}

static pthread_mutex_t spawn_lock = PTHREAD_MUTEX_INITIALIZER;

int serve_spawn_get(int sock, enum serve_kind kind, struct serve_box *box,
                    char *err, size_t errsz)
{
    struct spawn_msg m = { kind };
    struct spawn_reply rep;
    struct iovec iov = { &rep, sizeof rep };
    union { struct cmsghdr h; char buf[CMSG_SPACE(NFDS * sizeof(int))]; } u;
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
                          .msg_control = u.buf, .msg_controllen = sizeof u.buf };
    int fds[NFDS], got[NFDS];
    size_t ngot = 0;
    ssize_t n;

    memset(box, 0, sizeof *box);
    pthread_mutex_init(&box->ctl_lock, NULL);
    box->pidfd = box->out = box->err = box->req = box->rep = -1;
    box->notify = box->status = box->ctl = box->zsock = -1;
    pthread_mutex_lock(&spawn_lock);
    if (send(sock, &m, sizeof m, MSG_NOSIGNAL) != (ssize_t)sizeof m) {
        pthread_mutex_unlock(&spawn_lock);
        serve_errf(err, errsz, "the spawner is gone: %s", strerror(errno));
        return -1;
    }
    do
        n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    pthread_mutex_unlock(&spawn_lock);
    if (n != (ssize_t)sizeof rep) {
        serve_errf(err, errsz, "the spawner is gone");
        return -1;
    }
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < k && ngot < NFDS; i++)
                memcpy(&got[ngot++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        }
    rep.err[sizeof rep.err - 1] = '\0';
    if (!rep.ok) {
        for (size_t i = 0; i < ngot; i++)
            close(got[i]);
        serve_errf(err, errsz, "%s", rep.err);
        return -1;
    }
    for (size_t i = 0, k = 0; i < NFDS; i++)
        fds[i] = (rep.present & (1u << i)) && k < ngot ? got[k++] : -1;
    box->kind = kind;
    box->pid = rep.pid;
    box->out = fds[0];
    box->err = fds[1];
    box->req = fds[2];
    box->rep = fds[3];
    box->notify = fds[4];
    box->status = fds[5];
    box->pidfd = fds[6];
    box->ctl = fds[7];
    box->zsock = fds[8];
    rep.id[sizeof rep.id - 1] = rep.name[sizeof rep.name - 1] = '\0';
    rep.run_id[sizeof rep.run_id - 1] = rep.layers[sizeof rep.layers - 1] = '\0';
    strlcpy(box->id, rep.id, sizeof box->id);
    strlcpy(box->name, rep.name, sizeof box->name);
    strlcpy(box->run_id, rep.run_id, sizeof box->run_id);
    rep.token[sizeof rep.token - 1] = '\0';
    strlcpy(box->token, rep.token, sizeof box->token);
    explicit_bzero(rep.token, sizeof rep.token);
    strlcpy(box->layers, rep.layers, sizeof box->layers);
    if (box->out < 0 || box->err < 0 || box->req < 0 || box->rep < 0 || box->pidfd < 0
        || serve_sup_add(box) < 0) {
        serve_errf(err, errsz, "the spawner sent an incomplete sandbox");
        serve_box_close(box);
        return -1;
    }
    return 0;
}

static long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

int serve_box_readline(struct serve_box *box, int timeout_ms, char **line)
{
    long deadline = now_ms() + timeout_ms;

    for (;;) {
        char *nl = box->len ? memchr(box->buf, '\n', box->len) : NULL;
        if (nl) {
            /* The previous line (consumed) was cut off in the last call. */
            *nl = '\0';
            *line = box->buf;
            return 1;
        }
        if (box->cap - box->len < 4096) {
            /* A line is at most 16 MiB (docs/serve-protocol.md). */
            size_t cap = box->cap ? box->cap * 2 : 8192;
            if (cap > (16u << 20) + 8192) {
                errno = E2BIG;
                return -1;
            }
            char *b = realloc(box->buf, cap);
            if (b == NULL)
                return -1;
            box->buf = b;
            box->cap = cap;
        }
        long left = deadline - now_ms();
        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        struct pollfd pf = { box->rep, POLLIN, 0 };
        int r = poll(&pf, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            continue;
        ssize_t n = read(box->rep, box->buf + box->len, box->cap - box->len);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            return n == 0 ? 0 : -1;
        box->len += (size_t)n;
    }
}

/* Drops the line serve_box_readline returned last. */
static void consume_line(struct serve_box *box)
{
    char *end = memchr(box->buf, '\0', box->len);
    size_t used = end ? (size_t)(end - box->buf) + 1 : box->len;

    memmove(box->buf, box->buf + used, box->len - used);
    box->len -= used;
}

int serve_box_wait_ready(struct serve_box *box, int timeout_ms, char *err, size_t errsz)
{
    char *line;
    int r = serve_box_readline(box, timeout_ms, &line);

    if (r <= 0) {
        serve_errf(err, errsz, "the runner did not start: %s",
             r == 0 ? "it ended" : strerror(errno));
        return -1;
    }
    json_t *o = json_loads(line, 0, NULL);
    bool ok = json_is_true(json_object_get(o, "ready"));
    if (!ok) {
        const char *e = json_string_value(json_object_get(o, "error"));
        serve_errf(err, errsz, "the runner did not start: %.400s", e ? e : line);
    }
    json_decref(o);
    consume_line(box);
    if (!ok)
        return -1;
    box->ready = true;
    return 0;
}

void serve_box_consume(struct serve_box *box)
{
    consume_line(box);
}

int serve_box_kill(struct serve_box *box)
{
    if (box->pidfd < 0) {
        errno = ESRCH;
        return -1;
    }
    return (int)syscall(SYS_pidfd_send_signal, box->pidfd, SIGKILL, NULL,
                        box->group ? PIDFD_SIGNAL_PROCESS_GROUP : 0U);
}

void serve_box_row(struct serve_box *box, const struct sbx_event_desc *ev)
{
    if (!box->token[0])
        return;     /* no store */
    if (box->rows == NULL && (box->rows = guard_sup_open(true)) == NULL) {
        /* Out of memory: sent, but not kept for a restarted daemon. */
        if (box->ctl >= 0)
            (void)sbx_ctl_event_async(box->ctl, ev);
        return;
    }
    /* Full (a box that ran 100,000 execs unacknowledged): sent as before,
     * not kept. */
    if (guard_sup_record(box->rows, box->ctl, ev) < 0 && box->ctl >= 0)
        (void)sbx_ctl_event_async(box->ctl, ev);
}

/* The daemon that registered BOX died: its run is taken back from a new
 * one, which gets every row kept and then the end. */
static int end_after_restart(struct serve_box *box, int status, const char *detail,
                             char *err, size_t errsz)
{
    char why[512], d[640];
    int fd = sbx_ctl_open(true, why, sizeof why);

    if (fd < 0) {
        serve_errf(err, errsz, "cannot reach sbx-auditd: %s", why);
        return -1;
    }
    int rc = -1;
    if (sbx_ctl_resume(fd, box->name, box->run_id, box->token, getpid(), why, sizeof why) < 0) {
        serve_errf(err, errsz, "cannot take run %s back from the restarted sbx-auditd: %s",
                   box->run_id, why);
    } else if (guard_sup_resend(box->rows, fd) < 0) {
        serve_errf(err, errsz, "the restarted sbx-auditd hung up");
    } else {
        snprintf(d, sizeof d, "%s; recorded after sbx-auditd restarted", detail);
        rc = sbx_ctl_exit(fd, status, d);
        if (rc < 0)
            serve_errf(err, errsz, "the restarted sbx-auditd did not store the end");
    }
    sbx_ctl_close(fd);
    return rc;
}

int serve_box_end_row(struct serve_box *box, int status, const char *detail, char *err,
                      size_t errsz)
{
    int rc = 0;

    pthread_mutex_lock(&box->ctl_lock);
    /* The end is stored durably before its answer: every row sent before
     * it on the same connection is stored with it. */
    if (box->token[0] && (box->ctl < 0 || sbx_ctl_exit(box->ctl, status, detail) < 0)) {
        /* Every box of the service finds the daemon gone at once, and each
         * may start one: the daemons that lose the race hang up on whoever
         * reached them first.  A few tries. */
        for (int i = 0; i < 5; i++) {
            rc = end_after_restart(box, status, detail, err, errsz);
            if (rc == 0)
                break;
            struct timespec ts = { 0, 50000000L * (i + 1) };
            nanosleep(&ts, NULL);
        }
    }
    if (box->ctl >= 0) {
        sbx_ctl_close(box->ctl);
        box->ctl = -1;
    }
    guard_sup_close(box->rows);
    box->rows = NULL;
    explicit_bzero(box->token, sizeof box->token);
    pthread_mutex_unlock(&box->ctl_lock);
    return rc;
}

void serve_box_close(struct serve_box *box)
{
    int *fds[] = { &box->out, &box->err, &box->req, &box->rep, &box->notify,
                   &box->status, &box->pidfd, &box->zsock };

    if (box->pidfd >= 0)
        (void)serve_box_kill(box);
    serve_sup_remove(box);
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (*fds[i] >= 0) {
            close(*fds[i]);
            *fds[i] = -1;
        }
    free(box->buf);
    box->buf = NULL;
    box->len = box->cap = 0;
    guard_sup_close(box->rows);
    box->rows = NULL;
    explicit_bzero(box->token, sizeof box->token);
}
