/* decide.c — file decisions and verdicts (policy.h).
 *
 * Order, the same for every file op: a protected path (sbx's own store and
 * sockets) is denied whatever the policy or its mode says; read_only
 * denies every write; then the class's deny list, then its allow list, in
 * file order; what no allow matches is denied by an implicit rule.  The
 * path is compared as given (the caller normalized it): no system call,
 * no allocation. */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

enum sbx_decision policy_verdict_set(const struct policy *p, struct policy_verdict *v,
                                     const struct policy_rule *rule,
                                     enum sbx_decision d, const char *reason,
                                     bool forced)
{
    if (v == NULL)     /* the caller wants only the decision */
        return d == SBX_DENY && p->info.audit_mode && !forced ? SBX_ALLOW : d;
    v->rule = rule;
    v->reason = reason;
    v->audit = false;
    v->decision = d;
    if (d == SBX_DENY && p->info.audit_mode && !forced) {
        /* audit mode: record what would be denied, deny nothing */
        v->audit = true;
        v->decision = SBX_ALLOW;
    }
    return v->decision;
}

static const struct {
    enum policy_list deny, allow;
    const char *deny_reason, *allow_reason, *none_reason;
} class_lists[] = {
    [SBX_CLASS_READ] = { POLICY_READ_DENY, POLICY_READ_ALLOW, "matches files.read.deny",
                         "matches files.read.allow", "no files.read.allow rule matches" },
    [SBX_CLASS_WRITE] = { POLICY_WRITE_DENY, POLICY_WRITE_ALLOW, "matches files.write.deny",
                          "matches files.write.allow", "no files.write.allow rule matches" },
    [SBX_CLASS_EXEC] = { POLICY_EXEC_DENY, POLICY_EXEC_ALLOW, "matches files.exec.deny",
                         "matches files.exec.allow", "no files.exec.allow rule matches" },
};

static const struct policy_rule *scan(const struct policy *p, enum policy_list l,
                                      const struct glob_path *gp)
{
    const struct glob *g = p->globs[l];
    for (size_t i = 0, n = p->n_rules[l]; i < n; i++)
        if (glob_match_compiled(&g[i], gp))
            return &p->rules[l][i];
    return NULL;
}

enum sbx_decision policy_decide_path(const struct policy *p, enum sbx_op op,
                                     const char *abspath, struct policy_verdict *v)
{
    enum sbx_op_class cls = sbx_op_class(op);
    struct glob_path gp;
    const struct policy_rule *r;

    if (cls != SBX_CLASS_READ && cls != SBX_CLASS_WRITE && cls != SBX_CLASS_EXEC)
        return policy_verdict_set(p, v, &p->implicit[POLICY_READ_ALLOW], SBX_DENY,
                                  "not a file operation", true);
    glob_path_init(&gp, abspath);
    if ((r = scan(p, POLICY_PROTECT, &gp)) != NULL)
        return policy_verdict_set(p, v, r, SBX_DENY,
                                  "sbx's own files (audit store, sockets) are off limits", true);
    if (cls == SBX_CLASS_WRITE && p->info.read_only)
        return policy_verdict_set(p, v, &p->read_only_rule, SBX_DENY,
                                  "files.read_only is true: every write is denied", false);
    if ((r = scan(p, class_lists[cls].deny, &gp)) != NULL)
        return policy_verdict_set(p, v, r, SBX_DENY, class_lists[cls].deny_reason, false);
    if ((r = scan(p, class_lists[cls].allow, &gp)) != NULL)
        return policy_verdict_set(p, v, r, SBX_ALLOW, class_lists[cls].allow_reason, false);
    return policy_verdict_set(p, v, &p->implicit[class_lists[cls].allow], SBX_DENY,
                              class_lists[cls].none_reason, false);
}

int policy_rule_format(const struct policy_rule *r, char *out, size_t outsz)
{
    int n;
    if (r->line == 0)
        n = snprintf(out, outsz, "%s %s", r->section, r->text);
    else
        n = snprintf(out, outsz, "%s \"%s\" %s:%u", r->section, r->text, r->file, r->line);
    if (n < 0 || (size_t)n >= outsz) {
        errno = ENOSPC;
        return -1;
    }
    return 0;
}
