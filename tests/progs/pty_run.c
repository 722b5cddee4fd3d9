/*
 * pty_run — runs a command on a new pseudo-terminal and drives it like a
 * user at a keyboard, with a deadline, for the terminal workloads
 * (tests/workloads/tty.sh).
 *
 *   pty_run [-t SECONDS] [-o FILE] [-f STEPFILE] [STEP...] -- COMMAND [ARG...]
 *
 * The command runs as the leader of a new session whose controlling
 * terminal is the pty (80x24), in the foreground, as in a terminal
 * emulator.  The steps run in order:
 *   expect:TEXT   wait until TEXT appears in the output after the previous
 *                 match (escape sequences are stripped before matching, a
 *                 cursor move right or to a column counts as one blank)
 *   send:TEXT     type TEXT; \r \n \t \e \\ and \xHH are decoded
 *   sleep:MS      let MS milliseconds of output arrive
 * (-f: the steps of STEPFILE first, one a line), then pty_run waits for the
 * command to exit.  Everything the command
 * writes goes to FILE (-o) as it arrives.  The terminal's answers to the
 * cursor-position and device-attribute queries are sent on the program's
 * behalf, as a terminal emulator would (full-screen programs wait for them).
 *
 * A hang is a failure, never a hung test run: past the deadline (-t,
 * default 20 s) pty_run says which step it waited on and the tail of the
 * output on stderr, kills the session and exits 124.  Otherwise it exits
 * with the command's status (128+N for signal N).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <bsd/stdlib.h>

/* Enough for every workload's screen history; later output is still
 * written to -o but no longer matched. */
#define PLAIN_MAX (1u << 20)

static int master = -1;
static pid_t child = -1;
static int out_fd = -1;
static char plain[PLAIN_MAX];       /* output without escape sequences */
static size_t plain_len, cursor;    /* cursor: end of the last match */
static int esc_state;               /* 0 text, 1 after ESC, 2 CSI, 3 OSC, 4 OSC ESC */
static char seq[64];                /* the CSI sequence being read */
static size_t seq_len;
static struct timespec deadline;
static int child_status = -1;

static void usage(void)
{
    fprintf(stderr, "usage: pty_run [-t SECONDS] [-o FILE] [-f STEPFILE] "
            "[expect:TEXT|send:TEXT|sleep:MS ...] -- COMMAND [ARG...]\n");
    exit(2);
}

static long ms_left(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (deadline.tv_sec - now.tv_sec) * 1000L + (deadline.tv_nsec - now.tv_nsec) / 1000000L;
}

static void send_bytes(const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(master, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;             /* the program is gone; waiting will tell */
        s += w;
        n -= (size_t)w;
    }
}

/* A terminal answers these queries; a program that asks waits for them. */
static void answer(const char *csi, size_t n)
{
    if (n == 2 && memcmp(csi, "6n", 2) == 0)
        send_bytes("\033[1;1R", 6);                 /* cursor position */
    else if ((n == 1 && csi[0] == 'c') || (n == 2 && memcmp(csi, "0c", 2) == 0))
        send_bytes("\033[?62;22c", 9);              /* primary attributes */
    else if (n >= 2 && csi[0] == '>' && csi[n - 1] == 'c')
        send_bytes("\033[>1;10;0c", 10);            /* secondary attributes */
}

/* Keeps the text of the output for matching: CSI, OSC and two-byte escape
 * sequences are dropped, across reads. */
static void take_output(const char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)buf[i];
        switch (esc_state) {
        case 0:
            if (c == 0x1b)
                esc_state = 1;
            else if (plain_len < sizeof plain)
                plain[plain_len++] = (char)c;
            break;
        case 1:
            esc_state = c == '[' ? 2 : c == ']' ? 3 : 0;
            seq_len = 0;
            break;
        case 2:
            if (seq_len < sizeof seq)
                seq[seq_len++] = (char)c;
            if (c >= 0x40 && c <= 0x7e) {
                answer(seq, seq_len);
                /* A cursor move right or to a column stands for the
                 * blanks it skips: full-screen programs draw spaces so. */
                if ((c == 'C' || c == 'G') && plain_len < sizeof plain)
                    plain[plain_len++] = ' ';
                esc_state = 0;
            }
            break;
        case 3:
            if (c == 0x07)
                esc_state = 0;
            else if (c == 0x1b)
                esc_state = 4;
            break;
        default:
            esc_state = c == '\\' ? 0 : 3;
            break;
        }
    }
}

/* Reads what arrives within TIMEOUT ms.  Returns 1 after reading, 0 when
 * nothing came, -1 at end of output (every holder closed the terminal). */
static int pump(long timeout)
{
    struct pollfd pf = { master, POLLIN, 0 };
    char buf[4096];

    if (master < 0)
        return -1;
    if (timeout < 0)
        timeout = 0;
    int r = poll(&pf, 1, (int)(timeout > 1000 ? 1000 : timeout));
    if (r <= 0)
        return 0;
    ssize_t n = read(master, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
        return 0;
    if (n <= 0) {
        close(master);          /* EIO: every slave fd is closed */
        master = -1;
        return -1;
    }
    if (out_fd >= 0 && write(out_fd, buf, (size_t)n) < 0)
        out_fd = -1;
    take_output(buf, (size_t)n);
    return 1;
}

static bool child_done(void)
{
    if (child_status >= 0)
        return true;
    int st;
    pid_t w = waitpid(child, &st, WNOHANG);
    if (w == child)
        child_status = st;
    return child_status >= 0;
}

static __attribute__((noreturn)) void timed_out(const char *what)
{
    size_t from = plain_len > 600 ? plain_len - 600 : 0;

    fprintf(stderr, "pty_run: timed out waiting for %s; the end of the output:\n", what);
    for (size_t i = from; i < plain_len; i++) {
        unsigned char c = (unsigned char)plain[i];
        if (c == '\n' || (c >= 0x20 && c < 0x7f))
            fputc(c, stderr);
        else if (c != '\r')
            fprintf(stderr, "\\x%02x", c);
    }
    fputc('\n', stderr);
    /* The whole session: the command's group, and the group it handed the
     * terminal to (a hangup of the terminal reaches the latter). */
    kill(-child, SIGKILL);
    if (master >= 0)
        close(master);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    exit(124);
}

static void decode(const char *s, char *out, size_t *n)
{
    size_t k = 0;
    for (; *s; s++) {
        if (*s != '\\' || s[1] == '\0') {
            out[k++] = *s;
            continue;
        }
        s++;
        switch (*s) {
        case 'r': out[k++] = '\r'; break;
        case 'n': out[k++] = '\n'; break;
        case 't': out[k++] = '\t'; break;
        case 'e': out[k++] = 0x1b; break;
        case 'x': {
            char hex[3] = { s[1], s[1] ? s[2] : '\0', '\0' };
            out[k++] = (char)strtol(hex, NULL, 16);
            s += strlen(hex);
            break;
        }
        default: out[k++] = *s; break;
        }
    }
    *n = k;
}

static void run_step(const char *step)
{
    char text[1024];
    size_t n;

    if (strncmp(step, "expect:", 7) == 0) {
        decode(step + 7, text, &n);
        for (;;) {
            void *m = memmem(plain + cursor, plain_len - cursor, text, n);
            if (m) {
                cursor = (size_t)((char *)m - plain) + n;
                return;
            }
            if (ms_left() <= 0 || pump(ms_left()) < 0)
                timed_out(step);
        }
    } else if (strncmp(step, "send:", 5) == 0) {
        decode(step + 5, text, &n);
        send_bytes(text, n);
    } else if (strncmp(step, "sleep:", 6) == 0) {
        const char *e = NULL;
        long long ms = strtonum(step + 6, 0, 60000, &e);
        if (e)
            usage();
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        long long end = until.tv_sec * 1000LL + until.tv_nsec / 1000000 + ms;
        for (;;) {
            clock_gettime(CLOCK_MONOTONIC, &until);
            long long now = until.tv_sec * 1000LL + until.tv_nsec / 1000000;
            if (now >= end)
                break;
            if (pump((long)(end - now)) < 0)
                usleep(10000);
        }
    } else {
        usage();
    }
}

/* The steps of FILE, one a line, in order. */
static void run_step_file(const char *file)
{
    FILE *f = fopen(file, "r");
    char line[1100];

    if (f == NULL) {
        perror(file);
        timed_out("the step file");
    }
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0])
            run_step(line);
    }
    fclose(f);
}

int main(int argc, char **argv)
{
    const char *step_file = NULL;
    long long secs = 20;
    const char *errstr = NULL;
    int i = 1, first_step, cmd;

    while (i < argc && argv[i][0] == '-' && strcmp(argv[i], "--") != 0) {
        if (strcmp(argv[i], "-t") == 0 && i + 1 < argc) {
            secs = strtonum(argv[i + 1], 1, 3600, &errstr);
            if (errstr)
                usage();
        } else if (strcmp(argv[i], "-f") == 0 && i + 1 < argc) {
            step_file = argv[i + 1];
        } else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
            out_fd = open(argv[i + 1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (out_fd < 0) {
                perror(argv[i + 1]);
                return 2;
            }
        } else {
            usage();
        }
        i += 2;
    }
    first_step = i;
    while (i < argc && strcmp(argv[i], "--") != 0)
        i++;
    if (i + 1 >= argc)
        usage();
    cmd = i + 1;

    master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0) {
        perror("pty_run: posix_openpt");
        return 2;
    }
    const char *slave_name = ptsname(master);
    struct winsize ws = { .ws_row = 24, .ws_col = 80 };
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += (time_t)secs;

    child = fork();
    if (child < 0) {
        perror("pty_run: fork");
        return 2;
    }
    if (child == 0) {
        /* A new session whose controlling terminal is the pty: the command
         * is in the foreground, as under a terminal emulator. */
        int s;
        if (setsid() < 0 || (s = open(slave_name, O_RDWR)) < 0
            || ioctl(s, TIOCSCTTY, 0) < 0 || ioctl(s, TIOCSWINSZ, &ws) < 0
            || dup2(s, 0) < 0 || dup2(s, 1) < 0 || dup2(s, 2) < 0) {
            perror("pty_run: terminal");
            _exit(127);
        }
        if (s > 2)
            close(s);
        /* And with the signals a terminal emulator gives its shell: none
         * ignored.  Run from a background job (nohup, `&` in a script),
         * this program inherits SIGINT and SIGQUIT ignored, which bash
         * passes on to its jobs: a Ctrl-C would then not end one. */
        for (int sig = 1; sig < NSIG; sig++)
            if (sig != SIGKILL && sig != SIGSTOP)
                (void)signal(sig, SIG_DFL);
        {
            sigset_t none;
            sigemptyset(&none);
            (void)sigprocmask(SIG_SETMASK, &none, NULL);
        }
        execvp(argv[cmd], argv + cmd);
        perror(argv[cmd]);
        _exit(127);
    }

    if (step_file)
        run_step_file(step_file);
    for (int k = first_step; k < cmd - 1; k++)
        run_step(argv[k]);
    /* Drain until the command is gone and every holder of the terminal
     * has closed it (EIO), or the deadline. */
    while (!child_done()) {
        if (ms_left() <= 0)
            timed_out("the command to exit");
        if (pump(50) < 0)
            usleep(10000);
    }
    /* What the command wrote just before it exited. */
    while (pump(0) > 0)
        ;
    if (WIFEXITED(child_status))
        return WEXITSTATUS(child_status);
    if (WIFSIGNALED(child_status))
        return 128 + WTERMSIG(child_status);
    return 125;
}
