/* agent.c — the options an agent's policy is loaded with (policy.h:
 * policy_agent_options), one builder for sbx-guard and the preload. */
#include "internal.h"

#include <string.h>

#include <bsd/string.h>

void policy_agent_options(const struct policy_agent *in, struct policy_agent_options *out)
{
    size_t n = 0;

    memset(out, 0, sizeof *out);
    /* sbx's sockets, its store and the agent's copy of the policy: never
     * the agent's to read or write, whatever the policy says (a root agent
     * could otherwise rewrite the policy its next child loads). */
    if (in->runtime_dir != NULL && in->runtime_dir[0] == '/')
        out->protect[n++] = in->runtime_dir;
    if (in->audit_db != NULL && strlcpy(out->db_dir, in->audit_db, sizeof out->db_dir) <
        sizeof out->db_dir) {
        char *slash = strrchr(out->db_dir, '/');
        if (slash != NULL && slash != out->db_dir) {
            *slash = '\0';
            out->protect[n++] = out->db_dir;
        }
    }
    if (in->policy_copy != NULL && in->policy_copy[0] == '/')
        out->protect[n++] = in->policy_copy;
    out->protect[n] = NULL;
    out->opt = (struct policy_options){
        .workspace = in->workspace,
        .display_path = in->display_path,
        .home = in->home,
        .protect = out->protect,
    };
}
