/*
 * serve_pool.c — warm exec sandboxes and the validators (serve_pool.h).
 */
#include "serve_pool.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bsd/string.h>
#include <err.h>

#include "ctl.h"
#include "serve_zygote.h"

/* How long a runner may take to say ready: python and the pre-imports
 * (numpy, pandas, scipy cost a second or two on a busy machine). */
#define READY_TIMEOUT_MS 30000
#define MAX_POOL 64
#define MAX_CHECK 8
#define MAX_ZYGOTES 64

static struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;     /* a box became ready, or one was taken */
    struct serve_box *idle[MAX_POOL];
    size_t n_idle, target;
    int spawner;
    bool stop;
    unsigned failures;          /* spawn failures in a row */
    char last_err[512];
    pthread_t thread;
    bool started;
    bool zygote;                /* requests fork from the zygote; no pool */
} pool = { .lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER };

struct checker {
    pthread_mutex_t lock;
    struct serve_box box;
    bool up;
    unsigned long next_id;
};
static struct checker checkers[MAX_CHECK];
static size_t n_checkers;
static unsigned long check_rr;

#include "serve_sup.h"
#include "serve_text.h"

/* Kills BOX, writes its exit row (after the supervisor let go of it: the
 * row comes last), closes it. */
static void box_end(struct serve_box *box, int status, const char *detail)
{
    char err[768];

    (void)serve_box_kill(box);
    serve_sup_remove(box);
    if (serve_box_end_row(box, status, detail, err, sizeof err) < 0)
        warnx("the end of agent %s (%s) is not recorded: %s", box->name, detail, err);
    serve_box_close(box);
}

void serve_pool_discard(struct serve_box *box, int status, const char *detail)
{
    if (box == NULL)
        return;
    /* Its zygote serves the next request at once: it takes the next one
     * only once this one's processes are gone and /tmp is empty. */
    serve_zygote_release(box);
    box_end(box, status, detail);
    if (box->cgroup[0])
        serve_zygote_cgroup_remove(box);
    free(box);
}

/* One new ready exec box, or NULL (ERR). */
static struct serve_box *new_box(enum serve_kind kind, char *err, size_t errsz)
{
    struct serve_box *b = malloc(sizeof *b);

    if (b == NULL) {
        serve_errf(err, errsz, "out of memory");
        return NULL;
    }
    if (serve_spawn_get(pool.spawner, kind, b, err, errsz) < 0) {
        free(b);
        return NULL;
    }
    if (serve_box_wait_ready(b, READY_TIMEOUT_MS, err, errsz) < 0) {
        serve_pool_discard(b, 125, err);
        return NULL;
    }
    return b;
}

void serve_deadline(struct timespec *ts, long ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

bool serve_box_confirm_kill(struct serve_box *box, const char *done)
{
    struct sbx_ctl_cmd cmd;
    int r;

    pthread_mutex_lock(&box->ctl_lock);
    r = box->ctl >= 0 ? sbx_ctl_recv_cmd(box->ctl, &cmd) : 0;
    if (r > 0)
        (void)sbx_ctl_cmd_done(box->ctl, cmd.req_id, 0, done);
    pthread_mutex_unlock(&box->ctl_lock);
    return r > 0;
}

bool serve_pool_kill_unused(struct serve_box *box, const char *done, const char *killed)
{
    bool ordered = serve_box_confirm_kill(box, done);

    serve_pool_discard(box, 137, ordered ? killed : "sbx-auditd went away");
    return ordered;
}

/* A kill order for a validator: confirmed, and the validator ended (the
 * next check starts another). */
static void checker_ctl(struct checker *c)
{
    if (pthread_mutex_trylock(&c->lock) != 0)
        return;     /* checking now: the order waits for the next round */
    if (c->up && c->box.ctl >= 0) {
        bool ordered = serve_box_confirm_kill(&c->box, "killed a validator");
        box_end(&c->box, 137, ordered ? "killed" : "sbx-auditd went away");
        c->up = false;
    }
    pthread_mutex_unlock(&c->lock);
}

/* How many sandboxes may be starting at once: their pythons start in
 * parallel (a start is mostly the interpreter's CPU time), while the
 * spawner itself works one at a time. */
#define MAX_STARTING 2

struct starting {
    struct serve_box *box;
    double since;
};

static double mono_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void spawn_failed(const char *err)
{
    strlcpy(pool.last_err, err, sizeof pool.last_err);
    if (pool.failures++ % 20 == 0)
        warnx("cannot start a sandbox: %s", err);
    pthread_cond_broadcast(&pool.changed);
}

/* The pool's loop: start sandboxes until TARGET are ready or starting,
 * move the ones whose runner said ready to the idle list, and watch the
 * idle ones (kills, a runner that ended) and the validators (kills). */
static void *pool_main(void *arg)
{
    struct starting st[MAX_STARTING];
    size_t n_st = 0;

    (void)arg;
    pthread_mutex_lock(&pool.lock);
    while (!pool.stop) {
        if (pool.n_idle + n_st < pool.target && n_st < MAX_STARTING) {
            char err[512];
            struct serve_box *b = malloc(sizeof *b);
            pthread_mutex_unlock(&pool.lock);
            int rc = b ? serve_spawn_get(pool.spawner, SERVE_EXEC, b, err, sizeof err) : -1;
            pthread_mutex_lock(&pool.lock);
            if (rc < 0) {
                free(b);
                spawn_failed(b ? err : "out of memory");
                pthread_mutex_unlock(&pool.lock);
                usleep(pool.failures < 5 ? 50000 : 500000);
                pthread_mutex_lock(&pool.lock);
                continue;
            }
            st[n_st++] = (struct starting){ b, mono_s() };
            continue;
        }
        struct pollfd pf[2 * MAX_POOL + MAX_CHECK + 2 * MAX_ZYGOTES + MAX_STARTING];
        struct serve_box *who[2 * MAX_POOL + MAX_CHECK + 2 * MAX_ZYGOTES + MAX_STARTING];
        size_t n = 0;
        for (size_t i = 0; i < pool.n_idle; i++) {
            struct serve_box *b = pool.idle[i];
            if (b->ctl >= 0) {
                who[n] = b;
                pf[n++] = (struct pollfd){ b->ctl, POLLIN, 0 };
            }
            who[n] = b;
            pf[n++] = (struct pollfd){ b->rep, POLLIN, 0 };
        }
        size_t first_check = n;
        for (size_t i = 0; i < n_checkers; i++) {
            who[n] = NULL;
            pf[n++] = (struct pollfd){ checkers[i].up ? checkers[i].box.ctl : -1, POLLIN, 0 };
        }
        size_t i_zygote = n, n_zyg = 0;
        if (pool.zygote) {
            int zfd[2 * MAX_ZYGOTES];
            n_zyg = serve_zygote_ctl_fds(zfd, (size_t)2 * MAX_ZYGOTES);
            for (size_t i = 0; i < n_zyg; i++) {
                who[n] = NULL;
                pf[n++] = (struct pollfd){ zfd[i], POLLIN, 0 };
            }
        }
        size_t first_st = n;
        for (size_t i = 0; i < n_st; i++) {
            who[n] = st[i].box;
            pf[n++] = (struct pollfd){ st[i].box->rep, POLLIN, 0 };
        }
        pthread_mutex_unlock(&pool.lock);
        int r = poll(pf, (nfds_t)n, 100);

        /* Validators: a kill ends the validator (the next check starts
         * another). */
        for (size_t i = 0; r > 0 && i < n_checkers; i++)
            if (pf[first_check + i].revents)
                checker_ctl(&checkers[i]);
        for (size_t i = 0; r > 0 && i < n_zyg; i++)
            if (pf[i_zygote + i].revents)
                serve_zygote_on_ctl(i);
        /* Starting sandboxes: ready, failed, or too slow. */
        for (size_t i = n_st; i-- > 0;) {
            char err[512];
            struct serve_box *b = st[i].box;
            bool ready = false, failed = false;
            if (pf[first_st + i].revents) {
                ready = serve_box_wait_ready(b, 1000, err, sizeof err) == 0;
                failed = !ready;
            } else if (mono_s() - st[i].since > READY_TIMEOUT_MS / 1000.0) {
                snprintf(err, sizeof err, "the runner did not say ready within %d s",
                         READY_TIMEOUT_MS / 1000);
                failed = true;
            }
            if (!ready && !failed)
                continue;
            st[i] = st[--n_st];
            if (failed) {
                serve_pool_discard(b, 125, err);
                pthread_mutex_lock(&pool.lock);
                spawn_failed(err);
                pthread_mutex_unlock(&pool.lock);
                continue;
            }
            pthread_mutex_lock(&pool.lock);
            pool.failures = 0;
            if (pool.stop || pool.n_idle >= MAX_POOL) {
                pthread_mutex_unlock(&pool.lock);
                serve_pool_discard(b, 0, "unused: the service stopped");
                continue;
            }
            pool.idle[pool.n_idle++] = b;
            pthread_cond_broadcast(&pool.changed);
            pthread_mutex_unlock(&pool.lock);
        }
        /* Idle sandboxes: a kill, or a runner that ended while waiting. */
        n = first_check;
        pthread_mutex_lock(&pool.lock);
        for (size_t k = 0; r > 0 && k < n; k++) {
            if (!pf[k].revents)
                continue;
            struct serve_box *b = who[k];
            size_t i;
            for (i = 0; i < pool.n_idle && pool.idle[i] != b; i++)
                ;
            if (i == pool.n_idle)
                continue;       /* taken meanwhile: its request handles it */
            pool.idle[i] = pool.idle[--pool.n_idle];
            for (size_t j = k + 1; j < n; j++)
                if (who[j] == b)
                    pf[j].revents = 0;
            pthread_mutex_unlock(&pool.lock);
            if (pf[k].fd == b->ctl)
                serve_pool_kill_unused(b, "killed an idle sandbox", "killed while idle");
            else
                serve_pool_discard(b, 125, "the runner ended while idle");
            pthread_mutex_lock(&pool.lock);
        }
    }
    pthread_mutex_unlock(&pool.lock);
    for (size_t i = 0; i < n_st; i++)
        serve_pool_discard(st[i].box, 0, "unused: the service stopped");
    return NULL;
}

static int start_checker(struct checker *c, char *err, size_t errsz)
{
    if (serve_spawn_get(pool.spawner, SERVE_CHECK, &c->box, err, errsz) < 0)
        return -1;
    if (serve_box_wait_ready(&c->box, READY_TIMEOUT_MS, err, errsz) < 0) {
        box_end(&c->box, 125, err);
        return -1;
    }
    c->up = true;
    return 0;
}

static int start_checkers(int spawner, size_t ncheck, char *err, size_t errsz)
{
    pool.spawner = spawner;
    n_checkers = ncheck < 1 ? 1 : ncheck > MAX_CHECK ? MAX_CHECK : ncheck;
    for (size_t i = 0; i < n_checkers; i++) {
        pthread_mutex_init(&checkers[i].lock, NULL);
        if (start_checker(&checkers[i], err, errsz) < 0)
            return -1;
    }
    return 0;
}

int serve_pool_start_zygote(int spawner, const struct serve_spawn_cfg *cfg, size_t nzygote,
                            size_t ncheck, char *err, size_t errsz)
{
    if (start_checkers(spawner, ncheck, err, errsz) < 0)
        return -1;
    /* Now, so that a profile or a runner that cannot start stops the
     * service before it listens. */
    if (serve_zygote_start(spawner, cfg, nzygote, err, errsz) < 0)
        return -1;
    pool.zygote = true;
    pool.target = 0;
    if (pthread_create(&pool.thread, NULL, pool_main, NULL) != 0) {
        serve_errf(err, errsz, "cannot start the pool's thread");
        return -1;
    }
    pool.started = true;
    return 0;
}

int serve_pool_start(int spawner, size_t target, size_t ncheck, char *err, size_t errsz)
{
    pool.target = target < 1 ? 1 : target > MAX_POOL ? MAX_POOL : target;
    if (start_checkers(spawner, ncheck, err, errsz) < 0)
        return -1;
    /* One exec sandbox now, so that a profile or a runner that cannot
     * start stops the service before it listens. */
    struct serve_box *b = new_box(SERVE_EXEC, err, errsz);
    if (b == NULL)
        return -1;
    pool.idle[pool.n_idle++] = b;
    if (pthread_create(&pool.thread, NULL, pool_main, NULL) != 0) {
        serve_errf(err, errsz, "cannot start the pool's thread");
        return -1;
    }
    pool.started = true;
    return 0;
}

static struct serve_box *take_one(int timeout_ms, char *err, size_t errsz)
{
    struct timespec ts;
    struct serve_box *b = NULL;

    if (pool.zygote)
        return serve_zygote_take(timeout_ms, err, errsz);
    serve_deadline(&ts, timeout_ms);
    pthread_mutex_lock(&pool.lock);
    while (pool.n_idle == 0 && !pool.stop)
        if (pthread_cond_timedwait(&pool.changed, &pool.lock, &ts) == ETIMEDOUT)
            break;
    if (pool.n_idle > 0) {
        b = pool.idle[--pool.n_idle];
        pthread_cond_broadcast(&pool.changed);
    } else {
        serve_errf(err, errsz, "no sandbox became ready within %d ms%s%s", timeout_ms,
             pool.last_err[0] ? ": " : "", pool.last_err);
    }
    pthread_mutex_unlock(&pool.lock);
    return b;
}

/* BOX's registration hung up: the daemon that registered it is gone, and
 * nobody reads its event rings. */
static bool registration_lost(struct serve_box *box)
{
    bool lost;

    pthread_mutex_lock(&box->ctl_lock);
    if (!box->token[0]) {
        lost = false;
    } else if (box->ctl < 0) {
        lost = true;
    } else {
        struct pollfd pf = { .fd = box->ctl, .events = POLLRDHUP };
        lost = poll(&pf, 1, 0) == 1 && (pf.revents & (POLLHUP | POLLRDHUP | POLLERR));
    }
    pthread_mutex_unlock(&box->ctl_lock);
    return lost;
}

struct serve_box *serve_pool_take(int timeout_ms, char *err, size_t errsz)
{
    double end = serve_now_s() + timeout_ms / 1000.0;

    for (;;) {
        int left = (int)((end - serve_now_s()) * 1000.0);
        struct serve_box *b = take_one(left > 0 ? left : 1, err, errsz);
        /* A box registered with a daemon that has died since (SIGKILLed,
         * say) is not given a request: it is ended, and its end recorded by
         * the next daemon (serve_box_end_row), before another is taken. */
        if (b == NULL || !registration_lost(b))
            return b;
        serve_pool_discard(b, 137, "sbx-auditd went away");
        if (serve_now_s() >= end) {
            serve_errf(err, errsz, "no sandbox registered with a running sbx-auditd within %d ms",
                       timeout_ms);
            return NULL;
        }
    }
}

size_t serve_pool_ready(void)
{
    size_t n;

    if (pool.zygote)
        return serve_zygote_up();
    pthread_mutex_lock(&pool.lock);
    n = pool.n_idle;
    pthread_mutex_unlock(&pool.lock);
    return n;
}

static int check_once(const char *code, json_t **violations, char *vname, size_t vnamesz,
                      char *err, size_t errsz);

/* A validator that died (a kill, a crash) fails one attempt; the check is
 * made again on a fresh one before the request is failed. */
int serve_pool_check(const char *code, json_t **violations, char *vname, size_t vnamesz,
                     char *err, size_t errsz)
{
    if (check_once(code, violations, vname, vnamesz, err, errsz) == 0)
        return 0;
    return check_once(code, violations, vname, vnamesz, err, errsz);
}

static int check_once(const char *code, json_t **violations, char *vname, size_t vnamesz,
                      char *err, size_t errsz)
{
    struct checker *c = &checkers[__atomic_fetch_add(&check_rr, 1, __ATOMIC_RELAXED) % n_checkers];
    json_t *req = NULL, *rep = NULL;
    char *text = NULL, *line;
    int rc = -1;

    pthread_mutex_lock(&c->lock);
    if (!c->up && start_checker(c, err, errsz) < 0)
        goto out;
    strlcpy(vname, c->box.name, vnamesz);
    unsigned long id = ++c->next_id;
    req = json_pack("{s:I, s:s}", "id", (json_int_t)id, "code", code);
    text = req ? json_dumps(req, JSON_COMPACT) : NULL;
    if (text == NULL) {
        serve_errf(err, errsz, "out of memory");
        goto out;
    }
    size_t len = strlen(text);
    text[len] = '\n';       /* json_dumps leaves room: replaced NUL */
    if (write(c->box.req, text, len + 1) != (ssize_t)(len + 1)) {
        serve_errf(err, errsz, "the validator is gone: %s", strerror(errno));
        goto dead;
    }
    int r = serve_box_readline(&c->box, 10000, &line);
    if (r <= 0) {
        serve_errf(err, errsz, "the validator %s", r == 0 ? "ended" : "did not answer");
        goto dead;
    }
    rep = json_loads(line, 0, NULL);
    serve_box_consume(&c->box);
    json_t *v = rep ? json_object_get(rep, "violations") : NULL;
    if (!json_is_array(v) || json_integer_value(json_object_get(rep, "id")) != (json_int_t)id) {
        serve_errf(err, errsz, "the validator answered nonsense");
        goto dead;
    }
    *violations = json_incref(v);
    rc = 0;
    goto out;
dead:
    /* Replaced at the next request; this one fails as the service's fault. */
    warnx("validator %s: %s; replacing it", c->box.name, err);
    box_end(&c->box, 125, err);
    c->up = false;
out:
    pthread_mutex_unlock(&c->lock);
    free(text);
    json_decref(req);
    json_decref(rep);
    return rc;
}

void serve_pool_check_record(const char *vname, const struct sbx_event_desc *ev)
{
    for (size_t i = 0; i < n_checkers; i++) {
        struct checker *c = &checkers[i];
        pthread_mutex_lock(&c->lock);
        if (c->up && strcmp(c->box.name, vname) == 0) {
            pthread_mutex_lock(&c->box.ctl_lock);
            if (c->box.ctl >= 0)
                (void)sbx_ctl_event_async(c->box.ctl, ev);
            pthread_mutex_unlock(&c->box.ctl_lock);
        }
        pthread_mutex_unlock(&c->lock);
    }
}

void serve_pool_stop(void)
{
    pthread_mutex_lock(&pool.lock);
    pool.stop = true;
    pthread_cond_broadcast(&pool.changed);
    pthread_mutex_unlock(&pool.lock);
    if (pool.started)
        pthread_join(pool.thread, NULL);
    for (size_t i = 0; i < pool.n_idle; i++)
        serve_pool_discard(pool.idle[i], 0, "unused: the service stopped");
    pool.n_idle = 0;
    if (pool.zygote)
        serve_zygote_stop();
    for (size_t i = 0; i < n_checkers; i++) {
        struct checker *c = &checkers[i];
        pthread_mutex_lock(&c->lock);
        if (c->up) {
            box_end(&c->box, 0, "the service stopped");
            c->up = false;
        }
        pthread_mutex_unlock(&c->lock);
    }
}
