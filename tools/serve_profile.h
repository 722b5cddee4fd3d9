/*
 * serve_profile.h — sbx-serve's profile: the serve: section of an sbx
 * policy (policy_serve) in the form the service and its runner use.
 *
 * serve_profile_load is the one place the profile comes from: the HTTP
 * answers (/profile), the runner's configuration line
 * (docs/serve-protocol.md) and the limits of a request are all made from
 * what it fills in.
 *
 * Memory: the profile owns its strings (malloc'd); serve_profile_free
 * releases them.  Errors: 0, or -1 with ERR filled ("what: why").
 */
#ifndef SBX_SERVE_PROFILE_H
#define SBX_SERVE_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy.h"

/* SERVE.md: a request's timeout is at most 30 s unless the profile lowers it. */
#define SERVE_TIMEOUT_MAX_S 30.0

struct serve_stage {
    char name[32];              /* "ast_scan", "blocklist_audit" */
    bool observe;               /* record, run anyway (default: enforce) */
};

struct serve_profile {
    char *name, *description;
    char **allowed;             /* sorted, unique */
    size_t n_allowed;
    char **pre_imports;
    size_t n_pre_imports;
    char **block_module, **block_attr;
    size_t n_block;
    struct serve_stage stages[8];
    size_t n_stages;
    bool hooks_observe;         /* runtime_hooks: observe */
    uint64_t memory_bytes;      /* limits.memory (0: none) */
    double timeout_max_s;
    char *runner_config;        /* the configuration line, '\n'-terminated */
};

/* Fills PR from policy P (its serve: section and limits.memory). */
int serve_profile_load(const struct policy *p, struct serve_profile *pr,
                       char *err, size_t errsz);
void serve_profile_free(struct serve_profile *pr);

/* The stage named NAME, or NULL. */
const struct serve_stage *serve_profile_stage(const struct serve_profile *pr,
                                              const char *name);

/* The body of GET /profile (malloc'd JSON text), or NULL. */
char *serve_profile_json(const struct serve_profile *pr);

#endif
