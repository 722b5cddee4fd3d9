/*
 * image.c — a loaded policy as one block of bytes that another process can
 * take as it is (policy.h: policy_image_save, policy_image_load).
 *
 * Why: every process of an agent needs the compiled policy.  Loading it from
 * YAML costs a parse, a hundred system calls to resolve the roots of the
 * globs, and a PCRE2 compile per command pattern, in every child: the
 * biggest part of what the guard adds to a short process.  sbx-guard loads
 * the policy once, with the options the preload would use, and saves the
 * result; the PCRE2 programs are decoded at the first command decision
 * that needs them (command.c: cmd_prepare).
 *
 * Layout: a header page, then the payload.  The payload starts with a copy
 * of struct policy; every pointer in it, and in everything it points to, is
 * stored as the address it will have when the payload is mapped at the
 * header's `base` (0 for NULL).  A process maps the payload there
 * (MAP_PRIVATE, MAP_FIXED_NOREPLACE: open, pread of the header, mmap,
 * close) and uses it in place: no copy, no allocation, and only the page
 * it writes (struct policy's own counters) is copied by the kernel.  When
 * that address is taken in the process (a second load, an unlucky
 * library), or the image has no base, the payload is read into memory and
 * every pointer moved by the difference ("relocating").  One walker knows
 * where the pointers are (walk_policy) and runs four ways: measuring,
 * writing, checking in place, and relocating.  Both ways of loading check
 * every pointer, every length and every enum against the payload before it
 * is used, so a damaged or truncated image is refused, never followed; the
 * caller then loads the YAML instead.  (The file itself is written once by
 * sbx-guard, 0400, in the runtime directory the agent may not touch; a
 * process able to rewrite it under a live mapping could as well rewrite
 * its own memory.)  The PCRE2 programs are stored with
 * pcre2_serialize_encode (which refuses a different PCRE2 build on decode).
 *
 * The serve: section (serve.c) is not part of an image: sbx-serve reads
 * its profile from YAML and the preload never asks for it; a policy taken
 * from an image answers policy_serve() with NULL.
 *
 * The image is for processes of the same build: the header carries a
 * version and a layout fingerprint (struct sizes and offsets), and an image
 * that does not match is refused.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define IMG_MAGIC "SBXPIMG"
#define IMG_VERSION 2u
#define IMG_ALIGN 16u
#define IMG_MAX (64u << 20)     /* refuse anything larger: not ours */
#define IMG_DATA_OFF 4096u      /* the payload's place in the file: a page */
/* Where payloads are mapped: a 2 MiB-aligned address in [32 TiB, 64 TiB),
 * picked at random per image.  On x86-64 and arm64 (47/48-bit user
 * space) that is above the sanitizers' shadow memory and what programs,
 * heaps and libraries usually take, and below the mmap area and the stack.
 * Elsewhere: no base, always relocated. */
#if defined(__x86_64__) || defined(__aarch64__)
#define IMG_BASE_LO 0x200000000000ull
#define IMG_BASE_HI 0x400000000000ull
#else
#define IMG_BASE_LO 0ull
#define IMG_BASE_HI 0ull
#endif
#define IMG_BASE_ALIGN (2ull << 20)
/* PCRE2's serialized form starts with a 16-byte header and the 1088 bytes
 * of character tables. */
#define PCRE2_SERIAL_MIN (16u + 1088u)
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

struct img_hdr {
    char magic[8];
    uint32_t version;
    uint32_t layout;
    uint64_t payload;           /* bytes after the header */
    uint64_t re_off, re_len;    /* PCRE2 programs, inside the payload */
    uint64_t n_re;
    uint64_t base;              /* where the pointers expect the payload, or 0 */
};

/* A fingerprint of the layouts the image depends on. */
static uint32_t layout_id(void)
{
    const uint64_t v[] = {
        sizeof(struct policy), sizeof(struct policy_rule), sizeof(struct glob),
        sizeof(struct net_match), sizeof(struct cmd_match), sizeof(struct policy_info),
        offsetof(struct policy, cmd_decisions), offsetof(struct policy, implicit),
        offsetof(struct policy_info, env_set_value), POLICY_LIST__COUNT,
        PCRE2_MAJOR, PCRE2_MINOR, sizeof(void *),
    };
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        h ^= (uint32_t)v[i];
        h *= 16777619u;
    }
    return h;
}

static size_t align_up(size_t n)
{
    return (n + IMG_ALIGN - 1) & ~(size_t)(IMG_ALIGN - 1);
}

/* ---- the walker ------------------------------------------------------------ */

enum img_kind { K_STR, K_BYTES, K_ARRAY };
/* M_CHECK: the payload is mapped at its base, its pointers are right as
 * they are: check them, write nothing.  M_RELOC: it was read elsewhere:
 * check them and move them. */
enum img_mode { M_SIZE, M_WRITE, M_CHECK, M_RELOC };

struct img_op {
    enum img_mode mode;
    char *buf;          /* M_WRITE, M_CHECK, M_RELOC: the payload */
    size_t len;         /* M_SIZE, M_WRITE: bytes used so far */
    size_t size;        /* M_CHECK, M_RELOC: the payload's size */
    uint64_t bias;      /* a stored pointer is bias + offset (0 is NULL) */
    bool bad;           /* M_CHECK, M_RELOC: something did not check out */
};

static bool reading(const struct img_op *o)
{
    return o->mode == M_CHECK || o->mode == M_RELOC;
}

static void *get_ptr(const void *field)
{
    void *v;
    memcpy(&v, field, sizeof v);
    return v;
}

static void set_ptr(void *field, const void *v)
{
    memcpy(field, &v, sizeof v);
}

/* One pointer field.  K_STR: a string; K_BYTES: N bytes, stored with a NUL
 * after them; K_ARRAY: N bytes.  Returns where the object now is (the
 * source while measuring, the copy while writing, the payload's object
 * while relocating), NULL for a NULL pointer or an error. */
static void *field(struct img_op *o, void *fld, enum img_kind k, size_t n)
{
    void *v = get_ptr(fld);
    if (reading(o)) {
        uintptr_t u = (uintptr_t)v;
        if (u == 0)
            return NULL;
        if (u < o->bias || u - o->bias >= o->size ||
            (u - o->bias) % (k == K_ARRAY ? IMG_ALIGN : 1) != 0) {
            o->bad = true;
            return NULL;
        }
        size_t off = u - o->bias;
        size_t room = o->size - off;
        if (k == K_STR ? memchr(o->buf + off, '\0', room) == NULL
                       : k == K_BYTES ? n >= room : n > room) {
            o->bad = true;
            return NULL;
        }
        if (o->mode == M_RELOC)
            set_ptr(fld, o->buf + off);
        return o->buf + off;
    }
    if (v == NULL)
        return NULL;
    size_t bytes = k == K_STR ? strlen(v) + 1 : n + (k == K_BYTES);
    size_t off = o->len;
    o->len = align_up(o->len + bytes);
    if (o->mode == M_SIZE)
        return v;
    if (k == K_STR) {
        memcpy(o->buf + off, v, bytes);
    } else {
        memcpy(o->buf + off, v, n);
        if (k == K_BYTES)
            o->buf[off + n] = '\0';
    }
    set_ptr(fld, (void *)(uintptr_t)(o->bias + off));
    return o->buf + off;
}

#define STR(f) (void)field(o, &(f), K_STR, 0)

/* An array of N objects of SIZE bytes; checks N against the payload. */
static void *array(struct img_op *o, void *fld, size_t n, size_t size)
{
    if (n > IMG_MAX / size) {
        o->bad = true;
        return NULL;
    }
    return field(o, fld, K_ARRAY, n * size);
}

static void walk_rule(struct img_op *o, struct policy_rule *r)
{
    STR(r->section);
    STR(r->text);
    STR(r->pattern);
    STR(r->reason);
    STR(r->file);
    if (reading(o) && ((unsigned)r->list >= POLICY_LIST__COUNT ||
                               (unsigned)r->net_kind > POLICY_NET_ANY))
        o->bad = true;
}

static void walk_glob(struct img_op *o, struct glob *g)
{
    STR(g->pat);
    STR(g->alt);
    (void)field(o, &g->suf, K_BYTES, g->slen);
    if (reading(o) && (unsigned)g->kind > GLOB_GENERAL)
        o->bad = true;
    /* the prefilter reads pat[0..plen) and suf[0..slen): both must be
     * there (slen was checked against the payload above) */
    if (reading(o) && !o->bad &&
        (g->pat ? strlen(g->pat) < g->plen
                : g->kind != GLOB_LITERAL || g->plen != 0 || g->alt != NULL))
        o->bad = true;
    if (reading(o) && g->slen != 0 && g->suf == NULL)
        o->bad = true;
}

static void walk_strings(struct img_op *o, void *fld, size_t n)
{
    const char **a = array(o, fld, n, sizeof(char *));
    for (size_t i = 0; a && i < n; i++)
        STR(a[i]);
}

/* 'p' path globs, 'n' network rules, 'c' command patterns. */
static char list_kind(int l)
{
    switch (l) {
    case POLICY_CMD_DENY: case POLICY_CMD_ALLOW:
        return 'c';
    case POLICY_CONNECT_ALLOW: case POLICY_CONNECT_DENY:
    case POLICY_BIND_ALLOW: case POLICY_BIND_DENY:
        return 'n';
    default:
        return 'p';
    }
}

static void walk_policy(struct img_op *o, struct policy *p)
{
    struct policy_info *in = &p->info;
    STR(in->name);
    STR(in->description);
    STR(in->file);
    STR(in->workspace);
    STR(in->home);
    walk_strings(o, &in->env_pass, in->n_env_pass);
    walk_strings(o, &in->env_set_name, in->n_env_set);
    walk_strings(o, &in->env_set_value, in->n_env_set);
    STR(p->mode_name);
    for (int l = 0; l < POLICY_LIST__COUNT; l++) {
        size_t n = p->n_rules[l];
        struct policy_rule *r = array(o, &p->rules[l], n, sizeof *r);
        for (size_t i = 0; r && i < n; i++)
            walk_rule(o, &r[i]);
        struct glob *g = array(o, &p->globs[l], n, sizeof *g);
        for (size_t i = 0; g && i < n; i++)
            walk_glob(o, &g[i]);
        struct net_match *m = array(o, &p->nets[l], n, sizeof *m);
        for (size_t i = 0; m && i < n; i++) {
            STR(m[i].host);
            walk_glob(o, &m[i].unix_glob);
            if (reading(o) && m[i].prefix > 128)
                o->bad = true;
        }
        struct cmd_match *c = array(o, &p->cmds[l], n, sizeof *c);
        for (size_t i = 0; c && i < n; i++) {
            STR(c[i].need);
            if (o->mode == M_SIZE)
                continue;
            unsigned char b;
            memcpy(&b, &c[i].need_caseless, 1);
            if (reading(o) && b > 1)
                o->bad = true;
            /* The programs travel separately (serialized): the image holds
             * NULL, and a mapped one is used as it is. */
            if (o->mode == M_CHECK) {
                if (c[i].re != NULL || atomic_load(&c[i].jitted) != NULL)
                    o->bad = true;
                continue;
            }
            c[i].re = NULL;
            atomic_init(&c[i].jitted, NULL);
        }
        /* what the decisions index for a non-empty list must be there */
        if (reading(o) && n > 0 &&
            (r == NULL || (list_kind(l) == 'p' && g == NULL) ||
             (list_kind(l) == 'n' && m == NULL) || (list_kind(l) == 'c' && c == NULL)))
            o->bad = true;
        walk_rule(o, &p->implicit[l]);
    }
    walk_rule(o, &p->read_only_rule);
    walk_rule(o, &p->net_other_rule);
    walk_rule(o, &p->cmd_default_rule);
    /* The serve: section is sbx-serve's, which loads its profile from
     * YAML; the preload never asks for it.  An image drops it (so
     * policy_serve() of a policy from an image is NULL). */
    if (o->mode == M_WRITE) {
        p->serve = NULL;
        p->meta = NULL;         /* where values came from: for --expanded */
    } else if (reading(o) && (p->serve != NULL || p->meta != NULL)) {
        o->bad = true;
    }
}

/* The command lists, deny then allow: the order of the PCRE2 programs. */
static const enum policy_list cmd_lists[] = { POLICY_CMD_DENY, POLICY_CMD_ALLOW };

/* ---- saving ---------------------------------------------------------------- */

static int fail(char *err, size_t errsz, const char *what, int e)
{
    if (err && errsz)
        snprintf(err, errsz, "%s: %s", what, strerror(e));
    errno = e;
    return -1;
}

/* A base for a new image (see IMG_BASE_LO), or 0 (relocate always). */
static uint64_t pick_base(void)
{
    uint64_t r;
    if (IMG_BASE_HI == 0 || getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
        return 0;
    return IMG_BASE_LO + r % ((IMG_BASE_HI - IMG_BASE_LO) / IMG_BASE_ALIGN) * IMG_BASE_ALIGN;
}

int policy_image_save(const struct policy *p, const char *path, char *err, size_t errsz)
{
    if (cmd_prepare(p) < 0)
        return fail(err, errsz, "policy image: the command patterns are not available", EINVAL);
    /* The PCRE2 programs first: their size is part of the payload. */
    size_t n_re = 0;
    for (size_t k = 0; k < 2; k++)
        n_re += p->cmds[cmd_lists[k]] ? p->n_rules[cmd_lists[k]] : 0;
    const pcre2_code **codes = NULL;
    uint8_t *re_bytes = NULL;
    PCRE2_SIZE re_len = 0;
    if (n_re > 0) {
        codes = calloc(n_re, sizeof(const pcre2_code *));
        if (!codes)
            return fail(err, errsz, "policy image", ENOMEM);
        size_t j = 0;
        for (size_t k = 0; k < 2; k++) {
            enum policy_list l = cmd_lists[k];
            for (size_t i = 0; p->cmds[l] && i < p->n_rules[l]; i++)
                codes[j++] = p->cmds[l][i].re;
        }
        int32_t rc = pcre2_serialize_encode(codes, (int32_t)n_re, &re_bytes, &re_len, NULL);
        free(codes);
        if (rc < 0)
            return fail(err, errsz, "policy image: cannot serialize the command patterns",
                        EINVAL);
    }

    /* Measure, then write into one zeroed buffer. */
    /* measuring reads the policy and changes nothing */
    uint64_t base = pick_base();
    struct img_op o = { .mode = M_SIZE, .len = align_up(sizeof *p) };
    walk_policy(&o, (struct policy *)p);
    size_t re_off = o.len;
    size_t total = align_up(re_off + re_len);
    char *buf = calloc(1, total);
    if (!buf) {
        pcre2_serialize_free(re_bytes);
        return fail(err, errsz, "policy image", ENOMEM);
    }
    memcpy(buf, p, sizeof *p);
    struct policy *q = (struct policy *)buf;
    memset(&q->arena, 0, sizeof q->arena);
    atomic_init(&q->cmd_decisions, 0);
    q->re_serial = NULL;
    q->n_re_serial = 0;
    q->img_map = NULL;
    q->img_len = 0;
    atomic_init(&q->re_state, RE_READY);
    o = (struct img_op){ .mode = M_WRITE, .buf = buf, .len = align_up(sizeof *q),
                         .bias = base ? base : 1 };
    walk_policy(&o, q);
    if (re_len)
        memcpy(buf + re_off, re_bytes, re_len);
    pcre2_serialize_free(re_bytes);

    /* the header, padded to a page: the payload can be mapped from the file */
    static char page[IMG_DATA_OFF];
    struct img_hdr h = { .version = IMG_VERSION, .layout = layout_id(), .payload = total,
                         .re_off = re_off, .re_len = re_len, .n_re = n_re, .base = base };
    memcpy(h.magic, IMG_MAGIC, sizeof h.magic);
    memset(page, 0, sizeof page);
    memcpy(page, &h, sizeof h);

    int rc = 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0400);
    if (fd < 0) {
        rc = fail(err, errsz, path, errno);
    } else {
        struct iovec iov[2] = { { page, sizeof page }, { buf, total } };
        ssize_t w = writev(fd, iov, 2);
        if (w != (ssize_t)(sizeof page + total))
            rc = fail(err, errsz, path, w < 0 ? errno : EIO);
        if (close(fd) < 0 && rc == 0)
            rc = fail(err, errsz, path, errno);
        if (rc < 0)
            unlink(path);
    }
    free(buf);
    return rc;
}

/* ---- loading --------------------------------------------------------------- */

static struct policy *refuse(char *err, size_t errsz, const char *path, const char *why)
{
    if (err && errsz)
        snprintf(err, errsz, "%s: %s", path, why);
    errno = EINVAL;
    return NULL;
}

/* Maps the payload of FD at H's base; NULL if the address is taken (or
 * unusable), and the caller reads it instead. */
static char *map_at_base(int fd, const struct img_hdr *h)
{
    long pg = sysconf(_SC_PAGESIZE);
    if (h->base == 0 || h->base < IMG_BASE_LO || h->base >= IMG_BASE_HI ||
        h->base % IMG_BASE_ALIGN != 0 || pg <= 0 || IMG_DATA_OFF % (unsigned long)pg != 0)
        return NULL;
    /* NOREPLACE: never over something of the program's.  Kernels before
     * 4.17 take the address as a hint and may map elsewhere. */
    void *m = mmap((void *)(uintptr_t)h->base, h->payload, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_FIXED_NOREPLACE, fd, IMG_DATA_OFF);
    if (m == MAP_FAILED)
        return NULL;
    if ((uintptr_t)m != h->base) {
        munmap(m, h->payload);
        return NULL;
    }
    /* The check below reads every page: have them mapped in one call
     * rather than fault by fault (each fault costs a few microseconds on
     * a virtual machine, and every guarded process loads the image).
     * Best effort: before Linux 5.14 the pages fault in as before. */
    int saved = errno;
    (void)madvise(m, h->payload, MADV_POPULATE_READ);
    errno = saved;
    return m;
}

struct policy *policy_image_load(const char *path, char *err, size_t errsz)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fail(err, errsz, path, errno);
        return NULL;
    }
    struct stat st;
    struct img_hdr h;
    struct arena a = { 0 };
    char *buf = NULL, *map = NULL;
    const char *why = NULL;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        why = "not a regular file";
    } else if ((uint64_t)st.st_size < IMG_DATA_OFF + sizeof(struct policy) ||
               (uint64_t)st.st_size > IMG_MAX + IMG_DATA_OFF) {
        why = "not a policy image (size)";
        /* The header's read and the payload's both fail as "short read";
         * the chain's order cannot join them.  NOLINTNEXTLINE(bugprone-branch-clone) */
    } else if (pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h) {
        why = "short read";
    } else if (memcmp(h.magic, IMG_MAGIC, sizeof h.magic) != 0) {
        why = "not a policy image";
    } else if (h.version != IMG_VERSION || h.layout != layout_id()) {
        why = "made by another build of sbx";
    } else if (h.payload != (uint64_t)st.st_size - IMG_DATA_OFF ||
               h.re_off < sizeof(struct policy) || h.re_off > h.payload ||
               h.re_len > h.payload - h.re_off || h.n_re > INT32_MAX ||
               (h.n_re > 0 && h.re_len < PCRE2_SERIAL_MIN)) {
        why = "damaged (sizes)";
    } else if ((map = map_at_base(fd, &h)) != NULL) {
        buf = map;
    } else if ((buf = arena_alloc(&a, h.payload)) == NULL) {
        close(fd);
        fail(err, errsz, path, ENOMEM);
        return NULL;
    } else if (pread(fd, buf, h.payload, IMG_DATA_OFF) != (ssize_t)h.payload) {
        why = "short read";
    }
    close(fd);
    if (why) {
        arena_free(&a);
        return refuse(err, errsz, path, why);
    }

    struct policy *p = (struct policy *)buf;
    struct img_op o = { .mode = map ? M_CHECK : M_RELOC, .buf = buf, .size = h.re_off,
                        .bias = h.base ? h.base : 1 };
    walk_policy(&o, p);
    size_t want_re = 0;
    for (size_t k = 0; k < 2; k++)
        want_re += p->cmds[cmd_lists[k]] ? p->n_rules[cmd_lists[k]] : 0;
    if (!o.bad && want_re != h.n_re)
        o.bad = true;
    /* the fields a loaded policy keeps for itself (in a mapping, the only
     * page the kernel copies) */
    p->arena = a;
    p->img_map = map;
    p->img_len = map ? h.payload : 0;
    atomic_init(&p->cmd_decisions, 0);
    if (o.bad) {
        /* the command arrays may still hold offsets, and no program was
         * decoded: nothing there for policy_free to free */
        for (size_t k = 0; k < 2; k++)
            p->cmds[cmd_lists[k]] = NULL;
        policy_free(p);
        return refuse(err, errsz, path, "damaged (a pointer or a value is out of range)");
    }
    /* decoded at the first command decision (command.c: cmd_prepare) */
    p->re_serial = h.n_re > 0 ? (const uint8_t *)buf + h.re_off : NULL;
    p->n_re_serial = h.n_re;
    atomic_init(&p->re_state, h.n_re > 0 ? RE_PENDING : RE_READY);
    return p;
}
