/*
 * bench_store — the store alone, without rings or daemon: 1,000,000 rows
 * like bench_ingest's appended in batches of 20,000 (the daemon's
 * BATCH_ROWS), timed by the process's own CPU time, so that a busy,
 * shared machine changes the figure less than it changes bench_ingest's.
 * Also the hash chain alone over the same rows, one retention step of
 * 10,000 rows (what ingest pays for each part), and the queries
 * `sbx-audit query` makes on the million rows (--agent of a run with 1% of
 * them, --decision deny, --since the newest 1%, each whole and --limit 20).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "store.h"

#define ROWS  1000000
#define BATCH 20000

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int count_row(const struct audit_row *r, void *ctx)
{
    (void)r;
    ++*(long *)ctx;
    return 0;
}

/* Every 100th row is the other agent's (run "other"): --agent finds 1%. */
static int64_t refs[2];

static void row_for(long i, char *target, size_t tsz, struct audit_row *r)
{
    snprintf(target, tsz, "/home/user/project/src/module%ld/file%ld.c", i % 97, i);
    *r = (struct audit_row){
        .ts_ns = 1700000000000000000LL + i * 1000, .agent = "bench", .run_id = "0123456789ab",
        .pid = 4242, .uid = 1000, .op = i % 5 ? "open-read" : "open-write", .target = target,
        .decision = i % 50 ? "allow" : "deny", .rule = "files.read.allow[0] \"**\"",
        .reason = i % 50 ? NULL : "matches files.write.deny", .layer = "guard",
        .err = i % 50 ? 0 : 13, .agent_ref = refs[0],
    };
    if (i % 100 == 7) {
        r->agent = "other";
        r->run_id = "other-run";
        r->agent_ref = refs[1];
    }
}

int main(void)
{
    char dir[] = "/tmp/sbx-bench-store.XXXXXX", path[256], err[512], target[128];
    if (!mkdtemp(dir))
        return 1;
    snprintf(path, sizeof path, "%s/audit.db", dir);
    struct audit_store *st;
    if (audit_store_open(path, false, &st, err, sizeof err) < 0) {
        fprintf(stderr, "bench_store: %s\n", err);
        return 1;
    }
    struct audit_agent ag[2] = { { .name = "bench", .run_id = "0123456789ab" },
                                 { .name = "other", .run_id = "other-run" } };
    if (audit_store_agent_start(st, &ag[0], &refs[0]) < 0 ||
        audit_store_agent_start(st, &ag[1], &refs[1]) < 0 || audit_store_commit(st, false) < 0) {
        fprintf(stderr, "bench_store: %s\n", audit_store_errmsg(st));
        return 1;
    }
    struct audit_row r;
    unsigned char prev[AUDIT_HASH_LEN] = { 0 }, h[AUDIT_HASH_LEN];
    double c0 = cpu_s();
    for (long i = 0; i < ROWS; i++) {
        row_for(i, target, sizeof target, &r);
        r.id = i + 1;
        audit_row_hash(prev, &r, h);
        memcpy(prev, h, sizeof prev);
    }
    double hash_s = cpu_s() - c0;
    c0 = cpu_s();
    int rc = 0;
    for (long i = 0; i < ROWS && rc == 0; i++) {
        row_for(i, target, sizeof target, &r);
        rc = audit_store_append(st, &r);
        if (rc == 0 && (i + 1) % BATCH == 0)
            rc = audit_store_commit(st, false);
        if (rc == 0 && (i + 1) % BATCH == 0)
            rc = audit_store_checkpoint(st, false);
    }
    if (rc == 0)
        rc = audit_store_commit(st, true);
    double store_s = cpu_s() - c0;
    struct audit_retention p = { .older_than_ns = 1700000000000000000LL + 10000LL * 1000,
                                 .rule = "bench" };
    struct audit_removal res = { 0 };
    c0 = cpu_s();
    if (rc == 0)
        rc = audit_store_retain(st, &p, &res);
    double retain_s = cpu_s() - c0;
    if (rc < 0)
        fprintf(stderr, "bench_store: %s\n", audit_store_errmsg(st));
    audit_store_close(st);
    /* The queries, as sbx-audit makes them: a reader of its own. */
    static const char *names[] = { "--agent", "--decision", "--since" };
    double qms[3][2];
    long found[3][2];
    struct audit_store *rd = NULL;
    if (rc == 0 && audit_store_open(path, true, &rd, err, sizeof err) < 0) {
        fprintf(stderr, "bench_store: %s\n", err);
        rc = -1;
    }
    for (int k = 0; k < 3 && rc == 0; k++) {
        for (int l = 0; l < 2 && rc == 0; l++) {
            struct audit_filter f = { .limit = l ? 20 : 0 };
            if (k == 0)
                f.agent = "other";
            else if (k == 1)
                f.decision = "deny";
            else
                f.since_ns = 1700000000000000000LL + (ROWS - ROWS / 100) * 1000LL;
            found[k][l] = 0;
            double w0 = wall_s();
            rc = audit_store_query(rd, &f, count_row, &found[k][l], err, sizeof err);
            qms[k][l] = (wall_s() - w0) * 1e3;
            if (rc < 0)
                fprintf(stderr, "bench_store: %s\n", err);
        }
    }
    audit_store_close(rd);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    if (rc < 0)
        return 1;
    printf("audit: store append %.0f rows/s of CPU (%.2f us/row, of which the hash chain "
           "%.2f us); retention step %lld rows in %.0f ms\n", ROWS / store_s, store_s * 1e6 / ROWS,
           hash_s * 1e6 / ROWS, (long long)res.rows, retain_s * 1e3);
    printf("audit: query on %d rows:", ROWS);
    for (int k = 0; k < 3; k++)
        printf("%s %s %ld rows %.0f ms, --limit 20 %.1f ms", k ? ";" : "", names[k], found[k][0],
               qms[k][0], qms[k][1]);
    printf("\n");
    return 0;
}
