/* test_isolate.c — the kernel layer: mode names, the plans compiled from a
 * policy (mounts, Landlock, seccomp, bwrap), and iso_spawn in none and
 * native mode (the agent runs, or fails to start with a reason, and its
 * status is its own). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <bsd/string.h>

#include "iso_int.h"

extern char **environ;

static char tmpdir[256];

static struct policy *load(const char *yaml)
{
    struct policy_options opt = { .workspace = tmpdir, .home = tmpdir };
    struct policy_diag diag;
    struct policy *p = policy_load_buffer("t.yaml", yaml, strlen(yaml), &opt, &diag);
    if (p == NULL)
        fail_msg("policy: %s", diag.count ? diag.msg[0] : "?");
    return p;
}

static void write_file(const char *rel, const char *text)
{
    char path[512];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(tmpdir, sizeof tmpdir, "%s/isoXXXXXX", base);
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[300];
    (void)state;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void request(struct iso_request *r, struct policy *p, enum iso_mode m, char **argv)
{
    static char rt[300], db[300];
    snprintf(rt, sizeof rt, "%s/run", tmpdir);
    snprintf(db, sizeof db, "%s/state/audit.db", tmpdir);
    mkdir(rt, 0700);
    memset(r, 0, sizeof *r);
    r->policy = p;
    r->mode = m;
    r->workspace = policy_info(p)->workspace;
    r->runtime_dir = rt;
    r->audit_db = db;
    r->argv = argv;
    r->envp = environ;
}

/* Runs ARGV under mode M and returns the agent's wait status. */
static int run(struct policy *p, enum iso_mode m, char **argv)
{
    struct iso_request r;
    struct iso_child c;
    char err[512];
    int st;

    request(&r, p, m, argv);
    if (iso_spawn(&r, &c, err, sizeof err) < 0)
        fail_msg("iso_spawn: %s", err);
    /* Answer the supervisor's notifications until the agent is gone. */
    while (waitpid(c.pid, &st, WNOHANG) == 0) {
        struct pollfd pf = { c.notify_fd, POLLIN, 0 };
        if (c.notify_fd >= 0 && poll(&pf, 1, 20) > 0
            && iso_supervise(c.notify_fd, &r, NULL, NULL) < 0) {
            close(c.notify_fd);
            c.notify_fd = -1;
        } else if (c.notify_fd < 0) {
            usleep(2000);
        }
    }
    if (c.notify_fd >= 0)
        close(c.notify_fd);
    return iso_child_status(&c, st);
}

static void test_mode_names_round_trip(void **state)
{
    (void)state;
    for (int m = ISO_AUTO; m <= ISO_BWRAP; m++)
        assert_int_equal(iso_mode_parse(iso_mode_name((enum iso_mode)m)), m);
    assert_int_equal(iso_mode_parse("chroot"), -1);
    assert_int_equal(iso_mode_parse(NULL), -1);
}

static void test_seccomp_filter_builds_with_and_without_notification(void **state)
{
    struct iso_bpf a, b;
    char err[256];
    (void)state;
    assert_int_equal(iso_seccomp_build(true, &a, err, sizeof err), 0);
    assert_int_equal(iso_seccomp_build(false, &b, err, sizeof err), 0);
    assert_true(a.len > b.len);
    assert_true(b.len > 20);
    iso_bpf_free(&a);
    iso_bpf_free(&b);
}

static void test_none_mode_reports_a_missing_program_and_runs_nothing(void **state)
{
    struct policy *p = load("version: 1\n");
    char *argv[] = { "/nonexistent/agent", NULL };
    struct iso_request r;
    struct iso_child c;
    char err[512];
    (void)state;
    request(&r, p, ISO_NONE, argv);
    assert_int_equal(iso_spawn(&r, &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot run /nonexistent/agent: No such file"));
    policy_free(p);
}

static void test_none_mode_applies_the_policy_rlimits(void **state)
{
    struct policy *p = load("version: 1\nlimits:\n  open_files: 64\n");
    char *argv[] = { "/bin/sh", "-c", "test \"$(ulimit -n)\" = 64", NULL };
    int st;
    (void)state;
    st = run(p, ISO_NONE, argv);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    policy_free(p);
}

static void test_native_mode_runs_the_agent_as_pid_2_without_capabilities(void **state)
{
    struct policy *p = load("version: 1\n");
    char *argv[] = { "/bin/sh", "-c",
                     "test $$ = 2 && grep -q '^CapEff:\t0000000000000000' /proc/self/status", NULL };
    int st;
    (void)state;
    st = run(p, ISO_NATIVE, argv);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    policy_free(p);
}

static void test_native_mode_reports_the_agents_own_signal(void **state)
{
    struct policy *p = load("version: 1\n");
    char *argv[] = { "/bin/sh", "-c", "kill -TERM $$", NULL };
    int st;
    (void)state;
    st = run(p, ISO_NATIVE, argv);
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), 15);
    policy_free(p);
}

static void test_only_loopback_policies_get_a_net_namespace(void **state)
{
    struct policy *lo = load("version: 1\nnetwork:\n  connect:\n    allow: [\"127.0.0.1:8000\", "
                             "\"[::1]:80\", \"unix:/tmp/x\"]\n  bind:\n    allow: []\n");
    struct policy *out = load("version: 1\nnetwork:\n  connect:\n    allow: [\"*:443\"]\n");
    (void)state;
    assert_true(iso_net_loopback_only(lo));
    assert_false(iso_net_loopback_only(out));
    policy_free(lo);
    policy_free(out);
}

static void test_native_gives_a_net_namespace_unless_a_bind_rule_reaches_beyond_loopback(void **state)
{
    struct policy *names = load("version: 1\nnetwork:\n  connect:\n    allow: [\"*:443\", "
                                "\"api.example.com:443\"]\n  bind:\n    allow: [\"127.0.0.1:8000\"]\n");
    struct policy *server = load("version: 1\nnetwork:\n  bind:\n    allow: [\"0.0.0.0:8000\"]\n");
    struct policy *audit = load("version: 1\nmode: audit\n");
    (void)state;
    assert_true(iso_net_own_ns(names));
    assert_false(iso_net_own_ns(server));
    assert_false(iso_net_own_ns(audit));
    policy_free(names);
    policy_free(server);
    policy_free(audit);
}

static void test_landlock_rules_sit_on_the_glob_roots(void **state)
{
    struct policy *p = load("version: 1\nfiles:\n  read:\n    allow: [\"/usr/**\", \"/nonexistent-root/**\"]\n");
    struct iso_request r;
    struct iso_landlock ll;
    char err[256];
    bool usr = false, missing = false;
    char *argv[] = { "/bin/true", NULL };
    (void)state;
    request(&r, p, ISO_NATIVE, argv);
    assert_int_equal(iso_landlock_plan(&r, &ll, err, sizeof err), 0);
    if (ll.abi == 0)
        skip();
    for (size_t i = 0; i < ll.n_rules; i++) {
        usr = usr || (strcmp(ll.rules[i].path, "/usr") == 0 && (ll.rules[i].access & 4));
        missing = missing || strncmp(ll.rules[i].path, "/nonexistent", 12) == 0;
    }
    assert_true(usr);
    assert_false(missing);
    policy_free(p);
}

static void test_mounts_cover_existing_deny_files_and_hide_the_store(void **state)
{
    struct policy *p = load("version: 1\n");
    struct iso_request r;
    struct iso_mounts *mp = calloc(1, sizeof *mp);
    char err[256], env[512], ssh[512];
    bool file = false, dir = false, store = false;
    char *argv[] = { "/bin/true", NULL };
    (void)state;
    write_file(".env", "secret\n");
    snprintf(ssh, sizeof ssh, "%s/sub/.ssh", tmpdir);
    snprintf(env, sizeof env, "%s/sub", tmpdir);
    mkdir(env, 0755);
    mkdir(ssh, 0700);
    snprintf(env, sizeof env, "%s/.env", tmpdir);
    request(&r, p, ISO_NATIVE, argv);
    assert_int_equal(iso_mounts_plan(&r, mp, err, sizeof err), 0);
    for (size_t i = 0; i < mp->n; i++) {
        file = file || (mp->m[i].kind == ISO_MNT_MASK_FILE && strcmp(mp->m[i].path, env) == 0);
        dir = dir || (mp->m[i].kind == ISO_MNT_MASK_DIR && strcmp(mp->m[i].path, ssh) == 0);
    }
    for (size_t i = 0; i < mp->n_hide; i++)
        store = store || strstr(mp->hide[i], "/state") != NULL;
    assert_true(file);
    assert_true(dir);
    assert_true(store);
    iso_mounts_free(mp);
    free(mp);
    policy_free(p);
}

/* The old walk stopped at depth 12, 20,000 entries and 256 mounts. */
static void test_cover_is_complete_past_the_old_limits_and_has_no_duplicates(void **state)
{
    struct policy *p = load("version: 1\n");
    struct iso_request r;
    struct iso_mounts *mp = calloc(1, sizeof *mp);
    char err[256], path[1024], deep[1024];
    char *argv[] = { "/bin/true", NULL };
    size_t pems = 0, under_ssh = 0;
    bool deep_env = false, ssh_dir = false;
    (void)state;
    /* 600 private keys (*key*.pem: the default's name for one) in one
     * directory, a .env at depth 20, and a .ssh holding *.pem files: the
     * directory is masked whole, its files not again. */
    snprintf(path, sizeof path, "%s/certs", tmpdir);
    mkdir(path, 0755);
    for (int i = 0; i < 600; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "certs/k%d-key.pem", i);
        write_file(rel, "K\n");
    }
    snprintf(deep, sizeof deep, "%s", tmpdir);
    for (int d = 0; d < 20; d++) {
        strlcat(deep, "/d", sizeof deep);
        mkdir(deep, 0755);
    }
    strlcpy(path, deep, sizeof path);
    strlcat(path, "/.env", sizeof path);
    fclose(fopen(path, "w"));
    snprintf(deep, sizeof deep, "%s/.ssh", tmpdir);
    mkdir(deep, 0700);
    write_file(".ssh/a.pem", "K\n");
    write_file(".ssh/b.pem", "K\n");
    request(&r, p, ISO_NATIVE, argv);
    assert_int_equal(iso_mounts_plan(&r, mp, err, sizeof err), 0);
    assert_false(mp->incomplete);
    for (size_t i = 0; i < mp->n; i++) {
        if (mp->m[i].kind != ISO_MNT_MASK_FILE && mp->m[i].kind != ISO_MNT_MASK_DIR)
            continue;
        pems += strstr(mp->m[i].path, "/certs/k") != NULL;
        under_ssh += strstr(mp->m[i].path, "/.ssh/") != NULL;
        deep_env = deep_env || strcmp(mp->m[i].path, path) == 0;
        ssh_dir = ssh_dir || (mp->m[i].kind == ISO_MNT_MASK_DIR
                              && strcmp(strrchr(mp->m[i].path, '/'), "/.ssh") == 0);
        for (size_t j = i + 1; j < mp->n; j++)
            assert_false(mp->m[j].kind == mp->m[i].kind
                         && strcmp(mp->m[j].path, mp->m[i].path) == 0);
    }
    assert_int_equal(pems, 600);
    assert_true(deep_env);
    assert_true(ssh_dir);
    assert_int_equal(under_ssh, 0);
    iso_mounts_free(mp);
    free(mp);
    policy_free(p);
}

/* open_tree is wrapped (Makefile: -Wl,--wrap=open_tree): it fails with
 * EXDEV for the path named here, and works for any other. */
static char open_tree_fails_for[4096];
int __real_open_tree(int dfd, const char *path, unsigned flags);
int __wrap_open_tree(int dfd, const char *path, unsigned flags);
int __wrap_open_tree(int dfd, const char *path, unsigned flags)
{
    if (open_tree_fails_for[0] && strcmp(path, open_tree_fails_for) == 0) {
        errno = EXDEV;
        return -1;
    }
    return __real_open_tree(dfd, path, flags);
}

/* Fills the stack below the caller with FD, so that a descriptor variable
 * read before it is set holds FD. */
static __attribute__((noinline)) void spray_stack(int fd)
{
    volatile int a[32768];
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
        a[i] = fd;
}

#define SENTINEL_FD 100

/* In a child with its own mount namespace: the first kept path cannot be
 * cloned.  The error names it and its cause, and no descriptor that was
 * never opened is closed (it used to close whatever the stack held: here
 * the sentinel, in sbx-guard the pipe that carries the error). */
static void test_a_failed_clone_of_a_kept_path_closes_only_what_was_opened(void **state)
{
    (void)state;
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (unshare(CLONE_NEWNS) < 0 && unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
            _exit(77);
        struct iso_mounts *mp = calloc(1, sizeof *mp);
        char err[512] = "";
        if (!mp || dup2(pfd[1], SENTINEL_FD) < 0)
            _exit(3);
        mp->n_keep = 3;
        for (int i = 0; i < 3; i++) {
            snprintf(mp->keep[i], sizeof mp->keep[i], "%s/keep%d", tmpdir, i);
            mkdir(mp->keep[i], 0755);
        }
        snprintf(open_tree_fails_for, sizeof open_tree_fails_for, "%s", mp->keep[0]);
        spray_stack(SENTINEL_FD);
        int rc = iso_mounts_apply(mp, err, sizeof err);
        char want[4200];
        snprintf(want, sizeof want, "mounts: clone %s: %s", mp->keep[0], strerror(EXDEV));
        if (rc != -1 || strcmp(err, want) != 0) {
            fprintf(stderr, "rc %d, err \"%s\"\n", rc, err);
            _exit(4);
        }
        _exit(fcntl(SENTINEL_FD, F_GETFD) < 0 ? 5 : 0);
    }
    close(pfd[0]);
    close(pfd[1]);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    if (WEXITSTATUS(st) == 77)
        skip();
    if (WEXITSTATUS(st) == 5)
        fail_msg("a descriptor that hide_and_restore never opened was closed");
    assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_bwrap_command_line_binds_the_workspace_writable(void **state)
{
    struct policy *p = load("version: 1\n");
    struct iso_request r;
    struct iso_mounts *mp = calloc(1, sizeof *mp);
    char err[256];
    char *argv[] = { "/bin/true", NULL };
    char **bw;
    bool bind = false, seccomp = false;
    (void)state;
    if (iso_bwrap_path() == NULL)
        skip();
    request(&r, p, ISO_BWRAP, argv);
    assert_int_equal(iso_mounts_plan(&r, mp, err, sizeof err), 0);
    bw = iso_bwrap_argv(&r, mp, false, 7, err, sizeof err);
    assert_non_null(bw);
    for (size_t i = 0; bw[i]; i++) {
        bind = bind || (strcmp(bw[i], "--bind") == 0 && bw[i + 1]
                        && strcmp(bw[i + 1], r.workspace) == 0);
        seccomp = seccomp || (strcmp(bw[i], "--seccomp") == 0 && strcmp(bw[i + 1], "7") == 0);
    }
    assert_true(bind);
    assert_true(seccomp);
    iso_argv_free(bw);
    iso_mounts_free(mp);
    free(mp);
    policy_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mode_names_round_trip),
        cmocka_unit_test(test_seccomp_filter_builds_with_and_without_notification),
        cmocka_unit_test(test_none_mode_reports_a_missing_program_and_runs_nothing),
        cmocka_unit_test(test_none_mode_applies_the_policy_rlimits),
        cmocka_unit_test(test_native_mode_runs_the_agent_as_pid_2_without_capabilities),
        cmocka_unit_test(test_native_mode_reports_the_agents_own_signal),
        cmocka_unit_test(test_only_loopback_policies_get_a_net_namespace),
        cmocka_unit_test(test_native_gives_a_net_namespace_unless_a_bind_rule_reaches_beyond_loopback),
        cmocka_unit_test(test_landlock_rules_sit_on_the_glob_roots),
        cmocka_unit_test(test_mounts_cover_existing_deny_files_and_hide_the_store),
        cmocka_unit_test(test_cover_is_complete_past_the_old_limits_and_has_no_duplicates),
        cmocka_unit_test(test_bwrap_command_line_binds_the_workspace_writable),
        cmocka_unit_test(test_a_failed_clone_of_a_kept_path_closes_only_what_was_opened),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
