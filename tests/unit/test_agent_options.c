/* test_agent_options.c — sbx-guard and the preload load an agent's policy
 * with options from one builder (policy.h: policy_agent_options), so that
 * the image sbx-guard compiles and the copy the preload would parse give
 * the same policy.  The preload's side is compiled in from preload/init.c,
 * as test_preload_path.c does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../preload/decide.c"
#include "../../preload/dns.c"
#include "../../preload/env.c"
#include "../../preload/init.c"
#include "../../preload/notify.c"
#include "../../preload/path.c"
#include "../../preload/resolve.c"

static void test_the_options_protect_the_runtime_directory_the_store_and_the_copy(void **state)
{
    (void)state;
    struct policy_agent in = {
        .workspace = "/ws", .display_path = "p.yaml", .home = "/home/a",
        .runtime_dir = "/run/sbx", .audit_db = "/var/lib/sbx/audit.db",
        .policy_copy = "/run/sbx/agents/1.yaml",
    };
    struct policy_agent_options o;
    policy_agent_options(&in, &o);
    assert_string_equal(o.opt.workspace, "/ws");
    assert_string_equal(o.opt.display_path, "p.yaml");
    assert_string_equal(o.opt.home, "/home/a");
    assert_string_equal(o.opt.protect[0], "/run/sbx");
    assert_string_equal(o.opt.protect[1], "/var/lib/sbx");
    assert_string_equal(o.opt.protect[2], "/run/sbx/agents/1.yaml");
    assert_null(o.opt.protect[3]);

    /* sbx-guard has no copy yet; what is not absolute is left out */
    struct policy_agent early = { .runtime_dir = "rel", .audit_db = "/audit.db" };
    policy_agent_options(&early, &o);
    assert_null(o.opt.protect[0]);
    assert_null(o.opt.workspace);
}

static void test_the_preload_builds_from_its_environment_what_sbx_guard_built(void **state)
{
    (void)state;
    char copy[] = "/run/sbx-t/agents/7.yaml", ws[] = "/tmp", origin[] = "/p/policy.yaml",
         home[] = "/home/a", rt[] = "/run/sbx-t", db[] = "/var/lib/sbx-t/audit.db";
    guard_envs[GENV_POLICY].value = copy;
    guard_envs[GENV_WORKSPACE].value = ws;
    guard_envs[GENV_ORIGIN].value = origin;
    guard_envs[GENV_HOME].value = home;
    guard_envs[GENV_RUNTIME].value = rt;
    guard_envs[GENV_AUDIT_DB].value = db;
    /* as the preload does: the directories at capture, the options at load */
    find_dirs();
    build_options();

    struct policy_agent guard_side = {
        .workspace = ws, .display_path = origin, .home = home,
        .runtime_dir = rt, .audit_db = db, .policy_copy = copy,
    };
    struct policy_agent_options g;
    policy_agent_options(&guard_side, &g);
    assert_string_equal(agent_opt.opt.workspace, g.opt.workspace);
    assert_string_equal(agent_opt.opt.display_path, g.opt.display_path);
    assert_string_equal(agent_opt.opt.home, g.opt.home);
    for (size_t i = 0; i < 3; i++)
        assert_string_equal(agent_opt.opt.protect[i], g.opt.protect[i]);
    assert_null(agent_opt.opt.protect[3]);

    /* and the policy loaded with them keeps the agent out of sbx's files */
    const char *y = "version: 1\nfiles:\n  read:\n    allow: [\"/**\"]\n";
    struct policy_diag diag;
    struct policy *p = policy_load_buffer("t.yaml", y, strlen(y), &agent_opt.opt, &diag);
    assert_non_null(p);
    struct policy_verdict v;
    assert_int_equal(policy_decide_path(p, SBX_OP_OPEN_READ, "/run/sbx-t/control.sock", &v),
                     SBX_DENY);
    assert_int_equal(policy_decide_path(p, SBX_OP_OPEN_READ, "/var/lib/sbx-t/audit.db", &v),
                     SBX_DENY);
    assert_int_equal(policy_decide_path(p, SBX_OP_OPEN_READ, "/p/policy.yaml", &v), SBX_ALLOW);
    policy_free(p);
    for (int i = 0; i < GENV__COUNT; i++)
        guard_envs[i].value = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_options_protect_the_runtime_directory_the_store_and_the_copy),
        cmocka_unit_test(test_the_preload_builds_from_its_environment_what_sbx_guard_built),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
