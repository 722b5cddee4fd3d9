/*
 * serve.c — the serve: section of a policy (sbx-serve's profile).
 *
 * Placeholder until the loader parses the section: every policy answers
 * that it has none, which sbx-serve reports as "not a serve profile".
 */
#include "policy.h"

const struct policy_serve *policy_serve(const struct policy *p)
{
    (void)p;
    return NULL;
}
