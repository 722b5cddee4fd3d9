/*
 * mt_fork — 8 threads open and close files while the main thread forks
 * children that open a file and exit (some exec /bin/true).  Under the
 * preload this must finish: no lock of the guard may be held across fork.
 * Usage: mt_fork FILE [ROUNDS]; exits 0 when every child exited 0.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *file;
static atomic_bool stop;

static void *opener(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        int fd = open(file, O_RDONLY);
        if (fd >= 0)
            close(fd);
        FILE *f = fopen(file, "r");
        if (f)
            fclose(f);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: mt_fork FILE [ROUNDS]\n");
        return 2;
    }
    file = argv[1];
    int rounds = argc > 2 ? atoi(argv[2]) : 50;
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, opener, NULL);
    int bad = 0;
    for (int i = 0; i < rounds; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            int fd = open(file, O_RDONLY);
            if (fd < 0)
                _exit(1);
            close(fd);
            if (i % 5 == 0) {
                execl("/bin/true", "true", (char *)NULL);
                _exit(3);
            }
            _exit(0);
        }
        int st;
        if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            bad++;
    }
    atomic_store(&stop, true);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    printf("%s\n", bad ? "failed" : "done");
    return bad ? 1 : 0;
}
