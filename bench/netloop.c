/*
 * netloop — the network figures of `make bench` (bench/net.py runs it bare
 * and under sbx-guard).
 *
 *   netloop connect IP PORT N     N times connect() + close() to IP:PORT
 *   netloop dns IP PORT NAME N    N DNS queries (A) for NAME sent to IP:PORT,
 *                                 each waiting for its answer
 *
 * Prints "P50 ns p50, P99 ns p99" of one operation.  Exit 1 on the first
 * failure, with why.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int addr_of(const char *ip, const char *port, struct sockaddr_in *sa)
{
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)strtoul(port, NULL, 10));
    return inet_pton(AF_INET, ip, &sa->sin_addr) == 1 ? 0 : -1;
}

/* A query for NAME, type A, id ID; its length. */
static size_t query(unsigned char *m, const char *name, uint16_t id)
{
    size_t o = 12;
    memset(m, 0, 12);
    m[0] = (unsigned char)(id >> 8);
    m[1] = (unsigned char)id;
    m[2] = 0x01;
    m[5] = 1;
    for (const char *p = name; *p;) {
        const char *dot = strchr(p, '.');
        size_t l = dot ? (size_t)(dot - p) : strlen(p);
        m[o++] = (unsigned char)l;
        memcpy(m + o, p, l);
        o += l;
        p += l + (dot ? 1 : 0);
    }
    m[o++] = 0;
    m[o++] = 0; m[o++] = 1; m[o++] = 0; m[o++] = 1;
    return o;
}

int main(int argc, char **argv)
{
    struct sockaddr_in sa;
    uint64_t *t;
    long n;
    int s = -1;

    if (argc < 5 || (strcmp(argv[1], "dns") == 0 && argc < 6)) {
        fprintf(stderr, "usage: netloop connect IP PORT N | netloop dns IP PORT NAME N\n");
        return 2;
    }
    n = strtol(argv[argc - 1], NULL, 10);
    if (n <= 0 || addr_of(argv[2], argv[3], &sa) < 0 || (t = calloc((size_t)n, 8)) == NULL)
        return 2;
    if (strcmp(argv[1], "dns") == 0) {
        s = socket(AF_INET, SOCK_DGRAM, 0);
        if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof sa) < 0) {
            perror("netloop: dns socket");
            return 1;
        }
    }
    for (long i = 0; i < n; i++) {
        uint64_t t0 = now_ns();
        if (s < 0) {
            int c = socket(AF_INET, SOCK_STREAM, 0);
            if (c < 0 || connect(c, (struct sockaddr *)&sa, sizeof sa) < 0) {
                perror("netloop: connect");
                return 1;
            }
            close(c);
        } else {
            unsigned char q[512], r[4096];
            size_t ql = query(q, argv[4], (uint16_t)i);
            struct pollfd pf = { s, POLLIN, 0 };
            if (send(s, q, ql, 0) < 0 || poll(&pf, 1, 2000) != 1 || recv(s, r, sizeof r, 0) < 12
                || r[0] != q[0] || r[1] != q[1]) {
                fprintf(stderr, "netloop: no answer to query %ld\n", i);
                return 1;
            }
        }
        t[i] = now_ns() - t0;
    }
    qsort(t, (size_t)n, 8, cmp);
    printf("%llu ns p50, %llu ns p99\n", (unsigned long long)t[n / 2],
           (unsigned long long)t[(size_t)((double)n * 0.99)]);
    return 0;
}
