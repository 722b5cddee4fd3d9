/*
 * static_escape — tries one way out of the sandbox with raw system calls.
 *
 * Static, so the preload never loads into it, and every call below goes
 * straight to the kernel (glibc's syscall() is the bare instruction): what
 * stops it can only be the kernel layer.  Prints "ok" when the attempt
 * worked and "fail ERRNO" when it did not; exit 0 / 1 likewise.
 *
 *   static_escape read PATH            openat(O_RDONLY) and read a byte
 *   static_escape openat2 PATH         openat2(O_RDONLY)
 *   static_escape readlist FILE        tries to read each path listed in FILE
 *                                      (one a line); prints "readable N of M"
 *                                      and each path it could read
 *   static_escape write PATH           openat(O_WRONLY|O_CREAT|O_TRUNC) + write
 *   static_escape exec PATH [ARG...]   execve (prints only on failure)
 *   static_escape envexec PATH [ARG...] execve with an empty environment
 *   static_escape connect IP PORT      TCP connect
 *   static_escape unix PATH            connect to a unix socket
 *   static_escape udp IP PORT          one datagram with sendto, no connect
 *   static_escape io_uring             io_uring_setup
 *   static_escape handle PATH          name_to_handle_at + open_by_handle_at
 *   static_escape ptrace PID           PTRACE_ATTACH
 *   static_escape kill PID             kill(PID, SIGTERM)
 *   static_escape memfd_exec           exec a copy of /bin/true from a memfd
 *   static_escape unshare              unshare(CLONE_NEWUSER)
 *   static_escape clone_ns             clone(CLONE_NEWUSER)
 *   static_escape mount                mount tmpfs on /tmp
 *   static_escape rename A B           rename
 *   static_escape link A B             hard link
 *   static_escape symlink TARGET LINK  symlink, then read through it
 *   static_escape symrace LINK A B N   a child swaps symlink LINK between A
 *                                      and B as fast as it can while this
 *                                      opens and reads LINK N times; prints
 *                                      "read N: K with SECRET" (K reads
 *                                      saw a file holding "SECRET")
 *   static_escape personality          ADDR_NO_RANDOMIZE
 *   static_escape int80                getpid through the 32-bit ABI
 *   static_escape socket FAMILY [PROTO] socket(FAMILY, SOCK_DGRAM or, for
 *                                      AF_INET/AF_VSOCK/AF_UNIX, SOCK_STREAM)
 *                                      with the raw 64-bit FAMILY (0x... ok)
 */

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sched.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static int result(long rc)
{
    if (rc < 0) {
        printf("fail %s\n", strerrorname_np(errno) ? strerrorname_np(errno) : "?");
        return 1;
    }
    printf("ok\n");
    return 0;
}

static int do_read(const char *path)
{
    char c;
    long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY);
    if (fd < 0)
        return result(-1);
    if (syscall(SYS_read, fd, &c, 1) < 0)
        return result(-1);
    return result(0);
}

static int do_readlist(const char *list)
{
    FILE *f = fopen(list, "r");
    char line[4096];
    unsigned n = 0, readable = 0;

    if (f == NULL)
        return result(-1);
    while (fgets(line, sizeof line, f)) {
        char c;
        long fd;
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '\0')
            continue;
        n++;
        fd = syscall(SYS_openat, AT_FDCWD, line, O_RDONLY);
        if (fd >= 0 && syscall(SYS_read, fd, &c, 1) >= 0) {
            readable++;
            printf("read %s\n", line);
        }
        if (fd >= 0)
            syscall(SYS_close, fd);
    }
    fclose(f);
    printf("readable %u of %u\n", readable, n);
    return readable ? 0 : 1;
}

static int do_exec(char **argv, bool empty_env)
{
    char *noenv[] = { NULL };
    extern char **environ;
    syscall(SYS_execve, argv[0], argv, empty_env ? noenv : environ);
    return result(-1);
}

static int do_connect(const char *ip, const char *port)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port)) };
    struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = a.sin_port };
    long s;
    if (inet_pton(AF_INET6, ip, &a6.sin6_addr) == 1) {     /* IPv6 too: "::1" */
        s = syscall(SYS_socket, AF_INET6, SOCK_STREAM, 0);
        return result(s < 0 ? -1 : syscall(SYS_connect, s, &a6, sizeof a6));
    }
    s = syscall(SYS_socket, AF_INET, SOCK_STREAM, 0);
    if (s < 0 || inet_pton(AF_INET, ip, &a.sin_addr) != 1)
        return result(-1);
    return result(syscall(SYS_connect, s, &a, sizeof a));
}

static int do_udp(const char *ip, const char *port)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port)) };
    long s = syscall(SYS_socket, AF_INET, SOCK_DGRAM, 0);
    if (s < 0 || inet_pton(AF_INET, ip, &a.sin_addr) != 1)
        return result(-1);
    return result(syscall(SYS_sendto, s, "x", 1, 0, &a, sizeof a));
}

static int do_unix(const char *path)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    long s = syscall(SYS_socket, AF_UNIX, SOCK_STREAM, 0);
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    if (s < 0)
        return result(-1);
    return result(syscall(SYS_connect, s, &a, sizeof a));
}

static int do_handle(const char *path)
{
    struct { struct file_handle h; unsigned char b[128]; } fh;
    int mount_id;
    fh.h.handle_bytes = sizeof fh.b;
    if (syscall(SYS_name_to_handle_at, AT_FDCWD, path, &fh.h, &mount_id, 0) < 0)
        return result(-1);
    return result(syscall(SYS_open_by_handle_at, AT_FDCWD, &fh.h, O_RDONLY));
}

static int do_memfd_exec(void)
{
    char buf[65536];
    char *argv[] = { "true", NULL }, *envp[] = { NULL };
    long in = syscall(SYS_openat, AT_FDCWD, "/bin/true", O_RDONLY);
    long m = syscall(SYS_memfd_create, "x", 0);
    long n;
    if (in < 0 || m < 0)
        return result(-1);
    while ((n = syscall(SYS_read, in, buf, sizeof buf)) > 0)
        if (syscall(SYS_write, m, buf, n) != n)
            return result(-1);
    syscall(SYS_fchmod, m, 0755);
    syscall(SYS_execveat, m, "", argv, envp, AT_EMPTY_PATH);
    return result(-1);
}

/* The time-of-check race on a supervised open: the supervisor looks at
 * LINK (pointing at the allowed A) and the kernel then opens it (pointing
 * at the deny-read B). */
static int do_symrace(const char *link, const char *a, const char *b, const char *count)
{
    long n = strtol(count, NULL, 10), seen = 0, secret = 0;
    pid_t child;

    unlink(link);
    if (syscall(SYS_symlinkat, a, AT_FDCWD, link) < 0)
        return result(-1);
    child = fork();
    if (child < 0)
        return result(-1);
    if (child == 0) {
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.swap", link);
        for (unsigned long i = 0;; i++) {
            unlink(tmp);
            if (syscall(SYS_symlinkat, (i & 1) ? b : a, AT_FDCWD, tmp) == 0)
                syscall(SYS_renameat, AT_FDCWD, tmp, AT_FDCWD, link);
        }
    }
    for (long i = 0; i < n; i++) {
        char buf[64];
        long fd = syscall(SYS_openat, AT_FDCWD, link, O_RDONLY);
        if (fd < 0)
            continue;
        long got = syscall(SYS_read, fd, buf, sizeof buf - 1);
        syscall(SYS_close, fd);
        if (got <= 0)
            continue;
        buf[got] = '\0';
        seen++;
        if (strstr(buf, "SECRET"))
            secret++;
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    printf("read %ld: %ld with SECRET\n", seen, secret);
    return secret ? 0 : 1;
}

static int do_int80(void)
{
    long rc;
    /* __NR_getpid is 20 in the i386 table. */
    __asm__ volatile("int $0x80" : "=a"(rc) : "a"(20L) : "memory");
    if (rc < 0) {
        errno = (int)-rc;
        return result(-1);
    }
    return result(0);
}

int main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : "";
    const char *a = argc > 2 ? argv[2] : "";
    const char *b = argc > 3 ? argv[3] : "";

    setvbuf(stdout, NULL, _IONBF, 0);
    if (strcmp(cmd, "read") == 0)
        return do_read(a);
    if (strcmp(cmd, "readlist") == 0)
        return do_readlist(a);
    if (strcmp(cmd, "openat2") == 0) {
        struct open_how how = { .flags = O_RDONLY };
        return result(syscall(SYS_openat2, AT_FDCWD, a, &how, sizeof how));
    }
    if (strcmp(cmd, "write") == 0) {
        long fd = syscall(SYS_openat, AT_FDCWD, a, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0)
            return result(-1);
        return result(syscall(SYS_write, fd, "escaped\n", 8));
    }
    if (strcmp(cmd, "exec") == 0 && argc > 2)
        return do_exec(argv + 2, false);
    if (strcmp(cmd, "envexec") == 0 && argc > 2)
        return do_exec(argv + 2, true);
    if (strcmp(cmd, "connect") == 0)
        return do_connect(a, b);
    if (strcmp(cmd, "unix") == 0)
        return do_unix(a);
    if (strcmp(cmd, "udp") == 0)
        return do_udp(a, b);
    if (strcmp(cmd, "io_uring") == 0) {
        unsigned char params[120];
        memset(params, 0, sizeof params);
        return result(syscall(SYS_io_uring_setup, 8, params));
    }
    if (strcmp(cmd, "handle") == 0)
        return do_handle(a);
    if (strcmp(cmd, "ptrace") == 0)
        return result(syscall(SYS_ptrace, PTRACE_ATTACH, atoi(a), 0, 0));
    if (strcmp(cmd, "kill") == 0)
        return result(syscall(SYS_kill, atoi(a), SIGTERM));
    if (strcmp(cmd, "memfd_exec") == 0)
        return do_memfd_exec();
    if (strcmp(cmd, "unshare") == 0)
        return result(syscall(SYS_unshare, CLONE_NEWUSER));
    if (strcmp(cmd, "clone_ns") == 0) {
        long pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
        if (pid == 0)
            _exit(0);
        if (pid > 0)
            waitpid((pid_t)pid, NULL, 0);
        return result(pid);
    }
    if (strcmp(cmd, "mount") == 0)
        return result(syscall(SYS_mount, "tmpfs", "/tmp", "tmpfs", 0, NULL));
    if (strcmp(cmd, "rename") == 0)
        return result(syscall(SYS_renameat, AT_FDCWD, a, AT_FDCWD, b));
    if (strcmp(cmd, "link") == 0)
        return result(syscall(SYS_linkat, AT_FDCWD, a, AT_FDCWD, b, 0));
    if (strcmp(cmd, "symlink") == 0) {
        if (syscall(SYS_symlinkat, a, AT_FDCWD, b) < 0)
            return result(-1);
        return do_read(b);
    }
    if (strcmp(cmd, "symrace") == 0 && argc > 5)
        return do_symrace(argv[2], argv[3], argv[4], argv[5]);
    if (strcmp(cmd, "personality") == 0)
        return result(syscall(SYS_personality, ADDR_NO_RANDOMIZE));
    if (strcmp(cmd, "int80") == 0)
        return do_int80();
    if (strcmp(cmd, "socket") == 0) {
        /* Families whose sockets are datagram-only or need a raw type get
         * SOCK_RAW (packet, netlink); others SOCK_STREAM. */
        unsigned long long fam = strtoull(a, NULL, 0);
        int low = (int)(fam & 0xffffffffu);
        int type = low == AF_PACKET || low == AF_NETLINK ? SOCK_RAW : SOCK_STREAM;
        if (low == AF_ALG)
            type = SOCK_SEQPACKET;
        return result(syscall(SYS_socket, fam, type, strtol(b, NULL, 0)));
    }
    fprintf(stderr, "static_escape: unknown command %s\n", cmd);
    return 2;
}
