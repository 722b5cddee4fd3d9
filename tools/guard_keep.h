/*
 * guard_keep.h — sbx-guard's keeper of its agent's event rings: the ring
 * hand-over that keeps a SIGKILLed process's events across a daemon crash.
 *
 * Why.  Each agent process writes its events into a ring of shared memory
 * (a memfd, common/ring.h) that only it and sbx-auditd hold.  If the daemon
 * is SIGKILLed, a process that is SIGKILLed too before it hands its ring
 * to the restarted daemon (at exec, exit or a full ring: preload/emit.c)
 * takes with it the events the dead daemon had not committed.  So
 * sbx-guard, which outlives its agent's processes, holds a copy of every
 * ring: on a second connection to control.sock (KEEP run_id token) the
 * daemon sends it each ring it registers for the agent ("RING" pid uid
 * since, with SCM_RIGHTS {memfd, pidfd}).  When the daemon dies and
 * sbx-guard has started another and resumed its run, it hands every ring
 * it keeps to the new daemon (ADOPT, the same descriptors), which checks
 * each as hostile memory and drains what is left in it from the tail the
 * first daemon published after its last commit: nothing committed twice,
 * nothing the dead daemon had not committed lost.
 *
 * What is kept.  A ring whose process has exited and whose events the
 * daemon has all taken (its published tail at its head) is let go; the
 * rest are kept, at most GUARD_KEEP_MAX (the descriptor limit permitting:
 * guard_keep_open raises the soft limit to the hard one, after the agent
 * has started with its own).  Past that, the oldest ring of an exited
 * process goes first, and sbx-guard says so once.
 *
 * The same connection carries the daemon's acknowledgements of sbx-guard's
 * supervisor rows (guard_sup.h): "ACK seq=N" after each commit.
 *
 * Memory: guard_keep_open allocates the keeper; guard_keep_close frees it
 * and closes every descriptor.  Errors: -1 with ERR.
 */
#ifndef SBX_GUARD_KEEP_H
#define SBX_GUARD_KEEP_H

#include <stddef.h>
#include <stdint.h>

#define GUARD_KEEP_MAX 16384

struct guard_keep;

/* Connects to the running daemon's control.sock and asks for the rings of
 * run RUN_ID (TOKEN: its secret).  Must come from the process that
 * registered the run.  NULL with ERR. */
struct guard_keep *guard_keep_open(const char *run_id, const char *token, char *err,
                                   size_t errsz);

/* The descriptor to poll for rings (POLLIN); -1 while disconnected. */
int guard_keep_fd(const struct guard_keep *gk);

/* Takes every ring the daemon has sent.  0, or -1 when the daemon hung up
 * (what it sent before is taken; the connection is closed). */
int guard_keep_take(struct guard_keep *gk);

/* After the daemon died and a new one resumed the run: takes what the old
 * connection still holds, connects anew (KEEP) and hands every ring kept to
 * the new daemon.  *HANDED gets the rings it took, *REFUSED those it
 * refused (their reasons are in its log; the first in ERR).  0, or -1 with
 * ERR when the new daemon could not be reached. */
int guard_keep_handover(struct guard_keep *gk, const char *run_id, const char *token,
                        int *handed, int *refused, char *err, size_t errsz);

/* The last supervisor row the daemon has stored: "ACK seq=N" on the same
 * connection after each commit (guard_sup.h); 0 before the first. */
uint64_t guard_keep_acked(const struct guard_keep *gk);

/* How many rings are kept now. */
size_t guard_keep_count(const struct guard_keep *gk);

/* Closes every descriptor and frees GK.  NULL is fine. */
void guard_keep_close(struct guard_keep *gk);

#endif
