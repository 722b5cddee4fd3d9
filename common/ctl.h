/*
 * ctl.h — the client side of sbx-auditd's control protocol (ctlmsg.h has
 * the wire format and the verbs), used by sbx-guard, sbx-audit, sbx-kill
 * and the tests: connect (starting the daemon if asked), register an agent
 * and report for it, receive and confirm kill orders, kill, sync.
 *
 * Memory: nothing here allocates except the small per-connection command
 * stash.  Errors: 0 / -1; ERR buffers get a one-line message.  A registered
 * connection must be used by one thread at a time.
 */
#ifndef SBX_CTL_H
#define SBX_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ctlmsg.h"
#include "event.h"

/* The longest command and kill reason sent (NUL included): longer ones are
 * clipped with a marker, length and hash (clip.h).  Both leave room in a
 * message for the other fields even when escaping doubles every byte. */
#define SBX_CTL_COMMAND_MAX (SBX_EV_TARGET_MAX + 1)   /* the start row's target */
#define SBX_CTL_REASON_MAX  256     /* what the daemon keeps (daemon.h) */

/* ---- client API ---------------------------------------------------------- */

/* Connects to control.sock; if AUTOSTART and no daemon answers, starts
 * sbx-auditd (beside the running executable, else from PATH) and waits for
 * it (up to ~5 s).  fd or -1 with ERR. */
int sbx_ctl_open(bool autostart, char *err, size_t errsz);

struct sbx_agent_reg {
    const char *name;          /* unique among running agents; NULL or "" -> error */
    const char *policy_name, *policy_sha256, *policy_file, *workspace;
    const char *command;       /* argv joined by spaces (clipped: SBX_CTL_COMMAND_MAX) */
    const char *layers;        /* "guard,userns,..." what isolation is active */
    pid_t guard_pid;
};

/* Registers the agent on FD (the connection stays the agent's: its hangup
 * ends the registration).  Writes the `start` row durably.  Fills RUN_ID and
 * TOKEN (secret; handed to the preload via env so its rings are attributed).
 * 0, or -1 with ERR (e.g. "an agent named 'coder' is already running"). */
int sbx_ctl_register(int fd, const struct sbx_agent_reg *reg, char *run_id, size_t run_id_sz,
                     char *token, size_t token_sz, char *err, size_t errsz);

/* After the daemon that registered an agent died: takes the run back on FD
 * (a connection to a new daemon) with the RUN_ID and TOKEN the first one
 * gave, so that the agent's rings are accepted again and its exit is
 * recorded.  The store must hold that run of NAME, not ended.  0, or -1
 * with ERR. */
int sbx_ctl_resume(int fd, const char *name, const char *run_id, const char *token,
                   pid_t guard_pid, char *err, size_t errsz);

/* Sends one event on behalf of the registered agent (layer sbx, supervisor
 * or kernel records from sbx-guard); pid is the guard's.  Lifecycle ops
 * (start, exit, kill, policy-error) are committed durably before the reply.
 * 0 / -1. */
int sbx_ctl_event(int fd, const struct sbx_event_desc *ev);

/* The same, without waiting: the message says noreply=1 and the daemon
 * sends no answer (an event it refuses goes to its log).  -1 only when the
 * message could not be sent (the daemon is gone).  For a sender that must
 * not stall on the daemon: sbx-guard's supervisor, whose next notification
 * would otherwise wait for a round trip to sbx-auditd per exec. */
int sbx_ctl_event_async(int fd, const struct sbx_event_desc *ev);

/* Added: the same, for an event done by agent process PID (e.g. what the
 * supervisor saw). */
int sbx_ctl_event_pid(int fd, const struct sbx_event_desc *ev, pid_t pid);

/* The EVENT message of EV (and PID when > 0) into B, without sending it:
 * for a sender that adds keys of its own and keeps the message to send it
 * again (sbx-guard's supervisor rows, tools/guard_sup.h). */
void sbx_ctl_event_format(struct sbx_msgbuf *b, const struct sbx_event_desc *ev, pid_t pid);

/* After the agent ended: writes the `exit` row (STATUS as sbx-guard will
 * exit with, DETAIL e.g. "exited 0", "killed by signal 9") durably and ends
 * the registration.  0 / -1. */
int sbx_ctl_exit(int fd, int status, const char *detail);

enum { SBX_CMD_KILL_HARD = 1, SBX_CMD_KILL_SOFT = 2 };

/* Commands pushed by the daemon to a registered guard's fd.  Poll FD for
 * POLLIN, and also call sbx_ctl_cmd_pending() after any request on FD: a
 * command that arrived while a request waited for its reply is kept aside
 * there, and poll() does not see it.  The daemon sends each command once
 * and gives the guard 5 s to confirm a hard kill. */
struct sbx_ctl_cmd {
    int kind;                   /* SBX_CMD_KILL_HARD, SBX_CMD_KILL_SOFT */
    char by[64];
    char reason[256];
    uint64_t req_id;
};
/* 1 got one, 0 fd closed, -1 error.  Blocks unless one is pending. */
int sbx_ctl_recv_cmd(int fd, struct sbx_ctl_cmd *cmd);
/* Added: true if a command for FD was kept aside during a request. */
bool sbx_ctl_cmd_pending(int fd);
/* The guard reports the kill was carried out: RESULT 0 / -1, DETAIL e.g.
 * "3 processes".  0 / -1. */
int sbx_ctl_cmd_done(int fd, uint64_t req_id, int result, const char *detail);

/* Kill request from sbx-kill: NAME, or NULL for every running agent.  0 and
 * RESULT ("killed coder (3 processes)"), or -1 with ERR ("no running agent
 * named 'x'"). */
int sbx_ctl_kill(int fd, const char *name, bool soft, const char *reason,
                 char *result, size_t resultsz, char *err, size_t errsz);

/* Added: waits until the daemon has drained every ring and committed what it
 * holds.  0 and *LAST_ID (may be NULL) = the last committed row, or -1. */
int sbx_ctl_sync(int fd, int64_t *last_id, char *err, size_t errsz);

/* Added: forget FD's client state (the stash) and close it. */
void sbx_ctl_close(int fd);

#endif
