"""`moraine import SOURCE STORE`: a DuckLake catalog built by real DuckDB +
DuckLake (the differential workloads of test_differential.py, on a DuckDB
file, a SQLite file and a PostgreSQL database) is imported into a new store,
served by moraine and compared with the source at every snapshot (every
table AT (VERSION => n), the fixed answers of test_differential.state, and
every metadata row); then `moraine export` writes it back into a DuckDB file,
which is compared again. Plus the refusals, each one line.

The binary is MORAINE_BIN (default build/src/cli/moraine).
"""
import json
import os
import pathlib
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time

import duckdb
import pytest

from conftest import connect, extension_file
import emulators
import test_differential as diff
from test_pg_front import MORAINE, Server


def tool(*args, timeout=300):
    return subprocess.run([MORAINE, *args], capture_output=True, text=True, timeout=timeout)


def one_line(r):
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(lines) == 1 and lines[0].startswith("moraine: import: "), r.stderr
    return lines[0]


# A group of its own: inlined rows of every type DuckLake inlines, updated
# and deleted (the inlined tables' types are rewritten on the way in). The
# steps are str.format templates (test_differential.run): braces doubled.
TYPES = ("a INTEGER, b VARCHAR, c BLOB, d DATE, e TIMESTAMP, f DECIMAL(10,2), g INTEGER[], "
         "h STRUCT(x INT, y VARCHAR), i HUGEINT, j DOUBLE, k FLOAT, l BOOLEAN, m UUID, "
         "n TIMESTAMPTZ, o INTERVAL, p TIME, q MAP(VARCHAR, INT), r JSON, s UBIGINT, u TINYINT, "
         "v SMALLINT, w BIGINT, x UTINYINT, y USMALLINT, z UINTEGER, ab TIMETZ, af DECIMAL(30,5)")
ROW = ("(1, 'x''y é', '\\x00\\x01'::BLOB, '2020-01-02', '2020-01-02 03:04:05.123', 1.5, [1, 2], "
       "{{'x': 1, 'y': 'q'}}, 170141183460469231731687303715884105727, 1.25, 2.5, true, "
       "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '2020-01-02 03:04:05+00', INTERVAL 3 DAY, "
       "'01:02:03', MAP {{'a': 1}}, '{{\"k\": 1}}', 18446744073709551615, -5, 3, 4, 5, 6, 7, "
       "'01:02:03+05', 12345.67891)")
FEATURES = dict(diff.FEATURES)
FEATURES["inlined_types"] = dict(tables=["ty"], steps=[
    f"CREATE TABLE lake.ty({TYPES})",
    f"INSERT INTO lake.ty VALUES {ROW}",
    "INSERT INTO lake.ty (a, b) VALUES (2, 'two'), (3, NULL)",
    "UPDATE lake.ty SET b = 'changed', j = 9.5 WHERE a = 1",
    "DELETE FROM lake.ty WHERE a = 3",
    "ALTER TABLE lake.ty ADD COLUMN extra VARCHAR",
    "INSERT INTO lake.ty (a, extra) VALUES (4, 'four')",
])


def build(tmp_path, name, attach_sql, schema="main", load=()):
    """Runs the feature's steps on a catalog of DuckLake's own; returns what
    it answers (the fixed answers, the metadata tables, their rows)."""
    feature = FEATURES[name]
    side = {"data": tmp_path / "data", "tmp": tmp_path / "tmp"}
    side["tmp"].mkdir()
    con = connect()
    for ext in load:
        con.execute(f"LOAD '{extension_file(*ext)}'")
    con.execute(attach_sql.format(data=side["data"]))
    for i, stmt in enumerate(feature["steps"]):
        r = diff.run(con, stmt, side)
        assert r[0] == "ok", f"step {i} {stmt!r} fails on the source catalog: {r}"
    expected = diff.state(con, feature)
    tables = diff.metadata_tables(con, schema)
    raw = diff.raw_rows(con, schema, tables)
    assert all(isinstance(raw[t], list) for t in diff.METADATA), raw
    snaps = con.execute("SELECT count(*) FROM lake.snapshots()").fetchone()[0]
    con.close()
    return side, expected, tables, raw, snaps


ESCAPE = re.compile(rb"\\x([0-9A-Fa-f]{2})")


def unescape(rows):
    """Inlined rows as text: moraine's clients (DuckLake on PostgreSQL)
    inline strings as bytea, whose text escapes what is not ASCII
    ('x\\x27y'); a DuckDB file holds them as VARCHAR ("x'y"). The bytes are
    compared."""
    def one(v):
        if not isinstance(v, str) or "\\x" not in v:
            return v
        b = ESCAPE.sub(lambda m: bytes([int(m.group(1), 16)]), v.encode())
        try:
            return b.decode()
        except UnicodeDecodeError:
            return b
    return rows if not isinstance(rows, list) else [tuple(one(v) for v in r) for r in rows]


def booleans(rows):
    """SQLite keeps booleans as 0 / 1: compare them so on both sides."""
    swap = {"true": "1", "false": "0"}
    return rows if not isinstance(rows, list) else [tuple(swap.get(v, v) for v in r) for r in rows]


def same_raw(got, raw, loose_booleans=False):
    """Every metadata row as in the source; inlined rows by their bytes."""
    def norm(d):
        out = {t: unescape(r) if t.startswith("ducklake_inlined_data_") else r for t, r in d.items()}
        return {t: booleans(r) for t, r in out.items()} if loose_booleans else out
    assert norm(got) == norm(raw)


def served_matches(store, side, feature, expected, tables, raw, loose_booleans=False):
    """The store, served by moraine, answers as the source did."""
    s = Server("--store", f"file://{store}")
    try:
        con = connect()
        con.execute(f"ATTACH 'ducklake:postgres:{s.dsn()}' AS lake (DATA_PATH '{side['data']}')")
        assert diff.state(con, feature) == expected
        same_raw(diff.raw_rows(con, "public", tables), raw, loose_booleans)
        # and the imported catalog takes new commits
        con.execute("CREATE TABLE lake.after_import(i INTEGER)")
        con.execute("INSERT INTO lake.after_import VALUES (1)")
        assert con.execute("SELECT * FROM lake.after_import").fetchall() == [(1,)]
        con.close()
    finally:
        assert s.stop() == 0, s.log()


def export_matches(tmp_path, store, side, feature, expected, tables, raw):
    """`moraine export` of the imported store answers as the source did."""
    out = tmp_path / "exported.ducklake"
    r = tool("export", str(store), str(out))
    assert r.returncode == 0, r.stderr
    con = connect()
    con.execute(f"ATTACH 'ducklake:{out}' AS lake (DATA_PATH '{side['data']}')")
    assert diff.state(con, feature) == expected
    same_raw(diff.raw_rows(con, "main", tables), raw)
    con.close()


def import_ok(source, store, snaps, origin):
    r = tool("import", source, str(store), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["snapshots"] == snaps and out["origin"] == origin, out
    r = tool("verify", str(store))
    assert r.returncode == 0, r.stdout + r.stderr
    info = json.loads(tool("info", str(store), "--json").stdout)
    assert info["origin"] == origin and info["head_snapshot"] == out["head_snapshot"], info
    return out


@pytest.mark.parametrize("name", list(FEATURES))
def test_import_duckdb_file_round_trip(tmp_path, name):
    cat = tmp_path / "source.ducklake"
    side, expected, tables, raw, snaps = build(
        tmp_path, name, f"ATTACH 'ducklake:{cat}' AS lake (DATA_PATH '{{data}}')")
    store = tmp_path / "store"
    import_ok(f"ducklake:{cat}", store, snaps, f"ducklake:{cat}")
    export_matches(tmp_path, store, side, FEATURES[name], expected, tables, raw)
    served_matches(store, side, FEATURES[name], expected, tables, raw)


def test_import_from_a_metadata_schema_with_a_relative_path(tmp_path):
    """METADATA_SCHEMA on the source (--metadata-schema); the origin names
    the file by its absolute path even when SOURCE is relative."""
    cat = tmp_path / "source.ducklake"
    side, expected, tables, raw, snaps = build(
        tmp_path, "update", f"ATTACH 'ducklake:{cat}' AS lake (DATA_PATH '{{data}}', METADATA_SCHEMA 'meta_x')",
        schema="meta_x")
    r = subprocess.run([MORAINE, "import", "source.ducklake", "store", "--metadata-schema", "meta_x"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(tool("info", str(tmp_path / "store"), "--json").stdout)["origin"] == f"ducklake:{cat}"
    served_matches(tmp_path / "store", side, FEATURES["update"], expected, tables, raw)
    # without it the catalog is not found
    assert "holds no DuckLake catalog" in one_line(tool("import", str(cat), str(tmp_path / "s2")))


def test_import_into_object_storage(tmp_path):
    """An s3:// store (moto): imported, refused a second time, served."""
    cat = tmp_path / "source.ducklake"
    side, expected, tables, raw, snaps = build(
        tmp_path, "delete", f"ATTACH 'ducklake:{cat}' AS lake (DATA_PATH '{{data}}')")
    emu = emulators.start("s3", tmp_path / "moto")
    try:
        url = emu.url("imported")
        env = {**os.environ, **emu.env}
        run = lambda *a: subprocess.run([MORAINE, *a], capture_output=True, text=True, timeout=300, env=env)
        r = run("import", str(cat), url, "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["snapshots"] == snaps
        assert "holds a store already" in one_line(run("import", str(cat), url))
        r = run("verify", url)
        assert r.returncode == 0, r.stdout + r.stderr
        s = Server("--store", url, env=emu.env)
        try:
            con = connect()
            con.execute(f"ATTACH 'ducklake:postgres:{s.dsn()}' AS lake (DATA_PATH '{side['data']}')")
            assert diff.state(con, FEATURES["delete"]) == expected
            con.close()
        finally:
            assert s.stop() == 0
    finally:
        emu.stop()


def test_native_store_has_no_origin(tmp_path):
    s = Server("--store", f"file://{tmp_path / 'store'}")
    try:
        con = connect()
        con.execute(f"ATTACH 'ducklake:postgres:{s.dsn()}' AS lake (DATA_PATH '{tmp_path}/data')")
        con.execute("CREATE TABLE lake.t(i INTEGER)")
        con.close()
    finally:
        assert s.stop() == 0
    info = json.loads(tool("info", str(tmp_path / "store"), "--json").stdout)
    assert info["origin"] is None
    assert "origin             native" in tool("info", str(tmp_path / "store")).stdout


# ---- SQLite and PostgreSQL sources --------------------------------------------

def extension_dir(tmp_path):
    """A folder holding the scanners under their own names (the postgres
    package ships postgres.duckdb_extension; DuckDB wants postgres_scanner)."""
    d = tmp_path / "ext"
    d.mkdir()
    (d / "sqlite_scanner.duckdb_extension").symlink_to(extension_file("sqlite_scanner", "sqlite_scanner"))
    (d / "postgres_scanner.duckdb_extension").symlink_to(extension_file("postgres", "postgres_scanner"))
    return d


SOURCE_GROUPS = ["insert_inlined", "delete", "alter_columns", "rename_drop_table", "expire_snapshots",
                 "inlined_types", "partitioning"]


@pytest.mark.parametrize("name", SOURCE_GROUPS)
def test_import_sqlite_round_trip(tmp_path, name):
    cat = tmp_path / "source.sqlite"
    side, expected, tables, raw, snaps = build(
        tmp_path, name, f"ATTACH 'ducklake:sqlite:{cat}' AS lake (DATA_PATH '{{data}}')",
        load=[("sqlite_scanner", "sqlite_scanner")])
    store = tmp_path / "store"
    r = tool("import", f"ducklake:sqlite:{cat}", str(store), "--extension-dir", str(extension_dir(tmp_path)))
    assert r.returncode == 0, r.stderr
    assert tool("verify", str(store)).returncode == 0
    assert json.loads(tool("info", str(store), "--json").stdout)["origin"] == f"ducklake:sqlite:{cat}"
    served_matches(store, side, FEATURES[name], expected, tables, raw, loose_booleans=True)


PG_BIN = pathlib.Path(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"))


@pytest.fixture(scope="module")
def postgres():
    """A throwaway PostgreSQL cluster on loopback (as bench/catalogs.py starts one)."""
    if not (PG_BIN / "initdb").exists():
        pytest.skip(f"{PG_BIN}/initdb missing (PG_BIN overrides)")
    user = pwd.getpwnam("postgres") if os.geteuid() == 0 else None  # initdb refuses root
    d = pathlib.Path(tempfile.mkdtemp(prefix="moraine-import-pg-"))
    if user:
        os.chown(d, user.pw_uid, user.pw_gid)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    def run(*args):
        cmd = [str(a) for a in args]
        if user:
            cmd = ["runuser", "-u", user.pw_name, "--"] + cmd
        subprocess.run(cmd, check=True, timeout=120, cwd=d, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)

    run(PG_BIN / "initdb", "-D", d / "data", "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8",
        "--locale=C")
    run(PG_BIN / "pg_ctl", "-D", d / "data", "-l", d / "log", "-w", "-t", "60", "-o",
        f"-c listen_addresses=127.0.0.1 -p {port} -k {d}", "start")
    try:
        yield {"port": port, "run": run}
    finally:
        run(PG_BIN / "pg_ctl", "-D", d / "data", "-m", "fast", "-w", "-t", "60", "stop")
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("name", SOURCE_GROUPS)
def test_import_postgres_round_trip(tmp_path, postgres, name):
    db = f"src_{name}"
    postgres["run"](PG_BIN / "createdb", "-h", "127.0.0.1", "-p", postgres["port"], "-U", "postgres", db)
    dsn = f"host=127.0.0.1 port={postgres['port']} dbname={db} user=postgres"
    side, expected, tables, raw, snaps = build(
        tmp_path, name, f"ATTACH 'ducklake:postgres:{dsn} password=hunter2' AS lake (DATA_PATH '{{data}}')",
        schema="public")
    store = tmp_path / "store"
    r = tool("import", f"ducklake:postgres:{dsn} password=hunter2", str(store),
             "--extension-dir", str(extension_dir(tmp_path)))
    assert r.returncode == 0, r.stderr
    assert tool("verify", str(store)).returncode == 0
    info = json.loads(tool("info", str(store), "--json").stdout)
    assert info["origin"] == f"ducklake:postgres:{dsn}"  # the password stays behind
    served_matches(store, side, FEATURES[name], expected, tables, raw)


# ---- refusals, each one line ----------------------------------------------------

@pytest.fixture(scope="module")
def small_catalog(tmp_path_factory):
    d = tmp_path_factory.mktemp("small")
    con = connect()
    con.execute(f"ATTACH 'ducklake:{d}/cat.ducklake' AS lake (DATA_PATH '{d}/data')")
    con.execute("CREATE TABLE lake.t(a INTEGER, b VARCHAR)")
    con.execute("INSERT INTO lake.t VALUES (1, 'one')")
    con.close()
    return d / "cat.ducklake"


def copy_of(catalog, tmp_path, sql):
    """A copy of the catalog file changed by sql (run on the file itself)."""
    cp = tmp_path / "changed.ducklake"
    shutil.copy(catalog, cp)
    con = duckdb.connect(str(cp))
    con.execute(sql)
    con.close()
    return cp


def test_refuses_an_existing_store(tmp_path, small_catalog):
    store = tmp_path / "store"
    store.mkdir()
    (store / "something").write_text("x")
    line = one_line(tool("import", str(small_catalog), str(store)))
    assert "not empty" in line
    assert (store / "something").read_text() == "x"
    # a store made by an import is not empty either
    assert tool("import", str(small_catalog), str(tmp_path / "s2")).returncode == 0
    assert "not empty" in one_line(tool("import", str(small_catalog), f"file://{tmp_path / 's2'}"))
    # an empty folder is fine
    (tmp_path / "empty").mkdir()
    assert tool("import", str(small_catalog), str(tmp_path / "empty")).returncode == 0


def test_refuses_bad_sources(tmp_path, small_catalog):
    store = tmp_path / "store"
    assert "no-such.ducklake" in one_line(tool("import", str(tmp_path / "no-such.ducklake"), str(store)))
    plain = tmp_path / "plain.duckdb"
    duckdb.connect(str(plain)).execute("CREATE TABLE x(i INTEGER)").close()
    assert "holds no DuckLake catalog" in one_line(tool("import", str(plain), str(store)))
    assert "mysql catalog cannot be imported" in one_line(tool("import", "ducklake:mysql:db=x", str(store)))
    line = one_line(tool("import", f"ducklake:sqlite:{small_catalog}", str(store),
                         "--extension-dir", str(tmp_path / "nowhere")))
    assert "cannot load DuckDB's sqlite_scanner extension" in line
    assert not store.exists()  # nothing left behind
    r = tool("import", str(small_catalog))
    assert r.returncode == 2 and "into which store" in r.stderr
    r = tool("import", "--help")
    assert r.returncode == 0 and "ducklake:postgres:CONNSTR" in r.stdout


def test_refuses_another_spec_version(tmp_path, small_catalog):
    cp = copy_of(small_catalog, tmp_path,
                 "UPDATE ducklake_metadata SET value = '0.3' WHERE key = 'version'")
    line = one_line(tool("import", f"ducklake:{cp}", str(tmp_path / "store")))
    assert "spec version 0.3" in line and "imports spec version 1.0" in line
    assert not (tmp_path / "store").exists()


def test_a_failed_import_leaves_no_store(tmp_path, small_catalog):
    """A source the commit path refuses half-way (a column tag naming a
    column that never existed) leaves no store folder behind."""
    cp = copy_of(small_catalog, tmp_path,
                 "INSERT INTO ducklake_column_tag VALUES (1, 99, 2, NULL, 'comment', 'orphan')")
    line = one_line(tool("import", str(cp), str(tmp_path / "store")))
    assert "ducklake_column_tag" in line and "snapshot 2" in line
    assert not (tmp_path / "store").exists()
    (tmp_path / "empty").mkdir()  # an empty folder given is emptied again
    one_line(tool("import", str(cp), str(tmp_path / "empty")))
    assert (tmp_path / "empty").is_dir() and not any((tmp_path / "empty").iterdir())
