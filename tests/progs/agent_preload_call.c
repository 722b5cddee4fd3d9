/*
 * preload_call — makes one libc call named on the command line and prints
 * "ok" (with a result) or "err NAME" (the errno), so that the preload's
 * integration tests can check each interposer from a shell.
 *
 *   preload_call open PATH | openat DIR REL | creat PATH | fopen PATH MODE
 *   preload_call open_until_denied PATH  (up to 2000 opens, 1 ms apart)
 *   preload_call opendir PATH | sys_open PATH | sys_openat2 PATH
 *   preload_call unlink PATH | rmdir PATH | mkdir PATH | rename A B | link A B
 *   preload_call symlink TARGET PATH | chmod PATH | truncate PATH LEN
 *   preload_call ftruncate PATH LEN | execve PATH ARG... | execvp FILE ARG...
 *   preload_call posix_spawn PATH ARG... | posix_spawnp FILE ARG...
 *   preload_call system CMD | popen CMD

 *   (for the exec and spawn ops the ARGs are the whole argv, argv[0] first)
 *   preload_call sys_execve PATH ARG... | fexecve PATH ARG...
 *   preload_call connect IP PORT | resolve_connect NAME PORT | sendto IP PORT
 *   preload_call unix_connect PATH | bind IP PORT
 *   preload_call exec_noenv PATH ARG...   (execve with an empty environment)
 *   preload_call exec_unset PATH ARG...   (unsetenv LD_PRELOAD and SBX_*, execv)
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/openat2.h>

extern char **environ;

static int report(long rc)
{
    if (rc < 0) {
        int e = errno;
        printf("err %s\n", e == EACCES ? "EACCES" : e == EPERM ? "EPERM" : e == ENOENT ? "ENOENT"
                           : e == EFBIG ? "EFBIG" : e == ECONNREFUSED ? "ECONNREFUSED"
                           : strerror(e));
        return 1;
    }
    printf("ok %ld\n", rc);
    return 0;
}

static int spawn_result(int err, pid_t pid)
{
    if (err) {
        errno = err;
        return report(-1);
    }
    int st;
    waitpid(pid, &st, 0);
    return report(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

static int tcp(const struct sockaddr *sa, socklen_t len, int udp)
{
    int fd = socket(sa->sa_family, udp ? SOCK_DGRAM : SOCK_STREAM, 0);
    if (fd < 0)
        return report(-1);
    if (udp)
        return report(sendto(fd, "x", 1, 0, sa, len));
    return report(connect(fd, sa, len));
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: preload_call OP ARG...\n");
        return 2;
    }
    const char *op = argv[1], *a = argv[2], *b = argc > 3 ? argv[3] : NULL;
    setvbuf(stdout, NULL, _IONBF, 0);
    if (!strcmp(op, "open"))
        return report(open(a, O_RDONLY));
    if (!strcmp(op, "open_until_denied")) {
        /* opens A up to 2000 times, 1 ms apart, until one fails */
        for (int i = 0; i < 2000; i++) {
            int fd = open(a, O_RDONLY);
            if (fd < 0) {
                printf("failed after %d opens: ", i);
                return report(fd);
            }
            close(fd);
            usleep(1000);
        }
        printf("never failed\n");
        return 1;
    }
    if (!strcmp(op, "open_write"))
        return report(open(a, O_WRONLY | O_CREAT | O_TRUNC, 0644));
    if (!strcmp(op, "open_rdwr"))
        return report(open(a, O_RDWR));
    if (!strcmp(op, "openat")) {
        int d = open(a, O_RDONLY | O_DIRECTORY);
        return report(openat(d, b, O_RDONLY));
    }
    if (!strcmp(op, "creat"))
        return report(creat(a, 0644));
    if (!strcmp(op, "fopen")) {
        FILE *f = fopen(a, b ? b : "r");
        return report(f ? 0 : -1);
    }
    if (!strcmp(op, "opendir"))
        return report(opendir(a) ? 0 : -1);
    if (!strcmp(op, "sys_open"))
        return report(syscall(SYS_open, a, O_RDONLY, 0));
    if (!strcmp(op, "sys_openat2")) {
        struct open_how how = {.flags = O_RDONLY};
        return report(syscall(SYS_openat2, AT_FDCWD, a, &how, sizeof how));
    }
    if (!strcmp(op, "sys_getpid"))
        return report(syscall(SYS_getpid) == getpid() ? 0 : -1);
    if (!strcmp(op, "unlink"))
        return report(unlink(a));
    if (!strcmp(op, "rmdir"))
        return report(rmdir(a));
    if (!strcmp(op, "mkdir"))
        return report(mkdir(a, 0755));
    if (!strcmp(op, "rename"))
        return report(rename(a, b));
    if (!strcmp(op, "link"))
        return report(link(a, b));
    if (!strcmp(op, "symlink"))
        return report(symlink(a, b));
    if (!strcmp(op, "chmod"))
        return report(chmod(a, 0600));
    if (!strcmp(op, "truncate"))
        return report(truncate(a, strtoll(b, NULL, 10)));
    if (!strcmp(op, "ftruncate")) {
        int fd = open(a, O_WRONLY | O_CREAT, 0644);
        return report(ftruncate(fd, strtoll(b, NULL, 10)));
    }
    if (!strcmp(op, "execve")) {
        execve(a, argv + 3, environ);
        report(-1);
        return 0;   /* still running */
    }
    if (!strcmp(op, "sys_execve")) {
        syscall(SYS_execve, a, argv + 3, environ);
        report(-1);
        return 0;
    }
    if (!strcmp(op, "fexecve")) {
        int fd = open(a, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return report(-1);
        fexecve(fd, argv + 3, environ);
        report(-1);
        return 0;
    }
    if (!strcmp(op, "execvp")) {
        execvp(a, argv + 3);
        report(-1);
        return 0;
    }
    if (!strcmp(op, "exec_noenv")) {
        char *empty[] = {NULL};
        execve(a, argv + 3, empty);
        return report(-1);
    }
    if (!strcmp(op, "exec_unset")) {
        unsetenv("LD_PRELOAD");
        for (char **e = environ; *e;) {
            if (!strncmp(*e, "SBX_", 4)) {
                char name[256];
                size_t n = strcspn(*e, "=");
                snprintf(name, sizeof name, "%.*s", (int)n, *e);
                unsetenv(name);
            } else {
                e++;
            }
        }
        execv(a, argv + 3);
        return report(-1);
    }
    if (!strcmp(op, "posix_spawn") || !strcmp(op, "posix_spawnp")) {
        pid_t pid;
        int err = op[11] == 'p' ? posix_spawnp(&pid, a, NULL, NULL, argv + 3, environ)
                                : posix_spawn(&pid, a, NULL, NULL, argv + 3, environ);
        return spawn_result(err, pid);
    }
    if (!strcmp(op, "system")) {
        int st = system(a);
        return report(st < 0 ? -1 : WEXITSTATUS(st));
    }
    if (!strcmp(op, "popen")) {
        FILE *f = popen(a, "r");
        if (!f)
            return report(-1);
        char buf[256];
        while (fgets(buf, sizeof buf, f))
            fputs(buf, stdout);
        return report(WEXITSTATUS(pclose(f)));
    }
    if (!strcmp(op, "connect") || !strcmp(op, "sendto")) {
        struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(b))};
        inet_pton(AF_INET, a, &in.sin_addr);
        return tcp((struct sockaddr *)&in, sizeof in, op[0] == 's');
    }
    if (!strcmp(op, "unix_connect")) {
        struct sockaddr_un un = {.sun_family = AF_UNIX};
        snprintf(un.sun_path, sizeof un.sun_path, "%s", a);
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        return report(connect(fd, (struct sockaddr *)&un, sizeof un));
    }
    if (!strcmp(op, "bind")) {
        struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(b))};
        inet_pton(AF_INET, a, &in.sin_addr);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        return report(bind(fd, (struct sockaddr *)&in, sizeof in));
    }
    if (!strcmp(op, "resolve_connect")) {
        struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res;
        int rc = getaddrinfo(a, b, &hints, &res);
        if (rc) {
            printf("err getaddrinfo %s\n", gai_strerror(rc));
            return 1;
        }
        return tcp(res->ai_addr, res->ai_addrlen, 0);
    }
    fprintf(stderr, "preload_call: unknown op %s\n", op);
    return 2;
}
