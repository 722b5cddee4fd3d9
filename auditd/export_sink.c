/* export_sink.c — the exporter's sinks: RELP (librelp), TCP syslog with
 * octet counting, a file, stdout (see export.h and export_int.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bsd/string.h>
#include <librelp.h>

#include "export_int.h"

enum sink_kind { SINK_RELP, SINK_TCP, SINK_FILE, SINK_STDOUT };

struct sink {
    enum sink_kind kind;
    char host[256], port[16];
    char path[4096];
    int fd;                     /* TCP socket or file; -1 when closed */
    relpEngine_t *engine;       /* RELP: one engine, a client per batch */
    relpClt_t *clt;
    bool relp_failed;           /* set by librelp's error callback */
    char relp_err[256];
    /* The answers "200" seen in this session, by transaction number: the
     * open is 1, the batch's frames 2..n+1 (the close's answer is empty). */
    unsigned char *acked;
    size_t acked_cap;           /* bits */
    size_t nacked;
    size_t nsent;               /* frames sent in this session, the open included */
    char *buf;                  /* TCP and file: the batch, written at end */
    size_t len, cap;
};

/* librelp reports a broken session, a timeout and every answer that is
 * not "200 OK" here, not in a return value (a frame's answer arrives
 * while a later one is sent): the batch is then not acknowledged. */
static void relp_on_err(void *usr, char *obj, char *msg, relpRetVal code)
{
    struct sink *s = usr;
    if (!s)
        return;
    if (!s->relp_failed)
        snprintf(s->relp_err, sizeof s->relp_err, "%s: %s (librelp %d)", obj ? obj : "relp",
                 msg ? msg : "error", code);
    s->relp_failed = true;
}

/* But not every lost answer: a collector that stops (rsyslog on SIGTERM)
 * sends the hint "serverclose" and drops the frames it had not yet
 * handled, and when the hint arrives while librelp waits for the close's
 * answer, librelp ends the session without an error and its destructor
 * returns success (librelp 1.11, cserverclose.c and relpSessWaitState).
 * So a batch counts as acknowledged only when the collector answered
 * "200" to every frame of it, each transaction number once: librelp
 * tells its client of an answer only in its debug printer, which it calls
 * for every one ("in rsp command handler, txnr %d, code %d, ...").  The
 * exporter has one session at a time per thread: its sink is here. */
static _Thread_local struct sink *relp_cur;

static void relp_saw_answer(struct sink *s, int txnr, int code)
{
    if (code != 200)
        return;                 /* relp_on_err has it */
    size_t t = (size_t)txnr;
    if (txnr < 1 || t > s->acked_cap) {
        if (!s->relp_failed)
            snprintf(s->relp_err, sizeof s->relp_err, "an answer to transaction %d, which "
                     "was not sent", txnr);
        s->relp_failed = true;
        return;
    }
    unsigned char bit = (unsigned char)(1u << ((t - 1) % 8));
    if (!(s->acked[(t - 1) / 8] & bit)) {
        s->acked[(t - 1) / 8] |= bit;
        s->nacked++;
    }
}

/* librelp's debug printer: it must be set (librelp calls it
 * unconditionally); the two messages above are read, the rest ignored. */
static void relp_dbg(char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void relp_dbg(char *fmt, ...)
{
    struct sink *s = relp_cur;
    if (!s || fmt[0] != 'i')
        return;
    if (strncmp(fmt, "in rsp command handler, txnr %d, code %d", 40) == 0) {
        va_list ap;
        va_start(ap, fmt);
        int txnr = va_arg(ap, int);
        int code = va_arg(ap, int);
        va_end(ap);
        relp_saw_answer(s, txnr, code);
    } else if (strncmp(fmt, "in serverclose command handler", 30) == 0) {
        if (!s->relp_failed)
            snprintf(s->relp_err, sizeof s->relp_err, "the collector closed the session "
                     "(serverclose) with frames unanswered");
        s->relp_failed = true;
    }
}

static void relp_on_generic_err(char *obj, char *msg, relpRetVal code)
{
    (void)obj, (void)msg, (void)code;
}

/* HOST:PORT, [V6]:PORT */
static int parse_hostport(const char *hp, struct sink *s, char *err, size_t errsz)
{
    const char *colon = strrchr(hp, ':');
    const char *h = hp, *hend = colon;
    if (*hp == '[') {
        const char *rb = strchr(hp, ']');
        if (!rb || rb[1] != ':')
            goto bad;
        h = hp + 1, hend = rb, colon = rb + 1;
    }
    if (!colon || hend == h || (size_t)(hend - h) >= sizeof s->host || !colon[1] ||
        strlen(colon + 1) >= sizeof s->port || strspn(colon + 1, "0123456789") != strlen(colon + 1))
        goto bad;
    memcpy(s->host, h, (size_t)(hend - h));
    s->host[hend - h] = '\0';
    strlcpy(s->port, colon + 1, sizeof s->port);
    return 0;
bad:
    snprintf(err, errsz, "'%s' is not HOST:PORT", hp);
    return -1;
}

int sink_open(const char *url, struct sink **out, char *err, size_t errsz)
{
    struct sink *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errsz, "out of memory");
        return -1;
    }
    s->fd = -1;
    if (strncmp(url, "relp://", 7) == 0) {
        s->kind = SINK_RELP;
        if (parse_hostport(url + 7, s, err, errsz) < 0)
            goto fail;
        if (relpEngineConstruct(&s->engine) != RELP_RET_OK) {
            snprintf(err, errsz, "cannot start librelp");
            goto fail;
        }
        relpEngineSetDbgprint(s->engine, relp_dbg);
        relpEngineSetOnErr(s->engine, relp_on_err);
        relpEngineSetOnGenericErr(s->engine, relp_on_generic_err);
        relpEngineSetEnableCmd(s->engine, (unsigned char *)"syslog", eRelpCmdState_Required);
    } else if (strncmp(url, "tcp://", 6) == 0) {
        s->kind = SINK_TCP;
        if (parse_hostport(url + 6, s, err, errsz) < 0)
            goto fail;
    } else if (strncmp(url, "file:", 5) == 0 && url[5]) {
        s->kind = SINK_FILE;
        if (strlcpy(s->path, url + 5, sizeof s->path) >= sizeof s->path) {
            snprintf(err, errsz, "file name too long");
            goto fail;
        }
    } else if (strcmp(url, "-") == 0 || strcmp(url, "stdout") == 0) {
        s->kind = SINK_STDOUT;
        s->fd = STDOUT_FILENO;
    } else {
        snprintf(err, errsz, "unknown sink '%s' (relp://HOST:PORT, tcp://HOST:PORT, file:PATH "
                 "or -)", url);
        goto fail;
    }
    *out = s;
    return 0;
fail:
    sink_close(s);
    return -1;
}

bool sink_is_syslog(const struct sink *s)
{
    return s->kind == SINK_RELP || s->kind == SINK_TCP;
}

static int tcp_connect(struct sink *s, char *err, size_t errsz)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL;
    int rc = getaddrinfo(s->host, s->port, &hints, &ai);
    if (rc != 0) {
        snprintf(err, errsz, "%s:%s: %s", s->host, s->port, gai_strerror(rc));
        return -1;
    }
    int e = 0;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            e = errno;
            continue;
        }
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
            s->fd = fd;
            break;
        }
        e = errno;
        close(fd);
    }
    freeaddrinfo(ai);
    if (s->fd < 0) {
        snprintf(err, errsz, "connect %s:%s: %s", s->host, s->port, strerror(e));
        return -1;
    }
    return 0;
}

/* Room in the answer bitmap for transaction N. */
static int acked_room(struct sink *s, size_t n, char *err, size_t errsz)
{
    if (n <= s->acked_cap)
        return 0;
    size_t cap = s->acked_cap ? s->acked_cap * 2 : 8192;
    while (cap < n)
        cap *= 2;
    unsigned char *a = realloc(s->acked, cap / 8);
    if (!a) {
        snprintf(err, errsz, "out of memory");
        return -1;
    }
    memset(a + s->acked_cap / 8, 0, (cap - s->acked_cap) / 8);
    s->acked = a;
    s->acked_cap = cap;
    return 0;
}

int sink_begin(struct sink *s, char *err, size_t errsz)
{
    s->len = 0;
    switch (s->kind) {
    case SINK_RELP:
        /* A client (session) per batch: closing it is the one way librelp
         * offers to wait until every frame sent was answered (the close
         * command is answered after them). */
        s->relp_failed = false;
        s->relp_err[0] = '\0';
        s->nacked = 0;
        s->nsent = 1;           /* the open */
        if (s->acked)
            memset(s->acked, 0, (s->acked_cap + 7) / 8);
        if (acked_room(s, 2, err, errsz) < 0)
            return -1;
        relp_cur = s;
        if (relpEngineCltConstruct(s->engine, &s->clt) != RELP_RET_OK) {
            snprintf(err, errsz, "librelp: cannot make a client");
            return -1;
        }
        relpCltSetUsrPtr(s->clt, s);
        relpCltSetTimeout(s->clt, 10);
        relpCltSetWindowSize(s->clt, 1024);
        if (relpCltConnect(s->clt, 0, (unsigned char *)s->port,
                           (unsigned char *)s->host) != RELP_RET_OK) {
            snprintf(err, errsz, "relp://%s:%s: cannot connect", s->host, s->port);
            return -1;
        }
        /* TCP_CORK for the batch: frames leave in full segments. */
        relpCltHintBurstBegin(s->clt);
        return 0;
    case SINK_TCP:
        return s->fd >= 0 ? 0 : tcp_connect(s, err, errsz);
    case SINK_FILE:
        if (s->fd < 0) {
            s->fd = open(s->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
            if (s->fd < 0) {
                snprintf(err, errsz, "%s: %s", s->path, strerror(errno));
                return -1;
            }
        }
        return 0;
    case SINK_STDOUT:
        return 0;
    }
    return -1;
}

static int buf_add(struct sink *s, const char *p, size_t n, char *err, size_t errsz)
{
    if (s->len + n > s->cap) {
        size_t cap = s->cap ? s->cap : 65536;
        while (cap < s->len + n)
            cap *= 2;
        char *b = realloc(s->buf, cap);
        if (!b) {
            snprintf(err, errsz, "out of memory");
            return -1;
        }
        s->buf = b;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, p, n);
    s->len += n;
    return 0;
}

int sink_send(struct sink *s, const char *msg, size_t len, char *err, size_t errsz)
{
    if (s->kind == SINK_RELP) {
        if (acked_room(s, s->nsent + 1, err, errsz) < 0)
            return -1;
        s->nsent++;
        if (relpCltSendSyslog(s->clt, (unsigned char *)msg, len) != RELP_RET_OK || s->relp_failed) {
            snprintf(err, errsz, "relp://%s:%s: %s", s->host, s->port,
                     s->relp_err[0] ? s->relp_err : "send failed");
            return -1;
        }
        return 0;
    }
    if (s->kind == SINK_TCP) {
        /* RFC 6587 octet counting: "LEN SP MSG" */
        char pre[24];
        int n = snprintf(pre, sizeof pre, "%zu ", len);
        return buf_add(s, pre, (size_t)n, err, errsz) < 0 ? -1 : buf_add(s, msg, len, err, errsz);
    }
    if (buf_add(s, msg, len, err, errsz) < 0)
        return -1;
    return buf_add(s, "\n", 1, err, errsz);
}

static int write_all(int fd, const char *p, size_t n, char *err, size_t errsz)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == ENOTSOCK)
            w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            snprintf(err, errsz, "write: %s", strerror(errno));
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int sink_end(struct sink *s, char *err, size_t errsz)
{
    switch (s->kind) {
    case SINK_RELP: {
        /* Destroying the client sends "close" and waits for its answer,
         * which comes after the answers to every frame before it (unless
         * the collector closes first: see relp_dbg).  librelp's server
         * answers the close with an empty answer, which librelp's client
         * cannot parse and so ends the wait without an error: the close
         * is not counted, only the frames before it. */
        relpCltHintBurstEnd(s->clt);
        relpEngineCltDestruct(s->engine, &s->clt);
        s->clt = NULL;
        relp_cur = NULL;
        if (!s->relp_failed && s->nacked != s->nsent) {
            size_t t = 1;
            while (t <= s->nsent && (s->acked[(t - 1) / 8] & (1u << ((t - 1) % 8))))
                t++;
            snprintf(s->relp_err, sizeof s->relp_err, "%zu of %zu frames answered (the first "
                     "unanswered: transaction %zu)", s->nacked, s->nsent, t);
        }
        if (s->relp_failed || s->nacked != s->nsent) {
            snprintf(err, errsz, "relp://%s:%s: not acknowledged: %s", s->host, s->port,
                     s->relp_err);
            return -1;
        }
        return 0;
    }
    case SINK_TCP:
    case SINK_STDOUT:
        return write_all(s->fd, s->buf, s->len, err, errsz);
    case SINK_FILE:
        if (write_all(s->fd, s->buf, s->len, err, errsz) < 0)
            return -1;
        if (fsync(s->fd) < 0) {
            snprintf(err, errsz, "%s: fsync: %s", s->path, strerror(errno));
            return -1;
        }
        return 0;
    }
    return -1;
}

void sink_abort(struct sink *s)
{
    if (s->clt) {
        /* A broken session does not wait for a close answer. */
        relpEngineCltDestruct(s->engine, &s->clt);
        s->clt = NULL;
    }
    if (relp_cur == s)
        relp_cur = NULL;
    if ((s->kind == SINK_TCP || s->kind == SINK_FILE) && s->fd >= 0) {
        close(s->fd);
        s->fd = -1;
    }
}

void sink_close(struct sink *s)
{
    if (!s)
        return;
    sink_abort(s);
    if (s->engine)
        relpEngineDestruct(&s->engine);
    free(s->buf);
    free(s->acked);
    free(s);
}
