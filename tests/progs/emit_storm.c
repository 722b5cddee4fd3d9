/*
 * emit_storm — a fake guard and agent for the audit tests and benches.
 *
 *   emit_storm NAME TOTAL THREADS CHILDREN
 *       registers agent NAME, then emits TOTAL events split over THREADS
 *       threads of this process and CHILDREN forked children (one thread
 *       each); target "storm:W:I" (W worker, I sequence) is unique per event.
 *       Syncs, records the exit, prints "emitted N failed F".
 *   emit_storm --suicide NAME N
 *       registers NAME; a child emits N events ("suicide:I") and SIGKILLs
 *       itself right after the last sbx_emit returns; the parent syncs.
 *   emit_storm --term NAME N
 *       registers NAME, emits N events ("term:I"), then SIGTERMs the daemon
 *       (pid file) without syncing and waits for it to exit.
 *   emit_storm --crash NAME
 *       registers NAME, emits and syncs 1000 events, SIGKILLs the daemon,
 *       then emits 10000 more: prints how many failed and how long it took
 *       (a ring nobody drains must fail fast, not after 2 s per event).
 *   emit_storm --keyed NAME N KINDS
 *       emits N events whose rules go by reference (KINDS distinct ones),
 *       forks a child that emits N with the same keys, then N more.
 *   emit_storm --guard NAME
 *       registers NAME, prints "ready RUN_ID", waits for one command and
 *       prints "cmd hard|soft by=.. reason=.." then confirms it and exits.
 *   emit_storm --handover NAME N
 *       plays sbx-guard through a daemon crash: registers NAME and keeps
 *       its rings (KEEP); a child emits N events ("before:I"), synced; the
 *       daemon is stopped, the child emits N more ("after:I") and is
 *       SIGKILLed, the daemon is SIGKILLed; a new one is started, the run
 *       resumed, and handed first three hostile rings (bad magic, 1 GiB,
 *       another uid's: root only) and then the child's ring (ADOPT).
 *       Prints one line per ring: "adopt WHAT: ok" or "adopt WHAT: ERR"
 *       (and "adopt keep-from-agent: ..." for the child's own KEEP).
 * EMIT_STORM_GO=FILE in the environment: wait for FILE after registering.
 * Exit 0 when every sbx_emit returned 0.
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "emit.h"
#include "event.h"
#include "paths.h"
#include "ring.h"

static long per_worker;
static long failed_total;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static long emit_range(int worker, long n, const char *prefix)
{
    char target[64];
    long failed = 0;
    for (long i = 0; i < n; i++) {
        snprintf(target, sizeof target, "%s:%d:%ld", prefix, worker, i);
        struct sbx_event_desc ev = {
            .op = (i % 7 == 0) ? SBX_OP_OPEN_WRITE : SBX_OP_OPEN_READ,
            .decision = (i % 10 == 0) ? SBX_DENY : SBX_ALLOW,
            .layer = SBX_LAYER_GUARD, .err = (i % 10 == 0) ? 13 : 0,
            .target = target, .rule = "files.read.allow[0] \"**\"", .reason = "storm",
        };
        if (sbx_emit(&ev) < 0)
            failed++;
    }
    return failed;
}

/* Events whose rule and reason go by reference (event.h: rule_key): rule
 * "keyed-rule-K ..." named by key K + 1, for K = I % KINDS, and one
 * reason.  With KINDS large the ring's string table fills up and the rest
 * go inline; either way every row must carry its own text. */
static const char keyed_reason[] = "keyed reason";

static long emit_keyed(const char *prefix, long from, long n, long kinds)
{
    char target[64], rule[160];
    long failed = 0;
    for (long i = from; i < from + n; i++) {
        long k = i % kinds;
        snprintf(target, sizeof target, "%s:%ld", prefix, i);
        snprintf(rule, sizeof rule, "keyed-rule-%ld padding padding padding padding padding "
                 "padding padding padding padding", k);
        struct sbx_event_desc ev = {
            .op = SBX_OP_OPEN_READ, .decision = SBX_ALLOW, .layer = SBX_LAYER_GUARD,
            .target = target, .rule = rule, .reason = keyed_reason,
            .rule_key = (const void *)(uintptr_t)(k + 1), .reason_key = keyed_reason,
        };
        if (sbx_emit(&ev) < 0)
            failed++;
    }
    return failed;
}

static void *thread_main(void *arg)
{
    long f = emit_range((int)(long)arg, per_worker, "storm");
    pthread_mutex_lock(&lock);
    failed_total += f;
    pthread_mutex_unlock(&lock);
    return NULL;
}

static int reg(const char *name, char *run_id, char *token)
{
    char err[512], rundir[4096];
    int fd = sbx_ctl_open(true, err, sizeof err);
    if (fd < 0) {
        fprintf(stderr, "emit_storm: %s\n", err);
        exit(1);
    }
    struct sbx_agent_reg r = { .name = name, .policy_name = "test", .workspace = "/tmp",
                               .command = "emit_storm", .layers = "guard",
                               .guard_pid = getpid() };
    if (sbx_ctl_register(fd, &r, run_id, 64, token, 80, err, sizeof err) < 0) {
        fprintf(stderr, "emit_storm: register: %s\n", err);
        exit(1);
    }
    sbx_path_runtime_dir(rundir, sizeof rundir);
    if (sbx_emit_init(rundir, run_id, token) < 0) {
        fprintf(stderr, "emit_storm: sbx_emit_init failed\n");
        exit(1);
    }
    /* EMIT_STORM_GO=FILE: registered; wait for FILE before emitting. */
    const char *go = getenv("EMIT_STORM_GO");
    for (int i = 0; go && *go && access(go, F_OK) != 0 && i < 1000; i++)
        usleep(10000);
    return fd;
}

static void sync_and_exit(int fd, int status)
{
    char err[512];
    if (sbx_ctl_sync(fd, NULL, err, sizeof err) < 0)
        fprintf(stderr, "emit_storm: sync: %s\n", err);
    sbx_ctl_exit(fd, status, status ? "failed" : "exited 0");
}

static int guard_mode(const char *name)
{
    char run_id[64], token[80];
    int fd = reg(name, run_id, token);
    printf("ready %s\n", run_id);
    fflush(stdout);
    struct sbx_ctl_cmd c;
    int r = sbx_ctl_recv_cmd(fd, &c);
    if (r != 1) {
        fprintf(stderr, "emit_storm: recv_cmd: %d\n", r);
        return 1;
    }
    printf("cmd %s by=%s reason=%s\n", c.kind == SBX_CMD_KILL_HARD ? "hard" : "soft", c.by,
           c.reason);
    fflush(stdout);
    if (c.kind == SBX_CMD_KILL_SOFT) {
        printf("killed-flag %d\n", sbx_emit_killed() ? 1 : 0);
        fflush(stdout);
    }
    sbx_ctl_cmd_done(fd, c.req_id, 0, "1 process");
    sbx_ctl_exit(fd, 137, "killed by signal 9");
    return 0;
}

static int daemon_pid(void)
{
    char pf[4096];
    sbx_path_runtime_file(SBX_PID_FILE, pf, sizeof pf);
    FILE *fp = fopen(pf, "r");
    int pid = 0;
    if (!fp || fscanf(fp, "%d", &pid) != 1)
        pid = 0;
    if (fp)
        fclose(fp);
    return pid;
}

static int crash_mode(const char *name)
{
    char run_id[64], token[80], err[256];
    int fd = reg(name, run_id, token);
    long f = emit_range(0, 1000, "crash");
    sbx_ctl_sync(fd, NULL, err, sizeof err);
    int pid = daemon_pid();
    if (pid <= 0 || f)
        return 1;
    kill(pid, SIGKILL);
    for (int i = 0; i < 200 && kill(pid, 0) == 0; i++)
        usleep(10000);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    f = emit_range(1, 10000, "after");
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("after crash: %ld of 10000 failed in %.2f s (%s)\n", f,
           (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9, sbx_emit_error());
    return 0;
}

/* Sends MSG (with NFDS descriptors) on FD and prints its answer as
 * "adopt WHAT: ok|ERR msg".  0 for OK. */
static int ask(int fd, const char *what, const char *msg, const int *fds, int nfds)
{
    union {
        char b[CMSG_SPACE(2 * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = { .iov_base = (void *)msg, .iov_len = strlen(msg) };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
    if (nfds) {
        mh.msg_control = ctl.b;
        mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
    }
    char buf[1024];
    ssize_t n = -1;
    struct pollfd pf = { .fd = fd, .events = POLLIN };
    if (sendmsg(fd, &mh, MSG_NOSIGNAL) >= 0 && poll(&pf, 1, 10000) == 1)
        n = recv(fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    for (char *p = buf; *p; p++)
        if (*p == '\n')
            *p = ' ';
    if (what)
        printf("adopt %s: %s\n", what, strncmp(buf, "OK", 2) == 0 ? "ok" : buf);
    fflush(stdout);
    return strncmp(buf, "OK", 2) == 0 ? 0 : -1;
}

static int keep_conn(const char *run_id, const char *token)
{
    char err[256], msg[256];
    int fd = sbx_ctl_open(false, err, sizeof err);
    snprintf(msg, sizeof msg, "KEEP\nrun_id=%s\ntoken=%s\n", run_id, token);
    if (fd < 0 || ask(fd, NULL, msg, NULL, 0) < 0) {
        fprintf(stderr, "emit_storm: KEEP refused\n");
        exit(1);
    }
    return fd;
}

/* A memfd of SIZE bytes sealed like a ring, with the header of one if
 * MAGIC (else zeros); made as FSUID when that is not -1. */
static int fake_ring(off_t size, uint32_t magic, int fsuid)
{
    if (fsuid >= 0)
        setfsuid((uid_t)fsuid);
    int m = memfd_create("fake-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fsuid >= 0)
        setfsuid(0);
    struct sbx_ring_hdr h;
    memset(&h, 0, sizeof h);
    h.magic = magic;
    h.version = SBX_RING_VERSION;
    h.nslots = SBX_RING_SLOTS;
    h.slot_size = SBX_RING_SLOT;
    if (m < 0 || ftruncate(m, size) < 0 || pwrite(m, &h, sizeof h, 0) != (ssize_t)sizeof h ||
        fcntl(m, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0) {
        fprintf(stderr, "emit_storm: cannot make a fake ring\n");
        exit(1);
    }
    return m;
}

static int handover_mode(const char *name, long n)
{
    char run_id[64], token[80], err[256];
    int fd = reg(name, run_id, token);
    int kfd = keep_conn(run_id, token);
    int to_parent[2], to_child[2];
    if (pipe(to_parent) < 0 || pipe(to_child) < 0)
        return 1;
    pid_t pid = fork();
    if (pid == 0) {
        /* A process of the agent knows the run id and token, but is not
         * its guard: its KEEP is refused. */
        char kmsg[256];
        snprintf(kmsg, sizeof kmsg, "KEEP\nrun_id=%s\ntoken=%s\n", run_id, token);
        int other = sbx_ctl_open(false, err, sizeof err);
        if (other >= 0)
            ask(other, "keep-from-agent", kmsg, NULL, 0);
        char c = 'a';
        long f = emit_range(0, n, "before");
        if (write(to_parent[1], &c, 1) != 1 || read(to_child[0], &c, 1) != 1)
            _exit(1);
        f += emit_range(1, n, "after");
        if (f)
            fprintf(stderr, "emit_storm: %ld failed\n", f);
        raise(SIGKILL);
        _exit(1);
    }
    char c;
    if (read(to_parent[0], &c, 1) != 1)
        return 1;
    sbx_ctl_sync(fd, NULL, err, sizeof err);
    /* The copy of the child's ring the daemon sent at its registration. */
    char buf[512];
    union {
        char b[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = { .iov_base = buf, .iov_len = sizeof buf - 1 };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
                         .msg_controllen = sizeof ctl.b };
    struct pollfd pf = { .fd = kfd, .events = POLLIN };
    ssize_t got = poll(&pf, 1, 5000) == 1 ? recvmsg(kfd, &mh, MSG_CMSG_CLOEXEC) : -1;
    struct cmsghdr *cm = got > 0 ? CMSG_FIRSTHDR(&mh) : NULL;
    if (!cm || cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len != CMSG_LEN(2 * sizeof(int))) {
        fprintf(stderr, "emit_storm: no ring from the keeper connection\n");
        return 1;
    }
    int ring[2];
    memcpy(ring, CMSG_DATA(cm), sizeof ring);
    buf[got] = '\0';
    /* Down goes the daemon, with the child's events after the stop in the
     * ring and not taken; then the child. */
    int dpid = daemon_pid();
    kill(dpid, SIGSTOP);
    if (write(to_child[1], "g", 1) != 1)
        return 1;
    int st;
    waitpid(pid, &st, 0);
    kill(dpid, SIGKILL);
    for (int i = 0; i < 200 && kill(dpid, 0) == 0; i++)
        usleep(10000);
    close(kfd);
    sbx_ctl_close(fd);
    fd = sbx_ctl_open(true, err, sizeof err);
    if (fd < 0 || sbx_ctl_resume(fd, name, run_id, token, getpid(), err, sizeof err) < 0) {
        fprintf(stderr, "emit_storm: resume: %s\n", err);
        return 1;
    }
    kfd = keep_conn(run_id, token);
    char msg[128];
    snprintf(msg, sizeof msg, "ADOPT\npid=%d\nsince=0\n", (int)pid);
    int bad = fake_ring(SBX_RING_BYTES, 0xdeadbeef, -1);
    ask(kfd, "bad-magic", msg, &bad, 1);
    int huge = fake_ring((off_t)1 << 30, SBX_RING_MAGIC, -1);
    ask(kfd, "huge", msg, &huge, 1);
    if (geteuid() == 0) {
        int other = fake_ring(SBX_RING_BYTES, SBX_RING_MAGIC, 65534);
        ask(kfd, "other-uid", msg, &other, 1);
    }
    const char *since = strstr(buf, "since=");
    snprintf(msg, sizeof msg, "ADOPT\npid=%d\nsince=%lld\n", (int)pid,
             since ? strtoll(since + 6, NULL, 10) : 0LL);
    ask(kfd, "child", msg, ring, 2);
    ask(kfd, "child-again", msg, ring, 2);
    sync_and_exit(fd, 0);
    printf("child %s\n", WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL ? "killed" : "survived");
    return 0;
}

static int term_mode(const char *name, long n)
{
    char run_id[64], token[80], pf[4096];
    reg(name, run_id, token);
    long f = emit_range(0, n, "term");
    sbx_path_runtime_file(SBX_PID_FILE, pf, sizeof pf);
    FILE *fp = fopen(pf, "r");
    int pid = 0;
    if (!fp || fscanf(fp, "%d", &pid) != 1 || pid <= 0) {
        fprintf(stderr, "emit_storm: no daemon pid\n");
        return 1;
    }
    fclose(fp);
    kill(pid, SIGTERM);
    for (int i = 0; i < 200 && kill(pid, 0) == 0; i++)
        usleep(25000);
    printf("emitted %ld failed %ld daemon %s\n", n, f, kill(pid, 0) == 0 ? "alive" : "gone");
    return f ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--crash") == 0)
        return crash_mode(argv[2]);
    if (argc == 4 && strcmp(argv[1], "--term") == 0)
        return term_mode(argv[2], strtol(argv[3], NULL, 10));
    if (argc == 3 && strcmp(argv[1], "--guard") == 0)
        return guard_mode(argv[2]);
    if (argc == 4 && strcmp(argv[1], "--handover") == 0)
        return handover_mode(argv[2], strtol(argv[3], NULL, 10));
    char run_id[64], token[80];
    if (argc == 5 && strcmp(argv[1], "--keyed") == 0) {
        /* the parent names its rules first, then a forked child names the
         * same keys in its own ring (whose table starts empty) */
        int fd = reg(argv[2], run_id, token);
        long n = strtol(argv[3], NULL, 10), kinds = strtol(argv[4], NULL, 10);
        long f = emit_keyed("keyed-parent", 0, n, kinds);
        pid_t pid = fork();
        if (pid == 0)
            _exit(emit_keyed("keyed-child", 0, n, kinds) ? 1 : 0);
        int st;
        waitpid(pid, &st, 0);
        f += emit_keyed("keyed-parent", n, n, kinds);
        sync_and_exit(fd, 0);
        printf("keyed failed %ld child %d\n", f, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "--suicide") == 0) {
        int fd = reg(argv[2], run_id, token);
        long n = strtol(argv[3], NULL, 10);
        pid_t pid = fork();
        if (pid == 0) {
            long f = emit_range(0, n, "suicide");
            if (f)
                fprintf(stderr, "emit_storm: %ld failed\n", f);
            raise(SIGKILL);
            _exit(1);
        }
        int st;
        waitpid(pid, &st, 0);
        sync_and_exit(fd, 0);
        printf("child %s\n", WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL ? "killed" : "survived");
        return 0;
    }
    if (argc != 5) {
        fprintf(stderr, "usage: emit_storm NAME TOTAL THREADS CHILDREN | --suicide NAME N | "
                        "--guard NAME\n");
        return 2;
    }
    long total = strtol(argv[2], NULL, 10);
    int threads = atoi(argv[3]), children = atoi(argv[4]);
    int fd = reg(argv[1], run_id, token);
    int workers = threads + children;
    per_worker = total / workers;
    pid_t kids[64];
    for (int c = 0; c < children && c < 64; c++) {
        kids[c] = fork();
        if (kids[c] == 0) {
            long f = emit_range(threads + c, per_worker, "storm");
            _exit(f ? 1 : 0);
        }
    }
    pthread_t th[64];
    for (int t = 0; t < threads && t < 64; t++)
        pthread_create(&th[t], NULL, thread_main, (void *)(long)t);
    for (int t = 0; t < threads && t < 64; t++)
        pthread_join(th[t], NULL);
    int bad = 0;
    for (int c = 0; c < children && c < 64; c++) {
        int st;
        waitpid(kids[c], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            bad++;
    }
    sync_and_exit(fd, 0);
    printf("emitted %ld failed %ld bad_children %d\n", per_worker * workers, failed_total, bad);
    return failed_total || bad ? 1 : 0;
}
