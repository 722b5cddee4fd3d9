/* guard_ring.c — the event relay of an agent in gVisor (guard_ring.h). */
#include "guard_ring.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <bsd/string.h>

#include "ctlmsg.h"
#include "paths.h"
#include "ring.h"

#define MASK (SBX_RING_SLOTS - 1)
/* A slot reserved but not committed this long is a writer that died
 * between the two (SIGKILL inside sbx_emit): its record is lost, and the
 * relay steps over it rather than stall the run's ring for good. */
#define HOLE_NS 2000000000ull

struct guard_ring {
    int file;                   /* the agent's ring file (read with pread) */
    char path[4096];
    int memfd;                  /* the daemon's ring */
    struct sbx_ring_hdr *dst;
    struct sbx_ring_slot *dslots;
    int sock;                   /* its registration: wake-ups */
    char sock_path[4200], run_id[64], token[72];
    uint64_t ftail;             /* next position to copy from the file */
    uint64_t dhead;             /* next position to write in the daemon's ring */
    uint64_t hole_since;        /* when ftail was first seen uncommitted
                                 * with records after it (0: not) */
    uint32_t killed_sent;
};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Registers the memfd ring on events.sock (ring.h) and waits for "ok".
 * The connection stays ours: a byte on it wakes the daemon. */
static int reg_send(struct guard_ring *gr, char *err, size_t errsz)
{
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa;
    int dfd = -1;
    if (s < 0 || sbx_unix_addr(gr->sock_path, &sa, &dfd) < 0
        || connect(s, (struct sockaddr *)&sa, sizeof sa) < 0) {
        snprintf(err, errsz, "gvisor ring: cannot reach sbx-auditd at %s: %s", gr->sock_path,
                 strerror(errno));
        goto fail;
    }
    struct sbx_ring_reg reg;
    memset(&reg, 0, sizeof reg);
    memcpy(reg.magic, SBX_REG_MAGIC, sizeof reg.magic);
    strlcpy(reg.agent_id, gr->run_id, sizeof reg.agent_id);
    strlcpy(reg.token, gr->token, sizeof reg.token);
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = { .iov_base = &reg, .iov_len = sizeof reg };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
                         .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf };
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &gr->memfd, sizeof gr->memfd);
    if (sendmsg(s, &mh, MSG_NOSIGNAL) != (ssize_t)sizeof reg) {
        snprintf(err, errsz, "gvisor ring: cannot send the ring: %s", strerror(errno));
        goto fail;
    }
    struct timeval tv = { .tv_sec = 10 };
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char reply[160];
    ssize_t r = recv(s, reply, sizeof reply - 1, 0);
    if (r <= 0) {
        snprintf(err, errsz, "gvisor ring: sbx-auditd did not answer the registration");
        goto fail;
    }
    reply[r] = '\0';
    if (strcmp(reply, "ok") != 0) {
        snprintf(err, errsz, "gvisor ring: sbx-auditd: %s", reply);
        goto fail;
    }
    if (dfd >= 0)
        close(dfd);
    if (gr->sock >= 0)
        close(gr->sock);
    gr->sock = s;
    return 0;
fail:
    if (dfd >= 0)
        close(dfd);
    if (s >= 0)
        close(s);
    return -1;
}

static void init_hdr(struct sbx_ring_hdr *h)
{
    h->magic = SBX_RING_MAGIC;
    h->version = SBX_RING_VERSION;
    h->nslots = SBX_RING_SLOTS;
    h->slot_size = SBX_RING_SLOT;
}

struct guard_ring *guard_ring_open(const char *runtime_dir, const char *path,
                                   const char *run_id, const char *token,
                                   char *err, size_t errsz)
{
    struct guard_ring *gr = calloc(1, sizeof *gr);
    void *map = MAP_FAILED;
    if (gr == NULL) {
        snprintf(err, errsz, "gvisor ring: out of memory");
        return NULL;
    }
    gr->file = gr->memfd = gr->sock = -1;
    if (strlcpy(gr->path, path, sizeof gr->path) >= sizeof gr->path
        || (size_t)snprintf(gr->sock_path, sizeof gr->sock_path, "%s/%s", runtime_dir,
                            SBX_EVENTS_SOCK) >= sizeof gr->sock_path
        || strlcpy(gr->run_id, run_id, sizeof gr->run_id) >= sizeof gr->run_id
        || strlcpy(gr->token, token, sizeof gr->token) >= sizeof gr->token) {
        snprintf(err, errsz, "gvisor ring: path, run id or token too long");
        goto fail;
    }
    /* The file: its header written once, the rest zero (no slot looks
     * committed: seq 0 is never P + 1). */
    gr->file = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    struct sbx_ring_hdr h;
    memset(&h, 0, sizeof h);
    init_hdr(&h);
    if (gr->file < 0 || ftruncate(gr->file, SBX_RING_BYTES) < 0
        || pwrite(gr->file, &h, sizeof h, 0) != (ssize_t)sizeof h) {
        snprintf(err, errsz, "gvisor ring: %s: %s", path, strerror(errno));
        goto fail;
    }
    gr->memfd = memfd_create("sbx-ring-relay", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (gr->memfd < 0 || ftruncate(gr->memfd, SBX_RING_BYTES) < 0
        || fcntl(gr->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0
        || (map = mmap(NULL, SBX_RING_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, gr->memfd,
                       0)) == MAP_FAILED) {
        snprintf(err, errsz, "gvisor ring: memfd: %s", strerror(errno));
        goto fail;
    }
    gr->dst = map;
    gr->dslots = (struct sbx_ring_slot *)((char *)map + SBX_RING_HDR_SIZE);
    init_hdr(gr->dst);
    if (reg_send(gr, err, errsz) < 0)
        goto fail;
    return gr;
fail:
    if (gr->file >= 0)
        unlink(path);
    gr->dst = map == MAP_FAILED ? NULL : map;
    guard_ring_close(gr);
    return NULL;
}

static bool slot_at(struct guard_ring *gr, uint64_t pos, struct sbx_ring_slot *out)
{
    off_t off = (off_t)SBX_RING_HDR_SIZE + (off_t)(pos & MASK) * SBX_RING_SLOT;
    return pread(gr->file, out, sizeof *out, off) == (ssize_t)sizeof *out;
}

static uint64_t file_word(struct guard_ring *gr, size_t off)
{
    uint64_t v = 0;
    if (pread(gr->file, &v, sizeof v, (off_t)off) != (ssize_t)sizeof v)
        return 0;
    return v;
}

bool guard_ring_pending(struct guard_ring *gr)
{
    return gr && gr->file >= 0 && file_word(gr, offsetof(struct sbx_ring_hdr, head)) != gr->ftail;
}

static void wake(struct guard_ring *gr)
{
    if (atomic_load(&gr->dst->sleeping) && atomic_exchange(&gr->dst->sleeping, 0)
        && gr->sock >= 0) {
        ssize_t w = send(gr->sock, "w", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)w;    /* the daemon's timer finds the ring otherwise */
    }
}

int guard_ring_pump(struct guard_ring *gr)
{
    int moved = 0;
    if (gr == NULL || gr->file < 0)
        return -1;
    /* A daemon that stopped (and was restarted by sbx-guard) takes the
     * same ring again, from the tail it published. */
    if (atomic_load(&gr->dst->gone)) {
        char why[256];
        atomic_store(&gr->dst->gone, 0u);
        if (reg_send(gr, why, sizeof why) < 0) {
            atomic_store(&gr->dst->gone, SBX_RING_GONE);
            return 0;
        }
    }
    uint64_t fhead = file_word(gr, offsetof(struct sbx_ring_hdr, head));
    while (gr->ftail != fhead) {
        struct sbx_ring_slot first, s[SBX_RING_MAX_SPAN];
        if (!slot_at(gr, gr->ftail, &first))
            return -1;
        if (first.seq != gr->ftail + 1) {
            /* Reserved, not yet committed: wait, unless its writer died. */
            uint64_t now = mono_ns();
            if (gr->hole_since == 0)
                gr->hole_since = now;
            if (now - gr->hole_since < HOLE_NS)
                break;
            gr->ftail++;
            gr->hole_since = 0;
            continue;
        }
        uint32_t span = first.info & ~SBX_RING_FIRST;
        if (!(first.info & SBX_RING_FIRST) || span == 0 || span > SBX_RING_MAX_SPAN) {
            gr->ftail++;        /* not a record's start: the agent's garbage */
            continue;
        }
        bool done = true;
        s[0] = first;
        for (uint32_t i = 1; i < span; i++)
            if (!slot_at(gr, gr->ftail + i, &s[i]) || s[i].seq != gr->ftail + i + 1) {
                done = false;
                break;
            }
        if (!done)
            break;              /* the rest of it is still being written */
        gr->hole_since = 0;
        /* Room in the daemon's ring: we are its only producer. */
        if (gr->dhead + span - atomic_load(&gr->dst->tail) > SBX_RING_SLOTS) {
            atomic_store(&gr->dst->sleeping, 1u);
            wake(gr);
            break;
        }
        atomic_store(&gr->dst->head, gr->dhead + span);
        for (uint32_t i = 0; i < span; i++) {
            struct sbx_ring_slot *d = &gr->dslots[(gr->dhead + i) & MASK];
            d->info = s[i].info;
            d->len = s[i].len > SBX_RING_PAYLOAD ? SBX_RING_PAYLOAD : s[i].len;
            memcpy(d->data, s[i].data, sizeof d->data);
            atomic_store_explicit(&d->seq, gr->dhead + i + 1, memory_order_release);
        }
        gr->dhead += span;
        gr->ftail += span;
        moved++;
    }
    if (moved) {
        /* The agent's producers see the room (they poll it: a futex wake
         * from the host does not reach a waiter in gVisor). */
        uint64_t t = gr->ftail;
        if (pwrite(gr->file, &t, sizeof t, (off_t)offsetof(struct sbx_ring_hdr, tail))
            != (ssize_t)sizeof t)
            return -1;
        atomic_thread_fence(memory_order_seq_cst);
        wake(gr);
    }
    uint32_t killed = atomic_load(&gr->dst->killed);
    if (killed != gr->killed_sent) {
        if (pwrite(gr->file, &killed, sizeof killed,
                   (off_t)offsetof(struct sbx_ring_hdr, killed)) == (ssize_t)sizeof killed)
            gr->killed_sent = killed;
    }
    return moved;
}

void guard_ring_close(struct guard_ring *gr)
{
    if (gr == NULL)
        return;
    if (gr->file >= 0) {
        unlink(gr->path);
        close(gr->file);
    }
    if (gr->sock >= 0)
        close(gr->sock);
    if (gr->dst)
        munmap(gr->dst, SBX_RING_BYTES);
    if (gr->memfd >= 0)
        close(gr->memfd);
    free(gr);
}
