/*
 * event.h — one audit event and its record encoding: what a caller reports
 * (struct sbx_event_desc), the record that carries it (sbx_event_plan and
 * sbx_event_encode), and the checked way back (sbx_event_decode,
 * sbx_event_expand).  Shared by the emitter (preload/emit.c, which writes
 * records into the ring of ring.h), the daemon (auditd/, which treats every
 * record as hostile input), the control client (ctl.h) and the tests.
 *
 * Memory: nothing here allocates; decoded views point into the caller's
 * buffer.  Errors: sizes / 0 (encoding), 0 / -1 (decoding).
 */
#ifndef SBX_EVENT_H
#define SBX_EVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops.h"

/* Event flags. */
#define SBX_EVF_AUDIT        0x01u  /* audit mode: would have been denied */
#define SBX_EVF_ENV_RESTORED 0x02u  /* exec: the preload put its environment back */
#define SBX_EVF_TRUNCATED    0x04u  /* a string was cut to fit (marker appended) */
#define SBX_EVF_KILLED       0x08u  /* denied because the agent was soft-killed */

/* What a caller reports.  Strings are NUL-terminated and may be NULL. */
struct sbx_event_desc {
    enum sbx_op op;
    enum sbx_decision decision;
    enum sbx_layer layer;
    uint32_t flags;             /* SBX_EVF_* */
    int err;                    /* errno the program saw; 0 when allowed */
    const char *target;         /* path, command line or address */
    const char *target2;        /* rename/link destination; for connect, the
                                 * host name the address was resolved from */
    const char *rule;           /* policy_rule_format() text */
    const char *reason;
    /* Optional: a key that names the text of `rule` (`reason`) for the
     * whole life of this process, such as the address of the immutable
     * policy rule it was made from.  A keyed text is written into the ring's
     * string table once and sent by reference after that (ring.h).  NULL:
     * the text goes with the record. */
    const void *rule_key;
    const void *reason_key;
};

/* Longest strings a record keeps, in bytes without the NUL.  A target of
 * PATH_MAX (4096 with the NUL) is never cut; a longer target (long command
 * lines) is cut at 8 KiB.  Cut strings end with SBX_EV_CUT_MARK and the
 * record carries SBX_EVF_TRUNCATED. */
#define SBX_EV_TARGET_MAX   8192u
#define SBX_EV_TARGET2_MAX  4096u
#define SBX_EV_TEXT_MAX     1024u   /* rule, reason */
#define SBX_EV_CUT_MARK     "...[cut]"

enum { SBX_EV_TARGET = 0, SBX_EV_TARGET2, SBX_EV_RULE, SBX_EV_REASON, SBX_EV_NSTR };

/* The fixed head of an encoded record; the four strings follow it without
 * NULs, in enum order.  Native byte order: producer and daemon share one
 * machine.  In a ring, a string may instead be a reference: `has` bit
 * SBX_EV_REF(i) set, len[i] == 4, and the 4 bytes are the offset of a
 * NUL-terminated text in the ring's string table (sbx_event_expand turns
 * such a record into a plain one; sbx_event_decode refuses references). */
struct sbx_rec_hdr {
    uint64_t ts_ns;             /* CLOCK_REALTIME */
    uint32_t total;             /* header + strings, bytes */
    uint32_t flags;             /* SBX_EVF_* */
    int32_t err;
    uint8_t op, decision, layer, has;   /* has: bit i = string i was non-NULL */
    uint16_t len[SBX_EV_NSTR];
};
#define SBX_EV_REF(i) (1u << (4 + (i)))
#define SBX_EV_NOREF UINT32_MAX

#define SBX_REC_MAX (sizeof(struct sbx_rec_hdr) + SBX_EV_TARGET_MAX + \
                     SBX_EV_TARGET2_MAX + (size_t)2 * SBX_EV_TEXT_MAX)

/* An encoding plan: the header and up to 9 pieces (header, 4 strings, 4 cut
 * markers) whose concatenation is the record.  Filled by sbx_event_plan. */
struct sbx_rec_plan {
    struct sbx_rec_hdr hdr;
    const void *seg[1 + 2 * SBX_EV_NSTR];
    uint32_t seglen[1 + 2 * SBX_EV_NSTR];
    uint32_t ref[SBX_EV_NSTR];  /* the references' bytes */
    unsigned nseg;
};

/* Plans the encoding of EV stamped TS_NS (strings are read, never written;
 * each is cut to its maximum, at a UTF-8 character boundary).  REFS, if not
 * NULL, gives for each string a string-table offset to send instead of its
 * text, or SBX_EV_NOREF.  Returns the record size (hdr.total). */
uint32_t sbx_event_plan(const struct sbx_event_desc *ev, uint64_t ts_ns,
                        const uint32_t *refs, struct sbx_rec_plan *plan);

/* The daemon's side of references: copies the N-byte ring record at REC
 * (which may hold references into TAB, the ring's TABSZ-byte string table)
 * into OUT as a plain record, every referenced text copied out of TAB
 * first and then checked (TAB is the agent's memory: hostile, and may
 * change under us).  Returns the plain record's size, or 0 if the record
 * is malformed or a reference is bad (out of the table, no NUL within the
 * string's maximum).  A record without references is copied as it is. */
size_t sbx_event_expand(const void *rec, size_t n, const volatile char *tab, size_t tabsz,
                        void *out, size_t outsz);

/* Encodes EV into BUF; returns the size, or 0 if BUFSZ is too small. */
size_t sbx_event_encode(const struct sbx_event_desc *ev, uint64_t ts_ns,
                        void *buf, size_t bufsz);

/* A decoded record: strings point into the buffer and are NOT NUL-terminated
 * (str[i] is NULL when the event had no such string). */
struct sbx_event_view {
    uint64_t ts_ns;
    enum sbx_op op;
    enum sbx_decision decision;
    enum sbx_layer layer;
    uint32_t flags;
    int err;
    const char *str[SBX_EV_NSTR];
    uint32_t len[SBX_EV_NSTR];
};

/* Checks and decodes the N bytes at BUF (untrusted: every length, enum and
 * byte is checked; a NUL inside a string is refused).  0, or -1 (EINVAL). */
int sbx_event_decode(const void *buf, size_t n, struct sbx_event_view *out);

/* CLOCK_REALTIME in ns (vDSO: no system call). */
uint64_t sbx_now_ns(void);

#endif
