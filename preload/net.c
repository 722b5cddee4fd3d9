/*
 * net.c — connect, bind and sends with an address (AF_INET, AF_INET6,
 * AF_UNIX; other families pass), and name resolution, whose answers dns.c
 * remembers so that a connect is judged by the name the address came from.
 *
 * A denied call fails with EACCES (the contract allows ECONNREFUSED or
 * EACCES; EACCES says "refused by policy", ECONNREFUSED would look like a
 * closed port) and sends nothing.
 *
 * Name resolution runs inside the guard: what the resolver itself opens or
 * connects to (NSS modules reading /etc, talking to a local resolver) is
 * the system's doing, not the agent's, and a policy that allows
 * "api.openai.com:443" should not also have to list the resolver's socket.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "guard.h"

REAL_SLOT(socket);
REAL_SLOT(connect);
REAL_SLOT(bind);
REAL_SLOT(sendto);
REAL_SLOT(sendmsg);
REAL_SLOT(sendmmsg);
REAL_SLOT(getaddrinfo);
REAL_SLOT(gethostbyname);
REAL_SLOT(gethostbyname2);
REAL_SLOT(gethostbyname_r);
REAL_SLOT(gethostbyname2_r);

static bool guarded_family(const struct sockaddr *sa, socklen_t len)
{
    if (!sa || len < (socklen_t)sizeof(sa_family_t))
        return false;
    return sa->sa_family == AF_INET || sa->sa_family == AF_INET6 || sa->sa_family == AF_UNIX;
}

/* "1.2.3.4:443", "[::1]:80", "unix:/path", "unix:@abstract". */
static void format_addr(const struct sockaddr *sa, socklen_t len, char *out, size_t size)
{
    struct sbuf s;
    char ip[INET6_ADDRSTRLEN];
    sbuf_init(&s, out, size);
    if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = (const void *)sa;
        inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
        sbuf_add(&s, ip);
        sbuf_add(&s, ":");
        sbuf_add_uint(&s, ntohs(in->sin_port));
    } else if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *in6 = (const void *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip);
        sbuf_add(&s, "[");
        sbuf_add(&s, ip);
        sbuf_add(&s, "]:");
        sbuf_add_uint(&s, ntohs(in6->sin6_port));
    } else if (sa->sa_family == AF_UNIX) {
        const struct sockaddr_un *un = (const void *)sa;
        size_t n = len > offsetof(struct sockaddr_un, sun_path)
                       ? (size_t)len - offsetof(struct sockaddr_un, sun_path) : 0;
        if (n > sizeof un->sun_path)
            n = sizeof un->sun_path;
        sbuf_add(&s, "unix:");
        if (n > 0 && un->sun_path[0] == '\0') {
            sbuf_add(&s, "@");
            sbuf_addn(&s, un->sun_path + 1, strnlen(un->sun_path + 1, n - 1));
        } else {
            sbuf_addn(&s, un->sun_path, strnlen(un->sun_path, n));
        }
    } else {
        sbuf_add(&s, "(malformed address)");
    }
}

/* Decides OP to SA and records it.  Entered; does not leave.  0 or the
 * errno to fail with. */
static int judge_addr(enum sbx_op op, const struct sockaddr *sa, socklen_t len)
{
    char target[160], host[256];
    format_addr(sa, len, target, sizeof target);
    const char *name = guard_dns_lookup(sa, host, sizeof host) ? host : NULL;
    struct guard_verdict gv;
    if (!guard_broken(op, target, &gv)) {
        gv.op = op;
        gv.target = target;
        policy_decide_net(guard_policy, op, sa, len, name, &gv.v);
    }
    return guard_record(&gv, name, 0, NULL);
}

/* 127.0.0.53:53 when sbx's DNS stub serves this process (guard_dns_stub):
 * the stub judges each name and records refusals; a resolver library that
 * talks to it through our connect/sendto (c-ares, a static-free Go) must
 * reach it whatever the policy says about port 53. */
static bool is_dns_stub(const struct sockaddr *sa, socklen_t len)
{
    const struct sockaddr_in *in = (const void *)sa;
    return guard_dns_stub && sa->sa_family == AF_INET && len >= (socklen_t)sizeof *in
           && in->sin_addr.s_addr == htonl(0x7f000035u) && in->sin_port == htons(53);
}

static int judge_or_pass(enum sbx_op op, const struct sockaddr *sa, socklen_t len)
{
    if (!guarded_family(sa, len) || is_dns_stub(sa, len) || !guard_enter())
        return 0;
    int saved = errno;
    int err = judge_addr(op, sa, len);
    guard_leave();
    errno = saved;
    return err;
}

/* Sockets of a family no policy rule can name (vsock, packet, bluetooth,
 * ...) are refused before they exist, as the seccomp filter does below the
 * guard (policy_socket_allowed says which). */
SBX_EXPORT int socket(int family, int type, int protocol)
{
    if (policy_socket_allowed(family, protocol))
        return REAL(socket)(family, type, protocol);
    int err = family == AF_NETLINK ? EPROTONOSUPPORT : EAFNOSUPPORT;
    if (guard_enter()) {
        static const struct { int af; const char *name; } names[] = {
            { AF_PACKET, "AF_PACKET" }, { AF_VSOCK, "AF_VSOCK" },
            { AF_BLUETOOTH, "AF_BLUETOOTH" }, { AF_ALG, "AF_ALG" },
            { AF_CAN, "AF_CAN" }, { AF_TIPC, "AF_TIPC" }, { AF_XDP, "AF_XDP" },
            { AF_NETLINK, "AF_NETLINK" }, { AF_KEY, "AF_KEY" }, { AF_RDS, "AF_RDS" },
        };
        char target[64];
        struct sbuf t;
        sbuf_init(&t, target, sizeof target);
        sbuf_add(&t, "socket(");
        const char *name = NULL;
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (names[i].af == family)
                name = names[i].name;
        if (name) {
            sbuf_add(&t, name);
        } else {
            sbuf_add(&t, "family ");
            sbuf_add_uint(&t, (unsigned)family);
        }
        if (family == AF_NETLINK) {
            sbuf_add(&t, ", protocol ");
            sbuf_add_uint(&t, (unsigned)protocol);
        }
        sbuf_add(&t, ")");
        int saved = errno;
        guard_record_plain(SBX_OP_CONNECT, SBX_DENY, target, NULL, err,
                           "an address family no policy rule can allow");
        guard_leave();
        errno = saved;
    }
    errno = err;
    return -1;
}

SBX_EXPORT int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
    int err = judge_or_pass(SBX_OP_CONNECT, sa, len);
    if (err) {
        errno = err;
        return -1;
    }
    return REAL(connect)(fd, sa, len);
}

SBX_EXPORT int bind(int fd, const struct sockaddr *sa, socklen_t len)
{
    int err = judge_or_pass(SBX_OP_BIND, sa, len);
    if (err) {
        errno = err;
        return -1;
    }
    return REAL(bind)(fd, sa, len);
}

SBX_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags,
                          const struct sockaddr *sa, socklen_t len)
{
    int err = sa ? judge_or_pass(SBX_OP_SEND, sa, len) : 0;
    if (err) {
        errno = err;
        return -1;
    }
    return REAL(sendto)(fd, buf, n, flags, sa, len);
}

SBX_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
    int err = msg && msg->msg_name
                  ? judge_or_pass(SBX_OP_SEND, msg->msg_name, msg->msg_namelen) : 0;
    if (err) {
        errno = err;
        return -1;
    }
    return REAL(sendmsg)(fd, msg, flags);
}

/* All or nothing: one denied destination fails the whole call. */
SBX_EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned n, int flags)
{
    for (unsigned i = 0; vec && i < n; i++) {
        const struct msghdr *m = &vec[i].msg_hdr;
        int err = m->msg_name ? judge_or_pass(SBX_OP_SEND, m->msg_name, m->msg_namelen) : 0;
        if (err) {
            errno = err;
            return -1;
        }
    }
    return REAL(sendmmsg)(fd, vec, n, flags);
}

/* ---- name resolution ----------------------------------------------------- */

static bool is_numeric_host(const char *name)
{
    unsigned char buf[16];
    return inet_pton(AF_INET, name, buf) == 1 || inet_pton(AF_INET6, name, buf) == 1;
}

static void remember_hostent(const struct hostent *h, const char *name)
{
    if (!h || !name || is_numeric_host(name))
        return;
    for (char **a = h->h_addr_list; a && *a; a++) {
        if (h->h_addrtype == AF_INET && h->h_length == 4) {
            struct sockaddr_in in = {.sin_family = AF_INET};
            memcpy(&in.sin_addr, *a, 4);
            guard_dns_remember((struct sockaddr *)&in, name);
        } else if (h->h_addrtype == AF_INET6 && h->h_length == 16) {
            struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
            memcpy(&in6.sin6_addr, *a, 16);
            guard_dns_remember((struct sockaddr *)&in6, name);
        }
    }
}

SBX_EXPORT int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                           struct addrinfo **res)
{
    __typeof__(&getaddrinfo) real = REAL(getaddrinfo);
    if (!real)
        return EAI_SYSTEM;
    if (!guard_enter())
        return real(node, service, hints, res);
    int rc = real(node, service, hints, res);
    if (rc == 0 && node && res && !is_numeric_host(node))
        for (const struct addrinfo *ai = *res; ai; ai = ai->ai_next)
            guard_dns_remember(ai->ai_addr, node);
    guard_leave();
    return rc;
}

SBX_EXPORT struct hostent *gethostbyname(const char *name)
{
    __typeof__(&gethostbyname) real = REAL(gethostbyname);
    if (!guard_enter())
        return real(name);
    struct hostent *h = real(name);
    remember_hostent(h, name);
    guard_leave();
    return h;
}

SBX_EXPORT struct hostent *gethostbyname2(const char *name, int af)
{
    __typeof__(&gethostbyname2) real = REAL(gethostbyname2);
    if (!guard_enter())
        return real(name, af);
    struct hostent *h = real(name, af);
    remember_hostent(h, name);
    guard_leave();
    return h;
}

SBX_EXPORT int gethostbyname_r(const char *name, struct hostent *ret, char *buf, size_t buflen,
                               struct hostent **result, int *h_errnop)
{
    __typeof__(&gethostbyname_r) real = REAL(gethostbyname_r);
    if (!guard_enter())
        return real(name, ret, buf, buflen, result, h_errnop);
    int rc = real(name, ret, buf, buflen, result, h_errnop);
    if (rc == 0 && result && *result)
        remember_hostent(*result, name);
    guard_leave();
    return rc;
}

SBX_EXPORT int gethostbyname2_r(const char *name, int af, struct hostent *ret, char *buf,
                                size_t buflen, struct hostent **result, int *h_errnop)
{
    __typeof__(&gethostbyname2_r) real = REAL(gethostbyname2_r);
    if (!guard_enter())
        return real(name, af, ret, buf, buflen, result, h_errnop);
    int rc = real(name, af, ret, buf, buflen, result, h_errnop);
    if (rc == 0 && result && *result)
        remember_hostent(*result, name);
    guard_leave();
    return rc;
}
