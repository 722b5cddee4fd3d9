/*
 * serve_http.c — the endpoints (serve_http.h).
 *
 * A POST /execute, in order: the body is read (at most SERVE_MAX_BODY:
 * 413), parsed and checked (422), the code must not be blank (400), the
 * validator checks it (400 with every violation of an enforced stage), a
 * slot of the gate is taken (503 with Retry-After when the queue is full
 * too), a warm sandbox is taken from the pool, the code runs there, and
 * the 4-key result is answered.  The sandbox's exit row and its disposal
 * happen on the retire thread, after the answer.
 */
#include "serve_http.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <bsd/string.h>
#include <err.h>
#include <jansson.h>
#include <microhttpd.h>
#include <sha2.h>

#include "ctl.h"
#include "serve_exec.h"
#include "serve_metrics.h"
#include "serve_pool.h"
#include "serve_text.h"

/* How long a request may wait in the queue for a slot, and for a sandbox
 * to become ready, before it is answered 503. */
#define QUEUE_WAIT_S 60
#define TAKE_TIMEOUT_MS 30000

static const struct serve_http_cfg *cfg;
static struct MHD_Daemon *daemon_;

/* ---- the gate: at most max_concurrent executions, queue more waiting ---- */

static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static long running, waiting;
static bool draining;

/* SBX_SERVE_TRACE=1: a line per execution with the time each stage took
 * (docs/serve.md "Speed"), to stderr: http (the request read), check (the
 * validator), take (a sandbox), prepare (the audit row, the line), run (the
 * code handed over to its status), drain (the status to the pipes' end). */
static bool trace;

/* 0: a slot is ours; -1: full (queue too); -2: the service is stopping. */
static int gate_enter(void)
{
    struct timespec ts;
    int rc = 0;

    pthread_mutex_lock(&gate_lock);
    if (draining) {
        rc = -2;
        goto out;
    }
    if ((size_t)running < cfg->max_concurrent) {
        running++;
        goto out;
    }
    if ((size_t)waiting >= cfg->queue) {
        rc = -1;
        goto out;
    }
    waiting++;
    serve_metrics_gauges(running, waiting);
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += QUEUE_WAIT_S;
    while ((size_t)running >= cfg->max_concurrent && rc == 0)
        if (pthread_cond_timedwait(&gate_cond, &gate_lock, &ts) == ETIMEDOUT)
            rc = -1;
    waiting--;
    if (rc == 0)
        running++;
out:
    serve_metrics_gauges(running, waiting);
    pthread_mutex_unlock(&gate_lock);
    return rc;
}

static void gate_leave(void)
{
    pthread_mutex_lock(&gate_lock);
    running--;
    serve_metrics_gauges(running, waiting);
    pthread_cond_broadcast(&gate_cond);
    pthread_mutex_unlock(&gate_lock);
}

long serve_http_drain(int max_wait_ms)
{
    long left;

    pthread_mutex_lock(&gate_lock);
    draining = true;
    pthread_mutex_unlock(&gate_lock);
    for (int waited = 0;; waited += 50) {
        pthread_mutex_lock(&gate_lock);
        left = running + waiting;
        pthread_mutex_unlock(&gate_lock);
        if (left == 0 || waited >= max_wait_ms)
            return left;
        usleep(50000);
    }
}

/* ---- the retire thread: exit rows and disposal after the answer ------- */

struct retired {
    struct serve_box *box;
    int status;
    char detail[512];
    struct retired *next;
};
static pthread_mutex_t retire_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t retire_cond = PTHREAD_COND_INITIALIZER;
static struct retired *retire_head;
static bool retire_stop;
static pthread_t retire_thread;

static void *retire_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&retire_lock);
    for (;;) {
        while (retire_head == NULL && !retire_stop)
            pthread_cond_wait(&retire_cond, &retire_lock);
        struct retired *r = retire_head;
        if (r == NULL)
            break;
        retire_head = r->next;
        pthread_mutex_unlock(&retire_lock);
        serve_pool_discard(r->box, r->status, r->detail);
        free(r);
        pthread_mutex_lock(&retire_lock);
    }
    pthread_mutex_unlock(&retire_lock);
    return NULL;
}

static void retire(struct serve_box *box, int status, const char *detail)
{
    struct retired *r = calloc(1, sizeof *r);

    if (r == NULL) {
        serve_pool_discard(box, status, detail);
        return;
    }
    r->box = box;
    r->status = status;
    strlcpy(r->detail, detail, sizeof r->detail);
    pthread_mutex_lock(&retire_lock);
    struct retired **p = &retire_head;
    while (*p)
        p = &(*p)->next;
    *p = r;
    pthread_cond_signal(&retire_cond);
    pthread_mutex_unlock(&retire_lock);
}

/* ---- answers ----------------------------------------------------------- */

struct conn {
    double start;
    double t_body, t_checked, t_taken, t_written;    /* for the trace */
    char rid[24];
    char *body;
    size_t len, cap;
    bool too_big;
};

struct answer {
    unsigned status;
    char *body;                 /* malloc'd */
    const char *type;           /* Content-Type */
    const char *retry_after;    /* or NULL */
    bool www_auth;
};

static void new_rid(char *out, size_t outsz)
{
    unsigned char r[8] = { 0 };

    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        memset(r, 0, sizeof r);
    snprintf(out, outsz, "%02x%02x%02x%02x%02x%02x%02x%02x",
             r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
}

static void set_json(struct answer *a, unsigned status, json_t *o)
{
    a->status = status;
    a->type = "application/json";
    a->body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    if (a->body == NULL) {
        a->status = 500;
        a->body = strdup("{\"error\":\"Internal error\"}");
    }
    json_decref(o);
}

static void set_error(struct answer *a, unsigned status, const char *key, const char *text)
{
    set_json(a, status, json_pack("{s:s}", key, text));
}

static void access_log(const char *method, const char *url, const struct conn *r,
                       unsigned status, size_t bytes)
{
    char line[1024], when[32];
    time_t t = time(NULL);
    struct tm tm;

    gmtime_r(&t, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    int n = snprintf(line, sizeof line, "sbx-serve: %s %s %s %.200s %u %zu %.3fms\n", when,
                     r->rid, method, url, status, bytes, (serve_now_s() - r->start) * 1000.0);
    if (n > 0)
        (void)!write(STDERR_FILENO, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

static enum MHD_Result send_answer(struct MHD_Connection *c, struct conn *r, const char *method,
                                   const char *url, struct answer *a)
{
    size_t len = a->body ? strlen(a->body) : 0;
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, a->body ? a->body : "", MHD_RESPMEM_MUST_FREE);
    enum MHD_Result rc;

    if (resp == NULL) {
        free(a->body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", a->type ? a->type : "application/json");
    MHD_add_response_header(resp, "X-Request-Id", r->rid);
    if (a->retry_after)
        MHD_add_response_header(resp, "Retry-After", a->retry_after);
    if (a->www_auth)
        MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
    rc = MHD_queue_response(c, a->status, resp);
    MHD_destroy_response(resp);
    serve_metrics_request(a->status, strcmp(url, "/execute") == 0 && strcmp(method, "POST") == 0
                                     ? serve_now_s() - r->start : -1);
    access_log(method, url, r, a->status, len);
    return rc;
}

/* ---- POST /execute ------------------------------------------------------ */

static json_t *detail_item(const char *field, const char *msg, const char *type)
{
    return field ? json_pack("{s:[s,s], s:s, s:s}", "loc", "body", field, "msg", msg, "type", type)
                 : json_pack("{s:[s], s:s, s:s}", "loc", "body", "msg", msg, "type", type);
}

static bool blank(const char *s)
{
    for (; *s; s++)
        if (!strchr(" \t\n\r\f\v", *s))
            return false;
    return true;
}

/* What the code's run looked like, for the exit row. */
static void exit_detail(const struct serve_result *res, char *out, size_t outsz)
{
    snprintf(out, outsz, "exit %d%s%s%s; %.1f ms; stdout %zu%s bytes, stderr %zu%s bytes",
             res->exit_code, res->timed_out ? "; timed out" : "",
             res->killed ? "; " : "", res->killed ? res->killed_by : "", res->ms,
             res->out.len, res->out.truncated ? "+" : "", res->err.len,
             res->err.truncated ? "+" : "");
}

/* The violations' messages joined for an audit row: "a; b; c". */
static void join_messages(json_t *v, char *out, size_t outsz)
{
    size_t i;
    json_t *x;

    out[0] = '\0';
    json_array_foreach(v, i, x) {
        const char *m = json_string_value(json_object_get(x, "message"));
        if (i)
            strlcat(out, "; ", outsz);
        strlcat(out, m ? m : "?", outsz);
    }
}

static void run_code(struct conn *r, const char *code, double timeout, json_t *observed,
                     struct answer *a)
{
    struct serve_result *res = NULL;
    struct serve_box *box;
    char err[1024], sha[65], target[160], reason[1024], detail[512];
    json_t *line = NULL;
    char *text = NULL;
    int g = gate_enter();

    if (g < 0) {
        set_error(a, 503, "error", g == -2 ? "The service is stopping"
                                           : "Too many executions: try again later");
        a->retry_after = "1";
        return;
    }
    box = serve_pool_take(TAKE_TIMEOUT_MS, err, sizeof err);
    r->t_taken = serve_now_s();
    if (box == NULL) {
        warnx("%s: %s", r->rid, err);
        set_error(a, 503, "error", "No sandbox is available: try again later");
        a->retry_after = "1";
        goto out;
    }
    /* The request is the sandbox's run: its id names the agent. */
    strlcpy(r->rid, box->id, sizeof r->rid);
    SHA256Data((const uint8_t *)code, strlen(code), sha);
    snprintf(target, sizeof target, "code sha256:%s (%zu bytes)", sha, strlen(code));
    if (json_array_size(observed)) {
        char msgs[900];
        join_messages(observed, msgs, sizeof msgs);
        snprintf(reason, sizeof reason, "request %s: verdict observed: %s", r->rid, msgs);
    } else {
        snprintf(reason, sizeof reason, "request %s: verdict ok", r->rid);
    }
    pthread_mutex_lock(&box->ctl_lock);
    {
        struct sbx_event_desc ev = { .op = SBX_OP_EXEC, .decision = SBX_ALLOW,
                                     .layer = SBX_LAYER_SBX, .target = target,
                                     .reason = reason };
        serve_box_row(box, &ev);
    }
    pthread_mutex_unlock(&box->ctl_lock);
    line = json_pack("{s:s, s:s}", "code", code, "id", box->id);
    text = line ? json_dumps(line, JSON_COMPACT) : NULL;
    res = malloc(sizeof *res);
    if (text == NULL || res == NULL) {
        set_error(a, 500, "error", "Internal error");
        retire(box, 125, "not run: out of memory");
        goto out;
    }
    size_t len = strlen(text);
    text[len] = '\n';
    if (serve_exec_run(box, text, len + 1, timeout, cfg->sup, res, err, sizeof err) < 0) {
        warnx("%s: %s", r->rid, err);
        set_error(a, 500, "error", "The sandbox failed");
        retire(box, 125, err);
        goto out;
    }
    r->t_written = serve_now_s();
    exit_detail(res, detail, sizeof detail);
    if (trace) {
        double t0 = r->start, ms = 1000.0;
        fprintf(stderr, "sbx-serve: trace %s http %.2f check %.2f take %.2f prepare %.2f "
                "run %.2f drain %.2f (ms)\n", r->rid, (r->t_body - t0) * ms,
                (r->t_checked - r->t_body) * ms, (r->t_taken - r->t_checked) * ms,
                res->t_forked ? (res->t_forked - r->t_taken) * ms : 0,
                res->t_status ? (res->t_status - (res->t_forked ? res->t_forked : r->t_taken)) * ms : 0,
                res->t_status ? (r->t_written - res->t_status) * ms : 0);
    }
    retire(box, res->exit_code < 0 ? 128 - res->exit_code : res->exit_code, detail);

    size_t olen, elen;
    char *o = serve_utf8(res->out.buf, res->out.len, res->out.truncated ? SERVE_TRUNC_MARK : NULL,
                         &olen);
    char *e;
    if (res->timed_out) {
        char t[64], msg[128];
        serve_float_text(timeout, t, sizeof t);
        snprintf(msg, sizeof msg, "Execution timed out after %ss", t);
        e = strdup(msg);
        elen = e ? strlen(e) : 0;
    } else if (res->killed) {
        /* Said where a client reads errors, after what the code printed. */
        char msg[480];
        snprintf(msg, sizeof msg, "%sExecution %s", res->err.len ? "\n" : "", res->killed_by);
        e = serve_utf8(res->err.buf, res->err.len, msg, &elen);
    } else {
        e = serve_utf8(res->err.buf, res->err.len, res->err.truncated ? SERVE_TRUNC_MARK : NULL,
                       &elen);
    }
    if (o && e)
        set_json(a, 200, json_pack("{s:s%, s:s%, s:i, s:b}", "stdout", o, olen, "stderr", e, elen,
                                   "exit_code", res->exit_code, "timed_out", res->timed_out));
    else
        set_error(a, 500, "error", "Internal error");
    free(o);
    free(e);
out:
    gate_leave();
    free(res);
    free(text);
    json_decref(line);
}

static void execute(struct conn *r, struct answer *a)
{
    json_error_t jerr;
    json_t *body = NULL, *detail = json_array(), *code, *tmo, *viol = NULL, *observed = NULL;
    double timeout = 10.0;
    const struct serve_profile *pr = cfg->profile;

    r->t_body = serve_now_s();
    body = json_loadb(r->body ? r->body : "", r->len, JSON_REJECT_DUPLICATES, &jerr);
    if (body == NULL) {
        char msg[300];
        snprintf(msg, sizeof msg, "JSON decode error: %s (position %d)", jerr.text, jerr.position);
        json_array_append_new(detail, detail_item(NULL, msg, "value_error.jsondecode"));
        goto unprocessable;
    }
    if (!json_is_object(body)) {
        json_array_append_new(detail, detail_item(NULL, "value is not a valid dict", "type_error.dict"));
        goto unprocessable;
    }
    code = json_object_get(body, "code");
    if (code == NULL)
        json_array_append_new(detail, detail_item("code", "field required", "value_error.missing"));
    else if (!json_is_string(code))
        json_array_append_new(detail, detail_item("code", "str type expected", "type_error.str"));
    tmo = json_object_get(body, "timeout");
    if (tmo) {
        char msg[160];
        /* Optional means absent: null is a wrong type, as in the reference. */
        if (json_is_null(tmo)) {
            json_array_append_new(detail, detail_item("timeout", "none is not an allowed value",
                                                      "type_error.none.not_allowed"));
        } else if (!json_is_number(tmo)) {
            json_array_append_new(detail, detail_item("timeout", "value is not a valid float",
                                                      "type_error.float"));
        } else if (!(json_number_value(tmo) > 0)) {
            json_array_append_new(detail, detail_item("timeout", "ensure this value is greater than 0",
                                                      "value_error.number.not_gt"));
        } else if (json_number_value(tmo) > pr->timeout_max_s) {
            char t[64];
            serve_float_text(pr->timeout_max_s, t, sizeof t);
            if (pr->timeout_max_s == (double)(long long)pr->timeout_max_s)
                t[strcspn(t, ".")] = '\0';
            snprintf(msg, sizeof msg, "ensure this value is less than or equal to %s", t);
            json_array_append_new(detail, detail_item("timeout", msg, "value_error.number.not_le"));
        } else {
            timeout = json_number_value(tmo);
        }
    }
    if (json_array_size(detail))
        goto unprocessable;
    if (strlen(json_string_value(code)) != json_string_length(code)) {
        json_array_append_new(detail, detail_item("code", "str must not contain NUL", "value_error.str"));
        goto unprocessable;
    }
    if (blank(json_string_value(code))) {
        set_error(a, 400, "error", "No code provided");
        goto out;
    }

    char err[512], vname[64] = "";
    if (serve_pool_check(json_string_value(code), &viol, vname, sizeof vname, err, sizeof err) < 0) {
        warnx("%s: %s", r->rid, err);
        set_error(a, 500, "error", "The code could not be checked");
        goto out;
    }
    r->t_checked = serve_now_s();
    /* Enforced stages reject; observed ones are recorded and run. */
    json_t *rejecting = json_array(), *msgs = json_array(), *x;
    size_t i;
    observed = json_array();
    json_array_foreach(viol, i, x) {
        const char *stage = json_string_value(json_object_get(x, "stage"));
        const struct serve_stage *st = stage ? serve_profile_stage(pr, stage) : NULL;
        if (st && st->observe) {
            json_array_append(observed, x);
        } else {
            json_array_append(rejecting, x);
            json_array_append(msgs, json_object_get(x, "message"));
        }
    }
    if (json_array_size(rejecting)) {
        char sha[65], target[160], reason[1024], joined[900];
        const char *c = json_string_value(code);
        SHA256Data((const uint8_t *)c, strlen(c), sha);
        snprintf(target, sizeof target, "code sha256:%s (%zu bytes)", sha, strlen(c));
        join_messages(viol, joined, sizeof joined);
        snprintf(reason, sizeof reason, "request %s: verdict rejected: %s", r->rid, joined);
        struct sbx_event_desc ev = { .op = SBX_OP_EXEC, .decision = SBX_DENY,
                                     .layer = SBX_LAYER_SBX, .target = target, .reason = reason };
        serve_pool_check_record(vname, &ev);
        set_json(a, 400, json_pack("{s:s, s:o}", "error", "Code validation failed",
                                   "violations", msgs));
        json_decref(rejecting);
        goto out;
    }
    json_decref(rejecting);
    json_decref(msgs);
    run_code(r, json_string_value(code), timeout, observed, a);
    goto out;
unprocessable:
    set_json(a, 422, json_pack("{s:O}", "detail", detail));
out:
    json_decref(detail);
    json_decref(body);
    json_decref(viol);
    json_decref(observed);
}

/* ---- dispatch ----------------------------------------------------------- */

static bool authorized(struct MHD_Connection *c)
{
    const char *h;
    size_t tl, hl;
    unsigned char diff = 0;

    if (cfg->token == NULL)
        return true;
    h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (h == NULL || strncmp(h, "Bearer ", 7) != 0)
        return false;
    h += 7;
    tl = strlen(cfg->token);
    hl = strlen(h);
    /* Constant time in the token's length. */
    for (size_t i = 0; i < tl; i++)
        diff |= (unsigned char)(cfg->token[i] ^ (i < hl ? h[i] : 0));
    return diff == 0 && hl == tl;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version,
                               const char *upload, size_t *upload_size, void **con_cls)
{
    struct conn *r = *con_cls;
    struct answer a = { 0 };

    (void)cls;
    (void)version;
    if (r == NULL) {
        if ((r = calloc(1, sizeof *r)) == NULL)
            return MHD_NO;
        r->start = serve_now_s();
        new_rid(r->rid, sizeof r->rid);
        *con_cls = r;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > SERVE_MAX_BODY)
            r->too_big = true;
        if (!r->too_big)
            return MHD_YES;
        /* Answered before the body is read: nothing of it is kept. */
        set_error(&a, 413, "error", "Request body too large");
        return send_answer(c, r, method, url, &a);
    }
    if (*upload_size) {
        if (!r->too_big && r->len + *upload_size > SERVE_MAX_BODY) {
            r->too_big = true;
            free(r->body);
            r->body = NULL;
            r->len = r->cap = 0;
        }
        if (!r->too_big) {
            if (r->len + *upload_size > r->cap) {
                size_t cap = r->cap ? r->cap : 4096;
                while (cap < r->len + *upload_size)
                    cap *= 2;
                char *b = realloc(r->body, cap);
                if (b == NULL)
                    return MHD_NO;
                r->body = b;
                r->cap = cap;
            }
            memcpy(r->body + r->len, upload, *upload_size);
            r->len += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }

    bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    bool post = strcmp(method, "POST") == 0;
    if (r->too_big) {
        set_error(&a, 413, "error", "Request body too large");
    } else if (strcmp(url, "/healthz") == 0) {
        /* Unauthenticated: liveness probes carry no token. */
        if (get)
            set_json(&a, 200, json_pack("{s:s}", "status", "ok"));
        else
            set_error(&a, 405, "detail", "Method Not Allowed");
    } else if (!authorized(c)) {
        set_error(&a, 401, "detail", "Not authenticated");
        a.www_auth = true;
    } else if (strcmp(url, "/profile") == 0) {
        if (get) {
            a.status = 200;
            a.type = "application/json";
            a.body = serve_profile_json(cfg->profile);
            if (a.body == NULL)
                set_error(&a, 500, "error", "Internal error");
        } else {
            set_error(&a, 405, "detail", "Method Not Allowed");
        }
    } else if (strcmp(url, "/metrics") == 0) {
        if (get) {
            a.status = 200;
            a.type = "text/plain; version=0.0.4";
            a.body = serve_metrics_text(serve_pool_ready());
            if (a.body == NULL)
                set_error(&a, 500, "error", "Internal error");
        } else {
            set_error(&a, 405, "detail", "Method Not Allowed");
        }
    } else if (strcmp(url, "/execute") == 0) {
        if (post)
            execute(r, &a);
        else
            set_error(&a, 405, "detail", "Method Not Allowed");
    } else {
        set_error(&a, 404, "detail", "Not Found");
    }
    return send_answer(c, r, method, url, &a);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    struct conn *r = *con_cls;

    (void)cls;
    (void)c;
    (void)toe;
    if (r) {
        free(r->body);
        free(r);
        *con_cls = NULL;
    }
}

int serve_http_start(int listen_fd, const struct serve_http_cfg *config, char *err, size_t errsz)
{
    cfg = config;
    const char *tr = getenv("SBX_SERVE_TRACE");
    trace = tr != NULL && strcmp(tr, "1") == 0;
    if (pthread_create(&retire_thread, NULL, retire_main, NULL) != 0) {
        snprintf(err, errsz, "cannot start the retire thread");
        return -1;
    }
    daemon_ = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD
                               | MHD_USE_ERROR_LOG,
                               0, NULL, NULL, handler, NULL,
                               MHD_OPTION_LISTEN_SOCKET, listen_fd,
                               MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
                               MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
                               MHD_OPTION_END);
    if (daemon_ == NULL) {
        snprintf(err, errsz, "libmicrohttpd did not start");
        return -1;
    }
    return 0;
}

void serve_http_stop(void)
{
    if (daemon_)
        MHD_stop_daemon(daemon_);
    daemon_ = NULL;
    pthread_mutex_lock(&retire_lock);
    retire_stop = true;
    pthread_cond_signal(&retire_cond);
    pthread_mutex_unlock(&retire_lock);
    pthread_join(retire_thread, NULL);
}
