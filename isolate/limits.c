/* limits.c — rlimits from the policy, and the clean process state every
 * mode gives the agent before exec (see iso_int.h). */
#include "iso_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

void iso_errf(char *err, size_t errsz, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL || errsz == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, errsz, fmt, ap);
    va_end(ap);
}

size_t iso_rlimits(const struct policy *p, struct iso_rlimit out[ISO_RLIMIT_MAX])
{
    const struct policy_info *pi = policy_info(p);
    size_t n = 0;

    if (pi == NULL)
        return 0;
    /* RLIMIT_CPU counts whole seconds: round up so "cpu: 1500ms" is not 1 s. */
    if (pi->limits.cpu_ms)
        out[n++] = (struct iso_rlimit){ RLIMIT_CPU, "RLIMIT_CPU",
                                        (pi->limits.cpu_ms + 999) / 1000 };
    if (pi->limits.memory_bytes)
        out[n++] = (struct iso_rlimit){ RLIMIT_AS, "RLIMIT_AS", pi->limits.memory_bytes };
    if (pi->limits.processes)
        out[n++] = (struct iso_rlimit){ RLIMIT_NPROC, "RLIMIT_NPROC", pi->limits.processes };
    if (pi->limits.open_files)
        out[n++] = (struct iso_rlimit){ RLIMIT_NOFILE, "RLIMIT_NOFILE", pi->limits.open_files };
    if (pi->max_write_bytes)
        out[n++] = (struct iso_rlimit){ RLIMIT_FSIZE, "RLIMIT_FSIZE", pi->max_write_bytes };
    /* No core files: a crashing agent must not write its memory (which may
     * hold secrets it read) outside the places the policy lets it write. */
    out[n++] = (struct iso_rlimit){ RLIMIT_CORE, "RLIMIT_CORE", 0 };
    return n;
}

bool iso_tty_foreground(void)
{
    return isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
}

int iso_take_terminal(void)
{
    struct sigaction ign, old;
    int r;

    /* The new group is in the background until this call succeeds, and
     * tcsetpgrp from the background stops the caller with SIGTTOU unless
     * it is ignored. */
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    if (sigaction(SIGTTOU, &ign, &old) < 0)
        return -1;
    r = tcsetpgrp(STDIN_FILENO, getpgrp());
    (void)sigaction(SIGTTOU, &old, NULL);
    return r;
}

int iso_child_fds(const struct iso_request *req, int *const keep[], size_t nkeep)
{
    /* Everything goes above the target range first: a source may be one of
     * the targets (the caller's fd 3 becoming the agent's fd 1), and our
     * own channels may sit where a target goes. */
    enum { HIGH = 64 };
    int tmp[ISO_CHILD_FDS_MAX];
    unsigned n = req->n_child_fds;

    if (req->child_fds == NULL)
        return 0;
    if (n > ISO_CHILD_FDS_MAX) {
        errno = EINVAL;
        return -1;
    }
    for (size_t k = 0; k < nkeep; k++)
        if (*keep[k] >= 0 && *keep[k] < (int)n
            && (*keep[k] = fcntl(*keep[k], F_DUPFD_CLOEXEC, HIGH)) < 0)
            return -1;
    for (unsigned i = 0; i < n; i++)
        if ((tmp[i] = fcntl(req->child_fds[i], F_DUPFD_CLOEXEC, HIGH)) < 0)
            return -1;
    for (unsigned i = 0; i < n; i++) {
        if (dup2(tmp[i], (int)i) < 0)   /* the copy is not close-on-exec */
            return -1;
        close(tmp[i]);
    }
    return 0;
}

/* Applies the rlimits of RL whose resource is (LATE) or is not (!LATE)
 * RLIMIT_AS. */
static int apply_rlimits(const struct iso_rlimit *rl, size_t n, bool late,
                         const char **what)
{
    for (size_t i = 0; i < n; i++) {
        struct rlimit r = { (rlim_t)rl[i].value, (rlim_t)rl[i].value };
        if ((rl[i].resource == RLIMIT_AS) != late)
            continue;
        if (setrlimit(rl[i].resource, &r) < 0) {
            *what = rl[i].name;
            return -1;
        }
    }
    return 0;
}

int iso_child_late_rlimits(const struct iso_rlimit *rl, size_t n, const char **what)
{
    return apply_rlimits(rl, n, true, what);
}

/* Signals the caller of sbx-guard ignored (iso_keep_inherited_ignores). */
static sigset_t inherited_ignored;

void iso_keep_inherited_ignores(void)
{
    sigemptyset(&inherited_ignored);
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction cur;
        if (sig == SIGKILL || sig == SIGSTOP)
            continue;
        if (sigaction(sig, NULL, &cur) == 0 && cur.sa_handler == SIG_IGN)
            sigaddset(&inherited_ignored, sig);
    }
}

int iso_child_basics(const struct iso_rlimit *rl, size_t n, int keep_fd,
                     const char **what)
{
    sigset_t all;
    struct sigaction sa;

    /* Soft = hard: the agent may lower a limit but never raise it again.
     * RLIMIT_AS waits for iso_child_late_rlimits(). */
    if (apply_rlimits(rl, n, false, what) < 0)
        return -1;

    /* sbx-guard's handlers and mask must not leak into the agent; what its
     * own caller ignored (nohup's SIGHUP) is ignored in the agent too, as
     * it would be without sbx.  SIGXFSZ is ignored so max_write_bytes
     * gives EFBIG rather than a killed agent. */
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    for (int sig = 1; sig < NSIG; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP)
            continue;
        sa.sa_handler = sig == SIGXFSZ || sigismember(&inherited_ignored, sig) == 1
                        ? SIG_IGN : SIG_DFL;
        (void)sigaction(sig, &sa, NULL);   /* EINVAL for glibc-internal signals */
    }
    sigemptyset(&all);
    if (sigprocmask(SIG_SETMASK, &all, NULL) < 0) {
        *what = "sigprocmask";
        return -1;
    }

    /* No descriptor of sbx-guard (the store, its sockets, its logs) may
     * survive into the agent: mark everything from 3 up close-on-exec.
     * KEEP_FD is our own status channel, already close-on-exec. */
    (void)keep_fd;
    if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) < 0) {
        *what = "close_range";
        return -1;
    }
    return 0;
}
