/* rerun N [-p PRE] -- CMD [ARG...]: runs CMD N times (posix_spawnp, as an
 * agent's tool call would), PRE (a shell command, untimed) before each,
 * and prints the median wall time of CMD and the CPU time (user and
 * system) of CMD and its descendants in that run: "MS ms per run (cpu C ms)".
 * The CPU time is what a loaded machine disturbs least: other processes
 * stretch the wall time, not the work.
 *
 * bench/macro.py runs it bare and as the agent under sbx-guard: the ratio
 * is what a guarded agent pays per command it runs, without sbx-guard's
 * own start-up, which happens once per agent session and is measured on
 * its own.  (Not a bench_* binary: it takes arguments.) */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

static int run(char *const argv[])
{
    pid_t pid;
    int st;
    if (posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ) != 0) {
        perror(argv[0]);
        return -1;
    }
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "rerun: %s failed\n", argv[0]);
        return -1;
    }
    return 0;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double tv_ms(struct timeval tv)
{
    return (double)tv.tv_sec * 1e3 + (double)tv.tv_usec / 1e3;
}

int main(int argc, char **argv)
{
    int i = 1;
    if (argc < 4)
        goto usage;
    int n = atoi(argv[i++]);
    char *pre = NULL;
    if (strcmp(argv[i], "-p") == 0 && i + 1 < argc) {
        pre = argv[i + 1];
        i += 2;
    }
    if (n < 1 || i >= argc || strcmp(argv[i], "--") != 0 || i + 1 >= argc)
        goto usage;
    char **cmd = argv + i + 1;
    char *sh[] = { "/bin/sh", "-c", pre, NULL };
    double *ms = calloc((size_t)n, sizeof *ms), *cpu = calloc((size_t)n, sizeof *cpu);
    if (!ms || !cpu)
        return 1;
    for (int k = 0; k < n; k++) {
        if (pre && run(sh) < 0)
            return 1;
        struct timespec a, b;
        struct rusage ra, rb;
        getrusage(RUSAGE_CHILDREN, &ra);
        clock_gettime(CLOCK_MONOTONIC, &a);
        if (run(cmd) < 0)
            return 1;
        clock_gettime(CLOCK_MONOTONIC, &b);
        getrusage(RUSAGE_CHILDREN, &rb);
        ms[k] = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
        cpu[k] = tv_ms(rb.ru_utime) - tv_ms(ra.ru_utime) + tv_ms(rb.ru_stime) - tv_ms(ra.ru_stime);
    }
    qsort(ms, (size_t)n, sizeof *ms, cmp);
    qsort(cpu, (size_t)n, sizeof *cpu, cmp);
    printf("%.3f ms per run (cpu %.3f ms)\n", ms[n / 2], cpu[n / 2]);
    free(ms);
    free(cpu);
    return 0;
usage:
    fprintf(stderr, "usage: rerun N [-p PRE] -- CMD [ARG...]\n");
    return 2;
}
