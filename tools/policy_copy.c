/*
 * policy_copy.c — the preload's private copy of a policy (policy_copy.h).
 */
#include "policy_copy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sha2.h>

/* True if P extends a file (the compiled-in default does not count). */
static bool is_chained(const struct policy *p)
{
    const char *const *files;
    size_t n = policy_files(p, &files);

    for (size_t i = 1; i < n; i++)
        if (strcmp(files[i], POLICY_DEFAULT_FILE) != 0)
            return true;
    return false;
}

/* SRC's bytes, malloc'd (NULL and errno on failure; *LEN its length). */
static char *read_all(const char *src, size_t *len)
{
    FILE *in = fopen(src, "rb");
    char buf[65536], *all = NULL;
    size_t n;

    *len = 0;
    if (in == NULL)
        return NULL;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) {
        char *na = realloc(all, *len + n + 1);
        if (na == NULL) {
            free(all);
            fclose(in);
            errno = ENOMEM;
            return NULL;
        }
        all = na;
        memcpy(all + *len, buf, n);
        *len += n;
    }
    if (ferror(in)) {
        free(all);
        fclose(in);
        errno = EIO;
        return NULL;
    }
    fclose(in);
    return all ? all : calloc(1, 1);
}

int policy_copy_write(const struct policy *p, const char *src, const char *dst,
                      char *err, size_t errsz)
{
    char *all = NULL;
    size_t len = 0;
    FILE *f;
    int fd, rc = -1;

    if (!is_chained(p)) {
        char sha[65];
        if ((all = read_all(src, &len)) == NULL) {
            snprintf(err, errsz, "%s: %s", src, strerror(errno));
            return -1;
        }
        SHA256Data((const uint8_t *)all, len, sha);
        if (strcmp(sha, policy_info(p)->sha256) != 0) {
            snprintf(err, errsz, "%s changed while it was being loaded; try again", src);
            free(all);
            return -1;
        }
    }
    fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0400);
    if (fd < 0) {
        snprintf(err, errsz, "%s: %s", dst, strerror(errno));
        free(all);
        return -1;
    }
    f = fdopen(fd, "w");
    if (f == NULL)
        close(fd);
    else if (all != NULL ? fwrite(all, 1, len, f) == len : policy_expand(p, f) == 0)
        rc = 0;
    /* fclose flushes: a full disk shows here */
    if (f != NULL && fclose(f) == EOF)
        rc = -1;
    if (rc < 0) {
        snprintf(err, errsz, "%s: %s", dst, strerror(errno ? errno : EIO));
        unlink(dst);
    }
    free(all);
    return rc;
}
