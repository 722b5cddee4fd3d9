/* size.c — the size syntax of sbx (see size.h). */
#include "size.h"

#include <string.h>

int sbx_size_parse(const char *s, uint64_t *bytes)
{
    static const struct { const char *unit; uint64_t mul; } units[] = {
        { "", 1 }, { "B", 1 }, { "K", 1ull << 10 }, { "KiB", 1ull << 10 },
        { "M", 1ull << 20 }, { "MiB", 1ull << 20 }, { "G", 1ull << 30 }, { "GiB", 1ull << 30 },
    };
    uint64_t v = 0;
    const char *q = s;

    if (*q < '0' || *q > '9')
        return -1;
    for (; *q >= '0' && *q <= '9'; q++) {
        if (v > (UINT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*q - '0');
    }
    while (*q == ' ')
        q++;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (strcmp(q, units[i].unit) == 0) {
            if (v > UINT64_MAX / units[i].mul)
                return -1;
            *bytes = v * units[i].mul;
            return 0;
        }
    return -1;
}
