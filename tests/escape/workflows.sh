#!/bin/sh
# The converse of the escape tests: ordinary work still succeeds under
# --isolation native with the default policy.
. "$(dirname "$0")/../lib.sh"

test_git_add_commit_works() {
    # git init itself writes .git/hooks, which the default policy's
    # files.write.deny refuses (in every isolation mode): the repository
    # is made outside, as a user's checkout would be.
    git init -q .
    echo hello >README
    native -- /bin/sh -c 'git add README &&
        git -c user.email=a@example.com -c user.name=agent commit -q -m first && git log --oneline' >"$T/log"
    assert_contains "$(cat "$T/log")" "first"
}

test_make_of_a_small_c_project_works() {
    printf 'int main(void) { return 0; }\n' >main.c
    printf 'prog: main.c\n\tcc -o prog main.c\n' >Makefile
    native -- make -s
    assert_file_present prog
    native -- ./prog
}

test_python_imports_work() {
    out=$(native -- python3 -c 'import json, email, asyncio; print("fine")')
    assert_eq "$out" "fine"
}

test_layers_are_recorded_in_the_start_row() {
    native -- true
    expect_row op=start "reason~landlock" "reason~seccomp" "reason~supervisor" "reason~pidns"
}

run_tests
