/* info.c — what a loaded policy says besides decisions: its rules, its
 * info, a one-line summary; the implicit rules; freeing (policy.h). */
#include "internal.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <bsd/string.h>

size_t policy_rules(const struct policy *p, enum policy_list l, const struct policy_rule **out)
{
    if ((unsigned)l >= POLICY_LIST__COUNT) {
        *out = NULL;
        return 0;
    }
    *out = p->rules[l];
    return p->n_rules[l];
}

const struct policy_info *policy_info(const struct policy *p)
{
    return &p->info;
}

size_t policy_files(const struct policy *p, const char *const **out)
{
    if (p->meta == NULL) {
        *out = NULL;
        return 0;
    }
    *out = p->meta->files;
    return p->meta->n_files;
}

void policy_free(struct policy *p)
{
    if (p == NULL)
        return;
    cmd_free_all(p);
    /* p lives in its own arena, or in a mapped image */
    struct arena a = p->arena;
    void *map = p->img_map;
    size_t len = p->img_len;
    arena_free(&a);
    if (map)
        munmap(map, len);
}

int policy_set_display_path(struct policy *p, const char *path)
{
    const char *old = p->info.file;
    char *name = arena_strdup(&p->arena, path);
    if (!name) {
        errno = ENOMEM;
        return -1;
    }
    /* Every rule written in the policy file points at info.file (rules
     * taken from the shipped default say "default.yaml", protect rules
     * "sbx"): the same pointer, so the same rules get the new name. */
    for (int l = 0; l < POLICY_LIST__COUNT; l++) {
        for (size_t i = 0; i < p->n_rules[l]; i++)
            if (p->rules[l][i].file == old)
                p->rules[l][i].file = name;
        if (p->implicit[l].file == old)
            p->implicit[l].file = name;
    }
    struct policy_rule *extra[] = { &p->read_only_rule, &p->net_other_rule,
                                    &p->cmd_default_rule };
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++)
        if (extra[i]->file == old)
            extra[i]->file = name;
    if (p->meta != NULL) {
        if (p->meta->n_files > 0 && p->meta->files[0] == old)
            p->meta->files[0] = name;
        for (int i = 0; i < LF__COUNT; i++)
            if (p->meta->leaf[i].file == old)
                p->meta->leaf[i].file = name;
    }
    p->info.file = name;
    return 0;
}

int values_finish(struct loader *ld, const struct policy_options *opt)
{
    static const enum policy_list allows[] = {
        POLICY_READ_ALLOW, POLICY_WRITE_ALLOW, POLICY_EXEC_ALLOW, POLICY_CMD_ALLOW,
        POLICY_CONNECT_ALLOW, POLICY_BIND_ALLOW,
    };
    struct policy *p = ld->p;

    for (size_t i = 0; i < sizeof(allows) / sizeof(allows[0]); i++) {
        struct policy_rule *r = &p->implicit[allows[i]];
        r->list = allows[i];
        r->section = policy_list_name(allows[i]);
        r->text = "(no rule matched)";
        r->file = p->info.file;
        r->port_lo = r->port_hi = -1;
    }
    p->implicit[POLICY_READ_ALLOW].text = "(no rule matched)";
    p->read_only_rule.list = POLICY_WRITE_DENY;
    p->read_only_rule.section = "files.read_only";
    p->read_only_rule.text = "read_only: true";
    if (p->read_only_rule.file == NULL)
        p->read_only_rule.file = p->info.file;
    p->read_only_rule.port_lo = p->read_only_rule.port_hi = -1;
    p->net_other_rule = (struct policy_rule){
        .list = POLICY_CONNECT_ALLOW, .section = "network",
        .text = "(not an IP or unix address)", .file = p->info.file,
        .port_lo = -1, .port_hi = -1,
    };
    p->cmd_default_rule = (struct policy_rule){
        .list = POLICY_CMD_DENY, .section = "commands",
        .text = "(no command rule matched)", .file = p->info.file,
        .port_lo = -1, .port_hi = -1,
    };

    /* protected trees: built directly, their names are not globs */
    size_t n = 0;
    if (opt != NULL && opt->protect != NULL)
        while (opt->protect[n] != NULL)
            n++;
    if (n == 0)
        return 0;
    p->rules[POLICY_PROTECT] = arena_alloc(&p->arena, n * sizeof(struct policy_rule));
    p->globs[POLICY_PROTECT] = arena_alloc(&p->arena, n * sizeof(struct glob));
    if (p->rules[POLICY_PROTECT] == NULL || p->globs[POLICY_PROTECT] == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        char real[PATH_MAX];
        const char *src = opt->protect[i];
        struct policy_rule *r = &p->rules[POLICY_PROTECT][i];
        struct glob *g = &p->globs[POLICY_PROTECT][i];
        if (src[0] != '/') {
            load_error(ld, p->info.file, NULL, "protected path \"%s\" is not absolute", src);
            continue;
        }
        if (realpath(src, real) == NULL && policy_path_lexical("/", src, real, sizeof(real)) < 0)
            return -1;
        size_t rl = strcmp(real, "/") == 0 ? 0 : strlen(real);
        char *pat = arena_printf(&p->arena, "%.*s/**", (int)rl, real);
        if (pat == NULL)
            return -1;
        *r = (struct policy_rule){
            .list = POLICY_PROTECT, .section = "protect", .text = arena_strdup(&p->arena, src),
            .pattern = pat, .file = "sbx", .port_lo = -1, .port_hi = -1,
        };
        *g = (struct glob){ .pat = pat, .kind = GLOB_TREE, .plen = rl, .suf = pat + rl + 3 };
        p->n_rules[POLICY_PROTECT]++;
    }
    return 0;
}

/* ---- summary -------------------------------------------------------------- */

static void fmt_duration(uint64_t ms, char *out, size_t outsz)
{
    if (ms == 0)
        snprintf(out, outsz, "-");
    else if (ms % 3600000 == 0)
        snprintf(out, outsz, "%" PRIu64 "h", ms / 3600000);
    else if (ms % 60000 == 0)
        snprintf(out, outsz, "%" PRIu64 "m", ms / 60000);
    else if (ms % 1000 == 0)
        snprintf(out, outsz, "%" PRIu64 "s", ms / 1000);
    else
        snprintf(out, outsz, "%" PRIu64 "ms", ms);
}

static void fmt_size(uint64_t b, char *out, size_t outsz)
{
    if (b == 0)
        snprintf(out, outsz, "-");
    else if (b % (1ull << 30) == 0)
        snprintf(out, outsz, "%" PRIu64 "GiB", b >> 30);
    else if (b % (1ull << 20) == 0)
        snprintf(out, outsz, "%" PRIu64 "MiB", b >> 20);
    else if (b % (1ull << 10) == 0)
        snprintf(out, outsz, "%" PRIu64 "KiB", b >> 10);
    else
        snprintf(out, outsz, "%" PRIu64 "B", b);
}

static void fmt_count(uint64_t c, char *out, size_t outsz)
{
    if (c == 0)
        snprintf(out, outsz, "-");
    else
        snprintf(out, outsz, "%" PRIu64, c);
}

int policy_summary(const struct policy *p, char *out, size_t outsz)
{
    const struct policy_info *in = &p->info;
    const size_t *n = p->n_rules;
    char to[32], cpu[32], mem[32], procs[32], files[32], mw[32], cmds[64];
    int k;

    fmt_duration(in->limits.timeout_ms, to, sizeof(to));
    fmt_duration(in->limits.cpu_ms, cpu, sizeof(cpu));
    fmt_size(in->limits.memory_bytes, mem, sizeof(mem));
    fmt_count(in->limits.processes, procs, sizeof(procs));
    fmt_count(in->limits.open_files, files, sizeof(files));
    fmt_size(in->max_write_bytes, mw, sizeof(mw));
    if (n[POLICY_CMD_ALLOW] > 0)
        snprintf(cmds, sizeof(cmds), "%zu deny/%zu allow (allow-list)",
                 n[POLICY_CMD_DENY], n[POLICY_CMD_ALLOW]);
    else
        snprintf(cmds, sizeof(cmds), "%zu deny", n[POLICY_CMD_DENY]);
    k = snprintf(out, outsz,
                 "%s: %s; workspace %s; read %zu allow/%zu deny; write %zu/%zu%s; "
                 "exec %zu/%zu; commands %s; connect %zu allow/%zu deny; bind %zu/%zu; "
                 "limits timeout %s cpu %s memory %s processes %s open_files %s; "
                 "max_write %s; env %zu passed, %zu set; kill %s; isolation %s",
                 in->name, p->mode_name ? p->mode_name : "enforce", in->workspace,
                 n[POLICY_READ_ALLOW], n[POLICY_READ_DENY],
                 n[POLICY_WRITE_ALLOW], n[POLICY_WRITE_DENY], in->read_only ? " (read-only)" : "",
                 n[POLICY_EXEC_ALLOW], n[POLICY_EXEC_DENY], cmds,
                 n[POLICY_CONNECT_ALLOW], n[POLICY_CONNECT_DENY],
                 n[POLICY_BIND_ALLOW], n[POLICY_BIND_DENY],
                 to, cpu, mem, procs, files, mw, in->n_env_pass, in->n_env_set,
                 in->kill_deny ? "deny" : "terminate",
                 in->isolation_gvisor ? "gvisor"
                 : in->isolation_required ? "required" : "optional");
    if (k < 0 || (size_t)k >= outsz) {
        errno = ENOSPC;
        return -1;
    }
    return 0;
}
