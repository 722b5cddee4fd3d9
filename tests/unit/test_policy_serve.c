/* test_policy_serve.c — the serve: section (policy/serve.c): its values,
 * its defaults, every mistake at its line and column, its bounds, and an
 * image of a policy with the section (which drops it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "failalloc.h"
#include "policy.h"

static const struct policy_options opt = { .workspace = "/", .home = "/root" };

static struct policy *load(const char *y, struct policy_diag *d)
{
    return policy_load_buffer("p.yaml", y, strlen(y), &opt, d);
}

static void expect_error(const char *y, const char *want)
{
    struct policy_diag d;
    struct policy *p = load(y, &d);
    if (p != NULL)
        fail_msg("loaded, expected: %s", want);
    if (d.count < 1 || strncmp(d.msg[0], want, strlen(want)) != 0)
        fail_msg("got %u errors, first \"%s\"; expected \"%s\"", d.count,
                 d.count ? d.msg[0] : "", want);
}

static const char full[] =
    "version: 1\n"
    "serve:\n"
    "  allowed_imports: [math, json, collections, numpy]\n"
    "  pre_imports: [numpy, numpy.linalg]\n"
    "  blocklist: [numpy.ctypeslib, scipy.io.loadmat, pandas.read_pickle]\n"
    "  stages: {blocklist_audit: observe, ast_scan: enforce}\n"
    "  runtime_hooks: observe\n"
    "  timeout_max: 20s\n";

static void test_serve_section_is_parsed_into_its_values(void **state)
{
    (void)state;
    struct policy_diag d;
    struct policy *p = load(full, &d);
    if (p == NULL)
        fail_msg("%s", d.msg[0]);
    const struct policy_serve *s = policy_serve(p);
    assert_non_null(s);
    /* allowed imports come back sorted */
    assert_int_equal(s->n_allowed_imports, 4);
    assert_string_equal(s->allowed_imports[0], "collections");
    assert_string_equal(s->allowed_imports[1], "json");
    assert_string_equal(s->allowed_imports[2], "math");
    assert_string_equal(s->allowed_imports[3], "numpy");
    /* pre-imports in the order written, dotted names allowed */
    assert_int_equal(s->n_pre_imports, 2);
    assert_string_equal(s->pre_imports[0], "numpy");
    assert_string_equal(s->pre_imports[1], "numpy.linalg");
    /* blocklist split at the last dot */
    assert_int_equal(s->n_blocklist, 3);
    assert_string_equal(s->blocklist[0].module, "numpy");
    assert_string_equal(s->blocklist[0].attr, "ctypeslib");
    assert_string_equal(s->blocklist[1].module, "scipy.io");
    assert_string_equal(s->blocklist[1].attr, "loadmat");
    assert_string_equal(s->blocklist[2].module, "pandas");
    assert_string_equal(s->blocklist[2].attr, "read_pickle");
    /* stages in the order written */
    assert_int_equal(s->n_stages, 2);
    assert_string_equal(s->stages[0].name, "blocklist_audit");
    assert_int_equal(s->stages[0].mode, POLICY_STAGE_OBSERVE);
    assert_string_equal(s->stages[1].name, "ast_scan");
    assert_int_equal(s->stages[1].mode, POLICY_STAGE_ENFORCE);
    assert_int_equal(s->runtime_hooks, POLICY_STAGE_OBSERVE);
    assert_int_equal(s->timeout_max_ms, 20000);
    policy_free(p);
}

static void test_policy_without_serve_section_has_none(void **state)
{
    (void)state;
    struct policy *p = load("version: 1\n", NULL);
    assert_non_null(p);
    assert_null(policy_serve(p));
    policy_free(p);
}

static void test_empty_serve_section_enforces_ast_scan_and_hooks(void **state)
{
    (void)state;
    struct policy *p = load("version: 1\nserve: {}\n", NULL);
    assert_non_null(p);
    const struct policy_serve *s = policy_serve(p);
    assert_non_null(s);
    assert_int_equal(s->n_allowed_imports, 0);
    assert_int_equal(s->n_pre_imports, 0);
    assert_int_equal(s->n_blocklist, 0);
    assert_int_equal(s->n_stages, 1);
    assert_string_equal(s->stages[0].name, "ast_scan");
    assert_int_equal(s->stages[0].mode, POLICY_STAGE_ENFORCE);
    assert_int_equal(s->runtime_hooks, POLICY_STAGE_ENFORCE);
    assert_int_equal(s->timeout_max_ms, 0);
    policy_free(p);
    /* stages written empty: none runs */
    p = load("version: 1\nserve:\n  stages: {}\n", NULL);
    assert_non_null(p);
    assert_int_equal(policy_serve(p)->n_stages, 0);
    policy_free(p);
}

static void test_serve_unknown_keys_and_stages_are_refused_with_a_suggestion(void **state)
{
    (void)state;
    expect_error("version: 1\nserve:\n  alowed_imports: [math]\n",
                 "p.yaml:3:3: unknown key \"alowed_imports\" in serve (did you mean "
                 "\"allowed_imports\"?)");
    expect_error("version: 1\nserv: {}\n",
                 "p.yaml:2:1: unknown key \"serv\" (did you mean \"serve\"?)");
    expect_error("version: 1\nserve:\n  stages:\n    ast_scna: enforce\n",
                 "p.yaml:4:5: serve.stages: unknown stage \"ast_scna\" (did you mean \"ast_scan\"?)");
    expect_error("version: 1\nserve:\n  stages:\n    lint: enforce\n",
                 "p.yaml:4:5: serve.stages: unknown stage \"lint\" (the stages are ast_scan "
                 "and blocklist_audit)");
    expect_error("version: 1\nserve:\n  stages: {ast_scan: enforce, ast_scan: observe}\n",
                 "p.yaml:3:31: duplicate key \"serve.stages.ast_scan\"");
    expect_error("version: 1\nserve:\n  stages: [ast_scan]\n",
                 "p.yaml:3:11: serve.stages: expected a mapping of STAGE: enforce|observe");
    expect_error("version: 1\nserve: [x]\n", "p.yaml:2:8: serve: expected a mapping of keys");
}

static void test_serve_modes_must_be_enforce_or_observe(void **state)
{
    (void)state;
    expect_error("version: 1\nserve:\n  runtime_hooks: warn\n",
                 "p.yaml:3:18: serve.runtime_hooks: \"warn\" is not enforce or observe");
    expect_error("version: 1\nserve:\n  stages: {ast_scan: [x]}\n",
                 "p.yaml:3:22: serve.stages: expected enforce or observe, found a list");
}

static void test_serve_names_must_be_module_names(void **state)
{
    (void)state;
    expect_error("version: 1\nserve:\n  allowed_imports: [math, \"os; rm\"]\n",
                 "p.yaml:3:27: serve.allowed_imports: \"os; rm\": not a module name");
    expect_error("version: 1\nserve:\n  allowed_imports: [os.path]\n",
                 "p.yaml:3:21: serve.allowed_imports: \"os.path\": a top-level module name is "
                 "expected");
    expect_error("version: 1\nserve:\n  pre_imports: [numpy..linalg]\n",
                 "p.yaml:3:17: serve.pre_imports: \"numpy..linalg\": not a module name");
    expect_error("version: 1\nserve:\n  pre_imports: [\"1numpy\"]\n",
                 "p.yaml:3:17: serve.pre_imports: \"1numpy\": not a module name");
    expect_error("version: 1\nserve:\n  blocklist: [pickle]\n",
                 "p.yaml:3:15: serve.blocklist: \"pickle\" names no attribute");
    expect_error("version: 1\nserve:\n  blocklist: [\"numpy.\"]\n",
                 "p.yaml:3:15: serve.blocklist: \"numpy.\": not a module name");
    expect_error("version: 1\nserve:\n  blocklist: [{a: b}]\n",
                 "p.yaml:3:15: serve.blocklist: expected MODULE.ATTRIBUTE, found a mapping");
    expect_error("version: 1\nserve:\n  allowed_imports: math\n",
                 "p.yaml:3:20: serve.allowed_imports: expected a list of module names");
    expect_error("version: 1\nserve:\n  allowed_imports: [\"ma\\0th\"]\n",
                 "p.yaml:3:21: serve.allowed_imports: \"ma\": a NUL character in a name");
}

static void test_serve_entry_written_twice_is_refused(void **state)
{
    (void)state;
    expect_error("version: 1\nserve:\n  allowed_imports:\n    - math\n    - json\n    - math\n",
                 "p.yaml:6:7: serve.allowed_imports: \"math\" is listed twice (first at line 4)");
    expect_error("version: 1\nserve:\n  blocklist: [a.b, a.b]\n",
                 "p.yaml:3:20: serve.blocklist: \"a.b\" is listed twice (first at line 3)");
}

static void test_serve_timeout_max_is_a_duration_up_to_30s(void **state)
{
    (void)state;
    expect_error("version: 1\nserve:\n  timeout_max: 31s\n",
                 "p.yaml:3:16: serve.timeout_max: \"31s\" is outside 1ms..30s");
    expect_error("version: 1\nserve:\n  timeout_max: 0s\n",
                 "p.yaml:3:16: serve.timeout_max: \"0s\" is outside 1ms..30s");
    expect_error("version: 1\nserve:\n  timeout_max: 30\n",
                 "p.yaml:3:16: serve.timeout_max: bad duration \"30\"");
    struct policy *p = load("version: 1\nserve:\n  timeout_max: 30s\n", NULL);
    assert_non_null(p);
    assert_int_equal(policy_serve(p)->timeout_max_ms, 30000);
    policy_free(p);
    p = load("version: 1\nserve:\n  timeout_max: 1500ms\n", NULL);
    assert_non_null(p);
    assert_int_equal(policy_serve(p)->timeout_max_ms, 1500);
    policy_free(p);
}

/* Builds "version: 1\nserve:\n  KEY: [ENTRY0, ENTRY1, ...]" with N entries. */
static char *many(const char *key, size_t n, const char *fmt)
{
    size_t cap = 64 + n * 40;
    char *y = malloc(cap);
    assert_non_null(y);
    size_t len = (size_t)snprintf(y, cap, "version: 1\nserve:\n  %s: [", key);
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(y + len, cap - len, fmt, i ? ", " : "", i);
    snprintf(y + len, cap - len, "]\n");
    return y;
}

static void test_serve_lists_and_names_are_bounded(void **state)
{
    (void)state;
    char *y = many("allowed_imports", 1024, "%sm%zu");
    struct policy_diag d;
    struct policy *p = load(y, &d);
    if (p == NULL)
        fail_msg("%s", d.msg[0]);
    assert_int_equal(policy_serve(p)->n_allowed_imports, 1024);
    policy_free(p);
    free(y);
    y = many("allowed_imports", 1025, "%sm%zu");
    expect_error(y, "p.yaml:3:20: serve.allowed_imports: 1025 entries, more than the 1024");
    free(y);
    y = many("blocklist", 1025, "%sm.a%zu");
    expect_error(y, "p.yaml:3:14: serve.blocklist: 1025 entries, more than the 1024");
    free(y);
    y = many("pre_imports", 65, "%sm%zu");
    expect_error(y, "p.yaml:3:16: serve.pre_imports: 65 entries, more than the 64");
    free(y);

    char name[200], yy[300];
    memset(name, 'a', 129);
    name[129] = '\0';
    snprintf(yy, sizeof yy, "version: 1\nserve:\n  allowed_imports: [%s]\n", name);
    expect_error(yy, "p.yaml:3:21: serve.allowed_imports: \"aaaa");
    name[128] = '\0';
    snprintf(yy, sizeof yy, "version: 1\nserve:\n  allowed_imports: [%s]\n", name);
    p = load(yy, &d);
    assert_non_null(p);
    policy_free(p);
}

static void test_serve_errors_come_together_in_file_order(void **state)
{
    (void)state;
    struct policy_diag d;
    struct policy *p = load("version: 1\nserve:\n  allowed_imports: [\"a b\"]\n"
                            "  runtime_hooks: x\n  timeout_max: 1h\n", &d);
    assert_null(p);
    assert_int_equal(d.count, 3);
    assert_true(strncmp(d.msg[0], "p.yaml:3:", 9) == 0);
    assert_true(strncmp(d.msg[1], "p.yaml:4:", 9) == 0);
    assert_true(strncmp(d.msg[2], "p.yaml:5:", 9) == 0);
}

/* The image is what the preload maps; the serve section is sbx-serve's and
 * stays out of it.  A policy with one saves and loads, decides the same,
 * and its image says it has no section. */
static void test_image_of_a_policy_with_serve_section_drops_the_section(void **state)
{
    (void)state;
    char dir[] = "/tmp/sbx-test-serve-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/p.img", dir);
    struct policy *p = load(full, NULL);
    assert_non_null(p);
    char err[256];
    if (policy_image_save(p, path, err, sizeof err) < 0)
        fail_msg("%s", err);
    struct policy *q = policy_image_load(path, err, sizeof err);
    if (q == NULL)
        fail_msg("%s", err);
    assert_null(policy_serve(q));
    struct policy_verdict v1, v2;
    assert_int_equal(policy_decide_path(p, SBX_OP_OPEN_READ, "/x/.env", &v1),
                     policy_decide_path(q, SBX_OP_OPEN_READ, "/x/.env", &v2));
    assert_string_equal(v1.rule->text, v2.rule->text);
    policy_free(q);
    policy_free(p);
    unlink(path);
    rmdir(dir);
}

static void test_serve_section_load_fails_cleanly_at_every_allocation(void **state)
{
    (void)state;
    long n;
    for (n = 0; n < 100000; n++) {
        struct policy_diag d;
        failalloc_arm(n);
        struct policy *p = load(full, &d);
        bool hit = failalloc_hit;
        failalloc_arm(-1);
        if (!hit) {
            assert_non_null(p);
            assert_non_null(policy_serve(p));
            policy_free(p);
            break;
        }
        if (p != NULL)
            policy_free(p);
    }
    assert_true(n >= 3);
    assert_true(n < 100000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_serve_section_is_parsed_into_its_values),
        cmocka_unit_test(test_policy_without_serve_section_has_none),
        cmocka_unit_test(test_empty_serve_section_enforces_ast_scan_and_hooks),
        cmocka_unit_test(test_serve_unknown_keys_and_stages_are_refused_with_a_suggestion),
        cmocka_unit_test(test_serve_modes_must_be_enforce_or_observe),
        cmocka_unit_test(test_serve_names_must_be_module_names),
        cmocka_unit_test(test_serve_entry_written_twice_is_refused),
        cmocka_unit_test(test_serve_timeout_max_is_a_duration_up_to_30s),
        cmocka_unit_test(test_serve_lists_and_names_are_bounded),
        cmocka_unit_test(test_serve_errors_come_together_in_file_order),
        cmocka_unit_test(test_image_of_a_policy_with_serve_section_drops_the_section),
        cmocka_unit_test(test_serve_section_load_fails_cleanly_at_every_allocation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
