/* ops.c — names of operations, decisions and layers (see ops.h). */
#include "ops.h"

#include <string.h>

static const char *const op_names[SBX_OP__COUNT] = {
    [SBX_OP_OPEN_READ] = "open-read",   [SBX_OP_OPEN_WRITE] = "open-write",
    [SBX_OP_EXEC] = "exec",             [SBX_OP_CONNECT] = "connect",
    [SBX_OP_BIND] = "bind",             [SBX_OP_UNLINK] = "unlink",
    [SBX_OP_RENAME] = "rename",         [SBX_OP_MKDIR] = "mkdir",
    [SBX_OP_RMDIR] = "rmdir",           [SBX_OP_LINK] = "link",
    [SBX_OP_SYMLINK] = "symlink",       [SBX_OP_CHMOD] = "chmod",
    [SBX_OP_CHOWN] = "chown",           [SBX_OP_TRUNCATE] = "truncate",
    [SBX_OP_START] = "start",           [SBX_OP_EXIT] = "exit",
    [SBX_OP_KILL] = "kill",             [SBX_OP_POLICY_ERROR] = "policy-error",
    [SBX_OP_UTIMES] = "utimes",         [SBX_OP_SEND] = "send",
    [SBX_OP_RETENTION] = "retention",
};

static const char *const layer_names[SBX_LAYER__COUNT] = {
    [SBX_LAYER_GUARD] = "guard", [SBX_LAYER_KERNEL] = "kernel",
    [SBX_LAYER_SUPERVISOR] = "supervisor", [SBX_LAYER_SBX] = "sbx",
};

const char *sbx_op_name(enum sbx_op op)
{
    if ((unsigned)op >= SBX_OP__COUNT)
        return "unknown";
    return op_names[op];
}

int sbx_op_parse(const char *name)
{
    for (int i = 0; i < SBX_OP__COUNT; i++)
        if (strcmp(op_names[i], name) == 0)
            return i;
    return -1;
}

enum sbx_op_class sbx_op_class(enum sbx_op op)
{
    switch (op) {
    case SBX_OP_OPEN_READ:
        return SBX_CLASS_READ;
    case SBX_OP_EXEC:
        return SBX_CLASS_EXEC;
    case SBX_OP_CONNECT:
    case SBX_OP_SEND:
        return SBX_CLASS_CONNECT;
    case SBX_OP_BIND:
        return SBX_CLASS_BIND;
    case SBX_OP_START:
    case SBX_OP_EXIT:
    case SBX_OP_KILL:
    case SBX_OP_POLICY_ERROR:
    case SBX_OP_RETENTION:
    case SBX_OP__COUNT:
        return SBX_CLASS_LIFECYCLE;
    default:
        return SBX_CLASS_WRITE;
    }
}

const char *sbx_decision_name(enum sbx_decision d)
{
    return d == SBX_DENY ? "deny" : "allow";
}

const char *sbx_layer_name(enum sbx_layer l)
{
    if ((unsigned)l >= SBX_LAYER__COUNT)
        return "unknown";
    return layer_names[l];
}

int sbx_layer_parse(const char *name)
{
    for (int i = 0; i < SBX_LAYER__COUNT; i++)
        if (strcmp(layer_names[i], name) == 0)
            return i;
    return -1;
}
