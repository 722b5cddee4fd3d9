#!/bin/sh
# Python as agents use it: a virtual environment (ensurepip writes pip's
# bundled CA bundle, certifi/cacert.pem), a wheel installed into it from a
# local directory, no network, and an import.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.inc"

# A wheel of a tiny package, built bare once per test into $T/wheels.
build_wheel() {
    mkdir -p "$T/pkg/tinypkg"
    printf 'def hello():\n    return "hello from tinypkg"\n' > "$T/pkg/tinypkg/__init__.py"
    printf 'from setuptools import setup\nsetup(name="tinypkg", version="0.1", packages=["tinypkg"])\n' \
        > "$T/pkg/setup.py"
    (cd "$T/pkg" && python3 -m pip wheel -q --no-index --no-build-isolation --no-deps \
        -w "$T/wheels" .) >"$T/wheel.log" 2>&1 || { cat "$T/wheel.log"; return 1; }
}

copy_wheels() { cp -r "$T/wheels" "$1/wheels"; }

test_venv_pip_install_of_a_local_wheel_and_import_behave_as_bare() {
    python3 -c 'import ensurepip, venv' 2>/dev/null || skip "python3-venv is not installed (make deps)"
    python3 -c 'import setuptools, wheel' 2>/dev/null || skip "python3-setuptools or python3-wheel is not installed (make deps)"
    build_wheel || skip "cannot build a wheel here"
    cat > "$T/venv.sh" <<'EOF'
set -e
python3 -m venv .venv
.venv/bin/pip install -q --no-index --disable-pip-version-check wheels/tinypkg-0.1-py3-none-any.whl
.venv/bin/python -c 'import tinypkg; print(tinypkg.hello())'
.venv/bin/pip list --disable-pip-version-check --format=freeze 2>/dev/null | grep tinypkg
EOF
    same_as_bare venv.sh copy_wheels
}

run_tests
