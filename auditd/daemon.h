/*
 * daemon.h — sbx-auditd's insides.  One thread, one epoll loop, a timer by
 * way of epoll_wait's timeout; no framework.  (The store copies its WAL
 * back on a thread of its own, auditd/store_ckpt.c, which touches nothing
 * here.)  The files call downward only:
 *
 *   daemon.c    the loop: sockets, signals, commit policy, shutdown
 *   control.c   control.sock: registration, guard events, exits, kills
 *   rings.c     the agents' rings: registration, draining, sleep handshake
 *   batch.c     the open store batch: append, hold, commit, failure
 *   registry.c  the one owner of agents, connections and kill requests
 *   base.c      clock, log, epoll registration, accept
 *
 * Life of an event: a producer commits it into its ring; the loop drains
 * rings into the open store batch; a commit makes the batch durable in the
 * WAL and only then publishes each ring's new tail, so a slot is reused only
 * after its event is in the store.  A failed commit rolls back and rewinds
 * the rings: nothing is lost, producers wait (and after 2 s fail closed).
 *
 * Memory: the daemon owns every struct here.  Agents, connections and kill
 * requests are created by registry.c, ended by their handlers (an agent's
 * `ended`, a connection's `closing`, a kill's `done`) and freed by
 * registry_reap alone, between turns, once nothing points at them; rings
 * are freed by rings_reap when their process is gone and their events are
 * committed.  Functions return 0 / -1 and log what went wrong.
 */
#ifndef SBX_AUDIT_DAEMON_H
#define SBX_AUDIT_DAEMON_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "ctlmsg.h"
#include "event.h"
#include "ring.h"
#include "store.h"

/* Wakes the producers sleeping on ring header H's `space` word, if any:
 * after the daemon published a new tail (slots freed) or set `kept`. */
static inline void ring_wake_waiters(struct sbx_ring_hdr *h)
{
    if (atomic_load(&h->waiters)) {
        atomic_fetch_add(&h->space, 1);
        syscall(SYS_futex, &h->space, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
    }
}

enum ep_kind { EP_EVENTS_LISTEN, EP_CTL_LISTEN, EP_SIGNAL, EP_RING_SOCK,
               EP_RING_PIDFD, EP_CONN };

/* What an epoll registration points at. */
struct ep {
    enum ep_kind kind;
    void *obj;
};

struct agent;
struct conn;

struct ring {
    struct ring *next;
    struct ep ep_sock, ep_pid;
    int sock, pidfd;
    int spare;                  /* kept from accept to registration for the
                                 * pidfd: a ring accepted can always register */
    int memfd;                  /* the ring's memory, kept until handed to
                                 * its agent's keeper (sbx-guard), else -1 */
    dev_t dev;                  /* the memory file: one ring struct each */
    ino_t ino;
    struct sbx_ring_hdr *hdr;   /* NULL until registered */
    struct sbx_ring_slot *slots;
    uint64_t tail;              /* consumed (in the open batch) */
    uint64_t committed;         /* consumed and committed: published */
    pid_t pid;
    uid_t uid;
    uint64_t since_ns;          /* registered (CLOCK_REALTIME): no record is older */
    struct agent *agent;
    bool dead;                  /* its process exited: final drain, then free */
    bool broken;                /* header corrupt: not read any more */
    bool killed_now;            /* rings_kill_agent: signalled in this call */
    bool adopted;               /* handed over by sbx-guard after a restart */
};

/* A kill request from sbx-kill, waiting for guards to confirm. */
struct killreq {
    struct killreq *next;
    struct conn *from;          /* NULL if the requester went away */
    int outstanding;
    bool failed;
    bool done;                  /* answered: freed by registry_reap */
    uint64_t deadline_ms;
    char result[1024];
};

struct agent {
    struct agent *next;
    char name[128], run_id[40], token[72];
    int64_t ref;                /* agents.id in the store */
    struct conn *guard;         /* NULL once the guard's connection ended */
    struct conn *keeper;        /* sbx-guard's ring keeper (KEEP), or NULL */
    bool resumed;               /* taken back after a restart (RESUME): its
                                 * rings' memfds wait for its keeper */
    /* Freed once ended, with no guard, no ring and no kill in progress. */
    bool ended;
    bool soft_killed;
    bool deadman;               /* the daemon killed it (guard gone or mute):
                                 * a process that registers later is killed */
    uint64_t guard_stopped_ms;  /* first seen stopped while the agent ran */
    int nrings;
    uid_t uid;
    pid_t guard_pid;
    /* a hard kill in progress */
    struct killreq *kill;
    uint64_t cmd_req;
    uint64_t cmd_sent_ms;
    char cmd_by[64], cmd_reason[256];
    /* The supervisor's rows of its guard (tools/guard_sup.h): numbered by
     * the guard; after each commit the last number stored is sent to its
     * keeper ("ACK seq=N"), and the guard lets go of the rows up to it. */
    uint64_t sup_held;          /* the last number in the open batch */
    uint64_t sup_stored;        /* the last number committed */
    uint64_t sup_acked;         /* the last number sent to the keeper */
    uint64_t since_ns;          /* the run's start (registration, or the
                                 * guard's word on a resume): a row's own
                                 * time older than this is not kept */
};

struct conn {
    struct conn *next;
    struct ep ep;
    int fd;
    uid_t uid;
    pid_t pid;
    struct agent *agent;        /* the agent this guard registered */
    struct agent *keeps;        /* KEEP: the agent whose rings go here */
    int pidfd;                  /* the peer, taken at accept; -1 if none */
    struct killreq *kill;       /* a kill this client waits for */
    bool closing;               /* hung up: fd closed, freed by registry_reap */
    bool noreply;               /* the request being handled wants no answer */
};

/* A row that came over control.sock (what a supervisor saw) and sits in the
 * open batch: kept until that batch is committed, so that a batch that fails
 * (a full disk) can take it again, as ring rows are taken again from their
 * rings.  The agent is copied: the registry entry may be gone by then. */
enum held_kind {
    HELD_EVENT,                 /* rec: an encoded event record */
    HELD_AGENT_END,             /* the agents row's end; rec: the detail */
    HELD_AGENT_KILLED,          /* the agents row's kill; rec: "by\0reason" */
};

struct held {
    struct held *next;
    enum held_kind kind;
    bool late;                  /* a lifecycle row: after the rings' rows */
    char name[128], run_id[40];
    int64_t ref, pid, uid;
    int64_t ended_ns;
    int status;
    size_t len;
    unsigned char rec[];
};

/* A log line's rate limit: see daemon_log_limited. */
struct log_limit {
    uint64_t window_ms, lines, dropped;
};

#define DAEMON_RESERVE_FDS 4

/* A ring whose registration named a run this daemon did not know yet, in
 * its first seconds: the run of an sbx-guard that has not yet taken it
 * back (RESUME) after the previous daemon died.  Held, not refused, so
 * that what its process wrote is read once the run is back (rings.c). */
struct parked {
    int memfd, pidfd;
    pid_t pid;
    uid_t uid;
    uint64_t at_ms;
    char run_id[40], token[72];
};
#define DAEMON_PARK_MAX  256
#define DAEMON_PARK_MS   10000      /* a daemon this young parks; a ring
                                     * waits this long for its run */

struct daemon {
    int epfd, sigfd, ev_listen, ctl_listen;
    uint64_t started_ms;
    struct parked parked[DAEMON_PARK_MAX];
    size_t nparked;
    int reserve[DAEMON_RESERVE_FDS];  /* descriptors kept for a registration */
    int nreserve;
    bool accept_paused;         /* out of descriptors: listeners rest */
    uint64_t accept_resume_ms;
    struct log_limit fd_log;    /* lines about descriptors running out */
    struct log_limit store_log; /* retention's lines */
    struct log_limit agent_log; /* lines an agent's processes can cause */
    struct ep ep_ev, ep_ctl, ep_sig;
    struct audit_store *store;
    struct ring *rings;
    struct agent *agents;
    struct conn *conns;
    struct killreq *kills;
    char events_path[4096], ctl_path[4096];
    uid_t uid;
    bool stopping;
    uint64_t batch_started_ms;
    uint64_t store_retry_ms;    /* after a failed write: not before this */
    bool store_failed;          /* a write failed since the last retry time */
    uint64_t last_fail_log_ms;
    uint64_t next_req;
    const struct daemon_opts *opts;
    uint64_t next_prune_ms;     /* retention: the next look */
    int64_t prune_at_id;        /* retention: the chain's end at the last look */
    uint64_t held_log_ms;       /* retention: last "kept for the exporter" line */
    uint64_t last_head_log_ms;
    uint64_t last_busy_ms;      /* last turn that drained something */
    uint64_t last_rows_ms;      /* last commit of rows, from rings or not */
    unsigned poll_ms;           /* lingering: the next look (daemon.c) */
    uint64_t head_ms;           /* when the store's head file was last brought up */
    int64_t logged_head;
    struct held *held, **held_tail;
    size_t n_held;
    bool replay_late;           /* a retry put the held rows back but the late ones */
    unsigned char scratch[SBX_RING_MAX_SPAN * SBX_RING_PAYLOAD + 8];
    unsigned char plain[SBX_REC_MAX];  /* a ring record, references expanded */
};

/* base.c */
/* Start-up reporting: begin takes SBX_AUDITD_READY_FD (set by
 * sbx_ctl_open), after which every log line goes there too; done says
 * "ready" and closes it.  A daemon that exits before done has said why. */
void daemon_startup_begin(void);
void daemon_startup_done(void);
uint64_t daemon_now_ms(void);
void daemon_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* From now on the log is PATH (opened 0600, appending, and made our
 * stderr, so that SQLite's and libc's messages land there too), renamed to
 * PATH.1 (replacing the one before) whenever it passes MAX bytes: the log
 * takes at most twice MAX.  0 / -1 (errno). */
int daemon_log_open(const char *path, uint64_t max);
/* daemon_log, at most a few lines a second per LIMIT (what an agent can
 * cause: it must not be able to fill the disk through our log). */
void daemon_log_limited(struct log_limit *limit, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int daemon_epoll_add(struct daemon *d, int fd, struct ep *ep, uint32_t events);
/* accept4 on LISTEN (non-blocking, close-on-exec); -1 when there is
 * nothing (more) to accept.  Out of descriptors (or short of the reserve),
 * the listeners rest and new connections wait in the backlog; nothing is
 * dropped.  SPARE (if not NULL): a descriptor on /dev/null opened before
 * the accept, for the caller to close when it needs the room. */
int daemon_accept(struct daemon *d, int listen_fd, const char *what, int *spare);
/* Rested listeners: once their time has come and the reserve is whole
 * again, arms them.  Returns the ms until it wants to look again, or -1. */
int daemon_accept_resume(struct daemon *d);
/* The reserve (DAEMON_RESERVE_FDS descriptors on /dev/null): take fills it
 * and says whether it is whole; release gives it up for a moment. */
bool daemon_reserve_take(struct daemon *d);
void daemon_reserve_release(struct daemon *d);

/* registry.c: agents, connections, kill requests.  Nothing here frees but
 * registry_reap and registry_free_all. */
/* A new agent named NAME, not yet in the registry; NULL without memory. */
struct agent *registry_agent_new(struct daemon *d, const char *name);
/* Puts A in the registry, its guard on connection GUARD. */
void registry_agent_add(struct daemon *d, struct agent *a, struct conn *guard);
/* The running agent of RUN_ID if TOKEN is its secret (compared in
 * constant time), else NULL. */
struct agent *registry_agent_by_token(struct daemon *d, const char *run_id, const char *token);
/* Frees an agent that registry_agent_add never saw. */
void registry_agent_discard(struct agent *a);
/* A connection on FD, in epoll and the registry; NULL on failure (FD is
 * the caller's to close). */
struct conn *registry_conn_new(struct daemon *d, int fd, uid_t uid, pid_t pid);
/* Ends C: closes its descriptor and unhooks it from its agent and its kill
 * request.  The struct stays valid until registry_reap. */
void registry_conn_drop(struct daemon *d, struct conn *c);
/* A kill request from FROM (FROM->kill is set); NULL without memory. */
struct killreq *registry_kill_new(struct daemon *d, struct conn *from);
/* The kill request is answered: unhooked from its requester, freed later. */
void registry_kill_end(struct killreq *kr);
/* Frees what has ended and what nothing points at any more.  The loop
 * calls it between turns, never inside a handler. */
void registry_reap(struct daemon *d);
/* At exit: ends and frees everything left. */
void registry_free_all(struct daemon *d);

/* batch.c */
/* Appends one event row from a decoded record.  0, or -1 (the batch failed:
 * batch_failed has run). */
int batch_append_view(struct daemon *d, const struct sbx_event_view *v,
                      const struct agent *a, int64_t pid, int64_t uid);
/* Puts the encoded record REC (from control.sock) into the open batch and
 * keeps it until a commit has stored it (or the store failed: then it goes
 * into the batch after the next retry).  0, or -1 when too many rows are
 * already waiting for a failed store (or without memory). */
int batch_hold(struct daemon *d, const unsigned char *rec, size_t len,
               const struct agent *a, int64_t pid, int64_t uid);
/* The same for what the daemon itself records of an agent's life: its
 * exit or kill row (REC), its agents row's end or kill.  Never refused for
 * their number (one each per agent); at a retry they go in after the
 * rings' rows, as they did the first time.  0, or -1 without memory. */
int batch_hold_life(struct daemon *d, const unsigned char *rec, size_t len,
                    const struct agent *a, int64_t pid, int64_t uid);
int batch_hold_agent_end(struct daemon *d, const struct agent *a, int64_t ended_ns,
                         int status, const char *detail);
int batch_hold_agent_killed(struct daemon *d, const struct agent *a, const char *by,
                            const char *reason);
/* At a retry, after the rings are drained: the held lifecycle rows. */
void batch_replay_late(struct daemon *d);
/* Commits the open batch and publishes ring tails.  0 / -1 (rings rewound). */
int batch_commit(struct daemon *d, bool durable);
/* A store write failed: roll back, rewind the rings, retry later. */
void batch_failed(struct daemon *d);
/* True when the store may be written again (a failed one's retry time has
 * come and its held rows are back in the batch). */
bool batch_retry(struct daemon *d);
void batch_release_held(struct daemon *d);

/* rings.c */
void rings_accept(struct daemon *d);
/* Accepts every queued ring connection and takes every registration that
 * has arrived: a producer does not wait for its answer, so before the
 * daemon records an agent's end (or a kill, or a sync) the rings its last
 * processes sent must be in hand. */
void rings_catch_up(struct daemon *d);
void ring_on_sock(struct daemon *d, struct ring *r, uint32_t events);
void ring_on_exit(struct daemon *d, struct ring *r);
/* Drains every ring into the open batch, at most BUDGET records per ring
 * (0: no limit).  FINAL: the writers are gone; skip uncommitted slots.
 * Returns records taken. */
size_t rings_drain(struct daemon *d, size_t budget, bool final);
/* The largest consumed-but-uncommitted span of any ring, in slots. */
uint64_t rings_uncommitted(const struct daemon *d);
/* Frees rings whose process is gone and whose events are committed. */
void rings_reap(struct daemon *d);
/* Sleep protocol: set `sleeping` on every ring; true if any has work. */
bool rings_prepare_sleep(struct daemon *d);
void rings_wake(struct daemon *d);
void rings_set_killed(struct daemon *d, struct agent *a);
/* The dead man's switch: SIGKILLs every live process that registered a
 * ring for A, through the pidfds taken at registration (so a recycled pid
 * is never signalled).  Processes that never registered a ring (a static
 * program, one that has not emitted yet) are unknown and not touched.
 * Writes the pids signalled, space-separated, into PIDS (cut at SIZE);
 * returns how many were signalled. */
int rings_kill_agent(struct daemon *d, struct agent *a, char *pids, size_t size);
/* Marks every ring gone (shutdown). */
void rings_mark_gone(struct daemon *d);
/* The ring hand-over (docs/audit.md).  Sends each registered ring's memfd
 * (with its pid, uid, registration time and pidfd) that has not gone yet to
 * its agent's keeper connection, sbx-guard's, which keeps a copy so that a
 * later daemon can drain what a SIGKILLed process left in it. */
void rings_feed_keeper(struct daemon *d);
/* A ring handed over by A's sbx-guard after a restart: MEMFD (the ring),
 * PIDFD (its process, or -1), the PID and SINCE_NS the first daemon
 * recorded.  The memory is checked as hostile input (a sealed memfd of the
 * ring's exact size, owned by UID, a header of this version); the pidfd
 * must name PID while that process lives.  Reading resumes at the tail the
 * first daemon published after its last commit, so nothing committed is
 * taken twice.  1 adopted, 0 held already (its process registered it
 * again), -1 refused with WHY.  The descriptors stay the caller's. */
int rings_adopt(struct daemon *d, struct agent *a, int memfd, int pidfd, pid_t pid, uid_t uid,
                uint64_t since_ns, char *why, size_t whysz);

/* The rings parked for A's run (its guard took it back) are adopted;
 * those parked too long are given up (refused, logged).  Called on RESUME
 * and on each tick. */
void rings_parked_resumed(struct daemon *d, struct agent *a);
void rings_parked_expire(struct daemon *d);

/* control.c */
void ctl_accept(struct daemon *d);
void conn_on_event(struct daemon *d, struct conn *c, uint32_t events);
/* Periodic work: kill re-sends and timeouts, and the dead man's switch
 * for a guard that is stopped while its agent runs. */
void ctl_tick(struct daemon *d);
/* After a commit: every agent's supervisor rows held so far are stored;
 * each keeper is told the last number (ACK), now or at a later tick if its
 * socket is full. */
void ctl_rows_stored(struct daemon *d);
/* True while some agent's guard is watched (the loop then ticks at least
 * every 500 ms). */
bool ctl_watching(const struct daemon *d);

/* daemon.c */
/* What the command line (or the environment, for a daemon started on
 * demand) asks for. */
struct daemon_opts {
    int64_t retain_ns;          /* remove rows older than this; 0: keep */
    uint64_t max_bytes;         /* the store's size cap; 0: none */
    char rule[256];             /* the removal rows' rule: the options */
    bool export_on;             /* an exporter runs: retention keeps every row
                                 * no sink has acknowledged, even before the
                                 * first acknowledgement */
    const char *log_path;       /* NULL: log to stderr as it is (main opens it
                                 * with daemon_log_open) */
    uint64_t log_max;           /* rotate the log past this many bytes */
};
/* Sets up sockets and the store; runs until SIGTERM.  Exit status. */
int daemon_run(const char *runtime_dir, const char *db_path, const struct daemon_opts *o);

#endif
