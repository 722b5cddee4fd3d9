/*
 * store_rewrite — plays a host that covers its tracks: copies the store at
 * FROM into a new store at TO without row SKIP, through the store's own
 * append, so that the new store's hash chain and head file are consistent
 * and `sbx-audit verify` passes on it.  Only a copy of the chain that left
 * the machine (verify --against) can tell.
 *
 *   store_rewrite FROM TO SKIP_ID
 */
#include <err.h>
#include <stdio.h>
#include <stdlib.h>

#include "store.h"

struct ctx {
    struct audit_store *to;
    int64_t skip, copied;
};

static int copy_row(const struct audit_row *r, void *arg)
{
    struct ctx *c = arg;
    if (r->id == c->skip)
        return 0;
    struct audit_row n = *r;
    if (audit_store_append(c->to, &n) < 0)
        errx(1, "append: %s", audit_store_errmsg(c->to));
    c->copied++;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 4)
        errx(2, "usage: store_rewrite FROM TO SKIP_ID");
    char why[1024];
    struct audit_store *from, *to;
    if (audit_store_open(argv[1], true, &from, why, sizeof why) < 0)
        errx(1, "%s", why);
    if (audit_store_open(argv[2], false, &to, why, sizeof why) < 0)
        errx(1, "%s", why);
    struct ctx c = { .to = to, .skip = strtoll(argv[3], NULL, 10) };
    struct audit_filter f = { 0 };
    if (audit_store_query(from, &f, copy_row, &c, why, sizeof why) < 0)
        errx(1, "%s", why);
    if (audit_store_commit(to, true) < 0)
        errx(1, "commit: %s", audit_store_errmsg(to));
    audit_store_close(to);
    audit_store_close(from);
    printf("copied %lld rows\n", (long long)c.copied);
    return 0;
}
