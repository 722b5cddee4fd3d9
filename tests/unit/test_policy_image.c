/* test_policy_image.c — the compiled policy sbx-guard hands to the preload
 * (policy/image.c): a policy loaded from its image decides exactly as the
 * policy it was saved from, and a damaged image is refused, never followed. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "internal.h"
#include "policy.h"

static const char yaml[] =
    "version: 1\n"
    "name: image-test\n"
    "mode: enforce\n"
    "files:\n"
    "  read:\n"
    "    allow: [\"/usr/**\", \"/etc/**\", \"./**\", \"/tmp/**\"]\n"
    "    deny: [\"**/.env\", \"**/*.pem\", \"~/.ssh/**\"]\n"
    "  write:\n"
    "    allow: [\"./**\", \"/tmp/**\"]\n"
    "    deny: [\"./.git/hooks/**\", \"**/id_*\"]\n"
    "  exec:\n"
    "    allow: [\"/usr/bin/*\", \"/bin/*\"]\n"
    "  max_write_bytes: 1048576\n"
    "commands:\n"
    "  deny:\n"
    "    - match: '\\brm\\s+-rf\\s+/'\n"
    "      reason: no recursive delete of /\n"
    "    - match: 'curl[^|]*\\|\\s*(ba)?sh'\n"
    "      reason: no piping downloads into a shell\n"
    "network:\n"
    "  connect:\n"
    "    allow: [\"127.0.0.1:8000-8999\", \"*.example.com:443\", \"unix:/run/x/*.sock\"]\n"
    "    deny: [\"169.254.0.0/16\"]\n"
    "  bind:\n"
    "    allow: [\"127.0.0.1:*\"]\n"
    "limits:\n"
    "  timeout: 30m\n"
    "  processes: 200\n"
    "env:\n"
    "  pass: [PATH, HOME, LANG]\n"
    "  set:\n"
    "    CI: \"1\"\n"
    "    PAGER: cat\n";

static struct policy *orig;
static char dir[64], img[96];

static int setup(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/sbx-image-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(img, sizeof img, "%s/p.img", dir);
    static const char *const protect[] = { "/var/lib/sbx", NULL };
    struct policy_options opt = { .workspace = "/tmp", .home = "/root", .protect = protect };
    static struct policy_diag d;
    orig = policy_load_buffer("image.yaml", yaml, sizeof yaml - 1, &opt, &d);
    if (!orig) {
        for (unsigned i = 0; i < d.count && i < POLICY_DIAG_MAX; i++)
            fprintf(stderr, "%s\n", d.msg[i]);
        return -1;
    }
    char err[256];
    if (policy_image_save(orig, img, err, sizeof err) < 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    policy_free(orig);
    unlink(img);
    rmdir(dir);
    return 0;
}

/* The decision and the rule that made it, as text. */
static void verdict_text(enum sbx_decision d, const struct policy_verdict *v, char *out,
                         size_t n)
{
    char rule[512] = "(none)";
    if (v->rule)
        policy_rule_format(v->rule, rule, sizeof rule);
    snprintf(out, n, "%d %d %s | %s", (int)d, (int)v->audit, v->reason ? v->reason : "-", rule);
}

static void same_decisions(const struct policy *a, const struct policy *b)
{
    static const char *const paths[] = {
        "/tmp/src/main.c", "/tmp/.env", "/tmp/a/b/server.pem", "/usr/lib/libc.so.6",
        "/root/.ssh/id_rsa", "/var/lib/sbx/audit.db", "/var/log/syslog", "/tmp/.git/hooks/pre",
        "/usr/bin/python3", "/bin/sh", "/opt/x", "/etc/passwd", "/tmp/id_ed25519",
    };
    static const enum sbx_op ops[] = { SBX_OP_OPEN_READ, SBX_OP_OPEN_WRITE, SBX_OP_EXEC,
                                       SBX_OP_UNLINK };
    char ta[1024], tb[1024];
    struct policy_verdict va, vb;
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
            verdict_text(policy_decide_path(a, ops[k], paths[i], &va), &va, ta, sizeof ta);
            verdict_text(policy_decide_path(b, ops[k], paths[i], &vb), &vb, tb, sizeof tb);
            assert_string_equal(ta, tb);
        }
    static const char *const cmds[] = { "ls -la", "rm -rf /", "sh -c 'curl http://x | sh'",
                                        "bash -lc 'rm -rf /home'", "make -j2" };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        verdict_text(policy_decide_command(a, cmds[i], &va), &va, ta, sizeof ta);
        verdict_text(policy_decide_command(b, cmds[i], &vb), &vb, tb, sizeof tb);
        assert_string_equal(ta, tb);
    }
    static const struct { const char *ip; int port; const char *host; } nets[] = {
        { "127.0.0.1", 8080, NULL }, { "127.0.0.1", 22, NULL },
        { "93.184.216.34", 443, "www.example.com" }, { "169.254.169.254", 80, NULL },
    };
    for (size_t i = 0; i < sizeof nets / sizeof nets[0]; i++) {
        struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(nets[i].port) };
        inet_pton(AF_INET, nets[i].ip, &sin.sin_addr);
        for (int bind = 0; bind < 2; bind++) {
            enum sbx_op op = bind ? SBX_OP_BIND : SBX_OP_CONNECT;
            verdict_text(policy_decide_net(a, op, (struct sockaddr *)&sin, sizeof sin,
                                           nets[i].host, &va), &va, ta, sizeof ta);
            verdict_text(policy_decide_net(b, op, (struct sockaddr *)&sin, sizeof sin,
                                           nets[i].host, &vb), &vb, tb, sizeof tb);
            assert_string_equal(ta, tb);
        }
    }
    const struct policy_info *ia = policy_info(a), *ib = policy_info(b);
    assert_string_equal(ia->name, ib->name);
    assert_string_equal(ia->file, ib->file);
    assert_string_equal(ia->workspace, ib->workspace);
    assert_string_equal(ia->sha256, ib->sha256);
    assert_int_equal(ia->max_write_bytes, ib->max_write_bytes);
    assert_memory_equal(&ia->limits, &ib->limits, sizeof ia->limits);
    assert_int_equal(ia->n_env_pass, ib->n_env_pass);
    for (size_t i = 0; i < ia->n_env_pass; i++)
        assert_string_equal(ia->env_pass[i], ib->env_pass[i]);
    assert_int_equal(ia->n_env_set, ib->n_env_set);
    for (size_t i = 0; i < ia->n_env_set; i++) {
        assert_string_equal(ia->env_set_name[i], ib->env_set_name[i]);
        assert_string_equal(ia->env_set_value[i], ib->env_set_value[i]);
    }
    for (int l = 0; l < POLICY_LIST__COUNT; l++) {
        const struct policy_rule *ra, *rb;
        size_t na = policy_rules(a, (enum policy_list)l, &ra);
        size_t nb = policy_rules(b, (enum policy_list)l, &rb);
        assert_int_equal(na, nb);
        for (size_t i = 0; i < na; i++) {
            policy_rule_format(&ra[i], ta, sizeof ta);
            policy_rule_format(&rb[i], tb, sizeof tb);
            assert_string_equal(ta, tb);
        }
    }
}

static void test_image_decides_like_the_policy_it_was_saved_from(void **state)
{
    (void)state;
    char err[256];
    struct policy *p = policy_image_load(img, err, sizeof err);
    assert_non_null(p);
    same_decisions(orig, p);
    /* enough command decisions to switch to the JIT copies: still the same */
    struct policy_verdict v;
    for (int i = 0; i < 40; i++)
        policy_decide_command(p, "ls", &v);
    same_decisions(orig, p);
    policy_free(p);
}

static void test_the_shipped_default_survives_the_round_trip(void **state)
{
    (void)state;
    struct policy_options opt = { .workspace = "/tmp", .home = "/root" };
    static struct policy_diag d;
    struct policy *def = policy_load_buffer("default.yaml", sbx_default_policy_yaml,
                                            sbx_default_policy_yaml_len, &opt, &d);
    assert_non_null(def);
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/default.img", dir);
    assert_int_equal(policy_image_save(def, path, err, sizeof err), 0);
    struct policy *p = policy_image_load(path, err, sizeof err);
    assert_non_null(p);
    same_decisions(def, p);
    policy_free(p);
    policy_free(def);
    unlink(path);
}

static void test_renaming_the_policy_file_renames_its_rules_only(void **state)
{
    (void)state;
    struct policy_options opt = { .workspace = "/tmp", .home = "/root" };
    static struct policy_diag d;
    struct policy *p = policy_load_buffer("rel/image.yaml", yaml, sizeof yaml - 1, &opt, &d);
    assert_non_null(p);
    assert_int_equal(policy_set_display_path(p, "/abs/image.yaml"), 0);
    assert_string_equal(policy_info(p)->file, "/abs/image.yaml");
    const struct policy_rule *r;
    size_t n = policy_rules(p, POLICY_READ_DENY, &r);
    assert_true(n > 0);
    char text[512];
    policy_rule_format(&r[0], text, sizeof text);
    assert_non_null(strstr(text, "/abs/image.yaml:"));
    /* a rule the file does not have comes from the shipped default */
    n = policy_rules(p, POLICY_EXEC_DENY, &r);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(r[i].file, "default.yaml");
    policy_free(p);
}

static uint64_t image_base(const char *path)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    uint64_t base = 0;
    assert_int_equal(pread(fd, &base, sizeof base, 48), (ssize_t)sizeof base);
    close(fd);
    return base;
}

static void test_an_image_is_used_in_place_at_its_address_or_else_read(void **state)
{
    (void)state;
    char err[256];
    uint64_t base = image_base(img);
#if defined(__x86_64__) || defined(__aarch64__)
    assert_true(base >= 0x200000000000ull && base < 0x400000000000ull);
#endif
    /* the first load maps the payload where its pointers expect it */
    struct policy *p1 = policy_image_load(img, err, sizeof err);
    assert_non_null(p1);
    if (base != 0) {
        assert_ptr_equal(p1, (void *)(uintptr_t)base);
        assert_ptr_equal(p1->img_map, p1);
    }
    /* the address is taken now: the second one is read and relocated */
    struct policy *p2 = policy_image_load(img, err, sizeof err);
    assert_non_null(p2);
    assert_null(p2->img_map);
    assert_true((void *)p2 != (void *)p1);
    same_decisions(orig, p1);
    same_decisions(orig, p2);
    /* command decisions (which decode the programs into the mapping's
     * private pages) too */
    struct policy_verdict v;
    assert_int_equal(policy_decide_command(p1, "curl -s x | sh", &v), SBX_DENY);
    assert_int_equal(policy_decide_command(p2, "curl -s x | sh", &v), SBX_DENY);
    policy_free(p2);
    policy_free(p1);
    /* and once freed, the address is free again */
    struct policy *p3 = policy_image_load(img, err, sizeof err);
    assert_non_null(p3);
    if (base != 0)
        assert_ptr_equal(p3->img_map, p3);
    policy_free(p3);
}

static void test_saving_never_replaces_an_existing_file(void **state)
{
    (void)state;
    char err[256];
    assert_int_equal(policy_image_save(orig, img, err, sizeof err), -1);
    assert_non_null(strstr(err, "exists"));
}

/* Writes BYTES (LEN) to a new file in DIR and loads it. */
static struct policy *load_bytes(const void *bytes, size_t len, char *err, size_t errsz)
{
    char path[128];
    snprintf(path, sizeof path, "%s/bad.img", dir);
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, bytes, len), (ssize_t)len);
    close(fd);
    struct policy *p = policy_image_load(path, err, errsz);
    unlink(path);
    return p;
}

static char *read_image(size_t *len)
{
    int fd = open(img, O_RDONLY);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    char *b = malloc((size_t)st.st_size);
    assert_non_null(b);
    assert_int_equal(read(fd, b, (size_t)st.st_size), st.st_size);
    close(fd);
    *len = (size_t)st.st_size;
    return b;
}

#define HDR 4096    /* the header page: the payload starts here */

static void test_a_damaged_image_is_refused(void **state)
{
    (void)state;
    size_t len;
    char *good = read_image(&len);
    char *b = malloc(len);
    char err[256];

    /* truncated anywhere */
    static const size_t cuts[] = { 0, 10, HDR, HDR + 100, 0 };
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        size_t n = cuts[i] ? cuts[i] : len - 1;
        assert_null(load_bytes(good, n, err, sizeof err));
    }
    /* not an image, another version */
    memcpy(b, good, len);
    b[0] = 'X';
    assert_null(load_bytes(b, len, err, sizeof err));
    assert_non_null(strstr(err, "not a policy image"));
    memcpy(b, good, len);
    b[8]++;
    assert_null(load_bytes(b, len, err, sizeof err));
    assert_non_null(strstr(err, "another build"));

    /* a pointer that leads out of the image */
    memcpy(b, good, len);
    uint64_t far = (uint64_t)len * 4;
    memcpy(b + HDR + offsetof(struct policy, mode_name), &far, sizeof far);
    assert_null(load_bytes(b, len, err, sizeof err));
    assert_non_null(strstr(err, "damaged"));
    /* a rule count larger than its array can hold */
    memcpy(b, good, len);
    size_t many = (size_t)1 << 40;
    memcpy(b + HDR + offsetof(struct policy, n_rules[POLICY_READ_DENY]), &many, sizeof many);
    assert_null(load_bytes(b, len, err, sizeof err));
    /* command patterns too short to hold PCRE2's header, at the payload's
     * end: decoding them would read past the image */
    memcpy(b, good, len);
    uint64_t payload = (uint64_t)(len - HDR), re_off = payload - 8, re_len = 8;
    memcpy(b + 24, &re_off, sizeof re_off);
    memcpy(b + 32, &re_len, sizeof re_len);
    assert_null(load_bytes(b, len, err, sizeof err));
    assert_non_null(strstr(err, "damaged (sizes)"));
    /* a rule list whose globs are missing */
    memcpy(b, good, len);
    uint64_t zero = 0;
    memcpy(b + HDR + offsetof(struct policy, globs[POLICY_READ_DENY]), &zero, sizeof zero);
    assert_null(load_bytes(b, len, err, sizeof err));

    /* and any single damaged byte is either refused or loads a policy
     * (data bytes), never a crash: the sanitizer build runs this too */
    srand(12345);
    for (int i = 0; i < 300; i++) {
        memcpy(b, good, len);
        size_t at = HDR + (size_t)rand() % (len - HDR);
        b[at] = (char)(b[at] ^ (1 << (rand() % 8)));
        struct policy *p = load_bytes(b, len, err, sizeof err);
        policy_free(p);
    }
    free(b);
    free(good);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_image_decides_like_the_policy_it_was_saved_from),
        cmocka_unit_test(test_the_shipped_default_survives_the_round_trip),
        cmocka_unit_test(test_renaming_the_policy_file_renames_its_rules_only),
        cmocka_unit_test(test_an_image_is_used_in_place_at_its_address_or_else_read),
        cmocka_unit_test(test_saving_never_replaces_an_existing_file),
        cmocka_unit_test(test_a_damaged_image_is_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
