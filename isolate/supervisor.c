/*
 * supervisor.c — the seccomp user-notification supervisor in sbx-guard.
 *
 * Every execve, execveat and connect (and sendto with an address) of every
 * process of the agent stops in the kernel until this code answers.  It reads the call's arguments from
 * the stopped process's memory, resolves paths as that process sees them
 * (its cwd, its root, its mounts: through /proc/PID/root), asks the policy,
 * reports what it saw (layer "supervisor": the record of what ran and where
 * it connected, also for static programs that the preload never sees), and
 * answers: refused with EACCES, or let the kernel carry on.
 *
 * Time of check to time of use: the arguments live in the agent's memory,
 * and another thread of the agent may change them after we read them and
 * before the kernel does.  So this code never *allows* on the strength of
 * what it read: "carry on" (SECCOMP_USER_NOTIF_FLAG_CONTINUE) only means
 * "the kernel's own rules apply", and those are Landlock's EXECUTE rights,
 * the read-only and noexec mounts, Landlock's TCP port rules and the net
 * namespace.  What the supervisor adds is refusing what is plainly denied
 * (a path under files.exec.deny, a command line under commands.deny, an
 * address under network.connect.deny) and the authoritative record; a
 * racing thread can make it record one path while another runs, which the
 * layers beneath still bound.
 */
#include "iso_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <bsd/string.h>

#include "path.h"
#include "paths.h"

#define MAX_ARGS     256
#define ARGS_BYTES   65536

/* ---- reading the target ------------------------------------------------- */

static ssize_t read_direct(pid_t pid, uint64_t addr, void *buf, size_t len)
{
    struct iovec l = { buf, len }, r = { (void *)(uintptr_t)addr, len };
    return process_vm_readv(pid, &l, 1, &r, 1, 0);
}

/* The pages of the target read while deciding one notification.  An exec's
 * argv array and its strings usually sit in one or two pages: reading each
 * pointer and each string on its own took ~15 process_vm_readv calls for a
 * compiler's exec, each one a system call the waiting agent pays for.  A
 * page is read whole (a mapped page is readable to its end) and kept until
 * the next notification (pages_forget): nothing read is trusted across
 * notifications, and the caller's still_valid() check after reading stays
 * what makes the reads meaningful. */
#define PAGE_BYTES 4096u
#define CACHED_PAGES 4
static struct {
    pid_t pid;
    unsigned next;
    struct { uint64_t base; size_t len; char data[PAGE_BYTES]; } pg[CACHED_PAGES];
} pages;

static void pages_forget(void)
{
    for (unsigned i = 0; i < CACHED_PAGES; i++)
        pages.pg[i].len = 0;
    pages.pid = 0;
}

/* Reads LEN bytes at ADDR in PID: at most what is left of ADDR's page (the
 * next page may not be mapped).  Bytes read, 0 (nothing there) or -1. */
static ssize_t read_mem(pid_t pid, uint64_t addr, void *buf, size_t len)
{
    uint64_t base = addr & ~(uint64_t)(PAGE_BYTES - 1);
    size_t off = (size_t)(addr - base);
    if (len > PAGE_BYTES - off)
        return read_direct(pid, addr, buf, len);    /* straddles: as asked */
    if (pages.pid != pid)
        pages_forget();
    pages.pid = pid;
    for (unsigned i = 0; i < CACHED_PAGES; i++) {
        if (pages.pg[i].len == 0 || pages.pg[i].base != base)
            continue;
        if (pages.pg[i].len <= off)
            return 0;
        size_t n = pages.pg[i].len - off < len ? pages.pg[i].len - off : len;
        memcpy(buf, pages.pg[i].data + off, n);
        return (ssize_t)n;
    }
    unsigned k = pages.next++ % CACHED_PAGES;
    ssize_t n = read_direct(pid, base, pages.pg[k].data, PAGE_BYTES);
    if (n <= (ssize_t)off) {
        pages.pg[k].len = 0;
        return read_direct(pid, addr, buf, len);    /* let the kernel say why */
    }
    pages.pg[k].base = base;
    pages.pg[k].len = (size_t)n;
    size_t m = (size_t)n - off < len ? (size_t)n - off : len;
    memcpy(buf, pages.pg[k].data + off, m);
    return (ssize_t)m;
}

/* Reads a NUL-terminated string, a page at a time (the next page may not be
 * mapped).  0, or -1 (EFAULT, ENAMETOOLONG, ESRCH). */
static int read_str(pid_t pid, uint64_t addr, char *buf, size_t size)
{
    size_t got = 0;

    if (addr == 0) {
        errno = EFAULT;
        return -1;
    }
    while (got < size) {
        size_t chunk = PAGE_BYTES - ((addr + got) & (PAGE_BYTES - 1));
        ssize_t n;
        if (chunk > size - got)
            chunk = size - got;
        n = read_mem(pid, addr + got, buf + got, chunk);
        if (n <= 0) {
            if (n == 0)
                errno = EFAULT;
            return -1;
        }
        if (memchr(buf + got, '\0', (size_t)n))
            return 0;
        got += (size_t)n;
    }
    errno = ENAMETOOLONG;
    return -1;
}

struct argv_buf {
    char *argv[MAX_ARGS + 1];
    char bytes[ARGS_BYTES];
    bool truncated;
};

static int read_argv(pid_t pid, uint64_t addr, struct argv_buf *ab)
{
    size_t used = 0, n = 0;

    ab->truncated = false;
    while (addr && n < MAX_ARGS) {
        uint64_t p;
        if (read_mem(pid, addr + n * 8, &p, sizeof p) != (ssize_t)sizeof p)
            return -1;
        if (p == 0)
            break;
        if (used >= sizeof ab->bytes - 1) {
            ab->truncated = true;
            break;
        }
        if (read_str(pid, p, ab->bytes + used, sizeof ab->bytes - used) < 0) {
            if (errno != ENAMETOOLONG)
                return -1;
            ab->bytes[sizeof ab->bytes - 1] = '\0';
            ab->truncated = true;
        }
        ab->argv[n++] = ab->bytes + used;
        used += strlen(ab->bytes + used) + 1;
    }
    if (n == MAX_ARGS)
        ab->truncated = true;
    ab->argv[n] = NULL;
    return 0;
}

static int proc_link(pid_t pid, const char *what, char *out, size_t outsz)
{
    char p[64];
    ssize_t n;

    snprintf(p, sizeof p, "/proc/%d/%s", (int)pid, what);
    n = readlink(p, out, outsz - 1);
    if (n < 0)
        return -1;
    out[n] = '\0';
    return 0;
}

/* PATH (relative to BASE, the target's directory; "" when PATH is
 * absolute) resolved as the target sees it: through /proc/PID/root, with
 * /proc/self as the target's own pid, and a link to a memfd as the
 * memfd's name "/memfd:NAME (deleted)" (policy_path_resolve_in).  Where it
 * cannot be resolved, PATH folded. */
static void resolve_in(pid_t pid, const char *base, const char *path, char *out, size_t outsz)
{
    char root[48];
    snprintf(root, sizeof root, "/proc/%d/root", (int)pid);
    struct policy_path_view view = { .root = root, .pid = pid };
    const char *b = base[0] ? base : NULL;
    if (policy_path_resolve_in(&view, b, path, POLICY_PATH_MEMFD_NAME, out, outsz) == 0)
        return;
    if (policy_path_lexical(b, path, out, outsz) < 0)
        strlcpy(out, path, outsz);
}

static bool is_memfd(const char *path)
{
    return strncmp(path, "/memfd:", 7) == 0;
}

/* The dynamic loader run as a program ("ld.so /path/prog args"). */
static bool is_loader(const char *path)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    return strncmp(b, "ld-linux", 8) == 0 || strcmp(b, "ld.so") == 0
           || (strncmp(b, "ld-", 3) == 0 && strstr(b, ".so") != NULL);
}

/* Index in ARGV of the program ld.so would run, or -1. */
static int loader_program(char *const *argv)
{
    static const char *const with_arg[] = {
        "--library-path", "--preload", "--audit", "--argv0", "--inhibit-rpath",
        "--glibc-hwcaps-prepend", "--glibc-hwcaps-mask",
    };
    for (int i = 1; argv[i]; i++) {
        bool takes = false;
        if (strcmp(argv[i], "--") == 0)
            return argv[i + 1] ? i + 1 : -1;
        if (strncmp(argv[i], "--", 2) != 0)
            return i;
        for (size_t k = 0; k < sizeof with_arg / sizeof with_arg[0]; k++)
            takes = takes || strcmp(argv[i], with_arg[k]) == 0;
        if (takes && argv[i + 1])
            i++;
    }
    return -1;
}

/* For supervise_open.c (iso_int.h). */
int iso_sup_read_str(pid_t pid, uint64_t addr, char *buf, size_t size)
{
    return read_str(pid, addr, buf, size);
}

ssize_t iso_sup_read_mem(pid_t pid, uint64_t addr, void *buf, size_t len)
{
    return read_mem(pid, addr, buf, len);
}

int iso_sup_proc_link(pid_t pid, const char *what, char *out, size_t outsz)
{
    return proc_link(pid, what, out, outsz);
}

int iso_sup_resolve_in(pid_t pid, const char *abs, char *out, size_t outsz)
{
    resolve_in(pid, "", abs, out, outsz);
    return 0;
}

/* ---- answering ---------------------------------------------------------- */

static struct seccomp_notif_sizes sizes;

/* The agent has its own net namespace (iso_supervise_set_netns). */
static bool sup_netns;
static int sup_diag_fd = -1;    /* NETLINK_SOCK_DIAG in the agent's namespace */

void iso_supervise_set_netns(bool on, int diag_fd)
{
    sup_netns = on;
    if (sup_diag_fd >= 0)
        close(sup_diag_fd);
    sup_diag_fd = diag_fd;
}

static int respond_val(int fd, uint64_t id, int error, bool cont, int64_t val)
{
    struct seccomp_notif_resp *r = calloc(1, sizes.seccomp_notif_resp);
    int rc;

    if (r == NULL)
        return -1;
    r->id = id;
    r->error = error ? -error : 0;
    r->val = error ? 0 : val;
    r->flags = cont ? SECCOMP_USER_NOTIF_FLAG_CONTINUE : 0;
    rc = ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, r);
    free(r);
    return rc;
}

static int respond(int fd, uint64_t id, int error, bool cont)
{
    return respond_val(fd, id, error, cont, 0);
}

static bool still_valid(int fd, uint64_t id)
{
    return ioctl(fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

struct verdict_out {
    bool deny;
    int err;
    struct sbx_event_desc ev;
    char rule[512];
    char reason[512];
    char target[PATH_MAX + 16];
    char target2[1024];
    bool report;
    bool egress;                /* an allowed connect or datagram: made by
                                 * sbx-guard (egress.c), to EGRESS_SS */
    struct sockaddr_storage egress_ss;
    socklen_t egress_len;
    uint64_t msg;               /* sendmsg/sendmmsg: the msghdr's address */
};

static void from_policy(struct verdict_out *o, const struct policy_verdict *v)
{
    o->deny = v->decision == SBX_DENY;
    o->ev.decision = v->decision;
    if (v->audit)
        o->ev.flags |= SBX_EVF_AUDIT;
    if (v->rule && policy_rule_format(v->rule, o->rule, sizeof o->rule) == 0)
        o->ev.rule = o->rule;
    if (v->reason) {
        if (v->audit && strncmp(v->reason, "audit:", 6) != 0)
            snprintf(o->reason, sizeof o->reason, "audit: %s", v->reason);
        else
            strlcpy(o->reason, v->reason, sizeof o->reason);
        o->ev.reason = o->reason;
    }
}

static void cmdline(char *const *argv, char *out, size_t outsz)
{
    out[0] = '\0';
    for (size_t i = 0; argv[i]; i++) {
        if (i)
            strlcat(out, " ", outsz);
        strlcat(out, argv[i], outsz);
    }
}

static void decide_exec(const struct iso_request *req, const struct seccomp_notif *n,
                        struct verdict_out *o, int *fault)
{
    pid_t pid = (pid_t)n->pid;
    bool at = n->data.nr == SYS_execveat;
    uint64_t path_p = at ? n->data.args[1] : n->data.args[0];
    uint64_t argv_p = at ? n->data.args[2] : n->data.args[1];
    int dirfd = at ? (int)n->data.args[0] : AT_FDCWD;
    int flags = at ? (int)n->data.args[4] : 0;
    static struct argv_buf ab;
    char path[PATH_MAX], base[PATH_MAX];
    char *const *argv;
    struct policy_verdict v;

    o->ev.op = SBX_OP_EXEC;
    if (read_str(pid, path_p, path, sizeof path) < 0 || read_argv(pid, argv_p, &ab) < 0) {
        *fault = errno == ENAMETOOLONG ? ENAMETOOLONG : EFAULT;
        return;
    }
    argv = ab.argv;
    if (at && path[0] == '\0' && (flags & AT_EMPTY_PATH)) {
        char what[32];
        snprintf(what, sizeof what, "fd/%d", dirfd);
        if (proc_link(pid, what, o->target, sizeof o->target) < 0) {
            *fault = EBADF;
            return;
        }
    } else {
        char what[32];
        if (dirfd == AT_FDCWD)
            strlcpy(what, "cwd", sizeof what);
        else
            snprintf(what, sizeof what, "fd/%d", dirfd);
        base[0] = '\0';
        if (path[0] != '/' && proc_link(pid, what, base, sizeof base) < 0) {
            *fault = EBADF;
            return;
        }
        resolve_in(pid, base, path, o->target, sizeof o->target);
    }
    /* Nothing there (a shell trying each PATH entry): the kernel answers
     * ENOENT itself, and a refusal would turn "not found" into "permission
     * denied" and stop the search. */
    if (!is_memfd(o->target)) {
        char host[PATH_MAX + 64];
        struct stat st;
        snprintf(host, sizeof host, "/proc/%d/root%s", (int)pid, o->target);
        if (stat(host, &st) < 0 && (errno == ENOENT || errno == ENOTDIR))
            return;
    }
    o->ev.target = o->target;
    cmdline(argv, o->target2, sizeof o->target2);
    o->ev.target2 = o->target2;
    o->report = true;

    if (is_memfd(o->target)) {
        o->deny = true;
        o->ev.decision = SBX_DENY;
        o->ev.reason = "exec of an anonymous memory file (memfd) is never allowed";
        return;
    }
    /* ld.so PROG: judged as running PROG (the kernel only sees ld.so). */
    if (is_loader(o->target)) {
        int i = loader_program(argv);
        if (i > 0) {
            char cwd[PATH_MAX] = "";
            if (argv[i][0] != '/' && proc_link(pid, "cwd", cwd, sizeof cwd) < 0)
                cwd[0] = '\0';
            resolve_in(pid, cwd, argv[i], o->target, sizeof o->target);
            argv = ab.argv + i;
            if (is_memfd(o->target)) {
                o->deny = true;
                o->ev.decision = SBX_DENY;
                o->ev.reason = "exec of an anonymous memory file (memfd) is never allowed";
                return;
            }
        }
    }
    policy_decide_exec(req->policy, o->target, argv, &v);
    from_policy(o, &v);
}

static bool is_loopback_addr(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
    if (ss->ss_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
        /* ::ffff:127.x.y.z, what a dual-stack socket connects to */
        return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return false;
}

/* Could a host-name rule of the allow list match a connection to SS:PORT
 * whose name we do not know?  "localhost" names only loopback addresses. */
static bool host_rule_may_match(const struct policy *p, const struct sockaddr_storage *ss,
                                int port)
{
    const struct policy_rule *r;
    size_t n = policy_rules(p, POLICY_CONNECT_ALLOW, &r);

    for (size_t i = 0; i < n; i++) {
        if (r[i].net_kind != POLICY_NET_HOST)
            continue;
        if (r[i].port_lo >= 0 && (port < r[i].port_lo || port > r[i].port_hi))
            continue;
        if (strncmp(r[i].text, "localhost", 9) == 0
            && (r[i].text[9] == '\0' || r[i].text[9] == ':') && !is_loopback_addr(ss))
            continue;
        return true;
    }
    return false;
}

static bool policy_has_host_rule(const struct policy *p)
{
    const struct policy_rule *r;
    size_t n = policy_rules(p, POLICY_CONNECT_ALLOW, &r);

    for (size_t i = 0; i < n; i++)
        if (r[i].net_kind == POLICY_NET_HOST)
            return true;
    return false;
}

/* Whether the agent's net namespace has a socket listening (TCP) or bound
 * and unconnected (UDP) on loopback address SS's port, on that address or
 * a wildcard: the agent's own server (a dev server, a test's fixture),
 * which its connects must reach inside, not the host's.  Asked through a
 * NETLINK_SOCK_DIAG socket the sandbox's init opened in that namespace
 * (sup_diag_fd): a dump of listening sockets only walks the listening
 * table, where /proc/PID/net/tcp walks every socket of the machine. */
static bool diag_match(int fd, int family, int proto, const unsigned char *want, int want_fam,
                       int port)
{
    struct {
        struct nlmsghdr nh;
        struct inet_diag_req_v2 r;
    } req;
    static char buf[32768];
    bool found = false, done = false;

    memset(&req, 0, sizeof req);
    req.nh.nlmsg_len = sizeof req;
    req.nh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    req.r.sdiag_family = (uint8_t)family;
    req.r.sdiag_protocol = (uint8_t)proto;
    req.r.idiag_states = proto == IPPROTO_TCP ? 1u << 10 : 1u << 7;  /* LISTEN, CLOSE */
    if (send(fd, &req, sizeof req, 0) < 0)
        return false;
    while (!done) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0)
            break;
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
             h = NLMSG_NEXT(h, n)) {
            if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) {
                done = true;
                break;
            }
            const struct inet_diag_msg *m = NLMSG_DATA(h);
            const unsigned char *a = (const unsigned char *)m->id.idiag_src;
            bool any = true;
            if (ntohs(m->id.idiag_sport) != port || found)
                continue;
            for (int i = 0; i < (family == AF_INET ? 4 : 16); i++)
                any = any && a[i] == 0;
            /* a wildcard (:: takes IPv4 too, unless V6ONLY), the address
             * itself, or the address as IPv4-mapped */
            if (any || (family == want_fam && memcmp(a, want, family == AF_INET ? 4 : 16) == 0)
                || (family == AF_INET6 && want_fam == AF_INET
                    && IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)a)
                    && memcmp(a + 12, want, 4) == 0))
                found = true;
        }
    }
    return found;
}

static bool agent_listens(const struct sockaddr_storage *ss, bool dgram)
{
    unsigned char want[16];
    int want_fam, port, proto = dgram ? IPPROTO_UDP : IPPROTO_TCP;

    if (sup_diag_fd < 0)
        return false;
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
        want_fam = AF_INET;
        memcpy(want, &in->sin_addr, 4);
        port = ntohs(in->sin_port);
    } else {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
        port = ntohs(in6->sin6_port);
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
            want_fam = AF_INET;
            memcpy(want, in6->sin6_addr.s6_addr + 12, 4);
        } else {
            want_fam = AF_INET6;
            memcpy(want, &in6->sin6_addr, 16);
        }
    }
    return (want_fam == AF_INET && diag_match(sup_diag_fd, AF_INET, proto, want, want_fam, port))
           || diag_match(sup_diag_fd, AF_INET6, proto, want, want_fam, port);
}

/* An allowed connect or datagram is made by sbx-guard in the host's
 * namespace (egress.c): the agent's own namespace has only its own `lo`.
 * Without one (a policy that binds beyond loopback), still for loopback
 * connects and every datagram: then what was judged is what is used. */
static void mark_egress(struct verdict_out *o, bool send, const struct sockaddr_storage *ss,
                        socklen_t len, bool dgram_hint)
{
    if (o->deny || (ss->ss_family != AF_INET && ss->ss_family != AF_INET6))
        return;
    if (!sup_netns && !send && !is_loopback_addr(ss))
        return;
    /* The agent's own server, in its own namespace: reached there (the
     * kernel carries on; nothing outside is touched). */
    if (sup_netns && is_loopback_addr(ss) && agent_listens(ss, dgram_hint)) {
        strlcpy(o->reason, "the agent's own server, in its own net namespace", sizeof o->reason);
        o->ev.reason = o->reason;
        return;
    }
    o->egress = true;
    memcpy(&o->egress_ss, ss, sizeof *ss);
    o->egress_len = len;
}

/* connect(fd, addr, len) and sendto(fd, buf, n, flags, addr, len): the
 * address is judged by network.connect (op connect or send). */
/* The DNS stub's own address, in the agent's namespace. */
static bool is_stub(const struct sockaddr_storage *ss)
{
    struct in_addr stub;
    uint32_t a;
    int port;

    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
        a = in->sin_addr.s_addr;
        port = ntohs(in->sin_port);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
        if (!IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
            return false;
        memcpy(&a, in6->sin6_addr.s6_addr + 12, 4);
        port = ntohs(in6->sin6_port);
    } else {
        return false;
    }
    return inet_pton(AF_INET, ISO_DNS_STUB_ADDR, &stub) == 1 && a == stub.s_addr
           && port == ISO_DNS_STUB_PORT;
}

/* Where the address of a sendmsg/sendmmsg is: the first message's
 * msg_name (sendmmsg: every message is judged in decide_mmsg).  0, 1 when
 * there is none (the datagram goes where the socket is connected), or -1
 * (unreadable). */
static int msg_name_of(pid_t pid, uint64_t msg, uint64_t *addr, socklen_t *len)
{
    struct msghdr h = { 0 };

    if (read_mem(pid, msg, &h, sizeof h) != (ssize_t)sizeof h)
        return -1;
    if (h.msg_name == NULL || h.msg_namelen == 0)
        return 1;
    *addr = (uint64_t)(uintptr_t)h.msg_name;
    *len = h.msg_namelen;
    return 0;
}

static void decide_connect(const struct iso_request *req, const struct seccomp_notif *n,
                           struct verdict_out *o, int *fault)
{
    pid_t pid = (pid_t)n->pid;
    long nr = (long)n->data.nr;
    bool send = nr != SYS_connect;
    enum sbx_op op = send ? SBX_OP_SEND : SBX_OP_CONNECT;
    uint64_t addr = send ? n->data.args[4] : n->data.args[1];
    struct sockaddr_storage ss;
    socklen_t len = (socklen_t)(send ? n->data.args[5] : n->data.args[2]);
    struct policy_verdict v;
    int port = -1;

    if (nr == SYS_sendmsg || nr == SYS_sendmmsg) {
        /* sendmmsg: the first message's address here; the others are
         * judged when they are sent (one message per answer, see
         * supervise). */
        uint64_t m = n->data.args[1];
        int r = msg_name_of(pid, m, &addr, &len);
        if (r < 0) {
            *fault = EFAULT;
            return;
        }
        if (nr == SYS_sendmmsg) {
            /* Any address in the batch stops it here; a batch whose first
             * message has none but a later one has is refused (judging it
             * would need every message sent by sbx-guard). */
            unsigned vlen = n->data.args[2] > 1024 ? 1024 : (unsigned)n->data.args[2];
            bool later = false;
            for (unsigned i = 1; i < vlen && !later; i++) {
                uint64_t a2;
                socklen_t l2;
                int r2 = msg_name_of(pid, m + i * sizeof(struct mmsghdr), &a2, &l2);
                if (r2 < 0) {
                    *fault = EFAULT;
                    return;
                }
                later = r2 == 0;
            }
            if (r == 1 && later) {
                o->ev.op = op;
                strlcpy(o->target, "sendmmsg", sizeof o->target);
                o->ev.target = o->target;
                o->report = true;
                o->deny = true;
                o->ev.decision = SBX_DENY;
                o->ev.reason = "sendmmsg whose first message has no address and a later one "
                               "has: not judged by the supervisor, refused";
                return;
            }
        }
        if (r == 1)
            return;             /* no address: the socket's own peer */
        o->msg = m;
    }
    o->ev.op = op;
    if (len > sizeof ss)
        len = sizeof ss;
    memset(&ss, 0, sizeof ss);
    if (len < sizeof(sa_family_t)
        || read_mem(pid, addr, &ss, len) != (ssize_t)len) {
        *fault = EFAULT;
        return;
    }
    switch (ss.ss_family) {
    case AF_INET: {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        char ip[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
        port = ntohs(a->sin_port);
        snprintf(o->target, sizeof o->target, "%s:%d", ip, port);
        break;
    }
    case AF_INET6: {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        char ip[INET6_ADDRSTRLEN];
        inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof ip);
        port = ntohs(a->sin6_port);
        snprintf(o->target, sizeof o->target, "[%s]:%d", ip, port);
        break;
    }
    case AF_UNIX: {
        struct sockaddr_un *a = (struct sockaddr_un *)&ss;
        size_t pl = len > offsetof(struct sockaddr_un, sun_path)
                    ? len - offsetof(struct sockaddr_un, sun_path) : 0;
        char p[sizeof a->sun_path + 1], cwd[PATH_MAX], events[PATH_MAX];
        cwd[0] = '\0';         /* proc_link fills it; read only for a relative p */
        memcpy(p, a->sun_path, pl < sizeof a->sun_path ? pl : sizeof a->sun_path);
        p[pl < sizeof a->sun_path ? pl : sizeof a->sun_path] = '\0';
        if (pl > 0 && a->sun_path[0] == '\0') {
            /* Abstract: Landlock's scope (ABI 6) and the net namespace keep
             * these inside; the policy has no name for them. */
            snprintf(o->target, sizeof o->target, "unix:@%s", p + 1);
            break;
        }
        /* As the policy does: symlinks resolved (/var/run -> /run). */
        if (p[0] == '/' || proc_link(pid, "cwd", cwd, sizeof cwd) == 0) {
            char real[PATH_MAX];
            resolve_in(pid, p[0] == '/' ? "" : cwd, p, real, sizeof real);
            strlcpy(p, real, sizeof p);
        }
        snprintf(events, sizeof events, "%s/%s", req->runtime_dir ? req->runtime_dir : "",
                 SBX_EVENTS_SOCK);
        /* sbx's own event channel: every guarded process connects once. */
        if (req->runtime_dir && strcmp(p, events) == 0)
            return;
        snprintf(o->target, sizeof o->target, "unix:%s", p);
        /* control.sock and anything else of sbx's: never the agent's,
         * whatever the policy's unix: rules say (the mounts hide them too). */
        if (req->runtime_dir && policy_path_under(p, req->runtime_dir)) {
            o->ev.target = o->target;
            o->report = true;
            o->deny = true;
            o->ev.decision = SBX_DENY;
            o->ev.reason = "sbx's runtime directory: only events.sock is reachable from inside";
            return;
        }
        if (p[0] == '/') {
            struct sockaddr_un u;
            memset(&u, 0, sizeof u);
            u.sun_family = AF_UNIX;
            strlcpy(u.sun_path, p, sizeof u.sun_path);
            memcpy(&ss, &u, sizeof u);
            len = sizeof u;
        }
        break;
    }
    case AF_UNSPEC:             /* dissolves a datagram association */
    case AF_NETLINK:            /* the kernel itself, not the network */
        return;
    default:
        snprintf(o->target, sizeof o->target, "family:%d", ss.ss_family);
        o->ev.target = o->target;
        o->report = true;
        o->deny = true;
        o->ev.decision = SBX_DENY;
        o->ev.reason = "address family not allowed by the supervisor";
        return;
    }
    /* The agent's own resolver, in its own namespace: nothing to judge
     * (the stub judges each name). */
    if (sup_netns && is_stub(&ss))
        return;
    o->ev.target = o->target;
    o->report = true;
    policy_decide_net(req->policy, op, (struct sockaddr *)&ss, len, NULL, &v);
    if (sup_netns && (ss.ss_family == AF_INET || ss.ss_family == AF_INET6)) {
        /* The names the DNS stub resolved to this address for the agent
         * (and the allowed names of /etc/hosts): a host-name rule holds
         * through them.  An explicit deny rule on the address stays. */
        static char names[8][ISO_DNS_NAME];
        size_t nn = iso_dns_names((struct sockaddr *)&ss, names, 8);
        if (nn > 0) {
            strlcpy(o->target2, names[0], sizeof o->target2);
            o->ev.target2 = o->target2;
        }
        for (size_t i = 0; i < nn && v.decision == SBX_DENY
                           && v.rule->list != POLICY_CONNECT_DENY; i++) {
            struct policy_verdict vn;
            policy_decide_net(req->policy, op, (struct sockaddr *)&ss, len, names[i], &vn);
            if (vn.decision == SBX_ALLOW || vn.rule->list == POLICY_CONNECT_DENY) {
                v = vn;
                strlcpy(o->target2, names[i], sizeof o->target2);
            }
        }
        from_policy(o, &v);
        if (o->deny && nn == 0 && v.rule->list != POLICY_CONNECT_DENY && port >= 0
            && host_rule_may_match(req->policy, &ss, port)) {
            o->ev.reason = "no name an allowed rule names was resolved to this address "
                           "through sbx's resolver";
        }
        mark_egress(o, send, &ss, len, send);
        return;
    }
    from_policy(o, &v);
    /* Only an address is known here, never the name it came from: a denial
     * for want of an allow rule may be wrong if a host-name rule could
     * match this port.  Then carry on (the guard, which sees the name,
     * decides) and say so; explicit deny rules stay refused. */
    mark_egress(o, send, &ss, len, send);
    if (o->deny && (ss.ss_family == AF_INET || ss.ss_family == AF_INET6)
        && v.rule && v.rule->list != POLICY_CONNECT_DENY && port >= 0) {
        if (host_rule_may_match(req->policy, &ss, port)) {
            o->deny = false;
            o->ev.decision = SBX_ALLOW;
            o->ev.reason = "address only: a host-name rule may match this port (the guard decides by name)";
        } else if (port == 53 && policy_has_host_rule(req->policy)) {
            o->deny = false;
            o->ev.decision = SBX_ALLOW;
            o->ev.reason = "name resolution for host-name rules";
        }
    }
}

/* The answer to an open (supervise_open.c): the descriptor it opened
 * handed in, which also answers the call (the fd number is what the
 * agent's open returns), or a refusal, or carry on. */
static int answer_open(int fd, const struct seccomp_notif *n, struct iso_open_answer *oa,
                       struct verdict_out *o, iso_event_cb cb, void *ctx)
{
    int rc = 0;

    /* No SECCOMP_IOCTL_NOTIF_ID_VALID first: nothing read from the
     * caller's memory is trusted here (the file handed in was judged by
     * what it is), and ADDFD and SEND fail with ENOENT for a call that is
     * gone.  One system call less on every open. */
    if (oa->fd >= 0) {
        struct seccomp_notif_addfd add = {
            .id = n->id,
            .flags = SECCOMP_ADDFD_FLAG_SEND,
            .srcfd = (__u32)oa->fd,
            .newfd = 0,
            .newfd_flags = oa->fd_flags,
        };
        if (ioctl(fd, SECCOMP_IOCTL_NOTIF_ADDFD, &add) >= 0 || errno == ENOENT)
            goto out;
        /* Not installed (EMFILE: the agent's own limit): answered as the
         * kernel would have. */
        oa->err = errno == EMFILE || errno == ENFILE ? errno : EMFILE;
    }
    if (o->report && oa->err)
        o->ev.err = oa->err;
    if (respond(fd, n->id, oa->err, oa->err == 0) < 0 && errno != ENOENT)
        rc = -1;
    if (rc == 0 && o->report && cb)
        cb(ctx, &o->ev);
out:
    if (oa->fd >= 0)
        close(oa->fd);
    return rc;
}

#define SEND_MAX    65536u      /* the largest datagram (UDP: 65,507) */
#define SEND_IOV    64
#define SEND_CTL    1024

/* Reads the iovec array IOV (N entries) of the agent into DATA (at most
 * SEND_MAX bytes: a datagram cannot be longer).  Bytes, -1 (unreadable) or
 * -2 (more than a datagram holds, or more than SEND_IOV pieces). */
static ssize_t read_iov(pid_t pid, uint64_t iov, size_t n, char *data)
{
    struct iovec v[SEND_IOV];
    size_t got = 0;

    if (n > SEND_IOV)
        return -2;
    if (n && read_direct(pid, iov, v, n * sizeof v[0]) != (ssize_t)(n * sizeof v[0]))
        return -1;
    for (size_t i = 0; i < n; i++) {
        size_t l = v[i].iov_len;
        if (l > SEND_MAX - got)
            return -2;          /* EMSGSIZE for a datagram anyway */
        if (l && read_direct(pid, (uint64_t)(uintptr_t)v[i].iov_base, data + got, l)
                     != (ssize_t)l)
            return -1;
        got += l;
    }
    return (ssize_t)got;
}

/* An allowed datagram (sendto, sendmsg, or the first message of a
 * sendmmsg), sent by sbx-guard (egress.c) with the data and control read
 * from the agent now and the address judged.  0 (decided: *VAL, or *ERR),
 * -1 (not a datagram socket: let the kernel answer), -2 (unreadable).
 * Never "carry on" for what is too big to copy: on a socket of ours a
 * racing thread could then change the address after the check. */
static int egress_send(int fd, const struct seccomp_notif *n, struct verdict_out *o,
                       int64_t *val, int *err)
{
    static char data[SEND_MAX];
    static char ctl[SEND_CTL];
    pid_t pid = (pid_t)n->pid;
    struct msghdr m;
    struct iovec iov;
    ssize_t len, sent;
    int flags;

    memset(&m, 0, sizeof m);
    if (n->data.nr == SYS_sendto) {
        if (n->data.args[2] > SEND_MAX) {
            *err = EMSGSIZE;
            return 0;
        }
        len = (ssize_t)n->data.args[2];
        if (len && read_direct(pid, n->data.args[1], data, (size_t)len) != len)
            return -2;
        flags = (int)n->data.args[3];
    } else {
        struct msghdr h = { 0 };
        if (read_direct(pid, o->msg, &h, sizeof h) != (ssize_t)sizeof h)
            return -2;
        if ((len = read_iov(pid, (uint64_t)(uintptr_t)h.msg_iov, h.msg_iovlen, data)) < 0) {
            if (len == -1)
                return -2;
            *err = EMSGSIZE;
            return 0;
        }
        if (h.msg_controllen > SEND_CTL) {
            *err = ENOBUFS;
            return 0;
        }
        if (h.msg_controllen && read_direct(pid, (uint64_t)(uintptr_t)h.msg_control, ctl,
                                            h.msg_controllen) != (ssize_t)h.msg_controllen)
            return -2;
        m.msg_control = h.msg_controllen ? ctl : NULL;
        m.msg_controllen = h.msg_controllen;
        flags = (int)(n->data.nr == SYS_sendmsg ? n->data.args[2] : n->data.args[3]);
    }
    iov.iov_base = data;
    iov.iov_len = (size_t)len;
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_name = &o->egress_ss;
    m.msg_namelen = o->egress_len;
    if (iso_egress_sendto(fd, n->id, pid, (int)n->data.args[0], &m, flags, &sent, err) < 0)
        return -1;
    *val = sent;
    if (*err == 0 && n->data.nr == SYS_sendmmsg) {
        /* One message sent: sendmmsg returns 1 and the caller sends the
         * rest (each judged in turn).  Its msg_len is the agent's to read. */
        unsigned ml = (unsigned)sent;
        struct iovec l = { &ml, sizeof ml };
        struct iovec r = { (void *)(uintptr_t)(o->msg + offsetof(struct mmsghdr, msg_len)),
                           sizeof ml };
        if (process_vm_writev(pid, &l, 1, &r, 1, 0) != (ssize_t)sizeof ml)
            return -2;
        *val = 1;
    }
    return 0;
}

static int supervise(int fd, const struct iso_request *req, iso_event_cb cb, void *ctx)
{
    static struct seccomp_notif *n;
    struct iso_open_answer oa;
    struct verdict_out o;
    struct pollfd pf = { fd, POLLIN, 0 };
    int fault = 0;

    if (sizes.seccomp_notif == 0) {
        if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) < 0)
            return -1;
        if (sizes.seccomp_notif < sizeof(struct seccomp_notif))
            sizes.seccomp_notif = sizeof(struct seccomp_notif);
        if (sizes.seccomp_notif_resp < sizeof(struct seccomp_notif_resp))
            sizes.seccomp_notif_resp = sizeof(struct seccomp_notif_resp);
    }
    if (n == NULL && (n = malloc(sizes.seccomp_notif)) == NULL)
        return -1;
    /* Every process of the agent has exited: the fd only reports hang-up. */
    if (poll(&pf, 1, 0) == 1 && (pf.revents & (POLLHUP | POLLERR)) && !(pf.revents & POLLIN))
        return -1;
    memset(n, 0, sizes.seccomp_notif);
    if (ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, n) < 0) {
        if (errno == EINTR || errno == ENOENT)
            return 0;           /* the caller was killed, or a signal came */
        return -1;
    }
    pages_forget();             /* what we read for the last one is stale */
    memset(&o, 0, sizeof o);
    o.ev.layer = SBX_LAYER_SUPERVISOR;
    o.ev.decision = SBX_ALLOW;
    if (n->data.arch != AUDIT_ARCH_X86_64) {
        /* The filter kills other architectures; nothing can arrive here. */
        respond(fd, n->id, EPERM, false);
        return 0;
    }
    switch (n->data.nr) {
    case SYS_execve:
    case SYS_execveat:
        decide_exec(req, n, &o, &fault);
        break;
    case SYS_connect:
    case SYS_sendto:
    case SYS_sendmsg:
    case SYS_sendmmsg:
        decide_connect(req, n, &o, &fault);
        break;
    case SYS_open:
    case SYS_openat:
    case SYS_openat2:
    case SYS_creat:
        iso_answer_open(req, (pid_t)n->pid, (long)n->data.nr, n->data.args, &oa, &o.report,
                        &o.ev, o.target, sizeof o.target);
        return answer_open(fd, n, &oa, &o, cb, ctx);
    default:
        break;
    }
    /* What we read is only meaningful if the caller is still in that
     * system call (its memory could belong to a new image otherwise). */
    if (!still_valid(fd, n->id))
        return 0;
    if (fault) {
        /* Unreadable arguments: the kernel would fail the call the same
         * way; let it (nothing to judge, nothing allowed by us). */
        respond(fd, n->id, 0, true);
        return 0;
    }
    if (!o.deny && o.egress) {
        int e = 0, r;
        bool cont = false;
        int64_t val = 0;
        if (n->data.nr == SYS_connect)
            r = iso_egress_connect(fd, n->id, (pid_t)n->pid, (int)n->data.args[0],
                                   (struct sockaddr *)&o.egress_ss, o.egress_len, &e, &cont);
        else
            r = egress_send(fd, n, &o, &val, &e);
        if (r == 0) {
            if (respond_val(fd, n->id, e == EINPROGRESS || cont ? (cont ? 0 : e) : e, cont,
                            val) < 0 && errno != ENOENT)
                return -1;
            o.ev.err = e == EINPROGRESS ? 0 : e;
            if (o.report && cb)
                cb(ctx, &o.ev);
            return 0;
        }
        if (r == -2) {
            /* The data could not be read: the kernel would fail the same. */
            respond(fd, n->id, EFAULT, false);
            return 0;
        }
    }
    if (o.deny)
        o.ev.err = EACCES;
    /* Answer first, record second: the agent waits in the kernel for the
     * answer, and recording is a round trip to sbx-auditd.  Nothing the
     * agent does after the answer can touch the record (it is sbx-guard's). */
    if (respond(fd, n->id, o.deny ? EACCES : 0, !o.deny) < 0 && errno != ENOENT)
        return -1;
    if (o.report && cb)
        cb(ctx, &o.ev);
    return 0;
}

int iso_supervise(int notify_fd, const struct iso_request *req,
                  iso_event_cb cb, void *ctx)
{
    return supervise(notify_fd, req, cb, ctx);
}

int iso_supervise_quiet(int fd, const struct iso_request *req)
{
    return supervise(fd, req, NULL, NULL);
}
