/* test_ocsf.c — audit rows as OCSF events (auditd/ocsf.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "ocsf.h"

static struct audit_row row(const char *op, const char *decision, const char *target)
{
    struct audit_row r = {
        .id = 42, .ts_ns = 1796341217878123456LL, .agent = "coder", .run_id = "36c6429b8388",
        .pid = 5717, .uid = 1000, .op = op, .target = target, .decision = decision,
        .rule = "files.read.deny \"**/.env\" /etc/sbx/policy.yaml:81",
        .reason = "matches files.read.deny", .layer = "guard",
        .err = strcmp(decision, "deny") == 0 ? 13 : 0,
    };
    memset(r.hash, 0xab, sizeof r.hash);
    return r;
}

static json_t *event(const struct audit_row *r)
{
    char *s = audit_ocsf_json(r, "host1");
    assert_non_null(s);
    assert_null(strchr(s, '\n'));
    json_t *j = json_loads(s, 0, NULL);
    assert_non_null(j);
    free(s);
    return j;
}

static const char *str_at(json_t *j, const char *path)
{
    char buf[128];
    strncpy(buf, path, sizeof buf - 1);
    buf[sizeof buf - 1] = '\0';
    for (char *k = strtok(buf, "."); k; k = strtok(NULL, "."))
        j = json_is_array(j) ? json_array_get(j, (size_t)atoi(k)) : json_object_get(j, k);
    return json_string_value(j);
}

static long long int_at(json_t *j, const char *path)
{
    char buf[128];
    strncpy(buf, path, sizeof buf - 1);
    buf[sizeof buf - 1] = '\0';
    for (char *k = strtok(buf, "."); k; k = strtok(NULL, "."))
        j = json_object_get(j, k);
    assert_true(json_is_integer(j));
    return (long long)json_integer_value(j);
}

static void test_a_denied_read_is_a_blocked_file_read_with_rule_location_and_hash(void **state)
{
    (void)state;
    struct audit_row r = row("open-read", "deny", "/ws/.env");
    json_t *e = event(&r);
    assert_int_equal(int_at(e, "class_uid"), 1001);
    assert_int_equal(int_at(e, "activity_id"), 2);
    assert_int_equal(int_at(e, "type_uid"), 100102);
    assert_int_equal(int_at(e, "time"), 1796341217878LL);
    assert_string_equal(str_at(e, "action"), "Denied");
    assert_string_equal(str_at(e, "disposition"), "Blocked");
    assert_string_equal(str_at(e, "status"), "Failure");
    assert_string_equal(str_at(e, "status_code"), "EACCES");
    assert_string_equal(str_at(e, "file.path"), "/ws/.env");
    assert_string_equal(str_at(e, "file.name"), ".env");
    assert_string_equal(str_at(e, "actor.app_name"), "coder");
    assert_string_equal(str_at(e, "actor.session.uid"), "36c6429b8388");
    assert_string_equal(str_at(e, "actor.user.uid"), "1000");
    assert_string_equal(str_at(e, "actor.authorizations.0.decision"), "deny");
    assert_string_equal(str_at(e, "actor.authorizations.0.policy.uid"), "/etc/sbx/policy.yaml:81");
    assert_string_equal(str_at(e, "unmapped.sbx.rule_file"), "/etc/sbx/policy.yaml");
    assert_int_equal(int_at(e, "unmapped.sbx.rule_line"), 81);
    assert_string_equal(str_at(e, "unmapped.sbx.layer"), "guard");
    assert_string_equal(str_at(e, "unmapped.sbx.hash"),
                        "abababababababababababababababababababababababababababababababab");
    assert_int_equal(int_at(e, "metadata.sequence"), 42);
    assert_string_equal(str_at(e, "metadata.uid"), "42");
    assert_string_equal(str_at(e, "device.hostname"), "host1");
    json_decref(e);
}

static void test_each_op_maps_to_its_class_and_activity(void **state)
{
    (void)state;
    static const struct { const char *op; int cls, act; } want[] = {
        { "open-read", 1001, 2 }, { "open-write", 1001, 3 }, { "unlink", 1001, 4 },
        { "rename", 1001, 5 }, { "mkdir", 1001, 1 }, { "chmod", 1001, 7 },
        { "utimes", 1001, 6 }, { "exec", 1007, 1 }, { "start", 1007, 1 }, { "exit", 1007, 2 },
        { "kill", 1007, 2 }, { "policy-error", 1007, 99 }, { "connect", 4001, 1 },
        { "send", 4001, 6 }, { "bind", 4001, 7 }, { "no-such-op", 1007, 99 },
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int c, a;
        audit_ocsf_class(want[i].op, &c, &a);
        assert_int_equal(c, want[i].cls);
        assert_int_equal(a, want[i].act);
    }
}

static void test_a_connect_names_the_remote_address_port_and_host(void **state)
{
    (void)state;
    struct audit_row r = row("connect", "allow", "[2001:db8::1]:443");
    r.target2 = "example.org";
    json_t *e = event(&r);
    assert_int_equal(int_at(e, "class_uid"), 4001);
    assert_string_equal(str_at(e, "dst_endpoint.ip"), "2001:db8::1");
    assert_int_equal(int_at(e, "dst_endpoint.port"), 443);
    assert_string_equal(str_at(e, "dst_endpoint.hostname"), "example.org");
    assert_string_equal(str_at(e, "action"), "Allowed");
    assert_null(json_object_get(e, "status_code"));
    json_decref(e);
    r = row("connect", "allow", "unix:/run/nscd/socket");
    e = event(&r);
    assert_string_equal(str_at(e, "dst_endpoint.name"), "unix:/run/nscd/socket");
    json_decref(e);
}

static void test_an_exec_has_the_program_and_its_command_line(void **state)
{
    (void)state;
    struct audit_row r = row("exec", "allow", "/usr/bin/cat");
    r.target2 = "cat notes.txt";
    json_t *e = event(&r);
    assert_string_equal(str_at(e, "process.file.path"), "/usr/bin/cat");
    assert_string_equal(str_at(e, "process.cmd_line"), "cat notes.txt");
    json_decref(e);
    r = row("exec", "allow", "/usr/bin/dash -> /bin/sh -c true");
    e = event(&r);
    assert_string_equal(str_at(e, "process.file.path"), "/usr/bin/dash");
    assert_string_equal(str_at(e, "process.cmd_line"), "/bin/sh -c true");
    json_decref(e);
}

static void test_bytes_that_are_not_utf8_become_text_and_the_json_stays_valid(void **state)
{
    (void)state;
    struct audit_row r = row("open-write", "allow", "/ws/a\xff" "b\xc3\xa9\xed\xa0\x80");
    json_t *e = event(&r);
    assert_string_equal(str_at(e, "file.path"), "/ws/a\\xffb\xc3\xa9\\xed\\xa0\\x80");
    json_decref(e);
    char *c = audit_utf8_dup("a\nb\x7f\xc3\xa9", true);
    assert_string_equal(c, "a\\x0ab\\x7f\xc3\xa9");
    free(c);
    c = audit_utf8_dup("\xf0\x9f\x98\x80 \xc0\xaf", false);     /* overlong '/' refused */
    assert_string_equal(c, "\xf0\x9f\x98\x80 \\xc0\\xaf");
    free(c);
}

static void test_audit_mode_allowances_are_low_severity_and_allowed(void **state)
{
    (void)state;
    struct audit_row r = row("open-read", "allow", "/ws/.env");
    r.reason = "audit: would deny: matches files.read.deny";
    json_t *e = event(&r);
    assert_int_equal(int_at(e, "severity_id"), 2);
    assert_string_equal(str_at(e, "action"), "Allowed");
    json_decref(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_denied_read_is_a_blocked_file_read_with_rule_location_and_hash),
        cmocka_unit_test(test_each_op_maps_to_its_class_and_activity),
        cmocka_unit_test(test_a_connect_names_the_remote_address_port_and_host),
        cmocka_unit_test(test_an_exec_has_the_program_and_its_command_line),
        cmocka_unit_test(test_bytes_that_are_not_utf8_become_text_and_the_json_stays_valid),
        cmocka_unit_test(test_audit_mode_allowances_are_low_severity_and_allowed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
