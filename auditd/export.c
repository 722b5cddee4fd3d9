/* export.c — the export loop: read a batch after the watermark, send it
 * and its chain head, move the watermark once the sink acknowledged it
 * (export.h says what each step promises). */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <bsd/string.h>

#include "export.h"
#include "export_int.h"
#include "ocsf.h"

void export_hex(const unsigned char h[AUDIT_HASH_LEN], char out[2 * (size_t)AUDIT_HASH_LEN + 1])
{
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < AUDIT_HASH_LEN; i++) {
        out[2 * i] = d[h[i] >> 4];
        out[2 * i + 1] = d[h[i] & 15];
    }
    out[2 * (size_t)AUDIT_HASH_LEN] = '\0';
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void say(FILE *log, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(log, "sbx-export: ");
    vfprintf(log, fmt, ap);
    fputc('\n', log);
    fflush(log);
    va_end(ap);
}

/* ---- messages ---------------------------------------------------------------- */

/* One batch, formatted: the messages back to back, each its length. */
struct batch {
    char *text;
    size_t len, cap;
    size_t *ends;               /* message i is text[ends[i-1] .. ends[i]) */
    size_t n, max;
    size_t limit;               /* rows per batch */
    int64_t upto;               /* rows after this id wait for the next run */
    int64_t last_id;
    char last_hash[2 * (size_t)AUDIT_HASH_LEN + 1];
    bool syslog;
    const char *host;
    bool oom;
};

static void add(struct batch *b, const char *p, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1 << 20;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *t = realloc(b->text, cap);
        if (!t) {
            b->oom = true;
            return;
        }
        b->text = t;
        b->cap = cap;
    }
    memcpy(b->text + b->len, p, n);
    b->len += n;
}

static void addf(struct batch *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void addf(struct batch *b, const char *fmt, ...)
{
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        add(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* An SD-PARAM value: UTF-8, with '"', '\' and ']' escaped (RFC 5424
 * 6.3.3) and controls as \xNN, so a record stays one line. */
static void add_param(struct batch *b, const char *name, const char *v)
{
    if (!v)
        return;
    /* Most values are printable ASCII with nothing to escape: as they are. */
    size_t plain = 0;
    while (v[plain] >= 0x20 && v[plain] < 0x7f && v[plain] != '"' && v[plain] != '\\' &&
           v[plain] != ']')
        plain++;
    if (!v[plain]) {
        add(b, " ", 1);
        add(b, name, strlen(name));
        add(b, "=\"", 2);
        add(b, v, plain);
        add(b, "\"", 1);
        return;
    }
    char *c = audit_utf8_dup(v, true);
    if (!c) {
        b->oom = true;
        return;
    }
    addf(b, " %s=\"", name);
    for (const char *p = c; *p; p++) {
        if (*p == '"' || *p == '\\' || *p == ']')
            add(b, "\\", 1);
        add(b, p, 1);
    }
    add(b, "\"", 1);
    free(c);
}

static void end_msg(struct batch *b)
{
    if (b->oom)
        return;
    if (b->n == b->max) {
        size_t max = b->max ? b->max * 2 : 1024;
        size_t *e = reallocarray(b->ends, max, sizeof *e);
        if (!e) {
            b->oom = true;
            return;
        }
        b->ends = e;
        b->max = max;
    }
    b->ends[b->n++] = b->len;
}

/* RFC 3339 with microseconds, UTC. */
static void timestamp(int64_t ns, char *out, size_t outsz)
{
    time_t s = (time_t)(ns / 1000000000);
    struct tm tm;
    gmtime_r(&s, &tm);
    char d[32];
    strftime(d, sizeof d, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, outsz, "%s.%06ldZ", d, (long)(ns % 1000000000 / 1000));
}

static int add_row(const struct audit_row *r, void *arg)
{
    struct batch *b = arg;
    if (r->id > b->upto)
        return 1;
    char hh[2 * (size_t)AUDIT_HASH_LEN + 1];
    export_hex(r->hash, hh);
    if (b->syslog) {
        bool deny = r->decision && strcmp(r->decision, "deny") == 0;
        char ts[48];
        timestamp(r->ts_ns, ts, sizeof ts);
        /* facility 13 (log audit); warning 4 for a denial, notice 5 */
        char msgid[33];
        strlcpy(msgid, r->op && *r->op ? r->op : "-", sizeof msgid);
        addf(b, "<%d>1 %s %s sbx %lld %s [sbx@32473 id=\"%lld\" hash=\"%s\"", 13 * 8 + (deny ? 4 : 5),
             ts, b->host, (long long)r->pid, msgid, (long long)r->id, hh);
        add_param(b, "agent", r->agent);
        add_param(b, "run", r->run_id);
        add_param(b, "op", r->op);
        add_param(b, "decision", r->decision);
        add_param(b, "layer", r->layer);
        add(b, "] ", 2);
    }
    /* the OCSF event, written in place after its header */
    if (!b->oom && audit_ocsf_append(r, b->host, &b->text, &b->len, &b->cap) < 0)
        b->oom = true;
    end_msg(b);
    b->last_id = r->id;
    strlcpy(b->last_hash, hh, sizeof b->last_hash);
    return b->oom || b->n >= b->limit ? 1 : 0;
}

/* The chain head after the batch: its last row's id and hash.  A
 * collector that keeps these can later tell a store rewritten on the host
 * (sbx-audit verify --against). */
static void add_head(struct batch *b)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char t[48];
    timestamp((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec, t, sizeof t);
    if (b->syslog)
        addf(b, "<109>1 %s %s sbx - sbx-head [sbxhead@32473 id=\"%lld\" hash=\"%s\"] ", t,
             b->host, (long long)b->last_id, b->last_hash);
    addf(b, "{\"sbx_chain_head\":{\"id\":%lld,\"hash\":\"%s\",\"time\":\"%s\","
            "\"host\":\"%s\"}}",
         (long long)b->last_id, b->last_hash, t, b->host);
    end_msg(b);
}

static void batch_reset(struct batch *b)
{
    b->len = 0;
    b->n = 0;
    b->oom = false;
}

/* The host name for HOSTNAME and device.hostname: printable ASCII without
 * spaces (RFC 5424 PRINTUSASCII), else "-". */
static void host_name(char *out, size_t outsz)
{
    if (gethostname(out, outsz) < 0 || !out[0])
        strlcpy(out, "-", outsz);
    out[outsz - 1] = '\0';
    for (char *p = out; *p; p++)
        if (*p <= 32 || *p >= 127)
            *p = '_';
}

static bool stopping(const struct audit_export_opts *o)
{
    return o->stop && *o->stop;
}

/* Sleeps MS milliseconds, or less when asked to stop. */
static void nap(const struct audit_export_opts *o, long ms)
{
    while (ms > 0 && !stopping(o)) {
        long step = ms > 100 ? 100 : ms;
        struct timespec ts = { 0, step * 1000000 };
        nanosleep(&ts, NULL);
        ms -= step;
    }
}

/* The row at the watermark must still have the hash the collector got:
 * otherwise the store was rewritten since (a pruned row is simply gone). */
struct mark_check {
    int64_t id;
    const char *hash;
    bool seen, same;
};

static int check_mark_row(const struct audit_row *r, void *arg)
{
    struct mark_check *m = arg;
    if (r->id == m->id) {
        char hh[2 * (size_t)AUDIT_HASH_LEN + 1];
        export_hex(r->hash, hh);
        m->seen = true;
        m->same = strcmp(hh, m->hash) == 0;
    }
    return 1;
}

int audit_export_run(const struct audit_export_opts *o, struct audit_export_stats *stats,
                     char *err, size_t errsz)
{
    FILE *log = o->log ? o->log : stderr;
    const char *name = o->mark ? o->mark : o->to;
    const char *fault = getenv("SBX_EXPORT_FAULT_FILE");
    struct audit_store *st = NULL;
    struct sink *sk = NULL;
    sqlite3 *mdb = NULL;
    char host[256];
    struct batch b = { 0 };
    int rc = -1;
    memset(stats, 0, sizeof *stats);
    host_name(host, sizeof host);
    b.host = host;
    b.limit = o->batch ? o->batch : AUDIT_EXPORT_BATCH;
    if (sink_open(o->to, &sk, err, errsz) < 0)
        goto out;
    b.syslog = sink_is_syslog(sk);
    /* The store may not be there yet (a daemon that exports starts before
     * its first commit): following, wait for it. */
    for (;;) {
        struct stat sb;
        if (stat(o->db, &sb) == 0 &&
            audit_store_open(o->db, true, &st, err, errsz) == 0 &&
            mark_open(o->db, &mdb, err, errsz) == 0)
            break;
        if (st) {
            audit_store_close(st);
            st = NULL;
        }
        if (!o->follow || stopping(o)) {
            if (stat(o->db, &sb) < 0)
                snprintf(err, errsz, "%s: %s", o->db, strerror(errno));
            goto out;
        }
        nap(o, 500);
    }
    char mhash[2 * (size_t)AUDIT_HASH_LEN + 1] = "";
    int64_t mark = 0;
    int got = mark_get(mdb, name, &mark, mhash, err, errsz);
    if (got < 0)
        goto out;
    if (got) {
        struct mark_check mc = { .id = mark, .hash = mhash };
        struct audit_filter f = { .after_id = mark - 1 };
        if (audit_store_query(st, &f, check_mark_row, &mc, err, errsz) < 0)
            goto out;
        struct audit_totals now;
        if (audit_store_totals(st, &now, err, errsz) < 0)
            goto out;
        /* (An empty store may be one that retention emptied: ids go on
         * from the last pruned row, so the watermark still holds.) */
        if (now.rows > 0 && now.newest_id < mark) {
            snprintf(err, errsz, "the store ends at row %lld, before row %lld that was exported "
                     "to %s: rows were removed after export (sbx-audit verify --against)",
                     (long long)now.newest_id, (long long)mark, name);
            goto out;
        }
        if (mc.seen && !mc.same) {
            snprintf(err, errsz, "row %lld no longer has the hash %.16s... that was exported to "
                     "%s: the store was rewritten after export (sbx-audit verify --against)",
                     (long long)mark, mhash, name);
            goto out;
        }
    }
    /* Without --follow: up to the newest row now. */
    struct audit_totals tot;
    if (audit_store_totals(st, &tot, err, errsz) < 0)
        goto out;
    b.upto = o->follow ? INT64_MAX : tot.newest_id;
    int failures = 0;
    double t0 = now_s();
    bool failing = false;
    /* A batch the sink acknowledged whose watermark could not be written
     * (a full disk): only the watermark is retried, nothing is sent until
     * it is written, so a row goes out at most twice (once more only if
     * the exporter dies meanwhile). */
    bool unmarked = false;
    size_t nrows = 0;
    while (!stopping(o)) {
        if (unmarked)
            goto write_mark;
        batch_reset(&b);
        struct audit_filter f = { .after_id = mark };
        if (audit_store_query(st, &f, add_row, &b, err, errsz) < 0)
            goto retry_local;
        if (b.oom) {
            snprintf(err, errsz, "out of memory");
            goto retry_local;
        }
        if (b.n == 0) {
            if (!o->follow)
                break;
            nap(o, 200);
            continue;
        }
        nrows = b.n;
        add_head(&b);
        if (b.oom) {
            snprintf(err, errsz, "out of memory");
            goto retry_local;
        }
        if (sink_begin(sk, err, errsz) < 0)
            goto retry_sink;
        for (size_t i = 0; i < b.n; i++) {
            size_t from = i ? b.ends[i - 1] : 0;
            if (sink_send(sk, b.text + from, b.ends[i] - from, err, errsz) < 0)
                goto retry_sink;
        }
        if (sink_end(sk, err, errsz) < 0)
            goto retry_sink;
        unmarked = true;
write_mark:
        /* Delivered.  A full disk (or its stand-in, the tests' fault
         * file) may refuse the watermark. */
        if (fault && *fault && access(fault, F_OK) == 0) {
            snprintf(err, errsz, "writing the export watermark: database or disk is full "
                     "(fault injection)");
            goto retry_local;
        }
        if (mark_set(mdb, name, b.last_id, b.last_hash, err, errsz) < 0)
            goto retry_local;
        unmarked = false;
        mark = b.last_id;
        stats->rows += (int64_t)nrows;
        stats->batches++;
        if (failing)
            say(log, "delivering to %s again (watermark row %lld)", o->to, (long long)mark);
        failing = false;
        failures = 0;
        continue;
retry_sink:
        sink_abort(sk);
retry_local:
        stats->failures++;
        failures++;
        if (!failing || failures % 20 == 0)
            say(log, "%s (attempt %d; watermark row %lld; retrying)", err, failures,
                (long long)mark);
        failing = true;
        if (!o->follow && failures >= (o->attempts > 0 ? o->attempts : 5))
            goto out_time;
        long ms = 200L << (failures < 6 ? failures - 1 : 5);
        nap(o, ms > 10000 ? 10000 : ms);
    }
    rc = 0;
out_time:
    stats->seconds = now_s() - t0;
out:
    stats->mark_id = 0;
    if (mdb) {
        char h[2 * (size_t)AUDIT_HASH_LEN + 1];
        int64_t id = 0;
        char e2[256];
        if (mark_get(mdb, name, &id, h, e2, sizeof e2) == 1)
            stats->mark_id = id;
    }
    free(b.text);
    free(b.ends);
    sink_close(sk);
    sqlite3_close(mdb);
    audit_store_close(st);
    return rc;
}
