/* agent_cwd: relative paths after every way the current directory can
 * change, under a policy that denies reading private/ (the guard remembers
 * the current directory for a moment; a remembered directory must never
 * outlive a change).  Run from the workspace, which holds private/x and
 * pub.txt.  Each step prints "ok STEP" or "FAIL STEP ..." and the exit
 * status is the number of failures; the test also checks the rows.
 *
 *   chdir       chdir into private/: a relative read there is denied
 *   fchdir      back with fchdir: pub.txt readable, private/x denied
 *   syscall     syscall(SYS_chdir) into private/: denied again
 *   thread      another thread changes directory; this one follows
 *   rename      d1/sub is the cwd; rename d1 -> d2 (relative): a file
 *               created afterwards is recorded as d2/sub/g
 *   other       another process renames d2 -> d3; a tick later a file
 *               created here is recorded as d3/sub/k
 *   nftw        nftw(FTW_CHDIR) over tree/: the callback's relative
 *               opens are recorded under tree/
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int failures;

static void check(const char *step, int ok, const char *what)
{
    if (ok) {
        printf("ok %s\n", step);
    } else {
        printf("FAIL %s: %s (errno %d)\n", step, what, errno);
        failures++;
    }
}

/* 0 if PATH opens for reading, else the errno. */
static int try_read(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return errno;
    close(fd);
    return 0;
}

static int make_file(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return errno;
    close(fd);
    return 0;
}

static void *thread_chdir(void *arg)
{
    return (void *)(long)chdir((const char *)arg);
}

static int visited;

static int visit(const char *path, const struct stat *st, int type, struct FTW *f)
{
    (void)st;
    if (type == FTW_F) {
        /* FTW_CHDIR: the cwd is the file's directory; open it by its
         * base name, as such callbacks do. */
        if (try_read(path + f->base) == 0)
            visited++;
    }
    return 0;
}

int main(void)
{
    /* Warm the remembered directory in the workspace. */
    check("start", try_read("pub.txt") == 0, "pub.txt");
    check("start-deny", try_read("private/x") == EACCES, "private/x readable");

    int ws = open(".", O_RDONLY | O_DIRECTORY);
    check("chdir", chdir("private") == 0 && try_read("x") == EACCES, "x readable in private/");
    check("fchdir", fchdir(ws) == 0 && try_read("pub.txt") == 0 &&
          try_read("private/x") == EACCES, "after fchdir");
    check("syscall", syscall(SYS_chdir, "private") == 0 && try_read("x") == EACCES,
          "x readable after syscall(SYS_chdir)");
    check("syscall-back", syscall(SYS_fchdir, ws) == 0 && try_read("pub.txt") == 0,
          "after syscall(SYS_fchdir)");

    pthread_t t;
    void *rc = (void *)1;
    check("thread", pthread_create(&t, NULL, thread_chdir, "private") == 0 &&
          pthread_join(t, &rc) == 0 && rc == NULL && try_read("x") == EACCES,
          "x readable after another thread's chdir");
    check("thread-back", fchdir(ws) == 0, "fchdir");

    check("rename-setup", mkdir("d1", 0755) == 0 && mkdir("d1/sub", 0755) == 0 &&
          chdir("d1/sub") == 0 && make_file("f") == 0, "d1/sub/f");
    check("rename", rename("../../d1", "../../d2") == 0 && make_file("g") == 0,
          "rename, then d2/sub/g");

    pid_t pid = fork();
    if (pid == 0) {
        execlp("mv", "mv", "../../d2", "../../d3", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    check("other", pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
          WEXITSTATUS(st) == 0, "mv d2 d3 in a child");
    /* The remembered directory lives until the coarse clock ticks on: at
     * most 4 ms with HZ=250, 10 ms with HZ=100. */
    struct timespec ms12 = {0, 12 * 1000 * 1000};
    nanosleep(&ms12, NULL);
    check("other-k", make_file("k") == 0, "d3/sub/k");

    check("nftw-setup", fchdir(ws) == 0 && mkdir("tree", 0755) == 0 &&
          mkdir("tree/a", 0755) == 0 && make_file("tree/a/leaf1") == 0 &&
          make_file("tree/leaf2") == 0, "tree/");
    visited = 0;
    check("nftw", nftw("tree", visit, 8, FTW_CHDIR | FTW_PHYS) == 0 && visited == 2,
          "both leaves read");
    return failures;
}
