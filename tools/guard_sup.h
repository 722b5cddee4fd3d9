/*
 * guard_sup.h — sbx-guard's supervisor rows, kept until sbx-auditd has
 * stored them: what a daemon SIGKILLed mid-batch had not committed is sent
 * again to the daemon sbx-guard restarts.
 *
 * Why.  The seccomp supervisor in sbx-guard records what it sees from
 * outside the agent (an exec, a connect, a DNS query: layer supervisor) as
 * EVENT messages on control.sock, without waiting for an answer (ctl.h:
 * the next notification would wait for that round trip), and the daemon
 * adds them to its open batch.  A daemon killed before it commits that
 * batch never stores them.  So each row carries a sequence number (seq=),
 * and after each commit the daemon tells the guard, on its KEEP connection
 * (guard_keep.h), the last one it has stored ("ACK seq=N").  The guard
 * keeps every row above that number; once it has restarted the daemon,
 * resumed the run and handed over the rings, it sends them again, in order
 * and before anything new.  Nothing is lost; a row is stored twice only if
 * the dead daemon committed it and died before its ACK went out: at most
 * the rows of its last batch, the same bound as for the rings.
 *
 * Why not a ring of sbx-guard's own, like the agent's processes have: the
 * daemon reads a ring as the agent's own hostile memory and forces its
 * rows to the guard layer; a ring trusted to speak for the supervisor
 * would need a kind of its own through registration, hand-over and
 * adoption, and a second producer of the ring layout in sbx-guard.  The
 * acknowledged EVENT keeps the one path the rows take today (the same
 * encoding and clipping, held through a failing store, the same bound) and
 * adds a number per row and one message per commit on a connection that
 * exists already.
 *
 * Time.  Each row carries the guard's clock at the event (ts=, ns since
 * the epoch); the daemon keeps it when it lies between the run's start
 * and its own now, as it keeps a ring record's, so a row sent again keeps
 * its time.
 *
 * Bound.  At most GUARD_SUP_MAX rows wait for their ACK (a daemon whose
 * store fails holds as many: auditd/batch.c).  At the bound the caller
 * waits for ACKs (sbx-guard: up to 2 s, the agent's call waiting with it),
 * then guard_sup_record gives the row up.
 *
 * Memory: guard_sup_open allocates; guard_sup_close frees every row.
 * Errors: -1 (errno is not meaningful).
 */
#ifndef SBX_GUARD_SUP_H
#define SBX_GUARD_SUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "event.h"

#define GUARD_SUP_MAX 100000

struct guard_sup;

/* KEEP: rows are kept until acknowledged (the guard has a KEEP connection,
 * where ACKs come); else each is sent and forgotten.  NULL: out of memory. */
struct guard_sup *guard_sup_open(bool keep);

/* Records EV: numbered, kept, and sent on FD (control.sock) when FD >= 0.
 * 0 when it is sent or kept to be sent again; -1 when it is lost: the
 * bound is reached, the message could not be built, or (not keeping) the
 * send failed. */
int guard_sup_record(struct guard_sup *gs, int fd, const struct sbx_event_desc *ev);

/* True when GUARD_SUP_MAX rows wait for their ACK. */
bool guard_sup_full(const struct guard_sup *gs);

/* The daemon has stored every row up to SEQ: they are let go. */
void guard_sup_acked(struct guard_sup *gs, uint64_t seq);

/* Sends every row kept, in order, on FD (a new daemon's connection, the
 * run resumed).  The number sent, or -1 when a send failed (the rest stay
 * kept). */
long guard_sup_resend(struct guard_sup *gs, int fd);

/* How many rows wait for their ACK. */
size_t guard_sup_pending(const struct guard_sup *gs);

/* Frees GS and its rows.  NULL is fine. */
void guard_sup_close(struct guard_sup *gs);

#endif
