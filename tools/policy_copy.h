/*
 * policy_copy.h — the private copy of a policy that the preload of an agent
 * loads (sbx-guard's agents, sbx-serve's sandboxes).
 *
 * The copy is made once, before the agent starts, so that editing the
 * policy during the run changes nothing.  A single file is copied byte for
 * byte and its hash must equal the loaded policy's (else the file changed
 * while it was being loaded); a policy that extends another file is written
 * as its expansion (policy_expand), one file with every key, so that the
 * parents are not read again either.
 *
 * Errors: -1 with a message in ERR (DST is then removed); 0 on success.
 */
#ifndef SBX_POLICY_COPY_H
#define SBX_POLICY_COPY_H

#include <stddef.h>

#include "policy.h"

/* Writes the copy of P (loaded from SRC) to DST, created 0400 and
 * exclusively (an existing DST is an error). */
int policy_copy_write(const struct policy *p, const char *src, const char *dst,
                      char *err, size_t errsz);

#endif
