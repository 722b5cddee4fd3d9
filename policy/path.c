/* path.c — making paths absolute, folding them and resolving symlinks the
 * way the kernel would, so that a decision is about the file the call will
 * really touch (policy.h). */
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A loop limit like the kernel's (40 symlinks per lookup). */
#define RESOLVE_MAX_LINKS 40

/* Appends component C (length N) to OUT (length *OL), folding "." and "..".
 * OUT is "/" or "/a/b" (never a trailing slash). */
static int push_comp(char *out, size_t *ol, size_t outsz, const char *c, size_t n)
{
    if (n == 0 || (n == 1 && c[0] == '.'))
        return 0;
    if (n == 2 && c[0] == '.' && c[1] == '.') {
        while (*ol > 1 && out[*ol - 1] != '/')
            (*ol)--;
        if (*ol > 1)
            (*ol)--;
        out[*ol] = '\0';
        return 0;
    }
    size_t need = *ol + (*ol > 1) + n + 1;
    if (need > outsz) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (*ol > 1)
        out[(*ol)++] = '/';
    memcpy(out + *ol, c, n);
    *ol += n;
    out[*ol] = '\0';
    return 0;
}

static int fold_into(char *out, size_t *ol, size_t outsz, const char *path)
{
    const char *p = path;
    while (*p != '\0') {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (push_comp(out, ol, outsz, p, n) < 0)
            return -1;
        p += n;
        while (*p == '/')
            p++;
    }
    return 0;
}

int path_join_fold(const char *base, const char *path, char *out, size_t outsz,
                   bool keep_trailing)
{
    size_t ol = 1;

    if (outsz < 2) {
        errno = ENAMETOOLONG;
        return -1;
    }
    out[0] = '/';
    out[1] = '\0';
    if (path[0] != '/' && base != NULL && fold_into(out, &ol, outsz, base) < 0)
        return -1;
    if (fold_into(out, &ol, outsz, path) < 0)
        return -1;
    if (keep_trailing && ol > 1) {
        size_t n = strlen(path);
        if (n > 0 && path[n - 1] == '/') {
            if (ol + 2 > outsz) {
                errno = ENAMETOOLONG;
                return -1;
            }
            out[ol++] = '/';
            out[ol] = '\0';
        }
    }
    return 0;
}

int policy_path_lexical(const char *base, const char *path, char *out, size_t outsz)
{
    return path_join_fold(base, path, out, outsz, false);
}

/* "/proc/self" and "/proc/thread-self" are kept as written: they stand for
 * the calling process, which is what a policy means by them. */
static bool is_proc_self(const char *p, size_t n)
{
    return (n == 10 && memcmp(p, "/proc/self", 10) == 0) ||
           (n == 17 && memcmp(p, "/proc/thread-self", 17) == 0);
}

/*
 * Component by component, like the kernel's lookup: OUT holds the resolved
 * part (no symlinks, so ".." in what follows is its physical parent), REST
 * the components still to walk.  A symlink's target is put in front of
 * REST.  ".." is not folded before resolving: "/ws/link/../x" is where the
 * kernel goes, not "/ws/x".  Once a component does not exist, nothing below
 * it can, and the rest is folded lexically.
 */
int policy_path_resolve(const char *base, const char *path, bool nofollow,
                        char *out, size_t outsz)
{
    char rest[PATH_MAX], link[PATH_MAX], tmp[PATH_MAX];
    size_t ol = 1, links = 0;
    int n;

    if (outsz < 2) {
        errno = ENAMETOOLONG;
        return -1;
    }
    /* absolute, but ".." kept: join by text only */
    if (path[0] == '/' || base == NULL)
        n = snprintf(rest, sizeof(rest), "%s", path);
    else
        n = snprintf(rest, sizeof(rest), "%s/%s", base, path);
    if (n < 0 || (size_t)n >= sizeof(rest)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    out[0] = '/';
    out[1] = '\0';

    const char *p = rest;
    while (*p != '\0') {
        while (*p == '/')
            p++;
        if (*p == '\0')
            break;
        const char *e = strchr(p, '/');
        size_t cn = e ? (size_t)(e - p) : strlen(p);
        const char *after = p + cn;
        bool last = true;
        for (const char *q = after; *q != '\0'; q++)
            if (*q != '/') {
                last = false;
                break;
            }

        if ((cn == 1 && p[0] == '.') || (cn == 2 && p[0] == '.' && p[1] == '.')) {
            push_comp(out, &ol, outsz, p, cn);
            p = after;
            continue;
        }
        size_t before = ol;
        if (push_comp(out, &ol, outsz, p, cn) < 0)
            return -1;
        if (last && nofollow)
            break;
        if (is_proc_self(out, ol)) {
            p = after;
            continue;
        }

        struct stat st;
        if (lstat(out, &st) < 0) {
            /* does not exist (or cannot be looked at): keep the rest as written */
            if (fold_into(out, &ol, outsz, after) < 0)
                return -1;
            break;
        }
        if (!S_ISLNK(st.st_mode)) {
            p = after;
            continue;
        }
        ssize_t ln = readlink(out, link, sizeof(link) - 1);
        if (ln < 0) {
            if (fold_into(out, &ol, outsz, after) < 0)
                return -1;
            break;
        }
        link[ln] = '\0';
        /* In /proc, "pipe:[123]", "socket:[..]", "anon_inode:..", and
         * "/memfd:name (deleted)" name no file: the path itself is the best
         * name of what it opens. */
        if (strncmp(out, "/proc/", 6) == 0 &&
            (link[0] != '/' || strncmp(link, "/memfd:", 7) == 0)) {
            if (fold_into(out, &ol, outsz, after) < 0)
                return -1;
            break;
        }
        if (++links > RESOLVE_MAX_LINKS) {
            errno = ELOOP;
            return -1;
        }
        n = snprintf(tmp, sizeof(tmp), "%s%s", link, after);
        if (n < 0 || (size_t)n >= sizeof(tmp)) {
            errno = ENAMETOOLONG;
            return -1;
        }
        memcpy(rest, tmp, (size_t)n + 1);
        p = rest;
        if (link[0] == '/') {
            ol = 1;
        } else {
            ol = before;
        }
        out[ol] = '\0';
    }
    return 0;
}

int policy_path_expand(const struct policy *p, const char *path, char *out, size_t outsz)
{
    const char *home = p->info.home;
    char tmp[PATH_MAX];

    if ((path[0] == '~' && (path[1] == '/' || path[1] == '\0')) && home != NULL) {
        int n = snprintf(tmp, sizeof(tmp), "%s/%s", home, path[1] ? path + 2 : "");
        if (n < 0 || (size_t)n >= sizeof(tmp)) {
            errno = ENAMETOOLONG;
            return -1;
        }
        path = tmp;
    }
    return policy_path_lexical(p->info.workspace, path, out, outsz);
}
