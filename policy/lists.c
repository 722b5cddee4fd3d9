/* lists.c — the list values of a policy: path globs (expanded against the
 * workspace and home, their leading directory resolved), command patterns
 * (PCRE2) and network rules (load.c, values.c).  Each bad entry is reported
 * at its own line and column and the list goes on, so all are shown. */
#include "internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <bsd/string.h>

/* ---- globs ---------------------------------------------------------------- */

/* policy_path_resolve("/", IN), remembered for this load and built from
 * the resolved parent, so each directory is looked at once per load: most
 * globs share a few roots (the workspace, the home, /usr), and every
 * process the guard starts loads the policy. */
static int resolve_memo(struct loader *ld, const char *in, char *out, size_t outsz)
{
    const char *ws = ld->p->info.workspace;
    char parent[PATH_MAX];
    struct stat st;

    if (strcmp(in, "/") == 0 || (ws != NULL && strcmp(in, ws) == 0))  /* resolved already */
        return strlcpy(out, in, outsz) < outsz ? 0 : -1;
    for (unsigned i = 0; i < ld->nmemo; i++)
        if (strcmp(ld->memo[i].in, in) == 0)
            return strlcpy(out, ld->memo[i].out, outsz) < outsz ? 0 : -1;
    const char *slash = strrchr(in, '/');
    size_t pl = slash ? (size_t)(slash - in) : 0;
    if (slash == NULL || pl >= sizeof(parent) || strcmp(slash, "/.") == 0 || strcmp(slash, "/..") == 0)
        return policy_path_resolve("/", in, false, out, outsz);
    memcpy(parent, in, pl);
    parent[pl] = '\0';
    if (pl == 0)
        strlcpy(parent, "/", sizeof(parent));
    if (resolve_memo(ld, parent, out, outsz) < 0)
        return -1;
    size_t ol = strlen(out);
    if ((size_t)snprintf(out + ol, outsz - ol, "%s%s", ol > 1 ? "/" : "", slash + 1) >= outsz - ol)
        return -1;
    /* a symlink (or /proc/self): the full walk knows the rules */
    if (lstat(out, &st) == 0 && S_ISLNK(st.st_mode)) {
        char tmp[PATH_MAX];
        if (strlcpy(tmp, out, sizeof(tmp)) >= sizeof(tmp) ||
            policy_path_resolve("/", tmp, false, out, outsz) < 0)
            return -1;
    }
    if (ld->nmemo < LOAD_MEMO_MAX) {
        const char *k = arena_strdup(&ld->p->arena, in), *v = arena_strdup(&ld->p->arena, out);
        if (k != NULL && v != NULL) {
            ld->memo[ld->nmemo].in = k;
            ld->memo[ld->nmemo].out = v;
            ld->nmemo++;
        }
    }
    return 0;
}

/* Expands a glob as written (already checked) into an absolute, folded
 * pattern whose leading literal directory is resolved, since the paths it
 * will be compared with are resolved too ("/bin/sh" -> "/usr/bin/sh" on a
 * merged /usr), the same way (policy_path_resolve: /proc/self stays).  A
 * literal naming a symlink also gets ALT, what it points to: the exec path
 * of "/usr/bin/python3" is "/usr/bin/python3.11". */
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
            if (resolve_memo(ld, out, real, sizeof(real)) == 0 && strcmp(real, out) != 0)
                *alt = arena_strdup(&ld->p->arena, real);
            char *slash = strrchr(root, '/');
            if (slash != NULL && slash != root) {
                *slash = '\0';
                if (resolve_memo(ld, root, real, sizeof(real)) == 0 &&
                    strcmp(real, root) != 0 &&
                    (size_t)snprintf(tmp, sizeof(tmp), "%s%s", real, out + (slash - root)) < sizeof(tmp))
                    strlcpy(out, tmp, sizeof(out));
            }
        } else if (resolve_memo(ld, root, real, sizeof(real)) == 0 &&
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
    r->section = policy_list_name(l);
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
long value_want_list(struct loader *ld, const char *file, yaml_node_t *node,
                     const char *what, const char *of)
{
    if (node->type != YAML_SEQUENCE_NODE) {
        load_error(ld, file, &node->start_mark, "%s: expected a list of %s, found %s%s",
                   what, of, value_type_name(node),
                   value_is_null(node) ? " (write [] for an empty list)" : "");
        return -1;
    }
    return (long)seq_len(node);
}

void values_glob_list(struct loader *ld, enum policy_list l, const struct load_item *items,
                      size_t n, yaml_node_t *at, const char *at_file)
{
    struct policy *p = ld->p;
    if (n == 0)
        return;
    p->rules[l] = arena_alloc(&p->arena, n * sizeof(struct policy_rule));
    p->globs[l] = arena_alloc(&p->arena, n * sizeof(struct glob));
    if (p->rules[l] == NULL || p->globs[l] == NULL) {
        load_error(ld, at_file, at ? &at->start_mark : NULL, "out of memory");
        return;
    }
    for (size_t k = 0; k < n; k++) {
        yaml_node_t *item = items[k].node;
        const char *file = items[k].file;
        const char *text = value_str(item), *msg;
        size_t i = p->n_rules[l];
        if (text == NULL) {
            load_error(ld, file, &item->start_mark, "%s: expected a glob, found %s",
                       policy_list_name(l), value_type_name(item));
            continue;
        }
        msg = compile_glob(ld, text, item->data.scalar.length, &p->globs[l][i]);
        if (msg != NULL) {
            load_error(ld, file, &item->start_mark, "%s: bad glob \"%s\": %s",
                       policy_list_name(l), text, msg);
            continue;
        }
        rule_init(ld, &p->rules[l][i], l, file, item);
        p->rules[l][i].text = arena_strdup(&p->arena, text);
        p->rules[l][i].pattern = p->globs[l][i].pat;
        p->n_rules[l]++;
    }
}

/* ---- commands ------------------------------------------------------------- */

void values_cmd_list(struct loader *ld, enum policy_list l, const struct load_item *items,
                     size_t n, yaml_node_t *at, const char *at_file)
{
    struct policy *p = ld->p;
    if (n == 0)
        return;
    p->rules[l] = arena_alloc(&p->arena, n * sizeof(struct policy_rule));
    p->cmds[l] = arena_alloc(&p->arena, n * sizeof(struct cmd_match));
    if (p->rules[l] == NULL || p->cmds[l] == NULL) {
        load_error(ld, at_file, at ? &at->start_mark : NULL, "out of memory");
        return;
    }
    for (size_t it = 0; it < n; it++) {
        yaml_node_t *item = items[it].node;
        yaml_document_t *doc = items[it].doc;
        const char *file = items[it].file;
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
                const char *key = value_str(k);
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
                               key ? key : "?", policy_list_name(l), hint ? " (did you mean \"" : "",
                               hint ? hint : "", hint ? "\"?)" : "");
                    bad = true;
                } else if (*slot != NULL) {
                    load_error(ld, file, &k->start_mark, "duplicate key \"%s\" in %s entry",
                               key, policy_list_name(l));
                    bad = true;
                } else if (v->type != YAML_SCALAR_NODE) {
                    load_error(ld, file, &v->start_mark, "%s: %s: expected text, found %s",
                               policy_list_name(l), key, value_type_name(v));
                    bad = true;
                } else {
                    *slot = v;
                }
            }
            if (match == NULL && !bad) {
                load_error(ld, file, &item->start_mark,
                           "%s: an entry needs \"match\" (a PCRE2 pattern)", policy_list_name(l));
                bad = true;
            }
        } else {
            load_error(ld, file, &item->start_mark,
                       "%s: expected {match: PATTERN, reason: TEXT}, found %s",
                       policy_list_name(l), value_type_name(item));
            bad = true;
        }
        if (bad || match == NULL)
            continue;
        const char *pat = value_str(match);
        size_t plen = match->data.scalar.length, off = 0;
        char err[256];
        if (plen == 0) {
            load_error(ld, file, &match->start_mark, "%s: empty pattern (it would match every command)",
                       policy_list_name(l));
            continue;
        }
        if (cmd_compile(p, l, i, pat, plen, err, sizeof(err), &off) < 0) {
            load_error(ld, file, &match->start_mark,
                       "%s: pattern does not compile: %s (at offset %zu of the pattern)",
                       policy_list_name(l), err, off);
            continue;
        }
        rule_init(ld, &p->rules[l][i], l, file, item);
        p->rules[l][i].text = arena_strdup(&p->arena, pat);
        p->rules[l][i].reason = reason ? arena_strdup(&p->arena, value_str(reason)) : NULL;
        p->n_rules[l]++;
    }
}

/* ---- network -------------------------------------------------------------- */

void values_net_list(struct loader *ld, enum policy_list l, const struct load_item *items,
                     size_t n, yaml_node_t *at, const char *at_file)
{
    struct policy *p = ld->p;
    if (n == 0)
        return;
    p->rules[l] = arena_alloc(&p->arena, n * sizeof(struct policy_rule));
    p->nets[l] = arena_alloc(&p->arena, n * sizeof(struct net_match));
    if (p->rules[l] == NULL || p->nets[l] == NULL) {
        load_error(ld, at_file, at ? &at->start_mark : NULL, "out of memory");
        return;
    }
    for (size_t k = 0; k < n; k++) {
        yaml_node_t *item = items[k].node;
        const char *file = items[k].file;
        const char *text = value_str(item), *msg, *ut = NULL;
        size_t i = p->n_rules[l];
        struct policy_rule *r = &p->rules[l][i];
        struct net_match *m = &p->nets[l][i];

        if (text == NULL) {
            load_error(ld, file, &item->start_mark, "%s: expected a rule like \"host:port\", found %s",
                       policy_list_name(l), value_type_name(item));
            continue;
        }
        rule_init(ld, r, l, file, item);
        if (strlen(text) != item->data.scalar.length) {
            load_error(ld, file, &item->start_mark, "%s: NUL character in rule", policy_list_name(l));
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
                       policy_list_name(l), text, msg);
            continue;
        }
        r->text = text;
        p->n_rules[l]++;
    }
}
