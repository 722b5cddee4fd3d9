/* store_fixture.h — what test_store.c and test_retention.c share: a fresh
 * writable store per test under TMPDIR, and plain SQL on its file (a
 * connection of its own, as an operator or an attacker would have). */
#ifndef SBX_TEST_STORE_FIXTURE_H
#define SBX_TEST_STORE_FIXTURE_H

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "store.h"

/* The store the test opened last. */
static char path[4096];

/* A new store in a directory of its own, named after PREFIX. */
static inline struct audit_store *fixture_fresh(const char *prefix)
{
    static int seq;
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/%s-%d-%d/audit.db", tmp ? tmp : "/tmp", prefix,
             (int)getpid(), ++seq);
    struct audit_store *st;
    char err[512];
    assert_int_equal(audit_store_open(path, false, &st, err, sizeof err), 0);
    return st;
}

static inline void sql_exec(const char *q)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    char *msg = NULL;
    int rc = sqlite3_exec(db, q, NULL, NULL, &msg);
    if (rc != SQLITE_OK)
        fprintf(stderr, "%s: %s\n", q, msg);
    sqlite3_free(msg);
    assert_int_equal(rc, SQLITE_OK);
    sqlite3_close(db);
}

/* The first column of the first row of Q. */
static inline int64_t sql_int(const char *q)
{
    sqlite3 *db;
    sqlite3_stmt *s;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, q, -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(db);
    return v;
}

#endif
