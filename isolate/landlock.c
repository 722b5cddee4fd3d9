/*
 * landlock.c — the policy's allow lists as Landlock rules.
 *
 * Landlock grants rights beneath directories and cannot subtract: a rule on
 * a root allows everything below it.  So each allow pattern becomes a rule
 * on its glob root (policy_glob_root: "/usr/ **" -> /usr, "**" -> the
 * workspace), the nearest superset Landlock can express; the deny lists and
 * the parts of a glob after its root are the guard's (and, for files that
 * exist at start, the mount layer's: mounts.c).  The audit store and the
 * runtime directory may lie under an allowed root (read "/" or "/tmp");
 * Landlock cannot carve them out, so mounts.c covers them with an empty
 * tmpfs, binding back only events.sock.
 *
 * Feature detection is by ABI number, each older ABI degrading explicitly:
 *   ABI 1: file system rights, no REFER: renames and links across
 *          directories are always refused (stricter, never weaker).
 *   ABI 2: + REFER, granted on the write roots.
 *   ABI 3: + TRUNCATE (before, truncate() was not controlled: the guard only).
 *   ABI 4: + TCP bind/connect by port.
 *   ABI 5: + IOCTL_DEV: not handled (see below).
 *   ABI 6: + scopes: no signals and no abstract unix sockets out of the sandbox.
 *   ABI 7: + logging flags: ask the kernel's audit log to keep denials after exec.
 */
#include "iso_int.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <linux/landlock.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bsd/string.h>

/* Newer than the installed uapi header (Debian 12 ships 6.1's). */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#define ISO_LL_NET_BIND_TCP    (1ULL << 0)
#define ISO_LL_NET_CONNECT_TCP (1ULL << 1)
#define ISO_LL_SCOPE_ABSTRACT_UNIX (1ULL << 0)
#define ISO_LL_SCOPE_SIGNAL        (1ULL << 1)
#define ISO_LL_RULE_NET_PORT 2
#define ISO_LL_LOG_NEW_EXEC_ON (1U << 1)

struct iso_ll_ruleset_attr {    /* landlock_ruleset_attr, ABI 6 layout */
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};
struct iso_ll_net_port_attr {   /* landlock_net_port_attr */
    uint64_t allowed_access;
    uint64_t port;
};

#define FS_ABI1 ((1ULL << 13) - 1)          /* EXECUTE .. MAKE_SYM */
#define FS_FILE (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | \
                 LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE | \
                 LANDLOCK_ACCESS_FS_IOCTL_DEV)
#define FS_READ (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define FS_WRITE (LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR | \
                  LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR | \
                  LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG | \
                  LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | \
                  LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM | \
                  LANDLOCK_ACCESS_FS_REFER | LANDLOCK_ACCESS_FS_TRUNCATE)

static const char *const access_names[] = {
    "execute", "write_file", "read_file", "read_dir", "remove_dir", "remove_file",
    "make_char", "make_dir", "make_reg", "make_sock", "make_fifo", "make_block",
    "make_sym", "refer", "truncate", "ioctl_dev",
};

const char *iso_landlock_access_name(uint64_t bit)
{
    for (unsigned i = 0; i < sizeof access_names / sizeof access_names[0]; i++)
        if (bit == (1ULL << i))
            return access_names[i];
    return "?";
}

int iso_landlock_abi(void)
{
    long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return v < 0 ? 0 : (int)v;
}

static void add_rule(struct iso_landlock *ll, const char *path, uint64_t access,
                     const char *why)
{
    struct stat st;

    /* Only file rights make sense on a file (the kernel refuses others). */
    if (stat(path, &st) == 0 && !S_ISDIR(st.st_mode))
        access &= FS_FILE;
    for (size_t i = 0; i < ll->n_rules; i++)
        if (strcmp(ll->rules[i].path, path) == 0) {
            ll->rules[i].access |= access;
            return;
        }
    if (ll->n_rules == ISO_LL_MAX_RULES)
        return;     /* plan() checks the count first; a superset is never lost */
    strlcpy(ll->rules[ll->n_rules].path, path, sizeof ll->rules[0].path);
    ll->rules[ll->n_rules].access = access;
    ll->rules[ll->n_rules].why = why;
    ll->n_rules++;
}

/* The directory (or file) a rule must sit on for PATTERN: its glob root;
 * /proc/self and /proc/thread-self become /proc (a rule on /proc/self would
 * name the one process that opened it).  A root that does not exist at
 * start gets no rule: widening it to an existing parent ("~/.local/lib" ->
 * "~") would open far more than the policy says, and the agent can create
 * it only under a write root, where the guard still decides.  0, or -1 to
 * skip the rule. */
static int rule_root(const char *pattern, uint64_t access, char *out, size_t outsz)
{
    struct stat st;

    if (policy_glob_root(pattern, out, outsz) < 0)
        return -1;
    if (strncmp(out, "/proc/self", 10) == 0 || strncmp(out, "/proc/thread-self", 17) == 0) {
        /* Writing through /proc/self/fd/N reopens what the fd names, and
         * Landlock judges that object (a pipe: not at all; a file: by its
         * own path), so no write right on procfs is needed; granting one
         * on /proc would include /proc/sysrq-trigger and /proc/sys. */
        if (access & ~FS_READ)
            return -1;
        strlcpy(out, "/proc", outsz);
    }
    return stat(out, &st) == 0 ? 0 : -1;
}

static void add_list(struct iso_landlock *ll, const struct policy *p,
                     enum policy_list l, uint64_t access)
{
    const struct policy_rule *r;
    size_t n = policy_rules(p, l, &r);
    char root[4096];

    for (size_t i = 0; i < n; i++) {
        struct stat st;
        uint64_t a = access;
        if (r[i].pattern == NULL || rule_root(r[i].pattern, access, root, sizeof root) < 0)
            continue;
        /* A directory named without a wildcard ("/" for ls /) lets the
         * agent read the directory itself, its list of names, not the files
         * below; Landlock's READ_DIR also lists the directories below it
         * (names only), the nearest the kernel offers. */
        if (l == POLICY_READ_ALLOW && strcmp(root, r[i].pattern) == 0
            && stat(root, &st) == 0 && S_ISDIR(st.st_mode))
            a &= LANDLOCK_ACCESS_FS_READ_DIR;
        add_rule(ll, root, a, r[i].section);
    }
}

/* The dynamic loader named in our own PT_INTERP: every dynamic program the
 * agent runs needs EXECUTE on it (the kernel opens it for exec). */
static int find_interp(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_INTERP) {
            strlcpy(data, (const char *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr), 4096);
            return 1;
        }
    return 1;   /* only the main program (first) matters */
}

/* TCP ports of the allow list L into PORTS; -1 when some rule allows any
 * port or a range too large to list (then the right is not handled). */
static int collect_ports(const struct policy *p, enum policy_list l,
                         uint16_t *ports, size_t *n, const char **why)
{
    const struct policy_rule *r;
    size_t nr = policy_rules(p, l, &r);

    *n = 0;
    for (size_t i = 0; i < nr; i++) {
        if (r[i].net_kind == POLICY_NET_UNIX)
            continue;
        if (r[i].port_lo < 0 || r[i].port_hi < r[i].port_lo) {
            *why = r[i].text;
            return -1;
        }
        for (int port = r[i].port_lo; port <= r[i].port_hi; port++) {
            bool dup = false;
            for (size_t j = 0; j < *n; j++)
                dup = dup || ports[j] == port;
            if (dup)
                continue;
            if (*n == ISO_LL_MAX_PORTS) {
                *why = r[i].text;
                return -1;
            }
            ports[(*n)++] = (uint16_t)port;
        }
    }
    return 0;
}

static bool has_host_rule(const struct policy *p)
{
    const struct policy_rule *r;
    size_t n = policy_rules(p, POLICY_CONNECT_ALLOW, &r);

    for (size_t i = 0; i < n; i++)
        if (r[i].net_kind == POLICY_NET_HOST)
            return true;
    return false;
}

int iso_landlock_plan(const struct iso_request *req, struct iso_landlock *ll,
                      char *err, size_t errsz)
{
    const struct policy *p = req->policy;
    const struct policy_info *pi = policy_info(p);
    char buf[4096];
    Dl_info di;
    const char *why = NULL;
    size_t total = 0;

    memset(ll, 0, sizeof *ll);
    ll->abi = iso_landlock_abi();
    if (ll->abi <= 0)
        return 0;

    for (int l = POLICY_READ_ALLOW; l <= POLICY_EXEC_ALLOW; l += 2) {
        const struct policy_rule *r;
        total += policy_rules(p, (enum policy_list)l, &r);
    }
    if (total + 12 > ISO_LL_MAX_RULES) {
        iso_errf(err, errsz, "landlock: the policy has %zu allow rules, more than %d",
                 total, ISO_LL_MAX_RULES - 12);
        return -1;
    }

    ll->handled_fs = FS_ABI1;
    if (ll->abi >= 2)
        ll->handled_fs |= LANDLOCK_ACCESS_FS_REFER;
    if (ll->abi >= 3)
        ll->handled_fs |= LANDLOCK_ACCESS_FS_TRUNCATE;
    /* IOCTL_DEV (ABI 5) is left unhandled: the policy has no rule about
     * ioctls, devices are reachable only through the allowed roots, and
     * handling it would break terminal programs (isatty) for no gain. */

    /* Audit mode denies nothing (the guard records what enforce mode
     * would deny): every right on every path, no port rules.  The domain
     * stays, for its scoping (signals, abstract sockets: protections of
     * what is outside the sandbox, not rules of the policy). */
    if (pi->audit_mode) {
        add_rule(ll, "/", ll->handled_fs, "audit mode: every path");
        goto scope;
    }

    add_list(ll, p, POLICY_READ_ALLOW, FS_READ);
    if (!pi->read_only)
        add_list(ll, p, POLICY_WRITE_ALLOW, FS_WRITE);
    add_list(ll, p, POLICY_EXEC_ALLOW, LANDLOCK_ACCESS_FS_EXECUTE);

    /* What every agent needs whatever the policy says: its loader and libc,
     * the preload and the policy copy it reads, the null devices. */
    buf[0] = '\0';
    dl_iterate_phdr(find_interp, buf);
    if (buf[0] == '/')
        add_rule(ll, buf, LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE,
                 "dynamic loader");
    if (dladdr((void *)fprintf, &di) && di.dli_fname && di.dli_fname[0] == '/') {
        strlcpy(buf, di.dli_fname, sizeof buf);
        char *slash = strrchr(buf, '/');
        if (slash && slash != buf) {
            *slash = '\0';
            add_rule(ll, buf, LANDLOCK_ACCESS_FS_READ_FILE, "shared libraries");
        }
    }
    add_rule(ll, "/etc/ld.so.cache", LANDLOCK_ACCESS_FS_READ_FILE, "dynamic loader");
    if (req->preload)
        add_rule(ll, req->preload, LANDLOCK_ACCESS_FS_READ_FILE, "the guard (preload)");
    if (req->policy_copy)
        add_rule(ll, req->policy_copy, LANDLOCK_ACCESS_FS_READ_FILE, "the policy copy");
    if (req->policy_image)
        add_rule(ll, req->policy_image, LANDLOCK_ACCESS_FS_READ_FILE, "the compiled policy");
    add_rule(ll, "/dev/null", FS_READ | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE,
             "null device");
    add_rule(ll, "/dev/zero", LANDLOCK_ACCESS_FS_READ_FILE, "null device");
    add_rule(ll, "/dev/urandom", LANDLOCK_ACCESS_FS_READ_FILE, "random device");
    add_rule(ll, "/dev/random", LANDLOCK_ACCESS_FS_READ_FILE, "random device");

    for (size_t i = 0; i < ll->n_rules; i++)
        ll->rules[i].access &= ll->handled_fs;

    /* TCP (ABI 4).  A rule allowing any port cannot be expressed by port:
     * then that right is not handled at all and the supervisor and the
     * guard decide alone. */
    if (ll->abi >= 4) {
        if (collect_ports(p, POLICY_CONNECT_ALLOW, ll->connect_ports, &ll->n_connect, &why) == 0) {
            /* Host-name rules need DNS, which may fall back to TCP. */
            if (has_host_rule(p) && ll->n_connect < ISO_LL_MAX_PORTS) {
                bool have53 = false;
                for (size_t i = 0; i < ll->n_connect; i++)
                    have53 = have53 || ll->connect_ports[i] == 53;
                if (!have53)
                    ll->connect_ports[ll->n_connect++] = 53;
            }
            ll->handled_net |= ISO_LL_NET_CONNECT_TCP;
        } else {
            snprintf(ll->net_note, sizeof ll->net_note,
                     "TCP connect not restricted by port: rule \"%s\" allows any port",
                     why ? why : "?");
        }
        why = NULL;
        if (collect_ports(p, POLICY_BIND_ALLOW, ll->bind_ports, &ll->n_bind, &why) == 0)
            ll->handled_net |= ISO_LL_NET_BIND_TCP;
        else
            snprintf(ll->net_note + strlen(ll->net_note),
                     sizeof ll->net_note - strlen(ll->net_note),
                     "%sTCP bind not restricted: rule \"%s\" allows any port",
                     ll->net_note[0] ? "; " : "", why ? why : "?");
    }
scope:
    if (ll->abi >= 6)
        ll->scoped = ISO_LL_SCOPE_ABSTRACT_UNIX | ISO_LL_SCOPE_SIGNAL;
    /* ABI 7: keep logging denials after the exec of the agent (the default
     * logs only until exec, i.e. only sbx's own mistakes). */
    if (ll->abi >= 7)
        ll->restrict_flags = ISO_LL_LOG_NEW_EXEC_ON;
    return 0;
}

int iso_landlock_ruleset(const struct iso_landlock *ll, char *err, size_t errsz)
{
    struct iso_ll_ruleset_attr attr = {
        .handled_access_fs = ll->handled_fs,
        .handled_access_net = ll->handled_net,
        .scoped = ll->scoped,
    };
    size_t attr_size = ll->abi >= 6 ? sizeof attr
                     : ll->abi >= 4 ? 2 * sizeof(uint64_t) : sizeof(uint64_t);
    int rfd = (int)syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);

    if (rfd < 0) {
        iso_errf(err, errsz, "landlock: create ruleset: %s", strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < ll->n_rules; i++) {
        struct landlock_path_beneath_attr pb;
        struct stat st;
        int fd = open(ll->rules[i].path, O_PATH | O_CLOEXEC);

        if (fd < 0) {
            /* Gone in the sandbox's view (under the private /tmp, or a
             * hidden directory): nothing to allow. */
            if (errno == ENOENT)
                continue;
            iso_errf(err, errsz, "landlock: %s: %s", ll->rules[i].path, strerror(errno));
            goto fail;
        }
        pb.parent_fd = fd;
        pb.allowed_access = ll->rules[i].access;
        if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
            pb.allowed_access &= FS_FILE;
        if (pb.allowed_access != 0
            && syscall(SYS_landlock_add_rule, rfd, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0) {
            iso_errf(err, errsz, "landlock: rule on %s: %s", ll->rules[i].path, strerror(errno));
            close(fd);
            goto fail;
        }
        close(fd);
    }
    for (size_t i = 0; (ll->handled_net & ISO_LL_NET_CONNECT_TCP) && i < ll->n_connect; i++) {
        struct iso_ll_net_port_attr np = { ISO_LL_NET_CONNECT_TCP, ll->connect_ports[i] };
        if (syscall(SYS_landlock_add_rule, rfd, ISO_LL_RULE_NET_PORT, &np, 0) < 0) {
            iso_errf(err, errsz, "landlock: connect port %u: %s", ll->connect_ports[i], strerror(errno));
            goto fail;
        }
    }
    for (size_t i = 0; (ll->handled_net & ISO_LL_NET_BIND_TCP) && i < ll->n_bind; i++) {
        struct iso_ll_net_port_attr np = { ISO_LL_NET_BIND_TCP, ll->bind_ports[i] };
        if (syscall(SYS_landlock_add_rule, rfd, ISO_LL_RULE_NET_PORT, &np, 0) < 0) {
            iso_errf(err, errsz, "landlock: bind port %u: %s", ll->bind_ports[i], strerror(errno));
            goto fail;
        }
    }
    return rfd;
fail:
    close(rfd);
    return -1;
}

int iso_landlock_restrict(const struct iso_landlock *ll, int ruleset_fd)
{
    if (syscall(SYS_landlock_restrict_self, ruleset_fd, ll->restrict_flags) < 0)
        return -1;
    return 0;
}

static void print_access(uint64_t a, FILE *out)
{
    const char *sep = "";
    for (unsigned i = 0; i < 16; i++)
        if (a & (1ULL << i)) {
            fprintf(out, "%s%s", sep, access_names[i]);
            sep = ",";
        }
}

void iso_landlock_print(const struct iso_landlock *ll, FILE *out)
{
    if (ll->abi <= 0) {
        fprintf(out, "landlock: not available on this kernel\n");
        return;
    }
    fprintf(out, "landlock: ABI %d; handled: ", ll->abi);
    print_access(ll->handled_fs, out);
    fprintf(out, "\n");
    for (size_t i = 0; i < ll->n_rules; i++) {
        fprintf(out, "  %-40s ", ll->rules[i].path);
        print_access(ll->rules[i].access, out);
        fprintf(out, "   (%s)\n", ll->rules[i].why);
    }
    if (ll->handled_net & ISO_LL_NET_CONNECT_TCP) {
        fprintf(out, "  tcp connect only to ports:");
        for (size_t i = 0; i < ll->n_connect; i++)
            fprintf(out, " %u", ll->connect_ports[i]);
        fprintf(out, "%s\n", ll->n_connect ? "" : " (none)");
    }
    if (ll->handled_net & ISO_LL_NET_BIND_TCP) {
        fprintf(out, "  tcp bind only to ports:");
        for (size_t i = 0; i < ll->n_bind; i++)
            fprintf(out, " %u", ll->bind_ports[i]);
        fprintf(out, "%s\n", ll->n_bind ? "" : " (none)");
    }
    if (ll->net_note[0])
        fprintf(out, "  %s\n", ll->net_note);
    if (ll->abi < 4)
        fprintf(out, "  ABI < 4: TCP is not restricted by Landlock\n");
    if (ll->scoped)
        fprintf(out, "  scoped: no signals and no abstract unix sockets to processes outside\n");
    else
        fprintf(out, "  ABI < 6: signals and abstract unix sockets are not scoped (the pid and net namespaces are)\n");
}
