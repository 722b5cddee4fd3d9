/*
 * export.h — ships the store's committed rows off the machine, in order,
 * as OCSF events (ocsf.h), and anchors the hash chain where the host
 * cannot rewrite it.  Used by `sbx-audit export` and `sbx-auditd --export`.
 *
 * Sinks (the URL):
 *   relp://HOST:PORT   RFC 5424 syslog over RELP (librelp): every message
 *                      is acknowledged by the collector (rsyslog's imrelp)
 *   tcp://HOST:PORT    RFC 5424 syslog over TCP, RFC 6587 octet counting;
 *                      no acknowledgement: a batch counts as delivered once
 *                      the kernel took it
 *   file:PATH          OCSF JSON lines appended to PATH, fsync'd per batch
 *   -                  OCSF JSON lines on stdout
 *
 * Delivery: rows go in batches (AUDIT_EXPORT_BATCH by default), each
 * followed by a chain-head message naming the batch's last row id and
 * hash.  Only when the whole batch was acknowledged (RELP: every frame
 * answered 200 and the session closed cleanly) is the watermark — the last
 * row id and hash sent, per sink name — written into the store's
 * export_watermark table (sink TEXT PRIMARY KEY, row_id, hash, updated in
 * ns; `SELECT min(row_id) FROM export_watermark` is the newest row every
 * sink has: retention removes nothing after it).  A failure (the
 * collector down, a daemon killed, a full disk that refuses the watermark)
 * sends the same batch again later: nothing is lost, and at most the rows
 * of one batch arrive twice.  An exporter that resumes checks that the row
 * at its watermark is still there with the hash it sent; if not, the
 * store was cut or rewritten and it refuses to go on.
 *
 * The syslog message: PRI (facility 13, log audit; severity warning for a
 * denial, notice otherwise), version 1, the row's time, the host, APP-NAME
 * "sbx", PROCID the row's pid, MSGID the op, structured data
 * [sbx@32473 id= hash= agent= run= op= decision= layer=], then the OCSF
 * JSON.  The head message has MSGID "sbx-head" and [sbxhead@32473 id=
 * hash=].  32473 is the example enterprise number of RFC 5612.
 *
 * Memory: everything is freed before audit_export_run returns.  Errors:
 * 0 / -1 with the reason in ERR.
 */
#ifndef SBX_AUDIT_EXPORT_H
#define SBX_AUDIT_EXPORT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define AUDIT_EXPORT_BATCH 2000

struct audit_export_opts {
    const char *db;             /* the store */
    const char *to;             /* the sink URL (above) */
    const char *mark;           /* watermark name; NULL: the URL */
    size_t batch;               /* rows per batch; 0: AUDIT_EXPORT_BATCH */
    bool follow;                /* keep exporting new rows until *STOP */
    /* Without FOLLOW: give up after this many failed attempts in a row
     * (0: 5).  With FOLLOW the exporter retries for ever, backing off
     * from 0.2 s to 10 s. */
    int attempts;
    const volatile sig_atomic_t *stop;  /* may be NULL */
    FILE *log;                  /* retries and alarms; NULL: stderr */
};

struct audit_export_stats {
    int64_t rows, batches, failures;
    int64_t mark_id;            /* the watermark at the end */
    double seconds;             /* time spent sending */
};

/* Exports every committed row after the watermark (without FOLLOW: up to
 * the newest row at the start, then returns).  0, or -1 with ERR. */
int audit_export_run(const struct audit_export_opts *o, struct audit_export_stats *stats,
                     char *err, size_t errsz);

/* The result of checking a store against the anchors a collector got. */
struct audit_anchor_check {
    int64_t anchors, heads;     /* row and head records read */
    int64_t checked;            /* compared with the store */
    int64_t pruned;             /* older than the oldest row: not checkable */
    int64_t bad_id;             /* the first row that differs, 0 if none */
    bool ok;
    char msg[600];
};
struct audit_store;
/* Reads FILE (what a collector received: RFC 5424 lines with the sbx
 * structured data anywhere on the line, or the JSON lines of the file
 * sink) and checks every row id and hash in it, and every chain head,
 * against ST.  A row missing, or one with another hash, or a head past the
 * store's end, is a failure (RES->ok false, RES->msg says which).  0 when
 * the check could be done, -1 with ERR otherwise. */
int audit_anchor_check(struct audit_store *st, const char *file, struct audit_anchor_check *res,
                       char *err, size_t errsz);

#endif
