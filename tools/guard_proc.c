/* guard_proc.c — sweeping an agent's processes (see guard_proc.h). */
#include "guard_proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bsd/stdlib.h>

struct proc_ent {
    pid_t pid, ppid;
    char state;
};

/* Reads every process's pid, parent and state from /proc.  *OUT is
 * malloc'd; returns the count or -1. */
static int read_procs(struct proc_ent **out)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    size_t n = 0, cap = 256;
    struct proc_ent *v = reallocarray(NULL, cap, sizeof *v);
    if (!v) {
        closedir(d);
        return -1;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *errstr;
        long long pid = strtonum(de->d_name, 1, 1LL << 30, &errstr);
        if (errstr)
            continue;
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%lld/stat", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t len = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (len <= 0)
            continue;
        buf[len] = '\0';
        /* "pid (comm) S ppid ...": comm may hold spaces and parentheses,
         * so parse from the last ')'. */
        char *rp = strrchr(buf, ')');
        char state;
        int ppid;
        if (!rp || sscanf(rp + 1, " %c %d", &state, &ppid) != 2)
            continue;
        if (n == cap) {
            struct proc_ent *nv = reallocarray(v, cap * 2, sizeof *v);
            if (!nv)
                break;
            v = nv;
            cap *= 2;
        }
        v[n++] = (struct proc_ent){ (pid_t)pid, (pid_t)ppid, state };
    }
    closedir(d);
    *out = v;
    return (int)n;
}

static bool is_descendant(const struct proc_ent *v, int n, pid_t pid, pid_t root)
{
    /* Walk up at most n steps: the parent graph has no cycles, but a
     * racing /proc snapshot could show one. */
    for (int steps = 0; steps < n && pid > 1; steps++) {
        pid_t parent = -1;
        for (int i = 0; i < n; i++)
            if (v[i].pid == pid) {
                parent = v[i].ppid;
                break;
            }
        if (parent == root)
            return true;
        if (parent <= 0)
            return false;
        pid = parent;
    }
    return false;
}

static pid_t spared;

void guard_spare_pid(pid_t pid)
{
    spared = pid;
}

static int sweep(bool do_kill)
{
    struct proc_ent *v = NULL;
    int n = read_procs(&v);
    if (n < 0)
        return -1;
    pid_t self = getpid();
    int count = 0;
    for (int i = 0; i < n; i++) {
        if (v[i].state == 'Z' || v[i].state == 'X' || (spared && v[i].pid == spared))
            continue;
        if (!is_descendant(v, n, v[i].pid, self))
            continue;
        count++;
        if (do_kill)
            kill(v[i].pid, SIGKILL);
    }
    free(v);
    return count;
}

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

int guard_kill_descendants(pid_t pgid, int timeout_ms)
{
    long deadline = now_ms() + timeout_ms;
    int total = 0;
    for (;;) {
        if (pgid > 0)
            kill(-pgid, SIGKILL);
        int n = sweep(true);
        if (n <= 0)
            break;
        total += n;
        if (now_ms() > deadline)
            break;
        /* Give the kernel a moment to deliver: a killed process is a
         * zombie (skipped) on the next pass; a new fork is caught. */
        struct timespec ts = { 0, 2L * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    return total;
}

int guard_count_descendants(void)
{
    return sweep(false);
}
