/* store.c — opening the store, appending chained rows, batches (see store.h). */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bsd/string.h>

#include "paths.h"
#include "sha256.h"
#include "store_int.h"

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS agents("
    " id INTEGER PRIMARY KEY, name TEXT NOT NULL, run_id TEXT NOT NULL UNIQUE,"
    " policy_name TEXT, policy_sha256 TEXT, policy_file TEXT, workspace TEXT, command TEXT,"
    " uid INTEGER, guard_pid INTEGER, layers TEXT, started INTEGER, ended INTEGER,"
    " exit_status INTEGER, exit_detail TEXT, killed_by TEXT, kill_reason TEXT);"
    "CREATE TABLE IF NOT EXISTS events("
    " id INTEGER PRIMARY KEY, ts INTEGER NOT NULL, agent TEXT, run_id TEXT,"
    " pid INTEGER, uid INTEGER, op TEXT NOT NULL, target TEXT, target2 TEXT,"
    " decision TEXT NOT NULL, rule TEXT, reason TEXT, layer TEXT, errno INTEGER,"
    " flags INTEGER, prev_hash BLOB NOT NULL, hash BLOB NOT NULL, agent_ref INTEGER);"
    /* No index on events: each one was a B-tree insert per row, a third
     * of the row's cost.  --agent and --since read event_spans instead
     * (store_spans.c: one row per agent run per batch), through agent_ref
     * (agents.id); decision and op filters scan what those leave (or the
     * newest rows, with --limit).  agent_ref is derived data, outside the
     * hash chain: the chain covers the agent's name and run id. */
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value);"
    /* Retention (retention.c): one row per removal of old rows.  The chain
     * restarts after last_id, whose hash is kept here; row_id is the
     * events row (op "retention") that records the same removal inside
     * the chain, so that an altered checkpoint is caught by verify. */
    "CREATE TABLE IF NOT EXISTS checkpoints("
    " id INTEGER PRIMARY KEY, ts INTEGER NOT NULL, first_id INTEGER NOT NULL,"
    " last_id INTEGER NOT NULL, last_hash BLOB NOT NULL, rows INTEGER NOT NULL,"
    " reason TEXT NOT NULL, row_id INTEGER NOT NULL);"
    /* What each export sink has acknowledged: every row with id <= row_id
     * has reached SINK.  Written by the exporter, read by retention, which
     * never removes a row a sink has not acknowledged (store.h). */
    "CREATE TABLE IF NOT EXISTS export_watermark("
    " sink TEXT PRIMARY KEY, row_id INTEGER NOT NULL, hash TEXT, updated INTEGER);";

void store_set_err(struct audit_store *st, const char *what)
{
    snprintf(st->errmsg, sizeof st->errmsg, "%s: %s", what,
             st->db ? sqlite3_errmsg(st->db) : "no database");
}

const char *audit_store_errmsg(const struct audit_store *st)
{
    return st->errmsg;
}

const char *audit_store_head_path(const struct audit_store *st)
{
    return st->head;
}

int64_t audit_store_last_id(const struct audit_store *st)
{
    return st->last_id;
}

void audit_store_last_hash_hex(const struct audit_store *st, char out[2 * AUDIT_HASH_LEN + 1])
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < AUDIT_HASH_LEN; i++) {
        out[2 * i] = digits[st->last_hash[i] >> 4];
        out[2 * i + 1] = digits[st->last_hash[i] & 15];
    }
    out[(size_t)2 * AUDIT_HASH_LEN] = '\0';
}

size_t audit_store_pending(const struct audit_store *st)
{
    return st->in_txn ? st->pending : 0;
}

/* Reads the chain's end: the last row, else the last pruned row (meta). */
static int load_chain_head(struct audit_store *st)
{
    sqlite3_stmt *q = NULL;
    int rc = -1;
    st->last_id = 0;
    memset(st->last_hash, 0, sizeof st->last_hash);
    if (sqlite3_prepare_v2(st->db, "SELECT id, hash FROM events ORDER BY id DESC LIMIT 1",
                           -1, &q, NULL) != SQLITE_OK)
        goto out;
    int s = sqlite3_step(q);
    if (s == SQLITE_ROW) {
        st->last_id = sqlite3_column_int64(q, 0);
        if (sqlite3_column_bytes(q, 1) == AUDIT_HASH_LEN)
            memcpy(st->last_hash, sqlite3_column_blob(q, 1), AUDIT_HASH_LEN);
        rc = 0;
        goto out;
    }
    if (s != SQLITE_DONE)
        goto out;
    rc = store_pruned_anchor(st, &st->last_id, st->last_hash);
out:
    if (rc < 0)
        store_set_err(st, "reading the chain head");
    sqlite3_finalize(q);
    return rc;
}

int store_pruned_anchor(struct audit_store *st, int64_t *id, unsigned char hash[AUDIT_HASH_LEN])
{
    sqlite3_stmt *q = NULL;
    int rc = -1;
    *id = 0;
    memset(hash, 0, AUDIT_HASH_LEN);
    /* The newest checkpoint; a store pruned before checkpoints existed
     * kept its one anchor in meta. */
    int s = SQLITE_DONE;
    /* (A store opened read-only may predate the table.) */
    if (sqlite3_prepare_v2(st->db, "SELECT last_id, last_hash FROM checkpoints "
                           "ORDER BY last_id DESC LIMIT 1", -1, &q, NULL) == SQLITE_OK)
        s = sqlite3_step(q);
    if (s == SQLITE_ROW) {
        *id = sqlite3_column_int64(q, 0);
        if (sqlite3_column_bytes(q, 1) == AUDIT_HASH_LEN)
            memcpy(hash, sqlite3_column_blob(q, 1), AUDIT_HASH_LEN);
        rc = 0;
        goto out;
    }
    if (s != SQLITE_DONE)
        goto out;
    sqlite3_finalize(q);
    q = NULL;
    if (sqlite3_prepare_v2(st->db, "SELECT key, value FROM meta WHERE key IN "
                           "('pruned_id','pruned_hash')", -1, &q, NULL) != SQLITE_OK)
        goto out;
    while ((s = sqlite3_step(q)) == SQLITE_ROW) {
        const char *k = (const char *)sqlite3_column_text(q, 0);
        if (k && strcmp(k, "pruned_id") == 0)
            *id = sqlite3_column_int64(q, 1);
        else if (k && sqlite3_column_bytes(q, 1) == AUDIT_HASH_LEN)
            memcpy(hash, sqlite3_column_blob(q, 1), AUDIT_HASH_LEN);
    }
    rc = s == SQLITE_DONE ? 0 : -1;
out:
    sqlite3_finalize(q);
    return rc;
}

static int prepare(struct audit_store *st)
{
    static const char ins[] =
        "INSERT INTO events(id,ts,agent,run_id,pid,uid,op,target,target2,decision,rule,"
        "reason,layer,errno,flags,prev_hash,hash,agent_ref) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
    static const char ag[] =
        "INSERT INTO agents(name,run_id,policy_name,policy_sha256,policy_file,workspace,"
        "command,uid,guard_pid,layers,started) VALUES(?,?,?,?,?,?,?,?,?,?,?)";
    static const char end[] =
        "UPDATE agents SET ended=?, exit_status=?, exit_detail=? WHERE run_id=?";
    static const char kill[] =
        "UPDATE agents SET killed_by=?, kill_reason=? WHERE run_id=?";
    /* The same INSERT for STORE_ROWS_MULTI rows at once. */
    char multi[sizeof ins + (size_t)STORE_ROWS_MULTI * 40];
    size_t n = strlcpy(multi, ins, sizeof multi);
    for (unsigned i = 1; i < STORE_ROWS_MULTI && n < sizeof multi; i++)
        n += strlcpy(multi + n, ",(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", sizeof multi - n);
    if (n >= sizeof multi) {
        snprintf(st->errmsg, sizeof st->errmsg, "preparing statements: INSERT too long");
        return -1;
    }
    if (sqlite3_prepare_v3(st->db, ins, -1, SQLITE_PREPARE_PERSISTENT, &st->ins, NULL) ||
        sqlite3_prepare_v3(st->db, multi, -1, SQLITE_PREPARE_PERSISTENT, &st->ins_multi, NULL) ||
        sqlite3_prepare_v3(st->db, ag, -1, SQLITE_PREPARE_PERSISTENT, &st->agent_ins, NULL) ||
        sqlite3_prepare_v3(st->db, end, -1, SQLITE_PREPARE_PERSISTENT, &st->agent_end, NULL) ||
        sqlite3_prepare_v3(st->db, kill, -1, SQLITE_PREPARE_PERSISTENT, &st->agent_kill, NULL)) {
        store_set_err(st, "preparing statements");
        return -1;
    }
    return 0;
}

static int wal_hook(void *arg, sqlite3 *db, const char *name, int pages)
{
    (void)db;
    (void)name;
    ((struct audit_store *)arg)->wal_pages = pages;
    return SQLITE_OK;
}

/* A 64 MiB WAL is checkpointed even under load.  In bytes, not pages: a
 * count of pages taken for 4 KiB ones let a store of 16 KiB pages grow a
 * 256 MiB WAL, whose checkpoint held the daemon for seconds while the
 * agents' rings filled (bench_ingest then saw events given up after 2 s). */
#define WAL_MAX_BYTES (64 << 20)

int audit_store_checkpoint(struct audit_store *st, bool idle)
{
    if (st->ro || st->in_txn)
        return 0;
    bool due;
    if (st->ckpt) {
        /* The thread checkpoints (store_ckpt.c); the writer only when the
         * WAL outgrew what the thread can bring back. */
        if (store_ckpt_step(st, idle, &due) < 0)
            return -1;
    } else {
        due = idle || st->wal_pages >= st->wal_max_pages;
    }
    if (!due || st->wal_pages == 0)
        return 0;
    int log = 0, done = 0;
    int rc = sqlite3_wal_checkpoint_v2(st->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &done);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY) {
        store_set_err(st, "checkpoint");
        return -1;
    }
    /* Pages a reader still needs stay in the WAL: try again later. */
    st->wal_pages = store_wal_left(log, done);
    return 0;
}

int audit_store_open(const char *path, bool readonly, struct audit_store **out,
                     char *err, size_t errsz)
{
    struct audit_store *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(err, errsz, "out of memory");
        return -1;
    }
    st->ro = readonly;
    st->lock_fd = -1;
    if (strlcpy(st->path, path, sizeof st->path) >= sizeof st->path ||
        (size_t)snprintf(st->head, sizeof st->head, "%s.head", path) >= sizeof st->head) {
        snprintf(err, errsz, "%s: path too long", path);
        goto fail;
    }
    int flags;
    if (readonly) {
        if (access(path, F_OK) < 0) {
            snprintf(err, errsz, "no audit store at %s (nothing recorded yet?)", path);
            goto fail;
        }
        flags = SQLITE_OPEN_READONLY;
    } else {
        /* The store's directory is private: the agent (same uid, but
         * confined) and other users have no business there. */
        char dir[4096];
        strlcpy(dir, path, sizeof dir);
        char *d = dirname(dir);
        if (sbx_mkdir_p(d, 0700) < 0) {
            snprintf(err, errsz, "cannot create %s: %s", d, strerror(errno));
            goto fail;
        }
        /* One writer, and a store that is what its head file says: checked
         * before anything is created (store_check.c). */
        if (store_lock(st, err, errsz) < 0 || store_check_present(st, err, errsz) < 0)
            goto fail;
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0) {
            snprintf(err, errsz, "cannot open %s: %s", path, strerror(errno));
            goto fail;
        }
        close(fd);
        flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    }
    if (sqlite3_open_v2(path, &st->db, flags | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        snprintf(err, errsz, "cannot open %s: %s", path,
                 st->db ? sqlite3_errmsg(st->db) : "out of memory");
        goto fail;
    }
    sqlite3_busy_timeout(st->db, 5000);
    if (!readonly && store_check_integrity(st, err, errsz) < 0)
        goto fail;
    if (!readonly) {
        /* WAL: readers never block the writer.  NORMAL: a commit is
         * atomic and survives a process crash; only a power loss can take
         * the last commits (durable commits switch to FULL). */
        /* Checkpoints are ours (audit_store_checkpoint): SQLite's automatic
         * one every 1000 pages rewrites the same index pages into the
         * database over and over while events stream in. */
        /* 16 KiB pages (a new store only; an existing one keeps its
         * own): a fifth less CPU per row than 4 KiB ones (bench_store).
         * An 8 MiB page cache: its pages are reused while still in the
         * CPU's caches, where 64 MiB cost 15-20% more CPU per row in
         * bench_ingest (each new page a page fault and a cold memset);
         * and it holds a full batch (BATCH_ROWS rows, about 4 MiB of
         * pages) without spilling to the WAL mid-transaction. */
        const char *pragmas =
            "PRAGMA page_size=16384;"
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
            "PRAGMA cache_size=-8192; PRAGMA temp_store=MEMORY;"
            "PRAGMA wal_autocheckpoint=0; PRAGMA journal_size_limit=67108864;";
        if (sqlite3_exec(st->db, pragmas, NULL, NULL, NULL) != SQLITE_OK ||
            sqlite3_exec(st->db, schema, NULL, NULL, NULL) != SQLITE_OK) {
            snprintf(err, errsz, "cannot initialise %s: %s", path, sqlite3_errmsg(st->db));
            goto fail;
        }
        sqlite3_wal_hook(st->db, wal_hook, st);
        /* More lookaside memory: the insert path then rarely calls malloc. */
        sqlite3_db_config(st->db, SQLITE_DBCONFIG_LOOKASIDE, NULL, 512, 2000);
        sqlite3_stmt *ps = NULL;
        int64_t page = 4096;
        if (sqlite3_prepare_v2(st->db, "PRAGMA page_size", -1, &ps, NULL) == SQLITE_OK &&
            sqlite3_step(ps) == SQLITE_ROW && sqlite3_column_int64(ps, 0) > 0)
            page = sqlite3_column_int64(ps, 0);
        sqlite3_finalize(ps);
        st->wal_max_pages = WAL_MAX_BYTES / page;
        if (store_spans_open(st) < 0 || prepare(st) < 0 || load_chain_head(st) < 0 ||
            store_mark_home(st) < 0) {
            snprintf(err, errsz, "%s", st->errmsg);
            goto fail;
        }
        if (store_check_head(st, err, errsz) < 0)
            goto fail;
        if (store_note_file(st) < 0) {
            snprintf(err, errsz, "%s: %s", path, strerror(errno));
            goto fail;
        }
    } else {
        sqlite3_stmt *q = NULL;
        int ok = sqlite3_prepare_v2(st->db, "SELECT 1 FROM events LIMIT 1", -1, &q, NULL) == SQLITE_OK;
        sqlite3_finalize(q);
        if (!ok) {
            snprintf(err, errsz, "%s is not an sbx audit store: %s", path, sqlite3_errmsg(st->db));
            goto fail;
        }
        if (store_spans_open(st) < 0) {
            snprintf(err, errsz, "%s: %s", path, st->errmsg);
            goto fail;
        }
    }
    memcpy(st->t_hash, st->last_hash, AUDIT_HASH_LEN);
    st->t_id = st->last_id;
    *out = st;
    return 0;
fail:
    audit_store_close(st);
    return -1;
}

static int write_head(struct audit_store *st, bool durable);

void audit_store_close(struct audit_store *st)
{
    if (!st)
        return;
    store_ckpt_stop(st);
    if (st->in_txn)
        audit_store_rollback(st);
    if (st->head_dirty && !st->ro)
        (void)write_head(st, false);
    sqlite3_finalize(st->ins);
    sqlite3_finalize(st->ins_multi);
    for (size_t i = 0; i < STORE_ROWS_MULTI; i++)
        free(st->pend[i].buf);
    sqlite3_finalize(st->agent_ins);
    sqlite3_finalize(st->agent_end);
    sqlite3_finalize(st->agent_kill);
    sqlite3_finalize(st->span_ins);
    if (st->db)
        sqlite3_close(st->db);
    if (st->lock_fd >= 0)
        close(st->lock_fd);     /* the file stays: removing it races a new writer */
    free(st);
}

/* ---- the chain ----------------------------------------------------------- */

struct canon { unsigned char *p; size_t n, cap; };

static void put_bytes(struct canon *c, const void *src, size_t n)
{
    if (c->n + n > c->cap)
        return;     /* cannot happen: the buffer is sized for the row */
    memcpy(c->p + c->n, src, n);
    c->n += n;
}

static void put_u64(struct canon *c, uint64_t v)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap64(v);   /* the canonical form is big-endian */
#endif
    put_bytes(c, &v, 8);
}

/* A string as a 32-bit big-endian length and its bytes; NULL as length
 * 0xffffffff, so that NULL and "" hash differently. */
static void put_str(struct canon *c, const char *s, size_t len)
{
    unsigned char b[4];
    uint32_t v = s ? (uint32_t)len : 0xffffffffu;
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(v >> (24 - 8 * i));
    put_bytes(c, b, 4);
    if (s)
        put_bytes(c, s, len);
}

/* The canonical bytes: "sbx-row-v1", then id, ts, agent, run_id, pid, uid,
 * op, target, target2, decision, rule, reason, layer, errno, flags in that
 * order (integers 64-bit big-endian).  Changing this invalidates every
 * stored chain: add a new version instead. */
/* The row's nine strings in canonical order, and their lengths (0 for
 * NULL): measured once, for the hash and for SQLite's bindings. */
static void row_strings(const struct audit_row *r, const char *s[9], size_t len[9])
{
    s[0] = r->agent, s[1] = r->run_id, s[2] = r->op, s[3] = r->target, s[4] = r->target2;
    s[5] = r->decision, s[6] = r->rule, s[7] = r->reason, s[8] = r->layer;
    for (int i = 0; i < 9; i++)
        len[i] = s[i] ? strlen(s[i]) : 0;
}

static void row_hash(const unsigned char prev[AUDIT_HASH_LEN], const struct audit_row *r,
                     const char *const s[9], const size_t len[9], unsigned char out[AUDIT_HASH_LEN]);

void audit_row_hash(const unsigned char prev[AUDIT_HASH_LEN], const struct audit_row *r,
                    unsigned char out[AUDIT_HASH_LEN])
{
    const char *s[9];
    size_t len[9];
    row_strings(r, s, len);
    row_hash(prev, r, s, len, out);
}

static void row_hash(const unsigned char prev[AUDIT_HASH_LEN], const struct audit_row *r,
                     const char *const s[9], const size_t len[9], unsigned char out[AUDIT_HASH_LEN])
{
    size_t need = AUDIT_HASH_LEN + 16 + 6 * 8 + 9 * 4;
    for (int i = 0; i < 9; i++)
        need += len[i];
    unsigned char stackbuf[2048];
    struct canon c = { stackbuf, 0, sizeof stackbuf };
    if (need > sizeof stackbuf) {
        c.p = malloc(need);
        c.cap = need;
        if (!c.p) {     /* cannot hash: yields a hash verify will flag */
            memset(out, 0, AUDIT_HASH_LEN);
            return;
        }
    }
    put_bytes(&c, prev, AUDIT_HASH_LEN);
    put_bytes(&c, "sbx-row-v1", 10);
    put_u64(&c, (uint64_t)r->id);
    put_u64(&c, (uint64_t)r->ts_ns);
    put_str(&c, s[0], len[0]);
    put_str(&c, s[1], len[1]);
    put_u64(&c, (uint64_t)r->pid);
    put_u64(&c, (uint64_t)r->uid);
    for (int i = 2; i < 9; i++)
        put_str(&c, s[i], len[i]);
    put_u64(&c, (uint64_t)r->err);
    put_u64(&c, (uint64_t)r->flags);
    audit_sha256(c.p, c.n, out);
    if (c.p != stackbuf)
        free(c.p);
}

/* ---- batches ------------------------------------------------------------- */

static int begin(struct audit_store *st);

int store_begin(struct audit_store *st)
{
    return begin(st);
}

static int begin(struct audit_store *st)
{
    if (st->in_txn)
        return 0;
    if (sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        store_set_err(st, "BEGIN");
        return -1;
    }
    st->in_txn = true;
    st->pending = 0;
    st->t_id = st->last_id;
    memcpy(st->t_hash, st->last_hash, AUDIT_HASH_LEN);
    store_spans_reset(st);
    return 0;
}

/* A failed statement ends the whole batch: SQLite may already have rolled
 * the transaction back by itself (SQLITE_FULL, SQLITE_IOERR), and rows
 * appended after that would commit one by one, outside the batch. */
static void fail_batch(struct audit_store *st, const char *what)
{
    store_set_err(st, what);
    audit_store_rollback(st);
}

static void bind_text(sqlite3_stmt *q, int i, const char *s)
{
    if (s)
        sqlite3_bind_text(q, i, s, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(q, i);
}

/* With its length known (row_strings); lengths past INT_MAX cannot come
 * from a ring record or the control socket. */
static void bind_text_len(sqlite3_stmt *q, int i, const char *s, size_t len)
{
    if (s)
        sqlite3_bind_text(q, i, s, len <= INT_MAX ? (int)len : -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(q, i);
}

/* Binds pending row P as the 18 parameters from BASE + 1 on. */
static void bind_pending(sqlite3_stmt *q, int base, const struct store_pending *p)
{
    sqlite3_bind_int64(q, base + 1, p->id);
    sqlite3_bind_int64(q, base + 2, p->ts);
    static const int col[9] = { 3, 4, 7, 8, 9, 10, 11, 12, 13 };
    for (int i = 0; i < 9; i++)
        bind_text_len(q, base + col[i], p->off[i] == SIZE_MAX ? NULL : p->buf + p->off[i],
                      p->len[i]);
    sqlite3_bind_int64(q, base + 5, p->pid);
    sqlite3_bind_int64(q, base + 6, p->uid);
    sqlite3_bind_int64(q, base + 14, p->err);
    sqlite3_bind_int64(q, base + 15, p->flags);
    sqlite3_bind_blob(q, base + 16, p->prev, AUDIT_HASH_LEN, SQLITE_STATIC);
    sqlite3_bind_blob(q, base + 17, p->hash, AUDIT_HASH_LEN, SQLITE_STATIC);
    if (p->agent_ref > 0)
        sqlite3_bind_int64(q, base + 18, p->agent_ref);
    else
        sqlite3_bind_null(q, base + 18);
}

static int run_insert(struct audit_store *st, sqlite3_stmt *q)
{
    /* Every parameter is bound on every run: no clear_bindings needed. */
    int s = sqlite3_step(q);
    sqlite3_reset(q);
    if (s != SQLITE_DONE) {
        fail_batch(st, "inserting an event");
        return -1;
    }
    return 0;
}

int store_rows_flush(struct audit_store *st)
{
    size_t n = st->n_pend;
    st->n_pend = 0;
    if (n == STORE_ROWS_MULTI) {
        for (size_t i = 0; i < n; i++)
            bind_pending(st->ins_multi, (int)i * 18, &st->pend[i]);
        return run_insert(st, st->ins_multi);
    }
    for (size_t i = 0; i < n; i++) {
        bind_pending(st->ins, 0, &st->pend[i]);
        if (run_insert(st, st->ins) < 0)
            return -1;
    }
    return 0;
}

/* Keeps a copy of row R (its strings STR, LEN) to be inserted. */
static int pend_row(struct audit_store *st, const struct audit_row *r, const char *const str[9],
                    const size_t len[9])
{
    struct store_pending *p = &st->pend[st->n_pend];
    size_t need = 0;
    for (int i = 0; i < 9; i++)
        need += str[i] ? len[i] + 1 : 0;
    if (need > p->cap) {
        size_t cap = need < 512 ? 512 : need;
        char *b = realloc(p->buf, cap);
        if (!b) {
            snprintf(st->errmsg, sizeof st->errmsg, "inserting an event: out of memory");
            audit_store_rollback(st);
            return -1;
        }
        p->buf = b;
        p->cap = cap;
    }
    size_t off = 0;
    for (int i = 0; i < 9; i++) {
        p->len[i] = len[i];
        if (!str[i]) {
            p->off[i] = SIZE_MAX;
            continue;
        }
        memcpy(p->buf + off, str[i], len[i]);
        p->buf[off + len[i]] = '\0';
        p->off[i] = off;
        off += len[i] + 1;
    }
    p->id = r->id, p->ts = r->ts_ns, p->pid = r->pid, p->uid = r->uid;
    p->err = r->err, p->flags = r->flags, p->agent_ref = r->agent_ref;
    memcpy(p->prev, r->prev_hash, AUDIT_HASH_LEN);
    memcpy(p->hash, r->hash, AUDIT_HASH_LEN);
    st->n_pend++;
    return 0;
}

int audit_store_append(struct audit_store *st, struct audit_row *r)
{
    if (begin(st) < 0)
        return -1;
    r->id = st->t_id + 1;
    memcpy(r->prev_hash, st->t_hash, AUDIT_HASH_LEN);
    const char *str[9];
    size_t len[9];
    row_strings(r, str, len);
    row_hash(r->prev_hash, r, str, len, r->hash);
    if (pend_row(st, r, str, len) < 0)
        return -1;
    if (st->n_pend == STORE_ROWS_MULTI && store_rows_flush(st) < 0)
        return -1;
    if (store_spans_note(st, r) < 0) {
        audit_store_rollback(st);
        return -1;
    }
    st->t_id = r->id;
    memcpy(st->t_hash, r->hash, AUDIT_HASH_LEN);
    st->pending++;
    return 0;
}

static int step_done(struct audit_store *st, sqlite3_stmt *q, const char *what)
{
    int s = sqlite3_step(q);
    sqlite3_reset(q);
    sqlite3_clear_bindings(q);
    if (s != SQLITE_DONE) {
        fail_batch(st, what);
        return -1;
    }
    st->pending++;
    return 0;
}

int audit_store_agent_start(struct audit_store *st, const struct audit_agent *a,
                            int64_t *agent_ref)
{
    if (begin(st) < 0)
        return -1;
    sqlite3_stmt *q = st->agent_ins;
    bind_text(q, 1, a->name);
    bind_text(q, 2, a->run_id);
    bind_text(q, 3, a->policy_name);
    bind_text(q, 4, a->policy_sha256);
    bind_text(q, 5, a->policy_file);
    bind_text(q, 6, a->workspace);
    bind_text(q, 7, a->command);
    sqlite3_bind_int64(q, 8, a->uid);
    sqlite3_bind_int64(q, 9, a->guard_pid);
    bind_text(q, 10, a->layers);
    sqlite3_bind_int64(q, 11, a->started_ns);
    if (step_done(st, q, "recording an agent") < 0)
        return -1;
    *agent_ref = sqlite3_last_insert_rowid(st->db);
    return 0;
}

int audit_store_agent_end(struct audit_store *st, const char *run_id, int64_t ended_ns,
                          int status, const char *detail)
{
    if (begin(st) < 0)
        return -1;
    sqlite3_stmt *q = st->agent_end;
    sqlite3_bind_int64(q, 1, ended_ns);
    sqlite3_bind_int(q, 2, status);
    bind_text(q, 3, detail);
    bind_text(q, 4, run_id);
    return step_done(st, q, "recording an agent's end");
}

int audit_store_agent_killed(struct audit_store *st, const char *run_id, const char *by,
                             const char *reason)
{
    if (begin(st) < 0)
        return -1;
    sqlite3_stmt *q = st->agent_kill;
    bind_text(q, 1, by);
    bind_text(q, 2, reason);
    bind_text(q, 3, run_id);
    return step_done(st, q, "recording a kill");
}

void audit_store_rollback(struct audit_store *st)
{
    if (!st->in_txn)
        return;
    if (!sqlite3_get_autocommit(st->db))
        sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    st->in_txn = false;
    st->pending = 0;
    st->n_pend = 0;
    st->t_id = st->last_id;
    memcpy(st->t_hash, st->last_hash, AUDIT_HASH_LEN);
    store_spans_reset(st);
}

/* Rewrites the head file: write a temporary, then rename over (atomic for
 * readers).  DURABLE syncs the file and the directory. */
static int write_head(struct audit_store *st, bool durable)
{
    char tmp[sizeof st->head + 8], hex[2 * AUDIT_HASH_LEN + 1], buf[200];
    snprintf(tmp, sizeof tmp, "%s.tmp", st->head);
    for (size_t i = 0; i < AUDIT_HASH_LEN; i++)
        snprintf(hex + 2 * i, 3, "%02x", st->last_hash[i]);
    int n = snprintf(buf, sizeof buf, "sbx-audit-head 1\nid %lld\nhash %s\n",
                     (long long)st->last_id, hex);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        goto fail;
    if (write(fd, buf, (size_t)n) != n || (durable && fsync(fd) < 0)) {
        close(fd);
        goto fail;
    }
    close(fd);
    if (rename(tmp, st->head) < 0)
        goto fail;
    st->head_dirty = false;
    if (durable) {
        char dir[sizeof st->path];
        strlcpy(dir, st->path, sizeof dir);
        int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
    }
    return 0;
fail:
    if (snprintf(st->errmsg, sizeof st->errmsg, "writing %s: %s", st->head, strerror(errno)) < 0)
        st->errmsg[0] = '\0';
    return -1;
}

void audit_store_set_fault_file(struct audit_store *st, const char *path)
{
    strlcpy(st->fault_file, path ? path : "", sizeof st->fault_file);
}

int audit_store_commit(struct audit_store *st, bool durable)
{
    if (!st->in_txn)
        return durable ? write_head(st, true) : 0;
    if (st->fault_file[0] && access(st->fault_file, F_OK) == 0) {
        snprintf(st->errmsg, sizeof st->errmsg, "injected fault (%s exists)", "fault file");
        audit_store_rollback(st);
        return -1;
    }
    if (store_check_same_file(st) < 0) {
        audit_store_rollback(st);
        return -1;
    }
    if (store_rows_flush(st) < 0 || store_spans_flush(st) < 0) {
        audit_store_rollback(st);
        return -1;
    }
    if (durable)
        sqlite3_exec(st->db, "PRAGMA synchronous=FULL", NULL, NULL, NULL);
    int s = sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL);
    if (durable)
        sqlite3_exec(st->db, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL);
    if (s != SQLITE_OK) {
        store_set_err(st, "COMMIT");
        audit_store_rollback(st);
        return -1;
    }
    st->in_txn = false;
    st->pending = 0;
    st->last_id = st->t_id;
    memcpy(st->last_hash, st->t_hash, AUDIT_HASH_LEN);
    st->ts_max = st->t_ts_max;
    /* The rows are committed; a head file that fails to update only makes
     * verify report "head behind", which the next write repairs.  Only a
     * durable commit writes it at once: a write and a rename cost more than
     * the commit of a small batch, so the caller says when the head follows
     * routine commits (audit_store_flush_head). */
    if (!durable) {
        st->head_dirty = true;
        return 0;
    }
    return write_head(st, true) < 0 ? -1 : 0;
}

bool audit_store_head_behind(const struct audit_store *st)
{
    return st->head_dirty;
}

int audit_store_flush_head(struct audit_store *st)
{
    return st->head_dirty ? write_head(st, false) : 0;
}
