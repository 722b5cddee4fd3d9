/*
 * serve_text.h — the texts of an answer: program output made valid UTF-8,
 * and a number written as Python writes a float.  Pure functions, no
 * state; serve_utf8 allocates its result (the caller frees it).  Also
 * the two helpers every part of sbx-serve uses: an error text into a
 * caller's buffer, and the monotonic clock.
 */
#ifndef SBX_SERVE_TEXT_H
#define SBX_SERVE_TEXT_H

#include <stddef.h>

/* BUF[0..LEN) as valid UTF-8 (each invalid sequence replaced by U+FFFD,
 * as Python's errors="replace": a cut but valid prefix of a sequence is
 * one replacement, any other bad byte one each; no overlong forms, no
 * surrogates, nothing above U+10FFFF), plus SUFFIX (or NULL); malloc'd,
 * its length in *OUTLEN.  NULL when out of memory. */
char *serve_utf8(const char *buf, size_t len, const char *suffix, size_t *outlen);

/* "2.0" for 2, "2.5" for 2.5, "0.1" for 0.1: the shortest text that reads
 * back as V, with ".0" when it would look like an integer (Python's str()
 * of a float). */
void serve_float_text(double v, char *out, size_t outsz);

/* printf into ERR[ERRSZ] (truncated, always terminated). */
void serve_errf(char *err, size_t errsz, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* CLOCK_MONOTONIC in seconds. */
double serve_now_s(void);

#endif
