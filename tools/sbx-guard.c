/*
 * sbx-guard — run an agent under a policy.
 *
 *   sbx-guard [--policy FILE] [--name NAME] [--workspace DIR]
 *             [--isolation MODE] [--image IMAGE]
 *             [--notify stderr|summary|none|agent] [--print-isolation]
 *             -- COMMAND [ARG...]
 *   sbx-guard --help | --version
 *
 * The set-up is one straight sequence, in this order, and any failure before
 * the agent runs is fatal (exit 125, nothing started):
 *   1. parse arguments; load and check the policy (file:line:col errors);
 *   2. refuse a store or runtime directory inside the workspace (the agent
 *      could rewrite its own record);
 *   3. reach sbx-auditd (start it if needed) and register the agent, which
 *      writes the durable `start` row and gives the run id and ring token;
 *   4. write a private read-only copy of the policy for the preload, so the
 *      agent cannot change the rules under it by editing the original;
 *   5. build the agent's environment (env.pass, env.set, the preload);
 *   6. decide the agent's own command like any other exec;
 *   7. become a child subreaper (so no descendant escapes a kill by
 *      double-forking), block the signals we relay, and let iso_spawn start
 *      the agent with the kernel layer of the chosen isolation mode.
 * Then it supervises: relays signals, carries out kills from sbx-kill, the
 * timeout, and the seccomp supervisor's notifications; tells of denials
 * (--notify, guard_notice.h); records `exit`; and
 * exits with the agent's status (128+N for signal N).  main() is this
 * sequence, a function per step; a run that registered ends in one place
 * (its exit row, the copies removed), started or not: 126 when the policy
 * denies the command, 127 when it is not found.
 */
#include <err.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <bsd/stdlib.h>
#include <bsd/string.h>

#include "auditfmt.h"
#include "ctl.h"
#include "event.h"
#include "guard_dirs.h"
#include "guard_env.h"
#include "guard_keep.h"
#include "guard_notice.h"
#include "guard_proc.h"
#include "guard_ring.h"
#include "guard_sup.h"
#include "isolate.h"
#include "paths.h"
#include "policy.h"
#include "policy_copy.h"
#include "version.h"

#define EXIT_GUARD_FAILED 125   /* CONTRACT.md: sbx-guard itself failed, bad usage too */
#define EXIT_DENIED       126   /* the policy denies running the command */
#define EXIT_NOT_FOUND    127   /* the command is not there (as the shell says it) */

extern char **environ;

static const char synopsis[] =
"usage: sbx-guard [--policy FILE] [--name NAME] [--workspace DIR]\n"
"                 [--isolation MODE] [--image IMAGE]\n"
"                 [--notify stderr|summary|none|agent] [--print-isolation]\n"
"                 -- COMMAND [ARG...]\n"
"       sbx-guard --help | --version\n";

static void __attribute__((noreturn)) usage(void)
{
    fputs(synopsis, stderr);
    exit(EXIT_GUARD_FAILED);
}

static void __attribute__((noreturn)) help(void)
{
    fputs(synopsis, stdout);
    fputs(
"\n"
"Runs COMMAND under the policy: every file open, program start and connection\n"
"of COMMAND and its children is decided by the policy and recorded by sbx-auditd.\n"
"\n"
"  -p, --policy FILE     the policy (default: ./.sbx.yaml, else the shipped default)\n"
"  -n, --name NAME       the agent's name in the audit trail and for sbx-kill\n"
"                        (default: the command's base name and a short suffix)\n"
"  -w, --workspace DIR   the workspace (default: the policy's, else the current dir)\n"
"  -i, --isolation MODE  auto (default): the kernel layer where the kernel allows;\n"
"                        native: require it; none: the in-process guard only;\n"
"                        bwrap: the kernel layer through bubblewrap;\n"
"                        gvisor: in gVisor's user-space kernel (runsc); never\n"
"                        chosen by auto; podman, docker: in a container of\n"
"                        --image (default debian:bookworm-slim); never by auto\n"
"      --image IMAGE     the image for podman and docker\n"
"      --notify MODE     how denials are told: stderr: a line each on sbx-guard's\n"
"                        stderr (at most 5 a second) and a count at exit;\n"
"                        summary: the count at exit only; none; agent: a line\n"
"                        on the stderr of the process denied.  Default: summary\n"
"                        when stderr is a terminal (a full-screen program's\n"
"                        screen is never drawn over), else stderr\n"
"      --no-notify       the same as --notify none\n"
"      --print-isolation show what would be set up, and exit\n"
"  -h, --help            this text\n"
"  -V, --version         print the version\n"
"\n"
"Options take their value as --opt VALUE or --opt=VALUE.\n"
"Exit status: the agent's; 128+N if it died of signal N (137 when killed);\n"
"125 if sbx-guard failed (bad policy, arguments, no isolation where required);\n"
"126 if the policy denies running COMMAND; 127 if COMMAND is not found.\n", stdout);
    exit(0);
}

struct opts {
    const char *policy, *name, *workspace;
    const char *image;          /* podman/docker: --image */
    enum iso_mode isolation;
    int notify;                 /* enum guard_notify_mode; -1: decide from isatty(2) */
    bool print_isolation;
    char **cmd;
};

static void parse_args(int argc, char **argv, struct opts *o)
{
    static const struct option longopts[] = {
        { "policy", required_argument, NULL, 'p' },
        { "name", required_argument, NULL, 'n' },
        { "workspace", required_argument, NULL, 'w' },
        { "isolation", required_argument, NULL, 'i' },
        { "notify", required_argument, NULL, 'N' },
        { "no-notify", no_argument, NULL, 'Q' },
        { "print-isolation", no_argument, NULL, 'P' },
        { "image", required_argument, NULL, 'I' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    *o = (struct opts){ .isolation = ISO_AUTO, .notify = -1 };
    int c, li = -1;
    /* '+': stop at the first non-option, so the agent's own options are
     * never taken for ours even without "--". */
    while ((c = getopt_long(argc, argv, "+p:n:w:i:hV", longopts, &li)) != -1) {
        /* "--policy -- COMMAND" forgot the value: getopt would take "--"
         * for it, and COMMAND for the end of our options. */
        if (optarg && strcmp(optarg, "--") == 0) {
            if (li >= 0)
                warnx("option '--%s' requires an argument", longopts[li].name);
            else
                warnx("option requires an argument -- '%c'", c);
            usage();
        }
        li = -1;
        switch (c) {
        case 'p': o->policy = optarg; break;
        case 'n': o->name = optarg; break;
        case 'w': o->workspace = optarg; break;
        case 'i': {
            int m = iso_mode_parse(optarg);
            if (m < 0)
                errx(EXIT_GUARD_FAILED,
                     "--isolation: '%s' is not one of auto, none, native, bwrap, gvisor, "
                     "podman, docker", optarg);
            o->isolation = (enum iso_mode)m;
            break;
        }
        case 'N':
            o->notify = guard_notify_parse(optarg);
            if (o->notify < 0)
                errx(EXIT_GUARD_FAILED,
                     "--notify: '%s' is not one of stderr, summary, none, agent", optarg);
            break;
        case 'Q': o->notify = GUARD_NOTIFY_NONE; break;
        case 'P': o->print_isolation = true; break;
        case 'I': o->image = optarg; break;
        case 'h': help();
        case 'V': printf("sbx-guard %s\n", SBX_VERSION); exit(0);
        default: usage();
        }
    }
    if (optind >= argc && !o->print_isolation) {
        warnx("no command given");
        usage();
    }
    o->cmd = argv + optind;
    if (o->name) {
        size_t n = strlen(o->name);
        if (n == 0 || n > 64 || strspn(o->name, "abcdefghijklmnopqrstuvwxyz"
                "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != n) {
            char shown[300];    /* never the raw bytes: they may drive the terminal */
            errx(EXIT_GUARD_FAILED,
                 "--name: '%s' must be 1-64 characters of letters, digits, '.', '_', '-'",
                 afmt_escape(o->name, shown, sizeof shown));
        }
    }
}

/* The policy file: --policy, else ./.sbx.yaml, else the shipped default. */
static const char *choose_policy(const char *given, char *buf, size_t bufsz)
{
    if (given)
        return given;
    if (access(".sbx.yaml", F_OK) == 0)
        return ".sbx.yaml";
    char dir[PATH_MAX];
    if (sbx_path_self_dir(dir, sizeof dir) == 0) {
        static const char *const rel[] = {
            "../share/sbx/policies/default.yaml",   /* installed */
            "../../policies/default.yaml",          /* build/bin in the tree */
        };
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
            if ((size_t)snprintf(buf, bufsz, "%s/%s", dir, rel[i]) >= bufsz)
                continue;
            if (access(buf, R_OK) == 0)
                return buf;
        }
    }
    errx(EXIT_GUARD_FAILED, "no --policy given, no ./.sbx.yaml, and the shipped default.yaml "
         "is not installed");
}

static int find_preload(char *out, size_t outsz)
{
    char dir[PATH_MAX];
    if (sbx_path_self_dir(dir, sizeof dir) < 0)
        return -1;
    static const char *const rel[] = {
        "../lib/libsbx-preload.so",         /* build/bin -> build/lib */
        "../lib/sbx/libsbx-preload.so",     /* PREFIX/bin -> PREFIX/lib/sbx */
    };
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        char p[PATH_MAX * 2];
        snprintf(p, sizeof p, "%s/%s", dir, rel[i]);
        if (realpath(p, out) && strlen(out) < outsz && access(out, R_OK) == 0)
            return 0;
    }
    errno = ENOENT;
    return -1;
}

/* Absolute, symlink-resolved form of PATH, even if its last components do
 * not exist yet (the store may not have been created). */
static void resolve_loose(const char *path, char *out, size_t outsz)
{
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        strlcpy(cwd, "/", sizeof cwd);
    if (policy_path_resolve(cwd, path, false, out, outsz) < 0)
        strlcpy(out, path, outsz);
}

static char *join_argv(char *const argv[])
{
    size_t len = 1;
    for (size_t i = 0; argv[i]; i++)
        len += strlen(argv[i]) + 1;
    char *s = malloc(len);
    if (!s)
        return NULL;
    /* memcpy at a running end: strlcat from the start each time made
     * 100,000 arguments take half a minute. */
    char *end = s;
    for (size_t i = 0; argv[i]; i++) {
        if (i)
            *end++ = ' ';
        size_t n = strlen(argv[i]);
        memcpy(end, argv[i], n);
        end += n;
    }
    *end = '\0';
    return s;
}

static void default_name(const char *cmd, char *out, size_t outsz)
{
    const char *base = strrchr(cmd, '/');
    base = base ? base + 1 : cmd;
    char clean[40];
    size_t j = 0;
    for (size_t i = 0; base[i] && j < sizeof clean - 1; i++) {
        char ch = base[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
        clean[j++] = (char)(ok ? ch : '_');
    }
    clean[j] = '\0';
    if (j == 0)
        strlcpy(clean, "agent", sizeof clean);
    unsigned short r = 0;
    if (getrandom(&r, sizeof r, 0) != sizeof r)
        r = (unsigned short)getpid();
    snprintf(out, outsz, "%s-%04x", clean, r);
}

/* The compiled policy for the preload (policy_image_save): the policy
 * sbx-guard loaded and checked, with the options the preload builds too
 * (policy_agent_options) but for the policy copy among the protected
 * paths, which lies inside the protected runtime directory anyway; and
 * named by its absolute path, as the preload names it.  The preload is
 * told where it is (SBX_POLICY_IMAGE); without it the preload loads the
 * copy: slower, the same decisions; so a failure here is only a warning. */
static int write_policy_image(struct policy *p, const char *origin, const char *image)
{
    char why[512] = "out of memory";
    int rc = policy_set_display_path(p, origin);
    if (rc == 0)
        rc = policy_image_save(p, image, why, sizeof why);
    if (rc < 0)
        warnx("warning: no compiled policy for the agent (%s); every process of it loads "
              "the policy itself", why);
    return rc;
}

static void remove_copies(const char *copy, const char *image)
{
    unlink(copy);
    if (image[0])
        unlink(image);
}

/* ---- supervision ----------------------------------------------------------- */

struct guard {
    int ctl;                    /* registration connection to sbx-auditd */
    struct iso_child child;
    struct iso_request req;
    bool killed;                /* a hard kill or the timeout ended the agent */
    char kill_detail[320];
    bool tty_handed;            /* the agent's group has the terminal */
    struct guard_notice *notice;    /* --notify stderr or summary, else NULL */
    const char *name, *run_id, *token;  /* the registration, for a resume */
    struct guard_ring *ring;    /* gvisor: the event relay, or NULL */
    struct guard_keep *keep;    /* copies of the agent's rings, or NULL */
    struct guard_sup *sup;      /* the supervisor's rows until stored */
};

/* The daemon's acknowledgements of the supervisor's rows come on the KEEP
 * connection (guard_sup.h). */
static void take_keep(struct guard *g)
{
    (void)guard_keep_take(g->keep);
    guard_sup_acked(g->sup, guard_keep_acked(g->keep));
}

/* GUARD_SUP_MAX rows wait for the daemon (its store fails): the agent's
 * call waits up to MS for it to store some, as a full ring's writer waits. */
static void wait_for_acks(struct guard *g, int ms)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        long left = ms - ((t.tv_sec - t0.tv_sec) * 1000L + (t.tv_nsec - t0.tv_nsec) / 1000000L);
        int fd = guard_keep_fd(g->keep);
        if (!guard_sup_full(g->sup) || left <= 0 || fd < 0)
            return;
        struct pollfd pf = { .fd = fd, .events = POLLIN };
        if (poll(&pf, 1, (int)left) > 0)
            take_keep(g);
    }
}

static void on_supervisor_event(void *ctx, const struct sbx_event_desc *ev)
{
    struct guard *g = ctx;
    /* Not waiting for sbx-auditd's answer: the next notification (another
     * process's exec) would wait for that round trip too.  The daemon keeps
     * the connection's order, so the row still comes before the exit's.
     * The row is kept until a commit acknowledges it (guard_sup.h): a
     * daemon that dies first gets it again from its successor. */
    if (guard_sup_full(g->sup))
        wait_for_acks(g, 2000);
    if (guard_sup_record(g->sup, g->ctl, ev) == 0)
        return;
    /* Said at most once a second, with the count: a daemon that cannot be
     * restarted would otherwise cost a line per exec. */
    static struct timespec said;
    static unsigned long lost;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    lost++;
    if (said.tv_sec != 0 && now.tv_sec - said.tv_sec < 1)
        return;
    said = now;
    warnx("could not record a supervisor event (%s; %lu so far)",
          guard_sup_full(g->sup) ? "100,000 wait for sbx-auditd to store them"
                                 : "sbx-auditd is not reachable", lost);
}

/* Ends every process of the agent: the whole pid namespace when there is one
 * (SIGKILL to its init), then a sweep of every descendant and the agent's
 * process group, which catches what a pid namespace does not hold. */
static int hard_kill(struct guard *g)
{
    /* Counted first: SIGKILL to a pid namespace's init takes all of it at
     * once, and the sweep after it finds nothing left to count. */
    int alive = guard_count_descendants();
    if (g->child.pidns)
        kill(g->child.pid, SIGKILL);
    iso_child_kill(&g->child);
    int n = guard_kill_descendants(g->child.pid, 100);
    g->killed = true;
    return n > alive ? n : alive;
}

static void record(struct guard *g, enum sbx_op op, enum sbx_decision d,
                   const char *target, const char *reason)
{
    struct sbx_event_desc ev = {
        .op = op, .decision = d, .layer = SBX_LAYER_SBX,
        .target = target, .reason = reason,
    };
    if (g->ctl >= 0 && sbx_ctl_event(g->ctl, &ev) < 0)
        warn("could not record %s", sbx_op_name(op));
}

static void handle_ctl(struct guard *g)
{
    struct sbx_ctl_cmd cmd;
    int r = sbx_ctl_recv_cmd(g->ctl, &cmd);
    if (r == 0 || r < 0) {
        /* The daemon is gone (killed: a stopped one would have said so to
         * the rings).  Start another and take the run back, so that the
         * agent's new processes and its exit are recorded, and hand it the
         * copies of the agent's rings (guard_keep.h): what its processes
         * wrote meanwhile, the killed ones' too, is drained from them. */
        char why[512] = "";
        sbx_ctl_close(g->ctl);
        g->ctl = -1;
        /* A few tries: the dead daemon's listener may still take a
         * connection for a moment while the kernel tears the process down. */
        for (int i = 0; i < 20 && g->ctl < 0; i++) {
            if (i) {
                struct timespec ts = { 0, 50000000 };
                nanosleep(&ts, NULL);
            }
            g->ctl = sbx_ctl_open(true, why, sizeof why);
            if (g->ctl >= 0 && sbx_ctl_resume(g->ctl, g->name, g->run_id, g->token, getpid(),
                                              why, sizeof why) < 0) {
                sbx_ctl_close(g->ctl);
                g->ctl = -1;
            }
        }
        if (g->ctl >= 0) {
            /* We are a subreaper: the new daemon's double fork made it our
             * child.  It is not the agent's: the sweeps leave it alone (its
             * pid from the kernel, not from a file the agent could write). */
            struct ucred cr;
            socklen_t cl = sizeof cr;
            if (getsockopt(g->ctl, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0)
                guard_spare_pid(cr.pid);
            /* Every ring of the agent goes to the new daemon, the rings of
             * processes killed meanwhile too: it drains what the dead one
             * had not committed. */
            int handed = 0, refused = 0;
            char note[600] = "";
            if (g->keep && guard_keep_handover(g->keep, g->run_id, g->token, &handed, &refused,
                                               why, sizeof why) == 0) {
                /* Then the supervisor's rows the dead daemon had not
                 * acknowledged (the last ACKs were taken with the rings). */
                guard_sup_acked(g->sup, guard_keep_acked(g->keep));
                long again = guard_sup_resend(g->sup, g->ctl);
                char sup[96] = "";
                if (again > 0)
                    snprintf(sup, sizeof sup, ", %ld supervisor row%s sent again", again,
                             again == 1 ? "" : "s");
                else if (again < 0)
                    strlcpy(sup, ", its supervisor rows kept to send again", sizeof sup);
                snprintf(note, sizeof note, "%d event ring%s of its processes handed over%s%s%s%s",
                         handed, handed == 1 ? "" : "s", sup, refused ? "; REFUSED: " : "",
                         refused ? why : "", refused ? " (see sbx-auditd.log)" : "");
            } else {
                snprintf(note, sizeof note, "its rings were not handed over (%s): what its "
                         "running processes wrote meanwhile is recorded when they hand their "
                         "rings over, at the latest when they exit; a process killed before "
                         "then loses it", g->keep ? why : "not kept");
            }
            warnx("sbx-auditd died and was restarted; agent '%s' is recorded again (%s)",
                  g->name, note);
            return;
        }
        warnx("sbx-auditd died and cannot be restarted (%s): the agent's events are no "
              "longer recorded; each process's guarded calls fail once its event ring is "
              "full", why);
        return;
    }
    char detail[256];
    if (cmd.kind == SBX_CMD_KILL_HARD) {
        int n = hard_kill(g);
        if ((size_t)snprintf(g->kill_detail, sizeof g->kill_detail, "killed by %s: %s",
                             cmd.by, cmd.reason[0] ? cmd.reason : "(no reason given)")
            >= sizeof g->kill_detail)
            strlcpy(g->kill_detail + sizeof g->kill_detail - 4, "...", 4);
        snprintf(detail, sizeof detail, "killed %d process%s", n, n == 1 ? "" : "es");
        warnx("agent %s", g->kill_detail);
        sbx_ctl_cmd_done(g->ctl, cmd.req_id, 0, detail);
    } else {
        warnx("agent soft-killed by %s: %s; its guarded calls now fail", cmd.by,
              cmd.reason[0] ? cmd.reason : "(no reason given)");
        sbx_ctl_cmd_done(g->ctl, cmd.req_id, 0, "guarded calls now fail with EPERM");
    }
}

/* The daemon may die as the agent ends, both seen in one poll and the
 * agent's end taken first: before the last rows go out, a hung-up control
 * connection is handled as in supervise (a new daemon, the rings handed
 * over), so that the exit row is not lost. */
static void check_daemon(struct guard *g)
{
    for (int i = 0; i < 4 && g->ctl >= 0; i++) {
        struct pollfd pf = { .fd = g->ctl, .events = POLLIN | POLLRDHUP };
        if (poll(&pf, 1, 0) != 1 || !(pf.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLIN)))
            return;
        handle_ctl(g);
    }
}

/* The exit row.  A daemon that dies with it unanswered (killed between
 * our send and its commit) is replaced and asked again; one that stored it
 * and died before answering has ended the run, which a new daemon then
 * refuses to resume, so the row is never stored twice.  0 / -1. */
static int record_exit(struct guard *g, int code, const char *detail)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        check_daemon(g);
        if (g->ctl < 0)
            break;
        if (sbx_ctl_exit(g->ctl, code, detail) == 0)
            return 0;
    }
    return -1;
}

/* An interactive agent must own the terminal: Ctrl-C then reaches its
 * whole process group directly, and it can read without SIGTTIN.  Its
 * group takes the terminal before the exec (iso_take_terminal) when ours
 * is the foreground: the test is the same on both sides, made before
 * iso_spawn; afterwards we are in the background and take it back. */
static void note_terminal(struct guard *g)
{
    g->tty_handed = iso_tty_foreground();
}

static void take_terminal_back(struct guard *g)
{
    if (!g->tty_handed)
        return;
    /* We are a background process now: tcsetpgrp would stop us with
     * SIGTTOU unless it is ignored. */
    struct sigaction sa = { .sa_handler = SIG_IGN }, old;
    sigaction(SIGTTOU, &sa, &old);
    tcsetpgrp(STDIN_FILENO, getpgrp());
    sigaction(SIGTTOU, &old, NULL);
}

static int exit_code_of(int status, char *detail, size_t dsz)
{
    if (WIFEXITED(status)) {
        snprintf(detail, dsz, "exited %d", WEXITSTATUS(status));
        return WEXITSTATUS(status);
    }
    if (WIFSIGNALED(status)) {
        snprintf(detail, dsz, "killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
        return 128 + WTERMSIG(status);
    }
    snprintf(detail, dsz, "ended with wait status %d", status);
    return EXIT_GUARD_FAILED;
}

/* Waits for the agent, relaying signals and serving kills, the timeout and
 * the supervisor.  Returns the agent's wait status. */
static int supervise(struct guard *g, int sigfd, uint64_t timeout_ms)
{
    int tfd = -1;
    if (timeout_ms) {
        tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
        struct itimerspec its = { .it_value = {
            .tv_sec = (time_t)(timeout_ms / 1000),
            .tv_nsec = (long)(timeout_ms % 1000) * 1000000L } };
        if (tfd < 0 || timerfd_settime(tfd, 0, &its, NULL) < 0)
            err(EXIT_GUARD_FAILED, "timerfd");
    }
    for (;;) {
        /* A command can arrive while a request of ours waits for its reply;
         * the client keeps it aside for us. */
        while (g->ctl >= 0 && sbx_ctl_cmd_pending(g->ctl))
            handle_ctl(g);
        int dfd[2] = { -1, -1 };
        int nd = g->child.dns ? iso_dns_fds(dfd) : 0;
        struct pollfd pf[7] = {
            { sigfd, POLLIN, 0 }, { g->ctl, POLLIN, 0 },
            { g->child.notify_fd, POLLIN, 0 }, { tfd, POLLIN, 0 },
            { dfd[0], POLLIN, 0 }, { dfd[1], POLLIN, 0 },
            { guard_keep_fd(g->keep), POLLIN, 0 },
        };
        /* The relay of an agent in gVisor polls its ring file: a host
         * process cannot be woken by a write in the sandbox's memory.
         * 2 ms while records flow, 20 ms when idle. */
        int moved = g->ring ? guard_ring_pump(g->ring) : 0;
        int wait_ms = !g->ring ? -1 : moved > 0 ? 2 : 20;
        int notice_ms = guard_notice_timeout_ms(g->notice);
        if (notice_ms >= 0 && (wait_ms < 0 || notice_ms < wait_ms))
            wait_ms = notice_ms;
        /* Unused entries are -1: poll passes over them. */
        if (poll(pf, 7, wait_ms) < 0) {
            if (errno == EINTR)
                continue;
            err(EXIT_GUARD_FAILED, "poll");
        }
        guard_notice_tick(g->notice);
        /* Copies of the agent's rings; a hang-up is the daemon's death,
         * which the control connection handles. */
        if (pf[6].fd >= 0 && (pf[6].revents & (POLLIN | POLLHUP | POLLERR)))
            take_keep(g);
        if (pf[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sigfd, &si, sizeof si) == sizeof si && si.ssi_signo != SIGCHLD) {
                /* Relay: to the agent's group and (pid namespace) its init. */
                kill(-g->child.pid, (int)si.ssi_signo);
                kill(g->child.pid, (int)si.ssi_signo);
            }
            int status;
            pid_t r;
            while ((r = waitpid(-1, &status, WNOHANG)) > 0)
                if (r == g->child.pid) {
                    if (tfd >= 0)
                        close(tfd);
                    return status;
                }
        }
        if (g->ctl >= 0 && (pf[1].revents & (POLLIN | POLLHUP | POLLERR)))
            handle_ctl(g);
        if (g->child.notify_fd >= 0 && (pf[2].revents & (POLLIN | POLLHUP | POLLERR))) {
            if (iso_supervise(g->child.notify_fd, &g->req, on_supervisor_event, g) < 0) {
                close(g->child.notify_fd);
                g->child.notify_fd = -1;
            }
        }
        /* The agent's DNS stub (isolate.h): its queries and the host
         * resolver's answers. */
        for (int i = 0; i < nd; i++)
            if (pf[4 + i].revents & POLLIN)
                iso_dns_serve(&g->req, dfd[i], on_supervisor_event, g);
        if (tfd >= 0 && (pf[3].revents & POLLIN)) {
            uint64_t ticks;
            if (read(tfd, &ticks, sizeof ticks) < 0)
                ticks = 0;
            close(tfd);
            tfd = -1;
            snprintf(g->kill_detail, sizeof g->kill_detail,
                     "killed by sbx-guard: timeout of %llu ms reached",
                     (unsigned long long)timeout_ms);
            record(g, SBX_OP_KILL, SBX_DENY, "timeout", g->kill_detail);
            warnx("agent %s", g->kill_detail);
            hard_kill(g);
        }
    }
}

/* gvisor: what the agent's processes wrote before they ended is copied
 * to the daemon's ring (a record still being written when its writer was
 * killed is given up after the relay's bound); the daemon drains its rings
 * before it writes the exit row. */
static void drain_relay(struct guard *g)
{
    if (!g->ring)
        return;
    struct timespec step = { 0, 2000000 };
    for (int i = 0; i < 1500; i++) {
        if (guard_ring_pump(g->ring) < 0 || !guard_ring_pending(g->ring))
            break;
        nanosleep(&step, NULL);
    }
    guard_ring_close(g->ring);
    g->ring = NULL;
}

/* ---- the run, step by step -------------------------------------------------- */

/* What the set-up steps build, in their order; main releases it. */
struct run {
    struct opts o;
    char rt_abs[PATH_MAX];      /* the runtime directory, resolved */
    char db_abs[PATH_MAX];      /* the audit store, resolved */
    char policy_buf[PATH_MAX];
    const char *policy_path;    /* as the user named it (or the default) */
    struct policy *pol;
    const struct policy_info *info;
    char preload[PATH_MAX];
    char name[80], run_id[64], token[128];
    char *cmdline;              /* the command, argv joined by spaces */
    char copy[PATH_MAX * 2];    /* the preload's private copy of the policy */
    char ring_file[PATH_MAX * 2];   /* gvisor: the relayed ring, "" if none */
    char image[PATH_MAX * 2 + 8];   /* its compiled image, "" if none */
    char origin[PATH_MAX];      /* the policy's resolved path, for messages */
    char **envp;                /* the agent's environment */
};

/* Where the store and the sockets are, resolved, so that "inside the
 * workspace" compares like with like. */
static void locate_state(struct run *r)
{
    char runtime_dir[PATH_MAX], audit_db[PATH_MAX];
    if (sbx_path_runtime_dir(runtime_dir, sizeof runtime_dir) < 0)
        err(EXIT_GUARD_FAILED, "cannot find the runtime directory");
    if (sbx_path_audit_db(audit_db, sizeof audit_db) < 0)
        err(EXIT_GUARD_FAILED, "cannot find the audit store");
    /* Both must be the user's alone (paths.h): refused before anything is
     * sent into them. */
    char why[512];
    if (sbx_path_private_dir(SBX_DIR_RUNTIME, true, NULL, 0, why, sizeof why) < 0 ||
        sbx_path_private_dir(SBX_DIR_STORE, true, NULL, 0, why, sizeof why) < 0)
        errx(EXIT_GUARD_FAILED, "%s", why);
    resolve_loose(runtime_dir, r->rt_abs, sizeof r->rt_abs);
    resolve_loose(audit_db, r->db_abs, sizeof r->db_abs);
}

/* 1. The policy, with sbx's own store and sockets protected whatever it
 * says.  Every error of it is printed; then nothing starts. */
static void load_policy(struct run *r)
{
    r->policy_path = choose_policy(r->o.policy, r->policy_buf, sizeof r->policy_buf);
    char ws_abs[PATH_MAX];
    if (r->o.workspace && !realpath(r->o.workspace, ws_abs))
        err(EXIT_GUARD_FAILED, "--workspace %s", r->o.workspace);
    /* The preload builds its options the same way (no copy yet here; it
     * lies inside the protected runtime directory anyway). */
    struct policy_agent agent = {
        .workspace = r->o.workspace ? ws_abs : NULL, .display_path = r->policy_path,
        .runtime_dir = r->rt_abs, .audit_db = r->db_abs,
    };
    static struct policy_agent_options popt;
    policy_agent_options(&agent, &popt);
    struct policy_diag diag = { 0 };
    r->pol = policy_load(r->policy_path, &popt.opt, &diag);
    if (!r->pol) {
        unsigned shown = diag.count < POLICY_DIAG_MAX ? diag.count : POLICY_DIAG_MAX;
        for (unsigned i = 0; i < shown; i++)
            fprintf(stderr, "%s\n", diag.msg[i]);
        if (diag.count > shown)
            fprintf(stderr, "... and %u more errors\n", diag.count - shown);
        if (diag.count == 0)
            warnx("%s: cannot load the policy", r->policy_path);
        errx(EXIT_GUARD_FAILED, "not starting the agent: the policy has errors");
    }
    r->info = policy_info(r->pol);
    /* isolation: gvisor in the policy: that backend, or nothing. */
    if (r->info->isolation_gvisor) {
        if (r->o.isolation == ISO_AUTO)
            r->o.isolation = ISO_GVISOR;
        else if (r->o.isolation != ISO_GVISOR)
            errx(EXIT_GUARD_FAILED, "not starting the agent: the policy %s requires isolation "
                 "gvisor, and --isolation %s was given", r->policy_path,
                 iso_mode_name(r->o.isolation));
    }
}

/* 2. The record must be out of the agent's reach. */
static void check_out_of_reach(const struct run *r)
{
    if (policy_path_under(r->db_abs, r->info->workspace))
        errx(EXIT_GUARD_FAILED, "the audit store %s is inside the workspace %s; the agent "
             "could rewrite its own record (set SBX_AUDIT_DB elsewhere)",
             r->db_abs, r->info->workspace);
    if (policy_path_under(r->rt_abs, r->info->workspace))
        errx(EXIT_GUARD_FAILED, "the runtime directory %s is inside the workspace %s (set "
             "SBX_RUNTIME_DIR elsewhere)", r->rt_abs, r->info->workspace);
}

/* 3. Register: the durable start row, the run id and the ring token. */
static void register_agent(struct run *r, struct guard *g)
{
    char why[512];
    if (r->o.name)
        strlcpy(r->name, r->o.name, sizeof r->name);
    else
        default_name(r->o.cmd[0], r->name, sizeof r->name);
    g->ctl = sbx_ctl_open(true, why, sizeof why);
    if (g->ctl < 0)
        errx(EXIT_GUARD_FAILED, "cannot reach sbx-auditd: %s", why);
    r->cmdline = join_argv(r->o.cmd);
    if (!r->cmdline)
        errx(EXIT_GUARD_FAILED, "out of memory");
    struct sbx_agent_reg reg = {
        .name = r->name, .policy_name = r->info->name, .policy_sha256 = r->info->sha256,
        .policy_file = r->info->file, .workspace = r->info->workspace,
        .command = r->cmdline, .layers = iso_mode_name(r->o.isolation),
        .guard_pid = getpid(),
    };
    if (sbx_ctl_register(g->ctl, &reg, r->run_id, sizeof r->run_id, r->token,
                         sizeof r->token, why, sizeof why) < 0)
        errx(EXIT_GUARD_FAILED, "cannot register agent '%s': %s", r->name, why);
    g->name = r->name;
    g->run_id = r->run_id;
    g->token = r->token;
    /* The ring hand-over (guard_keep.h): before the agent runs, so that
     * every ring of it is kept. */
    g->keep = guard_keep_open(r->run_id, r->token, why, sizeof why);
    if (!g->keep)
        warnx("warning: the agent's event rings are not kept for a daemon restart (%s): "
              "if sbx-auditd dies, a process killed before it hands its ring to the new "
              "daemon loses what it wrote meanwhile, and the supervisor's rows of its "
              "last batch are lost", why);
    /* Kept until acknowledged where ACKs come: on the KEEP connection. */
    g->sup = guard_sup_open(g->keep != NULL);
    if (!g->sup)
        errx(EXIT_GUARD_FAILED, "out of memory");
}

/* 4. The preload's private copy of the policy, and its compiled image. */
static void write_copies(struct run *r, struct guard *g)
{
    char agents_dir[PATH_MAX + 16];
    snprintf(agents_dir, sizeof agents_dir, "%s/agents", r->rt_abs);
    if (sbx_mkdir_p(agents_dir, 0700) < 0)
        err(EXIT_GUARD_FAILED, "%s", agents_dir);
    snprintf(r->copy, sizeof r->copy, "%s/%s.yaml", agents_dir, r->run_id);
    char why[PATH_MAX + 128];
    if (policy_copy_write(r->pol, r->policy_path, r->copy, why, sizeof why) < 0)
        errx(EXIT_GUARD_FAILED, "%s", why);
    g->req.policy_copy = r->copy;
    resolve_loose(r->policy_path, r->origin, sizeof r->origin);
    snprintf(r->image, sizeof r->image, "%s%s", r->copy, SBX_POLICY_IMAGE_SUFFIX);
    if (write_policy_image(r->pol, r->origin, r->image) == 0)
        g->req.policy_image = r->image;
    else
        r->image[0] = '\0';
}

/* 4b. gvisor: the run's event ring file, relayed to sbx-auditd by us
 * (guard_ring.h: a process in gVisor cannot hand its own ring out). */
static int open_relay(struct run *r, struct guard *g, char *detail, size_t dsz)
{
    char why[512];
    snprintf(r->ring_file, sizeof r->ring_file, "%s/agents/%s.ring", r->rt_abs, r->run_id);
    g->ring = guard_ring_open(r->rt_abs, r->ring_file, r->run_id, r->token, why, sizeof why);
    if (g->ring == NULL) {
        r->ring_file[0] = '\0';
        snprintf(detail, dsz, "not started: %s", why);
        warnx("cannot start the agent: %s", why);
        return -1;
    }
    g->req.ring_file = r->ring_file;
    return 0;
}

/* 5. The agent's environment: env.pass, env.set, the preload's variables. */
static void build_env(struct run *r)
{
    struct guard_env_vars vars = {
        .preload = r->preload, .policy_copy = r->copy, .policy_origin = r->origin,
        .policy_image = r->image[0] ? r->image : NULL,
        .workspace = r->info->workspace, .home = r->info->home,
        .runtime_dir = r->rt_abs, .audit_db = r->db_abs,
        .agent = r->name, .agent_id = r->run_id, .agent_token = r->token,
        .ring_file = r->ring_file[0] ? r->ring_file : NULL,
        .notify = r->o.notify == GUARD_NOTIFY_AGENT,
    };
    r->envp = guard_env_build(r->pol, environ, &vars);
    if (!r->envp)
        errx(EXIT_GUARD_FAILED, "out of memory");
    char dropped[512];
    if (guard_env_dropped(r->pol, environ, dropped, sizeof dropped) > 0)
        warnx("env.pass of %s drops %s (set here, not passed to the agent); to pass them: "
              "env: pass: {add: [%s]}", r->info->file, dropped, dropped);
}

/* 6, 7 and the supervision: decides the agent's own command, starts it
 * under the kernel layer and waits for it.  Returns the exit status for
 * sbx-guard, with DETAIL saying what happened for the exit row. */
static int run_agent(struct run *r, struct guard *g, char *detail, size_t dsz)
{
    /* 6. The agent's own command is an exec like any other. */
    char prog[PATH_MAX], prog_real[PATH_MAX];
    if (guard_find_program(r->o.cmd[0], r->envp, prog, sizeof prog) < 0) {
        snprintf(detail, dsz, "cannot run %s: %s", r->o.cmd[0], strerror(errno));
        warnx("%s", detail);
        return EXIT_NOT_FOUND;
    }
    resolve_loose(prog, prog_real, sizeof prog_real);
    struct policy_verdict v;
    if (policy_decide_exec(r->pol, prog_real, r->o.cmd, &v) == SBX_DENY) {
        char rule[512];
        policy_rule_format(v.rule, rule, sizeof rule);
        struct sbx_event_desc ev = {
            .op = SBX_OP_EXEC, .decision = SBX_DENY, .layer = SBX_LAYER_SBX,
            .err = EACCES, .target = prog_real, .target2 = r->cmdline,
            .rule = rule, .reason = v.reason,
        };
        sbx_ctl_event(g->ctl, &ev);
        if (v.rule->reason && v.rule->line > 0)   /* a command rule: not its regex */
            warnx("denied exec %s (%s: %s, %s:%u)", r->cmdline, v.rule->section,
                  v.rule->reason, v.rule->file, v.rule->line);
        else
            warnx("denied exec %s (%s)", r->cmdline, rule);
        snprintf(detail, dsz, "not started: the policy denies the command");
        return EXIT_DENIED;
    }
    g->req.argv = r->o.cmd;
    g->req.envp = r->envp;

    /* 7. Orphans come to us, so a kill can find them; relayed signals are
     * taken through a signalfd (blocked here, unblocked in the child by
     * iso_spawn). */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
        err(EXIT_GUARD_FAILED, "PR_SET_CHILD_SUBREAPER");
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGQUIT);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
        err(EXIT_GUARD_FAILED, "sigprocmask");
    int sigfd = signalfd(-1, &mask, SFD_CLOEXEC);
    if (sigfd < 0)
        err(EXIT_GUARD_FAILED, "signalfd");

    /* iso_spawn execs argv[0]: the program found and decided, by the
     * absolute path it was found at, not the name searched again.  Not its
     * resolved path: a venv's bin/python is a link to the system python,
     * and Python knows its venv only from the name it was started by
     * (argv[0]); started as /usr/bin/python3.11 it refused `pip install`
     * as "externally managed".  The kernel follows the link to the file
     * that was decided, and under the kernel layer the supervisor judges
     * this execve too. */
    char why[512];
    char *argv0 = r->o.cmd[0];
    r->o.cmd[0] = prog;
    /* The kernel layer grants only write roots that exist (guard_dirs.h);
     * made in every mode, so that a tool behaves the same with the guard
     * alone: pip opens the nearest existing parent of its cache to check
     * its owner, which is the hidden home when ~/.cache is missing (and
     * then runs with its cache disabled). */
    guard_make_write_roots(r->pol);
    /* Where the run's rows begin: before the agent can write any. */
    struct guard_notice_run nr = {
        .audit_db = r->db_abs, .agent = r->name, .run_id = r->run_id,
        .workspace = r->info->workspace, .audit_mode = r->info->audit_mode,
    };
    g->notice = guard_notice_open((enum guard_notify_mode)r->o.notify, &nr, stderr);
    note_terminal(g);
    int rc = iso_spawn(&g->req, &g->child, why, sizeof why);
    r->o.cmd[0] = argv0;
    if (rc < 0) {
        take_terminal_back(g);
        warnx("cannot start the agent: %s", why);
        snprintf(detail, dsz, "not started: %s", why);
        return EXIT_GUARD_FAILED;
    }
    snprintf(detail, dsz, "isolation %s: layers %s", iso_mode_name(r->o.isolation),
             g->child.layers);
    if (g->child.warning[0]) {
        strlcat(detail, "; WARNING: ", dsz);
        strlcat(detail, g->child.warning, dsz);
    }
    record(g, SBX_OP_START, SBX_ALLOW, r->cmdline, detail);
    if (strcmp(g->child.layers, "guard") == 0)
        warnx("WARNING: isolation none: only the in-process guard is active; a static "
              "binary or a raw system call is not stopped");
    else
        warnx("agent %s (run %s): %s", r->name, r->run_id, detail);
    if (g->child.warning[0])
        warnx("WARNING: %s", g->child.warning);
    {
        /* No silent hole: under the kernel layer without supervised opens,
         * what covers deny-read files is the cover made at start. */
        const struct policy_rule *rd;
        if (strstr(g->child.layers, "supervisor") && !strstr(g->child.layers, "supervisor-open")
            && policy_rules(r->pol, POLICY_READ_DENY, &rd) > 0)
            warnx("note: a deny-read file created after start is refused by the guard only "
                  "(a static program could read it); SBX_SUPERVISE_OPEN=1 has the kernel "
                  "layer refuse it too, at a cost on every open (docs/isolation.md)");
    }
    if (!g->child.guard)
        warnx("WARNING: %s is a static program: the guard (preload) is not in the "
              "agent's first process, and its calls are recorded only where the kernel "
              "layer sees them; programs it runs load the guard", prog_real);

    int status = supervise(g, sigfd, r->info->limits.timeout_ms);
    check_daemon(g);
    drain_relay(g);
    iso_child_cleanup(&g->child);
    /* With a pid namespace the child is the sandbox's init: the agent's
     * own wait status (a signal, not 128+N) comes from it. */
    status = iso_child_status(&g->child, status);
    take_terminal_back(g);
    /* What the agent left running dies with it: it was running under the
     * agent's registration, which ends now. */
    guard_kill_descendants(g->child.pid, 100);
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
    /* The last notices and the count, once sbx-auditd has stored what the
     * agent's processes wrote: the terminal is ours again. */
    if (g->notice) {
        char sync_err[256];
        if (g->ctl >= 0)
            (void)sbx_ctl_sync(g->ctl, NULL, sync_err, sizeof sync_err);
        guard_notice_finish(g->notice);
    }
    int code = exit_code_of(status, detail, dsz);
    /* podman and docker give the container's exit code only, 128+N for a
     * death by signal N as for an `exit 128+N` (their inspect has no
     * signal either): the row says it cannot tell. */
    if (g->child.container[0] && WIFEXITED(status) && code > 128 && code <= 128 + 64) {
        char more[160];
        snprintf(more, sizeof more, " (or killed by signal %d (%s): the engine does not tell "
                 "which)", code - 128, strsignal(code - 128));
        strlcat(detail, more, dsz);
    }
    if (g->killed && g->kill_detail[0]) {
        strlcat(detail, "; ", dsz);
        strlcat(detail, g->kill_detail, dsz);
    }
    return code;
}

/* What the environment says about the kernel layer (docs/isolation.md). */
static void kernel_options(struct iso_request *req)
{
    /* A long deny cover says how far it got, on our stderr. */
    req->progress = stderr;
    /* Opens judged by the supervisor (docs/isolation.md: its cost). */
    const char *sup_open = getenv("SBX_SUPERVISE_OPEN");
    req->supervise_open = sup_open && strcmp(sup_open, "1") == 0;
    /* How long covering deny-read files at start may take. */
    const char *budget = getenv("SBX_COVER_BUDGET_MS");
    if (budget && budget[0]) {
        const char *errstr = NULL;
        req->cover_budget_ms = (unsigned)strtonum(budget, 1, 24LL * 3600 * 1000, &errstr);
        if (errstr)
            errx(EXIT_GUARD_FAILED, "SBX_COVER_BUDGET_MS=%s: %s (milliseconds, 1 to 86400000)",
                 budget, errstr);
    }
}

int main(int argc, char **argv)
{
    struct run r = { 0 };
    struct guard g = { .ctl = -1, .child.notify_fd = -1 };
    /* getopt's messages begin with argv[0]: the name err(3) uses too. */
    const char *invoked_as = argv[0];
    /* Under --isolation bwrap this program is also the reporter of the
     * agent's wait status, inside the sandbox (isolate.h). */
    iso_bwrap_report_main(argc, argv);
    iso_keep_inherited_ignores();
    argv[0] = program_invocation_short_name;
    parse_args(argc, argv, &r.o);
    if (r.o.notify < 0)
        r.o.notify = (int)guard_notify_default(STDERR_FILENO);
    locate_state(&r);
    load_policy(&r);
    check_out_of_reach(&r);
    if (find_preload(r.preload, sizeof r.preload) < 0)
        errx(EXIT_GUARD_FAILED, "cannot find libsbx-preload.so next to %s (../lib or ../lib/sbx)",
             invoked_as);
    g.req = (struct iso_request){
        .policy = r.pol, .mode = r.o.isolation, .workspace = r.info->workspace,
        .runtime_dir = r.rt_abs, .audit_db = r.db_abs, .preload = r.preload,
        .image = r.o.image,
    };
    kernel_options(&g.req);
    if (r.o.print_isolation) {
        char *const none[] = { NULL };
        g.req.argv = r.o.cmd[0] ? r.o.cmd : none;
        g.req.envp = environ;
        g.req.policy_copy = r.policy_path;
        int prc = iso_print(&g.req, stdout);
        policy_free(r.pol);
        return prc < 0 ? EXIT_GUARD_FAILED : 0;
    }
    register_agent(&r, &g);
    write_copies(&r, &g);
    char detail[1024];
    int code = -1;
    if (r.o.isolation == ISO_GVISOR && open_relay(&r, &g, detail, sizeof detail) < 0)
        code = EXIT_GUARD_FAILED;
    build_env(&r);

    if (code < 0)
        code = run_agent(&r, &g, detail, sizeof detail);
    iso_child_cleanup(&g.child);
    if (g.ring) {
        guard_ring_close(g.ring);
        g.ring = NULL;
    }

    /* Every registered run ends here, started or not: its exit row, then
     * the preload's copies go (the run id in their names is spent). */
    if (g.ctl >= 0 && record_exit(&g, code, detail) < 0)
        warn("could not record the agent's exit");
    remove_copies(r.copy, r.image);
    guard_keep_close(g.keep);
    guard_sup_close(g.sup);
    guard_notice_close(g.notice);
    guard_env_free(r.envp);
    free(r.cmdline);
    policy_free(r.pol);
    return code;
}
