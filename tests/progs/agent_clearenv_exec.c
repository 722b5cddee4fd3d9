/* clearenv_exec PROG [ARG...]: drops the whole environment (LD_PRELOAD and
 * every SBX_ variable with it) and execs PROG, the way an agent might try to
 * shake off the guard.  Exits 127 if the exec fails, 126 if it is denied. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: clearenv_exec PROG [ARG...]\n");
        return 2;
    }
    char *const empty[] = { NULL };
    execve(argv[1], argv + 1, empty);
    fprintf(stderr, "clearenv_exec: %s: %s\n", argv[1], strerror(errno));
    return errno == EACCES ? 126 : 127;
}
