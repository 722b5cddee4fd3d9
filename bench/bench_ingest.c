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
    long stored = (long)(last - first);
    printf("audit: ingest %.0f events/s (%d events, %ld dropped, %ld stored)\n",
           (double)EVENTS / secs, EVENTS, failed + (EVENTS - failed - stored), stored);
    benchenv_stop(&env);
    return failed || stored != EVENTS ? 1 : 0;
}
