/*
 * serve_gvisor.h — sbx-serve's sandboxes in gVisor (--isolation gvisor).
 *
 * runsc hands a sandbox descriptors 0, 1 and 2 and nothing else, and a
 * process in gVisor cannot register its own event ring with sbx-auditd
 * (guard_ring.h).  So each gvisor sandbox of sbx-serve has a keeper: a
 * process forked by the spawner that
 *   - makes a private directory in the runtime directory (hidden from the
 *     sandbox) with two FIFOs, bound into the sandbox at
 *     /tmp/.sbx-serve-req and /tmp/.sbx-serve-rep (runsc --host-fifo=open),
 *     and relays the runner's fd 3 and fd 4 pipes of the server to them;
 *   - starts `python3 -I -B -c BOOT REQ REP ARGV...` under runsc (iso_spawn,
 *     ISO_GVISOR), where BOOT opens the FIFOs as fds 3 and 4 and execs the
 *     runner's own command line (an exec the guard judges like any other);
 *   - relays the run's ring file to sbx-auditd (the token stays outside);
 *   - when runsc ends: copies what the agent wrote last, removes the
 *     bundle, the FIFOs and the ring, and only then reports the wait
 *     status ('W' + int, as the native init does) on the status channel,
 *     so the exit row comes after every event of the run.
 * The box's pid is runsc's: a SIGKILL of it ends the whole sandbox (runsc's
 * sandbox and gofer die with it) and the keeper cleans up after it.
 *
 * Errors: 0, or -1 with ERR filled.
 */
#ifndef SBX_SERVE_GVISOR_H
#define SBX_SERVE_GVISOR_H

#include <stddef.h>

#include "isolate.h"

/* In the spawner, in place of iso_spawn when REQ->mode is ISO_GVISOR: REQ
 * as for iso_spawn (child_fds the runner's five descriptors, envp with the
 * run's token when it is registered), RUN_ID the registration ("" if
 * none).  Fills CHILD as iso_spawn does: pid (runsc), status_fd (the
 * caller owns it), layers.  The keeper is the caller's child (reap it). */
int serve_gvisor_spawn(const struct iso_request *req, const char *run_id,
                       struct iso_child *child, char *err, size_t errsz);

#endif
