/*
 * env.c — keeping the guard in every child: an exec whose environment lacks
 * our LD_PRELOAD entry or one of the SBX_* variables sbx-guard handed down
 * (or has them changed) gets them back.
 *
 * guard_env_restore builds the new envp in memory the caller provides (its
 * stack): exec may run in a vfork child, where malloc is not safe and a
 * mapping would leak into the parent.  guard_environ_restore is for
 * system() and popen(), which spawn the shell with `environ` from inside
 * libc: it uses setenv, as the program itself would.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "guard.h"

extern char **environ;

size_t guard_env_count(char *const envp[])
{
    size_t n = 0;
    if (envp)
        while (envp[n])
            n++;
    return n;
}

/* The entry "NAME=..." of ENVP, or NULL. */
static const char *env_find(char *const envp[], const char *name, size_t namelen)
{
    if (!envp)
        return NULL;
    for (size_t i = 0; envp[i]; i++)
        if (strncmp(envp[i], name, namelen) == 0 && envp[i][namelen] == '=')
            return envp[i];
    return NULL;
}

/* True if the colon- or space-separated LIST contains ITEM. */
static bool list_has(const char *list, const char *item)
{
    size_t n = strlen(item);
    const char *p = list;
    while (*p) {
        while (*p == ':' || *p == ' ')
            p++;
        const char *s = p;
        while (*p && *p != ':' && *p != ' ')
            p++;
        if ((size_t)(p - s) == n && strncmp(s, item, n) == 0)
            return true;
    }
    return false;
}

static bool preload_missing(char *const envp[])
{
    if (!guard_preload_path)
        return false;
    const char *e = env_find(envp, "LD_PRELOAD", 10);
    return !e || !list_has(e + 11, guard_preload_path);
}

bool guard_env_needs_restore(char *const envp[])
{
    if (preload_missing(envp))
        return true;
    for (int i = 0; i < GENV__COUNT; i++) {
        if (!guard_envs[i].entry)
            continue;
        const char *e = env_find(envp, guard_envs[i].name, strlen(guard_envs[i].name));
        if (!e || strcmp(e, guard_envs[i].entry) != 0)
            return true;
    }
    return false;
}

static bool is_ours(const char *entry)
{
    if (strncmp(entry, "LD_PRELOAD=", 11) == 0)
        return true;
    for (int i = 0; i < GENV__COUNT; i++) {
        size_t n = strlen(guard_envs[i].name);
        if (guard_envs[i].entry && strncmp(entry, guard_envs[i].name, n) == 0 &&
            entry[n] == '=')
            return true;
    }
    return false;
}

char **guard_env_restore(char *const envp[], char **out, size_t nout, char *str,
                         size_t strsz)
{
    size_t k = 0;
    size_t need = guard_env_count(envp) + GENV__COUNT + 2;
    if (nout < need) {
        errno = E2BIG;
        return NULL;
    }
    for (size_t i = 0; envp && envp[i]; i++)
        if (!is_ours(envp[i]))
            out[k++] = envp[i];
    for (int i = 0; i < GENV__COUNT; i++)
        if (guard_envs[i].entry)
            out[k++] = guard_envs[i].entry;
    const char *old = env_find(envp, "LD_PRELOAD", 10);
    if (!guard_preload_path) {
        if (old)
            out[k++] = (char *)old;
    } else if (old && list_has(old + 11, guard_preload_path)) {
        out[k++] = (char *)old;
    } else if (old && old[11]) {
        /* Ours first, then what the program wanted preloaded. */
        struct sbuf s;
        sbuf_init(&s, str, strsz);
        sbuf_add(&s, "LD_PRELOAD=");
        sbuf_add(&s, guard_preload_path);
        sbuf_add(&s, ":");
        sbuf_add(&s, old + 11);
        if (s.cut) {
            errno = E2BIG;
            return NULL;
        }
        out[k++] = str;
    } else if (guard_ld_preload_entry) {
        out[k++] = (char *)guard_ld_preload_entry;
    }
    out[k] = NULL;
    return out;
}

bool guard_environ_restore(void)
{
    if (!guard_env_needs_restore(environ))
        return false;
    for (int i = 0; i < GENV__COUNT; i++)
        if (guard_envs[i].value)
            setenv(guard_envs[i].name, guard_envs[i].value, 1);
    if (preload_missing(environ)) {
        const char *old = getenv("LD_PRELOAD");
        if (old && *old) {
            size_t n = strlen(guard_preload_path) + 1 + strlen(old) + 1;
            char buf[n];
            struct sbuf s;
            sbuf_init(&s, buf, n);
            sbuf_add(&s, guard_preload_path);
            sbuf_add(&s, ":");
            sbuf_add(&s, old);
            setenv("LD_PRELOAD", buf, 1);
        } else {
            setenv("LD_PRELOAD", guard_preload_path, 1);
        }
    }
    return true;
}
