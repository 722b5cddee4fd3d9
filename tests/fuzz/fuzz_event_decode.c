/*
 * fuzz_event_decode.c — libFuzzer harness for the daemon's side of the
 * event ring: sbx_event_expand (a ring record whose strings may be
 * references into the ring's string table) and sbx_event_decode.
 *
 * Everything in a ring is written by the agent, so it is hostile.  The
 * input is split in two: the first two bytes give the record's length, the
 * record follows, and what is left is the string table.  Whatever the bytes,
 * expansion and decoding must stay inside their buffers, and a record that
 * decodes must re-encode to one that decodes to the same view.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "event.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_view_roundtrip(const struct sbx_event_view *v)
{
    /* Views point into the record and are not NUL-terminated: copy them
     * into NUL-terminated strings for the descriptor. */
    static char s[SBX_EV_NSTR][SBX_EV_TARGET_MAX + 1];
    const char *str[SBX_EV_NSTR];
    for (int i = 0; i < SBX_EV_NSTR; i++) {
        str[i] = NULL;
        if (v->str[i] == NULL)
            continue;
        if (v->len[i] > SBX_EV_TARGET_MAX || memchr(v->str[i], '\0', v->len[i]) != NULL)
            abort();            /* decode promised bounded, NUL-free strings */
        memcpy(s[i], v->str[i], v->len[i]);
        s[i][v->len[i]] = '\0';
        str[i] = s[i];
    }
    struct sbx_event_desc ev = {
        .op = v->op, .decision = v->decision, .layer = v->layer,
        .flags = v->flags, .err = v->err,
        .target = str[SBX_EV_TARGET], .target2 = str[SBX_EV_TARGET2],
        .rule = str[SBX_EV_RULE], .reason = str[SBX_EV_REASON],
    };
    static unsigned char buf[SBX_REC_MAX];
    size_t n = sbx_event_encode(&ev, v->ts_ns, buf, sizeof buf);
    if (n == 0)
        abort();
    struct sbx_event_view w;
    if (sbx_event_decode(buf, n, &w) != 0)
        abort();
    if (w.op != v->op || w.decision != v->decision || w.layer != v->layer || w.err != v->err)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t reclen = (size_t)data[0] | (size_t)data[1] << 8;
    data += 2;
    size -= 2;
    if (reclen > size)
        reclen = size;
    /* Copies, so that ASan sees reads past either part. */
    unsigned char *rec = malloc(reclen ? reclen : 1);
    char *tab = malloc(size - reclen ? size - reclen : 1);
    if (rec == NULL || tab == NULL)
        abort();
    memcpy(rec, data, reclen);
    memcpy(tab, data + reclen, size - reclen);

    struct sbx_event_view v;
    if (sbx_event_decode(rec, reclen, &v) == 0)
        check_view_roundtrip(&v);

    static unsigned char plain[SBX_REC_MAX];
    size_t n = sbx_event_expand(rec, reclen, tab, size - reclen, plain, sizeof plain);
    if (n > sizeof plain)
        abort();
    if (n > 0 && sbx_event_decode(plain, n, &v) == 0)
        check_view_roundtrip(&v);
    free(rec);
    free(tab);
    return 0;
}
