/* test_store.c — the audit store: appends, query filters, the hash chain
 * and what verify detects; the summaries sbx-audit prints (stats, agents,
 * totals) and its read snapshot. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sha2.h>

#include "sha256.h"
#include "store.h"
#include "store_fixture.h"

static struct audit_store *fresh(void)
{
    return fixture_fresh("store");
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
    /* A writer refuses a store shorter than its head file (the next test):
     * the forger moves the head file away first. */
    assert_int_equal(unlink(head), 0);
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

static void test_a_writer_refuses_a_store_shorter_than_its_head_file(void **state)
{
    (void)state;
    /* Rows removed from the end (or the whole store emptied) under the
     * head file: appending would start the chain again from an earlier
     * row, and the history would be gone without a trace. */
    struct audit_store *st = fresh();
    fill(st, 5);
    audit_store_close(st);
    sqlite3 *db;
    sqlite3_open(path, &db);
    sqlite3_exec(db, "DELETE FROM events WHERE id >= 4", NULL, NULL, NULL);
    sqlite3_close(db);
    char err[1024];
    assert_int_equal(audit_store_open(path, false, &st, err, sizeof err), -1);
    assert_non_null(strstr(err, "AUDIT STORE TRUNCATED"));
    assert_non_null(strstr(err, "ends at row 3"));
    assert_non_null(strstr(err, "names row 5"));
    /* The evidence is kept: the store still ends at row 3. */
    sqlite3_open(path, &db);
    sqlite3_stmt *q;
    sqlite3_prepare_v2(db, "SELECT max(id) FROM events", -1, &q, NULL);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int64(q, 0), 3);
    sqlite3_finalize(q);
    sqlite3_close(db);
    /* A store removed (or emptied) while its head file stays: refused, and
     * no new store is created in its place. */
    assert_int_equal(unlink(path), 0);
    assert_int_equal(audit_store_open(path, false, &st, err, sizeof err), -1);
    assert_non_null(strstr(err, "AUDIT STORE MISSING"));
    assert_int_equal(access(path, F_OK), -1);
    close(open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600));
    assert_int_equal(audit_store_open(path, false, &st, err, sizeof err), -1);
    assert_non_null(strstr(err, "is empty"));
}

static void test_a_second_writer_of_one_store_is_refused_at_once(void **state)
{
    (void)state;
    struct audit_store *st = fresh(), *st2 = NULL;
    char err[1024];
    assert_int_equal(audit_store_open(path, false, &st2, err, sizeof err), -1);
    assert_non_null(strstr(err, "written by another sbx-auditd"));
    /* readers are welcome */
    assert_int_equal(audit_store_open(path, true, &st2, err, sizeof err), 0);
    audit_store_close(st2);
    audit_store_close(st);
    /* and once the writer is gone, the next one may write */
    assert_int_equal(audit_store_open(path, false, &st2, err, sizeof err), 0);
    audit_store_close(st2);
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

/* Appends N rows with ts FIRST.., targets "/ws/groupI" built in one reused
 * buffer (as the daemon's decoded ring records are). */
static void append_reused(struct audit_store *st, int first, int n)
{
    char target[64];
    for (int i = first; i < first + n; i++) {
        snprintf(target, sizeof target, "/ws/group%d", i);
        struct audit_row r = { .ts_ns = i, .agent = "coder", .op = "open-read", .target = target,
                               .decision = "allow", .layer = "guard", .err = i };
        assert_int_equal(audit_store_append(st, &r), 0);
        memset(target, 'x', sizeof target - 1);
    }
}

/* The store inserts rows by groups (several per INSERT) and the rest at the
 * commit: every row keeps its own strings, a rollback in the middle of a
 * group leaves none of the batch, and the chain goes on from the commit. */
static void test_rows_appended_in_groups_keep_their_own_values_across_commit_and_rollback(
    void **state)
{
    (void)state;
    struct audit_store *st = fresh();
    append_reused(st, 1, 37);
    assert_int_equal(audit_store_commit(st, false), 0);
    assert_int_equal(sql_int("SELECT count(*) FROM events"), 37);
    assert_int_equal(sql_int("SELECT count(*) FROM events WHERE target = '/ws/group' || id "
                             "AND errno = id AND ts = id"), 37);
    append_reused(st, 38, 20);
    audit_store_rollback(st);
    assert_int_equal(sql_int("SELECT count(*) FROM events"), 37);
    append_reused(st, 38, 5);
    assert_int_equal(audit_store_commit(st, true), 0);
    assert_int_equal(sql_int("SELECT max(id) FROM events"), 42);
    assert_int_equal(sql_int("SELECT count(*) FROM events WHERE target = '/ws/group' || id"), 42);
    struct audit_verify v;
    char err[256];
    assert_int_equal(audit_store_verify(st, &v, err, sizeof err), 0);
    if (!v.ok)
        fprintf(stderr, "verify: row %lld: %s\n", (long long)v.bad_id, v.msg);
    assert_true(v.ok);
    assert_int_equal(v.rows, 42);
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
    /* the 30 kept and the row that records the removal */
    assert_int_equal(v.rows, 31);
    /* the chain goes on after a reopen */
    audit_store_close(st);
    assert_int_equal(audit_store_open(path, false, &st, err, sizeof err), 0);
    fill(st, 2);
    assert_int_equal(audit_store_last_id(st), 43);
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

/* What a stats callback saw, copied (the store's texts last only during
 * the call). */
struct seen_stats {
    int calls;
    char agent[4][32];
    int64_t events[4], denied[4], first_ns[4], last_ns[4];
    char ops[4][128], targets[4][256];
    size_t n_targets[4];
};

static int stats_cb(const struct audit_agent_stats *a, void *ctx)
{
    struct seen_stats *s = ctx;
    int k = s->calls++;
    assert_true(k < 4);
    snprintf(s->agent[k], sizeof s->agent[k], "%s", a->agent ? a->agent : "(null)");
    s->events[k] = a->events;
    s->denied[k] = a->denied;
    s->first_ns[k] = a->first_ns;
    s->last_ns[k] = a->last_ns;
    for (size_t i = 0; i < a->n_denied_ops; i++) {
        char one[64];
        snprintf(one, sizeof one, "%s%s=%lld", i ? " " : "", a->denied_ops[i].name,
                 (long long)a->denied_ops[i].n);
        strncat(s->ops[k], one, sizeof s->ops[k] - strlen(s->ops[k]) - 1);
    }
    for (size_t i = 0; i < a->n_denied_targets; i++) {
        char one[64];
        snprintf(one, sizeof one, "%s%s=%lld", i ? " " : "", a->denied_targets[i].name,
                 (long long)a->denied_targets[i].n);
        strncat(s->targets[k], one, sizeof s->targets[k] - strlen(s->targets[k]) - 1);
    }
    s->n_targets[k] = a->n_denied_targets;
    return 0;
}

static void test_stats_summarise_each_agent_s_events_denials_and_denied_targets(void **state)
{
    (void)state;
    struct audit_store *st = fresh();
    fill(st, 12);
    /* A record of sbx's own, with no agent: summarised under NULL. */
    struct audit_row own = { .ts_ns = 5000LL * 1000000000, .op = "kill", .target = "x",
                             .decision = "deny", .layer = "sbx" };
    assert_int_equal(audit_store_append(st, &own), 0);
    assert_int_equal(audit_store_commit(st, true), 0);
    struct seen_stats s = { 0 };
    char err[256];
    assert_int_equal(audit_store_stats(st, NULL, stats_cb, &s, err, sizeof err), 0);
    assert_int_equal(s.calls, 3);
    /* In the order of their first event: coder (i = 0), tester (i = 1). */
    assert_string_equal(s.agent[0], "coder");
    assert_int_equal(s.events[0], 6);
    assert_int_equal(s.denied[0], 2);           /* i = 0 and 6 */
    assert_int_equal(s.first_ns[0], 1000LL * 1000000000);
    assert_int_equal(s.last_ns[0], 1010LL * 1000000000);
    assert_string_equal(s.ops[0], "open-read=2");
    assert_string_equal(s.targets[0], "/ws/file0=1 /ws/file6=1");
    assert_string_equal(s.agent[1], "tester");
    assert_int_equal(s.denied[1], 2);           /* i = 3 and 9 */
    assert_string_equal(s.targets[1], "/ws/file3=1 /ws/file9=1");
    assert_string_equal(s.agent[2], "(null)");
    assert_string_equal(s.ops[2], "kill=1");
    /* One agent only. */
    struct seen_stats one = { 0 };
    assert_int_equal(audit_store_stats(st, "tester", stats_cb, &one, err, sizeof err), 0);
    assert_int_equal(one.calls, 1);
    assert_string_equal(one.agent[0], "tester");
    assert_int_equal(one.events[0], 6);
    struct seen_stats none = { 0 };
    assert_int_equal(audit_store_stats(st, "nobody", stats_cb, &none, err, sizeof err), 0);
    assert_int_equal(none.calls, 0);
    audit_store_close(st);
}

static void test_stats_name_only_the_most_denied_targets_most_first(void **state)
{
    (void)state;
    struct audit_store *st = fresh();
    fill(st, 60);               /* coder: 10 denials, each of its own target */
    struct audit_row again = { .ts_ns = 2000LL * 1000000000, .agent = "coder", .op = "exec",
                               .target = "/ws/file54", .decision = "deny", .layer = "guard" };
    for (int i = 0; i < 2; i++)
        assert_int_equal(audit_store_append(st, &again), 0);
    assert_int_equal(audit_store_commit(st, true), 0);
    struct seen_stats s = { 0 };
    char err[256];
    assert_int_equal(audit_store_stats(st, "coder", stats_cb, &s, err, sizeof err), 0);
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.n_targets[0], AUDIT_STATS_TOP_TARGETS);
    assert_string_equal(s.ops[0], "open-read=10 exec=2");
    assert_string_equal(s.targets[0],
                        "/ws/file54=3 /ws/file0=1 /ws/file12=1 /ws/file18=1 /ws/file24=1");
    audit_store_close(st);
}

static int stop_cb(const struct audit_agent_stats *a, void *ctx)
{
    (void)a;
    ++*(int *)ctx;
    return 1;
}

static void test_stats_stop_when_the_callback_says_so(void **state)
{
    (void)state;
    struct audit_store *st = fresh();
    fill(st, 4);
    int calls = 0;
    char err[256];
    assert_int_equal(audit_store_stats(st, NULL, stop_cb, &calls, err, sizeof err), 0);
    assert_int_equal(calls, 1);
    audit_store_close(st);
}

struct seen_agents {
    int calls;
    char line[4][256];
};

static int agents_cb(const struct audit_agent_run *a, void *ctx)
{
    struct seen_agents *s = ctx;
    int k = s->calls++;
    assert_true(k < 4);
    snprintf(s->line[k], sizeof s->line[k], "%s %s %s started=%lld ended=%d/%lld status=%lld "
             "detail=%s killed=%s/%s", a->reg.name, a->reg.run_id,
             a->reg.policy_name ? a->reg.policy_name : "-", (long long)a->reg.started_ns,
             a->ended, (long long)a->ended_ns, (long long)a->exit_status,
             a->exit_detail ? a->exit_detail : "-", a->killed_by ? a->killed_by : "-",
             a->kill_reason ? a->kill_reason : "-");
    return 0;
}

static void test_agents_lists_every_run_with_its_end_and_who_killed_it(void **state)
{
    (void)state;
    struct audit_store *st = fresh();
    int64_t ref;
    struct audit_agent a = { .name = "coder", .run_id = "run1", .policy_name = "default",
                             .started_ns = 100 };
    assert_int_equal(audit_store_agent_start(st, &a, &ref), 0);
    a = (struct audit_agent){ .name = "looper", .run_id = "run2", .started_ns = 200 };
    assert_int_equal(audit_store_agent_start(st, &a, &ref), 0);
    a = (struct audit_agent){ .name = "coder", .run_id = "run3", .started_ns = 300 };
    assert_int_equal(audit_store_agent_start(st, &a, &ref), 0);
    assert_int_equal(audit_store_agent_end(st, "run1", 150, 0, "exited 0"), 0);
    assert_int_equal(audit_store_agent_killed(st, "run2", "alice (uid 1000)", "runaway"), 0);
    assert_int_equal(audit_store_agent_end(st, "run2", 250, 137, "killed by signal 9"), 0);
    assert_int_equal(audit_store_commit(st, true), 0);
    struct seen_agents s = { 0 };
    char err[256];
    assert_int_equal(audit_store_agents(st, agents_cb, &s, err, sizeof err), 0);
    assert_int_equal(s.calls, 3);
    assert_string_equal(s.line[0], "coder run1 default started=100 ended=1/150 status=0 "
                        "detail=exited 0 killed=-/-");
    assert_string_equal(s.line[1], "looper run2 - started=200 ended=1/250 status=137 "
                        "detail=killed by signal 9 killed=alice (uid 1000)/runaway");
    assert_string_equal(s.line[2], "coder run3 - started=300 ended=0/0 status=0 "
                        "detail=- killed=-/-");
    audit_store_close(st);
}

static void test_totals_count_the_rows_and_name_the_newest(void **state)
{
    (void)state;
    struct audit_store *st = fresh();
    struct audit_totals t = { -1, -1 };
    char err[256];
    assert_int_equal(audit_store_totals(st, &t, err, sizeof err), 0);
    assert_int_equal(t.rows, 0);
    assert_int_equal(t.newest_id, 0);
    fill(st, 30);
    int64_t pruned;
    assert_int_equal(audit_store_prune(st, 1010LL * 1000000000, &pruned), 0);
    assert_int_equal(pruned, 10);
    assert_int_equal(audit_store_totals(st, &t, err, sizeof err), 0);
    /* the 20 kept and the row that records the removal */
    assert_int_equal(t.rows, 21);
    assert_int_equal(t.newest_id, 31);
    audit_store_close(st);
}

static void test_a_read_snapshot_does_not_see_rows_committed_after_it_began(void **state)
{
    (void)state;
    struct audit_store *w = fresh(), *r;
    fill(w, 3);
    char err[256];
    assert_int_equal(audit_store_open(path, true, &r, err, sizeof err), 0);
    assert_int_equal(audit_store_read_begin(r, err, sizeof err), 0);
    struct audit_totals t;
    assert_int_equal(audit_store_totals(r, &t, err, sizeof err), 0);
    assert_int_equal(t.rows, 3);
    fill(w, 3);
    assert_int_equal(audit_store_totals(r, &t, err, sizeof err), 0);
    assert_int_equal(t.rows, 3);
    audit_store_read_end(r);
    assert_int_equal(audit_store_totals(r, &t, err, sizeof err), 0);
    assert_int_equal(t.rows, 6);
    audit_store_close(r);
    audit_store_close(w);
}

/* ---- the spans (store_spans.c), and the migration to them -------------- */

/* Every row, by a plain scan of the whole chain: what a filter must match. */
struct all_rows {
    int64_t id[4000], ts[4000];
    char agent[4000][8];
    bool deny[4000];
    int n;
};

static int all_cb(const struct audit_row *r, void *ctx)
{
    struct all_rows *a = ctx;
    assert_true(a->n < 4000);
    a->id[a->n] = r->id;
    a->ts[a->n] = r->ts_ns;
    snprintf(a->agent[a->n], sizeof a->agent[0], "%s", r->agent ? r->agent : "");
    a->deny[a->n] = strcmp(r->decision, "deny") == 0;
    a->n++;
    return 0;
}

struct ids {
    int64_t v[4000];
    int n;
};

static int ids_cb(const struct audit_row *r, void *ctx)
{
    struct ids *x = ctx;
    assert_true(x->n < 4000);
    x->v[x->n++] = r->id;
    return 0;
}

/* The query's ids equal the scan's, filtered in C, for F. */
static void same_as_scan(struct audit_store *st, const struct all_rows *all, struct audit_filter f)
{
    struct ids want = { .n = 0 }, got = { .n = 0 };
    for (int i = 0; i < all->n; i++) {
        if ((f.agent && strcmp(all->agent[i], f.agent) != 0) ||
            (f.since_ns && all->ts[i] < f.since_ns) || (f.decision && !all->deny[i]) ||
            all->id[i] <= f.after_id)
            continue;
        want.v[want.n++] = all->id[i];
    }
    if (f.limit > 0 && want.n > f.limit) {
        memmove(want.v, want.v + want.n - f.limit, (size_t)f.limit * sizeof want.v[0]);
        want.n = (int)f.limit;
    }
    char err[256];
    assert_int_equal(audit_store_query(st, &f, ids_cb, &got, err, sizeof err), 0);
    assert_int_equal(got.n, want.n);
    assert_memory_equal(got.v, want.v, (size_t)want.n * sizeof want.v[0]);
}

static void check_every_filter(struct audit_store *st)
{
    struct all_rows *all = calloc(1, sizeof *all);
    assert_non_null(all);
    char err[256];
    struct audit_filter none = { 0 };
    assert_int_equal(audit_store_query(st, &none, all_cb, all, err, sizeof err), 0);
    static const char *names[] = { "a0", "a3", "a9", "nobody" };
    int64_t since[] = { 0, 1000LL * 1000000000 + 1500 * 1000000LL, all->n ? all->ts[all->n - 1] : 1 };
    int64_t limits[] = { 0, 1, 7, 5000 };
    for (size_t a = 0; a < 5; a++)
        for (size_t s = 0; s < 3; s++)
            for (size_t l = 0; l < 4; l++) {
                struct audit_filter f = { .agent = a < 4 ? names[a] : NULL,
                                          .since_ns = since[s], .limit = limits[l] };
                same_as_scan(st, all, f);
                f.decision = "deny";
                same_as_scan(st, all, f);
                f.decision = NULL;
                f.after_id = all->n > 10 ? all->id[all->n / 2] : 0;
                same_as_scan(st, all, f);
            }
    free(all);
}

/* 3000 rows in batches of 100 from 40 runs of 10 names (four runs of a name
 * at once: their spans overlap), more runs in a batch than the spans kept
 * in memory, ts out of order by up to 5 s, some rows of no agent, and a
 * batch rolled back in the middle. */
static void fill_many(struct audit_store *st)
{
    int64_t ref[40];
    for (int k = 0; k < 40; k++) {
        char name[8], run[16];
        snprintf(name, sizeof name, "a%d", k % 10);
        snprintf(run, sizeof run, "run%d", k);
        struct audit_agent a = { .name = name, .run_id = run };
        assert_int_equal(audit_store_agent_start(st, &a, &ref[k]), 0);
    }
    assert_int_equal(audit_store_commit(st, false), 0);
    uint32_t x = 12345;
    bool failed_once = false;
    for (int i = 0; i < 3000; i++) {
        x = x * 1103515245u + 12345u;
        int k = (int)((x >> 8) % 44);
        char name[8];
        snprintf(name, sizeof name, "a%d", k % 10);
        struct audit_row r = {
            .ts_ns = 1000LL * 1000000000 + i * 1000000LL - (int64_t)((x >> 4) % 5000) * 1000000,
            .agent = k < 40 ? name : NULL, .run_id = k < 40 ? "run" : NULL, .op = "open-read",
            .target = "/ws/f", .decision = (x >> 20) % 4 ? "allow" : "deny", .layer = "guard",
            .agent_ref = k < 40 ? ref[k] : 0,
        };
        assert_int_equal(audit_store_append(st, &r), 0);
        if (i == 1550 && !failed_once) {
            /* a failed batch: its rows and spans go, and come again */
            audit_store_rollback(st);
            failed_once = true;
            i -= 51;
            continue;
        }
        if (i % 100 == 99)
            assert_int_equal(audit_store_commit(st, false), 0);
    }
    assert_int_equal(audit_store_commit(st, true), 0);
}

static void test_agent_and_since_queries_find_exactly_the_rows_a_scan_finds(void **state)
{
    (void)state;
    struct audit_store *st = fresh(), *rd;
    fill_many(st);
    check_every_filter(st);
    char err[512];
    assert_int_equal(audit_store_open(path, true, &rd, err, sizeof err), 0);
    check_every_filter(rd);
    audit_store_close(rd);
    /* after retention too: the spans of removed rows go, the rest serve */
    int64_t pruned;
    assert_int_equal(audit_store_prune(st, 1000LL * 1000000000 + 1200 * 1000000LL, &pruned), 0);
    assert_true(pruned > 0);
    check_every_filter(st);
    audit_store_close(st);
}

/* The schema before event_spans: two indexes on events. */
#define OLD_SCHEMA "DROP TABLE event_spans; DELETE FROM meta WHERE key = 'schema';" \
    "CREATE INDEX events_agent ON events(agent_ref); CREATE INDEX events_ts ON events(ts);"

static void test_an_old_store_is_migrated_and_still_verifies(void **state)
{
    (void)state;
    struct audit_store *st = fresh();
    fill_many(st);
    struct audit_verify before, after;
    char err[512];
    assert_int_equal(audit_store_verify(st, &before, err, sizeof err), 0);
    assert_true(before.ok);
    audit_store_close(st);
    sql_exec(OLD_SCHEMA);
    assert_int_equal(sql_int("SELECT count(*) FROM sqlite_master WHERE name = 'event_spans'"), 0);
    /* read-only, it is read as it is (its own indexes) and answers alike */
    assert_int_equal(audit_store_open(path, true, &st, err, sizeof err), 0);
    check_every_filter(st);
    audit_store_close(st);
    assert_int_equal(sql_int("SELECT count(*) FROM sqlite_master WHERE name = 'event_spans'"), 0);
    /* the writer migrates it: every row kept, the chain unchanged */
    assert_int_equal(audit_store_open(path, false, &st, err, sizeof err), 0);
    assert_int_equal(sql_int("SELECT count(*) FROM sqlite_master WHERE name IN "
                             "('events_agent', 'events_ts')"), 0);
    assert_int_equal(sql_int("SELECT count(*) FROM event_spans"), sql_int(
        "SELECT count(*) FROM (SELECT DISTINCT id / 65536, coalesce(agent_ref, 0) FROM events)"));
    assert_int_equal(sql_int("SELECT value FROM meta WHERE key = 'schema'"), 2);
    assert_int_equal(audit_store_verify(st, &after, err, sizeof err), 0);
    assert_true(after.ok);
    assert_int_equal(after.rows, before.rows);
    assert_string_equal(after.msg, before.msg);
    check_every_filter(st);
    /* and it goes on: new rows chain on and are found */
    fill(st, 30);
    assert_int_equal(audit_store_verify(st, &after, err, sizeof err), 0);
    assert_true(after.ok);
    assert_int_equal(after.rows, before.rows + 30);
    assert_int_equal(count(st, (struct audit_filter){ .agent = "coder" }), 15);
    check_every_filter(st);
    audit_store_close(st);
}

static void test_rows_an_older_daemon_appended_after_the_migration_get_spans(void **state)
{
    (void)state;
    struct audit_store *st = fresh();
    fill_many(st);
    int64_t last = audit_store_last_id(st);
    fill(st, 30);
    audit_store_close(st);
    /* An older sbx-auditd put its indexes back and wrote 30 rows without
     * spans. */
    char sql[300];
    snprintf(sql, sizeof sql, "DELETE FROM event_spans WHERE first_id > %lld;"
             "CREATE INDEX events_agent ON events(agent_ref);", (long long)last);
    sql_exec(sql);
    char err[512];
    assert_int_equal(audit_store_open(path, false, &st, err, sizeof err), 0);
    assert_int_equal(count(st, (struct audit_filter){ .agent = "coder" }), 15);
    check_every_filter(st);
    struct audit_verify v;
    assert_int_equal(audit_store_verify(st, &v, err, sizeof err), 0);
    assert_true(v.ok);
    audit_store_close(st);
}

static off_t file_size(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 ? sb.st_size : 0;
}

/* Appends N rows of about 250 bytes for agent REF and commits them, as
 * sbx-auditd does a batch. */
static void bulk_batch(struct audit_store *st, int64_t ref, int n)
{
    char target[256];
    memset(target, 'x', sizeof target - 1);
    target[sizeof target - 1] = '\0';
    for (int i = 0; i < n; i++) {
        snprintf(target, 24, "/ws/bulk/%012d", i);
        target[23] = 'x';
        struct audit_row r = {
            .ts_ns = 1000000000, .agent = "bulk", .run_id = "bulk-1", .pid = 7, .uid = 1000,
            .op = "open-read", .target = target, .decision = "allow", .rule = "rule",
            .layer = "guard", .agent_ref = ref,
        };
        assert_int_equal(audit_store_append(st, &r), 0);
    }
    assert_int_equal(audit_store_commit(st, false), 0);
}

static void test_the_checkpoint_thread_copies_the_wal_back_while_commits_go_on(void **state)
{
    (void)state;
    struct audit_store *st = fresh();
    assert_int_equal(audit_store_checkpoint_thread(st), 0);
    char wal[4200];
    snprintf(wal, sizeof wal, "%s-wal", path);
    int64_t ref;
    struct audit_agent a = { .name = "bulk", .run_id = "bulk-1" };
    assert_int_equal(audit_store_agent_start(st, &a, &ref), 0);
    assert_int_equal(audit_store_commit(st, true), 0);
    /* Past the WAL's 64 MiB bound the thread copies pages back into the
     * database while batches keep being committed; the writer would copy
     * them itself only past four times the bound, which the WAL never
     * reaches here. */
    off_t db0 = file_size(path), wal_max = 0, inside = 0;
    long rows = 0;
    while (file_size(path) < db0 + (32 << 20)) {
        bulk_batch(st, ref, 4096);
        rows += 4096;
        /* The checkpoint offered after each batch, as the daemon does. */
        off_t before = file_size(path);
        assert_int_equal(audit_store_checkpoint(st, false), 0);
        inside += file_size(path) - before;
        if (file_size(wal) > wal_max)
            wal_max = file_size(wal);
        assert_true(rows < 3000000);
    }
    assert_true(wal_max >= 64 << 20);
    assert_true(wal_max < 4 * (64 << 20));
    /* The pages came back while the writer was appending, not in the
     * writer's own checkpoint calls. */
    assert_true(file_size(path) - db0 - inside >= 16 << 20);
    /* Quiet: the thread copies the rest, and the WAL starts over. */
    off_t wal_now = file_size(wal);
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(audit_store_checkpoint(st, true), 0);
        usleep(10000);
        bulk_batch(st, ref, 1);
        rows++;
        if (file_size(wal) < wal_now)
            break;
    }
    assert_true(file_size(wal) <= 64 << 20);
    assert_int_equal(sql_int("SELECT count(*) FROM events"), rows);
    assert_int_equal(audit_store_flush_head(st), 0);     /* as the daemon does */
    struct audit_verify v;
    char err[512];
    assert_int_equal(audit_store_verify(st, &v, err, sizeof err), 0);
    assert_true(v.ok);
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
        cmocka_unit_test(test_a_writer_refuses_a_store_shorter_than_its_head_file),
        cmocka_unit_test(test_a_second_writer_of_one_store_is_refused_at_once),
        cmocka_unit_test(test_a_rolled_back_batch_leaves_the_chain_where_it_was),
        cmocka_unit_test(test_rows_appended_in_groups_keep_their_own_values_across_commit_and_rollback),
        cmocka_unit_test(test_pruning_keeps_the_rest_of_the_chain_verifiable),
        cmocka_unit_test(test_the_chain_continues_across_reopen),
        cmocka_unit_test(test_a_missing_store_is_a_clear_error_when_read_only),
        cmocka_unit_test(test_the_checkpoint_thread_copies_the_wal_back_while_commits_go_on),
        cmocka_unit_test(test_stats_summarise_each_agent_s_events_denials_and_denied_targets),
        cmocka_unit_test(test_stats_name_only_the_most_denied_targets_most_first),
        cmocka_unit_test(test_stats_stop_when_the_callback_says_so),
        cmocka_unit_test(test_agents_lists_every_run_with_its_end_and_who_killed_it),
        cmocka_unit_test(test_totals_count_the_rows_and_name_the_newest),
        cmocka_unit_test(test_a_read_snapshot_does_not_see_rows_committed_after_it_began),
        cmocka_unit_test(test_agent_and_since_queries_find_exactly_the_rows_a_scan_finds),
        cmocka_unit_test(test_an_old_store_is_migrated_and_still_verifies),
        cmocka_unit_test(test_rows_an_older_daemon_appended_after_the_migration_get_spans),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
