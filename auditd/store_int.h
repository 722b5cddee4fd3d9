/* store_int.h — the store's private state, shared by store.c, query.c and
 * verify.c only. */
#ifndef SBX_AUDIT_STORE_INT_H
#define SBX_AUDIT_STORE_INT_H

#include <sqlite3.h>

#include "store.h"

struct audit_store {
    sqlite3 *db;
    bool ro;
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
    char errmsg[512];
};

void store_set_err(struct audit_store *st, const char *what);
/* The last pruned row (id 0 and a zero hash when nothing was pruned). */
int store_pruned_anchor(struct audit_store *st, int64_t *id, unsigned char hash[AUDIT_HASH_LEN]);

#endif

#ifndef SBX_STORE_ROW_READER
#define SBX_STORE_ROW_READER
/* The events columns in the order store_read_row expects. */
extern const char store_row_cols[];
/* Fills R from the current row of Q (pointers valid until the next step). */
void store_read_row(sqlite3_stmt *q, struct audit_row *r);
#endif
