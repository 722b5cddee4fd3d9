/*
 * serve_http.h — sbx-serve's HTTP side (libmicrohttpd, a thread per
 * connection): the endpoints of SERVE.md, the concurrency gate, the
 * bearer token, the request ids, the access log, and the audit rows of
 * each request.
 *
 * Memory: the configuration is borrowed for the server's life.
 * Errors: 0, or -1 with ERR.
 */
#ifndef SBX_SERVE_HTTP_H
#define SBX_SERVE_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "isolate.h"
#include "serve_profile.h"

/* The largest request body (413 beyond): code of a few hundred KiB is
 * already far more than a model writes. */
#define SERVE_MAX_BODY (1u << 20)

struct serve_http_cfg {
    const struct serve_profile *profile;
    const struct iso_request *sup;  /* the sandboxes' request (supervisor) */
    const char *token;              /* bearer token, or NULL */
    size_t max_concurrent;          /* executions at once */
    size_t queue;                   /* executions waiting beyond that */
};

/* Serves on LISTEN_FD (a listening socket) until serve_http_stop. */
int serve_http_start(int listen_fd, const struct serve_http_cfg *cfg, char *err, size_t errsz);

/* SIGTERM: new executions get 503; waits (up to MAX_WAIT_MS) for those
 * running or queued to finish.  Returns how many were still running. */
long serve_http_drain(int max_wait_ms);

/* Stops listening and ends every connection. */
void serve_http_stop(void);

#endif
