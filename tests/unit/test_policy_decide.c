/* test_policy_decide.c — the hot path: path and network decisions make no
 * system call and allocate nothing (policy.h promises both; the preload
 * relies on them inside interposed calls). */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "policy.h"

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif

static volatile int counting, allocations;

#ifndef SANITIZED
/* Counts allocations while `counting` is set: this binary's malloc family
 * wraps glibc's (not under ASan, which has its own). */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

void *malloc(size_t n)
{
    if (counting)
        allocations++;
    return __libc_malloc(n);
}

void *calloc(size_t a, size_t b)
{
    if (counting)
        allocations++;
    return __libc_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
    if (counting)
        allocations++;
    return __libc_realloc(p, n);
}

void free(void *p)
{
    __libc_free(p);
}
#endif

static struct policy *pol;

static int setup(void **state)
{
    (void)state;
    struct policy_options opt = { .workspace = "/tmp", .home = "/root" };
    struct policy_diag d;
    pol = policy_load_buffer("t.yaml", "version: 1\n", 11, &opt, &d);
    return pol ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    policy_free(pol);
    return 0;
}

static int decide_all(void)
{
    static const char *const paths[] = {
        "/tmp/src/main.c", "/tmp/.env", "/usr/lib/libc.so.6", "/root/.ssh/id_rsa",
        "/var/log/syslog", "/proc/self/status", "/tmp/a/b/c/d/e/f/server.pem",
    };
    struct policy_verdict v;
    int denied = 0;
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        denied += policy_decide_path(pol, SBX_OP_OPEN_READ, paths[i], &v);
        denied += policy_decide_path(pol, SBX_OP_OPEN_WRITE, paths[i], &v);
        denied += policy_decide_path(pol, SBX_OP_EXEC, paths[i], &v);
    }
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(443) };
    sin.sin_addr.s_addr = htonl(0xa9fea9fe);      /* 169.254.169.254 */
    denied += policy_decide_net(pol, SBX_OP_CONNECT, (struct sockaddr *)&sin, sizeof(sin),
                                "metadata.google.internal", &v);
    struct sockaddr_in6 s6 = { .sin6_family = AF_INET6, .sin6_port = htons(8000) };
    s6.sin6_addr.s6_addr[15] = 1;                 /* ::1 */
    denied += policy_decide_net(pol, SBX_OP_BIND, (struct sockaddr *)&s6, sizeof(s6), NULL, &v);
    return denied;
}

static void test_decisions_allocate_nothing(void **state)
{
    (void)state;
#ifdef SANITIZED
    skip();
#endif
    struct policy_verdict v;
    /* the counter works: a command decision allocates (PCRE2 match data) */
    counting = 1;
    policy_decide_command(pol, "ls", &v);
    counting = 0;
    assert_true(allocations > 0);
    int want = decide_all();
    allocations = 0;
    counting = 1;
    int got = decide_all();
    counting = 0;
    assert_int_equal(got, want);
    assert_int_equal(allocations, 0);
}

static void test_decisions_make_no_system_call(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    int want = decide_all();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* strict seccomp: only read, write, exit and sigreturn; any other
         * system call kills the process */
        close(fds[0]);
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT) != 0)
            _exit(3);
        int got = decide_all();
        if (write(fds[1], &got, sizeof(got)) != sizeof(got))
            syscall(SYS_exit, 4);
        syscall(SYS_exit, 0);
    }
    close(fds[1]);
    int got = -1, status;
    assert_int_equal(read(fds[0], &got, sizeof(got)), sizeof(got));
    close(fds[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(got, want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decisions_allocate_nothing),
        cmocka_unit_test(test_decisions_make_no_system_call),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
