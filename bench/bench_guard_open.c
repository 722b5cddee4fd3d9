/*
 * bench_guard_open — the guard's own cost on its hot path, without the
 * audit channel: open + close of allowed workspace files, through the
 * preload's open() (compiled into this program) against the bare system
 * calls, interleaved in one process so that machine noise hits both.
 * The emitter is replaced by a stub that accepts every event, so what is
 * measured is normalization, the policy decision and openat2; the audit
 * ring's cost is bench/preload.sh's to show (with sbx-auditd running).
 *
 * Prints the median over 41 rounds for one path opened again and again,
 * and for 8 paths in turn (more than the per-thread decision memo holds).
 */
#include "../preload/benign.c"
#include "../preload/decide.c"
#include "../preload/dns.c"
#include "../preload/env.c"
#include "../preload/file.c"
#include "../preload/init.c"
#include "../preload/notify.c"
#include "../preload/path.c"
#include "../preload/resolve.c"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* The emitter, stubbed: every event is "recorded" at no cost. */
int sbx_emit_init(const char *runtime_dir, const char *agent_id, const char *agent_token)
{
    (void)runtime_dir;
    (void)agent_id;
    (void)agent_token;
    return 0;
}

int sbx_emit(const struct sbx_event_desc *ev)
{
    (void)ev;
    return 0;
}

bool sbx_emit_killed(void)
{
    return false;
}

const char *sbx_emit_error(void)
{
    return "";
}

void sbx_emit_set_async(bool on)
{
    (void)on;
}

int sbx_emit_prepare_vfork(void)
{
    return 0;
}

void sbx_emit_handover(void)
{
}

bool sbx_emit_untaken(void)
{
    return false;
}

int sbx_emit_use_file(const char *path)
{
    (void)path;
    return 0;
}

int sbx_emit_rebind(const char *agent_id, const char *agent_token)
{
    (void)agent_id;
    (void)agent_token;
    return 0;
}

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define ROUNDS 41
#define PER_ROUND 2000

static void run(const char *what, char names[][64], int nnames)
{
    double bare[ROUNDS], guarded[ROUNDS], ratio[ROUNDS];
    for (int k = 0; k < ROUNDS; k++) {
        double a = now_ns();
        for (int i = 0; i < PER_ROUND; i++) {
            long fd = guard_raw(SYS_openat, AT_FDCWD, (long)names[i % nnames], O_RDONLY, 0, 0, 0);
            guard_raw(SYS_close, fd, 0, 0, 0, 0, 0);
        }
        double b = now_ns();
        for (int i = 0; i < PER_ROUND; i++)
            close(open(names[i % nnames], O_RDONLY));
        double c = now_ns();
        bare[k] = (b - a) / PER_ROUND;
        guarded[k] = (c - b) / PER_ROUND;
        ratio[k] = (c - b) / (b - a);
    }
    qsort(bare, ROUNDS, sizeof bare[0], cmp_double);
    qsort(guarded, ROUNDS, sizeof guarded[0], cmp_double);
    qsort(ratio, ROUNDS, sizeof ratio[0], cmp_double);
    printf("bench_guard_open: %s: bare %.0f ns, guarded %.0f ns, ratio %.2f (median of %d)\n",
           what, bare[ROUNDS / 2], guarded[ROUNDS / 2], ratio[ROUNDS / 2], ROUNDS);
}

int main(int argc, char **argv)
{
    (void)argc;
    /* The guard reads its environment before main: set it up, then run
     * again as a guarded process. */
    if (!getenv("SBX_POLICY_FILE")) {
        char dir[] = "/tmp/sbx-bench-guard.XXXXXX";
        if (!mkdtemp(dir)) {
            perror("mkdtemp");
            return 1;
        }
        char pol[128];
        snprintf(pol, sizeof pol, "%s/policy.yaml", dir);
        FILE *f = fopen(pol, "w");
        if (!f || fputs("version: 1\nname: bench\n", f) < 0 || fclose(f) != 0) {
            perror(pol);
            return 1;
        }
        setenv("SBX_POLICY_FILE", pol, 1);
        setenv("SBX_WORKSPACE", dir, 1);
        setenv("SBX_BENCH_DIR", dir, 1);
        execv("/proc/self/exe", argv);
        perror("execv");
        return 1;
    }
    const char *dir = getenv("SBX_BENCH_DIR");
    char names[8][64];
    for (int i = 0; i < 8; i++) {
        snprintf(names[i], sizeof names[i], "%s/f%d", dir, i);
        int fd = (int)guard_raw(SYS_openat, AT_FDCWD, (long)names[i], O_WRONLY | O_CREAT, 0644, 0, 0);
        guard_raw(SYS_close, fd, 0, 0, 0, 0, 0);
    }
    int fd = open(names[0], O_RDONLY);
    if (fd < 0) {
        perror("guarded open");
        return 1;
    }
    close(fd);
    run("one path", names, 1);
    run("8 paths", names, 8);
    for (int i = 0; i < 8; i++)
        guard_raw(SYS_unlinkat, AT_FDCWD, (long)names[i], 0, 0, 0, 0);
    char pol[128];
    snprintf(pol, sizeof pol, "%s/policy.yaml", dir);
    guard_raw(SYS_unlinkat, AT_FDCWD, (long)pol, 0, 0, 0, 0);
    guard_raw(SYS_unlinkat, AT_FDCWD, (long)dir, AT_REMOVEDIR, 0, 0, 0);
    return 0;
}
