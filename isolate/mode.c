/* mode.c — the --isolation names (see isolate.h). */
#include "isolate.h"

#include <string.h>

static const char *const mode_names[] = {
    [ISO_AUTO] = "auto", [ISO_NONE] = "none",
    [ISO_NATIVE] = "native", [ISO_BWRAP] = "bwrap", [ISO_GVISOR] = "gvisor",
    [ISO_PODMAN] = "podman", [ISO_DOCKER] = "docker",
};

int iso_mode_parse(const char *s)
{
    if (s == NULL)
        return -1;
    for (size_t i = 0; i < sizeof mode_names / sizeof mode_names[0]; i++)
        if (strcmp(s, mode_names[i]) == 0)
            return (int)i;
    return -1;
}

const char *iso_mode_name(enum iso_mode m)
{
    if ((unsigned)m >= sizeof mode_names / sizeof mode_names[0])
        return "unknown";
    return mode_names[m];
}
