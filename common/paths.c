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
