/*
 * egress.c — sbx-guard makes the agent's allowed connections itself.
 *
 * Under native the agent has its own net namespace with only its own `lo`:
 * nothing beyond it can be reached, whatever a static program or a racing
 * thread does.  For a connect the policy allows (an address an IP rule
 * names, or one the DNS stub resolved for an allowed name, loopback
 * included: the host's services listen in the host's namespace), sbx-guard
 * opens a socket of the same family, type and protocol in its own
 * namespace, copies the options that matter before a connect, starts the
 * connection to the address it read, once, from the agent's memory, and
 * puts that socket in place of the agent's descriptor with
 * SECCOMP_IOCTL_NOTIF_ADDFD (SECCOMP_ADDFD_FLAG_SETFD).  Nothing the agent
 * changes after the read can redirect it (no time-of-check gap).
 *
 * sbx-guard never waits for the network: its connect is non-blocking.  A
 * non-blocking agent gets EINPROGRESS, as its own connect would have given
 * it.  A blocking one is answered "carry on": the kernel runs the agent's
 * connect again, now on a socket already connecting, which only waits for
 * that connection (the address passed is not used again; a racing thread
 * that rewrites it can only make the wait fail: AF_UNSPEC disconnects, a
 * port Landlock does not allow is refused).
 *
 * Datagrams (iso_egress_sendto): sbx-guard sends each allowed one itself,
 * from a socket in its namespace that replaces the agent's on the first
 * send, so a datagram never goes where it was not judged to go.
 *
 * What is preserved: the domain, type and protocol, O_NONBLOCK,
 * close-on-exec, and the options of copy_opts below.  What is not: a local
 * address bound before connect, buffer sizes (copying them would switch
 * off the kernel's autotuning), and options not in the list.
 */
#include "iso_int.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

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

/* Options a client sets before connecting and expects to keep.  Copied
 * when the agent's value differs from a fresh socket's; one that will not
 * copy (another protocol's) is skipped.  Not TCP_MAXSEG: before a connect
 * it reads the default 536, and setting that would clamp the connection. */
static const struct { int level, name; } copy_opts[] = {
    { SOL_SOCKET, SO_KEEPALIVE }, { SOL_SOCKET, SO_REUSEADDR }, { SOL_SOCKET, SO_REUSEPORT },
    { SOL_SOCKET, SO_LINGER }, { SOL_SOCKET, SO_RCVTIMEO_NEW }, { SOL_SOCKET, SO_SNDTIMEO_NEW },
    { SOL_SOCKET, SO_PRIORITY }, { SOL_SOCKET, SO_BROADCAST }, { SOL_SOCKET, SO_OOBINLINE },
    { SOL_SOCKET, SO_TIMESTAMP }, { IPPROTO_IP, IP_TOS }, { IPPROTO_IP, IP_TTL },
    { IPPROTO_IP, IP_RECVERR }, { IPPROTO_IP, IP_PKTINFO },
    { IPPROTO_IPV6, IPV6_V6ONLY }, { IPPROTO_IPV6, IPV6_TCLASS },
    { IPPROTO_IPV6, IPV6_RECVERR }, { IPPROTO_IPV6, IPV6_RECVPKTINFO },
    { IPPROTO_TCP, TCP_NODELAY }, { IPPROTO_TCP, TCP_KEEPIDLE }, { IPPROTO_TCP, TCP_KEEPINTVL },
    { IPPROTO_TCP, TCP_KEEPCNT }, { IPPROTO_TCP, TCP_USER_TIMEOUT },
    { IPPROTO_TCP, TCP_FASTOPEN_CONNECT }, { IPPROTO_TCP, TCP_NOTSENT_LOWAT },
};

#define N_OPTS (sizeof copy_opts / sizeof copy_opts[0])

/* A fresh socket's value of each option, per family and type (read once:
 * comparing against them halves the system calls of a copy). */
struct opt_defaults {
    bool known;
    int domain, type;
    socklen_t len[N_OPTS];      /* 0: the option does not apply */
    unsigned char v[N_OPTS][64];
};

static const struct opt_defaults *defaults_of(int s, int domain, int type)
{
    static struct opt_defaults cache[4];
    struct opt_defaults *d = NULL;

    for (size_t i = 0; i < 4; i++)
        if (cache[i].known && cache[i].domain == domain && cache[i].type == type)
            return &cache[i];
    for (size_t i = 0; i < 4 && d == NULL; i++)
        if (!cache[i].known)
            d = &cache[i];
    if (d == NULL)
        return NULL;
    for (size_t i = 0; i < N_OPTS; i++) {
        int lv = copy_opts[i].level;
        socklen_t l = sizeof d->v[i];
        d->len[i] = 0;
        if ((lv == IPPROTO_IP && domain != AF_INET) || (lv == IPPROTO_IPV6 && domain != AF_INET6)
            || (lv == IPPROTO_TCP && type != SOCK_STREAM))
            continue;
        if (getsockopt(s, lv, copy_opts[i].name, d->v[i], &l) == 0)
            d->len[i] = l;
    }
    d->domain = domain;
    d->type = type;
    d->known = true;
    return d;
}

/* TO is a fresh socket of DOMAIN and TYPE. */
static void copy_options(int from, int to, int domain, int type)
{
    const struct opt_defaults *d = defaults_of(to, domain, type);

    for (size_t i = 0; i < N_OPTS; i++) {
        unsigned char v[64];
        socklen_t l = sizeof v;
        if (d == NULL || d->len[i] == 0)
            continue;
        if (getsockopt(from, copy_opts[i].level, copy_opts[i].name, v, &l) == 0
            && (l != d->len[i] || memcmp(v, d->v[i], l) != 0))
            (void)setsockopt(to, copy_opts[i].level, copy_opts[i].name, v, l);
    }
}

/* The agent's socket, seen from here: a copy of its descriptor and what it
 * is.  0, or -1 when it is gone or not a socket. */
struct agent_sock {
    int copy;
    int domain, type, proto, flags;
    bool cloexec;
};

static int agent_sock(pid_t pid, int agent_fd, struct agent_sock *as)
{
    socklen_t ol;
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);

    as->copy = -1;
    if (pidfd < 0)
        return -1;
    as->copy = (int)syscall(SYS_pidfd_getfd, pidfd, agent_fd, 0);
    close(pidfd);
    if (as->copy < 0)
        return -1;
    ol = sizeof as->domain;
    if (getsockopt(as->copy, SOL_SOCKET, SO_DOMAIN, &as->domain, &ol) < 0)
        goto fail;
    ol = sizeof as->type;
    if (getsockopt(as->copy, SOL_SOCKET, SO_TYPE, &as->type, &ol) < 0)
        goto fail;
    ol = sizeof as->proto;
    if (getsockopt(as->copy, SOL_SOCKET, SO_PROTOCOL, &as->proto, &ol) < 0)
        goto fail;
    if ((as->flags = fcntl(as->copy, F_GETFL)) < 0)
        goto fail;
    as->cloexec = fd_cloexec(pid, agent_fd);
    return 0;
fail:
    close(as->copy);
    as->copy = -1;
    return -1;
}

/* Whether socket S lives in sbx-guard's own net namespace (a socket of
 * ours already handed in, or an agent without a namespace of its own). */
static bool in_our_netns(int s)
{
    static uint64_t ours;
    uint64_t c = 0;
    socklen_t l = sizeof c;

    if (ours == 0) {
        int t = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        socklen_t tl = sizeof ours;
        if (t < 0)
            return false;
        if (getsockopt(t, SOL_SOCKET, SO_NETNS_COOKIE, &ours, &tl) < 0)
            ours = 0;
        close(t);
    }
    return ours != 0 && getsockopt(s, SOL_SOCKET, SO_NETNS_COOKIE, &c, &l) == 0 && c == ours;
}

/* Puts S in place of the agent's AGENT_FD, as the answer to notification
 * ID is prepared.  0 or -1. */
static int hand_in(int notify_fd, uint64_t id, int s, int agent_fd, bool cloexec)
{
    struct seccomp_notif_addfd add;

    memset(&add, 0, sizeof add);
    add.id = id;
    add.flags = SECCOMP_ADDFD_FLAG_SETFD;
    add.srcfd = (uint32_t)s;
    add.newfd = (uint32_t)agent_fd;
    add.newfd_flags = cloexec ? O_CLOEXEC : 0;
    return ioctl(notify_fd, SECCOMP_IOCTL_NOTIF_ADDFD, &add) < 0 ? -1 : 0;
}

int iso_egress_connect(int notify_fd, uint64_t id, pid_t pid, int agent_fd,
                       const struct sockaddr *sa, unsigned len, int *agent_err, bool *cont)
{
    struct agent_sock as;
    struct tcp_info ti;
    socklen_t tl = sizeof ti;
    int s = -1, rc = -1;

    *agent_err = 0;
    *cont = false;
    if (agent_sock(pid, agent_fd, &as) < 0)
        return -1;
    /* Not the address's family: the kernel's own answer (EAFNOSUPPORT) is
     * the right one.  A stream socket already connecting or connected (one
     * we handed in, asked again): the kernel answers EALREADY, EISCONN or
     * waits, on the connection we made. */
    if (as.domain != sa->sa_family || (as.type != SOCK_STREAM && as.type != SOCK_DGRAM))
        goto out;
    if (as.type == SOCK_STREAM && getsockopt(as.copy, IPPROTO_TCP, TCP_INFO, &ti, &tl) == 0
        && ti.tcpi_state != TCP_CLOSE)
        goto out;
    s = socket(as.domain, as.type | SOCK_CLOEXEC | SOCK_NONBLOCK, as.proto);
    if (s < 0)
        goto out;
    copy_options(as.copy, s, as.domain, as.type);
    if (connect(s, sa, len) < 0 && errno != EINPROGRESS) {
        *agent_err = errno;     /* refused, unreachable: the agent's answer */
        rc = 0;
        goto out;
    }
    bool connecting = errno == EINPROGRESS;
    if (!(as.flags & O_NONBLOCK) && fcntl(s, F_SETFL, as.flags & ~O_NONBLOCK) < 0)
        goto out;
    if (hand_in(notify_fd, id, s, agent_fd, as.cloexec) < 0)
        goto out;
    if (connecting) {
        if (as.flags & O_NONBLOCK)
            *agent_err = EINPROGRESS;
        else
            *cont = true;
    }
    rc = 0;
out:
    if (s >= 0)
        close(s);
    close(as.copy);
    return rc;
}

int iso_egress_sendto(int notify_fd, uint64_t id, pid_t pid, int agent_fd,
                      const struct msghdr *msg, int flags, ssize_t *sent, int *agent_err)
{
    struct agent_sock as;
    int s = -1, rc = -1;
    bool ours;

    *agent_err = 0;
    *sent = 0;
    if (agent_sock(pid, agent_fd, &as) < 0)
        return -1;
    if (as.type != SOCK_DGRAM || as.domain != ((const struct sockaddr *)msg->msg_name)->sa_family)
        goto out;
    ours = in_our_netns(as.copy);
    if (!ours) {
        s = socket(as.domain, as.type | SOCK_CLOEXEC | SOCK_NONBLOCK, as.proto);
        if (s < 0)
            goto out;
        copy_options(as.copy, s, as.domain, as.type);
    }
    /* Never waits: sbx-guard serves every process of the agent. */
    *sent = sendmsg(ours ? as.copy : s, msg, (flags & ~MSG_WAITALL) | MSG_DONTWAIT | MSG_NOSIGNAL);
    if (*sent < 0) {
        *agent_err = errno;
        rc = 0;
        goto out;
    }
    if (!ours) {
        if (!(as.flags & O_NONBLOCK) && fcntl(s, F_SETFL, as.flags & ~O_NONBLOCK) < 0)
            goto out;
        if (hand_in(notify_fd, id, s, agent_fd, as.cloexec) < 0)
            goto out;
    }
    rc = 0;
out:
    if (s >= 0)
        close(s);
    close(as.copy);
    return rc;
}
