/* test_path.c — lexical folding and symlink resolution (policy.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "policy.h"

static char tmp[PATH_MAX];      /* a resolved scratch directory */
#define BIG (2 * PATH_MAX)

static void lex(const char *base, const char *path, const char *want)
{
    char out[PATH_MAX];
    assert_int_equal(policy_path_lexical(base, path, out, sizeof(out)), 0);
    assert_string_equal(out, want);
}

static void test_path_lexical_folds_dots_and_slashes(void **state)
{
    (void)state;
    lex("/ws", "a/b", "/ws/a/b");
    lex("/ws", "./a/./b", "/ws/a/b");
    lex("/ws", "a/../b", "/ws/b");
    lex("/ws", "../x", "/x");
    lex("/ws", "../../../x", "/x");
    lex("/ws", "a//b///c", "/ws/a/b/c");
    lex("/ws", "a/b/", "/ws/a/b");
    lex("/ws", "/etc/./hosts", "/etc/hosts");
    lex("/ws", "/", "/");
    lex("/ws", "/..", "/");
    lex("/ws", ".", "/ws");
    lex("/ws/", "", "/ws");
    lex("/a/b", "..", "/a");
}

static void test_path_lexical_reports_a_path_too_long(void **state)
{
    (void)state;
    char out[8];
    assert_int_equal(policy_path_lexical("/ws", "abcdefghij", out, sizeof(out)), -1);
    assert_int_equal(errno, ENAMETOOLONG);
}

static void mk(const char *rel)
{
    char p[BIG];
    snprintf(p, sizeof(p), "%s/%s", tmp, rel);
    if (rel[strlen(rel) - 1] == '/') {
        assert_int_equal(mkdir(p, 0755), 0);
    } else {
        int fd = open(p, O_CREAT | O_WRONLY, 0644);
        assert_true(fd >= 0);
        close(fd);
    }
}

static void ln(const char *target, const char *rel)
{
    char p[BIG];
    snprintf(p, sizeof(p), "%s/%s", tmp, rel);
    assert_int_equal(symlink(target, p), 0);
}

static void res(const char *path, bool nofollow, const char *want_rel)
{
    char out[BIG], want[BIG];
    assert_int_equal(policy_path_resolve(tmp, path, nofollow, out, sizeof(out)), 0);
    if (want_rel[0] == '/')
        snprintf(want, sizeof(want), "%s", want_rel);
    else
        snprintf(want, sizeof(want), "%s/%s", tmp, want_rel);
    assert_string_equal(out, want);
}

static int setup(void **state)
{
    (void)state;
    const char *t = getenv("TMPDIR");
    char tpl[BIG];
    snprintf(tpl, sizeof(tpl), "%s/pathXXXXXX", t ? t : "/tmp");
    if (mkdtemp(tpl) == NULL || realpath(tpl, tmp) == NULL)
        return -1;
    return 0;
}

static void test_path_resolve_follows_symlinks_inside_the_workspace(void **state)
{
    (void)state;
    mk("ws/");
    mk("ws/real/");
    mk("ws/real/file");
    ln("real", "ws/link");                  /* relative */
    res("ws/link/file", false, "ws/real/file");
    res("ws/link", false, "ws/real");
    res("ws/link", true, "ws/link");        /* nofollow keeps the last component */
    res("ws/link/new-file", false, "ws/real/new-file");
}

static void test_path_resolve_follows_a_symlink_out_of_the_workspace(void **state)
{
    (void)state;
    mk("out/");
    mk("out/secret");
    mk("ws2/");
    char target[BIG];
    snprintf(target, sizeof(target), "%s/out", tmp);
    ln(target, "ws2/escape");               /* absolute */
    res("ws2/escape/secret", false, "out/secret");
    ln("/etc/hostname", "ws2/host");
    res("ws2/host", false, "/etc/hostname");
}

static void test_path_resolve_applies_dotdot_after_a_symlink_physically(void **state)
{
    (void)state;
    /* ws3/link -> deep/a/b; "ws3/link/../x" is deep/a/x, not ws3/x */
    mk("ws3/");
    mk("ws3/deep/");
    mk("ws3/deep/a/");
    mk("ws3/deep/a/b/");
    ln("deep/a/b", "ws3/link");
    res("ws3/link/../x", false, "ws3/deep/a/x");
}

static void test_path_resolve_keeps_what_does_not_exist_as_written(void **state)
{
    (void)state;
    res("no/such/../dir/file", false, "no/dir/file");
}

static void test_path_resolve_reports_a_symlink_loop(void **state)
{
    (void)state;
    char out[PATH_MAX];
    ln("loop-b", "loop-a");
    ln("loop-a", "loop-b");
    assert_int_equal(policy_path_resolve(tmp, "loop-a/x", false, out, sizeof(out)), -1);
    assert_int_equal(errno, ELOOP);
}

static void test_path_resolve_keeps_proc_self_literally(void **state)
{
    (void)state;
    char out[PATH_MAX];
    assert_int_equal(policy_path_resolve("/", "/proc/self/status", false, out, sizeof(out)), 0);
    assert_string_equal(out, "/proc/self/status");
    assert_int_equal(policy_path_resolve("/", "/proc/thread-self/comm", false, out, sizeof(out)), 0);
    assert_string_equal(out, "/proc/thread-self/comm");
}

static void test_path_resolve_follows_proc_self_fd_to_its_file(void **state)
{
    (void)state;
    char path[BIG], out[BIG], want[BIG];
    snprintf(want, sizeof(want), "%s/fdtarget", tmp);
    int fd = open(want, O_CREAT | O_WRONLY, 0600);
    assert_true(fd >= 0);
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    assert_int_equal(policy_path_resolve("/", path, false, out, sizeof(out)), 0);
    assert_string_equal(out, want);
    /* /dev/fd is a symlink to /proc/self/fd */
    snprintf(path, sizeof(path), "/dev/fd/%d", fd);
    assert_int_equal(policy_path_resolve("/", path, false, out, sizeof(out)), 0);
    assert_string_equal(out, want);
    close(fd);
}

static void test_path_resolve_keeps_a_pipe_fd_path_as_written(void **state)
{
    (void)state;
    int fds[2];
    char path[PATH_MAX], out[PATH_MAX];
    assert_int_equal(pipe(fds), 0);
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fds[0]);
    assert_int_equal(policy_path_resolve("/", path, false, out, sizeof(out)), 0);
    assert_string_equal(out, path);
    close(fds[0]);
    close(fds[1]);
}

static void test_path_resolve_keeps_a_memfd_fd_path_as_written(void **state)
{
    (void)state;
    char path[BIG], out[BIG];
    int fd = memfd_create("sbx-test", 0);
    assert_true(fd >= 0);
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    assert_int_equal(policy_path_resolve("/", path, false, out, sizeof(out)), 0);
    assert_string_equal(out, path);
    close(fd);
}

static void test_path_resolve_follows_proc_self_root_and_cwd(void **state)
{
    (void)state;
    char out[BIG], want[BIG + 16], cwd[PATH_MAX];
    assert_int_equal(policy_path_resolve("/", "/proc/self/root/etc/hostname", false, out, sizeof(out)), 0);
    assert_string_equal(out, "/etc/hostname");
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    assert_int_equal(policy_path_resolve("/", "/proc/self/cwd/x/../.env", false, out, sizeof(out)), 0);
    snprintf(want, sizeof(want), "%s/.env", strcmp(cwd, "/") ? cwd : "");
    assert_string_equal(out, want);
}

static void test_path_expand_uses_home_and_workspace(void **state)
{
    (void)state;
    const char *y = "version: 1\n";
    struct policy_options opt = { .workspace = tmp, .home = "/" };
    struct policy_diag diag;
    char out[BIG], want[BIG];
    struct policy *p = policy_load_buffer("t.yaml", y, strlen(y), &opt, &diag);
    assert_non_null(p);
    assert_int_equal(policy_path_expand(p, "~/x", out, sizeof(out)), 0);
    assert_string_equal(out, "/x");
    assert_int_equal(policy_path_expand(p, "src/../a.c", out, sizeof(out)), 0);
    snprintf(want, sizeof(want), "%s/a.c", tmp);
    assert_string_equal(out, want);
    assert_int_equal(policy_path_expand(p, "/etc/hosts", out, sizeof(out)), 0);
    assert_string_equal(out, "/etc/hosts");
    policy_free(p);
}

/* Resolves PATH (relative to tmp) with the directory cache off and on (cold,
 * then warm) and asserts that all three agree. */
static void same_with_cache(const char *path, bool nofollow)
{
    char fresh[BIG], cold[BIG], warm[BIG];
    policy_path_cache_enable(false);
    assert_int_equal(policy_path_resolve(tmp, path, nofollow, fresh, sizeof fresh), 0);
    policy_path_cache_enable(true);
    assert_int_equal(policy_path_resolve(tmp, path, nofollow, cold, sizeof cold), 0);
    assert_int_equal(policy_path_resolve(tmp, path, nofollow, warm, sizeof warm), 0);
    policy_path_cache_enable(false);
    assert_string_equal(cold, fresh);
    assert_string_equal(warm, fresh);
}

static void test_path_cache_resolves_every_path_as_a_fresh_walk_does(void **state)
{
    (void)state;
    unsigned long h0, m0, h1, m1;
    mk("k/");
    mk("k/a/");
    mk("k/a/b/");
    mk("k/a/b/c/");
    mk("k/a/b/c/f");
    mk("k/t/");
    mk("k/t/g");
    ln("../../t", "k/a/b/up");
    ln("/etc", "k/a/etc");
    policy_path_cache_stats(&h0, &m0);
    same_with_cache("k/a/b/c/f", false);
    same_with_cache("k/a/b/c/missing/x", false);
    same_with_cache("k/a/b/c/../c/f", false);
    same_with_cache("k/a/b/up/g", false);
    same_with_cache("k/a/b/up", true);
    same_with_cache("k/a/b/up/../t/g", false);
    same_with_cache("k/a/etc/hosts", false);
    same_with_cache("k//a/b/./c/f", false);
    same_with_cache("/proc/self/fd/0", false);
    policy_path_cache_stats(&h1, &m1);
    assert_true(h1 > h0);           /* the warm runs started from the cache */
}

static void test_path_cache_sees_a_remembered_directory_replaced_by_a_symlink(void **state)
{
    (void)state;
    char from[BIG], to[BIG];
    mk("r/");
    mk("r/d/");
    mk("r/d/e/");
    mk("r/d/e/f");
    mk("r/secret/");
    mk("r/secret/f");
    policy_path_cache_enable(true);
    res("r/d/e/f", false, "r/d/e/f");
    res("r/d/e/f", false, "r/d/e/f");      /* r/d/e is remembered now */
    snprintf(from, sizeof from, "%s/r/d/e", tmp);
    snprintf(to, sizeof to, "%s/r/moved", tmp);
    assert_int_equal(rename(from, to), 0);
    ln("../secret", "r/d/e");
    res("r/d/e/f", false, "r/secret/f");
    policy_path_cache_enable(false);
}

static void test_path_cache_sees_a_directory_above_replaced_by_a_symlink(void **state)
{
    (void)state;
    char from[BIG], to[BIG];
    mk("u/");
    mk("u/d/");
    mk("u/d/e/");
    mk("u/d/e/f");
    mk("u/other/");
    mk("u/other/e/");
    mk("u/other/e/f");
    policy_path_cache_enable(true);
    res("u/d/e/f", false, "u/d/e/f");
    res("u/d/e/f", false, "u/d/e/f");
    /* u/d (above the remembered u/d/e) becomes a symlink to another tree */
    snprintf(from, sizeof from, "%s/u/d", tmp);
    snprintf(to, sizeof to, "%s/u/old", tmp);
    assert_int_equal(rename(from, to), 0);
    ln("other", "u/d");
    res("u/d/e/f", false, "u/other/e/f");
    policy_path_cache_enable(false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_lexical_folds_dots_and_slashes),
        cmocka_unit_test(test_path_lexical_reports_a_path_too_long),
        cmocka_unit_test(test_path_resolve_follows_symlinks_inside_the_workspace),
        cmocka_unit_test(test_path_resolve_follows_a_symlink_out_of_the_workspace),
        cmocka_unit_test(test_path_resolve_applies_dotdot_after_a_symlink_physically),
        cmocka_unit_test(test_path_resolve_keeps_what_does_not_exist_as_written),
        cmocka_unit_test(test_path_resolve_reports_a_symlink_loop),
        cmocka_unit_test(test_path_resolve_keeps_proc_self_literally),
        cmocka_unit_test(test_path_resolve_follows_proc_self_fd_to_its_file),
        cmocka_unit_test(test_path_resolve_keeps_a_pipe_fd_path_as_written),
        cmocka_unit_test(test_path_resolve_keeps_a_memfd_fd_path_as_written),
        cmocka_unit_test(test_path_resolve_follows_proc_self_root_and_cwd),
        cmocka_unit_test(test_path_expand_uses_home_and_workspace),
        cmocka_unit_test(test_path_cache_resolves_every_path_as_a_fresh_walk_does),
        cmocka_unit_test(test_path_cache_sees_a_remembered_directory_replaced_by_a_symlink),
        cmocka_unit_test(test_path_cache_sees_a_directory_above_replaced_by_a_symlink),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
