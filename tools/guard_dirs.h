/*
 * guard_dirs.h — the write roots sbx-guard creates before the kernel layer
 * starts.
 *
 * The kernel layer (mounts, Landlock) can grant a write root only if it
 * exists when the sandbox is set up: a root that does not would have to be
 * widened to its parent (the whole home for ~/.npm), which the policy does
 * not say.  Package managers' caches (~/.npm, ~/.cache) are often missing
 * in a fresh home, and then npm or go fail inside the sandbox.  So
 * sbx-guard creates a missing write root under the policy's home whose
 * parent exists (mode 0700, as the tools would): ~/.cache in any home,
 * ~/go/pkg/mod only where ~/go/pkg is.  Nothing outside the home is
 * created, nor the home itself, nor the root of a pattern without a
 * wildcard (it may name a file: ~/.claude.json).  Made in every isolation
 * mode, so that tools see the same home with the guard alone.
 */
#ifndef SBX_GUARD_DIRS_H
#define SBX_GUARD_DIRS_H

#include "policy.h"

/* Creates the missing write roots of P described above.  Returns how many
 * were created; a failure is not an error (the tool will say why). */
int guard_make_write_roots(const struct policy *p);

#endif
