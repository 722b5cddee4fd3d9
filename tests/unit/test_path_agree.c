/* test_path_agree.c — one table of paths through every caller of path.h,
 * to show that they mean the same thing by a path (DESIGN: "semantics that
 * every enforcer shares").
 *
 * The callers: the policy and the tools (policy_path_lexical,
 * policy_path_resolve), the preload (guard_lexical and guard_resolve, with
 * its dirfd base, compiled in from preload/ as test_preload_path.c does),
 * the supervisor (policy_path_resolve_in with the view it builds: the
 * process's /proc/PID/root and its pid), sbx-guard (guard_find_program),
 * the preload's PATH probe around libc and the default one, and the one
 * shell-word splitter that `sbx-policy explain` and policy_decide_command
 * share. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../preload/decide.c"
#include "../../preload/dns.c"
#include "../../preload/env.c"
#include "../../preload/init.c"
#include "../../preload/notify.c"
#include "../../preload/path.c"
#include "../../preload/resolve.c"

#include "guard_env.h"
#include "path.h"

static char tmp[PATH_MAX];      /* a resolved scratch directory */
static int tmpfd = -1;

static void mk(const char *rel, mode_t mode)
{
    char p[PATH_MAX * 2];
    snprintf(p, sizeof p, "%s/%s", tmp, rel);
    if (rel[strlen(rel) - 1] == '/') {
        assert_int_equal(mkdir(p, 0755), 0);
        return;
    }
    int fd = open(p, O_CREAT | O_WRONLY, mode);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(chmod(p, mode), 0);
}

static void ln(const char *target, const char *rel)
{
    char p[PATH_MAX * 2];
    snprintf(p, sizeof p, "%s/%s", tmp, rel);
    assert_int_equal(symlink(target, p), 0);
}

/* "@" in a case stands for the scratch directory. */
static void expand(const char *in, char *out, size_t outsz)
{
    if (in[0] == '@')
        snprintf(out, outsz, "%s%s", tmp, in + 1);
    else
        snprintf(out, outsz, "%s", in);
}

static int setup(void **state)
{
    (void)state;
    const char *t = getenv("TMPDIR");
    char tpl[PATH_MAX];
    snprintf(tpl, sizeof tpl, "%s/agreeXXXXXX", t ? t : "/tmp");
    if (mkdtemp(tpl) == NULL || realpath(tpl, tmp) == NULL)
        return -1;
    tmpfd = open(tmp, O_RDONLY | O_DIRECTORY);
    return tmpfd < 0 ? -1 : 0;
}

/* ---- folding: the policy, the tools and the preload ----------------------- */

struct fold_case {
    const char *path;           /* relative to the scratch directory, or absolute */
    const char *want;
};

static const struct fold_case folds[] = {
    { "a/b", "@/a/b" },
    { "./a/./b", "@/a/b" },
    { "a/../b", "@/b" },
    { "a//b///c/", "@/a/b/c" },
    { ".", "@" },
    { "/etc/./hosts", "/etc/hosts" },
    { "/", "/" },
    { "/..", "/" },
    { "/a/../../..", "/" },
    { "//a///b", "/a/b" },
    { "/a/..b/c", "/a/..b/c" },
    { "/a/.env", "/a/.env" },
};

static void test_every_caller_folds_a_path_the_same_way(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof folds / sizeof folds[0]; i++) {
        char want[PATH_MAX], pol[PATH_MAX], pre[PATH_MAX], onto[PATH_MAX];
        expand(folds[i].want, want, sizeof want);
        assert_int_equal(policy_path_lexical(tmp, folds[i].path, pol, sizeof pol), 0);
        assert_int_equal(guard_lexical(tmpfd, folds[i].path, pre, sizeof pre), 0);
        strlcpy(onto, tmp, sizeof onto);
        assert_int_equal(policy_path_fold_onto(onto, sizeof onto, strlen(onto),
                                               folds[i].path[0] == '/' ? "" : folds[i].path), 0);
        if (strcmp(pol, want) != 0 || strcmp(pre, want) != 0)
            fail_msg("%s: policy %s, preload %s, want %s", folds[i].path, pol, pre, want);
        if (folds[i].path[0] != '/' && strcmp(onto, want) != 0)
            fail_msg("%s: fold_onto %s, want %s", folds[i].path, onto, want);
    }
}

/* ---- resolving: the policy and tools, the preload, the supervisor ------- */

struct resolve_case {
    const char *path;
    bool nofollow;
    const char *want;
};

static void resolve_tree(void)
{
    mk("ws/", 0);
    mk("ws/real/", 0);
    mk("ws/real/file", 0644);
    mk("out/", 0);
    mk("out/secret", 0600);
    ln("real", "ws/link");
    ln("../out", "ws/up");
    ln("/etc", "ws/etc");
    ln("loop-b", "ws/loop-a");
    ln("loop-a", "ws/loop-b");
}

static const struct resolve_case resolves[] = {
    { "ws/link/file", false, "@/ws/real/file" },
    { "ws/link", false, "@/ws/real" },
    { "ws/link", true, "@/ws/link" },
    { "ws/link/new-file", false, "@/ws/real/new-file" },
    { "ws/up/secret", false, "@/out/secret" },
    { "ws/link/../real/file", false, "@/ws/real/file" },  /* ".." of the target */
    { "ws/missing/../x", false, "@/ws/x" },               /* folded after a gap */
    { "ws/etc/hostname", false, "/etc/hostname" },
    { "/proc/self/root/etc/hostname", false, "/etc/hostname" },
};

static void three_ways(const struct resolve_case *c, char *pol, char *pre, char *sup,
                       size_t sz)
{
    char root[64];
    snprintf(root, sizeof root, "/proc/%d/root", (int)getpid());
    struct policy_path_view view = { .root = root, .pid = getpid() };
    unsigned flags = POLICY_PATH_MEMFD_NAME | (c->nofollow ? POLICY_PATH_NOFOLLOW : 0);
    assert_int_equal(policy_path_resolve(tmp, c->path, c->nofollow, pol, sz), 0);
    assert_int_equal(guard_resolve(tmpfd, c->path, c->nofollow, pre, sz), 0);
    assert_int_equal(policy_path_resolve_in(&view, tmp, c->path, flags, sup, sz), 0);
}

static void test_every_caller_resolves_a_path_to_the_same_file(void **state)
{
    (void)state;
    resolve_tree();
    for (size_t i = 0; i < sizeof resolves / sizeof resolves[0]; i++) {
        char want[PATH_MAX], pol[PATH_MAX], pre[PATH_MAX], sup[PATH_MAX];
        expand(resolves[i].want, want, sizeof want);
        three_ways(&resolves[i], pol, pre, sup, sizeof pol);
        if (strcmp(pol, want) || strcmp(pre, want) || strcmp(sup, want))
            fail_msg("%s: policy %s, preload %s, supervisor %s, want %s",
                     resolves[i].path, pol, pre, sup, want);
    }
}

static void test_every_caller_reports_a_symlink_loop(void **state)
{
    (void)state;
    char root[64], out[PATH_MAX];
    snprintf(root, sizeof root, "/proc/%d/root", (int)getpid());
    struct policy_path_view view = { .root = root, .pid = getpid() };
    errno = 0;
    assert_int_equal(policy_path_resolve(tmp, "ws/loop-a/x", false, out, sizeof out), -1);
    assert_int_equal(errno, ELOOP);
    errno = 0;
    assert_int_equal(guard_resolve(tmpfd, "ws/loop-a/x", false, out, sizeof out), -1);
    assert_int_equal(errno, ELOOP);
    errno = 0;
    assert_int_equal(policy_path_resolve_in(&view, tmp, "ws/loop-a/x", 0, out, sizeof out), -1);
    assert_int_equal(errno, ELOOP);
}

/* The one place the views differ, on purpose: the supervisor is not the
 * process, so /proc/self there is the process's number; and it must know a
 * memfd when it is asked to run one. */
static void test_the_supervisor_names_proc_self_and_a_memfd_as_the_agent_sees_them(void **state)
{
    (void)state;
    char root[64], own[PATH_MAX], sup[PATH_MAX], want[PATH_MAX], path[64];
    snprintf(root, sizeof root, "/proc/%d/root", (int)getpid());
    struct policy_path_view view = { .root = root, .pid = getpid() };
    assert_int_equal(policy_path_resolve(NULL, "/proc/self/status", false, own, sizeof own), 0);
    assert_string_equal(own, "/proc/self/status");
    assert_int_equal(policy_path_resolve_in(&view, NULL, "/proc/self/status", 0, sup, sizeof sup),
                     0);
    snprintf(want, sizeof want, "/proc/%d/status", (int)getpid());
    assert_string_equal(sup, want);

    int fd = memfd_create("agree", 0);
    assert_true(fd >= 0);
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    assert_int_equal(policy_path_resolve(NULL, path, false, own, sizeof own), 0);
    assert_string_equal(own, path);
    assert_int_equal(policy_path_resolve_in(&view, NULL, path, POLICY_PATH_MEMFD_NAME,
                                            sup, sizeof sup), 0);
    assert_string_equal(sup, "/memfd:agree (deleted)");
    close(fd);
}

/* ---- under: mounts, bwrap, the supervisor, sbx-guard, explain ------------ */

static void test_under_means_the_directory_itself_or_below_and_root_holds_everything(void **state)
{
    (void)state;
    static const struct { const char *path, *dir; bool want; } cases[] = {
        { "/a", "/a", true },
        { "/a/b", "/a", true },
        { "/ab", "/a", false },
        { "/a", "/a/b", false },
        { "/", "/", true },
        { "/x", "/", true },
        { "/x/y", "/", true },
        { "/a/b", "/a/", true },
        { "/x", "", false },
        { "/run/sbx/control.sock", "/run/sbx", true },
        { "/run/sbxx", "/run/sbx", false },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (policy_path_under(cases[i].path, cases[i].dir) != cases[i].want)
            fail_msg("under(%s, %s) should be %d", cases[i].path, cases[i].dir, cases[i].want);
}

/* ---- PATH: the preload's execvp, sbx-guard, explain ---------------------- */

static void test_every_caller_finds_the_same_program_in_path(void **state)
{
    (void)state;
    char pathvar[PATH_MAX * 4], a[PATH_MAX], b[PATH_MAX], c[PATH_MAX], want[PATH_MAX + 16];
    mk("p1/", 0);
    mk("p2/", 0);
    mk("p3/", 0);
    mk("p1/tool", 0644);            /* there, not executable: skipped */
    mk("p2/tool/", 0);              /* a directory: skipped */
    mk("p3/tool", 0755);
    mk("p1/only-plain", 0644);
    snprintf(pathvar, sizeof pathvar, "%s/p1:%s/p2:%s/p3", tmp, tmp, tmp);
    char *env[] = { NULL, NULL };
    char envpath[PATH_MAX * 4 + 8];
    snprintf(envpath, sizeof envpath, "PATH=%s", pathvar);
    env[0] = envpath;

    snprintf(want, sizeof want, "%s/p3/tool", tmp);
    assert_int_equal(policy_path_search("tool", pathvar, NULL, a, sizeof a), 0);
    assert_int_equal(policy_path_search("tool", pathvar, guard_probe_exec, b, sizeof b), 0);
    assert_int_equal(guard_find_program("tool", env, c, sizeof c), 0);
    assert_string_equal(a, want);
    assert_string_equal(b, want);
    assert_string_equal(c, want);

    /* only a file that cannot run: EACCES, from every caller */
    errno = 0;
    assert_int_equal(policy_path_search("only-plain", pathvar, NULL, a, sizeof a), -1);
    assert_int_equal(errno, EACCES);
    errno = 0;
    assert_int_equal(policy_path_search("only-plain", pathvar, guard_probe_exec, b, sizeof b), -1);
    assert_int_equal(errno, EACCES);
    errno = 0;
    assert_int_equal(guard_find_program("only-plain", env, c, sizeof c), -1);
    assert_int_equal(errno, EACCES);

    /* nothing at all: ENOENT */
    errno = 0;
    assert_int_equal(policy_path_search("no-such-tool", pathvar, guard_probe_exec, b, sizeof b), -1);
    assert_int_equal(errno, ENOENT);
    errno = 0;
    assert_int_equal(guard_find_program("no-such-tool", env, c, sizeof c), -1);
    assert_int_equal(errno, ENOENT);
}

static void test_an_empty_path_entry_is_the_current_directory(void **state)
{
    (void)state;
    char cwd[PATH_MAX], out[PATH_MAX], want[PATH_MAX * 2];
    assert_non_null(getcwd(cwd, sizeof cwd));
    mk("here/", 0);
    mk("here/prog", 0755);
    snprintf(want, sizeof want, "%s/here", tmp);
    assert_int_equal(chdir(want), 0);
    assert_int_equal(policy_path_search("prog", "/nonexistent::/also-not", NULL, out, sizeof out),
                     0);
    assert_string_equal(out, "./prog");
    char *env[] = { (char *)"PATH=/nonexistent::/also-not", NULL };
    assert_int_equal(guard_find_program("prog", env, out, sizeof out), 0);
    snprintf(want, sizeof want, "%s/here/./prog", tmp);
    assert_string_equal(out, want);
    assert_int_equal(chdir(cwd), 0);
}

/* ---- shell words: the guard's command decisions and explain ------------- */

static void test_a_typed_command_splits_as_sh_splits_it(void **state)
{
    (void)state;
    static const struct { const char *cmd; const char *words[6]; } cases[] = {
        { "ls -l", { "ls", "-l" } },
        { "  a\t b\nc ", { "a", "b", "c" } },
        { "sh -c 'rm -rf ~'", { "sh", "-c", "rm -rf ~" } },
        { "sh -c \"echo \\\"x\\\"\"", { "sh", "-c", "echo \"x\"" } },
        { "echo \"a\\b\" \"\\$HOME\" \"\\\\\"", { "echo", "a\\b", "$HOME", "\\" } },
        { "echo a\\ b 'it'\"'\"'s'", { "echo", "a b", "it's" } },
        { "echo ''", { "echo", "" } },
        { "", { NULL } },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char store[256], *words[8];
        int n = policy_path_shell_words(cases[i].cmd, store, strlen(cases[i].cmd) + 1, words,
                                        8);
        int want = 0;
        while (cases[i].words[want])
            want++;
        if (n != want)
            fail_msg("%s: %d words, want %d", cases[i].cmd, n, want);
        for (int k = 0; k < n; k++)
            if (strcmp(words[k], cases[i].words[k]) != 0)
                fail_msg("%s: word %d is [%s], want [%s]", cases[i].cmd, k, words[k],
                         cases[i].words[k]);
        assert_null(words[n]);
    }
}

static void test_shell_words_refuse_what_does_not_fit(void **state)
{
    (void)state;
    char small[4], store[64], *words[3];
    assert_int_equal(policy_path_shell_words("abcdef", small, sizeof small, words, 3), -1);
    assert_int_equal(policy_path_shell_words("a b c", store, sizeof store, words, 3), -1);
    assert_int_equal(policy_path_shell_words("a b", store, sizeof store, words, 3), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_caller_folds_a_path_the_same_way),
        cmocka_unit_test(test_every_caller_resolves_a_path_to_the_same_file),
        cmocka_unit_test(test_every_caller_reports_a_symlink_loop),
        cmocka_unit_test(test_the_supervisor_names_proc_self_and_a_memfd_as_the_agent_sees_them),
        cmocka_unit_test(test_under_means_the_directory_itself_or_below_and_root_holds_everything),
        cmocka_unit_test(test_every_caller_finds_the_same_program_in_path),
        cmocka_unit_test(test_an_empty_path_entry_is_the_current_directory),
        cmocka_unit_test(test_a_typed_command_splits_as_sh_splits_it),
        cmocka_unit_test(test_shell_words_refuse_what_does_not_fit),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
