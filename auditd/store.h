/*
 * store.h — the audit store: a SQLite database in WAL mode holding the
 * agents and their events, each event row chained to the one before it by
 * SHA-256 (hash = SHA-256(prev_hash || canonical bytes of the row)).
 *
 * The writer (sbx-auditd, one per store) appends rows inside a transaction
 * (audit_store_append assigns id, prev_hash and hash) and commits in
 * batches; each commit also rewrites the head file (DB + ".head": last id
 * and hash) atomically by rename.  Readers (sbx-audit) open the store
 * read-only and never block the writer (WAL); they read through the
 * functions below only, so the schema is this module's alone.  `verify` recomputes the
 * chain from the last retention checkpoint to the end, checks the
 * checkpoints against the rows that record them, and compares the head
 * file.  A writer that opens a store from before event_spans migrates
 * it first (store_spans.c; no row is rewritten).
 *
 * Memory: the store owns everything it allocates; strings a caller passes
 * are copied by SQLite before the call returns; rows handed to a query
 * callback are valid only during the callback.  Errors: 0 / -1, with a
 * message in the caller's ERR buffer where there is one, else logged via
 * audit_store_errmsg().
 */
#ifndef SBX_AUDIT_STORE_H
#define SBX_AUDIT_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AUDIT_HASH_LEN 32

struct audit_store;

/* One events row.  Text fields may be NULL (stored as NULL). */
struct audit_row {
    int64_t id;                 /* assigned by audit_store_append */
    int64_t ts_ns;              /* CLOCK_REALTIME ns */
    const char *agent, *run_id;
    int64_t pid, uid;
    const char *op;             /* ops.h names */
    const char *target, *target2;
    const char *decision;       /* "allow" | "deny" */
    const char *rule, *reason;
    const char *layer;          /* "guard" | "kernel" | "supervisor" | "sbx" */
    int64_t err;
    int64_t flags;
    unsigned char prev_hash[AUDIT_HASH_LEN], hash[AUDIT_HASH_LEN];
    int64_t agent_ref;          /* agents.id of AGENT, 0 if none; found
                                 * through event_spans (store_spans.c), not
                                 * hashed (derived from agent/run_id) */
};

/* One agents row (what sbx-guard registered). */
struct audit_agent {
    const char *name, *run_id, *policy_name, *policy_sha256, *policy_file;
    const char *workspace, *command, *layers;
    int64_t uid, guard_pid, started_ns;
};

/* Opens (and, writable, creates with mode 0600 and a 0700 directory) the
 * store at PATH.  READONLY opens with SQLITE_OPEN_READONLY and fails if the
 * file is missing.  0 and *OUT, or -1 with ERR. */
int audit_store_open(const char *path, bool readonly, struct audit_store **out,
                     char *err, size_t errsz);
void audit_store_close(struct audit_store *st);
/* The last SQLite (or I/O) error text. */
const char *audit_store_errmsg(const struct audit_store *st);
/* The head file path (DB + ".head"). */
const char *audit_store_head_path(const struct audit_store *st);

/* Appends ROW to the open batch (opening one if needed); fills id,
 * prev_hash and hash.  The chain position is only final after a successful
 * commit.  On failure (-1) the whole open batch is rolled back, here and in
 * every function below that writes: the caller must append it again. */
int audit_store_append(struct audit_store *st, struct audit_row *row);
/* Agent lifecycle, inside the open batch.  Start fills *AGENT_REF, the
 * value for the agent's rows' agent_ref. */
int audit_store_agent_start(struct audit_store *st, const struct audit_agent *a,
                            int64_t *agent_ref);
int audit_store_agent_end(struct audit_store *st, const char *run_id, int64_t ended_ns,
                          int status, const char *detail);
int audit_store_agent_killed(struct audit_store *st, const char *run_id, const char *by,
                             const char *reason);
/* For a run whose daemon died: 0 and *AGENT_REF when the store holds run
 * RUN_ID of agent NAME, started by UID (any, for root), not ended; else
 * -1 with ERR. */
int audit_store_agent_resumable(struct audit_store *st, const char *run_id, const char *name,
                                int64_t uid, int64_t *agent_ref, char *err, size_t errsz);
/* Rows in the open batch (0 when none is open). */
size_t audit_store_pending(const struct audit_store *st);
/* Commits the open batch (no-op without one).  DURABLE: the transaction is
 * synced to disk (synchronous=FULL) and so is the head file before this
 * returns; otherwise the head file is left behind until
 * audit_store_flush_head (or close).  On failure the batch is rolled back
 * and -1 returned. */
int audit_store_commit(struct audit_store *st, bool durable);
/* True when commits since the head file was written left it behind. */
bool audit_store_head_behind(const struct audit_store *st);
/* Writes the head file if it is behind.  0, or -1 (errmsg). */
int audit_store_flush_head(struct audit_store *st);
void audit_store_rollback(struct audit_store *st);
/* Fault injection for the tests: while the file PATH exists, every commit
 * fails as a full disk would (NULL or "" turns it off). */
void audit_store_set_fault_file(struct audit_store *st, const char *path);
/* Copies the WAL back into the database: when IDLE, whatever is there;
 * otherwise only once the WAL passed 64 MiB.  Call between batches. 0/-1. */
int audit_store_checkpoint(struct audit_store *st, bool idle);
/* From now on checkpoints run on a thread of their own with a connection
 * of its own (store_ckpt.c): the caller's loop no longer waits for the
 * copy and its fsync.  audit_store_checkpoint asks the thread, and does
 * one itself only when the WAL outgrows four times its bound.  Call with the
 * signals the caller takes by signalfd already blocked.  0 / -1 (errmsg). */
int audit_store_checkpoint_thread(struct audit_store *st);
/* Last committed row id and hash. */
int64_t audit_store_last_id(const struct audit_store *st);
/* Its hash in hex (65 bytes with the NUL). */
void audit_store_last_hash_hex(const struct audit_store *st, char out[2 * AUDIT_HASH_LEN + 1]);

/* ---- retention (retention.c) ----------------------------------------------
 * Old rows are removed from the front of the chain only, in steps of at
 * most ROWS_PER_STEP rows, each step one transaction that deletes the rows,
 * records a checkpoint (table `checkpoints`: the last removed row's id and
 * hash, from which verify restarts the chain) and appends an events row
 * (op "retention", layer "sbx", no agent; target "rows FIRST-LAST",
 * target2 the last removed row's hash in hex, rule what asked for it,
 * flags the number of rows) that records the removal inside the chain;
 * agents rows of ended runs with no events row left go with it.
 * The step is committed like a batch of events: atomically, with
 * synchronous=NORMAL (a power loss may undo a whole step, never half of
 * one), the head file following as for any batch.  A row that an
 * export sink has not acknowledged (table `export_watermark`) is never
 * removed. */
struct audit_retention {
    int64_t older_than_ns;      /* remove rows with ts before this; 0: none */
    uint64_t max_bytes;         /* keep the database's used pages under this
                                 * (removal starts above 90%, stops at 80%);
                                 * 0: no cap */
    int64_t rows_per_step;      /* 0: AUDIT_RETAIN_STEP */
    const char *rule;           /* the removal row's rule, e.g.
                                 * "sbx-auditd --retain 30d" */
};

/* ~90 ms of one core on the test machine (bench_store): removing a row
 * costs more than appending one, and the loop waits for the step. */
#define AUDIT_RETAIN_STEP 10000

struct audit_removal {
    int64_t rows;               /* removed in this step (0: nothing due) */
    int64_t first_id, last_id;  /* the rows removed */
    int64_t record_id;          /* the events row recording it */
    bool more;                  /* more rows are due: call again */
    int64_t held_back;          /* rows due but not yet exported: kept */
    uint64_t used_bytes;        /* the database's used pages, before */
};

/* One step of retention under P (see above).  0 and RES, or -1 (errmsg;
 * nothing was removed).  Commits an open batch first. */
int audit_store_retain(struct audit_store *st, const struct audit_retention *p,
                       struct audit_removal *res);

/* The lowest row id that some export sink has not acknowledged (table
 * export_watermark: the smallest row_id + 1), or INT64_MAX when no sink is
 * recorded and REQUIRED is false; with REQUIRED (export is on but nothing
 * is acknowledged yet) the first row's id, so that nothing is removable.
 * 0 / -1. */
int audit_store_export_floor(struct audit_store *st, bool required, int64_t *lowest);
/* The daemon's export is on: retention keeps every row not acknowledged
 * by a sink even before the first acknowledgement (export_floor REQUIRED). */
void audit_store_set_export_required(struct audit_store *st, bool on);

/* Bytes of the database file in use (pages minus free pages, times the
 * page size; the WAL, at most 64 MiB, comes on top).  0 / -1. */
int audit_store_used_bytes(struct audit_store *st, uint64_t *bytes);

/* Compatibility: every retention step for rows older than BEFORE_NS;
 * *PRUNED = rows removed.  0 / -1. */
int audit_store_prune(struct audit_store *st, int64_t before_ns, int64_t *pruned);

struct audit_verify {
    int64_t rows;               /* rows checked */
    int64_t bad_id;             /* first bad row, 0 if none */
    bool ok;
    char msg[512];              /* "ok: ..." or what is wrong */
};
/* Walks the whole chain and compares the head file.  0 when the walk could
 * be done (see RES->ok), -1 on a read error (ERR). */
int audit_store_verify(struct audit_store *st, struct audit_verify *res, char *err, size_t errsz);

/* Query filters; zero / NULL fields do not filter.  AGENT matches rows
 * whose agent_ref is an agents row of that name. */
struct audit_filter {
    const char *agent;
    const char *decision;
    const char *op;
    int64_t since_ns;
    int64_t after_id;           /* rows with id > after_id */
    int64_t limit;              /* the LIMIT newest matching rows, oldest first */
};
/* Calls CB for each matching row in id order; CB returns non-zero to stop.
 * 0 / -1 with ERR. */
int audit_store_query(struct audit_store *st, const struct audit_filter *f,
                      int (*cb)(const struct audit_row *row, void *ctx), void *ctx,
                      char *err, size_t errsz);

/* A read snapshot: every read between begin and end sees the same rows,
 * whatever the writer commits meanwhile (WAL).  For readers only; 0 / -1
 * with ERR.  End is harmless without a begin. */
int audit_store_read_begin(struct audit_store *st, char *err, size_t errsz);
void audit_store_read_end(struct audit_store *st);

/* The whole store: its number of event rows and the newest row's id (0 for
 * an empty store).  0 / -1 with ERR. */
struct audit_totals {
    int64_t rows;
    int64_t newest_id;
};
int audit_store_totals(struct audit_store *st, struct audit_totals *t, char *err, size_t errsz);

/* A count of denials under one name: an op, or a target. */
struct audit_count {
    const char *name;           /* NULL for a row without a target */
    int64_t n;
};

/* How many denied targets audit_store_stats names per agent: the most
 * denied ones, which are what a person reading `sbx-audit stats` looks at. */
#define AUDIT_STATS_TOP_TARGETS 5

/* One agent name's events, summarised, for `sbx-audit stats`. */
struct audit_agent_stats {
    const char *agent;          /* NULL: rows without an agent (sbx's own) */
    int64_t events, denied;
    int64_t would_deny;         /* audit mode: allowed, reason "audit: ..." */
    int64_t first_ns, last_ns;  /* ts of its first and last event */
    /* Its denials and would-be denials per op, and its most denied targets
     * (at most AUDIT_STATS_TOP_TARGETS), each most first, then by name.
     * Empty when nothing was denied or would have been. */
    const struct audit_count *denied_ops, *denied_targets;
    size_t n_denied_ops, n_denied_targets;
};
/* Calls CB once per agent name with events (only AGENT's rows when AGENT is
 * not NULL; by the event's agent column, so every run of that name), in the
 * order of their first event.  Everything CB gets, names included, is
 * valid only during the call; CB returns non-zero to stop.  0 / -1 with
 * ERR. */
int audit_store_stats(struct audit_store *st, const char *agent,
                      int (*cb)(const struct audit_agent_stats *s, void *ctx), void *ctx,
                      char *err, size_t errsz);

/* One agents row with its outcome, for `sbx-audit agents`. */
struct audit_agent_run {
    struct audit_agent reg;     /* as registered; started_ns 0 if not recorded */
    bool ended;                 /* an exit was recorded: */
    int64_t ended_ns, exit_status;
    const char *exit_detail;    /* may be NULL */
    const char *killed_by;      /* NULL: nobody killed it */
    const char *kill_reason;    /* may be NULL */
};
/* Calls CB for every registered run, oldest first; the strings are valid
 * only during the call; CB returns non-zero to stop.  0 / -1 with ERR. */
int audit_store_agents(struct audit_store *st,
                       int (*cb)(const struct audit_agent_run *a, void *ctx), void *ctx,
                       char *err, size_t errsz);

/* hash = SHA-256(prev || canonical(row)): the chain's definition. */
void audit_row_hash(const unsigned char prev[AUDIT_HASH_LEN], const struct audit_row *row,
                    unsigned char out[AUDIT_HASH_LEN]);

#endif
