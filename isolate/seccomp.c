/*
 * seccomp.c — the syscall filter every agent process inherits.
 *
 * The filter is compiled once in sbx-guard with libseccomp and exported as
 * classic BPF, so that the sandbox's processes install it with one system
 * call and no allocation (they run between fork and exec), and so that the
 * bubblewrap backend can hand bwrap the very same program (--seccomp FD).
 *
 * Policy of the filter: allow by default (the agent is an ordinary program:
 * compilers, interpreters, git), and refuse with EPERM the calls an agent
 * never needs and that would let it leave or weaken the sandbox.  Calls of
 * another architecture (the 32-bit int 0x80 ABI) kill the process: without
 * that, every rule here could be bypassed by using the i386 numbers.
 */
#include "iso_int.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif

struct denied_call {
    const char *name;
    long nr;
    const char *why;
};

/* Numbers from <sys/syscall.h>, so that a libseccomp older than the kernel
 * still filters the newer calls (it accepts native numbers it cannot name). */
static const struct denied_call denied[] = {
    { "ptrace", SYS_ptrace, "inspect or control another process" },
    { "process_vm_readv", SYS_process_vm_readv, "read another process's memory" },
    { "process_vm_writev", SYS_process_vm_writev, "write another process's memory" },
    { "mount", SYS_mount, "change the mount table" },
    { "umount2", SYS_umount2, "uncover what the sandbox hides" },
    { "pivot_root", SYS_pivot_root, "change the root" },
    { "chroot", SYS_chroot, "change the root" },
    { "move_mount", SYS_move_mount, "change the mount table" },
    { "open_tree", SYS_open_tree, "clone a mount" },
    { "fsopen", SYS_fsopen, "create a file system" },
    { "fsconfig", SYS_fsconfig, "create a file system" },
    { "fsmount", SYS_fsmount, "create a file system" },
    { "fspick", SYS_fspick, "reconfigure a file system" },
    { "mount_setattr", SYS_mount_setattr, "make a mount writable" },
    { "unshare", SYS_unshare, "new namespaces (a fresh user namespace regains capabilities)" },
    { "setns", SYS_setns, "enter another namespace" },
    { "bpf", SYS_bpf, "load kernel programs" },
    { "perf_event_open", SYS_perf_event_open, "observe other processes and the kernel" },
    { "kexec_load", SYS_kexec_load, "replace the kernel" },
    { "kexec_file_load", SYS_kexec_file_load, "replace the kernel" },
    { "init_module", SYS_init_module, "load kernel code" },
    { "finit_module", SYS_finit_module, "load kernel code" },
    { "delete_module", SYS_delete_module, "unload kernel code" },
    { "keyctl", SYS_keyctl, "the kernel keyrings are shared with the host user" },
    { "add_key", SYS_add_key, "the kernel keyrings are shared with the host user" },
    { "request_key", SYS_request_key, "the kernel keyrings are shared with the host user" },
    { "io_uring_setup", SYS_io_uring_setup, "io_uring performs I/O that seccomp cannot see" },
    { "io_uring_enter", SYS_io_uring_enter, "io_uring performs I/O that seccomp cannot see" },
    { "io_uring_register", SYS_io_uring_register, "io_uring performs I/O that seccomp cannot see" },
    { "open_by_handle_at", SYS_open_by_handle_at, "opens files by handle, past every path check" },
    { "name_to_handle_at", SYS_name_to_handle_at, "prepares open_by_handle_at" },
    { "userfaultfd", SYS_userfaultfd, "widens kernel race windows" },
    { "swapon", SYS_swapon, "system administration" },
    { "swapoff", SYS_swapoff, "system administration" },
    { "reboot", SYS_reboot, "system administration" },
    { "acct", SYS_acct, "system administration" },
    { "quotactl", SYS_quotactl, "system administration" },
    { "syslog", SYS_syslog, "the kernel log" },
    { "iopl", SYS_iopl, "raw hardware access" },
    { "ioperm", SYS_ioperm, "raw hardware access" },
    { "uselib", SYS_uselib, "obsolete loader call" },
    { "vhangup", SYS_vhangup, "hang up the terminal" },
    { "lookup_dcookie", SYS_lookup_dcookie, "obsolete profiling call" },
    { "fanotify_init", SYS_fanotify_init, "watch the file system" },
    { "pidfd_getfd", SYS_pidfd_getfd, "steal another process's descriptors" },
};

/* Namespace flags refused in clone(): a new user namespace gives back every
 * capability, a new mount namespace a place to undo the mounts. */
static const unsigned long clone_ns_flags[] = {
    CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWIPC,
    CLONE_NEWUTS, CLONE_NEWCGROUP, CLONE_NEWTIME,
};

/* personality() may only set the default (PER_LINUX, 0) or query
 * (0xffffffff): ADDR_NO_RANDOMIZE and friends would switch off ASLR for the
 * programs the agent runs next.  libseccomp 2.5 cannot compare one argument
 * twice in a rule, so this test is written by hand and put in front of its
 * program; it checks the architecture first, like libseccomp's own code,
 * and hands every other call on.  The kernel reads personality's argument
 * as an unsigned int: the low 32 bits are the whole value. */
#define ARG0_LO offsetof(struct seccomp_data, args[0])
static const struct sock_filter personality_prefix[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 7),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_personality, 0, 5),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG0_LO),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 2, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0xffffffffU, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
};
#define PREFIX_LEN (sizeof personality_prefix / sizeof personality_prefix[0])

/* libseccomp's SCMP_A0() leaves fields implicit, which clang warns about. */
#define CMP(a, o, x, y) ((struct scmp_arg_cmp){ .arg = (a), .op = (o), \
                                           .datum_a = (x), .datum_b = (y) })

/* Families and netlink protocols are small numbers: AF_MAX is 46 in Linux
 * 6.x and MAX_LINKS 32; the filter names each one below these bounds and
 * refuses everything from them up. */
#define SBX_AF_LIMIT 64
#define SBX_NETLINK_LIMIT 32

#define NOTIFY_LIST "execve, execveat, connect, sendto with an address, sendmsg, sendmmsg"

static int add(scmp_filter_ctx ctx, uint32_t action, long nr, unsigned n,
               const struct scmp_arg_cmp *cmp, const char *what, char *err, size_t errsz)
{
    int rc = seccomp_rule_add_array(ctx, action, (int)nr, n, cmp);
    if (rc < 0) {
        iso_errf(err, errsz, "seccomp: rule for %s: %s", what, strerror(-rc));
        return -1;
    }
    return 0;
}

/* The opens the supervisor sees with ISO_NOTIFY_OPEN (every way to open a
 * file by name; open_by_handle_at is refused above). */
static int add_open_notify(scmp_filter_ctx ctx, char *err, size_t errsz)
{
    static const struct { long nr; const char *name; } opens[] = {
        { SYS_open, "open" }, { SYS_openat, "openat" }, { SYS_openat2, "openat2" },
        { SYS_creat, "creat" },
    };
    for (size_t i = 0; i < sizeof opens / sizeof opens[0]; i++)
        if (add(ctx, SCMP_ACT_NOTIFY, opens[i].nr, 0, NULL, opens[i].name, err, errsz) < 0)
            return -1;
    return 0;
}

int iso_seccomp_build(unsigned notify, struct iso_bpf *out, char *err, size_t errsz)
{
    scmp_filter_ctx ctx;
    uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
    bool no_inet = (notify & ISO_DENY_INET) != 0;
    struct stat st;
    int mfd = -1, rc = -1;

    memset(out, 0, sizeof *out);
    ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (ctx == NULL) {
        iso_errf(err, errsz, "seccomp: cannot initialise libseccomp");
        return -1;
    }
    /* Another architecture's numbers mean the 32-bit ABI (int 0x80): kill. */
    if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) < 0) {
        iso_errf(err, errsz, "seccomp: bad-architecture action");
        goto out;
    }
    /* A binary tree over syscall numbers instead of a linear chain: the
     * filter runs on every system call of the agent (git status makes
     * thousands), so its length is paid per call.  Best effort: an older
     * libseccomp without the attribute keeps the chain. */
    (void)seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
    for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++)
        if (add(ctx, eperm, denied[i].nr, 0, NULL, denied[i].name, err, errsz) < 0)
            goto out;

    for (size_t i = 0; i < sizeof clone_ns_flags / sizeof clone_ns_flags[0]; i++) {
        struct scmp_arg_cmp c = CMP(0, SCMP_CMP_MASKED_EQ, clone_ns_flags[i], clone_ns_flags[i]);
        if (add(ctx, eperm, SYS_clone, 1, &c, "clone", err, errsz) < 0)
            goto out;
    }
    /* clone3 passes its flags in memory, which BPF cannot read: ENOSYS makes
     * glibc (and every runtime we know) fall back to clone(), filtered above. */
    if (add(ctx, SCMP_ACT_ERRNO(ENOSYS), SYS_clone3, 0, NULL, "clone3", err, errsz) < 0)
        goto out;

    /* TIOCSTI pushes characters into the terminal's input, i.e. runs
     * commands in the user's shell after the agent exits; TIOCLINUX can do
     * the same on a virtual console.  Compare the low 32 bits (the command
     * is an int). */
    {
        struct scmp_arg_cmp c = CMP(1, SCMP_CMP_MASKED_EQ, 0xffffffffUL, TIOCSTI);
        struct scmp_arg_cmp d = CMP(1, SCMP_CMP_MASKED_EQ, 0xffffffffUL, TIOCLINUX);
        if (add(ctx, eperm, SYS_ioctl, 1, &c, "ioctl(TIOCSTI)", err, errsz) < 0
            || add(ctx, eperm, SYS_ioctl, 1, &d, "ioctl(TIOCLINUX)", err, errsz) < 0)
            goto out;
    }
    /* No network at all (sbx-serve): the net namespace and Landlock
     * already leave nothing to reach; refusing the socket itself makes
     * that plain to the program and to the audit trail.  AF_UNIX stays:
     * the guard reports through events.sock.  The finer rules below on
     * these families (MPTCP, netlink protocols) are then left out:
     * libseccomp refuses a rule that another one on the same argument
     * already decides. */
    if (notify & ISO_DENY_INET) {
        static const int fams[] = { AF_INET, AF_INET6, AF_NETLINK };
        for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++) {
            struct scmp_arg_cmp c = CMP(0, SCMP_CMP_EQ, (scmp_datum_t)fams[i], 0);
            if (add(ctx, SCMP_ACT_ERRNO(EACCES), SYS_socket, 1, &c, "socket(inet)", err,
                    errsz) < 0)
                goto out;
        }
    }
    /* MPTCP sockets: Landlock's TCP port rules are about plain TCP. */
    if (!no_inet) {
        struct scmp_arg_cmp c4[2] = { CMP(0, SCMP_CMP_EQ, AF_INET, 0),
                                      CMP(2, SCMP_CMP_EQ, IPPROTO_MPTCP, 0) };
        struct scmp_arg_cmp c6[2] = { CMP(0, SCMP_CMP_EQ, AF_INET6, 0),
                                      CMP(2, SCMP_CMP_EQ, IPPROTO_MPTCP, 0) };
        if (add(ctx, eperm, SYS_socket, 2, c4, "socket(MPTCP)", err, errsz) < 0
            || add(ctx, eperm, SYS_socket, 2, c6, "socket(MPTCP)", err, errsz) < 0)
            goto out;
    }
    /* Address families no policy rule can name (vsock reaches the host
     * past any network namespace; packet, bluetooth, alg, can, ...): the
     * same list the guard refuses (policy_socket_allowed).  Each family is
     * compared whole: any value above the last family, high bits included,
     * is refused by the GT rule, so an int with garbage in its upper half
     * cannot slip past the EQ rules. */
    {
        uint32_t noaf = SCMP_ACT_ERRNO(EAFNOSUPPORT), noproto = SCMP_ACT_ERRNO(EPROTONOSUPPORT);
        for (int f = 0; f < SBX_AF_LIMIT; f++) {
            if (f == AF_NETLINK || policy_socket_allowed(f, 0))
                continue;
            struct scmp_arg_cmp c = CMP(0, SCMP_CMP_EQ, (scmp_datum_t)f, 0);
            if (add(ctx, noaf, SYS_socket, 1, &c, "socket(family)", err, errsz) < 0)
                goto out;
        }
        struct scmp_arg_cmp hi = CMP(0, SCMP_CMP_GE, SBX_AF_LIMIT, 0);
        if (add(ctx, noaf, SYS_socket, 1, &hi, "socket(family)", err, errsz) < 0)
            goto out;
        for (int p = 0; p < SBX_NETLINK_LIMIT && !no_inet; p++) {
            if (policy_socket_allowed(AF_NETLINK, p))
                continue;
            struct scmp_arg_cmp c[2] = { CMP(0, SCMP_CMP_EQ, AF_NETLINK, 0),
                                         CMP(2, SCMP_CMP_EQ, (scmp_datum_t)p, 0) };
            if (add(ctx, noproto, SYS_socket, 2, c, "socket(netlink)", err, errsz) < 0)
                goto out;
        }
        struct scmp_arg_cmp nl[2] = { CMP(0, SCMP_CMP_EQ, AF_NETLINK, 0),
                                      CMP(2, SCMP_CMP_GE, SBX_NETLINK_LIMIT, 0) };
        /* socketpair makes only AF_UNIX pairs worth having. */
        struct scmp_arg_cmp sp_lo = CMP(0, SCMP_CMP_LT, AF_UNIX, 0);
        struct scmp_arg_cmp sp_hi = CMP(0, SCMP_CMP_GT, AF_UNIX, 0);
        if ((!no_inet && add(ctx, noproto, SYS_socket, 2, nl, "socket(netlink)", err, errsz) < 0)
            || add(ctx, noaf, SYS_socketpair, 1, &sp_lo, "socketpair", err, errsz) < 0
            || add(ctx, noaf, SYS_socketpair, 1, &sp_hi, "socketpair", err, errsz) < 0)
            goto out;
    }
    /* An executable memfd is code that never was a file the policy could
     * judge: refuse memfd_create(MFD_EXEC).  (Without flags the kernel's
     * vm.memfd_noexec decides; the supervisor refuses exec of any memfd.) */
    {
        struct scmp_arg_cmp c = CMP(1, SCMP_CMP_MASKED_EQ, 0x10U /* MFD_EXEC */, 0x10U);
        if (add(ctx, eperm, SYS_memfd_create, 1, &c, "memfd_create(MFD_EXEC)", err, errsz) < 0)
            goto out;
    }
    notify &= ~ISO_DENY_INET;
    if (notify) {
        if (add(ctx, SCMP_ACT_NOTIFY, SYS_execve, 0, NULL, "execve", err, errsz) < 0
            || add(ctx, SCMP_ACT_NOTIFY, SYS_execveat, 0, NULL, "execveat", err, errsz) < 0
            || add(ctx, SCMP_ACT_NOTIFY, SYS_connect, 0, NULL, "connect", err, errsz) < 0)
            goto out;
        /* Datagrams sent to an address without connect(): sendto shows
         * its address in a register, so only those stop.  sendmsg and
         * sendmmsg keep it in memory: every one stops, and the supervisor
         * answers "carry on" at once for those without an address (a
         * round trip of ~10 us; TCP senders mostly use write/send). */
        struct scmp_arg_cmp to = CMP(4, SCMP_CMP_NE, 0, 0);
        if (add(ctx, SCMP_ACT_NOTIFY, SYS_sendto, 1, &to, "sendto(addr)", err, errsz) < 0
            || add(ctx, SCMP_ACT_NOTIFY, SYS_sendmsg, 0, NULL, "sendmsg", err, errsz) < 0
            || add(ctx, SCMP_ACT_NOTIFY, SYS_sendmmsg, 0, NULL, "sendmmsg", err, errsz) < 0)
            goto out;
    }
    if ((notify & ISO_NOTIFY_OPEN) && add_open_notify(ctx, err, errsz) < 0)
        goto out;

    /* Export through a memfd: libseccomp 2.5 writes BPF only to an fd. */
    mfd = memfd_create("sbx-seccomp", MFD_CLOEXEC);
    if (mfd < 0 || seccomp_export_bpf(ctx, mfd) < 0 || fstat(mfd, &st) < 0
        || st.st_size <= 0 || st.st_size % (off_t)sizeof(struct sock_filter) != 0
        || st.st_size / (off_t)sizeof(struct sock_filter) + PREFIX_LEN > BPF_MAXINSNS) {
        iso_errf(err, errsz, "seccomp: cannot export the filter");
        goto out;
    }
    out->insns = malloc(sizeof personality_prefix + (size_t)st.st_size);
    if (out->insns == NULL
        || pread(mfd, out->insns + PREFIX_LEN, (size_t)st.st_size, 0) != (ssize_t)st.st_size) {
        iso_errf(err, errsz, "seccomp: cannot read the exported filter");
        free(out->insns);
        out->insns = NULL;
        goto out;
    }
    memcpy(out->insns, personality_prefix, sizeof personality_prefix);
    out->len = (unsigned short)(PREFIX_LEN + st.st_size / (off_t)sizeof(struct sock_filter));
    rc = 0;
out:
    if (mfd >= 0)
        close(mfd);
    seccomp_release(ctx);
    return rc;
}

void iso_bpf_free(struct iso_bpf *b)
{
    free(b->insns);
    b->insns = NULL;
    b->len = 0;
}

int iso_seccomp_install(const struct iso_bpf *b, bool notify)
{
    struct sock_fprog prog = { .len = b->len, .filter = b->insns };
    unsigned flags = notify ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0;
    long rc = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);

    if (rc < 0)
        return -1;
    return notify ? (int)rc : 0;
}

void iso_seccomp_print(unsigned notify, FILE *out)
{
    fprintf(out, "seccomp (inherited by every process of the agent; no_new_privs):\n");
    fprintf(out, "  other architectures (32-bit int 0x80 ABI): kill the process\n");
    for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++)
        fprintf(out, "  %-18s EPERM  %s\n", denied[i].name, denied[i].why);
    fprintf(out, "  %-18s EPERM  with CLONE_NEWUSER/NEWNS/NEWPID/NEWNET/NEWIPC/NEWUTS/NEWCGROUP/NEWTIME\n", "clone");
    fprintf(out, "  %-18s ENOSYS flags in memory cannot be filtered; libc falls back to clone\n", "clone3");
    fprintf(out, "  %-18s EPERM  anything but PER_LINUX and the query (no ADDR_NO_RANDOMIZE)\n", "personality");
    fprintf(out, "  %-18s EPERM  TIOCSTI, TIOCLINUX (typing into the user's terminal)\n", "ioctl");
    fprintf(out, "  %-18s EPERM  AF_INET/AF_INET6 with IPPROTO_MPTCP\n", "socket");
    fprintf(out, "  %-18s EAFNOSUPPORT every family but AF_UNIX, AF_INET, AF_INET6 and\n"
                 "  %-18s              AF_NETLINK (vsock, packet, bluetooth, alg, ...)\n",
            "socket", "");
    fprintf(out, "  %-18s EPROTONOSUPPORT netlink but NETLINK_ROUTE and NETLINK_SOCK_DIAG\n",
            "socket");
    fprintf(out, "  %-18s EAFNOSUPPORT every family but AF_UNIX\n", "socketpair");
    fprintf(out, "  %-18s EPERM  with MFD_EXEC\n", "memfd_create");
    if (notify)
        fprintf(out, "  %-18s NOTIFY the supervisor in sbx-guard decides (" NOTIFY_LIST ")\n",
                "exec/connect/sendto");
    if (notify & ISO_DENY_INET)
        fprintf(out, "  %-18s EACCES AF_INET, AF_INET6, AF_NETLINK (no network at all)\n",
                "socket");
    if (notify & ISO_NOTIFY_OPEN)
        fprintf(out, "  %-18s NOTIFY the supervisor opens what can read itself, judges the file "
                "and hands it in (ADDFD); refuses deny-read/write paths (open, openat, "
                "openat2, creat)\n", "open");
}

/* ---- the same list as a container engine's seccomp profile ------------ */

/* Calls the engines' own default profiles refuse and sbx's list does not
 * name (the rest of their list needs a capability, and --cap-drop=ALL
 * takes every one): the profile below replaces theirs, so these stay
 * refused. */
static const char *const engine_extra[] = {
    "kcmp", "move_pages", "mbind", "set_mempolicy", "migrate_pages",
};

static void oci_rule(FILE *f, bool *first, const char *name, int err, const char *args)
{
    fprintf(f, "%s\n  {\"names\": [\"%s\"], \"action\": \"SCMP_ACT_ERRNO\", \"errnoRet\": %d%s%s%s}",
            *first ? "" : ",", name, err, args ? ", \"args\": [" : "", args ? args : "",
            args ? "]" : "");
    *first = false;
}

static void oci_cmp(char *buf, size_t sz, unsigned idx, unsigned long long v,
                    unsigned long long v2, const char *op)
{
    size_t len = strlen(buf);
    snprintf(buf + len, sz - len, "%s{\"index\": %u, \"value\": %llu, \"valueTwo\": %llu, "
             "\"op\": \"%s\"}", len ? ", " : "", idx, v, v2, op);
}

char *iso_seccomp_oci(bool for_gvisor)
{
    char *text = NULL, a[512];
    size_t len = 0;
    bool first = true;
    FILE *f = open_memstream(&text, &len);

    if (f == NULL)
        return NULL;
    fputs("{\"defaultAction\": \"SCMP_ACT_ALLOW\",\n \"architectures\": [\"SCMP_ARCH_X86_64\"],\n"
          " \"syscalls\": [", f);
    for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++)
        oci_rule(f, &first, denied[i].name, EPERM, NULL);
    for (size_t i = 0; i < sizeof engine_extra / sizeof engine_extra[0]; i++)
        oci_rule(f, &first, engine_extra[i], EPERM, NULL);
    for (size_t i = 0; i < sizeof clone_ns_flags / sizeof clone_ns_flags[0]; i++) {
        a[0] = '\0';
        oci_cmp(a, sizeof a, 0, clone_ns_flags[i], clone_ns_flags[i], "SCMP_CMP_MASKED_EQ");
        oci_rule(f, &first, "clone", EPERM, a);
    }
    if (!for_gvisor)        /* see iso_int.h */
        oci_rule(f, &first, "clone3", ENOSYS, NULL);
    {
        static const unsigned long tio[] = { TIOCSTI, TIOCLINUX };
        for (size_t i = 0; i < 2; i++) {
            a[0] = '\0';
            oci_cmp(a, sizeof a, 1, 0xffffffffUL, tio[i], "SCMP_CMP_MASKED_EQ");
            oci_rule(f, &first, "ioctl", EPERM, a);
        }
    }
    /* personality: one comparison per rule (an engine's libseccomp may
     * refuse two on one argument), so the flags that matter, one by one:
     * ADDR_NO_RANDOMIZE (ASLR off), READ_IMPLIES_EXEC. */
    {
        static const unsigned long pers[] = { 0x0040000, 0x0400000 };
        for (size_t i = 0; i < 2; i++) {
            a[0] = '\0';
            oci_cmp(a, sizeof a, 0, pers[i], pers[i], "SCMP_CMP_MASKED_EQ");
            oci_rule(f, &first, "personality", EPERM, a);
        }
    }
    for (int fam = 0; fam < SBX_AF_LIMIT; fam++) {
        if (fam == AF_NETLINK || policy_socket_allowed(fam, 0))
            continue;
        a[0] = '\0';
        oci_cmp(a, sizeof a, 0, (unsigned long long)fam, 0, "SCMP_CMP_EQ");
        oci_rule(f, &first, "socket", EAFNOSUPPORT, a);
    }
    a[0] = '\0';
    oci_cmp(a, sizeof a, 0, SBX_AF_LIMIT, 0, "SCMP_CMP_GE");
    oci_rule(f, &first, "socket", EAFNOSUPPORT, a);
    for (int p = 0; p < SBX_NETLINK_LIMIT; p++) {
        if (policy_socket_allowed(AF_NETLINK, p))
            continue;
        a[0] = '\0';
        oci_cmp(a, sizeof a, 0, AF_NETLINK, 0, "SCMP_CMP_EQ");
        oci_cmp(a, sizeof a, 2, (unsigned long long)p, 0, "SCMP_CMP_EQ");
        oci_rule(f, &first, "socket", EPROTONOSUPPORT, a);
    }
    {
        static const int inet[] = { AF_INET, AF_INET6 };
        for (size_t i = 0; i < 2; i++) {
            a[0] = '\0';
            oci_cmp(a, sizeof a, 0, (unsigned long long)inet[i], 0, "SCMP_CMP_EQ");
            oci_cmp(a, sizeof a, 2, IPPROTO_MPTCP, 0, "SCMP_CMP_EQ");
            oci_rule(f, &first, "socket", EPERM, a);
        }
    }
    a[0] = '\0';
    oci_cmp(a, sizeof a, 0, AF_UNIX, 0, "SCMP_CMP_LT");
    oci_rule(f, &first, "socketpair", EAFNOSUPPORT, a);
    a[0] = '\0';
    oci_cmp(a, sizeof a, 0, AF_UNIX, 0, "SCMP_CMP_GT");
    oci_rule(f, &first, "socketpair", EAFNOSUPPORT, a);
    a[0] = '\0';
    oci_cmp(a, sizeof a, 1, 0x10U, 0x10U, "SCMP_CMP_MASKED_EQ");
    oci_rule(f, &first, "memfd_create", EPERM, a);
    fputs("\n ]\n}\n", f);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}
