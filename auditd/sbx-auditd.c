/*
 * sbx-auditd — the audit daemon: one per user and runtime directory.
 * Takes events from the agents' rings and from sbx-guard, stores them in the
 * SQLite audit store with a hash chain, keeps the registry of running agents
 * and carries out kills.  Usually started on demand by sbx_ctl_open().
 *
 *   sbx-auditd [--retain DURATION] [--max-size SIZE] [--export URL]
 *              [--log FILE [--log-max SIZE]]
 *   sbx-auditd --help | --version
 *
 * Started on demand, it takes --retain and --max-size from
 * SBX_AUDITD_RETAIN and SBX_AUDITD_MAX_SIZE when they are not given (the
 * environment of the sbx-guard that starts it).
 *
 * Exit 0 after SIGTERM or when another daemon already runs, 1 when it
 * cannot start, 2 bad usage (sbx-auditd(8)).
 */
#include <err.h>
#include <errno.h>
#include <getopt.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bsd/libutil.h>

#include "daemon.h"
#include "duration.h"
#include "export.h"
#include "size.h"
#include "paths.h"
#include "version.h"

#define EXIT_USAGE 2

static const char synopsis[] =
    "usage: sbx-auditd [--retain DURATION] [--max-size SIZE] [--export URL]\n"
    "                  [--log FILE [--log-max SIZE]]\n"
    "       sbx-auditd --help | --version\n";

static void __attribute__((noreturn)) usage(void)
{
    fputs(synopsis, stderr);
    exit(EXIT_USAGE);
}

static void __attribute__((noreturn)) help(void)
{
    fputs(synopsis, stdout);
    fputs("\n"
          "The sbx audit daemon: stores the agents' events in the audit store and\n"
          "carries out kills.  Usually started on demand by sbx-guard.\n"
          "\n"
          "  -r, --retain DURATION  remove events older than DURATION (checked at start\n"
          "                         and every second); DURATION is a number with ms, s,\n"
          "                         m, h or d, combinable (30d, 12h, 1h30m); default\n"
          "                         $SBX_AUDITD_RETAIN, else keep everything\n"
          "  -m, --max-size SIZE    remove the oldest events when the store's used\n"
          "                         pages pass 90%% of SIZE, down to 80%% (10MiB, 1GiB);\n"
          "                         default $SBX_AUDITD_MAX_SIZE, else no cap.  Rows an\n"
          "                         export sink has not acknowledged are never removed\n"
          "  -e, --export URL       also send every committed row, as it is committed,\n"
          "                         to URL (relp://HOST:PORT, tcp://HOST:PORT,\n"
          "                         file:PATH), like sbx-audit export --follow, in\n"
          "                         a child process; default $SBX_AUDIT_EXPORT\n"
          "  -l, --log FILE         log to FILE (mode 0600), rotated to FILE.1 when it\n"
          "                         passes --log-max (default 1MiB); else stderr\n"
          "  -h, --help             this text\n"
          "  -V, --version          print the version\n"
          "\n"
          "Exit 0 after SIGTERM or when another daemon already runs, 1 when it\n"
          "cannot start, 2 bad usage.\n", stdout);
    exit(0);
}

static volatile sig_atomic_t export_stop;
static void on_export_signal(int sig)
{
    (void)sig;
    export_stop = 1;
}

/* The exporter runs in a child of its own: a collector that is slow or
 * away must never hold up the loop that drains the agents' rings, and
 * the child reads only what the daemon committed, through the store, as
 * `sbx-audit export --follow` does.  It ends with the daemon (SIGTERM on
 * the parent's death) after the batch it is sending. */
static void start_exporter(const char *to, const char *db, int pidfile_fd)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        warn("cannot start the exporter");
        return;
    }
    if (pid > 0) {
        /* Nothing else of the daemon's has children: an exporter that
         * ends is reaped by the kernel, not left a zombie. */
        signal(SIGCHLD, SIG_IGN);
        return;
    }
    /* The pid file's lock belongs to the daemon: the child's copy of the
     * descriptor would keep it held after the daemon died. */
    close(pidfile_fd);
    struct sigaction sa = { .sa_handler = on_export_signal };
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
        _exit(0);
    struct audit_export_opts o = { .db = db, .to = to, .follow = true, .stop = &export_stop };
    struct audit_export_stats st;
    char why[1024];
    if (audit_export_run(&o, &st, why, sizeof why) < 0) {
        warnx("export to %s stopped: %s", to, why);
        _exit(1);
    }
    _exit(0);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "retain", required_argument, NULL, 'r' },
        { "export", required_argument, NULL, 'e' },
        { "max-size", required_argument, NULL, 'm' },
        { "log", required_argument, NULL, 'l' },
        { "log-max", required_argument, NULL, 'L' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    struct daemon_opts o = { .log_max = 1 << 20 };
    const char *retain_arg = NULL, *size_arg = NULL;
    const char *export_to = getenv("SBX_AUDIT_EXPORT");
    int c;
    /* getopt's messages begin with argv[0]: the name err(3) uses too. */
    argv[0] = program_invocation_short_name;
    while ((c = getopt_long(argc, argv, "r:m:e:l:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'r':
            retain_arg = optarg;
            break;
        case 'm':
            size_arg = optarg;
            break;
        case 'l':
            o.log_path = optarg;
            break;
        case 'L':
            if (sbx_size_parse(optarg, &o.log_max) < 0 || o.log_max < 4096) {
                warnx("--log-max: '%s' is not a size of at least 4KiB (e.g. 1MiB)", optarg);
                usage();
            }
            break;
        case 'e':
            export_to = optarg;
            break;
        case 'h':
            help();
        case 'V':
            printf("sbx-auditd %s\n", SBX_VERSION);
            return 0;
        default:
            usage();
        }
    }
    if (optind < argc) {
        warnx("unexpected argument '%s'", argv[optind]);
        usage();
    }
    /* Started on demand, the daemon has no command line of its own: the
     * environment of whoever started it chooses (sbx-auditd(8)). */
    const char *retain_from = "--retain", *size_from = "--max-size";
    if (!retain_arg && (retain_arg = getenv("SBX_AUDITD_RETAIN")) && *retain_arg)
        retain_from = "SBX_AUDITD_RETAIN";
    if (!size_arg && (size_arg = getenv("SBX_AUDITD_MAX_SIZE")) && *size_arg)
        size_from = "SBX_AUDITD_MAX_SIZE";
    if (retain_arg && *retain_arg) {
        uint64_t ms;
        /* 0 would delete everything: retention is at least a moment. */
        if (sbx_duration_parse(retain_arg, &ms) < 0 || ms == 0 ||
            ms > (uint64_t)INT64_MAX / 1000000) {
            warnx("%s: '%s' is not a duration (a number with ms, s, m, h or d, e.g. 30d)",
                  retain_from, retain_arg);
            usage();
        }
        o.retain_ns = (int64_t)ms * 1000000;
    }
    if (size_arg && *size_arg) {
        /* Below 1 MiB the cap would be mostly SQLite's own pages. */
        if (sbx_size_parse(size_arg, &o.max_bytes) < 0 || o.max_bytes < (1u << 20)) {
            warnx("%s: '%s' is not a size of at least 1MiB (a number with KiB, MiB or GiB, "
                  "e.g. 1GiB)", size_from, size_arg);
            usage();
        }
    }
    /* What the removal rows name as their rule. */
    snprintf(o.rule, sizeof o.rule, "sbx-auditd%s%s%s%s", o.retain_ns ? " --retain " : "",
             o.retain_ns ? retain_arg : "", o.max_bytes ? " --max-size " : "",
             o.max_bytes ? size_arg : "");
    /* No allocation statistics: nothing reads them, and they take a mutex
     * on every malloc inside SQLite. */
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    umask(077);
    char rundir[4096], db[4096], pidpath[4096];
    if (sbx_path_runtime_dir(rundir, sizeof rundir) < 0 ||
        sbx_path_audit_db(db, sizeof db) < 0 ||
        sbx_path_runtime_file(SBX_PID_FILE, pidpath, sizeof pidpath) < 0)
        err(1, "cannot find the runtime directory or the store");
    char why[512];
    if (sbx_path_private_dir(SBX_DIR_RUNTIME, true, NULL, 0, why, sizeof why) < 0 ||
        sbx_path_private_dir(SBX_DIR_STORE, true, NULL, 0, why, sizeof why) < 0)
        errx(1, "%s", why);
    /* The pid file's lock is what makes one daemon: of two started at once
     * one gets the lock, the other leaves quietly.  A stale file (no lock
     * held) is simply taken over. */
    pid_t other;
    struct pidfh *pfh = pidfile_open(pidpath, 0600, &other);
    if (!pfh) {
        if (errno == EEXIST) {
            warnx("already running (pid %d)", (int)other);
            return 0;
        }
        err(1, "%s", pidpath);
    }
    pidfile_write(pfh);
    /* The log first: the exporter's child shares it. */
    if (o.log_path && daemon_log_open(o.log_path, o.log_max) < 0)
        warn("cannot open the log %s; logging to stderr", o.log_path);
    /* With export on, retention waits for the exporter's watermark. */
    o.export_on = export_to && *export_to;
    if (o.export_on)
        start_exporter(export_to, db, pidfile_fileno(pfh));
    int rc = daemon_run(rundir, db, &o);
    pidfile_remove(pfh);
    return rc;
}
