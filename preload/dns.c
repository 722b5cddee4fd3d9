/*
 * dns.c — which name an address was resolved from, so that a connect to
 * 104.18.6.192:443 is judged (and recorded) as api.openai.com.
 *
 * A fixed table of slots, each guarded by a sequence counter (a seqlock):
 * a writer makes the counter odd with compare-and-swap, writes, makes it
 * even; a reader copies the slot and keeps the copy only if the counter was
 * even and unchanged.  No lock is ever held, so fork, signals and threads
 * cannot deadlock on it; a writer that loses a race (or a slot left odd by
 * a fork in the middle of a write) just forgets that entry.  Old entries
 * are overwritten: the table remembers the most recent resolutions.
 */
#include <netinet/in.h>
#include <string.h>

#include "guard.h"

#define DNS_SLOTS 512           /* a busy agent resolves a few dozen names */
#define DNS_PROBE 4
#define DNS_NAME 256            /* a DNS name is at most 253 characters */

struct dns_slot {
    _Atomic unsigned seq;
    unsigned char family;       /* 0: empty */
    unsigned char addr[16];
    char name[DNS_NAME];
};

static struct dns_slot table[DNS_SLOTS];

/* The key of SA: 4 or 16 address bytes; an IPv4-mapped IPv6 address is
 * keyed as the IPv4 address. */
static bool key_of(const struct sockaddr *sa, unsigned char *family, unsigned char addr[16])
{
    memset(addr, 0, 16);
    if (sa->sa_family == AF_INET) {
        *family = AF_INET;
        memcpy(addr, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
        return true;
    }
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a)) {
            *family = AF_INET;
            memcpy(addr, a->s6_addr + 12, 4);
        } else {
            *family = AF_INET6;
            memcpy(addr, a->s6_addr, 16);
        }
        return true;
    }
    return false;
}

static unsigned hash_key(unsigned char family, const unsigned char addr[16])
{
    unsigned h = 2166136261u ^ family;
    for (int i = 0; i < 16; i++)
        h = (h ^ addr[i]) * 16777619u;
    return h;
}

void guard_dns_remember(const struct sockaddr *sa, const char *name)
{
    unsigned char family, addr[16];
    if (!sa || !name || !key_of(sa, &family, addr))
        return;
    unsigned h = hash_key(family, addr);
    /* The slot that already holds this address, else the first empty one,
     * else the home slot. */
    struct dns_slot *pick = NULL;
    for (unsigned i = 0; i < DNS_PROBE && !pick; i++) {
        struct dns_slot *s = &table[(h + i) % DNS_SLOTS];
        if (s->family == 0 || (s->family == family && memcmp(s->addr, addr, 16) == 0))
            pick = s;
    }
    if (!pick)
        pick = &table[h % DNS_SLOTS];
    unsigned seq = atomic_load_explicit(&pick->seq, memory_order_relaxed);
    if ((seq & 1) ||
        !atomic_compare_exchange_strong_explicit(&pick->seq, &seq, seq + 1,
                                                 memory_order_acquire, memory_order_relaxed))
        return;
    atomic_thread_fence(memory_order_release);
    pick->family = family;
    memcpy(pick->addr, addr, 16);
    size_t n = strlen(name);
    if (n >= DNS_NAME)
        n = DNS_NAME - 1;
    memcpy(pick->name, name, n);
    pick->name[n] = '\0';
    atomic_store_explicit(&pick->seq, seq + 2, memory_order_release);
}

bool guard_dns_lookup(const struct sockaddr *sa, char *out, size_t outsz)
{
    unsigned char family, addr[16];
    if (!sa || !key_of(sa, &family, addr) || outsz == 0)
        return false;
    unsigned h = hash_key(family, addr);
    for (unsigned i = 0; i < DNS_PROBE; i++) {
        struct dns_slot *s = &table[(h + i) % DNS_SLOTS];
        unsigned s1 = atomic_load_explicit(&s->seq, memory_order_acquire);
        if (s1 & 1)
            continue;
        unsigned char f = s->family, a[16];
        char name[DNS_NAME];
        memcpy(a, s->addr, 16);
        memcpy(name, s->name, DNS_NAME);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&s->seq, memory_order_relaxed) != s1)
            continue;
        if (f != family || memcmp(a, addr, 16) != 0)
            continue;
        name[DNS_NAME - 1] = '\0';
        size_t n = strlen(name);
        if (n >= outsz)
            n = outsz - 1;
        memcpy(out, name, n);
        out[n] = '\0';
        return n > 0;
    }
    return false;
}
