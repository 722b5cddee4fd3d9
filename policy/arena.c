/* arena.c — the one allocation pool a loaded policy lives in (internal.h).
 * Chunks are chained and freed together: a policy never frees one string
 * on its own, and a failed load drops everything with one call. */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Large enough that a typical policy (a few hundred rules) takes a handful
 * of chunks; larger requests get a chunk of their own. */
#define ARENA_CHUNK 16384

struct arena_chunk {
    struct arena_chunk *next;
    size_t used, size;
    max_align_t data[];
};

void *arena_alloc(struct arena *a, size_t n)
{
    size_t need = (n + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
    struct arena_chunk *c = a->head;

    if (need == 0)
        need = sizeof(max_align_t);
    if (c == NULL || c->size - c->used < need) {
        size_t size = need > ARENA_CHUNK ? need : ARENA_CHUNK;
        c = calloc(1, sizeof(*c) + size);
        if (c == NULL)
            return NULL;
        c->size = size;
        /* A big request gets its own chunk behind the current one, so the
         * current chunk's free space stays usable. */
        if (a->head != NULL && need > ARENA_CHUNK) {
            c->next = a->head->next;
            a->head->next = c;
        } else {
            c->next = a->head;
            a->head = c;
        }
    }
    void *ptr = (char *)c->data + c->used;
    c->used += need;
    return ptr;
}

char *arena_strndup(struct arena *a, const char *s, size_t n)
{
    char *d = arena_alloc(a, n + 1);
    if (d != NULL) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

char *arena_strdup(struct arena *a, const char *s)
{
    return arena_strndup(a, s, strlen(s));
}

char *arena_printf(struct arena *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *d = arena_alloc(a, (size_t)n + 1);
    if (d == NULL)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(d, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return d;
}

void arena_free(struct arena *a)
{
    struct arena_chunk *c = a->head, *next;
    for (; c != NULL; c = next) {
        next = c->next;
        free(c);
    }
    a->head = NULL;
}
