/*
 * exec.c — running programs: the exec family, posix_spawn, system, popen.
 *
 * glibc's execvp, execl*, posix_spawn, system and popen reach the kernel
 * through libc-internal calls, not through the exported execve, so each is
 * interposed on its own.  The decision is on the resolved program path
 * (PATH searched the way execvp does, symlinks followed) and the argv
 * (policy_decide_exec); for system(CMD) and popen(CMD) on
 * ["/bin/sh", "-c", CMD].  For a `#!` script the script is the program.
 *
 * A denied exec returns -1/EACCES (posix_spawn: EACCES) and the caller goes
 * on running.  An allowed one gets our environment back if the program
 * dropped it (env.c), and the event says so (SBX_EVF_ENV_RESTORED).
 *
 * exec may run in a vfork child: everything here uses the stack, and the
 * guard is left before the real exec (a successful exec never returns to
 * clear the flag in memory the parent shares).  The policy's command
 * matching may allocate (policy.h): a vfork child of a multithreaded
 * program that execs is the one case where that is not strictly safe.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "guard.h"

extern char **environ;

REAL_SLOT(execve);
REAL_SLOT(fexecve);
REAL_SLOT(execveat);
REAL_SLOT(posix_spawn);
REAL_SLOT(posix_spawn_file_actions_addopen);
REAL_SLOT(system);
REAL_SLOT(popen);
REAL_SLOT(vfork);

#define ENV_RESTORED_NOTE "the environment sbx-guard set (LD_PRELOAD, SBX_*) was restored"

/* ARGV joined by spaces, for the audit row. */
static void join_argv(char *const argv[], char *out, size_t size)
{
    struct sbuf s;
    sbuf_init(&s, out, size);
    for (size_t i = 0; argv && argv[i]; i++) {
        if (i)
            sbuf_add(&s, " ");
        sbuf_add(&s, argv[i]);
    }
    if (s.cut && size > 4)
        memcpy(out + size - 4, "...", 4);
}

/* Decides running PATH (relative to DIRFD) with ARGV, and records it.
 * Entered; does not leave.  0 or the errno to fail with. */
static int judge_exec(int dirfd, const char *path, char *const argv[], bool restored)
{
    char res[GUARD_PATH_MAX], cmd[1024];
    /* Linux takes a NULL argv as an empty one; a NULL path is EFAULT. */
    char *no_args[] = {NULL};
    if (!guard_opaque(path))
        return EFAULT;
    if (!argv)
        argv = no_args;
    if (guard_resolve(dirfd, path, false, res, sizeof res) < 0)
        return errno;
    struct guard_verdict gv;
    if (!guard_broken(SBX_OP_EXEC, res, &gv)) {
        gv.op = SBX_OP_EXEC;
        gv.target = res;
        policy_decide_exec(guard_policy, res, argv, &gv.v);
    }
    /* Shells search PATH by trying execve in each directory: a program that
     * is not there runs nothing and is not worth a row.  The decision still
     * holds (a denied one fails ENOENT, as the kernel would). */
    long missing = guard_raw(SYS_faccessat, AT_FDCWD, (long)res, F_OK, 0, 0, 0);
    if (missing == -ENOENT || missing == -ENOTDIR)
        return gv.v.decision == SBX_DENY ? (int)-missing : 0;
    join_argv(argv, cmd, sizeof cmd);
    return guard_record(&gv, cmd, restored ? SBX_EVF_ENV_RESTORED : 0,
                        restored && gv.v.decision == SBX_ALLOW ? ENV_RESTORED_NOTE : NULL);
}

/* The value of NAME in ENVP, or NULL. */
static const char *getenv_in(char *const envp[], const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; envp && envp[i]; i++)
        if (strncmp(envp[i], name, n) == 0 && envp[i][n] == '=')
            return envp[i] + n + 1;
    return NULL;
}

/* The shape shared by every exec: judge, leave, build the environment on
 * the stack, call REAL.  CALL is the real call with `env` for the envp. */
#define EXEC_WITH(dirfd, path, argv, envp, fail, CALL)                         \
    do {                                                                       \
        int saved_ = errno;                                                    \
        bool restore_ = guard_env_needs_restore(envp);                         \
        int err_ = judge_exec(dirfd, path, argv, restore_);                    \
        if (!err_)                                                             \
            sbx_emit_handover();    /* the ring dies with this image */        \
        guard_leave();                                                         \
        if (err_) {                                                            \
            errno = err_;                                                      \
            return fail;                                                       \
        }                                                                      \
        errno = saved_;                                                        \
        char *const *env = (envp);                                             \
        if (!restore_) {                                                       \
            return CALL;                                                       \
        }                                                                      \
        size_t n_ = guard_env_count(envp) + GENV__COUNT + 2;                   \
        const char *ld_ = getenv_in(envp, "LD_PRELOAD");                       \
        size_t sn_ = (ld_ ? strlen(ld_) : 0) +                                 \
                     (guard_preload_path ? strlen(guard_preload_path) : 0) + 16; \
        if (n_ > 65536 || sn_ > 65536) {                                       \
            errno = E2BIG;                                                     \
            return fail;                                                       \
        }                                                                      \
        char *newenv_[n_];                                                     \
        char str_[sn_];                                                        \
        env = guard_env_restore(envp, newenv_, n_, str_, sn_);                 \
        if (!env)                                                              \
            return fail;                                                       \
        return CALL;                                                           \
    } while (0)

static int pass_execve(const char *path, char *const argv[], char *const envp[])
{
    __typeof__(&execve) f = REAL(execve);
    if (f)
        return f(path, argv, envp);
    return (int)guard_sys(SYS_execve, (long)path, (long)argv, (long)envp, 0, 0, 0);
}

static int guarded_execve(const char *path, char *const argv[], char *const envp[])
{
    if (!guard_enter())
        return pass_execve(path, argv, envp);
    EXEC_WITH(AT_FDCWD, path, argv, envp, -1, pass_execve(path, argv, env));
}

SBX_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    return guarded_execve(path, argv, envp);
}

SBX_EXPORT int execv(const char *path, char *const argv[])
{
    return guarded_execve(path, argv, environ);
}

/* The program execvp and posix_spawnp would run for FILE, into OUT
 * (policy_path_search, with system calls around libc).  0 or -1 with errno
 * ENOENT / EACCES. */
static int search_path(const char *file, char *out, size_t size)
{
    return policy_path_search(file, getenv("PATH"), guard_probe_exec, out, size);
}

SBX_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    if (strchr(file, '/'))
        return guarded_execve(file, argv, envp);
    char prog[GUARD_PATH_MAX];
    if (search_path(file, prog, sizeof prog) < 0)
        return -1;
    guarded_execve(prog, argv, envp);
    if (errno != ENOEXEC)
        return -1;
    /* A script without "#!": execvp runs it with the shell. */
    size_t n = 0;
    while (argv[n])
        n++;
    char *sh_argv[n + 3];       /* n == 0: still room for the NULL */
    sh_argv[0] = (char *)"/bin/sh";
    sh_argv[1] = prog;
    sh_argv[2] = NULL;          /* an empty ARGV has no argv[n] to copy it from */
    for (size_t i = 1; i <= n; i++)
        sh_argv[i + 1] = argv[i];
    return guarded_execve("/bin/sh", sh_argv, envp);
}

SBX_EXPORT int execvp(const char *file, char *const argv[])
{
    return execvpe(file, argv, environ);
}

/* execl's variadic list into a NULL-terminated argv on the stack.  The
 * macro declares `argv`; AP is started after ARG0. */
#define VA_ARGV(arg0, last)                                  \
    size_t argc_ = 1;                                        \
    va_list ap_;                                             \
    va_start(ap_, last);                                     \
    while (va_arg(ap_, char *))                              \
        argc_++;                                             \
    va_end(ap_);                                             \
    char *argv[argc_ + 1];                                   \
    argv[0] = (char *)(arg0);                                \
    va_start(ap_, last);                                     \
    for (size_t i_ = 1; i_ <= argc_; i_++)                   \
        argv[i_] = va_arg(ap_, char *);                      \
    argv[argc_] = NULL;     /* what the loop read last; said for the analyzer */

SBX_EXPORT int execl(const char *path, const char *arg0, ...)
{
    VA_ARGV(arg0, arg0);
    va_end(ap_);
    return guarded_execve(path, argv, environ);
}

SBX_EXPORT int execlp(const char *file, const char *arg0, ...)
{
    VA_ARGV(arg0, arg0);
    va_end(ap_);
    return execvpe(file, argv, environ);
}

SBX_EXPORT int execle(const char *path, const char *arg0, ...)
{
    VA_ARGV(arg0, arg0);
    char *const *envp = va_arg(ap_, char *const *);
    va_end(ap_);
    return guarded_execve(path, argv, envp);
}

SBX_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
    __typeof__(&fexecve) real = REAL(fexecve);
    if (!guard_enter())
        return real(fd, argv, envp);
    char path[GUARD_PATH_MAX];
    if (guard_fd_path(fd, path, sizeof path) < 0 || path[0] != '/') {
        /* Not a file with a name: judged by its /proc name, which no
         * exec rule is expected to allow. */
        struct sbuf s;
        sbuf_init(&s, path, sizeof path);
        sbuf_add(&s, "/proc/self/fd/");
        sbuf_add_uint(&s, (unsigned long)fd);
    }
    EXEC_WITH(AT_FDCWD, path, argv, envp, -1, real(fd, argv, env));
}

SBX_EXPORT int execveat(int dirfd, const char *path, char *const argv[],
                        char *const envp[], int flags)
{
    __typeof__(&execveat) real = REAL(execveat);
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    if (!guard_enter())
        return real(dirfd, path, argv, envp, flags);
    char buf[GUARD_PATH_MAX];
    const char *p = path;
    int dfd = dirfd;
    if ((flags & AT_EMPTY_PATH) && !path[0]) {
        if (guard_fd_path(dirfd, buf, sizeof buf) < 0 || buf[0] != '/') {
            struct sbuf s;
            sbuf_init(&s, buf, sizeof buf);
            sbuf_add(&s, "/proc/self/fd/");
            sbuf_add_uint(&s, (unsigned long)dirfd);
        }
        p = buf;
        dfd = AT_FDCWD;
    }
    EXEC_WITH(dfd, p, argv, envp, -1, real(dirfd, path, argv, env, flags));
}

/* posix_spawn returns an error number instead of setting errno. */
static int spawn_judged(pid_t *pid, const char *prog, const posix_spawn_file_actions_t *fa,
                        const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    __typeof__(&posix_spawn) real = REAL(posix_spawn);
    if (!real)
        return ENOSYS;
    if (!guard_enter())
        return real(pid, prog, fa, attr, argv, envp);
    int saved = errno;
    bool restore = guard_env_needs_restore(envp);
    int err = judge_exec(AT_FDCWD, prog, argv, restore);
    guard_leave();
    errno = saved;
    if (err)
        return err;
    if (!restore)
        return real(pid, prog, fa, attr, argv, envp);
    size_t n = guard_env_count(envp) + GENV__COUNT + 2;
    const char *ld = getenv_in(envp, "LD_PRELOAD");
    size_t sn = (ld ? strlen(ld) : 0) + (guard_preload_path ? strlen(guard_preload_path) : 0) + 16;
    if (n > 65536 || sn > 65536)
        return E2BIG;
    char *newenv[n];
    char str[sn];
    if (!guard_env_restore(envp, newenv, n, str, sn))
        return errno;
    return real(pid, prog, fa, attr, argv, newenv);
}

SBX_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                           const posix_spawnattr_t *attr, char *const argv[],
                           char *const envp[])
{
    return spawn_judged(pid, path, fa, attr, argv, envp);
}

SBX_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                            const posix_spawnattr_t *attr, char *const argv[],
                            char *const envp[])
{
    if (strchr(file, '/'))
        return spawn_judged(pid, file, fa, attr, argv, envp);
    char prog[GUARD_PATH_MAX];
    int saved = errno;
    if (search_path(file, prog, sizeof prog) < 0) {
        int err = errno;
        errno = saved;
        return err;
    }
    return spawn_judged(pid, prog, fa, attr, argv, envp);
}

/* A file action that opens PATH in the child opens it from inside libc:
 * judge it when it is added. */
SBX_EXPORT int posix_spawn_file_actions_addopen(posix_spawn_file_actions_t *fa, int fd,
                                                const char *path, int oflag, mode_t mode)
{
    __typeof__(&posix_spawn_file_actions_addopen) real =
        REAL(posix_spawn_file_actions_addopen);
    if (guard_enter()) {
        int saved = errno;
        bool write = (oflag & O_ACCMODE) != O_RDONLY || (oflag & (O_CREAT | O_TRUNC));
        int err = guard_path_op(write ? SBX_OP_OPEN_WRITE : SBX_OP_OPEN_READ, AT_FDCWD, path,
                                (oflag & O_NOFOLLOW) != 0, (oflag & O_ACCMODE) == O_RDWR, NULL);
        guard_leave();
        errno = saved;
        if (err)
            return err;
    }
    return real(fa, fd, path, oflag, mode);
}

/* system(CMD) and popen(CMD) run CMD with /bin/sh -c from inside libc.
 * Entered; leaves.  0 or the errno to fail with. */
static int judge_shell(const char *cmd)
{
    char *argv[] = {(char *)"sh", (char *)"-c", (char *)cmd, NULL};
    bool restore = guard_env_needs_restore(environ);
    int err = judge_exec(AT_FDCWD, "/bin/sh", argv, restore);
    if (!err && restore)
        guard_environ_restore();
    guard_leave();
    return err;
}

SBX_EXPORT int system(const char *cmd)
{
    __typeof__(&system) real = REAL(system);
    if (cmd && guard_enter()) {
        int saved = errno;
        int err = judge_shell(cmd);
        if (err) {
            errno = err;
            return -1;
        }
        errno = saved;
    }
    return real(cmd);
}

SBX_EXPORT FILE *popen(const char *cmd, const char *type)
{
    __typeof__(&popen) real = REAL(popen);
    if (cmd && guard_enter()) {
        int saved = errno;
        int err = judge_shell(cmd);
        if (err) {
            errno = err;
            return NULL;
        }
        errno = saved;
    }
    return real(cmd, type);
}

/* vfork.  A vfork child shares the parent's memory until it execs, so
 * everything the guard does in it must already be in place: the policy
 * loaded and its command patterns decoded (no dlopen, no first-time
 * allocation in the child), the real exec functions looked up, and the
 * parent's event ring registered, which the child then writes into (its
 * events carry the parent's pid until it execs, as with posix_spawn's
 * helper; it never registers a ring of its own: emit.c).  guard_vfork_prepare
 * does that in the parent; if it cannot, vfork becomes fork(), which is
 * what vfork() is allowed to be.
 *
 * A function cannot return twice into one stack frame, so the interposer
 * is a few instructions of assembly that call guard_vfork_prepare and then
 * jump to the real vfork, which returns straight to our caller, in both
 * processes.  Keeping vfork matters: a shell, make and the compiler driver
 * start every command with it, and fork copies the page tables and makes
 * the parent copy every page it writes until the child has exec'd. */
void *guard_real_vfork;

int guard_vfork_prepare(void);
int guard_vfork_prepare(void)
{
    /* The child runs on our memory with a directory of its own: nothing
     * it remembers of its directory may be taken for ours (path.c). */
    guard_cwd_memo_off();
    if (!guard_real_vfork)
        guard_real_vfork = guard_real(&real_slot_vfork, "vfork");
    if (!guard_real_vfork)
        return -1;
    if (!guard_enter())
        return guard_inside() ? -1 : 0;     /* not guarded: vfork as it is */
    int rc = 0;
    if (guard_policy)
        (void)policy_prepare(guard_policy);
    if (!REAL(execve) || !REAL(fexecve) || !REAL(execveat) || sbx_emit_prepare_vfork() < 0)
        rc = -1;
    guard_leave();
    return rc;
}

#if defined(__x86_64__)
__asm__(
    "    .text\n"
    "    .p2align 4\n"
    "    .globl vfork\n"
    "    .type vfork, @function\n"
    "vfork:\n"
    "    .cfi_startproc\n"
    "    subq $8, %rsp\n"
    "    .cfi_adjust_cfa_offset 8\n"
    "    call guard_vfork_prepare\n"
    "    addq $8, %rsp\n"
    "    .cfi_adjust_cfa_offset -8\n"
    "    testl %eax, %eax\n"
    "    jnz 1f\n"
    "    jmp *guard_real_vfork(%rip)\n"
    "1:  jmp fork@PLT\n"
    "    .cfi_endproc\n"
    "    .size vfork, .-vfork\n"
    "    .globl __vfork\n"
    "    .set __vfork, vfork\n");
#else
SBX_EXPORT pid_t vfork(void)
{
    return fork();
}

pid_t __vfork(void);
SBX_EXPORT pid_t __vfork(void)
{
    return fork();
}
#endif
