/*
 * preload_agent — a stand-in for sbx-guard in the preload's tests: no
 * isolation and no policy of its own (the caller puts LD_PRELOAD and
 * SBX_POLICY_FILE into the command's environment, usually with env(1), so
 * that this program itself is not guarded).
 *
 *   preload_agent NAME CMD [ARG...]
 *
 * Registers agent NAME with sbx-auditd (starting it if needed), runs CMD
 * with SBX_AGENT, SBX_AGENT_ID and SBX_AGENT_TOKEN set, waits for it, waits
 * until the daemon has stored every event, records the exit and exits with
 * CMD's status (128+N for a signal).  125 when it could not do that.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ctl.h"

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: preload_agent NAME CMD [ARG...]\n");
        return 125;
    }
    char err[512], run_id[64], token[80];
    int fd = sbx_ctl_open(true, err, sizeof err);
    if (fd < 0) {
        fprintf(stderr, "preload_agent: %s\n", err);
        return 125;
    }
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd))
        strcpy(cwd, "/");
    struct sbx_agent_reg reg = {
        .name = argv[1], .policy_name = "test", .policy_sha256 = "",
        .policy_file = getenv("SBX_POLICY_FILE"), .workspace = cwd,
        .command = argv[2], .layers = "guard", .guard_pid = getpid(),
    };
    if (sbx_ctl_register(fd, &reg, run_id, sizeof run_id, token, sizeof token, err,
                         sizeof err) < 0) {
        fprintf(stderr, "preload_agent: register: %s\n", err);
        return 125;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("preload_agent: fork");
        return 125;
    }
    if (pid == 0) {
        close(fd);
        setenv("SBX_AGENT", argv[1], 1);
        setenv("SBX_AGENT_ID", run_id, 1);
        setenv("SBX_AGENT_TOKEN", token, 1);
        execvp(argv[2], argv + 2);
        fprintf(stderr, "preload_agent: %s: %s\n", argv[2], strerror(errno));
        _exit(127);
    }
    int st, rc;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (sbx_ctl_sync(fd, NULL, err, sizeof err) < 0)
        fprintf(stderr, "preload_agent: sync: %s\n", err);
    char detail[64];
    snprintf(detail, sizeof detail, "exited %d", rc);
    sbx_ctl_exit(fd, rc, detail);
    sbx_ctl_close(fd);
    return rc;
}
