/*
 * isolate.h — the kernel layer: how sbx-guard starts the agent.
 *
 * iso_spawn() starts the agent process as sbx-guard's child with the policy
 * compiled into kernel rules (ISO_NATIVE: user/pid/mount/ipc/uts and, when
 * the policy allows no outside network, net namespaces; Landlock; seccomp
 * with a user-notification supervisor; rlimits), into a bubblewrap command
 * line (ISO_BWRAP), into an OCI bundle that gVisor's runsc runs
 * (ISO_GVISOR, gvisor.c), into container engine flags (ISO_PODMAN,
 * ISO_DOCKER, container.c), or with rlimits only (ISO_NONE).  ISO_AUTO is NATIVE
 * where the kernel allows it, with an explicit, recorded degradation.
 * Set-up failure is fatal: either the agent runs with every layer the mode
 * promises, or it does not run and ERR says why.
 *
 * Memory: the caller owns the request and everything it points to; the
 * child record is filled in place.  Errors: 0, or -1 with ERR filled.
 */
#ifndef SBX_ISOLATE_H
#define SBX_ISOLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "event.h"
#include "policy.h"

enum iso_mode { ISO_AUTO = 0, ISO_NONE, ISO_NATIVE, ISO_BWRAP, ISO_GVISOR, ISO_PODMAN,
                ISO_DOCKER };

/* "auto" | "none" | "native" | "bwrap" | "gvisor" | "podman" | "docker"
 * -> mode, or -1.  auto never becomes gvisor or an engine: a backend
 * outside sbx runs only when named. */
int iso_mode_parse(const char *s);
const char *iso_mode_name(enum iso_mode m);

/* A host file bound into a gvisor sandbox at another path (iso_request). */
struct iso_bind {
    const char *src;            /* absolute, on the host */
    const char *dst;            /* absolute, in the sandbox */
};

struct iso_request {
    const struct policy *policy;
    enum iso_mode mode;
    const char *workspace;      /* absolute */
    const char *runtime_dir;    /* sbx's sockets; only events.sock may be
                                 * reachable from inside */
    const char *audit_db;       /* the store; never reachable from inside */
    const char *preload;        /* libsbx-preload.so, must stay loadable:
                                 * the agent is not started when its first
                                 * process could not load it (NULL: no
                                 * guard asked for) */
    const char *policy_copy;    /* the private policy file the preload reads */
    const char *policy_image;   /* and its compiled form, or NULL */
    unsigned cover_budget_ms;   /* time allowed for covering deny-read
                                 * files at start (0: the default) */
    FILE *progress;             /* where a long cover reports progress,
                                 * or NULL */
    bool supervise_open;        /* native: every open of the agent is
                                 * judged by the supervisor against the
                                 * deny lists (docs/isolation.md) */
    const char *ring_file;      /* added, gvisor: the event ring file
                                 * sbx-guard relays (bound writable into
                                 * the sandbox), or NULL */
    const struct iso_bind *binds;   /* added, gvisor: host FIFOs bound into
                                 * the sandbox at other paths (sbx-serve's
                                 * request and reply channels: runsc passes
                                 * no descriptor beyond 0..2), or NULL;
                                 * runsc then opens host FIFOs (--host-fifo) */
    size_t n_binds;
    const char *image;          /* added, podman/docker: the image (NULL:
                                 * debian:bookworm-slim) */
    char *const *argv;          /* the agent's command */
    char *const *envp;          /* its complete environment */
    const int *child_fds;       /* added: NULL, or the agent's descriptors
                                 * 0..n_child_fds-1, in order (sbx-serve's
                                 * pipes); every other descriptor of the
                                 * caller stays out.  NULL: the agent
                                 * inherits the caller's 0, 1 and 2.  Not
                                 * with ISO_BWRAP (refused) */
    unsigned n_child_fds;       /* at most ISO_CHILD_FDS_MAX */
    bool no_inet_sockets;       /* added: native: socket() of AF_INET,
                                 * AF_INET6 and AF_NETLINK fails with EACCES
                                 * (sbx-serve's requests: no network at
                                 * all, not even a loopback socket) */
};
#define ISO_CHILD_FDS_MAX 8

struct iso_child {
    pid_t pid;                  /* sbx-guard waits for this pid; its exit
                                 * status is the agent's */
    int notify_fd;              /* seccomp user-notification fd, or -1 */
    bool pidns;                 /* SIGKILL of pid ends every process of the agent */
    bool guard;                 /* the agent's first process loads the
                                 * preload (false: a static program, or no
                                 * preload asked for) */
    char warning[768];          /* a degradation sbx-guard must print and
                                 * record ("" if none) */
    char layers[256];           /* what is active, e.g. "guard,userns,pidns,
                                 * mntns,netns,landlock-v7,seccomp,supervisor" */
    int status_fd;              /* added: -1, or where the sandbox's init
                                 * reports the agent's own wait status
                                 * (see iso_child_status); sbx-guard owns it */
    bool dns;                   /* the DNS stub serves the agent: poll
                                 * iso_dns_fds() and call iso_dns_serve */
    char bundle[512];           /* added, gvisor: the OCI bundle and runsc
                                 * state directory ("" if none); removed by
                                 * iso_child_cleanup */
    bool run_status_known;      /* added, gvisor: iso_child_cleanup read the */
    int run_status;             /* agent's wait status from runsc's log */
    char container[64];         /* added, podman/docker: the container's
                                 * name ("" if none) */
    char engine[64];            /* and the engine's path */
};

/* Added.  Part of a hard kill: ends the container of a podman/docker run
 * (its processes are the engine's, not sbx-guard's descendants).  Nothing
 * for the other modes. */
void iso_child_kill(struct iso_child *child);

/* Added.  After the agent ended: removes what iso_spawn left on disk for
 * it (gvisor's bundle, after reading from runsc's log the agent's wait
 * status for iso_child_status).  Safe to call for every mode, and twice. */
void iso_child_cleanup(struct iso_child *child);

/* Starts the agent.  Always applies the policy's rlimits, puts the agent in
 * its own process group (the terminal's foreground, see
 * iso_tty_foreground), and ignores SIGXFSZ in it (so max_write_bytes gives
 * EFBIG, not a crash).  On success the agent has been exec'd or is about to
 * be; on failure nothing runs. */
int iso_spawn(const struct iso_request *req, struct iso_child *child,
              char *err, size_t errsz);

/* True when the caller's process group is the foreground of the terminal
 * on stdin.  iso_spawn asks before it forks, and then the agent's process
 * group takes the terminal before the agent's exec; sbx-guard asks the same
 * before iso_spawn, to know it must take the terminal back at the end. */
bool iso_tty_foreground(void);
/* Added.  Notes which signals this process was started with ignored (as
 * under nohup), so the agent keeps them ignored; every other disposition
 * is reset to the default in the agent.  Call first thing in main, before
 * anything changes a disposition.  Without the call (sbx-serve) the agent
 * starts with every signal at its default but SIGXFSZ. */
void iso_keep_inherited_ignores(void);

/* Added.  The agent's wait status under bwrap: bwrap's init exits 128+N
 * when the agent died of signal N, as an agent's own `exit 128+N` does, so
 * bwrap runs a reporter first (this program again, from /proc/self/fd: no
 * path of ours needs to be visible inside) that waits for the agent and
 * hands its status out on child->status_fd.  A program that calls this
 * first thing in main (sbx-guard) offers that mode: when ARGV asks for it,
 * this runs the reporter and does not return; else it returns and
 * iso_spawn_bwrap may use it.  Without the call bwrap's exit status is all
 * there is (sbx-serve does not call it: it has no bwrap mode). */
void iso_bwrap_report_main(int argc, char **argv);

/* Added.  After waitpid(child->pid) returned STATUS: the agent's own wait
 * status.  With a pid namespace, child->pid is the sandbox's init, which
 * exits with 128+N when the agent died of signal N (an init cannot re-raise
 * most signals on itself); this recovers the signal from what the init
 * reported.  Under gvisor, runsc exits 128+N the same way; the signal comes
 * from runsc's log, read by iso_child_cleanup (call that first); under
 * bwrap from the reporter (iso_bwrap_report_main).  Returns
 * STATUS unchanged when nothing better is known.  Closes child->status_fd. */
int iso_child_status(struct iso_child *child, int status);

/* What each layer does with a connect to TARGET (host:port, [v6]:port,
 * ip:port, a CIDR rule's text or unix:/path) under MODE with policy P: a
 * static sentence for sbx-policy explain and --print-isolation
 * (docs/network.md). */
const char *iso_net_layers(const struct policy *p, const char *target, enum iso_mode mode);

/* Prints, for --print-isolation, exactly what iso_spawn would set up for
 * REQ's mode, and the equivalent podman/docker run flags. */
int iso_print(const struct iso_request *req, FILE *out);

/* Supervisor: called by sbx-guard when notify_fd is readable.  Handles one
 * notification (exec or connect of any process of the agent), answers the
 * kernel, and reports what it saw through CB (layer supervisor).  0, or -1
 * when the fd is finished (the agent is gone). */
typedef void (*iso_event_cb)(void *ctx, const struct sbx_event_desc *ev);
int iso_supervise(int notify_fd, const struct iso_request *req,
                  iso_event_cb cb, void *ctx);

/* The DNS stub (dns_stub.c), under native with the agent's own net
 * namespace: the agent's only resolver, which answers the names the policy
 * allows and remembers what they resolved to (docs/network.md).
 * iso_spawn starts it (child->dns).  iso_dns_fds fills FDS with the
 * descriptors to poll (0 to 2; the stub owns them); iso_dns_serve handles
 * what is readable on FD, reporting each refused query through CB (layer
 * supervisor, op connect, target "dns:NAME").  Never blocks. */
int iso_dns_fds(int fds[2]);
void iso_dns_serve(const struct iso_request *req, int fd, iso_event_cb cb, void *ctx);
/* Starts the stub on AGENT_FD (a UDP socket bound inside the agent's
 * namespace; the stub owns it from now).  0, or -1 with ERR. */
int iso_dns_start(const struct iso_request *req, int agent_fd, char *err, size_t errsz);
/* Closes the stub's sockets and forgets what it resolved. */
void iso_dns_stop(void);

#endif
