#!/bin/sh
# embed.sh NAME FILE: print a C file that defines `const char NAME[]` holding
# FILE's bytes and `const unsigned long NAME_len`.  Used to compile the
# shipped default policy into the policy engine.
set -eu
name=$1 file=$2
printf '/* generated from %s by scripts/embed.sh; do not edit */\n' "$file"
printf '#include <stddef.h>\n'
printf 'extern const char %s[];\nextern const size_t %s_len;\n' "$name" "$name"
printf 'const char %s[] =\n' "$name"
sed -e 's/\\/\\\\/g' -e 's/?/\\?/g' -e 's/"/\\"/g' -e 's/^/    "/' -e 's/$/\\n"/' "$file"
printf ';\nconst size_t %s_len = sizeof(%s) - 1;\n' "$name" "$name"
