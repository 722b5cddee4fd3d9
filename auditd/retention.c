/*
 * retention.c — removing old rows from the front of the chain, by age and
 * by size, never before the exporter has them, each removal checkpointed
 * and recorded as a row of the chain (see store.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store_int.h"

/* The size cap's hysteresis: removal starts when the used pages pass
 * HIGH percent of the cap and goes on until they are under LOW percent, so
 * that a store at its cap is not trimmed by a few rows at every check. */
#define SIZE_HIGH_PCT 90
#define SIZE_LOW_PCT  80

void audit_store_set_export_required(struct audit_store *st, bool on)
{
    st->export_required = on;
}

static int pragma_int(struct audit_store *st, const char *sql, int64_t *v)
{
    sqlite3_stmt *q = NULL;
    int rc = -1;
    if (sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW) {
        *v = sqlite3_column_int64(q, 0);
        rc = 0;
    }
    sqlite3_finalize(q);
    if (rc < 0)
        store_set_err(st, sql);
    return rc;
}

int audit_store_used_bytes(struct audit_store *st, uint64_t *bytes)
{
    int64_t pages, freepages, pagesize;
    if (pragma_int(st, "PRAGMA page_count", &pages) < 0 ||
        pragma_int(st, "PRAGMA freelist_count", &freepages) < 0 ||
        pragma_int(st, "PRAGMA page_size", &pagesize) < 0)
        return -1;
    *bytes = (uint64_t)(pages > freepages ? pages - freepages : 0) * (uint64_t)pagesize;
    return 0;
}

int audit_store_export_floor(struct audit_store *st, bool required, int64_t *lowest)
{
    sqlite3_stmt *q = NULL;
    int rc = -1;
    *lowest = INT64_MAX;
    if (sqlite3_prepare_v2(st->db, "SELECT count(*), min(row_id) FROM export_watermark", -1, &q,
                           NULL) != SQLITE_OK || sqlite3_step(q) != SQLITE_ROW) {
        store_set_err(st, "reading export_watermark");
        goto out;
    }
    if (sqlite3_column_int64(q, 0) > 0) {
        int64_t acked = sqlite3_column_int64(q, 1);
        *lowest = acked < INT64_MAX ? acked + 1 : INT64_MAX;
    } else if (required) {
        /* Export is on and no sink has acknowledged anything: every row
         * is still to be sent.  1 is below every row id. */
        *lowest = 1;
    }
    rc = 0;
out:
    sqlite3_finalize(q);
    return rc;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* First and last row id (0, 0 for an empty table). */
static int id_range(struct audit_store *st, int64_t *first, int64_t *last)
{
    sqlite3_stmt *q = NULL;
    int rc = -1;
    *first = *last = 0;
    if (sqlite3_prepare_v2(st->db, "SELECT coalesce(min(id), 0), coalesce(max(id), 0) FROM events",
                           -1, &q, NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW) {
        *first = sqlite3_column_int64(q, 0);
        *last = sqlite3_column_int64(q, 1);
        rc = 0;
    } else {
        store_set_err(st, "reading the row range");
    }
    sqlite3_finalize(q);
    return rc;
}

/* The last row of [FIRST, UPTO] that is older than BEFORE_NS with every row
 * before it: rows are nearly in time order, but only a prefix of the
 * chain may go, so the first recent row stops the removal.  A rowid range
 * scan of at most one step's rows (the ts index would visit every recent
 * row).  *STOPPED: a recent row was found. */
static int age_bound(struct audit_store *st, int64_t first, int64_t upto, int64_t before_ns,
                     int64_t *last, bool *stopped)
{
    sqlite3_stmt *q = NULL;
    int rc = -1;
    /* "+ts": not the ts index, which SQLite would otherwise pick here */
    if (sqlite3_prepare_v2(st->db, "SELECT id FROM events WHERE id >= ?1 AND id <= ?2 AND "
                           "+ts >= ?3 ORDER BY id LIMIT 1", -1, &q, NULL) != SQLITE_OK)
        goto out;
    sqlite3_bind_int64(q, 1, first);
    sqlite3_bind_int64(q, 2, upto);
    sqlite3_bind_int64(q, 3, before_ns);
    int s = sqlite3_step(q);
    if (s == SQLITE_ROW) {
        *last = sqlite3_column_int64(q, 0) - 1;
        *stopped = true;
    } else if (s == SQLITE_DONE) {
        *last = upto;
        *stopped = false;
    } else {
        goto out;
    }
    rc = 0;
out:
    if (rc < 0)
        store_set_err(st, "finding old rows");
    sqlite3_finalize(q);
    return rc;
}

static void hexify(const unsigned char *h, char out[2 * AUDIT_HASH_LEN + 1])
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < AUDIT_HASH_LEN; i++) {
        out[2 * i] = digits[h[i] >> 4];
        out[2 * i + 1] = digits[h[i] & 15];
    }
    out[(size_t)2 * AUDIT_HASH_LEN] = '\0';
}

/* Inside the open transaction: deletes rows FIRST..LAST, records the
 * checkpoint and the row that says so.  0 / -1 (the caller rolls back). */
static int remove_rows(struct audit_store *st, int64_t first, int64_t last, const char *rule,
                       const char *why, struct audit_removal *res)
{
    sqlite3_stmt *q = NULL;
    int rc = -1;
    unsigned char hash[AUDIT_HASH_LEN];
    /* The chain restarts after the last removed row: its hash is what the
     * next row's prev_hash must be. */
    if (sqlite3_prepare_v2(st->db, "SELECT id, hash FROM events WHERE id <= ?1 "
                           "ORDER BY id DESC LIMIT 1", -1, &q, NULL) != SQLITE_OK)
        goto out;
    sqlite3_bind_int64(q, 1, last);
    if (sqlite3_step(q) != SQLITE_ROW || sqlite3_column_bytes(q, 1) != AUDIT_HASH_LEN)
        goto out;
    last = sqlite3_column_int64(q, 0);
    memcpy(hash, sqlite3_column_blob(q, 1), AUDIT_HASH_LEN);
    sqlite3_finalize(q);
    q = NULL;
    if (sqlite3_prepare_v2(st->db, "DELETE FROM events WHERE id <= ?1", -1, &q, NULL) != SQLITE_OK)
        goto out;
    sqlite3_bind_int64(q, 1, last);
    if (sqlite3_step(q) != SQLITE_DONE)
        goto out;
    res->rows = sqlite3_changes(st->db);
    sqlite3_finalize(q);
    q = NULL;
    /* Their spans (store_spans.c) go with them; a span reaching past LAST
     * stays and still serves the rows after. */
    if (sqlite3_prepare_v2(st->db, "DELETE FROM event_spans WHERE last_id <= ?1", -1, &q,
                           NULL) != SQLITE_OK)
        goto out;
    sqlite3_bind_int64(q, 1, last);
    if (sqlite3_step(q) != SQLITE_DONE)
        goto out;
    sqlite3_finalize(q);
    q = NULL;
    int64_t ts = now_ns(), record = st->t_id + 1;
    if (sqlite3_prepare_v2(st->db, "INSERT INTO checkpoints(ts, first_id, last_id, last_hash, "
                           "rows, reason, row_id) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)", -1, &q,
                           NULL) != SQLITE_OK)
        goto out;
    sqlite3_bind_int64(q, 1, ts);
    sqlite3_bind_int64(q, 2, first);
    sqlite3_bind_int64(q, 3, last);
    sqlite3_bind_blob(q, 4, hash, AUDIT_HASH_LEN, SQLITE_STATIC);
    sqlite3_bind_int64(q, 5, res->rows);
    sqlite3_bind_text(q, 6, why, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 7, record);
    if (sqlite3_step(q) != SQLITE_DONE)
        goto out;
    /* Agents whose run ended and who have no row left go too (else the
     * agents table alone would outgrow a size cap on a long-lived store).
     * Below the smallest agent_ref of the spans left (a span names every
     * run with a row in it): one lookup in the spans' primary key. */
    sqlite3_finalize(q);
    q = NULL;
    if (sqlite3_exec(st->db, "DELETE FROM agents WHERE ended IS NOT NULL AND id < (SELECT "
                     "coalesce(min(agent_ref), 9223372036854775807) FROM event_spans WHERE "
                     "agent_ref > 0)", NULL, NULL, NULL) != SQLITE_OK)
        goto out;
    char target[64], hex[2 * AUDIT_HASH_LEN + 1];
    snprintf(target, sizeof target, "rows %" PRId64 "-%" PRId64, first, last);
    hexify(hash, hex);
    struct audit_row r = {
        .ts_ns = ts, .op = "retention", .target = target, .target2 = hex, .decision = "allow",
        .rule = rule, .reason = why, .layer = "sbx", .flags = res->rows,
    };
    sqlite3_finalize(q);
    q = NULL;
    /* append rolls the batch back itself on failure */
    if (audit_store_append(st, &r) < 0)
        return -1;
    res->first_id = first;
    res->last_id = last;
    res->record_id = r.id;
    rc = 0;
out:
    if (rc < 0)
        store_set_err(st, "removing old rows");
    sqlite3_finalize(q);
    return rc;
}

int audit_store_retain(struct audit_store *st, const struct audit_retention *p,
                       struct audit_removal *res)
{
    memset(res, 0, sizeof *res);
    if (st->in_txn && audit_store_commit(st, false) < 0)
        return -1;
    int64_t step = p->rows_per_step > 0 ? p->rows_per_step : AUDIT_RETAIN_STEP;
    int64_t first, maxid;
    if (id_range(st, &first, &maxid) < 0)
        return -1;
    if (maxid == 0)
        return 0;
    int64_t want = first - 1;           /* the last row due, by either rule */
    const char *why = NULL;
    char whybuf[160];
    if (p->older_than_ns > 0) {
        int64_t upto = first + step - 1 < maxid ? first + step - 1 : maxid, last;
        bool stopped;
        if (age_bound(st, first, upto, p->older_than_ns, &last, &stopped) < 0)
            return -1;
        if (last >= first) {
            want = last;
            why = "older than the retention";
            res->more = !stopped && last < maxid;
        }
    }
    if (p->max_bytes > 0) {
        if (audit_store_used_bytes(st, &res->used_bytes) < 0)
            return -1;
        uint64_t high = p->max_bytes / 100 * (st->size_draining ? SIZE_LOW_PCT : SIZE_HIGH_PCT);
        uint64_t low = p->max_bytes / 100 * SIZE_LOW_PCT;
        if (res->used_bytes > high) {
            st->size_draining = true;
            uint64_t nrows = (uint64_t)(maxid - first + 1);
            uint64_t per_row = res->used_bytes / nrows ? res->used_bytes / nrows : 1;
            uint64_t need = (res->used_bytes - low + per_row - 1) / per_row;
            int64_t last = first - 1 + (int64_t)(need < nrows ? need : nrows);
            if (last > want) {
                want = last;
                snprintf(whybuf, sizeof whybuf, "the store is over %d%% of its size cap "
                         "(%" PRIu64 " of %" PRIu64 " bytes used)", SIZE_HIGH_PCT,
                         res->used_bytes, p->max_bytes);
                why = whybuf;
            }
        } else {
            st->size_draining = false;
        }
    }
    if (want < first)
        return 0;
    int64_t last = want;
    if (last > first + step - 1) {
        last = first + step - 1;
        res->more = true;
    }
    /* Never a row an export sink still has to take. */
    int64_t floor;
    if (audit_store_export_floor(st, st->export_required, &floor) < 0)
        return -1;
    if (last >= floor) {
        res->held_back = want - (floor - 1);
        last = floor - 1;
        res->more = false;
    }
    if (last < first)
        return 0;
    if (store_begin(st) < 0)
        return -1;
    if (remove_rows(st, first, last, p->rule ? p->rule : "retention", why, res) < 0) {
        audit_store_rollback(st);
        memset(res, 0, sizeof *res);
        return -1;
    }
    if (audit_store_commit(st, false) < 0) {
        memset(res, 0, sizeof *res);
        return -1;
    }
    return 0;
}

int audit_store_prune(struct audit_store *st, int64_t before_ns, int64_t *pruned)
{
    struct audit_retention p = { .older_than_ns = before_ns, .rule = "retention" };
    struct audit_removal res;
    *pruned = 0;
    do {
        if (audit_store_retain(st, &p, &res) < 0)
            return -1;
        *pruned += res.rows;
    } while (res.more && res.rows > 0);
    return 0;
}
