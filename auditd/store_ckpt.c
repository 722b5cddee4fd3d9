/*
 * store_ckpt.c — the WAL checkpoint on a thread of its own (see store.h,
 * audit_store_checkpoint_thread).
 *
 * A checkpoint copies the WAL back into the database file and syncs it:
 * 64 MiB of pages and an fsync, tens to hundreds of milliseconds during
 * which sbx-auditd's loop drained nothing, so the agents' rings filled and
 * their producers waited (a quarter of bench_ingest's time).  Here it runs
 * on a second connection of the same store, in a thread that does nothing
 * else: SQLite lets a PASSIVE checkpoint run beside the writer, which goes
 * on appending to the WAL.  The writer's connection never sees this
 * thread; they share only the small state below, under its mutex.
 */
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bsd/string.h>

#include "store_int.h"

struct store_ckpt {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    sqlite3 *db;                /* the thread's own connection */
    bool want, busy, stop;
    unsigned long finished;     /* checkpoints run so far */
    int log, done, rc;          /* the last one's frames, copied frames, result */
    char err[256];
};

static void *ckpt_main(void *arg)
{
    struct store_ckpt *c = arg;

    pthread_mutex_lock(&c->lock);
    for (;;) {
        while (!c->want && !c->stop)
            pthread_cond_wait(&c->cond, &c->lock);
        if (c->stop)
            break;
        c->want = false;
        c->busy = true;
        pthread_mutex_unlock(&c->lock);
        int log = 0, done = 0;
        int rc = sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &done);
        pthread_mutex_lock(&c->lock);
        c->busy = false;
        c->log = log;
        c->done = done;
        c->rc = rc;
        if (rc != SQLITE_OK && rc != SQLITE_BUSY)
            strlcpy(c->err, sqlite3_errmsg(c->db), sizeof c->err);
        c->finished++;
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

int audit_store_checkpoint_thread(struct audit_store *st)
{
    if (st->ro || st->ckpt)
        return 0;
    struct store_ckpt *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(st->errmsg, sizeof st->errmsg, "checkpoint thread: out of memory");
        return -1;
    }
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    /* Writing is the writer connection's alone; this one only checkpoints
     * (synchronous=NORMAL: the WAL is synced before its pages are copied,
     * the database after). */
    if (sqlite3_open_v2(st->path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL)
            != SQLITE_OK ||
        sqlite3_exec(c->db, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL) != SQLITE_OK) {
        snprintf(st->errmsg, sizeof st->errmsg, "checkpoint thread: cannot open the store: %s",
                 c->db ? sqlite3_errmsg(c->db) : "out of memory");
        goto fail;
    }
    /* No signal for this thread: sbx-auditd takes its signals through a
     * signalfd, which needs them blocked in every thread. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&c->thread, NULL, ckpt_main, c);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        snprintf(st->errmsg, sizeof st->errmsg, "checkpoint thread: %s", strerror(rc));
        goto fail;
    }
    st->ckpt = c;
    return 0;
fail:
    sqlite3_close(c->db);
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->lock);
    free(c);
    return -1;
}

int store_ckpt_step(struct audit_store *st, bool idle, bool *inline_needed)
{
    struct store_ckpt *c = st->ckpt;
    int ret = 0;

    *inline_needed = false;
    pthread_mutex_lock(&c->lock);
    if (c->finished != st->ckpt_seen) {
        st->ckpt_seen = c->finished;
        if (c->rc != SQLITE_OK && c->rc != SQLITE_BUSY) {
            snprintf(st->errmsg, sizeof st->errmsg, "checkpoint: %s", c->err);
            ret = -1;
        } else if (st->wal_pages == st->ckpt_asked_pages) {
            /* No commit since it was asked for: what it left is the WAL's
             * uncopied part (0: the next commit starts the WAL over). */
            st->wal_pages = store_wal_left(c->log, c->done);
        }
    }
    if (!c->busy && !c->want) {
        /* The WAL starts over only once a checkpoint copied all of it,
         * which one running beside a steady stream of commits never does:
         * under load the thread copies what was committed since its last
         * pass, each time the WAL grew by another quarter of the bound,
         * and the WAL starts over at the first quiet moment (IDLE).  Past
         * four times the bound the writer copies the rest itself and the
         * WAL starts over at its next commit (the rest is little: the
         * thread copied the older frames). */
        if (st->wal_pages < st->ckpt_asked_pages)
            st->ckpt_asked_pages = 0;           /* it started over */
        if (st->wal_pages >= 4 * st->wal_max_pages) {
            *inline_needed = true;
        } else if (st->wal_pages > 0 &&
                   (idle || (st->wal_pages >= st->wal_max_pages &&
                             st->wal_pages - st->ckpt_asked_pages >= st->wal_max_pages / 4))) {
            c->want = true;
            st->ckpt_asked_pages = st->wal_pages;
            pthread_cond_signal(&c->cond);
        }
    }
    pthread_mutex_unlock(&c->lock);
    return ret;
}

void store_ckpt_stop(struct audit_store *st)
{
    struct store_ckpt *c = st->ckpt;

    if (!c)
        return;
    pthread_mutex_lock(&c->lock);
    c->stop = true;
    pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->thread, NULL);
    sqlite3_close(c->db);
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->lock);
    free(c);
    st->ckpt = NULL;
}
