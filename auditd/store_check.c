/*
 * store_check.c — what the store's one writer checks before it appends and
 * while it does (see store_int.h): that it is the only writer, that the
 * store is whole (SQLite's own check) and still what its head file says
 * it is, and that the file it writes is still the one at its path.
 *
 * Each check that fails is an alarm, not a repair: the writer refuses to
 * append and says why, and nothing is created, truncated or overwritten,
 * so the evidence stays as it was found.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bsd/stdlib.h>
#include <bsd/string.h>

#include "store_int.h"

int store_read_head(const char *path, int64_t *id, char hash[2 * AUDIT_HASH_LEN + 1])
{
    FILE *f = fopen(path, "re");
    if (!f)
        return errno == ENOENT ? 0 : -1;
    char line[256];
    int got = 0;
    long long v;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "id %lld", &v) == 1) {
            *id = v;
            got |= 1;
        } else if (sscanf(line, "hash %64[0-9a-f]", hash) == 1 && strlen(hash) == 64) {
            got |= 2;
        }
    }
    fclose(f);
    return got == 3 ? 1 : -1;
}

int store_lock(struct audit_store *st, char *err, size_t errsz)
{
    char lock[sizeof st->path + 8];
    if ((size_t)snprintf(lock, sizeof lock, "%s.lock", st->path) >= sizeof lock) {
        snprintf(err, errsz, "%s: path too long", st->path);
        return -1;
    }
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        snprintf(err, errsz, "cannot open %s: %s", lock, strerror(errno));
        return -1;
    }
    /* flock, not a POSIX lock: SQLite's own POSIX locks on the database
     * would not see it, and closing some other descriptor of the file
     * would not drop it. */
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        char buf[32] = "";
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        buf[n > 0 ? n : 0] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        snprintf(err, errsz, "%s is written by another sbx-auditd (pid %s), reached through "
                 "another runtime directory: one store has one writer; stop that daemon, or "
                 "give this one its own store (SBX_AUDIT_DB)", st->path, buf[0] ? buf : "?");
        close(fd);
        return -1;
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
        /* The lock is what counts; the pid is only for the message. */
    }
    st->lock_fd = fd;
    return 0;
}

int store_check_present(struct audit_store *st, char *err, size_t errsz)
{
    int64_t id = 0;
    char hash[2 * AUDIT_HASH_LEN + 1];
    int head = store_read_head(st->head, &id, hash);
    struct stat sb;
    bool gone = stat(st->path, &sb) < 0;
    if (head != 0 && (gone || sb.st_size == 0)) {
        snprintf(err, errsz, "AUDIT STORE MISSING: %s is %s but its head file %s names row "
                 "%lld: the history was removed; refusing to start a new chain over it (keep "
                 "the head file as evidence; move it away to start afresh)", st->path,
                 gone ? "gone" : "empty", st->head, (long long)id);
        return -1;
    }
    return 0;
}

int store_check_head(struct audit_store *st, char *err, size_t errsz)
{
    int64_t id = 0;
    char want[2 * AUDIT_HASH_LEN + 1] = "", got[2 * AUDIT_HASH_LEN + 1] = "";
    int head = store_read_head(st->head, &id, want);
    if (head == 0)
        return 0;               /* a new store, or one from before head files */
    if (head < 0) {
        snprintf(err, errsz, "AUDIT STORE HEAD UNREADABLE: %s is unreadable or malformed; "
                 "refusing to append to %s until it is checked (sbx-audit verify)", st->head,
                 st->path);
        return -1;
    }
    if (id > st->last_id) {
        snprintf(err, errsz, "AUDIT STORE TRUNCATED: %s ends at row %lld but its head file %s "
                 "names row %lld: rows were removed; refusing to append (keep both files as "
                 "evidence; move them away to start afresh)", st->path, (long long)st->last_id,
                 st->head, (long long)id);
        return -1;
    }
    /* The head may lag the store (rows committed after it was written, by a
     * daemon that then died): the row it names must carry its hash. */
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(st->db, "SELECT hash FROM events WHERE id = ?", -1, &q, NULL) ==
        SQLITE_OK) {
        sqlite3_bind_int64(q, 1, id);
        if (sqlite3_step(q) == SQLITE_ROW && sqlite3_column_bytes(q, 0) == AUDIT_HASH_LEN) {
            const unsigned char *h = sqlite3_column_blob(q, 0);
            for (size_t i = 0; i < AUDIT_HASH_LEN; i++)
                snprintf(got + 2 * i, 3, "%02x", h[i]);
        }
    }
    sqlite3_finalize(q);
    if (!got[0]) {
        unsigned char a[AUDIT_HASH_LEN];
        int64_t aid;
        if (store_pruned_anchor(st, &aid, a) == 0 && aid == id)
            for (size_t i = 0; i < AUDIT_HASH_LEN; i++)
                snprintf(got + 2 * i, 3, "%02x", a[i]);
        else if (id == 0)
            strlcpy(got, want, sizeof got);
    }
    if (strcmp(got, want) != 0) {
        snprintf(err, errsz, "AUDIT STORE REPLACED: row %lld of %s does not carry the hash its "
                 "head file %s names: this is not the chain the head follows; refusing to append "
                 "(keep both files as evidence)", (long long)id, st->path, st->head);
        return -1;
    }
    return 0;
}

int store_check_integrity(struct audit_store *st, char *err, size_t errsz)
{
    sqlite3_stmt *q = NULL;
    int rc = -1;
    if (sqlite3_prepare_v2(st->db, "PRAGMA quick_check(1)", -1, &q, NULL) != SQLITE_OK) {
        snprintf(err, errsz, "AUDIT STORE DAMAGED: %s: %s; refusing to append (keep it as "
                 "evidence; move it and its head file away to start afresh)", st->path,
                 sqlite3_errmsg(st->db));
        goto out;
    }
    int s = sqlite3_step(q);
    const char *res = s == SQLITE_ROW ? (const char *)sqlite3_column_text(q, 0) : NULL;
    if (!res || strcmp(res, "ok") != 0) {
        /* SQLite's answer spans lines ("*** in database main ***\nPage
         * 130: ..."): one line, for the log and for sbx-guard. */
        char what[512];
        strlcpy(what, res ? res : sqlite3_errmsg(st->db), sizeof what);
        for (char *p = what; *p; p++)
            if (*p == '\n')
                *p = ' ';
        snprintf(err, errsz, "AUDIT STORE DAMAGED: %s: %s; refusing to append (keep it as "
                 "evidence; move it and its head file away to start afresh)", st->path, what);
        goto out;
    }
    rc = 0;
out:
    sqlite3_finalize(q);
    return rc;
}

int store_check_same_file(struct audit_store *st)
{
    struct stat sb;
    if (stat(st->path, &sb) == 0 && sb.st_dev == st->dev && sb.st_ino == st->ino)
        return 0;
    if (snprintf(st->errmsg, sizeof st->errmsg, "AUDIT STORE REMOVED: %s was %s while "
                 "sbx-auditd ran; rows written now would be lost with the old file, so none are "
                 "(put it back, or stop sbx-auditd and keep the head file as evidence)",
                 st->path, errno == ENOENT ? "deleted" : "replaced") < 0)
        st->errmsg[0] = '\0';
    return -1;
}

int store_note_file(struct audit_store *st)
{
    struct stat sb;
    if (stat(st->path, &sb) < 0)
        return -1;
    st->dev = sb.st_dev;
    st->ino = sb.st_ino;
    return 0;
}

int audit_store_agent_resumable(struct audit_store *st, const char *run_id, const char *name,
                                int64_t uid, int64_t *agent_ref, char *err, size_t errsz)
{
    sqlite3_stmt *q = NULL;
    int rc = -1;
    if (sqlite3_prepare_v2(st->db, "SELECT id, name, uid, ended FROM agents WHERE run_id = ?",
                           -1, &q, NULL) != SQLITE_OK) {
        snprintf(err, errsz, "audit store: %s", sqlite3_errmsg(st->db));
        goto out;
    }
    sqlite3_bind_text(q, 1, run_id, -1, SQLITE_STATIC);
    if (sqlite3_step(q) != SQLITE_ROW) {
        snprintf(err, errsz, "no run %s in the audit store", run_id);
        goto out;
    }
    const char *n = (const char *)sqlite3_column_text(q, 1);
    if (!n || strcmp(n, name) != 0) {
        snprintf(err, errsz, "run %s is not agent '%s'", run_id, name);
        goto out;
    }
    if (uid != 0 && sqlite3_column_int64(q, 2) != uid) {
        snprintf(err, errsz, "run %s belongs to another user", run_id);
        goto out;
    }
    if (sqlite3_column_type(q, 3) != SQLITE_NULL) {
        snprintf(err, errsz, "run %s has ended", run_id);
        goto out;
    }
    *agent_ref = sqlite3_column_int64(q, 0);
    rc = 0;
out:
    sqlite3_finalize(q);
    return rc;
}
