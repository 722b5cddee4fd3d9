/* verify.c — walking the hash chain, and retention (see store.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bsd/string.h>

#include "store_int.h"

static void hex(const unsigned char *h, char out[2 * AUDIT_HASH_LEN + 1])
{
    for (size_t i = 0; i < AUDIT_HASH_LEN; i++)
        snprintf(out + 2 * i, 3, "%02x", h[i]);
}

int store_mark_home(struct audit_store *st)
{
    char real[PATH_MAX];
    if (!realpath(st->path, real))
        return 0;       /* cannot say where: verify treats it as the store */
    sqlite3_stmt *q = NULL;
    int rc = -1;
    if (sqlite3_prepare_v2(st->db, "INSERT OR REPLACE INTO meta(key, value) VALUES('home', ?1)",
                           -1, &q, NULL) == SQLITE_OK) {
        sqlite3_bind_text(q, 1, real, -1, SQLITE_STATIC);
        rc = sqlite3_step(q) == SQLITE_DONE ? 0 : -1;
    }
    if (rc < 0)
        store_set_err(st, "recording the store's place");
    sqlite3_finalize(q);
    return rc;
}

/* When this file is a copy of a store that lives elsewhere (meta "home"
 * names another real path): that path into HOME, and true. */
static bool is_copy(struct audit_store *st, char *home, size_t homesz)
{
    sqlite3_stmt *q = NULL;
    char real[PATH_MAX];
    bool copy = false;
    if (realpath(st->path, real) &&
        sqlite3_prepare_v2(st->db, "SELECT value FROM meta WHERE key = 'home'", -1, &q,
                           NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW) {
        const char *h = (const char *)sqlite3_column_text(q, 0);
        if (h && strcmp(h, real) != 0) {
            strlcpy(home, h, homesz);
            copy = true;
        }
    }
    sqlite3_finalize(q);
    return copy;
}

int audit_store_verify(struct audit_store *st, struct audit_verify *res, char *err, size_t errsz)
{
    memset(res, 0, sizeof *res);
    int64_t head_id = 0;
    char head_hash[2 * AUDIT_HASH_LEN + 1] = "";
    /* Head first, then the snapshot: the writer commits before it rewrites
     * the head, so our snapshot is at least as new as the head we read. */
    int head = store_read_head(audit_store_head_path(st), &head_id, head_hash);
    sqlite3_stmt *q = NULL;
    int rc = -1;
    if (sqlite3_exec(st->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
        goto out;
    int64_t prev_id;
    unsigned char prev[AUDIT_HASH_LEN];
    if (store_pruned_anchor(st, &prev_id, prev) < 0)
        goto out;
    int64_t anchor_id = prev_id;
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT %s FROM events ORDER BY id", store_row_cols);
    if (sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) != SQLITE_OK)
        goto out;
    int s;
    char hx[2 * AUDIT_HASH_LEN + 1], last_hex[2 * AUDIT_HASH_LEN + 1];
    hex(prev, last_hex);
    while ((s = sqlite3_step(q)) == SQLITE_ROW) {
        struct audit_row r;
        store_read_row(q, &r);
        res->rows++;
        const char *what = NULL;
        if (r.id != prev_id + 1)
            what = r.id > prev_id + 1 ? "rows before it are missing (id gap)"
                                      : "ids out of order";
        else if (memcmp(r.prev_hash, prev, AUDIT_HASH_LEN) != 0)
            what = "prev_hash does not match the row before it (row removed or reordered)";
        else {
            unsigned char h[AUDIT_HASH_LEN];
            audit_row_hash(prev, &r, h);
            if (memcmp(h, r.hash, AUDIT_HASH_LEN) != 0)
                what = "content does not match its hash (row altered)";
        }
        if (what) {
            res->bad_id = r.id;
            snprintf(res->msg, sizeof res->msg, "row %lld: %s", (long long)r.id, what);
            rc = 0;
            goto out;
        }
        prev_id = r.id;
        memcpy(prev, r.hash, AUDIT_HASH_LEN);
    }
    if (s != SQLITE_DONE)
        goto out;
    hex(prev, last_hex);
    int cps = store_check_checkpoints(st, &res->bad_id, res->msg, sizeof res->msg);
    if (cps < 0)
        goto out;
    rc = 0;
    if (cps > 0)
        goto out;
    char home[PATH_MAX];
    if (head == 0) {
        if (res->rows == 0) {
            res->ok = true;
            snprintf(res->msg, sizeof res->msg, "ok: 0 rows, empty store");
        } else if (is_copy(st, home, sizeof home)) {
            /* A copy made with SQLite's .backup (or cp) has no head file:
             * everything but the end of the chain can be checked. */
            res->ok = true;
            snprintf(res->msg, sizeof res->msg, "ok: %lld rows, chain intact; not checked: "
                     "the end of the chain (this is a copy of %.300s without its head file; "
                     "copy that file beside it to check the end too)",
                     (long long)res->rows, home);
        } else {
            snprintf(res->msg, sizeof res->msg, "chain intact (%lld rows) but the head file %s "
                     "is missing", (long long)res->rows, audit_store_head_path(st));
        }
        goto out;
    }
    if (head < 0) {
        snprintf(res->msg, sizeof res->msg, "head file %s is unreadable or malformed",
                 audit_store_head_path(st));
        goto out;
    }
    if (head_id > prev_id) {
        res->bad_id = prev_id + 1;
        snprintf(res->msg, sizeof res->msg, "row %lld: missing: the head file names row %lld "
                 "but the store ends at row %lld (tail cut off)", (long long)prev_id + 1,
                 (long long)head_id, (long long)prev_id);
        goto out;
    }
    /* The head may be older than the store (rows committed after it was
     * read); the row it names must then carry its hash. */
    if (head_id == prev_id) {
        strlcpy(hx, last_hex, sizeof hx);
    } else {
        sqlite3_stmt *h = NULL;
        hx[0] = '\0';
        if (sqlite3_prepare_v2(st->db, "SELECT hash FROM events WHERE id = ?", -1, &h, NULL) == SQLITE_OK) {
            sqlite3_bind_int64(h, 1, head_id);
            if (sqlite3_step(h) == SQLITE_ROW && sqlite3_column_bytes(h, 0) == AUDIT_HASH_LEN)
                hex(sqlite3_column_blob(h, 0), hx);
        }
        sqlite3_finalize(h);
        if (!hx[0] && head_id != 0) {
            unsigned char a[AUDIT_HASH_LEN];
            int64_t aid;
            if (store_pruned_anchor(st, &aid, a) == 0 && aid == head_id)
                hex(a, hx);
        }
    }
    if (strcmp(hx, head_hash) != 0) {
        res->bad_id = head_id;
        snprintf(res->msg, sizeof res->msg, "row %lld: its hash does not match the head file",
                 (long long)head_id);
        goto out;
    }
    res->ok = true;
    if (head_id == prev_id)
        snprintf(res->msg, sizeof res->msg, "ok: %lld rows, chain intact, head matches (row %lld)",
                 (long long)res->rows, (long long)head_id);
    else
        snprintf(res->msg, sizeof res->msg, "ok: %lld rows, chain intact, head matches (row %lld; "
                 "%lld newer rows committed since)", (long long)res->rows, (long long)head_id,
                 (long long)(prev_id - head_id));
    if (anchor_id > 0) {
        size_t n = strlen(res->msg);
        snprintf(res->msg + n, sizeof res->msg - n, "; starts after row %lld (older rows removed "
                 "by retention, checkpoint matches)", (long long)anchor_id);
    }
out:
    if (rc < 0)
        snprintf(err, errsz, "verify: %s", sqlite3_errmsg(st->db));
    sqlite3_finalize(q);
    sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL);
    return rc;
}

int store_check_checkpoints(struct audit_store *st, int64_t *bad_id, char *msg, size_t msgsz)
{
    /* Each checkpoint is said again by a chained row (retention.c): an
     * altered checkpoint disagrees with its row, and the row cannot be
     * altered without breaking the chain.  Rows that recorded older
     * checkpoints may have been removed since; the newest one's row
     * cannot have been. */
    sqlite3_stmt *q = NULL;
    int rc = -1;
    if (sqlite3_prepare_v2(st->db,
            "SELECT c.first_id, c.last_id, c.last_hash, c.rows, c.row_id, e.id, e.op, e.layer,"
            " e.agent, e.target, e.target2, e.flags FROM checkpoints c"
            " LEFT JOIN events e ON e.id = c.row_id ORDER BY c.last_id", -1, &q, NULL) != SQLITE_OK) {
        /* A store from before checkpoints (opened read-only, so never
         * given the table): nothing to check; its anchor is in meta. */
        rc = 0;
        goto out;
    }
    int s;
    int64_t prev_last = 0;
    bool last_has_row = true;
    int64_t last_cp = 0, last_row = 0;
    rc = 0;
    while ((s = sqlite3_step(q)) == SQLITE_ROW) {
        int64_t first = sqlite3_column_int64(q, 0), last = sqlite3_column_int64(q, 1);
        int64_t nrows = sqlite3_column_int64(q, 3), row_id = sqlite3_column_int64(q, 4);
        char want_target[64], want_hash[2 * AUDIT_HASH_LEN + 1] = "";
        snprintf(want_target, sizeof want_target, "rows %lld-%lld", (long long)first,
                 (long long)last);
        if (sqlite3_column_bytes(q, 2) == AUDIT_HASH_LEN)
            hex(sqlite3_column_blob(q, 2), want_hash);
        const char *what = NULL;
        if (first > last || last <= prev_last || row_id <= last)
            what = "is out of order with the others";
        last_cp = last;
        last_row = row_id;
        last_has_row = sqlite3_column_type(q, 5) != SQLITE_NULL;
        if (!what && last_has_row) {
            const char *op = (const char *)sqlite3_column_text(q, 6);
            const char *layer = (const char *)sqlite3_column_text(q, 7);
            const char *target = (const char *)sqlite3_column_text(q, 9);
            const char *target2 = (const char *)sqlite3_column_text(q, 10);
            if (!op || strcmp(op, "retention") != 0 || !layer || strcmp(layer, "sbx") != 0 ||
                sqlite3_column_type(q, 8) != SQLITE_NULL || !target ||
                strcmp(target, want_target) != 0 || !target2 || strcmp(target2, want_hash) != 0 ||
                sqlite3_column_int64(q, 11) != nrows)
                what = "does not match the row that recorded it (checkpoint altered)";
        }
        if (what) {
            *bad_id = row_id;
            snprintf(msg, msgsz, "row %lld: the checkpoint after row %lld %s", (long long)row_id,
                     (long long)last, what);
            rc = 1;
            goto out;
        }
        prev_last = last;
    }
    if (s != SQLITE_DONE) {
        rc = -1;
        goto out;
    }
    if (last_cp && !last_has_row) {
        *bad_id = last_row;
        snprintf(msg, msgsz, "row %lld: missing: it recorded the newest checkpoint (after row "
                 "%lld), which nothing else can have removed", (long long)last_row,
                 (long long)last_cp);
        rc = 1;
    }
out:
    sqlite3_finalize(q);
    return rc;
}
