/*
 * container.c — ISO_PODMAN / ISO_DOCKER: the agent in a container of the
 * image the user names, the policy compiled into the engine's flags.
 *
 * Before anything starts, the engine must answer `ENGINE info`: where it
 * cannot (docker without its daemon, podman without a working runtime),
 * iso_spawn fails with the engine's own last line, so sbx-guard exits 125
 * having started nothing.  Then `ENGINE run --rm` with:
 *   - the mount plan of mounts.c: --read-only, a tmpfs /tmp, the write
 *     roots bound writable, deny-read files covered by /dev/null and
 *     deny-read directories by a mode-000 tmpfs, write-deny files bound
 *     read-only; the guard (preload), the policy copy, its image and
 *     events.sock bound in at their own paths (processes in a container run
 *     on the host kernel, so the guard registers its rings as natively);
 *   - --network=none when the policy needs no outside network, else host;
 *   - --cap-drop=ALL, no-new-privileges, --user of the caller, the rlimits
 *     as --ulimit, processes as --pids-limit, memory as --memory;
 *   - the environment by name (-e NAME; the values travel in the engine's
 *     environment, not on its command line).
 * The kill switch: `ENGINE kill` of the container (its processes are the
 * engine's children, not sbx-guard's), then the sweep.  sbx's seccomp
 * list goes in as the engine's profile (--security-opt seccomp=FILE,
 * iso_seccomp_oci), without the supervisor's notifications.  Not carried:
 * Landlock, the supervisor.
 */
#include "iso_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bsd/string.h>

#include "path.h"
#include "paths.h"

#define DEFAULT_IMAGE "debian:bookworm-slim"

const char *iso_engine_path(enum iso_mode mode)
{
    static char found[64];
    const char *name = mode == ISO_PODMAN ? "podman" : "docker";
    static const char *const dirs[] = { "/usr/bin", "/usr/local/bin", "/bin" };
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        snprintf(found, sizeof found, "%s/%s", dirs[i], name);
        if (access(found, X_OK) == 0)
            return found;
    }
    return NULL;
}

static void bind_file(struct iso_argv *a, const char *path, bool rw)
{
    struct stat st;
    if (path && path[0] == '/' && stat(path, &st) == 0)
        iso_argv_addf(a, "--volume=%s:%s%s", path, path, rw ? "" : ":ro");
}

char **iso_container_argv(const struct iso_request *req, const struct iso_mounts *mp,
                          const char *name, bool net_none, const char *seccomp_file,
                          char *err, size_t errsz)
{
    const struct policy_info *pi = policy_info(req->policy);
    const char *engine = iso_engine_path(req->mode);
    struct iso_rlimit rl[ISO_RLIMIT_MAX];
    size_t nrl = iso_rlimits(req->policy, rl);
    struct iso_argv a = { 0 };
    char cwd[4096], events[4200];

    /* Not installed: named as such (--print-isolation shows it all the
     * same; iso_spawn_container refused before getting here). */
    iso_argv_addf(&a, "%s", engine ? engine : iso_mode_name(req->mode));
    iso_argv_addf(&a, "run");
    iso_argv_addf(&a, "--rm");
    iso_argv_addf(&a, "--interactive");
    iso_argv_addf(&a, "--name=%s", name);
    iso_argv_addf(&a, "--cap-drop=ALL");
    iso_argv_addf(&a, "--security-opt=no-new-privileges");
    if (seccomp_file)
        iso_argv_addf(&a, "--security-opt=seccomp=%s", seccomp_file);
    iso_argv_addf(&a, "--network=%s", net_none ? "none" : "host");
    iso_argv_addf(&a, "--user=%u:%u", (unsigned)geteuid(), (unsigned)getegid());
    if (mp->all_ro)
        iso_argv_addf(&a, "--read-only");
    iso_argv_addf(&a, "--tmpfs=/tmp:rw,mode=1777");
    if (pi->limits.processes)
        iso_argv_addf(&a, "--pids-limit=%llu", (unsigned long long)pi->limits.processes);
    if (pi->limits.memory_bytes)
        iso_argv_addf(&a, "--memory=%llu", (unsigned long long)pi->limits.memory_bytes);
    for (size_t i = 0; i < nrl; i++) {
        static const struct { int res; const char *name; } names[] = {
            { RLIMIT_CPU, "cpu" }, { RLIMIT_NOFILE, "nofile" }, { RLIMIT_FSIZE, "fsize" },
            { RLIMIT_CORE, "core" },
        };
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
            if (names[k].res == rl[i].resource)
                iso_argv_addf(&a, "--ulimit=%s=%llu:%llu", names[k].name,
                     (unsigned long long)rl[i].value, (unsigned long long)rl[i].value);
    }
    /* The write roots (under the private /tmp only the workspace's). */
    bool ws_rw = false;
    for (size_t i = 0; i < mp->n; i++)
        if (iso_mounts_rw_from_host(mp, &mp->m[i])) {
            iso_argv_addf(&a, "--volume=%s:%s", mp->m[i].path, mp->m[i].path);
            ws_rw = ws_rw || (req->workspace && policy_path_under(req->workspace, mp->m[i].path));
        }
    /* The image has no copy of the workspace: read-only where the policy
     * does not make it writable (it was missing, and the engine made an
     * empty working directory in its place). */
    if (req->workspace && !ws_rw)
        iso_argv_addf(&a, "--volume=%s:%s:ro", req->workspace, req->workspace);
    bind_file(&a, req->preload, false);
    bind_file(&a, req->policy_copy, false);
    bind_file(&a, req->policy_image, false);
    snprintf(events, sizeof events, "%s/%s", req->runtime_dir ? req->runtime_dir : "",
             SBX_EVENTS_SOCK);
    bind_file(&a, events, true);
    for (size_t i = 0; i < mp->n; i++) {
        switch (mp->m[i].kind) {
        case ISO_MNT_MASK_FILE:
            iso_argv_addf(&a, "--volume=/dev/null:%s:ro", mp->m[i].path);
            break;
        case ISO_MNT_MASK_DIR:
            iso_argv_addf(&a, "--tmpfs=%s:ro,mode=000", mp->m[i].path);
            break;
        case ISO_MNT_RO:
            iso_argv_addf(&a, "--volume=%s:%s:ro", mp->m[i].path, mp->m[i].path);
            break;
        default:
            break;
        }
    }
    if (getcwd(cwd, sizeof cwd))
        iso_argv_addf(&a, "--workdir=%s", cwd);
    /* By name: the engine takes each value from its own environment. */
    for (size_t i = 0; req->envp && req->envp[i]; i++) {
        const char *eq = strchr(req->envp[i], '=');
        if (eq)
            iso_argv_addf(&a, "--env=%.*s", (int)(eq - req->envp[i]), req->envp[i]);
    }
    iso_argv_addf(&a, "%s", req->image && req->image[0] ? req->image : DEFAULT_IMAGE);
    for (size_t i = 0; req->argv && req->argv[i]; i++)
        iso_argv_addf(&a, "%s", req->argv[i]);
    if (a.oom) {
        iso_argv_free(a.v);
        iso_errf(err, errsz, "%s: out of memory", iso_mode_name(req->mode));
        return NULL;
    }
    return a.v;
}

/* Runs ENGINE ARG... with stdout and stdin on /dev/null; 0 when it exits
 * 0, else -1 with the last line it wrote on stderr in WHY. */
static int engine_run(const char *engine, const char *const args[], char *why, size_t whysz)
{
    int pfd[2];
    char buf[4096];
    size_t len = 0;
    int status = 0;

    why[0] = '\0';
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        snprintf(why, whysz, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, whysz, "fork: %s", strerror(errno));
        close(pfd[0]);
        close(pfd[1]);
        return -1;
    }
    if (pid == 0) {
        int nul = open("/dev/null", O_RDWR);
        char *argv[8];
        size_t n = 0;
        argv[n++] = (char *)engine;
        for (size_t i = 0; args[i] && n < 7; i++)
            argv[n++] = (char *)args[i];
        argv[n] = NULL;
        if (nul < 0 || dup2(nul, 0) < 0 || dup2(nul, 1) < 0 || dup2(pfd[1], 2) < 0)
            _exit(126);
        execv(engine, argv);
        _exit(127);
    }
    close(pfd[1]);
    for (;;) {
        ssize_t r = read(pfd[0], buf + len, sizeof buf - 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
        if (len == sizeof buf - 1) {        /* keep the end: the reason */
            memmove(buf, buf + len / 2, len - len / 2);
            len -= len / 2;
        }
    }
    close(pfd[0]);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    buf[len] = '\0';
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
        buf[--len] = '\0';
    const char *last = strrchr(buf, '\n');
    last = last ? last + 1 : buf;
    strlcpy(why, last[0] ? last : "it failed without a message", whysz);
    return -1;
}

void iso_child_kill(struct iso_child *child)
{
    char why[256];
    if (child->container[0] == '\0' || child->engine[0] == '\0')
        return;
    const char *args[] = { "kill", "--signal=KILL", child->container, NULL };
    (void)engine_run(child->engine, args, why, sizeof why);
}

int iso_spawn_container(const struct iso_request *req, struct iso_child *child,
                        char *err, size_t errsz)
{
    const char *mname = iso_mode_name(req->mode);
    const char *engine = iso_engine_path(req->mode);
    struct iso_mounts *mp = calloc(1, sizeof *mp);
    bool net_none = iso_net_loopback_only(req->policy);
    bool tty = iso_tty_foreground();
    char **argv = NULL, *profile = NULL, why[512], name[64];
    unsigned short rnd = 0;
    int rc = -1, sfd = -1;

    if (mp == NULL) {
        iso_errf(err, errsz, "%s: out of memory", mname);
        return -1;
    }
    if (engine == NULL) {
        iso_errf(err, errsz, "%s: %s is not installed", mname, mname);
        goto out;
    }
    /* The engine must answer before anything starts; its own words say
     * why not. */
    const char *info[] = { "info", NULL };
    if (engine_run(engine, info, why, sizeof why) < 0) {
        iso_errf(err, errsz, "%s: the engine cannot run containers here: %s", mname, why);
        goto out;
    }
    if (iso_mounts_plan(req, mp, err, errsz) < 0)
        goto out;
    if (mp->incomplete) {
        iso_errf(err, errsz, "%s: the deny-read cover is incomplete: %s; not starting", mname,
                 mp->incomplete_why);
        goto out;
    }
    if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd)
        rnd = (unsigned short)getpid();
    snprintf(name, sizeof name, "sbx-%d-%04x", (int)getpid(), rnd);
    /* sbx's seccomp list as the engine's profile (iso_seccomp_oci): a
     * file of the runtime directory, removed by iso_child_cleanup. */
    if ((size_t)snprintf(child->bundle, sizeof child->bundle, "%s/seccomp.XXXXXX.json",
                         req->runtime_dir ? req->runtime_dir : "/tmp") >= sizeof child->bundle
        || (sfd = mkstemps(child->bundle, 5)) < 0 || (profile = iso_seccomp_oci(false)) == NULL
        || write(sfd, profile, strlen(profile)) != (ssize_t)strlen(profile)) {
        iso_errf(err, errsz, "%s: seccomp profile %s: %s", mname, child->bundle,
                 strerror(errno ? errno : ENOMEM));
        if (sfd < 0)
            child->bundle[0] = '\0';
        goto out;
    }
    argv = iso_container_argv(req, mp, name, net_none, child->bundle, err, errsz);
    if (argv == NULL)
        goto out;
    pid_t pid = fork();
    if (pid < 0) {
        iso_errf(err, errsz, "fork: %s", strerror(errno));
        goto out;
    }
    if (pid == 0) {
        const char *what = "";
        if (setpgid(0, 0) < 0 || (tty && iso_take_terminal() < 0)
            || iso_child_basics(NULL, 0, -1, &what) < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
            _exit(125);
        /* The engine gets the agent's environment, minus the loader
         * variables (it must not run under the guard): the container's
         * --env=NAME takes each value from here. */
        for (size_t i = 0; req->envp[i]; i++)
            if (strncmp(req->envp[i], "LD_PRELOAD=", 11) != 0)
                putenv(req->envp[i]);
        unsetenv("LD_PRELOAD");
        /* argv[0] is the engine's path, the first flag added: a NULL argv
         * never gets here (the analyzer reaches NULL only through a count
         * that wraps around SIZE_MAX). */
        execv(argv[0], argv); /* NOLINT(clang-analyzer-core.NonNullParamChecker) */
        _exit(125);
    }
    (void)setpgid(pid, pid);
    child->pid = pid;
    child->notify_fd = -1;
    child->pidns = false;
    child->status_fd = -1;
    strlcpy(child->container, name, sizeof child->container);
    strlcpy(child->engine, engine, sizeof child->engine);
    snprintf(child->layers, sizeof child->layers, "%s%s,pidns,mntns,ipcns,utsns%s,caps-dropped,"
             "seccomp,rlimits", child->guard ? "guard," : "", mname,
             net_none ? ",netns" : "");
    rc = 0;
out:
    if (rc < 0)
        iso_child_cleanup(child);
    if (sfd >= 0)
        close(sfd);
    free(profile);
    iso_argv_free(argv);
    iso_mounts_free(mp);
    free(mp);
    return rc;
}
