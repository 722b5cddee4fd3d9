/*
 * auditfmt.h — printing audit rows for sbx-audit: aligned table (colour
 * only on a terminal), JSON lines, RFC 4180 CSV; and the time syntax of
 * --since.  Output goes to stdout; nothing is kept between calls except the
 * table's column widths, which the caller owns.
 */
#ifndef SBX_AUDITFMT_H
#define SBX_AUDITFMT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "store.h"

enum afmt { AFMT_TABLE, AFMT_JSON, AFMT_CSV };

/* RFC 3339 UTC with microseconds: "2026-12-02T14:02:10.123456Z". */
void afmt_time(int64_t ts_ns, char *out, size_t outsz);
/* --since: a duration back from now (duration.h: "10m", "2h", "1h30m",
 * "1d", "500ms") or a time ("2026-12-02T14:00:00Z", "2026-12-02 14:00:00", "2026-12-02"; UTC).
 * 0 and *NS, or -1. */
int afmt_parse_since(const char *s, int64_t *ns);

/* S made safe for a terminal into OUT (OUTSZ bytes; cut with "..." when it
 * does not fit): ASCII controls and invalid UTF-8 bytes become \xNN, the C1
 * controls, bidirectional controls (U+202E ...) and line separators \u{N}.
 * The table output and messages that echo what a user or
 * an agent wrote use it.  Returns OUT. */
const char *afmt_escape(const char *s, char *out, size_t outsz);

/* Writes S as a JSON string (quoted; invalid UTF-8 becomes U+FFFD; the
 * controls afmt_escape escapes become \uXXXX). */
void afmt_json_str(FILE *f, const char *s);

struct afmt_table {
    bool colour;
    int w_agent, w_op, w_target;
};
void afmt_header(enum afmt fmt, const struct afmt_table *t);
void afmt_row(enum afmt fmt, const struct afmt_table *t, const struct audit_row *r);

#endif
