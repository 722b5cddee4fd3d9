/*
 * serve_client.c — the HTTP client and --verify (serve_client.h).
 */
#include "serve_client.h"
#include "serve_text.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <bsd/string.h>
#include <jansson.h>

static long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Connects to URL; fills HOSTHDR and PREFIX (the URL's path).  fd or -1. */
static int dial(const char *url, char *hosthdr, size_t hsz, char *prefix, size_t psz,
                char *err, size_t errsz)
{
    int fd;

    prefix[0] = '\0';
    if (strncmp(url, "unix:", 5) == 0) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlcpy(sa.sun_path, url + 5, sizeof sa.sun_path) >= sizeof sa.sun_path) {
            serve_errf(err, errsz, "%s: path too long", url);
            return -1;
        }
        strlcpy(hosthdr, "localhost", hsz);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
            serve_errf(err, errsz, "%s: %s", url, strerror(errno));
            if (fd >= 0)
                close(fd);
            return -1;
        }
        return fd;
    }
    if (strncmp(url, "http://", 7) != 0) {
        serve_errf(err, errsz, "%s: http://HOST[:PORT] or unix:/PATH", url);
        return -1;
    }
    char host[256], port[16] = "80";
    const char *h = url + 7, *slash = strchr(h, '/');
    size_t hl = slash ? (size_t)(slash - h) : strlen(h);
    if (hl == 0 || hl >= sizeof host) {
        serve_errf(err, errsz, "%s: bad host", url);
        return -1;
    }
    memcpy(host, h, hl);
    host[hl] = '\0';
    strlcpy(hosthdr, host, hsz);
    if (slash)
        strlcpy(prefix, slash, psz);
    size_t pl = strlen(prefix);
    while (pl && prefix[pl - 1] == '/')
        prefix[--pl] = '\0';
    char *colon = strrchr(host, ':');
    if (colon && (host[0] != '[' || colon > strchr(host, ']'))) {
        *colon = '\0';
        strlcpy(port, colon + 1, sizeof port);
    }
    if (host[0] == '[') {
        memmove(host, host + 1, strlen(host));
        host[strcspn(host, "]")] = '\0';
    }
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai, *p;
    int rc = getaddrinfo(host, port, &hints, &ai);
    if (rc != 0) {
        serve_errf(err, errsz, "%s: %s", host, gai_strerror(rc));
        return -1;
    }
    fd = -1;
    for (p = ai; p; p = p->ai_next) {
        fd = socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol);
        if (fd >= 0 && connect(fd, p->ai_addr, p->ai_addrlen) == 0)
            break;
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
    if (fd < 0)
        serve_errf(err, errsz, "connect to %s:%s: %s", host, port, strerror(errno));
    freeaddrinfo(ai);
    return fd;
}

/* Decodes a chunked body in place; its new length. */
static size_t unchunk(char *b, size_t len)
{
    size_t in = 0, out = 0;

    while (in < len) {
        char *end;
        unsigned long n = strtoul(b + in, &end, 16);
        char *nl = memchr(b + in, '\n', len - in);
        if (nl == NULL || end == b + in)
            break;
        in = (size_t)(nl - b) + 1;
        if (n == 0 || n > len - in)
            break;
        memmove(b + out, b + in, n);
        out += n;
        in += n;
        if (in < len && b[in] == '\r')
            in++;
        if (in < len && b[in] == '\n')
            in++;
    }
    b[out] = '\0';
    return out;
}

int serve_client_request(const char *url, const char *method, const char *path,
                         const char *body, int timeout_ms, int *status, char **resp,
                         char *err, size_t errsz)
{
    char hosthdr[300], prefix[1024], head[2048];
    char *buf = NULL;
    size_t len = 0, cap = 0, blen = body ? strlen(body) : 0;
    long deadline = now_ms() + timeout_ms;
    int fd = dial(url, hosthdr, sizeof hosthdr, prefix, sizeof prefix, err, errsz), rc = -1;

    *resp = NULL;
    if (fd < 0)
        return -1;
    int hl = snprintf(head, sizeof head,
                      "%s %s%s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n"
                      "User-Agent: sbx-serve-verify\r\nAccept: application/json\r\n"
                      "%s%s%zu\r\n\r\n", method, prefix, path, hosthdr,
                      body ? "Content-Type: application/json\r\n" : "",
                      "Content-Length: ", blen);
    if (hl < 0 || (size_t)hl >= sizeof head
        || send(fd, head, (size_t)hl, MSG_NOSIGNAL) != hl
        || (blen && send(fd, body, blen, MSG_NOSIGNAL) != (ssize_t)blen)) {
        serve_errf(err, errsz, "send: %s", strerror(errno));
        goto out;
    }
    for (;;) {
        long left = deadline - now_ms();
        struct pollfd pf = { fd, POLLIN, 0 };
        if (left <= 0) {
            serve_errf(err, errsz, "no complete answer within %d ms", timeout_ms);
            goto out;
        }
        if (poll(&pf, 1, (int)left) <= 0)
            continue;
        if (cap - len < 65536) {
            if (cap >= SERVE_CLIENT_MAX) {
                serve_errf(err, errsz, "the answer is longer than %u bytes", SERVE_CLIENT_MAX);
                goto out;
            }
            cap = cap ? cap * 2 : 131072;
            char *nb = realloc(buf, cap + 1);
            if (nb == NULL) {
                serve_errf(err, errsz, "out of memory");
                goto out;
            }
            buf = nb;
        }
        ssize_t n = recv(fd, buf + len, cap - len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            serve_errf(err, errsz, "recv: %s", strerror(errno));
            goto out;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    if (buf == NULL) {
        serve_errf(err, errsz, "the connection closed without an answer");
        goto out;
    }
    buf[len] = '\0';
    char *eoh = strstr(buf, "\r\n\r\n");
    if (strncmp(buf, "HTTP/1.", 7) != 0 || eoh == NULL || sscanf(buf + 8, " %d", status) != 1) {
        serve_errf(err, errsz, "not an HTTP answer: %.80s", buf);
        goto out;
    }
    *eoh = '\0';
    bool chunked = strcasestr(buf, "\r\ntransfer-encoding: chunked") != NULL;
    size_t blen2 = len - (size_t)(eoh + 4 - buf);
    memmove(buf, eoh + 4, blen2);
    buf[blen2] = '\0';
    if (chunked)
        unchunk(buf, blen2);
    *resp = buf;
    buf = NULL;
    rc = 0;
out:
    free(buf);
    close(fd);
    return rc;
}

struct check {
    const char *title, *method, *path, *body;
    int timeout_ms;
};

/* Whether check I passed, given the answer; WHY says what was expected. */
static bool judge(int i, int status, const char *resp, const char **why)
{
    json_t *o = json_loads(resp, 0, NULL), *v;
    bool ok = false;

    switch (i) {
    case 0:
        *why = "expected 200 {\"status\":\"ok\"}";
        ok = status == 200 && (v = json_object_get(o, "status")) && json_is_string(v)
             && strcmp(json_string_value(v), "ok") == 0;
        break;
    case 1:
        *why = "expected 200 with name and allowed_imports";
        ok = status == 200 && json_is_string(json_object_get(o, "name"))
             && json_is_array(json_object_get(o, "allowed_imports"));
        break;
    case 2:
        *why = "expected 200, stdout containing \"pi = 3.14\", exit_code 0";
        ok = status == 200 && (v = json_object_get(o, "stdout")) && json_is_string(v)
             && strstr(json_string_value(v), "pi = 3.14")
             && json_is_integer(json_object_get(o, "exit_code"))
             && json_integer_value(json_object_get(o, "exit_code")) == 0;
        break;
    case 3:
    case 4:
        *why = "expected HTTP 400";
        ok = status == 400;
        break;
    case 5:
        *why = "expected 200 with timed_out true";
        ok = status == 200 && json_is_true(json_object_get(o, "timed_out"));
        break;
    }
    json_decref(o);
    return ok;
}

int serve_verify(const char *url, FILE *out)
{
    static const struct check checks[] = {
        { "GET /healthz", "GET", "/healthz", NULL, 10000 },
        { "GET /profile", "GET", "/profile", NULL, 10000 },
        { "execute: math.pi printed", "POST", "/execute",
          "{\"code\":\"import math\\nprint(f\\\"pi = {math.pi}\\\")\"}", 40000 },
        { "execute: eval(\"1+1\") rejected", "POST", "/execute",
          "{\"code\":\"eval(\\\"1+1\\\")\"}", 40000 },
        { "execute: import subprocess rejected", "POST", "/execute",
          "{\"code\":\"import subprocess\"}", 40000 },
        { "execute: while True times out (2 s)", "POST", "/execute",
          "{\"code\":\"while True: pass\",\"timeout\":2}", 40000 },
    };
    int failed = 0;

    fprintf(out, "sbx-serve --verify %s\n\n", url);
    for (int i = 0; i < 6; i++) {
        char err[512], *resp = NULL;
        int status = 0;
        const char *why = "";
        bool ok = serve_client_request(url, checks[i].method, checks[i].path, checks[i].body,
                                       checks[i].timeout_ms, &status, &resp, err,
                                       sizeof err) == 0
                  && judge(i, status, resp, &why);
        fprintf(out, "  %s %d. %s\n", ok ? "\u2713" : "\u2717", i + 1, checks[i].title);
        if (!ok) {
            failed++;
            if (resp)
                fprintf(out, "       %s; got HTTP %d: %.300s%s\n", why, status, resp,
                        strlen(resp) > 300 ? "..." : "");
            else
                fprintf(out, "       %s\n", err);
        }
        free(resp);
    }
    fprintf(out, "\n%d of 6 checks passed\n", 6 - failed);
    return failed ? 1 : 0;
}
