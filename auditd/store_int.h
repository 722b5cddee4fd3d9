/* store_int.h — the store's private state, shared by store.c, query.c and
 * verify.c only. */
#ifndef SBX_AUDIT_STORE_INT_H
#define SBX_AUDIT_STORE_INT_H

#include <sqlite3.h>
#include <sys/types.h>

#include "store.h"

/* A span: the rows one agent run (agent_ref, 0 for rows without one) wrote
 * in one batch, by first and last id and their ts range (store_spans.c). */
struct store_span {
    int64_t agent_ref, first_id, last_id, min_ts, max_ts;
};
/* Distinct agents in one batch before its spans are written out early. */
#define STORE_SPANS_MAX 32
/* Rows appended but not yet inserted: they go in by STORE_ROWS_MULTI in
 * one INSERT of that many rows (one statement run per row cost a cursor
 * opened, a B-tree descent and closed each time), the rest at the commit.
 * Each keeps a copy of its strings. */
#define STORE_ROWS_MULTI 16u
struct store_pending {
    int64_t id, ts, pid, uid, err, flags, agent_ref;
    size_t off[9], len[9];      /* in buf; off SIZE_MAX for NULL */
    unsigned char prev[AUDIT_HASH_LEN], hash[AUDIT_HASH_LEN];
    char *buf;
    size_t cap;
};

struct audit_store {
    sqlite3 *db;
    bool ro;
    bool export_required;                   /* retention waits for the exporter */
    bool size_draining;                     /* retention: over the cap, trimming to 80% */
    char path[4096];
    char head[4104];
    sqlite3_stmt *ins, *ins_multi, *agent_ins, *agent_end, *agent_kill;
    bool in_txn;
    size_t pending;
    int64_t last_id;                        /* committed chain end */
    unsigned char last_hash[AUDIT_HASH_LEN];
    int64_t t_id;                           /* end inside the open batch */
    unsigned char t_hash[AUDIT_HASH_LEN];
    int wal_pages;                          /* WAL size after the last commit */
    int64_t wal_max_pages;                  /* checkpoint above this (64 MiB) */
    struct store_ckpt *ckpt;                /* the checkpoint thread, or NULL */
    unsigned long ckpt_seen;                /* its checkpoints looked at */
    int ckpt_asked_pages;                   /* wal_pages when it was last asked */
    /* The open batch's spans (store_spans.c), and the largest ts of every
     * row up to the committed end (ts_max) and up to the batch's end. */
    struct store_span spans[STORE_SPANS_MAX];
    size_t n_spans;
    struct store_pending pend[STORE_ROWS_MULTI];
    size_t n_pend;
    int64_t ts_max, t_ts_max;
    sqlite3_stmt *span_ins;
    bool has_spans;                         /* event_spans exists (read-only
                                             * opens of an old store: no) */
    bool head_dirty;                        /* rows committed after the head file */
    char fault_file[256];                   /* tests: commits fail while it exists */
    char errmsg[1024];
    int lock_fd;                            /* the writer's flock, -1 if none */
    dev_t dev;                              /* the file the writer opened */
    ino_t ino;
};

void store_set_err(struct audit_store *st, const char *what);
/* The WAL's frames a checkpoint left uncopied (LOG and DONE as
 * sqlite3_wal_checkpoint_v2 reports them; 0: it starts over at the next
 * commit). */
static inline int store_wal_left(int log, int done)
{
    return log > done ? log - done : 0;
}
/* store_check.c: the writer's checks.  Each returns 0, or -1 with the
 * reason in ERR (or st->errmsg), worded for the operator. */
/* Reads the head file: 1 and *ID/HASH, 0 when there is none, -1 when it
 * is unreadable or malformed. */
int store_read_head(const char *path, int64_t *id, char hash[2 * AUDIT_HASH_LEN + 1]);
/* Takes the store's writer lock (PATH.lock, flock; held until close). */
int store_lock(struct audit_store *st, char *err, size_t errsz);
/* Before the store is opened: a head file without its store is an alarm. */
int store_check_present(struct audit_store *st, char *err, size_t errsz);
/* After the chain head is loaded: the store holds what its head names. */
int store_check_head(struct audit_store *st, char *err, size_t errsz);
/* SQLite's quick_check (about 1.7 s per million rows). */
int store_check_integrity(struct audit_store *st, char *err, size_t errsz);
/* Records which file the writer has open; then, before every commit,
 * checks that it is still the one at the store's path. */
int store_note_file(struct audit_store *st);
int store_check_same_file(struct audit_store *st);
/* Records in meta where this store lives (its real path, key "home"), so
 * that verify can tell a copy (SQLite's .backup, cp) from the store itself:
 * a copy may lack the head file, the store may not.  0 / -1. */
int store_mark_home(struct audit_store *st);

/* The chain's starting point: the newest retention checkpoint (or the
 * anchor an older store kept in meta); id 0 and a zero hash when nothing
 * was ever removed. */
int store_pruned_anchor(struct audit_store *st, int64_t *id, unsigned char hash[AUDIT_HASH_LEN]);
/* Inserts the rows appended but not yet inserted (before the commit and
 * before anything reads events on the writer's connection).  0 / -1
 * (errmsg; the batch is rolled back). */
int store_rows_flush(struct audit_store *st);
/* Opens the batch (BEGIN IMMEDIATE) if none is open.  0 / -1 (errmsg). */
int store_begin(struct audit_store *st);
/* store_spans.c: the coarse index that replaced events' two B-tree
 * indexes.  Creates event_spans and migrates a store that had the indexes
 * (writer only); notes whether the table is there (readers).  0 / -1. */
int store_spans_open(struct audit_store *st);
/* Notes row R (appended to the open batch) in its span; writes the spans
 * out early when the batch holds too many agents.  0 / -1 (errmsg). */
int store_spans_note(struct audit_store *st, const struct audit_row *r);
/* Writes the open batch's spans into event_spans (inside the batch).
 * 0 / -1 (errmsg; the caller rolls back). */
int store_spans_flush(struct audit_store *st);
/* Forgets the open batch's spans (rollback). */
void store_spans_reset(struct audit_store *st);
/* The smallest id a row with ts >= SINCE_NS can have (INT64_MAX: none). */
int store_spans_since(struct audit_store *st, int64_t since_ns, int64_t *lo);
/* The id ranges holding the rows of the runs of agent NAME with ts >=
 * SINCE_NS and id >= LO, merged and in id order: *OUT (malloc'd, freed by
 * the caller) of *N pairs first, last.  0 / -1. */
int store_spans_agent(struct audit_store *st, const char *name, int64_t since_ns, int64_t lo,
                      int64_t **out, size_t *n);

/* store_ckpt.c: the checkpoint thread.  Step: takes the result of the
 * thread's last checkpoint (-1 with errmsg if it failed), and asks it for
 * another when the WAL grew or the daemon is IDLE; *INLINE_NEEDED when the
 * WAL outgrew four times its bound and the writer should copy the rest
 * itself.  Stop: ends the thread (nothing when there is none). */
int store_ckpt_step(struct audit_store *st, bool idle, bool *inline_needed);
void store_ckpt_stop(struct audit_store *st);

/* verify.c: checks the checkpoints against the rows that record them
 * (retention.c).  0 when they agree, else 1 with *BAD_ID and MSG set;
 * -1 on a read error. */
int store_check_checkpoints(struct audit_store *st, int64_t *bad_id, char *msg, size_t msgsz);

#endif

#ifndef SBX_STORE_ROW_READER
#define SBX_STORE_ROW_READER
/* The events columns in the order store_read_row expects. */
extern const char store_row_cols[];
/* Fills R from the current row of Q (pointers valid until the next step). */
void store_read_row(sqlite3_stmt *q, struct audit_row *r);
#endif
