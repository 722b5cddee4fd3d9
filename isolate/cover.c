/*
 * cover.c — the deny cover: which files and directories that exist at start
 * the mount namespace covers, because files.read.deny or files.write.deny
 * names them.
 *
 * Literal paths and DIR/ ** patterns cost one lstat.  Every other glob is
 * matched during one walk of its root (one walk per distinct root), to the
 * end: no depth or entry limit, because a cover that stops somewhere leaves
 * a static program free to read what lies beyond (a .env at depth 14, the
 * 51st of 300 *.pem).  What bounds the walk instead is time, and it is
 * never silent:
 *   - past one second a progress line goes to REQ->progress every second;
 *   - past the budget (REQ->cover_budget_ms, default
 *     ISO_COVER_BUDGET_MS_DEFAULT) the walk stops and the cover is marked
 *     incomplete, with the reason;
 *   - so is a directory that cannot be listed, a path too long to mount on,
 *     and a cover needing more mounts than the namespace may hold
 *     (fs.mount-max, less the mounts it starts with).
 * native.c refuses to start on an incomplete cover under native or
 * isolation: required, and records the degradation under auto.
 *
 * Skipped on purpose: symlinks (the policy judges the file they point to,
 * which has its own entry if it matches), /proc, /sys, /dev, what sbx hides
 * anyway, and git's object store (content-addressed blobs named by their
 * hash: it cannot hold a name a deny list means, and walking it is most of
 * the cost of a big repository).
 */
#include "iso_int.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <bsd/string.h>

/* How often the clock is read during the walk (entries), and when the
 * first progress line appears (a cover this fast needs no explanation). */
#define CLOCK_EVERY     512
#define PROGRESS_AFTER_MS 1000

/* Mounts the set-up itself adds beyond the plan: the private /tmp, the
 * hides, the keeps bound back, /proc and its read-only parts, the guard. */
#define OWN_MOUNTS 64

/* One deny pattern being expanded: its glob, the same without a trailing
 * "/ **" (a directory pattern), and the last segment of each, used to
 * reject most names with one fnmatch() before the full glob is tried. */
struct deny_pat {
    const char *pattern;
    char dirpat[4096];
    const char *last, *dirlast;         /* NULL: no cheap test possible */
    bool deny_read;                     /* mask; else read-only bind */
    const char *why;
    char root[4096];
};

struct walk {
    struct iso_mounts *mp;
    struct deny_pat *pats;
    size_t npats;
    const char *root;
    FILE *progress;
    uint64_t start_ms, budget_ms, next_progress_ms;
    bool stop;                          /* budget spent or out of memory */
    bool oom;
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void incomplete(struct iso_mounts *mp, const char *fmt, const char *arg)
    __attribute__((format(printf, 2, 0)));
static void incomplete(struct iso_mounts *mp, const char *fmt, const char *arg)
{
    if (mp->incomplete)
        return;                         /* the first reason is the one to fix */
    mp->incomplete = true;
    snprintf(mp->incomplete_why, sizeof mp->incomplete_why, fmt, arg);
}

static const char *last_segment(const char *glob)
{
    const char *l = strrchr(glob, '/');
    l = l ? l + 1 : glob;
    return strstr(l, "**") ? NULL : l;
}

/* A deny-read file with other names: its inode, for the supervised open
 * (the cover masks this name only). */
static int note_links(struct iso_mounts *mp, const char *path)
{
    struct stat st;
    struct iso_inode *l;

    if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink < 2)
        return 0;
    l = reallocarray(mp->links, mp->n_links + 1, sizeof *l);
    if (l == NULL)
        return -1;
    mp->links = l;
    mp->links[mp->n_links].dev = st.st_dev;
    mp->links[mp->n_links].ino = st.st_ino;
    mp->n_links++;
    return 0;
}

static int mark(struct iso_mounts *mp, const struct deny_pat *dp, const char *path, bool is_dir)
{
    if (iso_mounts_skip(mp, path))
        return 0;
    if (dp->deny_read && !is_dir && note_links(mp, path) < 0)
        return -1;
    if (dp->deny_read)
        return iso_mounts_add(mp, is_dir ? ISO_MNT_MASK_DIR : ISO_MNT_MASK_FILE, path, dp->why);
    return iso_mounts_add(mp, ISO_MNT_RO, path, dp->why);
}

/* Applies every pattern of W rooted at W->root to PATH (named NAME).
 * Returns true when PATH is now masked (no need to look inside). */
static bool match_entry(struct walk *w, const char *path, const char *name, bool is_dir)
{
    bool masked = false, matched = false;

    for (size_t i = 0; i < w->npats; i++) {
        const struct deny_pat *dp = &w->pats[i];
        if (strcmp(dp->root, w->root) != 0)
            continue;
        if (dp->dirpat[0]) {
            /* DIR/ **: only a directory matching DIR is covered, whole. */
            if (!is_dir || (dp->dirlast && fnmatch(dp->dirlast, name, 0) != 0)
                || !policy_glob_match(dp->dirpat, path))
                continue;
        } else if ((dp->last && fnmatch(dp->last, name, 0) != 0)
                   || !policy_glob_match(dp->pattern, path)) {
            continue;
        }
        if (mark(w->mp, dp, path, is_dir) < 0) {
            w->oom = w->stop = true;
            return true;
        }
        matched = true;
        masked = masked || (dp->deny_read && is_dir);
    }
    if (matched)
        w->mp->covered++;
    return masked;
}

/* Every CLOCK_EVERY entries: the budget, and a progress line a second. */
static void tick(struct walk *w)
{
    uint64_t t = now_ms(), spent = t - w->start_ms;
    char when[32];

    if (spent > w->budget_ms) {
        snprintf(when, sizeof when, "%.1f", (double)w->budget_ms / 1000.0);
        incomplete(w->mp, "the walk of the deny globs' roots did not finish within its "
                   "budget of %s s (SBX_COVER_BUDGET_MS)", when);
        w->stop = true;
        return;
    }
    if (w->progress && spent >= PROGRESS_AFTER_MS && t >= w->next_progress_ms) {
        fprintf(w->progress, "sbx-guard: covering deny rules: %lu entries walked, %lu "
                "covered, %.0f s of %.0f s (under %s)\n", w->mp->walked, w->mp->covered,
                (double)spent / 1000.0, (double)w->budget_ms / 1000.0, w->root);
        fflush(w->progress);
        w->next_progress_ms = t + 1000;
    }
}

static void walk_dir(struct walk *w, char *path, size_t len)
{
    DIR *d;
    struct dirent *de;

    if (iso_mounts_skip(w->mp, path))
        return;
    d = opendir(path);
    if (d == NULL) {
        /* What cannot be listed cannot be covered, yet may be reachable by
         * name (a directory with x but not r, or out of descriptors). */
        if (errno != ENOENT && errno != ENOTDIR)
            incomplete(w->mp, "cannot list %s to cover what it holds", path);
        return;
    }
    while (!w->stop && (de = readdir(d)) != NULL) {
        size_t nl;
        bool is_dir;

        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (++w->mp->walked % CLOCK_EVERY == 0)
            tick(w);
        if (de->d_type == DT_LNK)
            continue;
        nl = strlen(de->d_name);
        if (len + 1 + nl >= 4096) {
            incomplete(w->mp, "a path under %s is too long to mount on", path);
            continue;
        }
        if (len > 1)
            path[len] = '/';
        memcpy(path + len + (len > 1), de->d_name, nl + 1);
        is_dir = de->d_type == DT_DIR;
        if (de->d_type == DT_UNKNOWN) {
            struct stat st;
            is_dir = lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
        }
        if (!match_entry(w, path, de->d_name, is_dir) && is_dir
            && !(strcmp(de->d_name, "objects") == 0 && len >= 5
                 && strcmp(path + len - 5, "/.git") == 0))
            walk_dir(w, path, len + (len > 1) + nl);
        path[len] = '\0';
    }
    closedir(d);
}

/* Lines of /proc/self/mountinfo: the mounts a new namespace starts with. */
static unsigned long mounts_now(void)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    unsigned long n = 0;
    int c;

    if (f == NULL)
        return 0;
    while ((c = getc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

static unsigned long mount_max(void)
{
    FILE *f = fopen("/proc/sys/fs/mount-max", "re");
    unsigned long v = 100000;           /* the kernel's default */

    if (f) {
        if (fscanf(f, "%lu", &v) != 1)
            v = 100000;
        fclose(f);
    }
    return v;
}

int iso_cover_plan(const struct iso_request *req, struct iso_mounts *mp)
{
    const struct policy_rule *rr, *rw;
    size_t nr = policy_rules(req->policy, POLICY_READ_DENY, &rr);
    size_t nw = policy_rules(req->policy, POLICY_WRITE_DENY, &rw);
    struct deny_pat *pats = calloc(nr + nw + 1, sizeof *pats);
    uint64_t start = now_ms();
    size_t n = 0;
    int rc = -1;

    if (pats == NULL)
        return -1;
    for (size_t i = 0; i < nr + nw; i++) {
        const struct policy_rule *r = i < nr ? &rr[i] : &rw[i - nr];
        struct deny_pat *dp = &pats[n];
        struct stat st;
        size_t pl;

        if (r->pattern == NULL || policy_glob_root(r->pattern, dp->root, sizeof dp->root) < 0)
            continue;
        dp->pattern = r->pattern;
        dp->deny_read = i < nr;
        dp->why = r->section;
        pl = strlen(dp->pattern);
        if (pl > 3 && strcmp(dp->pattern + pl - 3, "/**") == 0 && pl - 3 < sizeof dp->dirpat) {
            memcpy(dp->dirpat, dp->pattern, pl - 3);
            dp->dirpat[pl - 3] = '\0';
            dp->dirlast = last_segment(dp->dirpat);
        }
        dp->last = last_segment(dp->pattern);
        if (lstat(dp->root, &st) < 0 || S_ISLNK(st.st_mode))
            continue;
        if (strcmp(dp->root, dp->pattern) == 0 || strcmp(dp->root, dp->dirpat) == 0) {
            /* a literal path or DIR/ ** */
            if (mark(mp, dp, dp->root, S_ISDIR(st.st_mode)) < 0)
                goto out;
            mp->covered++;
            continue;
        }
        if (S_ISDIR(st.st_mode))
            n++;
    }
    for (size_t i = 0; i < n; i++) {
        bool seen = false;
        for (size_t j = 0; j < i; j++)
            seen = seen || strcmp(pats[j].root, pats[i].root) == 0;
        if (!seen) {
            struct walk w = {
                .mp = mp, .pats = pats, .npats = n, .root = pats[i].root,
                .progress = req->progress, .start_ms = start,
                .budget_ms = req->cover_budget_ms ? req->cover_budget_ms
                                                  : ISO_COVER_BUDGET_MS_DEFAULT,
            };
            char path[4096];
            strlcpy(path, pats[i].root, sizeof path);
            walk_dir(&w, path, strlen(path));
            if (w.oom)
                goto out;
            if (w.stop)
                break;
        }
    }
    {
        unsigned long have = mounts_now(), max = mount_max();
        if (have + mp->n + OWN_MOUNTS > max) {
            char what[160];
            snprintf(what, sizeof what, "%zu mounts, and the namespace may hold %lu "
                     "(fs.mount-max) of which %lu are taken", mp->n, max, have);
            incomplete(mp, "the cover needs %s", what);
        }
    }
    mp->walk_ms = (unsigned)(now_ms() - start);
    rc = 0;
out:
    free(pats);
    return rc;
}
