/* test_guard_env.c — the agent's environment: what passes, what env.set
 * replaces, what sbx adds; and every allocation failure on the way fails
 * the build cleanly (each string freed once, nothing leaked). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "failalloc.h"
#include "guard_env.h"
#include "paths.h"
#include "policy.h"

static const struct policy_options opt = { .workspace = "/", .home = "/root" };

/* PATH and LANG pass; env.set replaces LANG and adds X. */
static const char yaml[] =
    "version: 1\n"
    "env:\n"
    "  pass: [PATH, LANG, LD_PRELOAD]\n"
    "  set: {LANG: C.UTF-8, X: one}\n";

static char *host[] = { "PATH=/usr/bin", "LANG=de_DE.UTF-8", "SECRET=k",
                        "LD_PRELOAD=/evil.so", NULL };

static const struct guard_env_vars vars = {
    .preload = "/lib/sbx/libsbx-preload.so", .policy_copy = "/run/p.yaml",
    .policy_origin = "/p.yaml", .workspace = "/ws", .home = "/root",
    .runtime_dir = "/run/sbx", .audit_db = "/var/lib/sbx/audit.db",
    .agent = "a", .agent_id = "id", .agent_token = "tok", .notify = false,
};

static struct policy *load(void)
{
    struct policy_diag d;
    struct policy *p = policy_load_buffer("p.yaml", yaml, sizeof yaml - 1, &opt, &d);
    assert_non_null(p);
    return p;
}

static size_t count(char **env, const char *name)
{
    size_t n = 0, l = strlen(name);
    for (size_t i = 0; env[i]; i++)
        n += strncmp(env[i], name, l) == 0 && env[i][l] == '=';
    return n;
}

static void test_env_passes_named_variables_and_env_set_replaces_them(void **state)
{
    (void)state;
    struct policy *p = load();
    char **env = guard_env_build(p, host, &vars);
    assert_non_null(env);
    assert_string_equal(guard_env_get(env, "PATH"), "/usr/bin");
    assert_string_equal(guard_env_get(env, "LANG"), "C.UTF-8");
    assert_int_equal(count(env, "LANG"), 1);
    assert_string_equal(guard_env_get(env, "X"), "one");
    assert_null(guard_env_get(env, "SECRET"));
    /* the host's LD_PRELOAD never passes: ours is the only one */
    assert_string_equal(guard_env_get(env, "LD_PRELOAD"), vars.preload);
    assert_int_equal(count(env, "LD_PRELOAD"), 1);
    assert_string_equal(guard_env_get(env, SBX_ENV_AGENT_TOKEN), "tok");
    guard_env_free(env);
    policy_free(p);
}

/* Every allocation of the build in turn fails: the build returns NULL
 * having freed each string once (a replaced entry used to be freed twice). */
static void test_env_build_fails_cleanly_at_every_allocation(void **state)
{
    (void)state;
    struct policy *p = load();
    long n;
    for (n = 0; n < 10000; n++) {
        failalloc_arm(n);
        char **env = guard_env_build(p, host, &vars);
        bool hit = failalloc_hit;
        failalloc_arm(-1);
        if (!hit) {
            assert_non_null(env);
            guard_env_free(env);
            break;
        }
        assert_null(env);
    }
    assert_true(n > 10);        /* it did fail at each of many places */
    assert_true(n < 10000);
    policy_free(p);
}

/* Set here and commonly needed (CA bundles, proxies), dropped by env.pass:
 * named, in a fixed order; passed, set by env.set, or not set: not named. */
static void test_env_dropped_names_needed_variables_the_policy_drops(void **state)
{
    (void)state;
    static const char y[] =
        "version: 1\nenv:\n  pass: [PATH, HTTPS_PROXY]\n  set: {SSL_CERT_FILE: /x}\n";
    struct policy_diag d;
    struct policy *p = policy_load_buffer("p.yaml", y, sizeof y - 1, &opt, &d);
    assert_non_null(p);
    char *env[] = { "PATH=/usr/bin", "HTTPS_PROXY=http://p:1", "SSL_CERT_FILE=/y",
                    "no_proxy=localhost", "NODE_EXTRA_CA_CERTS=/c.pem", "OTHER=1", NULL };
    char out[256];
    assert_int_equal(guard_env_dropped(p, env, out, sizeof out), 2);
    assert_string_equal(out, "NODE_EXTRA_CA_CERTS, no_proxy");
    char tiny[8];
    assert_int_equal(guard_env_dropped(p, env, tiny, sizeof tiny), 2);
    assert_string_equal(tiny, "NODE_EX");
    char *none[] = { "PATH=/usr/bin", NULL };
    assert_int_equal(guard_env_dropped(p, none, out, sizeof out), 0);
    assert_string_equal(out, "");
    policy_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_env_passes_named_variables_and_env_set_replaces_them),
        cmocka_unit_test(test_env_build_fails_cleanly_at_every_allocation),
        cmocka_unit_test(test_env_dropped_names_needed_variables_the_policy_drops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
