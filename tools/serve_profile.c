/*
 * serve_profile.c — the serve: section of the loaded policy, as sbx-serve
 * uses it (serve_profile.h).
 */
#include "serve_profile.h"
#include "serve_text.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bsd/string.h>
#include <jansson.h>

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_list(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

static char **copy_list(const char *const *v, size_t n)
{
    char **out = calloc(n + 1, sizeof *out);

    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++)
        if ((out[i] = strdup(v[i])) == NULL) {
            free_list(out, i);
            return NULL;
        }
    return out;
}


/* The runner's configuration line (docs/serve-protocol.md, 1.). */
static char *runner_config(const struct serve_profile *pr)
{
    json_t *o = json_object(), *a = json_array(), *pre = json_array(),
           *bl = json_array(), *st = json_array();
    char *text = NULL, *line = NULL;

    if (!o || !a || !pre || !bl || !st)
        goto out;
    for (size_t i = 0; i < pr->n_allowed; i++)
        json_array_append_new(a, json_string(pr->allowed[i]));
    for (size_t i = 0; i < pr->n_pre_imports; i++)
        json_array_append_new(pre, json_string(pr->pre_imports[i]));
    for (size_t i = 0; i < pr->n_block; i++)
        json_array_append_new(bl, json_pack("[ss]", pr->block_module[i], pr->block_attr[i]));
    for (size_t i = 0; i < pr->n_stages; i++)
        json_array_append_new(st, json_pack("{s:s, s:s}", "name", pr->stages[i].name,
                                            "mode", pr->stages[i].observe ? "observe" : "enforce"));
    json_object_set(o, "allowed_imports", a);
    json_object_set(o, "pre_imports", pre);
    json_object_set(o, "blocklist", bl);
    json_object_set(o, "stages", st);
    json_object_set_new(o, "runtime_hooks", json_string(pr->hooks_observe ? "observe" : "enforce"));
    text = json_dumps(o, JSON_COMPACT);
    if (text && asprintf(&line, "%s\n", text) < 0)
        line = NULL;
out:
    free(text);
    json_decref(a);
    json_decref(pre);
    json_decref(bl);
    json_decref(st);
    json_decref(o);
    return line;
}

int serve_profile_load(const struct policy *p, struct serve_profile *pr,
                       char *err, size_t errsz)
{
    const struct policy_info *pi = policy_info(p);
    const struct policy_serve *ps = policy_serve(p);

    memset(pr, 0, sizeof *pr);
    if (ps == NULL) {
        serve_errf(err, errsz, "%s: not a serve profile (it has no serve: section)", pi->file);
        return -1;
    }
    pr->name = strdup(pi->name ? pi->name : "");
    pr->description = strdup(pi->description ? pi->description : "");
    pr->allowed = copy_list(ps->allowed_imports, ps->n_allowed_imports);
    pr->n_allowed = ps->n_allowed_imports;
    pr->pre_imports = copy_list(ps->pre_imports, ps->n_pre_imports);
    pr->n_pre_imports = ps->n_pre_imports;
    pr->block_module = calloc(ps->n_blocklist + 1, sizeof *pr->block_module);
    pr->block_attr = calloc(ps->n_blocklist + 1, sizeof *pr->block_attr);
    if (!pr->name || !pr->description || !pr->allowed || !pr->pre_imports
        || !pr->block_module || !pr->block_attr)
        goto nomem;
    pr->n_block = ps->n_blocklist;
    for (size_t i = 0; i < ps->n_blocklist; i++)
        if (!(pr->block_module[i] = strdup(ps->blocklist[i].module))
            || !(pr->block_attr[i] = strdup(ps->blocklist[i].attr)))
            goto nomem;
    qsort(pr->allowed, pr->n_allowed, sizeof *pr->allowed, cmp_str);
    if (ps->n_stages > sizeof pr->stages / sizeof pr->stages[0]) {
        serve_errf(err, errsz, "%s: more than %zu stages", pi->file,
             sizeof pr->stages / sizeof pr->stages[0]);
        goto fail;
    }
    for (size_t i = 0; i < ps->n_stages; i++) {
        strlcpy(pr->stages[i].name, ps->stages[i].name, sizeof pr->stages[i].name);
        pr->stages[i].observe = ps->stages[i].mode == POLICY_STAGE_OBSERVE;
    }
    pr->n_stages = ps->n_stages;
    pr->hooks_observe = ps->runtime_hooks == POLICY_STAGE_OBSERVE;
    pr->memory_bytes = pi->limits.memory_bytes;
    pr->timeout_max_s = SERVE_TIMEOUT_MAX_S;
    if (ps->timeout_max_ms && ps->timeout_max_ms < (uint64_t)(SERVE_TIMEOUT_MAX_S * 1000))
        pr->timeout_max_s = (double)ps->timeout_max_ms / 1000.0;
    if ((pr->runner_config = runner_config(pr)) == NULL)
        goto nomem;
    return 0;
nomem:
    serve_errf(err, errsz, "out of memory");
fail:
    serve_profile_free(pr);
    return -1;
}

void serve_profile_free(struct serve_profile *pr)
{
    free(pr->name);
    free(pr->description);
    free_list(pr->allowed, pr->n_allowed);
    free_list(pr->pre_imports, pr->n_pre_imports);
    free_list(pr->block_module, pr->n_block);
    free_list(pr->block_attr, pr->n_block);
    free(pr->runner_config);
    memset(pr, 0, sizeof *pr);
}

const struct serve_stage *serve_profile_stage(const struct serve_profile *pr,
                                              const char *name)
{
    for (size_t i = 0; i < pr->n_stages; i++)
        if (strcmp(pr->stages[i].name, name) == 0)
            return &pr->stages[i];
    return NULL;
}

/* SERVE.md: {"name", "description", "allowed_imports": [sorted],
 * "blocklist_entries": N, "scan_stages": {"pre": [...], "post": [...]}}.
 * Every stage of sbx-serve runs before the code ("pre"); the reference's
 * "post" stages (a scan of the output) have no counterpart here. */
char *serve_profile_json(const struct serve_profile *pr)
{
    json_t *o, *a = json_array(), *pre = json_array();
    char *text;

    for (size_t i = 0; a && i < pr->n_allowed; i++)
        json_array_append_new(a, json_string(pr->allowed[i]));
    for (size_t i = 0; pre && i < pr->n_stages; i++)
        json_array_append_new(pre, json_string(pr->stages[i].name));
    o = json_pack("{s:s, s:s, s:o, s:I, s:{s:o, s:[]}}", "name", pr->name,
                  "description", pr->description, "allowed_imports", a,
                  "blocklist_entries", (json_int_t)pr->n_block,
                  "scan_stages", "pre", pre, "post");
    if (o == NULL)
        return NULL;
    text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return text;
}
