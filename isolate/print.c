/*
 * print.c — iso_print(): what iso_spawn would set up for a request, from
 * the very plans iso_spawn uses (so the two cannot drift apart), and the
 * nearest podman/docker flags for people who run agents in containers.
 */
#include "iso_int.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "paths.h"

static void print_rlimits(const struct iso_request *req, FILE *out)
{
    struct iso_rlimit rl[ISO_RLIMIT_MAX];
    size_t n = iso_rlimits(req->policy, rl);

    fprintf(out, "rlimits (soft = hard, inherited by every process):\n");
    for (size_t i = 0; i < n; i++)
        fprintf(out, "  %-14s %llu\n", rl[i].name, (unsigned long long)rl[i].value);
}

static void print_container(const struct iso_request *req, const struct iso_mounts *mp,
                            bool netns, FILE *out)
{
    const struct policy_info *pi = policy_info(req->policy);
    char cwd[4096];

    fprintf(out, "\nequivalent container flags (podman run / docker run; no Landlock, "
                 "no supervisor, no preload unless mounted):\n");
    fprintf(out, "  --cap-drop ALL --security-opt no-new-privileges");
    if (mp->all_ro)
        fprintf(out, " --read-only");
    fprintf(out, " --tmpfs /tmp --user %u:%u", (unsigned)geteuid(), (unsigned)getegid());
    if (netns)
        fprintf(out, " --network none");
    if (pi->limits.processes)
        fprintf(out, " --pids-limit %llu", (unsigned long long)pi->limits.processes);
    if (pi->limits.memory_bytes)
        fprintf(out, " --memory %llu", (unsigned long long)pi->limits.memory_bytes);
    if (pi->limits.open_files)
        fprintf(out, " --ulimit nofile=%llu:%llu", (unsigned long long)pi->limits.open_files,
                (unsigned long long)pi->limits.open_files);
    if (pi->limits.cpu_ms)
        fprintf(out, " --ulimit cpu=%llu:%llu",
                (unsigned long long)(pi->limits.cpu_ms + 999) / 1000,
                (unsigned long long)(pi->limits.cpu_ms + 999) / 1000);
    if (pi->max_write_bytes)
        fprintf(out, " --ulimit fsize=%llu:%llu", (unsigned long long)pi->max_write_bytes,
                (unsigned long long)pi->max_write_bytes);
    if (req->workspace)
        fprintf(out, " \\\n  -v %s:%s%s", req->workspace, req->workspace,
                pi->read_only ? ":ro" : "");
    if (getcwd(cwd, sizeof cwd))
        fprintf(out, " -w %s", cwd);
    if (req->runtime_dir)
        fprintf(out, " -v %s/%s:%s/%s", req->runtime_dir, SBX_EVENTS_SOCK,
                req->runtime_dir, SBX_EVENTS_SOCK);
    for (size_t i = 0; i < mp->n; i++) {
        switch (mp->m[i].kind) {
        case ISO_MNT_MASK_FILE:
            fprintf(out, " \\\n  -v /dev/null:%s:ro", mp->m[i].path);
            break;
        case ISO_MNT_MASK_DIR:
            fprintf(out, " \\\n  --tmpfs %s:ro,mode=000", mp->m[i].path);
            break;
        case ISO_MNT_RO:
            fprintf(out, " \\\n  -v %s:%s:ro", mp->m[i].path, mp->m[i].path);
            break;
        default:
            break;
        }
    }
    fprintf(out, " \\\n  IMAGE");
    for (size_t i = 0; req->argv && req->argv[i]; i++)
        fprintf(out, " %s", req->argv[i]);
    fprintf(out, "\n  (add --security-opt seccomp=PROFILE for a syscall list like the one above;"
                 " the engines' default profiles refuse most of it)\n");
}

/* What each layer does with each network rule (docs/network.md). */
static void print_net_rules(const struct policy *p, enum iso_mode mode, FILE *out)
{
    static const enum policy_list lists[] = { POLICY_CONNECT_ALLOW, POLICY_CONNECT_DENY };
    const struct policy_rule *r;

    fprintf(out, "network rules, layer by layer:\n");
    for (size_t l = 0; l < sizeof lists / sizeof lists[0]; l++) {
        size_t n = policy_rules(p, lists[l], &r);
        for (size_t i = 0; i < n; i++) {
            fprintf(out, "  connect.%s %s:\n", lists[l] == POLICY_CONNECT_DENY ? "deny" : "allow",
                    r[i].text);
            fprintf(out, "    %s\n", iso_net_layers(p, r[i].text, mode));
        }
    }
}

int iso_print(const struct iso_request *req, FILE *out)
{
    const struct policy_info *pi = policy_info(req->policy);
    struct iso_mounts *mp = calloc(1, sizeof *mp);
    struct iso_landlock *ll = calloc(1, sizeof *ll);
    char err[ISO_ERR_LEN];
    bool netns = iso_net_own_ns(req->policy);
    bool netns_nosup = iso_net_unix_only(req->policy);   /* bwrap */
    /* gVisor and the engines: --network=none exactly when iso_spawn_gvisor
     * and iso_spawn_container choose it. */
    bool net_none = iso_net_loopback_only(req->policy);
    int rc = -1;

    if (mp == NULL || ll == NULL)
        goto out;
    fprintf(out, "isolation: %s%s\n", iso_mode_name(req->mode),
            pi->isolation_required ? " (the policy requires isolation)" : "");
    if (iso_mounts_plan(req, mp, err, sizeof err) < 0
        || iso_landlock_plan(req, ll, err, sizeof err) < 0) {
        fprintf(out, "error: %s\n", err);
        goto out;
    }

    fprintf(out, "process: own process group; signals reset; SIGXFSZ ignored; "
                 "descriptors >= 3 closed at exec\n");
    switch (req->mode) {
    case ISO_NONE:
        fprintf(out, "layers: guard (the preload) and rlimits only: a static program or a raw\n"
                     "system call is not stopped by anything\n");
        print_rlimits(req, out);
        break;
    case ISO_BWRAP: {
        char **argv = iso_bwrap_argv(req, mp, netns_nosup, 3, err, sizeof err);
        if (argv == NULL) {
            fprintf(out, "error: %s\n", err);
            goto out;
        }
        fprintf(out, "bubblewrap (fd 3: the seccomp filter below, without user notification):\n ");
        for (size_t i = 0; argv[i]; i++)
            fprintf(out, " %s", argv[i]);
        fprintf(out, "\nunder sbx-guard, the agent after \"--\" is preceded by sbx-guard's own status\n"
                     "reporter (/proc/self/fd/N --sbx-bwrap-report S N --), and LD_PRELOAD is\n"
                     "passed to it as SBX_BWRAP_REPORT_PRELOAD (docs/isolation.md)\n");
        fprintf(out, "not available with bwrap: Landlock, the supervisor\n");
        fprintf(out, "net: %s\n", netns_nosup
                ? "new, only lo (the policy allows unix: sockets at most; those it allows\n"
                  "  stay reachable through the mounts)"
                : "the host's: network rules are held by the guard alone (a static program\n"
                  "  or a raw system call reaches any address)");
        print_net_rules(req->policy, req->mode, out);
        iso_argv_free(argv);
        iso_seccomp_print(false, out);
        print_rlimits(req, out);
        break;
    }
    case ISO_GVISOR: {
        char bundle[4200], empty[4300];
        snprintf(bundle, sizeof bundle, "%s/gvisor.XXXXXX",
                 req->runtime_dir ? req->runtime_dir : "/tmp");
        snprintf(empty, sizeof empty, "%s/empty", bundle);
        char **argv = iso_gvisor_argv(bundle, "sbx-PID-XXXXXX", net_none, req->n_binds > 0, err,
                                      sizeof err);
        char *config = argv ? iso_gvisor_config(req, mp, empty, net_none, err, sizeof err) : NULL;
        if (config == NULL) {
            fprintf(out, "error: %s\n", err);
            iso_argv_free(argv);
            goto out;
        }
        fprintf(out, "gVisor (runsc; XXXXXX is a fresh directory of the runtime dir per run):\n ");
        for (size_t i = 0; argv[i]; i++)
            fprintf(out, " %s", argv[i]);
        fprintf(out, "\n%s/config.json (the OCI bundle):\n%s", bundle, config);
        fprintf(out, "not available under gVisor: Landlock (ENOSYS inside), the supervisor\n"
                     "  (user notification is EINVAL inside)\n"
                     "seccomp: sbx's list as the bundle's linux.seccomp, enforced by the Sentry\n"
                     "  (--oci-seccomp); the Sentry serves every system call, so no call\n"
                     "  reaches the host kernel\n");
        fprintf(out, "net: %s\n", net_none
                ? "none: the sandbox's own loopback only (the host's loopback services are\n"
                  "  out of reach, unlike native)"
                : "the host's (--network=host): network rules are held by the guard alone");
        fprintf(out, "audit: the guard writes one ring file bound into the sandbox; sbx-guard\n"
                     "  relays it to sbx-auditd (no socket of sbx's is reachable inside)\n");
        print_net_rules(req->policy, req->mode, out);
        print_rlimits(req, out);
        free(config);
        iso_argv_free(argv);
        break;
    }
    case ISO_PODMAN:
    case ISO_DOCKER: {
        char profile[4200];
        snprintf(profile, sizeof profile, "%s/seccomp.XXXXXX.json",
                 req->runtime_dir ? req->runtime_dir : "/tmp");
        char **argv = iso_container_argv(req, mp, "sbx-PID-XXXX", net_none, profile, err,
                                         sizeof err);
        if (argv == NULL) {
            fprintf(out, "error: %s\n", err);
            goto out;
        }
        fprintf(out, "%s (the engine must answer `%s info` first, or nothing starts):\n ",
                iso_mode_name(req->mode), iso_mode_name(req->mode));
        for (size_t i = 0; argv[i]; i++)
            fprintf(out, " %s", argv[i]);
        char *json = iso_seccomp_oci(false);
        fprintf(out, "\n%s (sbx's seccomp list, in place of the engine's own profile):\n%s",
                profile, json ? json : "(out of memory)\n");
        free(json);
        fprintf(out, "not available in a container: Landlock, the supervisor\n");
        print_net_rules(req->policy, req->mode, out);
        iso_argv_free(argv);
        break;
    }
    case ISO_AUTO:
    case ISO_NATIVE:
        fprintf(out, "process: no_new_privs; every capability dropped (bounding set empty)\n");
        fprintf(out, "namespaces: user (uid %u -> %u, gid %u -> %u), pid (sbx init is pid 1;\n"
                     "  SIGKILL of it ends every process of the agent), mount, ipc, uts, cgroup,\n",
                (unsigned)geteuid(), (unsigned)geteuid(), (unsigned)getegid(), (unsigned)getegid());
        fprintf(out, "  net: %s\n", netns
                ? "new, only lo up, no route out; /etc/resolv.conf names sbx's DNS stub\n"
                  "  (" ISO_DNS_STUB_ADDR ":53, served by sbx-guard: allowed names only, forwarded\n"
                  "  to the host's resolver); an allowed connect or datagram is made by\n"
                  "  sbx-guard in the host's namespace and handed to the agent"
                : pi->audit_mode ? "the host's (audit mode: the agent sees the network it will have)"
                : "the host's (a network.bind rule allows more than loopback)");
        if (req->mode == ISO_AUTO && !pi->isolation_required)
            fprintf(out, "  (auto: without user namespaces, runs without the namespaces and "
                         "mounts, and says so)\n");
        iso_mounts_print(mp, out);
        iso_landlock_print(ll, out);
        if (ll->abi <= 0 && (req->mode == ISO_NATIVE || pi->isolation_required))
            fprintf(out, "  -> iso_spawn will refuse to start\n");
        iso_seccomp_print(ISO_NOTIFY_EXEC_NET | (req->supervise_open ? ISO_NOTIFY_OPEN : 0), out);
        fprintf(out, "supervisor (in sbx-guard, outside the agent): every execve/execveat,\n"
                     "  connect and datagram with an address is judged by files.exec, commands\n"
                     "  and network.connect (host names through the DNS stub), recorded\n"
                     "  (layer supervisor), and refused with EACCES when plainly denied; exec of\n"
                     "  a memfd is always refused; ld.so PROG is judged as PROG\n");
        print_net_rules(req->policy, req->mode, out);
        print_rlimits(req, out);
        break;
    }
    print_container(req, mp, netns_nosup, out);
    rc = 0;
out:
    if (mp)
        iso_mounts_free(mp);
    free(mp);
    free(ll);
    return rc;
}
