/*
 * emit.h — the agent-side emitter: how a process of the agent reports an
 * event to sbx-auditd.
 *
 * An agent process reports events with sbx_emit().  The first call creates a
 * per-process ring (ring.h: a sealed memfd, mmap'ed MAP_SHARED) and hands it
 * to sbx-auditd over events.sock once (SCM_RIGHTS, plus the agent id and
 * token; the kernel attaches the sender's credentials); the connection
 * stays open, and a byte sent on it wakes a sleeping daemon.  After that an
 * event is a copy into shared memory: no system call, no allocation, no
 * lock.  The daemon maps the same pages, so an event whose sbx_emit()
 * returned 0 survives SIGKILL of the process.  The preload is its user; the
 * tests and benchmarks that play an agent link it too.
 *
 * Memory: sbx_emit_init() copies its strings into static storage; nothing
 * here allocates.  Errors: 0 / -1, and sbx_emit_error() says why.
 */
#ifndef SBX_EMIT_H
#define SBX_EMIT_H

#include <stdbool.h>

#include "event.h"

/* Agent side.  Called once per process (the preload's constructor) with what
 * sbx-guard handed down; copies the strings.  A NULL or empty RUNTIME_DIR
 * means the default (sbx_path_runtime_dir).  0, or -1 if arguments are bad
 * (sbx_emit_error() says which). */
int sbx_emit_init(const char *runtime_dir, const char *agent_id, const char *agent_token);

/* Added.  After sbx_emit_init: this process and its children write into
 * the run's shared ring file PATH (SBX_RING_FILE: under gVisor, where a
 * process cannot pass its ring out; tools/guard_ring.h) instead of a ring
 * of their own, and register nothing.  0, or -1 (a relative or too long
 * PATH). */
int sbx_emit_use_file(const char *path);

/* Added.  Reports this process, and the children it makes from here, as
 * another agent (run id and token from its registration).  For a process
 * forked from a long-lived parent (sbx-serve's fork server): it must not
 * have a ring yet, i.e. be called before its first event.  0, or -1 with
 * errno (EBUSY: this process already has a ring; EINVAL; ENAMETOOLONG). */
int sbx_emit_rebind(const char *agent_id, const char *agent_token);

/* Records one event.  No system call in the common case; safe from any
 * thread, after fork (the child reports as itself) and never allocates.
 * Returns 0 once the event is in the channel (it then survives SIGKILL of
 * this process), -1 if it could not be recorded (no daemon, channel full for
 * too long): the caller then fails closed. */
int sbx_emit(const struct sbx_event_desc *ev);

/* Before a vfork: makes sure this process has a live, registered ring, so
 * that the child (which shares our memory, not our descriptors) writes its
 * events into it and never registers one of its own.  0, or -1 (then fork
 * instead). */
int sbx_emit_prepare_vfork(void);

/* Rings of this process register without waiting for the daemon's answer
 * (sbx-guard says so for an agent it has just registered: the run id and
 * token are known good).  A registration the daemon refuses all the same
 * (a forged token) marks the ring SBX_RING_REFUSED, and every event after
 * that fails.  Without this, each registration waits for the answer. */
void sbx_emit_set_async(bool on);

/* True once the daemon has soft-killed this agent: every further guarded
 * call must fail with EPERM.  One atomic load. */
bool sbx_emit_killed(void);

/* Before the process's memory goes (exit, exec): if the daemon holding
 * this process's ring died with events in it not yet taken, hands the ring
 * to whichever daemon listens now (sbx-guard restarts one), so that they
 * are recorded.  A system call only when events are untaken. */
void sbx_emit_handover(void);
/* True when this process's ring holds events its daemon has not committed
 * (no system call: the test before sbx_emit_handover). */
bool sbx_emit_untaken(void);

/* Added: why the last sbx_emit() returned -1 (static text, for messages). */
const char *sbx_emit_error(void);

#endif
