/*
 * native.c — ISO_NATIVE and ISO_AUTO: sbx's own sandbox, in one sequence.
 *
 * In sbx-guard (may allocate, may fail loudly):
 *   plan the mounts, the Landlock rules and the seccomp filter from the
 *   policy; then clone the sandbox's init into new user, pid, mount, ipc,
 *   uts, cgroup and (when the policy needs no outside network) net
 *   namespaces.
 * In the init (pid 1 of the new pid namespace; not filtered, not
 *   restricted; touches only its own namespaces):
 *   map its uid/gid, bring up lo, apply the mounts (mounts.c), open the
 *   Landlock rules in that new view, fork the agent, then reap every process
 *   and exit with the agent's status.  Because it is pid 1, its death makes
 *   the kernel kill everything left in the namespace: SIGKILL of the init is
 *   SIGKILL of the whole agent.
 * In the agent (pid 2), in this order and each for a reason:
 *   own process group (without namespaces; with them the init's, which
 *   the init made the terminal's foreground if sbx-guard had it); chdir again (the old cwd is on the host's view);
 *   rlimits, clean signals, no inherited fds; no_new_privs (required by
 *   Landlock and seccomp, and it makes set-uid programs inert); drop every
 *   capability (as root, uid 0 inside would otherwise keep them over files
 *   it owns); Landlock; seccomp last, since its listener must reach
 *   sbx-guard before execve, which is itself notified; execve.
 *
 * Reporting: a close-on-exec pipe carries a set-up or exec failure (from
 * the init or the agent) to iso_spawn; its end of file means the agent's
 * execve succeeded.  A seqpacket socket carries the listener fd (agent) and,
 * at the end, the agent's wait status (init).  While iso_spawn waits for the
 * exec it must answer the exec notification itself: nobody else is reading
 * the listener yet.
 *
 * ISO_AUTO: a kernel without user namespaces (or with mounts it will not
 * let us change) degrades to Landlock + seccomp + supervisor without
 * namespaces; no Landlock degrades to none of it.  Each degradation shows in
 * child->layers, and none happens when the policy says isolation: required.
 */
#include "iso_int.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bsd/string.h>

/* How long iso_spawn waits for the sandbox to exec the agent. */
#define SPAWN_TIMEOUT_MS 30000

enum stage { STAGE_NS = 1, STAGE_AGENT = 2 };

struct status_msg {
    int stage;
    int err;
    char what[ISO_ERR_LEN];
};

struct plan {
    const struct iso_request *req;
    bool ns, netns, landlock, notify, notify_open;
    bool tty;                   /* the agent's group takes the terminal */
    char resolv[2048];          /* the agent's /etc/resolv.conf (netns) */
    struct iso_mounts *mp;
    struct iso_landlock *ll;
    struct iso_bpf bpf;
    struct iso_rlimit rl[ISO_RLIMIT_MAX];
    size_t nrl;
    uid_t uid;
    gid_t gid;
    char cwd[4096];
};

static void report(int fd, int stage, int e, const char *what)
{
    struct status_msg m;

    memset(&m, 0, sizeof m);
    m.stage = stage;
    m.err = e;
    strlcpy(m.what, what, sizeof m.what);
    if (write(fd, &m, sizeof m) < 0)
        _exit(127);
}

static __attribute__((noreturn)) void die(int fd, int stage, int e, const char *what)
{
    report(fd, stage, e, what);
    _exit(127);
}

/* Sends FD over SOCK, tagged TAG ('D': the DNS stub's socket). */
static int send_fd(int sock, int fd, char tag)
{
    char byte = tag;
    struct iovec iov = { &byte, 1 };
    union { struct cmsghdr h; char buf[CMSG_SPACE(sizeof(int))]; } u;
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
                          .msg_control = u.buf, .msg_controllen = sizeof u.buf };
    struct cmsghdr *c;

    memset(&u, 0, sizeof u);
    c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    return sendmsg(sock, &msg, MSG_NOSIGNAL) < 0 ? -1 : 0;
}

/* Empties the bounding, ambient, inheritable, permitted and effective sets:
 * after this no exec can give the agent a capability, even as uid 0. */
static int drop_caps(void)
{
    struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
    struct __user_cap_data_struct d[2];

    for (int c = 0; c < 64; c++)
        if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
            return -1;
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return -1;
    memset(d, 0, sizeof d);
    return (int)syscall(SYS_capset, &h, d);
}

/* The agent's last steps; never returns. */
static __attribute__((noreturn)) void agent(const struct plan *pl, int ruleset, int efd,
                                             int sfd)
{
    const struct iso_request *req = pl->req;
    const char *what = "";
    char err[ISO_ERR_LEN];
    int lfd;

    /* Its own process group: with namespaces the init's (the init leads
     * it, so sbx-guard can hand that group the terminal and signal it as a
     * whole); without, a new one. */
    if (!pl->ns && setpgid(0, 0) < 0)
        die(efd, STAGE_AGENT, errno, "setpgid");
    if (!pl->ns && pl->tty && iso_take_terminal() < 0)
        die(efd, STAGE_AGENT, errno, "take the terminal");
    /* The inherited cwd still points into the host's view of the tree
     * (e.g. the real /tmp under our private one): look it up again. */
    if (pl->ns && chdir(pl->cwd) < 0)
        die(efd, STAGE_AGENT, errno, "chdir to the current directory");
    if (iso_child_basics(pl->rl, pl->nrl, efd, &what) < 0)
        die(efd, STAGE_AGENT, errno, what);
    /* After the basics, which mark every fd from 3 up close-on-exec. */
    {
        int *const keep[] = { &efd, &sfd, &ruleset };
        if (iso_child_fds(req, keep, 3) < 0)
            die(efd, STAGE_AGENT, errno, "descriptors");
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        die(efd, STAGE_AGENT, errno, "no_new_privs");
    if (drop_caps() < 0)
        die(efd, STAGE_AGENT, errno, "drop capabilities");
    if (pl->landlock) {
        if (ruleset < 0 && (ruleset = iso_landlock_ruleset(pl->ll, err, sizeof err)) < 0)
            die(efd, STAGE_AGENT, 0, err);
        if (iso_landlock_restrict(pl->ll, ruleset) < 0)
            die(efd, STAGE_AGENT, errno, "landlock: restrict");
        close(ruleset);
    }
    /* Every mount, Landlock rule and rlimit is in place: if the preload
     * cannot be loaded now, ld.so would drop it after the exec with a
     * warning and the run would go unguarded.  Before seccomp, whose
     * listener nobody reads yet for an open. */
    if (req->preload && iso_guard_loadable(req->preload, &what) < 0)
        die(efd, STAGE_AGENT, errno, what);
    if (iso_child_late_rlimits(pl->rl, pl->nrl, &what) < 0)
        die(efd, STAGE_AGENT, errno, what);
    lfd = iso_seccomp_install(&pl->bpf, pl->notify);
    if (lfd < 0)
        die(efd, STAGE_AGENT, errno, "seccomp");
    if (pl->notify) {
        /* Before execve: the execve below waits for sbx-guard's answer.
         * Not passed with sendmsg, which the filter now stops until the
         * listener (the one being passed) answers: the number is sent
         * with send() (not stopped), and sbx-guard takes the descriptor
         * out of this process (pidfd_getfd) while the execve waits; the
         * exec then closes it here. */
        char msg[1 + sizeof lfd];
        msg[0] = 'L';
        memcpy(msg + 1, &lfd, sizeof lfd);
        if (fcntl(lfd, F_SETFD, FD_CLOEXEC) < 0 || send(sfd, msg, sizeof msg, MSG_NOSIGNAL) < 0)
            die(efd, STAGE_AGENT, errno, "seccomp: send the listener");
    }
    close(sfd);
    execve(req->argv[0], req->argv, req->envp);
    die(efd, STAGE_AGENT, errno, "exec");
}

/* The DNS stub's socket, bound inside the agent's new net namespace (only
 * a process in it can bind there; sbx-guard serves it from outside). */
static int stub_socket(void)
{
    struct sockaddr_in a;
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(ISO_DNS_STUB_PORT);
    if (s < 0 || inet_pton(AF_INET, ISO_DNS_STUB_ADDR, &a.sin_addr) != 1
        || bind(s, (struct sockaddr *)&a, sizeof a) < 0) {
        if (s >= 0)
            close(s);
        return -1;
    }
    return s;
}

/* Puts TEXT over /etc/resolv.conf, read-only: a file written on a scratch
 * tmpfs over /tmp, bound onto it, and the scratch detached again (the
 * bind keeps the file).  Without an /etc/resolv.conf to cover (or one
 * whose link leads nowhere) glibc asks 127.0.0.1:53, which in the agent's
 * namespace nobody serves: resolution fails closed.  0 or -1/errno. */
static int mount_resolv(const char *text)
{
    size_t len = strlen(text);
    int fd, rc = -1;

    if (access("/etc/resolv.conf", F_OK) < 0)
        return 0;
    if (mount("sbx-resolv", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "size=16k,mode=0755") < 0)
        return -1;
    fd = open("/tmp/resolv.conf", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, text, len) != (ssize_t)len)
        goto out;
    if (mount("/tmp/resolv.conf", "/etc/resolv.conf", NULL, MS_BIND, NULL) < 0
        || mount(NULL, "/etc/resolv.conf", NULL,
                 MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        goto out;
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    {
        int e = errno;
        (void)umount2("/tmp", MNT_DETACH);
        errno = e;
    }
    return rc;
}

static __attribute__((noreturn)) void init_main(struct plan *pl, int efd, int sfd)
{
    char err[ISO_ERR_LEN];
    int ruleset = -1, st = 0;
    pid_t pid, w;

    /* The agent's process group, led by the init.  Signals sbx-guard sends
     * to the group reach the agent once; the init itself, being pid 1 with
     * default dispositions, ignores all but SIGKILL from outside. */
    if (setpgid(0, 0) < 0)
        die(efd, STAGE_NS, errno, "setpgid");
    /* The group has the terminal before the agent exists (see
     * iso_take_terminal); tcsetpgrp names it by the init's pid in the new
     * namespace, the session is still sbx-guard's. */
    if (pl->tty && iso_take_terminal() < 0)
        die(efd, STAGE_NS, errno, "take the terminal");
    if (iso_write_id_maps(pl->uid, pl->gid, err, sizeof err) < 0)
        die(efd, STAGE_NS, 0, err);
    if (pl->netns && iso_net_lo_up(err, sizeof err) < 0)
        die(efd, STAGE_NS, 0, err);
    if (iso_mounts_apply(pl->mp, err, sizeof err) < 0)
        die(efd, STAGE_NS, 0, err);
    /* The agent's only resolver: after the mounts (the file it covers must
     * be the one the agent will see), before the agent exists. */
    /* No stub for an agent that may open no inet socket (sbx-serve's
     * requests): it has no network, so no names to resolve. */
    if (pl->netns && !pl->req->no_inet_sockets) {
        int dfd = stub_socket();
        if (dfd < 0)
            die(efd, STAGE_NS, errno, "dns stub: bind " ISO_DNS_STUB_ADDR ":53");
        if (send_fd(sfd, dfd, 'D') < 0)
            die(efd, STAGE_NS, errno, "dns stub: send the socket");
        close(dfd);
        /* For the supervisor to see the agent's own servers (supervisor.c). */
        dfd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
        if (dfd < 0 || send_fd(sfd, dfd, 'N') < 0)
            die(efd, STAGE_NS, errno, "sock_diag socket");
        close(dfd);
        if (mount_resolv(pl->resolv) < 0)
            die(efd, STAGE_NS, errno, "dns stub: /etc/resolv.conf");
    }
    /* Rules are opened now, in the new view: a rule on /tmp must name our
     * private /tmp, not the host's one beneath it. */
    if (pl->landlock && (ruleset = iso_landlock_ruleset(pl->ll, err, sizeof err)) < 0)
        die(efd, STAGE_AGENT, 0, err);

    pid = fork();
    if (pid < 0)
        die(efd, STAGE_NS, errno, "fork the agent");
    if (pid == 0)
        agent(pl, ruleset, efd, sfd);
    close(efd);
    if (ruleset >= 0)
        close(ruleset);
    /* With child_fds (sbx-serve) the agent's descriptors are its alone,
     * and the init keeps nothing of its caller but the status channel: a
     * reader of the agent's stdout sees the end when the agent's processes
     * are done, and the agent sees the end of its input when the caller
     * goes away, not when the init does. */
    if (pl->req->child_fds) {
        if (sfd > 3)
            (void)syscall(SYS_close_range, 3U, (unsigned)sfd - 1, 0U);
        (void)syscall(SYS_close_range, (unsigned)sfd + 1, ~0U, 0U);
    }
    {
        /* sbx-guard blocks the signals it relays; nothing to keep pending. */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
    }
    for (;;) {
        int s;
        w = waitpid(-1, &s, 0);
        if (w == pid) {
            st = s;
            break;
        }
        if (w < 0 && errno == ECHILD)
            break;
    }
    {
        char buf[1 + sizeof st];
        buf[0] = 'W';
        memcpy(buf + 1, &st, sizeof st);
        (void)send(sfd, buf, sizeof buf, MSG_NOSIGNAL);
    }
    if (WIFSIGNALED(st))
        _exit(128 + WTERMSIG(st));
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 127);
}

/* The agent's pid as sbx-guard sees it: the init's only child (NS), or
 * the process started (PID). */
static pid_t agent_pid(pid_t pid, bool ns)
{
    char path[64];
    long long child = 0;
    FILE *f;

    if (!ns)
        return pid;
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
    if ((f = fopen(path, "re")) == NULL)
        return -1;
    if (fscanf(f, "%lld", &child) != 1)
        child = -1;
    fclose(f);
    return (pid_t)child;
}

/* The agent's seccomp listener, descriptor FD of the agent (see agent()). */
static int take_listener(pid_t pid, bool ns, int fd)
{
    pid_t a = agent_pid(pid, ns);
    int pidfd, l;

    if (a <= 0 || (pidfd = (int)syscall(SYS_pidfd_open, a, 0)) < 0)
        return -1;
    l = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
    close(pidfd);
    return l;
}

static int recv_msg(int sock, struct iso_child *child, int *dns_fd, int *diag_fd, pid_t pid,
                    bool ns)
{
    char buf[16];
    struct iovec iov = { buf, sizeof buf };
    union { struct cmsghdr h; char b[CMSG_SPACE(sizeof(int))]; } u;
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
                          .msg_control = u.b, .msg_controllen = sizeof u.b };
    struct cmsghdr *c;
    char tag;
    ssize_t n;

    /* The agent's wait status ('W', from the init) is iso_child_status's:
     * an agent that ends at once can have it here before the last call. */
    if (recv(sock, &tag, 1, MSG_DONTWAIT | MSG_PEEK) != 1 || tag == 'W')
        return -1;
    n = recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n <= 0)
        return -1;
    if (buf[0] == 'L' && n == 1 + (ssize_t)sizeof(int) && child->notify_fd < 0) {
        int fd;
        memcpy(&fd, buf + 1, sizeof fd);
        child->notify_fd = take_listener(pid, ns, fd);
    }
    for (c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int fd;
            memcpy(&fd, CMSG_DATA(c), sizeof fd);
            if (buf[0] == 'D' && *dns_fd < 0)
                *dns_fd = fd;
            else if (buf[0] == 'N' && *diag_fd < 0)
                *diag_fd = fd;
            else
                close(fd);
        }
    return 0;
}

static void reap(pid_t pid)
{
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

/* Starts the sandbox with plan PL.  Returns 0, -1 with ERR, or -2 with ERR
 * when the namespaces could not be set up (AUTO may then degrade). */
static int launch(struct plan *pl, struct iso_child *child, char *err, size_t errsz)
{
    const struct iso_request *req = pl->req;
    int ep[2], sp[2];
    pid_t pid;
    struct status_msg m;
    ssize_t n = 0;
    int elapsed = 0;
    int dns_fd = -1, diag_fd = -1;

    if (pipe2(ep, O_CLOEXEC) < 0) {
        iso_errf(err, errsz, "pipe: %s", strerror(errno));
        return -1;
    }
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
        iso_errf(err, errsz, "socketpair: %s", strerror(errno));
        close(ep[0]);
        close(ep[1]);
        return -1;
    }
    if (pl->ns) {
        unsigned long flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC
                              | CLONE_NEWUTS | CLONE_NEWCGROUP | SIGCHLD;
        if (pl->netns)
            flags |= CLONE_NEWNET;
        /* The raw system call: glibc's clone() wants a separate stack, and
         * its fork() cannot create namespaces.  The child continues here
         * like a fork's but without glibc's fork bookkeeping, so sbx-guard
         * must call iso_spawn while it is single-threaded (no lock can be
         * held by a thread that does not exist in the child); the init
         * makes system calls, formats messages and forks, nothing more. */
        pid = (pid_t)syscall(SYS_clone, flags, NULL, NULL, NULL, 0);
    } else {
        pid = fork();
    }
    if (pid < 0) {
        int e = errno;
        close(ep[0]); close(ep[1]); close(sp[0]); close(sp[1]);
        iso_errf(err, errsz, "%s: %s", pl->ns ? "namespaces (clone)" : "fork", strerror(e));
        return pl->ns ? -2 : -1;
    }
    if (pid == 0) {
        close(ep[0]);
        close(sp[0]);
        if (pl->ns)
            init_main(pl, ep[1], sp[1]);
        agent(pl, -1, ep[1], sp[1]);
    }
    close(ep[1]);
    close(sp[1]);
    (void)setpgid(pid, pid);   /* both sides, so no race */

    /* Wait for the exec, answering the notifications it causes. */
    for (;;) {
        struct pollfd pf[3] = {
            { ep[0], POLLIN, 0 }, { sp[0], POLLIN, 0 }, { child->notify_fd, POLLIN, 0 },
        };
        int r = poll(pf, child->notify_fd >= 0 ? 3 : 2, 1000);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0 && (elapsed += 1000) >= SPAWN_TIMEOUT_MS) {
            iso_errf(err, errsz, "the sandbox did not start the agent within %d s",
                     SPAWN_TIMEOUT_MS / 1000);
            goto fail;
        }
        if (pf[1].revents & POLLIN)
            (void)recv_msg(sp[0], child, &dns_fd, &diag_fd, pid, pl->ns);
        /* The exec's outcome first: once it is known, a pending
         * notification is the agent's own doing and sbx-guard's to
         * record; only the agent's first execve is answered here. */
        if (pf[0].revents & (POLLIN | POLLHUP)) {
            do
                n = read(ep[0], &m, sizeof m);
            while (n < 0 && errno == EINTR);
            break;
        }
        if (child->notify_fd >= 0 && r > 0 && (pf[2].revents & POLLIN))
            (void)iso_supervise_quiet(child->notify_fd, req);
    }
    (void)recv_msg(sp[0], child, &dns_fd, &diag_fd, pid, pl->ns);
    if (n == 0 && (!pl->notify || child->notify_fd >= 0)) {
        close(ep[0]);
        if (pl->netns && !req->no_inet_sockets) {
            /* The agent runs: nothing can fail it now but a resolver we
             * cannot start, which would leave it without names. */
            if (dns_fd < 0 || iso_dns_start(req, dns_fd, err, errsz) < 0) {
                if (dns_fd < 0)
                    iso_errf(err, errsz, "isolation: the sandbox sent no DNS stub socket");
                if (diag_fd >= 0)
                    close(diag_fd);
                close(sp[0]);
                if (child->notify_fd >= 0)
                    close(child->notify_fd);
                child->notify_fd = -1;
                reap(pid);
                return -1;
            }
            child->dns = true;
        }
        iso_supervise_set_netns(pl->netns, diag_fd);
        diag_fd = -1;
        child->pid = pid;
        child->pidns = pl->ns;
        child->status_fd = pl->ns ? sp[0] : -1;
        if (!pl->ns)
            close(sp[0]);
        return 0;
    }
    if (n == (ssize_t)sizeof m) {
        m.what[sizeof m.what - 1] = '\0';
        if (strcmp(m.what, "exec") == 0)
            iso_errf(err, errsz, "cannot run %s: %s", req->argv[0], strerror(m.err));
        else if (m.err)
            iso_errf(err, errsz, "isolation: %s: %s", m.what, strerror(m.err));
        else
            iso_errf(err, errsz, "isolation: %s", m.what);
        close(ep[0]);
        close(sp[0]);
        if (dns_fd >= 0)
            close(dns_fd);
        if (diag_fd >= 0)
            close(diag_fd);
        if (child->notify_fd >= 0)
            close(child->notify_fd);
        child->notify_fd = -1;
        reap(pid);
        return m.stage == STAGE_NS ? -2 : -1;
    }
    iso_errf(err, errsz, "isolation: the sandbox ended before starting the agent");
fail:
    close(ep[0]);
    close(sp[0]);
    if (dns_fd >= 0)
        close(dns_fd);
    if (diag_fd >= 0)
        close(diag_fd);
    if (child->notify_fd >= 0)
        close(child->notify_fd);
    child->notify_fd = -1;
    reap(pid);
    return -1;
}

static void add_layer(char *out, size_t outsz, const char *layer)
{
    if (out[0])
        strlcat(out, ",", outsz);
    strlcat(out, layer, outsz);
}

/* GUARD: the agent's first process loads the preload (spawn.c). */
static void layers_string(const struct plan *pl, bool guard, char *out, size_t outsz)
{
    char buf[32];

    out[0] = '\0';
    if (guard)
        add_layer(out, outsz, "guard");
    if (pl->ns) {
        add_layer(out, outsz, "userns,pidns,mntns,ipcns,utsns");
        if (pl->netns)
            add_layer(out, outsz, "netns");
    }
    if (pl->landlock) {
        snprintf(buf, sizeof buf, "landlock-v%d", pl->ll->abi);
        add_layer(out, outsz, buf);
    }
    if (pl->ns && pl->mp->incomplete)
        add_layer(out, outsz, "cover-incomplete");
    add_layer(out, outsz, "seccomp");
    if (pl->notify)
        add_layer(out, outsz, pl->notify_open ? "supervisor,supervisor-open" : "supervisor");
    add_layer(out, outsz, "rlimits");
}

/* The agent's /etc/resolv.conf: the stub alone, with the host's search
 * domains (a short name is tried under them, each judged by the stub). */
static void resolv_text(char *out, size_t outsz)
{
    char line[512];
    FILE *f = fopen("/etc/resolv.conf", "re");

    strlcpy(out, "# sbx: the agent's resolver is sbx-guard's DNS stub, which answers only\n"
            "# the names the policy allows (docs/network.md).\n"
            "nameserver " ISO_DNS_STUB_ADDR "\noptions edns0\n", outsz);
    if (f == NULL)
        return;
    while (fgets(line, sizeof line, f))
        if ((strncmp(line, "search", 6) == 0 || strncmp(line, "domain", 6) == 0)
            && (line[6] == ' ' || line[6] == '\t') && strchr(line, '\n'))
            strlcat(out, line, outsz);
    fclose(f);
}

int iso_spawn_native(const struct iso_request *req, struct iso_child *child,
                     char *err, size_t errsz)
{
    const struct policy_info *pi = policy_info(req->policy);
    bool strict = req->mode == ISO_NATIVE || pi->isolation_required;
    struct plan pl;
    int rc = -1;

    memset(&pl, 0, sizeof pl);
    pl.req = req;
    pl.uid = geteuid();
    pl.gid = getegid();
    pl.nrl = iso_rlimits(req->policy, pl.rl);
    pl.tty = iso_tty_foreground();
    if (getcwd(pl.cwd, sizeof pl.cwd) == NULL) {
        iso_errf(err, errsz, "isolation: getcwd: %s", strerror(errno));
        return -1;
    }
    pl.mp = calloc(1, sizeof *pl.mp);
    pl.ll = calloc(1, sizeof *pl.ll);
    if (pl.mp == NULL || pl.ll == NULL) {
        iso_errf(err, errsz, "isolation: out of memory");
        goto out;
    }
    if (iso_landlock_plan(req, pl.ll, err, errsz) < 0)
        goto out;
    pl.landlock = pl.ll->abi > 0;
    if (!pl.landlock && strict) {
        iso_errf(err, errsz, "isolation: Landlock is not available on this kernel "
                 "(needs Linux 5.13+ with lsm=landlock)%s",
                 req->mode == ISO_NATIVE ? "" : " and the policy requires isolation");
        goto out;
    }
    if (iso_mounts_plan(req, pl.mp, err, errsz) < 0)
        goto out;
    /* A cover that stops somewhere leaves what lies beyond readable by a
     * static program: never silently.  Refused where isolation was asked
     * for; under auto, started with the degradation said and recorded. */
    if (pl.mp->incomplete && strict) {
        iso_errf(err, errsz, "isolation: the deny-read cover is incomplete: %s; not starting, "
                 "since a static program could read what is not covered (narrow the deny "
                 "globs, raise SBX_COVER_BUDGET_MS, or run with --isolation auto)",
                 pl.mp->incomplete_why);
        goto out;
    }
    if (pl.mp->incomplete) {
        strlcpy(child->warning, "the deny-read cover is incomplete: a static program may "
                "read deny-read files it does not cover (the guard decides for dynamic "
                "ones): ", sizeof child->warning);
        strlcat(child->warning, pl.mp->incomplete_why, sizeof child->warning);
    }
    pl.notify = true;
    pl.notify_open = req->supervise_open && !pi->audit_mode;
    if (pl.notify_open && (iso_supervise_deny_inodes(pl.mp->links, pl.mp->n_links) < 0
                           || iso_supervise_plan(pl.ll, pl.mp) < 0)) {
        iso_errf(err, errsz, "isolation: out of memory");
        goto out;
    }
    if (iso_seccomp_build(ISO_NOTIFY_EXEC_NET | (pl.notify_open ? ISO_NOTIFY_OPEN : 0)
                          | (req->no_inet_sockets ? ISO_DENY_INET : 0),
                          &pl.bpf, err, errsz) < 0)
        goto out;
    pl.ns = true;
    pl.netns = iso_net_own_ns(req->policy);
    if (pl.netns)
        resolv_text(pl.resolv, sizeof pl.resolv);

    rc = launch(&pl, child, err, errsz);
    if (rc == -2 && !strict) {
        /* AUTO: no namespaces here; the rest still stands. */
        pl.ns = pl.netns = false;
        rc = launch(&pl, child, err, errsz);
    }
    if (rc == 0)
        layers_string(&pl, child->guard, child->layers, sizeof child->layers);
    else
        rc = -1;
out:
    iso_bpf_free(&pl.bpf);
    if (pl.mp)
        iso_mounts_free(pl.mp);
    free(pl.mp);
    free(pl.ll);
    return rc;
}

int iso_child_status(struct iso_child *child, int status)
{
    char buf[1 + sizeof(int)];
    int st = status;

    if (child->status_fd >= 0) {
        ssize_t n = recv(child->status_fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n == (ssize_t)sizeof buf && buf[0] == 'W')
            memcpy(&st, buf + 1, sizeof st);
        close(child->status_fd);
        child->status_fd = -1;
    }
    /* gvisor: runsc's 128+N, when its log says the agent died of N. */
    if (child->run_status_known && WIFEXITED(status) && WIFSIGNALED(child->run_status)
        && WEXITSTATUS(status) == 128 + WTERMSIG(child->run_status))
        st = child->run_status;
    return st;
}
