/*
 * sbx-kill — stop a running agent, or all of them.
 *
 *   sbx-kill NAME [--reason TEXT] [--soft]
 *   sbx-kill --all [--reason TEXT] [--soft]
 *   sbx-kill --help | --version
 *
 * Asks sbx-auditd, which records who killed what and why (durably, before
 * anything happens) and has the agent's sbx-guard end every process of it.
 * --soft instead makes every further guarded call of the agent fail with
 * EPERM ("agent has been killed").  Never starts the daemon: no daemon means
 * no running agent.  Exit 0 done, 1 unknown agent / refused / failed,
 * 2 usage.
 */
#include <err.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auditfmt.h"
#include "ctl.h"
#include "version.h"

#define EXIT_FAILED 1
#define EXIT_USAGE  2

static const char synopsis[] =
    "usage: sbx-kill NAME [--reason TEXT] [--soft]\n"
    "       sbx-kill --all [--reason TEXT] [--soft]\n"
    "       sbx-kill --help | --version\n";

static void __attribute__((noreturn)) usage(void)
{
    fputs(synopsis, stderr);
    exit(EXIT_USAGE);
}

static void __attribute__((noreturn)) help(void)
{
    fputs(synopsis, stdout);
    fputs("\n"
        "Stops the running agent NAME (or every running agent with --all):\n"
        "sbx-auditd records the kill (who, why, when), then the agent's\n"
        "sbx-guard kills all of its processes.\n"
        "  -r, --reason TEXT  why, stored in the audit trail\n"
        "  -s, --soft         do not kill: make every further guarded call fail\n"
        "                     with EPERM instead\n"
        "  -a, --all          every running agent\n"
        "  -h, --help         this text\n"
        "  -V, --version      print the version\n"
        "Exit 0 done, 1 no such agent / refused / failed, 2 bad usage.\n", stdout);
    exit(0);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "reason", required_argument, NULL, 'r' },
        { "soft", no_argument, NULL, 's' },
        { "all", no_argument, NULL, 'a' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    const char *name = NULL, *reason = NULL;
    bool all = false, soft = false;
    int c;
    /* getopt's messages begin with argv[0]: the name err(3) uses too. */
    argv[0] = program_invocation_short_name;
    while ((c = getopt_long(argc, argv, "r:sahV", longopts, NULL)) != -1) {
        switch (c) {
        case 'r': reason = optarg; break;
        case 's': soft = true; break;
        case 'a': all = true; break;
        case 'h': help();
        case 'V': printf("sbx-kill %s\n", SBX_VERSION); return 0;
        default: usage();
        }
    }
    if (optind < argc)
        name = argv[optind++];
    if (optind < argc) {
        warnx("unexpected argument '%s'", argv[optind]);
        usage();
    }
    if (name != NULL && all) {
        warnx("a NAME or --all, not both");
        usage();
    }
    if (name == NULL && !all) {
        warnx("no agent named (give a NAME, or --all)");
        usage();
    }
    char why[512], result[1024];
    int fd = sbx_ctl_open(false, why, sizeof why);
    if (fd < 0) {
        if (errno == ENOENT || errno == ECONNREFUSED)
            errx(EXIT_FAILED, "%s: no agent is running", why);
        errx(EXIT_FAILED, "%s", why);
    }
    int rc = sbx_ctl_kill(fd, all ? NULL : name, soft, reason, result, sizeof result,
                          why, sizeof why);
    sbx_ctl_close(fd);
    if (rc < 0) {
        /* the daemon's message may quote NAME: escaped for the terminal */
        char shown[1024];
        errx(EXIT_FAILED, "%s", afmt_escape(why, shown, sizeof shown));
    }
    printf("%s\n", result);
    return 0;
}
