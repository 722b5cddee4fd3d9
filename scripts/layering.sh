#!/bin/sh
# layering.sh [ROOT]: checks that every part of sbx depends only on the parts
# it may use (README, "Layout"), by the headers its files include.
#
# The parts, in order: policy, preload, auditd, isolate, tools.  A part may
# include headers of its own folder, of common/, and of the parts before it
# (tools use everything); common/ includes only common/.  The preload links
# sources of preload/, policy/ and common/ only (the Makefile's
# PRELOAD_OBJ), and none of them includes SQLite's header: the preload
# never links SQLite.
#
# The Makefile puts every folder on the include path (-I), so an include
# names a header by its bare name, and where it comes from is not visible
# in the line: this script finds the header the compiler finds (the
# including file's folder first, then the -I folders in the Makefile's
# order) and judges by the folder it lives in.  For the same reason a
# header name must be unique across the folders: a second one would be
# shadowed, silently, for every file that looks in the first folder first.
#
# Prints one line per violation and exits 1 if there is any; 0 otherwise.
set -u
ROOT=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$ROOT" || exit 2

PARTS="policy preload auditd isolate tools"
IDIRS=". common policy auditd isolate preload tools"   # the Makefile's -I order
bad=0

rank() { # the part's place in PARTS (1..), 0 for common, empty for others
    case $1 in common) echo 0; return ;; esac
    i=1
    for p in $PARTS; do
        [ "$p" = "$1" ] && { echo $i; return; }
        i=$((i + 1))
    done
}

may_use() { # may_use FROM TO: may part FROM include a header of part TO?
    [ "$1" = "$2" ] && return 0
    [ "$2" = common ] && return 0
    [ "$1" = common ] && return 1
    rf=$(rank "$1"); rt=$(rank "$2")
    [ -n "$rf" ] && [ -n "$rt" ] && [ "$rt" -lt "$rf" ]
}

allowed() { # what part $1 may include, for messages
    case $1 in common) echo "common/ only"; return ;; esac
    out="$1/, common/"
    for p in $PARTS; do
        [ "$p" = "$1" ] && break
        out="$out, $p/"
    done
    echo "$out"
}

# find HEADER FILE: the path, relative to ROOT, of the header the compiler
# takes for `#include "HEADER"` in FILE; empty if none.
find_header() {
    for d in "$(dirname "$2")" $IDIRS; do
        if [ -f "$d/$1" ]; then
            realpath -m --relative-to=. "$d/$1"
            return
        fi
    done
}

complain() { echo "layering: $*"; bad=1; }

for part in common $PARTS; do
    for f in "$part"/*.c "$part"/*.h; do
        [ -f "$f" ] || continue
        # Quoted includes: the project's own headers.
        for h in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
            got=$(find_header "$h" "$f")
            if [ -z "$got" ]; then
                complain "$f includes \"$h\", which is in no folder of the include path"
                continue
            fi
            to=${got%%/*}
            [ "$to" = "$got" ] && to=.
            may_use "$part" "$to" ||
                complain "$f includes \"$h\" ($got): $part/ may use $(allowed "$part")"
        done
        case $part in preload|policy|common)
            if grep -q '^[[:space:]]*#[[:space:]]*include[[:space:]]*<sqlite3.h>' "$f"; then
                complain "$f includes <sqlite3.h>: it is linked into the preload, which never links SQLite"
            fi ;;
        esac
    done
done

# What the preload links, as the Makefile says (PRELOAD_OBJ): sources of
# preload/, policy/ and common/ only.  An include check alone would not see
# a source of another folder put on the preload's link line.
if [ -f Makefile ]; then
    # A make of its own (not the jobserver of a `make layering` around us),
    # whose stdout is PRELOAD_OBJ alone.
    objs=$(printf 'sbx-layering-print:\n\t@echo $(PRELOAD_OBJ)\n' |
        env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
        make -s --no-print-directory -f Makefile -f - BUILD=sbx-layering sbx-layering-print 2>/dev/null) ||
        { complain "make could not say what the preload links (PRELOAD_OBJ)"; objs=; }
    for o in $objs; do
        rel=${o#sbx-layering/preload-obj/}
        case $rel in
        preload/*|policy/*|common/*|gen/*) ;;
        *) complain "the preload links ${rel%.o}.c (Makefile, PRELOAD_OBJ): it may link preload/, policy/ and common/ only" ;;
        esac
    done
fi

# One header per name across the folders.
dups=$(for d in common $PARTS; do ls "$d"/*.h 2>/dev/null; done | xargs -n 1 basename | sort | uniq -d)
for h in $dups; do
    complain "more than one folder has $h: an include by bare name gets whichever comes first"
done

exit $bad
