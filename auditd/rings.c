/*
 * rings.c — the daemon's side of the per-process event rings: registration
 * on events.sock, draining, publishing the tail, the sleep handshake.
 *
 * Everything in a ring is written by the agent, which may be hostile: the
 * header's counters are never trusted (the daemon keeps its own tail), every
 * record is copied out before it is checked, and the memfd must be sealed
 * against shrinking (so a mapping can never SIGBUS the daemon).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bsd/string.h>

#include "daemon.h"

#define MASK (SBX_RING_SLOTS - 1)

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77     /* Linux 6.5 */
#endif

static void ring_register(struct daemon *d, struct ring *r);

void rings_accept(struct daemon *d)
{
    for (;;) {
        int spare = -1;
        int fd = daemon_accept(d, d->ev_listen, "events.sock", &spare);
        if (fd < 0)
            return;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof one);
        struct ring *r = calloc(1, sizeof *r);
        if (!r) {
            close(fd);
            close(spare);
            continue;
        }
        r->sock = fd;
        r->pidfd = -1;
        r->memfd = -1;
        r->spare = spare;
        r->ep_sock = (struct ep){ EP_RING_SOCK, r };
        r->ep_pid = (struct ep){ EP_RING_PIDFD, r };
        if (daemon_epoll_add(d, fd, &r->ep_sock, EPOLLIN | EPOLLRDHUP) < 0) {
            close(fd);
            close(spare);
            free(r);
            continue;
        }
        r->next = d->rings;
        d->rings = r;
    }
}

void rings_catch_up(struct daemon *d)
{
    rings_accept(d);
    for (struct ring *r = d->rings; r; r = r->next)
        if (!r->hdr && !r->dead)
            ring_register(d, r);
}

static void reply(struct daemon *d, int fd, const char *msg)
{
    /* A process that has exited already is not an error worth a line. */
    if (send(fd, msg, strlen(msg), MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EPIPE &&
        errno != ECONNRESET)
        daemon_log_limited(&d->agent_log, "events.sock: reply failed: %s", strerror(errno));
}

/* Compares the N bytes without an early exit (the token is a secret). */
static bool same_secret(const char *a, const char *b, size_t n)
{
    unsigned char diff = 0;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

static struct agent *agent_by_run_id(struct daemon *d, const char *id)
{
    for (struct agent *a = d->agents; a; a = a->next)
        if (strcmp(a->run_id, id) == 0)
            return a;
    return NULL;
}

/* True if FD is memory we can map as a ring without fearing SIGBUS: a memfd
 * of the ring's size that can neither shrink nor grow. */
static bool is_ring_memory(int fd, struct stat *sb)
{
    int seals = fcntl(fd, F_GET_SEALS);
    return fstat(fd, sb) == 0 && S_ISREG(sb->st_mode) && sb->st_size == SBX_RING_BYTES &&
           seals >= 0 &&
           (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) == (F_SEAL_SHRINK | F_SEAL_GROW);
}

/* True when the header at H is one this daemon reads (magic, version and
 * geometry: the layout of ring.h, nothing else). */
static bool ring_header_ok(const struct sbx_ring_hdr *h)
{
    return h->magic == SBX_RING_MAGIC && h->version == SBX_RING_VERSION &&
           h->nslots == SBX_RING_SLOTS && h->slot_size == SBX_RING_SLOT;
}

/* The live ring mapped from the memory file DEV:INO, if we read it
 * already: one ring struct per ring, whoever hands it in (its process
 * again after a restart, or sbx-guard). */
static struct ring *ring_by_file(struct daemon *d, dev_t dev, ino_t ino)
{
    for (struct ring *r = d->rings; r; r = r->next)
        if (r->hdr && !r->broken && r->dev == dev && r->ino == ino)
            return r;
    return NULL;
}

/* Makes R the reader of the ring mapped at MAP (memory file SB), for
 * process PID (PIDFD, or -1) of uid UID and agent A. */
static void ring_attach(struct daemon *d, struct ring *r, void *map, const struct stat *sb,
                        int pidfd, pid_t pid, uid_t uid, uint64_t since_ns, struct agent *a)
{
    struct sbx_ring_hdr *h = map;
    r->hdr = h;
    r->slots = (struct sbx_ring_slot *)((char *)map + SBX_RING_HDR_SIZE);
    r->dev = sb->st_dev;
    r->ino = sb->st_ino;
    r->pidfd = pidfd;
    r->pid = pid;
    r->uid = uid;
    r->since_ns = since_ns;
    r->agent = a;
    a->nrings++;
    /* A re-registered or handed-over ring (its previous daemon stopped)
     * resumes at the published tail, if that is sane: everything before
     * it was committed by that daemon. */
    uint64_t head = atomic_load(&h->head), tail = atomic_load(&h->tail);
    r->tail = r->committed = (tail <= head && head - tail <= SBX_RING_SLOTS) ? tail : head;
    atomic_store(&h->killed, a->soft_killed ? 1u : 0u);
    atomic_store(&h->sleeping, 0u);
    atomic_store(&h->gone, 0u);
    if (a->deadman && pidfd >= 0) {
        /* Its agent was ended by the dead man's switch while this process
         * was on its way: it goes the same way. */
        if (syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0) == 0)
            daemon_log_limited(&d->agent_log, "agent %s: pid %d registered after its agent "
                               "was killed; killed", a->name, (int)pid);
    }
    if (pidfd >= 0)
        daemon_epoll_add(d, pidfd, &r->ep_pid, EPOLLIN);
    else
        daemon_log_limited(&d->fd_log, "pidfd_open(%d): %s; the ring ends with its socket",
                           (int)pid, strerror(errno));
}

/* The process of ring HELD registered it again (after a restart, sbx-guard
 * may have handed it in first): the new connection R joins HELD, whose
 * reading goes on where it is. */
static void ring_join(struct daemon *d, struct ring *held, struct ring *r)
{
    if (held->sock >= 0)
        close(held->sock);      /* closing drops it from epoll too */
    held->sock = r->sock;
    r->sock = -1;
    struct epoll_event e = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = &held->ep_sock };
    epoll_ctl(d->epfd, EPOLL_CTL_MOD, held->sock, &e);
    /* The process marked it gone before it came back. */
    atomic_store(&held->hdr->gone, 0u);
    atomic_store(&held->hdr->sleeping, 0u);
    r->dead = true;
}

/* For SBX_REG_SIZE_IT: makes the empty memfd FD a ring (size, seals,
 * header) as the process would have, had its RLIMIT_FSIZE let it.  Only an
 * empty memfd that can still be sealed: never a file of the agent's that
 * we would grow past its limit.  0 or -1. */
static int size_ring(int fd)
{
    struct stat sb;
    /* EINVAL: not a memfd.  F_SEAL_EXEC may be there already
     * (vm.memfd_noexec in the agent's pid namespace). */
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & (F_SEAL_SEAL | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_WRITE))
        || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_size != 0)
        return -1;
    if (ftruncate(fd, SBX_RING_BYTES) < 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
        return -1;
    void *map = mmap(NULL, SBX_RING_HDR_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        return -1;
    struct sbx_ring_hdr *h = map;
    h->magic = SBX_RING_MAGIC;
    h->version = SBX_RING_VERSION;
    h->nslots = SBX_RING_SLOTS;
    h->slot_size = SBX_RING_SLOT;
    munmap(map, SBX_RING_HDR_SIZE);
    return 0;
}

/* Marks the ring in MEMFD refused, if it is one (sealed, the right size,
 * our header). */
static void mark_refused(int memfd)
{
    struct stat sb;
    if (!is_ring_memory(memfd, &sb))
        return;
    void *map = mmap(NULL, SBX_RING_HDR_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    if (map == MAP_FAILED)
        return;
    struct sbx_ring_hdr *h = map;
    if (h->magic == SBX_RING_MAGIC && h->version == SBX_RING_VERSION)
        atomic_store(&h->gone, SBX_RING_REFUSED);
    munmap(map, SBX_RING_HDR_SIZE);
}

static void ring_register_one(struct daemon *d, struct ring *r);

/* The ring outlives this daemon's death now (sbx_ring_hdr.kept): a process
 * waiting to exit is woken (it waits on `space`, as for room). */
static void ring_set_kept(struct sbx_ring_hdr *h)
{
    atomic_store(&h->kept, 1u);
    ring_wake_waiters(h);
}

/* An unanswered registration of a run this daemon does not know, in its
 * first DAEMON_PARK_MS: most likely a process of an agent whose sbx-guard
 * is about to take its run back (RESUME) after the previous daemon died;
 * refusing it would lose what the process writes, which it does not wait
 * to hear.  The ring is held (its memfd and the process's pidfd) and
 * adopted on that RESUME (rings_parked_resumed), or refused once the time
 * is up.  True when parked. */
static bool park(struct daemon *d, struct ring *r, int memfd, const struct ucred *cred,
                 const struct sbx_ring_reg *reg)
{
    if (daemon_now_ms() >= d->started_ms + DAEMON_PARK_MS || d->nparked == DAEMON_PARK_MAX)
        return false;
    int pidfd = -1;
    socklen_t pl = sizeof pidfd;
    if (getsockopt(r->sock, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &pl) < 0 || pidfd < 0)
        pidfd = (int)syscall(SYS_pidfd_open, cred->pid, 0);
    struct parked *p = &d->parked[d->nparked++];
    *p = (struct parked){ .memfd = memfd, .pidfd = pidfd, .pid = cred->pid, .uid = cred->uid,
                          .at_ms = daemon_now_ms() };
    strlcpy(p->run_id, reg->agent_id, sizeof p->run_id);
    strlcpy(p->token, reg->token, sizeof p->token);
    return true;
}

static void unpark(struct daemon *d, size_t i)
{
    struct parked *p = &d->parked[i];
    if (p->pidfd >= 0)
        close(p->pidfd);
    if (p->memfd >= 0)
        close(p->memfd);
    explicit_bzero(p->token, sizeof p->token);
    d->parked[i] = d->parked[--d->nparked];
}

void rings_parked_resumed(struct daemon *d, struct agent *a)
{
    for (size_t i = 0; i < d->nparked;) {
        struct parked *p = &d->parked[i];
        if (strcmp(p->run_id, a->run_id) != 0) {
            i++;
            continue;
        }
        char why[256];
        if (strlen(p->token) != strlen(a->token) ||
            !same_secret(p->token, a->token, strlen(a->token))) {
            mark_refused(p->memfd);
            daemon_log_limited(&d->agent_log, "refused a ring from pid %d uid %u: wrong token",
                               (int)p->pid, (unsigned)p->uid);
        } else if (rings_adopt(d, a, p->memfd, p->pidfd, p->pid, p->uid,
                               sbx_now_ns() - (daemon_now_ms() - p->at_ms + 1000) * 1000000ull,
                               why, sizeof why) < 0) {
            mark_refused(p->memfd);
            daemon_log_limited(&d->agent_log, "agent %s: refused the ring of pid %d held for "
                               "its run: %s", a->name, (int)p->pid, why);
        } else {
            /* Its guard's keeper gets a copy, as of any ring registered. */
            struct stat sb;
            struct ring *r = fstat(p->memfd, &sb) == 0 ? ring_by_file(d, sb.st_dev, sb.st_ino)
                                                        : NULL;
            if (r && r->memfd < 0) {
                r->memfd = p->memfd;
                p->memfd = -1;
            }
        }
        unpark(d, i);
    }
}

void rings_parked_expire(struct daemon *d)
{
    uint64_t now = daemon_now_ms();
    for (size_t i = 0; i < d->nparked;) {
        if (now < d->parked[i].at_ms + DAEMON_PARK_MS) {
            i++;
            continue;
        }
        mark_refused(d->parked[i].memfd);
        daemon_log_limited(&d->agent_log, "refused a ring from pid %d uid %u: unknown agent id "
                           "(no guard took run %s back within %d s)", (int)d->parked[i].pid,
                           (unsigned)d->parked[i].uid, d->parked[i].run_id,
                           DAEMON_PARK_MS / 1000);
        unpark(d, i);
    }
}

/* Handles the one registration message, with the reserve of descriptors
 * given up for it (the memfd in flight and the pidfd need two). */
static void ring_register(struct daemon *d, struct ring *r)
{
    daemon_reserve_release(d);
    ring_register_one(d, r);
    (void)daemon_reserve_take(d);
}

/* On failure the ring is marked dead without a mapping and freed by
 * rings_reap. */
static void ring_register_one(struct daemon *d, struct ring *r)
{
    struct sbx_ring_reg reg;
    union {
        char buf[CMSG_SPACE(4 * sizeof(int)) + CMSG_SPACE(sizeof(struct ucred))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = { .iov_base = &reg, .iov_len = sizeof reg };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
                         .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf };
    int fds[4], nfds = 0;
    struct ucred cred = { .pid = 0 };
    bool have_cred = false;
    const char *why = NULL;
    void *map = MAP_FAILED;
    bool answer = true;

    ssize_t n = recvmsg(r->sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            for (int i = 0; i < k && nfds < 4; i++)
                memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS &&
                   c->cmsg_len >= CMSG_LEN(sizeof cred)) {
            memcpy(&cred, CMSG_DATA(c), sizeof cred);
            have_cred = true;
        }
    }
    if (n != (ssize_t)sizeof reg || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
        memcmp(reg.magic, SBX_REG_MAGIC, sizeof reg.magic) != 0 || nfds != 1 || !have_cred) {
        why = "error: malformed ring registration";
        goto fail;
    }
    /* A process whose ring we size waits for it, whatever it says. */
    answer = !(reg.flags & SBX_REG_NO_REPLY) || (reg.flags & SBX_REG_SIZE_IT);
    reg.agent_id[sizeof reg.agent_id - 1] = '\0';
    reg.token[sizeof reg.token - 1] = '\0';
    struct agent *a = agent_by_run_id(d, reg.agent_id);
    /* Constant-time compare: the token is the only thing that ties a
     * process to an agent. */
    if (!a && !answer && park(d, r, fds[0], &cred, &reg)) {
        /* Held for its run (the memfd is the parked entry's now). */
        nfds = 0;
        why = NULL;
        goto fail;
    }
    if (!a || strlen(reg.token) != strlen(a->token) ||
        !same_secret(reg.token, a->token, strlen(a->token))) {
        daemon_log_limited(&d->agent_log, "refused a ring from pid %d uid %u: unknown agent id or wrong token",
                   (int)cred.pid, (unsigned)cred.uid);
        why = "error: unknown agent id or wrong token";
        /* A process that did not wait for this answer learns it from
         * its ring: every further event fails (emit.c). */
        mark_refused(fds[0]);
        goto fail;
    }
    if ((reg.flags & SBX_REG_SIZE_IT) && size_ring(fds[0]) < 0) {
        why = "error: cannot size the ring (an empty memfd is expected)";
        goto fail;
    }
    struct stat sb;
    if (!is_ring_memory(fds[0], &sb)) {
        why = "error: ring memory is not a sealed memfd of the right size";
        goto fail;
    }
    struct ring *held = ring_by_file(d, sb.st_dev, sb.st_ino);
    if (held) {
        if (held->agent != a) {
            why = "error: this ring is registered for another agent";
            goto fail;
        }
        ring_join(d, held, r);
        close(fds[0]);
        if (answer)
            reply(d, held->sock, "ok");
        return;
    }
    map = mmap(NULL, SBX_RING_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
    if (map == MAP_FAILED) {
        why = "error: cannot map the ring";
        goto fail;
    }
    if (!ring_header_ok(map)) {
        why = "error: ring header mismatch";
        goto fail;
    }
    /* The process may have exited already (it need not wait for our
     * answer): the connection's pidfd names exactly the process that
     * connected, whatever has happened to its pid since.  Kernels before
     * 6.5 have no SO_PEERPIDFD: pidfd_open on the kernel-verified pid, which
     * a process that waits for our answer still owns (one that does not and
     * has exited may have lent its pid to another: then the ring ends with
     * its socket or with that process, and nothing in it is lost). */
    int pidfd = -1;
    socklen_t pl = sizeof pidfd;
    /* The descriptor kept since accept for this one (see rings_accept). */
    close(r->spare);
    r->spare = -1;
    if (getsockopt(r->sock, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &pl) < 0 || pidfd < 0)
        pidfd = (int)syscall(SYS_pidfd_open, cred.pid, 0);
    /* A second of slack: a process reads its clock for its first event
     * before it registers the ring that carries it. */
    ring_attach(d, r, map, &sb, pidfd, cred.pid, cred.uid, sbx_now_ns() - 1000000000u, a);
    /* sbx-guard keeps a copy of the memfd (the hand-over): sent now if its
     * keeper is there, else kept until it comes (a resumed run's). */
    if (a->keeper || a->resumed) {
        r->memfd = fds[0];
        rings_feed_keeper(d);
    } else {
        close(fds[0]);
        ring_set_kept(r->hdr);
    }
    if (answer)
        reply(d, r->sock, "ok");
    return;
fail:
    if (map != MAP_FAILED)
        munmap(map, SBX_RING_BYTES);
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
    if (why && answer)
        reply(d, r->sock, why);
    if (r->spare >= 0)
        close(r->spare);
    r->spare = -1;
    r->dead = true;
    epoll_ctl(d->epfd, EPOLL_CTL_DEL, r->sock, NULL);
}

void ring_on_sock(struct daemon *d, struct ring *r, uint32_t events)
{
    if (!r->hdr && !r->dead && (events & EPOLLIN)) {
        ring_register(d, r);
        return;
    }
    if (events & (EPOLLHUP | EPOLLRDHUP | EPOLLERR)) {
        /* The process exec'd or closed the descriptor: stop watching the
         * socket.  Without a pidfd this is the only end we learn of. */
        epoll_ctl(d->epfd, EPOLL_CTL_DEL, r->sock, NULL);
        if (!r->hdr || r->pidfd < 0)
            r->dead = true;
    } else if (events & EPOLLIN) {
        /* Wake-ups: the turn that follows drains every ring.  Bounded, so
         * that a process sending nothing else cannot keep us here. */
        char junk[64];
        for (int i = 0; i < 64; i++) {
            ssize_t n = recv(r->sock, junk, sizeof junk, MSG_DONTWAIT);
            if (n == 0)
                epoll_ctl(d->epfd, EPOLL_CTL_DEL, r->sock, NULL);
            if (n <= 0)
                break;
        }
    }
}

void ring_on_exit(struct daemon *d, struct ring *r)
{
    epoll_ctl(d->epfd, EPOLL_CTL_DEL, r->pidfd, NULL);
    r->dead = true;
}

/* Takes the record at r->tail if it is complete.  1 taken (or skipped as
 * garbage), 0 not ready. */
static int take_one(struct daemon *d, struct ring *r, uint64_t head, bool final)
{
    uint64_t t = r->tail;
    struct sbx_ring_slot *s = &r->slots[t & MASK];
    if (atomic_load_explicit(&s->seq, memory_order_acquire) != t + 1)
        goto not_ready;
    uint32_t info = s->info;
    uint32_t span = info & 0xffffu;
    if (!(info & SBX_RING_FIRST) || span == 0 || span > SBX_RING_MAX_SPAN || t + span > head)
        goto garbage;
    for (uint32_t i = 1; i < span; i++)
        if (atomic_load_explicit(&r->slots[(t + i) & MASK].seq, memory_order_acquire) != t + i + 1)
            goto not_ready;
    size_t len = 0;
    for (uint32_t i = 0; i < span; i++) {
        struct sbx_ring_slot *si = &r->slots[(t + i) & MASK];
        uint32_t l = si->len;
        if (l > SBX_RING_PAYLOAD)
            goto garbage;
        memcpy(d->scratch + len, si->data, l);
        len += l;
    }
    r->tail = t + span;
    struct sbx_event_view v;
    size_t plain = sbx_event_expand(d->scratch, len, (const char *)r->hdr + SBX_RING_TAB_OFF,
                                    SBX_RING_TAB, d->plain, sizeof d->plain);
    if (plain == 0 || sbx_event_decode(d->plain, plain, &v) < 0) {
        daemon_log_limited(&d->agent_log, "agent %s pid %d: malformed record skipped", r->agent->name, (int)r->pid);
        return 1;
    }
    /* The record's time is the daemon's: an agent's clock is what the agent
     * says it is (years 1678 to 2262 fit), and --since, stats and retention
     * go by it.  A time the agent gives is kept only where it is possible:
     * after its ring was registered and not after now. */
    uint64_t now = sbx_now_ns();
    if (v.ts_ns > now || v.ts_ns < r->since_ns) {
        daemon_log_limited(&d->agent_log, "agent %s pid %d: record time out of range; "
                           "the daemon's time is used", r->agent->name, (int)r->pid);
        v.ts_ns = now;
    }
    /* A ring speaks for the guard layer inside the agent (the preload may
     * also relay a kernel denial it saw).  Lifecycle rows are written by the
     * daemon alone: an agent cannot forge a start, exit or kill. */
    if (v.layer != SBX_LAYER_KERNEL)
        v.layer = SBX_LAYER_GUARD;
    if (v.op == SBX_OP_START || v.op == SBX_OP_EXIT || v.op == SBX_OP_KILL) {
        daemon_log_limited(&d->agent_log, "agent %s pid %d: lifecycle record from a ring ignored", r->agent->name,
                   (int)r->pid);
        return 1;
    }
    batch_append_view(d, &v, r->agent, r->pid, r->uid);
    return 1;
not_ready:
    if (!final)
        return 0;
garbage:
    /* Only a dead or hostile writer leaves this: step over one slot. */
    r->tail = t + 1;
    return 1;
}

size_t rings_drain(struct daemon *d, size_t budget, bool final)
{
    size_t taken = 0;
    for (struct ring *r = d->rings; r && !d->store_failed; r = r->next) {
        if (!r->hdr || r->broken)
            continue;
        bool fin = final || r->dead;
        /* While the writers live, the slots' commit words say what is
         * ready; `head` is left alone, because every read of it steals its
         * cache line from the producers' next reservation.  A final drain
         * needs it: it is where skipping over dead writers' slots stops. */
        uint64_t head = UINT64_MAX;
        if (fin) {
            head = atomic_load_explicit(&r->hdr->head, memory_order_acquire);
            if (head < r->tail || head - r->committed > SBX_RING_SLOTS) {
                daemon_log_limited(&d->agent_log, "agent %s pid %d: ring counters corrupt; ring abandoned",
                           r->agent->name, (int)r->pid);
                r->broken = true;
                continue;
            }
        }
        size_t n = 0;
        /* Never consume more than a ring's worth past the committed tail:
         * those slots are not ours until the commit publishes them. */
        while (r->tail < head && (!budget || n < budget) && !d->store_failed &&
               r->tail - r->committed < SBX_RING_SLOTS) {
            if (!take_one(d, r, head, fin))
                break;
            n++;
        }
        taken += n;
    }
    return taken;
}

uint64_t rings_uncommitted(const struct daemon *d)
{
    uint64_t m = 0;
    for (const struct ring *r = d->rings; r; r = r->next)
        if (r->tail - r->committed > m)
            m = r->tail - r->committed;
    return m;
}

static void ring_free(struct ring *r)
{
    if (r->hdr) {
        atomic_store(&r->hdr->gone, 1u);
        munmap(r->hdr, SBX_RING_BYTES);
    }
    if (r->sock >= 0)
        close(r->sock);     /* closing drops it from epoll too */
    if (r->pidfd >= 0)
        close(r->pidfd);
    if (r->spare >= 0)
        close(r->spare);
    if (r->memfd >= 0)
        close(r->memfd);
    if (r->agent)
        r->agent->nrings--;     /* registry_reap frees it when it is done */
    free(r);
}

void rings_reap(struct daemon *d)
{
    for (struct ring **pp = &d->rings; *pp;) {
        struct ring *r = *pp;
        bool done = r->dead && (!r->hdr || r->broken ||
                    (r->committed == r->tail &&
                     r->tail >= atomic_load(&r->hdr->head)));
        if (done) {
            *pp = r->next;
            ring_free(r);
        } else {
            pp = &r->next;
        }
    }
}

bool rings_prepare_sleep(struct daemon *d)
{
    for (struct ring *r = d->rings; r; r = r->next)
        if (r->hdr && !r->broken)
            atomic_store(&r->hdr->sleeping, 1u);
    /* Pairs with the producer's fence after its commit (emit.c). */
    atomic_thread_fence(memory_order_seq_cst);
    /* Work is a committed record at our tail.  A reserved but unfinished
     * one is not: its writer will see `sleeping` after it commits and wake
     * us (and one whose writer died, say by exec in another thread, must
     * not keep us spinning until the process exits). */
    for (struct ring *r = d->rings; r; r = r->next) {
        if (!r->hdr || r->broken)
            continue;
        if (r->dead)
            return true;
        struct sbx_ring_slot *s = &r->slots[r->tail & MASK];
        if (atomic_load_explicit(&s->seq, memory_order_acquire) == r->tail + 1)
            return true;
    }
    return false;
}

void rings_wake(struct daemon *d)
{
    for (struct ring *r = d->rings; r; r = r->next)
        if (r->hdr && !r->broken)
            atomic_store_explicit(&r->hdr->sleeping, 0u, memory_order_relaxed);
}

void rings_set_killed(struct daemon *d, struct agent *a)
{
    for (struct ring *r = d->rings; r; r = r->next)
        if (r->hdr && r->agent == a)
            atomic_store(&r->hdr->killed, 1u);
}

int rings_kill_agent(struct daemon *d, struct agent *a, char *pids, size_t size)
{
    int n = 0;
    if (size)
        pids[0] = '\0';
    for (struct ring *r = d->rings; r; r = r->next) {
        if (r->agent != a || !r->hdr || r->dead || r->pidfd < 0)
            continue;
        /* A readable pidfd is a process that has exited (its end not yet
         * handled): nothing to kill. */
        struct pollfd pf = { .fd = r->pidfd, .events = POLLIN };
        if (poll(&pf, 1, 0) != 0)
            continue;
        /* One process may hold several rings (one per exec): signal it once. */
        bool seen = false;
        for (struct ring *q = d->rings; q != r && !seen; q = q->next)
            seen = q->agent == a && q->hdr && q->pid == r->pid && q->pidfd >= 0 &&
                   !q->dead && q->killed_now;
        r->killed_now = false;
        if (seen)
            continue;
        /* Through the pidfd taken at registration: it names the process
         * that registered, never one that got its pid later. */
        if (syscall(SYS_pidfd_send_signal, r->pidfd, SIGKILL, NULL, 0) < 0) {
            if (errno != ESRCH)
                daemon_log("agent %s: cannot kill pid %d: %s", a->name, (int)r->pid,
                           strerror(errno));
            continue;
        }
        r->killed_now = true;
        n++;
        size_t len = strlen(pids);
        if (len + 16 < size)
            snprintf(pids + len, size - len, "%s%d", len ? " " : "", (int)r->pid);
    }
    for (struct ring *r = d->rings; r; r = r->next)
        r->killed_now = false;
    return n;
}

void rings_mark_gone(struct daemon *d)
{
    for (struct ring *r = d->rings; r; r = r->next)
        if (r->hdr)
            atomic_store(&r->hdr->gone, SBX_RING_GONE);
    atomic_thread_fence(memory_order_seq_cst);
}

/* ---- the hand-over (docs/audit.md: a daemon killed) --------------------- */

/* Sends R's memfd to its agent's keeper: "RING" with pid, uid and since,
 * SCM_RIGHTS {memfd[, pidfd]}.  Without waiting: a keeper whose socket is
 * full gets it at a later turn.  The memfd is ours until it went. */
static void keeper_send(struct daemon *d, struct ring *r)
{
    struct conn *k = r->agent ? r->agent->keeper : NULL;
    if (!k || k->closing)
        return;
    char msg[160];
    int len = snprintf(msg, sizeof msg, "RING\npid=%d\nuid=%u\nsince=%llu\n", (int)r->pid,
                       (unsigned)r->uid, (unsigned long long)r->since_ns);
    int fds[2] = { r->memfd, r->pidfd };
    size_t nfd = r->pidfd >= 0 ? 2 : 1;
    union {
        char buf[CMSG_SPACE(2 * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = { .iov_base = msg, .iov_len = (size_t)len };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                         .msg_controllen = CMSG_SPACE(nfd * sizeof(int)) };
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(nfd * sizeof(int));
    memcpy(CMSG_DATA(c), fds, nfd * sizeof(int));
    if (sendmsg(k->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
        if (errno == EAGAIN || errno == ENOBUFS)
            return;     /* later */
        daemon_log_limited(&d->agent_log, "agent %s: cannot hand pid %d's ring to its guard: %s",
                           r->agent->name, (int)r->pid, strerror(errno));
    }
    /* Given (or not to be given at all): its process need not wait. */
    ring_set_kept(r->hdr);
    close(r->memfd);
    r->memfd = -1;
}

void rings_feed_keeper(struct daemon *d)
{
    for (struct ring *r = d->rings; r; r = r->next)
        if (r->memfd >= 0 && r->hdr && r->agent && r->agent->keeper)
            keeper_send(d, r);
}

/* The pid PIDFD names ("Pid:" in its fdinfo): > 0 while the process
 * lives, -1 once it is gone (0: in no namespace of ours), -2 when PIDFD is
 * not a pidfd. */
static long pidfd_pid(int pidfd)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", pidfd);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -2;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -2;
    buf[n] = '\0';
    const char *p = strstr(buf, "\nPid:");
    if (!p)
        return -2;
    char *end;
    long v = strtol(p + 5, &end, 10);
    return end == p + 5 ? -2 : v;
}

int rings_adopt(struct daemon *d, struct agent *a, int memfd, int pidfd, pid_t pid, uid_t uid,
                uint64_t since_ns, char *why, size_t whysz)
{
    struct stat sb;
    if (!is_ring_memory(memfd, &sb)) {
        if (fstat(memfd, &sb) == 0 && sb.st_size != SBX_RING_BYTES)
            snprintf(why, whysz, "not a ring: %lld bytes, a ring has %u",
                     (long long)sb.st_size, SBX_RING_BYTES);
        else
            snprintf(why, whysz, "not a ring: not a memfd sealed against shrinking and growing");
        return -1;
    }
    if (sb.st_uid != uid) {
        snprintf(why, whysz, "the ring belongs to uid %u, not to the agent's uid %u",
                 (unsigned)sb.st_uid, (unsigned)uid);
        return -1;
    }
    if (ring_by_file(d, sb.st_dev, sb.st_ino))
        return 0;
    long live = pidfd >= 0 ? pidfd_pid(pidfd) : -1;
    if (pidfd >= 0 && (live == -2 || (live > 0 && live != pid))) {
        snprintf(why, whysz, live == -2 ? "the process descriptor is not a pidfd"
                                        : "the pidfd names pid %ld, not %d", live, (int)pid);
        return -1;
    }
    void *map = mmap(NULL, SBX_RING_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    if (map == MAP_FAILED) {
        snprintf(why, whysz, "cannot map the ring: %s", strerror(errno));
        return -1;
    }
    if (!ring_header_ok(map)) {
        const struct sbx_ring_hdr *h = map;
        snprintf(why, whysz, "bad ring header (magic %#x version %u, %u slots of %u bytes)",
                 h->magic, h->version, h->nslots, h->slot_size);
        munmap(map, SBX_RING_BYTES);
        return -1;
    }
    struct ring *r = calloc(1, sizeof *r);
    int own_pidfd = pidfd >= 0 ? fcntl(pidfd, F_DUPFD_CLOEXEC, 0) : -1;
    if (!r || (pidfd >= 0 && own_pidfd < 0)) {
        snprintf(why, whysz, "out of %s", r ? "descriptors" : "memory");
        free(r);
        munmap(map, SBX_RING_BYTES);
        return -1;
    }
    r->sock = -1;
    r->spare = -1;
    r->memfd = -1;
    r->adopted = true;
    r->ep_sock = (struct ep){ EP_RING_SOCK, r };
    r->ep_pid = (struct ep){ EP_RING_PIDFD, r };
    /* The time the first daemon registered it, if possible: records
     * written while no daemon ran keep their own times. */
    uint64_t now = sbx_now_ns();
    if (since_ns > now || since_ns == 0)
        since_ns = now - 1000000000u;
    ring_attach(d, r, map, &sb, own_pidfd, pid, uid, since_ns, a);
    /* sbx-guard's keeper holds it (it handed it over), or it was parked:
     * then the caller gives the keeper a copy. */
    ring_set_kept(r->hdr);
    /* Without a pidfd nothing tells us when the process ends: read it as
     * a dead one's (a live process registers it again, and joins it). */
    if (own_pidfd < 0)
        r->dead = true;
    r->next = d->rings;
    d->rings = r;
    return 1;
}
