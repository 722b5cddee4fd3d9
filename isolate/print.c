/* print.c — iso_print(): what iso_spawn would set up (being written). */
#include "iso_int.h"

int iso_print(const struct iso_request *req, FILE *out)
{
    struct iso_rlimit rl[ISO_RLIMIT_MAX];
    size_t n = iso_rlimits(req->policy, rl);

    fprintf(out, "isolation: %s\n", iso_mode_name(req->mode));
    fprintf(out, "process: own process group; signals reset; SIGXFSZ ignored; fds >= 3 close-on-exec\n");
    for (size_t i = 0; i < n; i++)
        fprintf(out, "rlimit %s = %llu\n", rl[i].name, (unsigned long long)rl[i].value);
    return 0;
}
