/* values.c — turning each key's YAML value into the compiled policy:
 * glob lists, command patterns, network rules, sizes, durations, counts,
 * names (policy.h, load.c).  Every bad value is reported at its own line
 * and column; a list goes on after a bad entry, so all of them are shown. */
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bsd/stdlib.h>
#include <bsd/string.h>

static const char *const sections[POLICY_LIST__COUNT] = {
    [POLICY_READ_ALLOW] = "files.read.allow",       [POLICY_READ_DENY] = "files.read.deny",
    [POLICY_WRITE_ALLOW] = "files.write.allow",     [POLICY_WRITE_DENY] = "files.write.deny",
    [POLICY_EXEC_ALLOW] = "files.exec.allow",       [POLICY_EXEC_DENY] = "files.exec.deny",
    [POLICY_CMD_DENY] = "commands.deny",            [POLICY_CMD_ALLOW] = "commands.allow",
    [POLICY_CONNECT_ALLOW] = "network.connect.allow", [POLICY_CONNECT_DENY] = "network.connect.deny",
    [POLICY_BIND_ALLOW] = "network.bind.allow",     [POLICY_BIND_DENY] = "network.bind.deny",
    [POLICY_PROTECT] = "protect",
};

const char *policy_list_name(enum policy_list l)
{
    return (unsigned)l < POLICY_LIST__COUNT ? sections[l] : "unknown";
}

static const char *str_of(yaml_node_t *n)
{
    return n != NULL && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static bool is_null(yaml_node_t *n)
{
    const char *s = str_of(n);
    if (s == NULL || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    return *s == '\0' || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 ||
           strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0;
}

static const char *type_name(yaml_node_t *n)
{
    if (n->type == YAML_SEQUENCE_NODE)
        return "a list";
    if (n->type == YAML_MAPPING_NODE)
        return "a mapping";
    return is_null(n) ? "nothing" : "a single value";
}

/* ---- globs ---------------------------------------------------------------- */

/* Expands a glob as written (already checked) into an absolute, folded
 * pattern whose leading literal directory is resolved, since the paths it
 * will be compared with are resolved too ("/bin/sh" -> "/usr/bin/sh" on a
 * merged /usr), the same way (policy_path_resolve: /proc/self stays).  A literal naming a symlink also gets ALT, what it points
 * to: the exec path of "/usr/bin/python3" is "/usr/bin/python3.11". */
static const char *expand_glob(struct loader *ld, const char *text, const char **alt)
{
    char tmp[PATH_MAX], out[PATH_MAX], root[PATH_MAX], real[PATH_MAX];
    const char *src = text;
    size_t n;

    *alt = NULL;
    if (text[0] == '~') {
        if (text[1] != '/' && text[1] != '\0')
            return "only \"~/\" (your own home) is understood, not \"~user\"";
        if (ld->home == NULL)
            return "no home directory is known for \"~/\"";
        if ((size_t)snprintf(tmp, sizeof(tmp), "%s/%s", ld->home, text[1] ? text + 2 : "") >= sizeof(tmp))
            return "glob too long";
        src = tmp;
    }
    if (path_join_fold(ld->p->info.workspace, src, out, sizeof(out), true) < 0)
        return "glob too long";
    n = strlen(out);
    if (n > 1 && out[n - 1] == '/') {           /* "dir/" means the tree below dir */
        if (n + 3 > sizeof(out))
            return "glob too long";
        memcpy(out + n, "**", 3);
        n += 2;
    }
    if (policy_glob_root(out, root, sizeof(root)) == 0 && strcmp(root, "/") != 0) {
        size_t rl = strlen(root);
        if (rl == n) {
            /* a literal: resolve its directory; the whole path becomes ALT */
            if (policy_path_resolve("/", out, false, real, sizeof(real)) == 0 && strcmp(real, out) != 0)
                *alt = arena_strdup(&ld->p->arena, real);
            char *slash = strrchr(root, '/');
            if (slash != NULL && slash != root) {
                *slash = '\0';
                if (policy_path_resolve("/", root, false, real, sizeof(real)) == 0 &&
                    strcmp(real, root) != 0 &&
                    (size_t)snprintf(tmp, sizeof(tmp), "%s%s", real, out + (slash - root)) < sizeof(tmp))
                    strlcpy(out, tmp, sizeof(out));
            }
        } else if (policy_path_resolve("/", root, false, real, sizeof(real)) == 0 &&
                   strcmp(real, root) != 0 &&
                   (size_t)snprintf(tmp, sizeof(tmp), "%s%s", strcmp(real, "/") ? real : "",
                                    out + rl) < sizeof(tmp)) {
            strlcpy(out, tmp, sizeof(out));
        }
    }
    return arena_strdup(&ld->p->arena, out);
}

/* Expand and compile one glob into G; NULL or a message. */
static const char *compile_glob(struct loader *ld, const char *text, size_t len, struct glob *g)
{
    const char *msg = glob_check(text, len), *alt;
    if (msg != NULL)
        return msg;
    const char *pat = expand_glob(ld, text, &alt);
    if (pat == NULL)
        return "out of memory";
    if (pat[0] != '/')
        return pat;             /* a message from expand_glob */
    g->pat = pat;
    glob_prepare(g);
    if (g->kind == GLOB_LITERAL)
        g->alt = alt;
    return NULL;
}

static void rule_init(struct loader *ld, struct policy_rule *r, enum policy_list l,
                      const char *file, yaml_node_t *item)
{
    r->list = l;
    r->section = sections[l];
    r->file = file;
    r->line = (unsigned)item->start_mark.line + 1;
    r->col = (unsigned)item->start_mark.column + 1;
    r->port_lo = r->port_hi = -1;
    (void)ld;
}

static size_t seq_len(yaml_node_t *n)
{
    return (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
}

/* Checks that NODE is a list; reports otherwise.  Returns its length or -1. */
static long want_list(struct loader *ld, const char *file, yaml_node_t *node,
                      const char *what, const char *of)
{
    if (node->type != YAML_SEQUENCE_NODE) {
        load_error(ld, file, &node->start_mark, "%s: expected a list of %s, found %s%s",
                   what, of, type_name(node),
                   is_null(node) ? " (write [] for an empty list)" : "");
        return -1;
    }
    return (long)seq_len(node);
}

static void glob_list(struct loader *ld, enum policy_list l, const char *file,
                      yaml_document_t *doc, yaml_node_t *node)
{
    struct policy *p = ld->p;
    long n = want_list(ld, file, node, sections[l], "globs");
    if (n <= 0)
        return;
    p->rules[l] = arena_alloc(&p->arena, (size_t)n * sizeof(struct policy_rule));
    p->globs[l] = arena_alloc(&p->arena, (size_t)n * sizeof(struct glob));
    if (p->rules[l] == NULL || p->globs[l] == NULL) {
        load_error(ld, file, &node->start_mark, "out of memory");
        return;
    }
    for (yaml_node_item_t *it = node->data.sequence.items.start;
         it < node->data.sequence.items.top; it++) {
        yaml_node_t *item = yaml_document_get_node(doc, *it);
        const char *text = str_of(item), *msg;
        size_t i = p->n_rules[l];
        if (text == NULL) {
            load_error(ld, file, &item->start_mark, "%s: expected a glob, found %s",
                       sections[l], type_name(item));
            continue;
        }
        msg = compile_glob(ld, text, item->data.scalar.length, &p->globs[l][i]);
        if (msg != NULL) {
            load_error(ld, file, &item->start_mark, "%s: bad glob \"%s\": %s",
                       sections[l], text, msg);
            continue;
        }
        rule_init(ld, &p->rules[l][i], l, file, item);
        p->rules[l][i].text = arena_strdup(&p->arena, text);
        p->rules[l][i].pattern = p->globs[l][i].pat;
        p->n_rules[l]++;
    }
}

/* ---- commands ------------------------------------------------------------- */

static void cmd_list(struct loader *ld, enum policy_list l, const char *file,
                     yaml_document_t *doc, yaml_node_t *node)
{
    struct policy *p = ld->p;
    long n = want_list(ld, file, node, sections[l], "commands ({match: PCRE2, reason: TEXT})");
    if (n <= 0)
        return;
    p->rules[l] = arena_alloc(&p->arena, (size_t)n * sizeof(struct policy_rule));
    p->cmds[l] = arena_alloc(&p->arena, (size_t)n * sizeof(struct cmd_match));
    if (p->rules[l] == NULL || p->cmds[l] == NULL) {
        load_error(ld, file, &node->start_mark, "out of memory");
        return;
    }
    for (yaml_node_item_t *it = node->data.sequence.items.start;
         it < node->data.sequence.items.top; it++) {
        yaml_node_t *item = yaml_document_get_node(doc, *it);
        yaml_node_t *match = NULL, *reason = NULL;
        size_t i = p->n_rules[l];
        bool bad = false;

        if (item->type == YAML_SCALAR_NODE) {
            match = item;
        } else if (item->type == YAML_MAPPING_NODE) {
            for (yaml_node_pair_t *pr = item->data.mapping.pairs.start;
                 pr < item->data.mapping.pairs.top; pr++) {
                yaml_node_t *k = yaml_document_get_node(doc, pr->key);
                yaml_node_t *v = yaml_document_get_node(doc, pr->value);
                const char *key = str_of(k);
                yaml_node_t **slot = NULL;
                if (key != NULL && strcmp(key, "match") == 0)
                    slot = &match;
                else if (key != NULL && strcmp(key, "reason") == 0)
                    slot = &reason;
                if (slot == NULL) {
                    const char *hint = NULL;
                    if (key != NULL && load_distance(key, "match") <= 2)
                        hint = "match";
                    else if (key != NULL && load_distance(key, "reason") <= 2)
                        hint = "reason";
                    load_error(ld, file, &k->start_mark,
                               "unknown key \"%s\" in %s entry%s%s%s (an entry has match and reason)",
                               key ? key : "?", sections[l], hint ? " (did you mean \"" : "",
                               hint ? hint : "", hint ? "\"?)" : "");
                    bad = true;
                } else if (*slot != NULL) {
                    load_error(ld, file, &k->start_mark, "duplicate key \"%s\" in %s entry",
                               key, sections[l]);
                    bad = true;
                } else if (v->type != YAML_SCALAR_NODE) {
                    load_error(ld, file, &v->start_mark, "%s: %s: expected text, found %s",
                               sections[l], key, type_name(v));
                    bad = true;
                } else {
                    *slot = v;
                }
            }
            if (match == NULL && !bad) {
                load_error(ld, file, &item->start_mark,
                           "%s: an entry needs \"match\" (a PCRE2 pattern)", sections[l]);
                bad = true;
            }
        } else {
            load_error(ld, file, &item->start_mark,
                       "%s: expected {match: PATTERN, reason: TEXT}, found %s",
                       sections[l], type_name(item));
            bad = true;
        }
        if (bad || match == NULL)
            continue;
        const char *pat = str_of(match);
        size_t plen = match->data.scalar.length, off = 0;
        char err[256];
        if (plen == 0) {
            load_error(ld, file, &match->start_mark, "%s: empty pattern (it would match every command)",
                       sections[l]);
            continue;
        }
        if (cmd_compile(p, l, i, pat, plen, err, sizeof(err), &off) < 0) {
            load_error(ld, file, &match->start_mark,
                       "%s: pattern does not compile: %s (at offset %zu of the pattern)",
                       sections[l], err, off);
            continue;
        }
        rule_init(ld, &p->rules[l][i], l, file, item);
        p->rules[l][i].text = arena_strdup(&p->arena, pat);
        p->rules[l][i].reason = reason ? arena_strdup(&p->arena, str_of(reason)) : NULL;
        p->n_rules[l]++;
    }
}

/* ---- network -------------------------------------------------------------- */

static void net_list(struct loader *ld, enum policy_list l, const char *file,
                     yaml_document_t *doc, yaml_node_t *node)
{
    struct policy *p = ld->p;
    long n = want_list(ld, file, node, sections[l], "network rules (\"host:port\", ...)");
    if (n <= 0)
        return;
    p->rules[l] = arena_alloc(&p->arena, (size_t)n * sizeof(struct policy_rule));
    p->nets[l] = arena_alloc(&p->arena, (size_t)n * sizeof(struct net_match));
    if (p->rules[l] == NULL || p->nets[l] == NULL) {
        load_error(ld, file, &node->start_mark, "out of memory");
        return;
    }
    for (yaml_node_item_t *it = node->data.sequence.items.start;
         it < node->data.sequence.items.top; it++) {
        yaml_node_t *item = yaml_document_get_node(doc, *it);
        const char *text = str_of(item), *msg, *ut = NULL;
        size_t i = p->n_rules[l];
        struct policy_rule *r = &p->rules[l][i];
        struct net_match *m = &p->nets[l][i];

        if (text == NULL) {
            load_error(ld, file, &item->start_mark, "%s: expected a rule like \"host:port\", found %s",
                       sections[l], type_name(item));
            continue;
        }
        rule_init(ld, r, l, file, item);
        if (strlen(text) != item->data.scalar.length) {
            load_error(ld, file, &item->start_mark, "%s: NUL character in rule", sections[l]);
            continue;
        }
        text = arena_strdup(&p->arena, text);
        if (text == NULL) {
            load_error(ld, file, &item->start_mark, "out of memory");
            continue;
        }
        msg = net_parse(&p->arena, text, r, m, &ut);
        if (msg == NULL && ut != NULL) {
            if (ut[0] == '@') {         /* abstract socket name: no expansion */
                msg = glob_check(ut, strlen(ut));
                if (msg == NULL) {
                    m->unix_glob.pat = ut;
                    glob_prepare(&m->unix_glob);
                }
            } else {
                msg = compile_glob(ld, ut, strlen(ut), &m->unix_glob);
            }
            r->pattern = m->unix_glob.pat;
        }
        if (msg != NULL) {
            load_error(ld, file, &item->start_mark, "%s: bad network rule \"%s\": %s",
                       sections[l], text, msg);
            continue;
        }
        r->text = text;
        p->n_rules[l]++;
    }
}

/* ---- scalars -------------------------------------------------------------- */

/* "10MiB", "512 K", "4096": bytes.  -1 if malformed or too large. */
static int parse_size(const char *s, uint64_t *out)
{
    static const struct { const char *unit; uint64_t mul; } units[] = {
        { "", 1 }, { "B", 1 }, { "K", 1ull << 10 }, { "KiB", 1ull << 10 },
        { "M", 1ull << 20 }, { "MiB", 1ull << 20 }, { "G", 1ull << 30 }, { "GiB", 1ull << 30 },
    };
    uint64_t v = 0;
    const char *q = s;

    if (!isdigit((unsigned char)*q))
        return -1;
    for (; isdigit((unsigned char)*q); q++) {
        if (v > (UINT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*q - '0');
    }
    while (*q == ' ')
        q++;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (strcmp(q, units[i].unit) == 0) {
            if (v > UINT64_MAX / units[i].mul)
                return -1;
            *out = v * units[i].mul;
            return 0;
        }
    return -1;
}

/* "30m", "1h30m", "90s", "250ms": milliseconds.  A number needs a unit. */
static int parse_duration(const char *s, uint64_t *out)
{
    uint64_t total = 0;
    const char *q = s;

    if (*q == '\0')
        return -1;
    while (*q != '\0') {
        uint64_t v = 0, mul;
        if (!isdigit((unsigned char)*q))
            return -1;
        for (; isdigit((unsigned char)*q); q++) {
            if (v > (UINT64_MAX - 9) / 10)
                return -1;
            v = v * 10 + (uint64_t)(*q - '0');
        }
        while (*q == ' ')
            q++;
        if (strncmp(q, "ms", 2) == 0) {
            mul = 1;
            q += 2;
        } else if (*q == 's') {
            mul = 1000;
            q++;
        } else if (*q == 'm') {
            mul = 60 * 1000;
            q++;
        } else if (*q == 'h') {
            mul = 3600 * 1000;
            q++;
        } else {
            return -1;
        }
        if (v > (UINT64_MAX - total) / mul)
            return -1;
        total += v * mul;
        while (*q == ' ')
            q++;
    }
    *out = total;
    return 0;
}

/* A scalar from a fixed set; returns its index or -1 after reporting. */
static int pick(struct loader *ld, const char *file, yaml_node_t *n, const char *what,
                const char *const *choices, size_t nchoices)
{
    const char *s = str_of(n);
    if (s != NULL)
        for (size_t i = 0; i < nchoices; i++)
            if (strcmp(s, choices[i]) == 0)
                return (int)i;
    char list[128] = "";
    for (size_t i = 0; i < nchoices; i++) {
        strlcat(list, i ? (i + 1 == nchoices ? " or " : ", ") : "", sizeof(list));
        strlcat(list, choices[i], sizeof(list));
    }
    if (s != NULL)
        load_error(ld, file, &n->start_mark, "%s: \"%s\" is not %s", what, s, list);
    else
        load_error(ld, file, &n->start_mark, "%s: expected %s, found %s", what, list, type_name(n));
    return -1;
}

static void size_value(struct loader *ld, const char *file, yaml_node_t *n, const char *what,
                       uint64_t *out)
{
    const char *s = str_of(n);
    if (is_null(n) || (s && strcmp(s, "unlimited") == 0)) {
        *out = 0;
        return;
    }
    if (s == NULL || parse_size(s, out) < 0)
        load_error(ld, file, &n->start_mark,
                   "%s: bad size \"%s\" (a number with B, KiB, MiB, GiB, K, M or G, e.g. 10MiB)",
                   what, s ? s : type_name(n));
}

static void duration_value(struct loader *ld, const char *file, yaml_node_t *n,
                           const char *what, uint64_t *out)
{
    const char *s = str_of(n);
    if (is_null(n) || (s && strcmp(s, "unlimited") == 0)) {
        *out = 0;
        return;
    }
    if (s == NULL || parse_duration(s, out) < 0)
        load_error(ld, file, &n->start_mark,
                   "%s: bad duration \"%s\" (a number with ms, s, m or h, e.g. 30m or 1h30m)",
                   what, s ? s : type_name(n));
}

static void count_value(struct loader *ld, const char *file, yaml_node_t *n, const char *what,
                        uint64_t *out)
{
    const char *s = str_of(n), *errstr = NULL;
    if (is_null(n) || (s && strcmp(s, "unlimited") == 0)) {
        *out = 0;
        return;
    }
    if (s != NULL) {
        long long v = strtonum(s, 1, 1000000000, &errstr);
        if (errstr == NULL) {
            *out = (uint64_t)v;
            return;
        }
    }
    load_error(ld, file, &n->start_mark, "%s: expected a whole number from 1 up, found \"%s\"",
               what, s ? s : type_name(n));
}

static bool env_name_ok(const char *s)
{
    if (!isalpha((unsigned char)*s) && *s != '_')
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_')
            return false;
    return true;
}

static void env_pass(struct loader *ld, const char *file, yaml_document_t *doc, yaml_node_t *node)
{
    struct policy *p = ld->p;
    long n = want_list(ld, file, node, "env.pass", "variable names");
    if (n <= 0)
        return;
    const char **names = arena_alloc(&p->arena, (size_t)n * sizeof(char *));
    if (names == NULL)
        return;
    size_t k = 0;
    for (yaml_node_item_t *it = node->data.sequence.items.start;
         it < node->data.sequence.items.top; it++) {
        yaml_node_t *item = yaml_document_get_node(doc, *it);
        const char *s = str_of(item);
        if (s == NULL || !env_name_ok(s)) {
            load_error(ld, file, &item->start_mark, "env.pass: \"%s\" is not a variable name",
                       s ? s : type_name(item));
            continue;
        }
        names[k++] = arena_strdup(&p->arena, s);
    }
    p->info.env_pass = names;
    p->info.n_env_pass = k;
}

static void env_set(struct loader *ld, const char *file, yaml_document_t *doc, yaml_node_t *node)
{
    struct policy *p = ld->p;
    if (node->type != YAML_MAPPING_NODE) {
        if (is_null(node))
            return;
        load_error(ld, file, &node->start_mark,
                   "env.set: expected a mapping of NAME: value, found %s", type_name(node));
        return;
    }
    size_t n = (size_t)(node->data.mapping.pairs.top - node->data.mapping.pairs.start), k = 0;
    const char **names = arena_alloc(&p->arena, (n + 1) * sizeof(char *));
    const char **values = arena_alloc(&p->arena, (n + 1) * sizeof(char *));
    if (names == NULL || values == NULL)
        return;
    for (yaml_node_pair_t *pr = node->data.mapping.pairs.start;
         pr < node->data.mapping.pairs.top; pr++) {
        yaml_node_t *kn = yaml_document_get_node(doc, pr->key);
        yaml_node_t *vn = yaml_document_get_node(doc, pr->value);
        const char *key = str_of(kn), *val = str_of(vn);
        if (key == NULL || !env_name_ok(key)) {
            load_error(ld, file, &kn->start_mark, "env.set: \"%s\" is not a variable name",
                       key ? key : type_name(kn));
            continue;
        }
        bool dup = false;
        for (size_t j = 0; j < k; j++)
            if (strcmp(names[j], key) == 0)
                dup = true;
        if (dup) {
            load_error(ld, file, &kn->start_mark, "duplicate key \"env.set.%s\"", key);
            continue;
        }
        if (val == NULL) {
            load_error(ld, file, &vn->start_mark, "env.set.%s: expected a value, found %s",
                       key, type_name(vn));
            continue;
        }
        names[k] = arena_strdup(&p->arena, key);
        values[k] = arena_strdup(&p->arena, val);
        k++;
    }
    p->info.env_set_name = names;
    p->info.env_set_value = values;
    p->info.n_env_set = k;
}

static void text_value(struct loader *ld, const char *file, yaml_node_t *n, const char *what,
                       const char **out)
{
    const char *s = str_of(n);
    if (is_null(n))
        return;
    if (s == NULL) {
        load_error(ld, file, &n->start_mark, "%s: expected text, found %s", what, type_name(n));
        return;
    }
    *out = s;
}

void values_apply(struct loader *ld, enum leaf_id id, const char *file,
                  yaml_document_t *doc, yaml_node_t *node)
{
    static const char *const modes[] = { "enforce", "audit" };
    static const char *const kills[] = { "terminate", "deny" };
    static const char *const isolations[] = { "optional", "required" };
    static const char *const bools[] = { "false", "true" };
    struct policy *p = ld->p;
    struct policy_info *in = &p->info;
    const char *what = leaf_path(id);
    int k;

    if (node == NULL) {
        if (id == LF_VERSION)
            load_error(ld, file, NULL, "version: 1 is required (missing)");
        if (id == LF_MODE)
            p->mode_name = "enforce";
        return;
    }
    /* values point into the YAML document, which is deleted after the
     * load: copy every string the policy keeps */
    if (id == LF_NAME || id == LF_DESCRIPTION || id == LF_VERSION) {
        const char *s = NULL;
        text_value(ld, file, node, what, &s);
        if (id == LF_VERSION) {
            if (s == NULL || strcmp(s, "1") != 0)
                load_error(ld, file, &node->start_mark,
                           "version: must be 1 (this sbx reads version 1 policies), found \"%s\"",
                           s ? s : type_name(node));
        } else if (s != NULL) {
            *(id == LF_NAME ? &in->name : &in->description) = arena_strdup(&p->arena, s);
        }
        return;
    }
    switch (id) {
    case LF_MODE:
        if ((k = pick(ld, file, node, what, modes, 2)) >= 0) {
            in->audit_mode = k == 1;
            p->mode_name = modes[k];
        }
        break;
    case LF_ISOLATION:
        if ((k = pick(ld, file, node, what, isolations, 2)) >= 0)
            in->isolation_required = k == 1;
        break;
    case LF_KILL:
        if ((k = pick(ld, file, node, what, kills, 2)) >= 0)
            in->kill_deny = k == 1;
        break;
    case LF_READ_ONLY:
        if ((k = pick(ld, file, node, what, bools, 2)) >= 0) {
            in->read_only = k == 1;
            p->read_only_rule.file = file;
            p->read_only_rule.line = (unsigned)node->start_mark.line + 1;
            p->read_only_rule.col = (unsigned)node->start_mark.column + 1;
        }
        break;
    case LF_READ_ALLOW: glob_list(ld, POLICY_READ_ALLOW, file, doc, node); break;
    case LF_READ_DENY: glob_list(ld, POLICY_READ_DENY, file, doc, node); break;
    case LF_WRITE_ALLOW: glob_list(ld, POLICY_WRITE_ALLOW, file, doc, node); break;
    case LF_WRITE_DENY: glob_list(ld, POLICY_WRITE_DENY, file, doc, node); break;
    case LF_EXEC_ALLOW: glob_list(ld, POLICY_EXEC_ALLOW, file, doc, node); break;
    case LF_EXEC_DENY: glob_list(ld, POLICY_EXEC_DENY, file, doc, node); break;
    case LF_CMD_DENY: cmd_list(ld, POLICY_CMD_DENY, file, doc, node); break;
    case LF_CMD_ALLOW: cmd_list(ld, POLICY_CMD_ALLOW, file, doc, node); break;
    case LF_CONNECT_ALLOW: net_list(ld, POLICY_CONNECT_ALLOW, file, doc, node); break;
    case LF_CONNECT_DENY: net_list(ld, POLICY_CONNECT_DENY, file, doc, node); break;
    case LF_BIND_ALLOW: net_list(ld, POLICY_BIND_ALLOW, file, doc, node); break;
    case LF_BIND_DENY: net_list(ld, POLICY_BIND_DENY, file, doc, node); break;
    case LF_MAX_WRITE: size_value(ld, file, node, what, &in->max_write_bytes); break;
    case LF_MEMORY: size_value(ld, file, node, what, &in->limits.memory_bytes); break;
    case LF_TIMEOUT: duration_value(ld, file, node, what, &in->limits.timeout_ms); break;
    case LF_CPU: duration_value(ld, file, node, what, &in->limits.cpu_ms); break;
    case LF_PROCESSES: count_value(ld, file, node, what, &in->limits.processes); break;
    case LF_OPEN_FILES: count_value(ld, file, node, what, &in->limits.open_files); break;
    case LF_ENV_PASS: env_pass(ld, file, doc, node); break;
    case LF_ENV_SET: env_set(ld, file, doc, node); break;
    default:
        break;
    }
}
