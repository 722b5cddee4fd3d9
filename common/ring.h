/*
 * ring.h — the shared-memory ring that carries one agent process's event
 * records (event.h) to sbx-auditd, and the message that registers it.
 *
 * The producer is the preload's emitter (preload/emit.c, emit.h says what
 * it guarantees); the consumer is the daemon (auditd/rings.c), which maps
 * the same pages and treats every byte of them as hostile input.  This
 * header is the whole of what the two share: the layout, its constants and
 * the registration message on events.sock.  Nothing here is code.
 */
#ifndef SBX_RING_H
#define SBX_RING_H

#include <stdint.h>

#include "event.h"

/* Slot size: 128 bytes, 112 of payload.  A typical event (32 bytes of
 * header, a workspace path of 40-70 bytes, its rule and reason sent as
 * references to the string table) fits one slot; a record spans as many
 * consecutive slots as it needs (a PATH_MAX path takes 38), so nothing is
 * cut below the maxima of event.h while the common event costs one 128-byte
 * copy and one commit store.  Why small: a ring's pages are allocated as
 * they are first written, and on a virtual machine that costs ~2 us a
 * page, which was a third of what the guard added to an open when an event
 * took 256 bytes.  8192 slots = 1 MiB per process: ~8000 typical events of slack
 * while the daemon is busy.
 *
 * The string table follows the slots: SBX_RING_TAB bytes that the process
 * fills from the start, append-only, with NUL-terminated texts (the rules
 * and reasons its events name again and again: ~50-100 bytes each, which
 * would otherwise be most of every record).  Nothing in it is ever
 * rewritten while the ring lives; when it is full, texts go inline. */
#define SBX_RING_MAGIC     0x53425852u   /* "SBXR" */
#define SBX_RING_VERSION   3u
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
 * see preload/emit.c for why not fetch_add); tail: first position the
 * daemon has not consumed (written only by the daemon).  Counters are 64-bit and never wrap
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
    _Atomic uint32_t kept;      /* daemon: 1 once the ring outlives the
                                 * daemon's own death: sbx-guard's keeper
                                 * has a copy (the hand-over), or there is
                                 * no keeper to give one.  A process that
                                 * exits with events not yet committed
                                 * waits for it (preload/emit.c) */
};

/* The registration message a process sends on events.sock (SOCK_SEQPACKET)
 * with SCM_RIGHTS {memfd}; the daemon, which has SO_PASSCRED on the
 * connection, gets the credentials the kernel attached.  It answers with one
 * message, "ok" or "error: TEXT", unless the flags say nobody waits for it
 * (a refusal is then marked in the ring: SBX_RING_REFUSED).  Every later
 * message on the connection is a wake-up; its content does not matter. */
#define SBX_REG_MAGIC "SBXRING2"
#define SBX_REG_NO_REPLY 0x1u   /* the process does not wait for the answer */
/* The memfd is empty: the daemon sizes it, seals it and writes the ring's
 * header before it answers (the process waits).  For a process whose
 * RLIMIT_FSIZE (files.max_write_bytes) is below SBX_RING_BYTES: the limit
 * refuses it the growth, the daemon has none. */
#define SBX_REG_SIZE_IT 0x2u
struct sbx_ring_reg {
    char magic[8];
    char agent_id[64];      /* run id, NUL-terminated */
    char token[72];         /* secret, NUL-terminated */
    uint32_t flags;         /* SBX_REG_* */
    uint32_t reserved;      /* 0 */
};

#endif
