/*
 * emit.c — the agent-side emitter: one shared-memory ring per process
 * (emit.h says what it guarantees; ring.h has the layout).
 *
 * Process identity.  A ring belongs to the process that registered it: the
 * daemon stamps its rows with the pid and uid the kernel attached to the
 * registration.  A child must therefore never write into its parent's ring.
 * Two mechanisms, because each alone has a hole:
 *  - the per-process state lives in its own page marked MADV_WIPEONFORK: in
 *    any child that does not share our memory (fork(), vfork-less raw
 *    clone() without CLONE_VM) the kernel hands that page over zero-filled,
 *    so the first load of `state` says "no ring" and the child registers its
 *    own.  This costs one load per event and needs no system call (getpid()
 *    is a real system call since glibc 2.25, so a pid compare would not);
 *  - a pthread_atfork child handler resets the state too, for kernels
 *    without MADV_WIPEONFORK (< 4.14).
 * A CLONE_VM child (vfork, posix_spawn's helper) shares our memory and so
 * our ring: that is memory-safe (the ring is lock-free and multi-producer)
 * but its events carry the parent's pid until it execs.
 *
 * Reservation.  Producers reserve slots with a compare-and-swap on `head`
 * that only succeeds when the slots are free, not with fetch_add: a
 * fetch_add claims positions unconditionally, and a producer that then gives
 * up on a ring that stays full (the 2 s bound) would leave claimed slots that
 * are never committed, stalling the daemon on that ring for good.  With the
 * CAS a producer either owns free slots or owns nothing.
 *
 * Descriptors.  The program owns the descriptor table, not us: a shell's
 * `exec 4>file` takes fd 4 whether or not we hold it, and closefrom() or
 * close_range() in a child closes ours and lets the numbers be reused.  So
 * our two descriptors (the ring's memfd and the registration socket) are
 * moved far above the low numbers programs pick, and each is remembered with
 * its inode: before we write to one (the wake-up) or close one (a forked
 * child dropping its parent's), we check it is still ours.  Writing a byte
 * into a user's socket is worse than losing a wake-up (the daemon also looks
 * at every ring on a short timer).
 *
 * Nothing here allocates or takes a lock; the only waits are bounded.
 */
#include "emit.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <bsd/string.h>

#include "ctlmsg.h"
#include "event.h"
#include "paths.h"
#include "ring.h"

enum { ST_NONE = 0, ST_BUSY = 1, ST_READY = 2 };

/* Per-process state, in a MADV_WIPEONFORK page (zero in a forked child). */
/* A descriptor of ours and the inode it had when we made it. */
struct own_fd {
    int fd;
    ino_t ino;
};

struct emit_proc {
    _Atomic uint32_t state;
    pid_t owner;            /* the process that registered the ring */
    struct sbx_ring_hdr *ring;
    struct sbx_ring_slot *slots;
    char *tab;              /* the ring's string table */
    _Atomic uint32_t tab_used;  /* bytes of it taken */
    uint32_t epoch;         /* ring_epoch when this ring was made */
    struct own_fd memfd, sock;
};

/* Configuration: plain memory, inherited by children (they report for the
 * same agent). */
static struct {
    /* The small fields and the socket's path first: sbx_emit_init writes
     * them in every process, and in one page they cost one fault. */
    bool inited;
    bool async;             /* sbx_emit_set_async */
    char agent_id[64];
    char token[72];
    char sock_path[4096];
    char ring_file[4096];   /* sbx_emit_use_file: the run's shared ring */
} cfg;

static struct emit_proc *proc;
/* What this process's ring was, in plain memory: a forked child finds here
 * the parent's descriptors and mapping, which it closes before registering
 * its own. */
static struct { void *map; struct own_fd memfd, sock; } inherited = {
    NULL, { -1, 0 }, { -1, 0 } };
static char last_error[512];
/* Counts the rings this process (and its ancestors, by inheritance) made:
 * a remembered string-table offset is only good for the ring it was
 * written into, and a forked child's ring may be mapped at the address its
 * parent's had. */
static _Atomic uint32_t ring_epoch;

#define WAIT_FULL_NS   2000000000ull   /* full ring: give up after 2 s */
#define WAIT_REG_NS    10000000000ull   /* registration by another thread */
#define WAIT_KEPT_NS   1000000000ull    /* at exit: the daemon takes the ring */
#define RETRY_REG_NS   3000000000ull    /* the daemon died under a registration:
                                         * its successor has this long */
#define STALL_NS       1000000000ull   /* after a timeout: fail fast this long */

/* Until when a full ring fails at once (CLOCK_MONOTONIC ns).  Plain memory:
 * a forked child inherits it, which is right (same daemon). */
static _Atomic uint64_t stalled_until;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Where our descriptors go: above the numbers programs use for themselves
 * (shells take 3-9 and 10+, bash 255), under the open-files limit; -1 if
 * the limit leaves no room up there.  Asked once per ring, not per fd. */
static int high_base(void)
{
    int base = 600;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        if (rl.rlim_cur < 64)
            return -1;
        if ((rlim_t)base + 32 > rl.rlim_cur)
            base = (int)(rl.rlim_cur * 3 / 4);
    }
    return base;
}

/* Moves FD to BASE or above (high_base).  Returns the new descriptor
 * (close-on-exec), or FD itself if there is no room up there. */
static int high_fd(int fd, int base)
{
    if (base < 0)
        return fd;
    int nfd = fcntl(fd, F_DUPFD_CLOEXEC, base);
    if (nfd < 0)
        return fd;
    close(fd);
    return nfd;
}

static struct own_fd own(int fd)
{
    struct stat st;
    struct own_fd o = { fd, 0 };
    if (fd >= 0 && fstat(fd, &st) == 0)
        o.ino = st.st_ino;
    return o;
}

/* True if O's descriptor is still the one we made. */
static bool still_ours(struct own_fd o)
{
    struct stat st;
    return o.fd >= 0 && fstat(o.fd, &st) == 0 && st.st_ino == o.ino;
}

/* Closes O if it is still ours; forgets it either way. */
static void drop_fd(struct own_fd *o)
{
    if (still_ours(*o))
        close(o->fd);
    o->fd = -1;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void set_error(const char *msg)
{
    strlcpy(last_error, msg, sizeof last_error);
}

const char *sbx_emit_error(void)
{
    return last_error;
}

static void atfork_child(void)
{
    if (proc)
        atomic_store_explicit(&proc->state, ST_NONE, memory_order_relaxed);
}

int sbx_emit_init(const char *runtime_dir, const char *agent_id, const char *agent_token)
{
    char dflt[4096];
    if (!agent_id || !agent_token || !*agent_id || !*agent_token) {
        set_error("no agent run id or token in the environment");
        errno = EINVAL;
        return -1;
    }
    if (!runtime_dir || !*runtime_dir) {
        /* NULL: the default ($SBX_RUNTIME_DIR, ...), as every tool finds it. */
        if (sbx_path_runtime_dir(dflt, sizeof dflt) < 0) {
            set_error("cannot find the runtime directory");
            return -1;
        }
        runtime_dir = dflt;
    }
    int n = snprintf(cfg.sock_path, sizeof cfg.sock_path, "%s/%s", runtime_dir, SBX_EVENTS_SOCK);
    if (n < 0 || (size_t)n >= sizeof cfg.sock_path ||
        strlcpy(cfg.agent_id, agent_id, sizeof cfg.agent_id) >= sizeof cfg.agent_id ||
        strlcpy(cfg.token, agent_token, sizeof cfg.token) >= sizeof cfg.token) {
        set_error("runtime directory, run id or token too long");
        errno = ENAMETOOLONG;
        return -1;
    }
    if (!proc) {
        void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (page == MAP_FAILED)
            return -1;
        /* Best effort: without it (old kernel) the atfork handler below
         * still covers fork(); see the comment at the top. */
        (void)madvise(page, 4096, MADV_WIPEONFORK);
        proc = page;
        pthread_atfork(NULL, NULL, atfork_child);
    }
    cfg.inited = true;
    return 0;
}

int sbx_emit_rebind(const char *agent_id, const char *agent_token)
{
    if (!cfg.inited || !agent_id || !agent_token || !*agent_id || !*agent_token) {
        errno = EINVAL;
        return -1;
    }
    if (proc && atomic_load_explicit(&proc->state, memory_order_acquire) != ST_NONE) {
        errno = EBUSY;
        return -1;
    }
    if (strlen(agent_id) >= sizeof cfg.agent_id || strlen(agent_token) >= sizeof cfg.token) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strlcpy(cfg.agent_id, agent_id, sizeof cfg.agent_id);
    strlcpy(cfg.token, agent_token, sizeof cfg.token);
    return 0;
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* Sends the registration for MEMFD and, if WAIT, waits for the
 * daemon's answer.  Returns the connected socket, or -1.
 *
 * Not waiting saves the agent's process a round trip to the daemon (its
 * wake-up, on a busy machine, is most of the cost).  It is safe because
 * nothing the daemon decides depends on the process still being there: the
 * pid and uid come with the message (SCM_CREDENTIALS), the process's pidfd
 * from the connection (SO_PEERPIDFD), the memory stays alive in flight, and
 * sbx-auditd takes every queued registration before it records an agent's
 * end.  A refusal marks the ring (SBX_RING_REFUSED); see ensure_ring. */
static int send_registration(int memfd, bool wait, bool size_it, int base, bool *again)
{
    *again = false;
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0) {
        set_error("socket failed");
        return -1;
    }
    s = high_fd(s, base);
    struct sockaddr_un sa;
    int dfd = -1;
    int rc = sbx_unix_addr(cfg.sock_path, &sa, &dfd);
    if (rc == 0)
        rc = connect(s, (struct sockaddr *)&sa, sizeof sa);
    if (dfd >= 0)
        close(dfd);
    if (rc < 0) {
        /* No daemon listens (it died; sbx-guard starts another). */
        *again = errno == ECONNREFUSED || errno == ENOENT || errno == EAGAIN;
        /* A long path is cut: this is only a message. */
        if (snprintf(last_error, sizeof last_error, "cannot reach sbx-auditd at %s: %s",
                     cfg.sock_path, strerror(errno)) < 0)
            last_error[0] = '\0';
        goto fail;
    }
    struct sbx_ring_reg reg;
    memset(&reg, 0, sizeof reg);
    memcpy(reg.magic, SBX_REG_MAGIC, sizeof reg.magic);
    strlcpy(reg.agent_id, cfg.agent_id, sizeof reg.agent_id);
    strlcpy(reg.token, cfg.token, sizeof reg.token);
    reg.flags = (wait ? 0 : SBX_REG_NO_REPLY) | (size_it ? SBX_REG_SIZE_IT : 0);

    /* No SCM_CREDENTIALS of ours: the kernel attaches this process's own
     * to every message, and the daemon (SO_PASSCRED) receives them.
     * Spelling them out would fail in a process that has just entered a
     * user namespace with no uid map yet (unshare -r), whose uid is then
     * the overflow uid. */
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
    memcpy(CMSG_DATA(c), &memfd, sizeof memfd);
    ssize_t w;
    do
        w = sendmsg(s, &mh, MSG_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    if (w != (ssize_t)sizeof reg) {
        *again = w < 0 && (errno == EPIPE || errno == ECONNRESET || errno == ECONNREFUSED);
        set_error("cannot send the ring to sbx-auditd");
        goto fail;
    }
    if (!wait)
        return s;
    /* Generous: the daemon may be inside a durable commit (an fsync) on a
     * busy disk; failing here fails the agent's call closed. */
    struct timeval tv = { .tv_sec = 10 };
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char reply[160];
    ssize_t r;
    do
        r = recv(s, reply, sizeof reply - 1, 0);
    while (r < 0 && errno == EINTR);
    if (r <= 0) {
        /* It hung up (died) rather than timed out (stuck). */
        *again = r == 0 || errno == ECONNRESET;
        set_error("sbx-auditd did not answer the ring registration");
        goto fail;
    }
    reply[r] = '\0';
    if (strcmp(reply, "ok") != 0) {
        /* A daemon started after the one that died, not yet told of the
         * run by sbx-guard (RESUME): worth asking again after a hang-up. */
        *again = strstr(reply, "unknown agent id") != NULL;
        set_error(reply);
        goto fail;
    }
    return s;
fail:
    close(s);
    return -1;
}

/* send_registration, again while the daemon is dying or restarting: a
 * registration in flight when sbx-auditd is SIGKILLed (no answer, or no
 * daemon listening) is sent again, every 50 ms for up to RETRY_REG_NS, to
 * the daemon sbx-guard starts in its place; that one refuses the run until
 * sbx-guard has taken it back, which is waited for too, but only after a
 * hang-up or when LOST (the daemon that held the ring is gone): a plain
 * refusal fails at once.  Still -1 when none comes back:
 * the caller fails closed.  Only nanosleep and clock_gettime: safe in a
 * signal handler and in a forked child. */
/* Set once a whole RETRY_REG_NS passed with no daemon taking the run back
 * (nobody restarts it: sbx-guard is gone, or the process runs without
 * one): from then on each registration is tried once, so that every
 * guarded call fails at once rather than after the wait, until one
 * succeeds.  A forked child inherits it, which is right. */
static _Atomic bool reg_gave_up;

static int register_ring(int memfd, bool wait, bool size_it, int base, bool lost)
{
    uint64_t until = 0;
    int saved = errno;
    for (;;) {
        bool again = false;
        int s = send_registration(memfd, wait, size_it, base, &again);
        if (s >= 0) {
            atomic_store_explicit(&reg_gave_up, false, memory_order_relaxed);
            errno = saved;
            return s;
        }
        bool refused = strstr(last_error, "unknown agent id") != NULL;
        if (!again || (refused && !lost) ||
            atomic_load_explicit(&reg_gave_up, memory_order_relaxed))
            return -1;
        lost = lost || !refused;
        uint64_t now = mono_ns();
        if (!until) {
            until = now + RETRY_REG_NS;
        } else if (now > until) {
            atomic_store_explicit(&reg_gave_up, true, memory_order_relaxed);
            return -1;
        }
        struct timespec ts = { 0, 50000000 };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
    }
}

/* sbx_emit_use_file: maps the run's ring file.  Nothing to register:
 * sbx-guard relays the file (tools/guard_ring.h).  Every process of the
 * agent writes into it, so the string table is not used (each process
 * would take it for its own): texts go inline. */
static int attach_file_ring(struct emit_proc *p)
{
    int fd = open(cfg.ring_file, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        set_error("cannot open the event ring file (SBX_RING_FILE)");
        return -1;
    }
    void *map = mmap(NULL, SBX_RING_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    struct stat st;
    bool sized = fstat(fd, &st) == 0 && st.st_size == SBX_RING_BYTES;
    close(fd);      /* the mapping stays; no descriptor of ours to keep */
    if (map == MAP_FAILED || !sized) {
        if (map != MAP_FAILED)
            munmap(map, SBX_RING_BYTES);
        set_error("cannot map the event ring file (SBX_RING_FILE)");
        return -1;
    }
    struct sbx_ring_hdr *h = map;
    if (h->magic != SBX_RING_MAGIC || h->version != SBX_RING_VERSION) {
        munmap(map, SBX_RING_BYTES);
        set_error("the event ring file is not a ring");
        return -1;
    }
    p->ring = h;
    p->owner = (pid_t)syscall(SYS_getpid);
    p->slots = (struct sbx_ring_slot *)((char *)map + SBX_RING_HDR_SIZE);
    p->tab = (char *)map + SBX_RING_TAB_OFF;
    atomic_store(&p->tab_used, SBX_RING_TAB);
    p->epoch = atomic_fetch_add(&ring_epoch, 1) + 1;
    p->memfd = own(-1);
    p->sock = own(-1);
    inherited.map = map;
    inherited.memfd = p->memfd;
    inherited.sock = p->sock;
    return 0;
}

int sbx_emit_use_file(const char *path)
{
    if (!path || path[0] != '/' ||
        strlcpy(cfg.ring_file, path, sizeof cfg.ring_file) >= sizeof cfg.ring_file) {
        cfg.ring_file[0] = '\0';
        set_error("SBX_RING_FILE must be an absolute path");
        errno = EINVAL;
        return -1;
    }
    return 0;
}

/* Creates this process's ring and registers it (state BUSY is ours). */
static int create_ring(struct emit_proc *p)
{
    /* A forked child: drop what the parent's ring left us. */
    if (inherited.map)
        munmap(inherited.map, SBX_RING_BYTES);
    drop_fd(&inherited.memfd);
    drop_fd(&inherited.sock);
    inherited.map = NULL;
    if (cfg.ring_file[0])
        return attach_file_ring(p);

    void *map = MAP_FAILED;
    int base = high_base();
    int memfd = memfd_create("sbx-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (memfd < 0) {
        set_error("memfd_create failed");
        goto fail;
    }
    memfd = high_fd(memfd, base);
    /* files.max_write_bytes is this process's RLIMIT_FSIZE: below the
     * ring's size it refuses the growth (EFBIG, and SIGXFSZ to a program
     * that did not ignore it), so the daemon sizes the ring instead, and
     * we wait for it. */
    struct rlimit fsz;
    bool size_it = getrlimit(RLIMIT_FSIZE, &fsz) == 0 && fsz.rlim_cur != RLIM_INFINITY
                   && fsz.rlim_cur < SBX_RING_BYTES;
    /* Sealed so that the daemon can map it without fearing SIGBUS from a
     * ring that shrinks under it. */
    if (!size_it && (ftruncate(memfd, SBX_RING_BYTES) < 0 ||
        fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)) {
        set_error("cannot size the ring");
        goto fail;
    }
    struct sbx_ring_hdr *h = NULL;
    if (!size_it) {
        map = mmap(NULL, SBX_RING_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
        if (map == MAP_FAILED) {
            set_error("cannot map the ring");
            goto fail;
        }
        h = map;
        h->magic = SBX_RING_MAGIC;
        h->version = SBX_RING_VERSION;
        h->nslots = SBX_RING_SLOTS;
        h->slot_size = SBX_RING_SLOT;
    }
    int s = register_ring(memfd, size_it || !cfg.async, size_it, base, false);
    if (s < 0)
        goto fail;
    if (size_it) {
        map = mmap(NULL, SBX_RING_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
        if (map == MAP_FAILED) {
            close(s);
            set_error("cannot map the ring");
            goto fail;
        }
        h = map;
    }
    p->ring = h;
    p->owner = (pid_t)syscall(SYS_getpid);
    p->slots = (struct sbx_ring_slot *)((char *)map + SBX_RING_HDR_SIZE);
    p->tab = (char *)map + SBX_RING_TAB_OFF;
    atomic_store(&p->tab_used, 0);
    p->epoch = atomic_fetch_add(&ring_epoch, 1) + 1;
    p->memfd = own(memfd);
    p->sock = own(s);
    inherited.map = map;
    inherited.memfd = p->memfd;
    inherited.sock = p->sock;
    return 0;
fail:
    if (map != MAP_FAILED)
        munmap(map, SBX_RING_BYTES);
    close_fd(&memfd);
    return -1;
}

/* The daemon that read our ring stopped (it set `gone`): hand the same ring
 * to whichever daemon now listens; it resumes at the published tail. */
static int reregister(struct emit_proc *p)
{
    if (cfg.ring_file[0]) {
        set_error("sbx-guard stopped relaying the event ring file");
        return -1;
    }
    if (!still_ours(p->memfd)) {
        set_error("the program closed the event ring's descriptor");
        return -1;
    }
    int s = register_ring(p->memfd.fd, true, false, high_base(), true);
    if (s < 0)
        return -1;
    drop_fd(&p->sock);
    p->sock = own(s);
    inherited.sock = p->sock;
    return 0;
}

/* Makes sure this process has a registered, live ring.  0 or -1. */
static int ensure_ring(void)
{
    struct emit_proc *p = proc;
    uint64_t deadline = 0;
    for (;;) {
        uint32_t st = atomic_load_explicit(&p->state, memory_order_acquire);
        if (st == ST_READY && !atomic_load_explicit(&p->ring->gone, memory_order_acquire))
            return 0;
        /* The daemon refused the registration we did not wait for: every
         * event fails from now on (re-registering would be refused too). */
        if (st == ST_READY &&
            atomic_load_explicit(&p->ring->gone, memory_order_acquire) == SBX_RING_REFUSED) {
            set_error("sbx-auditd refused this process's event ring (an unknown agent run "
                      "or a wrong token)");
            return -1;
        }
        /* A vfork child shares our memory but not our descriptors: what it
         * registered would be ours without being usable by us.  It writes
         * into our ring while that is live (sbx_emit_prepare_vfork made
         * sure it was), and fails closed otherwise.  Slow path only. */
        if (st == ST_READY && p->owner != (pid_t)syscall(SYS_getpid)) {
            set_error("the event ring went away while a vfork child was running");
            return -1;
        }
        if (st != ST_BUSY &&
            atomic_compare_exchange_strong(&p->state, &st, ST_BUSY)) {
            int rc = st == ST_READY ? reregister(p) : create_ring(p);
            if (rc < 0 && st == ST_READY) {
                /* Keep the ring (it may still hold events a new daemon can
                 * take), but report this event as not recorded. */
                atomic_store_explicit(&p->state, ST_READY, memory_order_release);
                return -1;
            }
            atomic_store_explicit(&p->state, rc == 0 ? ST_READY : ST_NONE,
                                  memory_order_release);
            return rc;
        }
        /* Another thread is registering: wait for it, boundedly. */
        uint64_t now = mono_ns();
        if (!deadline)
            deadline = now + WAIT_REG_NS;
        else if (now > deadline)
            return -1;
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
}

static void wake_daemon(struct emit_proc *p)
{
    atomic_store_explicit(&p->ring->sleeping, 0, memory_order_relaxed);
    if (!still_ours(p->sock))
        return;     /* the daemon's timer will find the ring */
    ssize_t w = send(p->sock.fd, "w", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)w;    /* EAGAIN: wake-ups are queued already; EPIPE: it is gone */
}

/* True when the daemon that holds our ring is gone without saying so (it
 * crashed): its end of the registration socket hung up.  A system call, so
 * only asked on the slow path of a full ring. */
static bool daemon_lost(struct emit_proc *p)
{
    if (!still_ours(p->sock))
        return false;
    struct pollfd pf = { .fd = p->sock.fd, .events = POLLRDHUP };
    return poll(&pf, 1, 0) == 1 && (pf.revents & (POLLHUP | POLLRDHUP | POLLERR));
}

/* The ring has no room for SPAN slots at H: wait for the daemon to free
 * some, boundedly.  0 when there is room, -1 on timeout or a gone daemon. */
static int wait_space(struct emit_proc *p, uint32_t span)
{
    struct sbx_ring_hdr *r = p->ring;
    for (int i = 0; i < 200; i++) {
        uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
        if (h + span - atomic_load_explicit(&r->tail, memory_order_acquire) <= SBX_RING_SLOTS)
            return 0;
        cpu_relax();
    }
    /* The ring stayed full for the whole bound a moment ago: the daemon is
     * stuck (its store failing, say).  Fail at once rather than make every
     * guarded call of the agent take 2 s; look again in a second. */
    uint64_t now = mono_ns();
    if (now < atomic_load_explicit(&stalled_until, memory_order_relaxed)) {
        set_error("sbx-auditd is not draining the event ring");
        return -1;
    }
    uint64_t deadline = now + WAIT_FULL_NS;
    for (;;) {
        if (atomic_load_explicit(&r->gone, memory_order_acquire))
            return -1;
        atomic_fetch_add(&r->waiters, 1);
        uint32_t v = atomic_load(&r->space);
        uint64_t h = atomic_load(&r->head);
        int room = h + span - atomic_load(&r->tail) <= SBX_RING_SLOTS;
        if (!room && daemon_lost(p)) {
            /* Nobody will drain this ring: fail now rather than after 2 s,
             * and let the next event try to register with a new daemon. */
            atomic_fetch_sub(&r->waiters, 1);
            atomic_store(&r->gone, 1u);
            set_error("sbx-auditd is gone (its connection hung up)");
            return -1;
        }
        if (!room) {
            wake_daemon(p);
            struct timespec ts = { 0, 20000000 };
            syscall(SYS_futex, &r->space, FUTEX_WAIT, v, &ts, NULL, 0);
        }
        atomic_fetch_sub(&r->waiters, 1);
        if (room)
            return 0;
        if ((now = mono_ns()) > deadline) {
            atomic_store_explicit(&stalled_until, now + STALL_NS, memory_order_relaxed);
            set_error("sbx-auditd did not drain the event ring for 2 s");
            return -1;
        }
    }
}

/* glibc's memcpy, called: for these short copies gcc would otherwise inline
 * `rep movsq`, whose start-up costs more than the copy. */
static void *(*const volatile copy)(void *, const void *, size_t) = memcpy;

/* Copies LEN bytes of SRC into the record at slot-relative offset *OFF. */
static void put(struct sbx_ring_slot *slots, uint64_t pos, uint32_t *off,
                const void *src, uint32_t len)
{
    const unsigned char *s = src;
    while (len > 0) {
        uint32_t idx = *off / SBX_RING_PAYLOAD, in = *off % SBX_RING_PAYLOAD;
        uint32_t n = SBX_RING_PAYLOAD - in;
        if (n > len)
            n = len;
        struct sbx_ring_slot *sl = &slots[(pos + idx) & (SBX_RING_SLOTS - 1)];
        copy(sl->data + in, s, n);
        s += n;
        len -= n;
        *off += n;
    }
}

/* The first lap of a ring writes into pages nobody has touched: each first
 * write is a page fault, and on a virtual machine a fault costs as much as
 * the rest of an event (measured: ~1 us of trap on top of the page itself,
 * and a first lap at twice the cost of later ones).  Mapping the whole ring
 * up front costs ~0.5 ms, more than a short process spends in all; so the
 * pages are asked for in blocks of POPULATE_SLOTS slots (64 KiB), one
 * madvise per block, as the producer enters it, and only once it has
 * written more than the first two pages (a process that records a handful
 * of events pays nothing).  Best effort: without MADV_POPULATE_WRITE
 * (Linux < 5.14) the pages fault in as before. */
#define POPULATE_SLOTS (65536u / SBX_RING_SLOT)
#define POPULATE_FIRST (8192u / SBX_RING_SLOT)  /* slots in the first two pages */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static void populate(struct emit_proc *p, uint64_t from, uint64_t to)
{
    if (to > SBX_RING_SLOTS)
        to = SBX_RING_SLOTS;
    if (from >= to)
        return;
    int saved = errno;
    (void)madvise(&p->slots[from], (size_t)(to - from) * SBX_RING_SLOT, MADV_POPULATE_WRITE);
    errno = saved;
}

static void populate_ahead(struct emit_proc *p, uint64_t pos, uint32_t span)
{
    uint64_t end = pos + span;
    if (pos < POPULATE_FIRST && end >= POPULATE_FIRST) {
        /* the rest of the first block, and the next */
        populate(p, POPULATE_FIRST, (uint64_t)2 * POPULATE_SLOTS);
    } else if (pos / POPULATE_SLOTS != end / POPULATE_SLOTS && end >= POPULATE_SLOTS) {
        /* entering block b (b >= 1, already mapped): ask for block b + 1 */
        uint64_t b = end / POPULATE_SLOTS + 1;
        populate(p, b * POPULATE_SLOTS, (b + 1) * POPULATE_SLOTS);
    }
}

/* Keyed texts this thread has put in its process's string table (event.h:
 * rule_key).  A few entries cover a loop (one rule, one reason) and a
 * program's usual mix; a miss writes the text into the table again, which
 * only costs table space.  Per thread: no lock.  An entry is only good for
 * the ring (epoch) it was written into. */
#define KEY_MEMO 8
struct key_memo {
    const void *key;
    uint32_t epoch, off;
};
static __thread struct key_memo key_memo[KEY_MEMO] __attribute__((tls_model("initial-exec")));
static __thread unsigned key_memo_next __attribute__((tls_model("initial-exec")));

/* The string-table offset of TEXT (named by KEY) in P's ring, written there
 * if this thread has not yet; SBX_EV_NOREF when there is no key, the text
 * is too long or the table is full (the text then goes inline). */
static uint32_t intern(struct emit_proc *p, const void *key, const char *text)
{
    if (!key || !text)
        return SBX_EV_NOREF;
    for (unsigned i = 0; i < KEY_MEMO; i++)
        if (key_memo[i].key == key && key_memo[i].epoch == p->epoch)
            return key_memo[i].off;
    size_t n = strnlen(text, SBX_EV_TEXT_MAX + 1);
    if (n > SBX_EV_TEXT_MAX)
        return SBX_EV_NOREF;
    uint32_t need = (uint32_t)n + 1;
    uint32_t off = atomic_load_explicit(&p->tab_used, memory_order_relaxed);
    do {
        if (off > SBX_RING_TAB - need)
            return SBX_EV_NOREF;
    } while (!atomic_compare_exchange_weak_explicit(&p->tab_used, &off, off + need,
                                                    memory_order_relaxed,
                                                    memory_order_relaxed));
    /* Ours alone from here; the record's commit (a release store) is what
     * makes the text visible to the daemon, after this copy. */
    copy(p->tab + off, text, need);
    struct key_memo *m = &key_memo[key_memo_next++ % KEY_MEMO];
    m->key = NULL;      /* never a half-made entry under a key */
    m->epoch = p->epoch;
    m->off = off;
    m->key = key;
    return off;
}

int sbx_emit(const struct sbx_event_desc *ev)
{
    struct emit_proc *p = proc;
    if (!cfg.inited || !p || !ev) {
        errno = EINVAL;
        return -1;
    }
    if (atomic_load_explicit(&p->state, memory_order_acquire) != ST_READY ||
        atomic_load_explicit(&p->ring->gone, memory_order_relaxed)) {
        if (ensure_ring() < 0)
            return -1;
    }
    struct sbx_ring_hdr *r = p->ring;
    struct sbx_rec_plan plan;
    uint32_t refs[SBX_EV_NSTR] = { SBX_EV_NOREF, SBX_EV_NOREF,
                                   intern(p, ev->rule_key, ev->rule),
                                   intern(p, ev->reason_key, ev->reason) };
    uint32_t total = sbx_event_plan(ev, sbx_now_ns(), refs, &plan);
    uint32_t span = (total + SBX_RING_PAYLOAD - 1) / SBX_RING_PAYLOAD;

    uint64_t pos = atomic_load_explicit(&r->head, memory_order_relaxed);
    for (;;) {
        uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (pos + span - tail > SBX_RING_SLOTS) {
            if (wait_space(p, span) < 0)
                return -1;
            pos = atomic_load_explicit(&r->head, memory_order_relaxed);
            continue;
        }
        if (atomic_compare_exchange_weak_explicit(&r->head, &pos, pos + span,
                                                  memory_order_acquire, memory_order_relaxed))
            break;
    }
    if (pos < SBX_RING_SLOTS)
        populate_ahead(p, pos, span);
    uint32_t off = 0;
    if (span == 1) {
        /* The common record, in one slot: the header and the references
         * are fixed-size copies the compiler makes inline; only the
         * strings go through memcpy. */
        unsigned char *dst = p->slots[pos & (SBX_RING_SLOTS - 1)].data;
        memcpy(dst, &plan.hdr, sizeof plan.hdr);
        off = sizeof plan.hdr;
        for (unsigned i = 1; i < plan.nseg; i++) {
            if (plan.seglen[i] == sizeof(uint32_t))
                memcpy(dst + off, plan.seg[i], sizeof(uint32_t));
            else
                copy(dst + off, plan.seg[i], plan.seglen[i]);
            off += plan.seglen[i];
        }
    } else {
        for (unsigned i = 0; i < plan.nseg; i++)
            put(p->slots, pos, &off, plan.seg[i], plan.seglen[i]);
    }
    for (uint32_t i = 0; i < span; i++) {
        struct sbx_ring_slot *sl = &p->slots[(pos + i) & (SBX_RING_SLOTS - 1)];
        sl->info = i == 0 ? (SBX_RING_FIRST | span) : i;
        sl->len = i + 1 < span ? SBX_RING_PAYLOAD : total - i * SBX_RING_PAYLOAD;
        atomic_store_explicit(&sl->seq, pos + i + 1, memory_order_release);
    }
    /* Start taking ownership of the next slot's first lines now (the daemon
     * has read them since): the next event's copy then does not wait for
     * them. */
    struct sbx_ring_slot *next = &p->slots[(pos + span) & (SBX_RING_SLOTS - 1)];
    __builtin_prefetch(next, 1, 3);
    __builtin_prefetch((char *)next + 64, 1, 3);
    /* Pairs with the daemon's fence between setting `sleeping` (or `gone`)
     * and its last look at the ring: either it sees our commit, or we see
     * its flag. */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&r->gone, memory_order_relaxed)) {
        /* The daemon stopped reading: this event may not have been taken.
         * Report it as unrecorded; the caller fails closed. */
        set_error("sbx-auditd stopped while the event was written");
        return -1;
    }
    if (atomic_load_explicit(&r->sleeping, memory_order_relaxed) &&
        atomic_exchange_explicit(&r->sleeping, 0, memory_order_relaxed))
        wake_daemon(p);
    return 0;
}

bool sbx_emit_untaken(void)
{
    struct emit_proc *p = proc;
    return cfg.inited && p &&
           atomic_load_explicit(&p->state, memory_order_acquire) == ST_READY &&
           !atomic_load_explicit(&p->ring->gone, memory_order_acquire) &&
           atomic_load_explicit(&p->ring->tail, memory_order_acquire) !=
               atomic_load_explicit(&p->ring->head, memory_order_acquire);
}

void sbx_emit_handover(void)
{
    struct emit_proc *p = proc;
    /* Everything taken (the usual case): nothing to hand over, and no
     * system call spent finding that out. */
    if (!sbx_emit_untaken() || p->owner != (pid_t)syscall(SYS_getpid) || cfg.ring_file[0])
        return;
    /* Events not yet committed, and the daemon does not yet hold the ring
     * where its own death cannot take it (sbx-guard's keeper): this
     * process, about to end, may be the ring's last holder.  It waits until
     * the daemon has it (usually within one turn of its loop), has taken
     * the events, or is gone; boundedly. */
    struct sbx_ring_hdr *r = p->ring;
    uint64_t until = mono_ns() + WAIT_KEPT_NS;
    for (;;) {
        atomic_fetch_add(&r->waiters, 1);
        uint32_t v = atomic_load(&r->space);
        bool wait = !atomic_load_explicit(&r->kept, memory_order_acquire) &&
                    sbx_emit_untaken() && !daemon_lost(p) && mono_ns() < until;
        if (wait) {
            struct timespec ts = { 0, 2000000 };
            syscall(SYS_futex, &r->space, FUTEX_WAIT, v, &ts, NULL, 0);
        }
        atomic_fetch_sub(&r->waiters, 1);
        if (!wait)
            break;
    }
    if (!sbx_emit_untaken() || !daemon_lost(p))
        return;
    atomic_store(&p->ring->gone, 1u);
    (void)ensure_ring();
}

void sbx_emit_set_async(bool on)
{
    cfg.async = on;
}

int sbx_emit_prepare_vfork(void)
{
    if (!cfg.inited || !proc)
        return -1;
    struct emit_proc *p = proc;
    if (atomic_load_explicit(&p->state, memory_order_acquire) == ST_READY &&
        !atomic_load_explicit(&p->ring->gone, memory_order_relaxed))
        return 0;
    return ensure_ring();
}

bool sbx_emit_killed(void)
{
    struct emit_proc *p = proc;
    if (!cfg.inited || !p)
        return false;
    if (atomic_load_explicit(&p->state, memory_order_acquire) != ST_READY) {
        /* A process that has not reported yet learns its agent's state by
         * registering (once). */
        if (ensure_ring() < 0)
            return false;
    }
    return atomic_load_explicit(&p->ring->killed, memory_order_relaxed) != 0;
}
