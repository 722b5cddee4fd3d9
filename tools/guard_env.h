/*
 * guard_env.h — the environment sbx-guard gives the agent.
 *
 * The agent gets only what the policy's env.pass names (taken from sbx-guard's
 * own environment), then env.set, then the variables the preload needs
 * (LD_PRELOAD first, SBX_*).  Secrets in the user's environment are dropped
 * unless the policy passes them by name.
 *
 * Memory: guard_env_build returns a NULL-terminated array of malloc'd
 * strings; free it with guard_env_free.  NULL on allocation failure.
 */
#ifndef SBX_GUARD_ENV_H
#define SBX_GUARD_ENV_H

#include "policy.h"

struct guard_env_vars {
    const char *preload;        /* absolute path of libsbx-preload.so */
    const char *policy_copy;    /* private copy the preload loads */
    const char *policy_origin;  /* the path the user gave */
    const char *policy_image;   /* its compiled form; NULL: none */
    const char *workspace;
    const char *home;           /* the policy's "~/" */
    const char *runtime_dir;
    const char *audit_db;
    const char *agent, *agent_id, *agent_token;
    const char *ring_file;      /* added, gvisor: the shared ring (NULL:
                                 * none; the token is then not passed) */
    bool notify;
};

char **guard_env_build(const struct policy *p, char *const host_env[],
                       const struct guard_env_vars *v);
void guard_env_free(char **env);

/* The variables agents commonly need to reach the network (CA bundles,
 * proxies: GUARD_ENV_NEEDED) that are set in HOST_ENV but that P's
 * env.pass drops (and env.set does not set), written to OUT separated by
 * ", " (truncated to fit).  Returns how many there are.  sbx-guard says so
 * once at start: behind a corporate proxy, HTTPS fails without them and
 * nothing else would tell the user why. */
size_t guard_env_dropped(const struct policy *p, char *const host_env[], char *out,
                         size_t outsz);

/* The value of NAME in ENV, or NULL. */
const char *guard_env_get(char *const env[], const char *name);

/* Resolves a command name like execvp would, with PATH from ENV: a name
 * with a slash is made absolute against the cwd; otherwise PATH is searched
 * (policy_path_search).  0 with OUT filled, or -1 with errno. */
int guard_find_program(const char *cmd, char *const env[], char *out, size_t outsz);

#endif
