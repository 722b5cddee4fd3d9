/*
 * guard_keep.c — sbx-guard's copies of its agent's event rings, handed to a
 * restarted sbx-auditd (guard_keep.h says why and what is kept).
 */
#include "guard_keep.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bsd/stdlib.h>
#include <bsd/string.h>

#include "ctl.h"
#include "ctlmsg.h"
#include "event.h"
#include "ring.h"

/* One ring kept: its memory and its process, and what the daemon that
 * registered it recorded. */
struct kept {
    int memfd, pidfd;
    long pid;
    unsigned long long since;
};

struct guard_keep {
    int fd;
    struct kept *v;
    size_t n, cap;
    size_t prune_at;            /* look for rings to let go at this count */
    size_t limit;               /* at most this many (descriptors) */
    bool raised;                /* the descriptor limit was raised */
    bool said_full;
    uint64_t acked;             /* the last supervisor row stored (ACK) */
    struct kept *late;          /* RINGs that came while a hand-over waited
                                 * for an answer, kept once it is done */
    size_t nlate;
    unsigned long long since;   /* the run's start, for a resumed run's clock */
};

#define REPLY_MS 10000

static void close_kept(struct kept *k)
{
    close(k->memfd);
    if (k->pidfd >= 0)
        close(k->pidfd);
}

/* True when K's process has exited (its pidfd is readable). */
static bool exited(const struct kept *k)
{
    if (k->pidfd < 0)
        return true;
    struct pollfd pf = { .fd = k->pidfd, .events = POLLIN };
    return poll(&pf, 1, 0) > 0;
}

/* True when the daemon has taken every event of K (the tail it publishes
 * after a commit has reached the head).  Read with pread: no mapping, and
 * the agent's memory is only looked at, never trusted beyond this. */
static bool drained(const struct kept *k)
{
    struct sbx_ring_hdr h;
    if (pread(k->memfd, &h, sizeof h, 0) != (ssize_t)sizeof h)
        return true;        /* not a ring we can read: nothing to keep */
    return atomic_load_explicit(&h.tail, memory_order_relaxed) ==
           atomic_load_explicit(&h.head, memory_order_relaxed);
}

/* Lets go of the rings of exited processes whose events are all stored. */
static void prune(struct guard_keep *gk)
{
    size_t j = 0;
    for (size_t i = 0; i < gk->n; i++) {
        if (exited(&gk->v[i]) && drained(&gk->v[i]))
            close_kept(&gk->v[i]);
        else
            gk->v[j++] = gk->v[i];
    }
    gk->n = j;
    gk->prune_at = gk->n * 2 > 64 ? gk->n * 2 : 64;
}

/* Room for one more: prune at doubling counts (each ring is looked at a
 * constant number of times on average); at the limit, the oldest ring of an
 * exited process (else the oldest) goes, and that is said once. */
static int make_room(struct guard_keep *gk)
{
    if (gk->n >= gk->prune_at || gk->n >= gk->limit)
        prune(gk);
    if (gk->n >= gk->limit && gk->n > 0) {
        size_t victim = 0;
        for (size_t i = 0; i < gk->n; i++)
            if (exited(&gk->v[i])) {
                victim = i;
                break;
            }
        close_kept(&gk->v[victim]);
        memmove(&gk->v[victim], &gk->v[victim + 1], (gk->n - victim - 1) * sizeof *gk->v);
        gk->n--;
        if (!gk->said_full) {
            gk->said_full = true;
            fprintf(stderr, "sbx-guard: warning: more than %zu event rings of the agent are "
                    "live at once; the oldest are no longer kept for a daemon restart\n",
                    gk->limit);
        }
    }
    if (gk->n == gk->cap) {
        size_t cap = gk->cap ? gk->cap * 2 : 64;
        struct kept *v = reallocarray(gk->v, cap, sizeof *v);
        if (!v)
            return -1;
        gk->v = v;
        gk->cap = cap;
    }
    return 0;
}

/* The descriptor limit: raised to the hard one (the agent has its own
 * already), and the number of rings that leaves room for. */
static void raise_limit(struct guard_keep *gk)
{
    struct rlimit rl;
    gk->raised = true;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
        (void)getrlimit(RLIMIT_NOFILE, &rl);
    }
    const rlim_t most = (rlim_t)2 * GUARD_KEEP_MAX;   /* a memfd and a pidfd each */
    rlim_t room = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > most + 256
                  ? most : (rl.rlim_cur > 256 ? rl.rlim_cur - 256 : 64);
    gk->limit = (size_t)room / 2;
}

/* A value of M as a number in [0, MAX], or -1. */
static long long num(const struct sbx_msg *m, const char *key, long long max)
{
    const char *v = sbx_msg_get(m, key), *e = NULL;
    long long n = v ? strtonum(v, 0, max, &e) : -1;
    return e ? -1 : n;
}

/* One message from the daemon into BUF (BUFSZ - 1 bytes at most) with up
 * to 4 descriptors into FDS (*NFDS).  The byte count (0: it hung up; -1
 * with errno); *TRUNC when the message or its descriptors were cut. */
static ssize_t recv_msg_fds(int fd, char *buf, size_t bufsz, int flags, int *fds, int *nfds,
                            bool *trunc)
{
    union {
        char b[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = { .iov_base = buf, .iov_len = bufsz - 1 };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
                         .msg_controllen = sizeof ctl.b };
    ssize_t n;
    do
        n = recvmsg(fd, &mh, flags | MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    *nfds = 0;
    *trunc = false;
    if (n <= 0)
        return n;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            for (int i = 0; i < k && *nfds < 4; i++)
                memcpy(&fds[(*nfds)++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        }
    *trunc = (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
    return n;
}

/* Takes one RING message with its descriptors.  1 taken (or dropped as
 * malformed), 0 nothing waiting, -1 the daemon hung up. */
static int take_one(struct guard_keep *gk)
{
    char buf[512];
    int fds[4], nfds = 0;
    bool trunc = false;
    ssize_t n = recv_msg_fds(gk->fd, buf, sizeof buf, MSG_DONTWAIT, fds, &nfds, &trunc);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    if (n <= 0)
        return -1;
    struct sbx_msg m;
    char err[128];
    long long pid = -1, since = -1;
    bool parsed = !trunc && sbx_msg_parse(buf, (size_t)n, &m, err, sizeof err) == 0;
    /* ACK seq=N: the daemon has stored every supervisor row up to N
     * (guard_sup.h). */
    if (parsed && nfds == 0 && strcmp(m.verb, "ACK") == 0) {
        long long seq = num(&m, "seq", LLONG_MAX);
        if (seq > 0 && (uint64_t)seq > gk->acked)
            gk->acked = (uint64_t)seq;
        return 1;
    }
    bool ok = parsed && strcmp(m.verb, "RING") == 0 && (nfds == 1 || nfds == 2) &&
              (pid = num(&m, "pid", 0x7fffffff)) > 0 && (since = num(&m, "since", LLONG_MAX)) >= 0;
    if (ok && make_room(gk) == 0) {
        gk->v[gk->n++] = (struct kept){ fds[0], nfds == 2 ? fds[1] : -1, (long)pid,
                                        (unsigned long long)since };
        return 1;
    }
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
    return 1;
}

int guard_keep_take(struct guard_keep *gk)
{
    if (!gk || gk->fd < 0)
        return -1;
    if (!gk->raised)
        raise_limit(gk);
    for (;;) {
        int r = take_one(gk);
        if (r == 0)
            return 0;
        if (r < 0) {
            close(gk->fd);
            gk->fd = -1;
            return -1;
        }
    }
}

/* A message that came while a request waited for its answer: the new
 * daemon sends the rings its agent's processes register with it (RING) and
 * its ACKs on the same connection, in between the answers to ADOPT.  An
 * ACK is taken; a RING is set aside (the caller walks gk->v) and kept when
 * the hand-over is done.  True when M was one of them (FDS are taken). */
static bool take_late(struct guard_keep *gk, const struct sbx_msg *m, const int *fds, int nfds)
{
    if (strcmp(m->verb, "ACK") == 0 && nfds == 0) {
        long long seq = num(m, "seq", LLONG_MAX);
        if (seq > 0 && (uint64_t)seq > gk->acked)
            gk->acked = (uint64_t)seq;
        return true;
    }
    if (strcmp(m->verb, "RING") != 0)
        return false;
    long long pid = num(m, "pid", 0x7fffffff), since = num(m, "since", LLONG_MAX);
    struct kept *v = pid > 0 && since >= 0 && (nfds == 1 || nfds == 2)
                     ? reallocarray(gk->late, gk->nlate + 1, sizeof *v) : NULL;
    if (!v) {
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        return true;
    }
    gk->late = v;
    v[gk->nlate++] = (struct kept){ fds[0], nfds == 2 ? fds[1] : -1, (long)pid,
                                     (unsigned long long)since };
    return true;
}

/* Sends LEN bytes of MSG with NFDS descriptors FDS and waits for the
 * answer: 0 OK, -1 refused with ERR (the daemon's reason), -2 with ERR
 * when the daemon could not be asked (sending or its answer failed).
 * GK: what else comes meanwhile is taken (take_late); NULL: nothing
 * else can come yet. */
static int request(struct guard_keep *gk, int fd, const char *msg, size_t len, const int *fds,
                   int nfds, char *err, size_t errsz)
{
    union {
        char b[CMSG_SPACE(2 * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = { .iov_base = (void *)msg, .iov_len = len };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
    if (nfds > 0) {
        mh.msg_control = ctl.b;
        mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
    }
    ssize_t w;
    do
        w = sendmsg(fd, &mh, MSG_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    if (w != (ssize_t)len) {
        snprintf(err, errsz, "sending to sbx-auditd: %s", strerror(errno));
        return -2;
    }
    struct sbx_msg m;
    char buf[1024];
    for (;;) {
        struct pollfd pf = { .fd = fd, .events = POLLIN };
        int pr;
        do
            pr = poll(&pf, 1, REPLY_MS);
        while (pr < 0 && errno == EINTR);
        int got[4], ngot = 0;
        bool trunc = false;
        ssize_t n = pr > 0 ? recv_msg_fds(fd, buf, sizeof buf, 0, got, &ngot, &trunc) : -1;
        if (n <= 0 || sbx_msg_parse(buf, (size_t)n, &m, err, errsz) < 0) {
            for (int i = 0; i < ngot; i++)
                close(got[i]);
            if (n <= 0)
                snprintf(err, errsz, "sbx-auditd did not answer");
            return -2;
        }
        if (gk && take_late(gk, &m, got, ngot))
            continue;
        for (int i = 0; i < ngot; i++)
            close(got[i]);
        break;
    }
    if (strcmp(m.verb, "OK") == 0)
        return 0;
    const char *why = sbx_msg_get(&m, "msg");
    snprintf(err, errsz, "%s", why ? why : "refused");
    return -1;
}

/* A new connection to the daemon, KEEP sent and accepted.  fd or -1.
 * SINCE: when the run started, for a daemon that resumes it (the earliest
 * time it accepts for a supervisor row sent again). */
static int connect_keep(const char *run_id, const char *token, unsigned long long since,
                        char *err, size_t errsz)
{
    int fd = sbx_ctl_open(false, err, errsz);
    if (fd < 0)
        return -1;
    struct sbx_msgbuf *b = malloc(sizeof *b);
    if (!b) {
        snprintf(err, errsz, "out of memory");
        close(fd);
        return -1;
    }
    sbx_msg_start(b, "KEEP");
    sbx_msg_add(b, "run_id", run_id);
    sbx_msg_add(b, "token", token);
    sbx_msg_addf(b, "since", "%llu", since);
    int rc = b->overflow ? -1 : request(NULL, fd, b->buf, b->len, NULL, 0, err, errsz);
    free(b);
    if (rc != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

struct guard_keep *guard_keep_open(const char *run_id, const char *token, char *err,
                                   size_t errsz)
{
    struct guard_keep *gk = calloc(1, sizeof *gk);
    if (!gk) {
        snprintf(err, errsz, "out of memory");
        return NULL;
    }
    gk->prune_at = 64;
    gk->limit = 64;
    /* The run was registered just before: a second of margin. */
    gk->since = (unsigned long long)sbx_now_ns() - 1000000000ull;
    if ((gk->fd = connect_keep(run_id, token, gk->since, err, errsz)) < 0) {
        free(gk);
        return NULL;
    }
    return gk;
}

int guard_keep_fd(const struct guard_keep *gk)
{
    return gk ? gk->fd : -1;
}

uint64_t guard_keep_acked(const struct guard_keep *gk)
{
    return gk ? gk->acked : 0;
}

size_t guard_keep_count(const struct guard_keep *gk)
{
    return gk ? gk->n : 0;
}

/* The RINGs set aside during a hand-over join the rest. */
static void keep_late(struct guard_keep *gk)
{
    for (size_t i = 0; i < gk->nlate; i++) {
        if (make_room(gk) == 0)
            gk->v[gk->n++] = gk->late[i];
        else
            close_kept(&gk->late[i]);
    }
    free(gk->late);
    gk->late = NULL;
    gk->nlate = 0;
}

int guard_keep_handover(struct guard_keep *gk, const char *run_id, const char *token,
                        int *handed, int *refused, char *err, size_t errsz)
{
    *handed = *refused = 0;
    /* What the dead daemon sent before it died is still in the socket. */
    if (gk->fd >= 0)
        (void)guard_keep_take(gk);
    if ((gk->fd = connect_keep(run_id, token, gk->since, err, errsz)) < 0)
        return -1;
    char first[512] = "";
    size_t j = 0;
    for (size_t i = 0; i < gk->n; i++) {
        struct kept *k = &gk->v[i];
        char msg[128], why[512];
        int len = snprintf(msg, sizeof msg, "ADOPT\npid=%ld\nsince=%llu\n", k->pid, k->since);
        int fds[2] = { k->memfd, k->pidfd };
        int rc = request(gk, gk->fd, msg, (size_t)len, fds, k->pidfd >= 0 ? 2 : 1, why,
                         sizeof why);
        if (rc == 0) {
            (*handed)++;
            gk->v[j++] = *k;
        } else if (rc == -2) {
            /* The new daemon is gone too: everything stays kept. */
            memmove(&gk->v[j], k, (gk->n - i) * sizeof *k);
            gk->n = j + (gk->n - i);
            keep_late(gk);
            snprintf(err, errsz, "%s", why);
            return -1;
        } else {
            /* Refused (the daemon logged why): not offered again. */
            (*refused)++;
            if (!first[0])
                strlcpy(first, why, sizeof first);
            close_kept(k);
        }
    }
    gk->n = j;
    keep_late(gk);
    snprintf(err, errsz, "%s", first);
    return 0;
}

void guard_keep_close(struct guard_keep *gk)
{
    if (!gk)
        return;
    for (size_t i = 0; i < gk->n; i++)
        close_kept(&gk->v[i]);
    if (gk->fd >= 0)
        close(gk->fd);
    free(gk->v);
    free(gk);
}
