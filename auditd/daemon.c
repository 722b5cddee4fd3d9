/*
 * daemon.c — sbx-auditd's event loop: sockets, signals, the batch and
 * commit policy, shutdown (see daemon.h).
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <bsd/string.h>

#include "daemon.h"
#include "paths.h"

/* Commit policy.  A batch is committed when the rings run dry, when it
 * holds BATCH_ROWS rows, when a ring has half its slots consumed but not yet
 * committed (its producers would soon wait), or BATCH_MS after it began.
 * Big batches are what make ingest fast; the 50 ms bound keeps `tail`
 * current under a steady trickle. */
#define BATCH_ROWS      20000
#define BATCH_MS        50
#define DRAIN_BUDGET    4096        /* records per ring per loop turn */
#define HEAD_EVERY_MS   200         /* the head file follows routine commits */
#define LINGER_MS       50          /* after the last event: poll, not sleep, */
#define POLL_MS         1           /* ... every POLL_MS, */
#define POLL_MAX_MS     8           /* ... growing to this while turns find */
#define POLL_FEW        64          /* ... fewer records than this */
#define PRUNE_EVERY_MS  1000        /* retention looks this often; a step */
                                    /* that leaves more due comes back at once */
#define PRUNE_EVERY_ROWS 20000      /* ... and, with a size cap, this often, */
#define PRUNE_CAP_SHARE  2000       /* or every cap / this rows (a small cap) */
#define HELD_LOG_MS     600000      /* "kept for the exporter", at most this often */

static int listen_on(const char *path, mode_t mode, bool passcred)
{
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0)
        return -1;
    struct sockaddr_un sa;
    int dfd = -1;
    if (sbx_unix_addr(path, &sa, &dfd) < 0) {
        close(s);
        return -1;
    }
    int one = 1;
    if (passcred)
        setsockopt(s, SOL_SOCKET, SO_PASSCRED, &one, sizeof one);
    /* We hold the pid-file lock, so a socket file left here is stale. */
    unlink(path);
    int rc = bind(s, (struct sockaddr *)&sa, sizeof sa);
    if (dfd >= 0)
        close(dfd);
    if (rc < 0 || chmod(path, mode) < 0 || listen(s, 128) < 0) {
        int e = errno;
        close(s);
        errno = e;
        return -1;
    }
    return s;
}

/* Retention and the size cap: one step (at most AUDIT_RETAIN_STEP rows,
 * about 90 ms) per turn while rows are due, so that ingest goes on
 * between steps. */
static void maybe_prune(struct daemon *d)
{
    const struct daemon_opts *o = d->opts;
    if ((!o->retain_ns && !o->max_bytes) || d->store_failed)
        return;
    /* A look costs a few page reads; a store that fills fast is looked at
     * by the rows it took too, so that a cap overshoots by little. */
    int64_t head = audit_store_last_id(d->store);
    int64_t every = PRUNE_EVERY_ROWS;
    if (o->max_bytes && o->max_bytes / PRUNE_CAP_SHARE < (uint64_t)every)
        every = (int64_t)(o->max_bytes / PRUNE_CAP_SHARE);
    if (daemon_now_ms() < d->next_prune_ms && !(o->max_bytes && head - d->prune_at_id >= every))
        return;
    d->prune_at_id = head;
    d->next_prune_ms = daemon_now_ms() + PRUNE_EVERY_MS;
    if (batch_commit(d, false) < 0)
        return;
    struct audit_retention p = {
        .older_than_ns = o->retain_ns ? (int64_t)sbx_now_ns() - o->retain_ns : 0,
        .max_bytes = o->max_bytes, .rule = o->rule,
    };
    struct audit_removal res;
    daemon_reserve_release(d);
    int rc = audit_store_retain(d->store, &p, &res);
    (void)daemon_reserve_take(d);
    if (rc < 0) {
        daemon_log_limited(&d->store_log, "retention: %s", audit_store_errmsg(d->store));
        return;
    }
    if (res.rows)
        daemon_log_limited(&d->store_log, "retention: pruned %lld rows (%lld-%lld), recorded "
                           "as row %lld", (long long)res.rows, (long long)res.first_id,
                           (long long)res.last_id, (long long)res.record_id);
    if (res.more)
        d->next_prune_ms = 0;
    uint64_t now = daemon_now_ms();
    if (res.held_back && (d->held_log_ms == 0 || now - d->held_log_ms >= HELD_LOG_MS)) {
        daemon_log("retention: %lld rows are due but kept until an export sink acknowledges "
                   "them (export_watermark)", (long long)res.held_back);
        d->held_log_ms = now;
    }
}

static void handle(struct daemon *d, struct epoll_event *e)
{
    struct ep *ep = e->data.ptr;
    switch (ep->kind) {
    case EP_EVENTS_LISTEN:
        rings_accept(d);
        break;
    case EP_CTL_LISTEN:
        ctl_accept(d);
        break;
    case EP_SIGNAL: {
        struct signalfd_siginfo si;
        while (read(d->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
            if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
                daemon_log("signal %u: draining and stopping", si.ssi_signo);
                d->stopping = true;
            }
        }
        break;
    }
    case EP_RING_SOCK:
        ring_on_sock(d, ep->obj, e->events);
        break;
    case EP_RING_PIDFD:
        ring_on_exit(d, ep->obj);
        break;
    case EP_CONN:
        conn_on_event(d, ep->obj, e->events);
        break;
    }
}

/* One turn: drain, commit by policy, then wait for work. */
static void turn(struct daemon *d)
{
    uint64_t now = daemon_now_ms();
    size_t got = 0;
    if (batch_retry(d)) {
        /* After a failed store: every ring whole, then the lifecycle rows
         * that came after them. */
        got = rings_drain(d, d->replay_late ? 0 : DRAIN_BUDGET, false);
        batch_replay_late(d);
    }
    size_t pending = audit_store_pending(d->store);
    /* Events came a moment ago: more are likely (an agent at work).  Then
     * the batch grows until BATCH_MS or BATCH_ROWS rather than being
     * committed each time the rings are empty for an instant, and the
     * producers are not asked to wake us (see below). */
    bool lingering = now - d->last_busy_ms < LINGER_MS;
    if (pending && ((got == 0 && !lingering) || pending >= BATCH_ROWS ||
                    rings_uncommitted(d) >= SBX_RING_SLOTS / 2 ||
                    now - d->batch_started_ms >= BATCH_MS))
        batch_commit(d, false);
    /* Quiet: no ring rows and no commit for a second (a row sent on a
     * control connection, as sbx-serve's verdicts and the supervisor's,
     * is not a ring's: counting only rings had the WAL copied back and
     * synced after each such commit, most of our CPU time under a stream
     * of rejected requests). */
    uint64_t quiet_since = d->last_busy_ms > d->last_rows_ms ? d->last_busy_ms : d->last_rows_ms;
    /* (The commit above may have set last_rows_ms past NOW.) */
    bool quiet = now >= quiet_since + 1000;
    if (audit_store_pending(d->store) == 0 &&
        audit_store_checkpoint(d->store, got == 0 && quiet) < 0)
        daemon_log("audit store: %s", audit_store_errmsg(d->store));
    if (got)
        d->last_busy_ms = now;
    /* A trickle (a package manager: an event or two a millisecond) would
     * have us wake every POLL_MS for a record or two, and those turns, not
     * the rows, were most of our CPU time for such an agent.  So the poll
     * doubles while turns find few records, and drops back at once when one
     * finds many.  A producer that fills its ring meanwhile wakes us
     * itself (emit.c: wait_space), so a longer poll never stalls it. */
    if (got >= POLL_FEW || d->poll_ms == 0)
        d->poll_ms = POLL_MS;
    else if (d->poll_ms < POLL_MAX_MS)
        d->poll_ms *= 2;
    rings_reap(d);
    ctl_tick(d);
    registry_reap(d);
    maybe_prune(d);

    int timeout = 0;
    bool slept = false;
    if (now < d->store_retry_ms) {
        /* The store failed: the rings hold the events; try again later. */
        timeout = (int)(d->store_retry_ms - now);
    } else if (got == 0 && lingering) {
        /* Caught up, but lingering: look again in poll_ms rather than ask
         * the producers to wake us: a wake-up is a write(2) on the
         * producer's hot path, and an agent opening files in a loop would
         * pay it on nearly every event. */
        timeout = (int)d->poll_ms;
    } else if (got == 0 && audit_store_pending(d->store) == 0) {
        /* Idle: ask producers to wake us, unless one slipped in. */
        timeout = rings_prepare_sleep(d) ? 0 : !quiet ? 1000 : 10000;
        slept = true;
    }
    /* Rested listeners (out of descriptors) are looked at again. */
    int resume = daemon_accept_resume(d);
    if (resume >= 0 && (timeout < 0 || timeout > resume))
        timeout = resume;
    /* Retention looks every PRUNE_EVERY_MS, idle or not. */
    if (d->opts->retain_ns || d->opts->max_bytes) {
        int until = d->next_prune_ms > now ? (int)(d->next_prune_ms - now) : 0;
        if (timeout < 0 || timeout > until)
            timeout = until;
    }
    /* A guard that is stopped is looked for about twice a second. */
    if (ctl_watching(d) && (timeout == -1 || timeout > 500))
        timeout = 500;
    /* Pending kills need the tick at least every 100 ms. */
    for (struct agent *a = d->agents; a; a = a->next)
        if (a->kill && (timeout == -1 || timeout > 100))
            timeout = 100;
    /* The head file follows routine commits at most every HEAD_EVERY_MS
     * (durable commits write it at once). */
    if (audit_store_head_behind(d->store)) {
        if (now - d->head_ms >= HEAD_EVERY_MS) {
            daemon_reserve_release(d);
            if (audit_store_flush_head(d->store) < 0)
                daemon_log("audit store: %s", audit_store_errmsg(d->store));
            (void)daemon_reserve_take(d);
            d->head_ms = now;
        } else if (timeout < 0 || (uint64_t)timeout > HEAD_EVERY_MS - (now - d->head_ms)) {
            timeout = (int)(HEAD_EVERY_MS - (now - d->head_ms));
        }
    }
    struct epoll_event ev[64];
    int n = epoll_wait(d->epfd, ev, 64, timeout);
    if (slept)
        rings_wake(d);
    for (int i = 0; i < n; i++)
        handle(d, &ev[i]);
    /* What the handlers ended is freed here, after the last of them. */
    registry_reap(d);
}

static void close_listeners(struct daemon *d)
{
    if (d->ev_listen >= 0) {
        unlink(d->events_path);
        close(d->ev_listen);
        d->ev_listen = -1;
    }
    if (d->ctl_listen >= 0) {
        unlink(d->ctl_path);
        close(d->ctl_listen);
        d->ctl_listen = -1;
    }
}

static void shutdown_all(struct daemon *d)
{
    /* No new rings (a producer that sees `gone` tries to re-register: it
     * must find no socket rather than wait for our answer). */
    close_listeners(d);
    /* Stop the producers first (they see `gone` and report failure from
     * then on), then take everything they committed before that. */
    rings_mark_gone(d);
    for (int tries = 0; tries < 50; tries++) {
        while (rings_drain(d, 0, true) > 0) {
            if (batch_commit(d, false) < 0)
                break;
        }
        if (batch_commit(d, true) == 0)
            break;
        struct timespec ts = { 0, 100000000 };
        nanosleep(&ts, NULL);
    }
    if (audit_store_pending(d->store))
        daemon_log("stopping with %zu rows that could not be committed",
                   audit_store_pending(d->store));
    char hex[2 * AUDIT_HASH_LEN + 1];
    audit_store_last_hash_hex(d->store, hex);
    daemon_log("stopped; chain head: row %lld hash %s", (long long)audit_store_last_id(d->store),
               hex);
}

/* At exit: what is left of the registry (the kernel would reclaim it; this
 * keeps leak checkers quiet about real leaks). */
static void free_all(struct daemon *d)
{
    batch_release_held(d);
    registry_free_all(d);
    while (d->rings) {
        struct ring *r = d->rings;
        d->rings = r->next;
        if (r->hdr)
            munmap(r->hdr, SBX_RING_BYTES);
        if (r->sock >= 0)
            close(r->sock);
        if (r->pidfd >= 0)
            close(r->pidfd);
        if (r->spare >= 0)
            close(r->spare);
        free(r);
    }
    if (d->epfd >= 0)
        close(d->epfd);
    if (d->sigfd >= 0)
        close(d->sigfd);
    daemon_reserve_release(d);
    free(d);
}

int daemon_run(const char *runtime_dir, const char *db_path, const struct daemon_opts *o)
{
    struct daemon *d = calloc(1, sizeof *d);
    if (d)
        d->started_ms = daemon_now_ms();
    char err[1024];
    int rc = 1;
    if (!d)
        return 1;
    daemon_startup_begin();
    d->uid = geteuid();
    d->opts = o;
    d->held_tail = &d->held;
    d->epfd = d->sigfd = d->ev_listen = d->ctl_listen = -1;
    /* Every agent process holds a ring socket and a pidfd here: take all
     * the descriptors we may. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if ((size_t)snprintf(d->events_path, sizeof d->events_path, "%s/%s", runtime_dir,
                         SBX_EVENTS_SOCK) >= sizeof d->events_path ||
        (size_t)snprintf(d->ctl_path, sizeof d->ctl_path, "%s/%s", runtime_dir,
                         SBX_CONTROL_SOCK) >= sizeof d->ctl_path) {
        daemon_log("%s: path too long", runtime_dir);
        goto out;
    }
    if (audit_store_open(db_path, false, &d->store, err, sizeof err) < 0) {
        daemon_log("%s", err);
        goto out;
    }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (audit_store_checkpoint_thread(d->store) < 0) {
        daemon_log("audit store: %s", audit_store_errmsg(d->store));
        goto out;
    }
    d->epfd = epoll_create1(EPOLL_CLOEXEC);
    d->sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    d->ev_listen = listen_on(d->events_path, 0600, true);
    if (d->ev_listen < 0) {
        daemon_log("%s: %s", d->events_path, strerror(errno));
        goto out;
    }
    d->ctl_listen = listen_on(d->ctl_path, 0600, false);
    if (d->epfd < 0 || d->sigfd < 0 || d->ctl_listen < 0) {
        daemon_log("%s: %s", d->ctl_path, strerror(errno));
        goto out;
    }
    d->ep_ev = (struct ep){ EP_EVENTS_LISTEN, NULL };
    d->ep_ctl = (struct ep){ EP_CTL_LISTEN, NULL };
    d->ep_sig = (struct ep){ EP_SIGNAL, NULL };
    if (daemon_epoll_add(d, d->ev_listen, &d->ep_ev, EPOLLIN) < 0 ||
        daemon_epoll_add(d, d->ctl_listen, &d->ep_ctl, EPOLLIN) < 0 ||
        daemon_epoll_add(d, d->sigfd, &d->ep_sig, EPOLLIN) < 0)
        goto out;
    /* Test hook (documented in sbx-auditd(8)): commits fail while this
     * file exists, to exercise the full-disk path. */
    const char *fault = getenv("SBX_AUDITD_FAULT_FILE");
    if (fault && *fault) {
        audit_store_set_fault_file(d->store, fault);
        daemon_log("fault injection on: commits fail while %s exists", fault);
    }
    audit_store_set_export_required(d->store, o->export_on);
    d->logged_head = audit_store_last_id(d->store);
    daemon_log("serving %s and %s; store %s (chain head row %lld)", d->events_path,
               d->ctl_path, db_path, (long long)d->logged_head);
    if (o->retain_ns || o->max_bytes)
        daemon_log("retention on (%s): each removal is checkpointed and recorded in the "
                   "chain; rows an export sink has not acknowledged are kept", o->rule);
    daemon_startup_done();
    while (!d->stopping)
        turn(d);
    shutdown_all(d);
    rc = 0;
out:
    close_listeners(d);
    audit_store_close(d->store);
    free_all(d);
    return rc;
}
