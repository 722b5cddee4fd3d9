/* test_ctl.c — the control protocol against a real sbx-auditd: bad input
 * gets an error and the daemon keeps serving; registration, kills. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>
#include <sys/syscall.h>

#include "ctl.h"
#include "emit.h"
#include "event.h"
#include "guard_keep.h"
#include "guard_sup.h"
#include "paths.h"

/* A lying clock for a hostile ring writer: while fake_realtime_ns is set,
 * CLOCK_REALTIME reads as it (the library's sbx_now_ns reads it through
 * this definition, which the link prefers to libc's). */
static int64_t fake_realtime_ns;

int clock_gettime(clockid_t clk, struct timespec *ts)
{
    if (clk == CLOCK_REALTIME && fake_realtime_ns) {
        ts->tv_sec = fake_realtime_ns / 1000000000;
        ts->tv_nsec = fake_realtime_ns % 1000000000;
        if (ts->tv_nsec < 0) {
            ts->tv_sec--;
            ts->tv_nsec += 1000000000;
        }
        return 0;
    }
    return (int)syscall(SYS_clock_gettime, clk, ts);
}

static int64_t real_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static long log_lines(void)
{
    char path[4096];
    sbx_path_runtime_file("sbx-auditd.log", path, sizeof path);
    FILE *f = fopen(path, "r");
    long n = 0;
    int ch;
    while (f && (ch = fgetc(f)) != EOF)
        n += ch == '\n';
    if (f)
        fclose(f);
    return n;
}

static int open_ctl(void)
{
    char err[512];
    int fd = sbx_ctl_open(true, err, sizeof err);
    if (fd < 0)
        fail_msg("sbx_ctl_open: %s", err);
    return fd;
}

/* Sends N raw bytes, returns the reply verb line + rest in OUT. */
static void raw(int fd, const void *msg, size_t n, char *out, size_t outsz)
{
    assert_int_equal(send(fd, msg, n, MSG_NOSIGNAL), (ssize_t)n);
    ssize_t r = recv(fd, out, outsz - 1, 0);
    assert_true(r > 0);
    out[r] = '\0';
}

static void assert_still_serving(int fd)
{
    char err[256];
    int64_t last = -1;
    assert_int_equal(sbx_ctl_sync(fd, &last, err, sizeof err), 0);
    assert_true(last >= 0);
}

static void test_msg_codec_round_trips_escapes(void **state)
{
    (void)state;
    static struct sbx_msgbuf b;
    sbx_msg_start(&b, "EVENT");
    sbx_msg_add(&b, "target", "a\nb\\c=d");
    sbx_msg_add(&b, "empty", "");
    sbx_msg_add(&b, "absent", NULL);
    static char buf[SBX_CTL_MAX + 1];
    memcpy(buf, b.buf, b.len);
    struct sbx_msg m;
    char err[128];
    assert_int_equal(sbx_msg_parse(buf, b.len, &m, err, sizeof err), 0);
    assert_string_equal(m.verb, "EVENT");
    assert_string_equal(sbx_msg_get(&m, "target"), "a\nb\\c=d");
    assert_string_equal(sbx_msg_get(&m, "empty"), "");
    assert_null(sbx_msg_get(&m, "absent"));
}

static void test_msg_parser_rejects_malformed_messages(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "SYNC",                     /* no newline */
        "sync\n",                   /* verb case */
        "SYNC\nnoequals\n",
        "SYNC\nK=v\n",              /* key alphabet */
        "SYNC\na=1\na=2\n",         /* duplicate */
        "SYNC\na=\\x\n",            /* bad escape */
        "\n",
        "TOOLONGVERBXXXXXX\n",
    };
    char buf[256], err[128];
    struct sbx_msg m;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t n = strlen(bad[i]);
        memcpy(buf, bad[i], n);
        assert_int_equal(sbx_msg_parse(buf, n, &m, err, sizeof err), -1);
    }
    memcpy(buf, "SYNC\na=\0\n", 9);
    assert_int_equal(sbx_msg_parse(buf, 9, &m, err, sizeof err), -1);
    /* too many fields */
    static char many[4096];
    size_t n = (size_t)snprintf(many, sizeof many, "SYNC\n");
    for (int i = 0; i <= SBX_CTL_MAX_FIELDS; i++)
        n += (size_t)snprintf(many + n, sizeof many - n, "k%d=v\n", i);
    assert_int_equal(sbx_msg_parse(many, n, &m, err, sizeof err), -1);
}

static void test_malformed_requests_get_an_error_and_the_daemon_keeps_serving(void **state)
{
    (void)state;
    int fd = open_ctl();
    static const char *const bad[] = {
        "SYNC", "hello\n", "SYNC\nnoequals\n", "SYNC\na=1\na=1\n", "FOO\n",
        "REGISTER\nbogus=1\n", "KILL\n", "EVENT\nop=exec\n", "EXIT\nstatus=0\n",
        "REGISTER\nname=\n", "REGISTER\nname=a b\n",
    };
    char out[1024];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        raw(fd, bad[i], strlen(bad[i]), out, sizeof out);
        assert_memory_equal(out, "ERR\nmsg=", 8);
        assert_still_serving(fd);
    }
    raw(fd, "SYNC\na=\0\n", 9, out, sizeof out);
    assert_memory_equal(out, "ERR\n", 4);
    assert_still_serving(fd);
    sbx_ctl_close(fd);
}

static void test_an_oversized_request_gets_an_error_and_the_daemon_keeps_serving(void **state)
{
    (void)state;
    int fd = open_ctl();
    size_t n = SBX_CTL_MAX + 4096;
    char *big = malloc(n);
    memset(big, 'a', n);
    memcpy(big, "EVENT\ntarget=", 13);
    big[n - 1] = '\n';
    char out[1024];
    raw(fd, big, n, out, sizeof out);
    assert_non_null(strstr(out, "larger than"));
    assert_still_serving(fd);
    free(big);
    sbx_ctl_close(fd);
}

static void test_a_client_that_leaves_without_reading_does_not_hurt_the_daemon(void **state)
{
    (void)state;
    for (int i = 0; i < 20; i++) {
        int fd = open_ctl();
        send(fd, "SYNC\n", 5, MSG_NOSIGNAL);
        close(fd);
        fd = open_ctl();
        close(fd);
    }
    int fd = open_ctl();
    assert_still_serving(fd);
    sbx_ctl_close(fd);
}

static void test_register_refuses_an_empty_or_duplicate_name(void **state)
{
    (void)state;
    int a = open_ctl(), b = open_ctl();
    char id[64], tok[80], err[256];
    struct sbx_agent_reg reg = { .name = "", .guard_pid = getpid() };
    assert_int_equal(sbx_ctl_register(a, &reg, id, sizeof id, tok, sizeof tok, err, sizeof err), -1);
    reg.name = NULL;
    assert_int_equal(sbx_ctl_register(a, &reg, id, sizeof id, tok, sizeof tok, err, sizeof err), -1);
    reg.name = "dup";
    assert_int_equal(sbx_ctl_register(a, &reg, id, sizeof id, tok, sizeof tok, err, sizeof err), 0);
    assert_true(strlen(tok) >= 32);
    assert_int_equal(sbx_ctl_register(b, &reg, id, sizeof id, tok, sizeof tok, err, sizeof err), -1);
    assert_string_equal(err, "an agent named 'dup' is already running");
    assert_int_equal(sbx_ctl_exit(a, 0, "exited 0"), 0);
    sbx_ctl_close(a);
    /* the name is free again once the first one ended */
    assert_int_equal(sbx_ctl_register(b, &reg, id, sizeof id, tok, sizeof tok, err, sizeof err), 0);
    assert_int_equal(sbx_ctl_exit(b, 0, "exited 0"), 0);
    sbx_ctl_close(b);
}

static void test_killing_an_unknown_agent_is_a_clear_error(void **state)
{
    (void)state;
    int fd = open_ctl();
    char res[256], err[256];
    assert_int_equal(sbx_ctl_kill(fd, "nobody", false, "x", res, sizeof res, err, sizeof err), -1);
    assert_string_equal(err, "no running agent named 'nobody'");
    sbx_ctl_close(fd);
}

struct killer { const char *name; bool soft; int rc; char res[256], err[256]; };

static void *kill_thread(void *arg)
{
    struct killer *k = arg;
    int fd = open_ctl();
    k->rc = sbx_ctl_kill(fd, k->name, k->soft, "test reason", k->res, sizeof k->res,
                         k->err, sizeof k->err);
    sbx_ctl_close(fd);
    return NULL;
}

static void test_a_hard_kill_reaches_the_guard_and_waits_for_its_confirmation(void **state)
{
    (void)state;
    int g = open_ctl();
    char id[64], tok[80], err[256];
    struct sbx_agent_reg reg = { .name = "victim", .command = "sleep 100", .guard_pid = getpid() };
    assert_int_equal(sbx_ctl_register(g, &reg, id, sizeof id, tok, sizeof tok, err, sizeof err), 0);
    struct killer k = { .name = "victim" };
    pthread_t th;
    pthread_create(&th, NULL, kill_thread, &k);
    struct sbx_ctl_cmd cmd;
    assert_int_equal(sbx_ctl_recv_cmd(g, &cmd), 1);
    assert_int_equal(cmd.kind, SBX_CMD_KILL_HARD);
    assert_string_equal(cmd.reason, "test reason");
    assert_non_null(strstr(cmd.by, "pid"));
    assert_int_equal(sbx_ctl_cmd_done(g, cmd.req_id, 0, "3 processes"), 0);
    pthread_join(th, NULL);
    assert_int_equal(k.rc, 0);
    assert_string_equal(k.res, "killed victim (3 processes)");
    assert_int_equal(sbx_ctl_exit(g, 137, "killed by signal 9"), 0);
    sbx_ctl_close(g);
}

static pid_t daemon_pid(void)
{
    char pf[4096];
    sbx_path_runtime_file(SBX_PID_FILE, pf, sizeof pf);
    FILE *f = fopen(pf, "r");
    int pid = 0;
    if (f) {
        if (fscanf(f, "%d", &pid) != 1)
            pid = 0;
        fclose(f);
    }
    return (pid_t)pid;
}

static void test_a_guard_that_exits_and_hangs_up_during_a_hard_kill_leaves_the_daemon_running(
    void **state)
{
    (void)state;
    /* The kill is outstanding when the guard sends its exit and hangs up
     * without confirming: the kill ends ("its guard exited") and so does
     * the connection, and the agent they both point at is freed once. */
    int g = open_ctl();
    char id[64], tok[80], err[256];
    pid_t pid = daemon_pid();
    assert_true(pid > 0);
    struct sbx_agent_reg reg = { .name = "hangup", .guard_pid = getpid() };
    assert_int_equal(sbx_ctl_register(g, &reg, id, sizeof id, tok, sizeof tok, err, sizeof err), 0);
    struct killer k = { .name = "hangup" };
    pthread_t th;
    pthread_create(&th, NULL, kill_thread, &k);
    struct sbx_ctl_cmd cmd;
    assert_int_equal(sbx_ctl_recv_cmd(g, &cmd), 1);
    assert_int_equal(cmd.kind, SBX_CMD_KILL_HARD);
    assert_int_equal(sbx_ctl_exit(g, 137, "killed by signal 9"), 0);
    sbx_ctl_close(g);
    pthread_join(th, NULL);
    assert_int_equal(k.rc, 0);
    assert_non_null(strstr(k.res, "killed hangup"));
    /* Same daemon, still serving (a new connection would start another). */
    struct timespec ts = { 0, 200000000 };
    nanosleep(&ts, NULL);
    assert_int_equal(kill(pid, 0), 0);
    int fd = open_ctl();
    assert_still_serving(fd);
    sbx_ctl_close(fd);
    assert_int_equal(daemon_pid(), pid);
}

static void test_a_ring_writer_cannot_choose_its_records_time_nor_flood_the_log(void **state)
{
    (void)state;
    int g = open_ctl();
    char id[64], tok[80], err[256], rundir[4096];
    struct sbx_agent_reg reg = { .name = "liar", .guard_pid = getpid() };
    assert_int_equal(sbx_ctl_register(g, &reg, id, sizeof id, tok, sizeof tok, err, sizeof err), 0);
    sbx_path_runtime_dir(rundir, sizeof rundir);
    long lines_before = log_lines();
    int64_t t0 = real_now_ns();
    pid_t pid = fork();
    if (pid == 0) {
        if (sbx_emit_init(rundir, id, tok) < 0)
            _exit(1);
        int bad = 0;
        /* Records from 1678 and from 2262, and forged starts (each one a
         * log line, were the log not limited). */
        for (int i = 0; i < 3000; i++) {
            fake_realtime_ns = (i & 1) ? INT64_MAX - 1000 : INT64_MIN / 2;
            struct sbx_event_desc ev = { .op = SBX_OP_OPEN_READ, .target = "/fake-clock" };
            bad += sbx_emit(&ev) != 0;
            fake_realtime_ns = 0;
            struct sbx_event_desc life = { .op = SBX_OP_START, .target = "/forged" };
            (void)sbx_emit(&life);
        }
        _exit(bad ? 2 : 0);
    }
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    int64_t last = -1;
    assert_int_equal(sbx_ctl_sync(g, &last, err, sizeof err), 0);
    int64_t t1 = real_now_ns();
    assert_int_equal(sbx_ctl_exit(g, 0, "exited 0"), 0);
    sbx_ctl_close(g);

    sqlite3 *db;
    assert_int_equal(sqlite3_open_v2(getenv("SBX_AUDIT_DB"), &db, SQLITE_OPEN_READONLY, NULL),
                     SQLITE_OK);
    sqlite3_stmt *q;
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*), min(ts), max(ts) FROM events "
                                        "WHERE target = '/fake-clock'", -1, &q, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int64(q, 0), 3000);
    /* the daemon's clock: within the test's own time */
    assert_true(sqlite3_column_int64(q, 1) >= t0);
    assert_true(sqlite3_column_int64(q, 2) <= t1);
    sqlite3_finalize(q);
    sqlite3_close(db);
    /* 6000 hostile records: a few lines a second, not one each */
    long grew = log_lines() - lines_before;
    assert_true(grew < 200);
}

static void test_an_event_sent_without_waiting_gets_no_answer_and_is_stored(void **state)
{
    (void)state;
    int g = open_ctl();
    char id[64], tok[80], err[256];
    struct sbx_agent_reg reg = { .name = "quiet", .guard_pid = getpid() };
    assert_int_equal(sbx_ctl_register(g, &reg, id, sizeof id, tok, sizeof tok, err, sizeof err), 0);
    int64_t before = -1, after = -1;
    assert_int_equal(sbx_ctl_sync(g, &before, err, sizeof err), 0);
    struct sbx_event_desc ev = { .op = SBX_OP_EXEC, .decision = SBX_ALLOW,
                                 .layer = SBX_LAYER_SUPERVISOR, .target = "/bin/async-1" };
    assert_int_equal(sbx_ctl_event_async(g, &ev), 0);
    /* a bad one: refused into the log, and no answer either */
    struct sbx_msgbuf b;
    sbx_msg_start(&b, "EVENT");
    sbx_msg_add(&b, "op", "fly");
    sbx_msg_add(&b, "decision", "allow");
    sbx_msg_add(&b, "noreply", "1");
    assert_int_equal(sbx_msg_send(g, &b), 0);
    ev.target = "/bin/async-2";
    assert_int_equal(sbx_ctl_event_async(g, &ev), 0);
    /* The sync's answer is the only one: nothing else is left to read. */
    assert_int_equal(sbx_ctl_sync(g, &after, err, sizeof err), 0);
    struct pollfd p = { .fd = g, .events = POLLIN };
    assert_int_equal(poll(&p, 1, 200), 0);
    /* both good rows are stored, in order, the bad one is not */
    assert_int_equal(after - before, 2);
    assert_int_equal(sbx_ctl_exit(g, 0, "exited 0"), 0);
    sbx_ctl_close(g);
}

static void test_a_send_to_a_peer_that_never_reads_gives_up_within_its_bound(void **state)
{
    (void)state;
    /* A daemon that stops reading fills the socket: a client's send must
     * fail after its bound (10 s), not hang sbx-guard for good. */
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    struct sbx_msgbuf b;
    sbx_msg_start(&b, "EVENT");
    sbx_msg_add(&b, "target", "filler filler filler filler filler filler filler filler");
    while (send(sv[0], b.buf, b.len, MSG_DONTWAIT) >= 0)
        ;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    errno = 0;
    assert_int_equal(sbx_msg_send(sv[0], &b), -1);
    assert_int_equal(errno, ETIMEDOUT);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    assert_true(took >= 9.5 && took < 15);
    close(sv[0]);
    close(sv[1]);
}

static void test_a_command_arriving_during_a_request_is_kept_for_the_guard(void **state)
{
    (void)state;
    int g = open_ctl();
    char id[64], tok[80], err[256];
    struct sbx_agent_reg reg = { .name = "busy", .guard_pid = getpid() };
    assert_int_equal(sbx_ctl_register(g, &reg, id, sizeof id, tok, sizeof tok, err, sizeof err), 0);
    struct killer k = { .name = "busy" };
    pthread_t th;
    pthread_create(&th, NULL, kill_thread, &k);
    /* Keep the guard busy with requests until the command shows up. */
    struct sbx_event_desc ev = { .op = SBX_OP_EXEC, .decision = SBX_ALLOW,
                                 .layer = SBX_LAYER_SUPERVISOR, .target = "/bin/true" };
    for (int i = 0; i < 500 && !sbx_ctl_cmd_pending(g); i++) {
        assert_int_equal(sbx_ctl_event(g, &ev), 0);
        struct timespec ts = { 0, 2000000 };
        nanosleep(&ts, NULL);
    }
    assert_true(sbx_ctl_cmd_pending(g));
    struct sbx_ctl_cmd cmd;
    assert_int_equal(sbx_ctl_recv_cmd(g, &cmd), 1);
    assert_false(sbx_ctl_cmd_pending(g));
    assert_int_equal(sbx_ctl_cmd_done(g, cmd.req_id, 0, "1 process"), 0);
    pthread_join(th, NULL);
    assert_int_equal(k.rc, 0);
    sbx_ctl_close(g);
}

static void test_a_soft_kill_sets_the_killed_word_of_the_agents_rings(void **state)
{
    (void)state;
    int g = open_ctl();
    char id[64], tok[80], err[256], rundir[4096];
    struct sbx_agent_reg reg = { .name = "softy", .guard_pid = getpid() };
    assert_int_equal(sbx_ctl_register(g, &reg, id, sizeof id, tok, sizeof tok, err, sizeof err), 0);
    sbx_path_runtime_dir(rundir, sizeof rundir);
    assert_int_equal(sbx_emit_init(rundir, id, tok), 0);
    struct sbx_event_desc ev = { .op = SBX_OP_OPEN_READ, .target = "/etc/hosts" };
    assert_int_equal(sbx_emit(&ev), 0);
    assert_false(sbx_emit_killed());
    struct killer k = { .name = "softy", .soft = true };
    kill_thread(&k);
    assert_int_equal(k.rc, 0);
    assert_string_equal(k.res, "soft-killed softy");
    assert_true(sbx_emit_killed());
    struct sbx_ctl_cmd cmd;
    assert_int_equal(sbx_ctl_recv_cmd(g, &cmd), 1);
    assert_int_equal(cmd.kind, SBX_CMD_KILL_SOFT);
    assert_int_equal(sbx_ctl_exit(g, 0, "exited 0"), 0);
    sbx_ctl_close(g);
}

static void test_a_ring_with_a_wrong_token_is_refused(void **state)
{
    (void)state;
    /* This process's ring is registered already (previous test); a forked
     * child makes its own, with a token that does not match. */
    int g = open_ctl();
    char id[64], tok[80], err[256], rundir[4096];
    struct sbx_agent_reg reg = { .name = "victim2", .guard_pid = getpid() };
    assert_int_equal(sbx_ctl_register(g, &reg, id, sizeof id, tok, sizeof tok, err, sizeof err), 0);
    sbx_path_runtime_dir(rundir, sizeof rundir);
    pid_t pid = fork();
    if (pid == 0) {
        sbx_emit_init(rundir, id, "not-the-token");
        struct sbx_event_desc ev = { .op = SBX_OP_OPEN_READ, .target = "/x" };
        int rc = sbx_emit(&ev);
        _exit(rc == -1 && strstr(sbx_emit_error(), "wrong token") ? 0 : 1);
    }
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(sbx_ctl_exit(g, 0, "exited 0"), 0);
    sbx_ctl_close(g);
}

/* The supervisor's rows (tools/guard_sup.h): the daemon acknowledges them
 * on the guard's KEEP connection once they are committed, and a row's own
 * time is kept only between the run's start and now. */
static void test_supervisor_rows_are_kept_until_a_commit_acknowledges_them(void **state)
{
    (void)state;
    int g = open_ctl();
    char id[64], tok[80], err[256];
    struct sbx_agent_reg reg = { .name = "acked", .guard_pid = getpid() };
    assert_int_equal(sbx_ctl_register(g, &reg, id, sizeof id, tok, sizeof tok, err, sizeof err), 0);
    struct guard_keep *gk = guard_keep_open(id, tok, err, sizeof err);
    if (!gk)
        fail_msg("guard_keep_open: %s", err);
    struct guard_sup *gs = guard_sup_open(true);
    assert_non_null(gs);
    int64_t t0 = real_now_ns();
    struct sbx_event_desc ev = { .op = SBX_OP_EXEC, .decision = SBX_ALLOW,
                                 .layer = SBX_LAYER_SUPERVISOR, .target = "/bin/acked-1" };
    assert_int_equal(guard_sup_record(gs, g, &ev), 0);
    ev.target = "/bin/acked-2";
    assert_int_equal(guard_sup_record(gs, g, &ev), 0);
    assert_int_equal(guard_sup_pending(gs), 2);
    /* The daemon may commit (and acknowledge) at any moment; it never
     * acknowledges more than was sent, and the guard keeps every row until
     * it hands the acknowledgement on. */
    assert_int_equal(guard_keep_take(gk), 0);
    assert_true(guard_keep_acked(gk) <= 2);
    assert_int_equal(guard_sup_pending(gs), 2);
    int64_t last = -1;
    assert_int_equal(sbx_ctl_sync(g, &last, err, sizeof err), 0);
    struct pollfd p = { .fd = guard_keep_fd(gk), .events = POLLIN };
    for (int i = 0; i < 20 && guard_keep_acked(gk) < 2; i++)
        if (poll(&p, 1, 100) > 0)
            assert_int_equal(guard_keep_take(gk), 0);
    assert_int_equal(guard_keep_acked(gk), 2);
    guard_sup_acked(gs, guard_keep_acked(gk));
    assert_int_equal(guard_sup_pending(gs), 0);

    /* Rows sent again after a restart carry their own time: kept when it
     * lies between the run's start and now, else the daemon's clock. */
    int64_t own = t0 - 1000;
    const char *target[2] = { "/bin/acked-3", "/bin/acked-4" };
    long long ts[2] = { own, 1 };
    struct sbx_msgbuf *b = malloc(sizeof *b);
    assert_non_null(b);
    for (int i = 0; i < 2; i++) {
        ev.target = target[i];
        sbx_ctl_event_format(b, &ev, 0);
        sbx_msg_add(b, "noreply", "1");
        sbx_msg_addf(b, "seq", "%d", 3 + i);
        sbx_msg_addf(b, "ts", "%lld", ts[i]);
        assert_int_equal(sbx_msg_send(g, b), 0);
    }
    free(b);
    assert_int_equal(sbx_ctl_sync(g, &last, err, sizeof err), 0);
    for (int i = 0; i < 20 && guard_keep_acked(gk) < 4; i++)
        if (poll(&p, 1, 100) > 0)
            assert_int_equal(guard_keep_take(gk), 0);
    assert_int_equal(guard_keep_acked(gk), 4);
    assert_int_equal(sbx_ctl_exit(g, 0, "exited 0"), 0);
    sbx_ctl_close(g);
    guard_sup_close(gs);
    guard_keep_close(gk);

    sqlite3 *db;
    assert_int_equal(sqlite3_open_v2(getenv("SBX_AUDIT_DB"), &db, SQLITE_OPEN_READONLY, NULL),
                     SQLITE_OK);
    sqlite3_stmt *q;
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT target, ts, layer FROM events WHERE "
                                        "target LIKE '/bin/acked-%' ORDER BY target", -1, &q,
                                        NULL), SQLITE_OK);
    for (int i = 1; i <= 4; i++) {
        assert_int_equal(sqlite3_step(q), SQLITE_ROW);
        char want[32];
        snprintf(want, sizeof want, "/bin/acked-%d", i);
        assert_string_equal((const char *)sqlite3_column_text(q, 0), want);
        assert_string_equal((const char *)sqlite3_column_text(q, 2), "supervisor");
        int64_t at = sqlite3_column_int64(q, 1);
        if (i == 3)
            assert_int_equal(at, own);
        else
            assert_true(at >= t0);
    }
    assert_int_equal(sqlite3_step(q), SQLITE_DONE);
    sqlite3_finalize(q);
    sqlite3_close(db);
}

/* The WAL's checkpoint sequence number (its header, bytes 12-15, big
 * endian): one more each time the WAL starts over after a checkpoint that
 * copied all of it back into the database. */
static uint32_t wal_restarts(void)
{
    char path[4200];
    unsigned char h[16] = { 0 };
    snprintf(path, sizeof path, "%s-wal", getenv("SBX_AUDIT_DB"));
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(h, 1, sizeof h, f), sizeof h);
    fclose(f);
    return (uint32_t)h[12] << 24 | (uint32_t)h[13] << 16 | (uint32_t)h[14] << 8 | h[15];
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static void test_rows_of_a_control_connection_are_copied_back_after_a_quiet_second_not_each(
    void **state)
{
    (void)state;
    /* sbx-serve's verdicts come one by one on a control connection, not
     * through a ring.  The daemon took a moment without ring rows for a
     * quiet store and had the WAL copied back and synced after each such
     * commit: most of its CPU under a stream of rejected requests. */
    int g = open_ctl();
    char id[64], tok[80], err[256];
    int64_t last = -1;
    struct sbx_agent_reg reg = { .name = "verdicts", .guard_pid = getpid() };
    assert_int_equal(sbx_ctl_register(g, &reg, id, sizeof id, tok, sizeof tok, err, sizeof err), 0);
    assert_int_equal(sbx_ctl_sync(g, &last, err, sizeof err), 0);
    struct sbx_event_desc ev = { .op = SBX_OP_EXEC, .decision = SBX_DENY,
                                 .layer = SBX_LAYER_SBX, .target = "code sha256:0 (1 bytes)" };
    /* Quiet first (the tests before wrote rings): */
    sleep_ms(1500);
    uint32_t before = wal_restarts();
    for (int i = 0; i < 40; i++) {
        assert_int_equal(sbx_ctl_event_async(g, &ev), 0);
        assert_int_equal(sbx_ctl_sync(g, &last, err, sizeof err), 0);
        sleep_ms(5);
    }
    uint32_t busy = wal_restarts();
    /* A second without rows: then the WAL is copied back, and starts over
     * at the next commit. */
    sleep_ms(2500);
    assert_int_equal(sbx_ctl_event_async(g, &ev), 0);
    assert_int_equal(sbx_ctl_sync(g, &last, err, sizeof err), 0);
    uint32_t after = wal_restarts();
    assert_int_equal(sbx_ctl_exit(g, 0, "exited 0"), 0);
    sbx_ctl_close(g);
    if (busy - before > 2)
        fail_msg("the WAL started over %u times in 40 commits 5 ms apart", busy - before);
    if (after == busy)
        fail_msg("the WAL did not start over after 2.5 s without rows");
}

static int stop_daemon(void **state)
{
    (void)state;
    char pf[4096];
    sbx_path_runtime_file(SBX_PID_FILE, pf, sizeof pf);
    FILE *f = fopen(pf, "r");
    int pid = 0;
    if (f && fscanf(f, "%d", &pid) == 1 && pid > 0) {
        kill(pid, SIGTERM);
        for (int i = 0; i < 100 && kill(pid, 0) == 0; i++) {
            struct timespec ts = { 0, 50000000 };
            nanosleep(&ts, NULL);
        }
    }
    if (f)
        fclose(f);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_msg_codec_round_trips_escapes),
        cmocka_unit_test(test_msg_parser_rejects_malformed_messages),
        cmocka_unit_test(test_malformed_requests_get_an_error_and_the_daemon_keeps_serving),
        cmocka_unit_test(test_an_oversized_request_gets_an_error_and_the_daemon_keeps_serving),
        cmocka_unit_test(test_a_client_that_leaves_without_reading_does_not_hurt_the_daemon),
        cmocka_unit_test(test_register_refuses_an_empty_or_duplicate_name),
        cmocka_unit_test(test_an_event_sent_without_waiting_gets_no_answer_and_is_stored),
        cmocka_unit_test(test_a_send_to_a_peer_that_never_reads_gives_up_within_its_bound),
        cmocka_unit_test(test_killing_an_unknown_agent_is_a_clear_error),
        cmocka_unit_test(test_a_hard_kill_reaches_the_guard_and_waits_for_its_confirmation),
        cmocka_unit_test(test_a_command_arriving_during_a_request_is_kept_for_the_guard),
        cmocka_unit_test(
            test_a_guard_that_exits_and_hangs_up_during_a_hard_kill_leaves_the_daemon_running),
        cmocka_unit_test(test_a_soft_kill_sets_the_killed_word_of_the_agents_rings),
        cmocka_unit_test(test_a_ring_with_a_wrong_token_is_refused),
        cmocka_unit_test(test_a_ring_writer_cannot_choose_its_records_time_nor_flood_the_log),
        cmocka_unit_test(test_supervisor_rows_are_kept_until_a_commit_acknowledges_them),
        cmocka_unit_test(
            test_rows_of_a_control_connection_are_copied_back_after_a_quiet_second_not_each),
    };
    return cmocka_run_group_tests(tests, NULL, stop_daemon);
}
