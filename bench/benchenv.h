/*
 * benchenv.h — a private sbx-auditd for one benchmark: a temporary
 * SBX_RUNTIME_DIR and SBX_AUDIT_DB (the user's store is never touched), a
 * registered agent, the emitter initialised; and the tear-down.  Header-only
 * (each bench is one program).
 */
#ifndef SBX_BENCHENV_H
#define SBX_BENCHENV_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "emit.h"
#include "event.h"
#include "paths.h"

struct benchenv {
    char dir[256];
    int ctl;
};

static inline uint64_t bench_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline int benchenv_start(struct benchenv *b, const char *name)
{
    char err[512], run_id[64], token[80], p[512];
    snprintf(b->dir, sizeof b->dir, "/tmp/sbx-bench.XXXXXX");
    if (!mkdtemp(b->dir))
        return -1;
    snprintf(p, sizeof p, "%s/run", b->dir);
    setenv(SBX_ENV_RUNTIME_DIR, p, 1);
    snprintf(p, sizeof p, "%s/state/audit.db", b->dir);
    setenv(SBX_ENV_AUDIT_DB, p, 1);
    b->ctl = sbx_ctl_open(true, err, sizeof err);
    if (b->ctl < 0) {
        fprintf(stderr, "%s: %s\n", name, err);
        return -1;
    }
    struct sbx_agent_reg reg = { .name = name, .command = name, .layers = "none",
                                 .guard_pid = getpid() };
    if (sbx_ctl_register(b->ctl, &reg, run_id, sizeof run_id, token, sizeof token,
                         err, sizeof err) < 0) {
        fprintf(stderr, "%s: register: %s\n", name, err);
        return -1;
    }
    snprintf(p, sizeof p, "%s/run", b->dir);
    return sbx_emit_init(p, run_id, token);
}

static inline void benchenv_stop(struct benchenv *b)
{
    char pf[512], cmd[600];
    sbx_ctl_exit(b->ctl, 0, "exited 0");
    sbx_ctl_close(b->ctl);
    snprintf(pf, sizeof pf, "%s/run/%s", b->dir, SBX_PID_FILE);
    FILE *f = fopen(pf, "r");
    int pid = 0;
    if (f && fscanf(f, "%d", &pid) == 1 && pid > 0) {
        kill(pid, SIGTERM);
        for (int i = 0; i < 200 && kill(pid, 0) == 0; i++)
            usleep(25000);
    }
    if (f)
        fclose(f);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", b->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", b->dir);
}

static inline int bench_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

#endif
