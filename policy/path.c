/* path.c — the one meaning of a path (path.h): folding, resolving the way
 * the kernel would (in our own view or in another process's), "under",
 * the PATH search and the words of a typed command. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A loop limit like the kernel's (40 symlinks per lookup). */
#define RESOLVE_MAX_LINKS 40

/* The next component of P: slashes skipped, its start returned and its
 * length in *N (0 at the end of P). */
static inline const char *next_comp(const char *p, size_t *n)
{
    while (*p == '/')
        p++;
    const char *c = p;
    while (*p != '\0' && *p != '/')
        p++;
    *n = (size_t)(p - c);
    return c;
}

/* Appends component C (length N, neither "." nor "..") to OUT (length
 * *OL: "/" or "/a/b", never a trailing slash). */
static int push_comp(char *out, size_t *ol, size_t outsz, const char *c, size_t n)
{
    size_t need = *ol + (*ol > 1) + n + 1;
    if (need > outsz) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (*ol > 1)
        out[(*ol)++] = '/';
    memcpy(out + *ol, c, n);
    *ol += n;
    out[*ol] = '\0';
    return 0;
}

/* OUT becomes "/", where every fold and resolution starts.  -1/ENAMETOOLONG
 * if it cannot hold even that. */
static int start_at_root(char *out, size_t outsz)
{
    if (outsz < 2) {
        errno = ENAMETOOLONG;
        return -1;
    }
    out[0] = '/';
    out[1] = '\0';
    return 0;
}

/* Folds PATH onto OUT[0..*OL) ("/" or "/a/b") and terminates it.  One pass
 * over the characters, the root kept as length 0 while going (so ".." and
 * a new component need no special case for it), the terminator written
 * once: the preload folds every path it judges, and this loop is most of
 * what that costs (about 25 ns for a path of six components, against 60
 * for a push_comp per component).  On ENAMETOOLONG OUT is not terminated. */
static int fold_into(char *out, size_t *ol, size_t outsz, const char *p)
{
    size_t len = *ol == 1 ? 0 : *ol;

    for (;;) {
        size_t n;
        const char *c = next_comp(p, &n);
        if (n == 0)
            break;
        p = c + n;
        if (n == 1 && c[0] == '.')
            continue;
        if (n == 2 && c[0] == '.' && c[1] == '.') {
            while (len > 0 && out[len - 1] != '/')
                len--;
            if (len > 0)
                len--;
            continue;
        }
        if (len + 1 + n >= outsz) {
            errno = ENAMETOOLONG;
            return -1;
        }
        out[len++] = '/';
        memcpy(out + len, c, n);
        len += n;
    }
    if (len == 0)
        out[len++] = '/';
    out[len] = '\0';
    *ol = len;
    return 0;
}

int policy_path_fold_onto(char *out, size_t outsz, size_t len, const char *path)
{
    if (len == 0 || len >= outsz) {
        errno = ENAMETOOLONG;
        return -1;
    }
    out[len] = '\0';
    return fold_into(out, &len, outsz, path);
}

int path_join_fold(const char *base, const char *path, char *out, size_t outsz,
                   bool keep_trailing)
{
    size_t ol = 1;

    if (start_at_root(out, outsz) < 0)
        return -1;
    if (path[0] != '/' && base != NULL && fold_into(out, &ol, outsz, base) < 0)
        return -1;
    if (fold_into(out, &ol, outsz, path) < 0)
        return -1;
    if (keep_trailing && ol > 1) {
        size_t n = strlen(path);
        if (n > 0 && path[n - 1] == '/') {
            if (ol + 2 > outsz) {
                errno = ENAMETOOLONG;
                return -1;
            }
            out[ol++] = '/';
            out[ol] = '\0';
        }
    }
    return 0;
}

int policy_path_lexical(const char *base, const char *path, char *out, size_t outsz)
{
    return path_join_fold(base, path, out, outsz, false);
}

bool policy_path_under(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    /* "/a/" means "/a"; and "/" (n 0 after this) contains every path */
    while (n > 0 && dir[n - 1] == '/')
        n--;
    if (n == 0)
        return dir[0] == '/' && path[0] == '/';
    return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* ---- resolving ----------------------------------------------------------- */

/* "/proc/self" and "/proc/thread-self" are kept as written: they stand for
 * the calling process, which is what a policy means by them. */
static bool is_proc_self(const char *p, size_t n)
{
    return (n == 10 && memcmp(p, "/proc/self", 10) == 0) ||
           (n == 17 && memcmp(p, "/proc/thread-self", 17) == 0);
}

static bool own_view(const struct policy_path_view *view)
{
    return view == NULL || view->root == NULL || view->root[0] == '\0';
}

/* Looks at PATH as VIEW sees it (its root put before it): the length of
 * a symlink's target, read into LINK; 0 for anything else that is there;
 * -1 where nothing can be looked at (not there, not readable, too long).
 * Not inlined: the buffer for another view's name stays off the stack of
 * the preload's calls, which look in their own. */
__attribute__((noinline))
static ssize_t view_look(const struct policy_path_view *view, const char *path,
                         char *link, size_t linksz, struct stat *st_out)
{
    char host[PATH_MAX + 64];
    struct stat st;
    if (!own_view(view)) {
        int n = snprintf(host, sizeof host, "%s%s", view->root, path);
        if (n < 0 || (size_t)n >= sizeof host)
            return -1;
        path = host;
    }
    if (lstat(path, &st) < 0)
        return -1;
    *st_out = st;
    if (!S_ISLNK(st.st_mode))
        return 0;
    ssize_t n = readlink(path, link, linksz - 1);
    if (n <= 0)
        return -1;
    link[n] = '\0';
    return n;
}

/* The pid PID has in its own pid namespace (the last NStgid), or -1. */
static long ns_tgid(pid_t pid)
{
    char p[64], line[256];
    long v = -1;
    FILE *f;

    snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
    f = fopen(p, "re");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "NStgid:", 7) == 0) {
            char *s = line + 7, *end;
            for (;;) {
                long x = strtol(s, &end, 10);
                if (end == s)
                    break;
                v = x;
                s = end;
            }
            break;
        }
    fclose(f);
    return v;
}

/* OUT[0..*OL) is "/proc/self" or "/proc/thread-self" in another process's
 * view: the same directory under the number that process has in its own
 * pid namespace, which is what its /proc shows (/proc/self there would be
 * the caller, and the caller is not in it).  Unchanged if the number
 * cannot be read. */
static void proc_self_in_view(const struct policy_path_view *view, char *out, size_t *ol,
                              size_t outsz)
{
    long t = ns_tgid(view->pid);
    if (t <= 0)
        return;
    int n = snprintf(out, outsz, "/proc/%ld", t);
    if (n > 0 && (size_t)n < outsz)
        *ol = (size_t)n;
}


/* ---- remembered directories (path.h: policy_path_cache_enable) -----------
 *
 * A fixed table of physical directories (absolute, folded, no symlink on
 * the way when they were walked) with the (dev, ino) lstat gave them.  A
 * resolution that starts with one of them checks it with one lstat instead
 * of one per component: the same (dev, ino), still a directory and not a
 * symlink, and the walk goes on from there.  Direct-mapped by an FNV-1a
 * hash of the path; the full path is compared, so a hash collision is only
 * a miss.  Each slot has its own try-lock, never waited for: a slot in use
 * by another thread or by the code a signal handler interrupted is a miss,
 * so this is thread-safe and async-signal-safe without blocking.  A fork
 * while another thread holds a slot leaves that slot locked in the child,
 * which then never uses it (a miss, not a wrong answer).  Nothing is
 * allocated.  What the check cannot see is in path.h. */
#define CACHE_SLOTS 256                 /* power of two */
#define CACHE_PATH_MAX 240              /* longer directories: not remembered */
#define CACHE_DEPTH_MAX 32              /* prefixes looked at per resolution */

struct cache_slot {
    atomic_uint lock;                   /* 0 free, 1 held */
    unsigned len;                       /* 0: empty */
    dev_t dev;
    ino_t ino;
    char path[CACHE_PATH_MAX];
};

static struct cache_slot cache[CACHE_SLOTS];
static atomic_bool cache_on;
/* Set before the first slot is written: until then a recall or a flush
 * touches no slot.  The table is 17 pages of zeroes that every process
 * of an agent has and most never fill (a shell, `true`); writing a slot's
 * lock would make the kernel give the process each page (a fault apiece,
 * the biggest part of policy_path_cache_enable in a short process). */
static atomic_bool cache_used;
static atomic_ulong cache_hits, cache_misses;

void policy_path_cache_enable(bool on)
{
    atomic_store(&cache_on, on);
    policy_path_cache_flush();
}

static bool slot_take(struct cache_slot *c)
{
    unsigned v = 0;
    return atomic_compare_exchange_strong_explicit(&c->lock, &v, 1u, memory_order_acquire,
                                                   memory_order_relaxed);
}

static void slot_give(struct cache_slot *c)
{
    atomic_store_explicit(&c->lock, 0u, memory_order_release);
}

void policy_path_cache_flush(void)
{
    if (!atomic_load(&cache_used))
        return;
    for (size_t i = 0; i < CACHE_SLOTS; i++)
        if (slot_take(&cache[i])) {
            cache[i].len = 0;
            slot_give(&cache[i]);
        }
}

void policy_path_cache_stats(unsigned long *hits, unsigned long *misses)
{
    *hits = atomic_load(&cache_hits);
    *misses = atomic_load(&cache_misses);
}

static uint64_t fnv_step(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}
#define FNV_START 0xcbf29ce484222325ull

static void cache_put(const char *path, size_t n, uint64_t h, dev_t dev, ino_t ino)
{
    struct cache_slot *c = &cache[h & (CACHE_SLOTS - 1)];
    if (n >= CACHE_PATH_MAX)
        return;
    if (!atomic_load_explicit(&cache_used, memory_order_relaxed))
        atomic_store(&cache_used, true);
    if (!slot_take(c))
        return;
    memcpy(c->path, path, n);
    c->len = (unsigned)n;
    c->dev = dev;
    c->ino = ino;
    slot_give(c);
}

/* /proc is not remembered: its directories come and go with processes and
 * its links are not symlinks (is_proc_self and the /proc case below). */
static bool cacheable(const char *path, size_t n)
{
    return n > 1 && n < CACHE_PATH_MAX &&
           !(n >= 5 && memcmp(path, "/proc", 5) == 0 && (n == 5 || path[5] == '/'));
}

/* The longest prefix of the absolute REST, made of whole components that
 * are neither "." nor ".." and followed by at least one more component,
 * that is a remembered directory still there as it was: copied into OUT
 * (*OL its length) and the position in REST after it returned; else REST.
 * One lstat for a hit, none for a miss. */
static const char *cache_recall(const char *rest, char *out, size_t *ol, size_t outsz)
{
    size_t ends[CACHE_DEPTH_MAX];
    uint64_t hashes[CACHE_DEPTH_MAX];
    int k = 0;
    uint64_t h = FNV_START;
    const char *p = rest;

    if (rest[0] != '/')
        return rest;
    if (!atomic_load_explicit(&cache_used, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&cache_misses, 1, memory_order_relaxed);
        return rest;
    }
    /* Only single slashes: the key is the folded spelling. */
    while (k < CACHE_DEPTH_MAX && p[0] == '/' && p[1] != '/' && p[1] != '\0') {
        const char *c = p + 1, *e = c;
        while (*e != '\0' && *e != '/')
            e++;
        size_t n = (size_t)(e - c);
        if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            break;
        if (*e != '/' || e[1] == '\0' || e[1] == '/')
            break;              /* the last component is the caller's */
        h = fnv_step(h, p, (size_t)(e - p));
        if ((size_t)(e - rest) >= CACHE_PATH_MAX)
            break;
        ends[k] = (size_t)(e - rest);
        hashes[k] = h;
        k++;
        p = e;
    }
    while (k-- > 0) {
        size_t n = ends[k];
        struct cache_slot *c = &cache[hashes[k] & (CACHE_SLOTS - 1)];
        if (!cacheable(rest, n) || n >= outsz || !slot_take(c))
            continue;
        bool same = c->len == n && memcmp(c->path, rest, n) == 0;
        dev_t dev = c->dev;
        ino_t ino = c->ino;
        slot_give(c);
        if (!same)
            continue;
        /* The longest remembered one decides: checked once, and on a
         * mismatch forgotten and the walk made from the root. */
        memcpy(out, rest, n);
        out[n] = '\0';
        struct stat st;
        if (lstat(out, &st) == 0 && S_ISDIR(st.st_mode) && st.st_dev == dev &&
            st.st_ino == ino) {
            atomic_fetch_add_explicit(&cache_hits, 1, memory_order_relaxed);
            *ol = n;
            return rest + n;
        }
        if (slot_take(c)) {
            if (c->len == n && memcmp(c->path, rest, n) == 0)
                c->len = 0;
            slot_give(c);
        }
        out[0] = '/';
        out[1] = '\0';
        break;
    }
    atomic_fetch_add_explicit(&cache_misses, 1, memory_order_relaxed);
    return rest;
}

/* Remembers OUT[0..*DIR_LEN), the deepest directory a walk went through,
 * before OUT is cut back (by "..", a symlink, a fold) or at the end; then
 * forgets it. */
static void remember_walked(const char *out, size_t *dir_len, const struct stat *st)
{
    if (*dir_len > 0 && cacheable(out, *dir_len))
        cache_put(out, *dir_len, fnv_step(FNV_START, out, *dir_len), st->st_dev, st->st_ino);
    *dir_len = 0;
}

/*
 * Component by component, like the kernel's lookup: OUT holds the resolved
 * part (no symlinks, so ".." in what follows is its physical parent), REST
 * the components still to walk.  A symlink's target is put in front of
 * REST.  ".." is not folded before resolving: "/ws/link/../x" is where the
 * kernel goes, not "/ws/x".  Once a component does not exist, nothing below
 * it can, and the rest is folded lexically.  OUT is always in the view's
 * terms; only lstat and readlink see the root put before it.
 */
int policy_path_resolve_in(const struct policy_path_view *view, const char *base,
                           const char *path, unsigned flags, char *out, size_t outsz)
{
    char rest[PATH_MAX], link[PATH_MAX], tmp[PATH_MAX];
    size_t ol = 1, links = 0;
    bool nofollow = (flags & POLICY_PATH_NOFOLLOW) != 0;
    int n;

    if (start_at_root(out, outsz) < 0)
        return -1;
    /* absolute, but ".." kept: join by text only */
    if (path[0] == '/' || base == NULL)
        n = snprintf(rest, sizeof(rest), "%s", path);
    else
        n = snprintf(rest, sizeof(rest), "%s/%s", base, path);
    if (n < 0 || (size_t)n >= sizeof(rest)) {
        errno = ENAMETOOLONG;
        return -1;
    }

    const char *p = rest;
    /* The deepest directory walked since OUT was last cut back (OUT's
     * length then, its identity): remembered before the next cut. */
    bool use_cache = own_view(view) && atomic_load_explicit(&cache_on, memory_order_relaxed);
    size_t dir_len = 0;
    struct stat dir_st = {0}, st;
    if (use_cache)
        p = cache_recall(rest, out, &ol, outsz);
    for (;;) {
        size_t cn;
        p = next_comp(p, &cn);
        if (cn == 0)
            break;
        const char *after = p + cn;
        bool last = true;
        for (const char *q = after; *q != '\0'; q++)
            if (*q != '/') {
                last = false;
                break;
            }

        if ((cn == 1 && p[0] == '.') || (cn == 2 && p[0] == '.' && p[1] == '.')) {
            /* OUT has no symlink in it: its ".." is the physical parent */
            if (cn == 2)
                remember_walked(out, &dir_len, &dir_st);
            if (cn == 2 && fold_into(out, &ol, outsz, "..") < 0)
                return -1;
            p = after;
            continue;
        }
        size_t before = ol;
        if (push_comp(out, &ol, outsz, p, cn) < 0)
            return -1;
        if (last && nofollow)
            break;
        if (is_proc_self(out, ol)) {
            if (own_view(view) || view->pid <= 0) {
                p = after;
                continue;
            }
            proc_self_in_view(view, out, &ol, outsz);
        }

        ssize_t ln = view_look(view, out, link, sizeof(link), &st);
        if (ln < 0) {
            /* not there (or cannot be looked at): keep the rest as written */
            remember_walked(out, &dir_len, &dir_st);
            if (fold_into(out, &ol, outsz, after) < 0)
                return -1;
            break;
        }
        if (ln == 0) {
            if (use_cache && !last && S_ISDIR(st.st_mode)) {
                dir_len = ol;
                dir_st = st;
            }
            p = after;
            continue;
        }
        /* In /proc, "pipe:[123]", "socket:[..]", "anon_inode:..", and
         * "/memfd:name (deleted)" name no file: the path itself is the best
         * name of what it opens (a rule can name it), unless the caller
         * must know a memfd when it sees one (the supervisor refuses to
         * run one). */
        remember_walked(out, &dir_len, &dir_st);
        if (strncmp(out, "/proc/", 6) == 0 &&
            (link[0] != '/' || strncmp(link, "/memfd:", 7) == 0)) {
            if ((flags & POLICY_PATH_MEMFD_NAME) && strncmp(link, "/memfd:", 7) == 0) {
                if ((size_t)ln >= outsz) {
                    errno = ENAMETOOLONG;
                    return -1;
                }
                memcpy(out, link, (size_t)ln + 1);
                return 0;
            }
            if (fold_into(out, &ol, outsz, after) < 0)
                return -1;
            break;
        }
        if (++links > RESOLVE_MAX_LINKS) {
            errno = ELOOP;
            return -1;
        }
        n = snprintf(tmp, sizeof(tmp), "%s%s", link, after);
        if (n < 0 || (size_t)n >= sizeof(tmp)) {
            errno = ENAMETOOLONG;
            return -1;
        }
        memcpy(rest, tmp, (size_t)n + 1);
        p = rest;
        if (link[0] == '/') {
            ol = 1;
        } else {
            ol = before;
        }
        out[ol] = '\0';
    }
    remember_walked(out, &dir_len, &dir_st);
    return 0;
}

int policy_path_resolve(const char *base, const char *path, bool nofollow,
                        char *out, size_t outsz)
{
    return policy_path_resolve_in(NULL, base, path, nofollow ? POLICY_PATH_NOFOLLOW : 0,
                                  out, outsz);
}

int policy_path_expand(const struct policy *p, const char *path, char *out, size_t outsz)
{
    const char *home = p->info.home;
    char tmp[PATH_MAX];

    if ((path[0] == '~' && (path[1] == '/' || path[1] == '\0')) && home != NULL) {
        int n = snprintf(tmp, sizeof(tmp), "%s/%s", home, path[1] ? path + 2 : "");
        if (n < 0 || (size_t)n >= sizeof(tmp)) {
            errno = ENAMETOOLONG;
            return -1;
        }
        path = tmp;
    }
    return policy_path_lexical(p->info.workspace, path, out, outsz);
}

/* ---- PATH ------------------------------------------------------------------ */

static int probe_exec(const char *candidate)
{
    struct stat st;
    if (stat(candidate, &st) < 0)
        return ENOENT;
    if (!S_ISREG(st.st_mode) || access(candidate, X_OK) < 0)
        return EACCES;
    return 0;
}

int policy_path_search(const char *file, const char *pathvar, policy_path_probe probe,
                       char *out, size_t outsz)
{
    size_t fl = strlen(file);
    bool saw_eacces = false;

    if (fl == 0) {
        errno = ENOENT;
        return -1;
    }
    if (pathvar == NULL)
        pathvar = POLICY_PATH_DEFAULT;
    if (probe == NULL)
        probe = probe_exec;
    for (const char *p = pathvar;; p++) {
        const char *s = p;
        while (*p != '\0' && *p != ':')
            p++;
        size_t dl = (size_t)(p - s);
        if (dl == 0) {          /* an empty entry is the current directory */
            s = ".";
            dl = 1;
        }
        /* a candidate too long to name is not there (execvp skips it) */
        if (dl + 1 + fl < outsz) {
            memcpy(out, s, dl);
            out[dl] = '/';
            memcpy(out + dl + 1, file, fl + 1);
            int e = probe(out);
            if (e == 0)
                return 0;
            if (e == EACCES)
                saw_eacces = true;
        }
        if (*p == '\0')
            break;
    }
    errno = saw_eacces ? EACCES : ENOENT;
    return -1;
}

/* ---- the words of a typed command -------------------------------------- */

int policy_path_shell_words(const char *cmd, char *store, size_t storesz,
                            char **words, int maxw)
{
    int n = 0;
    size_t o = 0;
    const char *s = cmd;
    while (*s != '\0') {
        while (*s == ' ' || *s == '\t' || *s == '\n')
            s++;
        if (*s == '\0')
            break;
        if (n + 1 >= maxw)
            return -1;
        words[n++] = store + o;
        while (*s != '\0' && *s != ' ' && *s != '\t' && *s != '\n') {
            if (o + 2 > storesz)
                return -1;
            if (*s == '\'' || *s == '"') {
                /* '...' takes every character as it is; "..." all but
                 * \" \\ and \$, which stand for the second character */
                char q = *s++;
                for (; *s != '\0' && *s != q; s++) {
                    if (q == '"' && *s == '\\' && (s[1] == '"' || s[1] == '\\' || s[1] == '$'))
                        s++;
                    if (o + 2 > storesz)
                        return -1;
                    store[o++] = *s;
                }
                if (*s)
                    s++;
            } else if (*s == '\\' && s[1] != '\0') {
                store[o++] = s[1];
                s += 2;
            } else {
                store[o++] = *s++;
            }
        }
        store[o++] = '\0';
    }
    if (maxw < 1)
        return -1;
    words[n] = NULL;
    return n;
}
