/*
 * sbx-kill — stop a running agent, or all of them.
 *
 *   sbx-kill NAME [--reason TEXT] [--soft]
 *   sbx-kill --all [--reason TEXT] [--soft]
 *
 * Asks sbx-auditd, which records who killed what and why (durably, before
 * anything happens) and has the agent's sbx-guard end every process of it.
 * --soft instead makes every further guarded call of the agent fail with
 * EPERM ("agent has been killed").  Never starts the daemon: no daemon means
 * no running agent.  Exit 0 done, 1 unknown agent / refused / failed,
 * 2 usage.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"

static void usage(FILE *f)
{
    fprintf(f,
        "usage: sbx-kill NAME [--reason TEXT] [--soft]\n"
        "       sbx-kill --all [--reason TEXT] [--soft]\n"
        "\n"
        "Stops the running agent NAME (or every running agent with --all):\n"
        "sbx-auditd records the kill (who, why, when), then the agent's\n"
        "sbx-guard kills all of its processes.\n"
        "  --reason TEXT  why, stored in the audit trail\n"
        "  --soft         do not kill: make every further guarded call fail\n"
        "                 with EPERM instead\n"
        "Exit 0 done, 1 no such agent / refused / failed, 2 bad usage.\n");
}

int main(int argc, char **argv)
{
    const char *name = NULL, *reason = NULL;
    bool all = false, soft = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--all") == 0) {
            all = true;
        } else if (strcmp(a, "--soft") == 0) {
            soft = true;
        } else if (strcmp(a, "--reason") == 0 && i + 1 < argc) {
            reason = argv[++i];
        } else if (strncmp(a, "--reason=", 9) == 0) {
            reason = a + 9;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "sbx-kill: unknown option %s\n", a);
            usage(stderr);
            return 2;
        } else if (!name) {
            name = a;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if ((name == NULL) == !all) {
        usage(stderr);
        return 2;
    }
    char err[512], result[1024];
    int fd = sbx_ctl_open(false, err, sizeof err);
    if (fd < 0) {
        fprintf(stderr, "sbx-kill: %s: no agent is running\n", err);
        return 1;
    }
    int rc = sbx_ctl_kill(fd, all ? NULL : name, soft, reason, result, sizeof result,
                          err, sizeof err);
    sbx_ctl_close(fd);
    if (rc < 0) {
        fprintf(stderr, "sbx-kill: %s\n", err);
        return 1;
    }
    printf("%s\n", result);
    return 0;
}
