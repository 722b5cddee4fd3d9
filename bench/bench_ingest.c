/*
 * bench_ingest — sustained events per second from an agent's ring into the
 * SQLite store with the hash chain on: one producer thread emits 1,000,000
 * events as fast as the ring lets it (it waits when the ring is full, it
 * never drops), and the clock stops when sbx-auditd says everything is
 * committed (SYNC).  Rows are counted back from the store.
 */
#include <sqlite3.h>
#include <stdio.h>

#include "benchenv.h"

#define EVENTS 1000000

/* CPU seconds (user + system) the daemon has used so far: on a shared,
 * noisy machine this says more about the daemon's cost than the wall
 * clock. */
static double daemon_cpu(const struct benchenv *b)
{
    char p[512], buf[1024];
    snprintf(p, sizeof p, "%s/run/%s", b->dir, SBX_PID_FILE);
    FILE *f = fopen(p, "r");
    int pid = 0;
    if (!f || fscanf(f, "%d", &pid) != 1) {
        if (f)
            fclose(f);
        return 0;
    }
    fclose(f);
    snprintf(p, sizeof p, "/proc/%d/stat", pid);
    f = fopen(p, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *c = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    if (!c || sscanf(c + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

int main(void)
{
    struct benchenv env;
    if (benchenv_start(&env, "bench-ingest") < 0) {
        fprintf(stderr, "bench_ingest: cannot start a private sbx-auditd\n");
        return 1;
    }
    char err[256], target[96];
    int64_t first = 0, last = 0;
    sbx_ctl_sync(env.ctl, &first, err, sizeof err);
    long failed = 0;
    double cpu0 = daemon_cpu(&env);
    uint64_t t0 = bench_ns();
    for (long i = 0; i < EVENTS; i++) {
        snprintf(target, sizeof target, "/home/user/project/src/module%ld/file%ld.c", i % 97, i);
        struct sbx_event_desc ev = {
            .op = i % 5 ? SBX_OP_OPEN_READ : SBX_OP_OPEN_WRITE,
            .decision = i % 50 ? SBX_ALLOW : SBX_DENY, .layer = SBX_LAYER_GUARD,
            .err = i % 50 ? 0 : 13, .target = target, .rule = "files.read.allow[0] \"**\"",
            .reason = i % 50 ? NULL : "matches files.write.deny",
        };
        if (sbx_emit(&ev) < 0)
            failed++;
    }
    if (sbx_ctl_sync(env.ctl, &last, err, sizeof err) < 0) {
        fprintf(stderr, "bench_ingest: sync: %s\n", err);
        return 1;
    }
    double secs = (double)(bench_ns() - t0) / 1e9;
    double cpu = daemon_cpu(&env) - cpu0;
    long stored = (long)(last - first);
    printf("audit: ingest %.0f events/s (%d events, %ld dropped, %ld stored; "
           "daemon CPU %.2f us/event)\n", (double)EVENTS / secs, EVENTS,
           failed + (EVENTS - failed - stored), stored, cpu * 1e6 / EVENTS);
    benchenv_stop(&env);
    return failed || stored != EVENTS ? 1 : 0;
}
