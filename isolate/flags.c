/*
 * flags.c — what bwrap.c, gvisor.c and container.c share when they write
 * the mount plan as another program's flags: the argv they build, and the
 * two questions each asks of the plan's write roots.
 */
#include "iso_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bsd/stdlib.h>

#include "path.h"

void iso_argv_add(struct iso_argv *a, const char *s)
{
    if (a->oom)
        return;
    if (a->n + 2 > a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        char **v = reallocarray(a->v, cap, sizeof *v);
        if (v == NULL) {
            a->oom = true;
            return;
        }
        a->v = v;
        a->cap = cap;
    }
    if ((a->v[a->n] = strdup(s)) == NULL) {
        a->oom = true;
        return;
    }
    a->v[++a->n] = NULL;
}

void iso_argv_addf(struct iso_argv *a, const char *fmt, ...)
{
    char *s = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0) {
        a->oom = true;
        return;
    }
    iso_argv_add(a, s);
    free(s);
}

void iso_argv_free(char **argv)
{
    if (argv == NULL)
        return;
    for (size_t i = 0; argv[i]; i++)
        free(argv[i]);
    free(argv);
}

bool iso_mounts_is_keep(const struct iso_mounts *mp, const char *path)
{
    for (size_t i = 0; i < mp->n_keep; i++)
        if (policy_path_under(path, mp->keep[i]))
            return true;
    return false;
}

bool iso_mounts_rw_from_host(const struct iso_mounts *mp, const struct iso_mnt *m)
{
    return m->kind == ISO_MNT_RW
           && !(mp->private_tmp && policy_path_under(m->path, "/tmp")
                && !iso_mounts_is_keep(mp, m->path));
}
