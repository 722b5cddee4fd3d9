/* mt_open_fork FILE ROUNDS: 8 threads open and close FILE in a loop while
 * the main thread forks children that open FILE too and exit.  Under the
 * preload this must finish (no deadlock: a fork must never leave a lock held
 * in the child) and every open must succeed.  Exits 0 on success. */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *file;
static atomic_int stop;
static atomic_long failures;

static void *opener(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        int fd = open(file, O_RDONLY);
        if (fd < 0)
            atomic_fetch_add(&failures, 1);
        else
            close(fd);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: mt_open_fork FILE ROUNDS\n");
        return 2;
    }
    file = argv[1];
    int rounds = (int)strtol(argv[2], NULL, 10);
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, opener, NULL);
    for (int r = 0; r < rounds; r++) {
        pid_t p = fork();
        if (p == 0) {
            int fd = open(file, O_RDONLY);
            _exit(fd < 0 ? 1 : 0);
        }
        int st;
        if (waitpid(p, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            atomic_fetch_add(&failures, 1);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    long f = atomic_load(&failures);
    if (f) {
        fprintf(stderr, "mt_open_fork: %ld failures\n", f);
        return 1;
    }
    return 0;
}
