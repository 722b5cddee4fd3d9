/*
 * control.c — control.sock: agent registration by sbx-guard, guard events,
 * exits, kills, sync (protocol in ctl.h).  Every request is answered; a
 * malformed one gets ERR and the connection keeps being served.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bsd/stdlib.h>
#include <bsd/string.h>

#include "daemon.h"

/* A hard kill the guard has not confirmed by then is carried out by the
 * daemon itself (a guard stopped by its agent never answers). */
#define GUARD_ANSWER_MS 2000
/* A guard seen stopped this long while a process of its agent runs is
 * treated as gone (the dead man's switch), and how often that is looked
 * at. */
#define GUARD_STOPPED_MS 5000
#define GUARD_LOOK_MS 500

static char inbuf[SBX_CTL_MAX + 1];
static struct sbx_msgbuf outbuf;

static void send_out(struct conn *c)
{
    if (outbuf.overflow) {
        sbx_msg_start(&outbuf, "ERR");
        sbx_msg_add(&outbuf, "msg", "reply too large");
    }
    if (send(c->fd, outbuf.buf, outbuf.len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
        daemon_log("control: reply to pid %d lost: %s", (int)c->pid, strerror(errno));
}

static void reply_err(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void reply_err(struct conn *c, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->noreply) {
        /* Nobody waits for the answer: the log is where it goes. */
        daemon_log("control.sock: pid %d: request refused: %s", (int)c->pid, msg);
        return;
    }
    sbx_msg_start(&outbuf, "ERR");
    sbx_msg_add(&outbuf, "msg", msg);
    send_out(c);
}

static void reply_ok(struct conn *c)
{
    if (c->noreply)
        return;
    sbx_msg_start(&outbuf, "OK");
    send_out(c);
}

/* "alice (uid 1000) pid 4242" */
static void who(const struct conn *c, char *out, size_t outsz)
{
    struct passwd pw, *res = NULL;
    char buf[1024];
    getpwuid_r(c->uid, &pw, buf, sizeof buf, &res);
    snprintf(out, outsz, "%s (uid %u) pid %d", res ? res->pw_name : "?", (unsigned)c->uid,
             (int)c->pid);
}

/* Appends a lifecycle row written by the daemon itself. */
static int append_life(struct daemon *d, enum sbx_op op, enum sbx_decision dec, struct agent *a,
                       pid_t pid, uid_t uid, const char *target, const char *target2,
                       const char *rule, const char *reason)
{
    struct sbx_event_desc ev = { .op = op, .decision = dec, .layer = SBX_LAYER_SBX,
                                 .target = target, .target2 = target2, .rule = rule,
                                 .reason = reason };
    size_t n = sbx_event_encode(&ev, sbx_now_ns(), d->scratch, sizeof d->scratch);
    struct sbx_event_view v;
    if (n == 0 || sbx_event_decode(d->scratch, n, &v) < 0)
        return -1;
    return batch_append_view(d, &v, a, pid, uid);
}

/* A row the daemon writes itself, held until it is stored: a lifecycle
 * row of an agent (LIFE: batch_hold_life) or another (batch_hold, which
 * bounds how many wait). */
static int hold_row(struct daemon *d, bool life, enum sbx_op op, enum sbx_decision dec,
                    struct agent *a, pid_t pid, uid_t uid, const char *target,
                    const char *target2, const char *rule, const char *reason)
{
    struct sbx_event_desc ev = { .op = op, .decision = dec, .layer = SBX_LAYER_SBX,
                                 .target = target, .target2 = target2, .rule = rule,
                                 .reason = reason };
    size_t n = sbx_event_encode(&ev, sbx_now_ns(), d->scratch, sizeof d->scratch);
    if (n == 0)
        return -1;
    return life ? batch_hold_life(d, d->scratch, n, a, pid, uid)
                : batch_hold(d, d->scratch, n, a, pid, uid);
}

static struct agent *running_agent(struct daemon *d, const char *name)
{
    for (struct agent *a = d->agents; a; a = a->next)
        if (!a->ended && a->guard && strcmp(a->name, name) == 0)
            return a;
    return NULL;
}

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64)
        return false;
    for (const char *p = s; *p; p++)
        if (*p <= ' ' || *p >= 127 || *p == '/')
            return false;
    return true;
}

static void random_hex(char *out, size_t nbytes)
{
    unsigned char b[64];
    arc4random_buf(b, nbytes);
    for (size_t i = 0; i < nbytes; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
}

static void do_register(struct daemon *d, struct conn *c, const struct sbx_msg *m)
{
    static const char *const keys[] = { "name", "policy_name", "policy_sha256", "policy_file",
                                        "workspace", "command", "layers", "guard_pid", NULL };
    char err[256];
    if (!sbx_msg_keys_ok(m, keys, err, sizeof err))
        return reply_err(c, "%s", err);
    if (c->agent)
        return reply_err(c, "this connection already registered agent '%s'", c->agent->name);
    const char *name = sbx_msg_get(m, "name");
    if (!name || !*name)
        return reply_err(c, "an agent needs a name");
    if (!name_ok(name))
        return reply_err(c, "bad agent name (1-64 printable characters, no spaces or '/')");
    if (running_agent(d, name))
        return reply_err(c, "an agent named '%s' is already running", name);
    const char *gp = sbx_msg_get(m, "guard_pid");
    const char *e = NULL;
    long long guard_pid = gp ? strtonum(gp, 0, 0x7fffffff, &e) : c->pid;
    if (e)
        return reply_err(c, "guard_pid: %s", e);

    struct agent *a = registry_agent_new(d, name);
    if (!a)
        return reply_err(c, "out of memory");
    random_hex(a->run_id, 6);
    random_hex(a->token, 32);
    a->uid = c->uid;
    a->guard_pid = (pid_t)guard_pid;

    rings_drain(d, 0, false);
    const char *pname = sbx_msg_get(m, "policy_name"), *psha = sbx_msg_get(m, "policy_sha256");
    const char *layers = sbx_msg_get(m, "layers"), *cmd = sbx_msg_get(m, "command");
    const char *ws = sbx_msg_get(m, "workspace");
    struct audit_agent row = {
        .name = a->name, .run_id = a->run_id, .policy_name = pname, .policy_sha256 = psha,
        .policy_file = sbx_msg_get(m, "policy_file"), .workspace = ws, .command = cmd,
        .layers = layers, .uid = c->uid, .guard_pid = guard_pid,
        .started_ns = (int64_t)sbx_now_ns(),
    };
    char reason[512];
    snprintf(reason, sizeof reason, "policy %s sha256 %s; layers %s", pname ? pname : "-",
             psha ? psha : "-", layers ? layers : "-");
    if (audit_store_agent_start(d->store, &row, &a->ref) < 0 ||
        append_life(d, SBX_OP_START, SBX_ALLOW, a, a->guard_pid, c->uid, cmd, ws, pname,
                    reason) < 0 ||
        batch_commit(d, true) < 0) {
        batch_failed(d);
        registry_agent_discard(a);
        return reply_err(c, "audit store: cannot record the start: %s",
                         audit_store_errmsg(d->store));
    }
    registry_agent_add(d, a, c);
    /* Not logged: the store has it (`sbx-audit agents`), and a line per
     * agent start and end grew the log with every commit of a busy host. */
    sbx_msg_start(&outbuf, "OK");
    sbx_msg_add(&outbuf, "run_id", a->run_id);
    sbx_msg_add(&outbuf, "token", a->token);
    send_out(c);
}

/* RESUME: sbx-guard's agent outlived the daemon that registered it (that
 * one was killed).  The run is taken back with its run id and token, so
 * that its rings are accepted again and its end is recorded; the store
 * must know the run, of this agent and user, as not ended. */
static void do_resume(struct daemon *d, struct conn *c, const struct sbx_msg *m)
{
    static const char *const keys[] = { "name", "run_id", "token", "guard_pid", NULL };
    char err[256];
    if (!sbx_msg_keys_ok(m, keys, err, sizeof err))
        return reply_err(c, "%s", err);
    if (c->agent)
        return reply_err(c, "this connection already registered agent '%s'", c->agent->name);
    const char *name = sbx_msg_get(m, "name"), *run_id = sbx_msg_get(m, "run_id");
    const char *token = sbx_msg_get(m, "token"), *gp = sbx_msg_get(m, "guard_pid");
    const char *e = NULL;
    long long guard_pid = gp ? strtonum(gp, 0, 0x7fffffff, &e) : c->pid;
    if (!name || !name_ok(name) || !run_id || !token || e)
        return reply_err(c, "RESUME needs name, run_id, token");
    struct agent probe;
    if (strlen(run_id) >= sizeof probe.run_id || strlen(token) < 32 ||
        strlen(token) >= sizeof probe.token)
        return reply_err(c, "bad run_id or token");
    if (running_agent(d, name))
        return reply_err(c, "an agent named '%s' is already running", name);
    for (struct agent *a = d->agents; a; a = a->next)
        if (strcmp(a->run_id, run_id) == 0)
            return reply_err(c, "run %s is known already", run_id);
    rings_drain(d, 0, false);
    if (batch_commit(d, true) < 0)
        return reply_err(c, "audit store: %s", audit_store_errmsg(d->store));
    int64_t ref = 0;
    if (audit_store_agent_resumable(d->store, run_id, name, c->uid, &ref, err, sizeof err) < 0)
        return reply_err(c, "cannot resume: %s", err);
    struct agent *a = registry_agent_new(d, name);
    if (!a)
        return reply_err(c, "out of memory");
    strlcpy(a->run_id, run_id, sizeof a->run_id);
    strlcpy(a->token, token, sizeof a->token);
    a->ref = ref;
    a->uid = c->uid;
    a->guard_pid = (pid_t)guard_pid;
    a->resumed = true;
    registry_agent_add(d, a, c);
    daemon_log("agent %s resumed after a daemon restart: run %s, guard pid %d", a->name,
               a->run_id, (int)guard_pid);
    rings_parked_resumed(d, a);
    rings_feed_keeper(d);
    reply_ok(c);
}

/* KEEP: sbx-guard's second connection, where the daemon sends a copy of
 * each ring of its agent (rings_feed_keeper) and where, after a restart,
 * the guard hands them back (ADOPT).  Only the agent's guard: the process
 * whose connection registered or resumed the run, with its token. */
static void do_keep(struct daemon *d, struct conn *c, const struct sbx_msg *m)
{
    static const char *const keys[] = { "run_id", "token", "since", NULL };
    char err[256];
    if (!sbx_msg_keys_ok(m, keys, err, sizeof err))
        return reply_err(c, "%s", err);
    const char *run_id = sbx_msg_get(m, "run_id"), *token = sbx_msg_get(m, "token");
    const char *sv = sbx_msg_get(m, "since"), *e = NULL;
    long long since = sv ? strtonum(sv, 1, LLONG_MAX, &e) : 0;
    if (e)
        return reply_err(c, "since: %s", e);
    if (c->agent || c->keeps)
        return reply_err(c, "KEEP needs a connection of its own");
    struct agent *a = run_id && token ? registry_agent_by_token(d, run_id, token) : NULL;
    if (!a)
        return reply_err(c, "KEEP: unknown run or wrong token");
    if (!a->guard || a->guard->closing || a->guard->pid != c->pid)
        return reply_err(c, "KEEP is for the agent's sbx-guard (pid %d)",
                         a->guard ? (int)a->guard->pid : 0);
    if (a->keeper && !a->keeper->closing)
        return reply_err(c, "the agent's rings are kept already");
    a->keeper = c;
    c->keeps = a;
    /* A resumed run started before this daemon: its guard says when (the
     * same word the rings it hands over carry), for the supervisor rows it
     * sends again. */
    if (a->resumed && since > 0 && (uint64_t)since < a->since_ns)
        a->since_ns = (uint64_t)since;
    reply_ok(c);
    rings_feed_keeper(d);
}

/* ADOPT pid since + SCM_RIGHTS {memfd[, pidfd]}, on a KEEP connection
 * after a restart: a ring the first daemon read, which its process may not
 * be able to hand in itself (it was SIGKILLed meanwhile).  Checked as
 * hostile input (rings_adopt); a refusal is logged and answered, and the
 * guard's other rings are taken all the same. */
static void do_adopt(struct daemon *d, struct conn *c, const struct sbx_msg *m, const int *fds,
                     int nfds)
{
    static const char *const keys[] = { "pid", "since", NULL };
    char err[256];
    if (!sbx_msg_keys_ok(m, keys, err, sizeof err))
        return reply_err(c, "%s", err);
    struct agent *a = c->keeps;
    if (!a || a->ended)
        return reply_err(c, "ADOPT needs a KEEP connection of a running agent");
    const char *p = sbx_msg_get(m, "pid"), *s = sbx_msg_get(m, "since"), *e = NULL;
    long long pid = p ? strtonum(p, 1, 0x7fffffff, &e) : 0;
    long long since = !e && s ? strtonum(s, 0, LLONG_MAX, &e) : 0;
    if (!p || e || nfds < 1 || nfds > 2)
        return reply_err(c, "ADOPT needs pid, since and the ring's memfd (and its pidfd)");
    int rc = rings_adopt(d, a, fds[0], nfds == 2 ? fds[1] : -1, (pid_t)pid, c->uid,
                         (uint64_t)since, err, sizeof err);
    if (rc < 0) {
        daemon_log_limited(&d->agent_log, "agent %s: REFUSED a ring handed over by its guard "
                           "(pid %lld): %s", a->name, pid, err);
        return reply_err(c, "ring of pid %lld refused: %s", pid, err);
    }
    if (rc > 0)
        daemon_log_limited(&d->agent_log, "agent %s: took over the ring of pid %lld from its "
                           "guard", a->name, pid);
    sbx_msg_start(&outbuf, "OK");
    sbx_msg_add(&outbuf, "held", rc > 0 ? "new" : "already");
    send_out(c);
}

static bool lifecycle(enum sbx_op op)
{
    return op == SBX_OP_START || op == SBX_OP_EXIT || op == SBX_OP_KILL ||
           op == SBX_OP_POLICY_ERROR;
}

static void do_event_msg(struct daemon *d, struct conn *c, const struct sbx_msg *m);

/* EVENT with noreply=1 (sbx_ctl_event_async: the supervisor's records) gets
 * no answer, an error included: that goes to the log. */
static void do_event(struct daemon *d, struct conn *c, const struct sbx_msg *m)
{
    const char *nr = sbx_msg_get(m, "noreply");
    c->noreply = nr && strcmp(nr, "1") == 0;
    do_event_msg(d, c, m);
    c->noreply = false;
}

static void do_event_msg(struct daemon *d, struct conn *c, const struct sbx_msg *m)
{
    static const char *const keys[] = { "op", "decision", "layer", "flags", "err", "target",
                                        "target2", "rule", "reason", "pid", "noreply", "seq",
                                        "ts", NULL };
    char err[256];
    if (!sbx_msg_keys_ok(m, keys, err, sizeof err))
        return reply_err(c, "%s", err);
    if (!c->agent)
        return reply_err(c, "EVENT needs a registered agent on this connection");
    const char *op = sbx_msg_get(m, "op"), *dec = sbx_msg_get(m, "decision");
    const char *layer = sbx_msg_get(m, "layer"), *v;
    int opn = op ? sbx_op_parse(op) : -1;
    int ln = layer ? sbx_layer_parse(layer) : SBX_LAYER_SBX;
    if (opn < 0)
        return reply_err(c, "bad or missing op");
    if (!dec || (strcmp(dec, "allow") != 0 && strcmp(dec, "deny") != 0))
        return reply_err(c, "decision must be allow or deny");
    if (ln < 0)
        return reply_err(c, "bad layer");
    struct sbx_event_desc ev = {
        .op = (enum sbx_op)opn, .decision = strcmp(dec, "deny") == 0 ? SBX_DENY : SBX_ALLOW,
        .layer = (enum sbx_layer)ln, .target = sbx_msg_get(m, "target"),
        .target2 = sbx_msg_get(m, "target2"), .rule = sbx_msg_get(m, "rule"),
        .reason = sbx_msg_get(m, "reason"),
    };
    const char *e = NULL;
    long long pid = c->pid, seq = 0, ts = 0;
    if ((v = sbx_msg_get(m, "flags")))
        ev.flags = (uint32_t)strtonum(v, 0, 0xffffffffLL, &e);
    if (!e && (v = sbx_msg_get(m, "err")))
        ev.err = (int)strtonum(v, -4096, 4096, &e);
    if (!e && (v = sbx_msg_get(m, "pid")))
        pid = strtonum(v, 1, 0x7fffffff, &e);
    if (!e && (v = sbx_msg_get(m, "seq")))
        seq = strtonum(v, 1, LLONG_MAX, &e);
    if (!e && (v = sbx_msg_get(m, "ts")))
        ts = strtonum(v, 1, LLONG_MAX, &e);
    if (e)
        return reply_err(c, "bad number: %s", e);
    /* A start or an exit comes after what the agent's rings already hold.
     * Taken before this row is encoded: draining decodes the rings' rows
     * in d->scratch, which is where this row is about to be. */
    if (ev.op == SBX_OP_EXIT || ev.op == SBX_OP_START) {
        rings_catch_up(d);
        rings_drain(d, 0, false);
    }
    /* Through the record encoding, so that long strings are cut exactly as
     * the rings cut them.  The daemon's clock is the row's time; the
     * guard's own (a row sent again after a restart, tools/guard_sup.h)
     * only if it lies between the run's start and now, as for a ring's
     * records. */
    uint64_t now = sbx_now_ns();
    uint64_t at = ts > 0 && (uint64_t)ts >= c->agent->since_ns && (uint64_t)ts <= now
                  ? (uint64_t)ts : now;
    size_t n = sbx_event_encode(&ev, at, d->scratch, sizeof d->scratch);
    struct sbx_event_view view;
    if (n == 0 || sbx_event_decode(d->scratch, n, &view) < 0)
        return reply_err(c, "event does not encode");
    if (!lifecycle(ev.op)) {
        /* What a supervisor saw (an exec, a connect): into the open batch,
         * committed with the rings' rows rather than one commit per exec,
         * and held until then so that a failed batch loses none of them. */
        if (batch_hold(d, d->scratch, n, c->agent, pid, c->uid) < 0)
            return reply_err(c, "audit store: too many rows wait for a failed store");
        if ((uint64_t)seq > c->agent->sup_held)
            c->agent->sup_held = (uint64_t)seq;
        return reply_ok(c);
    }
    /* Held too: refused now, it is still recorded once the store takes
     * writes again. */
    if (batch_hold_life(d, d->scratch, n, c->agent, pid, c->uid) < 0)
        return reply_err(c, "out of memory");
    if (batch_commit(d, true) < 0)
        return reply_err(c, "audit store: %s", audit_store_errmsg(d->store));
    reply_ok(c);
}

static void end_agent(struct daemon *d, struct agent *a, int status, const char *detail,
                      pid_t pid, uid_t uid)
{
    char reason[64];
    snprintf(reason, sizeof reason, "exit status %d", status);
    rings_catch_up(d);
    rings_drain(d, 0, false);
    /* Held until stored: a full disk delays the record of an end, it does
     * not lose it (nor leave the agent "running" in the store). */
    if (hold_row(d, true, SBX_OP_EXIT, SBX_ALLOW, a, pid, uid, detail, NULL, NULL, reason) < 0 ||
        batch_hold_agent_end(d, a, (int64_t)sbx_now_ns(), status, detail) < 0)
        daemon_log("agent %s: OUT OF MEMORY: its end is not recorded", a->name);
    if (batch_commit(d, true) < 0)
        daemon_log("agent %s: its end is held until the audit store takes it: %s", a->name,
                   audit_store_errmsg(d->store));
    a->ended = true;
    /* (not logged: see the registration) */
}

static void do_exit(struct daemon *d, struct conn *c, const struct sbx_msg *m)
{
    static const char *const keys[] = { "status", "detail", NULL };
    char err[256];
    if (!sbx_msg_keys_ok(m, keys, err, sizeof err))
        return reply_err(c, "%s", err);
    if (!c->agent || c->agent->ended)
        return reply_err(c, "EXIT needs a running agent registered on this connection");
    const char *s = sbx_msg_get(m, "status"), *e = NULL;
    int status = s ? (int)strtonum(s, -1, 255, &e) : -1;
    if (!s || e)
        return reply_err(c, "bad or missing status");
    const char *detail = sbx_msg_get(m, "detail");
    end_agent(d, c->agent, status, detail && *detail ? detail : "exited", c->pid, c->uid);
    reply_ok(c);
}

/* ---- kills --------------------------------------------------------------- */

static void kill_finish(struct killreq *kr)
{
    if (kr->from) {
        if (kr->failed)
            reply_err(kr->from, "%s", kr->result);
        else {
            sbx_msg_start(&outbuf, "OK");
            sbx_msg_add(&outbuf, "result", kr->result);
            send_out(kr->from);
        }
    }
    registry_kill_end(kr);
}

static void kill_note(struct killreq *kr, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void kill_note(struct killreq *kr, const char *fmt, ...)
{
    size_t len = strlen(kr->result);
    if (len && len + 2 < sizeof kr->result) {
        strlcat(kr->result, "; ", sizeof kr->result);
        len += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(kr->result + len, sizeof kr->result - len, fmt, ap);
    va_end(ap);
}

static void send_cmd(struct agent *a, const char *kind, uint64_t req)
{
    sbx_msg_start(&outbuf, "CMD");
    sbx_msg_add(&outbuf, "kind", kind);
    sbx_msg_add(&outbuf, "by", a->cmd_by);
    sbx_msg_add(&outbuf, "reason", a->cmd_reason);
    sbx_msg_addf(&outbuf, "req", "%llu", (unsigned long long)req);
    if (a->guard)
        send_out(a->guard);
}

/* A hard kill of A is over (confirmed, failed, timed out, guard gone). */
static void kill_target_done(struct agent *a, bool ok, const char *detail)
{
    struct killreq *kr = a->kill;
    a->kill = NULL;
    if (ok)
        kill_note(kr, "killed %s%s%s%s", a->name, detail && *detail ? " (" : "",
                  detail && *detail ? detail : "", detail && *detail ? ")" : "");
    else {
        kill_note(kr, "%s: %s", a->name, detail);
        kr->failed = true;
    }
    if (--kr->outstanding == 0)
        kill_finish(kr);
}

static void do_kill(struct daemon *d, struct conn *c, const struct sbx_msg *m)
{
    static const char *const keys[] = { "name", "all", "soft", "reason", NULL };
    char err[256];
    if (!sbx_msg_keys_ok(m, keys, err, sizeof err))
        return reply_err(c, "%s", err);
    if (c->kill)
        return reply_err(c, "a kill is already in progress on this connection");
    const char *name = sbx_msg_get(m, "name"), *all = sbx_msg_get(m, "all");
    const char *soft_s = sbx_msg_get(m, "soft"), *reason = sbx_msg_get(m, "reason");
    bool to_all = all && strcmp(all, "1") == 0;
    if ((!name || !*name) == !to_all)
        return reply_err(c, "KILL needs a name or all=1");
    bool soft = soft_s && strcmp(soft_s, "1") == 0;
    if (!reason || !*reason)
        reason = "(no reason given)";
    struct agent *targets[256];
    int nt = 0;
    for (struct agent *a = d->agents; a && nt < 256; a = a->next)
        if (!a->ended && a->guard && (to_all || strcmp(a->name, name) == 0))
            targets[nt++] = a;
    if (nt == 0)
        return to_all ? reply_err(c, "no running agents")
                      : reply_err(c, "no running agent named '%s'", name);
    for (int i = 0; i < nt; i++)
        if (targets[i]->kill)
            return reply_err(c, "a kill of '%s' is already in progress", targets[i]->name);

    char by[200];
    who(c, by, sizeof by);
    /* The record comes first and is durable before anyone is told. */
    rings_catch_up(d);
    rings_drain(d, 0, false);
    bool recorded = true;
    for (int i = 0; i < nt; i++) {
        char why[512];
        snprintf(why, sizeof why, "by %s: %s", by, reason);
        if (hold_row(d, true, SBX_OP_KILL, SBX_DENY, targets[i], c->pid, c->uid, targets[i]->name,
                     NULL, soft ? "sbx-kill --soft" : "sbx-kill", why) < 0 ||
            batch_hold_agent_killed(d, targets[i], by, reason) < 0)
            recorded = false;
    }
    if (!recorded || batch_commit(d, true) < 0) {
        /* Stopping the agent matters more than the record of it: go on,
         * and say so.  The rows are held: stored when the store takes
         * them again. */
        daemon_log("KILL NOT RECORDED YET (%s); carrying it out anyway",
                   recorded ? audit_store_errmsg(d->store) : "out of memory");
        recorded = false;
    }
    daemon_log("kill%s requested by %s for %s%s: %s", soft ? " (soft)" : "", by,
               to_all ? "all agents" : name, recorded ? "" : " [not recorded]", reason);
    struct killreq *kr = registry_kill_new(d, c);
    if (!kr)
        return reply_err(c, "out of memory");
    kr->deadline_ms = daemon_now_ms() + GUARD_ANSWER_MS;
    for (int i = 0; i < nt; i++) {
        struct agent *a = targets[i];
        strlcpy(a->cmd_by, by, sizeof a->cmd_by);
        strlcpy(a->cmd_reason, reason, sizeof a->cmd_reason);
        if (soft) {
            a->soft_killed = true;
            rings_set_killed(d, a);
            send_cmd(a, "soft", ++d->next_req);
            kill_note(kr, "soft-killed %s", a->name);
        } else {
            a->kill = kr;
            a->cmd_req = ++d->next_req;
            a->cmd_sent_ms = daemon_now_ms();
            kr->outstanding++;
            send_cmd(a, "hard", a->cmd_req);
        }
    }
    if (!recorded)
        kill_note(kr, "WARNING: the audit store could not record the kill yet (it is held, and "
                  "recorded when the store takes writes again)");
    if (kr->outstanding == 0)
        kill_finish(kr);
}

static void do_done(struct conn *c, const struct sbx_msg *m)
{
    const char *req = sbx_msg_get(m, "req"), *res = sbx_msg_get(m, "result");
    const char *detail = sbx_msg_get(m, "detail");
    struct agent *a = c->agent;
    if (!a || !a->kill || !req || strtoull(req, NULL, 10) != a->cmd_req)
        return;     /* a late or repeated confirmation: nothing waits for it */
    bool ok = res && strcmp(res, "0") == 0;
    kill_target_done(a, ok, ok ? detail : (detail && *detail ? detail : "the guard failed"));
}

/* The dead man's switch: the guard of A is gone or does not answer, so the
 * daemon kills every process it knows for A (their registered rings),
 * records that it did and whom, and continues the guard (a guard stopped by
 * its agent then sees its agent's end and reports it).  Returns how many
 * processes were signalled; NOTE gets what happened, for a kill's answer. */
static int dead_mans_switch(struct daemon *d, struct agent *a, const char *why,
                            pid_t guard_pid, uid_t uid, int guard_pidfd,
                            char *note, size_t note_size)
{
    char pids[512], reason[1024];
    /* Registrations already sent are taken first: their processes are
     * known; one that registers later is killed at registration. */
    rings_catch_up(d);
    a->deadman = true;
    int n = rings_kill_agent(d, a, pids, sizeof pids);
    if (guard_pidfd >= 0)
        (void)syscall(SYS_pidfd_send_signal, guard_pidfd, SIGCONT, NULL, 0);
    if (n > 0)
        snprintf(reason, sizeof reason, "%s: sbx-auditd killed its %d registered process%s "
                 "(pid %s)", why, n, n == 1 ? "" : "es", pids);
    else
        snprintf(reason, sizeof reason, "%s: sbx-auditd knows no live process of it (a "
                 "process that never registered an event ring cannot be known)", why);
    daemon_log("agent %s: %s", a->name, reason);
    snprintf(note, note_size, "%s", reason);
    if (n > 0) {
        rings_catch_up(d);
        rings_drain(d, 0, false);
        if (hold_row(d, true, SBX_OP_KILL, SBX_DENY, a, guard_pid, uid, a->name, NULL,
                     "sbx-auditd: dead man's switch", reason) < 0 ||
            batch_hold_agent_killed(d, a, "sbx-auditd", reason) < 0)
            daemon_log("agent %s: OUT OF MEMORY: its kill is not recorded", a->name);
        if (batch_commit(d, true) < 0)
            daemon_log("agent %s: its kill is held until the audit store takes it: %s",
                       a->name, audit_store_errmsg(d->store));
    }
    return n;
}

/* The state letter of /proc/PID/stat ('R', 'S', 'T' stopped, 't' traced,
 * 'Z'...), or 0 when PID is gone or PIDFD says it exited (the number may
 * have been reused). */
static char proc_state(pid_t pid, int pidfd)
{
    char p[64], buf[512];
    ssize_t n;
    int fd;

    snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
    if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
        return 0;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* "pid (comm) S ...": comm may hold anything, even ") " */
    char *rp = strrchr(buf, ')');
    if (rp == NULL || rp[1] != ' ' || rp[2] == '\0')
        return 0;
    if (pidfd >= 0) {
        struct pollfd pf = { pidfd, POLLIN, 0 };
        if (poll(&pf, 1, 0) != 0)
            return 0;           /* exited: the letter may be another's */
    }
    return rp[2];
}

/* Does a registered process of A run (neither stopped nor gone)? */
static bool agent_runs(const struct daemon *d, const struct agent *a)
{
    for (const struct ring *r = d->rings; r; r = r->next) {
        if (r->agent != a || r->dead || r->pid <= 0)
            continue;
        char st = proc_state(r->pid, r->pidfd);
        if (st && st != 'T' && st != 't' && st != 'Z' && st != 'X')
            return true;
    }
    return false;
}

/* A guard that is stopped (kill -STOP $PPID: possible under none) answers
 * no kill and, under native, no supervised call; the agent's processes
 * that do not need it run on.  A guard seen stopped ('T') for
 * GUARD_STOPPED_MS while a registered process of its agent runs is taken
 * as gone.  ^Z is not: job control stops the agent's whole process group
 * (and a guard stopped with its agent leaves nothing running unguarded);
 * nor is a guard under a debugger ('t'). */
static void look_at_stopped_guards(struct daemon *d, uint64_t now)
{
    static uint64_t last;

    if (now - last < GUARD_LOOK_MS)
        return;
    last = now;
    for (struct agent *a = d->agents; a; a = a->next) {
        struct conn *g = a->guard;
        if (!g || g->closing || a->ended || a->deadman || a->kill || g->pid <= 0) {
            a->guard_stopped_ms = 0;
            continue;
        }
        if (proc_state(g->pid, g->pidfd) != 'T' || !agent_runs(d, a)) {
            a->guard_stopped_ms = 0;
            continue;
        }
        if (a->guard_stopped_ms == 0) {
            a->guard_stopped_ms = now;
            continue;
        }
        if (now - a->guard_stopped_ms < GUARD_STOPPED_MS)
            continue;
        char note[1024];
        a->guard_stopped_ms = 0;
        (void)dead_mans_switch(d, a, "its guard was stopped (SIGSTOP) while its agent ran",
                               g->pid, g->uid, g->pidfd, note, sizeof note);
    }
}

bool ctl_watching(const struct daemon *d)
{
    for (const struct agent *a = d->agents; a; a = a->next)
        if (a->guard && !a->ended && !a->deadman)
            return true;
    return false;
}

/* ACK seq=N to each keeper whose supervisor rows up to N are stored and
 * not yet acknowledged.  Without waiting: a full socket gets it later. */
static void send_acks(struct daemon *d)
{
    for (struct agent *a = d->agents; a; a = a->next) {
        struct conn *k = a->keeper;
        if (!k || k->closing || a->sup_acked >= a->sup_stored)
            continue;
        char msg[64];
        int len = snprintf(msg, sizeof msg, "ACK\nseq=%llu\n",
                           (unsigned long long)a->sup_stored);
        if (send(k->fd, msg, (size_t)len, MSG_DONTWAIT | MSG_NOSIGNAL) == len)
            a->sup_acked = a->sup_stored;
    }
}

void ctl_rows_stored(struct daemon *d)
{
    for (struct agent *a = d->agents; a; a = a->next)
        a->sup_stored = a->sup_held;
    send_acks(d);
}

void ctl_tick(struct daemon *d)
{
    uint64_t now = daemon_now_ms();
    /* Rings a keeper could not take at once (its socket was full), and
     * acknowledgements likewise. */
    rings_feed_keeper(d);
    send_acks(d);
    rings_parked_expire(d);
    look_at_stopped_guards(d, now);
    for (struct agent *a = d->agents, *next; a; a = next) {
        next = a->next;
        if (!a->kill || now < a->cmd_sent_ms + GUARD_ANSWER_MS)
            continue;
        char note[1024];
        struct conn *g = a->guard;
        int n = dead_mans_switch(d, a, "its guard did not answer the kill within 2 s",
                                 g ? g->pid : a->guard_pid, g ? g->uid : a->uid,
                                 g ? g->pidfd : -1, note, sizeof note);
        kill_target_done(a, n > 0, note);
    }
}

static void do_sync(struct daemon *d, struct conn *c)
{
    rings_catch_up(d);
    for (int i = 0; i < 1000 && rings_drain(d, 0, false) > 0; i++)
        if (batch_commit(d, false) < 0)
            break;
    if (batch_commit(d, false) < 0)
        return reply_err(c, "audit store: %s", audit_store_errmsg(d->store));
    sbx_msg_start(&outbuf, "OK");
    sbx_msg_addf(&outbuf, "last_id", "%lld", (long long)audit_store_last_id(d->store));
    send_out(c);
}

/* ---- connections --------------------------------------------------------- */

/* The peer hung up: a guard's agent ends with it (and a hard kill of it is
 * over: its guard is gone), then the registry ends the connection. */
static void conn_close(struct daemon *d, struct conn *c)
{
    struct agent *a = c->agent;
    if (a && a->guard == c) {
        int n = 0;
        char note[1024] = "";
        if (!a->ended) {
            /* A guard that ends without reporting its agent's end died (its
             * agent may have killed it): what remains of the agent runs
             * unguarded, so the daemon ends it. */
            n = dead_mans_switch(d, a, "its guard died (control connection lost)", c->pid,
                                 c->uid, -1, note, sizeof note);
            end_agent(d, a, -1, "guard connection lost", c->pid, c->uid);
        }
        if (a->kill)
            kill_target_done(a, true, n > 0 ? note : "its guard exited");
    }
    registry_conn_drop(d, c);
}

void ctl_accept(struct daemon *d)
{
    for (;;) {
        int fd = daemon_accept(d, d->ctl_listen, "control.sock", NULL);
        if (fd < 0)
            return;
        struct ucred cr;
        socklen_t len = sizeof cr;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 ||
            (cr.uid != d->uid && cr.uid != 0)) {
            char why[160];
            snprintf(why, sizeof why, "refused a control connection from uid %u pid %d",
                     (unsigned)cr.uid, (int)cr.pid);
            daemon_log("%s", why);
            /* Tell the client why before hanging up, so that it does not
             * report "not running" (best effort: never blocks). */
            static struct sbx_msgbuf refusal;
            sbx_msg_start(&refusal, "ERR");
            sbx_msg_addf(&refusal, "msg", "sbx-auditd refuses you: it serves uid %u and root, "
                         "you are uid %u", (unsigned)d->uid, (unsigned)cr.uid);
            (void)send(fd, refusal.buf, refusal.len, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (hold_row(d, false, SBX_OP_KILL, SBX_DENY, NULL, cr.pid, cr.uid, "control.sock",
                         NULL, "control.sock: same uid or root", why) == 0)
                batch_commit(d, true);
            close(fd);
            continue;
        }
        if (!registry_conn_new(d, fd, cr.uid, cr.pid))
            close(fd);
    }
}

/* One message of N bytes in inbuf (FLAGS: recvmsg's), with the descriptors
 * FDS it carried (closed by the caller). */
static void conn_message(struct daemon *d, struct conn *c, ssize_t n, int flags, const int *fds,
                         int nfds)
{
    if (n <= 0)
        return conn_close(d, c);
    if (flags & MSG_TRUNC)
        return reply_err(c, "message larger than %d bytes", SBX_CTL_MAX);
    if (flags & MSG_CTRUNC)
        return reply_err(c, "too many descriptors with the message");
    struct sbx_msg m;
    char err[256];
    if (sbx_msg_parse(inbuf, (size_t)n, &m, err, sizeof err) < 0)
        return reply_err(c, "malformed message: %s", err);
    if (strcmp(m.verb, "ADOPT") == 0)
        return do_adopt(d, c, &m, fds, nfds);
    if (nfds)
        return reply_err(c, "descriptors come only with ADOPT");
    if (c->keeps && strcmp(m.verb, "KEEP") != 0)
        return reply_err(c, "a KEEP connection takes ADOPT only");
    if (strcmp(m.verb, "REGISTER") == 0)
        do_register(d, c, &m);
    else if (strcmp(m.verb, "EVENT") == 0)
        do_event(d, c, &m);
    else if (strcmp(m.verb, "RESUME") == 0)
        do_resume(d, c, &m);
    else if (strcmp(m.verb, "KEEP") == 0)
        do_keep(d, c, &m);
    else if (strcmp(m.verb, "EXIT") == 0)
        do_exit(d, c, &m);
    else if (strcmp(m.verb, "DONE") == 0)
        do_done(c, &m);
    else if (strcmp(m.verb, "KILL") == 0)
        do_kill(d, c, &m);
    else if (strcmp(m.verb, "SYNC") == 0)
        do_sync(d, c);
    else
        reply_err(c, "unknown request '%s'", m.verb);
}

void conn_on_event(struct daemon *d, struct conn *c, uint32_t events)
{
    if (c->closing)
        return;
    if (events & EPOLLIN) {
        /* Descriptors come only with ADOPT; any others are closed. */
        union {
            char buf[CMSG_SPACE(4 * sizeof(int))];
            struct cmsghdr align;
        } ctl;
        struct iovec iov = { .iov_base = inbuf, .iov_len = SBX_CTL_MAX };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
                             .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf };
        ssize_t n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        int fds[4], nfds = 0;
        if (n >= 0)
            for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
                if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
                    int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                    for (int i = 0; i < k && nfds < 4; i++)
                        memcpy(&fds[nfds++], CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
                }
        conn_message(d, c, n, mh.msg_flags, fds, nfds);
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        return;
    }
    if (events & (EPOLLHUP | EPOLLRDHUP | EPOLLERR))
        conn_close(d, c);
}
