/*
 * benign.c — the errno rule (docs/policy.md): a denial that would change a
 * program's success path, where the kernel's own answer reveals nothing the
 * policy hides, is answered as the kernel would, and is not a denial.
 *
 *   mkdir of a path that exists: EEXIST (mkdir -p, Node's
 *   mkdirSync(dir, { recursive: true }) on a directory that is there, the
 *   hidden home itself included: Claude Code makes it 15 times a start);
 *   an open that does not create, of a path that does not exist: ENOENT,
 *   or ENOTDIR where a component is a file (a probe for an optional
 *   configuration file: ~/.npmrc when there is none).
 *
 * Neither answer tells the agent anything new, wherever the path is, even
 * in a directory it may not read: stat(2), which neither the guard nor the
 * kernel layer judges (Landlock has no right for it), tells it the same.
 * And this fstatat runs in the agent's own process, with its view and
 * credentials: where the agent's stat would fail with EACCES, so does this
 * one, and the answer stays EACCES.  Anything else keeps EACCES and its
 * row.  No allocation; one fstatat.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "guard.h"

int guard_benign_errno(enum sbx_op op, int flags, const char *lex)
{
    struct stat st;
    bool mk = op == SBX_OP_MKDIR;

    if (!mk && op != SBX_OP_OPEN_READ && op != SBX_OP_OPEN_WRITE)
        return 0;
    if (!mk && (flags & (O_CREAT | O_TMPFILE)))
        return 0;
    if (lex[0] != '/')
        return 0;
    /* mkdir does not follow a last symlink (it is EEXIST itself); an open
     * does, unless O_NOFOLLOW. */
    long r = guard_raw(SYS_newfstatat, AT_FDCWD, (long)lex, (long)&st,
                       mk || (flags & O_NOFOLLOW) ? AT_SYMLINK_NOFOLLOW : 0, 0, 0);
    bool missing = r == -ENOENT || r == -ENOTDIR;
    if (mk ? r != 0 : !missing)
        return 0;
    return mk ? EEXIST : (int)-r;       /* ENOENT, or ENOTDIR as the kernel says */
}
