/* test_policy_extends.c — policies built on others (policy/chain.c,
 * policy/expand.c): extends: by path and by shipped name, list edits with
 * add/remove, serve lists adding up, cycles, depth, mistakes at the file
 * and line that has them, the identity of a chain, and the expansion that
 * loads back to the same rules. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "failalloc.h"
#include "policy.h"

static char dir[64];
static struct policy_options opt = { .workspace = "/", .home = "/root" };

static void put(const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    mkdir(path, 0700);
    *slash = '/';
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static struct policy *load(const char *name, struct policy_diag *d)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return policy_load(path, &opt, d);
}

/* Loading NAME fails; one of its messages is WANT with DIR/ in front. */
static void expect_error(const char *name, const char *want)
{
    struct policy_diag d;
    struct policy *p = load(name, &d);
    if (p != NULL)
        fail_msg("%s loaded, expected: %s", name, want);
    char full[600];
    snprintf(full, sizeof full, "%s/%s", dir, want);
    for (unsigned i = 0; i < d.count && i < POLICY_DIAG_MAX; i++)
        if (strncmp(d.msg[i], full, strlen(full)) == 0 ||
            strncmp(d.msg[i], want, strlen(want)) == 0)
            return;
    fail_msg("got %u errors, first \"%s\"; expected \"%s\"", d.count, d.count ? d.msg[0] : "",
             full);
}

static int setup(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/sbx-test-extends-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    opt.policy_dir = NULL;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static bool has_rule(const struct policy *p, enum policy_list l, const char *text,
                     const struct policy_rule **out)
{
    const struct policy_rule *r;
    size_t n = policy_rules(p, l, &r);
    for (size_t i = 0; i < n; i++)
        if (strcmp(r[i].text, text) == 0) {
            if (out)
                *out = &r[i];
            return true;
        }
    return false;
}

static void test_extends_edits_the_parents_lists_with_add_and_remove(void **state)
{
    (void)state;
    put("base.yaml", "version: 1\nfiles:\n  write:\n    allow: [\"./**\", \"/tmp/**\"]\n"
        "env:\n  pass: {add: [NODE_EXTRA_CA_CERTS]}\n");
    put("sub/child.yaml", "version: 1\nextends: ../base.yaml\nfiles:\n  write:\n"
        "    allow: {add: [\"~/.npm/**\"], remove: [\"/tmp/**\"]}\n");
    struct policy_diag d;
    struct policy *p = load("sub/child.yaml", &d);
    if (p == NULL)
        fail_msg("%s", d.msg[0]);
    const struct policy_rule *r;
    assert_int_equal(policy_rules(p, POLICY_WRITE_ALLOW, &r), 2);
    assert_string_equal(r[0].text, "./**");
    assert_true(strstr(r[0].file, "base.yaml") != NULL);
    assert_int_equal(r[0].line, 4);
    assert_string_equal(r[1].text, "~/.npm/**");
    assert_true(strstr(r[1].file, "child.yaml") != NULL);
    assert_int_equal(r[1].line, 5);
    /* the parent's edit of env.pass applies to the default's list */
    const struct policy_info *in = policy_info(p);
    bool path = false, ca = false;
    for (size_t i = 0; i < in->n_env_pass; i++) {
        path = path || strcmp(in->env_pass[i], "PATH") == 0;
        ca = ca || strcmp(in->env_pass[i], "NODE_EXTRA_CA_CERTS") == 0;
    }
    assert_true(path && ca);
    /* what neither writes comes from the default */
    assert_true(has_rule(p, POLICY_READ_DENY, "**/.env", &r));
    assert_string_equal(r->file, POLICY_DEFAULT_FILE);
    policy_free(p);
}

static void test_extends_plain_list_replaces_the_parents(void **state)
{
    (void)state;
    put("base.yaml", "version: 1\nfiles:\n  write:\n    allow: [\"./**\", \"/tmp/**\"]\n");
    put("child.yaml", "version: 1\nextends: base.yaml\nfiles:\n  write:\n    allow: [\"/var/tmp/**\"]\n");
    struct policy *p = load("child.yaml", NULL);
    assert_non_null(p);
    const struct policy_rule *r;
    assert_int_equal(policy_rules(p, POLICY_WRITE_ALLOW, &r), 1);
    assert_string_equal(r[0].text, "/var/tmp/**");
    policy_free(p);
}

static void test_lone_policy_may_edit_the_defaults_lists(void **state)
{
    (void)state;
    put("p.yaml", "version: 1\nfiles:\n  read:\n    deny: {remove: [\"**/.env\"]}\n"
        "env:\n  pass: {add: [HTTPS_PROXY]}\n");
    struct policy *p = load("p.yaml", NULL);
    assert_non_null(p);
    assert_false(has_rule(p, POLICY_READ_DENY, "**/.env", NULL));
    assert_true(has_rule(p, POLICY_READ_DENY, "**/.env.*", NULL));
    const struct policy_info *in = policy_info(p);
    assert_string_equal(in->env_pass[in->n_env_pass - 1], "HTTPS_PROXY");
    policy_free(p);
    /* and the explicit extends: default is the same thing */
    put("q.yaml", "version: 1\nextends: default\nfiles:\n  read:\n    deny: {remove: [\"**/.env\"]}\n");
    p = load("q.yaml", NULL);
    assert_non_null(p);
    assert_false(has_rule(p, POLICY_READ_DENY, "**/.env", NULL));
    policy_free(p);
}

static void test_remove_of_an_entry_not_in_the_parent_is_an_error_at_its_line(void **state)
{
    (void)state;
    put("base.yaml", "version: 1\nfiles:\n  write:\n    allow: [\"./**\"]\n");
    put("child.yaml", "version: 1\nextends: ./base.yaml\nfiles:\n  write:\n"
        "    allow:\n      remove:\n        - \"/nope/**\"\n");
    expect_error("child.yaml", "child.yaml:7:11: files.write.allow: cannot remove \"/nope/**\": "
                 "it is not in the list this policy extends");
    put("c2.yaml", "version: 1\ncommands:\n  deny: {remove: [{match: 'nope'}]}\n");
    expect_error("c2.yaml", "c2.yaml:3:19: commands.deny: cannot remove \"nope\"");
}

static void test_command_entries_are_removed_by_their_match(void **state)
{
    (void)state;
    put("base.yaml", "version: 1\ncommands:\n  deny:\n    - {match: 'rm -rf', reason: a}\n"
        "    - {match: 'curl', reason: b}\n");
    put("child.yaml", "version: 1\nextends: ./base.yaml\ncommands:\n  deny:\n"
        "    remove: ['rm -rf']\n    add: [{match: wget, reason: c}]\n");
    struct policy *p = load("child.yaml", NULL);
    assert_non_null(p);
    const struct policy_rule *r;
    assert_int_equal(policy_rules(p, POLICY_CMD_DENY, &r), 2);
    assert_string_equal(r[0].text, "curl");
    assert_string_equal(r[1].text, "wget");
    assert_string_equal(r[1].reason, "c");
    policy_free(p);
}

static void test_list_edit_with_an_unknown_key_is_refused_with_a_suggestion(void **state)
{
    (void)state;
    put("p.yaml", "version: 1\nenv:\n  pass: {ad: [X]}\n");
    expect_error("p.yaml", "p.yaml:3:10: env.pass: unknown key \"ad\" (did you mean \"add\"?)");
    put("p2.yaml", "version: 1\nenv:\n  pass: {add: X}\n");
    expect_error("p2.yaml", "p2.yaml:3:15: env.pass: add: expected a list, found a single value");
    put("p3.yaml", "version: 1\nenv:\n  pass: {add: [X], add: [Y]}\n");
    expect_error("p3.yaml", "p3.yaml:3:20: duplicate key \"env.pass.add\"");
}

static void test_extends_cycle_is_refused_with_the_chain(void **state)
{
    (void)state;
    put("a.yaml", "version: 1\nextends: ./b.yaml\n");
    put("b.yaml", "version: 1\nextends: ./a.yaml\n");
    struct policy_diag d;
    struct policy *p = load("a.yaml", &d);
    assert_null(p);
    assert_int_equal(d.count, 1);
    assert_non_null(strstr(d.msg[0], "b.yaml:2:10: extends: a cycle: "));
    assert_non_null(strstr(d.msg[0], "a.yaml -> "));
    assert_non_null(strstr(d.msg[0], "b.yaml -> "));
    /* a file naming itself */
    put("self.yaml", "version: 1\nextends: self.yaml\n");
    expect_error("self.yaml", "self.yaml:2:10: extends: a cycle:");
}

static void test_extends_chain_deeper_than_eight_is_refused(void **state)
{
    (void)state;
    char name[32], text[64];
    for (int i = 0; i < 10; i++) {
        snprintf(name, sizeof name, "l%d.yaml", i);
        if (i < 9)
            snprintf(text, sizeof text, "version: 1\nextends: ./l%d.yaml\n", i + 1);
        else
            snprintf(text, sizeof text, "version: 1\n");
        put(name, text);
    }
    /* l1 -> ... -> l9: 8 extends, loads */
    struct policy_diag d;
    struct policy *p = load("l1.yaml", &d);
    if (p == NULL)
        fail_msg("%s", d.msg[0]);
    const char *const *files;
    assert_int_equal(policy_files(p, &files), 10);  /* 9 files and the default */
    policy_free(p);
    /* l0 -> ... -> l9: 9 extends */
    p = load("l0.yaml", &d);
    assert_null(p);
    assert_int_equal(d.count, 1);
    assert_non_null(strstr(d.msg[0], "l8.yaml:2:10: extends: more than 8 levels ("));
}

static void test_a_mistake_in_the_parent_is_reported_at_the_parents_line(void **state)
{
    (void)state;
    put("base.yaml", "version: 1\nfiles:\n  read:\n    alow: []\nlimits:\n  timeout: 10\n");
    put("child.yaml", "version: 1\nextends: ./base.yaml\nlimits:\n  cpu: 5\n");
    struct policy_diag d;
    struct policy *p = load("child.yaml", &d);
    assert_null(p);
    assert_int_equal(d.count, 3);
    /* the policy's own first, then its parent's, each in line order */
    assert_non_null(strstr(d.msg[0], "child.yaml:4:8: limits.cpu: bad duration"));
    assert_non_null(strstr(d.msg[1], "base.yaml:4:5: unknown key \"alow\""));
    assert_non_null(strstr(d.msg[2], "base.yaml:6:12: limits.timeout: bad duration"));
}

static void test_a_parent_must_be_a_readable_version_1_policy(void **state)
{
    (void)state;
    put("child.yaml", "version: 1\nextends: ./missing.yaml\n");
    expect_error("child.yaml", "child.yaml:2:10: extends: cannot read");
    put("noversion.yaml", "files: {}\n");
    put("c2.yaml", "version: 1\nextends: ./noversion.yaml\n");
    expect_error("c2.yaml", "noversion.yaml:1:1: version: 1 is required");
    put("c3.yaml", "version: 1\nextends: ./sub\n");
    expect_error("c3.yaml", "c3.yaml:2:10: extends: cannot read");
    put("c4.yaml", "version: 1\nextends: [a]\n");
    expect_error("c4.yaml", "c4.yaml:2:10: extends: expected the name of a shipped policy");
    /* any readable file may be named; one that is not a policy says so at
     * its own place */
    put("c5.yaml", "version: 1\nextends: \"../../etc/passwd\"\n");
    expect_error("c5.yaml", "../../etc/passwd:1:1: a policy is a mapping of keys");
    put("c6.yaml", "version: 1\nextends: \"..\"\n");
    expect_error("c6.yaml", "c6.yaml:2:10: extends: \"..\" is not a shipped policy's name");
    /* a FIFO is refused, not waited on */
    char fifo[128];
    snprintf(fifo, sizeof fifo, "%s/fifo.yaml", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    put("c7.yaml", "version: 1\nextends: ./fifo.yaml\n");
    expect_error("c7.yaml", "c7.yaml:2:10: extends: cannot read");
}

static void test_shipped_names_are_found_with_a_suggestion_when_misspelled(void **state)
{
    (void)state;
    char pd[128];
    snprintf(pd, sizeof pd, "%s/shipped", dir);
    put("shipped/agent.yaml", "version: 1\nname: agent\nfiles:\n  write:\n    allow: [\"/x/**\"]\n");
    put("shipped/serve/minimal.yaml", "version: 1\nserve:\n  allowed_imports: [math]\n");
    opt.policy_dir = pd;
    put("c.yaml", "version: 1\nextends: agent\n");
    struct policy_diag d;
    struct policy *p = load("c.yaml", &d);
    if (p == NULL)
        fail_msg("%s", d.msg[0]);
    assert_true(has_rule(p, POLICY_WRITE_ALLOW, "/x/**", NULL));
    const char *const *files;
    assert_int_equal(policy_files(p, &files), 3);
    assert_non_null(strstr(files[1], "shipped/agent.yaml"));
    assert_string_equal(files[2], POLICY_DEFAULT_FILE);
    policy_free(p);
    put("s.yaml", "version: 1\nextends: minimal\n");
    p = load("s.yaml", NULL);
    assert_non_null(p);
    assert_int_equal(policy_serve(p)->n_allowed_imports, 1);
    policy_free(p);
    put("m.yaml", "version: 1\nextends: agnet\n");
    expect_error("m.yaml", "m.yaml:2:10: extends: no shipped policy \"agnet\" (did you mean "
                 "\"agent\"?)");
    put("m2.yaml", "version: 1\nextends: zzzzzzzz\n");
    expect_error("m2.yaml", "m2.yaml:2:10: extends: no shipped policy \"zzzzzzzz\" (looked in");
    /* the same lookup, for sbx-serve --profile NAME */
    char found[PATH_MAX];
    assert_int_equal(policy_shipped_path("minimal", &opt, found, sizeof found), 0);
    assert_non_null(strstr(found, "/shipped/serve/minimal.yaml"));
    errno = 0;
    assert_int_equal(policy_shipped_path("nope", &opt, found, sizeof found), -1);
    assert_int_equal(errno, ENOENT);
    assert_int_equal(policy_shipped_path("../etc", &opt, found, sizeof found), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(policy_shipped_path("default", &opt, found, sizeof found), -1);
    assert_int_equal(errno, EINVAL);
    opt.policy_dir = NULL;
    /* without a directory given, the tests (build/tests) find the tree's */
    assert_int_equal(policy_shipped_path("strict", NULL, found, sizeof found), 0);
    assert_non_null(strstr(found, "/policies/strict.yaml"));
}

static void test_serve_imports_and_blocklist_add_up_and_other_keys_replace(void **state)
{
    (void)state;
    put("minimal.yaml", "version: 1\nserve:\n  allowed_imports: [math, json]\n"
        "  stages: {ast_scan: enforce}\n  pre_imports: [json]\n  blocklist: [a.b]\n"
        "  timeout_max: 30s\n");
    put("ds.yaml", "version: 1\nextends: ./minimal.yaml\nserve:\n"
        "  allowed_imports: [numpy, math]\n  pre_imports: [numpy]\n  blocklist: [numpy.ctypeslib]\n"
        "  stages: {ast_scan: enforce, blocklist_audit: observe}\n");
    struct policy_diag d;
    struct policy *p = load("ds.yaml", &d);
    if (p == NULL)
        fail_msg("%s", d.msg[0]);
    const struct policy_serve *s = policy_serve(p);
    assert_non_null(s);
    assert_int_equal(s->n_allowed_imports, 3);      /* json math numpy, once each */
    assert_string_equal(s->allowed_imports[0], "json");
    assert_string_equal(s->allowed_imports[2], "numpy");
    assert_int_equal(s->n_blocklist, 2);
    assert_string_equal(s->blocklist[0].module, "a");
    assert_string_equal(s->blocklist[1].module, "numpy");
    assert_int_equal(s->n_pre_imports, 1);          /* replaced */
    assert_string_equal(s->pre_imports[0], "numpy");
    assert_int_equal(s->n_stages, 2);
    assert_int_equal(s->timeout_max_ms, 30000);     /* inherited */
    policy_free(p);
    /* and remove works on them too */
    put("less.yaml", "version: 1\nextends: ./minimal.yaml\nserve:\n  allowed_imports: {remove: [json]}\n");
    p = load("less.yaml", &d);
    assert_non_null(p);
    assert_int_equal(policy_serve(p)->n_allowed_imports, 1);
    policy_free(p);
    /* a child without a serve: key still is a profile when its parent is */
    put("plain.yaml", "version: 1\nextends: ./minimal.yaml\n");
    p = load("plain.yaml", &d);
    assert_non_null(p);
    assert_non_null(policy_serve(p));
    policy_free(p);
}

static void test_identity_covers_every_file_of_the_chain(void **state)
{
    (void)state;
    put("base.yaml", "version: 1\n");
    put("child.yaml", "version: 1\nextends: ./base.yaml\n");
    struct policy *p = load("child.yaml", NULL);
    assert_non_null(p);
    char sha1[65];
    strcpy(sha1, policy_info(p)->sha256);
    policy_free(p);
    put("base.yaml", "version: 1\nmode: audit\n");
    p = load("child.yaml", NULL);
    assert_non_null(p);
    assert_string_not_equal(sha1, policy_info(p)->sha256);
    assert_true(policy_info(p)->audit_mode);
    policy_free(p);
    /* sha256 of the bytes of child.yaml then base.yaml */
    char cmd[256], out[80] = "";
    snprintf(cmd, sizeof cmd, "cd '%s' && cat child.yaml base.yaml | sha256sum", dir);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    assert_non_null(fgets(out, sizeof out, f));
    pclose(f);
    p = load("child.yaml", NULL);
    assert_memory_equal(out, policy_info(p)->sha256, 64);
    policy_free(p);
}

/* Two loaded policies have the same rules, info and serve section. */
static void assert_same_policy(const struct policy *a, const struct policy *b)
{
    for (int l = 0; l < POLICY_LIST__COUNT; l++) {
        const struct policy_rule *ra, *rb;
        size_t na = policy_rules(a, l, &ra), nb = policy_rules(b, l, &rb);
        if (na != nb)
            fail_msg("%s: %zu rules, expanded %zu", policy_list_name(l), na, nb);
        for (size_t i = 0; i < na; i++) {
            assert_string_equal(ra[i].text, rb[i].text);
            if (ra[i].pattern || rb[i].pattern)
                assert_string_equal(ra[i].pattern, rb[i].pattern);
            if (ra[i].reason || rb[i].reason)
                assert_string_equal(ra[i].reason, rb[i].reason);
            assert_int_equal(ra[i].net_kind, rb[i].net_kind);
            assert_int_equal(ra[i].port_lo, rb[i].port_lo);
            assert_int_equal(ra[i].port_hi, rb[i].port_hi);
        }
    }
    const struct policy_info *x = policy_info(a), *y = policy_info(b);
    assert_string_equal(x->name, y->name);
    assert_string_equal(x->workspace, y->workspace);
    assert_int_equal(x->audit_mode, y->audit_mode);
    assert_int_equal(x->read_only, y->read_only);
    assert_int_equal(x->kill_deny, y->kill_deny);
    assert_int_equal(x->isolation_required, y->isolation_required);
    assert_int_equal(x->max_write_bytes, y->max_write_bytes);
    assert_memory_equal(&x->limits, &y->limits, sizeof x->limits);
    assert_int_equal(x->n_env_pass, y->n_env_pass);
    for (size_t i = 0; i < x->n_env_pass; i++)
        assert_string_equal(x->env_pass[i], y->env_pass[i]);
    assert_int_equal(x->n_env_set, y->n_env_set);
    for (size_t i = 0; i < x->n_env_set; i++) {
        assert_string_equal(x->env_set_name[i], y->env_set_name[i]);
        assert_string_equal(x->env_set_value[i], y->env_set_value[i]);
    }
    const struct policy_serve *s = policy_serve(a), *t = policy_serve(b);
    assert_int_equal(s == NULL, t == NULL);
    if (s == NULL)
        return;
    assert_int_equal(s->n_allowed_imports, t->n_allowed_imports);
    for (size_t i = 0; i < s->n_allowed_imports; i++)
        assert_string_equal(s->allowed_imports[i], t->allowed_imports[i]);
    assert_int_equal(s->n_pre_imports, t->n_pre_imports);
    for (size_t i = 0; i < s->n_pre_imports; i++)
        assert_string_equal(s->pre_imports[i], t->pre_imports[i]);
    assert_int_equal(s->n_blocklist, t->n_blocklist);
    for (size_t i = 0; i < s->n_blocklist; i++) {
        assert_string_equal(s->blocklist[i].module, t->blocklist[i].module);
        assert_string_equal(s->blocklist[i].attr, t->blocklist[i].attr);
    }
    assert_int_equal(s->n_stages, t->n_stages);
    for (size_t i = 0; i < s->n_stages; i++) {
        assert_string_equal(s->stages[i].name, t->stages[i].name);
        assert_int_equal(s->stages[i].mode, t->stages[i].mode);
    }
    assert_int_equal(s->runtime_hooks, t->runtime_hooks);
    assert_int_equal(s->timeout_max_ms, t->timeout_max_ms);
}

/* Expands P into DIR/NAME and loads that. */
static struct policy *expand_and_reload(const struct policy *p, const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(policy_expand(p, f), 0);
    fclose(f);
    struct policy_diag d;
    struct policy *q = policy_load(path, &opt, &d);
    if (q == NULL)
        fail_msg("the expansion does not load: %s", d.msg[0]);
    return q;
}

static void test_expansion_loads_to_the_same_rules(void **state)
{
    (void)state;
    put("base.yaml", "version: 1\nmode: audit\nfiles:\n  write:\n    allow: [\"./**\", \"/tmp/**\"]\n"
        "commands:\n  deny: {add: [{match: \"it's \\\\b(x)\\\\s+'\", reason: \"say \\\"no\\\"\"}]}\n"
        "network:\n  connect:\n    allow: {add: [\"unix:/run/x/*.sock\", \"[::1]:8000\"]}\n"
        "limits:\n  timeout: 1h30m\n  memory: 1500000\n"
        "env:\n  set: {CI: \"1\", TAB: \"a\\tb\"}\n"
        "serve:\n  allowed_imports: [math]\n  blocklist: [scipy.io.loadmat]\n");
    put("child.yaml", "version: 1\nextends: ./base.yaml\nname: kid\nworkspace: .\n"
        "files:\n  read:\n    deny: {remove: [\"**/.env\"]}\n  read_only: true\n"
        "serve:\n  allowed_imports: [json]\n  stages: {}\n  runtime_hooks: observe\n"
        "  timeout_max: 2500ms\n");
    opt.workspace = NULL;
    struct policy_diag d;
    struct policy *p = load("child.yaml", &d);
    if (p == NULL)
        fail_msg("%s", d.msg[0]);
    struct policy *q = expand_and_reload(p, "expanded.yaml");
    assert_same_policy(p, q);
    /* the expansion names the files values came from */
    char path[256], buf[65536];
    snprintf(path, sizeof path, "%s/expanded.yaml", dir);
    FILE *f = fopen(path, "r");
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    assert_non_null(strstr(buf, "mode: audit  # "));
    assert_non_null(strstr(buf, "base.yaml:2\n"));
    assert_non_null(strstr(buf, "'/tmp/**'  # "));
    assert_non_null(strstr(buf, "default.yaml:"));
    policy_free(q);
    policy_free(p);
    opt.workspace = "/";
}

static void test_expansion_of_every_shipped_policy_loads_to_the_same_rules(void **state)
{
    (void)state;
    static const char *const shipped[] = {
        "default.yaml", "strict.yaml", "audit.yaml", "claude-code.yaml", "codex.yaml",
        "aider.yaml", "framework-agent.yaml", "serve/minimal.yaml", "serve/data-science.yaml",
    };
    char path[PATH_MAX];
    unsigned tried = 0;
    for (size_t i = 0; i < sizeof shipped / sizeof shipped[0]; i++) {
        snprintf(path, sizeof path, "policies/%s", shipped[i]);
        if (access(path, R_OK) != 0)
            continue;           /* not in this tree (yet) */
        struct policy_diag d;
        struct policy *p = policy_load(path, &opt, &d);
        if (p == NULL)
            fail_msg("%s", d.msg[0]);
        struct policy *q = expand_and_reload(p, "shipped-expanded.yaml");
        assert_same_policy(p, q);
        policy_free(q);
        policy_free(p);
        tried++;
    }
    assert_true(tried >= 3);
}

static void test_expansion_of_a_policy_from_an_image_is_refused(void **state)
{
    (void)state;
    put("p.yaml", "version: 1\n");
    struct policy *p = load("p.yaml", NULL);
    assert_non_null(p);
    char img[128], err[256];
    snprintf(img, sizeof img, "%s/p.img", dir);
    assert_int_equal(policy_image_save(p, img, err, sizeof err), 0);
    struct policy *q = policy_image_load(img, err, sizeof err);
    assert_non_null(q);
    FILE *f = fopen("/dev/null", "w");
    errno = 0;
    assert_int_equal(policy_expand(q, f), -1);
    assert_int_equal(errno, EINVAL);
    fclose(f);
    const char *const *files;
    assert_int_equal(policy_files(q, &files), 0);
    policy_free(q);
    policy_free(p);
}

static void test_chain_load_fails_cleanly_at_every_allocation(void **state)
{
    (void)state;
    put("base.yaml", "version: 1\nfiles:\n  write:\n    allow: [\"./**\"]\nserve: {allowed_imports: [a]}\n");
    put("child.yaml", "version: 1\nextends: ./base.yaml\nfiles:\n  write:\n"
        "    allow: {add: [\"/x/**\"], remove: [\"./**\"]}\nserve: {allowed_imports: [b]}\n");
    long n;
    for (n = 0; n < 100000; n++) {
        struct policy_diag d;
        failalloc_arm(n);
        struct policy *p = load("child.yaml", &d);
        bool hit = failalloc_hit;
        failalloc_arm(-1);
        if (!hit) {
            assert_non_null(p);
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
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
        T(test_extends_edits_the_parents_lists_with_add_and_remove),
        T(test_extends_plain_list_replaces_the_parents),
        T(test_lone_policy_may_edit_the_defaults_lists),
        T(test_remove_of_an_entry_not_in_the_parent_is_an_error_at_its_line),
        T(test_command_entries_are_removed_by_their_match),
        T(test_list_edit_with_an_unknown_key_is_refused_with_a_suggestion),
        T(test_extends_cycle_is_refused_with_the_chain),
        T(test_extends_chain_deeper_than_eight_is_refused),
        T(test_a_mistake_in_the_parent_is_reported_at_the_parents_line),
        T(test_a_parent_must_be_a_readable_version_1_policy),
        T(test_shipped_names_are_found_with_a_suggestion_when_misspelled),
        T(test_serve_imports_and_blocklist_add_up_and_other_keys_replace),
        T(test_identity_covers_every_file_of_the_chain),
        T(test_expansion_loads_to_the_same_rules),
        T(test_expansion_of_every_shipped_policy_loads_to_the_same_rules),
        T(test_expansion_of_a_policy_from_an_image_is_refused),
        T(test_chain_load_fails_cleanly_at_every_allocation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
