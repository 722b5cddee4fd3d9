/* export_int.h — the exporter's private parts, shared by export.c,
 * export_sink.c and export_mark.c only (export.h is the manual). */
#ifndef SBX_AUDIT_EXPORT_INT_H
#define SBX_AUDIT_EXPORT_INT_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* ---- export_sink.c: where the messages go ---------------------------------- */
struct sink;
/* Parses URL (export.h) into *OUT; nothing is connected yet.  0 / -1. */
int sink_open(const char *url, struct sink **out, char *err, size_t errsz);
/* True when the sink takes RFC 5424 messages, false for JSON lines. */
bool sink_is_syslog(const struct sink *s);
/* A batch: begin (connects if needed), send each message, end.  End is 0
 * only when every message sent since begin was acknowledged (RELP) or
 * written (TCP, file).  After a -1 from any of them, call sink_abort. */
int sink_begin(struct sink *s, char *err, size_t errsz);
int sink_send(struct sink *s, const char *msg, size_t len, char *err, size_t errsz);
int sink_end(struct sink *s, char *err, size_t errsz);
/* Drops the connection (the next begin reconnects). */
void sink_abort(struct sink *s);
void sink_close(struct sink *s);

/* ---- export_mark.c: the watermark in the store ----------------------------- */
/* Opens a second, writable connection to the store at DB for the
 * export_watermark table (created if missing).  0 / -1. */
int mark_open(const char *db, sqlite3 **out, char *err, size_t errsz);
/* 1 and *ID, HASH when NAME has a mark, 0 when not, -1 on error. */
int mark_get(sqlite3 *db, const char *name, int64_t *id, char hash[2 * (size_t)AUDIT_HASH_LEN + 1],
             char *err, size_t errsz);
/* Records NAME's mark (durably: the store is in WAL, synchronous FULL). */
int mark_set(sqlite3 *db, const char *name, int64_t id, const char *hash, char *err, size_t errsz);

void export_hex(const unsigned char h[AUDIT_HASH_LEN], char out[2 * (size_t)AUDIT_HASH_LEN + 1]);

#endif
