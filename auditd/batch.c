/*
 * batch.c — the open store batch (see daemon.h): rows go in from the rings
 * and from control.sock; a commit makes them durable and only then hands
 * the rings' slots back to their producers; a failure rolls the batch back
 * and rewinds the rings so that the same events are taken again later.
 * Calls the store and the base only; reads and writes the rings' counters
 * but calls nothing in rings.c.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "daemon.h"

#define RETRY_MS        1000        /* after a failed commit */
#define HEAD_LOG_MS     60000       /* "chain head" lines, at most this often */

int batch_append_view(struct daemon *d, const struct sbx_event_view *v,
                      const struct agent *a, int64_t pid, int64_t uid)
{
    /* SQLite wants NUL-terminated text: copy the strings out of the
     * record.  The buffer is sized for the largest record. */
    static char buf[SBX_REC_MAX + SBX_EV_NSTR];
    const char *s[SBX_EV_NSTR];
    size_t off = 0;
    for (int i = 0; i < SBX_EV_NSTR; i++) {
        if (!v->str[i]) {
            s[i] = NULL;
            continue;
        }
        memcpy(buf + off, v->str[i], v->len[i]);
        buf[off + v->len[i]] = '\0';
        s[i] = buf + off;
        off += v->len[i] + 1;
    }
    struct audit_row row = {
        .ts_ns = (int64_t)v->ts_ns, .agent = a ? a->name : NULL, .run_id = a ? a->run_id : NULL,
        .agent_ref = a ? a->ref : 0, .pid = pid, .uid = uid,
        .op = sbx_op_name(v->op), .target = s[SBX_EV_TARGET], .target2 = s[SBX_EV_TARGET2],
        .decision = sbx_decision_name(v->decision), .rule = s[SBX_EV_RULE],
        .reason = s[SBX_EV_REASON], .layer = sbx_layer_name(v->layer), .err = v->err,
        .flags = v->flags,
    };
    if (audit_store_pending(d->store) == 0)
        d->batch_started_ms = daemon_now_ms();
    if (audit_store_append(d->store, &row) < 0) {
        batch_failed(d);
        return -1;
    }
    return 0;
}

/* Every ring is consumed again from its committed tail. */
static void rewind_rings(struct daemon *d)
{
    for (struct ring *r = d->rings; r; r = r->next)
        r->tail = r->committed;
}

/* The batch is stored: each ring's consumed slots go back to its
 * producers, and producers waiting for space are woken. */
static void publish_rings(struct daemon *d)
{
    for (struct ring *r = d->rings; r; r = r->next) {
        if (!r->hdr || r->committed == r->tail)
            continue;
        r->committed = r->tail;
        atomic_store_explicit(&r->hdr->tail, r->tail, memory_order_release);
        ring_wake_waiters(r->hdr);
    }
}

void batch_failed(struct daemon *d)
{
    uint64_t now = daemon_now_ms();
    if (now - d->last_fail_log_ms >= 5000 || d->last_fail_log_ms == 0) {
        daemon_log("AUDIT STORE WRITE FAILED: %s; events stay in the agents' rings "
                   "and are retried every %d ms (agents block, then fail closed, when "
                   "their rings fill)", audit_store_errmsg(d->store), RETRY_MS);
        d->last_fail_log_ms = now;
    }
    /* The batch is gone: take its events again from the rings, later. */
    audit_store_rollback(d->store);
    rewind_rings(d);
    d->store_failed = true;
    d->store_retry_ms = now + RETRY_MS;
}

/* Rows waiting for a failed store, at most: beyond, EVENT is refused. */
#define HELD_MAX 100000

static int append_held(struct daemon *d, const struct held *h)
{
    if (h->kind == HELD_AGENT_END || h->kind == HELD_AGENT_KILLED) {
        if (audit_store_pending(d->store) == 0)
            d->batch_started_ms = daemon_now_ms();
        const char *s1 = (const char *)h->rec;
        int rc = h->kind == HELD_AGENT_END
            ? audit_store_agent_end(d->store, h->run_id, h->ended_ns, h->status, s1)
            : audit_store_agent_killed(d->store, h->run_id, s1, s1 + strlen(s1) + 1);
        if (rc < 0)
            batch_failed(d);
        return rc;
    }
    struct sbx_event_view v;
    if (sbx_event_decode(h->rec, h->len, &v) < 0)
        return 0;               /* encoded by us: cannot happen */
    struct agent a;
    memset(&a, 0, sizeof a);
    memcpy(a.name, h->name, sizeof a.name);
    memcpy(a.run_id, h->run_id, sizeof a.run_id);
    a.ref = h->ref;
    return batch_append_view(d, &v, &a, h->pid, h->uid);
}

static struct held *held_new(struct daemon *d, enum held_kind kind, const void *rec, size_t len,
                             const struct agent *a)
{
    struct held *h = malloc(sizeof *h + len);
    if (!h)
        return NULL;
    memset(h, 0, sizeof *h);
    h->kind = kind;
    if (a) {
        memcpy(h->name, a->name, sizeof h->name);
        memcpy(h->run_id, a->run_id, sizeof h->run_id);
        h->ref = a->ref;
    }
    h->len = len;
    memcpy(h->rec, rec, len);
    *d->held_tail = h;
    d->held_tail = &h->next;
    d->n_held++;
    return h;
}

/* While the store is failed the batch is not open: a held row goes in at
 * the next retry (batch_retry, batch_replay_late). */
static int held_add(struct daemon *d, struct held *h)
{
    if (!d->store_failed)
        (void)append_held(d, h);
    return 0;
}

int batch_hold(struct daemon *d, const unsigned char *rec, size_t len,
               const struct agent *a, int64_t pid, int64_t uid)
{
    if (d->n_held >= HELD_MAX)
        return -1;
    struct held *h = held_new(d, HELD_EVENT, rec, len, a);
    if (!h)
        return -1;
    h->pid = pid;
    h->uid = uid;
    return held_add(d, h);
}

int batch_hold_life(struct daemon *d, const unsigned char *rec, size_t len,
                    const struct agent *a, int64_t pid, int64_t uid)
{
    struct held *h = held_new(d, HELD_EVENT, rec, len, a);
    if (!h)
        return -1;
    h->late = true;
    h->pid = pid;
    h->uid = uid;
    return held_add(d, h);
}

int batch_hold_agent_end(struct daemon *d, const struct agent *a, int64_t ended_ns,
                         int status, const char *detail)
{
    struct held *h = held_new(d, HELD_AGENT_END, detail, strlen(detail) + 1, a);
    if (!h)
        return -1;
    h->late = true;
    h->ended_ns = ended_ns;
    h->status = status;
    return held_add(d, h);
}

int batch_hold_agent_killed(struct daemon *d, const struct agent *a, const char *by,
                            const char *reason)
{
    size_t lb = strlen(by) + 1, lr = strlen(reason) + 1;
    char buf[1024];
    if (lb + lr > sizeof buf)
        lr = sizeof buf - lb;   /* by is short (a user and a pid) */
    memcpy(buf, by, lb);
    memcpy(buf + lb, reason, lr);
    buf[lb + lr - 1] = '\0';
    struct held *h = held_new(d, HELD_AGENT_KILLED, buf, lb + lr, a);
    if (!h)
        return -1;
    h->late = true;
    return held_add(d, h);
}

void batch_release_held(struct daemon *d)
{
    while (d->held) {
        struct held *h = d->held;
        d->held = h->next;
        free(h);
    }
    d->held_tail = &d->held;
    d->n_held = 0;
}

bool batch_retry(struct daemon *d)
{
    if (daemon_now_ms() < d->store_retry_ms)
        return false;
    if (!d->store_failed)
        return true;
    d->store_failed = false;
    /* The held rows go into the new batch before the rings are drained
     * again, but for the lifecycle rows: those follow the rings' rows
     * (batch_replay_late), as an exit followed its agent's last events. */
    for (struct held *h = d->held; h && !d->store_failed; h = h->next)
        if (!h->late && append_held(d, h) < 0)
            break;
    d->replay_late = !d->store_failed;
    return !d->store_failed;
}

void batch_replay_late(struct daemon *d)
{
    if (!d->replay_late)
        return;
    d->replay_late = false;
    for (struct held *h = d->held; h && !d->store_failed; h = h->next)
        if (h->late && append_held(d, h) < 0)
            break;
}

int batch_commit(struct daemon *d, bool durable)
{
    if (d->store_failed) {
        /* Something in this batch failed already (and it was rolled
         * back): committing now would commit only its remainder. */
        audit_store_rollback(d->store);
        return -1;
    }
    /* A durable commit writes the head file, which needs descriptors: the
     * reserve is for this too, and so is any commit once descriptors ran
     * short or a write failed.  A routine commit uses the files SQLite
     * holds open, and closing and reopening the reserve around it was
     * eight system calls of each (a row at a time: sbx-serve's verdicts). */
    bool rows = audit_store_pending(d->store) > 0;
    bool fds = durable || d->accept_paused || d->store_retry_ms;
    if (fds)
        daemon_reserve_release(d);
    int rc = audit_store_commit(d->store, durable);
    if (fds)
        (void)daemon_reserve_take(d);
    if (rc < 0) {
        batch_failed(d);
        return -1;
    }
    publish_rings(d);
    batch_release_held(d);
    ctl_rows_stored(d);
    int64_t head = audit_store_last_id(d->store);
    uint64_t now = daemon_now_ms();
    if (rows)
        d->last_rows_ms = now;
    /* At most once a minute, durable commits too: an agent's start and
     * exit are durable, and a line for each filled the log as fast as the
     * store (the head file and the exporter keep the head; this line is a
     * copy for whoever reads the log). */
    if (head != d->logged_head && now - d->last_head_log_ms >= HEAD_LOG_MS) {
        char hex[2 * AUDIT_HASH_LEN + 1];
        audit_store_last_hash_hex(d->store, hex);
        daemon_log("chain head: row %lld hash %s", (long long)head, hex);
        d->logged_head = head;
        d->last_head_log_ms = now;
    }
    return 0;
}
