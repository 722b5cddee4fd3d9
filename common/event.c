/* event.c — record encoding and decoding (see event.h). */
#include "event.h"

#include <errno.h>
#include <string.h>
#include <time.h>

static const uint32_t str_max[SBX_EV_NSTR] = {
    SBX_EV_TARGET_MAX, SBX_EV_TARGET2_MAX, SBX_EV_TEXT_MAX, SBX_EV_TEXT_MAX,
};

uint64_t sbx_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* How many bytes of S (length N > MAX) to keep so that the kept part plus the
 * marker fits MAX and does not end inside a UTF-8 sequence. */
static uint32_t cut_point(const char *s, uint32_t max)
{
    uint32_t keep = max - (uint32_t)(sizeof SBX_EV_CUT_MARK - 1);
    /* Back up over continuation bytes (10xxxxxx) to a character start; at
     * most 3, so binary junk cannot make us walk far. */
    for (int i = 0; i < 3 && keep > 0 && ((unsigned char)s[keep] & 0xC0) == 0x80; i++)
        keep--;
    return keep;
}

uint32_t sbx_event_plan(const struct sbx_event_desc *ev, uint64_t ts_ns,
                        const uint32_t *refs, struct sbx_rec_plan *plan)
{
    const char *str[SBX_EV_NSTR] = { ev->target, ev->target2, ev->rule, ev->reason };
    struct sbx_rec_hdr *h = &plan->hdr;
    memset(h, 0, sizeof *h);
    h->ts_ns = ts_ns;
    h->flags = ev->flags;
    h->err = ev->err;
    h->op = (uint8_t)ev->op;
    h->decision = (uint8_t)ev->decision;
    h->layer = (uint8_t)ev->layer;
    plan->seg[0] = h;
    plan->seglen[0] = sizeof *h;
    plan->nseg = 1;
    uint32_t total = sizeof *h;
    for (int i = 0; i < SBX_EV_NSTR; i++) {
        if (!str[i])
            continue;
        h->has |= (uint8_t)(1u << i);
        if (refs && refs[i] != SBX_EV_NOREF) {
            h->has |= (uint8_t)SBX_EV_REF(i);
            plan->ref[i] = refs[i];
            plan->seg[plan->nseg] = &plan->ref[i];
            plan->seglen[plan->nseg++] = sizeof plan->ref[i];
            h->len[i] = sizeof plan->ref[i];
            total += sizeof plan->ref[i];
            continue;
        }
        /* strnlen bounds the scan: a huge string costs max+1 bytes. */
        size_t n = strnlen(str[i], str_max[i] + 1);
        uint32_t len = (uint32_t)n;
        plan->seg[plan->nseg] = str[i];
        if (n > str_max[i]) {
            uint32_t keep = cut_point(str[i], str_max[i]);
            plan->seglen[plan->nseg++] = keep;
            plan->seg[plan->nseg] = SBX_EV_CUT_MARK;
            plan->seglen[plan->nseg++] = sizeof SBX_EV_CUT_MARK - 1;
            len = keep + (uint32_t)(sizeof SBX_EV_CUT_MARK - 1);
            h->flags |= SBX_EVF_TRUNCATED;
        } else if (len > 0) {
            plan->seglen[plan->nseg++] = len;
        }
        h->len[i] = (uint16_t)len;
        total += len;
    }
    h->total = total;
    return total;
}

size_t sbx_event_encode(const struct sbx_event_desc *ev, uint64_t ts_ns,
                        void *buf, size_t bufsz)
{
    struct sbx_rec_plan plan;
    uint32_t total = sbx_event_plan(ev, ts_ns, NULL, &plan);
    if (total > bufsz)
        return 0;
    unsigned char *p = buf;
    for (unsigned i = 0; i < plan.nseg; i++) {
        memcpy(p, plan.seg[i], plan.seglen[i]);
        p += plan.seglen[i];
    }
    return total;
}

int sbx_event_decode(const void *buf, size_t n, struct sbx_event_view *out)
{
    struct sbx_rec_hdr h;
    if (n < sizeof h || n > SBX_REC_MAX)
        goto bad;
    memcpy(&h, buf, sizeof h);
    if (h.total != n || h.op >= SBX_OP__COUNT || h.decision > SBX_DENY ||
        h.layer >= SBX_LAYER__COUNT || (h.has & ~0x0Fu))
        goto bad;
    const char *p = (const char *)buf + sizeof h;
    size_t left = n - sizeof h;
    memset(out, 0, sizeof *out);
    out->ts_ns = h.ts_ns;
    out->op = (enum sbx_op)h.op;
    out->decision = (enum sbx_decision)h.decision;
    out->layer = (enum sbx_layer)h.layer;
    out->flags = h.flags;
    out->err = h.err;
    for (int i = 0; i < SBX_EV_NSTR; i++) {
        uint32_t len = h.len[i];
        if (len > str_max[i] || len > left || (!(h.has & (1u << i)) && len))
            goto bad;
        if (memchr(p, '\0', len))
            goto bad;
        out->str[i] = (h.has & (1u << i)) ? p : NULL;
        out->len[i] = len;
        p += len;
        left -= len;
    }
    if (left != 0)
        goto bad;
    return 0;
bad:
    errno = EINVAL;
    return -1;
}

size_t sbx_event_expand(const void *rec, size_t n, const volatile char *tab, size_t tabsz,
                        void *out, size_t outsz)
{
    struct sbx_rec_hdr h;
    if (n < sizeof h || n > SBX_REC_MAX || outsz < sizeof h)
        return 0;
    memcpy(&h, rec, sizeof h);
    if (h.total != n)
        return 0;
    if (!(h.has & 0xF0u)) {
        if (n > outsz)
            return 0;
        memcpy(out, rec, n);
        return n;
    }
    const unsigned char *in = (const unsigned char *)rec + sizeof h;
    size_t left = n - sizeof h;
    unsigned char *o = (unsigned char *)out + sizeof h;
    size_t room = outsz - sizeof h;
    uint32_t total = sizeof h;
    for (int i = 0; i < SBX_EV_NSTR; i++) {
        uint32_t len = h.len[i];
        if (len > left)
            return 0;
        if (!(h.has & SBX_EV_REF(i))) {
            if (len > room)
                return 0;
            memcpy(o, in, len);
        } else {
            uint32_t off;
            if (len != sizeof off || !(h.has & (1u << i)))
                return 0;
            memcpy(&off, in, sizeof off);
            if (off >= tabsz)
                return 0;
            /* Byte by byte into our buffer, up to the string's maximum and
             * its NUL: each byte is judged as copied, so a table that
             * changes while we read cannot make us run past the bound. */
            size_t want = tabsz - off;
            if (want > (size_t)str_max[i] + 1)
                want = (size_t)str_max[i] + 1;
            if (want > room)
                want = room;
            size_t k = 0;
            for (; k < want; k++) {
                unsigned char c = (unsigned char)tab[off + k];
                if (c == '\0')
                    break;
                o[k] = c;
            }
            if (k == want)
                return 0;       /* no NUL within the bound */
            h.len[i] = (uint16_t)k;
        }
        in += len;
        left -= len;
        o += h.len[i];
        room -= h.len[i];
        total += h.len[i];
    }
    if (left != 0)
        return 0;
    h.has &= 0x0Fu;
    h.total = total;
    memcpy(out, &h, sizeof h);
    return total;
}
