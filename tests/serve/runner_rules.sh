#!/bin/sh
# The runner of sbx-serve (tools/serve-runner.py) on its own, without the
# service: tests/serve/drive_runner.py talks to `python3 -I -B
# serve-runner.py check|exec` over fds 3 and 4 as sbx-serve does
# (docs/serve-protocol.md).  `check`: every static rule of SERVE.md with its
# exact message, several violations in source order, syntax errors, the
# data-science blocklist.  `exec`: exit statuses, tracebacks, the runtime
# hooks and their observe mode.
. "$(dirname "$0")/../lib.sh"

DRIVE="$SBX_ROOT/tests/serve/drive_runner.py"
PY=/usr/bin/python3             # Debian's: the interpreter sbx-serve runs

# check [DRIVER ARGS] < TABLE: every case of the table gets exactly its
# expected violations (see drive_runner.py for the table's format).
check() { "$PY" "$DRIVE" check "$@" >"$T/check.out" 2>&1 || { cat "$T/check.out" >&2; return 1; }; }

# run CODE [DRIVER ARGS]: runs CODE in a single-use runner; then
# `res FIELD` prints exit, stdout, stderr or ready of the result, and
# `out FIELD` the same followed by "|", so that a comparison sees its
# trailing newlines (a $(...) drops them).
run() { code=$1; shift; printf '%s' "$code" | "$PY" "$DRIVE" exec "$@" >"$T/res.json"; }
res() { "$PY" -c 'import json, sys
v = json.load(open(sys.argv[1]))[sys.argv[2]]
print(json.dumps(v) if isinstance(v, dict) else v, end="")' "$T/res.json" "$1"; }
out() { res "$1"; printf '|'; }

test_imports_outside_the_allowed_list_and_relative_imports_are_refused() {
    check <<'EOF'
import os
=>
Line 1: import of 'os' is not allowed (not in allowed imports)
----
import collections, csv, datetime, decimal, fractions, functools, itertools, json
import math, operator, random, re, statistics, string, textwrap, typing
from collections import OrderedDict
import collections.abc
from typing import List as L
=>
----
import os.path
=>
Line 1: import of 'os' is not allowed (not in allowed imports)
----
import json, os, sys
=>
Line 1: import of 'os' is not allowed (not in allowed imports)
Line 1: import of 'sys' is not allowed (not in allowed imports)
----
from subprocess import run
=>
Line 1: import of 'subprocess' is not allowed (not in allowed imports)
----
import numpy as np
=>
Line 1: import of 'numpy' is not allowed (not in allowed imports)
----
from . import sibling
=>
Line 1: import of '.' is not allowed (not in allowed imports)
----
from ..pkg import mod
=>
Line 1: import of '..pkg' is not allowed (not in allowed imports)
----
def f():
    if True:
        import socket
=>
Line 3: import of 'socket' is not allowed (not in allowed imports)
EOF
}

test_blocked_names_are_refused_as_calls_and_as_references() {
    for n in eval exec compile __import__ open getattr setattr delattr breakpoint input \
             globals locals vars get_type_hints; do
        printf '%s(x)\n=>\nLine 1: call to '"'"'%s()'"'"' is not allowed\n----\n' "$n" "$n"
        printf 'y = [%s]\n=>\nLine 1: reference to '"'"'%s'"'"' is not allowed\n----\n' "$n" "$n"
    done >"$T/table"
    cat >>"$T/table" <<'EOF'
eval = 1
del eval
=>
Line 1: reference to 'eval' is not allowed
Line 2: reference to 'eval' is not allowed
----
print(len("abc"), sorted([2, 1]))
=>
----
x = eval(open("f"))
=>
Line 1: call to 'eval()' is not allowed
Line 1: call to 'open()' is not allowed
----
from typing import get_type_hints as hints
=>
Line 1: access to 'get_type_hints' attribute is not allowed (dangerous function)
EOF
    check <"$T/table"
}

test_dangerous_attributes_are_refused_on_any_object() {
    for a in open exec eval compile system popen get_data _evaluate FileIO ForwardRef \
             get_field vformat get_type_hints; do
        printf 'x.%s\n=>\nLine 1: access to '"'"'%s'"'"' attribute is not allowed (dangerous function)\n----\n' "$a" "$a"
    done >"$T/table"
    cat >>"$T/table" <<'EOF'
import typing
typing.get_type_hints(f)
h = typing.ForwardRef("x")._evaluate
=>
Line 2: access to 'get_type_hints' attribute is not allowed (dangerous function)
Line 3: access to 'ForwardRef' attribute is not allowed (dangerous function)
Line 3: access to '_evaluate' attribute is not allowed (dangerous function)
----
import string
string.Formatter().vformat("{0}", [1], {})
obj.opener = obj.systems
=>
Line 2: access to 'vformat' attribute is not allowed (dangerous function)
----
from typing import ForwardRef
=>
Line 1: access to 'ForwardRef' attribute is not allowed (dangerous function)
EOF
    check <"$T/table"
}

test_calls_into_blocked_modules_are_refused_also_through_an_alias() {
    check <<'EOF'
subprocess.run(["ls"])
=>
Line 1: call to 'subprocess.run()' is not allowed (module 'subprocess' is blocked)
----
socket.socket()
signal.alarm(1)
importlib.import_module("os")
importlib.util.find_spec("os")
=>
Line 1: call to 'socket.socket()' is not allowed (module 'socket' is blocked)
Line 2: call to 'signal.alarm()' is not allowed (module 'signal' is blocked)
Line 3: call to 'importlib.import_module()' is not allowed (module 'importlib' is blocked)
Line 4: call to 'importlib.util.find_spec()' is not allowed (module 'importlib' is blocked)
----
import subprocess as sp
sp.Popen("id")
=>
Line 1: import of 'subprocess' is not allowed (not in allowed imports)
Line 2: call to 'subprocess.Popen()' is not allowed (module 'subprocess' is blocked)
----
from subprocess import check_output as co
co("id")
=>
Line 1: import of 'subprocess' is not allowed (not in allowed imports)
Line 2: call to 'subprocess.check_output()' is not allowed (module 'subprocess' is blocked)
----
subprocess.PIPE
x.subprocess_helper()
=>
EOF
}

test_os_calls_are_refused_whether_or_not_os_is_imported() {
    for a in system popen kill killpg getppid getpid getpgid setpgid setsid abort fork forkpty \
             execl execle execlp execlpe execv execve execvp execvpe spawnl spawnle spawnlp \
             spawnlpe spawnv spawnve spawnvp spawnvpe posix_spawn posix_spawnp _exit; do
        printf 'os.%s()\n=>\nLine 1: call to '"'"'os.%s()'"'"' is not allowed\n----\n' "$a" "$a"
    done >"$T/table"
    cat >>"$T/table" <<'EOF'
import os
os.system("id")
=>
Line 1: import of 'os' is not allowed (not in allowed imports)
Line 2: call to 'os.system()' is not allowed
----
import os as o
o.kill(1, 9)
=>
Line 1: import of 'os' is not allowed (not in allowed imports)
Line 2: call to 'os.kill()' is not allowed
----
from os import fork
fork()
=>
Line 1: import of 'os' is not allowed (not in allowed imports)
Line 2: call to 'os.fork()' is not allowed
----
run = os.system
os.getcwd()
=>
Line 1: access to 'system' attribute is not allowed (dangerous function)
EOF
    check <"$T/table"
}

test_dunders_are_refused_as_attribute_name_subscript_key_and_string() {
    for d in __subclasses__ __globals__ __builtins__ __traceback__ __import__ __class__ __bases__ \
             __mro__ __dict__ __code__ __closure__ __name__ __getattribute__ __getattr__ __self__ \
             __loader__ __spec__ __cached__ __func__ __wrapped__; do
        q="'$d'"
        printf 'x.%s\n=>\nLine 1: access to %s attribute is not allowed\n----\n' "$d" "$q"
        printf 'y = [%s]\n=>\nLine 1: reference to %s is not allowed\n----\n' "$d" "$q"
        printf 'x[%s]\n=>\nLine 1: subscript access with key %s is not allowed (blocked attribute name)\n----\n' "$q" "$q"
        printf 's = "%s"\n=>\nLine 1: string literal %s matches a blocked attribute name\n----\n' "$d" "$q"
    done >"$T/table"
    cat >>"$T/table" <<'EOF'
x.__init__
x["__init__"]
class A:
    def __init__(self): pass
=>
----
().__class__.__bases__[0].__subclasses__()
=>
Line 1: access to '__class__' attribute is not allowed
Line 1: access to '__bases__' attribute is not allowed
Line 1: access to '__subclasses__' attribute is not allowed
----
if __name__ == "__main__":
    pass
=>
Line 1: reference to '__name__' is not allowed
EOF
    check <"$T/table"
}

test_frame_attributes_are_refused_with_the_introspection_suffix() {
    for f in f_globals f_locals f_builtins f_code gi_frame gi_code cr_frame cr_code ag_frame \
             ag_code tb_frame; do
        q="'$f'"
        printf 'x.%s\n=>\nLine 1: access to %s attribute is not allowed (frame/generator introspection)\n----\n' "$f" "$q"
        printf 'y = [%s]\n=>\nLine 1: reference to %s is not allowed (frame/generator introspection)\n----\n' "$f" "$q"
        printf 'x[%s]\n=>\nLine 1: subscript access with key %s is not allowed (frame introspection)\n----\n' "$q" "$q"
        printf 's = "%s"\n=>\nLine 1: string literal %s matches a blocked attribute name (frame/generator introspection)\n----\n' "$f" "$q"
    done >"$T/table"
    cat >>"$T/table" <<'EOF'
g = (i for i in [1])
g.gi_frame.f_back.f_globals
=>
Line 2: access to 'gi_frame' attribute is not allowed (frame/generator introspection)
Line 2: access to 'f_globals' attribute is not allowed (frame/generator introspection)
EOF
    check <"$T/table"
}

test_module_references_as_attributes_are_refused() {
    for a in _os _sys _subprocess _socket _signal _ctypes _multiprocessing _pickle _marshal \
             _shutil _mmap _pty os sys subprocess socket signal ctypes multiprocessing pickle \
             marshal shutil mmap pty builtins bltns codecs io pathlib tempfile types contextlib \
             warnings; do
        printf 'm.%s\n=>\nLine 1: access to '"'"'%s'"'"' attribute is not allowed (module reference)\n----\n' "$a" "$a"
    done >"$T/table"
    cat >>"$T/table" <<'EOF'
import random
random._os.system("id")
=>
Line 2: access to '_os' attribute is not allowed (module reference)
Line 2: access to 'system' attribute is not allowed (dangerous function)
----
x._evaluate
=>
Line 1: access to '_evaluate' attribute is not allowed (dangerous function)
----
os.path.join("a", "b")
=>
EOF
    check <"$T/table"
}

test_attrgetter_methodcaller_itemgetter_refuse_dunder_and_frame_parts() {
    check <<'EOF'
from operator import attrgetter
attrgetter("__globals__")(f)
=>
Line 2: dynamic attribute access to '__globals__' via attrgetter() is not allowed
----
import operator
operator.attrgetter("a.__class__.__mro__")
operator.methodcaller("__reduce__")
operator.itemgetter("f_globals", "x")
=>
Line 2: dynamic attribute access to '__class__' via attrgetter() is not allowed
Line 2: dynamic attribute access to '__mro__' via attrgetter() is not allowed
Line 3: dynamic access to dunder '__reduce__' via methodcaller() is not allowed
Line 4: dynamic attribute access to 'f_globals' via itemgetter() is not allowed
----
import operator
operator.attrgetter("__init__.__globals__")
=>
Line 2: dynamic access to dunder '__init__' via attrgetter() is not allowed
Line 2: dynamic attribute access to '__globals__' via attrgetter() is not allowed
----
import operator
operator.attrgetter("real", "imag")(3)
operator.methodcaller("upper")("a")
operator.itemgetter(0, "key")
=>
EOF
}

test_string_constants_with_format_fields_secrets_or_traversal_are_refused() {
    check <<'EOF'
s = "{0.__globals__}"
=>
Line 1: string contains format spec accessing a blocked attribute
----
"{0.__init__.__globals__}".format(f)
t = "{x[f_globals]}"
u = "{0.__init__} {0.name} {__class__"
=>
Line 1: string contains format spec accessing a blocked attribute
Line 2: string contains format spec accessing a blocked attribute
----
def f():
    """The key is AKIAABCDEFGHIJKLMNOP, do not share."""
=>
Line 2: string literal matches AWS access key ID pattern
----
k = "AKIAABCDEFGHIJKLMNOP"
=>
Line 1: string literal matches AWS access key ID pattern
----
c = "password = 'hunter2hunter2hunter2'"
d = 'API_KEY: "0123456789abcdefXYZ"'
e = "token = 'short'          "
=>
Line 1: string literal matches generic secret assignment pattern
Line 2: string literal matches generic secret assignment pattern
----
API_KEY = "sk-live-0123456789abcdef"
db.password = "correct horse battery"
connect(auth_token="0123456789abcdef0123456789abcdef")
secret_key: str = "AKIAABCDEFGHIJKLMNOP"
token = "short"
tokens = "this is a long enough string"
=>
Line 1: string literal matches generic secret assignment pattern
Line 2: string literal matches generic secret assignment pattern
Line 3: string literal matches generic secret assignment pattern
Line 4: string literal matches AWS access key ID pattern
----
pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIE"
pem2 = "-----BEGIN PRIVATE KEY-----"
cert = "-----BEGIN CERTIFICATE-----"
=>
Line 1: string literal matches PEM private key pattern
Line 2: string literal matches PEM private key pattern
----
h = "d41d8cd98f00b204e9800998ecf8427e"
h31 = "d41d8cd98f00b204e9800998ecf8427"
hword = "xd41d8cd98f00b204e9800998ecf8427e"
=>
Line 1: string literal matches high-entropy hex string pattern
----
both = "AKIAABCDEFGHIJKLMNOP d41d8cd98f00b204e9800998ecf8427e"
=>
Line 1: string literal matches AWS access key ID pattern
----
p = "../etc/passwd"
q = "..\\x" + "./x" + "a..b/"
=>
Line 1: string literal contains path traversal sequence ('../')
----
r = "../{0.__globals__}"
=>
Line 1: string contains format spec accessing a blocked attribute
Line 1: string literal contains path traversal sequence ('../')
----
path = f"../{name}"
=>
Line 1: string literal contains path traversal sequence ('../')
EOF
}

test_sql_built_from_text_is_refused() {
    check <<'EOF'
q = f"SELECT * FROM t WHERE id = {uid}"
=>
Line 1: potential SQL injection via f-string containing SQL keywords
----
q = f"select {col} from t"
r = f"{a} UNION {b}"
s = f"SELECT * FROM t"
t = f"we selected {n} rows"
=>
Line 1: potential SQL injection via f-string containing SQL keywords
Line 2: potential SQL injection via f-string containing SQL keywords
----
q = "DELETE FROM t WHERE id = %s" % uid
n = "%d items" % k
=>
Line 1: potential SQL injection via %-formatting containing SQL keywords
----
q = "UPDATE t SET a = {}".format(v)
m = "{} updated".format(v)
=>
Line 1: potential SQL injection via .format() on a string containing SQL keywords
----
for k in ["insert", "drop", "alter", "create", "exec"]:
    cur.execute(f"{k} x {k}")
cur.execute(f"Insert into t values ({v})")
=>
Line 3: potential SQL injection via f-string containing SQL keywords
EOF
}

test_unsafe_deserialization_and_weak_hashes_are_refused() {
    check <<'EOF'
pickle.loads(b)
pickle.load(f)
pickle.Unpickler(f)
yaml.unsafe_load(s)
yaml.load(s)
marshal.loads(b)
marshal.load(f)
shelve.open("db")
=>
Line 1: call to 'pickle.loads()' is unsafe deserialization
Line 2: call to 'pickle.load()' is unsafe deserialization
Line 3: call to 'pickle.Unpickler()' is unsafe deserialization
Line 4: call to 'yaml.unsafe_load()' is unsafe deserialization
Line 5: call to 'yaml.load()' is unsafe deserialization
Line 6: call to 'marshal.loads()' is unsafe deserialization
Line 7: call to 'marshal.load()' is unsafe deserialization
Line 8: call to 'shelve.open()' is unsafe deserialization
----
import pickle as p
p.loads(b)
=>
Line 1: import of 'pickle' is not allowed (not in allowed imports)
Line 2: call to 'pickle.loads()' is unsafe deserialization
----
hashlib.md5(b"x")
hashlib.sha1(b"x")
hashlib.sha256(b"x")
json.loads("{}")
=>
Line 1: call to 'hashlib.md5()' uses weak cryptography
Line 2: call to 'hashlib.sha1()' uses weak cryptography
EOF
    # A profile that allows hashlib: only the weak hash is left.
    check --config '{"allowed_imports": ["hashlib"]}' <<'EOF'
import hashlib
from hashlib import md5
hashlib.blake2b(b"x").hexdigest()
md5(b"x")
=>
Line 4: call to 'hashlib.md5()' uses weak cryptography
EOF
}

test_every_violation_is_reported_in_source_order() {
    check <<'EOF'
import os
x = eval("1")
def f():
    return x.__class__.__mro__
y = "{0.__globals__}"; z = os.system("id")
@x.__dict__
class C: pass
=>
Line 1: import of 'os' is not allowed (not in allowed imports)
Line 2: call to 'eval()' is not allowed
Line 4: access to '__class__' attribute is not allowed
Line 4: access to '__mro__' attribute is not allowed
Line 5: string contains format spec accessing a blocked attribute
Line 5: call to 'os.system()' is not allowed
Line 6: access to '__dict__' attribute is not allowed
----
print(getattr(__builtins__, "ev" + "al")("1"))
=>
Line 1: call to 'getattr()' is not allowed
Line 1: reference to '__builtins__' is not allowed
EOF
}

test_a_syntax_error_is_the_single_violation_with_pythons_message() {
    check <<'EOF'
import os
x = = 1
=>
SyntaxError: invalid syntax (line 2)
----
print("a"
=>
SyntaxError: '(' was never closed (line 1)
----
if True:
print(1)
=>
SyntaxError: expected an indented block after 'if' statement on line 1 (line 2)
----
a = 'abc
=>
SyntaxError: unterminated string literal (detected at line 1) (line 1)
----
x = 1
  y = 2
=>
SyntaxError: unexpected indent (line 2)
EOF
}

test_data_science_blocklist_reports_module_attributes_through_imports_and_aliases() {
    for a in read_pickle read_sql read_sql_query read_sql_table read_html read_fwf read_clipboard \
             read_excel read_feather read_parquet read_orc read_sas read_spss read_stata read_gbq \
             read_hdf; do
        printf 'import pandas as pd\ndf = pd.%s("f")\n=>\nblocklist_audit: Line 2: access to '"'"'pandas.%s'"'"' is blocked by profile\n----\n' "$a" "$a"
    done >"$T/table"
    cat >>"$T/table" <<'EOF'
import numpy as np
np.ctypeslib.load_library("x", ".")
=>
blocklist_audit: Line 2: access to 'numpy.ctypeslib' is blocked by profile
----
import numpy
u = numpy.frompyfunc(f, 1, 1)
=>
blocklist_audit: Line 2: access to 'numpy.frompyfunc' is blocked by profile
----
from pandas import read_pickle, read_csv
=>
blocklist_audit: Line 1: access to 'pandas.read_pickle' is blocked by profile
----
import scipy.io
scipy.io.loadmat("m.mat")
scipy.io.mmread("m")
=>
ast_scan: Line 2: access to 'io' attribute is not allowed (module reference)
blocklist_audit: Line 2: access to 'scipy.io.loadmat' is blocked by profile
ast_scan: Line 3: access to 'io' attribute is not allowed (module reference)
blocklist_audit: Line 3: access to 'scipy.io.mmread' is blocked by profile
----
from scipy import io as sio
sio.savemat("m", {})
from scipy.io import mmwrite
=>
ast_scan: Line 1: access to 'io' attribute is not allowed (module reference)
blocklist_audit: Line 2: access to 'scipy.io.savemat' is blocked by profile
blocklist_audit: Line 3: access to 'scipy.io.mmwrite' is blocked by profile
----
import numpy as np, pandas as pd, scipy
print(np.arange(3).sum(), pd.read_csv, scipy.linalg)
=>
----
df = pandas.read_pickle("x")
=>
----
import os, pandas
os.system(pandas.read_sql("q", c))
=>
ast_scan: Line 1: import of 'os' is not allowed (not in allowed imports)
ast_scan: Line 2: call to 'os.system()' is not allowed
blocklist_audit: Line 2: access to 'pandas.read_sql' is blocked by profile
EOF
    check --profile data-science <"$T/table"
    # Without the stage (minimal) the blocklist is not consulted; with the
    # stage alone, ast_scan's rules are not either.
    check <<'EOF'
import numpy
numpy.ctypeslib
=>
Line 1: import of 'numpy' is not allowed (not in allowed imports)
EOF
    check --profile data-science --config '{"stages": [{"name": "blocklist_audit", "mode": "observe"}]}' <<'EOF'
import os, numpy
numpy.ctypeslib.x(eval("1"))
=>
blocklist_audit: Line 2: access to 'numpy.ctypeslib' is blocked by profile
EOF
}

test_the_runner_answers_protocol_errors_with_exit_3() {
    out=$(printf 'not json\n' | "$PY" "$DRIVE" raw check)
    assert_contains "$out" '{"ready":false,"error":"configuration: malformed line'
    assert_contains "$out" "exit 3"
    out=$(printf '{"stages":[{"name":"nope"}]}\n' | "$PY" "$DRIVE" raw check)
    assert_contains "$out" '"ready":false' && assert_contains "$out" "exit 3"
    out=$(printf '{}\n{"id":1,"code":"eval(1)"}\n{"id":2}\n' | "$PY" "$DRIVE" raw check)
    assert_contains "$out" '{"id":1,"violations":[{"stage":"ast_scan","line":1,"message":"Line 1: call to '"'"'eval()'"'"' is not allowed"}]}'
    assert_contains "$out" '{"error":"a request needs a string '"'"'code'"'"'"}'
    assert_contains "$out" "exit 3"
    out=$(printf '{}\n{"id":1,"code":"x = 1"}\n' | "$PY" "$DRIVE" raw check)
    assert_contains "$out" '{"id":1,"violations":[]}'
    assert_contains "$out" "exit 0"
    out=$(printf '{"pre_imports":["no_such_module_sbx"]}\n' | "$PY" "$DRIVE" raw exec)
    assert_contains "$out" '{"ready":false,"error":"pre-import '"'"'no_such_module_sbx'"'"' failed: ModuleNotFoundError'
    assert_contains "$out" "exit 3"
}

test_the_scan_of_a_small_snippet_takes_well_under_a_millisecond() {
    out=$(printf 'import os\nx = eval("1")\nprint(x.__class__)\n' | "$PY" "$DRIVE" bench 2000)
    echo "$out"
    scan=$(echo "$out" | sed -n 's/.*scan p50 \([0-9]*\) us.*/\1/p')
    [ -n "$scan" ] && [ "$scan" -lt 500 ] || fail "scan p50 ${scan:-?} us: $out"
}

test_exec_prints_and_exits_0() {
    run 'import math
print(f"pi = {math.pi:.2f}")'
    assert_eq "$(res exit)" 0 && assert_eq "$(out stdout)" "pi = 3.14
|" && assert_eq "$(out stderr)" "|"
    assert_contains "$(res ready)" '"ready": true'
}

test_an_uncaught_exception_exits_1_with_a_traceback_of_the_users_own_lines() {
    run 'x = 1
y = 2
raise ValueError("boom")'
    assert_eq "$(res exit)" 1
    err=$(res stderr)
    assert_contains "$err" 'File "<code>", line 3, in <module>'
    assert_contains "$err" 'raise ValueError("boom")'
    assert_contains "$err" "ValueError: boom"
    assert_not_contains "$err" "serve-runner"
    run 'import json
def parse(s):
    return json.loads(s)
parse("{")'
    err=$(res stderr)
    assert_eq "$(res exit)" 1
    assert_contains "$err" 'File "<code>", line 4, in <module>'
    assert_contains "$err" 'File "<code>", line 3, in parse'
    assert_contains "$err" "json.decoder.JSONDecodeError"
    assert_not_contains "$err" 'File "/'
}

test_system_exit_follows_pythons_rules() {
    run 'print("a")
raise SystemExit(7)'
    assert_eq "$(res exit)" 7 && assert_eq "$(out stdout)" "a
|"
    run 'raise SystemExit(None)'
    assert_eq "$(res exit)" 0
    run 'raise SystemExit("bye")'
    assert_eq "$(res exit)" 1 && assert_eq "$(out stderr)" "bye
|"
    run 'exit(3)'
    assert_eq "$(res exit)" 3
}

test_the_code_runs_as_main_in_a_fresh_namespace() {
    run 'print(__name__, sorted(k for k in globals() if not k.startswith("__")))
import collections
P = collections.namedtuple("P", "x y")
print(P(1, 2), P.__module__)'
    assert_eq "$(res exit)" 0
    assert_eq "$(out stdout)" "__main__ []
P(x=1, y=2) __main__
|"
}

test_the_import_hook_refuses_the_users_imports_outside_the_list() {
    run 'import os'
    assert_eq "$(res exit)" 1
    assert_contains "$(res stderr)" "ImportError: import of 'os' blocked by sandbox"
    run 'def f():
    import xml.dom
f()'
    assert_contains "$(res stderr)" "ImportError: import of 'xml' blocked by sandbox"
    assert_contains "$(res stderr)" 'File "<code>", line 2, in f'
    run 'from socket import socket'
    assert_contains "$(res stderr)" "ImportError: import of 'socket' blocked by sandbox"
}

test_the_standard_librarys_own_imports_still_work_under_the_hook() {
    # statistics imports fractions, decimal, numbers...; strptime imports
    # _strptime, locale and calendar when first called.
    run 'import statistics, datetime
print(statistics.mean([1, 2, 3]))
print(datetime.datetime.strptime("2024-01-02", "%Y-%m-%d").year)'
    assert_eq "$(out stderr)" "|" && assert_eq "$(res exit)" 0
    assert_eq "$(out stdout)" "2
2024
|"
}

test_open_breakpoint_input_and_random_os_are_removed() {
    run 'import random
print([hasattr(__builtins__, n) for n in ("open", "breakpoint", "input", "print")])
print(hasattr(random, "_os"), 0 <= random.random() < 1)
open("/etc/hostname")'
    assert_eq "$(out stdout)" "[False, False, False, True]
False True
|"
    assert_contains "$(res stderr)" "NameError: name 'open' is not defined"
    assert_eq "$(res exit)" 1
}

test_attrgetter_and_methodcaller_refuse_dunders_at_call_time_without_exposing_the_originals() {
    run 'import operator
print(operator.attrgetter("real")(3), operator.attrgetter("real", "imag")(3))
print(operator.methodcaller("split", ",")("a,b"), operator.methodcaller("upper")("x"))
g = operator.attrgetter.__init__.__globals__
print(sorted(k for k in g if k != "__builtins__"))
for make in (lambda: operator.attrgetter("__cl" + "ass__"), lambda: operator.attrgetter("a.__dict__"),
             lambda: operator.methodcaller("__reduce__")):
    try:
        make()
    except RuntimeError as e:
        print(e)
from operator import attrgetter
attrgetter("__globals__")'
    assert_eq "$(out stdout)" "3 (3, 0)
['a', 'b'] X
['__name__', '_refuse', 'attrgetter', 'methodcaller']
dunder attribute access blocked by sandbox
dunder attribute access blocked by sandbox
dunder attribute access blocked by sandbox
|"
    assert_contains "$(res stderr)" "RuntimeError: dunder attribute access blocked by sandbox"
    assert_eq "$(res exit)" 1
}

test_pre_imports_are_loaded_before_the_code_runs() {
    "$PY" -c 'import numpy, pandas, scipy' 2>/dev/null || skip "python3-numpy, -pandas, -scipy not installed (make deps)"
    run 'import sys
print([m in sys.modules for m in ("numpy", "pandas", "scipy")])' \
        --profile data-science --config '{"runtime_hooks": "observe"}'
    assert_eq "$(out stdout)" "[True, True, True]
|"
    run 'import sys
print("statistics" in sys.modules)' --config '{"runtime_hooks": "observe", "pre_imports": ["statistics"]}'
    assert_eq "$(out stdout)" "True
|"
    run 'import numpy as np
print(np.arange(4).sum())' --profile data-science
    assert_eq "$(out stdout)" "6
|" && assert_eq "$(res exit)" 0
}

test_runtime_hooks_observe_installs_none() {
    run 'import os, operator
print(callable(open), os.getpid() > 0, operator.attrgetter("__class__")(1))
print([os.path.exists(f"/proc/self/fd/{n}") for n in (3, 4)])' --config '{"runtime_hooks": "observe"}'
    assert_eq "$(out stderr)" "|"
    assert_eq "$(out stdout)" "True True <class 'int'>
[False, False]
|"
}

test_what_was_printed_before_a_kill_is_kept() {
    run 'print("line")
print("partial", end="")
while True: pass' --timeout 2
    assert_eq "$(res exit)" -9
    assert_eq "$(out stdout)" "line
partial|"
}

run_tests
