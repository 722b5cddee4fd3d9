/*
 * serve_client.h — a minimal HTTP/1.1 client (one request per connection,
 * Connection: close, Content-Length or chunked answers) over TCP or a unix
 * socket, and `sbx-serve --verify`: the six checks of SERVE.md against any
 * service of that API.
 *
 * Memory: serve_client_request's *BODY is malloc'd, the caller frees it.
 * Errors: 0, or -1 with ERR ("what: why").
 */
#ifndef SBX_SERVE_CLIENT_H
#define SBX_SERVE_CLIENT_H

#include <stddef.h>
#include <stdio.h>

/* The answers kept are at most this long. */
#define SERVE_CLIENT_MAX (16u << 20)

/* METHOD PATH on the service at URL (http://HOST[:PORT][/PREFIX] or
 * unix:/SOCKET), with JSON BODY (or NULL), within TIMEOUT_MS.  *STATUS
 * and *RESP (NUL-terminated) filled. */
int serve_client_request(const char *url, const char *method, const char *path,
                         const char *body, int timeout_ms, int *status, char **resp,
                         char *err, size_t errsz);

/* Runs the six checks against URL, prints the table to OUT.  0 when all
 * pass, 1 when one fails. */
int serve_verify(const char *url, FILE *out);

#endif
