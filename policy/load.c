/* load.c — reading a policy file: YAML syntax, the key tree (unknown and
 * duplicate keys), taking missing keys from the compiled-in default, the
 * workspace, and the order in which values are compiled (policy.h).
 *
 * Each error is collected (up to POLICY_DIAG_MAX) as "FILE:LINE:COL: ..."
 * and loading goes on where it can, so that one run of `sbx-policy check`
 * shows every mistake; any error means NULL is returned and the whole arena
 * is freed. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sha2.h>
#include <bsd/string.h>

/* The key tree.  Leaves are in enum leaf_id order; an interior key is one
 * that has children.  `inherit` is false for keys a policy never takes from
 * the default (the workspace belongs to the policy file's place; version
 * must be written; name and description describe this file). */
static const struct {
    const char *path;
    bool inherit;
} leaves[LF__COUNT] = {
    [LF_VERSION] = { "version", false },
    [LF_NAME] = { "name", false },
    [LF_DESCRIPTION] = { "description", false },
    [LF_MODE] = { "mode", true },
    [LF_WORKSPACE] = { "workspace", false },
    [LF_ISOLATION] = { "isolation", true },
    [LF_KILL] = { "kill", true },
    [LF_READ_ALLOW] = { "files.read.allow", true },
    [LF_READ_DENY] = { "files.read.deny", true },
    [LF_WRITE_ALLOW] = { "files.write.allow", true },
    [LF_WRITE_DENY] = { "files.write.deny", true },
    [LF_EXEC_ALLOW] = { "files.exec.allow", true },
    [LF_EXEC_DENY] = { "files.exec.deny", true },
    [LF_MAX_WRITE] = { "files.max_write_bytes", true },
    [LF_READ_ONLY] = { "files.read_only", true },
    [LF_CMD_DENY] = { "commands.deny", true },
    [LF_CMD_ALLOW] = { "commands.allow", true },
    [LF_CONNECT_ALLOW] = { "network.connect.allow", true },
    [LF_CONNECT_DENY] = { "network.connect.deny", true },
    [LF_BIND_ALLOW] = { "network.bind.allow", true },
    [LF_BIND_DENY] = { "network.bind.deny", true },
    [LF_TIMEOUT] = { "limits.timeout", true },
    [LF_CPU] = { "limits.cpu", true },
    [LF_MEMORY] = { "limits.memory", true },
    [LF_PROCESSES] = { "limits.processes", true },
    [LF_OPEN_FILES] = { "limits.open_files", true },
    [LF_ENV_PASS] = { "env.pass", true },
    [LF_ENV_SET] = { "env.set", true },
    [LF_SERVE_ALLOWED_IMPORTS] = { "serve.allowed_imports", true },
    [LF_SERVE_PRE_IMPORTS] = { "serve.pre_imports", true },
    [LF_SERVE_BLOCKLIST] = { "serve.blocklist", true },
    [LF_SERVE_STAGES] = { "serve.stages", true },
    [LF_SERVE_RUNTIME_HOOKS] = { "serve.runtime_hooks", true },
    [LF_SERVE_TIMEOUT_MAX] = { "serve.timeout_max", true },
    [LF_EXTENDS] = { "extends", false },
};

static const char *const interiors[] = {
    "files", "files.read", "files.write", "files.exec", "commands",
    "network", "network.connect", "network.bind", "limits", "env", "serve",
};

const char *leaf_path(enum leaf_id id)
{
    return leaves[id].path;
}

void load_error(struct loader *ld, const char *file, const yaml_mark_t *mark,
                const char *fmt, ...)
{
    if (ld->diag != NULL && ld->diag->count < POLICY_DIAG_MAX) {
        char *m = ld->diag->msg[ld->diag->count];
        int n = snprintf(m, POLICY_DIAG_LEN, "%s:%zu:%zu: ", file,
                         mark ? mark->line + 1 : 1, mark ? mark->column + 1 : 1);
        if (n > 0 && n < POLICY_DIAG_LEN) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(m + n, POLICY_DIAG_LEN - (size_t)n, fmt, ap);
            va_end(ap);
        }
        /* the default's messages (a broken build) go first, then the
         * policy's own, then its parent's, ... each in line order */
        uint64_t line = mark ? mark->line + 1 : 1, col = mark ? mark->column + 1 : 1;
        uint64_t rank = ld->nfiles + 1;
        for (unsigned i = 0; i < ld->nfiles; i++)
            if (strcmp(ld->files[i], file) == 0) {
                rank = i + 1;
                break;
            }
        uint64_t key = rank;
        key = key << 24 | (line & 0xffffff);
        key = key << 20 | (col & 0xfffff);
        ld->pos[ld->diag->count] = strcmp(file, POLICY_DEFAULT_NAME) == 0 ? 0 : key;
    }
    if (ld->diag != NULL)
        ld->diag->count++;
    ld->errors++;
}

/* ---- the key tree --------------------------------------------------------- */

static int leaf_find(const char *path)
{
    for (int i = 0; i < LF__COUNT; i++)
        if (strcmp(leaves[i].path, path) == 0)
            return i;
    return -1;
}

static bool is_interior(const char *path)
{
    for (size_t i = 0; i < sizeof(interiors) / sizeof(interiors[0]); i++)
        if (strcmp(interiors[i], path) == 0)
            return true;
    return false;
}

/* Edit distance, for "did you mean"; keys are short. */
size_t load_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[64];
    if (la >= 63 || lb >= 63)
        return 99;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* The child of PREFIX ("" for the top) closest to KEY, if close enough. */
static const char *suggest(const char *prefix, const char *key)
{
    const char *best = NULL;
    size_t best_d = 99, pl = strlen(prefix);
    const char *all[LF__COUNT + sizeof(interiors) / sizeof(interiors[0])];
    size_t n = 0;

    for (int i = 0; i < LF__COUNT; i++)
        all[n++] = leaves[i].path;
    for (size_t i = 0; i < sizeof(interiors) / sizeof(interiors[0]); i++)
        all[n++] = interiors[i];
    for (size_t i = 0; i < n; i++) {
        const char *c = all[i];
        if (pl > 0) {
            if (strncmp(c, prefix, pl) != 0 || c[pl] != '.')
                continue;
            c += pl + 1;
        }
        if (strchr(c, '.') != NULL)
            continue;
        size_t d = load_distance(key, c);
        if (d < best_d) {
            best_d = d;
            best = c;
        }
    }
    size_t kl = strlen(key);
    if (best != NULL && (best_d <= 2 || best_d * 3 <= kl) && best_d < kl)
        return best;
    return NULL;
}

static const char *scalar(yaml_node_t *n)
{
    return n != NULL && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static void walk(struct loader *ld, struct load_src *src, yaml_node_t *map, const char *prefix)
{
    char path[128];

    for (yaml_node_pair_t *pr = map->data.mapping.pairs.start;
         pr < map->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = yaml_document_get_node(&src->doc, pr->key);
        yaml_node_t *v = yaml_document_get_node(&src->doc, pr->value);
        const char *key = scalar(k);
        bool dup = false;

        if (key == NULL) {
            load_error(ld, src->file, &k->start_mark, "a key must be a plain name");
            continue;
        }
        for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < pr; q++) {
            const char *other = scalar(yaml_document_get_node(&src->doc, q->key));
            if (other != NULL && strcmp(other, key) == 0)
                dup = true;
        }
        if (dup) {
            load_error(ld, src->file, &k->start_mark, "duplicate key \"%s%s%s\"",
                       prefix, *prefix ? "." : "", key);
            continue;
        }
        snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "", key);
        int leaf = leaf_find(path);
        if (leaf >= 0) {
            src->slot[leaf] = v;
            src->key[leaf] = k;
        } else if (is_interior(path)) {
            if (v->type != YAML_MAPPING_NODE) {
                load_error(ld, src->file, &v->start_mark, "%s: expected a mapping of keys", path);
                continue;
            }
            if (strcmp(path, "serve") == 0)
                src->serve_key = k;
            walk(ld, src, v, path);
        } else {
            const char *s = suggest(prefix, key);
            if (s != NULL)
                load_error(ld, src->file, &k->start_mark,
                           "unknown key \"%s\"%s%s (did you mean \"%s\"?)", key,
                           *prefix ? " in " : "", prefix, s);
            else
                load_error(ld, src->file, &k->start_mark, "unknown key \"%s\"%s%s", key,
                           *prefix ? " in " : "", prefix);
        }
    }
}

/* A policy nests four levels (files: read: allow: [ ... ]); a rule's value
 * perhaps one or two more.  libyaml's scanner keeps one entry per open flow
 * level and walks them all at each token, so its time grows with the square
 * of the depth: 100,000 nested "[" take over a minute.  32 levels is far
 * beyond any policy and cheap to reach. */
#define POLICY_DEPTH_MAX 32

/* Walks BUF's events only as deep as POLICY_DEPTH_MAX, before the document
 * is built: a deeper file is refused at the node that goes too deep, after
 * at most that many levels of scanning.  A syntax error is left to the
 * full parse, which stops at the same place.  0, or -1 after reporting. */
static int check_depth(struct loader *ld, struct load_src *src, const char *buf, size_t len)
{
    yaml_parser_t parser;
    int depth = 0, rc = 0;

    if (!yaml_parser_initialize(&parser)) {
        load_error(ld, src->file, NULL, "out of memory");
        return -1;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev))
            break;
        yaml_event_type_t type = ev.type;
        yaml_mark_t mark = ev.start_mark;
        yaml_event_delete(&ev);
        if (type == YAML_STREAM_END_EVENT)
            break;
        if (type == YAML_SEQUENCE_END_EVENT || type == YAML_MAPPING_END_EVENT)
            depth--;
        if (type != YAML_SEQUENCE_START_EVENT && type != YAML_MAPPING_START_EVENT)
            continue;
        if (++depth > POLICY_DEPTH_MAX) {
            load_error(ld, src->file, &mark, "nested deeper than %d levels; a policy "
                       "needs a handful (refusing to read further)", POLICY_DEPTH_MAX);
            rc = -1;
            break;
        }
    }
    yaml_parser_delete(&parser);
    return rc;
}

/* Parses BUF into SRC and walks its key tree.  0, or -1 after reporting. */
int load_parse(struct loader *ld, struct load_src *src, const char *buf, size_t len)
{
    yaml_parser_t parser;
    int rc = -1;

    if (len > POLICY_FILE_MAX) {
        load_error(ld, src->file, NULL, "larger than %u KiB, the most a policy may be",
                   POLICY_FILE_MAX >> 10);
        return -1;
    }
    if (check_depth(ld, src, buf, len) < 0)
        return -1;
    if (!yaml_parser_initialize(&parser)) {
        load_error(ld, src->file, NULL, "out of memory");
        return -1;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
    if (!yaml_parser_load(&parser, &src->doc)) {
        const yaml_mark_t *m = &parser.problem_mark;
        if (parser.context != NULL)
            load_error(ld, src->file, m, "YAML syntax: %s %s",
                       parser.problem ? parser.problem : "error", parser.context);
        else
            load_error(ld, src->file, m, "YAML syntax: %s",
                       parser.problem ? parser.problem : "error");
        goto out;
    }
    src->have_doc = true;
    yaml_node_t *root = yaml_document_get_root_node(&src->doc);
    if (root == NULL) {
        load_error(ld, src->file, NULL, "empty policy (it needs at least \"version: 1\")");
        goto out;
    }
    /* a second document would be silently ignored: refuse it */
    yaml_document_t extra;
    if (yaml_parser_load(&parser, &extra)) {
        yaml_node_t *r2 = yaml_document_get_root_node(&extra);
        if (r2 != NULL)
            load_error(ld, src->file, &r2->start_mark,
                       "a policy is one YAML document; remove the second one");
        yaml_document_delete(&extra);
    }
    if (root->type != YAML_MAPPING_NODE) {
        load_error(ld, src->file, &root->start_mark,
                   "a policy is a mapping of keys (version, files, commands, ...)");
        goto out;
    }
    walk(ld, src, root, "");
    rc = 0;
out:
    yaml_parser_delete(&parser);
    return rc;
}

/* ---- workspace and home ---------------------------------------------------- */

static const char *find_home(struct loader *ld, const struct policy_options *opt)
{
    const char *h = opt && opt->home ? opt->home : getenv("HOME");
    char buf[PATH_MAX];

    if (h == NULL || h[0] != '/') {
        struct passwd pw, *res = NULL;
        char pwbuf[4096];
        if (getpwuid_r(getuid(), &pw, pwbuf, sizeof(pwbuf), &res) == 0 && res != NULL &&
            res->pw_dir != NULL && res->pw_dir[0] == '/')
            h = arena_strdup(&ld->p->arena, res->pw_dir);
        else
            return NULL;
    }
    /* rules are matched against resolved paths: resolve the home too */
    if (realpath(h, buf) != NULL)
        return arena_strdup(&ld->p->arena, buf);
    if (policy_path_lexical("/", h, buf, sizeof(buf)) == 0)
        return arena_strdup(&ld->p->arena, buf);
    return NULL;
}

/* The workspace: options, else the policy's (relative to DIR, the policy
 * file's directory), else the current directory; absolute and resolved. */
static int find_workspace(struct loader *ld, const struct policy_options *opt,
                          struct load_src *src, const char *dir)
{
    char cwd[PATH_MAX], joined[PATH_MAX], real[PATH_MAX];
    const char *ws = NULL, *what;
    const yaml_mark_t *mark = NULL;

    if (getcwd(cwd, sizeof(cwd)) == NULL) {
        load_error(ld, src->file, NULL, "cannot find the current directory: %s", strerror(errno));
        return -1;
    }
    if (opt != NULL && opt->workspace != NULL) {
        ws = opt->workspace;
        what = "workspace given";
        if (policy_path_lexical(cwd, ws, joined, sizeof(joined)) < 0)
            goto toolong;
    } else if (src->slot[LF_WORKSPACE] != NULL) {
        yaml_node_t *n = src->slot[LF_WORKSPACE];
        mark = &n->start_mark;
        ws = scalar(n);
        what = "workspace";
        if (ws == NULL || *ws == '\0') {
            load_error(ld, src->file, mark, "workspace: expected a directory name");
            return -1;
        }
        char base[PATH_MAX];
        if (policy_path_lexical(cwd, dir, base, sizeof(base)) < 0 ||
            policy_path_lexical(base, ws, joined, sizeof(joined)) < 0)
            goto toolong;
    } else {
        what = "current directory";
        strlcpy(joined, cwd, sizeof(joined));
    }
    if (realpath(joined, real) == NULL) {
        load_error(ld, src->file, mark, "%s %s: %s", what, joined, strerror(errno));
        return -1;
    }
    ld->p->info.workspace = arena_strdup(&ld->p->arena, real);
    return ld->p->info.workspace ? 0 : -1;
toolong:
    load_error(ld, src->file, mark, "%s: path too long", what);
    return -1;
}

/* Values are checked key by key, not in file order: put the messages in
 * the order of the file (insertion sort; there are at most a few dozen). */
static void sort_diag(struct loader *ld)
{
    struct policy_diag *d = ld->diag;
    char tmp[POLICY_DIAG_LEN];
    if (d == NULL)
        return;
    unsigned n = d->count < POLICY_DIAG_MAX ? d->count : POLICY_DIAG_MAX;
    for (unsigned i = 1; i < n; i++) {
        uint64_t key = ld->pos[i];
        unsigned j = i;
        memcpy(tmp, d->msg[i], POLICY_DIAG_LEN);
        while (j > 0 && ld->pos[j - 1] > key) {
            ld->pos[j] = ld->pos[j - 1];
            memcpy(d->msg[j], d->msg[j - 1], POLICY_DIAG_LEN);
            j--;
        }
        ld->pos[j] = key;
        memcpy(d->msg[j], tmp, POLICY_DIAG_LEN);
    }
}

/* ---- the whole load ------------------------------------------------------- */

/* Converts every key along the chain SRCS (N files, the root first, the
 * policy's own last; see chain.c for how lists are assembled). */
static void apply_keys(struct loader *ld, struct load_src *const *srcs, size_t n)
{
    struct policy *p = ld->p;
    if (n == 0)
        return;
    struct load_src *own = srcs[n - 1];

    for (int i = 0; i < LF__COUNT; i++) {
        if (i == LF_WORKSPACE || i == LF_EXTENDS)
            continue;
        if (chain_leaf_is_list(i) && leaves[i].inherit) {
            struct load_item *items = NULL;
            size_t ni = 0;
            yaml_node_t *at = NULL;
            const char *at_file = NULL;
            if (chain_gather(ld, i, srcs, n, &items, &ni, &at, &at_file) < 0)
                continue;
            if (at != NULL) {
                enum policy_list l = POLICY_LIST__COUNT;
                switch (i) {
                case LF_READ_ALLOW: l = POLICY_READ_ALLOW; break;
                case LF_READ_DENY: l = POLICY_READ_DENY; break;
                case LF_WRITE_ALLOW: l = POLICY_WRITE_ALLOW; break;
                case LF_WRITE_DENY: l = POLICY_WRITE_DENY; break;
                case LF_EXEC_ALLOW: l = POLICY_EXEC_ALLOW; break;
                case LF_EXEC_DENY: l = POLICY_EXEC_DENY; break;
                case LF_CMD_DENY: l = POLICY_CMD_DENY; break;
                case LF_CMD_ALLOW: l = POLICY_CMD_ALLOW; break;
                case LF_CONNECT_ALLOW: l = POLICY_CONNECT_ALLOW; break;
                case LF_CONNECT_DENY: l = POLICY_CONNECT_DENY; break;
                case LF_BIND_ALLOW: l = POLICY_BIND_ALLOW; break;
                case LF_BIND_DENY: l = POLICY_BIND_DENY; break;
                default: break;
                }
                if (l == POLICY_CMD_DENY || l == POLICY_CMD_ALLOW)
                    values_cmd_list(ld, l, items, ni, at, at_file);
                else if (l >= POLICY_CONNECT_ALLOW && l <= POLICY_BIND_DENY)
                    values_net_list(ld, l, items, ni, at, at_file);
                else if (l != POLICY_LIST__COUNT)
                    values_glob_list(ld, l, items, ni, at, at_file);
                else if (i == LF_ENV_PASS)
                    values_env_pass(ld, items, ni, at, at_file);
                else
                    serve_apply_list(ld, i, items, ni, at, at_file);
                if (p->meta != NULL)
                    p->meta->leaf[i] = (struct load_origin){ at_file,
                        (unsigned)at->start_mark.line + 1 };
            }
            free(items);
            continue;
        }
        /* a scalar or a mapping: the nearest file that writes it */
        struct load_src *from = NULL;
        if (!leaves[i].inherit) {
            from = own->slot[i] ? own : NULL;
        } else {
            for (size_t s = n; s-- > 0 && from == NULL;)
                if (srcs[s]->slot[i] != NULL)
                    from = srcs[s];
        }
        if (from != NULL) {
            values_apply(ld, i, from->file, &from->doc, from->slot[i]);
            if (p->meta != NULL)
                p->meta->leaf[i] = (struct load_origin){ from->file,
                    (unsigned)from->slot[i]->start_mark.line + 1 };
        } else {
            values_apply(ld, i, own->file, &own->doc, NULL);
        }
    }
}

/* True if some key is left for the default to give: no file of the chain
 * writes it as a whole (a list edit needs the list it edits). */
static bool needs_default(const struct load_chain *c)
{
    for (int i = 0; i < LF__COUNT; i++) {
        if (!leaves[i].inherit)
            continue;
        bool whole = false;
        for (size_t s = 0; s < c->n && !whole; s++) {
            yaml_node_t *n = c->src[s].slot[i];
            whole = n != NULL && !(chain_leaf_is_list(i) &&
                                   chain_is_edit((yaml_document_t *)&c->src[s].doc, n));
        }
        if (!whole)
            return true;
    }
    return false;
}

static struct policy *load_common(const char *name, const char *real, const char *dir,
                                  const char *buf, size_t len,
                                  const struct policy_options *opt, struct policy_diag *diag)
{
    struct policy *p = NULL;
    struct loader ld = { .diag = diag };
    struct load_chain *c = NULL;
    struct load_src def = { .file = POLICY_DEFAULT_NAME };
    struct load_src *srcs[POLICY_EXTENDS_MAX + 2];
    size_t ns = 0;
    struct arena a = { 0 };

    if (diag != NULL)
        diag->count = 0;
    p = arena_alloc(&a, sizeof(*p));
    if (p == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    p->arena = a;
    ld.p = p;
    c = calloc(1, sizeof(*c));
    p->meta = arena_alloc(&p->arena, sizeof(*p->meta));
    p->info.file = arena_strdup(&p->arena, name);
    if (c == NULL || p->meta == NULL || p->info.file == NULL) {
        load_error(&ld, name, NULL, "out of memory");
        goto fail;
    }
    ld.files[ld.nfiles++] = p->info.file;
    c->src[0].file = p->info.file;
    c->real[0] = real ? arena_strdup(&p->arena, real) : NULL;
    c->n = 1;

    load_parse(&ld, &c->src[0], buf, len);
    /* after a syntax error nothing more can be said; after a bad key the
     * values can still be checked, so that every mistake is shown at once */
    if (!c->src[0].have_doc || yaml_document_get_root_node(&c->src[0].doc) == NULL ||
        yaml_document_get_root_node(&c->src[0].doc)->type != YAML_MAPPING_NODE)
        goto fail;
    if (chain_resolve(&ld, c, dir, opt) < 0)
        goto fail;
    /* The identity of the policy: the SHA-256 of its own bytes, followed
     * by its parent's, ... (the compiled-in default is part of sbx, not of
     * the policy).  A lone policy's is its file's, as it always was. */
    if (c->n == 1) {
        SHA256Data((const uint8_t *)buf, len, p->info.sha256);
    } else {
        char *all = malloc(len + c->cat_len + 1);
        if (all == NULL) {
            load_error(&ld, name, NULL, "out of memory");
            goto fail;
        }
        memcpy(all, buf, len);
        if (c->cat_len)
            memcpy(all + len, c->cat, c->cat_len);
        SHA256Data((const uint8_t *)all, len + c->cat_len, p->info.sha256);
        free(all);
    }
    /* The default is parsed only when a key is missing: every process the
     * guard starts loads the policy, and a complete one (the default
     * itself, most often) then costs one parse, not two. */
    if (needs_default(c) &&
        load_parse(&ld, &def, sbx_default_policy_yaml, sbx_default_policy_yaml_len) < 0)
        goto fail;
    if (def.have_doc)
        srcs[ns++] = &def;
    for (size_t i = c->n; i-- > 0;)
        srcs[ns++] = &c->src[i];
    p->meta->files = arena_alloc(&p->arena, (c->n + 1) * sizeof(char *));
    if (p->meta->files == NULL) {
        load_error(&ld, name, NULL, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < c->n; i++)
        p->meta->files[p->meta->n_files++] = c->src[i].file;
    if (def.have_doc || c->explicit_default)
        p->meta->files[p->meta->n_files++] = POLICY_DEFAULT_NAME;
    p->meta->wrote_workspace = c->src[0].slot[LF_WORKSPACE] != NULL;

    ld.home = find_home(&ld, opt);
    p->info.home = ld.home;
    if (find_workspace(&ld, opt, &c->src[0], dir) < 0)
        goto fail;
    for (size_t i = 0; i < c->n; i++)
        if (c->src[i].serve_key != NULL && serve_section(&ld) == NULL) {
            load_error(&ld, name, NULL, "out of memory");
            goto fail;
        }
    apply_keys(&ld, srcs, ns);
    if (p->info.name == NULL) {
        /* no name: the file's base name without its extension */
        const char *b = strrchr(name, '/');
        b = b ? b + 1 : name;
        const char *dot = strrchr(b, '.');
        p->info.name = arena_strndup(&p->arena, b, dot && dot != b ? (size_t)(dot - b) : strlen(b));
    }
    if (values_finish(&ld, opt) < 0 && ld.errors == 0)
        load_error(&ld, name, NULL, "out of memory");
    if (ld.errors > 0)
        goto fail;
    goto out;
fail:
    sort_diag(&ld);
    policy_free(p);
    p = NULL;
out:
    for (size_t i = 0; c != NULL && i < c->n; i++)
        if (c->src[i].have_doc)
            yaml_document_delete(&c->src[i].doc);
    if (def.have_doc)
        yaml_document_delete(&def.doc);
    if (c != NULL)
        free(c->cat);
    free(c);
    if (p == NULL)
        errno = EINVAL;
    return p;
}

static void dir_of(const char *path, char *dir, size_t dirsz)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        strlcpy(dir, ".", dirsz);
    else if (slash == path)
        strlcpy(dir, "/", dirsz);
    else
        snprintf(dir, dirsz, "%.*s", (int)(slash - path), path);
}

struct policy *policy_load_buffer(const char *name, const char *buf, size_t len,
                                  const struct policy_options *opt,
                                  struct policy_diag *diag)
{
    char dir[PATH_MAX], real[PATH_MAX];
    const char *r = realpath(name, real);

    dir_of(name, dir, sizeof(dir));
    if (opt != NULL && opt->display_path != NULL)
        name = opt->display_path;
    return load_common(name, r, dir, buf, len, opt, diag);
}

struct policy *policy_load(const char *path, const struct policy_options *opt,
                           struct policy_diag *diag)
{
    const char *name = opt && opt->display_path ? opt->display_path : path;
    char dir[PATH_MAX], real[PATH_MAX], *buf = NULL;
    size_t len = 0;
    int saved;

    if (diag != NULL)
        diag->count = 0;
    if (load_read_file(path, &buf, &len) < 0) {
        saved = errno;
        if (diag != NULL && diag->count < POLICY_DIAG_MAX) {
            snprintf(diag->msg[diag->count], POLICY_DIAG_LEN, "%s:1:1: cannot read: %s",
                     name, strerror(saved));
            diag->count++;
        }
        errno = saved;
        return NULL;
    }
    dir_of(path, dir, sizeof(dir));
    const char *r = realpath(path, real);
    struct policy *p = load_common(name, r, dir, buf ? buf : "", len, opt, diag);
    saved = errno;
    free(buf);
    errno = saved;
    return p;
}
