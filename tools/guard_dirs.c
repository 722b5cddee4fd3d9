/* guard_dirs.c — missing write roots under the home (see guard_dirs.h). */
#include "guard_dirs.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#include <bsd/string.h>

/* True if PATH is strictly below DIR (both absolute, folded). */
static bool below(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    return strncmp(path, dir, n) == 0 && path[n] == '/' && path[n + 1] != '\0';
}

int guard_make_write_roots(const struct policy *p)
{
    const struct policy_info *pi = policy_info(p);
    const struct policy_rule *r;
    size_t n = policy_rules(p, POLICY_WRITE_ALLOW, &r);
    char root[PATH_MAX], parent[PATH_MAX];
    struct stat st;
    int made = 0;

    if (pi->home == NULL || pi->home[0] != '/')
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i].pattern == NULL || policy_glob_root(r[i].pattern, root, sizeof root) < 0)
            continue;
        /* A pattern without a wildcard may name a file (~/.claude.json,
         * ~/.local/bin/claude): making a directory there would break the
         * tool that writes it. */
        if (strcmp(root, r[i].pattern) == 0)
            continue;
        if (!below(root, pi->home) || lstat(root, &st) == 0 || errno != ENOENT)
            continue;
        /* Only the last segment is created: its parent must be there. */
        strlcpy(parent, root, sizeof parent);
        char *slash = strrchr(parent, '/');
        if (slash == NULL || slash == parent)
            continue;
        *slash = '\0';
        if (stat(parent, &st) < 0 || !S_ISDIR(st.st_mode))
            continue;
        if (mkdir(root, 0700) == 0)
            made++;
    }
    return made;
}
