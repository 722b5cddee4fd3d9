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
    rc = 0;
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
out:
    if (rc < 0)
        snprintf(err, errsz, "verify: %s", sqlite3_errmsg(st->db));
    sqlite3_finalize(q);
    sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL);
    return rc;
}

int audit_store_prune(struct audit_store *st, int64_t before_ns, int64_t *pruned)
{
    *pruned = 0;
    if (st->in_txn && audit_store_commit(st, false) < 0)
        return -1;
    sqlite3_stmt *q = NULL;
    int rc = -1;
    if (sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        goto fail;
    /* Only a prefix of the chain may go: the rows up to just before the
     * first one that is recent enough. */
    if (sqlite3_prepare_v2(st->db,
            "SELECT id, hash FROM events WHERE id < coalesce("
            "(SELECT min(id) FROM events WHERE ts >= ?1), (SELECT max(id) + 1 FROM events))"
            " ORDER BY id DESC LIMIT 1", -1, &q, NULL) != SQLITE_OK)
        goto fail;
    sqlite3_bind_int64(q, 1, before_ns);
    int s = sqlite3_step(q);
    if (s == SQLITE_DONE) {
        rc = 0;
        goto fail;      /* nothing to prune: just end the transaction */
    }
    if (s != SQLITE_ROW || sqlite3_column_bytes(q, 1) != AUDIT_HASH_LEN)
        goto fail;
    int64_t last = sqlite3_column_int64(q, 0);
    unsigned char hash[AUDIT_HASH_LEN];
    memcpy(hash, sqlite3_column_blob(q, 1), AUDIT_HASH_LEN);
    sqlite3_finalize(q);
    q = NULL;
    if (sqlite3_prepare_v2(st->db, "DELETE FROM events WHERE id <= ?", -1, &q, NULL) != SQLITE_OK)
        goto fail;
    sqlite3_bind_int64(q, 1, last);
    if (sqlite3_step(q) != SQLITE_DONE)
        goto fail;
    *pruned = sqlite3_changes(st->db);
    sqlite3_finalize(q);
    q = NULL;
    if (sqlite3_prepare_v2(st->db, "INSERT OR REPLACE INTO meta(key, value) VALUES"
                           "('pruned_id', ?1), ('pruned_hash', ?2)", -1, &q, NULL) != SQLITE_OK)
        goto fail;
    sqlite3_bind_int64(q, 1, last);
    sqlite3_bind_blob(q, 2, hash, AUDIT_HASH_LEN, SQLITE_STATIC);
    if (sqlite3_step(q) != SQLITE_DONE)
        goto fail;
    sqlite3_finalize(q);
    q = NULL;
    if (sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        goto fail;
    return 0;
fail:
    if (rc < 0)
        store_set_err(st, "pruning");
    sqlite3_finalize(q);
    sqlite3_exec(st->db, rc < 0 ? "ROLLBACK" : "COMMIT", NULL, NULL, NULL);
    return rc;
}
