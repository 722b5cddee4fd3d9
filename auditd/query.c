/* query.c — reading rows back: filters for sbx-audit, and the row reader
 * that verify shares (see store.h). */
#include <stdio.h>
#include <string.h>

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

int audit_store_query(struct audit_store *st, const struct audit_filter *f,
                      int (*cb)(const struct audit_row *row, void *ctx), void *ctx,
                      char *err, size_t errsz)
{
    /* Placeholders are fixed; a filter that is off binds NULL and its
     * "? IS NULL" short-circuits, so one statement text serves all. */
    static const char inner[] =
        "SELECT " ROW_COLS " FROM events WHERE"
        " (?1 IS NULL OR agent_ref IN (SELECT id FROM agents WHERE name = ?1)) AND (?2 IS NULL OR decision = ?2) AND"
        " (?3 IS NULL OR op = ?3) AND (?4 IS NULL OR ts >= ?4) AND id > ?5";
    char sql[1024];
    if (f->limit > 0)
        snprintf(sql, sizeof sql, "SELECT * FROM (%s ORDER BY id DESC LIMIT ?6) ORDER BY id", inner);
    else
        snprintf(sql, sizeof sql, "%s ORDER BY id", inner);
    sqlite3_stmt *q = NULL;
    int rc = -1;
    if (sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) != SQLITE_OK)
        goto out;
    if (f->agent)
        sqlite3_bind_text(q, 1, f->agent, -1, SQLITE_STATIC);
    if (f->decision)
        sqlite3_bind_text(q, 2, f->decision, -1, SQLITE_STATIC);
    if (f->op)
        sqlite3_bind_text(q, 3, f->op, -1, SQLITE_STATIC);
    if (f->since_ns)
        sqlite3_bind_int64(q, 4, f->since_ns);
    sqlite3_bind_int64(q, 5, f->after_id);
    if (f->limit > 0)
        sqlite3_bind_int64(q, 6, f->limit);
    int s;
    while ((s = sqlite3_step(q)) == SQLITE_ROW) {
        struct audit_row r;
        store_read_row(q, &r);
        if (cb(&r, ctx))
            break;
    }
    if (s != SQLITE_ROW && s != SQLITE_DONE)
        goto out;
    rc = 0;
out:
    if (rc < 0)
        snprintf(err, errsz, "query failed: %s", sqlite3_errmsg(st->db));
    sqlite3_finalize(q);
    return rc;
}
