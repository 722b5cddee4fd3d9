/*
 * serve.c — the serve: section of a policy, sbx-serve's profile (policy.h:
 * struct policy_serve; the profiles: ../shared/SERVE.md).
 *
 * The section is parsed like the rest of the policy: every key is a leaf of
 * the key tree (load.c), every mistake is reported at its file, line and
 * column, and loading goes on so that all are shown.  What is checked here:
 * names are ASCII Python identifiers (a module may be dotted), each list is
 * bounded in length and each name in size, stage names are the known ones,
 * the timeout maximum is at most 30 s.
 *
 * The lists arrive as items gathered along the extends chain (load.c:
 * allowed_imports and blocklist add up, other keys replace).  An entry
 * written twice in the same list of the same file is a mistake and said
 * so; the same entry met again further down the chain is taken once.
 *
 * Memory: the section and every string in it live in the policy's arena.
 * The compiled image (image.c) does not carry the section: the preload never
 * asks for it, and sbx-serve loads its profile from YAML.
 */
#include "internal.h"
#include "duration.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* Bounds.  The shipped profiles list 19 imports and 22 blocked pairs; a
 * profile a thousand entries long is a mistake or an attack on the runner,
 * which checks every import against the list.  Python itself allows
 * identifiers of any length, but no module on any index has a dotted name
 * of more than a few dozen characters. */
#define SERVE_LIST_MAX 1024
#define SERVE_PRE_IMPORTS_MAX 64
#define SERVE_NAME_MAX 128
#define SERVE_TIMEOUT_MAX_MS 30000u     /* SERVE.md: timeout max 30 s */

static const char *const stage_names[] = { "ast_scan", "blocklist_audit" };
static const char *const stage_modes[] = { "enforce", "observe" };

/* The section, made on first use with its defaults: the runtime hooks
 * enforce, and the ast_scan stage enforces unless `stages` says otherwise
 * (serve_set_stages replaces this). */
struct policy_serve *serve_section(struct loader *ld)
{
    struct policy *p = ld->p;
    if (p->serve != NULL)
        return p->serve;
    struct policy_serve *s = arena_alloc(&p->arena, sizeof(*s));
    struct policy_serve_stage *st = arena_alloc(&p->arena, sizeof(*st));
    if (s == NULL || st == NULL)
        return NULL;
    st->name = stage_names[0];
    st->mode = POLICY_STAGE_ENFORCE;
    s->stages = st;
    s->n_stages = 1;
    s->runtime_hooks = POLICY_STAGE_ENFORCE;
    p->serve = s;
    return s;
}

const struct policy_serve *policy_serve(const struct policy *p)
{
    return p != NULL ? p->serve : NULL;
}

/* ---- names ---------------------------------------------------------------- */

static bool ident_ok(const char *s, size_t n)
{
    if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
            return false;
    return true;
}

/* NULL if S (LEN bytes as written) is a module name: identifiers joined by
 * single dots, no dot when !DOTTED; else what is wrong. */
static const char *module_check(const char *s, size_t len, bool dotted)
{
    if (strlen(s) != len)
        return "a NUL character in a name";
    if (len > SERVE_NAME_MAX)
        return "longer than 128 characters";
    for (const char *part = s;;) {
        const char *dot = strchr(part, '.');
        size_t n = dot ? (size_t)(dot - part) : strlen(part);
        if (!ident_ok(part, n))
            return dotted ? "not a module name (Python identifiers joined by dots, ASCII)"
                          : "not a module name (a Python identifier, ASCII)";
        if (dot == NULL)
            return NULL;
        if (!dotted)
            return "a top-level module name is expected: the check reads the first part "
                   "of every import (write the part before the first dot)";
        part = dot + 1;
    }
}

/* Checks ITEM of list WHAT and returns its text, or NULL after reporting. */
static const char *name_item(struct loader *ld, const struct load_item *it, const char *what,
                             bool dotted)
{
    const char *s = value_str(it->node), *msg;
    if (s == NULL) {
        load_error(ld, it->file, &it->node->start_mark, "%s: expected a module name, found %s",
                   what, value_type_name(it->node));
        return NULL;
    }
    if ((msg = module_check(s, it->node->data.scalar.length, dotted)) != NULL) {
        load_error(ld, it->file, &it->node->start_mark, "%s: \"%s\": %s", what, s, msg);
        return NULL;
    }
    return s;
}

/* True if entry I of ITEMS repeats an earlier one from the same file and
 * list node written the same way (a mistake); reports it. */
static bool written_twice(struct loader *ld, const struct load_item *items, size_t i,
                          const char *const *texts, const char *what)
{
    for (size_t j = 0; j < i; j++)
        if (texts[j] != NULL && items[j].list == items[i].list &&
            strcmp(texts[j], texts[i]) == 0) {
            load_error(ld, items[i].file, &items[i].node->start_mark,
                       "%s: \"%s\" is listed twice (first at line %zu)", what, texts[i],
                       items[j].node->start_mark.line + 1);
            return true;
        }
    return false;
}

struct named {
    const char *name;
    struct load_origin from;
};

static int cmp_named(const void *a, const void *b)
{
    return strcmp(((const struct named *)a)->name, ((const struct named *)b)->name);
}

/* ---- the keys ------------------------------------------------------------- */

/* allowed_imports (sorted, unique) and pre_imports (in order): names. */
static void name_list(struct loader *ld, enum leaf_id id, const struct load_item *items,
                      size_t n, yaml_node_t *at, const char *at_file)
{
    struct policy *p = ld->p;
    struct policy_serve *s = serve_section(ld);
    bool imports = id == LF_SERVE_ALLOWED_IMPORTS;
    size_t max = imports ? SERVE_LIST_MAX : SERVE_PRE_IMPORTS_MAX;
    const char *what = leaf_path(id);
    const char **texts = arena_alloc(&p->arena, (n + 1) * sizeof(char *));
    struct named *v = arena_alloc(&p->arena, (n + 1) * sizeof(*v));
    const char **out = arena_alloc(&p->arena, (n + 1) * sizeof(char *));
    struct load_origin *from = arena_alloc(&p->arena, (n + 1) * sizeof(*from));
    size_t k = 0;

    if (s == NULL || texts == NULL || v == NULL || out == NULL || from == NULL) {
        load_error(ld, at_file, at ? &at->start_mark : NULL, "out of memory");
        return;
    }
    if (n > max) {
        load_error(ld, at_file, at ? &at->start_mark : NULL,
                   "%s: %zu entries, more than the %zu a profile may list", what, n, max);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        texts[i] = name_item(ld, &items[i], what, !imports);
        if (texts[i] != NULL && written_twice(ld, items, i, texts, what))
            texts[i] = NULL;
        if (texts[i] == NULL)
            continue;
        bool dup = false;       /* from an earlier file of the chain: once */
        for (size_t j = 0; j < k && !dup; j++)
            dup = strcmp(v[j].name, texts[i]) == 0;
        if (dup)
            continue;
        v[k].name = arena_strdup(&p->arena, texts[i]);
        v[k].from = (struct load_origin){ items[i].file,
                                          (unsigned)items[i].node->start_mark.line + 1 };
        if (v[k].name != NULL)
            k++;
    }
    if (imports)
        qsort(v, k, sizeof(*v), cmp_named);
    for (size_t i = 0; i < k; i++) {
        out[i] = v[i].name;
        from[i] = v[i].from;
    }
    if (imports) {
        s->allowed_imports = out;
        s->n_allowed_imports = k;
    } else {
        s->pre_imports = out;
        s->n_pre_imports = k;
    }
    if (p->meta != NULL)
        *(imports ? &p->meta->imports : &p->meta->pre_imports) = from;
}

/* blocklist: "module.attr", split at the last dot; in order, unique. */
static void block_list(struct loader *ld, const struct load_item *items, size_t n,
                       yaml_node_t *at, const char *at_file)
{
    struct policy *p = ld->p;
    struct policy_serve *s = serve_section(ld);
    const char *what = leaf_path(LF_SERVE_BLOCKLIST);
    const char **texts = arena_alloc(&p->arena, (n + 1) * sizeof(char *));
    struct policy_serve_block *out = arena_alloc(&p->arena, (n + 1) * sizeof(*out));
    struct load_origin *from = arena_alloc(&p->arena, (n + 1) * sizeof(*from));
    size_t k = 0;

    if (s == NULL || texts == NULL || out == NULL || from == NULL) {
        load_error(ld, at_file, at ? &at->start_mark : NULL, "out of memory");
        return;
    }
    if (n > SERVE_LIST_MAX) {
        load_error(ld, at_file, at ? &at->start_mark : NULL,
                   "%s: %zu entries, more than the %d a profile may list", what, n,
                   SERVE_LIST_MAX);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const struct load_item *it = &items[i];
        const char *t = value_str(it->node), *msg;
        if (t == NULL) {
            load_error(ld, it->file, &it->node->start_mark,
                       "%s: expected MODULE.ATTRIBUTE, found %s", what, value_type_name(it->node));
            continue;
        }
        if ((msg = module_check(t, it->node->data.scalar.length, true)) != NULL) {
            load_error(ld, it->file, &it->node->start_mark, "%s: \"%s\": %s", what, t, msg);
            continue;
        }
        const char *dot = strrchr(t, '.');
        if (dot == NULL) {
            load_error(ld, it->file, &it->node->start_mark,
                       "%s: \"%s\" names no attribute (write MODULE.ATTRIBUTE, e.g. "
                       "pandas.read_pickle)", what, t);
            continue;
        }
        texts[i] = t;
        if (written_twice(ld, items, i, texts, what)) {
            texts[i] = NULL;
            continue;
        }
        bool dup = false;
        for (size_t j = 0; j < k && !dup; j++)
            dup = strlen(out[j].module) == (size_t)(dot - t) &&
                  strncmp(out[j].module, t, (size_t)(dot - t)) == 0 &&
                  strcmp(out[j].attr, dot + 1) == 0;
        if (dup)
            continue;
        out[k].module = arena_strndup(&p->arena, t, (size_t)(dot - t));
        out[k].attr = arena_strdup(&p->arena, dot + 1);
        from[k] = (struct load_origin){ it->file, (unsigned)it->node->start_mark.line + 1 };
        if (out[k].module != NULL && out[k].attr != NULL)
            k++;
    }
    s->blocklist = out;
    s->n_blocklist = k;
    if (p->meta != NULL)
        p->meta->blocklist = from;
}

/* enforce or observe; -1 after reporting. */
static int mode_of(struct loader *ld, const char *file, yaml_node_t *n, const char *what)
{
    const char *v = value_str(n);
    for (int i = 0; v != NULL && i < 2; i++)
        if (strcmp(v, stage_modes[i]) == 0)
            return i;
    if (v != NULL)
        load_error(ld, file, &n->start_mark, "%s: \"%s\" is not enforce or observe", what, v);
    else
        load_error(ld, file, &n->start_mark, "%s: expected enforce or observe, found %s",
                   what, value_type_name(n));
    return -1;
}

/* stages: {NAME: enforce|observe, ...}, in the order written. */
static void stages(struct loader *ld, const char *file, yaml_document_t *doc, yaml_node_t *node)
{
    struct policy *p = ld->p;
    struct policy_serve *s = serve_section(ld);
    const size_t nknown = sizeof(stage_names) / sizeof(stage_names[0]);

    if (s == NULL) {
        load_error(ld, file, &node->start_mark, "out of memory");
        return;
    }
    if (node->type != YAML_MAPPING_NODE) {
        if (value_is_null(node)) {      /* "stages:" alone: none */
            s->n_stages = 0;
            return;
        }
        load_error(ld, file, &node->start_mark,
                   "serve.stages: expected a mapping of STAGE: enforce|observe (stages: "
                   "ast_scan, blocklist_audit), found %s", value_type_name(node));
        return;
    }
    size_t n = (size_t)(node->data.mapping.pairs.top - node->data.mapping.pairs.start), k = 0;
    struct policy_serve_stage *out = arena_alloc(&p->arena, (n + 1) * sizeof(*out));
    if (out == NULL) {
        load_error(ld, file, &node->start_mark, "out of memory");
        return;
    }
    for (yaml_node_pair_t *pr = node->data.mapping.pairs.start;
         pr < node->data.mapping.pairs.top; pr++) {
        yaml_node_t *kn = yaml_document_get_node(doc, pr->key);
        yaml_node_t *vn = yaml_document_get_node(doc, pr->value);
        const char *name = value_str(kn), *known = NULL, *near = NULL;
        for (size_t i = 0; name != NULL && i < nknown; i++) {
            if (strcmp(name, stage_names[i]) == 0)
                known = stage_names[i];
            else if (load_distance(name, stage_names[i]) <= 3)
                near = stage_names[i];
        }
        if (known == NULL) {
            if (near != NULL)
                load_error(ld, file, &kn->start_mark, "serve.stages: unknown stage \"%s\" "
                           "(did you mean \"%s\"?)", name, near);
            else
                load_error(ld, file, &kn->start_mark, "serve.stages: unknown stage \"%s\" "
                           "(the stages are ast_scan and blocklist_audit)",
                           name ? name : value_type_name(kn));
            continue;
        }
        bool dup = false;
        for (size_t j = 0; j < k; j++)
            dup = dup || out[j].name == known;
        if (dup) {
            load_error(ld, file, &kn->start_mark, "duplicate key \"serve.stages.%s\"", known);
            continue;
        }
        int m = mode_of(ld, file, vn, "serve.stages");
        if (m < 0)
            continue;
        out[k].name = known;
        out[k].mode = (enum policy_stage_mode)m;
        k++;
    }
    s->stages = out;
    s->n_stages = k;
}

static void timeout_max(struct loader *ld, const char *file, yaml_node_t *node)
{
    struct policy_serve *s = serve_section(ld);
    const char *v = value_str(node);
    uint64_t ms = 0;

    if (s == NULL) {
        load_error(ld, file, &node->start_mark, "out of memory");
        return;
    }
    if (value_is_null(node)) {
        s->timeout_max_ms = 0;
        return;
    }
    if (v == NULL || sbx_duration_parse(v, &ms) < 0) {
        load_error(ld, file, &node->start_mark, "serve.timeout_max: bad duration \"%s\" "
                   "(a number with ms or s, e.g. 30s)", v ? v : value_type_name(node));
        return;
    }
    if (ms == 0 || ms > SERVE_TIMEOUT_MAX_MS) {
        load_error(ld, file, &node->start_mark, "serve.timeout_max: \"%s\" is outside "
                   "1ms..30s (SERVE.md: a request runs at most 30 seconds)", v);
        return;
    }
    s->timeout_max_ms = ms;
}

void serve_apply_list(struct loader *ld, enum leaf_id id, const struct load_item *items,
                      size_t n, yaml_node_t *at, const char *at_file)
{
    if (id == LF_SERVE_BLOCKLIST)
        block_list(ld, items, n, at, at_file);
    else
        name_list(ld, id, items, n, at, at_file);
}

void serve_apply(struct loader *ld, enum leaf_id id, const char *file, yaml_document_t *doc,
                 yaml_node_t *node)
{
    struct policy_serve *s;
    int m;

    switch (id) {
    case LF_SERVE_STAGES:
        stages(ld, file, doc, node);
        break;
    case LF_SERVE_RUNTIME_HOOKS:
        if ((m = mode_of(ld, file, node, "serve.runtime_hooks")) >= 0 &&
            (s = serve_section(ld)) != NULL)
            s->runtime_hooks = (enum policy_stage_mode)m;
        break;
    case LF_SERVE_TIMEOUT_MAX:
        timeout_max(ld, file, node);
        break;
    default:
        break;
    }
}
