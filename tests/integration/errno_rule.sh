#!/bin/sh
# The errno rule (docs/policy.md): a denial never changes a program's
# success path where the kernel's own answer reveals nothing the policy
# hides.  mkdir of a directory that exists gives EEXIST, an open of a
# missing file gives ENOENT (stat says as much wherever the path is), and
# neither is a denial row; everything else keeps EACCES and its row.
. "$(dirname "$0")/../lib.sh"

DEFAULT="$POLICIES/default.yaml"
export LC_ALL=C     # the messages of cat and mkdir, with ASCII quotes

test_mkdir_of_an_existing_visible_directory_gives_eexist_and_no_denial() {
    for iso in none auto; do
        rc=0
        out=$(guard --isolation "$iso" --name "mk-$iso" --policy "$DEFAULT" -- sh -c '
            mkdir /usr; echo "mkdir /usr: $?"
            mkdir -p /usr/lib/x86_64-linux-gnu && echo "mkdir -p: ok"' 2>&1) || rc=$?
        assert_contains "$out" "/usr" "$iso"
        assert_contains "$out" "File exists" "$iso"
        assert_contains "$out" "mkdir /usr: 1" "$iso"
        assert_contains "$out" "mkdir -p: ok" "$iso"
        rows > "$T/rows.json"
        ! has_row "agent=mk-$iso" op=mkdir decision=deny < "$T/rows.json" ||
            fail "a denial row for a mkdir that gave EEXIST ($iso)"
        # A directory that does not exist is still a denial.
        rc=0; out=$(guard --isolation "$iso" --name "mk2-$iso" --policy "$DEFAULT" -- \
            mkdir /usr/sbx-new-dir 2>&1) || rc=$?
        [ "$rc" -ne 0 ] || fail "mkdir /usr/sbx-new-dir succeeded ($iso)"
        assert_contains "$out" "Permission denied" "$iso"
        expect_row "agent=mk2-$iso" op=mkdir decision=deny target=/usr/sbx-new-dir
    done
}

test_an_fopen_of_a_missing_file_in_the_hidden_home_gives_enoent_and_no_denial() {
    command -v python3 >/dev/null 2>&1 || skip "python3 is not installed"
    for iso in none auto; do
        # fopen(3) itself, as vim reads ~/.viminfo
        out=$(guard --isolation "$iso" --name "fo-$iso" --policy "$DEFAULT" -- python3 -c '
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.fopen.restype = ctypes.c_void_p
f = libc.fopen(os.path.expanduser("~/.viminfo").encode(), b"r")
print("fopen:", f, os.strerror(ctypes.get_errno()))' 2>&1) || fail "python3 under $iso: $out"
        assert_contains "$out" "fopen: None No such file or directory" "$iso"
        rows > "$T/rows.json"
        ! has_row "agent=fo-$iso" decision=deny "target~/.viminfo" < "$T/rows.json" ||
            fail "a denial row for an fopen of a missing ~/.viminfo ($iso)"
    done
}

test_node_mkdirsync_recursive_works_on_an_existing_directory() {
    command -v node >/dev/null 2>&1 || skip "node is not installed (make deps)"
    for iso in none auto; do
        out=$(guard --isolation "$iso" --policy "$DEFAULT" -- node -e '
            const fs = require("fs");
            fs.mkdirSync("/usr/lib", { recursive: true });
            fs.mkdirSync("new/deep/dir", { recursive: true });
            console.log("made", fs.statSync("new/deep/dir").isDirectory());' 2>&1) ||
            fail "node mkdirSync under $iso: $out"
        assert_contains "$out" "made true" "$iso"
    done
}

test_an_open_of_a_missing_file_in_a_readable_directory_gives_enoent_and_no_denial() {
    for iso in none auto; do
        rc=0
        out=$(guard --isolation "$iso" --name "ne-$iso" --policy "$DEFAULT" -- sh -c '
            cat .env; cat sub/.env.local; cat /sbx-no-such-file' 2>&1) || rc=$?
        assert_contains "$out" "cat: .env: No such file or directory" "$iso"
        assert_contains "$out" "cat: sub/.env.local: No such file or directory" "$iso"
        assert_contains "$out" "cat: /sbx-no-such-file: No such file or directory" "$iso"
        rows > "$T/rows.json"
        ! has_row "agent=ne-$iso" decision=deny < "$T/rows.json" ||
            { cat "$T/rows.json" >&2; fail "a denial row for a missing file ($iso)"; }
    done
}

test_a_secret_that_exists_stays_denied_and_in_a_hidden_directory_missing_is_enoent_existing_is_eexist() {
    # The default policy lets /tmp/** be read and written: a home there
    # (a checkout under /tmp) is not hidden, and nothing here would hold.
    case "$HOME" in
    /tmp/* | /var/tmp/*) skip "the test's home $HOME lies under /tmp, which the default policy lets be read" ;;
    esac
    echo SECRET_TOKEN_errno > .env
    mkdir -p "$HOME/.config/tool"
    echo "//registry.npmjs.org/:_authToken=SECRET_TOKEN_npmrc" > "$HOME/.config/tool/present.json"
    for iso in none auto; do
        rc=0
        out=$(guard --isolation "$iso" --name "ex-$iso" --policy "$DEFAULT" -- sh -c "
            cat .env; cat '$HOME/.config/tool/present.json'
            cat '$HOME/.config/tool/missing.json'; cat '$HOME/.npmrc'
            mkdir '$HOME/.config'" 2>&1) || rc=$?
        assert_not_contains "$out" SECRET_TOKEN "$iso"
        assert_contains "$out" "cat: .env: Permission denied" "$iso"
        assert_contains "$out" "present.json: Permission denied" "$iso"
        # The home is not readable, but stat(2) (judged by nothing) already
        # says whether a name is there: a missing one is ENOENT, no row.
        assert_contains "$out" "missing.json: No such file or directory" "$iso"
        assert_contains "$out" ".npmrc: No such file or directory" "$iso"
        # ... and so does an existing directory there: mkdir is EEXIST.
        assert_contains "$out" "cannot create directory '$HOME/.config': File exists" "$iso"
        expect_row "agent=ex-$iso" op=open-read decision=deny "target~/.env"
        expect_row "agent=ex-$iso" op=open-read decision=deny "target~/present.json"
        rows > "$T/rows.json"
        ! has_row "agent=ex-$iso" decision=deny "target~/missing.json" < "$T/rows.json" ||
            fail "a denial row for a missing file in a hidden directory ($iso)"
        ! has_row "agent=ex-$iso" decision=deny "target~/.npmrc" < "$T/rows.json" ||
            fail "a denial row for a missing ~/.npmrc ($iso)"
        ! has_row "agent=ex-$iso" op=mkdir decision=deny < "$T/rows.json" ||
            fail "a denial row for mkdir of an existing directory in a hidden home ($iso)"
        # A directory that is not there is still a denial.
        rc=0; out=$(guard --isolation "$iso" --name "ex2-$iso" --policy "$DEFAULT" -- \
            mkdir "$HOME/.config/sbx-new" 2>&1) || rc=$?
        assert_contains "$out" "Permission denied" "$iso"
        expect_row "agent=ex2-$iso" op=mkdir decision=deny "target~/sbx-new"
    done
}

run_tests
