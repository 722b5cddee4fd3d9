#!/bin/sh
# Installs the Debian packages sbx needs to build, test and demo, and nothing
# when they are all there already (so `make test` can always depend on it).
set -eu

# Build: compiler, pkg-config and the five base libraries plus libseccomp;
# libmicrohttpd and jansson for sbx-serve only (HTTP and JSON).
# Tests: cmocka; real programs the integration tests run under the guard
# (python3, git, curl, make); busybox-static and bubblewrap for the escape
# tests and the bwrap backend; sqlite3 to inspect a store by hand in tests;
# strace to see which files the agent's processes open; libclang-rt-14-dev
# for libFuzzer (make fuzz; clang only recommends it); clang-tidy and
# cppcheck for make lint.  The workload suite (tests/workloads) runs the
# tools agents call: python3-venv, -setuptools and -wheel (a venv and a
# local wheel), Debian's cargo (a fresh machine has no ~/.cargo) and
# golang-go, openssl (a test CA), less and vim on a pseudo-terminal.
# The audit exporter: librelp-dev (sbx-audit and sbx-auditd speak RELP);
# its tests start their own rsyslogd with imrelp (rsyslog, rsyslog-relp).
PKGS="gcc clang make pkg-config libc6-dev
libyaml-dev libpcre2-dev libsqlite3-dev libbsd-dev libmd-dev libseccomp-dev libcmocka-dev
libmicrohttpd-dev libjansson-dev librelp-dev
python3 git curl sqlite3 busybox-static bubblewrap procps iproute2 strace
libclang-rt-14-dev clang-tidy cppcheck
python3-venv python3-setuptools python3-wheel cargo golang-go openssl less vim
runsc
rsyslog rsyslog-relp"
# Installed only when the command is missing: node may come from elsewhere
# (nodesource's nodejs carries npm and conflicts with Debian's npm).
CMDS="node:nodejs npm:npm"
# sbx-serve's data-science profile: numpy, pandas and scipy, which its runner
# pre-imports; python3-yaml: tests/serve/manifests.sh parses the k8s files.
PKGS="$PKGS python3-numpy python3-pandas python3-scipy python3-yaml"

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing="$missing $p"
    fi
done
for c in $CMDS; do
    command -v "${c%%:*}" >/dev/null 2>&1 || missing="$missing ${c#*:}"
done
[ -z "$missing" ] && exit 0

echo "deps: installing:$missing"
if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
else
    echo "deps: these Debian packages are missing and I am not root:$missing" >&2
    echo "deps: run as root: apt-get update && apt-get install -y$missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
