/* test_store.c — the audit store: appends, query filters, the hash chain
 * and what verify detects. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sha2.h>

#include "sha256.h"
#include "store.h"

static char path[4096];
static int seq;

static struct audit_store *fresh(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/store-%d-%d/audit.db", tmp ? tmp : "/tmp", (int)getpid(), ++seq);
    struct audit_store *st;
    char err[512];
    assert_int_equal(audit_store_open(path, false, &st, err, sizeof err), 0);
    return st;
}

static const char *agents[] = { "coder", "tester" };
static const char *ops[] = { "open-read", "open-write", "exec" };

/* N rows: agent alternates, every 3rd is a deny, op cycles; ts = 1000+i s. */
static void fill(struct audit_store *st, int n)
{
    int64_t ref[2];
    static int fills;
    fills++;
    for (int k = 0; k < 2; k++) {
        char run[32];
        snprintf(run, sizeof run, "r%d-%d", fills, k);
        struct audit_agent a = { .name = agents[k], .run_id = run };
        assert_int_equal(audit_store_agent_start(st, &a, &ref[k]), 0);
    }
    for (int i = 0; i < n; i++) {
        char target[64];
        snprintf(target, sizeof target, "/ws/file%d", i);
        struct audit_row r = {
            .ts_ns = (int64_t)(1000 + i) * 1000000000, .agent = agents[i % 2],
            .run_id = i % 2 ? "r2" : "r1", .pid = 100 + i % 2, .uid = 1000, .op = ops[i % 3],
            .target = target, .target2 = i == 4 ? "/ws/dest" : NULL,
            .decision = i % 3 == 0 ? "deny" : "allow", .rule = "rule", .reason = "why",
            .layer = "guard", .err = i % 3 == 0 ? 13 : 0, .flags = 0, .agent_ref = ref[i % 2],
        };
        assert_int_equal(audit_store_append(st, &r), 0);
        assert_int_equal(r.id, audit_store_last_id(st) + (int64_t)audit_store_pending(st) - 2);
    }
    assert_int_equal(audit_store_commit(st, true), 0);
}

static int count_cb(const struct audit_row *r, void *ctx)
{
    int64_t *c = ctx;
    c[0]++;
    c[1] = r->id;
    return 0;
}

static int64_t count(struct audit_store *st, struct audit_filter f)
{
    int64_t c[2] = { 0, 0 };
    char err[256];
    assert_int_equal(audit_store_query(st, &f, count_cb, c, err, sizeof err), 0);
    return c[0];
}

static void test_rows_are_stored_with_increasing_ids(void **state)
{
    (void)state;
    struct audit_store *st = fresh();
    fill(st, 30);
    assert_int_equal(audit_store_last_id(st), 30);
    assert_int_equal(count(st, (struct audit_filter){ 0 }), 30);
    audit_store_close(st);
}

static void test_query_filters_by_agent_decision_op_since_and_limit(void **state)
{
    (void)state;
    struct audit_store *st = fresh();
    fill(st, 30);
    assert_int_equal(count(st, (struct audit_filter){ .agent = "coder" }), 15);
    assert_int_equal(count(st, (struct audit_filter){ .decision = "deny" }), 10);
    assert_int_equal(count(st, (struct audit_filter){ .op = "exec" }), 10);
    assert_int_equal(count(st, (struct audit_filter){ .agent = "coder", .decision = "deny" }), 5);
    assert_int_equal(count(st, (struct audit_filter){ .since_ns = 1020LL * 1000000000 }), 10);
    assert_int_equal(count(st, (struct audit_filter){ .after_id = 25 }), 5);
    assert_int_equal(count(st, (struct audit_filter){ .agent = "nobody" }), 0);
    /* --limit takes the newest rows, still returned oldest first */
    int64_t c[2] = { 0, 0 };
    char err[256];
    struct audit_filter f = { .limit = 4 };
    assert_int_equal(audit_store_query(st, &f, count_cb, c, err, sizeof err), 0);
    assert_int_equal(c[0], 4);
    assert_int_equal(c[1], 30);
    audit_store_close(st);
}

static void test_an_intact_chain_verifies(void **state)
{
    (void)state;
    struct audit_store *st = fresh();
    fill(st, 50);
    struct audit_verify v;
    char err[256];
    assert_int_equal(audit_store_verify(st, &v, err, sizeof err), 0);
    assert_true(v.ok);
    assert_int_equal(v.rows, 50);
    assert_non_null(strstr(v.msg, "chain intact, head matches"));
    audit_store_close(st);
}

/* Runs SQL on the store behind its back, then verifies from a fresh open. */
static struct audit_verify tamper(const char *sql)
{
    struct audit_store *st = fresh();
    fill(st, 20);
    audit_store_close(st);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    char *msg = NULL;
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, &msg), SQLITE_OK);
    sqlite3_close(db);
    char err[512];
    assert_int_equal(audit_store_open(path, true, &st, err, sizeof err), 0);
    struct audit_verify v;
    assert_int_equal(audit_store_verify(st, &v, err, sizeof err), 0);
    audit_store_close(st);
    return v;
}

static void test_verify_names_an_edited_row(void **state)
{
    (void)state;
    struct audit_verify v = tamper("UPDATE events SET decision = 'allow' WHERE id = 7");
    assert_false(v.ok);
    assert_int_equal(v.bad_id, 7);
    assert_non_null(strstr(v.msg, "altered"));
}

static void test_verify_names_the_row_after_a_deleted_one(void **state)
{
    (void)state;
    struct audit_verify v = tamper("DELETE FROM events WHERE id = 9");
    assert_false(v.ok);
    assert_int_equal(v.bad_id, 10);
}

static void test_verify_detects_reordered_rows(void **state)
{
    (void)state;
    /* Swap everything but the ids of rows 5 and 6 (hashes included). */
    struct audit_verify v = tamper(
        "CREATE TEMP TABLE t AS SELECT * FROM events WHERE id IN (5, 6);"
        "UPDATE events SET (ts,agent,run_id,pid,uid,op,target,target2,decision,rule,reason,"
        "layer,errno,flags,prev_hash,hash) = (SELECT ts,agent,run_id,pid,uid,op,target,target2,"
        "decision,rule,reason,layer,errno,flags,prev_hash,hash FROM t WHERE t.id = 11 - events.id)"
        " WHERE id IN (5, 6);");
    assert_false(v.ok);
    assert_int_equal(v.bad_id, 5);
}

static void test_verify_detects_a_cut_off_tail_through_the_head_file(void **state)
{
    (void)state;
    struct audit_verify v = tamper("DELETE FROM events WHERE id > 17");
    assert_false(v.ok);
    assert_int_equal(v.bad_id, 18);
    assert_non_null(strstr(v.msg, "tail cut off"));
}

static void test_verify_detects_a_replaced_chain_through_the_head_file(void **state)
{
    (void)state;
    /* Rewrite the last row and recompute nothing: altered.  Drop the last
     * row and re-append a different one (a consistent forgery of the end):
     * the head file still names the old hash. */
    struct audit_store *st = fresh();
    fill(st, 5);
    audit_store_close(st);
    char head[4200];
    snprintf(head, sizeof head, "%s.head", path);
    char saved[256];
    FILE *f = fopen(head, "r");
    size_t n = fread(saved, 1, sizeof saved - 1, f);
    fclose(f);
    saved[n] = '\0';
    sqlite3 *db;
    sqlite3_open(path, &db);
    sqlite3_exec(db, "DELETE FROM events WHERE id = 5", NULL, NULL, NULL);
    sqlite3_close(db);
    char err[512];
    assert_int_equal(audit_store_open(path, false, &st, err, sizeof err), 0);
    struct audit_row r = { .ts_ns = 1, .agent = "coder", .op = "exec", .decision = "allow",
                           .layer = "guard", .target = "/bin/true" };
    assert_int_equal(audit_store_append(st, &r), 0);
    assert_int_equal(audit_store_commit(st, false), 0);
    /* the forger would also have to rewrite the head file; put the real one back */
    f = fopen(head, "w");
    fputs(saved, f);
    fclose(f);
    struct audit_verify v;
    assert_int_equal(audit_store_verify(st, &v, err, sizeof err), 0);
    assert_false(v.ok);
    assert_int_equal(v.bad_id, 5);
    audit_store_close(st);
}

static void test_a_rolled_back_batch_leaves_the_chain_where_it_was(void **state)
{
    (void)state;
    struct audit_store *st = fresh();
    fill(st, 3);
    struct audit_row r = { .ts_ns = 1, .op = "exec", .decision = "allow", .layer = "guard" };
    assert_int_equal(audit_store_append(st, &r), 0);
    assert_int_equal(r.id, 4);
    audit_store_rollback(st);
    assert_int_equal(audit_store_last_id(st), 3);
    assert_int_equal(audit_store_append(st, &r), 0);
    assert_int_equal(r.id, 4);
    assert_int_equal(audit_store_commit(st, false), 0);
    struct audit_verify v;
    char err[256];
    assert_int_equal(audit_store_verify(st, &v, err, sizeof err), 0);
    assert_true(v.ok);
    audit_store_close(st);
}

static void test_pruning_keeps_the_rest_of_the_chain_verifiable(void **state)
{
    (void)state;
    struct audit_store *st = fresh();
    fill(st, 40);
    int64_t pruned;
    assert_int_equal(audit_store_prune(st, 1010LL * 1000000000, &pruned), 0);
    assert_int_equal(pruned, 10);
    struct audit_verify v;
    char err[256];
    assert_int_equal(audit_store_verify(st, &v, err, sizeof err), 0);
    assert_true(v.ok);
    assert_int_equal(v.rows, 30);
    /* the chain goes on after a reopen */
    audit_store_close(st);
    assert_int_equal(audit_store_open(path, false, &st, err, sizeof err), 0);
    fill(st, 2);
    assert_int_equal(audit_store_last_id(st), 42);
    assert_int_equal(audit_store_verify(st, &v, err, sizeof err), 0);
    assert_true(v.ok);
    audit_store_close(st);
}

static void test_the_chain_continues_across_reopen(void **state)
{
    (void)state;
    struct audit_store *st = fresh();
    fill(st, 5);
    audit_store_close(st);
    char err[256];
    assert_int_equal(audit_store_open(path, false, &st, err, sizeof err), 0);
    fill(st, 5);
    struct audit_verify v;
    assert_int_equal(audit_store_verify(st, &v, err, sizeof err), 0);
    assert_true(v.ok);
    assert_int_equal(v.rows, 10);
    audit_store_close(st);
}

static void test_a_missing_store_is_a_clear_error_when_read_only(void **state)
{
    (void)state;
    struct audit_store *st;
    char err[512];
    assert_int_equal(audit_store_open("/nonexistent/x/audit.db", true, &st, err, sizeof err), -1);
    assert_non_null(strstr(err, "no audit store at /nonexistent/x/audit.db"));
}

static void test_the_chain_s_sha256_both_block_functions_match_libmd_on_every_length(void **state)
{
    (void)state;
    unsigned char buf[700], a[32], b[32];
    srand(11);
    for (size_t n = 0; n < sizeof buf; n++) {
        for (size_t i = 0; i < n; i++)
            buf[i] = (unsigned char)rand();
        SHA2_CTX c;
        SHA256Init(&c);
        SHA256Update(&c, buf, n);
        SHA256Final(a, &c);
        audit_sha256(buf, n, b);
        assert_memory_equal(a, b, 32);
        audit_sha256_portable(buf, n, b);
        assert_memory_equal(a, b, 32);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_chain_s_sha256_both_block_functions_match_libmd_on_every_length),
        cmocka_unit_test(test_rows_are_stored_with_increasing_ids),
        cmocka_unit_test(test_query_filters_by_agent_decision_op_since_and_limit),
        cmocka_unit_test(test_an_intact_chain_verifies),
        cmocka_unit_test(test_verify_names_an_edited_row),
        cmocka_unit_test(test_verify_names_the_row_after_a_deleted_one),
        cmocka_unit_test(test_verify_detects_reordered_rows),
        cmocka_unit_test(test_verify_detects_a_cut_off_tail_through_the_head_file),
        cmocka_unit_test(test_verify_detects_a_replaced_chain_through_the_head_file),
        cmocka_unit_test(test_a_rolled_back_batch_leaves_the_chain_where_it_was),
        cmocka_unit_test(test_pruning_keeps_the_rest_of_the_chain_verifiable),
        cmocka_unit_test(test_the_chain_continues_across_reopen),
        cmocka_unit_test(test_a_missing_store_is_a_clear_error_when_read_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
