/*
 * bench_serve — sbx-serve end to end, beside the floor of a bare
 * `python3 -I -c 'print(1)'` measured in the same run.
 *
 * Starts sbx-serve (beside this program: ../bin/sbx-serve) on a unix
 * socket with a private store and runtime directory, and measures over
 * HTTP (serve_client.c: a connection per request, as a framework's tool
 * does): print(1) p50/p99 at concurrency 1, executions per second at
 * concurrency 4, a rejected request (eval("1")) p50 and rate at
 * concurrency 4, a data-science `import numpy` request (a second service
 * with that profile; skipped with the reason when numpy or the profile is
 * missing), and the server's RSS before and after the requests.
 * SBX_BENCH_N (default 200) sets the number of print(1) requests.
 * SBX_BENCH_FORK_SERVER=off measures the pool of fresh sandboxes instead
 * of the fork server (sbx-serve --fork-server off), for a comparison.
 * SBX_BENCH_STABILITY=N instead sends N print(1) requests at concurrency 4
 * and prints the server's RSS every 1,000 up to 10,000, then every N/10 (the
 * memory-stability run of docs/serve.md; an hour or more for 100,000 here).
 * Skipped, with the reason, when the runner (serve-runner.py, or
 * SBX_SERVE_RUNNER) is not there.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bsd/stdlib.h>

#include "paths.h"
#include "serve_client.h"

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, double p)
{
    qsort(v, n, sizeof *v, cmp_d);
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

static long rss_kb(pid_t pid)
{
    char path[64], line[256];
    long kb = -1;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

static char url[512];

/* One request; its latency in seconds, or -1 (WANT: the expected status). */
static double one(const char *body, int want)
{
    char err[256], *resp = NULL;
    int status = 0;
    double t = now_s();
    int rc = serve_client_request(url, "POST", "/execute", body, 60000, &status, &resp,
                                  err, sizeof err);
    t = now_s() - t;
    if (rc < 0 || status != want) {
        fprintf(stderr, "bench_serve: %s -> %s %d %.200s\n", body, rc < 0 ? err : "HTTP",
                status, resp ? resp : "");
        t = -1;
    }
    free(resp);
    return t;
}

#define MAX_SAMPLES 100000

struct load {
    const char *body;
    int want;
    double until;
    long budget;                /* requests left, or -1: until UNTIL */
    long done, failed;
    double *lat;                /* latencies of the first MAX_SAMPLES */
};

static void *worker(void *arg)
{
    struct load *l = arg;
    while (l->budget < 0 ? now_s() < l->until
                         : __atomic_sub_fetch(&l->budget, 1, __ATOMIC_RELAXED) >= 0) {
        double t = one(l->body, l->want);
        if (t < 0) {
            __atomic_add_fetch(&l->failed, 1, __ATOMIC_RELAXED);
            continue;
        }
        long k = __atomic_fetch_add(&l->done, 1, __ATOMIC_RELAXED);
        if (l->lat && k < MAX_SAMPLES)
            l->lat[k] = t;
    }
    return NULL;
}

/* Requests per second of BODY at concurrency C for SECONDS; with P50 and
 * P99, the latencies too. */
static double rate_lat(const char *body, int want, int c, double seconds, long *failed,
                       double *p50, double *p99)
{
    struct load l = { body, want, now_s() + seconds, -1, 0, 0, NULL };
    pthread_t th[16];
    double t0 = now_s();
    if (p50)
        l.lat = calloc(MAX_SAMPLES, sizeof *l.lat);
    for (int i = 0; i < c; i++)
        pthread_create(&th[i], NULL, worker, &l);
    for (int i = 0; i < c; i++)
        pthread_join(th[i], NULL);
    *failed = l.failed;
    double r = (double)l.done / (now_s() - t0);
    if (p50 && l.lat && l.done) {
        size_t k = l.done < MAX_SAMPLES ? (size_t)l.done : MAX_SAMPLES;
        *p50 = pct(l.lat, k, 0.5);
        *p99 = pct(l.lat, k, 0.99);
    }
    free(l.lat);
    return r;
}

static double rate(const char *body, int want, int c, double seconds, long *failed)
{
    return rate_lat(body, want, c, seconds, failed, NULL, NULL);
}

/* SBX_BENCH_STABILITY: N print(1) at concurrency 4, the RSS as it goes. */
static void stability(pid_t pid, long n)
{
    long step, failed = 0;
    double t0 = now_s();

    printf("  memory stability: %ld print(1) requests at concurrency 4\n", n);
    printf("    %8d requests: server RSS %ld kB\n", 0, rss_kb(pid));
    /* A line per 1,000 for the first 10,000 (a slow machine shows a trend
     * before it reaches the end), then ten lines. */
    for (long sent = 0; sent < n; sent += step) {
        step = sent < 10000 && n > 10000 ? 1000 : n / 10 > 0 ? n / 10 : 1;
        if (step > n - sent)
            step = n - sent;
        struct load l = { "{\"code\":\"print(1)\"}", 200, 0, step, 0, 0, NULL };
        pthread_t th[4];
        for (int i = 0; i < 4; i++)
            pthread_create(&th[i], NULL, worker, &l);
        for (int i = 0; i < 4; i++)
            pthread_join(th[i], NULL);
        failed += l.failed;
        printf("    %8ld requests: server RSS %ld kB (%.0f s, %ld failed)\n", sent + step,
               rss_kb(pid), now_s() - t0, failed);
        fflush(stdout);
    }
}

static pid_t start_server(const char *bin, const char *dir, const char *profile,
                          const char *sock)
{
    pid_t pid = fork();
    if (pid == 0) {
        char log[600];
        snprintf(log, sizeof log, "%s/serve.log", dir);
        if (!freopen(log, "w", stderr))
            _exit(127);
        char listen[600];
        snprintf(listen, sizeof listen, "unix:%s", sock);
        const char *fs = getenv("SBX_BENCH_FORK_SERVER");
        execl(bin, "sbx-serve", "--listen", listen, "--profile", profile,
              "--max-concurrent", "4", "--pool", "4", "--fork-server",
              fs && strcmp(fs, "off") == 0 ? "off" : "on", (char *)NULL);
        _exit(127);
    }
    snprintf(url, sizeof url, "unix:%s", sock);
    for (int i = 0; i < 600; i++) {
        char err[256], *resp = NULL;
        int st = 0;
        if (serve_client_request(url, "GET", "/healthz", NULL, 2000, &st, &resp, err,
                                 sizeof err) == 0 && st == 200) {
            free(resp);
            usleep(500000);     /* the pool fills */
            return pid;
        }
        free(resp);
        if (waitpid(pid, NULL, WNOHANG) == pid)
            break;
        usleep(100000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

static void stop_server(pid_t pid)
{
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
}

/* The sbx-auditd that sbx-serve started in DIR/run outlives it (it serves
 * every agent of that runtime directory): stopped before DIR goes, or it
 * would wait forever on a socket nobody can reach. */
static void stop_daemon(const char *dir)
{
    char path[PATH_MAX], buf[32];
    FILE *f;
    long pid = 0;

    snprintf(path, sizeof path, "%s/run/sbx-auditd.pid", dir);
    if ((f = fopen(path, "re")) == NULL)
        return;
    if (fgets(buf, sizeof buf, f) != NULL) {
        buf[strcspn(buf, "\n")] = '\0';
        pid = strtonum(buf, 2, INT_MAX, NULL);
    }
    fclose(f);
    if (pid <= 0 || kill((pid_t)pid, SIGTERM) < 0)
        return;
    for (int i = 0; i < 100 && kill((pid_t)pid, 0) == 0; i++)
        usleep(50000);
}

static double python_floor(int n)
{
    double v[64];
    if (n > 64)
        n = 64;
    for (int i = 0; i < n; i++) {
        double t = now_s();
        /* The sandboxes' interpreter, not whatever python3 PATH finds. */
        int rc = system("/usr/bin/python3 -I -c 'print(1)' >/dev/null");
        v[i] = rc == 0 ? now_s() - t : 1e9;
    }
    return pct(v, (size_t)n, 0.5);
}

int main(void)
{
    char self[4096], bin[4200], runner[4200], dir[] = "/tmp/sbx-bench-serve.XXXXXX";
    char sock[300], env[600];
    const char *nenv = getenv("SBX_BENCH_N");
    int n = nenv ? atoi(nenv) : 200;
    long failed = 0;

    if (n < 10)
        n = 10;
    if (sbx_path_self_dir(self, sizeof self) < 0)
        return 1;
    snprintf(bin, sizeof bin, "%s/../bin/sbx-serve", self);
    snprintf(runner, sizeof runner, "%s/../../tools/serve-runner.py", self);
    if (!getenv("SBX_SERVE_RUNNER") && access(runner, R_OK) < 0) {
        printf("bench_serve: skipped: no runner (tools/serve-runner.py is not in this tree; "
               "SBX_SERVE_RUNNER names one)\n");
        return 0;
    }
    if (!mkdtemp(dir))
        return 1;
    snprintf(env, sizeof env, "%s/run", dir);
    setenv("SBX_RUNTIME_DIR", env, 1);
    snprintf(env, sizeof env, "%s/state/audit.db", dir);
    setenv("SBX_AUDIT_DB", env, 1);
    snprintf(sock, sizeof sock, "%s/s.sock", dir);
    const char *profile = getenv("SBX_BENCH_PROFILE") ? getenv("SBX_BENCH_PROFILE") : "minimal";

    printf("bench_serve: sbx-serve over a unix socket, a connection per request\n");
    printf("  python3 -I -c 'print(1)' (bare, the floor)   p50 %7.2f ms\n",
           python_floor(21) * 1000);
    pid_t pid = start_server(bin, dir, profile, sock);
    if (pid < 0) {
        printf("bench_serve: failed: sbx-serve did not start (see %s/serve.log)\n", dir);
        return 1;
    }
    long rss0 = rss_kb(pid);
    if (getenv("SBX_BENCH_STABILITY")) {
        long sn = strtol(getenv("SBX_BENCH_STABILITY"), NULL, 10);
        stability(pid, sn > 0 ? sn : 100000);
        stop_server(pid);
        return 0;
    }
    double *v = calloc((size_t)n, sizeof *v);
    int ok = 0;
    for (int i = 0; i < n; i++) {
        double t = one("{\"code\":\"print(1)\"}", 200);
        if (t >= 0)
            v[ok++] = t;
    }
    if (ok)
        printf("  print(1), concurrency 1 (%d requests)        p50 %7.2f ms  p99 %7.2f ms\n",
               ok, pct(v, (size_t)ok, 0.5) * 1000, pct(v, (size_t)ok, 0.99) * 1000);
    double p50 = 0, p99 = 0;
    double r4 = rate_lat("{\"code\":\"print(1)\"}", 200, 4, 10, &failed, &p50, &p99);
    printf("  print(1), concurrency 4 (10 s)               %7.1f executions/s%s\n", r4,
           failed ? " (with failures)" : "");
    printf("  print(1), concurrency 4                      p50 %7.2f ms  p99 %7.2f ms\n",
           p50 * 1000, p99 * 1000);
    for (int i = 0; i < n; i++)
        v[i] = one("{\"code\":\"eval(\\\"1\\\")\"}", 400);
    printf("  eval(\"1\") rejected, concurrency 1           p50 %7.3f ms\n",
           pct(v, (size_t)n, 0.5) * 1000);
    double rr = rate("{\"code\":\"eval(\\\"1\\\")\"}", 400, 4, 5, &failed);
    printf("  eval(\"1\") rejected, concurrency 4 (5 s)      %7.0f requests/s%s\n", rr,
           failed ? " (with failures)" : "");
    long rss1 = rss_kb(pid);
    printf("  server RSS                                   %ld kB before, %ld kB after the "
           "requests\n", rss0, rss1);
    stop_server(pid);

    if (system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0) {
        printf("  data-science import numpy: skipped: numpy is not installed "
               "(python3-numpy)\n");
    } else {
        pid = start_server(bin, dir, "data-science", sock);
        if (pid < 0) {
            printf("  data-science import numpy: skipped: the data-science profile did not "
                   "start\n");
        } else {
            int k = 0;
            for (int i = 0; i < 30; i++) {
                double t = one("{\"code\":\"import numpy\\nprint(numpy.zeros(3).sum())\"}", 200);
                if (t >= 0)
                    v[k++] = t;
            }
            if (k)
                printf("  data-science import numpy, concurrency 1     p50 %7.2f ms\n",
                       pct(v, (size_t)k, 0.5) * 1000);
            stop_server(pid);
        }
    }
    free(v);
    stop_daemon(dir);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    (void)!system(cmd);
    return 0;
}
