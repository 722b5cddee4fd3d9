/*
 * bench_emit — what sbx_emit costs the agent: ns per event, median of 7
 * rounds, against a bare loop that builds the same event and hands it to a
 * function that does nothing (same run, same machine state).
 *
 * The emitter's cost is measured in bursts of 2000 events (half the ring)
 * with the daemon given time to drain between bursts: that is the cost an
 * agent pays while sbx-auditd keeps up.  Sustained rates beyond the daemon's
 * ingest rate are bench_ingest's subject (the emitter then waits for room).
 */
#include <stdio.h>

#include "benchenv.h"

#define ROUNDS 7
#define BURSTS 25
#define BURST  2000

static int sink(const struct sbx_event_desc *ev)
{
    __asm__ volatile("" : : "r"(ev) : "memory");
    return 0;
}
static int (*volatile bare_fn)(const struct sbx_event_desc *) = sink;

static uint64_t round_ns(int (*fn)(const struct sbx_event_desc *), int ctl, long *failed)
{
    static const char *const targets[] = {
        "/home/user/project/src/main.c", "/home/user/project/include/util.h",
        "/usr/lib/python3.11/json/__init__.py", "/home/user/project/.git/HEAD",
    };
    uint64_t total = 0;
    char err[256];
    for (int b = 0; b < BURSTS; b++) {
        uint64_t t0 = bench_ns();
        for (int i = 0; i < BURST; i++) {
            /* as the guard reports an allowed open: the rule and the reason
             * are keyed (sent by reference once the table has them) */
            static const char rule[] = "files.read.allow \"**\" /home/user/.sbx/default.yaml:18";
            static const char reason[] = "matches files.read.allow";
            struct sbx_event_desc ev = {
                .op = SBX_OP_OPEN_READ, .decision = SBX_ALLOW, .layer = SBX_LAYER_GUARD,
                .target = targets[i & 3], .rule = rule, .reason = reason,
                .rule_key = rule, .reason_key = reason,
            };
            if (fn(&ev) < 0)
                (*failed)++;
        }
        total += bench_ns() - t0;
        if (fn != bare_fn)
            sbx_ctl_sync(ctl, NULL, err, sizeof err);
    }
    return total;
}

int main(void)
{
    struct benchenv env;
    if (benchenv_start(&env, "bench-emit") < 0) {
        fprintf(stderr, "bench_emit: cannot start a private sbx-auditd\n");
        return 1;
    }
    long failed = 0;
    round_ns(sbx_emit, env.ctl, &failed);      /* warm-up: registers the ring */
    uint64_t emit[ROUNDS], bare[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        bare[r] = round_ns(bare_fn, env.ctl, &failed);
        emit[r] = round_ns(sbx_emit, env.ctl, &failed);
    }
    qsort(emit, ROUNDS, sizeof emit[0], bench_cmp_u64);
    qsort(bare, ROUNDS, sizeof bare[0], bench_cmp_u64);
    double n = (double)BURSTS * BURST;
    printf("audit: emit %.0f ns/event (bare loop %.1f ns), median of %d rounds of %.0f events%s\n",
           (double)emit[ROUNDS / 2] / n, (double)bare[ROUNDS / 2] / n, ROUNDS, n,
           failed ? " [SOME EMITS FAILED]" : "");
    benchenv_stop(&env);
    return failed ? 1 : 0;
}
