/*
 * guardcheck.c — will the agent's first process really run the guard?
 *
 * ld.so drops an LD_PRELOAD entry it cannot map with a one-line warning and
 * runs the program anyway: a preload on a noexec mount, one that is not a
 * shared object of this machine, or one the process may not read.  And a
 * static program has no ld.so at all.  Either way the record would say
 * "layers guard" for a run the guard never saw.  So:
 *   - iso_guard_loadable() repeats, in the agent's own process just before
 *     its execve (every mount, Landlock rule and rlimit in place), the steps
 *     ld.so takes to load the preload: open it for reading, check its ELF
 *     header, map it executable.  If one fails, ld.so's would too, and the
 *     agent is not started.
 *   - iso_program_loads_guard() tells whether the program about to run goes
 *     through ld.so at all (an ELF with PT_INTERP, or a script whose
 *     interpreter does); if not, the run's layers leave "guard" out and
 *     sbx-guard says so.
 */
#include "iso_int.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__)
#define GUARD_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define GUARD_MACHINE EM_AARCH64
#else
#error "unknown ELF machine for this architecture"
#endif

/* #! nesting the kernel allows (BINPRM_MAX_RECURSION is 4). */
#define MAX_INTERP_DEPTH 4

static bool elf_header_ok(const Elf64_Ehdr *h, bool want_dyn)
{
    return memcmp(h->e_ident, ELFMAG, SELFMAG) == 0 && h->e_ident[EI_CLASS] == ELFCLASS64
           && h->e_ident[EI_DATA] == ELFDATA2LSB && h->e_machine == GUARD_MACHINE
           && (!want_dyn || h->e_type == ET_DYN);
}

int iso_guard_loadable(const char *path, const char **what)
{
    Elf64_Ehdr h;
    void *m;
    int fd;

    if (path == NULL || path[0] != '/') {
        *what = "the guard (libsbx-preload.so) has no absolute path";
        errno = EINVAL;
        return -1;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *what = "the guard (libsbx-preload.so) cannot be opened in the sandbox";
        return -1;
    }
    if (pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h || !elf_header_ok(&h, true)) {
        *what = "the guard (libsbx-preload.so) is not a shared object for this machine";
        close(fd);
        errno = ENOEXEC;
        return -1;
    }
    /* What fails on a noexec mount: ld.so maps the text segment so. */
    m = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        *what = "the guard (libsbx-preload.so) cannot be mapped executable in the sandbox";
        return -1;
    }
    munmap(m, 4096);
    return 0;
}

/* 1: PATH is a dynamic ELF of this machine; 0: a static one or no ELF. */
static int elf_dynamic(int fd)
{
    Elf64_Ehdr h;
    Elf64_Phdr ph;

    if (pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h || !elf_header_ok(&h, false)
        || h.e_phentsize != sizeof ph)
        return 0;
    for (unsigned i = 0; i < h.e_phnum; i++) {
        if (pread(fd, &ph, sizeof ph, (off_t)(h.e_phoff + (uint64_t)i * sizeof ph))
            != (ssize_t)sizeof ph)
            return 0;
        if (ph.p_type == PT_INTERP)
            return 1;
    }
    return 0;
}

static int loads_guard(const char *path, int depth)
{
    char buf[256], interp[256];
    ssize_t n;
    size_t i = 2, j = 0;
    int fd, rc;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    n = pread(fd, buf, sizeof buf - 1, 0);
    if (n < 2 || buf[0] != '#' || buf[1] != '!') {
        rc = n < 0 ? -1 : elf_dynamic(fd);
        close(fd);
        return rc;
    }
    close(fd);
    if (depth >= MAX_INTERP_DEPTH)
        return -1;
    buf[n] = '\0';
    while (buf[i] == ' ' || buf[i] == '\t')
        i++;
    while (buf[i] && buf[i] != ' ' && buf[i] != '\t' && buf[i] != '\n' && j < sizeof interp - 1)
        interp[j++] = buf[i++];
    interp[j] = '\0';
    return j > 0 ? loads_guard(interp, depth + 1) : -1;
}

int iso_program_loads_guard(const char *path)
{
    return loads_guard(path, 0);
}
