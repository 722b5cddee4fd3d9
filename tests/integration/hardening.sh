#!/bin/sh
# The build hardens what it makes: full RELRO (-z relro -z now) for every
# program, stack protector, and _FORTIFY_SOURCE outside sanitizer builds.
. "$(dirname "$0")/../lib.sh"

PROGRAMS="sbx-guard sbx-audit sbx-kill sbx-policy sbx-auditd sbx-serve"

test_every_program_and_the_preload_are_linked_with_full_relro() {
    command -v readelf >/dev/null || skip "readelf is not installed"
    for f in $(for p in $PROGRAMS; do echo "$BIN/$p"; done) "$SBX_BUILD/lib/libsbx-preload.so"; do
        readelf -l "$f" | grep -q GNU_RELRO || fail "$f: no GNU_RELRO segment"
        readelf -d "$f" | grep -q 'BIND_NOW\|FLAGS.*NOW' || fail "$f: not linked with -z now"
    done
}

test_programs_are_built_with_the_stack_protector_and_fortify() {
    command -v nm >/dev/null || skip "nm is not installed"
    for p in $PROGRAMS; do
        nm -D "$BIN/$p" | grep -q __stack_chk_fail || fail "$p: no stack protector"
    done
    [ -z "${SBX_SANITIZED:-}" ] || skip "sanitizer build: _FORTIFY_SOURCE is off by design"
    # sbx-guard copies and formats into fixed buffers: the checked variants
    nm -D "$BIN/sbx-guard" | grep -q '__[a-z]*_chk@' || fail "sbx-guard: no _FORTIFY_SOURCE"
}

run_tests
