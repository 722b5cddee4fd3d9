/* test_policy_load.c — loading: every error class at its line and column,
 * defaults filling missing keys, [] overriding, sizes and durations, the
 * workspace, info, summary, verdicts of read_only, protect and audit. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "failalloc.h"
#include "policy.h"

static const struct policy_options opt = { .workspace = "/", .home = "/root" };

static struct policy *load(const char *y, struct policy_diag *d)
{
    return policy_load_buffer("p.yaml", y, strlen(y), &opt, d);
}

/* Loading Y fails with exactly one message, which starts with WANT. */
static void expect_error(const char *y, const char *want)
{
    struct policy_diag d;
    struct policy *p = load(y, &d);
    if (p != NULL)
        fail_msg("loaded, expected: %s", want);
    if (d.count != 1 || strncmp(d.msg[0], want, strlen(want)) != 0)
        fail_msg("got %u errors, first \"%s\"; expected \"%s\"", d.count,
                 d.count ? d.msg[0] : "", want);
}

static void test_load_reports_an_unknown_key_with_a_suggestion(void **state)
{
    (void)state;
    expect_error("version: 1\nfiles:\n  read:\n    alow: []\n",
                 "p.yaml:4:5: unknown key \"alow\" in files.read (did you mean \"allow\"?)");
    expect_error("version: 1\nnetwrok: {}\n",
                 "p.yaml:2:1: unknown key \"netwrok\" (did you mean \"network\"?)");
    expect_error("version: 1\nzzzzzz: 1\n", "p.yaml:2:1: unknown key \"zzzzzz\"");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* 100,000 nested "[" (200 KB) took libyaml over a minute to load. */
static void test_load_refuses_deep_nesting_at_its_place_in_well_under_a_second(void **state)
{
    (void)state;
    const size_t n = 100000;
    const char *head = "version: 1\nfiles:\n  read:\n    allow: ";
    size_t hl = strlen(head);
    char *y = malloc(hl + 2 * n + 2);
    assert_non_null(y);
    memcpy(y, head, hl);
    memset(y + hl, '[', n);
    memset(y + hl + n, ']', n);
    memcpy(y + hl + 2 * n, "\n", 2);
    struct policy_diag d;
    double t0 = now_s();
    struct policy *p = policy_load_buffer("p.yaml", y, hl + 2 * n + 1, &opt, &d);
    double took = now_s() - t0;
    free(y);
    assert_null(p);
    assert_int_equal(d.count, 1);
    /* the 33rd "[" opens level 33 (the mapping is level 1, files 2, read 3) */
    assert_string_equal(d.msg[0], "p.yaml:4:41: nested deeper than 32 levels; a policy "
                        "needs a handful (refusing to read further)");
    assert_true(took < 1.0);
    /* block nesting too: 40 keys, each indented one more */
    char blk[4096] = "version: 1\n";
    for (int i = 0; i < 40; i++) {
        size_t l = strlen(blk);
        snprintf(blk + l, sizeof blk - l, "%*sk%d:\n", i, "", i);
    }
    expect_error(blk, "p.yaml:34:33: nested deeper than 32 levels");
}

static void test_load_accepts_nesting_up_to_the_bound(void **state)
{
    (void)state;
    /* env.set: { K: [[...]] } is a wrong type, but one reported as such:
     * the depth bound does not fire below 32 levels. */
    char y[256] = "version: 1\nenv:\n  set: ";
    size_t l = strlen(y);
    memset(y + l, '[', 29);
    memset(y + l + 29, ']', 29);
    y[l + 58] = '\0';
    struct policy_diag d;
    assert_null(load(y, &d));
    assert_int_equal(d.count, 1);
    assert_null(strstr(d.msg[0], "nested deeper"));
}

static void test_load_refuses_a_file_over_one_mib_by_name(void **state)
{
    (void)state;
    char path[] = "/tmp/sbx-big-policy-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    char chunk[4096];
    memset(chunk, '#', sizeof chunk);
    for (int i = 0; i < 300; i++)
        assert_int_equal(write(fd, chunk, sizeof chunk), sizeof chunk);
    close(fd);
    struct policy_diag d;
    struct policy *p = policy_load(path, &opt, &d);
    unlink(path);
    assert_null(p);
    assert_int_equal(d.count, 1);
    assert_non_null(strstr(d.msg[0], ":1:1: larger than 1024 KiB, the most a policy may be"));
}

/* Every allocation of a load in turn fails (the policy's and the
 * compiled-in default's): the load returns NULL and frees what it made
 * (make sanitize checks the leaks), until one runs through. */
static void test_load_fails_cleanly_at_every_allocation(void **state)
{
    (void)state;
    static const char y[] =
        "version: 1\nname: oom\nfiles:\n  read:\n    deny: [\"**/.env\", \"~/.ssh/**\"]\n"
        "commands:\n  deny:\n    - match: \"rm -rf /\"\n      reason: no\n"
        "network:\n  connect:\n    allow: [\"api.example.com:443\", \"10.0.0.0/8:*\"]\n"
        "env:\n  set: {A: b}\n";
    long n;
    for (n = 0; n < 100000; n++) {
        struct policy_diag d;
        failalloc_arm(n);
        struct policy *p = policy_load_buffer("p.yaml", y, sizeof y - 1, &opt, &d);
        bool hit = failalloc_hit;
        failalloc_arm(-1);
        if (!hit) {
            assert_non_null(p);
            policy_free(p);
            break;
        }
        if (p != NULL)          /* a failure the loader could ride out */
            policy_free(p);
    }
    /* the loader's own allocations (the arena's chunks, the lists); what
     * libyaml and PCRE2 allocate inside themselves is not wrapped */
    assert_true(n >= 3);
    assert_true(n < 100000);
}

static void test_load_reports_a_wrong_type(void **state)
{
    (void)state;
    expect_error("version: 1\nfiles:\n  write:\n    allow: \"**\"\n",
                 "p.yaml:4:12: files.write.allow: expected a list of globs, found a single value");
    expect_error("version: 1\nfiles: [a]\n", "p.yaml:2:8: files: expected a mapping");
    expect_error("version: 1\nfiles:\n  read:\n    deny:\n",
                 "p.yaml:4:10: files.read.deny: expected a list of globs, found nothing (write [] for an empty list)");
    expect_error("version: 1\nenv:\n  pass: [PATH, {a: b}]\n", "p.yaml:3:16: env.pass:");
}

static void test_load_reports_bad_sizes_and_durations(void **state)
{
    (void)state;
    expect_error("version: 1\nfiles:\n  max_write_bytes: 10 MB\n",
                 "p.yaml:3:20: files.max_write_bytes: bad size \"10 MB\"");
    expect_error("version: 1\nlimits:\n  memory: lots\n", "p.yaml:3:11: limits.memory: bad size");
    expect_error("version: 1\nlimits:\n  timeout: 30\n",
                 "p.yaml:3:12: limits.timeout: bad duration \"30\"");
    expect_error("version: 1\nlimits:\n  cpu: 5 minutes\n", "p.yaml:3:8: limits.cpu: bad duration");
    expect_error("version: 1\nlimits:\n  processes: -1\n", "p.yaml:3:14: limits.processes:");
}

static void test_load_reports_bad_globs(void **state)
{
    (void)state;
    expect_error("version: 1\nfiles:\n  read:\n    allow: ['[abc']\n",
                 "p.yaml:4:13: files.read.allow: bad glob \"[abc\": unclosed \"[\"");
    expect_error("version: 1\nfiles:\n  read:\n    allow: ['']\n",
                 "p.yaml:4:13: files.read.allow: bad glob \"\": empty glob");
    expect_error("version: 1\nfiles:\n  exec:\n    deny: [/usr/***]\n",
                 "p.yaml:4:12: files.exec.deny: bad glob \"/usr/***\"");
    expect_error("version: 1\nfiles:\n  read:\n    allow: [\"a\\0b\"]\n",
                 "p.yaml:4:13: files.read.allow: bad glob");
    expect_error("version: 1\nfiles:\n  read:\n    allow: ['~bob/x']\n",
                 "p.yaml:4:13: files.read.allow: bad glob \"~bob/x\": only \"~/\"");
}

static void test_load_reports_a_pcre2_error_with_its_message(void **state)
{
    (void)state;
    expect_error("version: 1\ncommands:\n  deny:\n    - match: 'rm (-rf'\n      reason: x\n",
                 "p.yaml:4:14: commands.deny: pattern does not compile: missing closing parenthesis");
    expect_error("version: 1\ncommands:\n  deny:\n    - reason: x\n",
                 "p.yaml:4:7: commands.deny: an entry needs \"match\"");
    expect_error("version: 1\ncommands:\n  deny:\n    - match: x\n      reson: y\n",
                 "p.yaml:5:7: unknown key \"reson\" in commands.deny entry (did you mean \"reason\"?)");
}

static void test_load_requires_version_1(void **state)
{
    (void)state;
    expect_error("name: x\n", "p.yaml:1:1: version: 1 is required");
    expect_error("version: 2\n", "p.yaml:1:10: version: must be 1");
    expect_error("", "p.yaml:1:1: empty policy");
}

static void test_load_reports_bad_enumerations(void **state)
{
    (void)state;
    expect_error("version: 1\nmode: strict\n", "p.yaml:2:7: mode: \"strict\" is not enforce or audit");
    expect_error("version: 1\nkill: now\n", "p.yaml:2:7: kill: \"now\" is not terminate or deny");
    expect_error("version: 1\nisolation: yes\n",
                 "p.yaml:2:12: isolation: \"yes\" is not optional, required or gvisor");
    expect_error("version: 1\nfiles:\n  read_only: yes\n", "p.yaml:3:14: files.read_only:");
}

static void test_load_reports_duplicate_keys(void **state)
{
    (void)state;
    expect_error("version: 1\nmode: audit\nmode: enforce\n", "p.yaml:3:1: duplicate key \"mode\"");
    expect_error("version: 1\nenv:\n  set: {A: 1, A: 2}\n", "p.yaml:3:15: duplicate key \"env.set.A\"");
}

static void test_load_reports_yaml_syntax_errors_at_the_problem(void **state)
{
    (void)state;
    expect_error("version: 1\nfiles: [\n", "p.yaml:3:1: YAML syntax:");
    expect_error("version: 1\n  bad: indent\n", "p.yaml:2:6: YAML syntax:");
    expect_error("version: 1\n---\nversion: 1\n", "p.yaml:3:1: a policy is one YAML document");
}

static void test_load_collects_every_error_in_file_order(void **state)
{
    (void)state;
    struct policy_diag d;
    const char *y = "version: 1\nmode: x\nfiles:\n  read:\n    alow: []\n"
                    "limits:\n  timeout: 3\nkill: y\n";
    assert_null(load(y, &d));
    assert_int_equal(d.count, 4);
    assert_non_null(strstr(d.msg[0], "p.yaml:2:7: mode"));
    assert_non_null(strstr(d.msg[1], "p.yaml:5:5: unknown key"));
    assert_non_null(strstr(d.msg[2], "p.yaml:7:12: limits.timeout"));
    assert_non_null(strstr(d.msg[3], "p.yaml:8:7: kill"));
}

static void test_load_names_the_display_path_in_messages(void **state)
{
    (void)state;
    struct policy_options o = opt;
    struct policy_diag d;
    o.display_path = "shown.yaml";
    assert_null(policy_load_buffer("p.yaml", "mode: x\n", 8, &o, &d));
    assert_non_null(strstr(d.msg[0], "shown.yaml:"));
}

static void test_load_takes_missing_keys_from_the_default(void **state)
{
    (void)state;
    struct policy_diag d;
    struct policy *p = load("version: 1\nfiles:\n  read:\n    allow: [/srv/**]\n", &d);
    const struct policy_rule *r;
    assert_non_null(p);
    /* read.allow is ours, read.deny the default's */
    assert_int_equal(policy_rules(p, POLICY_READ_ALLOW, &r), 1);
    assert_string_equal(r[0].file, "p.yaml");
    assert_int_equal(r[0].line, 4);
    assert_int_equal(r[0].col, 13);
    assert_true(policy_rules(p, POLICY_READ_DENY, &r) > 5);
    assert_string_equal(r[0].file, "default.yaml");
    assert_string_equal(r[0].text, "**/.env");
    assert_true(policy_rules(p, POLICY_CMD_DENY, &r) > 5);
    const struct policy_info *in = policy_info(p);
    assert_int_equal(in->limits.processes, 1024);
    assert_string_equal(in->name, "p");         /* not inherited: the file's name */
    assert_false(in->audit_mode);
    policy_free(p);
}

static void test_load_empty_list_overrides_the_default(void **state)
{
    (void)state;
    struct policy_diag d;
    struct policy *p = load("version: 1\ncommands:\n  deny: []\nnetwork:\n  connect:\n    allow: []\n", &d);
    const struct policy_rule *r;
    assert_non_null(p);
    assert_int_equal(policy_rules(p, POLICY_CMD_DENY, &r), 0);
    assert_int_equal(policy_rules(p, POLICY_CONNECT_ALLOW, &r), 0);
    assert_true(policy_rules(p, POLICY_CONNECT_DENY, &r) > 0);
    struct policy_verdict v;
    assert_int_equal(policy_decide_command(p, "rm -rf /", &v), SBX_ALLOW);
    assert_int_equal(policy_decide_net_text(p, SBX_OP_CONNECT, "1.1.1.1:443", &v), 0);
    assert_int_equal(v.decision, SBX_DENY);
    policy_free(p);
}

static void test_load_parses_sizes_and_durations_in_every_unit(void **state)
{
    (void)state;
    struct policy_diag d;
    const char *y = "version: 1\nfiles:\n  max_write_bytes: 512\n"
                    "limits:\n  timeout: 1h30m\n  cpu: 250ms\n  memory: 4GiB\n"
                    "  processes: 64\n  open_files: unlimited\n";
    struct policy *p = load(y, &d);
    assert_non_null(p);
    const struct policy_info *in = policy_info(p);
    assert_int_equal(in->max_write_bytes, 512);
    assert_int_equal(in->limits.timeout_ms, 90 * 60 * 1000);
    assert_int_equal(in->limits.cpu_ms, 250);
    assert_int_equal(in->limits.memory_bytes, 4ull << 30);
    assert_int_equal(in->limits.processes, 64);
    assert_int_equal(in->limits.open_files, 0);
    policy_free(p);

    static const struct { const char *v; uint64_t want; } sizes[] = {
        { "7B", 7 }, { "2K", 2048 }, { "2KiB", 2048 }, { "3M", 3u << 20 }, { "3MiB", 3u << 20 },
        { "1G", 1u << 30 }, { "10 MiB", 10u << 20 },
    };
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char buf[128];
        snprintf(buf, sizeof(buf), "version: 1\nfiles:\n  max_write_bytes: %s\n", sizes[i].v);
        p = load(buf, &d);
        assert_non_null(p);
        assert_int_equal(policy_info(p)->max_write_bytes, sizes[i].want);
        policy_free(p);
    }
    static const struct { const char *v; uint64_t want; } durs[] = {
        { "5ms", 5 }, { "5s", 5000 }, { "5m", 300000 }, { "2h", 7200000 }, { "1m30s", 90000 },
    };
    for (size_t i = 0; i < sizeof(durs) / sizeof(durs[0]); i++) {
        char buf[128];
        snprintf(buf, sizeof(buf), "version: 1\nlimits:\n  timeout: %s\n", durs[i].v);
        p = load(buf, &d);
        assert_non_null(p);
        assert_int_equal(policy_info(p)->limits.timeout_ms, durs[i].want);
        policy_free(p);
    }
}

static void test_load_fills_info_from_the_policy(void **state)
{
    (void)state;
    struct policy_diag d;
    const char *y = "version: 1\nname: coder\ndescription: hi\nmode: audit\nkill: deny\n"
                    "isolation: required\nenv:\n  pass: [PATH]\n  set: {A: \"1\", B: x}\n";
    struct policy *p = load(y, &d);
    assert_non_null(p);
    const struct policy_info *in = policy_info(p);
    assert_string_equal(in->name, "coder");
    assert_string_equal(in->description, "hi");
    assert_true(in->audit_mode);
    assert_true(in->kill_deny);
    assert_true(in->isolation_required);
    assert_string_equal(in->workspace, "/");
    assert_string_equal(in->file, "p.yaml");
    assert_int_equal(in->n_env_pass, 1);
    assert_string_equal(in->env_pass[0], "PATH");
    assert_int_equal(in->n_env_set, 2);
    assert_string_equal(in->env_set_name[1], "B");
    assert_string_equal(in->env_set_value[0], "1");
    assert_int_equal(strlen(in->sha256), 64);
    /* sha256 of the bytes: the same text gives the same hash */
    struct policy *q = load(y, &d);
    assert_string_equal(policy_info(q)->sha256, in->sha256);
    policy_free(q);
    policy_free(p);
}

static void test_load_workspace_is_relative_to_the_policy_file(void **state)
{
    (void)state;
    char dir[PATH_MAX], file[PATH_MAX + 32], sub[PATH_MAX + 32], real[PATH_MAX];
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/wsXXXXXX", t ? t : "/tmp");
    assert_non_null(mkdtemp(dir));
    snprintf(sub, sizeof(sub), "%s/proj", dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    snprintf(file, sizeof(file), "%s/p.yaml", dir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fputs("version: 1\nworkspace: proj\nfiles:\n  read:\n    allow: [src/**]\n", f);
    fclose(f);
    struct policy_options o = { .home = "/root" };
    struct policy_diag d;
    struct policy *p = policy_load(file, &o, &d);
    assert_non_null(p);
    assert_non_null(realpath(sub, real));
    assert_string_equal(policy_info(p)->workspace, real);
    const struct policy_rule *r;
    policy_rules(p, POLICY_READ_ALLOW, &r);
    char want[PATH_MAX + 16];
    snprintf(want, sizeof(want), "%s/src/**", real);
    assert_string_equal(r[0].pattern, want);
    policy_free(p);
    /* options.workspace wins */
    o.workspace = dir;
    p = policy_load(file, &o, &d);
    assert_non_null(p);
    assert_non_null(realpath(dir, real));
    assert_string_equal(policy_info(p)->workspace, real);
    policy_free(p);
}

static void test_load_of_a_missing_file_fails_with_a_message(void **state)
{
    (void)state;
    struct policy_diag d;
    assert_null(policy_load("/nonexistent/p.yaml", NULL, &d));
    assert_int_equal(errno, ENOENT);
    assert_int_equal(d.count, 1);
    assert_non_null(strstr(d.msg[0], "/nonexistent/p.yaml:1:1: cannot read"));
}

static void test_load_default_policy_file_is_valid(void **state)
{
    (void)state;
    struct policy_diag d;
    char path[PATH_MAX];
    const char *root = getenv("SBX_ROOT");
    snprintf(path, sizeof(path), "%s/policies/default.yaml", root ? root : ".");
    struct policy *p = policy_load(path, &opt, &d);
    if (p == NULL)
        fail_msg("%s", d.count ? d.msg[0] : "?");
    assert_string_equal(policy_info(p)->name, "default");
    policy_free(p);
}

static void test_read_only_denies_every_write(void **state)
{
    (void)state;
    struct policy_diag d;
    struct policy *p = load("version: 1\nfiles:\n  read_only: true\n", &d);
    struct policy_verdict v;
    assert_non_null(p);
    assert_int_equal(policy_decide_path(p, SBX_OP_OPEN_WRITE, "/tmp/x", &v), SBX_DENY);
    assert_string_equal(v.rule->section, "files.read_only");
    assert_int_equal(v.rule->line, 3);
    assert_int_equal(policy_decide_path(p, SBX_OP_UNLINK, "/tmp/x", &v), SBX_DENY);
    assert_int_equal(policy_decide_path(p, SBX_OP_OPEN_READ, "/tmp/x", &v), SBX_ALLOW);
    policy_free(p);
}

static void test_protected_paths_are_denied_even_in_audit_mode(void **state)
{
    (void)state;
    const char *const prot[] = { "/var/lib/sbx-test-store", NULL };
    struct policy_options o = opt;
    struct policy_diag d;
    o.protect = prot;
    struct policy *p = policy_load_buffer("p.yaml", "version: 1\nmode: audit\n", 23, &o, &d);
    struct policy_verdict v;
    assert_non_null(p);
    assert_int_equal(policy_decide_path(p, SBX_OP_OPEN_READ, "/var/lib/sbx-test-store/audit.db", &v),
                     SBX_DENY);
    assert_string_equal(v.rule->section, "protect");
    assert_false(v.audit);
    assert_int_equal(policy_decide_path(p, SBX_OP_OPEN_WRITE, "/var/lib/sbx-test-store", &v), SBX_DENY);
    /* audit mode: an ordinary denial is allowed and marked */
    assert_int_equal(policy_decide_path(p, SBX_OP_OPEN_READ, "/.env", &v), SBX_ALLOW);
    assert_true(v.audit);
    assert_string_equal(v.rule->section, "files.read.deny");
    policy_free(p);
}

static void test_implicit_rule_when_no_allow_matches(void **state)
{
    (void)state;
    struct policy_diag d;
    struct policy *p = load("version: 1\nfiles:\n  read:\n    allow: []\n", &d);
    struct policy_verdict v;
    char buf[256];
    assert_non_null(p);
    assert_int_equal(policy_decide_path(p, SBX_OP_OPEN_READ, "/etc/hosts", &v), SBX_DENY);
    assert_string_equal(v.rule->section, "files.read.allow");
    assert_string_equal(v.rule->text, "(no rule matched)");
    assert_int_equal(v.rule->line, 0);
    assert_int_equal(policy_rule_format(v.rule, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "files.read.allow (no rule matched)");
    assert_int_equal(policy_decide_path(p, SBX_OP_OPEN_READ, "/.env", &v), SBX_DENY);
    assert_int_equal(policy_rule_format(v.rule, buf, sizeof(buf)), 0);
    char want[128];
    snprintf(want, sizeof(want), "files.read.deny \"**/.env\" default.yaml:%u", v.rule->line);
    assert_true(v.rule->line > 10);
    assert_string_equal(buf, want);
    policy_free(p);
}

static void test_summary_says_what_the_policy_allows(void **state)
{
    (void)state;
    struct policy_diag d;
    char buf[1024];
    struct policy *p = load("version: 1\nname: s\nlimits:\n  timeout: 30m\n", &d);
    assert_non_null(p);
    assert_int_equal(policy_summary(p, buf, sizeof(buf)), 0);
    assert_non_null(strstr(buf, "s: enforce; workspace /; read "));
    assert_non_null(strstr(buf, "timeout 30m"));
    assert_int_equal(policy_summary(p, buf, 10), -1);
    policy_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_reports_an_unknown_key_with_a_suggestion),
        cmocka_unit_test(test_load_reports_a_wrong_type),
        cmocka_unit_test(test_load_reports_bad_sizes_and_durations),
        cmocka_unit_test(test_load_reports_bad_globs),
        cmocka_unit_test(test_load_reports_a_pcre2_error_with_its_message),
        cmocka_unit_test(test_load_requires_version_1),
        cmocka_unit_test(test_load_reports_bad_enumerations),
        cmocka_unit_test(test_load_reports_duplicate_keys),
        cmocka_unit_test(test_load_reports_yaml_syntax_errors_at_the_problem),
        cmocka_unit_test(test_load_collects_every_error_in_file_order),
        cmocka_unit_test(test_load_names_the_display_path_in_messages),
        cmocka_unit_test(test_load_takes_missing_keys_from_the_default),
        cmocka_unit_test(test_load_empty_list_overrides_the_default),
        cmocka_unit_test(test_load_parses_sizes_and_durations_in_every_unit),
        cmocka_unit_test(test_load_fills_info_from_the_policy),
        cmocka_unit_test(test_load_workspace_is_relative_to_the_policy_file),
        cmocka_unit_test(test_load_of_a_missing_file_fails_with_a_message),
        cmocka_unit_test(test_load_default_policy_file_is_valid),
        cmocka_unit_test(test_load_refuses_deep_nesting_at_its_place_in_well_under_a_second),
        cmocka_unit_test(test_load_accepts_nesting_up_to_the_bound),
        cmocka_unit_test(test_load_refuses_a_file_over_one_mib_by_name),
        cmocka_unit_test(test_load_fails_cleanly_at_every_allocation),
        cmocka_unit_test(test_read_only_denies_every_write),
        cmocka_unit_test(test_protected_paths_are_denied_even_in_audit_mode),
        cmocka_unit_test(test_implicit_rule_when_no_allow_matches),
        cmocka_unit_test(test_summary_says_what_the_policy_allows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
