/*
 * serve_zygote.h — sbx-serve's fork server (docs/serve.md "The fork
 * server").
 *
 * max-concurrent long-lived sandboxes run `serve-runner.py zygote`: python
 * already inside the kernel layer (namespaces, Landlock, seccomp, rlimits,
 * the guard), with the profile's pre-imports and runtime hooks loaded.  A
 * zygote never runs a request's code itself: for each request, one at a
 * time, it forks a child that becomes the request's agent, enters a
 * Landlock layer of its own (a domain: it cannot signal or inspect the
 * zygote) and a seccomp filter (no setsid, no setpgid: the request's
 * processes stay in its process group; no System V IPC), and runs the
 * code.  When the child ends the zygote kills its process group, waits
 * until it is empty and empties /tmp before it takes the next request.
 * Every request is a fork of the same pristine interpreter.
 *
 * Each zygote has a child waiting before its request arrives: as soon as
 * the zygote is free (its last request's processes gone, /tmp emptied), a
 * thread of the server registers the next request's agent, makes its pipes
 * and hands them to the zygote with the registration's run id and token
 * (SCM_RIGHTS over a SOCK_SEQPACKET socket); the zygote forks the child,
 * which becomes that agent, enters its walls and blocks reading its code.
 * The zygote answers with the child's pid, which the server finds in /proc
 * and holds by a pidfd (kills go to its process group; as root the zygote
 * has a pids cgroup of its own).  A request takes such a child, writes the
 * code into its pipe and reads the result; the child writes its own wait
 * status, and the zygote kills what the code left running before it forks
 * the next one.  The box is used like a pool box (serve_exec_run,
 * serve_pool_discard).
 *
 * Memory: serve_zygote_take returns a malloc'd box the caller owns
 * (serve_pool_discard frees it).  Errors: 0/pointer, or -1/NULL with ERR.
 */
#ifndef SBX_SERVE_ZYGOTE_H
#define SBX_SERVE_ZYGOTE_H

#include <stdbool.h>
#include <stddef.h>

#include "serve_spawn.h"

/* Starts N zygotes through SPAWNER (serve_spawner_start's socket); CFG
 * (kept, not copied) says how to register each request's agent.  Waits
 * until they are ready. */
int serve_zygote_start(int spawner, const struct serve_spawn_cfg *cfg, size_t n,
                       char *err, size_t errsz);

/* A box for one request: the waiting child of a free zygote (waiting up
 * to TIMEOUT_MS for one).  NULL with ERR. */
struct serve_box *serve_zygote_take(int timeout_ms, char *err, size_t errsz);

/* The zygote of BOX forks its next child (serve_pool_discard). */
void serve_zygote_release(struct serve_box *box);

/* Removes BOX's pids cgroup, if it has one (after its kill). */
void serve_zygote_cgroup_remove(struct serve_box *box);

/* The registrations (kill orders) of the zygotes, then of their waiting
 * children, into FDS (-1: down, busy forking, or none); how many. */
size_t serve_zygote_ctl_fds(int *fds, size_t max);

/* A kill order arrived for the I-th of serve_zygote_ctl_fds: confirmed,
 * and a zygote ends with the request it runs and its waiting child (its
 * thread starts another), a waiting child ends (its zygote forks
 * another). */
void serve_zygote_on_ctl(size_t i);

/* Zygotes free with a child waiting (for /metrics). */
size_t serve_zygote_up(void);

/* Ends the zygotes, their waiting children and their threads. */
void serve_zygote_stop(void);

#endif
