/* guard_sup.c — sbx-guard's supervisor rows, kept until stored (guard_sup.h). */
#include "guard_sup.h"

#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "ctlmsg.h"

/* One row: its message as sent, to send it again unchanged. */
struct sup_row {
    struct sup_row *next;
    uint64_t seq;
    size_t len;
    char msg[];
};

struct guard_sup {
    bool keep;
    uint64_t seq;               /* the last number given */
    struct sup_row *head, **tail;
    size_t n;
    struct sbx_msgbuf *buf;     /* the message being built (64 KiB: taken
                                 * at the first row, for sbx-serve's boxes
                                 * that mostly send one) */
};

struct guard_sup *guard_sup_open(bool keep)
{
    struct guard_sup *gs = calloc(1, sizeof *gs);
    if (!gs)
        return NULL;
    gs->keep = keep;
    gs->tail = &gs->head;
    return gs;
}

bool guard_sup_full(const struct guard_sup *gs)
{
    return gs && gs->keep && gs->n >= GUARD_SUP_MAX;
}

size_t guard_sup_pending(const struct guard_sup *gs)
{
    return gs ? gs->n : 0;
}

int guard_sup_record(struct guard_sup *gs, int fd, const struct sbx_event_desc *ev)
{
    if (!gs || guard_sup_full(gs))
        return -1;
    if (!gs->buf && !(gs->buf = malloc(sizeof *gs->buf)))
        return -1;
    struct sbx_msgbuf *b = gs->buf;
    sbx_ctl_event_format(b, ev, 0);
    sbx_msg_add(b, "noreply", "1");
    sbx_msg_addf(b, "seq", "%llu", (unsigned long long)gs->seq + 1);
    sbx_msg_addf(b, "ts", "%llu", (unsigned long long)sbx_now_ns());
    if (b->overflow)
        return -1;
    gs->seq++;
    if (!gs->keep)
        return fd >= 0 && sbx_msg_send_bytes(fd, b->buf, b->len) == 0 ? 0 : -1;
    struct sup_row *r = malloc(sizeof *r + b->len);
    if (!r)
        return -1;
    r->next = NULL;
    r->seq = gs->seq;
    r->len = b->len;
    memcpy(r->msg, b->buf, b->len);
    *gs->tail = r;
    gs->tail = &r->next;
    gs->n++;
    /* A failed send (the daemon is dying) is not a loss: the row goes
     * again to the next daemon. */
    if (fd >= 0)
        (void)sbx_msg_send_bytes(fd, r->msg, r->len);
    return 0;
}

void guard_sup_acked(struct guard_sup *gs, uint64_t seq)
{
    if (!gs)
        return;
    while (gs->head && gs->head->seq <= seq) {
        struct sup_row *r = gs->head;
        gs->head = r->next;
        free(r);
        gs->n--;
    }
    if (!gs->head)
        gs->tail = &gs->head;
}

long guard_sup_resend(struct guard_sup *gs, int fd)
{
    long sent = 0;
    if (!gs)
        return 0;
    for (struct sup_row *r = gs->head; r; r = r->next) {
        if (sbx_msg_send_bytes(fd, r->msg, r->len) < 0)
            return -1;
        sent++;
    }
    return sent;
}

void guard_sup_close(struct guard_sup *gs)
{
    if (!gs)
        return;
    guard_sup_acked(gs, UINT64_MAX);
    free(gs->buf);
    free(gs);
}
