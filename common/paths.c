/* paths.c — default locations (see paths.h). */
#include "paths.h"

#include <errno.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int fmt(char *out, size_t outsz, const char *f, ...)
    __attribute__((format(printf, 3, 4)));

static int fmt(char *out, size_t outsz, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(out, outsz, f, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= outsz) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

static const char *nonempty_env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static const char *home_dir(void)
{
    const char *h = nonempty_env("HOME");
    if (h)
        return h;
    struct passwd *pw = getpwuid(getuid());
    return pw && pw->pw_dir && *pw->pw_dir ? pw->pw_dir : NULL;
}

int sbx_path_audit_db(char *out, size_t outsz)
{
    const char *v;
    if ((v = nonempty_env(SBX_ENV_AUDIT_DB)))
        return fmt(out, outsz, "%s", v);
    if ((v = nonempty_env("XDG_STATE_HOME")))
        return fmt(out, outsz, "%s/sbx/audit.db", v);
    if (geteuid() == 0 && !nonempty_env("XDG_RUNTIME_DIR"))
        return fmt(out, outsz, "/var/lib/sbx/audit.db");
    const char *h = home_dir();
    if (!h) {
        errno = ENOENT;
        return -1;
    }
    return fmt(out, outsz, "%s/.local/state/sbx/audit.db", h);
}

int sbx_path_runtime_dir(char *out, size_t outsz)
{
    const char *v;
    if ((v = nonempty_env(SBX_ENV_RUNTIME_DIR)))
        return fmt(out, outsz, "%s", v);
    if ((v = nonempty_env("XDG_RUNTIME_DIR")))
        return fmt(out, outsz, "%s/sbx", v);
    if (geteuid() == 0)
        return fmt(out, outsz, "/run/sbx");
    return fmt(out, outsz, "/tmp/sbx-%u", (unsigned)getuid());
}

int sbx_path_runtime_file(const char *name, char *out, size_t outsz)
{
    char dir[4096];
    if (sbx_path_runtime_dir(dir, sizeof dir) < 0)
        return -1;
    return fmt(out, outsz, "%s/%s", dir, name);
}

int sbx_mkdir_p(const char *dir, unsigned mode)
{
    char buf[4096];
    if (fmt(buf, sizeof buf, "%s", dir) < 0)
        return -1;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(buf, mode) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

/* The store's directory: the audit path up to its last slash ("." when
 * the path has none, "/" for a file at the root). */
static int audit_dir(char *out, size_t outsz)
{
    char db[4096];
    if (sbx_path_audit_db(db, sizeof db) < 0)
        return -1;
    char *slash = strrchr(db, '/');
    if (!slash)
        return fmt(out, outsz, ".");
    if (slash == db)
        return fmt(out, outsz, "/");
    *slash = '\0';
    return fmt(out, outsz, "%s", db);
}

int sbx_path_private_dir(enum sbx_dir which, bool create, char *dir, size_t dirsz,
                         char *err, size_t errsz)
{
    const char *what = which == SBX_DIR_RUNTIME ? "runtime directory" : "audit store's directory";
    const char *var = which == SBX_DIR_RUNTIME ? SBX_ENV_RUNTIME_DIR : SBX_ENV_AUDIT_DB;
    char d[4096];
    int rc = which == SBX_DIR_RUNTIME ? sbx_path_runtime_dir(d, sizeof d) : audit_dir(d, sizeof d);
    if (rc < 0) {
        snprintf(err, errsz, "cannot find the %s: %s", what, strerror(errno));
        return -1;
    }
    /* lstat names the last component itself: a trailing slash would make
     * it follow a symlink. */
    size_t n = strlen(d);
    while (n > 1 && d[n - 1] == '/')
        d[--n] = '\0';
    if (dir && fmt(dir, dirsz, "%s", d) < 0) {
        snprintf(err, errsz, "the %s's path is too long", what);
        return -1;
    }
    if (create && sbx_mkdir_p(d, 0700) < 0 && errno != EEXIST) {
        snprintf(err, errsz, "cannot create the %s %s: %s", what, d, strerror(errno));
        return -1;
    }
    struct stat st;
    if (lstat(d, &st) < 0) {
        int e = errno;
        snprintf(err, errsz, "the %s %s: %s", what, d, strerror(e));
        errno = e;
        return -1;
    }
    uid_t me = geteuid();
    char why[128] = "";
    if (S_ISLNK(st.st_mode))
        snprintf(why, sizeof why, "is a symbolic link");
    else if (!S_ISDIR(st.st_mode))
        snprintf(why, sizeof why, "is not a directory");
    else if (st.st_uid != me)
        snprintf(why, sizeof why, "is owned by uid %u, not by you (uid %u)",
                 (unsigned)st.st_uid, (unsigned)me);
    else if (st.st_mode & (S_IWGRP | S_IWOTH))
        snprintf(why, sizeof why, "is writable by %s (mode %04o)",
                 st.st_mode & S_IWOTH ? "others" : "its group", (unsigned)(st.st_mode & 07777));
    if (!why[0])
        return 0;
    snprintf(err, errsz, "the %s %s %s: refusing to use it, since another user could "
             "read or replace what sbx keeps there; remove it, or choose another with %s",
             what, d, why, var);
    errno = EPERM;
    return -1;
}

int sbx_path_self_dir(char *out, size_t outsz)
{
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    if (!slash) {
        errno = ENOENT;
        return -1;
    }
    *slash = '\0';
    return fmt(out, outsz, "%s", buf[0] ? buf : "/");
}
