/* lib_fake.c — a stand-in for libpcre2-8.so.0 and libyaml-0.so.2 that an
 * agent could put on LD_PRELOAD's neighbour, LD_LIBRARY_PATH: it has none
 * of their functions, and on load it leaves a mark (the file named by
 * SBX_TEST_FAKE_MARKER), so a test can tell whether the guard loaded it. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void fake_loaded(void)
{
    const char *m = getenv("SBX_TEST_FAKE_MARKER");
    if (m) {
        int fd = open(m, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0)
            close(fd);
    }
}
