/*
 * serve_sup.h — the seccomp supervisor of every sandbox, on one thread.
 *
 * Each sandbox's filter hands its execs and connects to a listener that
 * someone must answer at all times: while the runner starts (the preload
 * connects to events.sock), while it waits in the pool, while it runs.  So
 * one thread watches every live box's listener (epoll) and answers with
 * iso_supervise, recording what it saw on the box's registration.
 *
 * Memory: boxes are borrowed between serve_sup_add and serve_sup_remove.
 * Errors: 0, or -1 with errno.
 */
#ifndef SBX_SERVE_SUP_H
#define SBX_SERVE_SUP_H

#include "isolate.h"
#include "serve_spawn.h"

/* Starts the thread; SUP is the sandboxes' request (borrowed). */
int serve_sup_start(const struct iso_request *sup);
/* Watches BOX's listener (nothing when it has none). */
int serve_sup_add(struct serve_box *box);
/* Stops watching BOX; after it returns the thread no longer touches BOX. */
void serve_sup_remove(struct serve_box *box);

#endif
