/*
 * cmdfilter.c — the literal prefilter of a command pattern (internal.h:
 * cmd_filter_build, cmd_filter_pass).
 *
 * Why: every exec an agent makes is judged against the command patterns,
 * and the interpreter runs each of them at every position of the command
 * line.  A compiler's command line (cc1 with twenty options) took the
 * default policy's eleven patterns 150-200 us, in a process that runs for
 * a few milliseconds, and made the process load libpcre2 first.  Almost
 * no command line can match any of them: they need words like "rm ",
 * "curl", "of=/dev/" that a compiler line does not have.
 *
 * What: from the pattern's text, a set of clauses that every string the
 * pattern matches satisfies: each clause is a few literal strings, and a
 * match contains at least one of them.  A line that fails a clause cannot
 * match, so the pattern is not run.  The reading is deliberately narrow:
 * literal characters, \s (one character of the six it stands for), groups,
 * alternation, quantifiers, classes and the usual escapes; a leading (?i).
 * Anything else (other inline options, \Q, \x, verbs, recursion...) gives
 * no filter for that pattern, which is then always run: the filter may
 * let through what cannot match, never hold back what can.
 *
 * This relies on how policy patterns are compiled (command.c: no options,
 * so no UTF, no caseless except by a leading (?i), no extended syntax, the
 * default character tables, where \s is [\t\n\v\f\r ] and case is ASCII).
 * A change there must be mirrored here; test_commands.c checks the filter
 * against PCRE2 on every shipped pattern.
 *
 * Encoding: clauses joined by '\1', the literals of a clause by '\2'; in
 * a literal, '\3' stands for \s.  A pattern character from NUL to '\3' is
 * read as "any character".  Clauses come most selective first, so that a
 * line that cannot match is usually turned away by the first one.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define MAX_ALTS 32         /* literals in one clause */
#define MAX_LIT 48          /* bytes in one literal: longer ones are cut */
#define MAX_CLAUSES 12      /* per sequence: the first ones are kept */
#define MAX_DEPTH 24        /* group nesting */

#define WS '\3'              /* \s in a literal */

/* A disjunction: the subject holds at least one of ALT[0..N). */
struct clause {
    size_t n;
    char alt[MAX_ALTS][MAX_LIT + 1];
};

/* A conjunction of clauses. */
struct conj {
    size_t n;
    struct clause *c[MAX_CLAUSES];
};

struct reader {
    const char *p, *end;
    bool bail;          /* outside what this file reads: no filter */
    int depth;
};

static void conj_free(struct conj *j)
{
    for (size_t i = 0; i < j->n; i++)
        free(j->c[i]);
    j->n = 0;
}

/* Takes ownership of C. */
static void conj_add(struct conj *j, struct clause *c)
{
    if (c == NULL || c->n == 0 || j->n == MAX_CLAUSES) {
        free(c);
        return;
    }
    j->c[j->n++] = c;
}

/* How selective C is: the literal characters (not \s) of its shortest
 * literal. */
static size_t clause_minlen(const struct clause *c)
{
    size_t m = MAX_LIT;
    for (size_t i = 0; i < c->n; i++) {
        size_t k = 0;
        for (const char *s = c->alt[i]; *s; s++)
            k += *s != WS;
        if (k < m)
            m = k;
    }
    return m;
}

/* qsort order, most selective first: the longest shortest literal, then
 * the fewest literals. */
static int clause_cmp(const void *a, const void *b)
{
    const struct clause *x = *(const struct clause *const *)a;
    const struct clause *y = *(const struct clause *const *)b;
    size_t lx = clause_minlen(x), ly = clause_minlen(y);
    if (lx != ly)
        return lx > ly ? -1 : 1;
    return x->n < y->n ? -1 : x->n > y->n;
}

/* The clause of J that filters best (first in clause_cmp's order).  NULL
 * if J has none.  J keeps it. */
static const struct clause *conj_best(const struct conj *j)
{
    const struct clause *best = NULL;
    for (size_t i = 0; i < j->n; i++)
        if (best == NULL || clause_cmp(&j->c[i], &best) < 0)
            best = j->c[i];
    return best;
}

/* ---- the run of literal characters being read ------------------------------ */

/* RUN holds the literal read since the last break (one string: \s is a
 * character of its own, WS); a break turns it into a clause. */
static void run_break(struct conj *j, struct clause **run)
{
    if (*run != NULL && (*run)->n > 0 && (*run)->alt[0][0] != '\0')
        conj_add(j, *run);
    else
        free(*run);
    *run = NULL;
}

/* Appends character C (WS for \s) to the run. */
static void run_add(struct conj *j, struct clause **run, char c, struct reader *r)
{
    if (*run != NULL && strlen((*run)->alt[0]) >= MAX_LIT)
        run_break(j, run);
    if (*run == NULL) {
        *run = calloc(1, sizeof **run);
        if (*run == NULL) {
            r->bail = true;
            return;
        }
        (*run)->n = 1;
    }
    size_t l = strlen((*run)->alt[0]);
    (*run)->alt[0][l] = c;
    (*run)->alt[0][l + 1] = '\0';
}

/* ---- the pattern ----------------------------------------------------------- */

enum atom { A_LIT, A_SPACE, A_ANY, A_ZERO, A_GROUP };

static struct conj parse_alternation(struct reader *r);

/* Skips a character class; R->p is just after '['. */
static void skip_class(struct reader *r)
{
    if (r->p < r->end && *r->p == '^')
        r->p++;
    if (r->p < r->end && *r->p == ']')
        r->p++;         /* a leading ']' is a member */
    while (r->p < r->end && *r->p != ']') {
        if (*r->p == '\\') {
            if (r->p + 1 >= r->end || r->p[1] == 'Q' || r->p[1] == 'E') {
                r->bail = true;
                return;
            }
            r->p += 2;
        } else if (*r->p == '[' && r->p + 1 < r->end && r->p[1] == ':') {
            const char *e = memchr(r->p + 2, ']', (size_t)(r->end - r->p - 2));
            if (e == NULL || e[-1] != ':') {
                r->bail = true;
                return;
            }
            r->p = e + 1;
        } else {
            r->p++;
        }
    }
    if (r->p >= r->end)
        r->bail = true;
    else
        r->p++;
}

/* Reads a quantifier if one follows: its minimum in *MIN, and in *ONCE
 * whether it allows exactly one (as no quantifier does). */
static void read_quantifier(struct reader *r, unsigned *min, bool *once)
{
    *min = 1;
    *once = true;
    if (r->p >= r->end)
        return;
    char q = *r->p;
    *once = false;
    if (q == '?' || q == '*') {
        *min = 0;
        r->p++;
    } else if (q == '+') {
        r->p++;
    } else if (q == '{') {
        const char *s = r->p + 1;
        unsigned n = 0;
        size_t digits = 0;
        while (s < r->end && *s >= '0' && *s <= '9' && digits < 6) {
            n = n * 10 + (unsigned)(*s - '0');
            s++;
            digits++;
        }
        /* {n}, {n,}, {n,m}; anything else ({,m}, a literal '{') is
         * read differently by different PCRE2 versions: no filter */
        if (digits == 0 || digits == 6) {
            r->bail = true;
            return;
        }
        bool exact = true;
        if (s < r->end && *s == ',') {
            s++;
            exact = false;
            while (s < r->end && *s >= '0' && *s <= '9')
                s++;
        }
        if (s >= r->end || *s != '}') {
            r->bail = true;
            return;
        }
        *min = n;
        *once = exact && n == 1;
        r->p = s + 1;
    } else {
        *once = true;
        return;
    }
    if (r->p < r->end && (*r->p == '?' || *r->p == '+'))
        r->p++;     /* lazy or possessive: the same strings */
    if (r->p < r->end && (*r->p == '?' || *r->p == '*' || *r->p == '+' || *r->p == '{'))
        r->bail = true;
}

/* Reads one escape (R->p is just after the backslash). */
static enum atom read_escape(struct reader *r, char *lit)
{
    if (r->p >= r->end) {
        r->bail = true;
        return A_ANY;
    }
    char e = *r->p++;
    switch (e) {
    case 's':
        return A_SPACE;
    case 'S': case 'w': case 'W': case 'd': case 'D': case 'h': case 'H':
    case 'v': case 'V': case 'R': case 'X': case 'C':
        return A_ANY;
    case 'N':
        if (r->p < r->end && *r->p == '{')
            r->bail = true;
        return A_ANY;
    case 'b': case 'B': case 'A': case 'z': case 'Z': case 'G': case 'K':
        return A_ZERO;
    case 'n': *lit = '\n'; return A_LIT;
    case 't': *lit = '\t'; return A_LIT;
    case 'r': *lit = '\r'; return A_LIT;
    case 'f': *lit = '\f'; return A_LIT;
    case 'e': *lit = '\033'; return A_LIT;
    case 'a': *lit = '\a'; return A_LIT;
    default:
        break;
    }
    if (e >= '1' && e <= '9') {
        /* \1..\9: a back reference (any text) or an octal character; a
         * second digit makes it ambiguous */
        if (r->p < r->end && *r->p >= '0' && *r->p <= '9')
            r->bail = true;
        return A_ANY;
    }
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || e == '0') {
        r->bail = true;     /* \x, \o, \c, \p, \g, \k, \Q, \0 ... */
        return A_ANY;
    }
    *lit = e;               /* an escaped punctuation character */
    return A_LIT;
}

/* Reads a group (R->p is just after '('); *J gets what it requires. */
static enum atom read_group(struct reader *r, struct conj *j)
{
    bool look = false;
    if (r->p < r->end && *r->p == '*') {
        r->bail = true;     /* (*VERB) */
        return A_ANY;
    }
    if (r->p < r->end && *r->p == '?') {
        r->p++;
        const char *s = r->p;
        size_t left = (size_t)(r->end - s);
        if (left >= 1 && (*s == ':' || *s == '>' || *s == '|')) {
            r->p += 1;
        } else if (left >= 1 && (*s == '=' || *s == '!')) {
            r->p += 1;
            look = true;
        } else if (left >= 2 && s[0] == '<' && (s[1] == '=' || s[1] == '!')) {
            r->p += 2;
            look = true;
        } else if (left >= 1 && (*s == '<' || *s == '\'' || (*s == 'P' && left >= 2 && s[1] == '<'))) {
            /* a named group */
            char close = *s == '\'' ? '\'' : '>';
            r->p += *s == 'P' ? 2 : 1;
            while (r->p < r->end && *r->p != close) {
                char c = *r->p;
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                      (c >= '0' && c <= '9') || c == '_')) {
                    r->bail = true;
                    return A_ANY;
                }
                r->p++;
            }
            if (r->p >= r->end) {
                r->bail = true;
                return A_ANY;
            }
            r->p++;
        } else {
            r->bail = true;     /* options, comments, recursion, conditions */
            return A_ANY;
        }
    }
    if (++r->depth > MAX_DEPTH) {
        r->bail = true;
        return A_ANY;
    }
    struct conj inner = parse_alternation(r);
    r->depth--;
    if (r->bail || r->p >= r->end || *r->p != ')') {
        conj_free(&inner);
        r->bail = true;
        return A_ANY;
    }
    r->p++;
    if (look) {
        conj_free(&inner);  /* zero width: it requires nothing of the match */
        return A_ZERO;
    }
    *j = inner;
    return A_GROUP;
}

/* One branch: atoms up to '|', ')' or the end. */
static struct conj parse_sequence(struct reader *r)
{
    struct conj j = { 0 };
    struct clause *run = NULL;
    while (!r->bail && r->p < r->end && *r->p != '|' && *r->p != ')') {
        char c = *r->p++;
        char lit = c;
        struct conj group = { 0 };
        enum atom a;
        switch (c) {
        case '\\': a = read_escape(r, &lit); break;
        case '.': a = A_ANY; break;
        case '^': case '$': a = A_ZERO; break;
        case '[': skip_class(r); a = A_ANY; break;
        case '(': a = read_group(r, &group); break;
        case '*': case '+': case '?': case '{':
            r->bail = true;     /* nothing to repeat, or a literal brace */
            a = A_ANY;
            break;
        default: a = A_LIT; break;
        }
        unsigned min;
        bool once;
        read_quantifier(r, &min, &once);
        if (r->bail) {
            conj_free(&group);
            break;
        }
        if (a == A_LIT && (unsigned char)lit <= (unsigned char)WS)
            a = A_ANY;      /* our separators: taken for any character */
        if ((a == A_LIT || a == A_SPACE) && min > 0) {
            run_add(&j, &run, (char)(a == A_LIT ? lit : WS), r);
            /* after a repeated character the next one need not follow it */
            if (!once)
                run_break(&j, &run);
            continue;
        }
        run_break(&j, &run);
        if (a == A_GROUP) {
            if (min > 0)
                for (size_t i = 0; i < group.n; i++)
                    conj_add(&j, group.c[i]);
            else
                conj_free(&group);
        }
    }
    run_break(&j, &run);
    return j;
}

/* The clause "A or B", or NULL if it would be too long. */
static struct clause *clause_or(const struct clause *a, const struct clause *b)
{
    if (a->n + b->n > MAX_ALTS)
        return NULL;
    struct clause *u = calloc(1, sizeof *u);
    if (u == NULL)
        return NULL;
    for (size_t i = 0; i < a->n; i++)
        memcpy(u->alt[u->n++], a->alt[i], sizeof a->alt[i]);
    for (size_t i = 0; i < b->n; i++)
        memcpy(u->alt[u->n++], b->alt[i], sizeof b->alt[i]);
    return u;
}

/* Keeps only the best clause of J. */
static void conj_keep_best(struct conj *j)
{
    const struct clause *b = conj_best(j);
    struct conj k = { 0 };
    for (size_t i = 0; i < j->n; i++) {
        if (j->c[i] == b)
            k.c[k.n++] = j->c[i];
        else
            free(j->c[i]);
    }
    *j = k;
}

/* (A1 and A2) or (B1 and B2) is (A1 or B1) and (A1 or B2) and (A2 or B1)
 * and (A2 or B2).  When that is more than MAX_CLAUSES, each side keeps
 * its best clause first.  A side with no clause gives none. */
static struct conj conj_or(struct conj *a, struct conj *b)
{
    struct conj j = { 0 };
    if (a->n == 0 || b->n == 0)
        goto out;
    if (a->n * b->n > MAX_CLAUSES) {
        conj_keep_best(a);
        conj_keep_best(b);
    }
    for (size_t i = 0; i < a->n; i++)
        for (size_t k = 0; k < b->n; k++)
            conj_add(&j, clause_or(a->c[i], b->c[k]));
out:
    conj_free(a);
    conj_free(b);
    return j;
}

/* Branches separated by '|': a match holds what one of them requires. */
static struct conj parse_alternation(struct reader *r)
{
    struct conj j = parse_sequence(r);
    while (!r->bail && r->p < r->end && *r->p == '|') {
        r->p++;
        struct conj b = parse_sequence(r);
        j = conj_or(&j, &b);
    }
    return j;
}

char *cmd_filter_build(struct arena *a, const char *pattern, size_t len, bool *caseless)
{
    struct reader r = { .p = pattern, .end = pattern + len };
    *caseless = false;
    if (len >= 4 && memcmp(pattern, "(?i)", 4) == 0) {
        *caseless = true;
        r.p += 4;
    }
    struct conj j = parse_alternation(&r);
    if (r.bail || r.p != r.end) {
        conj_free(&j);
        return NULL;
    }
    qsort(j.c, j.n, sizeof(struct clause *), clause_cmp);
    /* Encode; a literal that a caseless match could meet in other bytes
     * than ASCII case drops its clause. */
    size_t cap = 1;
    for (size_t i = 0; i < j.n; i++)
        for (size_t k = 0; k < j.c[i]->n; k++)
            cap += strlen(j.c[i]->alt[k]) + 1;
    char *out = arena_alloc(a, cap), *o = out;
    for (size_t i = 0; out != NULL && i < j.n; i++) {
        const struct clause *c = j.c[i];
        bool usable = true;
        for (size_t k = 0; k < c->n; k++)
            for (const unsigned char *s = (const unsigned char *)c->alt[k]; *s; s++)
                if (*caseless && *s >= 0x80)
                    usable = false;
        if (!usable)
            continue;
        if (o != out)
            *o++ = '\1';
        for (size_t k = 0; k < c->n; k++) {
            if (k > 0)
                *o++ = '\2';
            for (const char *s = c->alt[k]; *s; s++)
                *o++ = (char)(*caseless && *s >= 'A' && *s <= 'Z' ? *s - 'A' + 'a' : *s);
        }
    }
    if (out != NULL)
        *o = '\0';
    conj_free(&j);
    return out != NULL && out[0] != '\0' ? out : NULL;
}

/* ---- matching -------------------------------------------------------------- */

static bool is_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

/* Does LIT[0..L) match at S? */
static bool same_at(const char *s, const char *lit, size_t l, bool caseless)
{
    for (size_t k = 0; k < l; k++) {
        unsigned char c = (unsigned char)s[k], w = (unsigned char)lit[k];
        if (w == (unsigned char)WS) {
            if (!is_space(c))
                return false;
            continue;
        }
        if (caseless && c >= 'A' && c <= 'Z')
            c = (unsigned char)(c - 'A' + 'a');
        if (c != w)
            return false;
    }
    return true;
}

static bool contains(const char *s, size_t n, const char *lit, size_t l, bool caseless)
{
    if (l > n)
        return false;
    /* the first stretch of plain characters, found with memmem */
    size_t a = 0, e;
    while (a < l && lit[a] == WS)
        a++;
    for (e = a; e < l && lit[e] != WS; e++)
        ;
    if (!caseless && e > a) {
        const char *p = s + a, *last = s + (n - l) + a;     /* where the stretch may start */
        while (p <= last) {
            const char *h = memmem(p, (size_t)(last - p) + (e - a), lit + a, e - a);
            if (h == NULL)
                return false;
            if (same_at(h - a, lit, l, false))
                return true;
            p = h + 1;
        }
        return false;
    }
    /* caseless, or only \s: position by position, on the first byte */
    unsigned char first = (unsigned char)lit[0];
    for (size_t i = 0; i + l <= n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (first == (unsigned char)WS ? !is_space(c)
                                       : (c | (caseless && c >= 'A' && c <= 'Z' ? 0x20 : 0)) != first)
            continue;
        if (same_at(s + i, lit, l, caseless))
            return true;
    }
    return false;
}

bool cmd_filter_pass(const char *need, bool caseless, const char *s, size_t n)
{
    if (need == NULL)
        return true;
    const char *c = need;
    while (*c != '\0') {
        bool found = false;
        for (;;) {
            size_t l = strcspn(c, "\1\2");
            if (!found && l > 0 && contains(s, n, c, l, caseless))
                found = true;
            c += l;
            if (*c != '\2')
                break;
            c++;
        }
        if (!found)
            return false;
        if (*c == '\1')
            c++;
    }
    return true;
}
