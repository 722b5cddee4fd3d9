/* duration.c — the duration syntax of sbx (see duration.h). */
#include "duration.h"

#include <errno.h>
#include <string.h>

/* Longest unit name first: "ms" must not be read as "m" then "s". */
static const struct { const char *name; uint64_t ms; } units[] = {
    { "ms", 1 }, { "s", 1000 }, { "m", UINT64_C(60) * 1000 }, { "h", UINT64_C(3600) * 1000 },
    { "d", UINT64_C(24) * 3600 * 1000 },
};

int sbx_duration_parse(const char *s, uint64_t *ms)
{
    uint64_t total = 0;
    const char *q = s;

    if (*q == '\0')
        goto invalid;
    while (*q != '\0') {
        uint64_t v = 0, mul = 0;
        if (*q < '0' || *q > '9')
            goto invalid;
        for (; *q >= '0' && *q <= '9'; q++) {
            if (v > (UINT64_MAX - 9) / 10)
                goto range;
            v = v * 10 + (uint64_t)(*q - '0');
        }
        while (*q == ' ')
            q++;
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
            size_t n = strlen(units[i].name);
            if (strncmp(q, units[i].name, n) == 0) {
                mul = units[i].ms;
                q += n;
                break;
            }
        }
        if (mul == 0)
            goto invalid;
        if (v > (UINT64_MAX - total) / mul)
            goto range;
        total += v * mul;
        while (*q == ' ')
            q++;
    }
    *ms = total;
    return 0;
invalid:
    errno = EINVAL;
    return -1;
range:
    errno = ERANGE;
    return -1;
}
