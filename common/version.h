/*
 * version.h — the version every sbx program prints for --version, in one
 * place so that the tools and the daemon never disagree.  It names the
 * release of this source tree; the interface promises are versioned apart
 * (../shared/CONTRACT.md, "sbx contract, version 1").
 */
#ifndef SBX_VERSION_H
#define SBX_VERSION_H

#define SBX_VERSION "0.1.0"

#endif
