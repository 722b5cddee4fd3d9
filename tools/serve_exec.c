/*
 * serve_exec.c — one execution in a warm sandbox (serve_exec.h).
 */
#include "serve_exec.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bsd/string.h>

#include "ctl.h"
#include "serve_text.h"
#include "serve_zygote.h"

/* After the kill, how long the sandbox may take to go (its pipes to end).
 * The kernel tears a pid namespace down in milliseconds; this bounds a
 * request even if it does not. */
#define KILL_GRACE_MS 5000

/* Reads what is there; keeps up to the cap, drops the rest. */
static void drain(int fd, struct serve_stream *s)
{
    char scratch[65536];

    for (;;) {
        ssize_t n = read(fd, scratch, sizeof scratch);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            s->eof = true;
            return;
        }
        size_t room = SERVE_OUTPUT_CAP - s->len;
        size_t keep = (size_t)n < room ? (size_t)n : room;
        memcpy(s->buf + s->len, scratch, keep);
        s->len += keep;
        if ((size_t)n > keep)
            s->truncated = true;
        return;     /* one read per poll round: both streams get their turn */
    }
}

/* A command from sbx-auditd for this agent: a kill (hard or soft, both end
 * a request: a request has nothing to go on with). */
static void on_ctl(struct serve_box *box, struct serve_result *res)
{
    struct sbx_ctl_cmd cmd;
    int r;

    pthread_mutex_lock(&box->ctl_lock);
    r = sbx_ctl_recv_cmd(box->ctl, &cmd);
    if (r <= 0) {
        /* sbx-auditd is gone (SIGKILLed, say), and with it the reader of
         * the sandbox's event rings: nothing runs unrecorded, so the
         * sandbox ends here.  Its end, and the rows kept for it, are
         * recorded by the restarted daemon (serve_box_end_row). */
        sbx_ctl_close(box->ctl);
        box->ctl = -1;
        pthread_mutex_unlock(&box->ctl_lock);
        if (!res->killed && !res->timed_out) {
            (void)serve_box_kill(box);
            res->killed = true;
            snprintf(res->killed_by, sizeof res->killed_by, "stopped: sbx-auditd went away "
                     "during the run, so the sandbox was ended (nothing runs unrecorded)");
        }
        return;
    }
    cmd.by[sizeof cmd.by - 1] = cmd.reason[sizeof cmd.reason - 1] = '\0';
    (void)serve_box_kill(box);
    res->killed = true;
    snprintf(res->killed_by, sizeof res->killed_by, "killed by %s: %s", cmd.by,
             cmd.reason[0] ? cmd.reason : "(no reason given)");
    (void)sbx_ctl_cmd_done(box->ctl, cmd.req_id, 0, "killed the request's sandbox");
    pthread_mutex_unlock(&box->ctl_lock);
}

int serve_exec_run(struct serve_box *box, const char *line, size_t len, double timeout_s,
                   const struct iso_request *sup, struct serve_result *res,
                   char *err, size_t errsz)
{
    double start = serve_now_s(), deadline = start + timeout_s, hard_end = 0;
    bool have_status = false, status_gone = box->status < 0;
    int wstatus = 0;
    size_t off = 0;

    (void)sup;      /* the supervisor thread answers the listener (serve_sup.h) */
    res->out.len = res->err.len = 0;
    res->out.truncated = res->err.truncated = res->out.eof = res->err.eof = false;
    res->timed_out = res->killed = false;
    res->killed_by[0] = '\0';
    res->exit_code = 0;
    res->t_forked = start;
    res->t_status = 0;

    /* The runner reads one line and closes fd 3; a long line fills the pipe
     * and is written as the runner reads it. */
    while (off < len) {
        ssize_t n = write(box->req, line + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            serve_errf(err, errsz, "hand the code to the sandbox: %s", strerror(errno));
            return -1;
        }
        off += (size_t)n;
    }
    close(box->req);
    box->req = -1;

    while (!(res->out.eof && res->err.eof && (have_status || status_gone))) {
        struct pollfd pf[5];
        int n = 0, i_out = -1, i_err = -1, i_st = -1, i_ctl = -1;
        double now = serve_now_s();
        int wait_ms;

        if (!res->timed_out && !res->killed && now >= deadline) {
            (void)serve_box_kill(box);
            res->timed_out = true;
        }
        if ((res->timed_out || res->killed) && hard_end == 0)
            hard_end = now + KILL_GRACE_MS / 1000.0;
        if (hard_end && now >= hard_end) {
            serve_errf(err, errsz, "the sandbox did not end %d ms after its kill", KILL_GRACE_MS);
            return -1;
        }
        if (!res->out.eof) { i_out = n; pf[n++] = (struct pollfd){ box->out, POLLIN, 0 }; }
        if (!res->err.eof) { i_err = n; pf[n++] = (struct pollfd){ box->err, POLLIN, 0 }; }
        if (!have_status && !status_gone) {
            i_st = n;
            pf[n++] = (struct pollfd){ box->status, POLLIN, 0 };
        }
        if (box->ctl >= 0) { i_ctl = n; pf[n++] = (struct pollfd){ box->ctl, POLLIN, 0 }; }
        wait_ms = (int)(((hard_end ? hard_end : deadline) - now) * 1000.0) + 1;
        if (wait_ms < 1)
            wait_ms = 1;
        int r = poll(pf, (nfds_t)n, wait_ms);
        if (r < 0 && errno != EINTR) {
            serve_errf(err, errsz, "poll: %s", strerror(errno));
            return -1;
        }
        if (r <= 0)
            continue;
        if (i_out >= 0 && pf[i_out].revents)
            drain(box->out, &res->out);
        if (i_err >= 0 && pf[i_err].revents)
            drain(box->err, &res->err);
        if (i_st >= 0 && pf[i_st].revents) {
            char buf[1 + sizeof(int)];
            ssize_t k = recv(box->status, buf, sizeof buf, MSG_DONTWAIT);
            if (k == (ssize_t)sizeof buf && buf[0] == 'W') {
                memcpy(&wstatus, buf + 1, sizeof wstatus);
                have_status = true;
                res->t_status = serve_now_s();
            } else if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
                status_gone = true;     /* the init died without a word: killed */
            }
        }
        if (i_ctl >= 0 && pf[i_ctl].revents)
            on_ctl(box, res);
        if (box->ctl >= 0 && sbx_ctl_cmd_pending(box->ctl))
            on_ctl(box, res);
    }
    res->ms = (serve_now_s() - start) * 1000.0;
    bool own = have_status && !res->timed_out && !res->killed;
    if (own && WIFEXITED(wstatus))
        res->exit_code = WEXITSTATUS(wstatus);
    else if (own && WIFSIGNALED(wstatus))
        res->exit_code = -WTERMSIG(wstatus);
    else    /* the timeout, sbx-kill, or the init died without a word: SIGKILL */
        res->exit_code = -SIGKILL;
    return 0;
}
