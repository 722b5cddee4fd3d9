// glob.c — the contract's glob language on absolute paths (policy.h).
// (Line comments here, since the examples contain the C comment opener.)
//
//   *      any characters within one segment (dotfiles included)
//   **     as a whole segment: zero or more segments ("/a/**/b" matches
//          "/a/b"); at the end, "X/**" matches X itself and all below it;
//          inside a segment ("/x**"): any characters, '/' included
//   ?      one character other than '/'
//   [...]  one character of a class: ranges a-z, negation [!...] or [^...];
//          a ']' first in the class is literal; never matches '/'
//   \c     the character c itself
//
// Patterns are compiled once (glob_prepare) into a literal prefix and a
// literal suffix that every match must carry, so that the hot path rejects
// most rules with one memcmp and runs the matcher only on candidates.
#include "internal.h"

#include <errno.h>
#include <string.h>

static bool is_meta(char c)
{
    return c == '*' || c == '?' || c == '[' || c == '\\';
}

/* Matches the class at P (just past '['), against C.  *END is set past ']'. */
static bool class_match(const char *p, char c, const char **end)
{
    bool neg = false, hit = false, first = true;

    if (*p == '!' || *p == '^') {
        neg = true;
        p++;
    }
    while (*p != '\0' && (*p != ']' || first)) {
        char lo, hi;
        first = false;
        if (*p == '\\' && p[1] != '\0')
            p++;
        lo = hi = *p++;
        if (*p == '-' && p[1] != ']' && p[1] != '\0') {
            p++;
            if (*p == '\\' && p[1] != '\0')
                p++;
            hi = *p++;
        }
        if ((unsigned char)c >= (unsigned char)lo && (unsigned char)c <= (unsigned char)hi)
            hit = true;
    }
    *end = *p == ']' ? p + 1 : p;
    return c != '/' && c != '\0' && hit != neg;
}

/* The matcher.  START is the pattern's beginning, to know whether a "**"
 * begins a segment.  Recursion depth is bounded by the number of stars. */
static bool gmatch(const char *start, const char *p, const char *s)
{
    for (;;) {
        switch (*p) {
        case '\0':
            return *s == '\0';
        case '*':
            if (p[1] == '*') {
                const char *q = p + 2;
                bool seg = (p == start || p[-1] == '/');
                while (*q == '*')       /* "***" is refused at load */
                    q++;
                if (seg && *q == '/') {
                    // "/**/": zero segments, or up to any later '/'
                    if (gmatch(start, q + 1, s))
                        return true;
                    for (const char *t = s; *t != '\0'; t++)
                        if (*t == '/' && gmatch(start, q + 1, t + 1))
                            return true;
                    return false;
                }
                if (*q == '\0')
                    return true;
                for (const char *t = s;; t++) {
                    if (gmatch(start, q, t))
                        return true;
                    if (*t == '\0')
                        return false;
                }
            }
            for (const char *t = s;; t++) {
                if (gmatch(start, p + 1, t))
                    return true;
                if (*t == '\0' || *t == '/')
                    return false;
            }
        case '?':
            if (*s == '\0' || *s == '/')
                return false;
            p++, s++;
            break;
        case '[': {
            const char *end;
            if (!class_match(p + 1, *s, &end))
                return false;
            p = end, s++;
            break;
        }
        case '/':
            /* "X/" "**" also matches X itself */
            if (*s == '\0' && p[1] == '*' && p[2] == '*' && p[3] == '\0')
                return true;
            if (*s != '/')
                return false;
            p++, s++;
            break;
        case '\\':
            if (p[1] != '\0')
                p++;
            /* fall through */
        default:
            if (*p != *s)
                return false;
            p++, s++;
            break;
        }
    }
}

bool policy_glob_match(const char *pattern, const char *path)
{
    return gmatch(pattern, pattern, path);
}

const char *glob_check(const char *text, size_t len)
{
    if (len == 0)
        return "empty glob";
    if (memchr(text, '\0', len) != NULL)
        return "NUL character in glob";
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '\\') {
            if (i + 1 == len)
                return "glob ends with a lone backslash";
            i++;
        } else if (text[i] == '*' && i + 2 < len && text[i + 1] == '*' && text[i + 2] == '*') {
            return "\"***\" in glob (use \"**\" for any depth)";
        } else if (text[i] == '[') {
            size_t j = i + 1;
            if (j < len && (text[j] == '!' || text[j] == '^'))
                j++;
            if (j < len && text[j] == ']')
                j++;
            while (j < len && text[j] != ']') {
                if (text[j] == '\\')
                    j++;
                j++;
            }
            if (j >= len)
                return "unclosed \"[\" in glob";
            i = j;
        }
    }
    return NULL;
}

/* Where a character pair lands in the 128-bit filter. */
static inline unsigned bigram_bit(unsigned char a, unsigned char b)
{
    return ((unsigned)a * 31u + (unsigned)b) & 127u;
}

static inline void bigram_set(uint64_t *bits, unsigned char a, unsigned char b)
{
    unsigned k = bigram_bit(a, b);
    bits[k >> 6] |= 1ull << (k & 63);
}

void glob_path_init(struct glob_path *gp, const char *path)
{
    const unsigned char *s = (const unsigned char *)path;
    size_t i = 0;
    gp->path = path;
    gp->bigrams[0] = gp->bigrams[1] = 0;
    if (s[0] != '\0')
        for (i = 1; s[i] != '\0'; i++)
            bigram_set(gp->bigrams, s[i - 1], s[i]);
    gp->len = i;
}

/* The pairs inside the literal runs of PAT: chars between metacharacters,
 * outside classes, without a '/' that touches a "**" (which may match
 * nothing, taking the slash with it).  Every match contains them. */
static void pattern_bigrams(const char *pat, uint64_t *bits)
{
    size_t n = strlen(pat), i = 0;
    bits[0] = bits[1] = 0;
    while (i < n) {
        if (pat[i] == '[') {
            const char *end;
            (void)class_match(pat + i + 1, 'a', &end);
            i = (size_t)(end - pat);
            continue;
        }
        if (pat[i] == '\\') {
            i += 2;
            continue;
        }
        if (is_meta(pat[i])) {
            i++;
            continue;
        }
        size_t b = i, e = i;
        while (e < n && !is_meta(pat[e]))
            e++;
        if (b >= 2 && pat[b - 1] == '*' && pat[b - 2] == '*' && pat[b] == '/')
            b++;
        if (e + 1 < n && pat[e] == '*' && pat[e + 1] == '*' && e > b && pat[e - 1] == '/')
            e--;
        for (size_t k = b + 1; k < e; k++)
            bigram_set(bits, (unsigned char)pat[k - 1], (unsigned char)pat[k]);
        i = e > i ? e : i + 1;
        while (i < n && !is_meta(pat[i]))
            i++;
    }
}

void glob_prepare(struct glob *g)
{
    const char *pat = g->pat;
    size_t n = strlen(pat), plen = 0, s;

    while (plen < n && !is_meta(pat[plen]))
        plen++;
    g->alt = NULL;
    if (plen == n) {
        g->kind = GLOB_LITERAL;
        g->plen = n;
        g->suf = pat + n;
        g->slen = 0;
        return;
    }
    /* "X/" "**" (X literal) is a tree; "/" "**" is everything */
    if (n >= 3 && plen == n - 2 && pat[plen - 1] == '/' && pat[plen] == '*' && pat[plen + 1] == '*') {
        g->kind = GLOB_TREE;
        g->plen = plen - 1;
        g->suf = pat + n;
        g->slen = 0;
        return;
    }
    g->kind = GLOB_GENERAL;
    /* "X/" "**" may match X itself: the slash is not a required prefix */
    if (plen > 0 && pat[plen - 1] == '/' && pat[plen] == '*' && pat[plen + 1] == '*')
        plen--;
    g->plen = plen;
    /* the literal tail after the last metacharacter; an escape or class
     * bracket ends it early, which only makes the check weaker, never wrong */
    s = n;
    while (s > 0 && !is_meta(pat[s - 1]) && pat[s - 1] != ']')
        s--;
    g->suf = pat + s;
    g->slen = n - s;
    pattern_bigrams(pat, g->bigrams);
}

bool glob_match_compiled(const struct glob *g, const struct glob_path *gp)
{
    const char *path = gp->path;
    size_t len = gp->len;

    switch (g->kind) {
    case GLOB_LITERAL:
        if (len == g->plen && memcmp(path, g->pat, len) == 0)
            return true;
        return g->alt != NULL && strcmp(path, g->alt) == 0;
    case GLOB_TREE:
        if (g->plen == 0)
            return true;
        return len >= g->plen && memcmp(path, g->pat, g->plen) == 0 &&
               (path[g->plen] == '\0' || path[g->plen] == '/');
    case GLOB_GENERAL:
        break;
    }
    if ((g->bigrams[0] & ~gp->bigrams[0]) != 0 || (g->bigrams[1] & ~gp->bigrams[1]) != 0)
        return false;
    if (len < g->plen || memcmp(path, g->pat, g->plen) != 0)
        return false;
    if (len < g->slen || memcmp(path + len - g->slen, g->suf, g->slen) != 0)
        return false;
    return gmatch(g->pat, g->pat, path);
}

int policy_glob_root(const char *pattern, char *out, size_t outsz)
{
    size_t n = 0, cut;

    while (pattern[n] != '\0' && !is_meta(pattern[n]))
        n++;
    if (pattern[n] == '\0') {
        cut = n;
    } else {
        /* back to the last '/' before the first wildcard */
        cut = n;
        while (cut > 0 && pattern[cut - 1] != '/')
            cut--;
        if (cut > 1)
            cut--;          /* drop the slash, but keep "/" itself */
    }
    if (cut == 0 && pattern[0] == '/')
        cut = 1;
    if (cut + 1 > outsz) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(out, pattern, cut);
    out[cut] = '\0';
    return 0;
}
