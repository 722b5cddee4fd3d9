/* test_glob.c — the glob language (policy_glob_match, policy_glob_root) and
 * the compiled fast paths, which must agree with the plain matcher. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "policy.h"

struct gcase {
    const char *glob, *path;
    bool match;
};

static const struct gcase cases[] = {
    /* literals */
    { "/etc/hosts", "/etc/hosts", true },
    { "/etc/hosts", "/etc/hosts.allow", false },
    { "/etc/hosts", "/etc", false },
    { "/etc/hosts", "/etc/hostsx", false },
    { "/", "/", true },
    { "/a", "/A", false },
    /* single star */
    { "/a/*", "/a/b", true },
    { "/a/*", "/a/b/c", false },
    { "/a/*", "/a", false },
    { "/a/*.c", "/a/main.c", true },
    { "/a/*.c", "/a/main.h", false },
    { "/a/*.c", "/a/.c", true },
    { "/a/*.c", "/a/sub/main.c", false },
    { "/a/*", "/a/.hidden", true },             /* dotfiles are not special */
    { "/a/b*c/d", "/a/bc/d", true },
    { "/a/b*c/d", "/a/bxyzc/d", true },
    { "/a/b*c/d", "/a/bx/yc/d", false },
    { "/*/hosts", "/etc/hosts", true },
    { "/a/*/*", "/a/b/c", true },
    { "/a/*/*", "/a/b", false },
    { "/a/**", "/a", true },                    /* the tree includes its root */
    /* double star at the end */
    { "/a/**", "/a/b", true },
    { "/a/**", "/a/b/c/d", true },
    { "/a/**", "/ab", false },
    { "/a/**", "/b/a", false },
    { "/**", "/", true },
    { "/**", "/anything/at/all", true },
    { "/usr/**", "/usr/lib/x86_64-linux-gnu/libc.so.6", true },
    { "/usr/**", "/usrlocal", false },
    /* double star in the middle */
    { "/a/**/b", "/a/b", true },                /* zero segments */
    { "/a/**/b", "/a/x/b", true },
    { "/a/**/b", "/a/x/y/z/b", true },
    { "/a/**/b", "/a/x/bb", false },
    { "/a/**/b", "/a/xb", false },
    { "/a/**/b", "/a/b/c", false },
    { "/w/**/.env", "/w/.env", true },
    { "/w/**/.env", "/w/app/.env", true },
    { "/w/**/.env", "/w/app/.envrc", false },
    { "/w/**/.env.*", "/w/.env.local", true },
    { "/w/**/.env.*", "/w/.env", false },
    { "/w/**/.ssh/**", "/w/.ssh", true },
    { "/w/**/.ssh/**", "/w/u/.ssh/id_rsa", true },
    { "/w/**/.ssh/**", "/w/u/.sshx/id_rsa", false },
    { "/w/**/*.pem", "/w/certs/server.pem", true },
    { "/w/**/*.pem", "/w/server.pem", true },
    { "/w/**/*.pem", "/w/server.pem.bak", false },
    { "/**/sudo", "/usr/bin/sudo", true },
    { "/**/sudo", "/sudo", true },
    { "/**/sudo", "/usr/bin/sudoedit", false },
    { "/a/**/b/**/c", "/a/b/c", true },
    { "/a/**/b/**/c", "/a/x/b/y/z/c", true },
    { "/a/**/b/**/c", "/a/x/y/c", false },
    /* double star inside a segment: any characters, '/' included */
    { "/tmp/x**", "/tmp/xy/z", true },
    { "/tmp/x**", "/tmp/ay", false },
    /* question mark */
    { "/a/?", "/a/b", true },
    { "/a/?", "/a/bc", false },
    { "/a/?", "/a/", false },
    { "/a?b", "/a/b", false },                  /* never '/' */
    { "/dev/sd?", "/dev/sda", true },
    /* classes */
    { "/a/[abc]", "/a/b", true },
    { "/a/[abc]", "/a/d", false },
    { "/a/[a-c]x", "/a/cx", true },
    { "/a/[a-c]x", "/a/dx", false },
    { "/a/[!a-c]x", "/a/dx", true },
    { "/a/[!a-c]x", "/a/bx", false },
    { "/a/[^a-c]x", "/a/dx", true },
    { "/a/[]]", "/a/]", true },
    { "/a/[!]]", "/a/x", true },
    { "/a/[!]]", "/a/]", false },
    { "/a[/]b", "/a/b", false },                /* a class never matches '/' */
    { "/v[0-9]/*", "/v1/x", true },
    { "/v[0-9]/*", "/vx/x", false },
    /* escapes */
    { "/a/\\*", "/a/*", true },
    { "/a/\\*", "/a/b", false },
    { "/a/\\?", "/a/?", true },
    { "/a/\\[x]", "/a/[x]", true },
    { "/a/f\\oo", "/a/foo", true },
};

static void test_glob_table_of_cases_matches_as_documented(void **state)
{
    (void)state;
    size_t n = sizeof(cases) / sizeof(cases[0]);
    assert_true(n >= 60);
    for (size_t i = 0; i < n; i++) {
        bool got = policy_glob_match(cases[i].glob, cases[i].path);
        if (got != cases[i].match)
            fail_msg("glob %s path %s: got %d want %d", cases[i].glob, cases[i].path, got,
                     cases[i].match);
    }
}

/* The compiled policy (prefix/suffix prefilters, tree and literal kinds)
 * must decide exactly as the plain matcher: run the table through a
 * policy whose only read.allow rule is each glob. */
/* The compiled policy (prefix/suffix prefilters, character-pair filter,
 * tree and literal kinds) must decide exactly as the plain matcher: every
 * glob of the table against every path of the table, each glob the only
 * read.allow rule of a policy. */
static void test_glob_compiled_rules_agree_with_the_matcher(void **state)
{
    (void)state;
    char yaml[512];
    struct policy_diag diag;
    struct policy_options opt = { .workspace = "/", .home = "/nonexistent-home" };
    size_t n = sizeof(cases) / sizeof(cases[0]), compared = 0;
    for (size_t i = 0; i < n; i++) {
        /* YAML single quotes keep backslashes and brackets as written */
        snprintf(yaml, sizeof(yaml),
                 "version: 1\nfiles:\n  read:\n    allow: ['%s']\n    deny: []\n", cases[i].glob);
        struct policy *p = policy_load_buffer("t.yaml", yaml, strlen(yaml), &opt, &diag);
        if (p == NULL)
            fail_msg("%s: %s", cases[i].glob, diag.count ? diag.msg[0] : "?");
        const struct policy_rule *r;
        policy_rules(p, POLICY_READ_ALLOW, &r);
        /* /usr, /etc... may be rewritten by symlink resolution: skip those */
        if (strcmp(r[0].pattern, cases[i].glob) == 0) {
            for (size_t j = 0; j < n; j++) {
                struct policy_verdict v;
                bool want = policy_glob_match(cases[i].glob, cases[j].path);
                bool got = policy_decide_path(p, SBX_OP_OPEN_READ, cases[j].path, &v) == SBX_ALLOW;
                if (got != want)
                    fail_msg("compiled glob %s path %s: got %d want %d", cases[i].glob,
                             cases[j].path, got, want);
                compared++;
            }
        }
        policy_free(p);
    }
    assert_true(compared > 3000);
}

static void check_root(const char *glob, const char *want)
{
    char out[256];
    assert_int_equal(policy_glob_root(glob, out, sizeof(out)), 0);
    assert_string_equal(out, want);
}

static void test_glob_root_is_the_leading_literal_directory(void **state)
{
    (void)state;
    check_root("/usr/**", "/usr");
    check_root("/a/b*c/d", "/a");
    check_root("/etc/hosts", "/etc/hosts");
    check_root("/**", "/");
    check_root("/*.c", "/");
    check_root("/home/u/proj/**/.env", "/home/u/proj");
    check_root("/a/b/[xy]", "/a/b");
}

static void test_glob_root_reports_a_too_small_buffer(void **state)
{
    (void)state;
    char out[4];
    assert_int_equal(policy_glob_root("/usr/lib/**", out, sizeof(out)), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_glob_table_of_cases_matches_as_documented),
        cmocka_unit_test(test_glob_compiled_rules_agree_with_the_matcher),
        cmocka_unit_test(test_glob_root_is_the_leading_literal_directory),
        cmocka_unit_test(test_glob_root_reports_a_too_small_buffer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
