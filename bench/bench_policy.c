/*
 * bench_policy — what one policy decision costs.
 *
 * Decides a fixed mix of paths against (a) a policy of about 100 path
 * rules of the kinds people write (trees, "**" suffix globs, literals,
 * home-relative secrets) and (b) the shipped default policy, and reports
 * the median over several runs of the mean ns per decision.  Also the cost
 * of an exec decision with command rules (PCRE2, JIT where available).
 * Run by `make bench` (bench/run.sh); prints one line per figure.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "policy.h"

#define RUNS 7

/* The shipped default policy's text (compiled into the engine). */
extern const char sbx_default_policy_yaml[];
static const char *sbx_default_yaml(void)
{
    return sbx_default_policy_yaml;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Appends a YAML list of N globs built from FMT (with %d) to BUF. */
static void add_list(char *buf, size_t sz, const char *key, const char *const *fixed,
                     const char *fmt, int n)
{
    size_t l = strlen(buf);
    l += (size_t)snprintf(buf + l, sz - l, "    %s:\n", key);
    for (size_t i = 0; fixed[i] != NULL; i++)
        l += (size_t)snprintf(buf + l, sz - l, "      - '%s'\n", fixed[i]);
    for (int i = 0; i < n; i++) {
        l += (size_t)snprintf(buf + l, sz - l, "      - '");
        l += (size_t)snprintf(buf + l, sz - l, fmt, i);
        l += (size_t)snprintf(buf + l, sz - l, "'\n");
    }
}

static char *hundred_rules(void)
{
    static const char *const read_allow[] = {
        "**", "/usr/**", "/lib/**", "/etc/**", "/opt/**", "/tmp/**", "/var/tmp/**",
        "/dev/null", "/dev/urandom", "/proc/self/**", "/proc/cpuinfo", "~/.gitconfig",
        "~/.config/git/**", "/sys/devices/system/cpu/**", NULL };
    static const char *const read_deny[] = {
        "**/.env", "**/.env.*", "**/.ssh/**", "**/*.pem", "**/*.key", "**/id_rsa*",
        "~/.aws/**", "~/.config/gcloud/**", "~/.azure/**", "~/.kube/config",
        "~/.docker/config.json", "~/.netrc", "~/.git-credentials", "/etc/shadow",
        "/etc/gshadow", "/etc/sudoers*", "**/secrets/**", "**/*.p12", "**/credentials*", NULL };
    static const char *const none[] = { NULL };
    size_t sz = 1 << 16;
    char *y = calloc(1, sz);
    if (y == NULL)
        return NULL;
    strcpy(y, "version: 1\nfiles:\n  read:\n");
    add_list(y, sz, "allow", read_allow, "/srv/data%d/**", 16);          /* 30 */
    add_list(y, sz, "deny", read_deny, "**/private-%d/**", 21);          /* 40 */
    strcat(y, "  write:\n");
    add_list(y, sz, "allow", none, "build%d/**", 10);                    /* 10 */
    add_list(y, sz, "deny", none, "**/*.lock%d", 10);                    /* 10 */
    strcat(y, "  exec:\n");
    add_list(y, sz, "allow", none, "/usr/lib/tool%d/**", 5);             /* 5 */
    add_list(y, sz, "deny", none, "/**/forbidden%d", 5);                 /* 5 */
    return y;
}

/* Paths that exercise both outcomes: most allowed by a late rule, some
 * denied by a deny glob, one allowed by nothing. */
static int make_paths(const char *ws, const char *home, char paths[][PATH_MAX], int max)
{
    const char *rel[] = { "src/module/parser.c", "include/sbx/policy.h", "build/obj/x.o",
                          ".env", "deploy/certs/server.pem", "docs/readme.md" };
    int n = 0;
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]) && n < max; i++)
        snprintf(paths[n++], PATH_MAX, "%.2000s/%s", ws, rel[i]);
    snprintf(paths[n++], PATH_MAX, "/usr/lib/x86_64-linux-gnu/libc.so.6");
    snprintf(paths[n++], PATH_MAX, "/etc/ssl/certs/ca-certificates.crt");
    snprintf(paths[n++], PATH_MAX, "%.2000s/.aws/credentials", home);
    snprintf(paths[n++], PATH_MAX, "/var/log/syslog");
    return n;
}

static double bench_paths(const struct policy *p, char paths[][PATH_MAX], int n, long iters)
{
    double runs[RUNS];
    struct policy_verdict v;
    volatile int sink = 0;
    for (int r = 0; r < RUNS; r++) {
        double t0 = now_ns();
        for (long i = 0; i < iters; i++)
            sink += policy_decide_path(p, SBX_OP_OPEN_READ, paths[i % n], &v);
        runs[r] = (now_ns() - t0) / (double)iters;
    }
    (void)sink;
    qsort(runs, RUNS, sizeof(runs[0]), cmp_double);
    return runs[RUNS / 2];
}

static double bench_exec(const struct policy *p, long iters)
{
    char *argv[] = { "bash", "-c", "make -j2 && ./run-tests --verbose", NULL };
    double runs[RUNS];
    struct policy_verdict v;
    volatile int sink = 0;
    for (int r = 0; r < RUNS; r++) {
        double t0 = now_ns();
        for (long i = 0; i < iters; i++)
            sink += policy_decide_exec(p, "/usr/bin/bash", argv, &v);
        runs[r] = (now_ns() - t0) / (double)iters;
    }
    (void)sink;
    qsort(runs, RUNS, sizeof(runs[0]), cmp_double);
    return runs[RUNS / 2];
}

static size_t count_rules(const struct policy *p)
{
    size_t n = 0;
    const struct policy_rule *r;
    for (int l = POLICY_READ_ALLOW; l <= POLICY_EXEC_DENY; l++)
        n += policy_rules(p, (enum policy_list)l, &r);
    return n;
}

int main(void)
{
    char ws[PATH_MAX], paths[16][PATH_MAX];
    struct policy_diag d;
    long iters = 200000;

    if (getcwd(ws, sizeof(ws)) == NULL)
        return 1;
    struct policy_options opt = { .workspace = ws, .home = "/home/bench" };
    char *y = hundred_rules();
    struct policy *big = y ? policy_load_buffer("bench.yaml", y, strlen(y), &opt, &d) : NULL;
    struct policy *def = policy_load_buffer("default.yaml", "version: 1\n", 11, &opt, &d);
    free(y);
    if (big == NULL || def == NULL) {
        fprintf(stderr, "bench_policy: %s\n", d.count ? d.msg[0] : "cannot load");
        return 1;
    }
    int n = make_paths(policy_info(big)->workspace, "/home/bench", paths, 16);

    printf("policy: decide path (%zu rules): %.0f ns/decision (median of %d)\n",
           count_rules(big), bench_paths(big, paths, n, iters), RUNS);
    printf("policy: decide path (default policy, %zu rules): %.0f ns/decision (median of %d)\n",
           count_rules(def), bench_paths(def, paths, n, iters), RUNS);
    const struct policy_rule *r;
    size_t ncmd = policy_rules(def, POLICY_CMD_DENY, &r);
    /* the first command decisions of a process are interpreted (the JIT
     * compiles after a few dozen): time them on a fresh policy */
    struct policy *fresh = policy_load_buffer("default.yaml", "version: 1\n", 11, &opt, &d);
    char *argv[] = { "bash", "-c", "make -j2 && ./run-tests --verbose", NULL };
    struct policy_verdict v;
    double t0 = now_ns();
    for (int i = 0; i < 16; i++)
        policy_decide_exec(fresh, "/usr/bin/bash", argv, &v);
    double first = (now_ns() - t0) / 16;
    policy_free(fresh);
    printf("policy: decide exec with %zu command rules (bash -c script), first decisions "
           "(interpreted): %.0f ns/decision\n", ncmd, first);
    printf("policy: decide exec with %zu command rules (bash -c script), JIT: %.0f ns/decision "
           "(median of %d)\n", ncmd, bench_exec(def, iters / 10), RUNS);
    double load_best = 1e18;
    for (int k = 0; k < RUNS; k++) {
        double l0 = now_ns();
        struct policy *lp = policy_load_buffer("default.yaml", sbx_default_yaml(), strlen(sbx_default_yaml()),
                                               &opt, &d);
        double l1 = now_ns();
        policy_free(lp);
        if (l1 - l0 < load_best)
            load_best = l1 - l0;
    }
    printf("policy: load the default policy: %.0f us (best of %d)\n", load_best / 1000, RUNS);
    policy_free(big);
    policy_free(def);
    return 0;
}
