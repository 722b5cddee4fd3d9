/*
 * dns_stub.c — the agent's only resolver under native, served by sbx-guard.
 *
 * Under native the agent has its own net namespace with no route out, and
 * its /etc/resolv.conf names ISO_DNS_STUB_ADDR (127.0.0.53) alone.  The
 * sandbox's init binds a UDP socket there, inside the agent's namespace,
 * and hands it to sbx-guard, which reads the agent's queries from it:
 *
 *  - a name no network.connect rule allows (on any port) is answered
 *    NXDOMAIN at once and recorded as a deny row naming it;
 *  - an allowed name is forwarded, with a fresh random id, to the host's
 *    resolver (the first nameserver of the host's /etc/resolv.conf, or
 *    SBX_DNS_UPSTREAM) from sbx-guard's own namespace; the answer goes back
 *    to the agent, and each A/AAAA address in it is remembered with the name
 *    and an expiry.
 *
 * The supervisor asks iso_dns_names() which allowed names an address was
 * resolved from: that is how a host-name rule holds below the guard.  The
 * names of the host's /etc/hosts that the policy allows are remembered for
 * ever at start (glibc reads that file before asking any server).
 *
 * Everything runs in sbx-guard's one thread, between poll() calls:
 * nothing blocks (sockets are non-blocking; a query the host's resolver
 * never answers is forgotten after PENDING_MS, the client retries).
 */
#include "iso_int.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <bsd/stdlib.h>
#include <bsd/string.h>

/* 4096: the largest answer an EDNS0 client asks for in practice (the
 * resolv.conf we write says edns0, glibc then offers 1200). */
#define MSG_MAX     4096
#define PENDING     64
#define PENDING_MS  5000u
/* A resolved address stays usable for its TTL, and at least this long:
 * a CDN answers with TTLs of 0..20 s, and a client connects right after
 * resolving, or after its own cache (Java: 30 s) says so. */
#define TTL_FLOOR_S 60u
#define MEM_SLOTS   2048        /* a busy agent resolves a few hundred names */
#define FOREVER     UINT64_MAX

/* The keys apart from the names: the supervisor scans them on every
 * connect, and 2,048 keys of 32 bytes stay in the cache (with the names
 * beside them the scan touched 570 KB and cost 0.2 ms a connect). */
struct mem_slot {
    uint64_t expires_ms;        /* 0: empty */
    unsigned char family;
    unsigned char addr[16];
};

struct pending {
    bool used;
    uint16_t up_id, agent_id;
    uint16_t qtype;
    uint64_t since_ms;
    struct sockaddr_storage from;
    socklen_t fromlen;
    char name[ISO_DNS_NAME];
};

static struct {
    int agent_fd, up_fd;
    unsigned next_slot;
    struct pending pend[PENDING];
    struct mem_slot mem[MEM_SLOTS];
    char name[MEM_SLOTS][ISO_DNS_NAME];
} stub = { .agent_fd = -1, .up_fd = -1 };

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- messages (RFC 1035 4.1) ---------------------------------------------- */

static uint16_t get16(const unsigned char *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

/* Skips the name at *OFF (labels or a compression pointer), copying it
 * lowercased and dotted into OUT when OUT is given and the name is not
 * compressed.  0, or -1 when malformed or too long. */
static int read_name(const unsigned char *m, size_t n, size_t *off, char *out, size_t outsz)
{
    size_t o = *off, w = 0;

    for (;;) {
        if (o >= n)
            return -1;
        unsigned len = m[o];
        if ((len & 0xc0) == 0xc0) {
            if (o + 2 > n || out)
                return -1;      /* a question is never compressed */
            *off = o + 2;
            return 0;
        }
        if (len & 0xc0)
            return -1;
        o++;
        if (len == 0)
            break;
        if (o + len > n)
            return -1;
        if (out) {
            if (w + len + 2 > outsz)
                return -1;
            if (w)
                out[w++] = '.';
            for (unsigned i = 0; i < len; i++) {
                unsigned char c = m[o + i];
                /* Host names (RFC 952/1123) and "_" (SRV and DKIM
                 * labels); anything else could not be written as a
                 * policy rule. */
                if (!isalnum(c) && c != '-' && c != '_')
                    return -1;
                out[w++] = (char)tolower(c);
            }
        }
        o += len;
    }
    if (out) {
        if (w == 0)
            return -1;          /* the root */
        out[w] = '\0';
    }
    *off = o;
    return 0;
}

int iso_dns_parse_query(const unsigned char *m, size_t n, char *name, size_t namesz,
                        uint16_t *qtype, size_t *qend)
{
    size_t off = 12;

    /* A standard query (QR 0, opcode 0) with exactly one question. */
    if (n < 12 || (m[2] & 0x80) || (m[2] & 0x78) || get16(m + 4) != 1)
        return -1;
    if (read_name(m, n, &off, name, namesz) < 0 || off + 4 > n)
        return -1;
    *qtype = get16(m + off);
    if (get16(m + off + 2) != 1)    /* class IN */
        return -1;
    *qend = off + 4;
    return 0;
}

int iso_dns_parse_answers(const unsigned char *m, size_t n, const char *qname,
                          void (*found)(void *ctx, int family, const unsigned char *addr,
                                        uint32_t ttl),
                          void *ctx)
{
    char name[ISO_DNS_NAME];
    uint16_t qtype;
    size_t off;
    unsigned an;

    if (n < 12 || !(m[2] & 0x80))
        return -1;
    an = get16(m + 6);
    /* The question must be the one asked (a late answer to a reused id
     * must not teach us another name's addresses). */
    if (get16(m + 4) != 1 || iso_dns_parse_query_q(m, n, name, sizeof name, &qtype, &off) < 0
        || strcmp(name, qname) != 0)
        return -1;
    if ((m[3] & 0x0f) != 0)
        return 0;               /* NXDOMAIN, SERVFAIL...: nothing to learn */
    for (unsigned i = 0; i < an; i++) {
        if (read_name(m, n, &off, NULL, 0) < 0 || off + 10 > n)
            return -1;
        uint16_t type = get16(m + off), class = get16(m + off + 2);
        uint32_t ttl = (uint32_t)get16(m + off + 4) << 16 | get16(m + off + 6);
        uint16_t rdlen = get16(m + off + 8);
        off += 10;
        if (off + rdlen > n)
            return -1;
        /* Every A/AAAA of the answer section is the queried name's: the
         * owners differ only along a CNAME chain that starts at it. */
        if (class == 1 && type == 1 && rdlen == 4)
            found(ctx, AF_INET, m + off, ttl);
        else if (class == 1 && type == 28 && rdlen == 16)
            found(ctx, AF_INET6, m + off, ttl);
        off += rdlen;
    }
    return 0;
}

/* The question of a response (QR 1): as iso_dns_parse_query, without the
 * QR check. */
int iso_dns_parse_query_q(const unsigned char *m, size_t n, char *name, size_t namesz,
                          uint16_t *qtype, size_t *qend)
{
    size_t off = 12;

    if (n < 12 || get16(m + 4) != 1)
        return -1;
    if (read_name(m, n, &off, name, namesz) < 0 || off + 4 > n)
        return -1;
    *qtype = get16(m + off);
    *qend = off + 4;
    return 0;
}

/* ---- what was resolved ------------------------------------------------------ */

static void addr_key(const struct sockaddr *sa, unsigned char *family, unsigned char addr[16])
{
    memset(addr, 0, 16);
    *family = 0;
    if (sa->sa_family == AF_INET) {
        *family = AF_INET;
        memcpy(addr, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a)) {
            *family = AF_INET;
            memcpy(addr, a->s6_addr + 12, 4);
        } else {
            *family = AF_INET6;
            memcpy(addr, a->s6_addr, 16);
        }
    }
}

void iso_dns_remember(const char *name, int family, const unsigned char *addr,
                      uint32_t ttl, uint64_t now)
{
    size_t alen = family == AF_INET ? 4 : 16;
    uint64_t exp = ttl == UINT32_MAX ? FOREVER
                   : now + 1000u * (uint64_t)(ttl < TTL_FLOOR_S ? TTL_FLOOR_S : ttl);
    struct mem_slot *free_slot = NULL;

    /* The same (name, address) again: extend it. */
    for (size_t i = 0; i < MEM_SLOTS; i++) {
        struct mem_slot *s = &stub.mem[i];
        if (s->expires_ms == 0 || s->expires_ms <= now) {
            if (free_slot == NULL)
                free_slot = s;
            continue;
        }
        if (s->family == family && memcmp(s->addr, addr, alen) == 0
            && strcmp(stub.name[i], name) == 0) {
            if (exp > s->expires_ms)
                s->expires_ms = exp;
            return;
        }
    }
    if (free_slot == NULL) {
        /* Full of live answers: the oldest slot in turn (not a /etc/hosts
         * one, which is the file's and for ever). */
        for (unsigned k = 0; k < MEM_SLOTS; k++) {
            struct mem_slot *s = &stub.mem[stub.next_slot++ % MEM_SLOTS];
            if (s->expires_ms != FOREVER) {
                free_slot = s;
                break;
            }
        }
        if (free_slot == NULL)
            return;
    }
    memset(free_slot, 0, sizeof *free_slot);
    free_slot->family = (unsigned char)family;
    memcpy(free_slot->addr, addr, alen);
    strlcpy(stub.name[free_slot - stub.mem], name, ISO_DNS_NAME);
    free_slot->expires_ms = exp;
}

size_t iso_dns_names_at(const struct sockaddr *sa, uint64_t now, char (*names)[ISO_DNS_NAME],
                        size_t max)
{
    unsigned char family, addr[16];
    size_t n = 0;

    addr_key(sa, &family, addr);
    if (family == 0)
        return 0;
    for (size_t i = 0; i < MEM_SLOTS && n < max; i++) {
        const struct mem_slot *s = &stub.mem[i];
        if (s->expires_ms == 0 || s->expires_ms <= now || s->family != family
            || memcmp(s->addr, addr, 16) != 0)
            continue;
        bool dup = false;
        for (size_t k = 0; k < n && !dup; k++)
            dup = strcmp(names[k], stub.name[i]) == 0;
        if (!dup)
            strlcpy(names[n++], stub.name[i], ISO_DNS_NAME);
    }
    return n;
}

size_t iso_dns_names(const struct sockaddr *sa, char (*names)[ISO_DNS_NAME], size_t max)
{
    return iso_dns_names_at(sa, now_ms(), names, max);
}

void iso_dns_forget(void)
{
    memset(stub.mem, 0, sizeof stub.mem);
    memset(stub.pend, 0, sizeof stub.pend);
}

/* ---- the policy ------------------------------------------------------------ */

bool iso_dns_name_allowed(const struct policy *p, const char *name, struct policy_verdict *v)
{
    const struct policy_rule *r;
    size_t n = policy_rules(p, POLICY_CONNECT_ALLOW, &r);
    bool judged = false;

    /* Allowed when connecting to NAME is allowed on some port a rule that
     * could name it gives: a deny rule for the name wins on that port as
     * it would for the connect. */
    for (size_t i = 0; i < n; i++) {
        char target[ISO_DNS_NAME + 8];
        struct policy_verdict t;
        if (r[i].net_kind != POLICY_NET_HOST && r[i].net_kind != POLICY_NET_ANY)
            continue;
        snprintf(target, sizeof target, "%s:%d", name, r[i].port_lo >= 0 ? r[i].port_lo : 443);
        if (policy_decide_net_text(p, SBX_OP_CONNECT, target, &t) < 0)
            continue;
        if (t.decision == SBX_ALLOW && !t.audit) {
            *v = t;
            return true;
        }
        if (!judged || t.rule->list == POLICY_CONNECT_DENY) {
            *v = t;
            judged = true;
        }
    }
    if (!judged) {
        char target[ISO_DNS_NAME + 8];
        snprintf(target, sizeof target, "%s:443", name);
        if (policy_decide_net_text(p, SBX_OP_CONNECT, target, v) < 0)
            return false;
    }
    return false;
}

/* ---- serving ------------------------------------------------------------------ */

static int parse_hostport(const char *s, struct sockaddr_storage *ss, socklen_t *len)
{
    char host[INET6_ADDRSTRLEN + 2];
    const char *port = NULL;
    const char *errstr = NULL;
    long long pn = 53;

    memset(ss, 0, sizeof *ss);
    if (s[0] == '[') {
        const char *e = strchr(s, ']');
        if (e == NULL || (size_t)(e - s - 1) >= sizeof host)
            return -1;
        memcpy(host, s + 1, (size_t)(e - s - 1));
        host[e - s - 1] = '\0';
        if (e[1] == ':')
            port = e + 2;
    } else {
        const char *c = strrchr(s, ':');
        if (c && strchr(s, ':') == c) {
            if ((size_t)(c - s) >= sizeof host)
                return -1;
            memcpy(host, s, (size_t)(c - s));
            host[c - s] = '\0';
            port = c + 1;
        } else if (strlcpy(host, s, sizeof host) >= sizeof host) {
            return -1;
        }
    }
    if (port && (pn = strtonum(port, 1, 65535, &errstr), errstr))
        return -1;
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)pn);
        *len = sizeof *a4;
        return 0;
    }
    if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)pn);
        *len = sizeof *a6;
        return 0;
    }
    return -1;
}

/* The host's resolver: SBX_DNS_UPSTREAM ("IP", "IP:PORT", "[V6]:PORT"),
 * else the first nameserver of the host's /etc/resolv.conf. */
static int upstream(struct sockaddr_storage *ss, socklen_t *len, char *err, size_t errsz)
{
    const char *env = getenv("SBX_DNS_UPSTREAM");
    char line[512];
    FILE *f;

    if (env && env[0]) {
        if (parse_hostport(env, ss, len) < 0) {
            iso_errf(err, errsz, "SBX_DNS_UPSTREAM: not IP, IP:PORT or [IPv6]:PORT: %s", env);
            return -1;
        }
        return 0;
    }
    if ((f = fopen("/etc/resolv.conf", "re")) != NULL) {
        while (fgets(line, sizeof line, f)) {
            char *tok = strtok(line, " \t\r\n");
            char *val = tok ? strtok(NULL, " \t\r\n") : NULL;
            char *pct;
            if (tok && val && strcmp(tok, "nameserver") == 0) {
                if ((pct = strchr(val, '%')) != NULL)
                    *pct = '\0';    /* fe80::1%eth0: the scope is the host's */
                if (strchr(val, ':')) {
                    char b[INET6_ADDRSTRLEN + 3];
                    snprintf(b, sizeof b, "[%s]", val);
                    if (parse_hostport(b, ss, len) == 0) {
                        fclose(f);
                        return 0;
                    }
                } else if (parse_hostport(val, ss, len) == 0) {
                    fclose(f);
                    return 0;
                }
            }
        }
        fclose(f);
    }
    /* What glibc itself does without a nameserver line. */
    return parse_hostport("127.0.0.1:53", ss, len);
}

/* The names of the host's /etc/hosts the policy allows, for ever. */
static void load_hosts(const struct policy *p)
{
    char line[1024];
    FILE *f = fopen("/etc/hosts", "re");

    if (f == NULL)
        return;
    while (fgets(line, sizeof line, f)) {
        char *hash = strchr(line, '#'), *save = NULL, *tok;
        unsigned char addr[16];
        int family;
        if (hash)
            *hash = '\0';
        if ((tok = strtok_r(line, " \t\r\n", &save)) == NULL)
            continue;
        if (inet_pton(AF_INET, tok, addr) == 1)
            family = AF_INET;
        else if (inet_pton(AF_INET6, tok, addr) == 1)
            family = AF_INET6;
        else
            continue;
        while ((tok = strtok_r(NULL, " \t\r\n", &save)) != NULL) {
            char name[ISO_DNS_NAME];
            struct policy_verdict v;
            strlcpy(name, tok, sizeof name);
            for (char *c = name; *c; c++)
                *c = (char)tolower((unsigned char)*c);
            if (iso_dns_name_allowed(p, name, &v))
                iso_dns_remember(name, family, addr, UINT32_MAX, 0);
        }
    }
    fclose(f);
}

int iso_dns_start(const struct iso_request *req, int agent_fd, char *err, size_t errsz)
{
    struct sockaddr_storage ss;
    socklen_t len = 0;

    iso_dns_stop();
    if (upstream(&ss, &len, err, errsz) < 0)
        return -1;
    stub.up_fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (stub.up_fd < 0 || connect(stub.up_fd, (struct sockaddr *)&ss, len) < 0) {
        iso_errf(err, errsz, "dns stub: the host's resolver: %s", strerror(errno));
        iso_dns_stop();
        return -1;
    }
    int fl = fcntl(agent_fd, F_GETFL);
    if (fl < 0 || fcntl(agent_fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        iso_errf(err, errsz, "dns stub: %s", strerror(errno));
        iso_dns_stop();
        return -1;
    }
    stub.agent_fd = agent_fd;
    load_hosts(req->policy);
    return 0;
}

void iso_dns_stop(void)
{
    if (stub.agent_fd >= 0)
        close(stub.agent_fd);
    if (stub.up_fd >= 0)
        close(stub.up_fd);
    stub.agent_fd = stub.up_fd = -1;
    iso_dns_forget();
}

int iso_dns_fds(int fds[2])
{
    int n = 0;
    if (stub.agent_fd >= 0)
        fds[n++] = stub.agent_fd;
    if (stub.up_fd >= 0)
        fds[n++] = stub.up_fd;
    return n;
}

/* The refusal: the question echoed, NXDOMAIN (the name does not exist for
 * this agent; REFUSED would make glibc say "temporary failure" and retry). */
static void refuse(const unsigned char *q, size_t qend, const struct sockaddr_storage *from,
                   socklen_t fromlen)
{
    unsigned char r[MSG_MAX];

    memcpy(r, q, qend);
    r[2] = (unsigned char)(0x80 | (q[2] & 0x01));   /* QR, RD as asked */
    r[3] = 0x80 | 3;                                /* RA, NXDOMAIN */
    memset(r + 6, 0, 6);                            /* no AN, NS, AR */
    (void)sendto(stub.agent_fd, r, qend, MSG_DONTWAIT, (const struct sockaddr *)from, fromlen);
}

static struct pending *pending_slot(uint64_t now)
{
    struct pending *oldest = NULL;

    for (size_t i = 0; i < PENDING; i++) {
        struct pending *p = &stub.pend[i];
        if (!p->used || now - p->since_ms > PENDING_MS)
            return p;
        if (oldest == NULL || p->since_ms < oldest->since_ms)
            oldest = p;
    }
    return oldest;              /* the client of the oldest will retry */
}

static uint16_t fresh_id(void)
{
    for (;;) {
        uint16_t id;
        bool used = false;
        if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id)
            id = (uint16_t)arc4random();
        for (size_t i = 0; i < PENDING && !used; i++)
            used = stub.pend[i].used && stub.pend[i].up_id == id;
        if (!used)
            return id;
    }
}

static void from_agent(const struct iso_request *req, iso_event_cb cb, void *ctx)
{
    unsigned char m[MSG_MAX];
    struct sockaddr_storage from;
    socklen_t fromlen = sizeof from;
    char name[ISO_DNS_NAME];
    uint16_t qtype;
    size_t qend;
    struct policy_verdict v;
    ssize_t n = recvfrom(stub.agent_fd, m, sizeof m, MSG_DONTWAIT, (struct sockaddr *)&from,
                         &fromlen);

    if (n < 12)
        return;
    if (iso_dns_parse_query(m, (size_t)n, name, sizeof name, &qtype, &qend) < 0) {
        m[2] = (unsigned char)(0x80 | (m[2] & 0x79));
        m[3] = 0x80 | 1;                            /* FORMERR */
        (void)sendto(stub.agent_fd, m, 12, MSG_DONTWAIT, (struct sockaddr *)&from, fromlen);
        return;
    }
    if (!iso_dns_name_allowed(req->policy, name, &v)) {
        char rule[512], target[ISO_DNS_NAME + 8];
        struct sbx_event_desc ev = {
            .op = SBX_OP_CONNECT, .decision = SBX_DENY, .layer = SBX_LAYER_SUPERVISOR,
            .err = ENOENT, .target = target, .target2 = name,
            .reason = "DNS query refused by sbx's resolver: no network.connect.allow rule "
                      "names this host",
        };
        refuse(m, qend, &from, fromlen);
        snprintf(target, sizeof target, "dns:%s", name);
        if (v.rule && v.rule->list == POLICY_CONNECT_DENY) {
            ev.reason = "DNS query refused by sbx's resolver: network.connect.deny names "
                        "this host";
        }
        if (v.rule && v.rule->line && policy_rule_format(v.rule, rule, sizeof rule) == 0)
            ev.rule = rule;
        if (cb)
            cb(ctx, &ev);
        return;
    }
    uint64_t now = now_ms();
    struct pending *p = pending_slot(now);
    memset(p, 0, sizeof *p);
    p->used = true;
    p->agent_id = get16(m);
    p->up_id = fresh_id();
    p->qtype = qtype;
    p->since_ms = now;
    memcpy(&p->from, &from, fromlen);
    p->fromlen = fromlen;
    strlcpy(p->name, name, sizeof p->name);
    m[0] = (unsigned char)(p->up_id >> 8);
    m[1] = (unsigned char)p->up_id;
    if (send(stub.up_fd, m, (size_t)n, MSG_DONTWAIT) < 0)
        p->used = false;        /* the client retries */
}

struct learn { const char *name; uint64_t now; };

static void learn_one(void *ctx, int family, const unsigned char *addr, uint32_t ttl)
{
    const struct learn *l = ctx;
    iso_dns_remember(l->name, family, addr, ttl, l->now);
}

static void from_upstream(void)
{
    unsigned char m[MSG_MAX];
    ssize_t n = recv(stub.up_fd, m, sizeof m, MSG_DONTWAIT);
    struct pending *p = NULL;

    if (n < 12)
        return;
    for (size_t i = 0; i < PENDING && p == NULL; i++)
        if (stub.pend[i].used && stub.pend[i].up_id == get16(m))
            p = &stub.pend[i];
    if (p == NULL)
        return;
    struct learn l = { p->name, now_ms() };
    /* An answer to another question under this id is dropped, not passed
     * on: the agent must never get addresses we did not remember. */
    if (iso_dns_parse_answers(m, (size_t)n, p->name, learn_one, &l) < 0)
        return;
    m[0] = (unsigned char)(p->agent_id >> 8);
    m[1] = (unsigned char)p->agent_id;
    (void)sendto(stub.agent_fd, m, (size_t)n, MSG_DONTWAIT, (struct sockaddr *)&p->from,
                 p->fromlen);
    p->used = false;
}

void iso_dns_serve(const struct iso_request *req, int fd, iso_event_cb cb, void *ctx)
{
    /* A few at a time: a burst of lookups (happy eyeballs asks A and AAAA
     * at once) is served in one wake-up, and the supervisor still gets
     * its turn. */
    for (int i = 0; i < 16; i++) {
        int avail = 0;
        if (fd == stub.agent_fd && stub.agent_fd >= 0)
            from_agent(req, cb, ctx);
        else if (fd == stub.up_fd && stub.up_fd >= 0)
            from_upstream();
        else
            return;
        if (recv(fd, &avail, 1, MSG_PEEK | MSG_DONTWAIT) < 0)
            return;
    }
}
