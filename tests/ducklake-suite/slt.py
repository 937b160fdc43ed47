#!/usr/bin/env python3
"""A sqllogictest runner for DuckLake's own test suite (DuckDB dialect).

Used to measure moraine against DuckLake's tests: every file is run under a
catalog configuration and the pass counts are compared.

  duckdb    DuckLake's default: a DuckDB-file catalog (the test files' own
            test-env defaults).
  moraine   DUCKLAKE_CONNECTION=postgres:host=127.0.0.1 port=P dbname=lake,
            a fresh `moraine serve` (fresh store) per test file.
  postgres  DUCKLAKE_CONNECTION=postgres:host=127.0.0.1 port=P user=postgres
            dbname=tN, one throwaway PostgreSQL 15 cluster, a fresh database
            per test file (what the suite's test/configs/postgres.json does
            with its on_init DROP SCHEMA ... CASCADE).

It follows DuckDB's C++ runner (test/sqlite/sqllogic_*.cpp, result_helper.cpp)
where it matters for a verdict:
  * records and their boundaries (blank line / '#' line / '----'),
  * test-env (the configuration's value wins over the file's default),
    ${VAR} and {VAR} substitution, {UUID} drawn afresh per record,
    __TEST_DIR__ / {TEST_DIR} a fresh directory per file,
  * skipif/onlyif (system names and loop conditions), mode skip/unskip,
    loop/foreach/concurrentloop/concurrentforeach (a new connection per
    concurrent iteration), named connections,
  * statement ok/error/maybe: an error's expected text must be a substring
    (or <REGEX>:/<!REGEX>: full match); internal errors never pass,
  * query: values are DuckDB's own VARCHAR casts of the result (NULL,
    (empty), booleans as 1/0), rowsort/valuesort sort the result only,
    row-wise or one-value-per-line expectations, numeric columns compared
    after casting (floats within 1%), booleans true/1 false/0, labels and
    'N values hashing to MD5' compare MD5 hashes, column count must match.
A file is 'pass' only if every record it runs behaves as written; 'skip'
when it needs something absent here (an extension, an environment
variable); 'fail' otherwise — also when it uses a construct this runner
does not run (the `set` directive, `load`, `restart`, `statement` modes
other than ok/error/maybe, output modes, unknown foreach collections; no
v1.5 file does), so a gap in the runner can never pass a file unseen.

Extensions load from the PyPI duckdb-extension-* packages (nothing is
downloaded); `require X` may load the suite's CI build set (ducklake, parquet,
icu, json, tpch, core_functions) plus httpfs and spatial, and postgres_scanner
only under moraine/postgres. Files the suite's own test/configs/postgres.json
skips still run under moraine/postgres; their reason column says so.

  slt.py --tests DIR [--config duckdb|moraine|postgres] [--moraine BIN]
         [--filter SUBSTR] [--files-from FILE] [--timeout S] [--out TSV]
         [--logs DIR] [--keep-going] [--parse-only] [--expect-fail FILE]
DIR is a DuckLake checkout (holds test/sql and data/); the run's cwd is DIR.
Each file runs in its own process under --timeout (a hang is 'fail timeout').
--keep-going is for diagnosis: it runs a failing file to its end and lists
every failing record (later ones may be consequences of the first).
--expect-fail FILE names the files known to fail (one path a line, '#'
comments): the exit status is 1 when any other file that ran failed, and
listed files that now pass are named so the list can shrink.
"""
import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from decimal import Decimal, InvalidOperation, ROUND_HALF_UP

RESULT_MARK = "@@SLT-RESULT@@ "

# the suite's own list of tests that do not apply to a PostgreSQL catalog
# (test/configs/postgres.json skip_tests), read at run time when present
PG_CONFIG = "test/configs/postgres.json"

# extension packages installed from PyPI (duckdb-extension-<pkg>) -> the name
# DuckDB loads them under
EXT_PACKAGES = {"ducklake": "ducklake", "postgres": "postgres_scanner", "httpfs": "httpfs",
                "tpch": "tpch", "sqlite_scanner": "sqlite_scanner", "spatial": "spatial",
                "parquet": "parquet", "json": "json"}

# ---------------------------------------------------------------- errors


class Skip(Exception):
    pass


class Fail(Exception):
    pass


class ParseError(Exception):
    pass


class Unsupported(Exception):
    """A construct of the sqllogictest language this runner does not run.
    No file of the v1.5 suite uses one (a full run reaches none of them);
    a file that does fails, naming it, rather than being skipped unseen."""

# ---------------------------------------------------------------- parsing
# a port of SQLLogicParser: a record starts at a line that is neither empty
# nor starts with '#'; a statement's SQL runs to an empty line, a '#' line or
# '----'; an expected result / error runs from '----' to the next empty line.


class Parser:
    def __init__(self, text):
        self.lines = [line.replace("\r", "") for line in text.split("\n")]
        if self.lines and self.lines[-1] == "":
            self.lines.pop()
        self.cur = 0
        self.seen = False

    @staticmethod
    def empty_or_comment(line):
        return line == "" or line.startswith("#")

    def next_statement(self):
        if self.seen:
            while self.cur < len(self.lines) and not self.empty_or_comment(self.lines[self.cur]):
                self.cur += 1
        self.seen = True
        while self.cur < len(self.lines) and self.empty_or_comment(self.lines[self.cur]):
            self.cur += 1
        return self.cur < len(self.lines)

    def tokenize(self):
        words = self.lines[self.cur].split()
        if not words:
            raise ParseError(f"line {self.cur + 1}: empty line!?")
        return words[0], words[1:], self.cur + 1

    def next_line(self):
        self.cur += 1

    def extract_statement(self):
        out = []
        while self.cur < len(self.lines) and not self.empty_or_comment(self.lines[self.cur]):
            if self.lines[self.cur] == "----":
                break
            out.append(self.lines[self.cur])
            self.cur += 1
        return "\n".join(out)

    def extract_expected_result(self):
        res = []
        if self.cur < len(self.lines) and self.lines[self.cur] == "----":
            self.cur += 1
        while self.cur < len(self.lines) and self.lines[self.cur] != "":
            res.append(self.lines[self.cur])
            self.cur += 1
        return res

    def extract_expected_error(self, expect_ok):
        if self.cur >= len(self.lines) or self.lines[self.cur] != "----":
            return None
        if expect_ok:
            raise ParseError(f"line {self.cur + 1}: only statement error can have an expected error message")
        self.cur += 1
        lines = []
        while self.cur < len(self.lines) and self.lines[self.cur] != "":
            lines.append(self.lines[self.cur])
            self.cur += 1
        return "\n".join(lines)


class Cmd:
    def __init__(self, kind, line, **kw):
        self.kind, self.line = kind, line
        self.conditions = []
        self.__dict__.update(kw)


class Loop:
    def __init__(self, name, tokens, start, end, parallel, line):
        self.name, self.tokens, self.start, self.end = name, tokens, start, end
        self.parallel, self.line = parallel, line
        self.body = []
        self.kind = "loop"
        self.conditions = []


def foreach_tokens(params):
    """SQLLogicTestRunner::ForEachTokenReplace."""
    out = []
    signed = ["tinyint", "smallint", "integer", "bigint", "hugeint"]
    unsigned = ["utinyint", "usmallint", "uinteger", "ubigint", "uhugeint"]
    for p in params:
        t = p.strip().lower()
        coll = []
        if t in ("<signed>", "<integral>", "<numeric>", "<alltypes>"):
            coll += signed
        if t in ("<unsigned>", "<integral>", "<numeric>", "<alltypes>"):
            coll += unsigned
        if t in ("<numeric>", "<alltypes>"):
            coll += ["float", "double"]
        if t == "<alltypes>":
            coll += ["bool", "interval", "varchar"]
        if t == "<compression>":
            coll += ["none", "uncompressed", "rle", "bitpacking", "dictionary", "fsst", "dict_fsst", "alp", "alprd"]
        if t.startswith("<") and t.endswith(">") and not coll:
            raise Unsupported(f"foreach collection {p}")
        if t.startswith("!") and p[1:] in out:
            out.remove(p[1:])
            continue
        out.extend(coll if coll else [p])
    return out

# ---------------------------------------------------------------- values


NUMERIC_INT = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
               "UBIGINT", "UHUGEINT"}


def numeric_kind(t):
    t = t.upper()
    if t in NUMERIC_INT:
        return ("int", None)
    if t in ("FLOAT", "DOUBLE"):
        return ("float", None)
    m = re.match(r"^DECIMAL\((\d+),\s*(\d+)\)$", t)
    if m:
        return ("dec", int(m.group(2)))
    return None


def parse_num(s, kind):
    if s == "NULL":
        return None, True
    try:
        if kind[0] == "float":
            return float(s.strip()), True
        d = Decimal(s.strip())
        if not d.is_finite():
            return None, False
        if kind[0] == "int":
            return d.quantize(Decimal(1), rounding=ROUND_HALF_UP), True
        return d.quantize(Decimal(1).scaleb(-kind[1]), rounding=ROUND_HALF_UP), True
    except (InvalidOperation, ValueError):
        return None, False


def approx_equal(a, b):
    """duckdb ApproxEqual: NaN==NaN, infinities exact, else within 1% of b."""
    if a != a and b != b:
        return True
    if a in (float("inf"), float("-inf")) or b in (float("inf"), float("-inf")) or a != a or b != b:
        return a == b
    return abs(a - b) <= abs(b) * 0.01 + 0.00000001


def py_value_str(v):
    """Fallback formatting for results DuckDB did not cast for us (Count of DML)."""
    import datetime
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, float):
        if v != v:
            return "nan"
        if v in (float("inf"), float("-inf")):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "".join(chr(b) if 32 <= b < 127 and b != 92 else f"\\x{b:02X}" for b in bytes(v))
    if isinstance(v, datetime.datetime) and v.tzinfo is not None:
        return v.strftime("%Y-%m-%d %H:%M:%S") + (f".{v.microsecond:06d}".rstrip("0") if v.microsecond else "") + "+00"
    s = str(v)
    return "(empty)" if s == "" else s


def is_hash(s):
    return re.fullmatch(r"[0-9]+ values hashing to [0-9a-z]{32}", s) is not None


def regex_matches(value, pattern_spec):
    want = pattern_spec.startswith("<REGEX>:")
    pat = pattern_spec.replace("<REGEX>:", "").replace("<!REGEX>:", "")
    try:
        m = re.fullmatch(pat, value, re.S) is not None
    except re.error:
        return False
    return m if want else not m


def one_line(s, n=400):
    s = s.replace("\t", " ").replace("\r", " ").replace("\n", " \u23ce ")
    return s if len(s) <= n else s[:n] + "\u2026"

# ---------------------------------------------------------------- running


class Ctx:
    def __init__(self, con=None, loops=None, parallel=False):
        self.con, self.loops, self.parallel = con, loops or [], parallel


REL_TYPES = {"SELECT", "CALL", "PRAGMA", "EXPLAIN", "EXECUTE", "RELATION", "ANALYZE"}


class Runner:
    def __init__(self, path, env_override, work, ext_dir, preload, allowed_ext, keep_going=False):
        import duckdb
        self.allowed_ext = set(allowed_ext)
        self.duckdb = duckdb
        self.path, self.work, self.ext_dir = path, work, ext_dir
        self.env_override = env_override
        self.env = {}
        self.hash_threshold = 0
        self.labels = {}
        self.lock = threading.Lock()
        self.finished = False
        self.parallel_failure = None
        self.records_run = 0
        self.records_mode_skipped = 0
        self.keep_going = keep_going
        self.failures = []
        self.config = {"allow_unsigned_extensions": "true", "autoinstall_known_extensions": "false",
                       "autoload_known_extensions": "false", "extension_directory": ext_dir}
        self.db = duckdb.connect(":memory:", config=self.config)
        self.db.execute(f"SET secret_directory='{os.path.join(work, 'test_secret_dir')}'")
        for ext in preload:
            self.db.execute(f"LOAD {ext}")
        self.con = self.db
        self.named = {}

    # ------------------------------------------------ substitution
    def replace_keywords(self, s):
        """SQLLogicTestRunner::ReplaceKeywords + TestConfiguration::ProcessPath."""
        for k, v in self.env.items():
            s = s.replace("${" + k + "}", v).replace("{" + k + "}", v)
        s = s.replace("{TEST_DIR}", self.work)
        if "{UUID}" in s:
            s = s.replace("{UUID}", str(uuid.uuid4()))
        s = s.replace("{TEST_NAME}", self.path)
        s = s.replace("{BASE_TEST_NAME}", self.path.replace("/", "_"))
        s = s.replace("__TEST_DIR__", self.work)
        s = s.replace("__WORKING_DIRECTORY__", os.getcwd())
        s = s.replace("__BUILD_DIRECTORY__", os.getcwd())
        return s

    @staticmethod
    def loop_replace(s, loops):
        # ${name}, and {name} as for test-env variables (the v1.5 suite's
        # issue_852_* files write CREATE TABLE stage_{i} inside a loop)
        for name, value in loops:
            names, vals = (name.split(","), value.split(",")) if "," in name else ([name], [value])
            for n, v in zip(names, vals):
                s = s.replace("${" + n + "}", v).replace("{" + n + "}", v)
        return s

    # ------------------------------------------------ file driver
    def run_file(self, text):
        p = Parser(text)
        skip_level = 0
        active = []      # open loops
        top = None
        while p.next_statement():
            if self.finished:
                break
            kw, params, lineno = p.tokenize()
            conditions = []
            skip_statement = False
            while kw in ("skipif", "onlyif"):
                skip_if = kw == "skipif"
                if not params:
                    raise ParseError(f"line {lineno}: skipif/onlyif requires a parameter")
                system = params[0].lower()
                if any(c in system for c in "=<>"):
                    for part in system.split("&&"):
                        for op in ("<>", ">=", ">", "<=", "<", "="):
                            if op in part:
                                a, b = part.split(op, 1)
                                conditions.append((a.strip(), op, b.strip(), skip_if))
                                break
                else:
                    if (system == "duckdb") == skip_if:
                        skip_statement = True
                        break
                p.next_line()
                if p.cur >= len(p.lines):
                    raise ParseError(f"line {lineno}: skipif at end of file")
                kw, params, lineno = p.tokenize()
            if skip_statement:
                continue
            if skip_level > 0 and kw != "mode":
                if kw in ("statement", "query"):
                    self.records_mode_skipped += 1
                continue
            cmd = None
            if kw == "statement":
                if not params:
                    raise ParseError(f"line {lineno}: statement requires a parameter")
                mode = params[0]
                if mode not in ("ok", "error", "maybe"):
                    raise Unsupported(f"statement {mode}")
                p.next_line()
                sql = p.extract_statement()
                if not sql:
                    raise ParseError(f"line {lineno}: empty statement text")
                err = p.extract_expected_error(mode == "ok")
                cmd = Cmd("statement", lineno, mode=mode, sql=self.replace_keywords(sql),
                          expected_error=err or "", con_name=params[1] if len(params) >= 2 else None)
            elif kw == "query":
                if not params:
                    raise ParseError(f"line {lineno}: query requires a parameter")
                cols = params[0]
                if not cols or any(c not in "TIR" for c in cols):
                    raise ParseError(f"line {lineno}: bad column types {cols!r}")
                p.next_line()
                sql = p.extract_statement()
                expected = p.extract_expected_result()
                sort, con_name, label = "nosort", None, None
                if len(params) > 1:
                    if params[1] in ("nosort", "rowsort", "sort", "valuesort"):
                        sort = "rowsort" if params[1] == "sort" else params[1]
                    else:
                        con_name = params[1]
                if len(params) > 2:
                    label = params[2]
                cmd = Cmd("query", lineno, ncols=len(cols), sql=self.replace_keywords(sql), expected=expected,
                          sort=sort, con_name=con_name, label=label)
            elif kw == "hash-threshold":
                self.hash_threshold = int(params[0])
            elif kw == "halt":
                break
            elif kw == "mode":
                if params[0] == "skip":
                    skip_level += 1
                elif params[0] == "unskip":
                    skip_level -= 1
                elif params[0] in ("output_hash", "output_result", "no_output", "debug"):
                    raise Unsupported(f"mode {params[0]}")
                else:
                    raise ParseError(f"line {lineno}: unrecognized mode {params[0]}")
            elif kw == "set":
                raise Unsupported(f"set {' '.join(params)}")
            elif kw == "reset":
                if len(params) != 2 or params[0].lower() != "label":
                    raise ParseError(f"line {lineno}: bad reset")
                cmd = Cmd("reset_label", lineno, label=params[1])
            elif kw in ("loop", "concurrentloop"):
                if len(params) != 3:
                    raise ParseError(f"line {lineno}: loop needs 3 parameters")
                lp = Loop(params[0], None, int(params[1]), int(params[2]), kw == "concurrentloop", lineno)
                (active[-1].body if active else []).append(lp)
                if not active:
                    top = lp
                active.append(lp)
                continue
            elif kw in ("foreach", "concurrentforeach"):
                if len(params) < 2:
                    raise ParseError(f"line {lineno}: foreach needs parameters")
                toks = foreach_tokens(params[1:])
                lp = Loop(params[0], toks, 0, len(toks), kw == "concurrentforeach", lineno)
                (active[-1].body if active else []).append(lp)
                if not active:
                    top = lp
                active.append(lp)
                continue
            elif kw == "endloop":
                if not active:
                    raise ParseError(f"line {lineno}: endloop without loop")
                active.pop()
                if not active:
                    self.execute(top, Ctx())
                    top = None
                continue
            elif kw == "require":
                self.require(params, lineno)
            elif kw == "test-env":
                if active:
                    raise ParseError(f"line {lineno}: test-env in a loop")
                if len(params) != 2:
                    raise ParseError(f"line {lineno}: test-env requires 2 arguments")
                if params[0] in self.env:
                    raise ParseError(f"line {lineno}: test-env {params[0]} already defined")
                self.env[params[0]] = self.env_override.get(params[0], params[1])
            elif kw == "require-env":
                val = os.environ.get(params[0])
                if val is None or (len(params) == 2 and val != params[1]):
                    raise Skip(f"require-env {' '.join(params)}")
                if params[0] in self.env:
                    raise ParseError(f"line {lineno}: {params[0]} already defined")
                self.env[params[0]] = val
            elif kw == "load":
                raise Unsupported("directive 'load' (a file-backed database)")
            elif kw == "restart":
                raise Unsupported("directive 'restart'")
            elif kw == "reconnect":
                cmd = Cmd("reconnect", lineno)
            elif kw == "sleep":
                unit = params[1]
                mult = {"second": 1, "seconds": 1, "sec": 1, "millisecond": 1e-3, "milliseconds": 1e-3,
                        "milli": 1e-3, "microsecond": 1e-6, "microseconds": 1e-6, "micro": 1e-6,
                        "nanosecond": 1e-9, "nanoseconds": 1e-9, "nano": 1e-9}.get(unit)
                if mult is None:
                    raise ParseError(f"line {lineno}: bad sleep unit")
                cmd = Cmd("sleep", lineno, seconds=int(params[0]) * mult)
            elif kw == "unzip":
                src = self.replace_keywords(params[0])
                if not src.endswith(".gz"):
                    raise ParseError(f"line {lineno}: unzip input is not .gz")
                fname = os.path.basename(src)[:-3]
                dst = self.replace_keywords(params[1]) if len(params) == 2 and params[1] != "NULL" else \
                    self.replace_keywords("__TEST_DIR__/" + fname)
                cmd = Cmd("unzip", lineno, src=src, dst=dst)
            elif kw == "tags":
                pass
            else:
                raise ParseError(f"line {lineno}: unrecognized directive {kw}")
            if cmd is not None:
                cmd.conditions = conditions
                if active:
                    active[-1].body.append(cmd)
                else:
                    self.execute(cmd, Ctx())
        if active:
            raise ParseError("missing endloop")
        if skip_level > 0 and self.records_run == 0:
            raise Skip("mode skip: no record runs")

    # ------------------------------------------------ commands
    def check_conditions(self, cmd, ctx):
        if not cmd.conditions:
            return True
        if not ctx.loops:
            raise Fail(f"line {cmd.line}: loop condition outside a loop")
        for key, op, val, skip_if in cmd.conditions:
            found, holds = False, False
            for name, value in ctx.loops:
                if name != key:
                    continue
                found = True
                if op == "=":
                    holds = value == val
                elif op == "<>":
                    holds = value != val
                else:
                    a, b = int(value), int(val)
                    holds = {">": a > b, "<": a < b, ">=": a >= b, "<=": a <= b}[op]
            if not found:
                raise Fail(f"line {cmd.line}: condition on unknown loop variable {key}")
            if holds and skip_if:
                return False
            if not holds and not skip_if:
                return False
        return True

    def execute(self, cmd, ctx):
        if self.finished:
            return
        if not self.check_conditions(cmd, ctx):
            return
        k = cmd.kind
        if k == "loop":
            self.run_loop(cmd, ctx)
        elif k in ("statement", "query"):
            self.records_run += 1
            try:
                (self.statement if k == "statement" else self.query)(cmd, ctx)
            except Fail as exc:
                if not self.keep_going:
                    raise
                with self.lock:
                    self.failures.append(str(exc))
        elif k == "sleep":
            time.sleep(cmd.seconds)
        elif k == "unzip":
            with gzip.open(cmd.src, "rb") as f, open(cmd.dst, "wb") as g:
                shutil.copyfileobj(f, g)
        elif k == "reconnect":
            if ctx.parallel:
                raise Fail("reconnect in a concurrent loop")
            self.con = self.db.cursor()
        elif k == "reset_label":
            with self.lock:
                if cmd.label not in self.labels:
                    raise Fail(f"line {cmd.line}: reset of unknown label {cmd.label}")
                del self.labels[cmd.label]

    def run_loop(self, lp, ctx):
        values = lp.tokens if lp.tokens is not None else [str(i) for i in range(lp.start, lp.end)]
        if lp.tokens is not None:
            values = [self.replace_keywords(v) for v in values]
        if lp.parallel:
            if ctx.parallel:
                raise Fail(f"line {lp.line}: nested concurrent loops")
            errors = []

            def one(v):
                try:
                    c = Ctx(self.db.cursor(), ctx.loops + [(lp.name, v)], True)
                    for sub in lp.body:
                        self.execute(sub, c)
                except Skip as exc:
                    errors.append(exc)
                except Fail as exc:
                    errors.append(exc)
                    self.finished = True
                except Exception as exc:  # noqa: BLE001
                    errors.append(Fail(f"line {lp.line}: {type(exc).__name__}: {exc}"))
                    self.finished = True
            threads = [threading.Thread(target=one, args=(v,), daemon=True) for v in values]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            fails = [e for e in errors if isinstance(e, Fail)]
            if fails:
                raise fails[0]
            if errors:
                raise errors[0]
        else:
            for v in values:
                if self.finished:
                    break
                c = Ctx(ctx.con, ctx.loops + [(lp.name, v)], ctx.parallel)
                for sub in lp.body:
                    self.execute(sub, c)

    def connection(self, cmd, ctx):
        if cmd.con_name is None:
            return ctx.con if ctx.parallel else self.con
        if ctx.parallel:
            raise Fail(f"line {cmd.line}: named connections not supported in a concurrent loop")
        with self.lock:
            if cmd.con_name not in self.named:
                self.named[cmd.con_name] = self.db.cursor()
            return self.named[cmd.con_name]

    def require(self, params, lineno):
        if not params:
            raise ParseError(f"line {lineno}: require needs a parameter")
        what = params[0].lower()
        present = {"notwindows", "notmusl", "notmingw", "64bit", "noforcestorage", "nothreadsan", "strinline",
                   "skip_reload", "no_alternative_verify", "no_latest_storage", "no_vector_verification",
                   "allow_unsigned_extensions", "ram", "disk_space", "longdouble"}
        if what in present:
            return
        if what in ("windows", "mingw"):
            raise Skip(f"require {what}")
        if what == "no_extension_autoloading":
            # autoloading is off here, as in the suite's configs; but a test of a
            # *missing* built-in extension cannot run: the Python duckdb has
            # parquet/json/icu/core_functions compiled in
            why = " ".join(params[1:]).lower()
            if "missing" in why and any(b in why for b in ("parquet", "json", "icu", "core_functions")):
                raise Skip(f"require no_extension_autoloading {' '.join(params[1:])}: the extension is built "
                           f"into the Python duckdb and cannot be absent")
            return
        if what == "vector_size":
            if int(params[1]) > 2048:
                raise Skip(f"require vector_size {params[1]}")
            return
        if what == "exact_vector_size":
            if int(params[1]) != 2048:
                raise Skip(f"require exact_vector_size {params[1]}")
            return
        if what == "block_size":
            if int(params[1]) != 262144:
                raise Skip(f"require block_size {params[1]}")
            return
        if what not in self.allowed_ext:
            raise Skip(f"require {what}: not part of this configuration's build")
        try:
            self.db.execute(f"LOAD {what}")
        except Exception as exc:  # noqa: BLE001
            raise Skip(f"require {what}: extension not available ({one_line(str(exc), 120)})")

    # ------------------------------------------------ statement
    def statement(self, cmd, ctx):
        sql = self.loop_replace(cmd.sql, ctx.loops)
        con = self.connection(cmd, ctx)
        err = None
        try:
            # the C++ runner materializes every result, so a statement runs to
            # its end; Python results stream, so fetch them (as VARCHAR casts,
            # the same way a query record does)
            self.fetch(con, sql)
        except Exception as exc:  # noqa: BLE001
            err = str(exc) or type(exc).__name__
        where = f"line {cmd.line}: [{one_line(sql, 300)}]"
        if cmd.mode == "ok":
            if err is not None:
                raise Fail(f"{where} statement failed: {one_line(err, 400)}")
            return
        if err is not None and ("INTERNAL Error" in err or "INTERNAL" in err.split(":")[0]):
            raise Fail(f"{where} internal error: {one_line(err, 400)}")
        if cmd.mode == "error" and err is None:
            raise Fail(f"{where} statement should have failed ({one_line(cmd.expected_error, 120)!r})")
        if err is not None and cmd.expected_error:
            want = cmd.expected_error
            alts = {want, self.replace_keywords(want), self.loop_replace(self.replace_keywords(want), ctx.loops)}
            if any(a in err for a in alts):
                return
            if want.startswith("<REGEX>:") or want.startswith("<!REGEX>:"):
                if any(regex_matches(e, self.loop_replace(want, ctx.loops)) for e in (err + "\n", err)):
                    return
            raise Fail(f"{where} error {one_line(err, 300)!r} does not match expected {one_line(want, 200)!r}")

    # ------------------------------------------------ query
    def fetch(self, con, sql):
        """Run sql; return (types, rows of strings) the way DuckDB's runner sees them."""
        try:
            stmts = con.extract_statements(sql)
            last = stmts[-1].type.name if stmts else "SELECT"
        except Exception:  # noqa: BLE001 - let execution report the error
            last = "SELECT"
        if last in REL_TYPES:
            rel = con.sql(sql)
            if rel is None:
                return [], []
            types = [str(t) for t in rel.types]
            if not types:
                return [], []
            proj = rel.project(", ".join(f"CAST(#{i + 1} AS VARCHAR)" for i in range(len(types))))
            raw = proj.fetchall()
            rows = []
            for r in raw:
                row = []
                for v, t in zip(r, types):
                    if v is None:
                        row.append("NULL")
                    elif t == "BOOLEAN":
                        row.append("1" if v == "true" else "0" if v == "false" else v)
                    elif v == "":
                        row.append("(empty)")
                    else:
                        row.append(v.replace("\0", "\\0"))
                rows.append(row)
            return types, rows
        res = con.execute(sql)
        if res.description is None:
            return [], []
        types = [str(d[1]) for d in res.description]
        return types, [[py_value_str(v) for v in r] for r in res.fetchall()]

    def compare_value(self, got, exp, typ, ctx):
        if got == exp or got == self.replace_keywords(exp):
            return True
        if exp.startswith("<REGEX>:") or exp.startswith("<!REGEX>:"):
            if regex_matches(got, exp):
                return True
        kind = numeric_kind(typ)
        if kind:
            a, oka = parse_num(got, kind)
            b, okb = parse_num(exp, kind)
            if not (oka and okb):
                return False
            if a is None or b is None:
                return a is None and b is None
            if kind[0] == "float":
                return approx_equal(a, b)
            return a == b
        if typ == "BOOLEAN":
            def bv(s):
                if s.lower() == "true" or s == "1":
                    return 1
                if s.lower() == "false" or s == "0":
                    return 0
                return None
            return bv(got) is not None and bv(got) == bv(exp)
        return False

    def query(self, cmd, ctx):
        sql = self.loop_replace(cmd.sql, ctx.loops)
        con = self.connection(cmd, ctx)
        where = f"line {cmd.line}: [{one_line(sql, 300)}]"
        try:
            types, rows = self.fetch(con, sql)
        except Exception as exc:  # noqa: BLE001
            raise Fail(f"{where} query failed: {one_line(str(exc) or type(exc).__name__, 400)}")
        ncols = len(types)
        result = [v for r in rows for v in r]
        total = len(result)
        expected = list(cmd.expected)
        compare_hash = cmd.label is not None or (self.hash_threshold > 0 and total > self.hash_threshold)
        result_is_hash = len(expected) == 1 and is_hash(expected[0])
        if result_is_hash:
            compare_hash = True
        if cmd.sort == "valuesort":
            result.sort()
        elif cmd.sort == "rowsort" and ncols:
            rws = sorted(result[i:i + ncols] for i in range(0, total, ncols))
            result = [v for r in rws for v in r]
        comparison = [self.loop_replace(v, ctx.loops) for v in expected]
        if compare_hash:
            md5 = hashlib.md5()
            for v in result:
                md5.update(v.encode("utf-8", "surrogateescape"))
                md5.update(b"\n")
            hv = f"{total} values hashing to {md5.hexdigest()}"
            bad = False
            if cmd.label is not None:
                with self.lock:
                    if cmd.label not in self.labels:
                        self.labels[cmd.label] = hv
                    else:
                        bad = self.labels[cmd.label] != hv
            if result_is_hash:
                bad = expected[0] != hv
            if bad:
                raise Fail(f"{where} wrong result hash: got {hv}; first values {result[:6]}")
            return
        exp_cols = cmd.ncols
        mismatch = False
        if exp_cols != ncols:
            exp_cols = ncols
            mismatch = True
        if exp_cols == 0:
            raise Fail(f"{where} query returned no columns (expected {cmd.ncols})")
        nrows = len(rows)
        exp_rows = len(comparison) // exp_cols
        row_wise = exp_cols > 1 and len(comparison) == nrows
        if not row_wise:
            row_wise = all("\t" in v for v in comparison)
        mm = f" (column count mismatch: expected {cmd.ncols}, got {ncols})" if mismatch else ""
        if row_wise:
            exp_rows = len(comparison)
        elif len(comparison) % exp_cols != 0:
            raise Fail(f"{where} expected values not divisible into {exp_cols} columns{mm}; "
                       f"got {self.show(rows)}")
        if exp_rows != nrows:
            raise Fail(f"{where} wrong row count: got {nrows}, expected {exp_rows}{mm}; got {self.show(rows)} "
                       f"expected {one_line(' | '.join(comparison[:4]), 200)}")
        if row_wise:
            flat = []
            for i in range(min(total, len(comparison))):
                splits = [s for s in comparison[i].split("\t") if s != ""] or [comparison[i]]
                if len(splits) != exp_cols:
                    raise Fail(f"{where} expected row {i + 1} has {len(splits)} values, result has {exp_cols}{mm}")
                flat.extend(splits)
            comparison = flat
        for i in range(min(total, len(comparison))):
            r, c = divmod(i, exp_cols)
            if not self.compare_value(result[i], comparison[i], types[c], ctx):
                raise Fail(f"{where} wrong result at row {r + 1} col {c + 1}: got {result[i]!r} expected "
                           f"{comparison[i]!r}; got rows {self.show([result[j:j + exp_cols] for j in range(0, total, exp_cols)])}")
        if mismatch:
            raise Fail(f"{where} right values but column count mismatch: expected {cmd.ncols}, got {ncols}")

    @staticmethod
    def show(rows, n=4):
        return one_line(" | ".join("\t".join(r) for r in rows[:n]) + (" | \u2026" if len(rows) > n else ""), 300)

# ---------------------------------------------------------------- child


def run_one(path, env_override, work, ext_dir, preload, allowed_ext, keep_going=False):
    try:
        text = open(path, encoding="utf-8", errors="surrogateescape").read()
        r = Runner(path, env_override, work, ext_dir, preload, allowed_ext, keep_going)
        r.run_file(text)
        if r.failures:
            more = "; ".join(r.failures[1:6])
            return "fail", (f"{r.failures[0]} [keep-going: {len(r.failures)} failing records of {r.records_run}"
                            + (f"; next: {more}" if more else "") + "]"), r
        note = f"mode skip: {r.records_mode_skipped} records not run" if r.records_mode_skipped else ""
        if r.records_run == 0:
            return "skip", "no record ran", r
        return "pass", note, r
    except Skip as s:
        return "skip", str(s), None
    except Fail as f:
        return "fail", str(f), None
    except ParseError as p:
        return "fail", "test file parse error: " + str(p), None
    except Unsupported as u:
        return "fail", "the runner does not support " + str(u), None
    except Exception as exc:  # noqa: BLE001
        return "fail", "runner: " + one_line("".join(traceback.format_exception_only(type(exc), exc)).strip(), 300), None

# ---------------------------------------------------------------- catalogs


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Moraine:
    def __init__(self, binary):
        self.binary, self.proc, self.log = os.path.abspath(binary), None, None

    def fresh(self, work):
        self.stop()
        store = os.path.join(work, "moraine-store")
        os.makedirs(store, exist_ok=True)
        self.log_path = os.path.join(work, "moraine.log")
        for attempt in range(3):
            self.port = free_port()
            self.log = open(self.log_path, "ab")
            self.proc = subprocess.Popen([self.binary, "serve", "--store", "file://" + store,
                                          "--listen", f"127.0.0.1:{self.port}"],
                                         stdout=self.log, stderr=subprocess.PIPE, start_new_session=True)
            deadline = time.time() + 60
            ready = False
            while time.time() < deadline:
                line = self.proc.stderr.readline()
                if not line:
                    break
                self.log.write(line)
                if b"moraine: serving" in line:
                    ready = True
                    break
            if ready:
                def pump(src, dst):
                    try:
                        for ln in iter(src.readline, b""):
                            dst.write(ln)
                            dst.flush()
                    except Exception:  # noqa: BLE001
                        pass
                threading.Thread(target=pump, args=(self.proc.stderr, self.log), daemon=True).start()
                return {"DUCKLAKE_CONNECTION": f"postgres:host=127.0.0.1 port={self.port} dbname=lake"}
            self.stop()
        raise RuntimeError("moraine did not start: " + open(self.log_path, "rb").read()[-500:].decode(errors="replace"))

    def after(self):
        """Stop the server; say so if it died during the test."""
        note = ""
        if self.proc is not None and self.proc.poll() is not None:
            note = f"moraine exited during the test (rc={self.proc.returncode})"
        self.stop()
        return note

    def stop(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(15)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(15)
            self.proc = None
        if self.log:
            try:
                self.log.close()
            except Exception:  # noqa: BLE001
                pass
            self.log = None


class Postgres:
    """A throwaway PostgreSQL 15 cluster (Debian packages) on a free port."""
    BIN = "/usr/lib/postgresql/15/bin"

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="slt-pg-")
        os.chmod(self.dir, 0o777)
        self.port = free_port()
        self.as_pg = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run(self.as_pg + [f"{self.BIN}/initdb", "-D", self.dir + "/data", "-A", "trust", "-U", "postgres"],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run(self.as_pg + [f"{self.BIN}/pg_ctl", "-D", self.dir + "/data", "-l", self.dir + "/log", "-o",
                                     f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
                                     f"-c max_connections=200", "-w", "start"],
                       check=True, stdout=subprocess.DEVNULL)
        self.n = 0
        self.db = None

    def psql(self, sql):
        subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", "postgres",
                        "-qc", sql], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def fresh(self, work):
        self.n += 1
        self.db = f"t{self.n}"
        self.psql(f"CREATE DATABASE {self.db}")
        return {"DUCKLAKE_CONNECTION": f"postgres:host=127.0.0.1 port={self.port} user=postgres dbname={self.db}"}

    def after(self):
        if self.db:
            try:
                self.psql(f"DROP DATABASE IF EXISTS {self.db} WITH (FORCE)")
            except subprocess.CalledProcessError:
                pass
            self.db = None
        return ""

    def stop(self):
        subprocess.run(self.as_pg + [f"{self.BIN}/pg_ctl", "-D", self.dir + "/data", "-m", "immediate", "stop"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(self.dir, ignore_errors=True)


def make_ext_dir():
    """An extension directory where `LOAD name` finds the PyPI-packaged extensions (nothing is downloaded)."""
    import importlib
    import duckdb
    platform = duckdb.execute("PRAGMA platform").fetchone()[0]
    root = tempfile.mkdtemp(prefix="slt-ext-")
    d = os.path.join(root, f"v{duckdb.__version__}", platform)
    os.makedirs(d)
    for pkg, name in EXT_PACKAGES.items():
        try:
            mod = importlib.import_module(f"duckdb_extension_{pkg}")
        except ImportError:
            continue
        f = os.path.join(os.path.dirname(mod.__file__), "extensions", f"v{duckdb.__version__}",
                         f"{pkg}.duckdb_extension")
        if os.path.exists(f):
            os.symlink(f, os.path.join(d, f"{name}.duckdb_extension"))
    return root


def pg_config_skips(root):
    path = os.path.join(root, PG_CONFIG)
    out = {}
    if os.path.exists(path):
        for group in json.load(open(path)).get("skip_tests", []):
            for p in group.get("paths", []):
                out[p] = group.get("reason", "")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tests", required=True, help="root of a DuckLake checkout (holds test/sql)")
    ap.add_argument("--config", default="duckdb", choices=["duckdb", "moraine", "postgres"])
    ap.add_argument("--moraine")
    ap.add_argument("--filter", default="")
    ap.add_argument("--files-from", help="run only the test files listed here (one path a line)")
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--parse-only", action="store_true")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--env", action="append", default=[], help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    ap.add_argument("--ext-dir", help=argparse.SUPPRESS)
    ap.add_argument("--preload", action="append", default=[], help=argparse.SUPPRESS)
    ap.add_argument("--allow-ext", action="append", default=[], help=argparse.SUPPRESS)
    ap.add_argument("--out", help="write status<TAB>file<TAB>reason lines here")
    ap.add_argument("--logs", help="keep moraine's log of every failing file here")
    ap.add_argument("--expect-fail", help="files known to fail; any other failure exits 1")
    ap.add_argument("--keep-going", action="store_true",
                    help="diagnostics: run a failing file to its end and list every failing record "
                         "(the verdict stays fail; later failures may be consequences of earlier ones)")
    a = ap.parse_args()
    expected_fail = set()
    if a.expect_fail:
        for ln in open(a.expect_fail):
            ln = ln.split("#", 1)[0].strip()
            if ln:
                expected_fail.add(ln)
    if a.moraine:  # relative to where we were started, not to the suite
        a.moraine = os.path.abspath(a.moraine)
    os.chdir(a.tests)

    if a.one:
        env = dict(x.split("=", 1) for x in a.env)
        st, why, r = run_one(a.one, env, a.work, a.ext_dir, a.preload, a.allow_ext, a.keep_going)
        sys.stdout.write(RESULT_MARK + json.dumps({"status": st, "reason": why,
                                                   "records": r.records_run if r else None}) + "\n")
        sys.stdout.flush()
        os._exit(0)  # do not wait for extension/connection teardown

    files = sorted(os.path.join(dp, f) for dp, _, fs in os.walk("test/sql") for f in fs if f.endswith(".test"))
    if a.files_from:
        wanted = [ln.strip() for ln in open(a.files_from) if ln.strip()]
        files = [f for f in wanted if os.path.exists(f)]
    files = [f for f in files if a.filter in f]
    if a.parse_only:
        bad = 0
        for f in files:
            try:
                p = Parser(open(f).read())
                while p.next_statement():
                    p.tokenize()
            except Exception as exc:  # noqa: BLE001
                bad += 1
                print(f"parse error {f}: {exc}")
        print(f"parsed {len(files) - bad}/{len(files)}")
        return

    ext_dir = make_ext_dir()
    skips = pg_config_skips(".") if a.config in ("moraine", "postgres") else {}
    preload = ["postgres_scanner"] if a.config in ("moraine", "postgres") else []
    # what `require X` may load: the suite's CI build (ducklake, parquet, icu,
    # json, tpch, core_functions) plus httpfs and spatial, which are catalog
    # agnostic; postgres_scanner only where the catalog is PostgreSQL (as in
    # test/configs/postgres.json); never sqlite_scanner (no sqlite config here)
    allowed = ["ducklake", "parquet", "icu", "json", "tpch", "core_functions", "httpfs", "spatial"] + preload
    backend = Moraine(a.moraine) if a.config == "moraine" else Postgres() if a.config == "postgres" else None
    counts = {"pass": 0, "fail": 0, "skip": 0}
    failed, passed = [], []
    out = open(a.out, "w") if a.out else None
    if a.logs:
        os.makedirs(a.logs, exist_ok=True)
    # digits only below the temp root: tests match substrings of full paths
    # (e.g. glob(...) WHERE 's1' IN file), so random letters in a directory
    # name could match; DuckDB's own runner uses duckdb_unittest_tempdir/<pid>
    base = os.path.join(tempfile.gettempdir(), f"slt{os.getpid()}")
    os.makedirs(base)
    child_env = dict(os.environ, TZ="UTC")
    try:
        for idx, f in enumerate(files):
            work = os.path.join(base, str(idx))
            os.makedirs(work)
            t0 = time.time()
            nrec = None
            try:
                env = backend.fresh(work) if backend else {}
            except Exception as exc:  # noqa: BLE001
                env = None
                st, why = "fail", f"catalog did not start: {one_line(str(exc), 300)}"
            if env is not None:
                cmd = [sys.executable, os.path.abspath(__file__), "--tests", ".", "--one", f, "--work", work,
                       "--ext-dir", ext_dir]
                for k, v in env.items():
                    cmd += ["--env", f"{k}={v}"]
                for p in preload:
                    cmd += ["--preload", p]
                for x in allowed:
                    cmd += ["--allow-ext", x]
                if a.keep_going:
                    cmd += ["--keep-going"]
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        errors="replace", env=child_env, start_new_session=True)
                try:
                    so, se = proc.communicate(timeout=a.timeout)
                    res = [ln for ln in so.splitlines() if ln.startswith(RESULT_MARK)]
                    if res:
                        d = json.loads(res[-1][len(RESULT_MARK):])
                        st, why, nrec = d["status"], d["reason"], d.get("records")
                    else:
                        st, why = "fail", f"runner crashed (rc={proc.returncode}): {one_line(se.strip()[-300:])}"
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.communicate()
                    st, why = "fail", f"timeout ({a.timeout}s)"
                note = backend.after() if backend else ""
                if note:
                    why = f"{why} [{note}]"
                if a.config == "moraine" and a.logs and st == "fail":
                    try:
                        shutil.copy(os.path.join(work, "moraine.log"),
                                    os.path.join(a.logs, f.replace("/", "_") + ".log"))
                    except OSError:
                        pass
            if f in skips:
                why = f"[suite's postgres.json skips this: {skips[f]}] {why}"
            counts[st] += 1
            (failed if st == "fail" else passed if st == "pass" else []).append(f)
            msg = f"{st}\t{f}\t{one_line(why, 4000 if a.keep_going else 1200)}"
            print(f"{msg}\t({time.time() - t0:.1f}s, {nrec} records)", flush=True)
            if out:
                out.write(msg + "\n")
                out.flush()
            shutil.rmtree(work, ignore_errors=True)
    finally:
        if backend:
            backend.stop()
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(ext_dir, ignore_errors=True)
    print(f"slt[{a.config}]: {counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped")
    if a.expect_fail:
        for f in sorted(set(passed) & expected_fail):
            print(f"slt: {f} passes now: remove it from {a.expect_fail}")
        new = sorted(set(failed) - expected_fail)
        for f in new:
            print(f"slt: UNEXPECTED failure: {f}")
        if new:
            sys.exit(1)


if __name__ == "__main__":
    main()
