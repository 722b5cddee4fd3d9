/*
 * guard.h — what the files of libsbx-preload.so share (internal; nothing
 * here is exported from the library).
 *
 * The preload is loaded into every process of a guarded agent.  Each
 * interposer (file.c, fsops.c, exec.c, net.c, syscall.c) follows one shape:
 *
 *     if (!guard_enter())                  not guarded, or re-entered:
 *         return REAL(open)(...);          straight to libc
 *     ... normalize, decide (policy), record (sbx_emit) ...
 *     guard_leave();
 *     then the real call, or -1 with the contract's errno
 *
 * guard_enter() runs the one-time initialization (init.c) on first use and
 * marks this thread as "inside the guard", so that every call our own code
 * makes (libyaml reading the policy, the emitter connecting to the daemon,
 * dlsym opening something) goes straight to libc.  The real call is made
 * after guard_leave(): a vfork child that execs must not leave the flag set
 * in the parent's memory.
 *
 * What is interposed: the open family (open, openat, their 64 and
 * fortified _2 forms, creat, fopen, freopen, opendir, mkstemp and friends),
 * every call that changes the file system by path (fsops.c), the exec
 * family with posix_spawn, system and popen (exec.c; vfork becomes fork),
 * connect, bind, sendto/sendmsg/sendmmsg with an address and name
 * resolution (net.c), and syscall() with the numbers of those (syscall.c).
 * What is not, and is the kernel layer's to stop: raw system calls, static
 * binaries, opens made inside libc or ld.so (dlopen, scandir, nftw, fts,
 * iconv modules, NSS), io_uring, and the race between a decision and the
 * call (a symlink swapped in between).
 *
 * Errors: internal functions return 0 or -1 with errno set, unless said.
 * Memory: nothing here allocates; every buffer is the caller's (on its
 * stack) or static storage filled once at initialization.
 */
#ifndef SBX_PRELOAD_GUARD_H
#define SBX_PRELOAD_GUARD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "emit.h"
#include "event.h"
#include "ops.h"
#include "policy.h"

#define SBX_EXPORT __attribute__((visibility("default")))

/* Our paths are bounded by the kernel's: a longer one fails ENAMETOOLONG in
 * the kernel too. */
#define GUARD_PATH_MAX 4096

/* Hides P's origin from the compiler: glibc declares some path arguments
 * nonnull that the kernel accepts as NULL (utimensat), and a NULL check on
 * them would otherwise be optimized away. */
static inline const char *guard_opaque(const char *p)
{
    __asm__("" : "+r"(p));
    return p;
}

/* ---- real symbols (resolve.c) -------------------------------------------- */

/* Resolves NAME with dlsym(RTLD_NEXT) once and caches it in *SLOT.  Returns
 * NULL if libc has no such symbol (callers then fail with ENOSYS), or when
 * called from inside dlsym (callers with a system call behind them use it
 * raw then). */
void *guard_real(_Atomic(void *) *slot, const char *name);

/* REAL(open) is libc's open, typed like ours. */
#define REAL(name) ((__typeof__(&(name)))guard_real(&real_slot_##name, #name))
#define REAL_SLOT(name) static _Atomic(void *) real_slot_##name

/* A system call without libc: returns the kernel's result (-errno on error).
 * Our own `syscall` is interposed, so the library never calls libc's. */
long guard_raw(long nr, long a, long b, long c, long d, long e, long f);
/* The same with libc's convention: -1 and errno. */
long guard_sys(long nr, long a, long b, long c, long d, long e, long f);

/* ---- state (init.c) ------------------------------------------------------ */

/* True when this call is to be guarded: initializes on first use, false if
 * the process is not a guarded agent or this thread is already inside the
 * guard.  When true, the caller must call guard_leave() exactly once. */
bool guard_enter(void);
void guard_leave(void);

/* True while this thread is inside the guard (our own calls). */
bool guard_inside(void);
/* Enters (+1) or leaves (-1) the guard without the checks of guard_enter. */
void guard_depth_add(int d);

/* What init.c captured from sbx-guard's environment. */
struct guard_env {
    const char *name;           /* "SBX_POLICY_FILE" */
    char *value;                /* copied at init; NULL if it was not set */
    char *entry;                /* "NAME=value", for restoring an envp */
};
enum {
    GENV_POLICY, GENV_ORIGIN, GENV_WORKSPACE, GENV_RUNTIME, GENV_AUDIT_DB,
    GENV_AGENT, GENV_AGENT_ID, GENV_TOKEN, GENV_NOTIFY, GENV_PRELOAD, GENV_HOME, GENV_RING_ASYNC,
    GENV_IMAGE, GENV_RING_FILE, GENV__COUNT
};
extern struct guard_env guard_envs[GENV__COUNT];

/* Exported (init.c): a child forked from sbx-serve's fork server reports
 * as the agent of its own request (emit.h: sbx_emit_rebind). */
int sbx_guard_rebind(const char *agent, const char *agent_id, const char *token);
extern const char *guard_preload_path;  /* absolute path of this library */
extern const char *guard_ld_preload_entry; /* "LD_PRELOAD=<ours>" */

/* The compiled policy, or NULL when it failed to load (every guarded call is
 * then denied). */
extern const struct policy *guard_policy;
extern uint64_t guard_max_write;      /* 0: no limit */
extern bool guard_notify;
/* This process's resolver is sbx's DNS stub (127.0.0.53:53 in its own net
 * namespace): its queries are judged there, by name, not here. */
extern bool guard_dns_stub;

/* ---- decisions and records (decide.c) ------------------------------------ */

/* A verdict with what made it, ready to be recorded. */
struct guard_verdict {
    struct policy_verdict v;
    enum sbx_op op;             /* the op to record (may be open-read for an
                                 * O_RDWR open denied by files.read) */
    const char *target;         /* what the verdict is about */
};

/* When the policy failed to load, fills *GV with a denial and returns true
 * (every decider calls this first). */
bool guard_broken(enum sbx_op op, const char *target, struct guard_verdict *gv);

/* Decides OP on the absolute, normalized PATH into *GV.  For OP open-write
 * with ALSO_READ, files.read is asked too (O_RDWR); the first denial wins. */
enum sbx_decision guard_decide_path(enum sbx_op op, const char *path,
                                    bool also_read, struct guard_verdict *gv);

/* Records the verdict and says what the call does: 0 to go on, or the errno
 * the call must fail with (EACCES on denial or when the audit channel is
 * gone, EPERM when the agent was soft-killed).  TARGET2, FLAGS and NOTE
 * (appended to the reason) are optional. */
int guard_record(const struct guard_verdict *gv, const char *target2,
                 uint32_t flags, const char *note);

/* The errno rule (benign.c): for a denied OP (open FLAGS) on the absolute
 * lexical path LEX, the kernel's own answer when it reveals nothing the
 * policy hides: EEXIST for a mkdir of a visible path that exists, ENOENT
 * for an open that does not create a missing path in a readable directory.
 * The caller then fails with it and records nothing.  0: the denial stands. */
int guard_benign_errno(enum sbx_op op, int flags, const char *lex);

/* Records a denial that no policy rule made (size limits): REASON says why. */
int guard_record_plain(enum sbx_op op, enum sbx_decision d, const char *target,
                       const char *target2, int err, const char *reason);

/* Records the refusal of PATH (as the program gave it) for OP because it,
 * or it made absolute, is longer than GUARD_PATH_MAX: a deny row whose
 * target the ring cuts with its marker.  Returns ENAMETOOLONG (or what
 * guard_record_plain says when the channel is down). */
int guard_record_toolong(enum sbx_op op, const char *path);

/* ---- paths (path.c) ------------------------------------------------------ */

/* Folding and resolving are policy/path.h's (policy_path_lexical,
 * policy_path_fold_onto, policy_path_resolve): one meaning of a path for
 * the guard, the supervisor and the tools. */

/* The directory DIRFD names (AT_FDCWD: the current directory) into OUT, by
 * getcwd or readlink(/proc/self/fd/N).  0 or -1/errno. */
int guard_dirfd_path(int dirfd, char *out, size_t outsz);
/* The current directory may have changed (chdir, rename, ...): forget what
 * every thread remembers of it (path.c). */
void guard_cwd_changed(void);
/* This process may change directory where we cannot see it: never remember
 * the current directory again. */
void guard_cwd_memo_off(void);

/* policy_path_lexical of PATH against DIRFD's directory (which is looked up only when
 * PATH is relative). */
int guard_lexical(int dirfd, const char *path, char *out, size_t outsz);

/* The lexical path with symlinks resolved (policy_path_resolve against
 * DIRFD's directory); the last component is not followed if NOFOLLOW. */
int guard_resolve(int dirfd, const char *path, bool nofollow, char *out, size_t outsz);

/* The PATH search's probe (policy_path_search) made of raw system calls:
 * newfstatat and faccessat, around libc.  0, EACCES or ENOENT. */
int guard_probe_exec(const char *candidate);

/* The path an open file descriptor names (readlink /proc/self/fd/N). */
int guard_fd_path(int fd, char *out, size_t outsz);

/* One path judged: its lexical and resolved forms and the verdict (whose
 * target points into this struct). */
struct guard_judged {
    char lex[GUARD_PATH_MAX];
    char res[GUARD_PATH_MAX];
    char note[512];             /* "through a symlink from ..." */
    struct guard_verdict gv;
};

/* False when GV's denial only says that no allow rule matched: on a lexical
 * path that is not final (the resolved path may match). */
bool guard_verdict_final(const struct guard_verdict *gv);

/* Decides OP on (DIRFD, PATH): an explicit deny of the lexical path is
 * final; otherwise the resolved path decides.  Returns 0 with *J filled, or an
 * errno when the path cannot be made absolute (the call fails with it). */
int guard_judge_path(enum sbx_op op, int dirfd, const char *path, bool nofollow,
                     bool also_read, struct guard_judged *j);

/* Judges a path operation the careful way: lexical path, then the resolved
 * one (symlinks), deny if either is denied, then records it.  Returns 0 to go
 * on or the errno to fail with.  TARGET2 is recorded as is. */
int guard_path_op(enum sbx_op op, int dirfd, const char *path, bool nofollow,
                  bool also_read, const char *target2);

/* ---- small string building (decide.c) ------------------------------------ */

struct sbuf {
    char *buf;
    size_t size, len;
    bool cut;                   /* something did not fit */
};
void sbuf_init(struct sbuf *s, char *buf, size_t size);
void sbuf_add(struct sbuf *s, const char *str);
void sbuf_addn(struct sbuf *s, const char *str, size_t n);
void sbuf_add_uint(struct sbuf *s, unsigned long v);

/* ---- notices (notify.c) -------------------------------------------------- */

/* With SBX_NOTIFY=1, one line on stderr for a denial. */
void guard_notify_denial(enum sbx_op op, const char *target, bool audit,
                         const struct policy_rule *rule, const char *reason);

/* One line on stderr, once per process per KEY (a static flag). */
void guard_warn_once(atomic_bool *key, const char *msg);

/* ---- exec helpers (env.c) ------------------------------------------------ */

/* True if ENVP lacks our LD_PRELOAD entry or one of the SBX_* variables
 * sbx-guard handed down (or has them changed). */
bool guard_env_needs_restore(char *const envp[]);

/* Builds in OUT (NOUT pointers) an envp that is ENVP with our variables put
 * back; STR (STRSZ bytes) holds a merged LD_PRELOAD value.  Returns OUT, or
 * NULL/E2BIG if it does not fit. */
char **guard_env_restore(char *const envp[], char **out, size_t nout,
                         char *str, size_t strsz);

/* Number of entries of ENVP. */
size_t guard_env_count(char *const envp[]);

/* Puts our variables back into this process's environ (setenv) before
 * system()/popen(), which spawn a shell with environ.  Returns true if
 * something was restored. */
bool guard_environ_restore(void);

/* ---- network (dns.c) ----------------------------------------------------- */

/* Remembers that ADDR (an AF_INET or AF_INET6 sockaddr) was resolved from
 * NAME.  Lock-free; never blocks; may forget old entries. */
void guard_dns_remember(const struct sockaddr *sa, const char *name);

/* The name ADDR was resolved from, copied into OUT; false if unknown. */
bool guard_dns_lookup(const struct sockaddr *sa, char *out, size_t outsz);

#endif
