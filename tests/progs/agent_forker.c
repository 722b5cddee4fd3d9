/* forker MARKER N: a runaway agent.  Ignores SIGTERM, forks N children that
 * ignore it too and re-fork when they can, writes "ready" on stdout, then
 * sleeps forever.  Every process carries MARKER in its argv so a test can
 * look for survivors. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: forker MARKER N\n");
        return 2;
    }
    signal(SIGTERM, SIG_IGN);
    int n = (int)strtol(argv[2], NULL, 10);
    for (int i = 0; i < n; i++) {
        pid_t p = fork();
        if (p == 0) {
            /* A grandchild that leaves its parent: the kill must find it
             * anyway. */
            if (i % 10 == 0 && fork() == 0)
                setsid();
            for (;;)
                pause();
        }
    }
    printf("ready\n");
    fflush(stdout);
    for (;;)
        pause();
}
