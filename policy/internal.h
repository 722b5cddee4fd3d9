/*
 * internal.h — what the files of the policy engine share and nobody else
 * may use: the compiled policy, compiled globs and network rules, the load
 * arena and the diagnostics helpers.
 *
 * Memory: everything a loaded policy owns (strings, rule arrays, compiled
 * globs) lives in one arena that policy_free() releases in one go; only the
 * PCRE2 programs are allocated by PCRE2 and freed one by one.  A failed load
 * frees the arena, so no error path has to track what it allocated.
 */
#ifndef SBX_POLICY_INTERNAL_H
#define SBX_POLICY_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "policy.h"

/* ---- arena ---------------------------------------------------------------- */

struct arena_chunk;
struct arena {
    struct arena_chunk *head;
};

void *arena_alloc(struct arena *a, size_t n);           /* zeroed; NULL on ENOMEM */
char *arena_strdup(struct arena *a, const char *s);
char *arena_strndup(struct arena *a, const char *s, size_t n);
char *arena_printf(struct arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void arena_free(struct arena *a);

/* ---- globs ---------------------------------------------------------------- */

enum glob_kind {
    GLOB_LITERAL,       /* no wildcard: string compare */
    GLOB_TREE,          /* "P/" "**" with P literal: P itself or below */
    GLOB_GENERAL,       /* prefix/suffix prefilter, then the full matcher */
};

/* A compiled absolute glob.  The prefilter fields are sound: a path that
 * fails them cannot match, so most rules are rejected with one memcmp. */
struct glob {
    const char *pat;        /* absolute pattern */
    const char *alt;        /* GLOB_LITERAL only: the literal's resolved path
                             * when it differs (a symlink), else NULL */
    enum glob_kind kind;
    size_t plen;            /* every match starts with pat[0..plen) */
    const char *suf;        /* every match ends with suf[0..slen) */
    size_t slen;
    uint64_t bigrams[2];    /* GLOB_GENERAL: the character pairs every
                             * match contains (a 128-bit Bloom filter) */
};

/* The Bloom filter of the character pairs of a path: computed once per
 * decision, it lets a rule that needs "private-3" or ".ssh" be rejected
 * with two ANDs before the matcher runs. */
struct glob_path {
    const char *path;
    size_t len;
    uint64_t bigrams[2];
};
void glob_path_init(struct glob_path *gp, const char *path);

/* Checks the syntax of a glob as written; NULL if fine, else a message. */
const char *glob_check(const char *text, size_t len);
/* Fills G's prefilter for G->pat (already expanded and normalized). */
void glob_prepare(struct glob *g);
/* Full match of the compiled glob against a normalized absolute path. */
bool glob_match_compiled(const struct glob *g, const struct glob_path *gp);

/* ---- network rules -------------------------------------------------------- */

struct net_match {
    int family;             /* AF_INET / AF_INET6 for IP and CIDR rules */
    unsigned char addr[16];
    unsigned prefix;        /* bits that must equal (32/128 for an IP) */
    const char *host;       /* lower case, no trailing dot; "*.x.com" kept */
    bool host_wild;         /* host began with "*." (host points past it, ".x.com") */
    struct glob unix_glob;  /* POLICY_NET_UNIX */
};

/* Parses a network rule TEXT into R (net_kind, ports) and M.  Returns NULL,
 * or a message saying what is wrong.  Unix globs are expanded by the caller
 * (see load), so this only splits them off: *unix_text is set. */
const char *net_parse(struct arena *a, const char *text, struct policy_rule *r,
                      struct net_match *m, const char **unix_text);

/* ---- the compiled policy --------------------------------------------------- */

/* A command pattern.  RE is compiled at load (which checks the pattern)
 * and matched by the interpreter; JITTED, a JIT-compiled copy, is made
 * once the process has decided CMD_JIT_AFTER command lines (see
 * command.c) and then used instead.  Published with release/acquire, so
 * matching needs no lock. */
struct cmd_match {
    pcre2_code *re;
    _Atomic(pcre2_code *) jitted;
    /* The literal prefilter (cmdfilter.c): a line that fails it cannot
     * match, and the pattern is not run.  NULL: always run. */
    const char *need;
    bool need_caseless;
};

struct policy {
    struct arena arena;
    struct policy_info info;
    const char *mode_name;              /* "enforce" / "audit" */

    struct policy_rule *rules[POLICY_LIST__COUNT];
    size_t n_rules[POLICY_LIST__COUNT];
    struct glob *globs[POLICY_LIST__COUNT];         /* path lists, PROTECT */
    struct net_match *nets[POLICY_LIST__COUNT];     /* network lists */
    struct cmd_match *cmds[POLICY_LIST__COUNT];     /* command lists */

    /* implicit rules: "nothing matched" per allow list, read_only, others */
    struct policy_rule implicit[POLICY_LIST__COUNT];
    struct policy_rule read_only_rule;
    struct policy_rule net_other_rule;  /* families the network rules do not govern */
    struct policy_rule cmd_default_rule;/* no command rule: allowed */
    atomic_uint cmd_decisions;          /* command lines decided so far */

    /* A policy taken from an image (image.c) gets its PCRE2 programs at
     * its first command decision, not at load: most processes of an agent
     * never decide a command line, and decoding needs libpcre2, which the
     * preload then loads only in the processes that do (command.c:
     * cmd_prepare).  re_serial points into the image. */
    const uint8_t *re_serial;
    size_t n_re_serial;
    _Atomic int re_state;               /* RE_READY (0), RE_PENDING, ... */
    /* A policy mapped from an image lives in that mapping (image.c), not
     * in its arena: policy_free unmaps it.  NULL otherwise. */
    void *img_map;
    size_t img_len;

    /* The serve: section (serve.c), or NULL; where each value came from
     * (for sbx-policy check --expanded), or NULL.  Neither is carried by
     * an image: image.c stores NULL in both and refuses an image that has
     * anything else. */
    struct policy_serve *serve;
    struct policy_meta *meta;
};



enum { RE_READY = 0, RE_PENDING, RE_BUSY, RE_FAILED };

/* decide.c: fills V for RULE and the decision the policy makes. */
enum sbx_decision policy_verdict_set(const struct policy *p, struct policy_verdict *v,
                                     const struct policy_rule *rule,
                                     enum sbx_decision d, const char *reason,
                                     bool forced);

/* command.c */
int cmd_compile(struct policy *p, enum policy_list l, size_t i, const char *pattern,
                size_t len, char *err, size_t errsz, size_t *erroff);
void cmd_free_all(struct policy *p);
/* Makes the PCRE2 programs of P usable (decodes them if P came from an
 * image); 0, or -1 if they cannot be (then every command decision denies). */
int cmd_prepare(const struct policy *p);

/* cmdfilter.c: the prefilter of PATTERN (in A), or NULL when the pattern
 * is outside what the filter reads; *CASELESS: compare ignoring ASCII case.
 * pass: false only if S[0..N) cannot match the pattern. */
char *cmd_filter_build(struct arena *a, const char *pattern, size_t len, bool *caseless);
bool cmd_filter_pass(const char *need, bool caseless, const char *s, size_t n);

/* path.c */
int path_join_fold(const char *base, const char *path, char *out, size_t outsz,
                   bool keep_trailing);

/* ---- loading (load.c, values.c) ------------------------------------------ */

#include <yaml.h>

enum leaf_id {
    LF_VERSION, LF_NAME, LF_DESCRIPTION, LF_MODE, LF_WORKSPACE, LF_ISOLATION, LF_KILL,
    LF_READ_ALLOW, LF_READ_DENY, LF_WRITE_ALLOW, LF_WRITE_DENY,
    LF_EXEC_ALLOW, LF_EXEC_DENY, LF_MAX_WRITE, LF_READ_ONLY,
    LF_CMD_DENY, LF_CMD_ALLOW,
    LF_CONNECT_ALLOW, LF_CONNECT_DENY, LF_BIND_ALLOW, LF_BIND_DENY,
    LF_TIMEOUT, LF_CPU, LF_MEMORY, LF_PROCESSES, LF_OPEN_FILES,
    LF_ENV_PASS, LF_ENV_SET,
    LF_SERVE_ALLOWED_IMPORTS, LF_SERVE_PRE_IMPORTS, LF_SERVE_BLOCKLIST,
    LF_SERVE_STAGES, LF_SERVE_RUNTIME_HOOKS, LF_SERVE_TIMEOUT_MAX,
    LF_EXTENDS,
    LF__COUNT
};

/* Where a value of the loaded policy was written: FILE (a display name;
 * POLICY_DEFAULT_NAME for the compiled-in default) and LINE (0: unknown). */
struct load_origin {
    const char *file;
    unsigned line;
};

/* What the load knew about the files a policy was assembled from (load.c),
 * kept for policy_expand (expand.c).  In the arena. */
struct policy_meta {
    size_t n_files;                     /* the chain: the policy's own file */
    const char **files;                 /* first, then its parent, ...; the
                                         * default last when it was used */
    struct load_origin leaf[LF__COUNT]; /* scalar and mapping keys */
    bool wrote_workspace;               /* the policy's file has workspace: */
    struct load_origin *env_pass;       /* per env.pass entry */
    struct load_origin *imports;        /* per serve.allowed_imports entry */
    struct load_origin *pre_imports;    /* per serve.pre_imports entry */
    struct load_origin *blocklist;      /* per serve.blocklist entry */
};

/* One parsed YAML file and where each leaf key's value is in it. */
struct load_src {
    const char *file;               /* display name */
    yaml_document_t doc;
    bool have_doc;
    yaml_node_t *slot[LF__COUNT];
    yaml_node_t *key[LF__COUNT];    /* the key node, for "missing value" marks */
    yaml_node_t *serve_key;         /* "serve:", even with no key under it */
};

/* One entry of a list value as the loader gathered it: the entry's node,
 * the document and file it is in, and the list node it was written in (a
 * list may be assembled from several files; see load.c). */
struct load_item {
    const char *file;
    yaml_document_t *doc;
    yaml_node_t *node;
    yaml_node_t *list;
};

/* How many extends: a chain may follow (a policy, its parent, ... up to
 * this many ancestors; the default below them all does not count).  Real
 * chains are one or two deep; the bound keeps a hostile repository from
 * making every process read a hundred files. */
#define POLICY_EXTENDS_MAX 8

/* Policy files are small (the shipped default is a few KiB); this bound
 * keeps a mistaken path (a log, a device) or a hostile file from being read
 * and parsed whole. */
#define POLICY_FILE_MAX (1u << 20)

/* Distinct glob roots remembered per load; the default policy has ~60. */
#define LOAD_MEMO_MAX 128

struct loader {
    struct policy *p;
    struct policy_diag *diag;
    unsigned errors;
    const char *home;               /* NULL: none known */
    uint64_t pos[POLICY_DIAG_MAX];  /* file rank << 44 | line << 20 | col of
                                     * each kept message, to show them in
                                     * file order */
    struct { const char *in, *out; } memo[LOAD_MEMO_MAX];  /* resolved roots */
    unsigned nmemo;
    /* The files of the chain, the furthest ancestor first and the policy's
     * own last: messages are shown in this order, then by line. */
    const char *files[POLICY_EXTENDS_MAX + 2];
    unsigned nfiles;
};

/* The files a policy is made of (chain.c): src[0] is the policy's own,
 * src[1] its parent, ...; REAL their resolved paths (cycles), CAT the bytes
 * of every file in that order (the policy's sha256). */
struct load_chain {
    struct load_src src[POLICY_EXTENDS_MAX + 1];
    const char *real[POLICY_EXTENDS_MAX + 1];
    size_t n;
    bool explicit_default;          /* the last file says extends: default */
    char *cat;
    size_t cat_len;
};

/* load.c: parses BUF into SRC and walks its key tree (0, or -1 after
 * reporting). */
int load_parse(struct loader *ld, struct load_src *src, const char *buf, size_t len);
/* chain.c: reads PATH (a regular file, at most POLICY_FILE_MAX + 1 bytes
 * kept) into *BUFP (malloc'd; the caller frees).  0, or -1 with errno. */
int load_read_file(const char *path, char **bufp, size_t *lenp);
/* chain.c: follows extends: from C->src[C->n - 1] (whose directory is
 * DIR), parsing each parent into C.  0, or -1 after reporting. */
int chain_resolve(struct loader *ld, struct load_chain *c, const char *dir,
                  const struct policy_options *opt);
/* chain.c: true for the keys whose value is a list. */
bool chain_leaf_is_list(enum leaf_id id);
/* chain.c: true if N is a list edit, {add: [...], remove: [...]}. */
bool chain_is_edit(yaml_document_t *doc, yaml_node_t *n);
/* chain.c: the entries list key ID ends up with along SRCS (N files, the
 * root first, the policy's own last): *OUT (malloc'd, the caller frees)
 * and *NOUT; *AT and *AT_FILE the nearest node that wrote it (NULL if none).
 * 0, or -1 after reporting. */
int chain_gather(struct loader *ld, enum leaf_id id, struct load_src *const *srcs, size_t n,
                 struct load_item **out, size_t *nout, yaml_node_t **at, const char **at_file);

/* Edit distance of two short names (for "did you mean"). */
size_t load_distance(const char *a, const char *b);

void load_error(struct loader *ld, const char *file, const yaml_mark_t *mark,
                const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* The leaf's dotted path, e.g. "files.read.allow". */
const char *leaf_path(enum leaf_id id);
/* Converts leaf ID's NODE (from FILE) into the policy. */
void values_apply(struct loader *ld, enum leaf_id id, const char *file,
                  yaml_document_t *doc, yaml_node_t *node);
/* values.c: a scalar's text or NULL; YAML null; "a list", "nothing", ... */
const char *value_str(yaml_node_t *n);
bool value_is_null(yaml_node_t *n);
const char *value_type_name(yaml_node_t *n);
/* lists.c: checks that NODE is a list (reports otherwise, naming WHAT and
 * what it is a list OF); its length, or -1. */
long value_want_list(struct loader *ld, const char *file, yaml_node_t *node,
                     const char *what, const char *of);
/* lists.c: the list keys, into list L of the policy, from the ITEMS the
 * loader gathered along the chain (load.c); AT/AT_FILE is where to report
 * an error about the list as a whole (NULL: the file's first line). */
void values_glob_list(struct loader *ld, enum policy_list l, const struct load_item *items,
                      size_t n, yaml_node_t *at, const char *at_file);
void values_cmd_list(struct loader *ld, enum policy_list l, const struct load_item *items,
                     size_t n, yaml_node_t *at, const char *at_file);
void values_net_list(struct loader *ld, enum policy_list l, const struct load_item *items,
                     size_t n, yaml_node_t *at, const char *at_file);
/* values.c: env.pass from gathered items. */
void values_env_pass(struct loader *ld, const struct load_item *items, size_t n,
                     yaml_node_t *at, const char *at_file);
/* serve.c: the serve: section's keys.  serve_section makes the section
 * (with its defaults) if it is not there yet; NULL on ENOMEM.  The list
 * keys (allowed_imports, pre_imports, blocklist) take the gathered ITEMS;
 * AT/AT_FILE is where to report an error about the list as a whole. */
struct policy_serve *serve_section(struct loader *ld);
void serve_apply_list(struct loader *ld, enum leaf_id id, const struct load_item *items,
                      size_t n, yaml_node_t *at, const char *at_file);
void serve_apply(struct loader *ld, enum leaf_id id, const char *file, yaml_document_t *doc,
                 yaml_node_t *node);
/* Fills the parts of the policy that do not come from a key (implicit rules,
 * protect). */
int values_finish(struct loader *ld, const struct policy_options *opt);

/* The compiled-in default policy (build/gen/default_policy.c). */
extern const char sbx_default_policy_yaml[];
extern const size_t sbx_default_policy_yaml_len;
#define POLICY_DEFAULT_NAME "default.yaml"

#endif
