/* openloop FILE N [create]: open and close FILE N times; prints ns per
 * open+close.  Run bare and under sbx-guard by bench/macro.py for the
 * guard's hot-path cost with full audit.  With "create" each open is
 * O_WRONLY|O_CREAT of the existing FILE: an open with a side effect, which
 * the guard decides on the resolved path before the call (the path
 * resolution's cost, component by component).  (Not a bench_* binary: it
 * takes arguments.) */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 3 && !(argc == 4 && strcmp(argv[3], "create") == 0)) {
        fprintf(stderr, "usage: openloop FILE N [create]\n");
        return 2;
    }
    long n = strtol(argv[2], NULL, 10);
    int flags = argc == 4 ? O_WRONLY | O_CREAT : O_RDONLY;
    /* One open before the clock starts: under the guard the first guarded
     * call of a process loads the policy and registers the event ring,
     * which is start-up (measured on its own), not the cost of an open. */
    int fd0 = open(argv[1], flags, 0644);
    if (fd0 < 0) {
        perror(argv[1]);
        return 1;
    }
    close(fd0);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        int fd = open(argv[1], flags, 0644);
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
