/* guard_notice.c — notices of the agent's denials, read back from the audit
 * trail (see guard_notice.h). */
#include "guard_notice.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bsd/string.h>

#include "auditfmt.h"
#include "event.h"
#include "store.h"

/* How often the store is read for new rows in mode stderr: a person
 * reading along notices a quarter of a second, and a read of an idle
 * store costs one indexed query. */
#define NOTICE_TICK_MS          250
/* Lines a second (stderr): enough to read what happened, few enough that a
 * loop of denials does not bury the agent's own output.  The rest are
 * counted into one "... and K more" line. */
#define NOTICE_LINES_PER_SEC    5
/* Distinct (op, target) pairs remembered for the summary: 4096 slots of 8
 * bytes, filled to 3/4 at most; past that the count says "over". */
#define NOTICE_SEEN_SLOTS       4096

struct guard_notice {
    enum guard_notify_mode mode;
    FILE *out;
    char *db, *agent, *run_id, *workspace;
    bool audit_mode;
    struct audit_store *store;
    char store_err[256];        /* why the store cannot be read ("" if it can) */
    int64_t after_id;           /* rows up to this one are read */
    bool started;               /* after_id is known */
    int64_t denials, distinct;
    bool distinct_capped;
    uint64_t *seen;             /* NOTICE_SEEN_SLOTS hashes, 0 = empty */
    uint64_t next_tick_ms;
    uint64_t win_start_ms;      /* the current one-second window */
    int win_lines;
    int64_t suppressed;         /* denials not printed in this window */
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int guard_notify_parse(const char *name)
{
    static const struct { const char *name; enum guard_notify_mode mode; } modes[] = {
        { "stderr", GUARD_NOTIFY_STDERR }, { "summary", GUARD_NOTIFY_SUMMARY },
        { "none", GUARD_NOTIFY_NONE }, { "agent", GUARD_NOTIFY_AGENT },
    };
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (strcmp(name, modes[i].name) == 0)
            return (int)modes[i].mode;
    return -1;
}

enum guard_notify_mode guard_notify_default(int fd)
{
    /* A terminal on our stderr is the terminal the agent inherits: any
     * program of it may take it over (an editor, a pager, a TUI), and a
     * line written then lands in the middle of its screen.  The summary
     * comes after the agent ended, when the terminal is ours again. */
    return isatty(fd) ? GUARD_NOTIFY_SUMMARY : GUARD_NOTIFY_STDERR;
}

static char *dup_or_empty(const char *s)
{
    return strdup(s ? s : "");
}

/* The newest row's id: the run's rows come after it. */
static int newest_row(const struct audit_row *row, void *ctx)
{
    *(int64_t *)ctx = row->id;
    return 0;
}

/* Opens the store if it is not open; false (store_err says why) if it
 * cannot be.  The first success fixes where the run's rows begin. */
static bool store_ready(struct guard_notice *n)
{
    if (n->store)
        return true;
    char err[256] = "";
    if (audit_store_open(n->db, true, &n->store, err, sizeof err) < 0) {
        n->store = NULL;
        strlcpy(n->store_err, err[0] ? err : "cannot open it", sizeof n->store_err);
        return false;
    }
    if (!n->started) {
        struct audit_filter f = { .limit = 1 };
        if (audit_store_query(n->store, &f, newest_row, &n->after_id, err, sizeof err) < 0) {
            strlcpy(n->store_err, err, sizeof n->store_err);
            audit_store_close(n->store);
            n->store = NULL;
            return false;
        }
        n->started = true;
    }
    n->store_err[0] = '\0';
    return true;
}

struct guard_notice *guard_notice_open(enum guard_notify_mode mode,
                                       const struct guard_notice_run *run, FILE *out)
{
    if (mode != GUARD_NOTIFY_STDERR && mode != GUARD_NOTIFY_SUMMARY)
        return NULL;
    struct guard_notice *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    n->mode = mode;
    n->out = out;
    n->audit_mode = run->audit_mode;
    n->db = dup_or_empty(run->audit_db);
    n->agent = dup_or_empty(run->agent);
    n->run_id = dup_or_empty(run->run_id);
    n->workspace = dup_or_empty(run->workspace);
    n->seen = calloc(NOTICE_SEEN_SLOTS, sizeof *n->seen);
    if (!n->db || !n->agent || !n->run_id || !n->workspace || !n->seen) {
        guard_notice_close(n);
        return NULL;
    }
    /* Where the run's rows begin: known now, before the agent runs.  A
     * store that cannot be read yet is tried again at each tick; its rows
     * then begin wherever the first read finds the store. */
    (void)store_ready(n);
    n->next_tick_ms = now_ms() + NOTICE_TICK_MS;
    return n;
}

int guard_notice_timeout_ms(const struct guard_notice *n)
{
    if (!n || n->mode != GUARD_NOTIFY_STDERR)
        return -1;
    uint64_t now = now_ms();
    return n->next_tick_ms > now ? (int)(n->next_tick_ms - now) : 0;
}

/* True the first time (OP, TARGET) is seen. */
static bool first_seen(struct guard_notice *n, const char *op, const char *target)
{
    uint64_t h = 1469598103934665603ull;    /* FNV-1a 64 */
    for (const char *p = op ? op : ""; ; p++) {
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
        if (!*p)
            break;
    }
    for (const char *p = target ? target : ""; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    if (h == 0)
        h = 1;
    size_t i = (size_t)(h % NOTICE_SEEN_SLOTS);
    while (n->seen[i]) {
        if (n->seen[i] == h)
            return false;
        i = (i + 1) % NOTICE_SEEN_SLOTS;
    }
    if (n->distinct >= NOTICE_SEEN_SLOTS * 3 / 4) {
        n->distinct_capped = true;
        return false;
    }
    n->seen[i] = h;
    return true;
}

/* TARGET relative to the workspace when inside it. */
static const char *shown_target(const struct guard_notice *n, const char *target)
{
    size_t w = strlen(n->workspace);
    while (w > 1 && n->workspace[w - 1] == '/')
        w--;
    if (target && w > 1 && strncmp(target, n->workspace, w) == 0 && target[w] == '/' &&
        target[w + 1])
        return target + w + 1;
    return target ? target : "";
}

/* What made the decision, for a person: "files.read.deny \"**\/.env\",
 * FILE:LINE"; a command rule's reason rather than its pattern (often a
 * long regex); a reason where there is no rule line. */
static void shown_rule(const struct audit_row *r, char *out, size_t outsz)
{
    const char *rule = r->rule ? r->rule : "", *reason = r->reason ? r->reason : "";
    if (strncmp(reason, "audit: ", 7) == 0)
        reason += 7;
    /* The rows' rule is "SECTION \"TEXT\" FILE:LINE" (policy_rule_format),
     * or "SECTION (no rule matched)". */
    const char *q = NULL;
    for (const char *p = strstr(rule, "\" "); p; p = strstr(p + 1, "\" "))
        q = p;
    if (q && strchr(q + 2, ':')) {
        const char *sp = strchr(rule, ' ');
        size_t sec = sp ? (size_t)(sp - rule) : 0;
        if (strncmp(rule, "commands.", 9) == 0 && reason[0] && sec)
            snprintf(out, outsz, "%.*s: %s, %s", (int)sec, rule, reason, q + 2);
        else
            snprintf(out, outsz, "%.*s, %s", (int)(q + 1 - rule), rule, q + 2);
    } else {
        strlcpy(out, reason[0] ? reason : rule[0] ? rule : "denied", outsz);
    }
}

static void print_line(struct guard_notice *n, const struct audit_row *r, bool audit)
{
    char target[400], cmd[200], rule[1200], rule_esc[1400];
    afmt_escape(shown_target(n, r->target), target, sizeof target);
    cmd[0] = '\0';
    if (r->op && strcmp(r->op, "exec") == 0 && r->target2 && r->target2[0])
        afmt_escape(r->target2, cmd, sizeof cmd);
    shown_rule(r, rule, sizeof rule);
    afmt_escape(rule, rule_esc, sizeof rule_esc);
    fprintf(n->out, "sbx: %s %s %s%s%s (%s)\n", audit ? "audit: would deny" : "denied",
            r->op ? r->op : "?", target, cmd[0] ? ": " : "", cmd, rule_esc);
}

/* The "... and K more" line for the window that ends. */
static void flush_more(struct guard_notice *n)
{
    if (n->suppressed > 0)
        fprintf(n->out, "sbx: ... and %lld more; sbx-audit query --agent %s --decision deny\n",
                (long long)n->suppressed, n->agent);
    n->suppressed = 0;
}

struct tick_ctx {
    struct guard_notice *n;
    uint64_t now;
};

static int on_row(const struct audit_row *r, void *ctx)
{
    struct tick_ctx *t = ctx;
    struct guard_notice *n = t->n;
    if (r->id > n->after_id)
        n->after_id = r->id;
    bool deny = r->decision && strcmp(r->decision, "deny") == 0;
    bool audit = !deny && (r->flags & SBX_EVF_AUDIT);
    /* Our run's rows only: the name may have had runs before ours. */
    if ((!deny && !audit) || !r->run_id || strcmp(r->run_id, n->run_id) != 0)
        return 0;
    n->denials++;
    if (first_seen(n, r->op, r->target))
        n->distinct++;
    if (n->mode != GUARD_NOTIFY_STDERR)
        return 0;
    if (t->now - n->win_start_ms >= 1000) {
        flush_more(n);
        n->win_start_ms = t->now;
        n->win_lines = 0;
    }
    if (n->win_lines < NOTICE_LINES_PER_SEC) {
        print_line(n, r, audit);
        n->win_lines++;
    } else {
        n->suppressed++;
    }
    return 0;
}

/* Reads the rows committed since the last read. */
static void read_rows(struct guard_notice *n, uint64_t now)
{
    if (!store_ready(n))
        return;
    char err[256];
    struct tick_ctx t = { n, now };
    /* Audit mode records the calls it would have denied as allowed rows
     * with a flag: those need every row; otherwise the denials are enough. */
    struct audit_filter f = {
        .agent = n->agent, .decision = n->audit_mode ? NULL : "deny", .after_id = n->after_id,
    };
    if (audit_store_query(n->store, &f, on_row, &t, err, sizeof err) < 0)
        strlcpy(n->store_err, err, sizeof n->store_err);
}

void guard_notice_tick(struct guard_notice *n)
{
    if (!n || n->mode != GUARD_NOTIFY_STDERR)
        return;
    uint64_t now = now_ms();
    if (now < n->next_tick_ms)
        return;
    read_rows(n, now);
    if (n->suppressed && now - n->win_start_ms >= 1000) {
        flush_more(n);
        n->win_start_ms = now;
        n->win_lines = 0;
    }
    fflush(n->out);
    n->next_tick_ms = now + NOTICE_TICK_MS;
}

void guard_notice_finish(struct guard_notice *n)
{
    if (!n)
        return;
    read_rows(n, now_ms());
    flush_more(n);
    if (n->store_err[0] && !n->store) {
        fprintf(n->out, "sbx: denials not counted: the audit store cannot be read (%s)\n",
                n->store_err);
    } else if (n->denials > 0) {
        char distinct[48];
        snprintf(distinct, sizeof distinct, "%s%lld distinct", n->distinct_capped ? "over " : "",
                 (long long)n->distinct);
        if (n->audit_mode)
            fprintf(n->out, "sbx: audit mode: %lld call%s would have been denied (%s); "
                    "sbx-audit query --agent %s\n", (long long)n->denials,
                    n->denials == 1 ? "" : "s", distinct, n->agent);
        else
            fprintf(n->out, "sbx: %lld denial%s (%s); sbx-audit query --agent %s --decision deny\n",
                    (long long)n->denials, n->denials == 1 ? "" : "s", distinct, n->agent);
    }
    fflush(n->out);
}

void guard_notice_close(struct guard_notice *n)
{
    if (!n)
        return;
    if (n->store)
        audit_store_close(n->store);
    free(n->db);
    free(n->agent);
    free(n->run_id);
    free(n->workspace);
    free(n->seen);
    free(n);
}
