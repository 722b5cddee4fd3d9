#!/bin/sh
# Version control and compilers as an agent runs them: git, gcc and make,
# cargo, go.  Each behaves under sbx as bare (see common.inc).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.inc"

test_git_init_add_commit_and_clone_behave_as_bare() {
    need_cmd git
    cat > "$T/git.sh" <<'EOF'
set -e
g() { git -c user.name=wl -c user.email=wl@example.invalid -c init.defaultBranch=main "$@"; }
g init -q repo
cd repo
printf 'one\n' > a.txt
mkdir -p src && printf 'int main(void) { return 0; }\n' > src/m.c
g add a.txt src
g commit -q -m first
printf 'two\n' >> a.txt
g commit -q -am second
cd ..
g clone -q repo copy
git -C copy log --format=%s
cat copy/a.txt
git -C copy status --short | wc -l
EOF
    same_as_bare git.sh
}

test_gcc_and_make_build_and_run_a_program_as_bare() {
    need_cmd gcc make
    cat > "$T/cc.sh" <<'EOF'
set -e
cat > hello.c <<'C'
#include <stdio.h>
int add(int, int);
int main(void) { printf("hello %d\n", add(40, 2)); return 0; }
C
printf 'int add(int a, int b) { return a + b; }\n' > add.c
printf 'hello: hello.o add.o\n\t$(CC) -o $@ hello.o add.o\n' > Makefile
make -s
./hello
make -s clean 2>/dev/null || true
EOF
    same_as_bare cc.sh
}

test_cargo_builds_a_crate_without_dependencies_as_bare() {
    # Debian's cargo (make deps): a cargo in ~/.cargo/bin is not on a
    # fresh machine, and its toolchain lives in ~/.rustup.
    [ -x /usr/bin/cargo ] || skip "/usr/bin/cargo is not installed (Debian's cargo; make deps)"
    cat > "$T/cargo.sh" <<'EOF'
set -e
mkdir -p hello/src
cat > hello/Cargo.toml <<'T'
[package]
name = "hello"
version = "0.1.0"
edition = "2018"
T
printf 'fn main() { println!("hello from rust {}", 6 * 7); }\n' > hello/src/main.rs
cd hello
/usr/bin/cargo build --offline -q
./target/debug/hello
EOF
    same_as_bare cargo.sh
}

test_go_builds_a_module_as_bare() {
    need_cmd go
    cat > "$T/go.sh" <<'EOF'
set -e
mkdir hello && cd hello
printf 'module example.invalid/hello\n\ngo 1.19\n' > go.mod
cat > main.go <<'G'
package main

import "fmt"

func main() { fmt.Println("hello from go", 6*7) }
G
go build -o hello .
./hello
EOF
    same_as_bare go.sh go_repo
}

# go stamps the binary with the state of the repository it is built in: the
# workspace is a repository of its own, as an agent's usually is (else git
# would find the sbx checkout above it, outside the workspace).
go_repo() {
    git -C "$1" -c init.defaultBranch=main init -q &&
        git -C "$1" -c user.name=wl -c user.email=wl@example.invalid commit -q --allow-empty -m start
}

run_tests
