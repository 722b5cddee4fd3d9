/*
 * bwrap.c — ISO_BWRAP: the same policy as a bubblewrap command line.
 *
 * For machines where an administrator trusts bubblewrap more than sbx's own
 * set-up (or runs it set-uid where user namespaces are off).  The mounts are
 * the native plan (mounts.c) written as bwrap options, in the same order;
 * the seccomp filter is the native one without the user-notification rules
 * (bwrap installs a filter without a listener, and a notify rule without a
 * listener would fail every exec with ENOSYS).  What bwrap cannot carry:
 * Landlock (bwrap mounts after we would restrict, and Landlock forbids
 * mounting) and the supervisor.  child->layers says so.
 * --new-session is not used: it would take the terminal from interactive
 * agents; TIOCSTI, what it guards against, is refused by the filter.
 */
#include "iso_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bsd/stdlib.h>
#include <bsd/string.h>

#include "path.h"
#include "paths.h"

const char *iso_bwrap_path(void)
{
    static const char *const where[] = { "/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap" };
    for (size_t i = 0; i < sizeof where / sizeof where[0]; i++)
        if (access(where[i], X_OK) == 0)
            return where[i];
    return NULL;
}

/* ---- the reporter: the agent's wait status out of bwrap ------------------ */

#define REPORT_FLAG "--sbx-bwrap-report"
/* The preload travels to the reporter under this name: the reporter is
 * sbx-guard, which must not run guarded; it sets LD_PRELOAD for the agent. */
#define REPORT_PRELOAD "SBX_BWRAP_REPORT_PRELOAD"

static bool report_offered;     /* this program called iso_bwrap_report_main */

static void report_nothing(int sig)
{
    (void)sig;
}

/* argv: PROG --sbx-bwrap-report STATUS_FD EXE_FD -- AGENT ARGS...
 * Runs as bwrap's child, inside the sandbox: forks the agent, waits for it,
 * sends 'W' and its wait status on STATUS_FD and ends the way bwrap's init
 * then reports anyway (the code, or 128+N).  Signals sbx-guard relays reach
 * the agent through the process group; here they only interrupt the wait
 * (a disposition ignored at start stays ignored, for the agent too). */
static void __attribute__((noreturn)) report_run(char **argv)
{
    static const int relayed[] = { SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2,
                                   SIGPIPE, SIGALRM };
    const char *e1 = NULL, *e2 = NULL;
    int sfd = (int)strtonum(argv[2], 0, 1 << 20, &e1);
    int xfd = (int)strtonum(argv[3], 0, 1 << 20, &e2);
    char **agent = argv + 5;
    const char *pre = getenv(REPORT_PRELOAD);
    int status;
    pid_t pid;

    if (e1 || e2 || strcmp(argv[4], "--") != 0 || agent[0] == NULL) {
        fprintf(stderr, "sbx-guard: " REPORT_FLAG ": bad arguments\n");
        _exit(125);
    }
    (void)close(xfd);
    (void)fcntl(sfd, F_SETFD, FD_CLOEXEC);
    if (pre) {
        if (setenv("LD_PRELOAD", pre, 1) < 0)
            _exit(125);
        (void)unsetenv(REPORT_PRELOAD);
    }
    for (size_t i = 0; i < sizeof relayed / sizeof relayed[0]; i++) {
        struct sigaction old, sa = { .sa_handler = report_nothing };
        if (sigaction(relayed[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL)
            (void)sigaction(relayed[i], &sa, NULL);
    }
    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "bwrap: fork: %s\n", strerror(errno));
        _exit(1);
    }
    if (pid == 0) {
        /* Caught dispositions become the default again at exec. */
        execvp(agent[0], agent);
        fprintf(stderr, "bwrap: execvp %s: %s\n", agent[0], strerror(errno));
        _exit(1);
    }
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            _exit(125);
    {
        char buf[1 + sizeof status] = { 'W' };
        memcpy(buf + 1, &status, sizeof status);
        (void)!send(sfd, buf, sizeof buf, MSG_NOSIGNAL);
    }
    _exit(WIFEXITED(status) ? WEXITSTATUS(status)
          : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 125);
}

void iso_bwrap_report_main(int argc, char **argv)
{
    if (argc >= 6 && strcmp(argv[1], REPORT_FLAG) == 0)
        report_run(argv);
    report_offered = true;
}

/* bwrap's ARGV with the reporter put before the agent (after the first
 * "--") and the preload renamed for it; ARGV is freed.  NULL when out of
 * memory. */
static char **with_reporter(char **argv, int status_fd, int exe_fd)
{
    struct iso_argv a = { 0 };
    bool agent = false;
    for (size_t i = 0; argv[i]; i++) {
        if (!agent && strcmp(argv[i], "--setenv") == 0 && argv[i + 1]
            && strcmp(argv[i + 1], "LD_PRELOAD") == 0) {
            iso_argv_add(&a, argv[i]);
            iso_argv_add(&a, REPORT_PRELOAD);
            i++;
            continue;
        }
        iso_argv_add(&a, argv[i]);
        if (!agent && strcmp(argv[i], "--") == 0) {
            agent = true;
            iso_argv_addf(&a, "/proc/self/fd/%d", exe_fd);
            iso_argv_add(&a, REPORT_FLAG);
            iso_argv_addf(&a, "%d", status_fd);
            iso_argv_addf(&a, "%d", exe_fd);
            iso_argv_add(&a, "--");
        }
    }
    iso_argv_free(argv);
    if (a.oom || !agent) {
        iso_argv_free(a.v);
        return NULL;
    }
    return a.v;
}

/* Puts back, after tmpfs covers DIR, the keeps that lived under it. */
static void rebind_keeps(struct iso_argv *a, const struct iso_mounts *mp, const char *dir,
                         const char *events)
{
    for (size_t i = 0; i < mp->n_keep; i++)
        if (policy_path_under(mp->keep[i], dir)) {
            bool writable = events && strcmp(mp->keep[i], events) == 0;
            iso_argv_add(a, writable ? "--bind" : "--ro-bind");
            iso_argv_add(a, mp->keep[i]);
            iso_argv_add(a, mp->keep[i]);
        }
}

char **iso_bwrap_argv(const struct iso_request *req, const struct iso_mounts *mp,
                      bool unshare_net, int seccomp_fd, char *err, size_t errsz)
{
    struct iso_argv a = { 0 };
    const char *bwrap = iso_bwrap_path();
    char events[4096], cwd[4096];

    if (bwrap == NULL) {
        iso_errf(err, errsz, "bwrap: bubblewrap is not installed (apt-get install bubblewrap)");
        return NULL;
    }
    snprintf(events, sizeof events, "%s/%s", req->runtime_dir ? req->runtime_dir : "",
             SBX_EVENTS_SOCK);
    iso_argv_add(&a, bwrap);
    iso_argv_add(&a, "--die-with-parent");
    iso_argv_add(&a, "--unshare-user");
    iso_argv_add(&a, "--unshare-pid");
    iso_argv_add(&a, "--unshare-ipc");
    iso_argv_add(&a, "--unshare-uts");
    iso_argv_add(&a, "--unshare-cgroup-try");
    if (unshare_net)
        iso_argv_add(&a, "--unshare-net");
    iso_argv_add(&a, "--cap-drop");
    iso_argv_add(&a, "ALL");
    /* The host read-only, then what the policy lets it write. */
    iso_argv_add(&a, mp->all_ro ? "--ro-bind" : "--bind");
    iso_argv_add(&a, "/");
    iso_argv_add(&a, "/");
    iso_argv_add(&a, "--dev");
    iso_argv_add(&a, "/dev");
    iso_argv_add(&a, "--proc");
    iso_argv_add(&a, "/proc");
    if (mp->private_tmp) {
        iso_argv_add(&a, "--tmpfs");
        iso_argv_add(&a, "/tmp");
        rebind_keeps(&a, mp, "/tmp", events);
    }
    /* bwrap takes every bind's source from the host's view (the keeps
     * under the private /tmp are bound above). */
    for (size_t i = 0; i < mp->n; i++)
        if (iso_mounts_rw_from_host(mp, &mp->m[i])) {
            iso_argv_add(&a, "--bind");
            iso_argv_add(&a, mp->m[i].path);
            iso_argv_add(&a, mp->m[i].path);
        }
    for (size_t i = 0; i < mp->n_hide; i++) {
        if (mp->private_tmp && policy_path_under(mp->hide[i], "/tmp"))
            continue;           /* gone with the host's /tmp already */
        iso_argv_add(&a, "--perms");
        iso_argv_add(&a, "0755");
        iso_argv_add(&a, "--tmpfs");
        iso_argv_add(&a, mp->hide[i]);
        rebind_keeps(&a, mp, mp->hide[i], events);
        iso_argv_add(&a, "--remount-ro");
        iso_argv_add(&a, mp->hide[i]);
    }
    for (size_t i = 0; i < mp->n; i++) {
        switch (mp->m[i].kind) {
        case ISO_MNT_MASK_FILE:
            iso_argv_add(&a, "--ro-bind");
            iso_argv_add(&a, "/dev/null");
            iso_argv_add(&a, mp->m[i].path);
            break;
        case ISO_MNT_MASK_DIR:
            iso_argv_add(&a, "--perms");
            iso_argv_add(&a, "0000");
            iso_argv_add(&a, "--tmpfs");
            iso_argv_add(&a, mp->m[i].path);
            iso_argv_add(&a, "--remount-ro");
            iso_argv_add(&a, mp->m[i].path);
            break;
        case ISO_MNT_RO:
            iso_argv_add(&a, "--ro-bind");
            iso_argv_add(&a, mp->m[i].path);
            iso_argv_add(&a, mp->m[i].path);
            break;
        default:
            break;
        }
    }
    if (getcwd(cwd, sizeof cwd)) {
        iso_argv_add(&a, "--chdir");
        iso_argv_add(&a, cwd);
    }
    if (seccomp_fd >= 0) {
        iso_argv_add(&a, "--seccomp");
        iso_argv_addf(&a, "%d", seccomp_fd);
    }
    /* bwrap itself must not run under the preload (the guard would judge
     * bwrap's own set-up by the agent's policy): it is exec'd without
     * LD_PRELOAD and sets it for the agent. */
    for (size_t i = 0; req->envp && req->envp[i]; i++)
        if (strncmp(req->envp[i], "LD_PRELOAD=", 11) == 0) {
            iso_argv_add(&a, "--setenv");
            iso_argv_add(&a, "LD_PRELOAD");
            iso_argv_add(&a, req->envp[i] + 11);
        }
    iso_argv_add(&a, "--");
    for (size_t i = 0; req->argv && req->argv[i]; i++)
        iso_argv_add(&a, req->argv[i]);
    if (a.oom) {
        iso_errf(err, errsz, "bwrap: out of memory");
        iso_argv_free(a.v);
        return NULL;
    }
    return a.v;
}

int iso_spawn_bwrap(const struct iso_request *req, struct iso_child *child,
                    char *err, size_t errsz)
{
    struct iso_mounts *mp = calloc(1, sizeof *mp);
    struct iso_bpf bpf = { 0 };
    struct iso_rlimit rl[ISO_RLIMIT_MAX];
    size_t nrl = iso_rlimits(req->policy, rl);
    bool net = iso_net_unix_only(req->policy);
    bool tty = iso_tty_foreground();
    char **argv = NULL, **envp = NULL;
    int sfd = -1, pfd[2] = { -1, -1 }, rc = -1;
    int report[2], sp[2] = { -1, -1 }, xfd = -1;
    pid_t pid;
    ssize_t n;

    if (mp == NULL) {
        iso_errf(err, errsz, "bwrap: out of memory");
        return -1;
    }
    if (iso_mounts_plan(req, mp, err, errsz) < 0
        || iso_seccomp_build(false, &bpf, err, errsz) < 0)
        goto out;
    if (mp->incomplete) {
        iso_errf(err, errsz, "bwrap: the deny-read cover is incomplete: %s; not starting",
                 mp->incomplete_why);
        goto out;
    }
    /* The filter travels to bwrap in a memfd it reads from the start. */
    sfd = memfd_create("sbx-seccomp", 0);
    if (sfd < 0 || write(sfd, bpf.insns, bpf.len * sizeof *bpf.insns)
                       != (ssize_t)(bpf.len * sizeof *bpf.insns)
        || lseek(sfd, 0, SEEK_SET) < 0) {
        iso_errf(err, errsz, "bwrap: seccomp memfd: %s", strerror(errno));
        goto out;
    }
    argv = iso_bwrap_argv(req, mp, net, sfd, err, errsz);
    if (argv == NULL)
        goto out;
    /* The reporter (iso_bwrap_report_main), where this program offers it:
     * this very executable, by descriptor, and a socket for the status. */
    if (report_offered) {
        xfd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
        if (xfd < 0 || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
            iso_errf(err, errsz, "bwrap: the status reporter: %s", strerror(errno));
            goto out;
        }
        if ((argv = with_reporter(argv, sp[1], xfd)) == NULL) {
            iso_errf(err, errsz, "bwrap: out of memory");
            goto out;
        }
    }
    {
        size_t n_env = 0, k = 0;
        while (req->envp && req->envp[n_env])
            n_env++;
        envp = calloc(n_env + 1, sizeof *envp);
        if (envp == NULL) {
            iso_errf(err, errsz, "bwrap: out of memory");
            goto out;
        }
        for (size_t i = 0; i < n_env; i++)
            if (strncmp(req->envp[i], "LD_PRELOAD=", 11) != 0)
                envp[k++] = req->envp[i];
    }
    if (pipe2(report, O_CLOEXEC) < 0) {
        iso_errf(err, errsz, "pipe: %s", strerror(errno));
        goto out;
    }
    pfd[0] = report[0];
    pfd[1] = report[1];
    pid = fork();
    if (pid < 0) {
        iso_errf(err, errsz, "fork: %s", strerror(errno));
        goto out;
    }
    if (pid == 0) {
        const char *what = "";
        int e;
        close(pfd[0]);
        if (setpgid(0, 0) < 0 || (tty && iso_take_terminal() < 0)
            || iso_child_basics(rl, nrl, pfd[1], &what) < 0
            || iso_child_late_rlimits(rl, nrl, &what) < 0) {
            e = errno;
            goto child_fail;
        }
        /* bwrap reads the filter from this fd after exec. */
        if (fcntl(sfd, F_SETFD, 0) < 0) {
            e = errno;
            what = "seccomp fd";
            goto child_fail;
        }
        /* and the reporter its program and its socket */
        if (xfd >= 0 && (fcntl(xfd, F_SETFD, 0) < 0 || fcntl(sp[1], F_SETFD, 0) < 0)) {
            e = errno;
            what = "status reporter fds";
            goto child_fail;
        }
        /* argv[0] is bwrap's path, the first flag added: a NULL argv never gets
         * here.  The analyzer reaches NULL only by letting the count wrap
         * around SIZE_MAX. */
        execve(argv[0], argv, envp); /* NOLINT(clang-analyzer-core.NonNullParamChecker) */
        e = errno;
        what = "exec bwrap";
    child_fail:
        if (write(pfd[1], &e, sizeof e) < 0 || write(pfd[1], what, strlen(what)) < 0)
            _exit(127);
        _exit(127);
    }
    close(pfd[1]);
    pfd[1] = -1;
    (void)setpgid(pid, pid);
    {
        char buf[sizeof(int) + 200];
        do
            n = read(pfd[0], buf, sizeof buf - 1);
        while (n < 0 && errno == EINTR);
        if (n > 0) {
            int e = 0;
            if (n >= (ssize_t)sizeof e)
                memcpy(&e, buf, sizeof e);
            buf[n] = '\0';
            iso_errf(err, errsz, "bwrap: %s: %s", n > (ssize_t)sizeof e ? buf + sizeof e : "?",
                     strerror(e));
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
            goto out;
        }
    }
    child->pid = pid;
    child->notify_fd = -1;
    /* --die-with-parent: bwrap's own init dies with it, and with the pid
     * namespace gone every process of the agent goes too. */
    child->pidns = true;
    child->status_fd = sp[0];
    sp[0] = -1;
    snprintf(child->layers, sizeof child->layers,
             "%sbwrap,userns,pidns,mntns,ipcns,utsns%s,seccomp,rlimits",
             child->guard ? "guard," : "", net ? ",netns" : "");
    rc = 0;
out:
    if (pfd[0] >= 0)
        close(pfd[0]);
    if (pfd[1] >= 0)
        close(pfd[1]);
    if (sfd >= 0)
        close(sfd);
    for (int i = 0; i < 2; i++)
        if (sp[i] >= 0)
            close(sp[i]);
    if (xfd >= 0)
        close(xfd);
    iso_argv_free(argv);
    free(envp);
    iso_bpf_free(&bpf);
    iso_mounts_free(mp);
    free(mp);
    return rc;
}
