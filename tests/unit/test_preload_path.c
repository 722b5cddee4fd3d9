/* test_preload_path.c — the preload's pure helpers: lexical folding, the
 * *at/dirfd base, the environment restored at exec, the address->name
 * table, bounded string building.
 *
 * The preload is a shared library of interposers, not a static library, so
 * the files with helpers are compiled into this test directly (the ones
 * that define open, execve, connect... are left out: they would interpose
 * on the test itself).  Without SBX_POLICY_FILE the guard stays passive. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../preload/decide.c"
#include "../../preload/dns.c"
#include "../../preload/env.c"
#include "../../preload/init.c"
#include "../../preload/notify.c"
#include "../../preload/path.c"
#include "../../preload/resolve.c"

static void expect_fold(const char *base, const char *path, const char *want)
{
    char out[GUARD_PATH_MAX];
    assert_int_equal(policy_path_lexical(base, path, out, sizeof out), 0);
    if (strcmp(out, want) != 0)
        fail_msg("fold(%s, %s) = %s, want %s", base ? base : "NULL", path, out, want);
}

static void test_fold_removes_dot_dotdot_and_double_slashes(void **state)
{
    (void)state;
    expect_fold(NULL, "/a/b/../c", "/a/c");
    expect_fold(NULL, "/a/./b//c/", "/a/b/c");
    expect_fold(NULL, "//a///b", "/a/b");
    expect_fold(NULL, "/", "/");
    expect_fold(NULL, "/..", "/");
    expect_fold(NULL, "/a/../../..", "/");
    expect_fold(NULL, "/a/b/.", "/a/b");
    expect_fold(NULL, "/a/b/..", "/a");
    expect_fold(NULL, "/a/..b/c", "/a/..b/c");
    expect_fold(NULL, "/a/.env", "/a/.env");
}

static void test_fold_makes_relative_paths_absolute_against_the_base(void **state)
{
    (void)state;
    expect_fold("/ws", "f", "/ws/f");
    expect_fold("/ws/", "./sub/../.env", "/ws/.env");
    expect_fold("/ws/a", "../../../etc/passwd", "/etc/passwd");
    expect_fold("/ws", "/abs", "/abs");
    expect_fold("/", "x", "/x");
}

static void test_fold_refuses_what_does_not_fit(void **state)
{
    (void)state;
    char big[5000];
    memset(big, 'a', sizeof big - 1);
    big[0] = '/';
    big[sizeof big - 1] = '\0';
    char out[GUARD_PATH_MAX];
    errno = 0;
    assert_int_equal(policy_path_lexical(NULL, big, out, sizeof out), -1);
    assert_int_equal(errno, ENAMETOOLONG);
    char small[8];
    assert_int_equal(policy_path_lexical("/abc", "defgh", small, sizeof small), -1);
    assert_int_equal(policy_path_lexical("/abc", "de", small, sizeof small), 0);
    assert_string_equal(small, "/abc/de");
}

static void test_lexical_uses_the_dirfd_directory_for_relative_paths(void **state)
{
    (void)state;
    char dir[] = "/tmp/sbx-ppath.XXXXXX";
    assert_non_null(mkdtemp(dir));
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    assert_true(fd >= 0);
    char out[GUARD_PATH_MAX], want[GUARD_PATH_MAX + 8];
    assert_int_equal(guard_lexical(fd, "sub/../f", out, sizeof out), 0);
    snprintf(want, sizeof want, "%s/f", dir);
    assert_string_equal(out, want);
    /* An absolute path ignores the dirfd. */
    assert_int_equal(guard_lexical(fd, "/etc/hosts", out, sizeof out), 0);
    assert_string_equal(out, "/etc/hosts");
    /* AT_FDCWD is the current directory. */
    char cwd[GUARD_PATH_MAX];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(guard_lexical(AT_FDCWD, "x", out, sizeof out), 0);
    snprintf(want, sizeof want, "%s/x", strcmp(cwd, "/") ? cwd : "");
    assert_string_equal(out, want);
    /* An empty path names nothing. */
    errno = 0;
    assert_int_equal(guard_lexical(AT_FDCWD, "", out, sizeof out), -1);
    assert_int_equal(errno, ENOENT);
    /* A deleted directory has no path any more. */
    rmdir(dir);
    errno = 0;
    assert_int_equal(guard_lexical(fd, "f", out, sizeof out), -1);
    assert_int_equal(errno, ENOENT);
    close(fd);
}

static void test_dirfd_that_is_not_a_directory_has_no_base(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    char out[GUARD_PATH_MAX];
    errno = 0;
    assert_int_equal(guard_dirfd_path(p[0], out, sizeof out), -1);
    assert_int_equal(errno, ENOTDIR);
    errno = 0;
    assert_int_equal(guard_dirfd_path(9999, out, sizeof out), -1);
    assert_int_equal(errno, EBADF);
    close(p[0]);
    close(p[1]);
}

/* guard_envs as sbx-guard would have handed them down. */
static void fake_guard_env(void)
{
    static char pol[] = "/run/p.yaml", polent[] = "SBX_POLICY_FILE=/run/p.yaml";
    static char ws[] = "/ws", wsent[] = "SBX_WORKSPACE=/ws";
    guard_envs[GENV_POLICY].value = pol;
    guard_envs[GENV_POLICY].entry = polent;
    guard_envs[GENV_WORKSPACE].value = ws;
    guard_envs[GENV_WORKSPACE].entry = wsent;
    guard_preload_path = "/lib/sbx/libsbx-preload.so";
    guard_ld_preload_entry = "LD_PRELOAD=/lib/sbx/libsbx-preload.so";
}

static bool has(char **env, const char *entry)
{
    for (; *env; env++)
        if (strcmp(*env, entry) == 0)
            return true;
    return false;
}

static void test_env_with_everything_in_place_needs_no_restore(void **state)
{
    (void)state;
    fake_guard_env();
    char *env[] = {"PATH=/bin", "LD_PRELOAD=/x.so:/lib/sbx/libsbx-preload.so",
                   "SBX_POLICY_FILE=/run/p.yaml", "SBX_WORKSPACE=/ws", NULL};
    assert_false(guard_env_needs_restore(env));
}

static void test_env_restore_puts_back_what_was_dropped_or_changed(void **state)
{
    (void)state;
    fake_guard_env();
    char *env[] = {"PATH=/bin", "SBX_POLICY_FILE=/tmp/mine.yaml", "HOME=/root", NULL};
    assert_true(guard_env_needs_restore(env));
    char *out[32], str[256];
    assert_non_null(guard_env_restore(env, out, 32, str, sizeof str));
    assert_true(has(out, "PATH=/bin"));
    assert_true(has(out, "HOME=/root"));
    assert_true(has(out, "SBX_POLICY_FILE=/run/p.yaml"));
    assert_false(has(out, "SBX_POLICY_FILE=/tmp/mine.yaml"));
    assert_true(has(out, "SBX_WORKSPACE=/ws"));
    assert_true(has(out, "LD_PRELOAD=/lib/sbx/libsbx-preload.so"));
    assert_false(guard_env_needs_restore(out));
}

static void test_env_restore_keeps_the_programs_own_preloads_after_ours(void **state)
{
    (void)state;
    fake_guard_env();
    char *env[] = {"LD_PRELOAD=/opt/other.so", "SBX_POLICY_FILE=/run/p.yaml",
                   "SBX_WORKSPACE=/ws", NULL};
    assert_true(guard_env_needs_restore(env));
    char *out[32], str[256];
    assert_non_null(guard_env_restore(env, out, 32, str, sizeof str));
    assert_true(has(out, "LD_PRELOAD=/lib/sbx/libsbx-preload.so:/opt/other.so"));
    assert_false(has(out, "LD_PRELOAD=/opt/other.so"));
    /* A name that only contains ours is not ours. */
    char *env2[] = {"LD_PRELOAD=/lib/sbx/libsbx-preload.so.bak", "SBX_POLICY_FILE=/run/p.yaml",
                    "SBX_WORKSPACE=/ws", NULL};
    assert_true(guard_env_needs_restore(env2));
}

static void test_env_restore_refuses_a_too_small_buffer(void **state)
{
    (void)state;
    fake_guard_env();
    char *env[] = {"A=1", "B=2", NULL};
    char *out[4], str[64];
    errno = 0;
    assert_null(guard_env_restore(env, out, 4, str, sizeof str));
    assert_int_equal(errno, E2BIG);
    char *empty[] = {NULL};
    char *out2[GENV__COUNT + 2];
    assert_non_null(guard_env_restore(empty, out2, GENV__COUNT + 2, str, sizeof str));
    assert_non_null(guard_env_restore(NULL, out2, GENV__COUNT + 2, str, sizeof str));
}

static struct sockaddr_in v4(const char *ip)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(443)};
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

static void test_dns_table_gives_back_the_name_an_address_came_from(void **state)
{
    (void)state;
    char name[256];
    struct sockaddr_in a = v4("104.18.6.192"), b = v4("10.9.8.7");
    assert_false(guard_dns_lookup((struct sockaddr *)&a, name, sizeof name));
    guard_dns_remember((struct sockaddr *)&a, "api.openai.com");
    assert_true(guard_dns_lookup((struct sockaddr *)&a, name, sizeof name));
    assert_string_equal(name, "api.openai.com");
    assert_false(guard_dns_lookup((struct sockaddr *)&b, name, sizeof name));
    /* The latest resolution wins. */
    guard_dns_remember((struct sockaddr *)&a, "example.org");
    assert_true(guard_dns_lookup((struct sockaddr *)&a, name, sizeof name));
    assert_string_equal(name, "example.org");
    /* An IPv4-mapped IPv6 address is the IPv4 address. */
    struct sockaddr_in6 m = {.sin6_family = AF_INET6};
    inet_pton(AF_INET6, "::ffff:104.18.6.192", &m.sin6_addr);
    assert_true(guard_dns_lookup((struct sockaddr *)&m, name, sizeof name));
    assert_string_equal(name, "example.org");
    /* A short buffer gets a cut name, never an overflow. */
    char tiny[4];
    assert_true(guard_dns_lookup((struct sockaddr *)&a, tiny, sizeof tiny));
    assert_string_equal(tiny, "exa");
}

static void test_dns_table_keeps_working_when_full(void **state)
{
    (void)state;
    char name[256], want[32];
    for (unsigned i = 0; i < 3 * DNS_SLOTS; i++) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x0a000000 + i)};
        snprintf(want, sizeof want, "h%u", i);
        guard_dns_remember((struct sockaddr *)&a, want);
        assert_true(guard_dns_lookup((struct sockaddr *)&a, name, sizeof name));
        assert_string_equal(name, want);
    }
}

static void test_sbuf_cuts_and_says_so(void **state)
{
    (void)state;
    char buf[8];
    struct sbuf s;
    sbuf_init(&s, buf, sizeof buf);
    sbuf_add(&s, "abc");
    sbuf_add_uint(&s, 42);
    assert_string_equal(buf, "abc42");
    assert_false(s.cut);
    sbuf_add(&s, "xyz");
    assert_string_equal(buf, "abc42xy");
    assert_true(s.cut);
    sbuf_init(&s, buf, sizeof buf);
    sbuf_add_uint(&s, 0);
    assert_string_equal(buf, "0");
}

static void test_without_a_policy_file_the_guard_stays_out_of_the_way(void **state)
{
    (void)state;
    /* The test runs without SBX_POLICY_FILE: nothing is guarded. */
    assert_false(guard_enter());
    assert_false(guard_inside());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fold_removes_dot_dotdot_and_double_slashes),
        cmocka_unit_test(test_fold_makes_relative_paths_absolute_against_the_base),
        cmocka_unit_test(test_fold_refuses_what_does_not_fit),
        cmocka_unit_test(test_lexical_uses_the_dirfd_directory_for_relative_paths),
        cmocka_unit_test(test_dirfd_that_is_not_a_directory_has_no_base),
        cmocka_unit_test(test_env_with_everything_in_place_needs_no_restore),
        cmocka_unit_test(test_env_restore_puts_back_what_was_dropped_or_changed),
        cmocka_unit_test(test_env_restore_keeps_the_programs_own_preloads_after_ours),
        cmocka_unit_test(test_env_restore_refuses_a_too_small_buffer),
        cmocka_unit_test(test_dns_table_gives_back_the_name_an_address_came_from),
        cmocka_unit_test(test_dns_table_keeps_working_when_full),
        cmocka_unit_test(test_sbuf_cuts_and_says_so),
        cmocka_unit_test(test_without_a_policy_file_the_guard_stays_out_of_the_way),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
