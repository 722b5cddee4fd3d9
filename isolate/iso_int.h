/*
 * iso_int.h — what the files of the kernel layer share (not a public API).
 *
 * The set-up is one straight sequence (spawn.c): parse the mode, compile the
 * policy into plans in sbx-guard (mount plan, Landlock rules, seccomp BPF)
 * while everything may still allocate and fail loudly, then clone the
 * sandbox's init, which applies the plans in order: maps, mounts, init
 * duties; and the agent, which drops capabilities, sets rlimits, restricts
 * itself with Landlock and seccomp and execs.  Each file below owns one
 * step.  Functions return 0 or -1 with ERR filled (sbx style: "what: why").
 */
#ifndef SBX_ISO_INT_H
#define SBX_ISO_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/filter.h>
#include <linux/types.h>

#include "isolate.h"

#define ISO_ERR_LEN 512

/* printf into ERR (never overflows, always terminated). */
void iso_errf(char *err, size_t errsz, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- limits.c: rlimits and the process state every mode resets -------- */

struct iso_rlimit {
    int resource;
    const char *name;           /* "RLIMIT_CPU" */
    uint64_t value;             /* soft = hard */
};
#define ISO_RLIMIT_MAX 6
/* The rlimits the policy asks for (resource order is stable). */
size_t iso_rlimits(const struct policy *p, struct iso_rlimit out[ISO_RLIMIT_MAX]);
/* In the child before exec: applies the rlimits but RLIMIT_AS, resets the signal mask and
 * every disposition (SIGXFSZ and iso_keep_inherited_ignores's set ignored), marks fds >= 3 close-on-exec except
 * KEEP_FD.  Async-signal-safe.  0, or -1 with errno (and *WHAT set). */
int iso_child_basics(const struct iso_rlimit *rl, size_t n, int keep_fd,
                     const char **what);
/* In the child, the last step before seccomp and exec: applies RL's
 * RLIMIT_AS.  Last because the set-up's own address space (a sanitizer's
 * shadow reserves terabytes) may already exceed it: the guard's load check
 * (iso_guard_loadable) must map memory before it; after the exec the agent's
 * fresh image is held to it.  0, or -1 with errno (and *WHAT set). */
int iso_child_late_rlimits(const struct iso_rlimit *rl, size_t n, const char **what);
/* In the child after iso_child_basics: makes REQ's child_fds the
 * descriptors 0..n-1 (not close-on-exec), first moving the NKEEP
 * descriptors *KEEP[i] (the set-up's own channels; -1 ignored) out of that
 * range.  Nothing when REQ has no child_fds.  Async-signal-safe.  0, or -1
 * with errno. */
int iso_child_fds(const struct iso_request *req, int *const keep[], size_t nkeep);
/* In the child that leads the agent's process group, right after setpgid
 * and before the agent's exec: makes that group the terminal's foreground.
 * Before the exec, because a program that reads the terminal at once
 * (cat, read, less) would otherwise be stopped with SIGTTIN, and nothing
 * would continue it.  Async-signal-safe.  0, or -1 with errno. */
int iso_take_terminal(void);

/* ---- guardcheck.c: is the guard really in the agent's first process? -- */

/* In the agent's process just before execve: the steps ld.so takes to load
 * the preload at PATH (open, ELF header of this machine, executable map).
 * Async-signal-safe.  0, or -1 with errno and *WHAT set. */
int iso_guard_loadable(const char *path, const char **what);
/* Whether running PATH goes through ld.so (a dynamic ELF, or a #! script
 * whose interpreter is one): 1 yes, 0 no (static), -1 unknown. */
int iso_program_loads_guard(const char *path);

/* ---- landlock.c --------------------------------------------------------- */

#define ISO_LL_MAX_RULES 128
#define ISO_LL_MAX_PORTS 64

struct iso_ll_rule {
    char path[4096];
    uint64_t access;
    const char *why;            /* the rule it comes from, or "ld.so" */
};

struct iso_landlock {
    int abi;                    /* 0: not available */
    uint64_t handled_fs;
    uint64_t handled_net;
    uint64_t scoped;
    uint32_t restrict_flags;
    size_t n_rules;
    struct iso_ll_rule rules[ISO_LL_MAX_RULES];
    size_t n_connect, n_bind;
    uint16_t connect_ports[ISO_LL_MAX_PORTS];
    uint16_t bind_ports[ISO_LL_MAX_PORTS];
    char net_note[160];         /* why TCP connect/bind is not handled */
};

/* The running kernel's Landlock ABI (0 when unavailable). */
int iso_landlock_abi(void);
/* Compiles REQ's policy into rules for the running ABI.  Allocates nothing. */
int iso_landlock_plan(const struct iso_request *req, struct iso_landlock *ll,
                      char *err, size_t errsz);
/* Creates the ruleset (paths resolved in the caller's mount namespace:
 * call after the mounts).  Returns the ruleset fd or -1. */
int iso_landlock_ruleset(const struct iso_landlock *ll, char *err, size_t errsz);
/* Restricts the calling thread (needs no_new_privs).  0 or -1/errno. */
int iso_landlock_restrict(const struct iso_landlock *ll, int ruleset_fd);
void iso_landlock_print(const struct iso_landlock *ll, FILE *out);
const char *iso_landlock_access_name(uint64_t bit);

/* ---- seccomp.c ---------------------------------------------------------- */

struct iso_bpf {
    struct sock_filter *insns;  /* malloc'd; iso_bpf_free */
    unsigned short len;
};
/* What the filter hands to the supervisor (NOTIFY below). */
#define ISO_NOTIFY_EXEC_NET 1u  /* execve, execveat, connect, sendto(addr), sendmsg, sendmmsg */
#define ISO_NOTIFY_OPEN     2u  /* open, openat, openat2, creat */
#define ISO_DENY_INET       4u  /* not a notification: socket() of AF_INET,
                                 * AF_INET6, AF_NETLINK refused (EACCES) */
/* Builds the filter: EPERM list, clone namespace flags, clone3 ENOSYS,
 * personality, bad arch kills, and user notification for the calls NOTIFY
 * names (0: none; true is ISO_NOTIFY_EXEC_NET). */
int iso_seccomp_build(unsigned notify, struct iso_bpf *out, char *err, size_t errsz);
void iso_bpf_free(struct iso_bpf *b);
/* Installs B with SECCOMP_FILTER_FLAG_NEW_LISTENER when NOTIFY; returns the
 * listener fd (NOTIFY), 0, or -1/errno.  Needs no_new_privs. */
int iso_seccomp_install(const struct iso_bpf *b, bool notify);
void iso_seccomp_print(unsigned notify, FILE *out);
/* The same list (without user notification) as a seccomp profile of the
 * container engines (docker's and podman's JSON: allow by default, the
 * list refused with its errno), for --security-opt seccomp=FILE.  It
 * replaces the engine's default profile; the calls of that profile that
 * need a capability stay refused by --cap-drop=ALL.  FOR_GVISOR: the
 * bundle of gvisor.c, enforced by runsc 20221219's Sentry, which answers
 * every rule EPERM whatever its errnoRet: clone3 is left out, to the
 * Sentry's own ENOSYS (it has no clone3), or libc's posix_spawn would
 * fail with EPERM instead of falling back to clone (which the list
 * filters).  Malloc'd text (the caller frees), NULL when out of memory. */
char *iso_seccomp_oci(bool for_gvisor);

/* ---- mounts.c and cover.c ---------------------------------------------- */

enum iso_mnt_kind {
    ISO_MNT_HIDE,               /* empty read-only tmpfs over a directory */
    ISO_MNT_MASK_FILE,          /* empty mode-0000 file over a file */
    ISO_MNT_MASK_DIR,           /* empty mode-0000 tmpfs over a directory */
    ISO_MNT_RO,                 /* bind onto itself read-only */
    ISO_MNT_RW,                 /* bind onto itself writable */
};

struct iso_mnt {
    enum iso_mnt_kind kind;
    char *path;                 /* malloc'd, owned by the plan */
    const char *why;
};

/* The default time budget of the deny cover.  The walk looks at about
 * 500,000 entries a second with a warm cache (a 25,000-file
 * node_modules costs 45 ms), so 30 s is a tree of millions of entries: one
 * that cannot be a project directory; an agent given / or a home as its
 * workspace is refused rather than kept waiting for minutes
 * (SBX_COVER_BUDGET_MS overrides it; docs/isolation.md). */
#define ISO_COVER_BUDGET_MS_DEFAULT 30000u

struct iso_mounts {
    bool private_tmp;           /* tmpfs on /tmp */
    bool all_ro;                /* everything read-only, then RW entries */
    bool new_proc;
    size_t n_keep;
    char keep[8][4096];         /* must stay reachable after the hides */
    size_t n, cap;
    struct iso_mnt *m;          /* malloc'd, grows; iso_mounts_free */
    size_t *index;              /* open-addressing hash of (path, kind):
                                 * 1 + index into m, 0 empty */
    size_t index_cap;           /* a power of two, > 2 * n */
    size_t n_hide;
    char hide[4][4096];         /* store dir, runtime dir */
    char preload[4096];         /* the guard, bound executable last ("") */
    /* The cover of what the deny lists name (cover.c): complete, or why
     * not.  An incomplete cover is refused under native and isolation:
     * required, and recorded as a degradation under auto. */
    bool incomplete;
    char incomplete_why[512];
    size_t n_links;
    struct iso_inode { dev_t dev; ino_t ino; } *links;
                                /* deny-read files with more than one name
                                 * (malloc'd): their other names are not
                                 * covered, the supervised open refuses them */
    unsigned long walked;       /* directory entries looked at */
    unsigned long covered;      /* deny matches covered */
    unsigned walk_ms;
};

/* Adds one mount to the plan, unless it is already there or would add
 * nothing (under a masked directory).  -1 (ENOMEM) when out of memory. */
int iso_mounts_add(struct iso_mounts *mp, enum iso_mnt_kind kind, const char *path,
                   const char *why);
/* Frees what the plan allocated (not MP itself); MP may be zeroed. */
void iso_mounts_free(struct iso_mounts *mp);
/* True for /proc, /sys, /dev and for what MP hides: never covered. */
bool iso_mounts_skip(const struct iso_mounts *mp, const char *path);
/* cover.c: adds the mounts that cover what the read- and write-deny lists
 * of REQ's policy name and what exists now, walking each glob's root to
 * the end (no depth or entry limit) within REQ's time budget; fills
 * mp->incomplete when the walk or the namespace's mount limit cannot
 * cover everything.  -1 only when out of memory. */
int iso_cover_plan(const struct iso_request *req, struct iso_mounts *mp);

int iso_mounts_plan(const struct iso_request *req, struct iso_mounts *mp,
                    char *err, size_t errsz);
/* In the sandbox's init (new user+mount ns, with capabilities there). */
int iso_mounts_apply(const struct iso_mounts *mp, char *err, size_t errsz);
void iso_mounts_print(const struct iso_mounts *mp, FILE *out);

/* ---- flags.c: the plan as another program's flags ---------------------- */

/* A NULL-terminated argv of malloc'd strings, grown as flags are added
 * (bwrap's and the engines' command lines).  After an allocation failure
 * every add does nothing and OOM stays set: check it once at the end. */
struct iso_argv {
    char **v;
    size_t n, cap;
    bool oom;
};
/* Adds S as it is (a path may hold a '%'). */
void iso_argv_add(struct iso_argv *a, const char *s);
void iso_argv_addf(struct iso_argv *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Frees an argv of iso_argv's (or any of malloc'd strings); NULL is fine. */
void iso_argv_free(char **argv);
/* Whether PATH is under one of the files the plan keeps reachable. */
bool iso_mounts_is_keep(const struct iso_mounts *mp, const char *path);
/* Whether M is a write root a backend binds from the host's view: every
 * ISO_MNT_RW entry but those under the private /tmp, where only the keeps
 * come from the host (/tmp itself is the writable tmpfs already). */
bool iso_mounts_rw_from_host(const struct iso_mounts *mp, const struct iso_mnt *m);

/* ---- netns decision (ns.c) ---------------------------------------------- */

/* True when no network.connect.allow or bind rule needs anything but
 * loopback, so a fresh net namespace with only `lo` loses nothing. */
bool iso_net_loopback_only(const struct policy *p);
/* Native: whether the agent gets its own net namespace, reached out of
 * only by the connections sbx-guard makes for it (egress.c) and resolving
 * only through the DNS stub: unless in audit mode or a bind.allow rule
 * names a non-loopback address (docs/network.md). */
bool iso_net_own_ns(const struct policy *p);
/* True when no network.connect.allow or bind rule names anything but unix:
 * sockets: bwrap (which has no supervisor to reach the host's loopback for
 * the agent) then gives the agent a net namespace; otherwise the host's. */
bool iso_net_unix_only(const struct policy *p);
int iso_net_lo_up(char *err, size_t errsz);
int iso_write_id_maps(uid_t uid, gid_t gid, char *err, size_t errsz);

/* ---- native.c ----------------------------------------------------------- */

int iso_spawn_native(const struct iso_request *req, struct iso_child *child,
                     char *err, size_t errsz);

/* ---- bwrap.c ------------------------------------------------------------ */

/* Builds bubblewrap's argv (malloc'd strings, NULL-terminated; free with
 * iso_argv_free).  SECCOMP_FD is the fd bwrap reads the filter from. */
char **iso_bwrap_argv(const struct iso_request *req, const struct iso_mounts *mp,
                      bool unshare_net, int seccomp_fd, char *err, size_t errsz);
int iso_spawn_bwrap(const struct iso_request *req, struct iso_child *child,
                    char *err, size_t errsz);
/* The bwrap binary, or NULL. */
const char *iso_bwrap_path(void);

/* ---- gvisor.c ------------------------------------------------------------ */

/* The runsc binary, or NULL; $SBX_RUNSC when set (NULL unless it is an
 * absolute path to an executable). */
const char *iso_runsc_path(void);
/* config.json for REQ under plan MP (malloc'd text; the caller frees),
 * EMPTY_FILE the host file that covers deny-read files. */
char *iso_gvisor_config(const struct iso_request *req, const struct iso_mounts *mp,
                        const char *empty_file, bool net_none, char *err, size_t errsz);
/* runsc's argv for BUNDLE and container ID (free with iso_argv_free);
 * HOST_FIFO: the sandbox may open the host FIFOs bound into it. */
char **iso_gvisor_argv(const char *bundle, const char *id, bool net_none, bool host_fifo,
                       char *err, size_t errsz);
int iso_spawn_gvisor(const struct iso_request *req, struct iso_child *child,
                     char *err, size_t errsz);

/* ---- container.c ---------------------------------------------------------- */

/* The podman or docker binary for MODE, or NULL. */
const char *iso_engine_path(enum iso_mode mode);
/* `ENGINE run ...` for REQ under plan MP, container NAME, SECCOMP_FILE the
 * profile (NULL: the engine's default) (free with iso_argv_free). */
char **iso_container_argv(const struct iso_request *req, const struct iso_mounts *mp,
                          const char *name, bool net_none, const char *seccomp_file,
                          char *err, size_t errsz);
int iso_spawn_container(const struct iso_request *req, struct iso_child *child,
                        char *err, size_t errsz);

/* ---- supervisor.c ------------------------------------------------------- */

/* iso_supervise without a callback, used while iso_spawn waits for the
 * agent's own execve (which is itself notified). */
int iso_supervise_quiet(int fd, const struct iso_request *req);
/* supervise_open.c: answers one notified open (open, openat, openat2,
 * creat).  ANS says how: hand in ANS->fd (the caller owns it, and answers
 * with SECCOMP_IOCTL_NOTIF_ADDFD + SECCOMP_ADDFD_FLAG_SEND, newfd_flags
 * ANS->fd_flags), refuse with ANS->err, or carry on (fd -1, err 0: only
 * for what cannot read, decided on the call's registers).  *REPORT when
 * the policy refused it, with the event to record in EV (strings in BUF
 * and static storage).  Always 0. */
struct sbx_event_desc;
struct iso_open_answer {
    int fd;
    unsigned fd_flags;
    int err;
};
int iso_answer_open(const struct iso_request *req, pid_t pid, long nr, const __u64 args[6],
                    struct iso_open_answer *ans, bool *report, struct sbx_event_desc *ev,
                    char *buf, size_t bufsz);
/* True when opening NAME (real, in the agent's view) with FLAGS is
 * refused by files.read.deny (an open that can read) or files.write.deny
 * (one that can write); EV filled for the record. */
bool iso_open_judge(const struct iso_request *req, const char *name, uint64_t flags,
                    struct sbx_event_desc *ev);
/* Hands the supervised open what the agent was given: LL (its Landlock
 * rules, re-applied by name to what the supervisor opens for it) and MP's
 * hidden directories (copied).  0, or -1 when out of memory. */
int iso_supervise_plan(const struct iso_landlock *ll, const struct iso_mounts *mp);
/* egress.c: makes the connection of notification ID (process PID,
 * descriptor AGENT_FD) to SA itself, in sbx-guard's network namespace, and
 * puts the socket in place of AGENT_FD.  0 when the answer is decided:
 * *CONT set: answer "carry on" (a blocking agent's connect then waits for
 * the connection made); else *AGENT_ERR is 0 (connected), EINPROGRESS (a
 * non-blocking socket) or the errno the agent's connect fails with.  -1
 * when this cannot be done (not a stream or datagram socket, one already
 * connecting, descriptor gone): then let the kernel answer. */
struct sockaddr;
struct msghdr;
int iso_egress_connect(int notify_fd, uint64_t id, pid_t pid, int agent_fd,
                       const struct sockaddr *sa, unsigned len, int *agent_err, bool *cont);
/* Sends the datagram MSG (msg_name set, judged allowed; data and control
 * in sbx-guard's memory) for notification ID itself, from a socket in
 * sbx-guard's namespace that replaces AGENT_FD (unless AGENT_FD already is
 * one).  0 when decided: *SENT bytes, or *AGENT_ERR.  -1 when this cannot
 * be done (not a datagram socket): let the kernel answer. */
int iso_egress_sendto(int notify_fd, uint64_t id, pid_t pid, int agent_fd,
                      const struct msghdr *msg, int flags, ssize_t *sent, int *agent_err);
/* Under native with the agent's own net namespace (native.c says so once
 * the agent runs): every allowed connect and datagram is made by sbx-guard
 * in its own namespace, the stub's address is the agent's, and host-name
 * rules are decided by what the stub resolved (docs/network.md).  DIAG_FD
 * (owned from now; -1 none): a NETLINK_SOCK_DIAG socket in the agent's
 * namespace, to see the agent's own loopback servers. */
void iso_supervise_set_netns(bool on, int diag_fd);

/* ---- dns_stub.c: the agent's resolver (see isolate.h for serving) ------- */

/* The stub's address in the agent's namespace (its resolv.conf names it). */
#define ISO_DNS_STUB_ADDR "127.0.0.53"
#define ISO_DNS_STUB_PORT 53
#define ISO_DNS_NAME 256        /* a DNS name is at most 253 characters */

/* The question of a standard query M (N bytes): the name lowercased and
 * dotted, its type, and where the question ends.  0 or -1 (malformed, not
 * one question, not class IN, a character no rule could name). */
int iso_dns_parse_query(const unsigned char *m, size_t n, char *name, size_t namesz,
                        uint16_t *qtype, size_t *qend);
/* The same for a response (no QR or class check). */
int iso_dns_parse_query_q(const unsigned char *m, size_t n, char *name, size_t namesz,
                          uint16_t *qtype, size_t *qend);
/* Calls FOUND for each A and AAAA record of response M, whose question must
 * be QNAME.  0, or -1 when malformed or another question's answer. */
int iso_dns_parse_answers(const unsigned char *m, size_t n, const char *qname,
                          void (*found)(void *ctx, int family, const unsigned char *addr,
                                        uint32_t ttl),
                          void *ctx);
/* Remembers that NAME resolved to ADDR (4 or 16 bytes) at NOW (ms, the
 * monotonic clock) for TTL seconds (at least a minute; UINT32_MAX: for
 * ever). */
void iso_dns_remember(const char *name, int family, const unsigned char *addr,
                      uint32_t ttl, uint64_t now);
/* The names SA's address was resolved from and that have not expired at
 * NOW; at most MAX, into NAMES.  iso_dns_names: now. */
size_t iso_dns_names_at(const struct sockaddr *sa, uint64_t now, char (*names)[ISO_DNS_NAME],
                        size_t max);
size_t iso_dns_names(const struct sockaddr *sa, char (*names)[ISO_DNS_NAME], size_t max);
/* Forgets every answer and every query in flight. */
void iso_dns_forget(void);
/* Whether the stub answers NAME for policy P: some connect.allow rule that
 * could name a host allows NAME on its port (deny rules win as for a
 * connect).  V: the deciding verdict. */
bool iso_dns_name_allowed(const struct policy *p, const char *name, struct policy_verdict *v);

/* Hands the supervised open the deny-read inodes of the plan (copied). */
int iso_supervise_deny_inodes(const struct iso_inode *links, size_t n);
/* What supervisor.c lends supervise_open.c: reading the caller's memory
 * and resolving paths in its view (see supervisor.c). */
int iso_sup_read_str(pid_t pid, uint64_t addr, char *buf, size_t size);
ssize_t iso_sup_read_mem(pid_t pid, uint64_t addr, void *buf, size_t len);
int iso_sup_proc_link(pid_t pid, const char *what, char *out, size_t outsz);
int iso_sup_resolve_in(pid_t pid, const char *abs, char *out, size_t outsz);

#endif
