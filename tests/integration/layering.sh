#!/bin/sh
# The layering rule (README, "Layout"), checked on the source tree by
# scripts/layering.sh: each part includes only headers of its own folder,
# of common/ and of the parts before it; the preload links sources of
# preload/, policy/ and common/ only, and none includes SQLite.
. "$(dirname "$0")/../lib.sh"

CHECK="$SBX_ROOT/scripts/layering.sh"

test_every_part_includes_only_headers_of_parts_it_may_use() {
    out=$(sh "$CHECK" "$SBX_ROOT") || fail "layering check failed: $out"
    assert_eq "$out" ""
}

# A tree that breaks each rule once: the check must name every break.
test_the_layering_check_names_each_upward_include() {
    mkdir -p tree/common tree/policy tree/preload tree/auditd tree/isolate tree/tools
    cd tree
    echo '#include "store.h"' >common/c.c          # common -> auditd
    echo '#include "iso.h"' >policy/p.c            # policy -> isolate
    echo '#include "store.h"' >preload/l.c         # preload -> auditd
    echo '#include <sqlite3.h>' >preload/s.c        # SQLite in the preload
    echo '#include "guard.h"' >auditd/a.c          # auditd -> preload: allowed
    echo '#include "store.h"' >tools/t.c           # tools -> auditd: allowed
    echo '#include "missing.h"' >isolate/m.c       # nowhere
    touch auditd/store.h isolate/iso.h preload/guard.h policy/guard.h
    # The preload's link line takes a source of auditd/.
    printf 'PRELOAD_OBJ = $(patsubst %%.c,$(BUILD)/preload-obj/%%.o,preload/l.c auditd/store.c)\n' >Makefile
    rc=0; out=$(sh "$CHECK" "$PWD") || rc=$?
    assert_eq "$rc" 1 "exit status"
    assert_contains "$out" 'common/c.c includes "store.h" (auditd/store.h): common/ may use common/ only'
    assert_contains "$out" 'policy/p.c includes "iso.h" (isolate/iso.h)'
    assert_contains "$out" 'preload/l.c includes "store.h" (auditd/store.h): preload/ may use preload/, common/, policy/'
    assert_contains "$out" 'preload/s.c includes <sqlite3.h>'
    assert_contains "$out" 'isolate/m.c includes "missing.h", which is in no folder'
    assert_contains "$out" 'more than one folder has guard.h'
    assert_contains "$out" 'the preload links auditd/store.c (Makefile, PRELOAD_OBJ)'
    assert_not_contains "$out" 'auditd/a.c'
    assert_not_contains "$out" 'tools/t.c'
    assert_eq "$(printf '%s\n' "$out" | wc -l)" 7 "violations"
}

run_tests
