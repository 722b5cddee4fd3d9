/*
 * clip.h — bounding a text that goes into the audit trail.
 *
 * A command line may be as long as the kernel takes (ARG_MAX: 2 MiB and
 * more), a kill reason as long as the caller likes, but a control message is
 * at most SBX_CTL_MAX bytes (ctl.h).  Rather than refuse the run or the kill,
 * the record keeps the head of the text and says what was cut:
 *
 *   HEAD...[truncated: 2097152 bytes, sha256 3f0a...]
 *
 * so the whole can still be matched against a copy.  The head is cut at a
 * UTF-8 character boundary.  Nothing here allocates; OUT is the caller's.
 */
#ifndef SBX_CLIP_H
#define SBX_CLIP_H

#include <stddef.h>

/* Room the marker takes at most ("...[truncated: ...]", NUL included). */
#define SBX_CLIP_MARK_MAX 120

/* Copies the LEN bytes of S into OUT (OUTSZ > SBX_CLIP_MARK_MAX bytes) whole
 * when they fit with their NUL, else as much of S as leaves room for the
 * marker, then the marker.  Returns OUT. */
const char *sbx_clip(const char *s, size_t len, char *out, size_t outsz);

#endif
