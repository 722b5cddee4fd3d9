/*
 * sbx-audit — read the audit store.
 *
 *   sbx-audit query [--agent NAME] [--decision allow|deny] [--op OP]
 *                   [--since DURATION|TIME] [--limit N] [--format table|json|csv]
 *   sbx-audit tail  [same filters]     follows new rows until interrupted
 *   sbx-audit stats [--agent NAME]
 *   sbx-audit verify [--against FILE]  checks the hash chain and the head file
 *                                      (and what a collector received)
 *   sbx-audit export [--to URL] [--follow] [--batch N] [--name NAME]
 *                                      ships rows as OCSF events (export.h)
 *   sbx-audit agents                   running and past agents
 *   sbx-audit --help | --version
 *
 * Opens the store ($SBX_AUDIT_DB or the default) read-only: it never blocks
 * sbx-auditd (WAL) and never starts it.  It reads through the store's
 * functions (store.h) only: the schema is the store's business.  Exit 0
 * ok, 1 verify failed or the store is missing/unreadable, 2 bad usage.
 */
#include <err.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
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
#include "export.h"
#include "ocsf.h"
#include "ops.h"
#include "paths.h"
#include "store.h"
#include "version.h"

#define EXIT_FAILED 1
#define EXIT_USAGE  2

static const char synopsis[] =
    "usage: sbx-audit query [--agent NAME] [--decision allow|deny] [--op OP]\n"
    "                       [--since DURATION|TIME] [--limit N] [--format table|json|csv|ocsf]\n"
    "       sbx-audit tail  [--agent NAME] [--decision allow|deny] [--op OP]\n"
    "                       [--since DURATION|TIME] [--limit N] [--format table|json|csv|ocsf]\n"
    "       sbx-audit stats [--agent NAME]\n"
    "       sbx-audit verify [--against FILE]\n"
    "       sbx-audit export [--to URL] [--follow] [--batch N] [--name NAME]\n"
    "       sbx-audit agents\n"
    "       sbx-audit --help | --version\n";

static void __attribute__((noreturn)) usage(void)
{
    fputs(synopsis, stderr);
    exit(EXIT_USAGE);
}

static void __attribute__((noreturn)) help(void)
{
    fputs(synopsis, stdout);
    fputs("\n"
        "query   print the matching events, oldest first (--limit N: the N newest)\n"
        "tail    print the last N (default 10) matching events, then follow new\n"
        "        ones until interrupted\n"
        "stats   per agent: events, denials by op, top denied targets, first and\n"
        "        last seen; the store's size\n"
        "verify  walk the hash chain and compare the head file; exit 1 naming the\n"
        "        first bad row.  --against FILE: also compare every row id and hash\n"
        "        and every chain head a collector received (its output file)\n"
        "export  send the rows not yet exported to URL, in batches, each followed\n"
        "        by the chain head; the watermark is kept in the store per --name\n"
        "        (default: the URL).  URL: relp://HOST:PORT (RFC 5424 over RELP,\n"
        "        acknowledged), tcp://HOST:PORT (RFC 5424, RFC 6587 octet counting),\n"
        "        file:PATH or - (OCSF JSON lines).  Default: $SBX_AUDIT_EXPORT, else -.\n"
        "        --follow keeps sending new rows until interrupted; --batch N rows\n"
        "        per batch (default 2000)\n"
        "agents  running and past agents: name, run id, start, end, status, killer\n"
        "\n"
        "Options take their value as --opt VALUE or --opt=VALUE.\n"
        "DURATION is a number with ms, s, m, h or d, combinable (10m, 1h30m; back\n"
        "from now); TIME is 2026-12-02T14:00:00Z, '2026-12-02 14:00:00' or\n"
        "2026-12-02 (UTC).\n"
        "The store is $SBX_AUDIT_DB, else $XDG_STATE_HOME/sbx/audit.db, else\n"
        "~/.local/state/sbx/audit.db (/var/lib/sbx/audit.db for root).\n"
        "Exit 0 ok, 1 verify failed or no store, 2 bad usage.\n", stdout);
    exit(0);
}

struct opts {
    struct audit_filter f;
    enum afmt fmt;
    bool ocsf;                  /* --format ocsf (fmt is then AFMT_JSON) */
    bool have_limit;
    const char *against;        /* verify --against */
    const char *to, *name;      /* export */
    bool follow;
    size_t batch;
};

/* What each command takes: query and tail every filter, stats --agent,
 * verify and agents nothing.  ARGV[0] is the command's name. */
enum { TAKES_NOTHING, TAKES_AGENT, TAKES_FILTERS, TAKES_VERIFY, TAKES_EXPORT };

static void parse_options(int argc, char **argv, int takes, struct opts *o)
{
    /* getopt's messages begin with ARGV[0]: the program's name, as err(3)'s
     * do, not the command's. */
    const char *cmd = argv[0];
    argv[0] = program_invocation_short_name;

    static const struct option all[] = {
        { "help", no_argument, NULL, 'h' },
        { "agent", required_argument, NULL, 'a' },
        { "decision", required_argument, NULL, 'd' },
        { "op", required_argument, NULL, 'o' },
        { "since", required_argument, NULL, 's' },
        { "limit", required_argument, NULL, 'l' },
        { "format", required_argument, NULL, 'f' },
        { NULL, 0, NULL, 0 },
    };
    static const struct option verify_opts[] = {
        { "help", no_argument, NULL, 'h' },
        { "against", required_argument, NULL, 'A' },
        { NULL, 0, NULL, 0 },
    };
    static const struct option export_opts[] = {
        { "help", no_argument, NULL, 'h' },
        { "to", required_argument, NULL, 'T' },
        { "follow", no_argument, NULL, 'F' },
        { "batch", required_argument, NULL, 'B' },
        { "name", required_argument, NULL, 'N' },
        { NULL, 0, NULL, 0 },
    };
    /* The table cut after what the command takes: help; agent; the rest. */
    struct option longopts[sizeof all / sizeof all[0]];
    size_t n = takes == TAKES_NOTHING || takes >= TAKES_VERIFY ? 1 : takes == TAKES_AGENT ? 2 : 7;
    memcpy(longopts, all, n * sizeof all[0]);
    longopts[n] = (struct option){ NULL, 0, NULL, 0 };
    const struct option *table = takes == TAKES_VERIFY ? verify_opts
                               : takes == TAKES_EXPORT ? export_opts : longopts;

    memset(o, 0, sizeof *o);
    const char *e;
    int c;
    while ((c = getopt_long(argc, argv, "h", table, NULL)) != -1) {
        switch (c) {
        case 'h':
            help();
        case 'a':
            o->f.agent = optarg;
            break;
        case 'd':
            if (strcmp(optarg, "allow") != 0 && strcmp(optarg, "deny") != 0) {
                warnx("--decision takes allow or deny, not '%s'", optarg);
                usage();
            }
            o->f.decision = optarg;
            break;
        case 'o':
            if (sbx_op_parse(optarg) < 0) {
                warnx("--op: unknown op '%s'", optarg);
                usage();
            }
            o->f.op = optarg;
            break;
        case 's':
            if (afmt_parse_since(optarg, &o->f.since_ns) < 0) {
                warnx("--since: '%s' is neither a duration (10m) nor a time", optarg);
                usage();
            }
            break;
        case 'l':
            o->f.limit = strtonum(optarg, 1, 1000000000, &e);
            if (e) {
                warnx("--limit: '%s' is not a positive number", optarg);
                usage();
            }
            o->have_limit = true;
            break;
        case 'f':
            if (strcmp(optarg, "table") == 0)
                o->fmt = AFMT_TABLE;
            else if (strcmp(optarg, "json") == 0)
                o->fmt = AFMT_JSON;
            else if (strcmp(optarg, "csv") == 0)
                o->fmt = AFMT_CSV;
            else if (strcmp(optarg, "ocsf") == 0) {
                o->fmt = AFMT_JSON;
                o->ocsf = true;
            } else {
                warnx("--format takes table, json, csv or ocsf, not '%s'", optarg);
                usage();
            }
            break;
        case 'A':
            o->against = optarg;
            break;
        case 'T':
            o->to = optarg;
            break;
        case 'F':
            o->follow = true;
            break;
        case 'N':
            o->name = optarg;
            break;
        case 'B':
            o->batch = (size_t)strtonum(optarg, 1, 1000000, &e);
            if (e) {
                warnx("--batch: '%s' is not a number from 1 to 1000000", optarg);
                usage();
            }
            break;
        default:
            usage();
        }
    }
    if (optind < argc) {
        warnx("%s: unexpected argument '%s'", cmd, argv[optind]);
        usage();
    }
}

/* Opens the store read-only, or exits 1 saying why. */
static struct audit_store *open_store(char *path, size_t pathsz)
{
    char why[1024];
    struct audit_store *st;
    if (sbx_path_audit_db(path, pathsz) < 0)
        err(EXIT_FAILED, "cannot locate the audit store");
    /* A store in a directory another user can change is not evidence. */
    if (sbx_path_private_dir(SBX_DIR_STORE, false, NULL, 0, why, sizeof why) < 0 && errno != ENOENT)
        errx(EXIT_FAILED, "%s", why);
    if (audit_store_open(path, true, &st, why, sizeof why) < 0)
        errx(EXIT_FAILED, "%s", why);
    return st;
}

/* ---- query, tail --------------------------------------------------------- */

/* The host's name, as OCSF's device.hostname. */
static void host_name(char *out, size_t outsz)
{
    if (gethostname(out, outsz) < 0)
        out[0] = '\0';
    out[outsz - 1] = '\0';
}

struct print_ctx {
    enum afmt fmt;
    bool ocsf;
    const char *host;
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
    if (p->ocsf) {
        char *j = audit_ocsf_json(r, p->host);
        if (!j) {
            warnx("out of memory");
            return 1;
        }
        puts(j);
        free(j);
    } else {
        afmt_row(p->fmt, &p->t, r);
    }
    p->last_id = r->id;
    p->n++;
    return ferror(stdout) ? 1 : 0;
}

static int cmd_query(int argc, char **argv)
{
    struct opts o;
    parse_options(argc, argv, TAKES_FILTERS, &o);
    char path[4096], err[1024];
    struct audit_store *st = open_store(path, sizeof path);
    char host[256];
    host_name(host, sizeof host);
    struct print_ctx p = { .fmt = o.fmt, .ocsf = o.ocsf, .host = host,
                           .t = { isatty(1), 5, 2, 6 } };
    int rc = EXIT_FAILED;
    /* One snapshot: the widths pass and the print pass see the same rows. */
    if (audit_store_read_begin(st, err, sizeof err) < 0)
        goto out;
    if (o.fmt == AFMT_TABLE &&
        audit_store_query(st, &o.f, measure_cb, &p.t, err, sizeof err) < 0)
        goto out;
    afmt_header(o.fmt, &p.t);
    if (audit_store_query(st, &o.f, print_cb, &p, err, sizeof err) < 0)
        goto out;
    if (o.fmt == AFMT_TABLE && p.n == 0)
        printf("(no matching events)\n");
    rc = 0;
out:
    if (rc)
        warnx("%s", err);
    audit_store_read_end(st);
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
    parse_options(argc, argv, TAKES_FILTERS, &o);
    if (!o.have_limit)
        o.f.limit = 10;
    char path[4096], err[1024];
    struct audit_store *st = open_store(path, sizeof path);
    char host[256];
    host_name(host, sizeof host);
    struct print_ctx p = { .fmt = o.fmt, .ocsf = o.ocsf, .host = host,
                           .t = { isatty(1), 12, 12, 40 } };
    int rc = EXIT_FAILED;
    struct sigaction sa = { .sa_handler = on_sigint };
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);
    afmt_header(o.fmt, &p.t);
    if (audit_store_query(st, &o.f, print_cb, &p, err, sizeof err) < 0)
        goto out;
    /* Then follow: everything after the last row printed (or, when nothing
     * matched yet, after the newest row of the store). */
    if (p.n == 0) {
        struct audit_totals t;
        if (audit_store_totals(st, &t, err, sizeof err) < 0)
            goto out;
        p.last_id = t.newest_id;
    }
    o.f.limit = 0;
    while (!interrupted) {
        struct timespec ts = { 0, 150000000 };
        nanosleep(&ts, NULL);
        o.f.after_id = p.last_id;
        if (audit_store_query(st, &o.f, print_cb, &p, err, sizeof err) < 0)
            goto out;
        if (ferror(stdout))
            break;
    }
    rc = 0;
out:
    if (rc)
        warnx("%s", err);
    audit_store_close(st);
    return rc;
}

/* ---- stats, agents, verify ----------------------------------------------- */

static int print_stats(const struct audit_agent_stats *a, void *arg)
{
    int *nagents = arg;
    char first[48], last[48];
    afmt_time(a->first_ns, first, sizeof first);
    afmt_time(a->last_ns, last, sizeof last);
    (*nagents)++;
    /* names and targets come from agents: escaped for the terminal */
    char esc[600];
    char would[64] = "";
    if (a->would_deny)          /* audit mode: nothing denied, this much would be */
        snprintf(would, sizeof would, ", %lld would be denied", (long long)a->would_deny);
    printf("agent %s\n  events     %lld (%lld denied%s)\n  first seen %s\n  last seen  %s\n",
           a->agent ? afmt_escape(a->agent, esc, sizeof esc) : "(none: daemon records)",
           (long long)a->events, (long long)a->denied, would, first, last);
    if (a->denied || a->would_deny) {
        printf(a->would_deny ? "  denials and would-be denials by op:" : "  denials by op:");
        for (size_t i = 0; i < a->n_denied_ops; i++)
            printf(" %s %lld", a->denied_ops[i].name, (long long)a->denied_ops[i].n);
        printf("\n  top denied targets:\n");
        for (size_t i = 0; i < a->n_denied_targets; i++)
            printf("    %6lld  %s\n", (long long)a->denied_targets[i].n,
                   a->denied_targets[i].name
                       ? afmt_escape(a->denied_targets[i].name, esc, sizeof esc) : "-");
    }
    return 0;
}

static int cmd_stats(int argc, char **argv)
{
    struct opts o;
    parse_options(argc, argv, TAKES_AGENT, &o);
    char path[4096], err[1024];
    struct audit_store *st = open_store(path, sizeof path);
    int rc = EXIT_FAILED, nagents = 0;
    struct audit_totals t;
    if (audit_store_read_begin(st, err, sizeof err) < 0 ||
        audit_store_stats(st, o.f.agent, print_stats, &nagents, err, sizeof err) < 0)
        goto out;
    char shown[300];
    if (nagents == 0)
        printf(o.f.agent ? "no events of agent %s\n" : "no events%s\n",
               o.f.agent ? afmt_escape(o.f.agent, shown, sizeof shown) : "");
    if (audit_store_totals(st, &t, err, sizeof err) < 0)
        goto out;
    struct stat sb;
    long long bytes = 0;
    char wal[4200];
    if (stat(path, &sb) == 0)
        bytes += sb.st_size;
    snprintf(wal, sizeof wal, "%s-wal", path);
    if (stat(wal, &sb) == 0)
        bytes += sb.st_size;
    printf("store %s: %lld bytes, %lld rows\n", path, bytes, (long long)t.rows);
    rc = 0;
out:
    if (rc)
        warnx("%s", err);
    audit_store_read_end(st);
    audit_store_close(st);
    return rc;
}

static bool daemon_running(void)
{
    char p[4096], why[512];
    /* A socket in a directory another user controls says nothing. */
    if (sbx_path_private_dir(SBX_DIR_RUNTIME, false, NULL, 0, why, sizeof why) < 0) {
        if (errno != ENOENT)
            warnx("%s", why);
        return false;
    }
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

static void time_or_dash(int64_t ns, char *out, size_t outsz)
{
    if (ns == 0)
        strlcpy(out, "-", outsz);
    else
        afmt_time(ns, out, outsz);
}

static int print_agent(const struct audit_agent_run *a, void *arg)
{
    const bool *daemon_up = arg;
    char started[48], ended[48], status[128], killed[512];
    time_or_dash(a->reg.started_ns, started, sizeof started);
    if (a->ended) {
        afmt_time(a->ended_ns, ended, sizeof ended);
        snprintf(status, sizeof status, "%lld (%s)", (long long)a->exit_status,
                 a->exit_detail ? a->exit_detail : "-");
    } else {
        strlcpy(ended, "-", sizeof ended);
        strlcpy(status, *daemon_up ? "running" : "no end recorded", sizeof status);
    }
    if (a->killed_by)
        snprintf(killed, sizeof killed, "%s: %s", a->killed_by,
                 a->kill_reason ? a->kill_reason : "");
    else
        strlcpy(killed, "-", sizeof killed);
    /* names, details and reasons come from agents and users: escaped */
    char e_name[300], e_status[600], e_killed[1200];
    printf("%-20s %-12s %-27s %-27s %-24s %s\n", afmt_escape(a->reg.name, e_name, sizeof e_name),
           a->reg.run_id, started, ended, afmt_escape(status, e_status, sizeof e_status),
           afmt_escape(killed, e_killed, sizeof e_killed));
    return 0;
}

static int cmd_agents(int argc, char **argv)
{
    struct opts o;
    parse_options(argc, argv, TAKES_NOTHING, &o);
    char path[4096], err[1024];
    struct audit_store *st = open_store(path, sizeof path);
    bool up = daemon_running();
    int rc = EXIT_FAILED;
    printf("%-20s %-12s %-27s %-27s %-24s %s\n", "NAME", "RUN", "STARTED", "ENDED", "STATUS",
           "KILLED BY");
    if (audit_store_agents(st, print_agent, &up, err, sizeof err) < 0)
        goto out;
    rc = 0;
out:
    if (rc)
        warnx("%s", err);
    audit_store_close(st);
    return rc;
}

static int cmd_verify(int argc, char **argv)
{
    struct opts o;
    parse_options(argc, argv, TAKES_VERIFY, &o);
    char path[4096], err[1024];
    struct audit_store *st = open_store(path, sizeof path);
    struct audit_verify res;
    int rc = EXIT_FAILED;
    if (audit_store_verify(st, &res, err, sizeof err) < 0) {
        warnx("%s", err);
        goto out;
    }
    /* Against a collector's copy: the store may verify on its own (the
     * host rewrote it and its head file together) and still differ from
     * what left the machine.  Both are reported. */
    struct audit_anchor_check ac = { .ok = true };
    if (o.against && audit_anchor_check(st, o.against, &ac, err, sizeof err) < 0) {
        warnx("%s", err);
        goto out;
    }
    if (!res.ok)
        warnx("verify FAILED: %s", res.msg);
    if (!ac.ok)
        warnx("verify --against FAILED: %s", ac.msg);
    if (!res.ok || !ac.ok)
        goto out;
    printf("%s\n", res.msg);
    if (o.against)
        printf("%s\n", ac.msg);
    rc = 0;
out:
    audit_store_close(st);
    return rc;
}

static volatile sig_atomic_t export_stop;
static void on_export_signal(int sig)
{
    (void)sig;
    export_stop = 1;
}

static int cmd_export(int argc, char **argv)
{
    struct opts o;
    parse_options(argc, argv, TAKES_EXPORT, &o);
    char path[4096], why[1024];
    if (sbx_path_audit_db(path, sizeof path) < 0)
        err(EXIT_FAILED, "cannot locate the audit store");
    if (sbx_path_private_dir(SBX_DIR_STORE, false, NULL, 0, why, sizeof why) < 0 && errno != ENOENT)
        errx(EXIT_FAILED, "%s", why);
    const char *env = getenv("SBX_AUDIT_EXPORT");
    struct audit_export_opts eo = {
        .db = path, .to = o.to ? o.to : env && *env ? env : "-", .mark = o.name,
        .batch = o.batch, .follow = o.follow, .stop = &export_stop,
    };
    struct sigaction sa = { .sa_handler = on_export_signal };
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* A collector that goes away mid-send is an error to retry, not a
     * reason to die (librelp writes without MSG_NOSIGNAL). */
    signal(SIGPIPE, SIG_IGN);
    struct audit_export_stats s;
    if (audit_export_run(&eo, &s, why, sizeof why) < 0) {
        warnx("export to %s: %s (watermark row %lld)", eo.to, why, (long long)s.mark_id);
        return EXIT_FAILED;
    }
    fprintf(stderr, "sbx-audit: exported %lld rows in %lld batches to %s in %.2f s (%.0f rows/s); "
            "watermark row %lld\n", (long long)s.rows, (long long)s.batches, eo.to, s.seconds,
            s.seconds > 0 ? (double)s.rows / s.seconds : 0.0, (long long)s.mark_id);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(int argc, char **argv);
    } cmds[] = {
        { "query", cmd_query }, { "tail", cmd_tail }, { "stats", cmd_stats },
        { "verify", cmd_verify }, { "agents", cmd_agents }, { "export", cmd_export },
    };
    static const struct option longopts[] = {
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    /* getopt's messages begin with argv[0]: the name err(3) uses too. */
    argv[0] = program_invocation_short_name;
    /* '+': the options before the command are sbx-audit's own; the
     * command's are parsed by the command. */
    while ((c = getopt_long(argc, argv, "+hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'h':
            help();
        case 'V':
            printf("sbx-audit %s\n", SBX_VERSION);
            return 0;
        default:
            usage();
        }
    }
    if (optind >= argc)
        usage();
    const char *cmd = argv[optind];
    if (strcmp(cmd, "help") == 0)
        help();
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (strcmp(cmd, cmds[i].name) == 0) {
            /* The command parses from its own name on: a fresh getopt. */
            argc -= optind;
            argv += optind;
            optind = 0;
            return cmds[i].run(argc, argv);
        }
    warnx("unknown command '%s'", cmd);
    usage();
}
