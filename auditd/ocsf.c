/* ocsf.c — audit rows as OCSF events (see ocsf.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ocsf.h"
#include "version.h"

/* ---- text ------------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at S (1-4), 0 if there is none:
 * overlong forms, surrogates and code points past U+10FFFF are invalid. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t n;
    unsigned min, cp;
    if ((c & 0xe0) == 0xc0) {
        n = 2, min = 0x80, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
        n = 3, min = 0x800, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
        n = 4, min = 0x10000, cp = c & 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)      /* also stops at the NUL */
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

char *audit_utf8_dup(const char *s, bool controls)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t len = strlen(s);
    /* At worst every byte becomes 4. */
    char *out = malloc(len * 4 + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t n = utf8_len(u + i);
        bool esc = n == 0 || (controls && n == 1 && (u[i] < 0x20 || u[i] == 0x7f));
        if (esc) {
            o += (size_t)snprintf(out + o, 5, "\\x%02x", u[i]);
            i++;
        } else {
            memcpy(out + o, u + i, n);
            o += n;
            i += n;
        }
    }
    out[o] = '\0';
    return out;
}

/* A JSON string of S (null for NULL); invalid UTF-8 escaped as text. */
static json_t *jstr(const char *s)
{
    if (!s)
        return json_null();
    json_t *j = json_string(s);
    if (j)
        return j;
    char *c = audit_utf8_dup(s, false);
    if (!c)
        return NULL;
    j = json_string(c);
    free(c);
    return j;
}

/* Sets KEY of O to V; a NULL V (out of memory) is remembered in *BAD. */
static void put(json_t *o, const char *key, json_t *v, bool *bad)
{
    if (!v || json_object_set_new(o, key, v) < 0)
        *bad = true;
}

static void put_str(json_t *o, const char *key, const char *s, bool *bad)
{
    if (s)
        put(o, key, jstr(s), bad);
}

/* ---- classes ----------------------------------------------------------------- */

enum { FILE_ACTIVITY = 1001, PROCESS_ACTIVITY = 1007, NETWORK_ACTIVITY = 4001 };

/* op -> class and activity.  The activity ids are the schema's: File
 * System Activity 1 Create, 2 Read, 3 Update, 4 Delete, 5 Rename, 6 Set
 * Attributes, 7 Set Security; Process Activity 1 Launch, 2 Terminate;
 * Network Activity 1 Open, 6 Traffic, 7 Listen; 99 Other everywhere. */
static const struct {
    const char *op;
    int class_uid, activity_id;
    const char *activity;
} map[] = {
    { "open-read", FILE_ACTIVITY, 2, "Read" },
    { "open-write", FILE_ACTIVITY, 3, "Update" },
    { "truncate", FILE_ACTIVITY, 3, "Update" },
    { "unlink", FILE_ACTIVITY, 4, "Delete" },
    { "rmdir", FILE_ACTIVITY, 4, "Delete" },
    { "rename", FILE_ACTIVITY, 5, "Rename" },
    { "mkdir", FILE_ACTIVITY, 1, "Create" },
    { "link", FILE_ACTIVITY, 1, "Create" },
    { "symlink", FILE_ACTIVITY, 1, "Create" },
    { "utimes", FILE_ACTIVITY, 6, "Set Attributes" },
    { "chmod", FILE_ACTIVITY, 7, "Set Security" },
    { "chown", FILE_ACTIVITY, 7, "Set Security" },
    { "exec", PROCESS_ACTIVITY, 1, "Launch" },
    { "start", PROCESS_ACTIVITY, 1, "Launch" },
    { "exit", PROCESS_ACTIVITY, 2, "Terminate" },
    { "kill", PROCESS_ACTIVITY, 2, "Terminate" },
    { "policy-error", PROCESS_ACTIVITY, 99, "Other" },
    { "connect", NETWORK_ACTIVITY, 1, "Open" },
    { "send", NETWORK_ACTIVITY, 6, "Traffic" },
    { "bind", NETWORK_ACTIVITY, 7, "Listen" },
};

static int find_op(const char *op)
{
    for (size_t i = 0; op && i < sizeof map / sizeof map[0]; i++)
        if (strcmp(op, map[i].op) == 0)
            return (int)i;
    return -1;
}

void audit_ocsf_class(const char *op, int *class_uid, int *activity_id)
{
    int i = find_op(op);
    *class_uid = i < 0 ? PROCESS_ACTIVITY : map[i].class_uid;
    *activity_id = i < 0 ? 99 : map[i].activity_id;
}

static const char *class_name(int class_uid)
{
    return class_uid == FILE_ACTIVITY ? "File System Activity"
         : class_uid == NETWORK_ACTIVITY ? "Network Activity" : "Process Activity";
}

/* ---- objects ----------------------------------------------------------------- */

/* A file object: path and its last segment. */
static json_t *file_obj(const char *path, bool *bad)
{
    json_t *f = json_object();
    if (!f) {
        *bad = true;
        return NULL;
    }
    const char *slash = strrchr(path, '/');
    put_str(f, "name", slash && slash[1] ? slash + 1 : path, bad);
    put_str(f, "path", path, bad);
    put(f, "type_id", json_integer(0), bad);     /* the row does not say */
    return f;
}

/* A network endpoint from "ip:port", "[v6]:port", "host:port" or
 * "unix:/path" (the targets the guard writes). */
static json_t *endpoint_obj(const char *t, const char *hostname, bool *bad)
{
    json_t *e = json_object();
    if (!e) {
        *bad = true;
        return NULL;
    }
    char host[512] = "";
    long port = -1;
    if (strncmp(t, "unix:", 5) == 0) {
        put_str(e, "name", t, bad);
    } else {
        const char *colon = strrchr(t, ':');
        const char *h = t, *hend = colon ? colon : t + strlen(t);
        if (*t == '[') {
            const char *rb = strchr(t, ']');
            if (rb) {
                h = t + 1;
                hend = rb;
                colon = rb[1] == ':' ? rb + 1 : NULL;
            }
        }
        if (colon) {
            char *end;
            errno = 0;
            long p = strtol(colon + 1, &end, 10);
            if (errno == 0 && *end == '\0' && end != colon + 1 && p >= 0 && p <= 65535)
                port = p;
        }
        size_t hl = (size_t)(hend - h);
        if (hl < sizeof host) {
            memcpy(host, h, hl);
            host[hl] = '\0';
        }
        /* An address has only digits, dots, colons and hex letters; a name
         * has some other letter. */
        bool ip = host[0] && strspn(host, "0123456789.:abcdefABCDEF") == strlen(host) &&
                  (strchr(host, '.') || strchr(host, ':'));
        if (host[0])
            put_str(e, ip ? "ip" : "hostname", host, bad);
        if (port >= 0)
            put(e, "port", json_integer(port), bad);
    }
    if (hostname && *hostname)
        put_str(e, "hostname", hostname, bad);
    return e;
}

/* Splits "A -> B" (exec and start targets) at the last " -> ". */
static void split_arrow(const char *t, char **a, const char **b)
{
    const char *arrow = NULL;
    for (const char *p = t; (p = strstr(p, " -> ")) != NULL; p++)
        arrow = p;
    *a = NULL;
    *b = NULL;
    if (arrow) {
        *a = strndup(t, (size_t)(arrow - t));
        *b = arrow + 4;
    }
}

/* The policy file and line at the end of a rule text ("... FILE:LINE"):
 * *LINE 0 and FILE "" when it has none. */
static void rule_location(const char *rule, char *file, size_t filesz, long *line)
{
    *line = 0;
    file[0] = '\0';
    if (!rule)
        return;
    const char *sp = strrchr(rule, ' ');
    const char *tok = sp ? sp + 1 : rule;
    const char *colon = strrchr(tok, ':');
    if (!colon || colon == tok || !colon[1])
        return;
    char *end;
    errno = 0;
    long l = strtol(colon + 1, &end, 10);
    if (errno || *end || l <= 0)
        return;
    size_t n = (size_t)(colon - tok);
    if (n >= filesz)
        return;
    memcpy(file, tok, n);
    file[n] = '\0';
    *line = l;
}

static void hex(const unsigned char h[AUDIT_HASH_LEN], char out[2 * (size_t)AUDIT_HASH_LEN + 1])
{
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < AUDIT_HASH_LEN; i++) {
        out[2 * i] = d[h[i] >> 4];
        out[2 * i + 1] = d[h[i] & 15];
    }
    out[2 * (size_t)AUDIT_HASH_LEN] = '\0';
}

/* The class-specific objects of R. */
static void class_objects(json_t *ev, int class_uid, const struct audit_row *r,
                          const char *hostname, bool *bad)
{
    const char *t = r->target ? r->target : "";
    const char *op = r->op ? r->op : "";
    if (class_uid == FILE_ACTIVITY) {
        put(ev, "file", file_obj(t, bad), bad);
        if (r->target2 && (strcmp(op, "rename") == 0 || strcmp(op, "link") == 0 ||
                           strcmp(op, "symlink") == 0))
            put(ev, "file_result", file_obj(r->target2, bad), bad);
        return;
    }
    if (class_uid == NETWORK_ACTIVITY) {
        json_t *ep = endpoint_obj(t, NULL, bad);
        if (ep && r->target2 && !json_object_get(ep, "hostname"))
            put_str(ep, "hostname", r->target2, bad);
        /* bind names the local end; connect and send the remote one */
        bool local = strcmp(op, "bind") == 0;
        put(ev, local ? "src_endpoint" : "dst_endpoint", ep, bad);
        json_t *me = json_object();
        if (me && hostname)
            put_str(me, "hostname", hostname, bad);
        put(ev, local ? "dst_endpoint" : "src_endpoint", me, bad);
        return;
    }
    /* Process Activity: the process launched or ended. */
    json_t *p = json_object();
    if (!p) {
        *bad = true;
        return;
    }
    put(p, "pid", json_integer(r->pid), bad);
    char *a;
    const char *b;
    split_arrow(t, &a, &b);
    /* Rows keep the program (or command) in target and the command line
     * (or workspace) in target2; older rows joined them with " -> ". */
    if (!b)
        b = r->target2;
    if (strcmp(op, "exec") == 0) {
        put(p, "file", file_obj(a ? a : t, bad), bad);
        if (b)
            put_str(p, "cmd_line", b, bad);
    } else if (strcmp(op, "start") == 0) {
        put_str(p, "cmd_line", a ? a : t, bad);
        if (b && strcmp(b, "-") != 0)
            put_str(p, "working_directory", b, bad);
    } else if (strcmp(op, "kill") == 0 && r->agent) {
        put_str(p, "name", r->agent, bad);
    }
    free(a);
    put(ev, "process", p, bad);
}

char *audit_ocsf_json(const struct audit_row *r, const char *hostname)
{
    bool bad = false;
    json_t *ev = json_object();
    json_t *meta = json_object(), *product = json_object(), *actor = json_object();
    json_t *sbx = json_object(), *unmapped = json_object();
    char *out = NULL;
    if (!ev || !meta || !product || !actor || !sbx || !unmapped) {
        bad = true;
        goto out;
    }
    int cls, act;
    audit_ocsf_class(r->op, &cls, &act);
    int i = find_op(r->op);
    const char *act_name = i < 0 ? "Other" : map[i].activity;
    bool deny = r->decision && strcmp(r->decision, "deny") == 0;
    /* audit mode: allowed, but the policy would have denied it */
    bool would = !deny && r->reason && strncmp(r->reason, "audit:", 6) == 0;
    char type_name[96];
    snprintf(type_name, sizeof type_name, "%s: %s", class_name(cls), act_name);

    put(ev, "class_uid", json_integer(cls), &bad);
    put_str(ev, "class_name", class_name(cls), &bad);
    put(ev, "category_uid", json_integer(cls / 1000), &bad);
    put_str(ev, "category_name", cls / 1000 == 4 ? "Network Activity" : "System Activity", &bad);
    put(ev, "activity_id", json_integer(act), &bad);
    put_str(ev, "activity_name", act_name, &bad);
    put(ev, "type_uid", json_integer((json_int_t)cls * 100 + act), &bad);
    put_str(ev, "type_name", type_name, &bad);
    put(ev, "time", json_integer(r->ts_ns / 1000000), &bad);
    /* Informational for what was allowed, Low for what audit mode would
     * have denied, Medium for a denial: a refused call is what a reader
     * of a fleet's trail looks for first. */
    put(ev, "severity_id", json_integer(deny ? 3 : would ? 2 : 1), &bad);
    put_str(ev, "severity", deny ? "Medium" : would ? "Low" : "Informational", &bad);
    put(ev, "status_id", json_integer(deny ? 2 : 1), &bad);
    put_str(ev, "status", deny ? "Failure" : "Success", &bad);
    if (r->err) {
        const char *en = strerrorname_np((int)r->err);
        put_str(ev, "status_code", en ? en : "errno", &bad);
    }
    put_str(ev, "status_detail", r->reason, &bad);
    /* security_control profile: the decision itself */
    put(ev, "action_id", json_integer(deny ? 2 : 1), &bad);
    put_str(ev, "action", deny ? "Denied" : "Allowed", &bad);
    put(ev, "disposition_id", json_integer(deny ? 2 : 1), &bad);
    put_str(ev, "disposition", deny ? "Blocked" : "Allowed", &bad);

    char idtxt[24];
    snprintf(idtxt, sizeof idtxt, "%lld", (long long)r->id);
    put_str(product, "name", "sbx", &bad);
    put_str(product, "vendor_name", "sbx", &bad);
    put_str(product, "version", SBX_VERSION, &bad);
    put_str(meta, "version", AUDIT_OCSF_VERSION, &bad);
    put(meta, "product", json_incref(product), &bad);
    put_str(meta, "uid", idtxt, &bad);
    put(meta, "sequence", json_integer(r->id), &bad);
    put_str(meta, "log_name", "sbx-audit", &bad);
    put_str(meta, "correlation_uid", r->run_id, &bad);
    put(meta, "profiles", json_pack("[ss]", "host", "security_control"), &bad);
    put(ev, "metadata", json_incref(meta), &bad);

    json_t *dev = json_object();
    if (dev) {
        put_str(dev, "hostname", hostname, &bad);
        put(dev, "type_id", json_integer(0), &bad);
    }
    put(ev, "device", dev, &bad);

    /* actor: the agent's process, the agent (app) and its run (session),
     * and the policy's verdict with the rule that made it */
    json_t *proc = json_object(), *user = json_object();
    char uidtxt[24];
    snprintf(uidtxt, sizeof uidtxt, "%lld", (long long)r->uid);
    if (user)
        put_str(user, "uid", uidtxt, &bad);
    if (proc) {
        put(proc, "pid", json_integer(r->pid), &bad);
        put(proc, "user", json_incref(user), &bad);
    }
    put(actor, "process", proc, &bad);
    put(actor, "user", user, &bad);
    put_str(actor, "app_name", r->agent, &bad);
    if (r->run_id) {
        json_t *sess = json_object();
        if (sess)
            put_str(sess, "uid", r->run_id, &bad);
        put(actor, "session", sess, &bad);
    }
    char rfile[4096];
    long rline;
    rule_location(r->rule, rfile, sizeof rfile, &rline);
    json_t *authz = json_object(), *pol = json_object();
    if (authz && pol) {
        put_str(authz, "decision", r->decision, &bad);
        put_str(pol, "name", r->rule, &bad);
        if (rline) {
            char loc[4200];
            snprintf(loc, sizeof loc, "%s:%ld", rfile, rline);
            put_str(pol, "uid", loc, &bad);
        }
        put_str(pol, "desc", r->reason, &bad);
        put(authz, "policy", json_incref(pol), &bad);
    }
    json_decref(pol);
    put(actor, "authorizations", authz ? json_pack("[o]", authz) : NULL, &bad);
    put(ev, "actor", json_incref(actor), &bad);

    class_objects(ev, cls, r, hostname, &bad);

    char hh[2 * (size_t)AUDIT_HASH_LEN + 1], ph[2 * (size_t)AUDIT_HASH_LEN + 1];
    hex(r->hash, hh);
    hex(r->prev_hash, ph);
    put(sbx, "id", json_integer(r->id), &bad);
    put_str(sbx, "agent", r->agent, &bad);
    put_str(sbx, "run_id", r->run_id, &bad);
    put_str(sbx, "op", r->op, &bad);
    put_str(sbx, "target", r->target, &bad);
    put_str(sbx, "target2", r->target2, &bad);
    put_str(sbx, "decision", r->decision, &bad);
    put_str(sbx, "layer", r->layer, &bad);
    put_str(sbx, "rule", r->rule, &bad);
    if (rline) {
        put_str(sbx, "rule_file", rfile, &bad);
        put(sbx, "rule_line", json_integer(rline), &bad);
    }
    put_str(sbx, "reason", r->reason, &bad);
    put(sbx, "errno", json_integer(r->err), &bad);
    put(sbx, "flags", json_integer(r->flags), &bad);
    put_str(sbx, "hash", hh, &bad);
    put_str(sbx, "prev_hash", ph, &bad);
    put(unmapped, "sbx", json_incref(sbx), &bad);
    put(ev, "unmapped", json_incref(unmapped), &bad);
    if (!bad)
        out = json_dumps(ev, JSON_COMPACT);
out:
    json_decref(ev);
    json_decref(meta);
    json_decref(product);
    json_decref(actor);
    json_decref(sbx);
    json_decref(unmapped);
    return bad ? NULL : out;
}
