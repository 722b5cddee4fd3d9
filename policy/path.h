/*
 * path.h — what sbx means by a path, in one place.
 *
 * Every enforcer judges the same file for the same path: the preload in the
 * agent, the supervisor in sbx-guard (which looks at the agent from
 * outside, through /proc/PID/root), the policy compiler, `sbx-policy
 * explain` and the tools fold, resolve, ask "is this under that", search
 * PATH and split a typed command into words with these functions and no
 * copies of them.  tests/unit/test_path_agree.c runs one table of cases
 * through every caller.
 *
 * The semantics, where earlier copies disagreed, as chosen here:
 *  - Folding is lexical: "." is dropped, ".." goes to the parent ("/.." is
 *    "/"), "//" is "/", a trailing "/" is dropped.  No system call.
 *  - Resolving walks component by component like the kernel's lookup:
 *    ".." after a symlink is the parent of the symlink's target; after the
 *    first component that does not exist, the rest is folded lexically (a
 *    file about to be created); 40 links make ELOOP.  In a process's own
 *    view "/proc/self" is kept as written (the policy means the caller by
 *    it); in another process's view it is that process, numbered as its
 *    own pid namespace numbers it.  A /proc link that names no file
 *    ("pipe:[12]", "anon_inode:[x]", "/memfd:x (deleted)") ends resolution
 *    with the path as written, unless the caller asks for a memfd's name.
 *  - "Under": a directory is under itself; "/" contains every absolute
 *    path; "/a" does not contain "/ab"; an empty directory contains
 *    nothing.  (Two of the four copies said "/x" was not under "/".)
 *  - PATH is searched as execvp(3) does: each entry in order, an empty
 *    entry is the current directory, the first regular file with execute
 *    permission wins; no PATH at all is glibc's default "/bin:/usr/bin".
 *    (The tools used to default to /usr/local/bin first and took any
 *    executable, a directory too.)
 *  - A typed command is split as sh(1) splits simple words: blanks
 *    (space, tab, newline) separate; '...' is literal; inside "..." a
 *    backslash escapes only " \ and $; outside quotes it escapes the next
 *    character.  No expansion, no operators.  (`sbx-policy explain` used to
 *    take a backslash inside "..." literally, and so judged another script
 *    than the guard for `sh -c "echo \"x\""`.)
 *
 * Memory: nothing here allocates; every output buffer is the caller's (the
 * directory cache is one static table).  The preload calls these on its
 * hot path: folding makes no system call; resolving in the caller's own
 * view makes lstat and readlink only, one each per component walked
 * (with the cache on, one lstat stands for a remembered directory);
 * searching makes only the probe's calls.
 *
 * Errors: 0, or -1 with errno (ENAMETOOLONG, ELOOP, ENOENT, EACCES); the
 * word splitter returns a count or -1.
 */
#ifndef SBX_POLICY_PATH_H
#define SBX_POLICY_PATH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct policy;

/* Folds PATH onto the folded absolute path in OUT[0..LEN) ("/" is LEN 1)
 * and terminates it: what a base from the kernel (getcwd, a dirfd's link)
 * needs, already folded, without folding it again.  -1/ENAMETOOLONG. */
int policy_path_fold_onto(char *out, size_t outsz, size_t len, const char *path);

/* Makes PATH absolute against BASE (an absolute directory; NULL: "/"),
 * folds ".", ".." and "//", drops a trailing "/".  No system call.
 * -1/ENAMETOOLONG. */
int policy_path_lexical(const char *base, const char *path, char *out, size_t outsz);

/* Whose file system a path is resolved in. */
struct policy_path_view {
    const char *root;           /* put before every path looked at:
                                 * "/proc/PID/root" for another process's
                                 * view; NULL or "": the caller's own */
    pid_t pid;                  /* with ROOT: the process "/proc/self"
                                 * means; 0: "/proc/self" kept as written */
};

#define POLICY_PATH_NOFOLLOW   0x1u  /* the last component is not followed */
#define POLICY_PATH_MEMFD_NAME 0x2u  /* a /proc link to a memfd resolves to
                                      * its name, "/memfd:NAME (deleted)" */

/* Makes PATH absolute against BASE (NULL: "/") and resolves symlinks as
 * VIEW (NULL: the caller's own) sees them, with FLAGS (POLICY_PATH_*), as
 * the header says.  System calls: lstat and readlink per component, and
 * one read of /proc/PID/status when another process's path goes through
 * its /proc/self.  -1/ELOOP on a symlink loop (40 links), -1/ENAMETOOLONG. */
int policy_path_resolve_in(const struct policy_path_view *view, const char *base,
                           const char *path, unsigned flags, char *out, size_t outsz);

/*
 * Remembered directories (off until enabled; the preload enables it).
 * Resolving walks every component with lstat; with the cache on, the
 * deepest directory each resolution walked is remembered, per process, in
 * a fixed table (256 slots of directories up to 239 bytes; /proc never),
 * with the (dev, ino) lstat gave it.  A later resolution whose path starts
 * with a remembered directory checks it with one lstat (same dev and ino,
 * a directory, not a symlink) and walks only what follows; on a mismatch
 * the entry is forgotten and the walk starts from the root.  Only the
 * caller's own view uses it.  Thread- and async-signal-safe (a slot in use
 * is a miss), no allocation.
 *
 * What the one lstat cannot see, and why it is accepted: a directory ABOVE
 * the remembered one that was renamed elsewhere and replaced by a symlink
 * to its new place ("mv /w/a /z/a; ln -s /z/a /w/a" with /w/a/b
 * remembered).  The lstat of /w/a/b then finds the same directory, and a
 * path below it is judged by its old name /w/a/b/... where a fresh walk
 * says /z/a/b/....  Making that switch takes a rename the guard judges at
 * both ends (the source also for reading), so an agent can do it only
 * with a directory it may already read and move into a place it may
 * write; and what it reaches is that same directory.  The remembered
 * directory itself replaced by anything (a symlink, another directory, a
 * mount) is seen.  Like every check the guard makes before the call, it
 * cannot stop a swap after the check (the kernel layer is the wall).
 */
void policy_path_cache_enable(bool on);

/* Forgets every remembered directory (a chroot, a new mount namespace). */
void policy_path_cache_flush(void);

/* Resolutions that started from a remembered directory, and those that
 * found none (for tests and benchmarks). */
void policy_path_cache_stats(unsigned long *hits, unsigned long *misses);

/* policy_path_resolve_in in the caller's own view. */
int policy_path_resolve(const char *base, const char *path, bool nofollow,
                        char *out, size_t outsz);

/* Expands a leading "~/" with the policy's home, then makes the result
 * absolute against the workspace (for targets typed by a person). */
int policy_path_expand(const struct policy *p, const char *path, char *out, size_t outsz);

/* True if PATH is DIR or below it (both absolute and folded). */
bool policy_path_under(const char *path, const char *dir);

/* PATH's value when there is none: what glibc's execvp uses
 * (confstr(_CS_PATH)). */
#define POLICY_PATH_DEFAULT "/bin:/usr/bin"

/* Can CANDIDATE be run?  0, EACCES (there, but not a regular file with
 * execute permission) or ENOENT (not there).  A probe makes its own system
 * calls (the preload's goes around libc). */
typedef int (*policy_path_probe)(const char *candidate);

/* The program execvp would run for FILE (a bare name, no '/'), searched in
 * PATHVAR (a colon-separated list; NULL: POLICY_PATH_DEFAULT), into OUT as
 * "DIR/FILE" (relative when DIR is: an empty entry gives "./FILE").  PROBE
 * NULL: stat(2) and access(2).  -1/ENOENT, or -1/EACCES if only a file that
 * cannot be run was found. */
int policy_path_search(const char *file, const char *pathvar, policy_path_probe probe,
                       char *out, size_t outsz);

/* Splits CMD into at most MAXW - 1 words as the header says: the words
 * live in STORE (STORESZ bytes; strlen(CMD) + 1 always suffices), WORDS[n]
 * is NULL.  Returns the number of words, or -1 if they do not fit. */
int policy_path_shell_words(const char *cmd, char *store, size_t storesz,
                            char **words, int maxw);

#endif
