/*
 * sbx-serve — the code-execution service for agent frameworks
 * (../shared/SERVE.md; docs/serve.md).
 *
 *   sbx-serve [--listen ADDR] [--profile NAME|FILE] [--token-file FILE]
 *             [--max-concurrent N] [--queue N] [--pool N]
 *             [--isolation auto|native|gvisor]
 *   sbx-serve --verify URL
 *   sbx-serve --help | --version
 *
 * The start is one sequence, and any failure in it is fatal (exit 1,
 * nothing listens):
 *   1. arguments; the runner (serve-runner.py) and the profile are found;
 *   2. the profile is loaded as an sbx policy and its serve: section read;
 *   3. the private copy of the policy the preload reads, and its image;
 *   4. SIGTERM and SIGINT blocked (taken by sigwait below), SIGPIPE ignored;
 *   5. the spawner forked, while this process is still single-threaded;
 *   6. the validators and the first sandbox started (a runner or a profile
 *      that cannot start shows here), the pool's thread started;
 *   7. the HTTP server on the listening socket (taken before 5).
 * Then it waits for SIGTERM or SIGINT: new executions get 503, those
 * running finish (up to 60 s), the sandboxes are discarded, it exits 0.
 */
#include <err.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bsd/stdlib.h>
#include <bsd/string.h>

#include "isolate.h"
#include "paths.h"
#include "policy.h"
#include "policy_copy.h"
#include "serve_client.h"
#include "serve_http.h"
#include "serve_pool.h"
#include "serve_profile.h"
#include "serve_spawn.h"
#include "serve_sup.h"
#include "version.h"

static const char synopsis[] =
"usage: sbx-serve [--listen ADDR] [--profile NAME|FILE] [--token-file FILE]\n"
"                 [--max-concurrent N] [--queue N] [--pool N] [--fork-server on|off]\n"
"                 [--isolation auto|native|gvisor]\n"
"       sbx-serve --verify URL\n"
"       sbx-serve --help | --version\n";

static void __attribute__((noreturn)) usage(void)
{
    fputs(synopsis, stderr);
    exit(2);
}

static void help(void)
{
    fputs(synopsis, stdout);
    fputs("\n"
"Answers the code-execution API of agent frameworks (POST /execute, GET\n"
"/healthz, GET /profile, GET /metrics) and runs each request's Python in a\n"
"fresh sbx sandbox: own namespaces, Landlock, seccomp, rlimits, the guard,\n"
"a row in the audit store; sbx-kill ends a running request.\n"
"\n"
"  --listen ADDR        HOST:PORT or unix:/PATH (default 127.0.0.1:8000)\n"
"  --profile NAME|FILE  the profile (default $SANDBOX_PROFILE, else minimal)\n"
"  --token-file FILE    require \"Authorization: Bearer TOKEN\" (not on /healthz)\n"
"  --max-concurrent N   executions at once (default 4)\n"
"  --queue N            executions waiting beyond that, then 503 (default 16)\n"
"  --fork-server on|off every request a fork of one warm sandboxed python\n"
"                       (on, the default), or a fresh sandbox from a pool\n"
"                       (off; always with --isolation gvisor)\n"
"  --pool N             with --fork-server off: warm sandboxes kept ready\n"
"                       (default: max-concurrent)\n"
"  --isolation MODE     auto (default) or native, as sbx-guard's; gvisor: each\n"
"                       request in gVisor's user-space kernel (runsc)\n"
"  --verify URL         run SERVE.md's six checks against a service; exit 1\n"
"                       if one fails\n", stdout);
}

static size_t number(const char *opt, const char *s, long long lo, long long hi)
{
    const char *e = NULL;
    long long v = strtonum(s, lo, hi, &e);
    if (e)
        errx(2, "%s %s: %s (%lld to %lld)", opt, s, e, lo, hi);
    return (size_t)v;
}

/* Beside the running program: FIRST (installed layout) or SECOND (the
 * source tree, from build/bin).  0 with OUT, or -1. */
static int beside_self(const char *first, const char *second, char *out, size_t outsz)
{
    char dir[PATH_MAX], p[PATH_MAX * 2];
    const char *rel[] = { first, second };

    if (sbx_path_self_dir(dir, sizeof dir) < 0)
        return -1;
    for (size_t i = 0; i < 2; i++) {
        if (rel[i] == NULL)
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, rel[i]);
        if (realpath(p, out) && strlen(out) < outsz && access(out, R_OK) == 0)
            return 0;
    }
    return -1;
}

/* The runner: SBX_SERVE_RUNNER (tests, development), else beside us. */
static void find_runner(char *out, size_t outsz)
{
    const char *env = getenv("SBX_SERVE_RUNNER");
    if (env && env[0]) {
        if (!realpath(env, out) || access(out, R_OK) < 0)
            err(1, "SBX_SERVE_RUNNER=%s", env);
        return;
    }
    if (beside_self("../share/sbx/serve-runner.py", "../../tools/serve-runner.py", out, outsz) < 0)
        errx(1, "cannot find serve-runner.py (../share/sbx/ beside sbx-serve, or tools/ of "
             "the source tree; SBX_SERVE_RUNNER names another)");
}

/* NAME|FILE: a name is looked up in policies/serve/ of the source tree
 * (from build/bin), else in share/sbx/policies/serve beside us, else in
 * PREFIX's. */
static void find_profile(const char *arg, char *out, size_t outsz)
{
    char a[PATH_MAX], b[PATH_MAX], c[PATH_MAX];

    if (strchr(arg, '/') || strstr(arg, ".yaml") || strstr(arg, ".yml")) {
        if (!realpath(arg, out))
            err(1, "--profile %s", arg);
        return;
    }
    snprintf(a, sizeof a, "../../policies/serve/%s.yaml", arg);
    snprintf(b, sizeof b, "../share/sbx/policies/serve/%s.yaml", arg);
    if (beside_self(a, b, out, outsz) == 0)
        return;
    snprintf(c, sizeof c, "%s/share/sbx/policies/serve/%s.yaml", SBX_PREFIX, arg);
    if (realpath(c, out) && access(out, R_OK) == 0)
        return;
    errx(1, "--profile %s: no such profile (policies/serve/%s.yaml)", arg, arg);
}

static int listen_on(const char *addr)
{
    int fd;

    if (strncmp(addr, "unix:", 5) == 0) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlcpy(sa.sun_path, addr + 5, sizeof sa.sun_path) >= sizeof sa.sun_path)
            errx(1, "--listen %s: path too long", addr);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            err(1, "socket");
        struct stat st;
        if (lstat(sa.sun_path, &st) == 0 && S_ISSOCK(st.st_mode))
            unlink(sa.sun_path);    /* a stale socket of an earlier run */
        if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
            err(1, "--listen %s", addr);
    } else {
        char host[256];
        const char *colon = strrchr(addr, ':');
        struct sockaddr_storage ss;
        socklen_t len;
        int one = 1;
        if (colon == NULL || colon == addr)
            errx(1, "--listen %s: HOST:PORT or unix:/PATH", addr);
        size_t port = number("--listen", colon + 1, 1, 65535);
        snprintf(host, sizeof host, "%.*s", (int)(colon - addr), addr);
        if (host[0] == '[' && host[strlen(host) - 1] == ']') {
            memmove(host, host + 1, strlen(host));
            host[strlen(host) - 1] = '\0';
        }
        memset(&ss, 0, sizeof ss);
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        if (strcmp(host, "localhost") == 0)
            strlcpy(host, "127.0.0.1", sizeof host);
        if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
            s4->sin_family = AF_INET;
            s4->sin_port = htons((uint16_t)port);
            len = sizeof *s4;
        } else if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
            s6->sin6_family = AF_INET6;
            s6->sin6_port = htons((uint16_t)port);
            len = sizeof *s6;
        } else {
            errx(1, "--listen %s: not an IP address", addr);
        }
        fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            err(1, "socket");
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, (struct sockaddr *)&ss, len) < 0)
            err(1, "--listen %s", addr);
    }
    if (listen(fd, 128) < 0)
        err(1, "listen");
    return fd;
}

static char *read_token(const char *path)
{
    FILE *f = fopen(path, "r");
    char buf[1024];

    if (f == NULL)
        err(1, "--token-file %s", path);
    if (fgets(buf, sizeof buf, f) == NULL)
        errx(1, "--token-file %s: empty", path);
    fclose(f);
    buf[strcspn(buf, "\r\n")] = '\0';
    if (strlen(buf) < 8)
        errx(1, "--token-file %s: a token of at least 8 characters", path);
    return strdup(buf);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "listen", required_argument, NULL, 'l' },
        { "profile", required_argument, NULL, 'p' },
        { "token-file", required_argument, NULL, 't' },
        { "max-concurrent", required_argument, NULL, 'c' },
        { "queue", required_argument, NULL, 'q' },
        { "pool", required_argument, NULL, 'P' },
        { "fork-server", required_argument, NULL, 'F' },
        { "isolation", required_argument, NULL, 'i' },
        { "verify", required_argument, NULL, 'v' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    const char *listen_addr = "127.0.0.1:8000", *profile_arg = NULL, *token_file = NULL;
    const char *verify = NULL;
    size_t max_conc = 4, queue = 16, pool = 0;
    bool fork_server = true;
    enum iso_mode mode = ISO_AUTO;
    int c;

    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'l': listen_addr = optarg; break;
        case 'p': profile_arg = optarg; break;
        case 't': token_file = optarg; break;
        case 'c': max_conc = number("--max-concurrent", optarg, 1, 64); break;
        case 'q': queue = number("--queue", optarg, 0, 10000); break;
        case 'P': pool = number("--pool", optarg, 1, 64); break;
        case 'F':
            if (strcmp(optarg, "on") != 0 && strcmp(optarg, "off") != 0)
                errx(2, "--fork-server %s: on or off", optarg);
            fork_server = strcmp(optarg, "on") == 0;
            break;
        case 'i': {
            int m = iso_mode_parse(optarg);
            if (m != ISO_AUTO && m != ISO_NATIVE && m != ISO_GVISOR)
                errx(2, "--isolation %s: auto, native or gvisor (each request needs its own "
                     "pid namespace)", optarg);
            mode = (enum iso_mode)m;
            break;
        }
        case 'v': verify = optarg; break;
        case 'h': help(); return 0;
        case 'V': printf("sbx-serve %s\n", SBX_VERSION); return 0;
        default: usage();
        }
    }
    if (optind != argc || listen_addr == NULL)
        usage();
    if (verify)
        return serve_verify(verify, stdout) == 0 ? 0 : 1;
    if (pool == 0)
        pool = max_conc;
    /* gVisor runs each request in a sandbox of its own; the zygote's
     * walls (Landlock, seccomp from inside) are the native kernel's. */
    if (mode == ISO_GVISOR)
        fork_server = false;
    if (profile_arg == NULL) {
        const char *env = getenv("SANDBOX_PROFILE");
        profile_arg = env && env[0] ? env : "minimal";
    }

    /* 1. The runner and the profile; the runner's directory is the
     * sandboxes' (read-only) workspace and working directory. */
    char runner[PATH_MAX], profile_path[PATH_MAX], workspace[PATH_MAX];
    find_runner(runner, sizeof runner);
    find_profile(profile_arg, profile_path, sizeof profile_path);
    strlcpy(workspace, runner, sizeof workspace);
    char *slash = strrchr(workspace, '/');     /* realpath's: absolute */
    if (slash)
        *slash = '\0';
    if (workspace[0] == '\0')
        strlcpy(workspace, "/", sizeof workspace);

    char rt[PATH_MAX], db[PATH_MAX], why[1024];
    if (sbx_path_runtime_dir(rt, sizeof rt) < 0 || sbx_path_audit_db(db, sizeof db) < 0)
        err(1, "cannot find sbx's runtime directory or store");
    if (sbx_path_private_dir(SBX_DIR_RUNTIME, true, NULL, 0, why, sizeof why) < 0 ||
        sbx_path_private_dir(SBX_DIR_STORE, true, NULL, 0, why, sizeof why) < 0)
        errx(1, "%s", why);

    /* 2. The profile is an sbx policy. */
    struct policy_agent agent = { .workspace = workspace, .display_path = profile_path,
                                  .home = "/tmp", .runtime_dir = rt, .audit_db = db };
    static struct policy_agent_options popt;
    policy_agent_options(&agent, &popt);
    struct policy_diag diag = { 0 };
    struct policy *pol = policy_load(profile_path, &popt.opt, &diag);
    if (pol == NULL) {
        for (unsigned i = 0; i < diag.count && i < POLICY_DIAG_MAX; i++)
            fprintf(stderr, "%s\n", diag.msg[i]);
        errx(1, "%s: cannot load the profile", profile_path);
    }
    struct serve_profile prof;
    if (serve_profile_load(pol, &prof, why, sizeof why) < 0)
        errx(1, "%s", why);

    /* 3. The preload's private copy of the policy and its image. */
    char preload[PATH_MAX], copy[PATH_MAX + 64], image[PATH_MAX + 80];
    if (beside_self("../lib/libsbx-preload.so", "../lib/sbx/libsbx-preload.so",
                    preload, sizeof preload) < 0)
        errx(1, "cannot find libsbx-preload.so next to sbx-serve (../lib or ../lib/sbx)");
    snprintf(copy, sizeof copy, "%s/agents", rt);
    if (sbx_mkdir_p(copy, 0700) < 0)
        err(1, "%s", copy);
    snprintf(copy, sizeof copy, "%s/agents/serve-%ld.yaml", rt, (long)getpid());
    unlink(copy);       /* a copy left by a killed service of the same pid */
    if (policy_copy_write(pol, profile_path, copy, why, sizeof why) < 0)
        errx(1, "%s", why);
    snprintf(image, sizeof image, "%s%s", copy, SBX_POLICY_IMAGE_SUFFIX);
    bool have_image = policy_set_display_path(pol, profile_path) == 0
                      && policy_image_save(pol, image, why, sizeof why) == 0;

    char *token = token_file ? read_token(token_file) : NULL;

    /* 4. Signals: taken synchronously; every thread inherits the mask. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    if (sigprocmask(SIG_BLOCK, &stop, NULL) < 0)
        err(1, "sigprocmask");
    signal(SIGPIPE, SIG_IGN);

    /* The address is taken before any sandbox starts: a bad one or one in
     * use stops us with nothing to clean up.  The spawner closes its copy. */
    int lfd = listen_on(listen_addr);

    /* 5. The spawner, before any thread. */
    struct serve_spawn_cfg scfg = {
        .policy = pol, .mode = mode, .python = "/usr/bin/python3", .runner = runner,
        .workspace = workspace, .preload = preload, .policy_copy = copy,
        .policy_image = have_image ? image : NULL, .policy_origin = profile_path,
        .runtime_dir = rt, .audit_db = db, .config_line = prof.runner_config, .audit = true,
    };
    int spawner;
    pid_t spawner_pid;
    if (serve_spawner_start(&scfg, &spawner, &spawner_pid, why, sizeof why) < 0)
        errx(1, "%s", why);

    /* 6. The supervisor's thread, the validators and the first sandbox,
     * then the pool's thread. */
    char *const none_argv[] = { NULL };
    struct iso_request sup = {
        .policy = pol, .mode = mode, .workspace = workspace, .runtime_dir = rt,
        .audit_db = db, .preload = preload, .policy_copy = copy,
        .policy_image = have_image ? image : NULL, .argv = none_argv, .envp = none_argv,
    };
    if (serve_sup_start(&sup) < 0)
        err(1, "cannot start the supervisor's thread");
    if (!fork_server && mode != ISO_GVISOR && geteuid() == 0)
        warnx("running as root with --fork-server off: host root is exempt from "
              "RLIMIT_NPROC, so the profile's process limit does not bind a request's "
              "processes (the fork server puts each in a pids cgroup)");
    int started = fork_server
        ? serve_pool_start_zygote(spawner, &scfg, max_conc, max_conc > 1 ? 2 : 1, why, sizeof why)
        : serve_pool_start(spawner, pool, max_conc > 1 ? 2 : 1, why, sizeof why);
    if (started < 0) {
        kill(spawner_pid, SIGKILL);
        errx(1, "%s", why);
    }

    /* 7. Serve. */
    struct serve_http_cfg hcfg = {
        .profile = &prof, .sup = &sup, .token = token,
        .max_concurrent = max_conc, .queue = queue,
    };
    if (serve_http_start(lfd, &hcfg, why, sizeof why) < 0)
        errx(1, "%s", why);
    if (fork_server)
        fprintf(stderr, "sbx-serve: listening on %s; profile %s (%s); %zu concurrent, queue %zu, "
                "%zu fork servers\n", listen_addr, prof.name, profile_path, max_conc, queue,
                max_conc);
    else
        fprintf(stderr, "sbx-serve: listening on %s; profile %s (%s); %zu concurrent, queue %zu, "
                "%zu warm sandboxes\n", listen_addr, prof.name, profile_path, max_conc, queue, pool);

    int sig = 0;
    while (sigwait(&stop, &sig) != 0)
        ;
    fprintf(stderr, "sbx-serve: %s: finishing the executions in flight\n", strsignal(sig));
    long left = serve_http_drain(60000);
    if (left)
        warnx("%ld executions still running after 60 s; stopping anyway", left);
    serve_http_stop();
    serve_pool_stop();
    close(spawner);
    kill(spawner_pid, SIGTERM);
    waitpid(spawner_pid, NULL, 0);
    close(lfd);
    if (strncmp(listen_addr, "unix:", 5) == 0)
        unlink(listen_addr + 5);
    unlink(copy);
    if (have_image)
        unlink(image);
    serve_profile_free(&prof);
    policy_free(pol);
    free(token);
    fprintf(stderr, "sbx-serve: stopped\n");
    return 0;
}
