/* query.c — reading the store back: filtered rows, totals, per-agent
 * summaries and the agents for sbx-audit, and the row reader that verify
 * shares (see store.h).  Every SQL text that reads the schema is here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bsd/stdlib.h>

#include "store_int.h"

#define ROW_COLS "id,ts,agent,run_id,pid,uid,op,target,target2,decision,rule,reason," \
                 "layer,errno,flags,prev_hash,hash,agent_ref"

const char store_row_cols[] = ROW_COLS;

static const char *col_text(sqlite3_stmt *q, int i)
{
    return (const char *)sqlite3_column_text(q, i);
}

void store_read_row(sqlite3_stmt *q, struct audit_row *r)
{
    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(q, 0);
    r->ts_ns = sqlite3_column_int64(q, 1);
    r->agent = col_text(q, 2);
    r->run_id = col_text(q, 3);
    r->pid = sqlite3_column_int64(q, 4);
    r->uid = sqlite3_column_int64(q, 5);
    r->op = col_text(q, 6);
    r->target = col_text(q, 7);
    r->target2 = col_text(q, 8);
    r->decision = col_text(q, 9);
    r->rule = col_text(q, 10);
    r->reason = col_text(q, 11);
    r->layer = col_text(q, 12);
    r->err = sqlite3_column_int64(q, 13);
    r->flags = sqlite3_column_int64(q, 14);
    if (sqlite3_column_bytes(q, 15) == AUDIT_HASH_LEN)
        memcpy(r->prev_hash, sqlite3_column_blob(q, 15), AUDIT_HASH_LEN);
    if (sqlite3_column_bytes(q, 16) == AUDIT_HASH_LEN)
        memcpy(r->hash, sqlite3_column_blob(q, 16), AUDIT_HASH_LEN);
    r->agent_ref = sqlite3_column_int64(q, 17);
}

/* The filters but the id range, shared by the two statements below. */
#define ROW_FILTER \
    " (?1 IS NULL OR agent_ref IN (SELECT id FROM agents WHERE name = ?1)) AND" \
    " (?2 IS NULL OR decision = ?2) AND (?3 IS NULL OR op = ?3) AND" \
    " (?4 IS NULL OR ts >= ?4) AND id >= ?5 AND id <= ?6"

static void bind_filter(sqlite3_stmt *q, const struct audit_filter *f, int64_t lo, int64_t hi)
{
    sqlite3_reset(q);
    if (f->agent)
        sqlite3_bind_text(q, 1, f->agent, -1, SQLITE_STATIC);
    if (f->decision)
        sqlite3_bind_text(q, 2, f->decision, -1, SQLITE_STATIC);
    if (f->op)
        sqlite3_bind_text(q, 3, f->op, -1, SQLITE_STATIC);
    if (f->since_ns)
        sqlite3_bind_int64(q, 4, f->since_ns);
    sqlite3_bind_int64(q, 5, lo);
    sqlite3_bind_int64(q, 6, hi);
}

/* The id ranges that can hold matching rows (store_spans.c), in id order:
 * the agent's spans, or everything from the --since bound on. */
static int query_ranges(struct audit_store *st, const struct audit_filter *f, int64_t **v,
                        size_t *n)
{
    int64_t lo = f->after_id < INT64_MAX ? f->after_id + 1 : INT64_MAX;
    if (f->since_ns) {
        int64_t since_lo;
        if (store_spans_since(st, f->since_ns, &since_lo) < 0)
            return -1;
        if (since_lo > lo)
            lo = since_lo;
    }
    if (f->agent)
        return store_spans_agent(st, f->agent, f->since_ns ? f->since_ns : INT64_MIN, lo, v, n);
    *v = malloc(2 * sizeof **v);
    if (!*v)
        return -1;
    (*v)[0] = lo;
    (*v)[1] = INT64_MAX;
    *n = 1;
    return 0;
}

/* With a LIMIT: the id of the LIMIT-th newest matching row, walking the
 * ranges from the newest back; *FROM stays where it was when there are
 * fewer. */
static int newest_bound(sqlite3_stmt *q, const struct audit_filter *f, const int64_t *v,
                        size_t n, int64_t *from)
{
    int64_t left = f->limit;
    for (size_t i = n; i-- > 0 && left > 0;) {
        bind_filter(q, f, v[2 * i], v[2 * i + 1]);
        int s;
        while (left > 0 && (s = sqlite3_step(q)) == SQLITE_ROW) {
            if (--left == 0)
                *from = sqlite3_column_int64(q, 0);
        }
        if (left > 0 && s != SQLITE_DONE)
            return -1;
    }
    return 0;
}

int audit_store_query(struct audit_store *st, const struct audit_filter *f,
                      int (*cb)(const struct audit_row *row, void *ctx), void *ctx,
                      char *err, size_t errsz)
{
    /* Placeholders are fixed; a filter that is off binds NULL and its
     * "? IS NULL" short-circuits, so one statement text serves all.  The
     * rows are read range by range (rowid range scans): the ranges come
     * from event_spans, the store's index (store_spans.c). */
    static const char rows_sql[] =
        "SELECT " ROW_COLS " FROM events WHERE" ROW_FILTER " ORDER BY id";
    static const char ids_sql[] =
        "SELECT id FROM events WHERE" ROW_FILTER " ORDER BY id DESC";
    sqlite3_stmt *q = NULL;
    int64_t *v = NULL;
    size_t n = 0;
    int rc = -1;
    /* The spans and the rows from one snapshot (unless the caller holds
     * one): a commit in between could add rows no range read covers. */
    bool own_txn = sqlite3_get_autocommit(st->db) &&
                   sqlite3_exec(st->db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK;
    if (query_ranges(st, f, &v, &n) < 0)
        goto out;
    int64_t from = INT64_MIN;
    if (f->limit > 0) {
        if (sqlite3_prepare_v2(st->db, ids_sql, -1, &q, NULL) != SQLITE_OK ||
            newest_bound(q, f, v, n, &from) < 0)
            goto out;
        sqlite3_finalize(q);
        q = NULL;
    }
    if (sqlite3_prepare_v2(st->db, rows_sql, -1, &q, NULL) != SQLITE_OK)
        goto out;
    int s = SQLITE_DONE;
    bool stop = false;
    for (size_t i = 0; i < n && !stop; i++) {
        if (v[2 * i + 1] < from)
            continue;
        bind_filter(q, f, v[2 * i] > from ? v[2 * i] : from, v[2 * i + 1]);
        while ((s = sqlite3_step(q)) == SQLITE_ROW) {
            struct audit_row r;
            store_read_row(q, &r);
            if (cb(&r, ctx)) {
                stop = true;
                break;
            }
        }
        if (!stop && s != SQLITE_DONE)
            goto out;
    }
    rc = 0;
out:
    if (rc < 0)
        snprintf(err, errsz, "query failed: %s",
                 v || n ? sqlite3_errmsg(st->db) : "out of memory");
    free(v);
    sqlite3_finalize(q);
    if (own_txn)
        sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL);
    return rc;
}

/* ---- snapshots, totals, stats, agents -------------------------------------- */

int audit_store_read_begin(struct audit_store *st, char *err, size_t errsz)
{
    if (sqlite3_exec(st->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
        snprintf(err, errsz, "cannot read: %s", sqlite3_errmsg(st->db));
        return -1;
    }
    return 0;
}

void audit_store_read_end(struct audit_store *st)
{
    if (!sqlite3_get_autocommit(st->db))
        sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL);
}

int audit_store_totals(struct audit_store *st, struct audit_totals *t, char *err, size_t errsz)
{
    sqlite3_stmt *q = NULL;
    int rc = -1;
    if (sqlite3_prepare_v2(st->db, "SELECT count(*), coalesce(max(id), 0) FROM events",
                           -1, &q, NULL) != SQLITE_OK || sqlite3_step(q) != SQLITE_ROW)
        goto out;
    t->rows = sqlite3_column_int64(q, 0);
    t->newest_id = sqlite3_column_int64(q, 1);
    rc = 0;
out:
    if (rc < 0)
        snprintf(err, errsz, "cannot count the events: %s", sqlite3_errmsg(st->db));
    sqlite3_finalize(q);
    return rc;
}

/* Counts read by Q (name, count), names copied: SQLite's texts last only
 * until the next step, and the caller hands them all to one callback. */
struct counts {
    struct audit_count *v;
    size_t n;
};

static void counts_free(struct counts *c)
{
    for (size_t i = 0; i < c->n; i++)
        free((char *)c->v[i].name);
    free(c->v);
    *c = (struct counts){ 0 };
}

/* Reads every row of Q (bound by the caller) into C.  0 / -1 (SQLite error
 * or out of memory; C then holds what was read, to free). */
static int counts_read(sqlite3_stmt *q, struct counts *c)
{
    int s;
    while ((s = sqlite3_step(q)) == SQLITE_ROW) {
        struct audit_count *nv = reallocarray(c->v, c->n + 1, sizeof *nv);
        if (nv == NULL)
            return -1;
        c->v = nv;
        const char *name = (const char *)sqlite3_column_text(q, 0);
        char *copy = name ? strdup(name) : NULL;
        if (name && !copy)
            return -1;
        c->v[c->n++] = (struct audit_count){ .name = copy, .n = sqlite3_column_int64(q, 1) };
    }
    return s == SQLITE_DONE ? 0 : -1;
}

int audit_store_stats(struct audit_store *st, const char *agent,
                      int (*cb)(const struct audit_agent_stats *s, void *ctx), void *ctx,
                      char *err, size_t errsz)
{
    /* By the agent column, not agent_ref: the daemon's own rows have no
     * agent and are summarised too, under NULL. */
    /* In audit mode nothing is denied: a call the policy would have
     * denied is recorded as allowed with a reason beginning "audit:" (a
     * would-be denial).  Both kinds are counted, and listed by op and
     * target, which is what a person writing a policy looks for. */
#define WOULD_DENY "(decision = 'allow' AND substr(reason, 1, 6) = 'audit:')"
    static const char summary_sql[] =
        "SELECT agent, count(*), sum(decision = 'deny'), min(ts), max(ts),"
        " sum(" WOULD_DENY ") FROM events"
        " WHERE ?1 IS NULL OR agent = ?1 GROUP BY agent ORDER BY min(ts)";
    static const char ops_sql[] =
        "SELECT op, count(*) FROM events WHERE agent IS ?1 AND (decision = 'deny' OR "
        WOULD_DENY ") GROUP BY op ORDER BY 2 DESC, 1";
    static const char targets_sql[] =
        "SELECT target, count(*) FROM events WHERE agent IS ?1 AND (decision = 'deny' OR "
        WOULD_DENY ") GROUP BY target ORDER BY 2 DESC, 1 LIMIT ?2";
#undef WOULD_DENY
    sqlite3_stmt *q = NULL, *qops = NULL, *qtargets = NULL;
    struct counts ops = { 0 }, targets = { 0 };
    int rc = -1, s;
    if (sqlite3_prepare_v2(st->db, summary_sql, -1, &q, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(st->db, ops_sql, -1, &qops, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(st->db, targets_sql, -1, &qtargets, NULL) != SQLITE_OK)
        goto out;
    if (agent)
        sqlite3_bind_text(q, 1, agent, -1, SQLITE_STATIC);
    sqlite3_bind_int(qtargets, 2, AUDIT_STATS_TOP_TARGETS);
    while ((s = sqlite3_step(q)) == SQLITE_ROW) {
        struct audit_agent_stats a = {
            .agent = (const char *)sqlite3_column_text(q, 0),
            .events = sqlite3_column_int64(q, 1), .denied = sqlite3_column_int64(q, 2),
            .first_ns = sqlite3_column_int64(q, 3), .last_ns = sqlite3_column_int64(q, 4),
            .would_deny = sqlite3_column_int64(q, 5),
        };
        if (a.denied || a.would_deny) {
            sqlite3_reset(qops);
            sqlite3_reset(qtargets);
            if (a.agent) {
                sqlite3_bind_text(qops, 1, a.agent, -1, SQLITE_TRANSIENT);
                sqlite3_bind_text(qtargets, 1, a.agent, -1, SQLITE_TRANSIENT);
            } else {
                sqlite3_bind_null(qops, 1);
                sqlite3_bind_null(qtargets, 1);
            }
            if (counts_read(qops, &ops) < 0 || counts_read(qtargets, &targets) < 0)
                goto out;
        }
        a.denied_ops = ops.v;
        a.n_denied_ops = ops.n;
        a.denied_targets = targets.v;
        a.n_denied_targets = targets.n;
        int stop = cb(&a, ctx);
        counts_free(&ops);
        counts_free(&targets);
        if (stop) {
            s = SQLITE_DONE;
            break;
        }
    }
    if (s != SQLITE_DONE)
        goto out;
    rc = 0;
out:
    if (rc < 0)
        snprintf(err, errsz, "cannot summarise the events: %s", sqlite3_errmsg(st->db));
    counts_free(&ops);
    counts_free(&targets);
    sqlite3_finalize(q);
    sqlite3_finalize(qops);
    sqlite3_finalize(qtargets);
    return rc;
}

int audit_store_agents(struct audit_store *st,
                       int (*cb)(const struct audit_agent_run *a, void *ctx), void *ctx,
                       char *err, size_t errsz)
{
    static const char sql[] =
        "SELECT name, run_id, policy_name, policy_sha256, policy_file, workspace, command,"
        " layers, uid, guard_pid, started, ended, exit_status, exit_detail, killed_by,"
        " kill_reason FROM agents ORDER BY id";
    sqlite3_stmt *q = NULL;
    int rc = -1, s;
    if (sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) != SQLITE_OK)
        goto out;
    while ((s = sqlite3_step(q)) == SQLITE_ROW) {
        struct audit_agent_run a = {
            .reg = {
                .name = col_text(q, 0), .run_id = col_text(q, 1),
                .policy_name = col_text(q, 2), .policy_sha256 = col_text(q, 3),
                .policy_file = col_text(q, 4), .workspace = col_text(q, 5),
                .command = col_text(q, 6), .layers = col_text(q, 7),
                .uid = sqlite3_column_int64(q, 8), .guard_pid = sqlite3_column_int64(q, 9),
                .started_ns = sqlite3_column_int64(q, 10),
            },
            .ended = sqlite3_column_type(q, 11) != SQLITE_NULL,
            .ended_ns = sqlite3_column_int64(q, 11),
            .exit_status = sqlite3_column_int64(q, 12),
            .exit_detail = col_text(q, 13),
            .killed_by = col_text(q, 14), .kill_reason = col_text(q, 15),
        };
        if (cb(&a, ctx)) {
            s = SQLITE_DONE;
            break;
        }
    }
    if (s != SQLITE_DONE)
        goto out;
    rc = 0;
out:
    if (rc < 0)
        snprintf(err, errsz, "cannot list the agents: %s", sqlite3_errmsg(st->db));
    sqlite3_finalize(q);
    return rc;
}
