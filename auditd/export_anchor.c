/* export_anchor.c — `sbx-audit verify --against FILE`: the store checked
 * against the row hashes and chain heads a collector received (export.h).
 * The host can rewrite its store and its head file together so that the
 * chain verifies again; it cannot rewrite what already left the machine. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bsd/stdlib.h>
#include <bsd/string.h>
#include <jansson.h>

#include "export.h"
#include "export_int.h"

struct anchor {
    int64_t id;
    char hash[2 * (size_t)AUDIT_HASH_LEN + 1];
    bool head;
};

struct anchors {
    struct anchor *a;
    size_t n, max;
};

static int push(struct anchors *v, int64_t id, const char *hash, size_t hashlen, bool head)
{
    if (id <= 0 || hashlen != 2 * (size_t)AUDIT_HASH_LEN ||
        strspn(hash, "0123456789abcdef") < 2 * (size_t)AUDIT_HASH_LEN)
        return 0;       /* not ours, or mangled: nothing to compare */
    if (v->n == v->max) {
        size_t max = v->max ? v->max * 2 : 4096;
        struct anchor *a = reallocarray(v->a, max, sizeof *a);
        if (!a)
            return -1;
        v->a = a;
        v->max = max;
    }
    struct anchor *x = &v->a[v->n++];
    x->id = id;
    memcpy(x->hash, hash, 2 * (size_t)AUDIT_HASH_LEN);
    x->hash[2 * (size_t)AUDIT_HASH_LEN] = '\0';
    x->head = head;
    return 0;
}

/* The value of NAME="..." inside the SD element starting at SD (up to its
 * closing ']'); values here are digits and hex, never escaped. */
static const char *sd_param(const char *sd, const char *name, size_t *len)
{
    const char *end = strchr(sd, ']');
    size_t nl = strlen(name);
    for (const char *p = sd; (p = strstr(p, name)) != NULL && (!end || p < end); p++) {
        if (p[-1] == ' ' && p[nl] == '=' && p[nl + 1] == '"') {
            const char *v = p + nl + 2, *q = strchr(v, '"');
            if (!q)
                return NULL;
            *len = (size_t)(q - v);
            return v;
        }
    }
    return NULL;
}

static int parse_sd(struct anchors *v, const char *line, const char *tag, bool head)
{
    const char *sd = strstr(line, tag);
    if (!sd)
        return 0;
    size_t il, hl;
    const char *id = sd_param(sd, "id", &il), *hash = sd_param(sd, "hash", &hl);
    if (!id || !hash || il == 0 || il > 19)
        return 0;
    char num[24];
    memcpy(num, id, il);
    num[il] = '\0';
    const char *e;
    long long n = strtonum(num, 1, INT64_MAX, &e);
    return e ? 0 : push(v, n, hash, hl, head);
}

/* A JSON line of the file sink: an OCSF event (unmapped.sbx.id, .hash) or
 * a chain head (sbx_chain_head.id, .hash). */
static int parse_json(struct anchors *v, const char *line)
{
    json_t *j = json_loads(line, 0, NULL);
    if (!j)
        return 0;
    json_t *h = json_object_get(j, "sbx_chain_head");
    bool head = h != NULL;
    if (!h)
        h = json_object_get(json_object_get(j, "unmapped"), "sbx");
    int rc = 0;
    json_t *id = json_object_get(h, "id"), *hash = json_object_get(h, "hash");
    if (json_is_integer(id) && json_is_string(hash))
        rc = push(v, json_integer_value(id), json_string_value(hash),
                  json_string_length(hash), head);
    json_decref(j);
    return rc;
}

static int by_id(const void *x, const void *y)
{
    const struct anchor *a = x, *b = y;
    return a->id < b->id ? -1 : a->id > b->id;
}

struct walk {
    struct anchors *v;
    size_t i;                   /* next anchor to compare */
    struct audit_anchor_check *res;
    bool first;
};

static void bad(struct walk *w, int64_t id, const char *fmt, const char *got, const char *want)
{
    if (w->res->bad_id)
        return;
    w->res->bad_id = id;
    w->res->ok = false;
    snprintf(w->res->msg, sizeof w->res->msg, fmt, (long long)id, got, want);
}

static int walk_row(const struct audit_row *r, void *arg)
{
    struct walk *w = arg;
    char hh[2 * (size_t)AUDIT_HASH_LEN + 1], ph[2 * (size_t)AUDIT_HASH_LEN + 1];
    export_hex(r->hash, hh);
    if (w->first) {
        /* Anchors older than the oldest row: pruned (or removed: verify
         * tells).  The one just before it is this row's prev_hash. */
        w->first = false;
        export_hex(r->prev_hash, ph);
        while (w->i < w->v->n && w->v->a[w->i].id < r->id) {
            const struct anchor *a = &w->v->a[w->i];
            if (a->id == r->id - 1) {
                w->res->checked++;
                if (strcmp(a->hash, ph) != 0)
                    bad(w, a->id, "row %lld: the collector has hash %s, the store links to %s",
                        a->hash, ph);
            } else {
                w->res->pruned++;
            }
            w->i++;
        }
    }
    while (w->i < w->v->n && w->v->a[w->i].id < r->id) {
        bad(w, w->v->a[w->i].id, "row %lld was exported but is not in the store%s%s", "", "");
        w->i++;
    }
    while (w->i < w->v->n && w->v->a[w->i].id == r->id) {
        w->res->checked++;
        if (strcmp(w->v->a[w->i].hash, hh) != 0)
            bad(w, r->id, "row %lld: the collector has hash %s, the store %s (rewritten)",
                w->v->a[w->i].hash, hh);
        w->i++;
    }
    return w->i >= w->v->n;
}

int audit_anchor_check(struct audit_store *st, const char *file, struct audit_anchor_check *res,
                       char *err, size_t errsz)
{
    struct anchors v = { 0 };
    char *line = NULL;
    size_t cap = 0;
    int rc = -1;
    memset(res, 0, sizeof *res);
    res->ok = true;
    FILE *f = fopen(file, "re");
    if (!f) {
        snprintf(err, errsz, "%s: %s", file, strerror(errno));
        return -1;
    }
    while (getline(&line, &cap, f) > 0) {
        int r;
        if (line[0] == '{')
            r = parse_json(&v, line);
        else
            r = parse_sd(&v, line, "[sbx@32473 ", false) < 0 ? -1
              : parse_sd(&v, line, "[sbxhead@32473 ", true);
        if (r < 0) {
            snprintf(err, errsz, "out of memory");
            goto out;
        }
    }
    if (ferror(f)) {
        snprintf(err, errsz, "%s: %s", file, strerror(errno));
        goto out;
    }
    for (size_t i = 0; i < v.n; i++) {
        if (v.a[i].head)
            res->heads++;
        else
            res->anchors++;
    }
    if (v.n == 0) {
        res->ok = false;
        snprintf(res->msg, sizeof res->msg, "%s holds no sbx rows or chain heads", file);
        rc = 0;
        goto out;
    }
    qsort(v.a, v.n, sizeof v.a[0], by_id);
    /* One pass over the store from the oldest anchor on. */
    struct walk w = { .v = &v, .res = res, .first = true };
    struct audit_filter flt = { .after_id = 0 };
    if (audit_store_query(st, &flt, walk_row, &w, err, errsz) < 0)
        goto out;
    if (w.i < v.n)
        bad(&w, v.a[w.i].id, "row %lld was exported but the store ends before it "
            "(rows removed from its end)%s%s", "", "");
    if (res->ok)
        snprintf(res->msg, sizeof res->msg,
                 "ok: %lld exported rows and %lld chain heads in %s match the store "
                 "(%lld compared, %lld older than its oldest row)",
                 (long long)res->anchors, (long long)res->heads, file, (long long)res->checked,
                 (long long)res->pruned);
    rc = 0;
out:
    free(line);
    free(v.a);
    fclose(f);
    return rc;
}
