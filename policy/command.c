/* command.c — commands.deny / commands.allow: PCRE2 programs over the
 * command line, and the script of `sh -c SCRIPT` found through the usual
 * wrappers (policy.h).
 *
 * Patterns are interpreted at first and JIT-compiled (a copy, published
 * atomically) once the process has decided enough command lines.
 *
 * The command line is argv joined by single spaces.  The script of a shell
 * started with -c (also combined flags like -lc, -ec) is matched on its
 * own as well, after skipping wrappers that run their arguments as a
 * command: env (with options and VAR=value), nohup, timeout, nice, exec,
 * command, time, stdbuf, setsid.  A deny match on either denies; with a
 * non-empty allow list the whole command line must match an allow.  A
 * program started under another name is also judged under its resolved
 * path (deny list only). */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bsd/string.h>

int cmd_compile(struct policy *p, enum policy_list l, size_t i, const char *pattern,
                size_t len, char *err, size_t errsz, size_t *erroff)
{
    int errcode;
    PCRE2_SIZE off = 0;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, len, 0, &errcode, &off, NULL);

    if (re == NULL) {
        pcre2_get_error_message(errcode, (PCRE2_UCHAR *)err, errsz);
        *erroff = off;
        return -1;
    }
    p->cmds[l][i].re = re;
    atomic_init(&p->cmds[l][i].jitted, NULL);
    p->cmds[l][i].need = cmd_filter_build(&p->arena, pattern, len, &p->cmds[l][i].need_caseless);
    return 0;
}

/* Decodes the programs of a policy loaded from an image: one thread does,
 * others wait for it (boundedly: in a child forked while another thread
 * was decoding, nobody ever finishes; that child's command decisions then
 * fail closed).  The preload decodes before fork (policy_prepare). */
int cmd_prepare(const struct policy *cp)
{
    struct policy *p = (struct policy *)cp;     /* a cache, not a change */
    int st = atomic_load_explicit(&p->re_state, memory_order_acquire);
    if (st == RE_READY)
        return 0;
    if (st == RE_PENDING &&
        atomic_compare_exchange_strong(&p->re_state, &st, RE_BUSY)) {
        static const enum policy_list lists[] = { POLICY_CMD_DENY, POLICY_CMD_ALLOW };
        size_t n = p->n_re_serial;
        pcre2_code **codes = calloc(n, sizeof(pcre2_code *));
        int32_t rc = PCRE2_ERROR_NOMEMORY;
        if (codes && pcre2_serialize_get_number_of_codes(p->re_serial) == (int32_t)n)
            rc = pcre2_serialize_decode(codes, (int32_t)n, p->re_serial, NULL);
        if (codes == NULL || rc != (int32_t)n) {
            for (int32_t i = 0; codes && i < rc; i++)
                pcre2_code_free(codes[i]);
            free(codes);
            atomic_store_explicit(&p->re_state, RE_FAILED, memory_order_release);
            return -1;
        }
        size_t j = 0;
        for (size_t k = 0; k < 2; k++)
            for (size_t i = 0; p->cmds[lists[k]] && i < p->n_rules[lists[k]]; i++)
                p->cmds[lists[k]][i].re = codes[j++];
        free(codes);
        atomic_store_explicit(&p->re_state, RE_READY, memory_order_release);
        return 0;
    }
    for (int i = 0; i < 20000 && st == RE_BUSY; i++) {     /* up to ~2 s */
        struct timespec ts = { 0, 100000 };
        nanosleep(&ts, NULL);
        st = atomic_load_explicit(&p->re_state, memory_order_acquire);
    }
    return st == RE_READY ? 0 : -1;
}

int policy_prepare(const struct policy *p)
{
    return cmd_prepare(p);
}

void cmd_free_all(struct policy *p)
{
    static const enum policy_list lists[] = { POLICY_CMD_DENY, POLICY_CMD_ALLOW };
    for (size_t k = 0; k < 2; k++) {
        enum policy_list l = lists[k];
        if (p->cmds[l] == NULL)
            continue;
        for (size_t i = 0; i < p->n_rules[l]; i++) {
            pcre2_code_free(p->cmds[l][i].re);
            pcre2_code_free(atomic_load(&p->cmds[l][i].jitted));
        }
    }
}

/*
 * JIT compiling costs ~30 us a pattern and saves a microsecond or two a
 * match: worth it in a process that decides many command lines (the
 * supervisor, a shell, make), a loss in one that execs once or never -- and
 * every process the guard starts loads the policy.  So patterns are
 * interpreted until this many decisions, then compiled once.
 */
#define CMD_JIT_AFTER 32

static void jit_compile_all(struct policy *p)
{
    static const enum policy_list lists[] = { POLICY_CMD_DENY, POLICY_CMD_ALLOW };
    for (size_t k = 0; k < 2; k++) {
        enum policy_list l = lists[k];
        for (size_t i = 0; i < p->n_rules[l]; i++) {
            /* a copy, so that RE is never changed under a concurrent match */
            pcre2_code *c = pcre2_code_copy(p->cmds[l][i].re);
            if (c == NULL)
                continue;
            /* JIT can fail (no executable memory, an unsupported CPU): the
             * interpreter gives the same answers, only slower */
            if (pcre2_jit_compile(c, PCRE2_JIT_COMPLETE) != 0) {
                pcre2_code_free(c);
                continue;
            }
            atomic_store_explicit(&p->cmds[l][i].jitted, c, memory_order_release);
        }
    }
}

/* Counts a decision; the one that reaches CMD_JIT_AFTER compiles.  The
 * policy is const to callers: this is a cache, not a change of meaning. */
static void count_decision(const struct policy *p)
{
    struct policy *mp = (struct policy *)p;
    if (atomic_fetch_add_explicit(&mp->cmd_decisions, 1, memory_order_relaxed) + 1 == CMD_JIT_AFTER)
        jit_compile_all(mp);
}

/* 1 match, 0 no match, -1 the matcher failed (resource limit): the caller
 * treats a failure as a match of a deny rule and as no match of an allow. */
static int re_match(const struct cmd_match *c, pcre2_match_data *md, const char *s, size_t n)
{
    pcre2_code *j = atomic_load_explicit((_Atomic(pcre2_code *) *)&c->jitted, memory_order_acquire);
    if (j == NULL && c->re == NULL)
        return -1;
    int rc = j != NULL ? pcre2_jit_match(j, (PCRE2_SPTR)s, n, 0, 0, md, NULL)
                       : pcre2_match(c->re, (PCRE2_SPTR)s, n, 0, 0, md, NULL);
    if (rc >= 0)
        return 1;
    return rc == PCRE2_ERROR_NOMATCH ? 0 : -1;
}

static const char *base_name(const char *s)
{
    const char *b = strrchr(s, '/');
    return b ? b + 1 : s;
}

static bool is_shell(const char *arg)
{
    static const char *const shells[] = { "sh", "bash", "dash", "zsh", "ksh", "ash",
                                          "mksh", "busybox", NULL };
    const char *b = base_name(arg);
    for (size_t i = 0; shells[i]; i++)
        if (strcmp(b, shells[i]) == 0)
            return true;
    return false;
}

/* Skips wrappers that run the rest of argv as a command; returns the index
 * of the real program in ARGV. */
static size_t skip_wrappers(char *const argv[], size_t argc)
{
    size_t i = 0;
    while (i < argc) {
        const char *b = base_name(argv[i]);
        if (strcmp(b, "env") == 0) {
            for (i++; i < argc; i++) {
                const char *a = argv[i];
                if (strcmp(a, "--") == 0) {
                    i++;
                    break;
                }
                if (a[0] == '-') {
                    /* options that take a value */
                    if (strcmp(a, "-u") == 0 || strcmp(a, "-C") == 0 ||
                        strcmp(a, "-S") == 0 || strcmp(a, "--unset") == 0 ||
                        strcmp(a, "--chdir") == 0)
                        i++;
                    continue;
                }
                if (strchr(a, '=') == NULL)
                    break;
            }
        } else if (strcmp(b, "nohup") == 0 || strcmp(b, "exec") == 0 ||
                   strcmp(b, "command") == 0 || strcmp(b, "time") == 0 ||
                   strcmp(b, "setsid") == 0 || strcmp(b, "nice") == 0 ||
                   strcmp(b, "stdbuf") == 0 || strcmp(b, "sudo") == 0 ||
                   strcmp(b, "doas") == 0) {
            i++;
            while (i < argc && argv[i][0] == '-') {
                if ((strcmp(argv[i], "-n") == 0 && strcmp(b, "nice") == 0) ||
                    ((strcmp(argv[i], "-u") == 0 || strcmp(argv[i], "-g") == 0) &&
                     (strcmp(b, "sudo") == 0 || strcmp(b, "doas") == 0)))
                    i++;
                i++;
            }
        } else if (strcmp(b, "timeout") == 0) {
            i++;
            while (i < argc && argv[i][0] == '-') {
                if (strcmp(argv[i], "-s") == 0 || strcmp(argv[i], "-k") == 0)
                    i++;
                i++;
            }
            i++;            /* the duration */
        } else {
            break;
        }
    }
    return i;
}

/* The SCRIPT of `SHELL [options] -c SCRIPT ...` (after wrappers), or NULL. */
static const char *shell_script(char *const argv[], size_t argc)
{
    size_t i = skip_wrappers(argv, argc);
    bool want = false;

    if (i >= argc || !is_shell(argv[i]))
        return NULL;
    if (strcmp(base_name(argv[i]), "busybox") == 0) {
        if (++i >= argc || !is_shell(argv[i]))
            return NULL;
    }
    for (i++; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] == '-' && a[1] == '-') {
            if (strcmp(a, "--rcfile") == 0 || strcmp(a, "--init-file") == 0)
                i++;
            continue;
        }
        if ((a[0] == '-' || a[0] == '+') && a[1] != '\0') {
            /* a cluster of single-letter flags: -c, -lc, -ec, -xec, -o opt */
            for (const char *f = a + 1; *f; f++) {
                if (*f == 'c')
                    want = true;
                if (*f == 'o' || *f == 'O')
                    i++;
            }
            continue;
        }
        break;
    }
    return want && i < argc ? argv[i] : NULL;
}

/* The matcher of one decision: PCRE2 is made ready only when a pattern
 * passes its prefilter, so a line that no pattern can match needs neither
 * libpcre2 nor its programs. */
struct matcher {
    const struct policy *p;
    pcre2_match_data *md;
    const char *failed;     /* why PCRE2 could not be made ready */
};

static bool matcher_ready(struct matcher *m)
{
    if (m->md != NULL)
        return true;
    if (m->failed != NULL)
        return false;
    if (cmd_prepare(m->p) < 0) {
        m->failed = "the command rules could not be prepared";
        return false;
    }
    count_decision(m->p);
    m->md = pcre2_match_data_create(1, NULL);
    if (m->md == NULL)
        m->failed = "out of memory while matching command rules";
    return m->md != NULL;
}

/* Matches list L against S; the first rule that matches, or NULL.  A
 * pattern that cannot be run (M->failed) counts as a match when
 * FAIL_IS_MATCH (the deny list) and as none otherwise. */
static const struct policy_rule *first_match(struct matcher *m, enum policy_list l,
                                             const char *s, bool fail_is_match)
{
    const struct policy *p = m->p;
    size_t n = strlen(s);
    for (size_t i = 0; i < p->n_rules[l]; i++) {
        const struct cmd_match *c = &p->cmds[l][i];
        if (!cmd_filter_pass(c->need, c->need_caseless, s, n))
            continue;
        int rc = matcher_ready(m) ? re_match(c, m->md, s, n) : -1;
        if (rc > 0 || (rc < 0 && fail_is_match))
            return &p->rules[l][i];
    }
    return NULL;
}

/* The command part of a decision: LINE, and for the deny list also SCRIPT
 * and REAL_LINE when they are not NULL. */
static enum sbx_decision decide_line(const struct policy *p, const char *line,
                                     const char *script, const char *real_line,
                                     struct policy_verdict *v)
{
    struct matcher m = { .p = p };
    const struct policy_rule *r = NULL;
    enum sbx_decision d;

    if (p->n_rules[POLICY_CMD_DENY] == 0 && p->n_rules[POLICY_CMD_ALLOW] == 0)
        return policy_verdict_set(p, v, &p->cmd_default_rule, SBX_ALLOW,
                                  "no command rules", false);
    r = first_match(&m, POLICY_CMD_DENY, line, true);
    if (r == NULL && script != NULL)
        r = first_match(&m, POLICY_CMD_DENY, script, true);
    if (r == NULL && real_line != NULL)
        r = first_match(&m, POLICY_CMD_DENY, real_line, true);
    if (r != NULL && m.failed != NULL) {
        d = policy_verdict_set(p, v, &p->cmd_default_rule, SBX_DENY, m.failed, true);
        goto out;
    }
    if (r != NULL) {
        d = policy_verdict_set(p, v, r, SBX_DENY, r->reason ? r->reason : "matches commands.deny",
                               false);
        goto out;
    }
    if (p->n_rules[POLICY_CMD_ALLOW] > 0) {
        r = first_match(&m, POLICY_CMD_ALLOW, line, false);
        if (r == NULL && m.failed != NULL) {
            d = policy_verdict_set(p, v, &p->cmd_default_rule, SBX_DENY, m.failed, true);
            goto out;
        }
        if (r == NULL) {
            d = policy_verdict_set(p, v, &p->implicit[POLICY_CMD_ALLOW], SBX_DENY,
                                   "no commands.allow rule matches", false);
            goto out;
        }
        d = policy_verdict_set(p, v, r, SBX_ALLOW, "matches commands.allow", false);
        goto out;
    }
    d = policy_verdict_set(p, v, &p->cmd_default_rule, SBX_ALLOW,
                           "no commands.deny rule matches", false);
out:
    pcre2_match_data_free(m.md);
    return d;
}

/* Joins ARGV with single spaces into BUF (or a malloc'd buffer). */
static char *join_argv(char *const argv[], size_t *argc, char *buf, size_t bufsz)
{
    size_t n = 0, len = 0;
    for (; argv[n] != NULL; n++)
        len += strlen(argv[n]) + 1;
    *argc = n;
    char *out = len + 1 <= bufsz ? buf : malloc(len + 1);
    if (out == NULL)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(argv[i]);
        if (i > 0)
            out[o++] = ' ';
        memcpy(out + o, argv[i], l);
        o += l;
    }
    out[o] = '\0';
    return out;
}

enum sbx_decision policy_decide_exec(const struct policy *p, const char *abspath,
                                     char *const argv[], struct policy_verdict *v)
{
    char buf[4096], *line;
    size_t argc;
    enum sbx_decision d;
    struct policy_verdict local;

    if (v == NULL)
        v = &local;
    d = policy_decide_path(p, SBX_OP_EXEC, abspath, v);
    if (v->audit || d == SBX_DENY)
        return d;       /* the path already decided (in audit mode: would deny) */
    if (argv == NULL || argv[0] == NULL) {
        char *const none[] = { (char *)abspath, NULL };
        return policy_decide_exec(p, abspath, none, v);
    }
    line = join_argv(argv, &argc, buf, sizeof(buf));
    if (line == NULL)
        return policy_verdict_set(p, v, &p->cmd_default_rule, SBX_DENY,
                                  "out of memory while matching command rules", true);
    /* A program run under another name ("ln -s /usr/bin/rm x; ./x -rf /")
     * is also judged under its real one: the deny list sees the command
     * line with argv[0] replaced by the resolved path. */
    char *real_line = NULL;
    if (strcmp(base_name(abspath), base_name(argv[0])) != 0) {
        const char *rest = argc > 1 ? line + strlen(argv[0]) : "";
        if (asprintf(&real_line, "%s%s", abspath, rest) < 0) {
            real_line = NULL;
            d = policy_verdict_set(p, v, &p->cmd_default_rule, SBX_DENY,
                                   "out of memory while matching command rules", true);
            goto out;
        }
    }
    d = decide_line(p, line, shell_script(argv, argc), real_line, v);
out:
    free(real_line);
    if (line != buf)
        free(line);
    return d;
}

enum sbx_decision policy_decide_command(const struct policy *p, const char *cmdline,
                                        struct policy_verdict *v)
{
    char *store = NULL, *words[256];
    const char *script = NULL;
    size_t len = strlen(cmdline);
    enum sbx_decision d;

    store = malloc(len + 1 + 256);      /* the text and a NUL per word */
    if (store != NULL) {
        /* split as sh would (path.h), to find `sh -c SCRIPT` */
        int n = policy_path_shell_words(cmdline, store, len + 1 + 256, words, 256);
        if (n > 0)
            script = shell_script(words, (size_t)n);
    }
    d = decide_line(p, cmdline, script, NULL, v);
    free(store);
    return d;
}
