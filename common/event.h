/*
 * event.h — one audit event, and the agent-side emitter.
 *
 * (The audit-path work owns this file: it adds the record encoding, the ring
 * layout and the daemon side.  The declarations below are what the preload
 * and sbx-guard call, and keep their meaning.)
 */
#ifndef SBX_EVENT_H
#define SBX_EVENT_H

#include <stdbool.h>
#include <stdint.h>

#include "ops.h"

/* Event flags. */
#define SBX_EVF_AUDIT        0x01u  /* audit mode: would have been denied */
#define SBX_EVF_ENV_RESTORED 0x02u  /* exec: the preload put its environment back */
#define SBX_EVF_TRUNCATED    0x04u  /* a string was cut to fit (marker appended) */
#define SBX_EVF_KILLED       0x08u  /* denied because the agent was soft-killed */

/* What a caller reports.  Strings are NUL-terminated and may be NULL. */
struct sbx_event_desc {
    enum sbx_op op;
    enum sbx_decision decision;
    enum sbx_layer layer;
    uint32_t flags;             /* SBX_EVF_* */
    int err;                    /* errno the program saw; 0 when allowed */
    const char *target;         /* path, command line or address */
    const char *target2;        /* rename/link destination; for connect, the
                                 * host name the address was resolved from */
    const char *rule;           /* policy_rule_format() text */
    const char *reason;
};

/* Agent side.  Called once per process (the preload's constructor) with what
 * sbx-guard handed down; copies the strings.  0, or -1 if arguments are bad. */
int sbx_emit_init(const char *runtime_dir, const char *agent_id, const char *agent_token);

/* Records one event.  No system call in the common case; safe from any
 * thread, after fork (the child reports as itself) and never allocates.
 * Returns 0 once the event is in the channel (it then survives SIGKILL of
 * this process), -1 if it could not be recorded (no daemon, channel full for
 * too long): the caller then fails closed. */
int sbx_emit(const struct sbx_event_desc *ev);

/* True once the daemon has soft-killed this agent: every further guarded
 * call must fail with EPERM.  One atomic load. */
bool sbx_emit_killed(void);

#endif
