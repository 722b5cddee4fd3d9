/*
 * serve_pool.h — warm sandboxes: the single-use pool of `exec` sandboxes
 * and the long-lived `check` sandboxes (the validators).
 *
 * The pool keeps TARGET sandboxes started, their runner ready and waiting
 * for one request, from a thread of its own: a used sandbox is never
 * reused (nothing of one request can reach the next), and its replacement
 * is started off the request's path.  The thread also answers sbx-kill for
 * idle sandboxes (a killed idle sandbox is replaced).
 *
 * The validators run the runner's `check` mode; one request at a time
 * each, and a dead validator is replaced.
 *
 * Memory: serve_pool_take hands out a malloc'd box the caller owns and
 * gives back with serve_pool_discard.  Errors: 0, or -1 with ERR.
 */
#ifndef SBX_SERVE_POOL_H
#define SBX_SERVE_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include <jansson.h>

#include "serve_spawn.h"

/* Starts the pool's thread (SPAWNER: serve_spawner_start's socket) and
 * NCHECK validators, waiting until the validators and one exec sandbox
 * are ready, so a failure to start shows at once. */
int serve_pool_start(int spawner, size_t target, size_t ncheck, char *err, size_t errsz);

/* The same with fork servers (serve_zygote.h) instead of the pool of
 * fresh sandboxes: NZYGOTE warm zygotes, each request a fork of one.  CFG is
 * kept (not copied). */
int serve_pool_start_zygote(int spawner, const struct serve_spawn_cfg *cfg, size_t nzygote,
                            size_t ncheck, char *err, size_t errsz);

/* A ready exec sandbox, waiting at most TIMEOUT_MS (or a fork of the
 * zygote).  NULL with ERR. */
struct serve_box *serve_pool_take(int timeout_ms, char *err, size_t errsz);

/* Ends BOX's registration (STATUS and DETAIL for its exit row), kills
 * what is left of it and frees it. */
void serve_pool_discard(struct serve_box *box, int status, const char *detail);

/* *TS: CLOCK_REALTIME now plus MS milliseconds (a condition wait's
 * deadline). */
void serve_deadline(struct timespec *ts, long ms);

/* Takes the kill order (sbx-kill) waiting on BOX's control socket and
 * confirms it with DONE.  True when there was one, false when the socket
 * ended (sbx-auditd went away). */
bool serve_box_confirm_kill(struct serve_box *box, const char *done);

/* A kill order for a sandbox that serves no request (an idle one, a fork
 * server, a child waiting for its request): confirmed with DONE, and BOX
 * discarded with exit 137 and KILLED as its detail.  False when it was no
 * kill order but sbx-auditd going away (then the detail says so). */
bool serve_pool_kill_unused(struct serve_box *box, const char *done, const char *killed);

/* Runs the static check of CODE in a validator: *VIOLATIONS (a new
 * reference) is the runner's array.  *VNAME gets the validator's agent
 * name (for the audit row).  0, or -1 with ERR. */
int serve_pool_check(const char *code, json_t **violations, char *vname, size_t vnamesz,
                     char *err, size_t errsz);

/* Records EV on the registration of the validator named VNAME (the rows
 * of rejected requests).  Never waits for sbx-auditd. */
struct sbx_event_desc;
void serve_pool_check_record(const char *vname, const struct sbx_event_desc *ev);

/* Sandboxes ready now (for /metrics). */
size_t serve_pool_ready(void);

/* Stops the thread, discards every idle sandbox and the validators. */
void serve_pool_stop(void);

#endif
