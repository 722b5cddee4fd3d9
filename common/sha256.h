/*
 * sha256.h — SHA-256 for the store's hash chain (auditd/) and, in the
 * preload, for the policy's hash (compat.c's SHA256Data).  Where the CPU
 * has the SHA extensions (checked once with CPUID) the block function uses
 * the SHA-NI instructions: the chain hashes every stored row, and a
 * portable C block function alone would cost more than a third of the
 * daemon's ingest time.  Elsewhere it is portable C.  Both give libmd's
 * digests (tests/unit/test_store.c compares them with libmd's SHA256Data
 * on random inputs).  No allocation; thread-safe.  (The audit_ prefix is
 * the hash chain's, where the module began.)
 */
#ifndef SBX_SHA256_H
#define SBX_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* OUT = SHA-256 of the N bytes at DATA. */
void audit_sha256(const void *data, size_t n, unsigned char out[32]);
/* The same with the portable block function, whatever the CPU. */
void audit_sha256_portable(const void *data, size_t n, unsigned char out[32]);
/* True when the SHA-NI block function is in use. */
bool audit_sha256_accelerated(void);

#endif
