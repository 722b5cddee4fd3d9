/*
 * notify.c — lines on the agent's stderr: denials under --notify agent
 * (SBX_NOTIFY=1), and the few once-per-process warnings of the guard.
 *
 * Written with one write(2) each, no stdio: the program's own stdio buffers
 * and locks are not ours to touch, and this may run in a signal handler or
 * a vfork child.
 */
#include <string.h>
#include <sys/syscall.h>

#include "guard.h"

static void write_all(const char *s, size_t n)
{
    while (n > 0) {
        long w = guard_raw(SYS_write, 2, (long)s, (long)n, 0, 0, 0);
        if (w == -4 /* EINTR */)
            continue;
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

void guard_warn_once(atomic_bool *key, const char *msg)
{
    if (atomic_exchange(key, true))
        return;
    write_all(msg, strlen(msg));
}

/* TARGET shortened to be relative to the workspace when inside it. */
static const char *display_target(const char *target)
{
    const char *ws = guard_envs[GENV_WORKSPACE].value;
    if (!target || !ws || target[0] != '/')
        return target;
    size_t n = strlen(ws);
    while (n > 1 && ws[n - 1] == '/')
        n--;
    if (strncmp(target, ws, n) == 0 && target[n] == '/' && target[n + 1])
        return target + n + 1;
    return target;
}

void guard_notify_denial(enum sbx_op op, const char *target, bool audit,
                         const struct policy_rule *rule, const char *reason)
{
    if (!guard_notify)
        return;
    char line[1024];
    struct sbuf s;
    sbuf_init(&s, line, sizeof line - 1);
    sbuf_add(&s, audit ? "sbx: audit: would deny " : "sbx: denied ");
    sbuf_add(&s, sbx_op_name(op));
    sbuf_add(&s, " ");
    sbuf_add(&s, display_target(target));
    sbuf_add(&s, " (");
    if (rule && rule->line > 0 && rule->reason) {
        /* A command rule: its reason, for a person; the pattern (often a
         * long regex) is in the audit trail. */
        sbuf_add(&s, rule->section);
        sbuf_add(&s, ": ");
        sbuf_add(&s, rule->reason);
        sbuf_add(&s, ", ");
        sbuf_add(&s, rule->file);
        sbuf_add(&s, ":");
        sbuf_add_uint(&s, rule->line);
    } else if (rule && rule->line > 0) {
        sbuf_add(&s, rule->section);
        sbuf_add(&s, " \"");
        sbuf_add(&s, rule->text);
        sbuf_add(&s, "\", ");
        sbuf_add(&s, rule->file);
        sbuf_add(&s, ":");
        sbuf_add_uint(&s, rule->line);
    } else {
        sbuf_add(&s, reason ? reason : "denied");
    }
    sbuf_add(&s, ")");
    line[s.len++] = '\n';
    write_all(line, s.len);
}
