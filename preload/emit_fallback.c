/*
 * emit_fallback.c — TEMPORARY weak stand-ins for the emitter (common/event.c
 * replaces them at link time once it is on main; then this file goes).
 * They record nothing and never report a soft kill.
 */
#include "event.h"

__attribute__((weak)) int sbx_emit_init(const char *runtime_dir, const char *agent_id,
                                        const char *agent_token)
{
    (void)runtime_dir;
    (void)agent_id;
    (void)agent_token;
    return 0;
}

__attribute__((weak)) int sbx_emit(const struct sbx_event_desc *ev)
{
    (void)ev;
    return 0;
}

__attribute__((weak)) bool sbx_emit_killed(void)
{
    return false;
}
