/* native.c — ISO_NATIVE / ISO_AUTO (being written). */
#include "iso_int.h"

#include <errno.h>
#include <bsd/string.h>

int iso_spawn_native(const struct iso_request *req, struct iso_child *child,
                     char *err, size_t errsz)
{
    /* Interim: until the native layer is merged, auto means none unless the
     * policy requires isolation. */
    if (req->mode == ISO_AUTO && !policy_info(req->policy)->isolation_required) {
        struct iso_request r = *req;
        r.mode = ISO_NONE;
        return iso_spawn(&r, child, err, errsz);
    }
    iso_errf(err, errsz, "isolation %s: not available in this build yet; use --isolation none",
             iso_mode_name(req->mode));
    errno = ENOSYS;
    return -1;
}

int iso_spawn_bwrap(const struct iso_request *req, struct iso_child *child,
                    char *err, size_t errsz)
{
    (void)child;
    iso_errf(err, errsz, "isolation %s: not available in this build yet; use --isolation none",
             iso_mode_name(req->mode));
    errno = ENOSYS;
    return -1;
}
