"""The read-only toolbox (`moraine info`, `census`, `verify`, ...) against
stores a real server wrote, while that server keeps running and after it
stopped. The binary is MORAINE_BIN; `verify` is handed damage made by the
test-only tests/tools/keytool.c (MORAINE_KEYTOOL, or found beside the binary
or in build/).
"""
import datetime
import json
import os
import pathlib
import queue
import shutil
import signal
import subprocess
import threading
import time

import psycopg
import pytest

from conftest import connect
import test_differential
from test_pg_front import MORAINE, Server


def tool(*args):
    return subprocess.run([MORAINE, *args], capture_output=True, text=True, timeout=60)


def test_info_and_census_beside_a_running_writer(tmp_path):
    store = tmp_path / "store"
    s = Server("--store", f"file://{store}")
    try:
        duck = connect()
        duck.execute(f"ATTACH 'ducklake:postgres:{s.dsn()}' AS lake (DATA_PATH '{tmp_path}/data/')")
        duck.execute("CREATE TABLE lake.t (id BIGINT)")
        for i in range(5):
            duck.execute(f"INSERT INTO lake.t VALUES ({i})")
        with psycopg.connect(s.dsn(), autocommit=True) as con:
            head = con.execute("SELECT max(snapshot_id), count(*) FROM ducklake_snapshot").fetchone()

        r = tool("info", str(store), "--json")
        assert r.returncode == 0, r.stderr
        info = json.loads(r.stdout)
        assert info["format"] == 12 and info["head_snapshot"] == head[0]
        assert info["batch_count"] >= head[1] and info["head_time"].endswith("Z")
        # the store records when it was created: before its first snapshot
        created = datetime.datetime.fromisoformat(info["created_at"].replace("Z", "+00:00"))
        head_time = datetime.datetime.fromisoformat(info["head_time"].replace("Z", "+00:00"))
        assert created <= head_time
        assert abs(datetime.datetime.now(datetime.timezone.utc) - created) < datetime.timedelta(minutes=10)
        r = tool("census", f"file://{store}", "--json")
        assert r.returncode == 0, r.stderr
        census = json.loads(r.stdout)
        assert census["subspaces"]["snapshot"]["keys"] == head[1]
        assert census["kinds"]["table"]["current"]["keys"] == 1
        assert census["subspaces"]["sys"]["keys"] >= 2  # format and head

        # the writer was not disturbed: it still commits
        duck.execute("INSERT INTO lake.t VALUES (99)")
        assert duck.execute("SELECT count(*) FROM lake.t").fetchone() == (6,)
        duck.close()
    finally:
        assert s.stop() == 0
    r = tool("info", str(store))
    assert r.returncode == 0, r.stderr
    assert f"head snapshot      {head[0] + 1}" in r.stdout
    assert f"created at         {info['created_at']}" in r.stdout
    r = tool("census", str(store))
    assert r.returncode == 0 and "subspace" in r.stdout and "table" in r.stdout


def test_toolbox_failures_are_one_line(tmp_path):
    r = tool("info", str(tmp_path / "nothing-here"))
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = tool("census")
    assert r.returncode == 2 and "which store" in r.stderr
    r = tool("info", "a", "b")
    assert r.returncode == 2
    r = tool("info", "--help")
    assert r.returncode == 0 and "read-only" in r.stdout


# ---- moraine verify -----------------------------------------------------------

def keytool_path():
    """The test-only store damager (tests/tools/keytool.c): MORAINE_KEYTOOL,
    else beside MORAINE_BIN, else in this checkout's build folder."""
    if os.environ.get("MORAINE_KEYTOOL"):
        return os.environ["MORAINE_KEYTOOL"]
    beside = pathlib.Path(MORAINE).parent / "moraine-keytool"
    if beside.exists():
        return str(beside)
    return str(pathlib.Path(__file__).resolve().parents[2] / "build/tests/tools/moraine-keytool")


def keytool(store, *args):
    r = subprocess.run([keytool_path(), f"file://{store}", *args], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


@pytest.fixture(scope="module")
def built_store(tmp_path_factory):
    """A store a real server wrote: two schemas, a renamed table (history),
    data files and a delete file (inlining off), 6 snapshots; verified clean
    while the server still runs, then the server is stopped."""
    root = tmp_path_factory.mktemp("verify")
    store = root / "store"
    s = Server("--store", f"file://{store}")
    try:
        duck = connect()
        duck.execute(f"ATTACH 'ducklake:postgres:{s.dsn()}' AS lake "
                     f"(DATA_PATH '{root}/data/', DATA_INLINING_ROW_LIMIT 0)")
        duck.execute("CREATE TABLE lake.t (id BIGINT, s VARCHAR)")
        duck.execute("INSERT INTO lake.t SELECT range, 'v' || range FROM range(100)")
        duck.execute("DELETE FROM lake.t WHERE id < 10")
        duck.execute("CREATE SCHEMA lake.s2")
        duck.execute("CREATE TABLE lake.s2.u (a INT)")
        duck.execute("ALTER TABLE lake.t RENAME TO t2")
        head = duck.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        r = tool("verify", str(store))  # beside the running writer
        assert r.returncode == 0, r.stdout + r.stderr
        duck.execute("INSERT INTO lake.s2.u VALUES (1)")  # the writer was not disturbed
        head += 1
        duck.close()
    finally:
        assert s.stop() == 0
    return store, head


def damaged_copy(built_store, tmp_path, *edits):
    store, head = built_store
    copy = tmp_path / "copy"
    shutil.copytree(store, copy)
    for edit in edits:
        keytool(copy, *edit)
    return copy


def verify_json(store):
    r = tool("verify", str(store), "--json")
    assert r.returncode in (0, 3), r.stderr
    out = json.loads(r.stdout)
    assert out["clean"] == (r.returncode == 0) and out["clean"] == (out["problems"] == [])
    return out


def test_verify_clean_store(built_store):
    store, head = built_store
    r = tool("verify", str(store))
    assert r.returncode == 0 and r.stdout.startswith("clean: "), r.stdout + r.stderr
    out = verify_json(f"file://{store}")
    assert out["clean"] and out["head_snapshot"] == head
    assert out["snapshots"] == head + 1 and out["changelog_records"] == head + 1
    assert out["keys"] == len(keytool(store, "keys"))


def find_key(store, prefix, contains=""):
    keys = [k for k in keytool(store, "keys") if k.startswith(prefix) and contains in k]
    assert keys, (prefix, contains)
    return keys[0]


# Each case: the edits (keytool arguments, with {head} standing for the head
# snapshot) and the (check, key, words in the problem) verify must report —
# exactly these, nothing else.
VERIFY_CASES = {
    "undecodable key": (
        [("put", "0x0799aa", "")],
        [("key", "0x0799aa", "does not decode")]),
    "undecodable value": (
        [("put", "current/tstat{table_id=1}", "4d524e4501ffff")],
        [("value", "current/tstat{table_id=1}", "undecodable")]),
    "wrong magic": (
        [("put", "current/column{table_id=1,column_id=1}", "0011223301aa")],
        [("value", "current/column{table_id=1,column_id=1}", "magic")]),
    "ids disagree": (
        [("copy", "current/table{table_id=1}", "current/table{table_id=77}")],
        [("ids", "current/table{table_id=77}", "table_id is 1 in the value, 77 in the key")]),
    "ended version under a current key": (
        [("copy", "history/table{table_id=1,end_snapshot=6}", "current/table{table_id=1}")],
        [("ids", "current/table{table_id=1}", "end_snapshot"),
         # a table that does not decode implies no name entry
         ("name", 'name{name_kind=table,parent_id=0,exact_name="t2",entity_id=1}', "cannot be read")]),
    "name entry missing": (
        [("delete", 'name{name_kind=table,parent_id=0,exact_name="t2",entity_id=1}')],
        [("name", "current/table{table_id=1}",
          'no name entry (expected name{name_kind=table,parent_id=0,exact_name="t2",entity_id=1})')]),
    "stale name entry of a renamed table": (
        [("put", 'name{name_kind=table,parent_id=0,exact_name="t",entity_id=1}', "")],
        [("name", 'name{name_kind=table,parent_id=0,exact_name="t",entity_id=1}',
          'whose entry is name{name_kind=table,parent_id=0,exact_name="t2",entity_id=1}')]),
    "name entry of nothing": (
        [("put", 'name{name_kind=schema,parent_id=0,exact_name="ghost",entity_id=99}', "")],
        [("name", 'name{name_kind=schema,parent_id=0,exact_name="ghost",entity_id=99}',
          "current/schema{schema_id=99}, which is not a current record")]),
    "delete_target entry missing": (
        [("delete", "delete_target{table_id=1,data_file_id=0,delete_file_id=1}")],
        [("delete_target", "current/delfile{table_id=1,delete_file_id=1}",
          "no delete_target entry (expected delete_target{table_id=1,data_file_id=0,delete_file_id=1})")]),
    "delete_target entry of another file": (
        [("put", "delete_target{table_id=1,data_file_id=5,delete_file_id=1}", "")],
        [("delete_target", "delete_target{table_id=1,data_file_id=5,delete_file_id=1}",
          "whose entry is delete_target{table_id=1,data_file_id=0,delete_file_id=1}")]),
    "changelog record missing": (
        [("delete", "changelog{snapshot_id={head_1}}")],
        [("changelog", "changelog{snapshot_id={head_1}}", "is missing")]),
    "head behind the newest snapshot": (
        [("set-head", "{head_1}", "100")],
        [("head", "snapshot{snapshot_id={head}}", "newer than the head snapshot {head_1}"),
         ("changelog", "changelog{snapshot_id={head}}", "newer than the head snapshot {head_1}"),
         ("lifecycle", "current/file{table_id=3,", "begins at snapshot {head}, after the head snapshot {head_1}")]),
    "head snapshot record lost": (
        [("delete", "snapshot{snapshot_id={head}}")],
        [("head", "sys/head", "names snapshot {head}, but the newest snapshot record is {head_1}")]),
    "sys/head lost": (
        [("delete", "sys/head")],
        [("head", "sys/head", "is missing")]),
}


@pytest.mark.parametrize("case", list(VERIFY_CASES))
def test_verify_reports_damage(built_store, tmp_path, case):
    store, head = built_store
    edits, expected = VERIFY_CASES[case]
    fill = lambda s: s.replace("{head}", str(head)).replace("{head_1}", str(head - 1))
    copy = damaged_copy(built_store, tmp_path, *[tuple(fill(a) for a in e) for e in edits])
    out = verify_json(copy)
    got = out["problems"]
    assert not out["clean"]
    for check, key, words in expected:
        key, words = fill(key), fill(words)
        hits = [p for p in got if p["check"] == check and p["key"].startswith(key) and words in p["problem"]]
        assert hits, f"{case}: no ({check}, {key}, {words}) in {got}"
    # nothing else: one report per expected line (a lifecycle line may match several records)
    assert len(got) >= len(expected)
    unexpected = [p for p in got if not any(
        p["check"] == c and p["key"].startswith(fill(k)) for c, k, _ in expected)]
    assert unexpected == [], unexpected
    # the text form: one line per problem, "check key: problem", then the summary
    r = tool("verify", str(copy))
    assert r.returncode == 3 and r.stderr == ""
    lines = r.stdout.splitlines()
    assert lines[-1] == f"damaged: {len(got)} problem{'s' if len(got) != 1 else ''} in {out['keys']} keys"
    assert len(lines) == len(got) + 1
    for p, line in zip(got, lines):
        assert line.split(None, 1) == [p["check"], f"{p['key']}: {p['problem']}"]


def test_verify_cannot_run(tmp_path):
    r = tool("verify", str(tmp_path / "nothing-here"))
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith("moraine: verify: ")
    r = tool("verify")
    assert r.returncode == 2 and "which store" in r.stderr
    r = tool("verify", "x", "--changelog-window", "0")
    assert r.returncode == 2
    r = tool("verify", "--help")
    assert r.returncode == 0 and "3 damaged" in r.stdout


# ---- moraine snapshots and moraine show -----------------------------------------

@pytest.fixture(scope="module")
def history_store(tmp_path_factory):
    """A server (still running) whose catalog went through inlined and file
    inserts, a commit message, inlined and file deletes, a column added, a
    schema, a view, a rename and a drop; with a DuckLake client attached."""
    root = tmp_path_factory.mktemp("history")
    store = root / "store"
    s = Server("--store", f"file://{store}")
    duck = connect()
    try:
        duck.execute(f"ATTACH 'ducklake:postgres:{s.dsn()}' AS lake (DATA_PATH '{root}/data/')")
        for sql in [
            "CREATE TABLE lake.t (id BIGINT, s VARCHAR)",
            "INSERT INTO lake.t VALUES (1, 'a'), (2, 'b')",
            "BEGIN",
            "INSERT INTO lake.t SELECT range, 'x' FROM range(10, 60)",
            "CALL lake.set_commit_message('alice', 'bulk load', extra_info => '{\"k\": 1}')",
            "COMMIT",
            "DELETE FROM lake.t WHERE id < 20",
            "ALTER TABLE lake.t ADD COLUMN n INTEGER",
            "CREATE SCHEMA lake.s2",
            "CREATE TABLE lake.s2.u (a INT, b STRUCT(x INT, y VARCHAR))",
            "INSERT INTO lake.s2.u SELECT range, {'x': range, 'y': 'q'} FROM range(30)",
            "DELETE FROM lake.s2.u WHERE a % 3 = 0",
            "CREATE VIEW lake.v AS SELECT id FROM lake.t",
            "ALTER TABLE lake.t RENAME TO t2",
            "CREATE TABLE lake.gone (z INT)",
            "DROP TABLE lake.gone",
        ]:
            duck.execute(sql)
        yield store, s, duck
    finally:
        duck.close()
        assert s.stop() == 0


def test_snapshots_match_ducklake(history_store):
    store, server, duck = history_store
    r = tool("snapshots", str(store), "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)["snapshots"]
    want = duck.execute("SELECT snapshot_id, snapshot_time, schema_version, author, commit_message, "
                        "commit_extra_info FROM lake.snapshots() ORDER BY snapshot_id").fetchall()
    with psycopg.connect(server.dsn(), autocommit=True) as con:
        changes = dict(con.execute("SELECT snapshot_id, changes_made FROM ducklake_snapshot_changes").fetchall())
    assert [g["snapshot_id"] for g in got] == [w[0] for w in want]
    for g, (sid, when, sv, author, message, extra) in zip(got, want):
        assert g["snapshot_time"] == when.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        assert (g["schema_version"], g["author"], g["commit_message"], g["commit_extra_info"]) == \
            (sv, author, message, extra)
        assert g["changes_made"] == changes[sid]
    assert any(g["author"] == "alice" and g["commit_message"] == "bulk load" for g in got)
    r = tool("snapshots", str(store))
    assert r.returncode == 0 and len(r.stdout.splitlines()) == len(want) + 1
    assert "alice" in r.stdout and "bulk load" in r.stdout


def ducklake_at(duck, server, n):
    """What a DuckLake client attached at snapshot n sees: {schema.table:
    (columns, rows, file names)} and the views."""
    alias = f"at{n}"
    duck.execute(f"ATTACH 'ducklake:postgres:{server.dsn()}' AS {alias} (SNAPSHOT_VERSION {n})")
    try:
        rels = duck.execute("SELECT table_schema, table_name, table_type FROM information_schema.tables "
                            f"WHERE table_catalog = '{alias}'").fetchall()
        tables, views = {}, set()
        for schema, name, kind in rels:
            if kind == "VIEW":
                views.add(f"{schema}.{name}")
                continue
            cols = [c[0] for c in duck.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_catalog = ? "
                "AND table_schema = ? AND table_name = ? ORDER BY ordinal_position",
                [alias, schema, name]).fetchall()]
            rows = duck.execute(f'SELECT count(*) FROM {alias}."{schema}"."{name}"').fetchone()[0]
            files = sorted(os.path.basename(f[0]) for f in duck.execute(
                "FROM ducklake_list_files('lake', ?, schema => ?, snapshot_version => ?)",
                [name, schema, n]).fetchall())
            tables[f"{schema}.{name}"] = (cols, rows, files)
        return tables, views
    finally:
        duck.execute(f"DETACH {alias}")


def show_json(store, *args):
    r = tool("show", str(store), "--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def moraine_at(out):
    tables, views = {}, set()
    for sc in out["schemas"]:
        for t in sc["tables"]:
            cols = [c["column_name"] for c in t["columns"] if c["parent_column"] is None]
            files = sorted(os.path.basename(f["path"]) for f in t["data_files"])
            tables[f"{sc['schema_name']}.{t['table_name']}"] = (cols, t["rows"], files)
        views |= {f"{sc['schema_name']}.{v['view_name']}" for v in sc["views"]}
    return tables, views


def test_show_matches_ducklake_at_every_snapshot(history_store):
    store, server, duck = history_store
    head = duck.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
    for n in range(head + 1):
        out = show_json(store, "--at", str(n))
        assert out["snapshot"]["snapshot_id"] == n
        assert moraine_at(out) == ducklake_at(duck, server, n), f"snapshot {n}"
    # the head by default, and the nested struct fields are there with their parent
    out = show_json(store)
    assert out["snapshot"]["snapshot_id"] == head
    u = [t for sc in out["schemas"] for t in sc["tables"] if t["table_name"] == "u"][0]
    b = [c for c in u["columns"] if c["column_name"] == "b"][0]
    assert sorted(c["column_name"] for c in u["columns"] if c["parent_column"] == b["column_id"]) == ["x", "y"]


def test_show_one_table_and_at_a_time(history_store):
    store, server, duck = history_store
    snaps = duck.execute("SELECT snapshot_id, snapshot_time FROM lake.snapshots() "
                         "WHERE author = 'alice'").fetchall()
    n, when = snaps[0]
    stamp = when.astimezone(datetime.timezone.utc)
    # the commit's own time names it; a microsecond before names the one before
    for t, expect in [(stamp, n), (stamp - datetime.timedelta(microseconds=1), n - 1)]:
        out = show_json(store, "--at", t.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "t")
        assert out["snapshot"]["snapshot_id"] == expect
        [sc] = out["schemas"]
        [t_] = sc["tables"]
        assert t_["table_name"] == "t"
        rows = duck.execute(f"SELECT count(*) FROM lake.t AT (VERSION => {expect})").fetchone()[0]
        assert t_["rows"] == rows
    # a table by schema.name, in text
    r = tool("show", str(store), "s2.u")
    assert r.returncode == 0, r.stderr
    rows = duck.execute("SELECT count(*) FROM lake.s2.u").fetchone()[0]
    assert f"table s2.u (id " in r.stdout and f"): {rows} rows" in r.stdout
    assert "data files" in r.stdout and "columns" in r.stdout
    # the whole catalog in text: one line per schema, table and view
    r = tool("show", str(store))
    assert r.returncode == 0 and "schema s2 (id" in r.stdout and "  view v (id" in r.stdout


def test_show_refusals(history_store):
    store, server, duck = history_store
    for args, words in [
        (("--at", "9999"), "no snapshot 9999"),
        (("--at", "1999-01-01T00:00:00Z"), "no snapshot was taken at or before"),
        (("--at", "yesterday"), "--at takes a snapshot id or a UTC time"),
        (("nosuchtable",), "no table 'nosuchtable'"),
    ]:
        r = tool("show", str(store), *args)
        assert r.returncode == 1 and words in r.stderr, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("moraine: show: ")
    r = tool("show", "--help")
    assert r.returncode == 0 and "--at" in r.stdout
    r = tool("snapshots", "--help")
    assert r.returncode == 0
    r = tool("snapshots")
    assert r.returncode == 2


# ---- moraine watch ------------------------------------------------------------

class Watch:
    """`moraine watch` running beside a server; its JSON lines gathered by a
    thread."""

    def __init__(self, store, *args):
        self.proc = subprocess.Popen([MORAINE, "watch", str(store), "--interval-ms", "100", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = queue.Queue()
        threading.Thread(target=lambda: [self.lines.put(json.loads(l)) for l in self.proc.stdout],
                         daemon=True).start()
        ready = self.proc.stderr.readline()
        assert "following the writer" in ready, ready

    def take(self, n, timeout=30):
        got = []
        deadline = time.time() + timeout
        while len(got) < n:
            got.append(self.lines.get(timeout=max(0.1, deadline - time.time())))
        return got

    def stop(self, sig=signal.SIGINT):
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=15)
        rest = self.proc.stderr.read()
        return code, rest


def test_watch_follows_the_writer(tmp_path):
    store = tmp_path / "store"
    s = Server("--store", f"file://{store}")
    duck = connect()
    try:
        duck.execute(f"ATTACH 'ducklake:postgres:{s.dsn()}' AS lake (DATA_PATH '{tmp_path}/data/')")
        duck.execute("CREATE TABLE lake.early (x INT)")
        w = Watch(store)  # only what comes after its start
        duck.execute("CREATE TABLE lake.t (id BIGINT)")
        duck.execute("BEGIN")
        duck.execute("INSERT INTO lake.t VALUES (1), (2), (3)")
        duck.execute("CALL lake.set_commit_message('bob', 'three rows')")
        duck.execute("COMMIT")
        duck.execute("INSERT INTO lake.t SELECT range FROM range(100)")
        duck.execute("DROP TABLE lake.early")
        got = w.take(4)
        want = duck.execute("SELECT snapshot_id, author, commit_message FROM lake.snapshots() "
                            "ORDER BY snapshot_id").fetchall()[-4:]
        assert [(g["snapshot_id"], g["author"], g["commit_message"]) for g in got] == want
        created, inlined, inserted, dropped = got
        assert created["changes_made"] == 'created_table:"main"."t"'
        [t] = created["tables"]
        assert (t["schema_name"], t["table_name"]) == ("main", "t") and t["changes"]["table"] == 1
        assert inlined["tables"][0]["changes"]["data_row"] == 3 and inlined["author"] == "bob"
        assert inserted["tables"][0]["changes"]["file"] == 1
        [gone] = dropped["tables"]
        assert gone["table_name"] == "early" and gone["changes"]["table"] == 1  # named as before the drop
        assert w.lines.empty()
        code, rest = w.stop(signal.SIGINT)
        assert code == 0 and rest == "", rest

        # --from replays the past, then follows; SIGTERM stops it too
        w = Watch(store, "--from", "1")
        past = w.take(len(duck.execute("FROM lake.snapshots() WHERE snapshot_id >= 1").fetchall()))
        assert [p["snapshot_id"] for p in past] == list(range(1, want[-1][0] + 1))
        duck.execute("INSERT INTO lake.t VALUES (7)")
        [new] = w.take(1)
        assert new["snapshot_id"] == want[-1][0] + 1 and new["tables"][0]["table_name"] == "t"
        code, rest = w.stop(signal.SIGTERM)
        assert code == 0 and rest == "", rest
    finally:
        duck.close()
        assert s.stop() == 0


def test_watch_refusals(tmp_path):
    r = tool("watch", str(tmp_path / "nothing-here"))
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = tool("watch", "x", "--from", "soon")
    assert r.returncode == 2 and "--from takes a snapshot id" in r.stderr
    r = tool("watch", "--help")
    assert r.returncode == 0 and "SIGINT" in r.stdout


# ---- every command on an object-store URL -------------------------------------

def test_the_tools_on_s3_beside_a_running_writer(tmp_path):
    import emulators
    emu = emulators.start("s3", tmp_path / "moto")
    try:
        store = emu.url("toolbox")
        s = Server("--store", store, env=emu.env)
        duck = connect()
        try:
            duck.execute(f"ATTACH 'ducklake:postgres:{s.dsn()}' AS lake (DATA_PATH '{tmp_path}/data/')")
            duck.execute("CREATE TABLE lake.t (id BIGINT)")
            duck.execute("INSERT INTO lake.t VALUES (1), (2)")
            head = duck.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
            env = {**os.environ, **emu.env}
            run = lambda *a: subprocess.run([MORAINE, *a], capture_output=True, text=True, timeout=60, env=env)
            r = run("verify", store, "--json")
            assert r.returncode == 0 and json.loads(r.stdout)["head_snapshot"] == head, r.stdout + r.stderr
            r = run("snapshots", store, "--json")
            assert r.returncode == 0 and len(json.loads(r.stdout)["snapshots"]) == head + 1, r.stderr
            r = run("show", store, "t", "--json")
            assert r.returncode == 0 and json.loads(r.stdout)["schemas"][0]["tables"][0]["rows"] == 2, r.stderr
            w = subprocess.Popen([MORAINE, "watch", store, "--from", str(head), "--interval-ms", "100"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            assert "following the writer" in w.stderr.readline()
            assert json.loads(w.stdout.readline())["snapshot_id"] == head
            duck.execute("INSERT INTO lake.t VALUES (3)")  # the writer goes on, the watcher sees it
            assert json.loads(w.stdout.readline())["snapshot_id"] == head + 1
            w.send_signal(signal.SIGINT)
            assert w.wait(timeout=15) == 0
        finally:
            duck.close()
            assert s.stop() == 0
    finally:
        emu.stop()


# ---- moraine export ------------------------------------------------------------

def relations_at(duck, catalog, n):
    """schema.table names of catalog's tables at snapshot n (DuckLake attached
    there)."""
    alias = f"names{n}"
    duck.execute(f"ATTACH 'ducklake:{catalog}' AS {alias} (SNAPSHOT_VERSION {n}, READ_ONLY)")
    try:
        return sorted(f'"{s}"."{t}"' for s, t in duck.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            f"WHERE table_catalog = '{alias}' AND table_type = 'BASE TABLE'").fetchall())
    finally:
        duck.execute(f"DETACH {alias}")


def test_export_round_trip_every_table_at_every_snapshot(history_store, tmp_path):
    store, server, duck = history_store
    out = tmp_path / "lake.duckdb"
    r = tool("export", str(store), str(out))  # beside the running writer
    assert r.returncode == 0, r.stderr
    assert out.exists() and not list(tmp_path.glob("moraine_export_*"))
    duck.execute(f"ATTACH 'ducklake:{out}' AS exported (READ_ONLY)")
    try:
        want = duck.execute("SELECT snapshot_id, schema_version, changes::VARCHAR, author, commit_message "
                            "FROM lake.snapshots() ORDER BY 1").fetchall()
        assert duck.execute("SELECT snapshot_id, schema_version, changes::VARCHAR, author, commit_message "
                            "FROM exported.snapshots() ORDER BY 1").fetchall() == want
        compared = 0
        for n, *_ in want:
            names = relations_at(duck, f"postgres:{server.dsn()}", n)
            assert relations_at(duck, str(out), n) == names, f"snapshot {n}"
            for name in names:
                q = "SELECT * FROM {}.{} AT (VERSION => %d) ORDER BY ALL" % n
                assert duck.execute(q.format("exported", name)).fetchall() == \
                    duck.execute(q.format("lake", name)).fetchall(), f"{name} at {n}"
                compared += 1
        assert compared >= 10
    finally:
        duck.execute("DETACH exported")

    # --at: the catalog as it was then, and stock DuckLake writes on from there
    n = [s for s, *_ in want if s > 2][0]
    cut = tmp_path / "cut.duckdb"
    r = tool("export", str(store), "--at", str(n), str(cut))
    assert r.returncode == 0, r.stderr
    duck.execute(f"ATTACH 'ducklake:{cut}' AS cut")
    try:
        assert [s for s, in duck.execute("SELECT snapshot_id FROM cut.snapshots()").fetchall()] == \
            list(range(n + 1))
        for name in relations_at(duck, f"postgres:{server.dsn()}", n):
            assert duck.execute(f"SELECT * FROM cut.{name} ORDER BY ALL").fetchall() == \
                duck.execute(f"SELECT * FROM lake.{name} AT (VERSION => {n}) ORDER BY ALL").fetchall()
        before = duck.execute("SELECT count(*) FROM cut.t").fetchone()[0]
        duck.execute("INSERT INTO cut.t VALUES (1000, 'after the cut')")
        assert duck.execute("SELECT count(*) FROM cut.t").fetchone()[0] == before + 1
    finally:
        duck.execute("DETACH cut")


def test_export_refusals(history_store, tmp_path):
    store, server, duck = history_store
    taken = tmp_path / "taken.duckdb"
    taken.write_text("mine")
    for args, code, words in [
        ((str(store), str(taken)), 1, "exists"),
        ((str(store), "--at", "9999", str(tmp_path / "x.duckdb")), 1, "no snapshot 9999"),
        ((str(store), "--at", "soon", str(tmp_path / "x.duckdb")), 2, "--at takes a snapshot id"),
        ((str(store),), 2, "into which file"),
        ((str(tmp_path / "nothing-here"), str(tmp_path / "y.duckdb")), 1, "cannot open the store"),
    ]:
        r = tool("export", *args)
        assert r.returncode == code and words in r.stderr, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1
    assert taken.read_text() == "mine" and not (tmp_path / "x.duckdb").exists()
    r = tool("export", "--help")
    assert r.returncode == 0 and "ducklake:FILE" in r.stdout


# ---- the differential workloads: verify clean, show and export agree ------------

@pytest.mark.parametrize("name", list(test_differential.FEATURES))
def test_tools_on_the_differential_workloads(tmp_path, name):
    """Each catalog the differential workloads build (compaction, expiry,
    cleanup, partitions, tags, macros, added files, ...) verifies clean
    beside its writer and after; show at the head lists what DuckLake sees;
    the export, attached by stock DuckLake, answers every table at every
    retained snapshot as the server does."""
    store = tmp_path / "store"
    side = {"data": tmp_path / "data", "tmp": tmp_path / "tmp"}
    side["tmp"].mkdir()
    s = Server("--store", f"file://{store}")
    duck = connect()
    try:
        side["server"] = s
        duck.execute(f"ATTACH 'ducklake:postgres:{s.dsn()}' AS lake (DATA_PATH '{side['data']}')")
        for stmt in test_differential.FEATURES[name]["steps"]:
            assert test_differential.run(duck, stmt, side)[0] == "ok", stmt
        out = verify_json(store)
        assert out["clean"], out["problems"]
        head = duck.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        assert moraine_at(show_json(store)) == ducklake_at(duck, s, head)

        exported = tmp_path / "export.duckdb"
        r = tool("export", str(store), str(exported))
        assert r.returncode == 0, r.stderr
        duck.execute(f"ATTACH 'ducklake:{exported}' AS exported (READ_ONLY)")
        snaps = [n for n, in duck.execute("SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall()]
        assert [n for n, in duck.execute("SELECT snapshot_id FROM exported.snapshots() ORDER BY 1").fetchall()] == snaps
        for n in snaps:
            names = relations_at(duck, f"postgres:{s.dsn()}", n)
            assert relations_at(duck, str(exported), n) == names, f"snapshot {n}"
            for rel in names:
                q = "SELECT * FROM {}.{} AT (VERSION => %d) ORDER BY ALL" % n
                assert duck.execute(q.format("exported", rel)).fetchall() == \
                    duck.execute(q.format("lake", rel)).fetchall(), f"{rel} at {n}"
        duck.execute("DETACH exported")
    finally:
        duck.close()
        assert s.stop() == 0
    out = verify_json(store)
    assert out["clean"], out["problems"]


def test_reads_beside_a_busy_writer_stay_consistent(tmp_path):
    """A writer ending versions (updates move rows current -> history) commits
    without pause while show, snapshots and verify run again and again for
    longer than the reader's background catch-up interval (10 s): every
    answer is the one for its snapshot, and every walk is clean."""
    store = tmp_path / "store"
    s = Server("--store", f"file://{store}")
    duck = connect()
    stop = threading.Event()
    errors = []
    try:
        duck.execute(f"ATTACH 'ducklake:postgres:{s.dsn()}' AS lake (DATA_PATH '{tmp_path}/data/')")
        duck.execute("CREATE TABLE lake.t (id BIGINT, v BIGINT)")
        duck.execute("INSERT INTO lake.t SELECT range, 0 FROM range(5)")
        fixed = duck.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]

        def write():
            con = duck.cursor()
            i = 0
            try:
                while not stop.is_set():
                    i += 1
                    con.execute(f"UPDATE lake.t SET v = {i} WHERE id = {i % 5}")
                    if i % 7 == 0:  # ends table versions and name entries too
                        con.execute("ALTER TABLE lake.t RENAME TO t2")
                        con.execute("ALTER TABLE lake.t2 RENAME TO t")
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        writer = threading.Thread(target=write)
        writer.start()
        deadline = time.time() + 14
        runs = 0
        while time.time() < deadline:
            out = show_json(store, "--at", str(fixed))
            [sc] = out["schemas"]
            assert [(t["table_name"], t["rows"], len(t["columns"])) for t in sc["tables"]] == [("t", 5, 2)]
            r = tool("verify", str(store), "--json")
            assert r.returncode == 0, r.stdout
            r = tool("snapshots", str(store), "--json")
            ids = [x["snapshot_id"] for x in json.loads(r.stdout)["snapshots"]]
            assert ids == list(range(len(ids)))
            runs += 1
        stop.set()
        writer.join(timeout=30)
        assert not errors, errors
        assert runs >= 3
    finally:
        stop.set()
        duck.close()
        assert s.stop() == 0


def test_every_store_command_is_documented():
    """Each store command is in `moraine --help`, has its own --help, and is
    in docs/cli.md and the README's command-line section."""
    root = pathlib.Path(__file__).resolve().parents[2]
    usage = subprocess.run([MORAINE, "--help"], capture_output=True, text=True).stdout
    cli_md = (root / "docs/cli.md").read_text()
    readme = (root / "README.md").read_text()
    section = readme[readme.index("## The command line"):]
    section = section[:section.index("\n## ", 1)]
    for cmd in ["info", "census", "verify", "snapshots", "show", "watch", "export", "migrate", "branch"]:
        assert f"  {cmd} STORE" in usage, cmd
        assert f"| `moraine {cmd} STORE" in cli_md, cmd
        assert f"moraine {cmd} STORE" in section, cmd
        r = tool(cmd, "--help")
        assert r.returncode == 0 and f"moraine {cmd} STORE" in r.stdout.splitlines()[0 if cmd != "census" else 1], cmd


def test_show_at_accepts_the_time_forms(history_store):
    store, server, duck = history_store
    head = duck.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
    for at in ["2999-01-01", "2999-01-01 00:00:00", "2999-01-01T00:00:00.5Z", "2999-01-01T00:00:00+00:00"]:
        assert show_json(store, "--at", at)["snapshot"]["snapshot_id"] == head, at
    r = tool("show", str(store), "--at", "2999-01-01T00:00:00+02:00")
    assert r.returncode == 1 and "UTC time" in r.stderr


def test_watch_marks_snapshots_whose_changelog_left_the_window(built_store, tmp_path):
    store, head = built_store
    copy = damaged_copy(built_store, tmp_path, ("delete", "changelog{snapshot_id=1}"))
    w = Watch(copy, "--from", "0")
    got = w.take(head + 1)
    assert [g["snapshot_id"] for g in got] == list(range(head + 1))
    assert got[1]["tables"] is None and got[1]["catalog"] is None and got[1]["changes_made"]
    assert all(g["tables"] is not None for i, g in enumerate(got) if i != 1)
    assert w.stop(signal.SIGTERM) == (0, "")


def test_the_tools_on_a_second_catalog_of_a_server(tmp_path):
    """Another database's catalog is its own store under the root's
    catalogs/ folder, and the tools read it there."""
    root = tmp_path / "root"
    s = Server("--store", f"file://{root}")
    duck = connect()
    try:
        duck.execute(f"ATTACH 'ducklake:postgres:{s.dsn(dbname='lake2')}' AS l2 (DATA_PATH '{tmp_path}/d2/')")
        duck.execute("CREATE TABLE l2.only_here (x INT)")
        duck.execute("INSERT INTO l2.only_here VALUES (1), (2), (3)")
        sub = root / "catalogs" / "lake2" / "public"
        out = show_json(sub, "only_here")
        assert out["schemas"][0]["tables"][0]["rows"] == 3
        assert verify_json(sub)["clean"]
        r = tool("show", str(root), "only_here")  # the default catalog has nothing
        assert r.returncode == 1 and "holds no catalog yet" in r.stderr, r.stderr
        duck.execute(f"ATTACH 'ducklake:postgres:{s.dsn()}' AS lake (DATA_PATH '{tmp_path}/d1/')")
        r = tool("show", str(root), "only_here")  # nor this table once it has one
        assert r.returncode == 1 and "no table 'only_here'" in r.stderr, r.stderr
    finally:
        duck.close()
        assert s.stop() == 0


def test_export_inlined_rows_of_every_type(tmp_path):
    """DuckLake on PostgreSQL inlines rows as text and bytea; the export holds
    them in the columns' DuckDB types, as a DuckDB-file catalog does, so
    stock DuckLake reads every value back, at every snapshot, across a
    column added in between (two inlined tables of one table)."""
    store = tmp_path / "store"
    s = Server("--store", f"file://{store}")
    duck = connect()
    try:
        duck.execute(f"ATTACH 'ducklake:postgres:{s.dsn()}' AS lake (DATA_PATH '{tmp_path}/data/')")
        duck.execute("""CREATE TABLE lake.ty (b BLOB, d DATE, ts TIMESTAMPTZ, t TIMESTAMP, dec DECIMAL(10,2),
            bo BOOLEAN, f FLOAT, db DOUBLE, l INTEGER[], st STRUCT(x INT, y VARCHAR), u UUID, v VARCHAR,
            m MAP(VARCHAR, INT), hi HUGEINT, ub UBIGINT, tm TIME, iv INTERVAL, nested STRUCT(a INT[], b MAP(INT, VARCHAR))[])""")
        duck.execute("""INSERT INTO lake.ty VALUES ('\\x00\\xff\\x01'::BLOB, DATE '2020-02-29',
            TIMESTAMPTZ '2021-01-01 10:00:00.5+00', TIMESTAMP '1999-12-31 23:59:59.123456', -12.34, true, 0.5,
            1.5e300, [1, 2, NULL], {'x': 1, 'y': 'a"b''c'}, 'f81d4fae-7dec-11d0-a765-00a0c91e6bf6',
            'it''s ü, [and] {this}\nnewline', MAP {'k': 1, 'l': NULL}, 170141183460469231731687303715884105727,
            18446744073709551615, TIME '12:34:56.789', INTERVAL 3 DAY + INTERVAL 2 SECOND,
            [{'a': [1, 2], 'b': MAP {1: 'one'}}, NULL])""")
        duck.execute("INSERT INTO lake.ty (v) VALUES (NULL), ('')")
        duck.execute("ALTER TABLE lake.ty ADD COLUMN extra DATE")
        duck.execute("INSERT INTO lake.ty (v, extra) VALUES ('after', DATE '2000-01-01')")
        out = tmp_path / "ty.duckdb"
        r = tool("export", str(store), str(out))
        assert r.returncode == 0, r.stderr
        duck.execute(f"ATTACH 'ducklake:{out}' AS exported (READ_ONLY)")
        snaps = [n for n, in duck.execute("SELECT snapshot_id FROM lake.snapshots() WHERE snapshot_id >= 2").fetchall()]
        for n in snaps:
            q = f"SELECT * FROM {{}}.ty AT (VERSION => {n}) ORDER BY v NULLS FIRST"
            want = duck.execute(q.format("lake")).fetchall()
            assert duck.execute(q.format("exported")).fetchall() == want, f"snapshot {n}"
        assert len(want) == 4 and [r[-1] for r in want if r[11] == "after"] == [datetime.date(2000, 1, 1)]
    finally:
        duck.close()
        assert s.stop() == 0
