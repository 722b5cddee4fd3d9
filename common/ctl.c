/* ctl.c — the control protocol's client side (see ctl.h). */
#include "ctl.h"
#include "clip.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bsd/stdlib.h>
#include <bsd/string.h>

#include "paths.h"

#define REPLY_TIMEOUT_MS 30000  /* a kill waits for the guard (daemon: 5 s) */

/* ---- commands that arrive while a request waits for its reply ------------ */

#define STASH_FDS 8
#define STASH_CMDS 4
static struct stash {
    int fd;                     /* -1: free */
    unsigned n;
    struct sbx_ctl_cmd cmd[STASH_CMDS];
    uint64_t last_req;          /* last req_id delivered (repeats dropped) */
} stash[STASH_FDS] = {
    { .fd = -1 }, { .fd = -1 }, { .fd = -1 }, { .fd = -1 },
    { .fd = -1 }, { .fd = -1 }, { .fd = -1 }, { .fd = -1 },
};
static pthread_mutex_t stash_lock = PTHREAD_MUTEX_INITIALIZER;

static struct stash *stash_of(int fd, bool create)
{
    struct stash *free_slot = NULL;
    for (int i = 0; i < STASH_FDS; i++) {
        if (stash[i].fd == fd)
            return &stash[i];
        if (stash[i].fd < 0 && !free_slot)
            free_slot = &stash[i];
    }
    if (create && free_slot) {
        memset(free_slot, 0, sizeof *free_slot);
        free_slot->fd = fd;
        return free_slot;
    }
    return NULL;
}

static void parse_cmd(const struct sbx_msg *m, struct sbx_ctl_cmd *c)
{
    memset(c, 0, sizeof *c);
    const char *k = sbx_msg_get(m, "kind"), *v;
    c->kind = k && strcmp(k, "soft") == 0 ? SBX_CMD_KILL_SOFT : SBX_CMD_KILL_HARD;
    if ((v = sbx_msg_get(m, "by")))
        strlcpy(c->by, v, sizeof c->by);
    if ((v = sbx_msg_get(m, "reason")))
        strlcpy(c->reason, v, sizeof c->reason);
    if ((v = sbx_msg_get(m, "req")))
        c->req_id = strtoull(v, NULL, 10);
}

/* Keeps C aside for FD unless it repeats one already delivered or kept. */
static void stash_cmd(int fd, const struct sbx_ctl_cmd *c)
{
    pthread_mutex_lock(&stash_lock);
    struct stash *s = stash_of(fd, true);
    if (s && c->req_id != s->last_req) {
        bool dup = false;
        for (unsigned i = 0; i < s->n; i++)
            dup |= s->cmd[i].req_id == c->req_id;
        if (!dup && s->n < STASH_CMDS)
            s->cmd[s->n++] = *c;
    }
    pthread_mutex_unlock(&stash_lock);
}

bool sbx_ctl_cmd_pending(int fd)
{
    pthread_mutex_lock(&stash_lock);
    struct stash *s = stash_of(fd, false);
    bool r = s && s->n > 0;
    pthread_mutex_unlock(&stash_lock);
    return r;
}

void sbx_ctl_close(int fd)
{
    pthread_mutex_lock(&stash_lock);
    struct stash *s = stash_of(fd, false);
    if (s)
        s->fd = -1;
    pthread_mutex_unlock(&stash_lock);
    close(fd);
}

/* ---- request / reply ----------------------------------------------------- */

struct reply {
    char buf[SBX_CTL_MAX + 1];
    struct sbx_msg m;
};

/* Receives one message into R within TIMEOUT_MS.  1, 0 on EOF, -1. */
static int recv_msg(int fd, struct reply *r, int timeout_ms, char *err, size_t errsz)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    int n;
    do
        n = poll(&p, 1, timeout_ms);
    while (n < 0 && errno == EINTR);
    if (n == 0) {
        snprintf(err, errsz, "sbx-auditd did not answer");
        return -1;
    }
    ssize_t got;
    do
        got = recv(fd, r->buf, SBX_CTL_MAX, 0);
    while (got < 0 && errno == EINTR);
    if (got == 0) {
        snprintf(err, errsz, "sbx-auditd closed the connection");
        return 0;
    }
    if (got < 0) {
        snprintf(err, errsz, "receiving from sbx-auditd: %s", strerror(errno));
        return -1;
    }
    if (sbx_msg_parse(r->buf, (size_t)got, &r->m, err, errsz) < 0)
        return -1;
    return 1;
}

/* Sends B and waits for its OK/ERR reply (CMDs meanwhile are kept aside).
 * 0 with R holding an OK, -1 with ERR (the daemon's msg for an ERR). */
static int transact(int fd, const struct sbx_msgbuf *b, struct reply *r, char *err, size_t errsz)
{
    if (sbx_msg_send(fd, b) < 0) {
        int e = errno;
        /* A daemon that refuses the connection says why, then hangs up:
         * its ERR may be waiting even though the send failed. */
        if ((e == EPIPE || e == ECONNRESET) && recv_msg(fd, r, 0, err, errsz) > 0 &&
            strcmp(r->m.verb, "ERR") == 0 && sbx_msg_get(&r->m, "msg")) {
            snprintf(err, errsz, "%s", sbx_msg_get(&r->m, "msg"));
            return -1;
        }
        snprintf(err, errsz, "sending to sbx-auditd: %s", strerror(e));
        return -1;
    }
    for (;;) {
        if (recv_msg(fd, r, REPLY_TIMEOUT_MS, err, errsz) <= 0)
            return -1;
        if (strcmp(r->m.verb, "CMD") == 0) {
            struct sbx_ctl_cmd c;
            parse_cmd(&r->m, &c);
            stash_cmd(fd, &c);
            continue;
        }
        if (strcmp(r->m.verb, "OK") == 0)
            return 0;
        const char *msg = sbx_msg_get(&r->m, "msg");
        snprintf(err, errsz, "%s", msg ? msg : "sbx-auditd refused the request");
        return -1;
    }
}

/* ---- connecting, starting the daemon ------------------------------------- */

static int try_connect(const char *path)
{
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    struct sockaddr_un sa;
    int dfd = -1;
    int rc = sbx_unix_addr(path, &sa, &dfd);
    if (rc == 0)
        rc = connect(s, (struct sockaddr *)&sa, sizeof sa);
    if (dfd >= 0)
        close(dfd);
    if (rc < 0) {
        int e = errno;
        close(s);
        errno = e;
        return -1;
    }
    return s;
}

/* Starts sbx-auditd detached (double fork: it is nobody's child, so a guard
 * that reaps its children never sees it), stderr to RUNDIR/sbx-auditd.log.
 * *READY: the read end of a pipe whose write end the daemon holds as
 * SBX_AUDITD_READY_FD: it writes its start-up lines there, then "ready" and
 * closes it, or exits (see daemon_startup_done in auditd/base.c). */
static int start_daemon(const char *rundir, int *ready, char *err, size_t errsz)
{
    /* Beside the running program (installed layout); in the build tree the
     * tests and benches live in build/tests[/progs] and build/bench. */
    char exe[4096] = "", self[4096];
    static const char *const rel[] = { "", "/../bin", "/../../bin" };
    if (sbx_path_self_dir(self, sizeof self) == 0) {
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
            if ((size_t)snprintf(exe, sizeof exe, "%s%s/sbx-auditd", self, rel[i]) < sizeof exe &&
                access(exe, X_OK) == 0)
                break;
            exe[0] = '\0';
        }
    }
    char log[4096];
    if ((size_t)snprintf(log, sizeof log, "%s/sbx-auditd.log", rundir) >= sizeof log) {
        snprintf(err, errsz, "runtime directory path too long");
        return -1;
    }
    if (sbx_mkdir_p(rundir, 0700) < 0) {
        snprintf(err, errsz, "cannot create %s: %s", rundir, strerror(errno));
        return -1;
    }
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        snprintf(err, errsz, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errsz, "fork: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        setsid();
        if (fork() != 0)
            _exit(0);
        int null = open("/dev/null", O_RDWR);
        int lfd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
        }
        if (lfd >= 0)
            dup2(lfd, 2);
        /* The pipe's write end becomes descriptor 3 (dup2 clears
         * close-on-exec; a no-op dup2 does not, hence the fcntl). */
        if (dup2(p[1], 3) == 3 && fcntl(3, F_SETFD, 0) == 0)
            setenv("SBX_AUDITD_READY_FD", "3", 1);
        closefrom(4);
        /* The daemon keeps its log size-capped itself (--log rotates it);
         * retention and the size cap come from this environment
         * (SBX_AUDITD_RETAIN, SBX_AUDITD_MAX_SIZE; sbx-auditd(8)). */
        if (exe[0])
            execl(exe, "sbx-auditd", "--log", log, (char *)NULL);
        execlp("sbx-auditd", "sbx-auditd", "--log", log, (char *)NULL);
        fprintf(stderr, "sbx: cannot start sbx-auditd: %s\n", strerror(errno));
        _exit(127);
    }
    close(p[1]);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    *ready = p[0];
    return 0;
}

/* Reads what a starting daemon says on READY until it closes it (at most
 * MS).  1: it said "ready"; 0: it closed it saying nothing, or the time
 * ran out (it may be "already running" elsewhere: try the socket); -1: it
 * could not start, and its last line is in ERR. */
static int await_start(int ready, int ms, char *err, size_t errsz)
{
    char buf[2048];
    size_t len = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        long left = ms - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
        struct pollfd pfd = { .fd = ready, .events = POLLIN };
        if (left <= 0 || poll(&pfd, 1, (int)left) == 0)
            return 0;
        ssize_t n = read(ready, buf + len, sizeof buf - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
        if (len == sizeof buf - 1) {
            /* keep the end: the last line is what counts */
            memmove(buf, buf + len / 2, len - len / 2);
            len -= len / 2;
        }
    }
    buf[len] = '\0';
    while (len && buf[len - 1] == '\n')
        buf[--len] = '\0';
    if (len == 0)
        return 0;
    const char *last = strrchr(buf, '\n');
    last = last ? last + 1 : buf;
    if (strcmp(last, "ready") == 0)
        return 1;
    /* "already running": the other one answers (or is about to). */
    if (strstr(last, "already running"))
        return 0;
    snprintf(err, errsz, "sbx-auditd could not start: %s", last);
    return -1;
}

int sbx_ctl_open(bool autostart, char *err, size_t errsz)
{
    char rundir[4096], path[4096];
    if (sbx_path_runtime_dir(rundir, sizeof rundir) < 0 ||
        sbx_path_runtime_file(SBX_CONTROL_SOCK, path, sizeof path) < 0) {
        snprintf(err, errsz, "cannot find the runtime directory: %s", strerror(errno));
        return -1;
    }
    /* A runtime directory someone else made or can write is refused before
     * anything is sent into it (paths.h).  A missing one means no daemon. */
    if (sbx_path_private_dir(SBX_DIR_RUNTIME, autostart, NULL, 0, err, errsz) < 0 &&
        (autostart || errno != ENOENT))
        return -1;
    int s = try_connect(path);
    if (s >= 0)
        return s;
    /* Only a missing socket or one nobody listens on means "not running";
     * anything else (EACCES: a daemon of another user) is said as it is,
     * and starting a second daemon would not help. */
    int e = errno;
    bool absent = e == ENOENT || e == ECONNREFUSED;
    if (!absent || !autostart) {
        if (absent)
            snprintf(err, errsz, "sbx-auditd is not running (%s: %s)", path, strerror(e));
        else
            snprintf(err, errsz, "cannot connect to sbx-auditd at %s: %s", path, strerror(e));
        errno = e;
        return -1;
    }
    int ready = -1;
    if (start_daemon(rundir, &ready, err, errsz) < 0)
        return -1;
    /* 5 s: a loaded machine, and the store's integrity check. */
    int said = await_start(ready, 5000, err, errsz);
    close(ready);
    if (said < 0)
        return -1;
    for (int i = 0; i < 500; i++) {
        if ((s = try_connect(path)) >= 0)
            return s;
        struct timespec ts = { 0, 10000000 };
        nanosleep(&ts, NULL);
    }
    snprintf(err, errsz, "started sbx-auditd but %s does not answer (see %s/sbx-auditd.log)",
             path, rundir);
    return -1;
}

/* ---- requests ------------------------------------------------------------ */

int sbx_ctl_resume(int fd, const char *name, const char *run_id, const char *token,
                   pid_t guard_pid, char *err, size_t errsz)
{
    struct sbx_msgbuf *b = malloc(sizeof *b);
    struct reply *r = malloc(sizeof *r);
    int rc = -1;
    if (!b || !r) {
        snprintf(err, errsz, "out of memory");
        goto out;
    }
    sbx_msg_start(b, "RESUME");
    sbx_msg_add(b, "name", name);
    sbx_msg_add(b, "run_id", run_id);
    sbx_msg_add(b, "token", token);
    sbx_msg_addf(b, "guard_pid", "%ld", (long)guard_pid);
    rc = transact(fd, b, r, err, errsz);
out:
    free(b);
    free(r);
    return rc;
}

int sbx_ctl_register(int fd, const struct sbx_agent_reg *reg, char *run_id, size_t run_id_sz,
                     char *token, size_t token_sz, char *err, size_t errsz)
{
    struct sbx_msgbuf *b = malloc(sizeof *b);
    struct reply *r = malloc(sizeof *r);
    int rc = -1;
    if (!b || !r) {
        snprintf(err, errsz, "out of memory");
        goto out;
    }
    sbx_msg_start(b, "REGISTER");
    sbx_msg_add(b, "name", reg->name ? reg->name : "");
    sbx_msg_add(b, "policy_name", reg->policy_name);
    sbx_msg_add(b, "policy_sha256", reg->policy_sha256);
    sbx_msg_add(b, "policy_file", reg->policy_file);
    sbx_msg_add(b, "workspace", reg->workspace);
    /* A command line can be far longer than a message: it is recorded
     * clipped, with its length and hash, and the agent still runs. */
    char cmd[SBX_CTL_COMMAND_MAX];
    if (reg->command)
        sbx_msg_add(b, "command", sbx_clip(reg->command, strlen(reg->command), cmd, sizeof cmd));
    sbx_msg_add(b, "layers", reg->layers);
    sbx_msg_addf(b, "guard_pid", "%ld", (long)reg->guard_pid);
    if (transact(fd, b, r, err, errsz) < 0)
        goto out;
    const char *id = sbx_msg_get(&r->m, "run_id"), *tok = sbx_msg_get(&r->m, "token");
    if (!id || !tok || strlcpy(run_id, id, run_id_sz) >= run_id_sz ||
        strlcpy(token, tok, token_sz) >= token_sz) {
        snprintf(err, errsz, "bad registration reply (or buffers too small)");
        goto out;
    }
    rc = 0;
out:
    free(b);
    free(r);
    return rc;
}

void sbx_ctl_event_format(struct sbx_msgbuf *b, const struct sbx_event_desc *ev, pid_t pid)
{
    sbx_msg_start(b, "EVENT");
    sbx_msg_add(b, "op", sbx_op_name(ev->op));
    sbx_msg_add(b, "decision", sbx_decision_name(ev->decision));
    sbx_msg_add(b, "layer", sbx_layer_name(ev->layer));
    /* Strings longer than a record keeps (event.h) are clipped here, with
     * their length and hash, rather than cut bare by the daemon; together
     * they stay far below a message even escaped. */
    static const char *const key[SBX_EV_NSTR] = { "target", "target2", "rule", "reason" };
    static const size_t max[SBX_EV_NSTR] = { SBX_EV_TARGET_MAX, SBX_EV_TARGET2_MAX,
                                             SBX_EV_TEXT_MAX, SBX_EV_TEXT_MAX };
    const char *val[SBX_EV_NSTR] = { ev->target, ev->target2, ev->rule, ev->reason };
    unsigned flags = ev->flags;
    for (int i = 0; i < SBX_EV_NSTR; i++)
        if (val[i] && strlen(val[i]) > max[i])
            flags |= SBX_EVF_TRUNCATED;
    sbx_msg_addf(b, "flags", "%u", flags);
    sbx_msg_addf(b, "err", "%d", ev->err);
    char clip[SBX_EV_TARGET_MAX + 1];
    for (int i = 0; i < SBX_EV_NSTR; i++)
        if (val[i])
            sbx_msg_add(b, key[i], sbx_clip(val[i], strlen(val[i]), clip, max[i] + 1));
    if (pid > 0)
        sbx_msg_addf(b, "pid", "%ld", (long)pid);
}

int sbx_ctl_event_pid(int fd, const struct sbx_event_desc *ev, pid_t pid)
{
    struct sbx_msgbuf *b = malloc(sizeof *b);
    struct reply *r = malloc(sizeof *r);
    char err[256];
    int rc = -1;
    if (b && r) {
        sbx_ctl_event_format(b, ev, pid);
        rc = transact(fd, b, r, err, sizeof err);
    }
    free(b);
    free(r);
    return rc;
}

int sbx_ctl_event_async(int fd, const struct sbx_event_desc *ev)
{
    struct sbx_msgbuf *b = malloc(sizeof *b);
    int rc = -1;
    if (b) {
        sbx_ctl_event_format(b, ev, 0);
        sbx_msg_add(b, "noreply", "1");
        rc = sbx_msg_send(fd, b);
    }
    free(b);
    return rc;
}

int sbx_ctl_event(int fd, const struct sbx_event_desc *ev)
{
    return sbx_ctl_event_pid(fd, ev, 0);
}

int sbx_ctl_exit(int fd, int status, const char *detail)
{
    struct sbx_msgbuf *b = malloc(sizeof *b);
    struct reply *r = malloc(sizeof *r);
    char err[256];
    int rc = -1;
    if (!b || !r)
        goto out;
    sbx_msg_start(b, "EXIT");
    sbx_msg_addf(b, "status", "%d", status);
    sbx_msg_add(b, "detail", detail ? detail : "");
    rc = transact(fd, b, r, err, sizeof err);
out:
    free(b);
    free(r);
    return rc;
}

int sbx_ctl_recv_cmd(int fd, struct sbx_ctl_cmd *cmd)
{
    for (;;) {
        pthread_mutex_lock(&stash_lock);
        struct stash *s = stash_of(fd, true);
        if (s && s->n > 0) {
            *cmd = s->cmd[0];
            memmove(&s->cmd[0], &s->cmd[1], (s->n - 1) * sizeof s->cmd[0]);
            s->n--;
            s->last_req = cmd->req_id;
            pthread_mutex_unlock(&stash_lock);
            return 1;
        }
        uint64_t last = s ? s->last_req : 0;
        pthread_mutex_unlock(&stash_lock);

        struct reply *r = malloc(sizeof *r);
        char err[256];
        if (!r)
            return -1;
        int got = recv_msg(fd, r, -1, err, sizeof err);
        if (got <= 0) {
            free(r);
            return got;
        }
        if (strcmp(r->m.verb, "CMD") != 0) {
            free(r);        /* a stray reply: not ours to take */
            continue;
        }
        parse_cmd(&r->m, cmd);
        free(r);
        if (cmd->req_id == last)
            continue;       /* a repeat of one already delivered */
        pthread_mutex_lock(&stash_lock);
        if ((s = stash_of(fd, true)))
            s->last_req = cmd->req_id;
        pthread_mutex_unlock(&stash_lock);
        return 1;
    }
}

int sbx_ctl_cmd_done(int fd, uint64_t req_id, int result, const char *detail)
{
    struct sbx_msgbuf *b = malloc(sizeof *b);
    if (!b)
        return -1;
    sbx_msg_start(b, "DONE");
    sbx_msg_addf(b, "req", "%llu", (unsigned long long)req_id);
    sbx_msg_addf(b, "result", "%d", result);
    sbx_msg_add(b, "detail", detail ? detail : "");
    int rc = sbx_msg_send(fd, b);
    free(b);
    return rc;
}

int sbx_ctl_kill(int fd, const char *name, bool soft, const char *reason,
                 char *result, size_t resultsz, char *err, size_t errsz)
{
    struct sbx_msgbuf *b = malloc(sizeof *b);
    struct reply *r = malloc(sizeof *r);
    int rc = -1;
    if (!b || !r) {
        snprintf(err, errsz, "out of memory");
        goto out;
    }
    sbx_msg_start(b, "KILL");
    if (name)
        sbx_msg_add(b, "name", name);
    else
        sbx_msg_add(b, "all", "1");
    sbx_msg_add(b, "soft", soft ? "1" : "0");
    /* A reason too long for a message still kills: it is clipped. */
    char why[SBX_CTL_REASON_MAX];
    reason = reason ? reason : "";
    sbx_msg_add(b, "reason", sbx_clip(reason, strlen(reason), why, sizeof why));
    if (transact(fd, b, r, err, errsz) < 0)
        goto out;
    const char *res = sbx_msg_get(&r->m, "result");
    strlcpy(result, res ? res : "done", resultsz);
    rc = 0;
out:
    free(b);
    free(r);
    return rc;
}

int sbx_ctl_sync(int fd, int64_t *last_id, char *err, size_t errsz)
{
    struct sbx_msgbuf *b = malloc(sizeof *b);
    struct reply *r = malloc(sizeof *r);
    int rc = -1;
    if (!b || !r) {
        snprintf(err, errsz, "out of memory");
        goto out;
    }
    sbx_msg_start(b, "SYNC");
    if (transact(fd, b, r, err, errsz) < 0)
        goto out;
    const char *v = sbx_msg_get(&r->m, "last_id");
    if (last_id)
        *last_id = v ? strtoll(v, NULL, 10) : 0;
    rc = 0;
out:
    free(b);
    free(r);
    return rc;
}
