/*
 * base.c — what every part of sbx-auditd uses: the clock, the log, epoll
 * registration and accept (see daemon.h).  Calls nothing else of the
 * daemon's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <bsd/stdlib.h>
#include <bsd/string.h>

#include "daemon.h"

uint64_t daemon_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* While starting: the pipe to whoever started us (sbx_ctl_open), which
 * sees our lines there too, so that a start that fails is reported at once
 * with its reason rather than after a timeout with "see the log". */
static int startup_fd = -1;

void daemon_startup_begin(void)
{
    const char *v = getenv("SBX_AUDITD_READY_FD"), *e = NULL;
    if (!v)
        return;
    int fd = (int)strtonum(v, 3, 65535, &e);
    unsetenv("SBX_AUDITD_READY_FD");
    if (!e && fcntl(fd, F_SETFD, FD_CLOEXEC) == 0)
        startup_fd = fd;
}

void daemon_startup_done(void)
{
    if (startup_fd < 0)
        return;
    (void)!write(startup_fd, "ready\n", 6);
    close(startup_fd);
    startup_fd = -1;
}

/* The log file, when the daemon has its own (daemon_log_open). */
static char log_path[4096];
static uint64_t log_max;

int daemon_log_open(const char *path, uint64_t max)
{
    if (strlcpy(log_path, path, sizeof log_path) >= sizeof log_path) {
        log_path[0] = '\0';
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0 || (fd != STDERR_FILENO && dup2(fd, STDERR_FILENO) < 0)) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        log_path[0] = '\0';
        errno = e;
        return -1;
    }
    if (fd != STDERR_FILENO)
        close(fd);
    log_max = max;
    return 0;
}

/* Past log_max: the log becomes PATH.1 (the one before is dropped) and a
 * new PATH is begun.  One rotation, no compression: the log is for a
 * person looking at what the daemon did lately, and at most 2 * log_max. */
static void log_rotate(void)
{
    struct stat sb;
    if (!log_path[0] || fstat(STDERR_FILENO, &sb) < 0 || (uint64_t)sb.st_size < log_max)
        return;
    char old[sizeof log_path + 2];
    snprintf(old, sizeof old, "%s.1", log_path);
    if (rename(log_path, old) < 0)
        return;
    int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
        dup2(fd, STDERR_FILENO);
        close(fd);
    }
}

static void vlog(const char *fmt, va_list ap)
{
    char msg[1024], when[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    vsnprintf(msg, sizeof msg, fmt, ap);
    fprintf(stderr, "%s sbx-auditd[%d]: %s\n", when, (int)getpid(), msg);
    if (startup_fd >= 0) {
        size_t n = strnlen(msg, sizeof msg - 1);
        msg[n] = '\n';
        (void)!write(startup_fd, msg, n + 1);
    }
    log_rotate();
}

/* Every line, whatever its kind: at most GLOBAL_BURST in GLOBAL_WINDOW_MS,
 * the rest counted.  The kinds an agent can cause have their own, smaller
 * limits (daemon_log_limited); this one is the bound on the whole log. */
#define GLOBAL_WINDOW_MS 10000
#define GLOBAL_BURST     200

static bool global_allows(void)
{
    static uint64_t window_ms, lines, dropped;
    uint64_t now = daemon_now_ms();
    if (window_ms == 0 || now - window_ms >= GLOBAL_WINDOW_MS) {
        uint64_t was = dropped;
        window_ms = now;
        lines = 0;
        dropped = 0;
        if (was) {
            fprintf(stderr, "sbx-auditd[%d]: (%llu log lines were not written: more than %d "
                    "in %d s)\n", (int)getpid(), (unsigned long long)was, GLOBAL_BURST,
                    GLOBAL_WINDOW_MS / 1000);
        }
    }
    if (lines >= GLOBAL_BURST) {
        dropped++;
        return false;
    }
    lines++;
    return true;
}

void daemon_log(const char *fmt, ...)
{
    if (!global_allows())
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog(fmt, ap);
    va_end(ap);
}

/* A window of LOG_WINDOW_MS lets LOG_BURST lines of one kind through; the
 * rest are counted and the count is said with the next line let through.
 * 20 lines a second is more than anyone reads and little enough that a
 * hostile agent (a ring of garbage, a storm of refused connections) cannot
 * fill the disk through our log. */
#define LOG_WINDOW_MS 1000
#define LOG_BURST     20

void daemon_log_limited(struct log_limit *l, const char *fmt, ...)
{
    uint64_t now = daemon_now_ms();
    if (now - l->window_ms >= LOG_WINDOW_MS || l->window_ms == 0) {
        if (l->dropped)
            daemon_log("(%llu more lines like the next were not logged)",
                       (unsigned long long)l->dropped);
        l->window_ms = now;
        l->lines = 0;
        l->dropped = 0;
    }
    if (l->lines >= LOG_BURST) {
        l->dropped++;
        return;
    }
    l->lines++;
    if (!global_allows())
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog(fmt, ap);
    va_end(ap);
}

int daemon_epoll_add(struct daemon *d, int fd, struct ep *ep, uint32_t events)
{
    struct epoll_event e = { .events = events, .data.ptr = ep };
    if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &e) < 0) {
        daemon_log("epoll_ctl: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* Descriptors held in reserve: a ring's registration needs two more than
 * its connection (the memfd in flight, the pidfd), and a recvmsg that
 * cannot install the memfd drops it (MSG_CTRUNC) and with it the ring.
 * With the reserve whole, a connection accepted can always register. */
bool daemon_reserve_take(struct daemon *d)
{
    while (d->nreserve < DAEMON_RESERVE_FDS) {
        int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return false;
        d->reserve[d->nreserve++] = fd;
    }
    return true;
}

void daemon_reserve_release(struct daemon *d)
{
    while (d->nreserve > 0)
        close(d->reserve[--d->nreserve]);
}

/* How long the listeners rest when descriptors run out: what frees them
 * is agents' processes exiting, which the loop learns of meanwhile. */
#define ACCEPT_BACKOFF_MS 50

static void listeners_arm(struct daemon *d, uint32_t events)
{
    struct epoll_event e = { .events = events, .data.ptr = &d->ep_ev };
    if (d->ev_listen >= 0)
        epoll_ctl(d->epfd, EPOLL_CTL_MOD, d->ev_listen, &e);
    e.data.ptr = &d->ep_ctl;
    if (d->ctl_listen >= 0)
        epoll_ctl(d->epfd, EPOLL_CTL_MOD, d->ctl_listen, &e);
}

/* Out of descriptors: the listeners rest (new connections wait in the
 * backlog, their connect(2) blocks once it is full), the connections we
 * have are served, and every ACCEPT_BACKOFF_MS daemon_accept_resume looks
 * again.  Accepting and dropping instead would lose the events of every
 * process turned away, and spinning on a listener that stays readable is
 * the livelock this replaces. */
static void accept_pause(struct daemon *d, const char *what)
{
    if (!d->accept_paused) {
        daemon_log_limited(&d->fd_log, "%s: out of file descriptors; new connections wait "
                           "until some close", what);
        listeners_arm(d, 0);
        d->accept_paused = true;
    }
    d->accept_resume_ms = daemon_now_ms() + ACCEPT_BACKOFF_MS;
}

int daemon_accept_resume(struct daemon *d)
{
    if (!d->accept_paused)
        return -1;
    uint64_t now = daemon_now_ms();
    if (now < d->accept_resume_ms)
        return (int)(d->accept_resume_ms - now);
    if (!daemon_reserve_take(d)) {
        d->accept_resume_ms = now + ACCEPT_BACKOFF_MS;
        return ACCEPT_BACKOFF_MS;
    }
    d->accept_paused = false;
    listeners_arm(d, EPOLLIN);
    daemon_log_limited(&d->fd_log, "file descriptors available again: accepting connections");
    return -1;
}

int daemon_accept(struct daemon *d, int listen_fd, const char *what, int *spare)
{
    int fd = -1, sp = -1;
    if (!daemon_reserve_take(d) ||
        (spare && (sp = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)) {
        accept_pause(d, what);
        return -1;
    }
    for (;;) {
        fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0)
            break;
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
            accept_pause(d, what);
        else if (errno != EAGAIN)
            daemon_log_limited(&d->fd_log, "%s: accept: %s", what, strerror(errno));
        break;
    }
    if (fd < 0 && sp >= 0)
        close(sp);
    else if (spare)
        *spare = sp;
    return fd;
}
