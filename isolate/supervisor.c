/* supervisor.c — seccomp user notification (being written). */
#include "iso_int.h"

#include <errno.h>

int iso_supervise(int notify_fd, const struct iso_request *req,
                  iso_event_cb cb, void *ctx)
{
    (void)notify_fd; (void)req; (void)cb; (void)ctx;
    errno = EBADF;
    return -1;
}
