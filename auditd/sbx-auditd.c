/*
 * sbx-auditd — the audit daemon: one per user and runtime directory.
 * Takes events from the agents' rings and from sbx-guard, stores them in the
 * SQLite audit store with a hash chain, keeps the registry of running agents
 * and carries out kills.  Usually started on demand by sbx_ctl_open().
 *
 *   sbx-auditd [--retain DURATION]
 *   sbx-auditd --help | --version
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
#include <sys/stat.h>
#include <unistd.h>

#include <bsd/libutil.h>

#include "daemon.h"
#include "duration.h"
#include "paths.h"
#include "version.h"

#define EXIT_USAGE 2

static const char synopsis[] =
    "usage: sbx-auditd [--retain DURATION]\n"
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
          "  -r, --retain DURATION  delete events older than DURATION at start and\n"
          "                         hourly; DURATION is a number with ms, s, m, h or\n"
          "                         d, combinable (30d, 12h, 1h30m)\n"
          "  -h, --help             this text\n"
          "  -V, --version          print the version\n"
          "\n"
          "Exit 0 after SIGTERM or when another daemon already runs, 1 when it\n"
          "cannot start, 2 bad usage.\n", stdout);
    exit(0);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "retain", required_argument, NULL, 'r' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    int64_t retain = 0;
    uint64_t ms;
    int c;
    /* getopt's messages begin with argv[0]: the name err(3) uses too. */
    argv[0] = program_invocation_short_name;
    while ((c = getopt_long(argc, argv, "r:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'r':
            /* 0 would delete everything: retention is at least a moment. */
            if (sbx_duration_parse(optarg, &ms) < 0 || ms == 0 ||
                ms > (uint64_t)INT64_MAX / 1000000) {
                warnx("--retain: '%s' is not a duration (a number with ms, s, m, h or d, "
                      "e.g. 30d)", optarg);
                usage();
            }
            retain = (int64_t)ms * 1000000;
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
    /* One thread, so no allocation statistics (they take a mutex on every
     * malloc inside SQLite). */
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
    int rc = daemon_run(rundir, db, retain);
    pidfile_remove(pfh);
    return rc;
}
