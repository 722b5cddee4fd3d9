/* openloop FILE N: open and close FILE N times; prints ns per open+close.
 * Run bare and under sbx-guard by bench/macro.py for the guard's hot-path
 * cost with full audit.  (Not a bench_* binary: it takes arguments.) */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: openloop FILE N\n");
        return 2;
    }
    long n = strtol(argv[2], NULL, 10);
    /* One open before the clock starts: under the guard the first guarded
     * call of a process loads the policy and registers the event ring,
     * which is start-up (measured on its own), not the cost of an open. */
    int fd0 = open(argv[1], O_RDONLY);
    if (fd0 < 0) {
        perror(argv[1]);
        return 1;
    }
    close(fd0);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        int fd = open(argv[1], O_RDONLY);
        if (fd < 0) {
            perror(argv[1]);
            return 1;
        }
        close(fd);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)n;
    printf("%.0f ns per open+close\n", ns);
    return 0;
}
