/*
 * fuzz_ctl_parse.c — libFuzzer harness for the control protocol's codec
 * (sbx_msg_parse), which sbx-auditd runs on every message a client sends
 * to control.sock and events.sock, and sbx-guard on every CMD it receives.
 *
 * A message is untrusted: whatever the bytes, parsing stays inside the
 * buffer, and a message that parses re-encodes (sbx_msg_start/add) to one
 * that parses to the same verb and fields.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > SBX_CTL_MAX)
        return 0;
    char *buf = malloc(size + 1);
    if (buf == NULL)
        abort();
    memcpy(buf, data, size);
    struct sbx_msg m;
    char err[256];
    if (sbx_msg_parse(buf, size, &m, err, sizeof err) != 0) {
        if (memchr(err, '\0', sizeof err) == NULL)
            abort();
        free(buf);
        return 0;
    }
    static struct sbx_msgbuf b;
    sbx_msg_start(&b, m.verb);
    for (unsigned i = 0; i < m.nf; i++)
        sbx_msg_add(&b, m.f[i].key, m.f[i].val);
    if (!b.overflow) {
        static char again[SBX_CTL_MAX + 1];
        struct sbx_msg m2;
        memcpy(again, b.buf, b.len);
        if (sbx_msg_parse(again, b.len, &m2, err, sizeof err) != 0)
            abort();
        if (strcmp(m.verb, m2.verb) != 0 || m.nf != m2.nf)
            abort();
        for (unsigned i = 0; i < m.nf; i++)
            if (strcmp(m.f[i].key, m2.f[i].key) != 0 || strcmp(m.f[i].val, m2.f[i].val) != 0)
                abort();
    }
    free(buf);
    return 0;
}
