/*
 * benign.c — the errno rule (docs/policy.md): a denial that would change a
 * program's success path, where the kernel's own answer reveals nothing the
 * policy hides, is answered as the kernel would, and is not a denial.
 *
 *   mkdir of a path that exists, when the path or its parent directory is
 *   readable under the read rules: EEXIST (mkdir -p, Node's
 *   mkdirSync(dir, { recursive: true }) on a directory that is there);
 *   an open that does not create, of a path that does not exist: ENOENT
 *   (ENOTDIR where a component is a file; a probe for an optional configuration file, ~/.npmrc when there is
 *   none), wherever it is.
 *
 * Readable parent: the agent can list it and see the name there or not, so
 * the answer tells it nothing new.  A missing file tells it nothing new
 * either, even in a directory it may not read: stat(2), which neither the
 * guard nor the kernel layer judges (Landlock has no right for it), says
 * the same ENOENT, and this fstatat runs in the agent's own process with
 * its view and credentials (where the agent's stat would fail EACCES, so
 * does this one, and the answer stays EACCES).  Anything else keeps EACCES
 * and its row.  No allocation; one fstatat.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "guard.h"

static bool readable(const char *path)
{
    struct guard_verdict gv;
    return guard_decide_path(SBX_OP_OPEN_READ, path, false, &gv) == SBX_ALLOW && !gv.v.audit;
}

int guard_benign_errno(enum sbx_op op, int flags, const char *lex)
{
    char parent[GUARD_PATH_MAX];
    struct stat st;
    bool mk = op == SBX_OP_MKDIR;

    if (!mk && op != SBX_OP_OPEN_READ && op != SBX_OP_OPEN_WRITE)
        return 0;
    if (!mk && (flags & (O_CREAT | O_TMPFILE)))
        return 0;
    if (lex[0] != '/' || strlen(lex) >= sizeof parent)
        return 0;
    /* mkdir does not follow a last symlink (it is EEXIST itself); an open
     * does, unless O_NOFOLLOW. */
    long r = guard_raw(SYS_newfstatat, AT_FDCWD, (long)lex, (long)&st,
                       mk || (flags & O_NOFOLLOW) ? AT_SYMLINK_NOFOLLOW : 0, 0, 0);
    bool missing = r == -ENOENT || r == -ENOTDIR;
    if (mk ? r != 0 : !missing)
        return 0;
    if (!mk)
        return (int)-r;         /* ENOENT, or ENOTDIR as the kernel says */
    memcpy(parent, lex, strlen(lex) + 1);
    char *slash = strrchr(parent, '/');
    if (slash == parent)
        slash[1] = '\0';        /* "/x": the parent is "/" */
    else
        *slash = '\0';
    if (!readable(parent) && !readable(lex))
        return 0;
    return EEXIST;
}
