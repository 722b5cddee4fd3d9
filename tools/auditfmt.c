/* auditfmt.c — printing audit rows (see auditfmt.h). */
#include "auditfmt.h"
#include "duration.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

void afmt_time(int64_t ts_ns, char *out, size_t outsz)
{
    time_t secs = (time_t)(ts_ns / 1000000000);
    long us = (long)((ts_ns % 1000000000) / 1000);
    if (us < 0) {
        us += 1000000;
        secs--;
    }
    struct tm tm;
    gmtime_r(&secs, &tm);
    char base[32];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, outsz, "%s.%06ldZ", base, us);
}

int afmt_parse_since(const char *s, int64_t *ns)
{
    uint64_t ms;
    if (sbx_duration_parse(s, &ms) == 0) {
        if (ms > (uint64_t)INT64_MAX / 1000000)
            return -1;
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        *ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec - (int64_t)ms * 1000000;
        return 0;
    }
    struct tm tm;
    static const char *const fmts[] = { "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d" };
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
        memset(&tm, 0, sizeof tm);
        const char *rest = strptime(s, fmts[i], &tm);
        if (!rest)
            continue;
        long frac_ns = 0;
        if (*rest == '.') {
            long scale = 100000000;
            for (rest++; *rest >= '0' && *rest <= '9'; rest++, scale /= 10)
                frac_ns += (*rest - '0') * scale;
        }
        if (*rest == 'Z')
            rest++;
        if (*rest)
            continue;
        time_t t = timegm(&tm);
        /* ns since 1970 end in 2262: later times clamp (nothing is newer). */
        *ns = t >= INT64_MAX / 1000000000 ? INT64_MAX : (int64_t)t * 1000000000 + frac_ns;
        return 0;
    }
    return -1;
}

/* Length of the valid UTF-8 sequence at S, or 0. */
static int utf8_len(const unsigned char *s)
{
    int n;
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        n = 3;
    else if (c >= 0xF0 && c <= 0xF4)
        n = 4;
    else
        return 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    if (n == 3 && ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] >= 0xA0)))
        return 0;
    if (n == 4 && ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] >= 0x90)))
        return 0;
    return n;
}

/* True if the code point of the N-byte UTF-8 sequence at P must not reach a
 * terminal raw: C1 controls (U+0080-U+009F: some terminals act on them),
 * the bidirectional controls (U+061C, U+200E-U+200F, U+202A-U+202E,
 * U+2066-U+2069: they reorder what follows, so a path can display as
 * another) and the line and paragraph separators (U+2028, U+2029). */
static bool unsafe_cp(const unsigned char *p, int n, unsigned *cp)
{
    unsigned c;
    if (n == 2)
        c = (p[0] & 0x1Fu) << 6 | (p[1] & 0x3Fu);
    else if (n == 3)
        c = (p[0] & 0x0Fu) << 12 | (p[1] & 0x3Fu) << 6 | (p[2] & 0x3Fu);
    else
        return false;
    *cp = c;
    return (c >= 0x80 && c <= 0x9F) || c == 0x061C || c == 0x200E || c == 0x200F ||
           (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069) ||
           c == 0x2028 || c == 0x2029;
}

/* One step of escaping for a terminal: writes the next character of *P, or
 * its escape (\xNN for an ASCII control or a byte of invalid UTF-8, \u{N}
 * for an unsafe code point), to OUT, and advances *P.  A backslash stays
 * itself: rules are regexes full of them, and the exact text is in the
 * JSON output.  Returns the bytes written (at most 10). */
static int esc_step(const unsigned char **pp, char out[12])
{
    const unsigned char *p = *pp;
    unsigned cp;
    int n = utf8_len(p);
    if (n == 1 && *p >= 0x20 && *p != 0x7f) {
        out[0] = (char)*p;
        *pp = p + 1;
        return 1;
    }
    if (n == 0 || n == 1) {
        *pp = p + 1;
        return snprintf(out, 12, "\\x%02x", *p);
    }
    *pp = p + n;
    if (unsafe_cp(p, n, &cp))
        return snprintf(out, 12, "\\u{%x}", cp);
    memcpy(out, p, (size_t)n);
    return n;
}

const char *afmt_escape(const char *s, char *out, size_t outsz)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t len = 0;
    while (*p) {
        char e[12];
        int n = esc_step(&p, e);
        if (len + (size_t)n + 4 > outsz) {
            if (outsz >= 4) {
                memcpy(out + len, "...", 3);
                len += 3;
            }
            break;
        }
        memcpy(out + len, e, (size_t)n);
        len += (size_t)n;
    }
    if (outsz)
        out[len < outsz ? len : outsz - 1] = '\0';
    return out;
}

void afmt_json_str(FILE *f, const char *s)
{
    if (!s) {
        fputs("null", f);
        return;
    }
    putc('"', f);
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p;
        if (c == '"' || c == '\\') {
            putc('\\', f);
            putc((int)c, f);
            p++;
        } else if (c == '\n') {
            fputs("\\n", f);
            p++;
        } else if (c == '\t') {
            fputs("\\t", f);
            p++;
        } else if (c == '\r') {
            fputs("\\r", f);
            p++;
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(f, "\\u%04x", c);
            p++;
        } else {
            int n = utf8_len(p);
            unsigned cp;
            if (n == 0) {
                fputs("\\ufffd", f);
                p++;
            } else if (unsafe_cp(p, n, &cp)) {
                /* the same text, but never raw on a terminal that shows it */
                fprintf(f, "\\u%04x", cp);
                p += n;
            } else {
                fwrite(p, 1, (size_t)n, f);
                p += n;
            }
        }
    }
    putc('"', f);
}

static void csv_field(const char *s, bool last)
{
    if (s) {
        if (strpbrk(s, ",\"\r\n")) {
            putchar('"');
            for (const char *p = s; *p; p++) {
                if (*p == '"')
                    putchar('"');
                putchar(*p);
            }
            putchar('"');
        } else {
            fputs(s, stdout);
        }
    }
    fputs(last ? "\r\n" : ",", stdout);
}

static void csv_num(long long v)
{
    printf("%lld,", v);
}

/* Table cells never contain control characters, bidi overrides or invalid
 * UTF-8 (they would break the alignment, drive the terminal or make a path
 * display as another): they are escaped (afmt_escape). */
static void cell(const char *s, int width, bool pad)
{
    int n = 0;
    const unsigned char *p = (const unsigned char *)(s ? s : "-");
    while (*p) {
        char e[12];
        int k = esc_step(&p, e);
        fwrite(e, 1, (size_t)k, stdout);
        n += k;
    }
    if (pad)
        for (; n < width; n++)
            putchar(' ');
}

void afmt_header(enum afmt fmt, const struct afmt_table *t)
{
    if (fmt == AFMT_CSV) {
        fputs("id,ts,agent,run_id,pid,uid,op,target,target2,decision,rule,reason,layer,"
              "errno,flags\r\n", stdout);
    } else if (fmt == AFMT_TABLE) {
        printf("%-7s %-27s ", "ID", "TIME (UTC)");
        cell("AGENT", t->w_agent, true);
        printf(" %-7s ", "PID");
        cell("OP", t->w_op, true);
        printf(" %-8s %-10s ", "DECISION", "LAYER");
        cell("TARGET", t->w_target, true);
        printf(" RULE / REASON\n");
    }
}

void afmt_row(enum afmt fmt, const struct afmt_table *t, const struct audit_row *r)
{
    char ts[48];
    afmt_time(r->ts_ns, ts, sizeof ts);
    if (fmt == AFMT_JSON) {
        printf("{\"id\":%lld,\"ts\":\"%s\",\"agent\":", (long long)r->id, ts);
        afmt_json_str(stdout, r->agent);
        fputs(",\"run_id\":", stdout);
        afmt_json_str(stdout, r->run_id);
        printf(",\"pid\":%lld,\"uid\":%lld,\"op\":", (long long)r->pid, (long long)r->uid);
        afmt_json_str(stdout, r->op);
        fputs(",\"target\":", stdout);
        afmt_json_str(stdout, r->target);
        fputs(",\"target2\":", stdout);
        afmt_json_str(stdout, r->target2);
        fputs(",\"decision\":", stdout);
        afmt_json_str(stdout, r->decision);
        fputs(",\"rule\":", stdout);
        afmt_json_str(stdout, r->rule);
        fputs(",\"reason\":", stdout);
        afmt_json_str(stdout, r->reason);
        fputs(",\"layer\":", stdout);
        afmt_json_str(stdout, r->layer);
        printf(",\"errno\":%lld,\"flags\":%lld}\n", (long long)r->err, (long long)r->flags);
        return;
    }
    if (fmt == AFMT_CSV) {
        csv_num(r->id);
        csv_field(ts, false);
        csv_field(r->agent, false);
        csv_field(r->run_id, false);
        csv_num(r->pid);
        csv_num(r->uid);
        csv_field(r->op, false);
        csv_field(r->target, false);
        csv_field(r->target2, false);
        csv_field(r->decision, false);
        csv_field(r->rule, false);
        csv_field(r->reason, false);
        csv_field(r->layer, false);
        csv_num(r->err);
        printf("%lld\r\n", (long long)r->flags);
        return;
    }
    bool deny = r->decision && strcmp(r->decision, "deny") == 0;
    bool life = r->layer && strcmp(r->layer, "sbx") == 0;
    const char *on = !t->colour ? "" : deny ? "\033[31m" : life ? "\033[36m" : "";
    const char *off = t->colour && (deny || life) ? "\033[0m" : "";
    printf("%s%-7lld %-27s ", on, (long long)r->id, ts);
    cell(r->agent, t->w_agent, true);
    printf(" %-7lld ", (long long)r->pid);
    cell(r->op, t->w_op, true);
    printf(" %-8s %-10s ", r->decision ? r->decision : "-", r->layer ? r->layer : "-");
    char target[8400];
    if (r->target2)
        snprintf(target, sizeof target, "%s -> %s", r->target ? r->target : "-", r->target2);
    else
        snprintf(target, sizeof target, "%s", r->target ? r->target : "-");
    cell(target, t->w_target, true);
    putchar(' ');
    cell(r->rule && *r->rule ? r->rule : "-", 0, false);
    if (r->reason && *r->reason) {
        fputs(" / ", stdout);
        cell(r->reason, 0, false);
    }
    printf("%s\n", off);
}
