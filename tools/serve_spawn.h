/*
 * serve_spawn.h — sbx-serve's sandboxes, and the process that starts them.
 *
 * iso_spawn must run in a single-threaded process (native.c: the sandbox's
 * init is a raw clone that inherits whatever locks other threads held),
 * and sbx-serve answers HTTP with threads.  So sbx-serve forks, before its
 * first thread, a spawner: a single-threaded process that, on each request
 * from the server, registers an agent with sbx-auditd, starts
 * `python3 -I -B serve-runner.py exec|check` under the kernel layer
 * (iso_spawn, with the profile's policy), writes the runner's configuration
 * line, and hands the server every descriptor of that sandbox
 * (SCM_RIGHTS).  The sandbox's init stays the spawner's child (the spawner
 * reaps it); the server holds a pidfd of it, so a SIGKILL reaches the right
 * process even after the pid is reused, and kills the sandbox's whole pid
 * namespace.
 *
 * Memory: a box owns its descriptors and its line buffer; serve_box_close
 * releases them.  Errors: 0, or -1 with ERR filled ("what: why").
 */
#ifndef SBX_SERVE_SPAWN_H
#define SBX_SERVE_SPAWN_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "event.h"
#include "guard_sup.h"
#include "isolate.h"
#include "policy.h"

enum serve_kind { SERVE_EXEC = 1, SERVE_CHECK = 2, SERVE_ZYGOTE = 3 };

struct serve_spawn_cfg {
    const struct policy *policy;
    enum iso_mode mode;
    const char *python;         /* absolute */
    const char *runner;         /* absolute: serve-runner.py */
    const char *workspace;      /* the sandboxes' working directory (read-only) */
    const char *preload;        /* libsbx-preload.so, or NULL (no guard) */
    const char *policy_copy;    /* what the preload reads */
    const char *policy_image;   /* or NULL */
    const char *policy_origin;  /* the profile's path, for messages */
    const char *runtime_dir, *audit_db;
    const char *config_line;    /* the runner's configuration, '\n'-terminated */
    bool audit;                 /* register each sandbox with sbx-auditd */
};

struct serve_box {
    enum serve_kind kind;
    pid_t pid;                  /* the sandbox's init */
    int pidfd;                  /* of the init */
    int out, err;               /* its stdout and stderr (read ends) */
    int req, rep;               /* fd 3 (write end) and fd 4 (read end) */
    int notify;                 /* the seccomp supervisor's listener, or -1 */
    int status;                 /* the init's status channel, or -1 */
    int ctl;                    /* its registration with sbx-auditd, or -1 */
    int zsock;                  /* SERVE_ZYGOTE: the fork server's socket, or -1 */
    bool group;                 /* a kill is for the process group of PIDFD's
                                 * process (a child of the fork server), not
                                 * a sandbox's init */
    pthread_mutex_t ctl_lock;   /* CTL is used by the request's thread and
                                 * the supervisor's (serve_sup.h) */
    char cgroup[192];           /* its pids cgroup to remove, or "" */
    int zslot;                  /* its zygote (serve_zygote.c) + 1, or 0 */
    char *zmsg;                 /* the fork request not yet sent, or NULL */
    int zfds[4];                /* the child's ends until the fork */
    char id[24];                /* the request id it will serve */
    char name[40];              /* the agent's name: "serve-ID" */
    char run_id[64];
    char token[72];             /* the run's secret (audited boxes only): to
                                 * take the run back from a restarted
                                 * sbx-auditd and record its end */
    struct guard_sup *rows;     /* rows sent without an answer, kept until
                                 * the box's end is stored (serve_box_row) */
    char layers[256];
    char *buf;                  /* bytes read from REP not yet a line */
    size_t len, cap;
    bool ready;                 /* the runner said ready */
};

/* Registers agent NAME (running COMMAND) with sbx-auditd for CFG's policy:
 * *CTL the registration, RUN_ID and TOKEN what the daemon gave.  0, or -1
 * with ERR.  Thread-safe. */
int serve_spawn_register(const struct serve_spawn_cfg *cfg, const char *name,
                         const char *command, int *ctl, char *run_id, size_t run_idsz,
                         char *token, size_t tokensz, char *err, size_t errsz);

/* Sends EV for BOX's agent on its registration without waiting, numbered
 * and kept until the box's end is stored: a daemon SIGKILLed before it
 * committed them gets them again from serve_box_end_row.  Call with
 * BOX->ctl_lock held.  Nothing for a box without a store. */
void serve_box_row(struct serve_box *box, const struct sbx_event_desc *ev);

/* Records BOX's end (exit STATUS, DETAIL) and closes its registration.
 * When the daemon that registered it is gone, takes the run back from a
 * new one (RESUME, with the box's run id and token), sends again every row
 * not known to be stored, then the end.  0, or -1 with ERR: the end could
 * not be recorded. */
int serve_box_end_row(struct serve_box *box, int status, const char *detail, char *err,
                      size_t errsz);

/* A fresh request id: 16 hex digits. */
void serve_new_id(char *out, size_t outsz);

/* Forks the spawner.  Call while single-threaded.  *SOCK is the server's
 * end (one request at a time, see serve_spawn_get); *PID the spawner. */
int serve_spawner_start(const struct serve_spawn_cfg *cfg, int *sock, pid_t *pid,
                        char *err, size_t errsz);

/* Asks the spawner on SOCK for a sandbox of KIND; fills BOX (not yet
 * ready: see serve_box_wait_ready).  Thread-safe. */
int serve_spawn_get(int sock, enum serve_kind kind, struct serve_box *box,
                    char *err, size_t errsz);

/* Reads the runner's `ready` line (up to TIMEOUT_MS).  0, or -1 with ERR
 * (the runner's own error text when it sent one). */
int serve_box_wait_ready(struct serve_box *box, int timeout_ms, char *err, size_t errsz);

/* Reads one '\n'-terminated line from the box's fd 4 within TIMEOUT_MS:
 * *LINE points into the box's buffer (valid until the next call), without
 * the newline.  1 got one, 0 end of file, -1 error or time out (errno
 * ETIMEDOUT). */
int serve_box_readline(struct serve_box *box, int timeout_ms, char **line);

/* Drops the line serve_box_readline returned last. */
void serve_box_consume(struct serve_box *box);

/* SIGKILL of the box's init (its whole pid namespace), or of the process
 * group of a fork server's child (BOX->group).  0, or -1/errno. */
int serve_box_kill(struct serve_box *box);

/* Kills the sandbox (if still there), stops its supervision and closes
 * every descriptor.  Does not touch the registration (BOX->ctl): the
 * caller ends it first. */
void serve_box_close(struct serve_box *box);

#endif
