/*
 * serve_gvisor.c — sbx-serve's sandboxes in gVisor: the keeper
 * (serve_gvisor.h).
 */
#include "serve_gvisor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bsd/string.h>

#include "guard_ring.h"
#include "paths.h"
#include "serve_text.h"

#define FIFO_REQ "/tmp/.sbx-serve-req"      /* where the sandbox sees them */
#define FIFO_REP "/tmp/.sbx-serve-rep"

/* Opens the two FIFOs as fds 3 and 4 (by way of 100 and 101: an open may
 * itself return 3 or 4) and becomes the runner: an exec of the interpreter
 * the policy allows, judged by the guard. */
static const char boot_py[] =
    "import os, sys\n"
    "a = os.open(sys.argv[1], os.O_RDONLY)\n"
    "b = os.open(sys.argv[2], os.O_WRONLY)\n"
    "r = os.dup2(a, 100)\n"
    "w = os.dup2(b, 101)\n"
    "os.close(a)\n"
    "os.close(b)\n"
    "os.dup2(r, 3)\n"
    "os.dup2(w, 4)\n"
    "os.close(r)\n"
    "os.close(w)\n"
    "os.execv(sys.argv[3], sys.argv[3:])\n";

struct setup_msg {              /* keeper -> spawner, once */
    char tag;                   /* 'S' */
    int ok;
    pid_t pid;
    char layers[256];
    char err[512];
};

/* Closes every descriptor >= 3 but the NKEEP in KEEP. */
static void close_except(const int *keep, size_t nkeep)
{
    for (int fd = 3; fd < 1024; fd++) {
        bool k = false;
        for (size_t i = 0; i < nkeep; i++)
            k = k || keep[i] == fd;
        if (!k)
            (void)close(fd);
    }
}

/* The agent's environment with the token left outside and the ring file
 * named (guard_env.c does the same for sbx-guard).  *TOKEN: a copy of the
 * token, or "" when the run is not registered. */
static char **keeper_env(char *const *envp, const char *ring, char *token, size_t tokensz)
{
    size_t n = 0, k = 0;
    const char *tk = SBX_ENV_AGENT_TOKEN "=";
    char **e;

    token[0] = '\0';
    while (envp[n])
        n++;
    if ((e = calloc(n + 2, sizeof *e)) == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(envp[i], tk, strlen(tk)) == 0) {
            strlcpy(token, envp[i] + strlen(tk), tokensz);
            e[k++] = (char *)SBX_ENV_AGENT_TOKEN "=relayed";
        } else {
            e[k++] = envp[i];
        }
    }
    if (token[0] && ring) {
        static char ring_var[4300];
        snprintf(ring_var, sizeof ring_var, "%s=%s", SBX_ENV_RING_FILE, ring);
        e[k++] = ring_var;
    }
    return e;
}

/* Moves what is pending from IN to OUT, at most once per call. */
struct relay {
    int in, out;
    char buf[65536];
    size_t len;
    bool eof;
};

static void relay_read(struct relay *r)
{
    ssize_t n = read(r->in, r->buf + r->len, sizeof r->buf - r->len);
    if (n > 0)
        r->len += (size_t)n;
    else if (n == 0 || (errno != EAGAIN && errno != EINTR))
        r->eof = true;
}

static void relay_write(struct relay *r)
{
    ssize_t n = write(r->out, r->buf, r->len);
    if (n > 0) {
        memmove(r->buf, r->buf + n, r->len - (size_t)n);
        r->len -= (size_t)n;
    } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        r->len = 0;             /* the reader is gone: nothing to deliver */
        r->eof = true;
    }
}

static int pidfd_of(pid_t pid)
{
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

static __attribute__((noreturn)) void keeper(const struct iso_request *req, const char *run_id,
                                            const char *dir, int st)
{
    struct setup_msg sm = { .tag = 'S' };
    char fin_path[4200], fout_path[4200], ring_path[4200], token[128];
    struct iso_child child;
    struct guard_ring *ring = NULL;
    int keep[4] = { st, req->child_fds[3], req->child_fds[4], -1 };
    int fin = -1, fout = -1, pfd = -1, status = 0;
    char **env = NULL;

    /* The spawner's end (sbx-serve stopping, or killed) ends the sandbox,
     * and this keeper still removes what it made: SIGTERM, taken in the
     * loop below. */
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigprocmask(SIG_BLOCK, &term, NULL);
    int sfd = signalfd(-1, &term, SFD_CLOEXEC | SFD_NONBLOCK);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() == 1)
        kill(getpid(), SIGTERM);    /* it ended before the prctl */
    /* Stdio of the sandbox: runsc passes 0, 1 and 2 through. */
    if (dup2(req->child_fds[0], 0) < 0 || dup2(req->child_fds[1], 1) < 0
        || dup2(req->child_fds[2], 2) < 0) {
        serve_errf(sm.err, sizeof sm.err, "gvisor keeper: dup2: %s", strerror(errno));
        goto fail;
    }
    /* Nothing of the spawner's: the server's ends of these pipes must see
     * end of file when the sandbox ends. */
    keep[3] = sfd;
    close_except(keep, 4);
    snprintf(fin_path, sizeof fin_path, "%s/req", dir);
    snprintf(fout_path, sizeof fout_path, "%s/rep", dir);
    snprintf(ring_path, sizeof ring_path, "%s/ring", dir);
    /* Both ends held here first: the sandbox's opens never wait, and what
     * the server wrote before the runner started stays in the FIFO. */
    if (mkfifo(fin_path, 0600) < 0 || mkfifo(fout_path, 0600) < 0
        || (fin = open(fin_path, O_RDWR | O_NONBLOCK | O_CLOEXEC)) < 0
        || (fout = open(fout_path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0) {
        serve_errf(sm.err, sizeof sm.err, "gvisor keeper: FIFOs in %s: %s", dir, strerror(errno));
        goto fail;
    }
    if ((env = keeper_env(req->envp, ring_path, token, sizeof token)) == NULL) {
        serve_errf(sm.err, sizeof sm.err, "gvisor keeper: out of memory");
        goto fail;
    }
    if (token[0] && run_id[0]) {
        char why[512];
        ring = guard_ring_open(req->runtime_dir, ring_path, run_id, token, why, sizeof why);
        explicit_bzero(token, sizeof token);
        if (ring == NULL) {
            serve_errf(sm.err, sizeof sm.err, "%s", why);
            goto fail;
        }
    }
    {
        size_t n = 0;
        while (req->argv[n])
            n++;
        char **argv = calloc(n + 8, sizeof *argv);
        if (argv == NULL) {
            serve_errf(sm.err, sizeof sm.err, "gvisor keeper: out of memory");
            goto fail;
        }
        size_t k = 0;
        argv[k++] = req->argv[0];
        argv[k++] = "-I";
        argv[k++] = "-B";
        argv[k++] = "-c";
        argv[k++] = (char *)boot_py;
        argv[k++] = FIFO_REQ;
        argv[k++] = FIFO_REP;
        for (size_t i = 0; i < n; i++)
            argv[k++] = req->argv[i];
        struct iso_bind binds[2] = { { fin_path, FIFO_REQ }, { fout_path, FIFO_REP } };
        struct iso_request r = *req;
        r.argv = argv;
        r.envp = env;
        r.child_fds = NULL;
        r.n_child_fds = 0;
        r.binds = binds;
        r.n_binds = 2;
        r.ring_file = ring ? ring_path : NULL;
        if (iso_spawn(&r, &child, sm.err, sizeof sm.err) < 0)
            goto fail;
        free(argv);
    }
    /* The sandbox has its stdio: ours goes, so its pipes end with it. */
    {
        int nul = open("/dev/null", O_RDWR);
        if (nul >= 0) {
            dup2(nul, 0);
            dup2(nul, 1);
            dup2(nul, 2);
            if (nul > 2)
                close(nul);
        }
    }
    pfd = pidfd_of(child.pid);
    sm.ok = 1;
    sm.pid = child.pid;
    strlcpy(sm.layers, child.layers, sizeof sm.layers);
    if (send(st, &sm, sizeof sm, MSG_NOSIGNAL) != (ssize_t)sizeof sm)
        kill(child.pid, SIGKILL);
    {
        struct relay to = { .in = req->child_fds[3], .out = fin };
        struct relay from = { .in = fout, .out = req->child_fds[4] };
        bool ended = false;
        /* The runner's request channel may take a 16 MiB line: the
         * server's pipe is read as the FIFO drains, never beyond. */
        while (!ended) {
            struct pollfd pf[5];
            int n = 0, i_in = -1, i_fifo_w = -1, i_fifo_r = -1, i_pid = -1, i_sig = -1;
            if (to.in >= 0 && !to.eof && to.len < sizeof to.buf)
                i_in = n, pf[n++] = (struct pollfd){ to.in, POLLIN, 0 };
            if (to.len)
                i_fifo_w = n, pf[n++] = (struct pollfd){ fin, POLLOUT, 0 };
            if (!from.eof)
                i_fifo_r = n, pf[n++] = (struct pollfd){ fout, POLLIN, 0 };
            if (pfd >= 0)
                i_pid = n, pf[n++] = (struct pollfd){ pfd, POLLIN, 0 };
            if (sfd >= 0)
                i_sig = n, pf[n++] = (struct pollfd){ sfd, POLLIN, 0 };
            int moved = ring ? guard_ring_pump(ring) : 0;
            int wait_ms = !ring ? 200 : moved > 0 ? 2 : 20;
            if (poll(pf, (nfds_t)n, wait_ms) < 0 && errno != EINTR)
                break;
            if (i_sig >= 0 && pf[i_sig].revents) {
                kill(child.pid, SIGKILL);   /* runsc: its sandbox and gofer go too */
                close(sfd);
                sfd = -1;
            }
            if (i_in >= 0 && pf[i_in].revents)
                relay_read(&to);
            if (i_fifo_w >= 0 && pf[i_fifo_w].revents)
                relay_write(&to);
            if (to.eof && to.len == 0 && fin >= 0) {
                close(fin);     /* the runner sees end of file */
                fin = -1;
            }
            if (i_fifo_r >= 0 && pf[i_fifo_r].revents) {
                relay_read(&from);
                while (from.len)
                    relay_write(&from);     /* the server reads it: blocking */
            }
            if (pfd < 0 ? waitpid(child.pid, &status, WNOHANG) == child.pid
                        : i_pid >= 0 && pf[i_pid].revents)
                ended = true;
        }
        if (pfd >= 0)
            while (waitpid(child.pid, &status, 0) < 0 && errno == EINTR)
                ;
        /* What the runner wrote last, then end of file for the server. */
        for (int i = 0; i < 64 && !from.eof; i++) {
            relay_read(&from);
            while (from.len)
                relay_write(&from);
        }
    }
    close(req->child_fds[4]);
    close(req->child_fds[3]);
    /* Every event the agent committed reaches sbx-auditd before the
     * status: the server writes the exit row on it. */
    if (ring) {
        struct timespec step = { 0, 2000000 };
        for (int i = 0; i < 1500; i++) {
            if (guard_ring_pump(ring) < 0 || !guard_ring_pending(ring))
                break;
            nanosleep(&step, NULL);
        }
        guard_ring_close(ring);
    }
    iso_child_cleanup(&child);
    /* The agent's own wait status (a signal, not runsc's 128+N), as
     * sbx-guard reports it. */
    status = iso_child_status(&child, status);
    unlink(fin_path);
    unlink(fout_path);
    rmdir(dir);
    {
        char w[1 + sizeof(int)] = { 'W' };
        memcpy(w + 1, &status, sizeof status);
        (void)send(st, w, sizeof w, MSG_NOSIGNAL);
    }
    _exit(0);
fail:
    guard_ring_close(ring);
    if (fin >= 0)
        close(fin);
    if (fout >= 0)
        close(fout);
    unlink(fin_path);
    unlink(fout_path);
    rmdir(dir);
    sm.ok = 0;
    (void)send(st, &sm, sizeof sm, MSG_NOSIGNAL);
    _exit(1);
}

int serve_gvisor_spawn(const struct iso_request *req, const char *run_id,
                       struct iso_child *child, char *err, size_t errsz)
{
    char dir[4200];
    int sp[2] = { -1, -1 };
    struct setup_msg sm;
    ssize_t n;

    memset(child, 0, sizeof *child);
    child->pid = -1;
    child->notify_fd = child->status_fd = -1;
    if (req->child_fds == NULL || req->n_child_fds != 5) {
        serve_errf(err, errsz, "gvisor: the runner's five descriptors are needed");
        return -1;
    }
    /* Private to us, in the runtime directory the sandbox cannot see: the
     * FIFOs, the ring and (iso_spawn's) the bundle. */
    if ((size_t)snprintf(dir, sizeof dir, "%s/serve-gvisor.XXXXXX",
                         req->runtime_dir ? req->runtime_dir : "/tmp") >= sizeof dir
        || mkdtemp(dir) == NULL) {
        serve_errf(err, errsz, "gvisor: a directory in %s: %s", req->runtime_dir,
                   strerror(errno));
        return -1;
    }
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
        serve_errf(err, errsz, "socketpair: %s", strerror(errno));
        rmdir(dir);
        return -1;
    }
    pid_t kp = fork();
    if (kp < 0) {
        serve_errf(err, errsz, "fork: %s", strerror(errno));
        close(sp[0]);
        close(sp[1]);
        rmdir(dir);
        return -1;
    }
    if (kp == 0) {
        close(sp[0]);
        keeper(req, run_id ? run_id : "", dir, sp[1]);
    }
    close(sp[1]);
    do
        n = recv(sp[0], &sm, sizeof sm, 0);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof sm || sm.tag != 'S' || !sm.ok) {
        if (n == (ssize_t)sizeof sm)
            sm.err[sizeof sm.err - 1] = '\0';
        serve_errf(err, errsz, "%s", n == (ssize_t)sizeof sm ? sm.err
                   : "gvisor: the keeper ended before the sandbox started");
        close(sp[0]);
        return -1;
    }
    sm.layers[sizeof sm.layers - 1] = '\0';
    /* runsc's pid: the keeper reaps it only once it has ended, and it
     * cannot end before gVisor has booted (a tenth of a second at least),
     * long after the caller has opened its pidfd. */
    child->pid = sm.pid;
    child->status_fd = sp[0];
    child->guard = strncmp(sm.layers, "guard,", 6) == 0;
    strlcpy(child->layers, sm.layers, sizeof child->layers);
    return 0;
}
