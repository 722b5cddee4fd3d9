/*
 * egress.c — the supervisor makes an allowed loopback connection itself.
 *
 * Under native a policy whose network rules are all loopback (or unix:)
 * gives the agent its own net namespace with only its own `lo`: nothing
 * beyond it can be reached, whatever a static program or a racing thread
 * does.  But the service the policy allows (127.0.0.1:8000, localhost:8000,
 * [::1]:8000) listens in the host's namespace.  So for a connect the policy
 * allows to a loopback address, sbx-guard (in the host's namespace) makes
 * the connection to the address it read, once, from the agent's memory, and
 * puts the connected socket in place of the agent's descriptor with
 * SECCOMP_IOCTL_NOTIF_ADDFD (SECCOMP_ADDFD_FLAG_SETFD).  Nothing the agent
 * changes after the read can redirect it (no time-of-check gap), and every
 * connect the supervisor does not make goes to the agent's empty namespace.
 *
 * What is preserved: the socket's domain, type and protocol, O_NONBLOCK and
 * close-on-exec.  What is not: options set and a local address bound before
 * connect (a client rarely has either).  A connection that cannot be made
 * fails the agent's connect with the host's errno (ECONNREFUSED for a port
 * nobody listens on).
 */
#include "iso_int.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/* How long a loopback connect may take (a full accept backlog). */
#define EGRESS_CONNECT_MS 5000

/* O_CLOEXEC of the agent's descriptor FD, from /proc/PID/fdinfo/FD. */
static bool fd_cloexec(pid_t pid, int fd)
{
    char path[64], line[128];
    bool cloexec = false;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%d/fdinfo/%d", (int)pid, fd);
    if ((f = fopen(path, "re")) == NULL)
        return false;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags:", 6) == 0) {
            unsigned long fl = strtoul(line + 6, NULL, 8);
            cloexec = (fl & O_CLOEXEC) != 0;
            break;
        }
    }
    fclose(f);
    return cloexec;
}

/* connect(S, SA, LEN) within EGRESS_CONNECT_MS; 0 or an errno. */
static int connect_bounded(int s, const struct sockaddr *sa, socklen_t len)
{
    struct pollfd pf = { s, POLLOUT, 0 };
    int soerr = 0;
    socklen_t sl = sizeof soerr;

    if (connect(s, sa, len) == 0)
        return 0;
    if (errno != EINPROGRESS)
        return errno;
    if (poll(&pf, 1, EGRESS_CONNECT_MS) != 1)
        return ETIMEDOUT;
    if (getsockopt(s, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
        return errno;
    return soerr;
}

int iso_egress_connect(int notify_fd, uint64_t id, pid_t pid, int agent_fd,
                       const struct sockaddr *sa, unsigned len, int *agent_err)
{
    struct seccomp_notif_addfd add;
    struct sockaddr_storage peer;
    socklen_t pl = sizeof peer;
    int pidfd = -1, copy = -1, s = -1, rc = -1;
    int domain, type, proto, flags;
    socklen_t ol = sizeof domain;

    *agent_err = 0;
    pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0)
        goto out;
    copy = (int)syscall(SYS_pidfd_getfd, pidfd, agent_fd, 0);
    if (copy < 0)
        goto out;
    ol = sizeof domain;
    if (getsockopt(copy, SOL_SOCKET, SO_DOMAIN, &domain, &ol) < 0)
        goto out;
    ol = sizeof type;
    if (getsockopt(copy, SOL_SOCKET, SO_TYPE, &type, &ol) < 0)
        goto out;
    ol = sizeof proto;
    if (getsockopt(copy, SOL_SOCKET, SO_PROTOCOL, &proto, &ol) < 0)
        goto out;
    /* Already connected, or not the address's family: the kernel's own
     * answer (EISCONN, EAFNOSUPPORT) is the right one; leave it to it. */
    if (domain != sa->sa_family || getpeername(copy, (struct sockaddr *)&peer, &pl) == 0)
        goto out;
    if ((type != SOCK_STREAM && type != SOCK_DGRAM) || (flags = fcntl(copy, F_GETFL)) < 0)
        goto out;
    s = socket(domain, type | SOCK_CLOEXEC | SOCK_NONBLOCK, proto);
    if (s < 0)
        goto out;
    *agent_err = connect_bounded(s, sa, len);
    if (*agent_err == 0) {
        if (!(flags & O_NONBLOCK) && fcntl(s, F_SETFL, flags & ~O_NONBLOCK) < 0)
            goto out;
        memset(&add, 0, sizeof add);
        add.id = id;
        add.flags = SECCOMP_ADDFD_FLAG_SETFD;
        add.srcfd = (uint32_t)s;
        add.newfd = (uint32_t)agent_fd;
        add.newfd_flags = fd_cloexec(pid, agent_fd) ? O_CLOEXEC : 0;
        if (ioctl(notify_fd, SECCOMP_IOCTL_NOTIF_ADDFD, &add) < 0) {
            *agent_err = 0;
            goto out;
        }
    }
    rc = 0;
out:
    if (s >= 0)
        close(s);
    if (copy >= 0)
        close(copy);
    if (pidfd >= 0)
        close(pidfd);
    return rc;
}
