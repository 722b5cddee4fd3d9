/*
 * decide.c — from a policy verdict to what the call does, and the audit
 * event that says so.  Every decision is recorded, allowed ones too.
 *
 * The order is fixed: soft kill (EPERM) before the policy's answer, the
 * event before the call goes on (a call whose event could not be recorded
 * fails closed with EACCES), the notice last.  Nothing here allocates.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "guard.h"

void sbuf_init(struct sbuf *s, char *buf, size_t size)
{
    s->buf = buf;
    s->size = size;
    s->len = 0;
    s->cut = false;
    if (size)
        buf[0] = '\0';
}

void sbuf_addn(struct sbuf *s, const char *str, size_t n)
{
    if (!s->size)
        return;
    size_t room = s->size - 1 - s->len;
    if (n > room) {
        n = room;
        s->cut = true;
    }
    memcpy(s->buf + s->len, str, n);
    s->len += n;
    s->buf[s->len] = '\0';
}

void sbuf_add(struct sbuf *s, const char *str)
{
    if (str)
        sbuf_addn(s, str, strlen(str));
}

void sbuf_add_uint(struct sbuf *s, unsigned long v)
{
    char tmp[24];
    size_t i = sizeof tmp;
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    sbuf_addn(s, tmp + i, sizeof tmp - i);
}

bool guard_broken(enum sbx_op op, const char *target, struct guard_verdict *gv)
{
    if (guard_policy)
        return false;
    gv->op = op;
    gv->target = target;
    gv->v.decision = SBX_DENY;
    gv->v.audit = false;
    gv->v.rule = NULL;
    gv->v.reason = "the policy could not be loaded in this process";
    return true;
}

/* The last few path decisions of this thread.  A program asks about the
 * same paths again and again (a config file, /dev/null, the directories an
 * import system lists); the policy is immutable, so an answer stays right.
 * Per thread, so no lock; a signal handler that opens a file while this
 * thread is inside the guard goes straight to libc and never sees it. */
#define MEMO_SLOTS 4
#define MEMO_PATH 200           /* longer paths are not remembered */
struct memo {
    unsigned char used, op, also_read;
    unsigned short len;
    char path[MEMO_PATH];
    struct guard_verdict gv;    /* gv.target is not used */
};
static __thread struct memo memo[MEMO_SLOTS] __attribute__((tls_model("initial-exec")));
static __thread unsigned memo_next __attribute__((tls_model("initial-exec")));

static enum sbx_decision decide_uncached(enum sbx_op op, const char *path, bool also_read,
                                         struct guard_verdict *gv);

enum sbx_decision guard_decide_path(enum sbx_op op, const char *path,
                                    bool also_read, struct guard_verdict *gv)
{
    if (guard_broken(op, path, gv))
        return SBX_DENY;
    size_t len = strlen(path);
    if (len < MEMO_PATH) {
        for (int i = 0; i < MEMO_SLOTS; i++) {
            struct memo *m = &memo[i];
            if (m->used && m->op == op && m->also_read == also_read && m->len == len &&
                memcmp(m->path, path, len) == 0) {
                *gv = m->gv;
                gv->target = path;
                return gv->v.decision;
            }
        }
    }
    enum sbx_decision d = decide_uncached(op, path, also_read, gv);
    if (len < MEMO_PATH) {
        struct memo *m = &memo[memo_next++ % MEMO_SLOTS];
        m->used = 1;
        m->op = (unsigned char)op;
        m->also_read = also_read;
        m->len = (unsigned short)len;
        memcpy(m->path, path, len);
        m->gv = *gv;
    }
    return d;
}

static enum sbx_decision decide_uncached(enum sbx_op op, const char *path, bool also_read,
                                         struct guard_verdict *gv)
{
    gv->op = op;
    gv->target = path;
    enum sbx_decision d = policy_decide_path(guard_policy, op, path, &gv->v);
    if (also_read && d == SBX_ALLOW && !gv->v.audit) {
        struct policy_verdict rv;
        if (policy_decide_path(guard_policy, SBX_OP_OPEN_READ, path, &rv) == SBX_DENY ||
            rv.audit) {
            gv->v = rv;
            gv->op = SBX_OP_OPEN_READ;
            d = rv.decision;
        }
    }
    return d;
}

/* The text of rule R in policy_rule_format()'s form, built into BUF with
 * plain copies: snprintf per allowed open was once a third of the guard's
 * cost (and is not async-signal-safe), and a table made at start-up cost
 * every short-lived process ~50 snprintf calls it mostly never used. */
static const char *rule_build(const struct policy_rule *r, char *buf, size_t size)
{
    struct sbuf s;
    sbuf_init(&s, buf, size);
    sbuf_add(&s, r->section);
    if (r->line == 0) {
        sbuf_add(&s, " ");
        sbuf_add(&s, r->text);
    } else {
        sbuf_add(&s, " \"");
        sbuf_add(&s, r->text);
        sbuf_add(&s, "\" ");
        sbuf_add(&s, r->file);
        sbuf_add(&s, ":");
        sbuf_add_uint(&s, r->line);
    }
    return buf;
}

/* The last rules this thread showed, as text: a program that opens files in
 * a loop is decided by the same rule or two, and building the text was a
 * tenth of an allowed open.  The policy never changes in a process (it is
 * loaded once), so a rule's address names its text for good.  Per thread:
 * no lock; a signal handler that arrives while this thread is in the guard
 * calls straight through to libc and never gets here. */
#define RULE_MEMO_SLOTS 2
#define RULE_MEMO_TEXT 256      /* longer texts are built every time */
struct rule_memo {
    const struct policy_rule *rule;
    char text[RULE_MEMO_TEXT];
};
static __thread struct rule_memo rule_memo[RULE_MEMO_SLOTS]
    __attribute__((tls_model("initial-exec")));
static __thread unsigned rule_memo_next __attribute__((tls_model("initial-exec")));

/* R's text: from the memory, or built into BUF (and remembered). */
static const char *rule_string(const struct policy_rule *r, char *buf, size_t size)
{
    if (!r)
        return "";
    for (int i = 0; i < RULE_MEMO_SLOTS; i++)
        if (rule_memo[i].rule == r)
            return rule_memo[i].text;
    rule_build(r, buf, size);
    if (strlen(buf) + 1 < RULE_MEMO_TEXT) {
        struct rule_memo *m = &rule_memo[rule_memo_next++ % RULE_MEMO_SLOTS];
        m->rule = NULL;         /* never a half-written text under a name */
        memcpy(m->text, buf, strlen(buf) + 1);
        m->rule = r;
    }
    return buf;
}

static atomic_bool warned_channel;

/* The event could not be recorded: the call fails closed.  Said once, with
 * the emitter's reason. */
static int channel_down(void)
{
    if (!atomic_load_explicit(&warned_channel, memory_order_relaxed)) {
        char msg[512];
        struct sbuf s;
        sbuf_init(&s, msg, sizeof msg - 1);
        sbuf_add(&s, "sbx: the audit channel is unavailable (");
        const char *why = sbx_emit_error();
        sbuf_add(&s, why && *why ? why : "the agent's run id or token is missing");
        sbuf_add(&s, "); guarded calls are denied, since every decision must be recorded");
        msg[s.len++] = '\n';
        msg[s.len] = '\0';
        guard_warn_once(&warned_channel, msg);
    }
    return EACCES;
}

/* Soft-killed: every guarded call fails with EPERM, and says so. */
static int record_killed(struct sbx_event_desc *ev)
{
    ev->decision = SBX_DENY;
    ev->flags |= SBX_EVF_KILLED;
    ev->err = EPERM;
    ev->rule = NULL;
    ev->reason = "agent has been killed";
    ev->rule_key = ev->reason_key = NULL;
    if (sbx_emit(ev) < 0)
        return channel_down();
    guard_notify_denial(ev->op, ev->target, false, NULL, ev->reason);
    return EPERM;
}

int guard_record_plain(enum sbx_op op, enum sbx_decision d, const char *target,
                       const char *target2, int err, const char *reason)
{
    struct sbx_event_desc ev = {
        .op = op, .decision = d, .layer = SBX_LAYER_GUARD, .flags = 0,
        .err = d == SBX_DENY ? err : 0, .target = target, .target2 = target2,
        .rule = NULL, .reason = reason,
    };
    if (sbx_emit_killed())
        return record_killed(&ev);
    if (sbx_emit(&ev) < 0)
        return channel_down();
    if (d == SBX_DENY) {
        guard_notify_denial(op, target, false, NULL, reason);
        return err;
    }
    return 0;
}

int guard_record_toolong(enum sbx_op op, const char *path)
{
    return guard_record_plain(op, SBX_DENY, path, NULL, ENAMETOOLONG,
                              "the path, made absolute, is longer than PATH_MAX (4096 bytes)");
}

int guard_record(const struct guard_verdict *gv, const char *target2,
                 uint32_t flags, const char *note)
{
    char rulebuf[512], reason[768];
    struct sbx_event_desc ev = {
        .op = gv->op, .decision = gv->v.decision, .layer = SBX_LAYER_GUARD,
        .flags = flags, .err = 0, .target = gv->target, .target2 = target2,
        .rule = rule_string(gv->v.rule, rulebuf, sizeof rulebuf),
        .reason = gv->v.reason ? gv->v.reason : "",
        /* Both texts are fixed for the life of the process: a rule's (its
         * address names it, the policy never changes) and the policy's
         * reason (a constant, or text in the policy). */
        .rule_key = gv->v.rule, .reason_key = gv->v.reason,
    };
    if (sbx_emit_killed())
        return record_killed(&ev);
    if (gv->v.audit)
        ev.flags |= SBX_EVF_AUDIT;
    /* The reason as the policy gave it, unless there is more to say. */
    if (gv->v.audit || (note && *note)) {
        struct sbuf r;
        sbuf_init(&r, reason, sizeof reason);
        if (gv->v.audit)
            sbuf_add(&r, "audit: ");
        sbuf_add(&r, gv->v.reason);
        if (note && *note) {
            sbuf_add(&r, "; ");
            sbuf_add(&r, note);
        }
        ev.reason = reason;
        ev.reason_key = NULL;
    }
    if (ev.decision == SBX_DENY)
        ev.err = EACCES;
    if (sbx_emit(&ev) < 0)
        return channel_down();
    if (ev.decision == SBX_DENY || gv->v.audit)
        guard_notify_denial(gv->op, gv->target, gv->v.audit, gv->v.rule, gv->v.reason);
    return ev.decision == SBX_DENY ? EACCES : 0;
}
