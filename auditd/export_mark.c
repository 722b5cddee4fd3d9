/* export_mark.c — the exporter's watermarks, in the store itself (the
 * export_watermark table, which retention reads too; export.h).  A connection of its own, beside the
 * read-only one the exporter reads rows through: sbx-auditd holds the
 * store's writer lock, but SQLite lets a second writer in between the
 * daemon's transactions (WAL, busy timeout), and a mark is one short
 * statement. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <bsd/string.h>

#include "export_int.h"

int mark_open(const char *db, sqlite3 **out, char *err, size_t errsz)
{
    sqlite3 *h = NULL;
    *out = NULL;
    /* Never creates the store: a mark without its rows means nothing. */
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK)
        goto fail;
    sqlite3_busy_timeout(h, 10000);
    /* The store is WAL already (its writer set it); FULL: a mark is on
     * disk before the exporter moves past it. */
    if (sqlite3_exec(h, "PRAGMA synchronous=FULL;"
                        "CREATE TABLE IF NOT EXISTS export_watermark("
                        " sink TEXT PRIMARY KEY, row_id INTEGER NOT NULL, hash TEXT,"
                        " updated INTEGER)",
                     NULL, NULL, NULL) != SQLITE_OK)
        goto fail;
    *out = h;
    return 0;
fail:
    snprintf(err, errsz, "%s: cannot keep the export watermark: %s", db,
             h ? sqlite3_errmsg(h) : "out of memory");
    sqlite3_close(h);
    return -1;
}

int mark_get(sqlite3 *db, const char *name, int64_t *id, char hash[2 * (size_t)AUDIT_HASH_LEN + 1],
             char *err, size_t errsz)
{
    sqlite3_stmt *q = NULL;
    int rc = -1;
    if (sqlite3_prepare_v2(db, "SELECT row_id, hash FROM export_watermark WHERE sink = ?1", -1, &q,
                           NULL) != SQLITE_OK)
        goto out;
    sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
    int s = sqlite3_step(q);
    if (s == SQLITE_DONE) {
        rc = 0;
        goto out;
    }
    if (s != SQLITE_ROW)
        goto out;
    *id = sqlite3_column_int64(q, 0);
    const char *h = (const char *)sqlite3_column_text(q, 1);
    strlcpy(hash, h ? h : "", 2 * (size_t)AUDIT_HASH_LEN + 1);
    rc = 1;
out:
    if (rc < 0)
        snprintf(err, errsz, "reading the export watermark: %s", sqlite3_errmsg(db));
    sqlite3_finalize(q);
    return rc;
}

int mark_set(sqlite3 *db, const char *name, int64_t id, const char *hash, char *err, size_t errsz)
{
    sqlite3_stmt *q = NULL;
    int rc = -1;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (sqlite3_prepare_v2(db, "INSERT INTO export_watermark (sink, row_id, hash, updated)"
                               " VALUES (?1, ?2, ?3, ?4) ON CONFLICT(sink)"
                               " DO UPDATE SET row_id = ?2, hash = ?3, updated = ?4",
                           -1, &q, NULL) != SQLITE_OK)
        goto out;
    sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 2, id);
    sqlite3_bind_text(q, 3, hash, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 4, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
    if (sqlite3_step(q) != SQLITE_DONE)
        goto out;
    rc = 0;
out:
    if (rc < 0)
        snprintf(err, errsz, "writing the export watermark: %s", sqlite3_errmsg(db));
    sqlite3_finalize(q);
    return rc;
}
