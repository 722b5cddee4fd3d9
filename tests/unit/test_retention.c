/* test_retention.c — removing old rows: by age, by size, only after export,
 * recorded in the chain, and verify across it (auditd/retention.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "size.h"
#include "store.h"
#include "store_fixture.h"

static struct audit_store *fresh(void)
{
    return fixture_fresh("retention");
}

/* N rows with ts = T0 + i seconds and a target of PAD bytes. */
static void fill(struct audit_store *st, int n, int64_t t0_s, size_t pad)
{
    char target[4096];
    memset(target, 'x', sizeof target);
    for (int i = 0; i < n; i++) {
        int k = snprintf(target, sizeof target, "/ws/file%d-", i);
        target[k] = 'x';
        target[(size_t)k + pad < sizeof target - 1 ? (size_t)k + pad : sizeof target - 1] = '\0';
        struct audit_row r = {
            .ts_ns = (t0_s + i) * 1000000000LL, .agent = "coder", .run_id = "r1", .pid = 1,
            .uid = 1000, .op = "open-read", .target = target, .decision = "allow",
            .rule = "rule", .reason = "why", .layer = "guard",
        };
        assert_int_equal(audit_store_append(st, &r), 0);
        memset(target, 'x', sizeof target);
        if (audit_store_pending(st) >= 5000)
            assert_int_equal(audit_store_commit(st, false), 0);
    }
    assert_int_equal(audit_store_commit(st, true), 0);
}

/* verify, read-only like sbx-audit */
static struct audit_verify verify(void)
{
    struct audit_store *r;
    struct audit_verify v;
    char err[512];
    assert_int_equal(audit_store_open(path, true, &r, err, sizeof err), 0);
    assert_int_equal(audit_store_verify(r, &v, err, sizeof err), 0);
    audit_store_close(r);
    return v;
}

static int64_t now_s(void)
{
    return (int64_t)time(NULL);
}

static void test_rows_older_than_the_retention_are_removed_and_the_removal_is_a_row(void **state)
{
    (void)state;
    struct audit_store *st = fresh();
    fill(st, 100, 1000, 10);        /* ts 1000..1099 s */
    struct audit_retention p = { .older_than_ns = 1060LL * 1000000000, .rule = "sbx-auditd --retain 1s" };
    struct audit_removal res;
    assert_int_equal(audit_store_retain(st, &p, &res), 0);
    assert_int_equal(res.rows, 60);
    assert_int_equal(res.first_id, 1);
    assert_int_equal(res.last_id, 60);
    assert_int_equal(res.record_id, 101);
    assert_false(res.more);
    assert_int_equal(sql_int("SELECT min(id) FROM events"), 61);
    assert_int_equal(sql_int("SELECT count(*) FROM events WHERE id = 101 AND op = 'retention' "
                             "AND layer = 'sbx' AND agent IS NULL AND target = 'rows 1-60' "
                             "AND flags = 60 AND rule = 'sbx-auditd --retain 1s'"), 1);
    assert_int_equal(sql_int("SELECT count(*) FROM checkpoints WHERE first_id = 1 AND "
                             "last_id = 60 AND rows = 60 AND row_id = 101"), 1);
    /* nothing more is due: a second step removes nothing */
    assert_int_equal(audit_store_retain(st, &p, &res), 0);
    assert_int_equal(res.rows, 0);
    audit_store_close(st);
}

static void test_ended_agents_without_rows_left_are_removed_with_their_rows(void **state)
{
    (void)state;
    struct audit_store *st = fresh();
    int64_t ref[3];
    for (int k = 0; k < 3; k++) {
        char run[16];
        snprintf(run, sizeof run, "run%d", k);
        struct audit_agent a = { .name = "coder", .run_id = run, .started_ns = 1 };
        assert_int_equal(audit_store_agent_start(st, &a, &ref[k]), 0);
        struct audit_row r = { .ts_ns = (1000 + k) * 1000000000LL, .agent = "coder",
                               .run_id = run, .op = "exec", .decision = "allow",
                               .layer = "guard", .agent_ref = ref[k] };
        assert_int_equal(audit_store_append(st, &r), 0);
    }
    /* run0 and run1 ended; run2 still runs */
    assert_int_equal(audit_store_agent_end(st, "run0", 2, 0, "exited 0"), 0);
    assert_int_equal(audit_store_agent_end(st, "run1", 2, 0, "exited 0"), 0);
    assert_int_equal(audit_store_commit(st, true), 0);
    /* rows of run0 go: run0 goes; run1 keeps its row, so it stays */
    struct audit_retention p = { .older_than_ns = 1001LL * 1000000000, .rule = "r" };
    struct audit_removal res;
    assert_int_equal(audit_store_retain(st, &p, &res), 0);
    assert_int_equal(res.rows, 1);
    audit_store_close(st);
    assert_int_equal(sql_int("SELECT count(*) FROM agents WHERE run_id = 'run0'"), 0);
    assert_int_equal(sql_int("SELECT count(*) FROM agents WHERE run_id IN ('run1', 'run2')"), 2);
    assert_true(verify().ok);
}

static void test_verify_passes_after_a_removal_and_the_chain_goes_on(void **state)
{
    (void)state;
    struct audit_store *st = fresh();
    fill(st, 50, 1000, 10);
    struct audit_retention p = { .older_than_ns = 1020LL * 1000000000, .rule = "r" };
    struct audit_removal res;
    assert_int_equal(audit_store_retain(st, &p, &res), 0);
    assert_int_equal(res.rows, 20);
    struct audit_verify v = verify();
    assert_true(v.ok);
    assert_int_equal(v.rows, 31);
    assert_non_null(strstr(v.msg, "starts after row 20"));
    /* more rows (stamped in the future), and a second removal that takes
     * the first removal's row too */
    fill(st, 10, now_s() + 1000, 10);
    p.older_than_ns = (now_s() + 10) * 1000000000LL;
    assert_int_equal(audit_store_retain(st, &p, &res), 0);
    assert_int_equal(res.first_id, 21);
    assert_int_equal(res.last_id, 51);
    v = verify();
    assert_true(v.ok);
    assert_non_null(strstr(v.msg, "starts after row 51"));
    char err[512];
    audit_store_close(st);
    assert_int_equal(audit_store_open(path, false, &st, err, sizeof err), 0);
    fill(st, 3, 3000, 10);
    audit_store_close(st);
    v = verify();
    assert_true(v.ok);
    assert_int_equal(v.rows, 10 + 1 + 3);
}

static void test_verify_detects_an_altered_checkpoint_hash(void **state)
{
    (void)state;
    struct audit_store *st = fresh();
    fill(st, 30, 1000, 10);
    struct audit_retention p = { .older_than_ns = 1010LL * 1000000000, .rule = "r" };
    struct audit_removal res;
    assert_int_equal(audit_store_retain(st, &p, &res), 0);
    audit_store_close(st);
    sql_exec("UPDATE checkpoints SET last_hash = zeroblob(32)");
    struct audit_verify v = verify();
    assert_false(v.ok);
    assert_int_equal(v.bad_id, 11);
}

static void test_verify_detects_rows_deleted_behind_a_moved_checkpoint(void **state)
{
    (void)state;
    struct audit_store *st = fresh();
    fill(st, 30, 1000, 10);
    struct audit_retention p = { .older_than_ns = 1010LL * 1000000000, .rule = "r" };
    struct audit_removal res;
    assert_int_equal(audit_store_retain(st, &p, &res), 0);
    audit_store_close(st);
    /* Someone removes rows 11-15 and moves the checkpoint so that the
     * chain still starts cleanly at row 16 (its prev_hash is row 15's). */
    sql_exec("UPDATE checkpoints SET last_id = 15, "
        "last_hash = (SELECT prev_hash FROM events WHERE id = 16);"
        "DELETE FROM events WHERE id <= 15");
    struct audit_verify v = verify();
    assert_false(v.ok);
    assert_int_equal(v.bad_id, 31);
    assert_non_null(strstr(v.msg, "checkpoint altered"));
}

static void test_verify_detects_a_deleted_checkpoint_and_a_deleted_removal_row(void **state)
{
    (void)state;
    struct audit_store *st = fresh();
    fill(st, 30, 1000, 10);
    struct audit_retention p = { .older_than_ns = 1010LL * 1000000000, .rule = "r" };
    struct audit_removal res;
    assert_int_equal(audit_store_retain(st, &p, &res), 0);
    fill(st, 2, 5000, 10);
    audit_store_close(st);
    /* the checkpoint gone: the chain starts with a gap */
    sql_exec("CREATE TABLE saved AS SELECT * FROM checkpoints; DELETE FROM checkpoints");
    struct audit_verify v = verify();
    assert_false(v.ok);
    assert_int_equal(v.bad_id, 11);
    sql_exec("INSERT INTO checkpoints SELECT * FROM saved; DROP TABLE saved");
    assert_true(verify().ok);
    /* the row that recorded it gone (and the rows after it re-chained
     * would need the head file too): named as missing */
    sql_exec("DELETE FROM events WHERE id = 31");
    v = verify();
    assert_false(v.ok);
}

static void test_the_size_cap_holds_while_rows_keep_coming(void **state)
{
    (void)state;
    struct audit_store *st = fresh();
    uint64_t cap;
    assert_int_equal(sbx_size_parse("2MiB", &cap), 0);
    struct audit_retention p = { .max_bytes = cap, .rows_per_step = 2000, .rule = "cap" };
    struct audit_removal res;
    struct stat sb;
    int removals = 0;
    for (int round = 0; round < 12; round++) {
        fill(st, 2000, 1000 + round * 2000, 300);   /* ~0.7 MB a round */
        do {
            assert_int_equal(audit_store_retain(st, &p, &res), 0);
            removals += res.rows > 0;
        } while (res.more);
        uint64_t used;
        assert_int_equal(audit_store_used_bytes(st, &used), 0);
        assert_true(used <= cap);
        assert_int_equal(audit_store_checkpoint(st, true), 0);
        assert_int_equal(stat(path, &sb), 0);
        /* the file: the used pages, plus free pages up to the last round's
         * growth before the removal */
        assert_true((uint64_t)sb.st_size <= cap + cap / 2);
    }
    assert_true(removals >= 5);
    audit_store_close(st);
    assert_true(verify().ok);
}

static void test_unexported_rows_are_never_removed(void **state)
{
    (void)state;
    struct audit_store *st = fresh();
    fill(st, 100, 1000, 10);
    /* two sinks; one has acknowledged up to row 30, the other 70 */
    sql_exec("INSERT INTO export_watermark(sink, row_id) VALUES('relp://a', 30), ('file:b', 70)");
    int64_t floor;
    assert_int_equal(audit_store_export_floor(st, false, &floor), 0);
    assert_int_equal(floor, 31);
    struct audit_retention p = { .older_than_ns = now_s() * 1000000000LL, .rule = "r" };
    struct audit_removal res;
    assert_int_equal(audit_store_retain(st, &p, &res), 0);
    assert_int_equal(res.last_id, 30);
    assert_int_equal(res.held_back, 70);
    assert_int_equal(sql_int("SELECT min(id) FROM events"), 31);
    assert_int_equal(audit_store_retain(st, &p, &res), 0);
    assert_int_equal(res.rows, 0);
    /* the size cap waits for the exporter too */
    struct audit_retention cap = { .max_bytes = 1 << 20, .rule = "r" };
    fill(st, 3000, 2000, 400);
    sql_exec("UPDATE export_watermark SET row_id = 40 WHERE sink = 'relp://a'");
    do
        assert_int_equal(audit_store_retain(st, &cap, &res), 0);
    while (res.more);
    assert_int_equal(sql_int("SELECT min(id) FROM events"), 41);
    /* export on, nothing acknowledged yet: nothing goes */
    sql_exec("DELETE FROM export_watermark");
    audit_store_set_export_required(st, true);
    assert_int_equal(audit_store_retain(st, &p, &res), 0);
    assert_int_equal(res.rows, 0);
    assert_true(res.held_back > 0);
    audit_store_set_export_required(st, false);
    assert_int_equal(audit_store_retain(st, &p, &res), 0);
    assert_true(res.rows > 0);
    audit_store_close(st);
    assert_true(verify().ok);
}

static void test_a_large_removal_goes_in_steps_each_checkpointed(void **state)
{
    (void)state;
    struct audit_store *st = fresh();
    fill(st, 1000, 1000, 10);
    struct audit_retention p = { .older_than_ns = 1900LL * 1000000000, .rows_per_step = 300,
                                 .rule = "r" };
    struct audit_removal res;
    int steps = 0;
    do {
        assert_int_equal(audit_store_retain(st, &p, &res), 0);
        steps++;
        assert_true(verify().ok);
    } while (res.more);
    /* three of 300, then a look that finds nothing more due */
    assert_int_equal(steps, 4);
    assert_int_equal(sql_int("SELECT max(last_id) FROM checkpoints"), 900);
    assert_int_equal(sql_int("SELECT count(*) FROM checkpoints"), 3);
    audit_store_close(st);
}

static void test_sizes_parse_in_the_one_size_syntax(void **state)
{
    (void)state;
    uint64_t b = 7;
    assert_int_equal(sbx_size_parse("1GiB", &b), 0);
    assert_int_equal(b, 1ull << 30);
    assert_int_equal(sbx_size_parse("512 K", &b), 0);
    assert_int_equal(b, 512ull << 10);
    assert_int_equal(sbx_size_parse("4096", &b), 0);
    assert_int_equal(b, 4096);
    b = 7;
    assert_int_equal(sbx_size_parse("1.5GiB", &b), -1);
    assert_int_equal(sbx_size_parse("-1M", &b), -1);
    assert_int_equal(sbx_size_parse("", &b), -1);
    assert_int_equal(sbx_size_parse("99999999999999999999", &b), -1);
    assert_int_equal(sbx_size_parse("17179869184G", &b), -1);
    assert_int_equal(b, 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_older_than_the_retention_are_removed_and_the_removal_is_a_row),
        cmocka_unit_test(test_ended_agents_without_rows_left_are_removed_with_their_rows),
        cmocka_unit_test(test_verify_passes_after_a_removal_and_the_chain_goes_on),
        cmocka_unit_test(test_verify_detects_an_altered_checkpoint_hash),
        cmocka_unit_test(test_verify_detects_rows_deleted_behind_a_moved_checkpoint),
        cmocka_unit_test(test_verify_detects_a_deleted_checkpoint_and_a_deleted_removal_row),
        cmocka_unit_test(test_the_size_cap_holds_while_rows_keep_coming),
        cmocka_unit_test(test_unexported_rows_are_never_removed),
        cmocka_unit_test(test_a_large_removal_goes_in_steps_each_checkpointed),
        cmocka_unit_test(test_sizes_parse_in_the_one_size_syntax),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
