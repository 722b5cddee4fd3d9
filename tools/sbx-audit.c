/*
 * sbx-audit — read the audit store.
 *
 *   sbx-audit query [--agent NAME] [--decision allow|deny] [--op OP]
 *                   [--since DURATION|TIME] [--limit N] [--format table|json|csv]
 *   sbx-audit tail  [same filters]     follows new rows until interrupted
 *   sbx-audit stats [--agent NAME]
 *   sbx-audit verify                   checks the hash chain and the head file
 *   sbx-audit agents                   running and past agents
 *
 * Opens the store ($SBX_AUDIT_DB or the default) read-only: it never blocks
 * sbx-auditd (WAL) and never starts it.  Exit 0 ok, 1 verify failed or the
 * store is missing/unreadable, 2 bad usage.
 */
#include <errno.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <bsd/stdlib.h>
#include <bsd/string.h>

#include "auditfmt.h"
#include "ctl.h"
#include "ops.h"
#include "paths.h"
#include "store.h"

static void usage(FILE *f)
{
    fprintf(f,
        "usage: sbx-audit query [--agent NAME] [--decision allow|deny] [--op OP]\n"
        "                       [--since DURATION|TIME] [--limit N] [--format table|json|csv]\n"
        "       sbx-audit tail  [--agent NAME] [--decision allow|deny] [--op OP]\n"
        "                       [--since DURATION|TIME] [--limit N] [--format table|json|csv]\n"
        "       sbx-audit stats [--agent NAME]\n"
        "       sbx-audit verify\n"
        "       sbx-audit agents\n"
        "\n"
        "query   print the matching events, oldest first (--limit N: the N newest)\n"
        "tail    print the last N (default 10) matching events, then follow new\n"
        "        ones until interrupted\n"
        "stats   per agent: events, denials by op, top denied targets, first and\n"
        "        last seen; the store's size\n"
        "verify  walk the hash chain and compare the head file; exit 1 naming the\n"
        "        first bad row\n"
        "agents  running and past agents: name, run id, start, end, status, killer\n"
        "\n"
        "DURATION is N followed by ms, s, m, h or d (back from now); TIME is\n"
        "2026-12-02T14:00:00Z, '2026-12-02 14:00:00' or 2026-12-02 (UTC).\n"
        "The store is $SBX_AUDIT_DB, else $XDG_STATE_HOME/sbx/audit.db, else\n"
        "~/.local/state/sbx/audit.db (/var/lib/sbx/audit.db for root).\n"
        "Exit 0 ok, 1 verify failed or no store, 2 bad usage.\n");
}

static _Noreturn void bad_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "sbx-audit: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    usage(stderr);
    exit(2);
}

struct opts {
    struct audit_filter f;
    enum afmt fmt;
    bool have_limit;
};

static void parse_filters(int argc, char **argv, struct opts *o, bool stats_only)
{
    memset(o, 0, sizeof *o);
    for (int i = 0; i < argc; i += 2) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--agent") == 0 && v) {
            o->f.agent = v;
        } else if (stats_only) {
            bad_usage("unexpected argument %s", a);
        } else if (strcmp(a, "--decision") == 0 && v) {
            if (strcmp(v, "allow") != 0 && strcmp(v, "deny") != 0)
                bad_usage("--decision takes allow or deny, not '%s'", v);
            o->f.decision = v;
        } else if (strcmp(a, "--op") == 0 && v) {
            if (sbx_op_parse(v) < 0)
                bad_usage("unknown op '%s'", v);
            o->f.op = v;
        } else if (strcmp(a, "--since") == 0 && v) {
            if (afmt_parse_since(v, &o->f.since_ns) < 0)
                bad_usage("--since: '%s' is neither a duration (10m) nor a time", v);
        } else if (strcmp(a, "--limit") == 0 && v) {
            const char *e;
            o->f.limit = strtonum(v, 1, 1000000000, &e);
            if (e)
                bad_usage("--limit: '%s' is not a positive number", v);
            o->have_limit = true;
        } else if (strcmp(a, "--format") == 0 && v) {
            if (strcmp(v, "table") == 0)
                o->fmt = AFMT_TABLE;
            else if (strcmp(v, "json") == 0)
                o->fmt = AFMT_JSON;
            else if (strcmp(v, "csv") == 0)
                o->fmt = AFMT_CSV;
            else
                bad_usage("--format takes table, json or csv, not '%s'", v);
        } else {
            bad_usage("unexpected argument %s", a);
        }
    }
}

static struct audit_store *open_store(char *path, size_t pathsz)
{
    char err[1024];
    struct audit_store *st;
    if (sbx_path_audit_db(path, pathsz) < 0) {
        fprintf(stderr, "sbx-audit: cannot locate the audit store: %s\n", strerror(errno));
        exit(1);
    }
    if (audit_store_open(path, true, &st, err, sizeof err) < 0) {
        fprintf(stderr, "sbx-audit: %s\n", err);
        exit(1);
    }
    return st;
}

/* ---- query, tail --------------------------------------------------------- */

struct print_ctx {
    enum afmt fmt;
    struct afmt_table t;
    int64_t last_id;
    long n;
};

static int measure_cb(const struct audit_row *r, void *arg)
{
    struct afmt_table *t = arg;
    int la = r->agent ? (int)strlen(r->agent) : 1, lo = (int)strlen(r->op ? r->op : "-");
    int lt = (int)strlen(r->target ? r->target : "-") +
             (r->target2 ? (int)strlen(r->target2) + 4 : 0);
    if (la > t->w_agent)
        t->w_agent = la > 24 ? 24 : la;
    if (lo > t->w_op)
        t->w_op = lo;
    if (lt > t->w_target)
        t->w_target = lt > 60 ? 60 : lt;
    return 0;
}

static int print_cb(const struct audit_row *r, void *arg)
{
    struct print_ctx *p = arg;
    afmt_row(p->fmt, &p->t, r);
    p->last_id = r->id;
    p->n++;
    return ferror(stdout) ? 1 : 0;
}

static int cmd_query(int argc, char **argv)
{
    struct opts o;
    parse_filters(argc, argv, &o, false);
    char path[4096], err[1024];
    struct audit_store *st = open_store(path, sizeof path);
    struct print_ctx p = { .fmt = o.fmt, .t = { isatty(1), 5, 2, 6 } };
    int rc = 0;
    /* One read transaction: the widths pass and the print pass see the same
     * snapshot. */
    sqlite3_exec(audit_store_db(st), "BEGIN", NULL, NULL, NULL);
    if (o.fmt == AFMT_TABLE &&
        audit_store_query(st, &o.f, measure_cb, &p.t, err, sizeof err) < 0)
        goto fail;
    afmt_header(o.fmt, &p.t);
    if (audit_store_query(st, &o.f, print_cb, &p, err, sizeof err) < 0)
        goto fail;
    if (o.fmt == AFMT_TABLE && p.n == 0)
        printf("(no matching events)\n");
    goto out;
fail:
    fprintf(stderr, "sbx-audit: %s\n", err);
    rc = 1;
out:
    sqlite3_exec(audit_store_db(st), "COMMIT", NULL, NULL, NULL);
    audit_store_close(st);
    return rc;
}

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

static int cmd_tail(int argc, char **argv)
{
    struct opts o;
    parse_filters(argc, argv, &o, false);
    if (!o.have_limit)
        o.f.limit = 10;
    char path[4096], err[1024];
    struct audit_store *st = open_store(path, sizeof path);
    struct print_ctx p = { .fmt = o.fmt, .t = { isatty(1), 12, 12, 40 } };
    struct sigaction sa = { .sa_handler = on_sigint };
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);
    afmt_header(o.fmt, &p.t);
    if (audit_store_query(st, &o.f, print_cb, &p, err, sizeof err) < 0)
        goto fail;
    /* Then follow: everything after the last row printed (or, when nothing
     * matched yet, after the newest row of the store). */
    if (p.n == 0) {
        sqlite3_stmt *q;
        if (sqlite3_prepare_v2(audit_store_db(st), "SELECT coalesce(max(id), 0) FROM events",
                               -1, &q, NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
            p.last_id = sqlite3_column_int64(q, 0);
        sqlite3_finalize(q);
    }
    o.f.limit = 0;
    while (!interrupted) {
        struct timespec ts = { 0, 150000000 };
        nanosleep(&ts, NULL);
        o.f.after_id = p.last_id;
        if (audit_store_query(st, &o.f, print_cb, &p, err, sizeof err) < 0)
            goto fail;
        if (ferror(stdout))
            break;
    }
    audit_store_close(st);
    return 0;
fail:
    fprintf(stderr, "sbx-audit: %s\n", err);
    audit_store_close(st);
    return 1;
}

/* ---- stats, agents, verify ----------------------------------------------- */

static void fmt_ts_or_dash(sqlite3_stmt *q, int col, char *out, size_t outsz)
{
    if (sqlite3_column_type(q, col) == SQLITE_NULL)
        strlcpy(out, "-", outsz);
    else
        afmt_time(sqlite3_column_int64(q, col), out, outsz);
}

static int cmd_stats(int argc, char **argv)
{
    struct opts o;
    parse_filters(argc, argv, &o, true);
    char path[4096];
    struct audit_store *st = open_store(path, sizeof path);
    sqlite3 *db = audit_store_db(st);
    sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
    sqlite3_stmt *q = NULL, *q2 = NULL, *q3 = NULL;
    int rc = 1;
    if (sqlite3_prepare_v2(db, "SELECT agent, count(*), sum(decision = 'deny'), min(ts), max(ts)"
                           " FROM events WHERE ?1 IS NULL OR agent = ?1 GROUP BY agent"
                           " ORDER BY min(ts)", -1, &q, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "SELECT op, count(*) FROM events WHERE agent IS ?1 AND"
                           " decision = 'deny' GROUP BY op ORDER BY 2 DESC, 1", -1, &q2, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "SELECT target, count(*) FROM events WHERE agent IS ?1 AND"
                           " decision = 'deny' GROUP BY target ORDER BY 2 DESC, 1 LIMIT 5",
                           -1, &q3, NULL) != SQLITE_OK)
        goto out;
    if (o.f.agent)
        sqlite3_bind_text(q, 1, o.f.agent, -1, SQLITE_STATIC);
    int nagents = 0;
    while (sqlite3_step(q) == SQLITE_ROW) {
        const char *agent = (const char *)sqlite3_column_text(q, 0);
        char first[48], last[48];
        fmt_ts_or_dash(q, 3, first, sizeof first);
        fmt_ts_or_dash(q, 4, last, sizeof last);
        int64_t n = sqlite3_column_int64(q, 1), den = sqlite3_column_int64(q, 2);
        nagents++;
        printf("agent %s\n  events     %lld (%lld denied)\n  first seen %s\n  last seen  %s\n",
               agent ? agent : "(none: daemon records)", (long long)n, (long long)den, first, last);
        sqlite3_reset(q2);
        sqlite3_reset(q3);
        if (agent) {
            sqlite3_bind_text(q2, 1, agent, -1, SQLITE_TRANSIENT);
            sqlite3_bind_text(q3, 1, agent, -1, SQLITE_TRANSIENT);
        } else {
            sqlite3_bind_null(q2, 1);
            sqlite3_bind_null(q3, 1);
        }
        if (den) {
            printf("  denials by op:");
            while (sqlite3_step(q2) == SQLITE_ROW)
                printf(" %s %lld", sqlite3_column_text(q2, 0), (long long)sqlite3_column_int64(q2, 1));
            printf("\n  top denied targets:\n");
            while (sqlite3_step(q3) == SQLITE_ROW) {
                const char *t = (const char *)sqlite3_column_text(q3, 0);
                printf("    %6lld  %s\n", (long long)sqlite3_column_int64(q3, 1), t ? t : "-");
            }
        }
    }
    if (nagents == 0)
        printf(o.f.agent ? "no events of agent %s\n" : "no events%s\n", o.f.agent ? o.f.agent : "");
    struct stat sb;
    long long bytes = 0;
    char wal[4200];
    if (stat(path, &sb) == 0)
        bytes += sb.st_size;
    snprintf(wal, sizeof wal, "%s-wal", path);
    if (stat(wal, &sb) == 0)
        bytes += sb.st_size;
    sqlite3_stmt *c = NULL;
    long long rows = 0;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM events", -1, &c, NULL) == SQLITE_OK &&
        sqlite3_step(c) == SQLITE_ROW)
        rows = sqlite3_column_int64(c, 0);
    sqlite3_finalize(c);
    printf("store %s: %lld bytes, %lld rows\n", path, bytes, rows);
    rc = 0;
out:
    if (rc)
        fprintf(stderr, "sbx-audit: %s\n", sqlite3_errmsg(db));
    sqlite3_finalize(q);
    sqlite3_finalize(q2);
    sqlite3_finalize(q3);
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    audit_store_close(st);
    return rc;
}

static bool daemon_running(void)
{
    char p[4096];
    if (sbx_path_runtime_file(SBX_CONTROL_SOCK, p, sizeof p) < 0)
        return false;
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa;
    int dfd = -1;
    if (s < 0 || sbx_unix_addr(p, &sa, &dfd) < 0) {
        if (s >= 0)
            close(s);
        return false;
    }
    bool up = connect(s, (struct sockaddr *)&sa, sizeof sa) == 0;
    if (dfd >= 0)
        close(dfd);
    close(s);
    return up;
}

static int cmd_agents(int argc, char **argv)
{
    (void)argv;
    if (argc)
        bad_usage("unexpected argument %s", argv[0]);
    char path[4096];
    struct audit_store *st = open_store(path, sizeof path);
    sqlite3 *db = audit_store_db(st);
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(db, "SELECT name, run_id, started, ended, exit_status, exit_detail,"
                           " killed_by, kill_reason, policy_name FROM agents ORDER BY id",
                           -1, &q, NULL) != SQLITE_OK) {
        fprintf(stderr, "sbx-audit: %s\n", sqlite3_errmsg(db));
        audit_store_close(st);
        return 1;
    }
    bool up = daemon_running();
    printf("%-20s %-12s %-27s %-27s %-24s %s\n", "NAME", "RUN", "STARTED", "ENDED", "STATUS",
           "KILLED BY");
    while (sqlite3_step(q) == SQLITE_ROW) {
        char started[48], ended[48], status[128], killed[512];
        fmt_ts_or_dash(q, 2, started, sizeof started);
        fmt_ts_or_dash(q, 3, ended, sizeof ended);
        if (sqlite3_column_type(q, 3) == SQLITE_NULL)
            strlcpy(status, up ? "running" : "no end recorded", sizeof status);
        else
            snprintf(status, sizeof status, "%lld (%s)", (long long)sqlite3_column_int64(q, 4),
                     sqlite3_column_text(q, 5) ? (const char *)sqlite3_column_text(q, 5) : "-");
        if (sqlite3_column_type(q, 6) == SQLITE_NULL)
            strlcpy(killed, "-", sizeof killed);
        else
            snprintf(killed, sizeof killed, "%s: %s", sqlite3_column_text(q, 6),
                     sqlite3_column_text(q, 7) ? (const char *)sqlite3_column_text(q, 7) : "");
        printf("%-20s %-12s %-27s %-27s %-24s %s\n", sqlite3_column_text(q, 0),
               sqlite3_column_text(q, 1), started, ended, status, killed);
    }
    sqlite3_finalize(q);
    audit_store_close(st);
    return 0;
}

static int cmd_verify(int argc, char **argv)
{
    if (argc)
        bad_usage("unexpected argument %s", argv[0]);
    char path[4096], err[1024];
    struct audit_store *st = open_store(path, sizeof path);
    struct audit_verify res;
    int rc = audit_store_verify(st, &res, err, sizeof err);
    audit_store_close(st);
    if (rc < 0) {
        fprintf(stderr, "sbx-audit: %s\n", err);
        return 1;
    }
    if (res.ok) {
        printf("%s\n", res.msg);
        return 0;
    }
    fprintf(stderr, "sbx-audit: verify FAILED: %s\n", res.msg);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "query") == 0)
        return cmd_query(argc - 2, argv + 2);
    if (strcmp(cmd, "tail") == 0)
        return cmd_tail(argc - 2, argv + 2);
    if (strcmp(cmd, "stats") == 0)
        return cmd_stats(argc - 2, argv + 2);
    if (strcmp(cmd, "verify") == 0)
        return cmd_verify(argc - 2, argv + 2);
    if (strcmp(cmd, "agents") == 0)
        return cmd_agents(argc - 2, argv + 2);
    bad_usage("unknown command '%s'", cmd);
}
