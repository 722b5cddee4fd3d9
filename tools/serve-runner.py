"""serve-runner: the Python half of sbx-serve (docs/serve-protocol.md).

    python3 -I -B serve-runner.py check|exec

Runs inside the request's sandbox, in the interpreter that then runs the
user's code.  sbx-serve writes a configuration line on fd 3 and reads the
answers on fd 4 (one JSON object per line).

  check  the validator: answers {"id", "violations"} for every {"id", "code"}
         until EOF.  It parses with Python's own parser and walks the tree
         once (the stages `ast_scan` and `blocklist_audit` of SERVE.md); it
         never runs the code it checks.
  exec   a single-use sandbox: imports the profile's pre-imports, installs
         the runtime hooks (SERVE.md "At run time"), says ready, waits for
         one {"code"}, closes fds 3 and 4 and runs the code as __main__.
         The exit status is the result: 0, 1 after an uncaught exception,
         N for SystemExit(N).

Exit 3: the runner itself failed (bad configuration, a pre-import missing,
a malformed or oversized line); a line {"error": TEXT} on fd 4 says why.

Speed matters in check mode (every request is checked): the rule tables
and the patterns are built once at start, the tree is walked once, and
the walk allocates nothing for nodes that cannot be violations.

Python 3.11, standard library only.  sbx's kernel layer is the wall; what
this file does stops mistakes, not attackers.
"""

import ast
import json
import os
import re
import sys

MAX_LINE = 16 * 1024 * 1024
READ_CHUNK = 64 << 10           # LineReader's reads
FD_IN, FD_OUT = 3, 4

# ---- the rule tables of SERVE.md "The static check" -------------------------

BLOCKED_NAMES = (
    "eval exec compile __import__ open getattr setattr delattr breakpoint "
    "input globals locals vars get_type_hints").split()
DANGEROUS_ATTRS = (
    "open exec eval compile system popen get_data _evaluate FileIO ForwardRef "
    "get_field vformat get_type_hints").split()
BLOCKED_MODULES = frozenset("subprocess socket importlib signal".split())
OS_CALLS = frozenset((
    "system popen kill killpg getppid getpid getpgid setpgid setsid abort fork "
    "forkpty execl execle execlp execlpe execv execve execvp execvpe spawnl "
    "spawnle spawnlp spawnlpe spawnv spawnve spawnvp spawnvpe posix_spawn "
    "posix_spawnp _exit").split())
DUNDERS = (
    "__subclasses__ __globals__ __builtins__ __traceback__ __import__ "
    "__class__ __bases__ __mro__ __dict__ __code__ __closure__ __name__ "
    "__getattribute__ __getattr__ __self__ __loader__ __spec__ __cached__ "
    "__func__ __wrapped__").split()
FRAME_ATTRS = (
    "f_globals f_locals f_builtins f_code gi_frame gi_code cr_frame cr_code "
    "ag_frame ag_code tb_frame").split()
MODULE_ALIASES = (
    "_os _sys _subprocess _socket _signal _ctypes _multiprocessing _pickle "
    "_marshal _shutil _mmap _pty os sys subprocess socket signal ctypes "
    "multiprocessing pickle marshal shutil mmap pty builtins bltns codecs io "
    "pathlib tempfile types contextlib warnings _evaluate").split()
GETTERS = frozenset(("attrgetter", "methodcaller", "itemgetter"))
# Module-qualified calls: MODULE -> {FUNCTION: (rank, message)}.
UNSAFE_DESER = {"pickle": ("loads", "load", "Unpickler"),
                "yaml": ("unsafe_load", "load"),
                "marshal": ("loads", "load"),
                "shelve": ("open",)}
WEAK_HASHES = {"hashlib": ("md5", "sha1")}

# Where one node matches several rules, the violations come in the order
# SERVE.md lists the rules; these ranks say that order.
R_IMPORT, R_NAME, R_ATTR, R_MODULE, R_OS, R_DUNDER, R_FRAME, R_ALIAS, \
    R_GETTER, R_STR_EQ, R_FORMAT, R_SECRET, R_TRAVERSAL, R_SQL, R_DESER, \
    R_HASH, R_BLOCKLIST = range(17)

FRAME_SUFFIX = " (frame/generator introspection)"


def _first_wins(pairs):
    """{name: (rank, text)} keeping the first rule that names a name: one
    name gives one message even where two of SERVE.md's lists share it
    (`_evaluate`, `__import__`, `get_type_hints`)."""
    table = {}
    for name, rank, text in pairs:
        table.setdefault(name, (rank, text))
    return table


# x.ATTR, and `from M import ATTR` (an attribute access on the module).
ATTR_RULES = _first_wins(
    [(a, R_ATTR, f"access to '{a}' attribute is not allowed (dangerous function)")
     for a in DANGEROUS_ATTRS]
    + [(d, R_DUNDER, f"access to '{d}' attribute is not allowed") for d in DUNDERS]
    + [(f, R_FRAME, f"access to '{f}' attribute is not allowed" + FRAME_SUFFIX)
       for f in FRAME_ATTRS]
    + [(a, R_ALIAS, f"access to '{a}' attribute is not allowed (module reference)")
       for a in MODULE_ALIASES])
# A bare name (not the function of a call).
NAME_RULES = _first_wins(
    [(n, R_NAME, f"reference to '{n}' is not allowed") for n in BLOCKED_NAMES]
    + [(d, R_DUNDER, f"reference to '{d}' is not allowed") for d in DUNDERS]
    + [(f, R_FRAME, f"reference to '{f}' is not allowed" + FRAME_SUFFIX)
       for f in FRAME_ATTRS])
CALL_RULES = {n: f"call to '{n}()' is not allowed" for n in BLOCKED_NAMES}
SUBSCRIPT_RULES = _first_wins(
    [(d, R_DUNDER, f"subscript access with key '{d}' is not allowed (blocked attribute name)")
     for d in DUNDERS]
    + [(f, R_FRAME, f"subscript access with key '{f}' is not allowed (frame introspection)")
       for f in FRAME_ATTRS])
STRING_EQ_RULES = _first_wins(
    [(d, R_STR_EQ, f"string literal '{d}' matches a blocked attribute name") for d in DUNDERS]
    + [(f, R_STR_EQ, f"string literal '{f}' matches a blocked attribute name" + FRAME_SUFFIX)
       for f in FRAME_ATTRS])
BLOCKED_ATTR_NAMES = frozenset(DUNDERS) | frozenset(FRAME_ATTRS)

QUALIFIED_CALLS = {}
for _m, _fs in UNSAFE_DESER.items():
    for _f in _fs:
        QUALIFIED_CALLS[f"{_m}.{_f}"] = (R_DESER, f"call to '{_m}.{_f}()' is unsafe deserialization")
for _m, _fs in WEAK_HASHES.items():
    for _f in _fs:
        QUALIFIED_CALLS[f"{_m}.{_f}"] = (R_HASH, f"call to '{_m}.{_f}()' uses weak cryptography")
for _f in OS_CALLS:
    QUALIFIED_CALLS[f"os.{_f}"] = (R_OS, f"call to 'os.{_f}()' is not allowed")
# The first component of a dotted call name that can start a rule.
QUALIFIED_ROOTS = frozenset(BLOCKED_MODULES | {"os"} | set(UNSAFE_DESER) | set(WEAK_HASHES))

# A format field that reaches a blocked attribute: "{0.__globals__}",
# "{x[f_globals]}", "{0.__init__.__globals__}".
RE_FORMAT = re.compile(r"\{[^{}]*?[.\[](?:%s)(?![A-Za-z0-9_])"
                       % "|".join(sorted(BLOCKED_ATTR_NAMES, key=len, reverse=True)))
SECRETS = [
    ("AWS access key ID", re.compile(r"AKIA[0-9A-Z]{16}")),
    ("generic secret assignment", re.compile(
        r"(?i)(?<![A-Za-z0-9_])(?:api_key|api_secret|token|secret_key|password|passwd|auth_token)"
        r"\s*[:=]\s*(?:'[^'\n]{16,}'|\"[^\"\n]{16,}\")")),
    ("PEM private key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----")),
    ("high-entropy hex string", re.compile(r"(?<![A-Za-z0-9_])[0-9a-fA-F]{32,}(?![A-Za-z0-9_])")),
]
SECRET_RULES = [(rx.search, f"string literal matches {name} pattern") for name, rx in SECRETS]
# The same assignment written as code: `API_KEY = "..."`, `db.password =
# "..."`, `connect(auth_token="...")` (the value is the string literal).
RE_SECRET_NAME = re.compile(
    r"(?i)(?:^|_)(?:api_key|api_secret|token|secret_key|password|passwd|auth_token)$").search
RE_SQL = re.compile(r"(?i)(?<![A-Za-z0-9_])(?:SELECT|INSERT|UPDATE|DELETE|DROP|ALTER|CREATE|EXEC|UNION)"
                    r"(?![A-Za-z0-9_])").search
MSG_SQL_FSTRING = "potential SQL injection via f-string containing SQL keywords"
MSG_SQL_PERCENT = "potential SQL injection via %-formatting containing SQL keywords"
MSG_SQL_FORMAT = "potential SQL injection via .format() on a string containing SQL keywords"
MSG_FORMAT = "string contains format spec accessing a blocked attribute"
MSG_TRAVERSAL = "string literal contains path traversal sequence ('../')"

STAGES = ("ast_scan", "blocklist_audit")

# For each node class, the fields that may hold nodes: the walk skips
# names, numbers, contexts and operators (they hold nothing to check).
_LEAF_FIELDS = frozenset(("ctx", "op", "id", "attr", "kind", "type_comment", "conversion",
                          "is_async", "level", "module", "asname", "name", "names", "arg"))


def _child_fields():
    table = {}
    for cls in vars(ast).values():
        if isinstance(cls, type) and issubclass(cls, ast.AST):
            table[cls] = tuple(f for f in cls._fields if f not in _LEAF_FIELDS)
    return table


CHILD_FIELDS = _child_fields()


class Checker:
    """The static stages of one profile.  check(code) -> [(stage, line, text)]."""

    def __init__(self, allowed_imports, blocklist, stages):
        self.allowed = frozenset(allowed_imports)
        self.ast_scan = "ast_scan" in stages
        self.blocklist = frozenset()        # "module.attr"
        self.blocked_attrs = frozenset()    # the attr parts, to filter nodes early
        if "blocklist_audit" in stages:
            self.blocklist = frozenset(f"{m}.{a}" for m, a in blocklist)
            self.blocked_attrs = frozenset(a for _, a in blocklist)
        self.attr_filter = ATTR_RULES.keys() | self.blocked_attrs

    # -- the walk -------------------------------------------------------------

    def check(self, code):
        try:
            tree = ast.parse(code, "<code>")
        except SyntaxError as e:
            line = e.lineno or 1
            return [("ast_scan", line, f"SyntaxError: {e.msg} (line {line})")]
        except (ValueError, UnicodeError, RecursionError, MemoryError, OverflowError) as e:
            # Null bytes, lone surrogates, nesting too deep for the parser:
            # Python would not compile it either.
            return [("ast_scan", 1, f"SyntaxError: {e or type(e).__name__} (line 1)")]

        imports, calls, attrs, names, subscripts, strings, fstrings, percents, assigns = \
            [], [], [], [], [], [], [], [], []
        name_rules = NAME_RULES
        attr_filter = self.attr_filter
        t_name, t_attr, t_call, t_const = ast.Name, ast.Attribute, ast.Call, ast.Constant
        t_import, t_from, t_sub, t_joined, t_binop = \
            ast.Import, ast.ImportFrom, ast.Subscript, ast.JoinedStr, ast.BinOp
        t_mod = ast.Mod
        t_assign, t_annassign, t_keyword = ast.Assign, ast.AnnAssign, ast.keyword
        child_fields = CHILD_FIELDS
        t_list, t_ast = list, ast.AST
        stack = [tree]
        pop, push = stack.pop, stack.append
        # Depth first, without recursion (any nesting the parser accepts is
        # walked); the order does not matter (violations are sorted by
        # position at the end), only that every node is seen once.
        while stack:
            node = pop()
            t = node.__class__
            if t is t_name:
                if node.id in name_rules:
                    names.append(node)
                continue                    # a Name has no children worth walking
            if t is t_const:
                if node.value.__class__ is str:
                    strings.append(node)
                continue
            if t is t_attr:
                if node.attr in attr_filter:
                    attrs.append(node)
            elif t is t_call:
                calls.append(node)
            elif t is t_sub:
                s = node.slice
                if s.__class__ is t_const and s.value.__class__ is str:
                    subscripts.append(node)
            elif t is t_import or t is t_from:
                imports.append(node)
            elif t is t_joined:
                fstrings.append(node)
            elif t is t_binop:
                if node.op.__class__ is t_mod:
                    percents.append(node)
            elif t is t_assign or t is t_annassign or t is t_keyword:
                v = node.value
                if v.__class__ is t_const and v.value.__class__ is str and len(v.value) >= 16:
                    assigns.append(node)
            for f in child_fields[t]:
                v = getattr(node, f, None)
                if v.__class__ is t_list:
                    for x in v:
                        if isinstance(x, t_ast):
                            push(x)
                elif isinstance(v, t_ast):
                    push(v)
        return self._judge(imports, calls, attrs, names, subscripts, strings, fstrings, percents,
                           assigns)

    # -- the rules ------------------------------------------------------------

    def _judge(self, imports, calls, attrs, names, subscripts, strings, fstrings, percents,
               assigns):
        out = []                        # (line, col, -end_line, -end_col, rank, stage, text)
        add = out.append
        scan = self.ast_scan
        # Names bound by imports, for calls through an alias and the
        # blocklist: `import numpy as np` -> np: numpy; `from pickle import
        # loads as l` -> l: pickle.loads.  One table for the whole module.
        bound = {}
        imported = set()                # local names that import statements bound
        for node in imports:
            if node.__class__ is ast.Import:
                for a in node.names:
                    if a.asname:
                        bound[a.asname] = a.name
                        imported.add(a.asname)
                    else:
                        top = a.name.partition(".")[0]
                        bound[top] = top
                        imported.add(top)
                    if scan:
                        top = a.name.partition(".")[0]
                        if top not in self.allowed:
                            add(_v(node, R_IMPORT, "ast_scan",
                                   f"import of '{top}' is not allowed (not in allowed imports)"))
                    if self.blocklist:
                        self._blocklisted_module(node, a.name, add)
            else:
                mod = node.module or ""
                if node.level:
                    if scan:
                        add(_v(node, R_IMPORT, "ast_scan",
                               f"import of '{'.' * node.level + mod}' is not allowed "
                               "(not in allowed imports)"))
                else:
                    if scan:
                        top = mod.partition(".")[0]
                        if top not in self.allowed:
                            add(_v(node, R_IMPORT, "ast_scan",
                                   f"import of '{top}' is not allowed (not in allowed imports)"))
                for a in node.names:
                    local = a.asname or a.name
                    if not node.level:
                        bound[local] = f"{mod}.{a.name}"
                        imported.add(local)
                    if scan and a.name in ATTR_RULES:
                        rank, text = ATTR_RULES[a.name]
                        add(_v(node, rank, "ast_scan", text))
                    if self.blocklist and not node.level:
                        full = f"{mod}.{a.name}"
                        hit = self._blocklisted(full)
                        if hit:
                            add(_v(node, R_BLOCKLIST, "blocklist_audit",
                                   f"access to '{hit}' is blocked by profile"))

        consumed = set()                # id() of nodes a more specific rule reported
        for node in calls:
            func = node.func
            fc = func.__class__
            if fc is ast.Name:
                fid = func.id
                if fid in CALL_RULES:
                    if scan:
                        add(_v(node, R_NAME, "ast_scan", CALL_RULES[fid]))
                    consumed.add(id(func))
                    continue
                if fid in GETTERS:
                    if scan:
                        self._getter(node, fid, add, consumed)
                    continue
                if scan and "." in bound.get(fid, ""):     # from M import F; F()
                    self._qualified(node, func, bound[fid], add, consumed)
            elif fc is ast.Attribute:
                attr = func.attr
                value = func.value
                if attr in GETTERS:
                    if scan:
                        self._getter(node, attr, add, consumed)
                    continue
                if attr == "format" and value.__class__ is ast.Constant:
                    if scan and value.value.__class__ is str and RE_SQL(value.value):
                        add(_v(node, R_SQL, "ast_scan", MSG_SQL_FORMAT))
                    continue
                if scan:
                    dotted = _dotted(func)
                    if dotted:
                        root, _, rest = dotted.partition(".")
                        self._qualified(node, func, f"{bound.get(root, root)}.{rest}", add, consumed)

        if scan:
            for node in names:
                if id(node) not in consumed:
                    rank, text = NAME_RULES[node.id]
                    add(_v(node, rank, "ast_scan", text))
        for node in attrs:
            if scan and id(node) not in consumed:
                r = ATTR_RULES.get(node.attr)
                if r:
                    add(_v(node, r[0], "ast_scan", r[1]))
            if self.blocklist and node.attr in self.blocked_attrs:
                dotted = _dotted(node)
                if dotted:
                    root, _, rest = dotted.partition(".")
                    if root in imported:
                        hit = self._blocklisted(f"{bound[root]}.{rest}")
                        if hit:
                            add(_v(node, R_BLOCKLIST, "blocklist_audit",
                                   f"access to '{hit}' is blocked by profile"))
        if not scan:
            return _sorted(out)

        for node in subscripts:
            r = SUBSCRIPT_RULES.get(node.slice.value)
            if r:
                add(_v(node, r[0], "ast_scan", r[1]))
                consumed.add(id(node.slice))
        secret_values = set()           # id() of values assigned to a secret's name
        for node in assigns:
            c = node.__class__
            if c is ast.keyword:
                targets = (node.arg or "",)
            else:
                targets = [t.id if t.__class__ is ast.Name else t.attr
                           for t in (node.targets if c is ast.Assign else (node.target,))
                           if t.__class__ is ast.Name or t.__class__ is ast.Attribute]
            if any(RE_SECRET_NAME(n) for n in targets):
                secret_values.add(id(node.value))
        aws, generic = SECRET_RULES[0], SECRET_RULES[1]
        for node in strings:
            s = node.value
            if s in STRING_EQ_RULES and id(node) not in consumed:
                rank, text = STRING_EQ_RULES[s]
                add(_v(node, rank, "ast_scan", text))
            if "{" in s and RE_FORMAT.search(s):
                add(_v(node, R_FORMAT, "ast_scan", MSG_FORMAT))
            if len(s) >= 16:
                if id(node) in secret_values:     # the assignment is the second pattern
                    add(_v(node, R_SECRET, "ast_scan", aws[1] if aws[0](s) else generic[1]))
                else:
                    for search, text in SECRET_RULES:
                        if search(s):
                            add(_v(node, R_SECRET, "ast_scan", text))
                            break
            if "../" in s:
                add(_v(node, R_TRAVERSAL, "ast_scan", MSG_TRAVERSAL))
        for node in fstrings:
            placeholder = False
            text = []
            for v in node.values:
                if v.__class__ is ast.FormattedValue:
                    placeholder = True
                elif v.__class__ is ast.Constant and v.value.__class__ is str:
                    text.append(v.value)
            if placeholder and RE_SQL("".join(text)):
                add(_v(node, R_SQL, "ast_scan", MSG_SQL_FSTRING))
        for node in percents:
            left = node.left
            if left.__class__ is ast.Constant and left.value.__class__ is str and RE_SQL(left.value):
                add(_v(node, R_SQL, "ast_scan", MSG_SQL_PERCENT))
        return _sorted(out)

    def _qualified(self, node, func, full, add, consumed):
        """A call to MODULE.F(): blocked modules, os calls, unsafe
        deserialization, weak hashes.  The call's report replaces the one
        its function attribute would get (`os.system`, `shelve.open`)."""
        root = full.partition(".")[0]
        if root not in QUALIFIED_ROOTS:
            return
        if root in BLOCKED_MODULES:
            add(_v(node, R_MODULE, "ast_scan",
                   f"call to '{full}()' is not allowed (module '{root}' is blocked)"))
        else:
            r = QUALIFIED_CALLS.get(full)
            if not r:
                return
            add(_v(node, r[0], "ast_scan", r[1]))
        consumed.add(id(func))

    @staticmethod
    def _getter(node, fname, add, consumed):
        for arg in node.args:
            if arg.__class__ is not ast.Constant or arg.value.__class__ is not str:
                continue
            seen = set()
            for part in arg.value.split("."):
                if part in seen:
                    continue
                seen.add(part)
                if part in BLOCKED_ATTR_NAMES:
                    add(_v(node, R_GETTER, "ast_scan",
                           f"dynamic attribute access to '{part}' via {fname}() is not allowed"))
                elif len(part) > 4 and part.startswith("__") and part.endswith("__"):
                    add(_v(node, R_GETTER, "ast_scan",
                           f"dynamic access to dunder '{part}' via {fname}() is not allowed"))
            consumed.add(id(arg))

    def _blocklisted(self, full):
        """The blocklist entry that the dotted name `full` is or lies under."""
        bl = self.blocklist
        if full in bl:
            return full
        i = full.rfind(".")
        while i > 0:
            full = full[:i]
            if full in bl:
                return full
            i = full.rfind(".")
        return None

    def _blocklisted_module(self, node, name, add):
        hit = self._blocklisted(name)       # import numpy.ctypeslib
        if hit:
            add(_v(node, R_BLOCKLIST, "blocklist_audit", f"access to '{hit}' is blocked by profile"))


def _v(node, rank, stage, text):
    col = node.col_offset
    if node.__class__ is ast.Attribute and node.end_lineno == node.lineno:
        col = node.end_col_offset - len(node.attr)  # where the attribute's name is written
    return (node.lineno, col, -node.end_lineno, -node.end_col_offset, rank, stage,
            f"Line {node.lineno}: {text}")


def _sorted(out):
    """Source order: by line, then column (an attribute's column is where
    its name is written: `x.__class__.__mro__` reports __class__ first); a
    node before the nodes inside it that start where it starts; within one
    node in the order SERVE.md lists the rules.  A node reports a message
    once."""
    if len(out) > 1:
        out.sort(key=lambda v: v[:5])
        seen = set()
        uniq = []
        for v in out:
            k = (v[0], v[1], v[2], v[3], v[6])
            if k not in seen:
                seen.add(k)
                uniq.append(v)
        out = uniq
    return [(v[5], v[0], v[6]) for v in out]


def _dotted(node):
    """'a.b.c' for an Attribute chain on a Name, else None."""
    parts = []
    while node.__class__ is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if node.__class__ is not ast.Name:
        return None
    parts.append(node.id)
    parts.reverse()
    return ".".join(parts)


# ---- the protocol -------------------------------------------------------------

class ProtocolError(Exception):
    pass


class LineReader:
    """Lines of at most MAX_LINE bytes from a file descriptor."""

    def __init__(self, fd):
        self.fd = fd
        self.buf = bytearray()
        self.scanned = 0                # no newline in buf[:scanned]

    def readline(self):
        """The next line without its newline, or None at EOF."""
        while True:
            i = self.buf.find(b"\n", self.scanned)
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[:i + 1]
                self.scanned = 0
                return line
            self.scanned = len(self.buf)
            if self.scanned > MAX_LINE:
                raise ProtocolError("line longer than 16 MiB")
            # 64 KiB: a read of 1 MiB made Python map, shrink and unmap a
            # fresh buffer for each request, two page faults and three
            # system calls of the validator's ~0.3 ms a check.
            chunk = os.read(self.fd, READ_CHUNK)
            if not chunk:
                if self.buf:
                    raise ProtocolError("unterminated line at end of input")
                return None
            self.buf += chunk

    def read_json(self):
        line = self.readline()
        if line is None:
            return None
        if len(line) > MAX_LINE:
            raise ProtocolError("line longer than 16 MiB")
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise ProtocolError(f"malformed line: {e}") from None
        if not isinstance(obj, dict):
            raise ProtocolError("a line must be a JSON object")
        return obj


def send(obj):
    # ASCII JSON: valid UTF-8 whatever a message quotes.
    data = (json.dumps(obj, separators=(",", ":")) + "\n").encode("ascii")
    while data:
        n = os.write(FD_OUT, data)
        data = data[n:]


def fail(text, before_ready=False):
    """The runner cannot go on: say why on fd 4 if it is open, exit 3."""
    try:
        send({"ready": False, "error": text} if before_ready else {"error": text})
    except OSError:
        pass
    os._exit(3)


def _str_list(cfg, key):
    v = cfg.get(key, [])
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ProtocolError(f"'{key}' must be a list of strings")
    return v


def parse_config(cfg):
    allowed = _str_list(cfg, "allowed_imports")
    pre = _str_list(cfg, "pre_imports")
    bl = cfg.get("blocklist", [])
    if not isinstance(bl, list) or not all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) and x for x in p)
            for p in bl):
        raise ProtocolError("'blocklist' must be a list of [module, attribute] pairs")
    stages = cfg.get("stages", [{"name": "ast_scan", "mode": "enforce"}])
    names = []
    if not isinstance(stages, list):
        raise ProtocolError("'stages' must be a list")
    for s in stages:
        if not isinstance(s, dict) or s.get("name") not in STAGES \
                or s.get("mode", "enforce") not in ("enforce", "observe"):
            raise ProtocolError(f"unknown stage {json.dumps(s)}")
        names.append(s["name"])
    hooks = cfg.get("runtime_hooks", "enforce")
    if hooks not in ("enforce", "observe"):
        raise ProtocolError("'runtime_hooks' must be enforce or observe")
    return allowed, pre, [tuple(p) for p in bl], names, hooks == "enforce"


def ready():
    send({"ready": True, "pid": os.getpid(), "python": sys.version.split()[0]})


def main_check(reader, checker):
    ready()
    while True:
        req = reader.read_json()
        if req is None:
            os._exit(0)
        code = req.get("code")
        if not isinstance(code, str):
            raise ProtocolError("a request needs a string 'code'")
        send({"id": req.get("id"),
              "violations": [{"stage": st, "line": ln, "message": msg}
                             for st, ln, msg in checker.check(code)]})


# ---- exec mode: the runtime hooks and the run -----------------------------------

# The safe attrgetter and methodcaller are built in a namespace of their own
# that holds no reference to operator's originals: what a user could reach
# from them (__globals__, __closure__ are statically blocked anyway) gives
# nothing back that the code does not already have.
_SAFE_OPERATOR_SRC = '''
def _refuse(name):
    if name.__class__ is not str:
        raise TypeError("attribute name must be a string")
    for part in name.split("."):
        if len(part) > 4 and part[:2] == "__" and part[-2:] == "__":
            raise RuntimeError("dunder attribute access blocked by sandbox")

class attrgetter:
    """attrgetter(attr, ...): as operator.attrgetter; a dunder part is refused."""
    __slots__ = ("_names", "_single")

    def __init__(self, attr, *attrs):
        names = (attr,) + attrs
        for n in names:
            _refuse(n)
        object.__setattr__(self, "_names", tuple(tuple(n.split(".")) for n in names))
        object.__setattr__(self, "_single", not attrs)

    def __call__(self, obj):
        out = []
        for parts in self._names:
            o = obj
            for p in parts:
                o = getattr(o, p)
            out.append(o)
        return out[0] if self._single else tuple(out)

    def __repr__(self):
        return "operator.attrgetter(%s)" % ", ".join(repr(".".join(p)) for p in self._names)

    def __setattr__(self, k, v):
        raise AttributeError("attrgetter is immutable")

class methodcaller:
    """methodcaller(name, /, *args, **kwargs): as operator.methodcaller; a
    dunder name is refused."""
    __slots__ = ("_name", "_args", "_kwargs")

    def __init__(self, name, /, *args, **kwargs):
        _refuse(name)
        if "." in name:
            pass                    # as the original: a dotted name is one attribute name
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_args", args)
        object.__setattr__(self, "_kwargs", kwargs)

    def __call__(self, obj):
        return getattr(obj, self._name)(*self._args, **self._kwargs)

    def __repr__(self):
        args = [repr(self._name)] + [repr(a) for a in self._args]
        args += ["%s=%r" % kv for kv in self._kwargs.items()]
        return "operator.methodcaller(%s)" % ", ".join(args)

    def __setattr__(self, k, v):
        raise AttributeError("methodcaller is immutable")
'''


def install_hooks(allowed, user_globals):
    import builtins
    import operator
    import random

    # An import hook for the user's own module (its top level and the
    # functions it defines share user_globals); the standard library's
    # modules have their own globals and import what they need.  C code
    # that imports on the user's behalf (datetime.strptime loads
    # _strptime) comes here with the globals of the user's frame too, but
    # with a list as fromlist, which an import statement never passes (it
    # passes None or a tuple): that is the library's import, let through.
    real_import = builtins.__import__
    allowed = frozenset(allowed)

    def sandbox_import(name, globals=None, locals=None, fromlist=(), level=0):
        if globals is user_globals and level == 0 and fromlist.__class__ is not list \
                and name.partition(".")[0] not in allowed:
            raise ImportError(f"import of '{name.partition('.')[0]}' blocked by sandbox")
        return real_import(name, globals, locals, fromlist, level)

    builtins.__import__ = sandbox_import
    for name in ("open", "breakpoint", "input"):
        builtins.__dict__.pop(name, None)
    random.__dict__.pop("_os", None)

    ns = {"__builtins__": builtins, "__name__": "operator"}
    exec(compile(_SAFE_OPERATOR_SRC, "<sandbox operator>", "exec"), ns)
    operator.attrgetter = ns["attrgetter"]
    operator.methodcaller = ns["methodcaller"]


def _set_stdio():
    """stdout and stderr write through to their pipes: what the code
    printed before a kill (the timeout's SIGKILL) is in the pipe, not lost
    in a buffer.  See docs/serve.md "At run time" for the cost."""
    import io
    for fd, name in ((1, "stdout"), (2, "stderr")):
        raw = io.FileIO(fd, "w", closefd=False)
        stream = io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape" if fd == 1
                                  else "backslashreplace", write_through=True)
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _print_exception(exc):
    """The traceback of an uncaught exception, naming only the user's
    frames (File "<code>"), chained exceptions included."""
    import traceback
    te = traceback.TracebackException(type(exc), exc, exc.__traceback__, compact=True)
    seen = set()
    todo = [te]
    while todo:
        t = todo.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        kept = [f for f in t.stack if f.filename == "<code>"]
        t.stack = traceback.StackSummary.from_list(kept)
        for nxt in (t.__cause__, t.__context__):
            if nxt is not None:
                todo.append(nxt)
        for sub in (t.exceptions or ()):
            todo.append(sub)
    sys.stderr.write("".join(te.format()))


def _flush():
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except (OSError, ValueError):
            pass


_STATUS_FD = None      # a fork server's child: its request's status socket


def _exit(status):
    """Ends the process now: the exit status is all sbx-serve waits for, and
    the interpreter's teardown (numpy's, pandas') would only delay it.
    Threads the code started are waited for as Python would.  A fork
    server's child says its status itself (sbx-serve then answers without
    waiting for the zygote; a status the code forges there is no more than
    the exit code it could choose anyway)."""
    th = sys.modules.get("threading")
    if th is not None:
        try:
            th._shutdown()
        except BaseException:
            pass
    _flush()
    if _STATUS_FD is not None:
        # The streams end here, not after the kernel has torn down this
        # copy of the interpreter's memory (exit closes files last): the
        # answer waits for their end of file.
        for fd in (1, 2):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.write(_STATUS_FD, b"W" + ((status & 0xFF) << 8).to_bytes(4, sys.byteorder))
        except OSError:
            pass
    os._exit(status)


def _prepare_exec(allowed, pre_imports, hooks):
    """What every exec sandbox has before its request: unbuffered stdio,
    the pre-imports, a fresh __main__, the runtime hooks.  Returns the
    __main__ module."""
    import linecache  # noqa: F401  (loaded before `open` leaves builtins)
    import traceback  # noqa: F401
    import types

    _set_stdio()
    for name in pre_imports:
        try:
            __import__(name)
        except BaseException as e:      # noqa: BLE001: any failure is the profile's
            fail(f"pre-import '{name}' failed: {type(e).__name__}: {e}", before_ready=True)

    main = types.ModuleType("__main__")
    user_globals = main.__dict__
    user_globals["__builtins__"] = sys.modules["builtins"]
    if hooks:
        install_hooks(allowed, user_globals)
    return main


def _run_request(reader, main, close_fds=(FD_IN, FD_OUT)):
    """Reads the one request from READER, closes the protocol's fds and
    runs the code as __main__; never returns."""
    import linecache

    req = reader.read_json()
    if req is None:
        os._exit(3)
    code = req.get("code")
    if not isinstance(code, str):
        fail("a request needs a string 'code'")
    for fd in close_fds:
        os.close(fd)

    user_globals = main.__dict__
    # The code's own lines, for its tracebacks (mtime None: never re-read).
    linecache.cache["<code>"] = (len(code), None, code.splitlines(True), "<code>")
    sys.modules["__main__"] = main
    try:
        exec(compile(code, "<code>", "exec"), user_globals)
    except SystemExit as e:
        c = e.code
        if c is None:
            _exit(0)
        if isinstance(c, int):
            _exit(c & 0xFF)
        try:
            sys.stderr.write(f"{c}\n")
        except BaseException:
            pass
        _exit(1)
    except BaseException as e:
        try:
            _print_exception(e)
        except BaseException:
            pass
        _exit(1)
    _exit(0)


def main_exec(reader, allowed, pre_imports, hooks):
    main = _prepare_exec(allowed, pre_imports, hooks)
    ready()
    _run_request(reader, main)


# ---- zygote mode: the fork server (docs/serve.md "The fork server") -------------

FD_ZYGOTE = 5           # a SOCK_SEQPACKET socket to sbx-serve


class _Walls:
    """What a forked child adds to the sandbox it inherits, built once in
    the zygote: a Landlock layer of its own (a new domain: the request's
    processes cannot signal, ptrace or read /proc/PID/mem, environ or fd/
    of the zygote; with ABI 6 no signal and no abstract unix socket leaves
    the request), and a seccomp filter that refuses setsid and setpgid (no
    process of the request leaves its process group, which the timeout and
    the zygote kill as a whole) and System V IPC and POSIX message queues
    (the one kind of state a request could leave in the zygote's ipc
    namespace).  Layers only narrow what the sandbox allows."""

    def __init__(self):
        import ctypes
        import platform
        import struct

        self.ctypes, self.struct = ctypes, struct
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.syscall = self.libc.syscall
        self.syscall.restype = ctypes.c_long
        self.prctl = self.libc.prctl
        try:
            self.rebind = self.libc.sbx_guard_rebind
            self.rebind.argtypes = (ctypes.c_char_p,) * 3
        except AttributeError:
            self.rebind = None          # no guard in this sandbox
        arch = platform.machine()
        # landlock_create_ruleset, _add_rule, _restrict_self; then the
        # calls the filter refuses.
        if arch == "x86_64":
            ll = (444, 445, 446)
            refused = (112, 109, 29, 64, 68, 240)   # setsid setpgid shmget semget msgget mq_open
            audit_arch = 0xC000003E
        elif arch == "aarch64":
            ll = (444, 445, 446)
            refused = (157, 154, 194, 190, 186, 180)
            audit_arch = 0xC00000B7
        else:
            raise ProtocolError(f"the fork server does not know the architecture {arch}")
        self.ll = ll
        L = ctypes.c_long
        self.abi = self.syscall(L(ll[0]), None, L(0), L(1))
        if self.abi < 1:
            raise ProtocolError("the fork server needs Landlock")
        bits = 13 if self.abi == 1 else 14 if self.abi == 2 else 15
        fs_all = (1 << bits) - 1
        if self.abi >= 6:
            self.attr = struct.pack("=QQQ", fs_all, 0, 3)          # scopes: abstract unix, signals
        else:
            self.attr = struct.pack("=Q", fs_all)
        # Everything on "/": the sandbox's own layer decides what the files
        # are; this layer is for the domain and its scopes.
        self.root = os.open("/", os.O_PATH | os.O_CLOEXEC)
        self.rule = struct.pack("=Qi", fs_all, self.root)
        # struct sock_filter {u16 code; u8 jt, jf; u32 k}
        ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
        eperm, allow, kill = 0x00050001, 0x7FFF0000, 0x80000000
        ins = [(ld, 0, 0, 4), (jeq, 1, 0, audit_arch), (ret, 0, 0, kill),
               (ld, 0, 0, 0), (jge, 0, 1, 0x40000000), (ret, 0, 0, eperm)]    # x32 numbers
        for nr in refused:
            ins += [(jeq, 0, 1, nr), (ret, 0, 0, eperm)]
        ins.append((ret, 0, 0, allow))
        self.bpf = ctypes.create_string_buffer(b"".join(struct.pack("=HBBI", *i) for i in ins))

        class FProg(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
        self.fprog = FProg(len(ins), ctypes.cast(self.bpf, ctypes.c_void_p))
        # The calls' arguments, built here once: the child only makes them.
        self.args_create = (L(ll[0]), ctypes.c_char_p(self.attr), L(len(self.attr)), L(0))
        self.args_rule = (L(ll[1]), None, L(1), ctypes.c_char_p(self.rule), L(0))
        self.args_restrict = (L(ll[2]), None, L(0))
        self.args_seccomp = (ctypes.c_int(22), ctypes.c_ulong(2), ctypes.byref(self.fprog),
                             ctypes.c_ulong(0), ctypes.c_ulong(0))

    def _fail(self, what):
        e = self.ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")

    def enter(self):
        """In the child: the layer and the filter.  Raises OSError."""
        rs = self.syscall(*self.args_create)
        if rs < 0:
            self._fail("landlock_create_ruleset")
        try:
            fd = self.ctypes.c_long(rs)
            a = self.args_rule
            if self.syscall(a[0], fd, *a[2:]) < 0:
                self._fail("landlock_add_rule")
            if self.syscall(self.args_restrict[0], fd, *self.args_restrict[2:]) < 0:
                self._fail("landlock_restrict_self")
        finally:
            os.close(rs)
        # PR_SET_SECCOMP, SECCOMP_MODE_FILTER (no_new_privs is already set)
        if self.prctl(*self.args_seccomp) != 0:
            self._fail("seccomp")


def _rehearse():
    """The waiting child compiles a throw-away line and writes nothing to
    its stdout: the pages of the zygote that compiling and printing write
    (reference counts, the parser's and the allocator's state) are copied
    now, while the child waits, not while its request's clock runs.  A
    request's run then takes ~25 page faults instead of ~60 (~1.4 ms
    instead of ~2.2 on this machine; docs/serve.md "Speed"), for ~32 here.
    Nothing runs, so nothing of it is left for the code."""
    try:
        compile("print\n", "<rehearsal>", "exec")
        sys.stdout.write("")
    except Exception:                   # noqa: BLE001: only a warm-up
        pass


def _zygote_child(walls, main, data, fds):
    """The forked child: becomes the request's agent (DATA: the fork
    request, JSON), enters its walls, takes its descriptors and runs the
    code.  Never returns."""
    req_r, out_w, err_w, status = fds
    try:
        msg = json.loads(data)
        if not all(isinstance(msg.get(k), str) and msg[k]
                   for k in ("id", "agent", "run_id", "token")):
            raise ProtocolError("a fork request needs id, agent, run_id and token")
        if walls.rebind is not None and walls.rebind(
                msg["agent"].encode(), msg["run_id"].encode(), msg["token"].encode()) != 0:
            raise OSError(walls.ctypes.get_errno(), "cannot report as the request's agent")
        os.environ.update({"SBX_AGENT": msg["agent"], "SBX_AGENT_ID": msg["run_id"],
                           "SBX_AGENT_TOKEN": msg["token"]})
        os.setpgid(0, 0)
        walls.enter()
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.dup2(req_r, FD_IN)
        os.dup2(status, FD_OUT)
        # Nothing of the zygote: its socket, its descriptor of "/".
        os.closerange(FD_OUT + 1, 1 << 20)
        global _STATUS_FD
        _STATUS_FD = FD_OUT
        _rehearse()
    except BaseException as e:          # noqa: BLE001
        try:
            os.write(err_w, f"sbx-serve: the request's sandbox failed: {e}\n".encode())
        except OSError:
            pass
        os._exit(125)
    _run_request(LineReader(FD_IN), main, close_fds=(FD_IN,))


def _empty_dir(path):
    """Removes everything in PATH (not PATH itself) but the mount points
    the sandbox put there (sbx's runtime directory when it lies under
    /tmp): what is left is what the sandbox had when it started."""
    import shutil
    try:
        dev = os.stat(path).st_dev
        entries = list(os.scandir(path))
    except OSError:
        return
    for e in entries:
        try:
            if e.stat(follow_symlinks=False).st_dev != dev:
                continue
            if e.is_dir(follow_symlinks=False):
                shutil.rmtree(e.path, ignore_errors=True)
            else:
                os.unlink(e.path)
        except OSError:
            pass


def main_zygote(reader, allowed, pre_imports, hooks):
    """The fork server: one long-lived interpreter, already inside its
    sandbox with the pre-imports and the hooks, that forks a single-use
    child for each request, one request at a time, and never runs code
    itself.  Between two requests it kills what the last one left running
    and empties /tmp: the next child finds the sandbox as the zygote left
    it when it said ready."""
    import gc
    import signal
    import socket
    import struct
    import time

    os.environ["OPENBLAS_NUM_THREADS"] = "1"    # a forked child has one thread
    walls = _Walls()
    main = _prepare_exec(allowed, pre_imports, hooks)
    sock = socket.socket(fileno=FD_ZYGOTE)
    tmp = os.environ.get("TMPDIR", "/tmp")
    _empty_dir(tmp)
    # What is loaded now is never collected: a child's collections do not
    # walk (and so copy) the zygote's objects, only its own.
    gc.collect()
    gc.freeze()
    ready()

    # The loop does as little as it can between two forks: every page it
    # writes after a fork is copied (the child still shares it), at the
    # price of a page fault each (docs/serve.md "The fork server").  The
    # request's message is parsed by the child, not here.
    recv_fds, fork, setpgid, close, send = socket.recv_fds, os.fork, os.setpgid, os.close, \
        sock.send
    while True:
        data, fds, _, _ = recv_fds(sock, 4096, 4)
        if not data:
            os._exit(0)
        try:
            if len(fds) != 4:
                raise ProtocolError("a fork request needs 4 fds")
            pid = fork()
            if pid == 0:
                _zygote_child(walls, main, data, fds)
            try:
                setpgid(pid, pid)           # before sbx-serve may kill the group
            except OSError:
                pass
            close(fds[0])
            close(fds[1])
            close(fds[2])
            # A plain send: sbx-serve finds the child in /proc (a sendmsg
            # would wait for the seccomp supervisor).
            send(b'{"pid":%d}' % pid)
        except (ProtocolError, OSError, ValueError) as e:
            for f in fds:
                try:
                    os.close(f)
                except OSError:
                    pass
            sock.send(json.dumps({"error": f"fork: {e}"}).encode())
            continue
        # The request's end: its own process first (not reaped, so its
        # group cannot be reused), then the rest of its group.
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        _, wstatus = os.waitpid(pid, 0)
        # Every process of the group is gone before /tmp is emptied and
        # the status says the request is over (the orphans' parent is the
        # sandbox's init, which reaps them; a killed process is gone from
        # its group at once).
        for _ in range(200):
            try:
                os.killpg(pid, 0)
            except OSError:
                break
            time.sleep(0.005)
        _empty_dir(tmp)
        try:
            os.write(fds[3], struct.pack("=ci", b"W", wstatus))
        except OSError:
            pass
        os.close(fds[3])


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("check", "exec", "zygote"):
        sys.stderr.write("usage: serve-runner.py check|exec|zygote\n")
        os._exit(2)
    mode = sys.argv[1]
    reader = LineReader(FD_IN)
    try:
        cfg = reader.read_json()
        if cfg is None:
            raise ProtocolError("no configuration")
        allowed, pre, blocklist, stages, hooks = parse_config(cfg)
    except ProtocolError as e:
        fail(f"configuration: {e}", before_ready=True)
    except OSError as e:
        fail(f"configuration: {type(e).__name__}: {e}", before_ready=True)
    try:
        if mode == "check":
            main_check(reader, Checker(allowed, blocklist, stages))
        elif mode == "zygote":
            main_zygote(reader, allowed, pre, hooks)
        else:
            main_exec(reader, allowed, pre, hooks)
    except ProtocolError as e:
        fail(str(e))
    except Exception as e:          # noqa: BLE001: a bug here must not hang sbx-serve
        fail(f"runner failed: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
