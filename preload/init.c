/*
 * init.c — once per process: read what sbx-guard handed down, load the
 * policy, start the emitter.  And the per-thread "inside the guard" flag.
 *
 * Two phases, because loading the policy (YAML, globs, PCRE2 JIT) costs
 * about a millisecond and many processes of an agent (true, echo, test,
 * the shell's helpers) never make a guarded call:
 *   1. the constructor copies the SBX_* environment (before main can
 *      change it) and configures the emitter (no daemon contact yet);
 *   2. the first guarded call loads the policy and starts the emitter.
 * State machine (one atomic int, no lock, so nothing is held across fork):
 *   UNINIT -> CAPTURE -> PASS | CAPTURED -> LOAD -> ACTIVE
 * PASS: no SBX_POLICY_FILE, this process is not a guarded agent; every call
 * goes straight to libc.  ACTIVE: guarded; if the policy failed to load,
 * guard_policy is NULL and every guarded call is denied (fail closed).
 * A thread that arrives while another one is in CAPTURE or LOAD waits; a
 * child forked meanwhile (the working thread is not in the child) starts
 * that phase over.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bsd/string.h>

#include "guard.h"
#include "paths.h"

enum { ST_UNINIT, ST_CAPTURE, ST_PASS, ST_CAPTURED, ST_LOAD, ST_ACTIVE };

static _Atomic int init_state = ST_UNINIT;
static _Atomic int owner_pid;     /* the process running CAPTURE or LOAD */
static _Atomic int owner_tid;     /* and its thread */

/* initial-exec: reading the flag must not call __tls_get_addr (which may
 * allocate) on the hot path.  The library is loaded at start-up through
 * LD_PRELOAD, so static TLS is always available. */
static __thread int depth __attribute__((tls_model("initial-exec")));

struct guard_env guard_envs[GENV__COUNT] = {
    [GENV_POLICY] = {SBX_ENV_POLICY, NULL, NULL},
    [GENV_ORIGIN] = {SBX_ENV_POLICY_NAME, NULL, NULL},
    [GENV_WORKSPACE] = {SBX_ENV_WORKSPACE, NULL, NULL},
    [GENV_RUNTIME] = {SBX_ENV_RUNTIME_DIR, NULL, NULL},
    [GENV_AUDIT_DB] = {SBX_ENV_AUDIT_DB, NULL, NULL},
    [GENV_AGENT] = {SBX_ENV_AGENT, NULL, NULL},
    [GENV_AGENT_ID] = {SBX_ENV_AGENT_ID, NULL, NULL},
    [GENV_TOKEN] = {SBX_ENV_AGENT_TOKEN, NULL, NULL},
    [GENV_NOTIFY] = {SBX_ENV_NOTIFY, NULL, NULL},
    [GENV_PRELOAD] = {SBX_ENV_PRELOAD, NULL, NULL},
    [GENV_HOME] = {SBX_ENV_HOME, NULL, NULL},
    [GENV_RING_ASYNC] = {SBX_ENV_RING_ASYNC, NULL, NULL},
    [GENV_IMAGE] = {SBX_ENV_POLICY_IMAGE, NULL, NULL},
    [GENV_RING_FILE] = {SBX_ENV_RING_FILE, NULL, NULL},
};
const char *guard_preload_path;
const char *guard_ld_preload_entry;
const struct policy *guard_policy;
uint64_t guard_max_write;
bool guard_notify;

/* sbx's runtime directory and store as sbx-guard named them (else where
 * they are by default), and the options the policy is loaded with
 * (policy_agent_options: the same as sbx-guard's, which compiled the
 * image).  The directories are found at capture, while the environment
 * is sbx-guard's; the options are made of them and of captured values,
 * when the policy has to be loaded from its copy (build_options). */
static const char *sbx_runtime = "", *sbx_audit_db = "";
static struct policy_agent_options agent_opt;

bool guard_inside(void)
{
    return depth > 0;
}

void guard_depth_add(int d)
{
    depth += d;
}

void guard_leave(void)
{
    depth--;
}

static char *dup_entry(const char *name, const char *value)
{
    size_t n = strlen(name) + 1 + strlen(value) + 1;
    char *e = malloc(n);
    if (!e)
        return NULL;
    strlcpy(e, name, n);
    strlcat(e, "=", n);
    strlcat(e, value, n);
    return e;
}

static void capture_env(void)
{
    for (int i = 0; i < GENV__COUNT; i++) {
        const char *v = getenv(guard_envs[i].name);
        if (!v)
            continue;
        guard_envs[i].value = strdup(v);
        guard_envs[i].entry = dup_entry(guard_envs[i].name, v);
        if (!guard_envs[i].value || !guard_envs[i].entry) {
            free(guard_envs[i].value);
            free(guard_envs[i].entry);
            guard_envs[i].value = guard_envs[i].entry = NULL;
        }
    }
}

/* Our own file name: what sbx-guard said, else what the loader loaded. */
static void find_self(void)
{
    const char *p = guard_envs[GENV_PRELOAD].value;
    Dl_info info;
    if (!p && dladdr((void *)find_self, &info) && info.dli_fname && info.dli_fname[0] == '/')
        p = strdup(info.dli_fname);
    guard_preload_path = p;
    if (p)
        guard_ld_preload_entry = dup_entry("LD_PRELOAD", p);
}

/* What variable WHICH said (the captured copy itself), else FALLBACK's
 * answer in BUF, else "".  The buffers are only written when sbx-guard
 * did not name the directory: every page a process writes costs it a
 * fault, and a virtual machine makes faults dear (tens of microseconds). */
static const char *env_or(int which, int (*fallback)(char *, size_t), char *buf, size_t bufsz)
{
    if (guard_envs[which].value)
        return guard_envs[which].value;
    if (fallback(buf, bufsz) < 0)
        return "";
    return buf;
}

static void find_dirs(void)
{
    static char runtime_buf[GUARD_PATH_MAX], audit_db_buf[GUARD_PATH_MAX];
    sbx_runtime = env_or(GENV_RUNTIME, sbx_path_runtime_dir, runtime_buf, sizeof runtime_buf);
    sbx_audit_db = env_or(GENV_AUDIT_DB, sbx_path_audit_db, audit_db_buf, sizeof audit_db_buf);
}

/* At load, not at capture: the options are only for loading the policy
 * (and clearing them writes a page and more, in every process, also in
 * the many that never load it).  What they are made of was captured. */
static void build_options(void)
{
    struct policy_agent a = {
        .workspace = guard_envs[GENV_WORKSPACE].value,
        .display_path = guard_envs[GENV_ORIGIN].value,
        /* The home sbx-guard checked the policy with, not this process's
         * $HOME, which the agent can set to anything for a child. */
        .home = guard_envs[GENV_HOME].value,
        .runtime_dir = sbx_runtime,
        .audit_db = sbx_audit_db,
        .policy_copy = guard_envs[GENV_POLICY].value,
    };
    policy_agent_options(&a, &agent_opt);
}

static void load_policy(void)
{
    /* The diagnostics are large; this runs once per process. */
    static struct policy_diag diag;
    /* What sbx-guard compiled for this agent, if it said so (policy.h:
     * policy_image_load); else the copy itself.  Both give the same
     * policy: the image was loaded from the copy with these options. */
    struct policy *p = NULL;
    const char *copy = guard_envs[GENV_POLICY].value;
    if (guard_envs[GENV_IMAGE].value)
        p = policy_image_load(guard_envs[GENV_IMAGE].value, NULL, 0);
    if (!p) {
        build_options();
        p = policy_load(copy, &agent_opt.opt, &diag);
    }
    if (!p) {
        char msg[POLICY_DIAG_LEN + 160];
        struct sbuf s;
        sbuf_init(&s, msg, sizeof msg);
        sbuf_add(&s, "sbx: the policy could not be loaded in this process (");
        sbuf_add(&s, diag.count ? diag.msg[0] : "unknown error");
        sbuf_add(&s, "); every guarded call is denied\n");
        static atomic_bool once;
        guard_warn_once(&once, msg);
        /* And in the audit trail, best effort (the channel may be what is
         * missing too). */
        (void)sbx_emit(&(struct sbx_event_desc){
            .op = SBX_OP_POLICY_ERROR, .decision = SBX_DENY, .layer = SBX_LAYER_GUARD,
            .target = guard_envs[GENV_ORIGIN].value ? guard_envs[GENV_ORIGIN].value
                                                    : guard_envs[GENV_POLICY].value,
            .reason = diag.count ? diag.msg[0] : "unknown error"});
        return;
    }
    const struct policy_info *info = policy_info(p);
    guard_max_write = info->max_write_bytes;
    /* Resolving a path walks it with one lstat per component; remembered
     * directories make that one lstat for the part already walked
     * (policy/path.h says what that check cannot see). */
    policy_path_cache_enable(true);
    guard_policy = p;
}

static bool enter_slow(int want_load);

static int self_tid(void)
{
    return (int)guard_raw(SYS_gettid, 0, 0, 0, 0, 0, 0);
}

/* fork() loads the policy first, in the parent, if nothing has yet.  A
 * child would otherwise load it again, and loading allocates and compiles
 * (PCRE2 JIT takes a lock): in the child of a multithreaded program, whose
 * other threads are gone and may have held those locks (or the allocator's,
 * if it is not glibc's), that can hang for good.  It is also cheaper: a
 * shell that only forks and execs loads the policy once, not once per
 * command.  If another thread is loading, fork waits for it.  A loaded
 * policy finishes its preparation (policy_prepare) here too.
 * This runs before glibc takes its malloc and stdio locks (only its fork
 * handler lock is held), and loading takes no lock the forking thread
 * could hold and registers no fork handler (that was phase 1).  A fork from
 * the loading thread itself (a signal handler) does not wait for itself. */
static void fork_prepare(void)
{
    for (;;) {
        int s = atomic_load_explicit(&init_state, memory_order_acquire);
        if (s == ST_CAPTURED && depth == 0) {
            if (enter_slow(1))
                guard_leave();
            continue;
        }
        if (s == ST_ACTIVE && depth == 0 && guard_policy) {
            /* A policy from the image decodes its command patterns (and
             * loads libpcre2) at first use: here, not in a child of a
             * threaded program, where dlopen could find the loader's lock
             * held by a thread that is gone. */
            depth = 1;
            (void)policy_prepare(guard_policy);
            depth = 0;
            return;
        }
        if ((s != ST_LOAD && s != ST_CAPTURE) || atomic_load(&owner_tid) == self_tid())
            return;
        struct timespec ts = {0, 200000};
        guard_raw(SYS_nanosleep, (long)&ts, 0, 0, 0, 0, 0);
    }
}

bool guard_dns_stub;

/* Whether this process lives behind sbx's DNS stub (native, docs/network.md):
 * the resolv.conf sbx binds read-only over the agent's says so on its first
 * line.  Read with raw system calls: our own open is not armed yet. */
static void find_dns_stub(void)
{
    static const char mark[] = "# sbx: the agent's resolver is sbx-guard's DNS stub";
    char buf[sizeof mark];
    long fd = syscall(SYS_openat, AT_FDCWD, "/etc/resolv.conf", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    long n = syscall(SYS_read, fd, buf, sizeof mark - 1);
    syscall(SYS_close, fd);
    guard_dns_stub = n == (long)(sizeof mark - 1) && memcmp(buf, mark, sizeof mark - 1) == 0;
}

/* Phase 1: what sbx-guard handed down, copied before the program runs. */
static int capture(void)
{
    const char *pf = getenv(SBX_ENV_POLICY);
    if (!pf || !*pf)
        return ST_PASS;
    capture_env();
    find_self();
    find_dirs();
    guard_notify = guard_envs[GENV_NOTIFY].value &&
                   strcmp(guard_envs[GENV_NOTIFY].value, "1") == 0;
    find_dns_stub();
    /* Cheap (strings copied, one page mapped), and it registers a fork
     * handler: done here, while the process has one thread, not in
     * phase 2 (see fork_prepare). */
    /* A failure here shows at the first event: sbx_emit then returns -1
     * and the call fails closed with a message. */
    (void)sbx_emit_init(sbx_runtime[0] ? sbx_runtime : NULL,
                        guard_envs[GENV_AGENT_ID].value, guard_envs[GENV_TOKEN].value);
    if (guard_envs[GENV_RING_FILE].value)
        (void)sbx_emit_use_file(guard_envs[GENV_RING_FILE].value);
    sbx_emit_set_async(guard_envs[GENV_RING_ASYNC].value &&
                       strcmp(guard_envs[GENV_RING_ASYNC].value, "1") == 0);
    pthread_atfork(fork_prepare, NULL, NULL);
    return ST_CAPTURED;
}

/* Exported for sbx-serve's fork server (tools/serve-runner.py): a child
 * forked from the long-lived, pristine interpreter reports as the agent of
 * its own request from its first event on, and so does every program it
 * runs (the environment entries are replaced too).  Called right after
 * fork, before any guarded call; not on a hot path, so it may allocate.
 * 0, or -1 with errno (sbx_emit_rebind's). */
SBX_EXPORT int sbx_guard_rebind(const char *agent, const char *agent_id, const char *token)
{
    static const int which[] = { GENV_AGENT, GENV_AGENT_ID, GENV_TOKEN };
    const char *vals[] = { agent, agent_id, token };

    if (!agent || !*agent) {
        errno = EINVAL;
        return -1;
    }
    if (sbx_emit_rebind(agent_id, token) < 0)
        return -1;
    for (size_t i = 0; i < sizeof which / sizeof which[0]; i++) {
        struct guard_env *g = &guard_envs[which[i]];
        char *v = strdup(vals[i]), *e = dup_entry(g->name, vals[i]);
        if (!v || !e) {
            free(v);
            free(e);
            errno = ENOMEM;
            return -1;
        }
        /* The old strings stay: another thread of a forked child cannot
         * exist, but a pointer taken before the fork may still be read. */
        g->value = v;
        g->entry = e;
    }
    return 0;
}

/* Phase 2: at the first guarded call. */
static int load(void)
{
    if (guard_envs[GENV_POLICY].value)
        load_policy();
    return ST_ACTIVE;
}

static int self_pid(void)
{
    return (int)guard_raw(SYS_getpid, 0, 0, 0, 0, 0, 0);
}

/* Runs the phase that starts at state FROM (UNINIT or CAPTURED), or waits
 * for the thread that runs it.  Returns when the state has moved on. */
static void run_phase(int s)
{
    int busy = s == ST_UNINIT ? ST_CAPTURE : ST_LOAD;
    int expect = s;
    if (atomic_compare_exchange_strong(&init_state, &expect, busy)) {
        atomic_store(&owner_pid, self_pid());
        atomic_store(&owner_tid, self_tid());
        int saved = errno;
        depth = 1;
        int next = s == ST_UNINIT ? capture() : load();
        depth = 0;
        errno = saved;
        atomic_store_explicit(&init_state, next, memory_order_release);
    }
}

static bool enter_slow(int want_load)
{
    unsigned spins = 0;
    for (;;) {
        int s = atomic_load_explicit(&init_state, memory_order_acquire);
        switch (s) {
        case ST_PASS:
            return false;
        case ST_ACTIVE:
            depth = 1;
            return true;
        case ST_UNINIT:
            run_phase(s);
            continue;
        case ST_CAPTURED:
            if (!want_load)
                return false;
            run_phase(s);
            continue;
        default:
            break;
        }
        /* CAPTURE or LOAD by another thread.  If that thread is our
         * parent's (we were forked meanwhile), nobody will finish: start
         * the phase over. */
        if (atomic_load(&owner_pid) != self_pid()) {
            int expect = s;
            atomic_compare_exchange_strong(&init_state, &expect,
                                           s == ST_CAPTURE ? ST_UNINIT : ST_CAPTURED);
            continue;
        }
        if (++spins < 100) {
            guard_raw(SYS_sched_yield, 0, 0, 0, 0, 0, 0);
        } else {
            struct timespec ts = {0, 1000000};
            guard_raw(SYS_nanosleep, (long)&ts, 0, 0, 0, 0, 0);
        }
    }
}

bool guard_enter(void)
{
    if (depth > 0)
        return false;
    int s = atomic_load_explicit(&init_state, memory_order_acquire);
    if (s == ST_ACTIVE) {
        depth = 1;
        return true;
    }
    if (s == ST_PASS)
        return false;
    return enter_slow(1);
}

/* At exit: events a dead daemon left in our ring go to its successor
 * (sbx_emit_handover; nothing to do, and no system call, in the usual
 * case).  Inside the guard: the hand-over's own socket is not a guarded
 * call. */
__attribute__((destructor)) static void guard_dtor(void)
{
    if (!sbx_emit_untaken() || !guard_enter())
        return;
    sbx_emit_handover();
    guard_leave();
}

/* Phase 1 only: the policy waits for the first guarded call. */
__attribute__((constructor)) static void guard_ctor(void)
{
    /* Another library's constructor may have made a guarded call before
     * ours ran (libselinux reads /proc/filesystems): then we are ACTIVE
     * already and entered, and must leave again. */
    if (depth == 0 && enter_slow(0))
        guard_leave();
}
