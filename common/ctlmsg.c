/* ctlmsg.c — the control protocol's message codec (see ctlmsg.h). */
#include "ctlmsg.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static bool key_ok(const char *k, size_t n)
{
    if (n == 0 || n > 31)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((k[i] >= 'a' && k[i] <= 'z') || (k[i] >= '0' && k[i] <= '9') || k[i] == '_'))
            return false;
    return true;
}

int sbx_msg_parse(char *buf, size_t n, struct sbx_msg *m, char *err, size_t errsz)
{
    memset(m, 0, sizeof *m);
    if (n == 0 || n > SBX_CTL_MAX) {
        snprintf(err, errsz, "message size %zu out of range", n);
        return -1;
    }
    if (memchr(buf, '\0', n)) {
        snprintf(err, errsz, "NUL byte in message");
        return -1;
    }
    if (buf[n - 1] != '\n') {
        snprintf(err, errsz, "message does not end with a newline");
        return -1;
    }
    buf[n] = '\0';
    char *line = buf;
    char *nl = strchr(line, '\n');
    *nl = '\0';
    size_t vl = strlen(line);
    bool verb_ok = vl > 0 && vl <= 15;
    for (size_t i = 0; i < vl; i++)
        if (line[i] < 'A' || line[i] > 'Z')
            verb_ok = false;
    if (!verb_ok) {
        snprintf(err, errsz, "bad verb");
        return -1;
    }
    m->verb = line;
    for (line = nl + 1; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        *nl = '\0';
        char *eq = strchr(line, '=');
        if (!eq || !key_ok(line, (size_t)(eq - line))) {
            snprintf(err, errsz, "malformed field line");
            return -1;
        }
        *eq = '\0';
        for (unsigned i = 0; i < m->nf; i++)
            if (strcmp(m->f[i].key, line) == 0) {
                snprintf(err, errsz, "duplicate field '%s'", line);
                return -1;
            }
        if (m->nf == SBX_CTL_MAX_FIELDS) {
            snprintf(err, errsz, "too many fields");
            return -1;
        }
        /* Unescape in place: the result is never longer. */
        char *w = eq + 1;
        for (char *r = eq + 1; *r; r++) {
            if (*r != '\\') {
                *w++ = *r;
                continue;
            }
            r++;
            if (*r == 'n')
                *w++ = '\n';
            else if (*r == '\\')
                *w++ = '\\';
            else {
                snprintf(err, errsz, "bad escape in field '%s'", line);
                return -1;
            }
        }
        *w = '\0';
        m->f[m->nf].key = line;
        m->f[m->nf].val = eq + 1;
        m->nf++;
    }
    return 0;
}

const char *sbx_msg_get(const struct sbx_msg *m, const char *key)
{
    for (unsigned i = 0; i < m->nf; i++)
        if (strcmp(m->f[i].key, key) == 0)
            return m->f[i].val;
    return NULL;
}

bool sbx_msg_keys_ok(const struct sbx_msg *m, const char *const *keys, char *err, size_t errsz)
{
    for (unsigned i = 0; i < m->nf; i++) {
        const char *const *k;
        for (k = keys; *k; k++)
            if (strcmp(*k, m->f[i].key) == 0)
                break;
        if (!*k) {
            snprintf(err, errsz, "unknown field '%s' for %s", m->f[i].key, m->verb);
            return false;
        }
    }
    return true;
}

static void append(struct sbx_msgbuf *b, const char *s, size_t n)
{
    if (b->overflow || b->len + n > sizeof b->buf) {
        b->overflow = true;
        return;
    }
    memcpy(b->buf + b->len, s, n);
    b->len += n;
}

void sbx_msg_start(struct sbx_msgbuf *b, const char *verb)
{
    b->len = 0;
    b->overflow = false;
    append(b, verb, strlen(verb));
    append(b, "\n", 1);
}

void sbx_msg_add(struct sbx_msgbuf *b, const char *key, const char *val)
{
    if (!val)
        return;
    append(b, key, strlen(key));
    append(b, "=", 1);
    for (const char *p = val; *p; p++) {
        if (*p == '\\')
            append(b, "\\\\", 2);
        else if (*p == '\n')
            append(b, "\\n", 2);
        else
            append(b, p, 1);
    }
    append(b, "\n", 1);
}

void sbx_msg_addf(struct sbx_msgbuf *b, const char *key, const char *fmt, ...)
{
    char v[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(v, sizeof v, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof v) {
        b->overflow = true;
        return;
    }
    sbx_msg_add(b, key, v);
}

/* Waits for room at most SEND_TIMEOUT_MS: a daemon so far behind that the
 * socket's buffer stays full must not hold a client for good (sbx-guard,
 * which also relays signals and supervises the agent, least of all). */
#define SEND_TIMEOUT_MS 10000

int sbx_msg_send(int fd, const struct sbx_msgbuf *b)
{
    if (b->overflow) {
        errno = EMSGSIZE;
        return -1;
    }
    return sbx_msg_send_bytes(fd, b->buf, b->len);
}

int sbx_msg_send_bytes(int fd, const char *buf, size_t len)
{
    for (;;) {
        ssize_t w = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w == (ssize_t)len)
            return 0;
        if (w >= 0) {
            errno = EMSGSIZE;   /* a datagram goes whole or not at all */
            return -1;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -1;
        struct pollfd p = { .fd = fd, .events = POLLOUT };
        int n = poll(&p, 1, SEND_TIMEOUT_MS);
        if (n == 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        if (n < 0 && errno != EINTR)
            return -1;
    }
}

int sbx_unix_addr(const char *path, struct sockaddr_un *sa, int *dirfd)
{
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    *dirfd = -1;
    size_t n = strlen(path);
    if (n < sizeof sa->sun_path) {
        memcpy(sa->sun_path, path, n + 1);
        return 0;
    }
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path || strlen(slash) > 64) {
        errno = ENAMETOOLONG;
        return -1;
    }
    char dir[4096];
    size_t dl = (size_t)(slash - path);
    if (dl >= sizeof dir) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(dir, path, dl);
    dir[dl] = '\0';
    int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    snprintf(sa->sun_path, sizeof sa->sun_path, "/proc/self/fd/%d%s", fd, slash);
    *dirfd = fd;
    return 0;
}
