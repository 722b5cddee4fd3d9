/* clip.c — a text cut to fit, with its length and hash (clip.h). */
#include "clip.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <sha2.h>

const char *sbx_clip(const char *s, size_t len, char *out, size_t outsz)
{
    if (len < outsz) {
        memcpy(out, s, len);
        out[len] = '\0';
        return out;
    }
    char hex[SHA256_DIGEST_STRING_LENGTH];
    SHA256Data((const uint8_t *)s, len, hex);
    char mark[SBX_CLIP_MARK_MAX];
    int m = snprintf(mark, sizeof mark, "...[truncated: %zu bytes, sha256 %s]", len, hex);
    size_t head = outsz - (size_t)m - 1;
    /* Back off over UTF-8 continuation bytes (10xxxxxx): the cut falls
     * before a character, not inside one. */
    while (head > 0 && ((unsigned char)s[head] & 0xc0) == 0x80)
        head--;
    memcpy(out, s, head);
    memcpy(out + head, mark, (size_t)m + 1);
    return out;
}
