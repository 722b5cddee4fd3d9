#!/bin/sh
# The guard is never silently absent: wherever sbx is installed, the
# agent's first process loads the preload under every isolation mode, and
# when it cannot (an unloadable library) or does not (a static program),
# sbx-guard refuses or records the run's layers without "guard" and says so.
. "$(dirname "$0")/../lib.sh"

# install DIR: a copy of the build's bin/ and lib/ under DIR, as an
# installation in a directory the policy lets the agent write.
install_under() {
    mkdir -p "$1"
    cp -r "$BIN" "$1/bin"
    cp -r "$SBX_BUILD/lib" "$1/lib"
}

# A policy whose write roots include INST (not an exec root): the kernel
# layer mounts it writable and noexec, as it does /tmp and /var/tmp.
inst_policy() {
    cat >"$T/inst.yaml" <<YAML
version: 1
name: inst-writable
files:
  write:
    allow: ["**", "/tmp/**", "$1/**", /dev/null, /dev/tty, "/proc/self/fd/**"]
    deny: ["**/.env"]
YAML
}

test_guard_loads_when_sbx_is_installed_in_a_writable_noexec_root() {
    inst="$T/inst"
    install_under "$inst"
    inst_policy "$inst"
    echo secret >.env
    out=$("$inst/bin/sbx-guard" --no-notify --isolation native --policy "$T/inst.yaml" \
        -- /bin/sh -c 'cat .env; cat /etc/hostname >/dev/null; echo done' 2>"$T/err") || true
    assert_contains "$out" done
    assert_not_contains "$out" secret
    assert_not_contains "$(cat "$T/err")" "cannot be preloaded"
    # The preload judged the shell's and cat's calls itself.
    expect_row op=open-read decision=deny layer=guard "target~/.env"
    expect_row op=open-read decision=allow layer=guard target=/etc/hostname
    expect_row op=start "reason~layers guard,"
}

test_git_under_an_install_in_a_writable_root_records_as_many_rows_as_usual() {
    inst="$T/inst"
    install_under "$inst"
    inst_policy "$inst"
    git init -q .
    echo hello >README
    git status --porcelain >/dev/null      # the index settled before both runs
    guard --isolation native --policy "$T/inst.yaml" --name usual \
        -- git status --porcelain >/dev/null 2>"$T/err"
    "$inst/bin/sbx-guard" --no-notify --isolation native --policy "$T/inst.yaml" \
        --name inst -- git status --porcelain >/dev/null 2>>"$T/err"
    usual=$(rows --agent usual | grep -c '"layer":"guard"')
    got=$(rows --agent inst | grep -c '"layer":"guard"')
    [ "$usual" -gt 5 ] || fail "only $usual guard rows for git status: $(cat "$T/err")"
    assert_eq "$got" "$usual" "guard rows of git status run from the writable install"
}

test_an_unloadable_guard_is_refused_in_every_mode() {
    inst="$T/inst"
    install_under "$inst"
    # Not a shared object: ld.so would drop it with a one-line warning.
    echo "not an ELF file" >"$inst/lib/libsbx-preload.so"
    for mode in none native; do
        rc=0
        "$inst/bin/sbx-guard" --no-notify --isolation "$mode" --policy "$POLICIES/default.yaml" \
            -- /bin/echo ran \
            >"$T/out" 2>"$T/err" || rc=$?
        assert_eq "$rc" 125 "exit status under $mode"
        assert_not_contains "$(cat "$T/out")" ran "output under $mode"
        assert_contains "$(cat "$T/err")" "guard" "message under $mode"
    done
    expect_row op=exit "target~not started" "target~guard"
}

test_a_static_first_process_is_recorded_without_the_guard_layer() {
    cp "$PROGS/static_escape" ./esc
    echo hi >notes.txt
    out=$(guard --isolation native -- ./esc read notes.txt 2>"$T/err") || true
    assert_eq "$out" ok
    assert_contains "$(cat "$T/err")" "static"
    rows --op start >"$T/start.json"
    assert_not_contains "$(cat "$T/start.json")" "layers guard" "start row"
    expect_row op=start "reason~seccomp" "reason~supervisor"
}

run_tests
