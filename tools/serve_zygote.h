/*
 * serve_zygote.h — sbx-serve's fork server (docs/serve.md "The fork
 * server").
 *
 * One long-lived sandbox per service runs `serve-runner.py zygote`: python
 * already inside the kernel layer (namespaces, Landlock, seccomp, rlimits,
 * the guard), with the profile's pre-imports and runtime hooks loaded.  It
 * never runs a request's code itself: for each request it forks a child
 * that becomes the request's agent, enters a Landlock layer of its own
 * (its /tmp is a fresh empty directory, no other request's; signals and
 * abstract sockets stay within the request) and a seccomp filter (no
 * setsid, no setpgid: the request's processes stay in its process group),
 * and runs the code.  Every request is a fork of the same pristine
 * interpreter; nothing a request does reaches the zygote or the next
 * request.
 *
 * The server registers the request's agent, makes its pipes and hands
 * them to the zygote with the registration's run id and token (SCM_RIGHTS
 * over a SOCK_SEQPACKET socket); the zygote answers with a pidfd of the
 * child (kills go to its process group) and later writes the child's wait
 * status on the request's own status socket, after killing what the code
 * left running.  The box it gives back is used like a pool box
 * (serve_exec_run, serve_pool_discard).
 *
 * Memory: serve_zygote_take returns a malloc'd box the caller owns
 * (serve_pool_discard frees it).  Errors: 0/pointer, or -1/NULL with ERR.
 */
#ifndef SBX_SERVE_ZYGOTE_H
#define SBX_SERVE_ZYGOTE_H

#include <stdbool.h>
#include <stddef.h>

#include "serve_spawn.h"

/* Starts the zygote through SPAWNER (serve_spawner_start's socket); CFG
 * (kept, not copied) says how to register each request's agent.  Waits
 * until it is ready. */
int serve_zygote_start(int spawner, const struct serve_spawn_cfg *cfg, char *err, size_t errsz);

/* A box for one request, forked from the zygote (started again first if it
 * died).  NULL with ERR. */
struct serve_box *serve_zygote_take(char *err, size_t errsz);

/* Removes BOX's pids cgroup, if it has one (after its kill). */
void serve_zygote_cgroup_remove(struct serve_box *box);

/* The zygote's registration (its kill orders), or -1 when it is down. */
int serve_zygote_ctl(void);

/* A kill order arrived on serve_zygote_ctl(): confirmed, and the zygote
 * ended with every request it runs (the next request starts another). */
void serve_zygote_on_ctl(void);

/* Whether the zygote is up (for /metrics). */
bool serve_zygote_up(void);

/* Ends the zygote. */
void serve_zygote_stop(void);

#endif
