/*
 * store_spans.c — the events table's coarse index (see store_int.h).
 *
 * Two B-tree indexes on events (agent_ref, ts) cost a third of each row's
 * insert (bench_store: 0.9 of 2.9 us): every row was three B-tree inserts.
 * Instead, each batch writes one row per agent run it holds into
 * event_spans: the run's first and last row id in the batch and their ts
 * range.  A query reads the spans first and then only the id ranges they
 * name (a rowid range scan), filtering the rows themselves as before; a
 * span may cover other runs' rows in between, which the filter drops.
 *
 * --since: upto_ts is the largest ts of every row up to the span's batch
 * (flush), so it never decreases along the ids; the first span (by
 * upto_ts, then first_id) with upto_ts >= T starts at or before every row
 * with ts >= T.  Rows are nearly in ts order (the rings are drained as
 * they fill), so the scan from there reads few rows older than T.
 *
 * The spans are derived data, outside the hash chain, like agent_ref was;
 * a span lost or altered can hide rows from a filtered query, never from
 * verify or export, which read every row.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bsd/stdlib.h>

#include "store_int.h"

static const char spans_schema[] =
    "CREATE TABLE IF NOT EXISTS event_spans("
    " agent_ref INTEGER NOT NULL, first_id INTEGER NOT NULL, last_id INTEGER NOT NULL,"
    " min_ts INTEGER NOT NULL, max_ts INTEGER NOT NULL, upto_ts INTEGER NOT NULL,"
    " PRIMARY KEY(agent_ref, first_id)) WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS event_spans_upto ON event_spans(upto_ts, first_id);"
    /* retention removes the spans of removed rows by last_id */
    "CREATE INDEX IF NOT EXISTS event_spans_last ON event_spans(last_id);";

/* A store from before the spans (or rows an older sbx-auditd appended
 * after them, having put its indexes back): one span per agent run per
 * 65,536 ids (a chunk), upto_ts the running maximum over the chunks, then
 * the old indexes go.  The rows themselves are not touched: the chain and
 * every row stay as they were, so verify gives the same answer after. */
static const char migrate_sql[] =
    "INSERT INTO event_spans(agent_ref, first_id, last_id, min_ts, max_ts, upto_ts)"
    " WITH c AS (SELECT id / 65536 AS chunk, coalesce(agent_ref, 0) AS a, min(id) AS f,"
    "  max(id) AS l, min(ts) AS mn, max(ts) AS mx FROM events"
    "  WHERE id > (SELECT coalesce(max(last_id), 0) FROM event_spans) GROUP BY 1, 2),"
    " u AS (SELECT chunk, max(mx) OVER (ORDER BY chunk) AS upto FROM"
    "  (SELECT chunk, max(mx) AS mx FROM c GROUP BY chunk))"
    " SELECT c.a, c.f, c.l, c.mn, c.mx,"
    "  max(u.upto, (SELECT coalesce(max(upto_ts), u.upto) FROM event_spans))"
    "  FROM c JOIN u USING (chunk);"
    "DROP INDEX IF EXISTS events_agent;"
    "DROP INDEX IF EXISTS events_ts;"
    "INSERT OR REPLACE INTO meta(key, value) VALUES('schema', 2);";

static int table_exists(struct audit_store *st, const char *type, const char *name, bool *yes)
{
    sqlite3_stmt *q = NULL;
    int rc = -1;
    if (sqlite3_prepare_v2(st->db, "SELECT 1 FROM sqlite_master WHERE type = ?1 AND name = ?2",
                           -1, &q, NULL) == SQLITE_OK) {
        sqlite3_bind_text(q, 1, type, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 2, name, -1, SQLITE_STATIC);
        int s = sqlite3_step(q);
        *yes = s == SQLITE_ROW;
        rc = s == SQLITE_ROW || s == SQLITE_DONE ? 0 : -1;
    }
    sqlite3_finalize(q);
    return rc;
}

int store_spans_open(struct audit_store *st)
{
    bool spans = false, old_index = false;
    if (table_exists(st, "table", "event_spans", &spans) < 0 ||
        table_exists(st, "index", "events_agent", &old_index) < 0) {
        store_set_err(st, "reading the schema");
        return -1;
    }
    st->has_spans = spans;
    if (st->ro)
        return 0;
    if (!spans || old_index) {
        /* One transaction: a crash leaves the old schema, whole. */
        if (sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
            store_set_err(st, "migrating the store (BEGIN)");
            return -1;
        }
        if (sqlite3_exec(st->db, spans_schema, NULL, NULL, NULL) != SQLITE_OK ||
            sqlite3_exec(st->db, migrate_sql, NULL, NULL, NULL) != SQLITE_OK ||
            sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
            store_set_err(st, "migrating the store to event_spans");
            sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
            return -1;
        }
        st->has_spans = true;
    }
    static const char ins[] =
        "INSERT INTO event_spans(agent_ref, first_id, last_id, min_ts, max_ts, upto_ts)"
        " VALUES(?1, ?2, ?3, ?4, ?5, ?6)";
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v3(st->db, ins, -1, SQLITE_PREPARE_PERSISTENT, &st->span_ins, NULL) ||
        sqlite3_prepare_v2(st->db, "SELECT max(upto_ts) FROM event_spans", -1, &q, NULL) ||
        sqlite3_step(q) != SQLITE_ROW) {
        sqlite3_finalize(q);
        store_set_err(st, "preparing event_spans");
        return -1;
    }
    st->ts_max = sqlite3_column_type(q, 0) == SQLITE_NULL ? INT64_MIN : sqlite3_column_int64(q, 0);
    st->t_ts_max = st->ts_max;
    sqlite3_finalize(q);
    return 0;
}

void store_spans_reset(struct audit_store *st)
{
    st->n_spans = 0;
    st->t_ts_max = st->ts_max;
}

int store_spans_flush(struct audit_store *st)
{
    sqlite3_stmt *q = st->span_ins;
    for (size_t i = 0; i < st->n_spans; i++) {
        const struct store_span *s = &st->spans[i];
        sqlite3_bind_int64(q, 1, s->agent_ref);
        sqlite3_bind_int64(q, 2, s->first_id);
        sqlite3_bind_int64(q, 3, s->last_id);
        sqlite3_bind_int64(q, 4, s->min_ts);
        sqlite3_bind_int64(q, 5, s->max_ts);
        sqlite3_bind_int64(q, 6, st->t_ts_max);
        int rc = sqlite3_step(q);
        sqlite3_reset(q);
        if (rc != SQLITE_DONE) {
            store_set_err(st, "recording event_spans");
            return -1;
        }
    }
    st->n_spans = 0;
    return 0;
}

int store_spans_note(struct audit_store *st, const struct audit_row *r)
{
    int64_t ref = r->agent_ref > 0 ? r->agent_ref : 0;
    if (r->ts_ns > st->t_ts_max)
        st->t_ts_max = r->ts_ns;
    /* Newest first: a batch is mostly one or a few agents' rows in runs. */
    for (size_t i = st->n_spans; i-- > 0;) {
        struct store_span *s = &st->spans[i];
        if (s->agent_ref != ref)
            continue;
        s->last_id = r->id;
        if (r->ts_ns < s->min_ts)
            s->min_ts = r->ts_ns;
        if (r->ts_ns > s->max_ts)
            s->max_ts = r->ts_ns;
        return 0;
    }
    /* More agents in one batch than we keep: write these out now (their
     * upto_ts is the maximum so far, which the rows after can only raise). */
    if (st->n_spans == STORE_SPANS_MAX && store_spans_flush(st) < 0)
        return -1;
    st->spans[st->n_spans++] = (struct store_span){
        .agent_ref = ref, .first_id = r->id, .last_id = r->id, .min_ts = r->ts_ns,
        .max_ts = r->ts_ns,
    };
    return 0;
}

int store_spans_since(struct audit_store *st, int64_t since_ns, int64_t *lo)
{
    *lo = 0;
    if (!st->has_spans)
        return 0;       /* an old store, read-only: its ts index serves */
    sqlite3_stmt *q = NULL;
    int rc = -1;
    if (sqlite3_prepare_v2(st->db, "SELECT first_id FROM event_spans WHERE upto_ts >= ?1"
                           " ORDER BY upto_ts, first_id LIMIT 1", -1, &q, NULL) != SQLITE_OK)
        goto out;
    sqlite3_bind_int64(q, 1, since_ns);
    int s = sqlite3_step(q);
    if (s == SQLITE_ROW)
        *lo = sqlite3_column_int64(q, 0);
    else if (s == SQLITE_DONE)
        *lo = INT64_MAX;
    else
        goto out;
    rc = 0;
out:
    sqlite3_finalize(q);
    return rc;
}

int store_spans_agent(struct audit_store *st, const char *name, int64_t since_ns, int64_t lo,
                      int64_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!st->has_spans) {
        /* An old store, read-only: one range, its agent index serves. */
        int64_t *v = malloc(2 * sizeof *v);
        if (!v)
            return -1;
        v[0] = lo;
        v[1] = INT64_MAX;
        *out = v;
        *n = 1;
        return 0;
    }
    sqlite3_stmt *q = NULL;
    int rc = -1, s;
    int64_t *v = NULL;
    size_t cnt = 0, cap = 0;
    if (sqlite3_prepare_v2(st->db, "SELECT first_id, last_id FROM event_spans WHERE agent_ref IN"
                           " (SELECT id FROM agents WHERE name = ?1) AND max_ts >= ?2 AND"
                           " last_id >= ?3 ORDER BY first_id", -1, &q, NULL) != SQLITE_OK)
        goto out;
    sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 2, since_ns);
    sqlite3_bind_int64(q, 3, lo);
    while ((s = sqlite3_step(q)) == SQLITE_ROW) {
        int64_t f = sqlite3_column_int64(q, 0), l = sqlite3_column_int64(q, 1);
        if (f < lo)
            f = lo;
        /* Sorted by first id: merge with the range before when they touch
         * (runs of one name that overlapped). */
        if (cnt > 0 && f <= v[2 * cnt - 1] + 1) {
            if (l > v[2 * cnt - 1])
                v[2 * cnt - 1] = l;
            continue;
        }
        if (cnt == cap) {
            size_t ncap = cap ? 2 * cap : 64;
            int64_t *nv = reallocarray(v, ncap, 2 * sizeof *v);
            if (!nv)
                goto out;
            v = nv;
            cap = ncap;
        }
        v[2 * cnt] = f;
        v[2 * cnt + 1] = l;
        cnt++;
    }
    if (s != SQLITE_DONE)
        goto out;
    *out = v;
    *n = cnt;
    v = NULL;
    rc = 0;
out:
    free(v);
    sqlite3_finalize(q);
    return rc;
}
