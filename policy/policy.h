/*
 * policy.h — the policy engine: YAML policy -> compiled, immutable policy ->
 * decisions.
 *
 * policy_load() reads a policy file (schema: ../shared/CONTRACT.md) and
 * the files it extends (extends:, at most 8), applies their list edits
 * ({add, remove}), takes every key still missing from the shipped default
 * policy (compiled in from policies/default.yaml), expands and compiles
 * every glob and PCRE2 pattern
 * (JIT), and returns a struct policy that never changes afterwards.  Every
 * error is reported as "FILE:LINE:COL: what is wrong" in a policy_diag, and
 * then nothing is returned (no half-loaded policy).
 *
 * After loading, every function here is pure and thread-safe.  The path and
 * network decisions allocate nothing and make no system call; the exec and
 * command decisions may allocate (PCRE2 match data, long command lines).
 *
 * Memory: the caller owns the struct policy and frees it with policy_free().
 * Rules, verdicts and info point into the policy and live as long as it does.
 *
 * Errors: functions returning int return 0, or -1 with errno set.
 */
#ifndef SBX_POLICY_H
#define SBX_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "ops.h"
#include "path.h"

struct policy;

#define POLICY_DIAG_MAX 32
#define POLICY_DIAG_LEN 512

/* Errors of one load.  count may exceed POLICY_DIAG_MAX; only the first
 * POLICY_DIAG_MAX messages are kept. */
struct policy_diag {
    unsigned count;
    char msg[POLICY_DIAG_MAX][POLICY_DIAG_LEN];   /* "FILE:LINE:COL: ..." */
};

struct policy_options {
    const char *workspace;      /* overrides the policy's `workspace`; NULL:
                                 * the policy's (relative to the policy file),
                                 * else the current directory */
    const char *display_path;   /* the file name used in messages and rule
                                 * locations; NULL: the path given */
    const char *home;           /* for "~/"; NULL: $HOME, else the passwd entry */
    const char *const *protect; /* NULL-terminated absolute paths (files or
                                 * directory trees) that every read and write
                                 * is denied, whatever the policy says: the
                                 * audit store, the runtime directory */
    const char *policy_dir;     /* where `extends: NAME` looks for NAME.yaml
                                 * (and serve/NAME.yaml); NULL: the shipped
                                 * policies (docs/policy.md, "Composing") */
};

/* Where an agent's policy and sbx's own files are, as sbx-guard knows them
 * and hands them to the preload (SBX_* variables, paths.h). */
struct policy_agent {
    const char *workspace;      /* absolute; NULL: the policy's own */
    const char *display_path;   /* the policy file as the user named it */
    const char *home;           /* what "~/" means; NULL: $HOME */
    const char *runtime_dir;    /* absolute: sbx's sockets */
    const char *audit_db;       /* absolute: the store (its directory) */
    const char *policy_copy;    /* absolute: the agent's copy of the policy;
                                 * NULL while there is none yet */
};

/* The options of an agent's policy and the storage they point into. */
struct policy_agent_options {
    struct policy_options opt;
    const char *protect[4];
    char db_dir[4096];
};

/* Builds the options every load of an agent's policy uses, sbx-guard's
 * (which checks the policy and compiles the image) and the preload's (which
 * loads the image, or the copy when there is none), so that both give the
 * same policy: IN's paths as they are, and protected whatever the policy
 * says the runtime directory, the store's directory and the policy copy.
 * OUT->opt points into IN's strings and into OUT itself: both must stay
 * where they are while it is used. */
void policy_agent_options(const struct policy_agent *in, struct policy_agent_options *out);

/* Loads PATH.  On error returns NULL and fills DIAG (if non-NULL). */
struct policy *policy_load(const char *path, const struct policy_options *opt,
                           struct policy_diag *diag);
/* The same from memory; NAME is the file name used in messages. */
struct policy *policy_load_buffer(const char *name, const char *buf, size_t len,
                                  const struct policy_options *opt,
                                  struct policy_diag *diag);
void policy_free(struct policy *p);

/* A loaded policy saved as one block (image.c), so that another process of
 * the same build takes it without parsing YAML, resolving paths or
 * compiling patterns: sbx-guard saves the agent's policy, the preload loads
 * it.  save creates PATH (mode 0400, exclusively); load checks the image
 * (version, layout, every offset and length) and returns NULL for anything
 * that does not check out.  Both return -1/NULL with errno set and a
 * message in ERR. */
int policy_image_save(const struct policy *p, const char *path, char *err, size_t errsz);
struct policy *policy_image_load(const char *path, char *err, size_t errsz);
/* Finishes what a policy from an image left for its first use (decoding
 * the command patterns), so that a child forked next does not have to.
 * 0, or -1 if it cannot (then command decisions deny). */
int policy_prepare(const struct policy *p);
/* Renames the policy file in P's rule locations and info (sbx-guard loads
 * with the path as the user gave it, for its messages, and hands the agent
 * the policy with the absolute one).  0 or -1. */
int policy_set_display_path(struct policy *p, const char *path);

/* ---- rules ---------------------------------------------------------------- */

enum policy_list {
    POLICY_READ_ALLOW, POLICY_READ_DENY,
    POLICY_WRITE_ALLOW, POLICY_WRITE_DENY,
    POLICY_EXEC_ALLOW, POLICY_EXEC_DENY,
    POLICY_CMD_DENY, POLICY_CMD_ALLOW,
    POLICY_CONNECT_ALLOW, POLICY_CONNECT_DENY,
    POLICY_BIND_ALLOW, POLICY_BIND_DENY,
    POLICY_PROTECT,             /* options.protect: denied for read and write */
    POLICY_LIST__COUNT
};

enum policy_net_kind {
    POLICY_NET_NONE = 0,        /* not a network rule */
    POLICY_NET_HOST,            /* name:port, matched as a name ("*.x.com" allowed) */
    POLICY_NET_IP,              /* ip:port, [v6]:port, or a bare ip */
    POLICY_NET_CIDR,            /* 10.0.0.0/8[:port] */
    POLICY_NET_UNIX,            /* unix:/path (a glob) */
    POLICY_NET_ANY,             /* "*" or "*:port" */
};

struct policy_rule {
    enum policy_list list;
    const char *section;        /* "files.read.deny", "commands.deny", ... */
    const char *text;           /* the rule as written */
    const char *pattern;        /* path lists and unix: rules: the absolute glob
                                 * after "~/" and workspace expansion, its
                                 * leading literal directory resolved */
    const char *reason;         /* commands: the rule's `reason`; else NULL */
    const char *file;           /* where it was written ("default.yaml" for
                                 * values taken from the shipped default) */
    unsigned line, col;         /* 1-based; 0 for implicit rules */
    /* network rules */
    enum policy_net_kind net_kind;
    int port_lo, port_hi;       /* -1 for any port */
};

/* The section name of list L: "files.read.allow", ..., "protect". */
const char *policy_list_name(enum policy_list l);

/* The rules of list L in file order; *out points into the policy. */
size_t policy_rules(const struct policy *p, enum policy_list l,
                    const struct policy_rule **out);

/* ---- decisions ------------------------------------------------------------ */

struct policy_verdict {
    enum sbx_decision decision; /* what the caller does: in audit mode, allow */
    bool audit;                 /* audit mode, and the policy would have denied */
    const struct policy_rule *rule; /* the deciding rule; never NULL (an
                                 * implicit rule when no allow matched) */
    const char *reason;         /* for a person: "matches files.read.deny",
                                 * "no files.write.allow rule matches", ... */
};

/* Every policy_decide_* function returns what the caller does and, if V is
 * not NULL, fills it. */

/* Formats "SECTION \"TEXT\" FILE:LINE" for audit rows and notices. */
int policy_rule_format(const struct policy_rule *r, char *out, size_t outsz);

/* Decides a file operation (any op of class read or write, and exec's path
 * check) on ABSPATH, which must already be normalized (see below).
 * read_only denies every write; PROTECT paths are always denied. */
enum sbx_decision policy_decide_path(const struct policy *p, enum sbx_op op,
                                     const char *abspath,
                                     struct policy_verdict *v);

/* Decides running ABSPATH (resolved) with ARGV (NULL-terminated): files.exec
 * for the path, then commands.deny / commands.allow over the command line
 * (argv joined by single spaces) and, for `sh|bash|dash|zsh ... -c SCRIPT`,
 * over SCRIPT too. */
enum sbx_decision policy_decide_exec(const struct policy *p, const char *abspath,
                                     char *const argv[], struct policy_verdict *v);

/* Decides a command line given as one string (for explain and system()). */
enum sbx_decision policy_decide_command(const struct policy *p, const char *cmdline,
                                        struct policy_verdict *v);

/* Decides OP (connect, send or bind) to SA.  HOST is the name SA was
 * resolved from, or NULL; name rules match only when HOST is given.  An
 * AF_UNIX path must be absolute (the caller resolves it against its cwd);
 * an abstract name is matched as "@name".  Families other than AF_INET,
 * AF_INET6 and AF_UNIX are allowed (not governed by network rules). */
enum sbx_decision policy_decide_net(const struct policy *p, enum sbx_op op,
                                    const struct sockaddr *sa, socklen_t salen,
                                    const char *host, struct policy_verdict *v);

/* Decides OP on a textual target "host:port", "1.2.3.4:443", "[::1]:80",
 * "unix:/path" (for sbx-policy explain).  -1/EINVAL if TARGET is malformed. */
int policy_decide_net_text(const struct policy *p, enum sbx_op op,
                           const char *target, struct policy_verdict *v);

/* True if socket(FAMILY, *, PROTOCOL) opens a kind of socket a policy can
 * govern, or one libc needs: AF_UNIX, AF_INET and AF_INET6 (the network
 * rules name them), and AF_NETLINK for NETLINK_ROUTE (getaddrinfo's
 * AI_ADDRCONFIG, if_nameindex) and NETLINK_SOCK_DIAG (ss).  Every other
 * family (vsock, packet, bluetooth, alg, can, ...) reaches past any rule a
 * policy can write: the guard and the seccomp filter refuse it
 * (EAFNOSUPPORT; EPROTONOSUPPORT for another netlink protocol). */
bool policy_socket_allowed(int family, int protocol);

/* ---- paths ---------------------------------------------------------------- */

/* Folding, resolving, "under", the PATH search and the words of a typed
 * command: path.h, the one place that says what a path means. */

/* Glob semantics of the contract on absolute paths: `*` within a segment,
 * `**` across segments (a whole-segment `**` also matches zero segments, and
 * a trailing one the directory itself), `?` one character, `[...]` a class
 * (`[!...]`, `[^...]` negate), `\c` the character c (docs/policy.md). */
bool policy_glob_match(const char *pattern, const char *path);

/* The longest leading directory of an absolute glob without a wildcard:
 * "/usr/ **" -> "/usr", "/a/b*c/d" -> "/a", "/etc/hosts" -> "/etc/hosts". */
int policy_glob_root(const char *pattern, char *out, size_t outsz);

/* ---- everything else the policy says ----------------------------------- */

struct policy_limits {          /* 0: not set */
    uint64_t timeout_ms, cpu_ms, memory_bytes, processes, open_files;
};

struct policy_info {
    const char *name, *description;
    const char *file;           /* display path */
    const char *workspace;      /* absolute, resolved */
    const char *home;
    char sha256[65];            /* of the policy file's bytes, hex */
    bool audit_mode;            /* mode: audit */
    bool read_only;
    bool kill_deny;             /* kill: deny (soft) rather than terminate */
    bool isolation_required;    /* isolation: required (or a backend) */
    bool isolation_gvisor;      /* isolation: gvisor */
    uint64_t max_write_bytes;   /* 0: no limit */
    struct policy_limits limits;
    size_t n_env_pass;
    const char *const *env_pass;
    size_t n_env_set;
    const char *const *env_set_name;
    const char *const *env_set_value;
};

const struct policy_info *policy_info(const struct policy *p);

/* One line saying what the policy allows (for sbx-policy check). */
int policy_summary(const struct policy *p, char *out, size_t outsz);

/* The files P was made of (extends:, docs/policy.md "Composing
 * policies"): its own first, then its parent, ...; POLICY_DEFAULT_FILE
 * last when the compiled-in default gave keys or was named.  *OUT points
 * into P.  0 (and *OUT NULL) for a policy taken from an image. */
#define POLICY_DEFAULT_FILE "default.yaml"
size_t policy_files(const struct policy *p, const char *const **out);

/* The file of the shipped policy NAME (what `extends: NAME` reads; for
 * sbx-serve --profile NAME): NAME.yaml, then serve/NAME.yaml, in
 * OPT->policy_dir, else the source tree's policies/ when the program runs
 * from the tree's build directory, else PREFIX/share/sbx/policies next to
 * the program, else the PREFIX sbx was built for (docs/policy.md).  0 with
 * OUT the resolved path; -1 with errno EINVAL (not a name: letters, digits,
 * '-', '_', '.', or "default", which is compiled in and has no file to
 * name) or ENOENT. */
int policy_shipped_path(const char *name, const struct policy_options *opt, char *out,
                        size_t outsz);

/* Writes P as one YAML policy with every key, each value followed by a
 * comment naming the file (and line) it came from; loading it with the
 * same workspace and home gives the same rules.  0, or -1 (EINVAL: P came
 * from an image and no longer knows its sources; or a write error). */
int policy_expand(const struct policy *p, FILE *out);

/* ---- the serve: section (sbx-serve's profile) ------------------------------
 *
 *   serve:
 *     allowed_imports: [collections, json, ...]   # top-level module names
 *     pre_imports: [numpy]                        # loaded before the hooks
 *     blocklist: [numpy.ctypeslib, pandas.read_pickle, ...]   # MODULE.ATTR
 *     stages: {ast_scan: enforce, blocklist_audit: observe}
 *     runtime_hooks: enforce                      # or observe
 *     timeout_max: 30s
 *
 * The address-space limit of a request is limits.memory.  With extends:,
 * allowed_imports and blocklist add up along the chain; every other key
 * replaces the parent's (SERVE.md).  Strings live in the policy's arena.
 * A section without `stages` runs ast_scan (enforce); runtime_hooks
 * defaults to enforce.  Names are ASCII identifiers, dotted for modules
 * (allowed_imports: top-level names only), at most 128 characters; at most
 * 1024 imports or blocked pairs and 64 pre-imports (docs/policy.md).  A
 * policy taken from an image (policy_image_load) has no section. */
enum policy_stage_mode { POLICY_STAGE_ENFORCE, POLICY_STAGE_OBSERVE };

struct policy_serve_block {
    const char *module, *attr;
};

struct policy_serve_stage {
    const char *name;               /* "ast_scan", "blocklist_audit" */
    enum policy_stage_mode mode;
};

struct policy_serve {
    size_t n_allowed_imports;       /* sorted, unique */
    const char *const *allowed_imports;
    size_t n_pre_imports;           /* in the order written */
    const char *const *pre_imports;
    size_t n_blocklist;             /* in the order written, unique */
    const struct policy_serve_block *blocklist;
    size_t n_stages;                /* in the order written */
    const struct policy_serve_stage *stages;
    enum policy_stage_mode runtime_hooks;
    uint64_t timeout_max_ms;        /* 0: not set (sbx-serve uses 30 s) */
};

/* The policy's serve: section, or NULL when it has none. */
const struct policy_serve *policy_serve(const struct policy *p);

#endif
