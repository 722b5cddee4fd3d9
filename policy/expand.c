/* expand.c — a loaded policy written back as one YAML file with every key
 * (policy.h: policy_expand; `sbx-policy check --expanded`).
 *
 * What it is for: a policy built with extends: and list edits is read in
 * pieces; the expansion shows the whole of it, each value with a comment
 * naming the file (and line) it came from, and it is itself a policy that
 * loads to the same rules: every key is written, so nothing is taken from
 * the default, and each rule is written as it was in its own file (globs
 * are expanded against the workspace again when the expansion is loaded,
 * so the same workspace and home give the same patterns).  sbx-guard hands
 * the preload this text as its copy of a policy that extends another: the
 * copy must stand alone.
 *
 * Strings are written single-quoted when they are printable (a PCRE2
 * pattern's backslashes stay as they are), else double-quoted with escapes.
 */
#include "internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* S as a YAML scalar. */
static void put_str(FILE *f, const char *s)
{
    bool plain_ok = true;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        if (*c < 0x20 || *c == 0x7f)
            plain_ok = false;
    if (plain_ok) {
        fputc('\'', f);
        for (const char *c = s; *c; c++) {
            if (*c == '\'')
                fputc('\'', f);
            fputc(*c, f);
        }
        fputc('\'', f);
        return;
    }
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(f, "\\%c", *c);
        else if (*c == '\n')
            fputs("\\n", f);
        else if (*c == '\t')
            fputs("\\t", f);
        else if (*c < 0x20 || *c == 0x7f)
            fprintf(f, "\\x%02x", *c);
        else
            fputc(*c, f);
    }
    fputc('"', f);
}

static void put_from(FILE *f, const char *file, unsigned line)
{
    if (file == NULL)
        fputs("  # (not set: built in)\n", f);
    else if (line > 0)
        fprintf(f, "  # %s:%u\n", file, line);
    else
        fprintf(f, "  # %s\n", file);
}

static void put_leaf_from(FILE *f, const struct policy *p, enum leaf_id id)
{
    put_from(f, p->meta->leaf[id].file, p->meta->leaf[id].line);
}

static void put_size(FILE *f, uint64_t b)
{
    static const struct { const char *u; uint64_t m; } units[] = {
        { "GiB", 1ull << 30 }, { "MiB", 1ull << 20 }, { "KiB", 1ull << 10 },
    };
    if (b == 0) {
        fputs("unlimited", f);
        return;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (b % units[i].m == 0) {
            fprintf(f, "%" PRIu64 "%s", b / units[i].m, units[i].u);
            return;
        }
    fprintf(f, "%" PRIu64, b);
}

static void put_duration(FILE *f, uint64_t ms)
{
    static const struct { const char *u; uint64_t m; } units[] = {
        { "d", 86400000 }, { "h", 3600000 }, { "m", 60000 }, { "s", 1000 }, { "ms", 1 },
    };
    if (ms == 0) {
        fputs("unlimited", f);
        return;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (ms >= units[i].m) {
            fprintf(f, "%" PRIu64 "%s", ms / units[i].m, units[i].u);
            ms %= units[i].m;
        }
}

static void put_count(FILE *f, uint64_t c)
{
    if (c == 0)
        fputs("unlimited", f);
    else
        fprintf(f, "%" PRIu64, c);
}

/* A list key of rules: INDENT spaces, KEY, then each rule. */
static void put_rules(FILE *f, const struct policy *p, enum policy_list l, const char *key,
                      int indent)
{
    size_t n = p->n_rules[l];
    if (n == 0) {
        fprintf(f, "%*s%s: []\n", indent, "", key);
        return;
    }
    fprintf(f, "%*s%s:\n", indent, "", key);
    for (size_t i = 0; i < n; i++) {
        const struct policy_rule *r = &p->rules[l][i];
        fprintf(f, "%*s- ", indent + 2, "");
        if (l == POLICY_CMD_DENY || l == POLICY_CMD_ALLOW) {
            fputs("match: ", f);
            put_str(f, r->text);
            put_from(f, r->file, r->line);
            if (r->reason != NULL) {
                fprintf(f, "%*sreason: ", indent + 4, "");
                put_str(f, r->reason);
                fputc('\n', f);
            }
        } else {
            put_str(f, r->text);
            put_from(f, r->file, r->line);
        }
    }
}

static void put_names(FILE *f, const char *key, const char *const *v, size_t n,
                      const struct load_origin *from, int indent)
{
    if (n == 0) {
        fprintf(f, "%*s%s: []\n", indent, "", key);
        return;
    }
    fprintf(f, "%*s%s:\n", indent, "", key);
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%*s- ", indent + 2, "");
        put_str(f, v[i]);
        put_from(f, from ? from[i].file : NULL, from ? from[i].line : 0);
    }
}

static void put_serve(FILE *f, const struct policy *p)
{
    const struct policy_serve *s = p->serve;
    const struct policy_meta *m = p->meta;
    static const char *const modes[] = { "enforce", "observe" };

    fputs("serve:\n", f);
    put_names(f, "allowed_imports", s->allowed_imports, s->n_allowed_imports, m->imports, 2);
    put_names(f, "pre_imports", s->pre_imports, s->n_pre_imports, m->pre_imports, 2);
    if (s->n_blocklist == 0) {
        fputs("  blocklist: []\n", f);
    } else {
        fputs("  blocklist:\n", f);
        for (size_t i = 0; i < s->n_blocklist; i++) {
            char both[300];
            snprintf(both, sizeof(both), "%s.%s", s->blocklist[i].module, s->blocklist[i].attr);
            fputs("    - ", f);
            put_str(f, both);
            put_from(f, m->blocklist ? m->blocklist[i].file : NULL,
                     m->blocklist ? m->blocklist[i].line : 0);
        }
    }
    if (s->n_stages == 0) {
        fputs("  stages: {}", f);
        put_leaf_from(f, p, LF_SERVE_STAGES);
    } else {
        fputs("  stages:", f);
        put_leaf_from(f, p, LF_SERVE_STAGES);
        for (size_t i = 0; i < s->n_stages; i++)
            fprintf(f, "    %s: %s\n", s->stages[i].name, modes[s->stages[i].mode]);
    }
    fprintf(f, "  runtime_hooks: %s", modes[s->runtime_hooks]);
    put_leaf_from(f, p, LF_SERVE_RUNTIME_HOOKS);
    if (s->timeout_max_ms != 0) {
        fputs("  timeout_max: ", f);
        put_duration(f, s->timeout_max_ms);
        put_leaf_from(f, p, LF_SERVE_TIMEOUT_MAX);
    }
}

int policy_expand(const struct policy *p, FILE *f)
{
    const struct policy_info *in = &p->info;
    const struct policy_meta *m = p->meta;

    if (m == NULL) {            /* a policy from an image */
        errno = EINVAL;
        return -1;
    }
    fputs("# The policy ", f);
    fputs(in->file, f);
    fputs(" expanded: every key, each from the file named after it.\n# Made of: ", f);
    for (size_t i = 0; i < m->n_files; i++)
        fprintf(f, "%s%s", i ? " <- " : "", m->files[i]);
    fprintf(f, "\n# sha256 %s\n", in->sha256);
    fputs("version: 1\nname: ", f);
    put_str(f, in->name);
    fputc('\n', f);
    if (in->description != NULL) {
        fputs("description: ", f);
        put_str(f, in->description);
        fputc('\n', f);
    }
    fprintf(f, "mode: %s", in->audit_mode ? "audit" : "enforce");
    put_leaf_from(f, p, LF_MODE);
    if (m->wrote_workspace) {
        fputs("workspace: ", f);
        put_str(f, in->workspace);
        put_leaf_from(f, p, LF_WORKSPACE);
    }
    fprintf(f, "isolation: %s", in->isolation_required ? "required" : "optional");
    put_leaf_from(f, p, LF_ISOLATION);
    fprintf(f, "kill: %s", in->kill_deny ? "deny" : "terminate");
    put_leaf_from(f, p, LF_KILL);

    fputs("files:\n  read:\n", f);
    put_rules(f, p, POLICY_READ_ALLOW, "allow", 4);
    put_rules(f, p, POLICY_READ_DENY, "deny", 4);
    fputs("  write:\n", f);
    put_rules(f, p, POLICY_WRITE_ALLOW, "allow", 4);
    put_rules(f, p, POLICY_WRITE_DENY, "deny", 4);
    fputs("  exec:\n", f);
    put_rules(f, p, POLICY_EXEC_ALLOW, "allow", 4);
    put_rules(f, p, POLICY_EXEC_DENY, "deny", 4);
    fputs("  max_write_bytes: ", f);
    put_size(f, in->max_write_bytes);
    put_leaf_from(f, p, LF_MAX_WRITE);
    fprintf(f, "  read_only: %s", in->read_only ? "true" : "false");
    put_leaf_from(f, p, LF_READ_ONLY);

    fputs("commands:\n", f);
    put_rules(f, p, POLICY_CMD_DENY, "deny", 2);
    put_rules(f, p, POLICY_CMD_ALLOW, "allow", 2);

    fputs("network:\n  connect:\n", f);
    put_rules(f, p, POLICY_CONNECT_ALLOW, "allow", 4);
    put_rules(f, p, POLICY_CONNECT_DENY, "deny", 4);
    fputs("  bind:\n", f);
    put_rules(f, p, POLICY_BIND_ALLOW, "allow", 4);
    put_rules(f, p, POLICY_BIND_DENY, "deny", 4);

    fputs("limits:\n  timeout: ", f);
    put_duration(f, in->limits.timeout_ms);
    put_leaf_from(f, p, LF_TIMEOUT);
    fputs("  cpu: ", f);
    put_duration(f, in->limits.cpu_ms);
    put_leaf_from(f, p, LF_CPU);
    fputs("  memory: ", f);
    put_size(f, in->limits.memory_bytes);
    put_leaf_from(f, p, LF_MEMORY);
    fputs("  processes: ", f);
    put_count(f, in->limits.processes);
    put_leaf_from(f, p, LF_PROCESSES);
    fputs("  open_files: ", f);
    put_count(f, in->limits.open_files);
    put_leaf_from(f, p, LF_OPEN_FILES);

    fputs("env:\n", f);
    put_names(f, "pass", in->env_pass, in->n_env_pass, m->env_pass, 2);
    if (in->n_env_set == 0) {
        fputs("  set: {}", f);
        put_leaf_from(f, p, LF_ENV_SET);
    } else {
        fputs("  set:", f);
        put_leaf_from(f, p, LF_ENV_SET);
        for (size_t i = 0; i < in->n_env_set; i++) {
            fprintf(f, "    %s: ", in->env_set_name[i]);
            put_str(f, in->env_set_value[i]);
            fputc('\n', f);
        }
    }
    if (p->serve != NULL)
        put_serve(f, p);
    return ferror(f) ? -1 : 0;
}
