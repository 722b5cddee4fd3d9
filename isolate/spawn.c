/*
 * spawn.c — iso_spawn(): the one place where the agent is started.
 *
 * ISO_NONE: fork; the child gets its own process group (the terminal's
 * foreground when sbx-guard had it), the policy's rlimits, a clean signal
 * state, checks that the guard can load (guardcheck.c), and execs.  A
 * close-on-exec pipe carries an
 * exec failure back, so iso_spawn() fails ("cannot run X: ...") and the
 * agent never ran; end of file on the pipe means the exec happened.
 * ISO_NATIVE / ISO_AUTO: see native.c.  ISO_BWRAP: see bwrap.c.  ISO_GVISOR:
 * see gvisor.c.
 */
#include "iso_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bsd/string.h>

/* What a child reports when it cannot finish: errno and the step. */
struct iso_status {
    int err;
    char what[200];
};

static void child_fail(int fd, const char *what, int e)
{
    struct iso_status st;

    memset(&st, 0, sizeof st);
    st.err = e;
    strlcpy(st.what, what, sizeof st.what);
    /* One write below PIPE_BUF: atomic; nothing else to do if it fails. */
    if (write(fd, &st, sizeof st) < 0)
        _exit(127);
    _exit(127);
}

static int spawn_plain(const struct iso_request *req, struct iso_child *child,
                       char *err, size_t errsz)
{
    struct iso_rlimit rl[ISO_RLIMIT_MAX];
    size_t nrl = iso_rlimits(req->policy, rl);
    struct iso_status st;
    bool tty = iso_tty_foreground();
    int pfd[2];
    pid_t pid;
    ssize_t n;

    if (pipe2(pfd, O_CLOEXEC) < 0) {
        iso_errf(err, errsz, "pipe: %s", strerror(errno));
        return -1;
    }
    pid = fork();
    if (pid < 0) {
        iso_errf(err, errsz, "fork: %s", strerror(errno));
        close(pfd[0]);
        close(pfd[1]);
        return -1;
    }
    if (pid == 0) {
        const char *what = "";
        close(pfd[0]);
        /* Own process group, so sbx-guard can signal the whole agent. */
        if (setpgid(0, 0) < 0)
            child_fail(pfd[1], "setpgid", errno);
        if (tty && iso_take_terminal() < 0)
            child_fail(pfd[1], "take the terminal", errno);
        if (iso_child_basics(rl, nrl, pfd[1], &what) < 0)
            child_fail(pfd[1], what, errno);
        {
            int *const keep[] = { &pfd[1] };
            if (iso_child_fds(req, keep, 1) < 0)
                child_fail(pfd[1], "descriptors", errno);
        }
        /* The guard must load where the agent runs (see guardcheck.c). */
        if (req->preload && iso_guard_loadable(req->preload, &what) < 0)
            child_fail(pfd[1], what, errno);
        if (iso_child_late_rlimits(rl, nrl, &what) < 0)
            child_fail(pfd[1], what, errno);
        execve(req->argv[0], req->argv, req->envp);
        child_fail(pfd[1], "exec", errno);
    }
    close(pfd[1]);
    (void)setpgid(pid, pid);   /* both sides, so no race with the exec */
    do
        n = read(pfd[0], &st, sizeof st);
    while (n < 0 && errno == EINTR);
    close(pfd[0]);
    if (n == 0) {
        child->pid = pid;
        child->notify_fd = -1;
        child->pidns = false;
        strlcpy(child->layers, child->guard ? "guard" : "none", sizeof child->layers);
        return 0;
    }
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    if (n != (ssize_t)sizeof st) {
        iso_errf(err, errsz, "cannot run %s: the child failed to report", req->argv[0]);
        return -1;
    }
    st.what[sizeof st.what - 1] = '\0';
    if (strcmp(st.what, "exec") == 0)
        iso_errf(err, errsz, "cannot run %s: %s", req->argv[0], strerror(st.err));
    else
        iso_errf(err, errsz, "cannot run %s: %s: %s", req->argv[0], st.what,
                 strerror(st.err));
    return -1;
}

int iso_spawn(const struct iso_request *req, struct iso_child *child,
              char *err, size_t errsz)
{
    if (err && errsz)
        err[0] = '\0';
    memset(child, 0, sizeof *child);
    child->pid = -1;
    child->notify_fd = -1;
    child->status_fd = -1;
    if (req == NULL || req->policy == NULL || req->argv == NULL || req->argv[0] == NULL
        || req->envp == NULL) {
        iso_errf(err, errsz, "isolation: incomplete request");
        errno = EINVAL;
        return -1;
    }
    /* Decided before the start, from the program itself: a static program
     * never runs ld.so, so the preload is not in the agent's first process
     * and the layers must not say it is. */
    child->guard = req->preload != NULL && iso_program_loads_guard(req->argv[0]) == 1;
    switch (req->mode) {
    case ISO_NONE:
        return spawn_plain(req, child, err, errsz);
    case ISO_AUTO:
    case ISO_NATIVE:
        return iso_spawn_native(req, child, err, errsz);
    case ISO_BWRAP:
        if (req->child_fds) {
            iso_errf(err, errsz, "isolation bwrap: cannot hand the agent descriptors");
            errno = EINVAL;
            return -1;
        }
        return iso_spawn_bwrap(req, child, err, errsz);
    case ISO_GVISOR:
        /* runsc hands the sandbox 0, 1 and 2 of its own, nothing else:
         * sbx-serve's channels go in as FIFOs (req->binds). */
        if (req->child_fds) {
            iso_errf(err, errsz, "isolation gvisor: cannot hand the agent descriptors");
            errno = EINVAL;
            return -1;
        }
        return iso_spawn_gvisor(req, child, err, errsz);
    case ISO_PODMAN:
    case ISO_DOCKER:
        return iso_spawn_container(req, child, err, errsz);
    }
    iso_errf(err, errsz, "isolation: unknown mode %d", (int)req->mode);
    errno = EINVAL;
    return -1;
}
