/*
 * ocsf.h — one audit row as an OCSF 1.3 event (https://schema.ocsf.io),
 * for `sbx-audit query --format ocsf` and the exporter (export.h).
 *
 * The class follows the row's op: File System Activity (1001) for the file
 * ops, Process Activity (1007) for exec, start, exit, kill and
 * policy-error, Network Activity (4001) for connect, bind and send.  A
 * denial is not a separate Detection Finding: it is the same activity
 * event with the security_control profile's action "Denied" and
 * disposition "Blocked", status "Failure" and the errno the program saw,
 * so every row is exactly one event and a search by class finds the
 * refused calls beside the allowed ones (docs/audit.md has the table).
 * The policy rule and its file:line and the decision are in
 * actor.authorizations[0]; the agent's name and run id in actor.app_name
 * and actor.session.uid; everything sbx-specific (layer, chain hash, the
 * raw row) in unmapped.sbx.
 *
 * Strings are copied; a byte that is not UTF-8 is written as the text
 * \xNN (JSON must be UTF-8; paths need not be).  The JSON is written
 * directly (members in a fixed order, compact, escaped as jansson would),
 * not built as a tree: the exporter formats tens of thousands a second.
 */
#ifndef SBX_AUDIT_OCSF_H
#define SBX_AUDIT_OCSF_H

#include <stdbool.h>
#include <stddef.h>

#include "store.h"

/* The OCSF schema version the events claim. */
#define AUDIT_OCSF_VERSION "1.3.0"

/* ROW as one line of compact JSON, without a newline, in a string the
 * caller frees.  HOSTNAME (may be NULL) becomes device.hostname.  NULL
 * when out of memory. */
char *audit_ocsf_json(const struct audit_row *row, const char *hostname);

/* The same JSON appended to *BUF (LEN bytes used of CAP, grown with
 * realloc; *BUF may start NULL, the caller frees it), NUL-terminated.
 * 0, or -1 when out of memory with *LEN as it was. */
int audit_ocsf_append(const struct audit_row *row, const char *hostname, char **buf, size_t *len,
                      size_t *cap);

/* The OCSF class and activity for OP (a row's op text): the class uid and
 * the activity id; unknown ops are Process Activity "Other" (99). */
void audit_ocsf_class(const char *op, int *class_uid, int *activity_id);

/* A copy of S (caller frees) with every byte that is not part of valid
 * UTF-8 replaced by the text \xNN, and, with CONTROLS, every ASCII control
 * too (for texts that go where a newline would end a record).  NULL when
 * out of memory. */
char *audit_utf8_dup(const char *s, bool controls);

#endif
