/*
 * guard_proc.h — finding and ending every process of an agent.
 *
 * sbx-guard makes itself a child subreaper, so every process the agent
 * leaves behind (double forks, setsid daemons) is re-parented to sbx-guard
 * and stays findable as one of its descendants.  Without a pid namespace
 * this is how a hard kill reaches all of them; with one, killing the
 * namespace's init is enough and this is a second sweep.
 */
#ifndef SBX_GUARD_PROC_H
#define SBX_GUARD_PROC_H

#include <sys/types.h>

/* SIGKILLs process group PGID (if > 0) and every descendant of the calling
 * process, repeating until none is left alive or TIMEOUT_MS passed (a
 * forking process can add children while we sweep).  Returns how many
 * processes were signalled; zombies are left for the caller to reap. */
int guard_kill_descendants(pid_t pgid, int timeout_ms);

/* How many live (non-zombie) descendants the calling process has. */
int guard_count_descendants(void);
/* PID is not the agent's and is never killed by the sweeps: the sbx-auditd
 * that sbx-guard restarted, which became its child (a subreaper adopts the
 * daemon's double fork).  0: none. */
void guard_spare_pid(pid_t pid);

#endif
