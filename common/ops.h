/*
 * ops.h — the names every part of sbx shares: operations, decisions, layers.
 *
 * An operation (`enum sbx_op`) is what an audit row's `op` column says and
 * what the policy engine is asked about.  The text names are the contract's
 * (../shared/CONTRACT.md) and never change; new ones are only added at the
 * end, before SBX_OP__COUNT.  All functions here are pure and thread-safe.
 */
#ifndef SBX_OPS_H
#define SBX_OPS_H

enum sbx_op {
    SBX_OP_OPEN_READ = 0,   /* open for reading, opendir, readlink */
    SBX_OP_OPEN_WRITE,      /* open for writing or creating */
    SBX_OP_EXEC,
    SBX_OP_CONNECT,
    SBX_OP_BIND,
    SBX_OP_UNLINK,
    SBX_OP_RENAME,
    SBX_OP_MKDIR,
    SBX_OP_RMDIR,
    SBX_OP_LINK,
    SBX_OP_SYMLINK,
    SBX_OP_CHMOD,
    SBX_OP_CHOWN,
    SBX_OP_TRUNCATE,
    SBX_OP_START,           /* lifecycle records */
    SBX_OP_EXIT,
    SBX_OP_KILL,
    SBX_OP_POLICY_ERROR,
    SBX_OP_UTIMES,          /* added: utimensat and friends (a write) */
    SBX_OP_SEND,            /* added: sendto/sendmsg with an address */
    SBX_OP_RETENTION,       /* added: sbx-auditd removed old rows (a lifecycle
                             * row of the store itself, never an agent's) */
    SBX_OP__COUNT
};

/* What a rule list governs: every op belongs to exactly one class. */
enum sbx_op_class {
    SBX_CLASS_READ,         /* files.read */
    SBX_CLASS_WRITE,        /* files.write */
    SBX_CLASS_EXEC,         /* files.exec (+ commands) */
    SBX_CLASS_CONNECT,      /* network.connect (connect, send) */
    SBX_CLASS_BIND,         /* network.bind */
    SBX_CLASS_LIFECYCLE     /* not decided by the policy */
};

enum sbx_decision { SBX_ALLOW = 0, SBX_DENY = 1 };

/* Which layer made (or enforced) a decision. */
enum sbx_layer {
    SBX_LAYER_GUARD = 0,    /* the preload, inside the agent */
    SBX_LAYER_KERNEL,       /* Landlock, seccomp, mounts, rlimits */
    SBX_LAYER_SUPERVISOR,   /* seccomp user notification in sbx-guard */
    SBX_LAYER_SBX,          /* sbx-guard / sbx-auditd themselves (lifecycle) */
    SBX_LAYER__COUNT
};

/* The contract's name of OP ("open-read"), or "unknown". */
const char *sbx_op_name(enum sbx_op op);
/* The op named NAME, or -1. */
int sbx_op_parse(const char *name);
/* The class OP belongs to. */
enum sbx_op_class sbx_op_class(enum sbx_op op);
/* "allow" / "deny". */
const char *sbx_decision_name(enum sbx_decision d);
/* "guard", "kernel", "supervisor", "sbx". */
const char *sbx_layer_name(enum sbx_layer l);
int sbx_layer_parse(const char *name);

#endif
