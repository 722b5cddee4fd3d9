/*
 * event.h — one audit event, its record encoding, the shared-memory ring
 * that carries it out of the agent, and the agent-side emitter.
 *
 * An agent process reports events with sbx_emit().  The first call creates a
 * per-process ring (a sealed memfd, mmap'ed MAP_SHARED) and hands it to
 * sbx-auditd over events.sock once (SCM_RIGHTS, plus the agent id and
 * token; the kernel attaches the sender's credentials); the connection
 * stays open, and a byte sent on it wakes a sleeping daemon.  After that an event is a copy into shared
 * memory: no system call, no allocation, no lock.  The daemon maps the same
 * pages, so an event whose sbx_emit() returned 0 survives SIGKILL of the
 * process.  The record encoding and the ring layout below are shared by the
 * emitter (common/emit.c) and the daemon (auditd/); the daemon treats every
 * byte of a ring as hostile input.
 *
 * Memory: sbx_emit_init() copies its strings into static storage; nothing
 * here allocates.  Errors: 0 / -1 (emitter), sizes / 0 (encoding).
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
     * string table once and sent by reference after that (see the ring
     * below).  NULL: the text goes with the record. */
    const void *rule_key;
    const void *reason_key;
};

/* Agent side.  Called once per process (the preload's constructor) with what
 * sbx-guard handed down; copies the strings.  A NULL or empty RUNTIME_DIR
 * means the default (sbx_path_runtime_dir).  0, or -1 if arguments are bad
 * (sbx_emit_error() says which). */
int sbx_emit_init(const char *runtime_dir, const char *agent_id, const char *agent_token);

/* Records one event.  No system call in the common case; safe from any
 * thread, after fork (the child reports as itself) and never allocates.
 * Returns 0 once the event is in the channel (it then survives SIGKILL of
 * this process), -1 if it could not be recorded (no daemon, channel full for
 * too long): the caller then fails closed. */
int sbx_emit(const struct sbx_event_desc *ev);

/* Before a vfork: makes sure this process has a live, registered ring, so
 * that the child (which shares our memory, not our descriptors) writes its
 * events into it and never registers one of its own.  0, or -1 (then fork
 * instead). */
int sbx_emit_prepare_vfork(void);

/* Rings of this process register without waiting for the daemon's answer
 * (sbx-guard says so for an agent it has just registered: the run id and
 * token are known good).  A registration the daemon refuses all the same
 * (a forged token) marks the ring SBX_RING_REFUSED, and every event after
 * that fails.  Without this, each registration waits for the answer. */
void sbx_emit_set_async(bool on);

/* True once the daemon has soft-killed this agent: every further guarded
 * call must fail with EPERM.  One atomic load. */
bool sbx_emit_killed(void);

/* Added: why the last sbx_emit() returned -1 (static text, for messages). */
const char *sbx_emit_error(void);

/* ---- record encoding (emitter, daemon, tests) --------------------------- */

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
                     SBX_EV_TARGET2_MAX + 2 * SBX_EV_TEXT_MAX)

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

/* ---- the ring ------------------------------------------------------------ */

/* Slot size: 128 bytes, 112 of payload.  A typical event (32 bytes of
 * header, a workspace path of 40-70 bytes, its rule and reason sent as
 * references to the string table) fits one slot; a record spans as many
 * consecutive slots as it needs (a PATH_MAX path takes 38), so nothing is
 * cut below the maxima above while the common event costs one 128-byte copy
 * and one commit store.  Why small: a ring's pages are allocated as they are
 * first written, and on a virtual machine that costs ~2 us a page, which
 * was a third of what the guard added to an open when an event took 256
 * bytes.  8192 slots = 1 MiB per process: ~8000 typical events of slack
 * while the daemon is busy.
 *
 * The string table follows the slots: SBX_RING_TAB bytes that the process
 * fills from the start, append-only, with NUL-terminated texts (the rules
 * and reasons its events name again and again: ~50-100 bytes each, which
 * would otherwise be most of every record).  Nothing in it is ever
 * rewritten while the ring lives; when it is full, texts go inline. */
#define SBX_RING_MAGIC     0x53425852u   /* "SBXR" */
#define SBX_RING_VERSION   2u
#define SBX_RING_SLOT      128u
#define SBX_RING_PAYLOAD   (SBX_RING_SLOT - 16u)
#define SBX_RING_SLOTS     8192u         /* power of two */
#define SBX_RING_HDR_SIZE  4096u
#define SBX_RING_TAB       32768u
#define SBX_RING_TAB_OFF   (SBX_RING_HDR_SIZE + SBX_RING_SLOTS * SBX_RING_SLOT)
#define SBX_RING_BYTES     (SBX_RING_TAB_OFF + SBX_RING_TAB)
#define SBX_RING_FIRST     0x80000000u   /* slot info: first slot of a record */
#define SBX_RING_GONE      1u            /* hdr.gone: the daemon stopped */
#define SBX_RING_REFUSED   2u            /* hdr.gone: the registration was refused */
#define SBX_RING_MAX_SPAN  ((SBX_REC_MAX + SBX_RING_PAYLOAD - 1) / SBX_RING_PAYLOAD)

/* A slot is committed for position P when seq == P + 1 (release store by
 * the producer after the payload; acquire load by the daemon).  A value
 * left from an earlier lap is P + 1 - SLOTS, so stale slots never look
 * committed. */
struct sbx_ring_slot {
    _Atomic uint64_t seq;
    uint32_t info;          /* SBX_RING_FIRST | span (first slot), or index */
    uint32_t len;           /* payload bytes used in this slot */
    unsigned char data[SBX_RING_PAYLOAD];
};

/* The header page.  head: next free position (producers reserve with a CAS,
 * see emit.c for why not fetch_add); tail: first position the daemon has not
 * consumed (written only by the daemon).  Counters are 64-bit and never wrap
 * in practice.  The daemon keeps its own tail and never trusts these words. */
struct sbx_ring_hdr {
    uint32_t magic, version, nslots, slot_size;
    _Alignas(64) _Atomic uint64_t head;
    _Alignas(64) _Atomic uint64_t tail;
    _Alignas(64) _Atomic uint32_t sleeping;  /* daemon: 1 = wake me (a byte on
                                              * the registration socket) */
    _Atomic uint32_t killed;    /* daemon: agent soft-killed */
    _Atomic uint32_t gone;      /* daemon: I stopped reading this ring
                                 * (SBX_RING_GONE), or never took it
                                 * (SBX_RING_REFUSED) */
    _Atomic uint32_t space;     /* futex word: bumped when the daemon frees slots */
    _Atomic uint32_t waiters;   /* producers sleeping on `space` */
};

/* The registration message a process sends on events.sock (SOCK_SEQPACKET)
 * with SCM_RIGHTS {memfd}; the daemon, which has SO_PASSCRED on the
 * connection, gets the credentials the kernel attached.  It answers with one
 * message, "ok" or "error: TEXT", unless the flags say nobody waits for it
 * (a refusal is then marked in the ring: SBX_RING_REFUSED).  Every later
 * message on the connection is a wake-up; its content does not matter. */
#define SBX_REG_MAGIC "SBXRING2"
#define SBX_REG_NO_REPLY 0x1u   /* the process does not wait for the answer */
struct sbx_ring_reg {
    char magic[8];
    char agent_id[64];      /* run id, NUL-terminated */
    char token[72];         /* secret, NUL-terminated */
    uint32_t flags;         /* SBX_REG_* */
    uint32_t reserved;      /* 0 */
};

#endif
