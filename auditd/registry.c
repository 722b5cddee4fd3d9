/*
 * registry.c — the one owner of agents, control connections and kill
 * requests (see daemon.h).  Handlers end things; only registry_reap, run
 * by the loop between turns, frees them.  So a pointer taken in a handler
 * stays valid until the handler returns, whatever the handler ends on the
 * way (an exit, a hang-up and a kill's end may all meet one agent in one
 * turn).  Calls the base only.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bsd/string.h>

#include "daemon.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77     /* Linux 6.5 */
#endif

struct agent *registry_agent_new(struct daemon *d, const char *name)
{
    (void)d;
    struct agent *a = calloc(1, sizeof *a);
    if (a) {
        strlcpy(a->name, name, sizeof a->name);
        /* A second of margin, as for a ring's registration. */
        a->since_ns = sbx_now_ns() - 1000000000u;
    }
    return a;
}

void registry_agent_add(struct daemon *d, struct agent *a, struct conn *guard)
{
    a->guard = guard;
    guard->agent = a;
    a->next = d->agents;
    d->agents = a;
}

struct agent *registry_agent_by_token(struct daemon *d, const char *run_id, const char *token)
{
    for (struct agent *a = d->agents; a; a = a->next) {
        if (a->ended || strcmp(a->run_id, run_id) != 0)
            continue;
        size_t n = strlen(a->token);
        if (strlen(token) != n)
            return NULL;
        unsigned char diff = 0;
        for (size_t i = 0; i < n; i++)
            diff |= (unsigned char)(a->token[i] ^ token[i]);
        return diff == 0 ? a : NULL;
    }
    return NULL;
}

void registry_agent_discard(struct agent *a)
{
    free(a);
}

static bool agent_done(const struct agent *a)
{
    return a->ended && a->nrings == 0 && !a->kill && !a->guard;
}

struct conn *registry_conn_new(struct daemon *d, int fd, uid_t uid, pid_t pid)
{
    struct conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->fd = fd;
    c->uid = uid;
    c->pid = pid;
    c->ep = (struct ep){ EP_CONN, c };
    /* The peer by pidfd, for the dead man's switch (a guard stopped by its
     * agent is continued once the daemon has killed the agent): the
     * connection's own pidfd where the kernel has it (6.5), else
     * pidfd_open now, while the peer that just connected holds its pid. */
    socklen_t pl = sizeof c->pidfd;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &c->pidfd, &pl) < 0 || c->pidfd < 0)
        c->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (daemon_epoll_add(d, fd, &c->ep, EPOLLIN | EPOLLRDHUP) < 0) {
        if (c->pidfd >= 0)
            close(c->pidfd);
        free(c);
        return NULL;
    }
    c->next = d->conns;
    d->conns = c;
    return c;
}

void registry_conn_drop(struct daemon *d, struct conn *c)
{
    (void)d;
    if (c->closing)
        return;
    c->closing = true;
    if (c->agent && c->agent->guard == c)
        c->agent->guard = NULL;
    if (c->keeps && c->keeps->keeper == c)
        c->keeps->keeper = NULL;
    c->keeps = NULL;
    if (c->kill)
        c->kill->from = NULL;
    c->kill = NULL;
    /* Closing drops it from epoll: no event reaches it any more. */
    close(c->fd);
    c->fd = -1;
    if (c->pidfd >= 0)
        close(c->pidfd);
    c->pidfd = -1;
}

struct killreq *registry_kill_new(struct daemon *d, struct conn *from)
{
    struct killreq *kr = calloc(1, sizeof *kr);
    if (!kr)
        return NULL;
    kr->from = from;
    from->kill = kr;
    kr->next = d->kills;
    d->kills = kr;
    return kr;
}

void registry_kill_end(struct killreq *kr)
{
    if (kr->from)
        kr->from->kill = NULL;
    kr->from = NULL;
    kr->done = true;
}

void registry_reap(struct daemon *d)
{
    for (struct conn **pp = &d->conns; *pp;) {
        struct conn *c = *pp;
        if (c->closing) {
            *pp = c->next;
            free(c);
        } else {
            pp = &c->next;
        }
    }
    for (struct agent **pp = &d->agents; *pp;) {
        struct agent *a = *pp;
        if (agent_done(a)) {
            *pp = a->next;
            if (a->keeper)
                a->keeper->keeps = NULL;
            free(a);
        } else {
            pp = &a->next;
        }
    }
    for (struct killreq **pp = &d->kills; *pp;) {
        struct killreq *kr = *pp;
        /* A kill is done when no target waits and its answer went out. */
        if (kr->done) {
            *pp = kr->next;
            free(kr);
        } else {
            pp = &kr->next;
        }
    }
}

void registry_free_all(struct daemon *d)
{
    for (struct conn *c = d->conns; c; c = c->next)
        registry_conn_drop(d, c);
    for (struct agent *a = d->agents; a; a = a->next) {
        a->ended = true;
        a->nrings = 0;
        a->kill = NULL;
    }
    for (struct killreq *kr = d->kills; kr; kr = kr->next)
        kr->done = true;
    registry_reap(d);
}
