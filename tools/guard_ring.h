/*
 * guard_ring.h — the event relay of an agent in gVisor (--isolation gvisor).
 *
 * Why a relay: inside gVisor the guard cannot hand its ring to sbx-auditd
 * (a sandbox cannot pass a descriptor out: SCM_RIGHTS fails with EINVAL),
 * and a host socket's peer credentials name gVisor's gofer, not the agent.
 * So sbx-guard makes the run's one ring itself, as a file in its private
 * runtime directory that the OCI bundle binds writable into the sandbox
 * (and nothing else of that directory): every process of the agent maps it
 * (SBX_RING_FILE, preload/emit.c) and writes its records there, at native
 * speed (gVisor maps a bound host file's own pages).  sbx-guard copies the
 * committed records, as they are, into a sealed memfd ring that it
 * registers with sbx-auditd for the run (run id and token, like any
 * process of the agent), and carries the daemon's state back (the soft
 * kill).
 *
 * Identity.  Nothing inside the sandbox holds a credential: the token
 * never enters it (the agent's environment has none under gvisor), no
 * socket of sbx's is reachable (--host-uds=none, the runtime directory
 * hidden), and the ring file is bound into this sandbox alone.  A process
 * inside can write only into its own run's ring; it cannot register a
 * ring, nor speak for another run.  What the daemon records for these rows
 * as pid is sbx-guard's (gVisor's pids mean nothing on the host).
 *
 * The file is the agent's, so it is read as hostile input: with pread
 * (a file the agent truncates gives short reads, never SIGBUS), every
 * record checked for its span and commit marks before it is copied, and
 * the daemon checks the copy again as it checks every ring.
 *
 * Memory: guard_ring_open allocates the relay; guard_ring_close frees it
 * and removes the file.  Errors: -1 with ERR or errno.
 */
#ifndef SBX_GUARD_RING_H
#define SBX_GUARD_RING_H

#include <stdbool.h>
#include <stddef.h>

struct guard_ring;

/* Creates the ring file PATH (0600, exclusively) and the daemon's ring,
 * registered on RUNTIME_DIR's events.sock for RUN_ID with TOKEN.  NULL with
 * ERR on failure. */
struct guard_ring *guard_ring_open(const char *runtime_dir, const char *path,
                                   const char *run_id, const char *token,
                                   char *err, size_t errsz);

/* Copies what the agent committed since the last call.  Returns the
 * number of records copied (0: nothing new, or the daemon's ring is full
 * and was woken), -1 when the file is unusable (then the agent's guarded
 * calls fail closed once their ring is full). */
int guard_ring_pump(struct guard_ring *gr);

/* True when the file holds records not yet copied. */
bool guard_ring_pending(struct guard_ring *gr);

/* Removes the file, closes the daemon's ring (what is in it stays for the
 * daemon) and frees GR.  NULL is fine. */
void guard_ring_close(struct guard_ring *gr);

#endif
