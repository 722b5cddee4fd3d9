/*
 * base.c — what every part of sbx-auditd uses: the clock, the log, epoll
 * registration and accept (see daemon.h).  Calls nothing else of the
 * daemon's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"

uint64_t daemon_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
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
}

void daemon_log(const char *fmt, ...)
{
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

int daemon_accept(struct daemon *d, int listen_fd, const char *what)
{
    for (;;) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0)
            return fd;
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if ((errno == EMFILE || errno == ENFILE) && d->reserve_fd >= 0) {
            /* Free the spare, take the connection and drop it, re-arm. */
            daemon_log("%s: out of file descriptors; dropping a connection", what);
            close(d->reserve_fd);
            fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0)
                close(fd);
            d->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
            continue;
        }
        if (errno != EAGAIN)
            daemon_log("%s: accept: %s", what, strerror(errno));
        return -1;
    }
}
