/*
 * serve_sup.c — one thread answers every sandbox's seccomp listener
 * (serve_sup.h).
 */
#include "serve_sup.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "ctl.h"

#define MAX_BOXES 512

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct serve_box *boxes[MAX_BOXES];
static size_t n_boxes;
static int epfd = -1;
static const struct iso_request *sreq;
static pthread_t thread;

static bool known(const struct serve_box *b)
{
    for (size_t i = 0; i < n_boxes; i++)
        if (boxes[i] == b)
            return true;
    return false;
}

static void on_event(void *ctx, const struct sbx_event_desc *ev)
{
    struct serve_box *box = ctx;

    pthread_mutex_lock(&box->ctl_lock);
    serve_box_row(box, ev);
    pthread_mutex_unlock(&box->ctl_lock);
}

static void *sup_main(void *arg)
{
    (void)arg;
    for (;;) {
        struct epoll_event ev[32];
        int n = epoll_wait(epfd, ev, 32, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return NULL;
        pthread_mutex_lock(&lock);
        for (int i = 0; i < n; i++) {
            struct serve_box *b = ev[i].data.ptr;
            if (!known(b) || b->notify < 0)
                continue;
            if ((ev[i].events & EPOLLIN) && iso_supervise(b->notify, sreq, on_event, b) == 0)
                continue;
            if (ev[i].events & (EPOLLHUP | EPOLLERR | EPOLLIN)) {
                /* The sandbox is gone: nothing more will come. */
                epoll_ctl(epfd, EPOLL_CTL_DEL, b->notify, NULL);
            }
        }
        pthread_mutex_unlock(&lock);
    }
}

int serve_sup_start(const struct iso_request *sup)
{
    sreq = sup;
    epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0)
        return -1;
    if (pthread_create(&thread, NULL, sup_main, NULL) != 0) {
        errno = EAGAIN;
        return -1;
    }
    pthread_detach(thread);
    return 0;
}

int serve_sup_add(struct serve_box *box)
{
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = box };
    int rc = 0;

    if (box->notify < 0)
        return 0;
    pthread_mutex_lock(&lock);
    if (n_boxes == MAX_BOXES) {
        errno = EMFILE;
        rc = -1;
    } else if (epoll_ctl(epfd, EPOLL_CTL_ADD, box->notify, &ev) < 0) {
        rc = -1;
    } else {
        boxes[n_boxes++] = box;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

void serve_sup_remove(struct serve_box *box)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n_boxes; i++)
        if (boxes[i] == box) {
            if (box->notify >= 0)
                epoll_ctl(epfd, EPOLL_CTL_DEL, box->notify, NULL);
            boxes[i] = boxes[--n_boxes];
            break;
        }
    pthread_mutex_unlock(&lock);
}
