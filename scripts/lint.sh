#!/bin/sh
# make lint: clang-tidy (clang-analyzer and bugprone checks, .clang-tidy
# says which are left out and why) and cppcheck over every C file of the
# product, with the flags the build uses.  Zero findings or exit 1.  A false
# positive is suppressed only in place, with a comment that says why
# (NOLINT(check) for clang-tidy, cppcheck-suppress for cppcheck).
set -u
cd "$(dirname "$0")/.." || exit 2
inc="-I. -Icommon -Ipolicy -Iauditd -Iisolate -Ipreload -Itools"
pkg=$(pkg-config --cflags yaml-0.1 libpcre2-8 sqlite3 libbsd libmd libseccomp 2>/dev/null)
# (escaped twice: the text is spliced into the sh -c script below)
defs="-std=c17 -D_GNU_SOURCE -DSBX_PREFIX=\\\"/usr/local\\\""
# The preload's objects are built with lazylib.h forced in and the paths of
# the two libraries it opens by name.
pre="-include preload/lazylib.h -DSBX_LIBPCRE2=\"/lib/libpcre2-8.so.0\" -DSBX_LIBYAML=\"/lib/libyaml-0.so.2\""
files=$(ls common/*.c policy/*.c preload/*.c auditd/*.c isolate/*.c tools/*.c 2>/dev/null)
out=$(mktemp)
trap 'rm -f "$out"' EXIT

echo "lint: clang-tidy over $(echo "$files" | wc -w) files"
# shellcheck disable=SC2086
echo "$files" | xargs -P "$(nproc 2>/dev/null || echo 2)" -n 4 sh -c '
    for f; do
        extra=""
        case "$f" in preload/*) extra="$0" ;; esac
        clang-tidy -quiet "$f" -- '"$defs $inc $pkg"' $extra 2>/dev/null
    done' "$pre" >"$out"
tidy=$(grep -c ': \(warning\|error\):' "$out")
grep -A3 ': \(warning\|error\):' "$out"

echo "lint: cppcheck"
# shellcheck disable=SC2086
cppcheck -q --std=c11 --enable=warning,portability --inline-suppr --error-exitcode=1 \
    -D_GNU_SOURCE -D__x86_64__ -DSBX_PREFIX='"/usr/local"' \
    -DSBX_LIBPCRE2='"/lib/libpcre2-8.so.0"' -DSBX_LIBYAML='"/lib/libyaml-0.so.2"' \
    $inc $files 2>&1
cpp=$?

echo "lint: clang-tidy findings: $tidy; cppcheck: $([ $cpp -eq 0 ] && echo none || echo some)"
[ "$tidy" -eq 0 ] && [ $cpp -eq 0 ]
