/*
 * sbx-auditd — the audit daemon: one per user and runtime directory.
 * Takes events from the agents' rings and from sbx-guard, stores them in the
 * SQLite audit store with a hash chain, keeps the registry of running agents
 * and carries out kills.  Usually started on demand by sbx_ctl_open().
 */
#include <err.h>
#include <sqlite3.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bsd/libutil.h>
#include <bsd/stdlib.h>

#include "daemon.h"
#include "paths.h"

static void usage(void)
{
    fprintf(stderr, "usage: sbx-auditd [--retain DURATION]\n"
                    "  DURATION: N followed by s, m, h or d (e.g. 30d)\n");
    exit(2);
}

/* "30d" -> ns; -1 if malformed. */
static int64_t parse_retain(const char *s)
{
    char *end;
    errno = 0;
    long long n = strtoll(s, &end, 10);
    if (errno || n <= 0 || end == s || end[0] == '\0' || end[1] != '\0')
        return -1;
    int64_t unit;
    switch (*end) {
    case 's': unit = 1; break;
    case 'm': unit = 60; break;
    case 'h': unit = 3600; break;
    case 'd': unit = 86400; break;
    default: return -1;
    }
    if (n > INT64_MAX / unit / 1000000000)
        return -1;
    return n * unit * 1000000000;
}

int main(int argc, char **argv)
{
    int64_t retain = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--retain") == 0 && i + 1 < argc) {
            if ((retain = parse_retain(argv[++i])) < 0)
                usage();
        } else if (strncmp(argv[i], "--retain=", 9) == 0) {
            if ((retain = parse_retain(argv[i] + 9)) < 0)
                usage();
        } else {
            usage();
        }
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
    if (sbx_mkdir_p(rundir, 0700) < 0)
        err(1, "%s", rundir);
    /* The pid file's lock is what makes one daemon: of two started at once
     * one gets the lock, the other leaves quietly.  A stale file (no lock
     * held) is simply taken over. */
    pid_t other;
    struct pidfh *pfh = pidfile_open(pidpath, 0600, &other);
    if (!pfh) {
        if (errno == EEXIST) {
            fprintf(stderr, "sbx-auditd: already running (pid %d)\n", (int)other);
            return 0;
        }
        err(1, "%s", pidpath);
    }
    pidfile_write(pfh);
    int rc = daemon_run(rundir, db, retain);
    pidfile_remove(pfh);
    return rc;
}
