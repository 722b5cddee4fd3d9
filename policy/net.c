/* net.c — network rules: parsing "host:port", "ip:port", "CIDR[:port]",
 * "[v6]:port", "unix:/glob", "*", and deciding connect/send/bind
 * (policy.h).  Deciding allocates nothing and makes no system call. */
#include "internal.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>
#include <linux/netlink.h>

#include <bsd/stdlib.h>

/* What a connect/bind is about, in the form the rules compare. */
struct net_subject {
    bool have_addr;
    int family;
    unsigned char addr[16];
    int port;                   /* -1: unknown */
    const char *host;           /* NULL: unknown */
    const char *unix_path;      /* AF_UNIX: "/path" or "@abstract" */
    struct glob_path unix_gp;
};

static const char *parse_port(const char *s, struct policy_rule *r)
{
    const char *dash;
    char buf[16];
    const char *errstr;
    long long lo, hi;

    if (strcmp(s, "*") == 0) {
        r->port_lo = r->port_hi = -1;
        return NULL;
    }
    if (*s == '\0')
        return "empty port (write a number, a range like 8000-8999, or *)";
    dash = strchr(s, '-');
    if (dash != NULL) {
        size_t n = (size_t)(dash - s);
        if (n == 0 || n >= sizeof(buf))
            return "bad port range";
        memcpy(buf, s, n);
        buf[n] = '\0';
        lo = strtonum(buf, 0, 65535, &errstr);
        if (errstr != NULL)
            return "bad port range (ports are 0-65535)";
        hi = strtonum(dash + 1, 0, 65535, &errstr);
        if (errstr != NULL)
            return "bad port range (ports are 0-65535)";
        if (hi < lo)
            return "bad port range (the first port is larger than the second)";
    } else {
        for (const char *q = s; *q; q++)
            if (!isdigit((unsigned char)*q))
                return "bad port (write a number 0-65535, a range like 8000-8999, or *)";
        lo = hi = strtonum(s, 0, 65535, &errstr);
        if (errstr != NULL)
            return "port out of range (0-65535)";
    }
    r->port_lo = (int)lo;
    r->port_hi = (int)hi;
    return NULL;
}

/* An address, possibly "/len": IP or CIDR.  Returns 1 if it is one, 0 if it
 * does not look like an address, -1 (with *msg) if it is a bad one. */
static int parse_addr(const char *s, bool bracketed, struct policy_rule *r,
                      struct net_match *m, const char **msg)
{
    char buf[INET6_ADDRSTRLEN + 8];
    const char *slash = strchr(s, '/');
    size_t n = slash ? (size_t)(slash - s) : strlen(s);
    bool looks_v4 = true;

    if (n >= sizeof(buf)) {
        if (bracketed) {
            *msg = "bad IPv6 address";
            return -1;
        }
        return 0;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)buf[i]) && buf[i] != '.')
            looks_v4 = false;
    if (inet_pton(AF_INET, buf, m->addr) == 1) {
        m->family = AF_INET;
        m->prefix = 32;
    } else if (inet_pton(AF_INET6, buf, m->addr) == 1) {
        m->family = AF_INET6;
        m->prefix = 128;
        if (IN6_IS_ADDR_V4MAPPED((struct in6_addr *)m->addr)) {
            /* judged as IPv4, like the addresses it will be compared with */
            memmove(m->addr, m->addr + 12, 4);
            m->family = AF_INET;
            m->prefix = 32;
        }
    } else {
        if (bracketed || (looks_v4 && n > 0) || slash != NULL) {
            *msg = slash ? "bad CIDR (write e.g. 10.0.0.0/8 or [fd00::]/8)" :
                   bracketed ? "bad IPv6 address" : "bad IP address";
            return -1;
        }
        return 0;
    }
    r->net_kind = POLICY_NET_IP;
    if (slash != NULL) {
        const char *errstr;
        long long bits = strtonum(slash + 1, 0, m->family == AF_INET ? 32 : 128, &errstr);
        if (errstr != NULL) {
            *msg = "bad CIDR prefix length (0-32 for IPv4, 0-128 for IPv6)";
            return -1;
        }
        m->prefix = (unsigned)bits;
        r->net_kind = POLICY_NET_CIDR;
    }
    return 1;
}

static const char *parse_host(struct arena *a, const char *s, struct policy_rule *r,
                              struct net_match *m)
{
    size_t n = strlen(s);
    char *h;

    if (n > 0 && s[n - 1] == '.')
        n--;
    if (n == 0)
        return "empty host";
    if (n > 253)
        return "host name too long";
    if (s[0] == '*') {
        if (n < 3 || s[1] != '.')
            return "a wildcard host is written \"*.example.com\"";
        m->host_wild = true;
        s++;
        n--;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!isalnum(c) && c != '-' && c != '.' && c != '_')
            return c == '*' ? "\"*\" is allowed only as the first label of a host (\"*.example.com\")"
                            : "bad character in host name";
    }
    h = arena_strndup(a, s, n);
    if (h == NULL)
        return "out of memory";
    for (char *q = h; *q; q++)
        *q = (char)tolower((unsigned char)*q);
    m->host = h;
    r->net_kind = POLICY_NET_HOST;
    return NULL;
}

const char *net_parse(struct arena *a, const char *text, struct policy_rule *r,
                      struct net_match *m, const char **unix_text)
{
    char host[300];
    const char *port = NULL, *msg = NULL;
    bool bracketed = false;
    size_t n;

    *unix_text = NULL;
    r->port_lo = r->port_hi = -1;
    if (strncmp(text, "unix:", 5) == 0) {
        if (text[5] == '\0')
            return "empty unix: rule (write unix:/path or unix:@abstract-name)";
        r->net_kind = POLICY_NET_UNIX;
        *unix_text = text + 5;
        return NULL;
    }
    n = strlen(text);
    if (n == 0)
        return "empty network rule";
    if (n >= sizeof(host))
        return "network rule too long";
    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (close == NULL)
            return "unclosed \"[\" in IPv6 address";
        memcpy(host, text + 1, (size_t)(close - text - 1));
        host[close - text - 1] = '\0';
        bracketed = true;
        if (close[1] == ':')
            port = close + 2;
        else if (close[1] == '/') {
            /* "[fd00::]/8[:port]" */
            const char *c2 = strchr(close + 1, ':');
            size_t hl = strlen(host);
            size_t pl = c2 ? (size_t)(c2 - close - 1) : strlen(close + 1);
            if (hl + pl + 1 > sizeof(host))
                return "network rule too long";
            memcpy(host + hl, close + 1, pl);
            host[hl + pl] = '\0';
            if (c2 != NULL)
                port = c2 + 1;
        } else if (close[1] != '\0')
            return "expected \":PORT\" after \"]\"";
    } else {
        const char *colon = strchr(text, ':');
        if (colon != NULL && strchr(colon + 1, ':') == NULL) {
            memcpy(host, text, (size_t)(colon - text));
            host[colon - text] = '\0';
            port = colon + 1;
        } else {
            /* no colon, or more than one: a bare IPv6 address, any port */
            memcpy(host, text, n + 1);
        }
    }
    if (port != NULL && (msg = parse_port(port, r)) != NULL)
        return msg;
    if (strcmp(host, "*") == 0) {
        r->net_kind = POLICY_NET_ANY;
        return NULL;
    }
    int rc = parse_addr(host, bracketed, r, m, &msg);
    if (rc < 0)
        return msg;
    if (rc > 0)
        return NULL;
    return parse_host(a, host, r, m);
}

/* ---- deciding ------------------------------------------------------------- */

static bool prefix_equal(const unsigned char *a, const unsigned char *b, unsigned bits)
{
    unsigned bytes = bits / 8, rem = bits % 8;
    if (memcmp(a, b, bytes) != 0)
        return false;
    if (rem == 0)
        return true;
    unsigned char mask = (unsigned char)(0xff << (8 - rem));
    return (a[bytes] & mask) == (b[bytes] & mask);
}

static bool host_match(const struct net_match *m, const char *host)
{
    size_t hn = strlen(host), rn = strlen(m->host);
    if (hn > 0 && host[hn - 1] == '.')
        hn--;
    if (m->host_wild)   /* m->host is ".example.com": a proper subdomain */
        return hn > rn && strncasecmp(host + hn - rn, m->host, rn) == 0;
    return hn == rn && strncasecmp(host, m->host, rn) == 0;
}

/* 127.0.0.0/8 or ::1 (an IPv4-mapped address arrives here as AF_INET). */
static bool subject_is_loopback(const struct net_subject *s)
{
    static const unsigned char lo6[16] = { [15] = 1 };

    if (s->family == AF_INET)
        return s->addr[0] == 127;
    return s->family == AF_INET6 && memcmp(s->addr, lo6, sizeof lo6) == 0;
}

static bool rule_match(const struct policy_rule *r, const struct net_match *m,
                       const struct net_subject *s)
{
    if (r->net_kind == POLICY_NET_UNIX)
        return s->unix_path != NULL && glob_match_compiled(&m->unix_glob, &s->unix_gp);
    if (s->unix_path != NULL)
        return false;
    if (r->port_lo >= 0 && (s->port < r->port_lo || s->port > r->port_hi))
        return false;
    switch (r->net_kind) {
    case POLICY_NET_ANY:
        return true;
    case POLICY_NET_IP:
    case POLICY_NET_CIDR:
        return s->have_addr && s->family == m->family &&
               prefix_equal(s->addr, m->addr, m->prefix);
    case POLICY_NET_HOST:
        /* "localhost" is loopback, whatever the process resolved before
         * (or whether it resolved at all): with an address, the address
         * decides, so the guard (which may know the name), the supervisor
         * (which never does) and explain give one answer. */
        if (!m->host_wild && strcmp(m->host, "localhost") == 0 && s->have_addr)
            return subject_is_loopback(s);
        return s->host != NULL && host_match(m, s->host);
    default:
        return false;
    }
}

static enum sbx_decision decide_subject(const struct policy *p, enum sbx_op op,
                                        const struct net_subject *s,
                                        struct policy_verdict *v)
{
    bool bind = sbx_op_class(op) == SBX_CLASS_BIND;
    enum policy_list dl = bind ? POLICY_BIND_DENY : POLICY_CONNECT_DENY;
    enum policy_list al = bind ? POLICY_BIND_ALLOW : POLICY_CONNECT_ALLOW;

    for (size_t i = 0; i < p->n_rules[dl]; i++)
        if (rule_match(&p->rules[dl][i], &p->nets[dl][i], s))
            return policy_verdict_set(p, v, &p->rules[dl][i], SBX_DENY,
                                      bind ? "matches network.bind.deny"
                                           : "matches network.connect.deny", false);
    for (size_t i = 0; i < p->n_rules[al]; i++)
        if (rule_match(&p->rules[al][i], &p->nets[al][i], s))
            return policy_verdict_set(p, v, &p->rules[al][i], SBX_ALLOW,
                                      bind ? "matches network.bind.allow"
                                           : "matches network.connect.allow", false);
    return policy_verdict_set(p, v, &p->implicit[al], SBX_DENY,
                              bind ? "no network.bind.allow rule matches"
                                   : "no network.connect.allow rule matches", false);
}

enum sbx_decision policy_decide_net(const struct policy *p, enum sbx_op op,
                                    const struct sockaddr *sa, socklen_t salen,
                                    const char *host, struct policy_verdict *v)
{
    struct net_subject s = { .port = -1, .host = host };
    char ubuf[sizeof(((struct sockaddr_un *)0)->sun_path) + 2];

    if (sa == NULL || salen < sizeof(sa_family_t))
        return policy_verdict_set(p, v, &p->net_other_rule, SBX_ALLOW,
                                  "no address: not governed by network rules", false);
    switch (sa->sa_family) {
    case AF_INET: {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        if (salen < sizeof(*in))
            break;
        s.have_addr = true;
        s.family = AF_INET;
        memcpy(s.addr, &in->sin_addr, 4);
        s.port = ntohs(in->sin_port);
        return decide_subject(p, op, &s, v);
    }
    case AF_INET6: {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        if (salen < sizeof(*in6))
            break;
        s.have_addr = true;
        s.port = ntohs(in6->sin6_port);
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
            s.family = AF_INET;
            memcpy(s.addr, in6->sin6_addr.s6_addr + 12, 4);
        } else {
            s.family = AF_INET6;
            memcpy(s.addr, &in6->sin6_addr, 16);
        }
        return decide_subject(p, op, &s, v);
    }
    case AF_UNIX: {
        const struct sockaddr_un *un = (const struct sockaddr_un *)sa;
        size_t n = salen - offsetof(struct sockaddr_un, sun_path);
        if (salen <= offsetof(struct sockaddr_un, sun_path)) {
            n = 0;          /* unnamed (autobind): judged as abstract "@" */
        } else if (n > sizeof(un->sun_path)) {
            n = sizeof(un->sun_path);
        }
        if (n > 0 && un->sun_path[0] != '\0') {
            n = strnlen(un->sun_path, n);
            memcpy(ubuf, un->sun_path, n);
        } else {
            /* abstract: "@name"; NULs inside the name shown as '@' */
            ubuf[0] = '@';
            for (size_t i = 1; i < n; i++)
                ubuf[i] = (char)(un->sun_path[i] ? un->sun_path[i] : '@');
            if (n == 0)
                n = 1;
        }
        ubuf[n] = '\0';
        s.unix_path = ubuf;
        glob_path_init(&s.unix_gp, ubuf);
        return decide_subject(p, op, &s, v);
    }
    default:
        return policy_verdict_set(p, v, &p->net_other_rule, SBX_ALLOW,
                                  "address family not governed by network rules", false);
    }
    return policy_verdict_set(p, v, &p->implicit[sbx_op_class(op) == SBX_CLASS_BIND ?
                                                 POLICY_BIND_ALLOW : POLICY_CONNECT_ALLOW],
                              SBX_DENY, "malformed address", false);
}

int policy_decide_net_text(const struct policy *p, enum sbx_op op,
                           const char *target, struct policy_verdict *v)
{
    struct policy_rule r = { 0 };
    struct net_match m = { 0 };
    struct net_subject s = { .port = -1 };
    struct arena a = { 0 };
    const char *ut, *msg;

    msg = net_parse(&a, target, &r, &m, &ut);
    if (msg != NULL || r.net_kind == POLICY_NET_ANY || r.net_kind == POLICY_NET_CIDR ||
        (r.net_kind != POLICY_NET_UNIX && (r.port_lo < 0 || r.port_lo != r.port_hi))) {
        arena_free(&a);
        errno = EINVAL;
        return -1;
    }
    switch (r.net_kind) {
    case POLICY_NET_UNIX:
        s.unix_path = ut;
        glob_path_init(&s.unix_gp, ut);
        break;
    case POLICY_NET_IP:
        s.have_addr = true;
        s.family = m.family;
        memcpy(s.addr, m.addr, sizeof(s.addr));
        s.port = r.port_lo;
        break;
    default:
        s.host = m.host;
        s.port = r.port_lo;
        break;
    }
    if (m.host_wild) {
        arena_free(&a);
        errno = EINVAL;
        return -1;
    }
    decide_subject(p, op, &s, v);
    arena_free(&a);
    return 0;
}

bool policy_socket_allowed(int family, int protocol)
{
    switch (family) {
    case AF_UNIX:
    case AF_INET:
    case AF_INET6:
        return true;
    case AF_NETLINK:
        return protocol == NETLINK_ROUTE || protocol == NETLINK_SOCK_DIAG;
    default:
        return false;
    }
}
