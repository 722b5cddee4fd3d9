/* ocsf.c — audit rows as OCSF events (see ocsf.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- a JSON writer ------------------------------------------------------------ */

/* The event is written straight into a growing buffer (no tree of
 * objects: building one with jansson per row was most of an export's
 * time).  Members are written in a fixed order; a comma goes before a
 * member unless it is the first of its object or array. */
struct jw {
    char **p;
    size_t *len, *cap;
    bool bad;
};

static void jw_raw(struct jw *w, const char *s, size_t n)
{
    if (w->bad)
        return;
    if (*w->len + n + 1 > *w->cap) {
        size_t cap = *w->cap ? *w->cap : 1024;
        while (cap < *w->len + n + 1)
            cap *= 2;
        char *t = realloc(*w->p, cap);
        if (!t) {
            w->bad = true;
            return;
        }
        *w->p = t;
        *w->cap = cap;
    }
    memcpy(*w->p + *w->len, s, n);
    *w->len += n;
    (*w->p)[*w->len] = '\0';
}

static void jw_lit(struct jw *w, const char *s)
{
    jw_raw(w, s, strlen(s));
}

/* S as a JSON string: '"', '\\' and controls escaped as JSON does; a byte
 * that is not part of valid UTF-8 becomes the text \xNN (so "\\xNN"). */
static void jw_str(struct jw *w, const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    jw_raw(w, "\"", 1);
    size_t run = 0;             /* bytes copied as they are, pending */
    size_t i = 0;
    while (u[i]) {
        size_t n = utf8_len(u + i);
        unsigned c = u[i];
        if (n > 0 && c != '"' && c != '\\' && c >= 0x20) {
            run += n;
            i += n;
            continue;
        }
        jw_raw(w, (const char *)u + i - run, run);
        run = 0;
        char esc[12];
        if (n == 0)
            snprintf(esc, sizeof esc, "\\\\x%02x", c);
        else if (c == '"' || c == '\\')
            snprintf(esc, sizeof esc, "\\%c", c);
        else if (c == '\n' || c == '\t' || c == '\r' || c == '\b' || c == '\f')
            snprintf(esc, sizeof esc, "\\%c", c == '\n' ? 'n' : c == '\t' ? 't' : c == '\r' ? 'r'
                     : c == '\b' ? 'b' : 'f');
        else
            snprintf(esc, sizeof esc, "\\u%04X", c);
        jw_lit(w, esc);
        i++;
    }
    jw_raw(w, s + i - run, run);
    jw_raw(w, "\"", 1);
}

/* ,"KEY": (the comma unless the object was just opened) */
static void jw_key(struct jw *w, const char *key)
{
    if (!w->bad && *w->len > 0) {
        char last = (*w->p)[*w->len - 1];
        if (last != '{' && last != '[')
            jw_raw(w, ",", 1);
    }
    jw_raw(w, "\"", 1);
    jw_lit(w, key);
    jw_raw(w, "\":", 2);
}

/* KEY: S, left out when S is NULL. */
static void put_str(struct jw *w, const char *key, const char *s)
{
    if (!s)
        return;
    jw_key(w, key);
    jw_str(w, s);
}

static void put_int(struct jw *w, const char *key, long long v)
{
    char t[24];
    int n = snprintf(t, sizeof t, "%lld", v);
    jw_key(w, key);
    jw_raw(w, t, (size_t)n);
}

/* KEY:{ ... close with jw_lit(w, "}") */
static void put_obj(struct jw *w, const char *key)
{
    jw_key(w, key);
    jw_raw(w, "{", 1);
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

/* KEY: a file object, its path and last segment. */
static void file_obj(struct jw *w, const char *key, const char *path)
{
    put_obj(w, key);
    const char *slash = strrchr(path, '/');
    put_str(w, "name", slash && slash[1] ? slash + 1 : path);
    put_str(w, "path", path);
    put_int(w, "type_id", 0);   /* the row does not say */
    jw_lit(w, "}");
}

/* KEY: a network endpoint from "ip:port", "[v6]:port", "host:port" or
 * "unix:/path" (the targets the guard writes); OTHER_HOST names it when
 * the target has no host name of its own. */
static void endpoint_obj(struct jw *w, const char *key, const char *t, const char *other_host)
{
    put_obj(w, key);
    char host[512] = "";
    long port = -1;
    bool named = false;
    if (strncmp(t, "unix:", 5) == 0) {
        put_str(w, "name", t);
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
        if (host[0]) {
            put_str(w, ip ? "ip" : "hostname", host);
            named = !ip;
        }
        if (port >= 0)
            put_int(w, "port", port);
    }
    if (!named)
        put_str(w, "hostname", other_host);
    jw_lit(w, "}");
}

/* Splits "A -> B" (exec and start targets) at the last " -> ": A's
 * length in *ALEN, B in *B; *B NULL when there is no arrow. */
static void split_arrow(const char *t, size_t *alen, const char **b)
{
    const char *arrow = NULL;
    for (const char *p = t; (p = strstr(p, " -> ")) != NULL; p++)
        arrow = p;
    *alen = 0;
    *b = NULL;
    if (arrow) {
        *alen = (size_t)(arrow - t);
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
static void class_objects(struct jw *w, int class_uid, const struct audit_row *r,
                          const char *hostname)
{
    const char *t = r->target ? r->target : "";
    const char *op = r->op ? r->op : "";
    if (class_uid == FILE_ACTIVITY) {
        file_obj(w, "file", t);
        if (r->target2 && (strcmp(op, "rename") == 0 || strcmp(op, "link") == 0 ||
                           strcmp(op, "symlink") == 0))
            file_obj(w, "file_result", r->target2);
        return;
    }
    if (class_uid == NETWORK_ACTIVITY) {
        /* bind names the local end; connect and send the remote one */
        bool local = strcmp(op, "bind") == 0;
        endpoint_obj(w, local ? "src_endpoint" : "dst_endpoint", t, r->target2);
        put_obj(w, local ? "dst_endpoint" : "src_endpoint");
        put_str(w, "hostname", hostname);
        jw_lit(w, "}");
        return;
    }
    /* Process Activity: the process launched or ended. */
    put_obj(w, "process");
    put_int(w, "pid", r->pid);
    size_t alen;
    const char *b;
    split_arrow(t, &alen, &b);
    char *a = b ? strndup(t, alen) : NULL;
    if (b && !a)
        w->bad = true;
    /* Rows keep the program (or command) in target and the command line
     * (or workspace) in target2; older rows joined them with " -> ". */
    if (!b)
        b = r->target2;
    if (strcmp(op, "exec") == 0) {
        file_obj(w, "file", a ? a : t);
        put_str(w, "cmd_line", b);
    } else if (strcmp(op, "start") == 0) {
        put_str(w, "cmd_line", a ? a : t);
        if (b && strcmp(b, "-") != 0)
            put_str(w, "working_directory", b);
    } else if (strcmp(op, "kill") == 0) {
        put_str(w, "name", r->agent);
    }
    free(a);
    jw_lit(w, "}");
}

int audit_ocsf_append(const struct audit_row *r, const char *hostname, char **buf, size_t *len,
                      size_t *cap)
{
    struct jw w0 = { .p = buf, .len = len, .cap = cap }, *w = &w0;
    size_t start = *len;
    int cls, act;
    audit_ocsf_class(r->op, &cls, &act);
    int i = find_op(r->op);
    const char *act_name = i < 0 ? "Other" : map[i].activity;
    bool deny = r->decision && strcmp(r->decision, "deny") == 0;
    /* audit mode: allowed, but the policy would have denied it */
    bool would = !deny && r->reason && strncmp(r->reason, "audit:", 6) == 0;
    char type_name[96];
    snprintf(type_name, sizeof type_name, "%s: %s", class_name(cls), act_name);

    jw_raw(w, "{", 1);
    put_int(w, "class_uid", cls);
    put_str(w, "class_name", class_name(cls));
    put_int(w, "category_uid", cls / 1000);
    put_str(w, "category_name", cls / 1000 == 4 ? "Network Activity" : "System Activity");
    put_int(w, "activity_id", act);
    put_str(w, "activity_name", act_name);
    put_int(w, "type_uid", (long long)cls * 100 + act);
    put_str(w, "type_name", type_name);
    put_int(w, "time", r->ts_ns / 1000000);
    /* Informational for what was allowed, Low for what audit mode would
     * have denied, Medium for a denial: a refused call is what a reader
     * of a fleet's trail looks for first. */
    put_int(w, "severity_id", deny ? 3 : would ? 2 : 1);
    put_str(w, "severity", deny ? "Medium" : would ? "Low" : "Informational");
    put_int(w, "status_id", deny ? 2 : 1);
    put_str(w, "status", deny ? "Failure" : "Success");
    if (r->err) {
        const char *en = strerrorname_np((int)r->err);
        put_str(w, "status_code", en ? en : "errno");
    }
    put_str(w, "status_detail", r->reason);
    /* security_control profile: the decision itself */
    put_int(w, "action_id", deny ? 2 : 1);
    put_str(w, "action", deny ? "Denied" : "Allowed");
    put_int(w, "disposition_id", deny ? 2 : 1);
    put_str(w, "disposition", deny ? "Blocked" : "Allowed");

    char idtxt[24];
    snprintf(idtxt, sizeof idtxt, "%lld", (long long)r->id);
    put_obj(w, "metadata");
    put_str(w, "version", AUDIT_OCSF_VERSION);
    put_obj(w, "product");
    put_str(w, "name", "sbx");
    put_str(w, "vendor_name", "sbx");
    put_str(w, "version", SBX_VERSION);
    jw_lit(w, "}");
    put_str(w, "uid", idtxt);
    put_int(w, "sequence", r->id);
    put_str(w, "log_name", "sbx-audit");
    put_str(w, "correlation_uid", r->run_id);
    jw_key(w, "profiles");
    jw_lit(w, "[\"host\",\"security_control\"]}");

    put_obj(w, "device");
    put_str(w, "hostname", hostname);
    put_int(w, "type_id", 0);
    jw_lit(w, "}");

    /* actor: the agent's process, the agent (app) and its run (session),
     * and the policy's verdict with the rule that made it */
    char uidtxt[24];
    snprintf(uidtxt, sizeof uidtxt, "%lld", (long long)r->uid);
    put_obj(w, "actor");
    put_obj(w, "process");
    put_int(w, "pid", r->pid);
    put_obj(w, "user");
    put_str(w, "uid", uidtxt);
    jw_lit(w, "}}");
    put_obj(w, "user");
    put_str(w, "uid", uidtxt);
    jw_lit(w, "}");
    put_str(w, "app_name", r->agent);
    if (r->run_id) {
        put_obj(w, "session");
        put_str(w, "uid", r->run_id);
        jw_lit(w, "}");
    }
    char rfile[4096];
    long rline;
    rule_location(r->rule, rfile, sizeof rfile, &rline);
    jw_key(w, "authorizations");
    jw_lit(w, "[{");
    put_str(w, "decision", r->decision);
    put_obj(w, "policy");
    put_str(w, "name", r->rule);
    if (rline) {
        char loc[4200];
        snprintf(loc, sizeof loc, "%s:%ld", rfile, rline);
        put_str(w, "uid", loc);
    }
    put_str(w, "desc", r->reason);
    jw_lit(w, "}}]}");

    class_objects(w, cls, r, hostname);

    char hh[2 * (size_t)AUDIT_HASH_LEN + 1], ph[2 * (size_t)AUDIT_HASH_LEN + 1];
    hex(r->hash, hh);
    hex(r->prev_hash, ph);
    put_obj(w, "unmapped");
    put_obj(w, "sbx");
    put_int(w, "id", r->id);
    put_str(w, "agent", r->agent);
    put_str(w, "run_id", r->run_id);
    put_str(w, "op", r->op);
    put_str(w, "target", r->target);
    put_str(w, "target2", r->target2);
    put_str(w, "decision", r->decision);
    put_str(w, "layer", r->layer);
    put_str(w, "rule", r->rule);
    if (rline) {
        put_str(w, "rule_file", rfile);
        put_int(w, "rule_line", rline);
    }
    put_str(w, "reason", r->reason);
    put_int(w, "errno", r->err);
    put_int(w, "flags", r->flags);
    put_str(w, "hash", hh);
    put_str(w, "prev_hash", ph);
    jw_lit(w, "}}}");
    if (w->bad) {
        *len = start;
        return -1;
    }
    return 0;
}

char *audit_ocsf_json(const struct audit_row *r, const char *hostname)
{
    char *buf = NULL;
    size_t len = 0, cap = 0;
    if (audit_ocsf_append(r, hostname, &buf, &len, &cap) < 0) {
        free(buf);
        return NULL;
    }
    return buf;
}
