/* values.c — turning each key's YAML value into the compiled policy: the
 * dispatch per key, and the scalar values (sizes, durations, counts,
 * enumerations, names, the environment); the lists are in lists.c.  Every
 * bad value is reported at its own line and column (policy.h, load.c). */
#include "internal.h"
#include "duration.h"
#include "size.h"

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

const char *value_str(yaml_node_t *n)
{
    return n != NULL && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

bool value_is_null(yaml_node_t *n)
{
    const char *s = value_str(n);
    if (s == NULL || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    return *s == '\0' || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 ||
           strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0;
}

const char *value_type_name(yaml_node_t *n)
{
    if (n->type == YAML_SEQUENCE_NODE)
        return "a list";
    if (n->type == YAML_MAPPING_NODE)
        return "a mapping";
    return value_is_null(n) ? "nothing" : "a single value";
}

/* ---- scalars -------------------------------------------------------------- */

/* A scalar from a fixed set; returns its index or -1 after reporting. */
static int pick(struct loader *ld, const char *file, yaml_node_t *n, const char *what,
                const char *const *choices, size_t nchoices)
{
    const char *s = value_str(n);
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
        load_error(ld, file, &n->start_mark, "%s: expected %s, found %s", what, list, value_type_name(n));
    return -1;
}

static void size_value(struct loader *ld, const char *file, yaml_node_t *n, const char *what,
                       uint64_t *out)
{
    const char *s = value_str(n);
    if (value_is_null(n) || (s && strcmp(s, "unlimited") == 0)) {
        *out = 0;
        return;
    }
    if (s == NULL || sbx_size_parse(s, out) < 0)
        load_error(ld, file, &n->start_mark,
                   "%s: bad size \"%s\" (a number with B, KiB, MiB, GiB, K, M or G, e.g. 10MiB)",
                   what, s ? s : value_type_name(n));
}

static void duration_value(struct loader *ld, const char *file, yaml_node_t *n,
                           const char *what, uint64_t *out)
{
    const char *s = value_str(n);
    if (value_is_null(n) || (s && strcmp(s, "unlimited") == 0)) {
        *out = 0;
        return;
    }
    if (s == NULL || sbx_duration_parse(s, out) < 0)
        load_error(ld, file, &n->start_mark,
                   "%s: bad duration \"%s\" (a number with ms, s, m, h or d, e.g. 30m or 1h30m)",
                   what, s ? s : value_type_name(n));
}

static void count_value(struct loader *ld, const char *file, yaml_node_t *n, const char *what,
                        uint64_t *out)
{
    const char *s = value_str(n), *errstr = NULL;
    if (value_is_null(n) || (s && strcmp(s, "unlimited") == 0)) {
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
               what, s ? s : value_type_name(n));
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

void values_env_pass(struct loader *ld, const struct load_item *items, size_t n,
                     yaml_node_t *at, const char *at_file)
{
    struct policy *p = ld->p;
    const char **names = arena_alloc(&p->arena, (n + 1) * sizeof(char *));
    struct load_origin *from = arena_alloc(&p->arena, (n + 1) * sizeof(*from));
    if (names == NULL || from == NULL) {
        load_error(ld, at_file, at ? &at->start_mark : NULL, "out of memory");
        return;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *item = items[i].node;
        const char *s = value_str(item);
        if (s == NULL || !env_name_ok(s)) {
            load_error(ld, items[i].file, &item->start_mark,
                       "env.pass: \"%s\" is not a variable name", s ? s : value_type_name(item));
            continue;
        }
        from[k] = (struct load_origin){ items[i].file, (unsigned)item->start_mark.line + 1 };
        names[k++] = arena_strdup(&p->arena, s);
    }
    p->info.env_pass = names;
    p->info.n_env_pass = k;
    if (p->meta != NULL)
        p->meta->env_pass = from;
}

static void env_set(struct loader *ld, const char *file, yaml_document_t *doc, yaml_node_t *node)
{
    struct policy *p = ld->p;
    if (node->type != YAML_MAPPING_NODE) {
        if (value_is_null(node))
            return;
        load_error(ld, file, &node->start_mark,
                   "env.set: expected a mapping of NAME: value, found %s", value_type_name(node));
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
        const char *key = value_str(kn), *val = value_str(vn);
        if (key == NULL || !env_name_ok(key)) {
            load_error(ld, file, &kn->start_mark, "env.set: \"%s\" is not a variable name",
                       key ? key : value_type_name(kn));
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
                       key, value_type_name(vn));
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
    const char *s = value_str(n);
    if (value_is_null(n))
        return;
    if (s == NULL) {
        load_error(ld, file, &n->start_mark, "%s: expected text, found %s", what, value_type_name(n));
        return;
    }
    *out = s;
}

void values_apply(struct loader *ld, enum leaf_id id, const char *file,
                  yaml_document_t *doc, yaml_node_t *node)
{
    static const char *const modes[] = { "enforce", "audit" };
    static const char *const kills[] = { "terminate", "deny" };
    static const char *const isolations[] = { "optional", "required", "gvisor" };
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
                           s ? s : value_type_name(node));
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
        /* gvisor: that backend and no other (sbx-guard refuses to start
         * the agent without it). */
        if ((k = pick(ld, file, node, what, isolations, 3)) >= 0) {
            in->isolation_required = k >= 1;
            in->isolation_gvisor = k == 2;
        }
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
    case LF_MAX_WRITE: size_value(ld, file, node, what, &in->max_write_bytes); break;
    case LF_MEMORY: size_value(ld, file, node, what, &in->limits.memory_bytes); break;
    case LF_TIMEOUT: duration_value(ld, file, node, what, &in->limits.timeout_ms); break;
    case LF_CPU: duration_value(ld, file, node, what, &in->limits.cpu_ms); break;
    case LF_PROCESSES: count_value(ld, file, node, what, &in->limits.processes); break;
    case LF_OPEN_FILES: count_value(ld, file, node, what, &in->limits.open_files); break;
    case LF_ENV_SET: env_set(ld, file, doc, node); break;
    case LF_SERVE_STAGES: case LF_SERVE_RUNTIME_HOOKS: case LF_SERVE_TIMEOUT_MAX:
        serve_apply(ld, id, file, doc, node);
        break;
    default:
        break;
    }
}
