/*
 * duration.h — the one syntax for a length of time, shared by the policy
 * (limits.timeout, limits.cpu), `sbx-audit --since` and `sbx-auditd
 * --retain`, so that a duration that works in one place works in all.
 *
 * A duration is one or more terms, each a decimal number and a unit, with
 * optional spaces between number and unit and between terms:
 *   ms  milliseconds     s  seconds     m  minutes     h  hours     d  days
 * e.g. "250ms", "90s", "30m", "1h30m", "1h 30m", "2 h", "7d".  A bare number
 * has no unit and is an error (is "30" seconds or minutes?); so are signs,
 * fractions, a leading space and an empty string (trailing spaces are
 * allowed, as the policy always allowed them).
 *
 * Pure, allocates nothing, libc only (the preload's policy loader uses it).
 */
#ifndef SBX_DURATION_H
#define SBX_DURATION_H

#include <stdint.h>

/* Parses S into *MS (milliseconds).  0, or -1 with errno EINVAL (not a
 * duration) or ERANGE (past UINT64_MAX ms); *MS is untouched on error. */
int sbx_duration_parse(const char *s, uint64_t *ms);

#endif
