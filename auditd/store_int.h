/* store_int.h — the store's private state, shared by store.c, query.c and
 * verify.c only. */
#ifndef SBX_AUDIT_STORE_INT_H
#define SBX_AUDIT_STORE_INT_H

#include <sqlite3.h>
#include <sys/types.h>

#include "store.h"

struct audit_store {
    sqlite3 *db;
    bool ro;
    bool export_required;                   /* retention waits for the exporter */
    bool size_draining;                     /* retention: over the cap, trimming to 80% */
    char path[4096];
    char head[4104];
    sqlite3_stmt *ins, *agent_ins, *agent_end, *agent_kill;
    bool in_txn;
    size_t pending;
    int64_t last_id;                        /* committed chain end */
    unsigned char last_hash[AUDIT_HASH_LEN];
    int64_t t_id;                           /* end inside the open batch */
    unsigned char t_hash[AUDIT_HASH_LEN];
    int wal_pages;                          /* WAL size after the last commit */
    bool head_dirty;                        /* rows committed after the head file */
    char fault_file[256];                   /* tests: commits fail while it exists */
    char errmsg[1024];
    int lock_fd;                            /* the writer's flock, -1 if none */
    dev_t dev;                              /* the file the writer opened */
    ino_t ino;
};

void store_set_err(struct audit_store *st, const char *what);
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
/* Opens the batch (BEGIN IMMEDIATE) if none is open.  0 / -1 (errmsg). */
int store_begin(struct audit_store *st);
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
