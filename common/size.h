/*
 * size.h — the one syntax for a number of bytes, shared by the policy
 * (files.max_write_bytes, limits.memory) and `sbx-auditd --max-size`, so
 * that a size that works in one place works in all.
 *
 * A size is a decimal number, optional spaces, and an optional unit: B,
 * K or KiB, M or MiB, G or GiB (powers of 1024; "10MiB", "512 K", "4096").
 * Signs, fractions, a leading space and other units are errors.
 *
 * Pure, allocates nothing, libc only (the preload's policy loader uses it).
 */
#ifndef SBX_SIZE_H
#define SBX_SIZE_H

#include <stdint.h>

/* Parses S into *BYTES.  0, or -1 (malformed, or past UINT64_MAX); *BYTES
 * is untouched on error. */
int sbx_size_parse(const char *s, uint64_t *bytes);

#endif
