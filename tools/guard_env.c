/* guard_env.c — the agent's environment and program lookup (see guard_env.h). */
#include "guard_env.h"
#include "path.h"
#include "paths.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bsd/string.h>

struct envbuf {
    char **v;
    size_t n, cap;
};

/* Invariant, at every return (so that guard_env_free is right after any
 * failure): E->v, when not NULL, holds E->n distinct strings and a NULL. */
static int env_put(struct envbuf *e, const char *name, const char *value)
{
    size_t nlen = strlen(name);
    /* A later value replaces an earlier one: env.set over env.pass, ours last. */
    for (size_t i = 0; i < e->n; i++) {
        if (strncmp(e->v[i], name, nlen) == 0 && e->v[i][nlen] == '=') {
            free(e->v[i]);
            e->v[i] = e->v[--e->n];
            e->v[e->n] = NULL;  /* the moved pointer must not stay twice */
            break;
        }
    }
    if (e->n + 2 > e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 32;
        char **nv = reallocarray(e->v, cap, sizeof *nv);
        if (!nv)
            return -1;
        nv[e->n] = NULL;        /* a new array is terminated before use */
        e->v = nv;
        e->cap = cap;
    }
    char *s;
    if (asprintf(&s, "%s=%s", name, value) < 0)
        return -1;
    e->v[e->n++] = s;
    e->v[e->n] = NULL;
    return 0;
}

const char *guard_env_get(char *const env[], const char *name)
{
    size_t nlen = strlen(name);
    for (size_t i = 0; env && env[i]; i++)
        if (strncmp(env[i], name, nlen) == 0 && env[i][nlen] == '=')
            return env[i] + nlen + 1;
    return NULL;
}

char **guard_env_build(const struct policy *p, char *const host_env[],
                       const struct guard_env_vars *v)
{
    const struct policy_info *info = policy_info(p);
    struct envbuf e = { 0 };

    if (env_put(&e, "SBX_DUMMY", "") < 0) /* allocates the array */
        goto fail;
    free(e.v[0]);
    e.n = 0;
    e.v[0] = NULL;

    for (size_t i = 0; i < info->n_env_pass; i++) {
        const char *name = info->env_pass[i];
        /* The loader variables are ours to set; passing them through would
         * let the host's LD_PRELOAD/LD_LIBRARY_PATH decide what runs first. */
        if (strcmp(name, "LD_PRELOAD") == 0)
            continue;
        const char *val = guard_env_get(host_env, name);
        if (val && env_put(&e, name, val) < 0)
            goto fail;
    }
    for (size_t i = 0; i < info->n_env_set; i++)
        if (env_put(&e, info->env_set_name[i], info->env_set_value[i]) < 0)
            goto fail;

    if (env_put(&e, "LD_PRELOAD", v->preload) < 0 ||
        env_put(&e, SBX_ENV_PRELOAD, v->preload) < 0 ||
        env_put(&e, SBX_ENV_POLICY, v->policy_copy) < 0 ||
        env_put(&e, SBX_ENV_POLICY_NAME, v->policy_origin) < 0 ||
        (v->policy_image && env_put(&e, SBX_ENV_POLICY_IMAGE, v->policy_image) < 0) ||
        env_put(&e, SBX_ENV_WORKSPACE, v->workspace) < 0 ||
        (v->home && env_put(&e, SBX_ENV_HOME, v->home) < 0) ||
        env_put(&e, SBX_ENV_RING_ASYNC, "1") < 0 ||
        env_put(&e, SBX_ENV_RUNTIME_DIR, v->runtime_dir) < 0 ||
        env_put(&e, SBX_ENV_AUDIT_DB, v->audit_db) < 0 ||
        env_put(&e, SBX_ENV_AGENT, v->agent) < 0 ||
        env_put(&e, SBX_ENV_AGENT_ID, v->agent_id) < 0 ||
        /* Under gvisor the token stays outside: the agent's events go
         * through the ring file sbx-guard relays (guard_ring.h). */
        env_put(&e, SBX_ENV_AGENT_TOKEN, v->ring_file ? "relayed" : v->agent_token) < 0 ||
        (v->ring_file && env_put(&e, SBX_ENV_RING_FILE, v->ring_file) < 0) ||
        env_put(&e, SBX_ENV_NOTIFY, v->notify ? "1" : "0") < 0)
        goto fail;
    return e.v;
fail:
    guard_env_free(e.v);
    return NULL;
}

/* CA bundles and proxies: what node, Python's requests and pip, curl and
 * git read to trust a corporate CA or reach the network through a proxy. */
static const char *const needed[] = {
    "NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE", "PIP_CERT", "GIT_SSL_CAINFO",
    "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy",
};

size_t guard_env_dropped(const struct policy *p, char *const host_env[], char *out,
                         size_t outsz)
{
    const struct policy_info *info = policy_info(p);
    size_t n = 0;

    if (outsz > 0)
        out[0] = '\0';
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++) {
        const char *name = needed[i];
        bool kept = false;
        if (guard_env_get(host_env, name) == NULL)
            continue;
        for (size_t j = 0; j < info->n_env_pass && !kept; j++)
            kept = strcmp(info->env_pass[j], name) == 0;
        for (size_t j = 0; j < info->n_env_set && !kept; j++)
            kept = strcmp(info->env_set_name[j], name) == 0;
        if (kept)
            continue;
        if (outsz > 0) {
            if (n > 0)
                strlcat(out, ", ", outsz);
            strlcat(out, name, outsz);
        }
        n++;
    }
    return n;
}

void guard_env_free(char **env)
{
    for (size_t i = 0; env && env[i]; i++)
        free(env[i]);
    free(env);
}

int guard_find_program(const char *cmd, char *const env[], char *out, size_t outsz)
{
    char found[PATH_MAX], cwd[PATH_MAX];
    const char *name = cmd;

    if (strchr(cmd, '/') == NULL) {
        /* execvp's search (path.h); a relative PATH entry gives a relative name */
        if (policy_path_search(cmd, guard_env_get(env, "PATH"), NULL, found, sizeof found) < 0)
            return -1;
        name = found;
    } else if (access(cmd, X_OK) < 0) {
        return -1;
    }
    if (name[0] == '/') {
        if (strlcpy(out, name, outsz) >= outsz)
            goto toolong;
        return 0;
    }
    /* joined as text: "link/.." is for the resolver to walk, not to fold */
    if (!getcwd(cwd, sizeof cwd))
        return -1;
    if ((size_t)snprintf(out, outsz, "%s/%s", cwd, name) >= outsz)
        goto toolong;
    return 0;
toolong:
    errno = ENAMETOOLONG;
    return -1;
}
