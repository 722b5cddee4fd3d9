/*
 * ns.c — namespace details: the user namespace's id maps, the decision to
 * give the agent a network namespace, and bringing up its loopback.
 */
#include "iso_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bsd/string.h>

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    ssize_t n;
    size_t len = strlen(text);

    if (fd < 0)
        return -1;
    n = write(fd, text, len);
    close(fd);
    return n == (ssize_t)len ? 0 : -1;
}

/* The agent keeps its own uid and gid inside (files it creates belong to
 * the user, tools that print ids are not confused).  A process may map its
 * own ids into a namespace it just created; setgroups must be switched off
 * first for the gid map (else it could drop a group that denies it access). */
int iso_write_id_maps(uid_t uid, gid_t gid, char *err, size_t errsz)
{
    char line[64];

    if (write_file("/proc/self/setgroups", "deny") < 0 && errno != ENOENT) {
        iso_errf(err, errsz, "user namespace: setgroups: %s", strerror(errno));
        return -1;
    }
    snprintf(line, sizeof line, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
    if (write_file("/proc/self/uid_map", line) < 0) {
        iso_errf(err, errsz, "user namespace: uid_map: %s", strerror(errno));
        return -1;
    }
    snprintf(line, sizeof line, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
    if (write_file("/proc/self/gid_map", line) < 0) {
        iso_errf(err, errsz, "user namespace: gid_map: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* The host part of a rule's text: "127.0.0.1:80" -> "127.0.0.1",
 * "[::1]:80" -> "::1", "10.0.0.0/8" -> "10.0.0.0/8". */
static void host_part(const char *text, char *out, size_t outsz)
{
    const char *colon;

    if (text[0] == '[') {
        const char *end = strchr(text, ']');
        size_t n = end ? (size_t)(end - text - 1) : 0;
        if (n >= outsz)
            n = outsz - 1;
        memcpy(out, text + 1, n);
        out[n] = '\0';
        return;
    }
    strlcpy(out, text, outsz);
    colon = strchr(out, ':');
    if (colon && strchr(colon + 1, ':') == NULL)    /* not a bare IPv6 */
        out[colon - out] = '\0';
}

static bool is_loopback(const struct policy_rule *r)
{
    char host[256];
    struct in_addr a4;
    struct in6_addr a6;
    char *slash;

    host_part(r->text, host, sizeof host);
    switch (r->net_kind) {
    case POLICY_NET_UNIX:
        return true;            /* path sockets work across net namespaces */
    case POLICY_NET_HOST:
        return strcmp(host, "localhost") == 0;
    case POLICY_NET_IP:
    case POLICY_NET_CIDR:
        slash = strchr(host, '/');
        if (slash) {
            long bits;
            char *end;
            *slash = '\0';
            bits = strtol(slash + 1, &end, 10);
            if (inet_pton(AF_INET, host, &a4) == 1)
                return bits >= 8 && (ntohl(a4.s_addr) >> 24) == 127;
            return inet_pton(AF_INET6, host, &a6) == 1 && bits == 128
                   && IN6_IS_ADDR_LOOPBACK(&a6);
        }
        if (inet_pton(AF_INET, host, &a4) == 1)
            return (ntohl(a4.s_addr) >> 24) == 127;
        return inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
    default:
        return false;
    }
}

bool iso_net_loopback_only(const struct policy *p)
{
    const struct policy_rule *r;
    size_t n;
    const struct policy_info *pi = policy_info(p);

    /* Audit mode records what would be denied and denies nothing: the
     * agent must see the network it will have in enforce mode. */
    if (pi->audit_mode)
        return false;
    n = policy_rules(p, POLICY_CONNECT_ALLOW, &r);
    for (size_t i = 0; i < n; i++)
        if (!is_loopback(&r[i]))
            return false;
    n = policy_rules(p, POLICY_BIND_ALLOW, &r);
    for (size_t i = 0; i < n; i++)
        if (!is_loopback(&r[i]))
            return false;
    return true;
}

bool iso_net_own_ns(const struct policy *p)
{
    const struct policy_rule *r;
    size_t n;

    /* Audit mode: the agent must see the network it will have in enforce
     * mode, and nothing is refused, so nothing needs holding. */
    if (policy_info(p)->audit_mode)
        return false;
    /* A server the agent binds must be reachable from the host when the
     * policy allows a port beyond loopback: then the host's namespace. */
    n = policy_rules(p, POLICY_BIND_ALLOW, &r);
    for (size_t i = 0; i < n; i++)
        if (!is_loopback(&r[i]))
            return false;
    return true;
}

bool iso_net_unix_only(const struct policy *p)
{
    static const enum policy_list lists[] = { POLICY_CONNECT_ALLOW, POLICY_BIND_ALLOW };
    const struct policy_rule *r;

    if (policy_info(p)->audit_mode)
        return false;
    for (size_t l = 0; l < sizeof lists / sizeof lists[0]; l++) {
        size_t n = policy_rules(p, lists[l], &r);
        for (size_t i = 0; i < n; i++)
            if (r[i].net_kind != POLICY_NET_UNIX)
                return false;
    }
    return true;
}

/* TEXT (a target or a rule: host:port, [v6]:port, a CIDR) names only
 * loopback: localhost, 127.0.0.0/8 or ::1. */
static bool text_loopback(const char *text)
{
    char host[256];
    struct in_addr a4;
    struct in6_addr a6;
    char *slash;

    host_part(text, host, sizeof host);
    if ((slash = strchr(host, '/')) != NULL)
        *slash = '\0';
    if (strcasecmp(host, "localhost") == 0)
        return true;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    return inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

const char *iso_net_layers(const struct policy *p, const char *target, enum iso_mode mode)
{
    bool unix_sock = strncmp(target, "unix:", 5) == 0;
    bool lo = !unix_sock && text_loopback(target);

    switch (mode) {
    case ISO_NONE:
        return "guard only (exact for dynamic programs; a static program or a raw system "
               "call reaches any address)";
    case ISO_BWRAP:
        if (unix_sock)
            return "guard (exact); the mounts keep an allowed socket that exists at start "
                   "reachable; nothing below the guard checks the path";
        if (iso_net_unix_only(p))
            return "guard (exact); kernel: a net namespace with only its own lo (nothing "
                   "outside is reachable: exact)";
        return "guard only: bwrap shares the host's network when a rule names an address "
               "(no supervisor); a static program or a raw system call reaches any address";
    case ISO_PODMAN:
    case ISO_DOCKER:
        if (unix_sock)
            return "guard (exact); the container reaches only the sockets bound into it "
                   "(events.sock)";
        if (iso_net_loopback_only(p))
            return "guard (exact); engine: --network=none (exact, static programs too)";
        return "guard only: the container shares the host's network (--network=host)";
    case ISO_GVISOR:
        if (unix_sock)
            return "guard (exact); gVisor: no host Unix socket is reachable from the "
                   "sandbox (--host-uds=none), allowed or not";
        if (iso_net_loopback_only(p))
            return "guard (exact); gVisor: --network=none, the sandbox's own loopback only "
                   "(the host's loopback services are out of reach; exact for everything "
                   "else, static programs too)";
        return "guard only: gVisor shares the host's network (--network=host) when a rule "
               "names an outside address; a static program reaches any address";
    case ISO_AUTO:
    case ISO_NATIVE:
    default:
        if (unix_sock)
            return "guard (exact); supervisor (exact: the socket path of every connect, "
                   "static programs too); the mounts keep an allowed socket that exists at "
                   "start reachable";
        if (iso_net_own_ns(p)) {
            if (lo)
                return "guard (exact); supervisor (exact, static programs too): an allowed "
                       "connect or datagram is made by sbx-guard in the host's namespace to the "
                       "address it read once and handed to the agent, anything else is refused "
                       "and recorded; kernel: the agent's own net namespace (only its lo)";
            if (iso_net_loopback_only(p))
                return "guard (exact); supervisor refuses and records it; kernel: the agent's "
                       "own net namespace has no route out (exact)";
            return "guard (exact, sees host names); supervisor (exact, static programs too): "
                   "an IP or CIDR rule by address, a host-name rule through the addresses "
                   "sbx's DNS stub resolved that name to for this agent (the agent's only "
                   "resolver, which answers allowed names only); an allowed connect or "
                   "datagram is made by sbx-guard in the host's namespace and handed to the "
                   "agent, anything else is refused and recorded; kernel: the agent's own "
                   "net namespace has no route out";
        }
        if (lo)
            return "guard (exact); supervisor (exact on the address: an allowed one is "
                   "connected by sbx-guard, no time-of-check gap); the host's net namespace "
                   "(a bind rule beyond loopback, or audit mode)";
        return "guard (exact, sees host names); supervisor: exact refusals for IP/CIDR "
               "rules, but lets a connect through when a host-name rule could match its "
               "port (a static program then reaches any address on that port) and a "
               "racing thread can change the address after the check; landlock: TCP ports "
               "of the rules only (a superset); the host's net namespace (a bind rule "
               "beyond loopback, or audit mode)";
    }
}

int iso_net_lo_up(char *err, size_t errsz)
{
    struct ifreq ifr;
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

    if (s < 0) {
        iso_errf(err, errsz, "net namespace: socket: %s", strerror(errno));
        return -1;
    }
    memset(&ifr, 0, sizeof ifr);
    strlcpy(ifr.ifr_name, "lo", sizeof ifr.ifr_name);
    if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0) {
        iso_errf(err, errsz, "net namespace: lo: %s", strerror(errno));
        close(s);
        return -1;
    }
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0) {
        iso_errf(err, errsz, "net namespace: lo up: %s", strerror(errno));
        close(s);
        return -1;
    }
    close(s);
    return 0;
}
