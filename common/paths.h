/*
 * paths.h — where sbx keeps things, and the environment that sbx-guard hands
 * down to the preload.  Every tool resolves the store and the runtime
 * directory through these functions, so that two runs with different
 * SBX_AUDIT_DB / SBX_RUNTIME_DIR never see each other (CONTRACT.md).
 *
 * Functions return 0 on success and -1 with errno set (ENAMETOOLONG when the
 * result does not fit, ENOENT when no home directory can be found).  They
 * write into caller-provided buffers and allocate nothing.
 */
#ifndef SBX_PATHS_H
#define SBX_PATHS_H

#include <stdbool.h>
#include <stddef.h>

/* Variables of the contract. */
#define SBX_ENV_AUDIT_DB     "SBX_AUDIT_DB"
#define SBX_ENV_RUNTIME_DIR  "SBX_RUNTIME_DIR"

/* Variables sbx-guard sets for the preload (internal, may change). */
#define SBX_ENV_POLICY       "SBX_POLICY_FILE"  /* private read-only copy of the policy */
#define SBX_ENV_POLICY_NAME  "SBX_POLICY_ORIGIN"/* the path the user gave, for messages */
#define SBX_ENV_WORKSPACE    "SBX_WORKSPACE"    /* absolute workspace */
#define SBX_ENV_AGENT        "SBX_AGENT"        /* the agent's name */
#define SBX_ENV_AGENT_ID     "SBX_AGENT_ID"     /* the run id the daemon gave */
#define SBX_ENV_AGENT_TOKEN  "SBX_AGENT_TOKEN"  /* secret that ties a ring to its agent */
#define SBX_ENV_NOTIFY       "SBX_NOTIFY"       /* "1": print denials on stderr */
#define SBX_ENV_PRELOAD      "SBX_PRELOAD"      /* absolute path of libsbx-preload.so */
#define SBX_ENV_RING_ASYNC   "SBX_RING_ASYNC"   /* "1": register rings without waiting
                                                 * for the daemon's answer (emit.h) */
#define SBX_ENV_HOME         "SBX_HOME"         /* the home "~/" meant when the policy
                                                 * was loaded (the agent may change HOME) */

#define SBX_ENV_POLICY_IMAGE "SBX_POLICY_IMAGE" /* the compiled policy; unset: none */
#define SBX_ENV_RING_FILE    "SBX_RING_FILE"    /* gvisor: the run's shared event ring
                                                 * file, relayed by sbx-guard */

/* The compiled policy sbx-guard saves next to the policy copy, named
 * "$SBX_POLICY_FILE" SBX_POLICY_IMAGE_SUFFIX and handed to the preload in
 * SBX_POLICY_IMAGE (only when it was written). */
#define SBX_POLICY_IMAGE_SUFFIX ".img"

/* Socket and file names inside the runtime directory. */
#define SBX_EVENTS_SOCK   "events.sock"
#define SBX_CONTROL_SOCK  "control.sock"
#define SBX_PID_FILE      "sbx-auditd.pid"

/* $SBX_AUDIT_DB, else $XDG_STATE_HOME/sbx/audit.db, else /var/lib/sbx/audit.db
 * for root without XDG variables, else ~/.local/state/sbx/audit.db. */
int sbx_path_audit_db(char *out, size_t outsz);

/* $SBX_RUNTIME_DIR, else $XDG_RUNTIME_DIR/sbx, else /run/sbx for root, else
 * /tmp/sbx-$UID. */
int sbx_path_runtime_dir(char *out, size_t outsz);

/* runtime_dir + "/" + NAME (one of the socket/file names above). */
int sbx_path_runtime_file(const char *name, char *out, size_t outsz);

/* The directories sbx keeps its sockets and its store in. */
enum sbx_dir { SBX_DIR_RUNTIME, SBX_DIR_STORE };

/* Makes sure that the runtime directory (SBX_DIR_RUNTIME) or the directory
 * holding the audit store (SBX_DIR_STORE) is the caller's alone: a
 * directory, not a symlink, owned by the effective uid and writable by
 * neither group nor others.  Without that, another user who creates
 * /tmp/sbx-$UID first would receive the registrations and event rings, or
 * could swap the store.  With CREATE, a missing directory is first made
 * (mode 0700, parents too).  The path goes to DIR when DIR is not NULL.
 * 0; else -1 with errno (ENOENT: missing and not CREATE; EPERM: the
 * directory fails the check; others from lstat/mkdir) and ERR one sentence
 * naming the directory, what is wrong and what to do. */
int sbx_path_private_dir(enum sbx_dir which, bool create, char *dir, size_t dirsz,
                         char *err, size_t errsz);

/* Creates DIR and its missing parents with MODE (like mkdir -p). */
int sbx_mkdir_p(const char *dir, unsigned mode);

/* The directory holding the running executable (from /proc/self/exe). */
int sbx_path_self_dir(char *out, size_t outsz);

#endif
