"""Differential coverage of every DuckLake feature: one list of statements runs
in lockstep against a DuckDB-file DuckLake catalog (the reference) and against
moraine (a fresh server on a temp store); after every step the answers of a
fixed set of queries are compared for every snapshot id; then moraine is
restarted on the same store and compared once more.

Each side has its own DATA_PATH, so strings are normalized: the side's data
and scratch folders become <DATA> / <TMP>. Timestamps are left out (they
differ by construction); AT (TIMESTAMP => ...) is checked with each side's own
snapshot times. Statements may use {DATA} and {TMP}, filled in per side.

The binary is MORAINE_BIN (default build/src/cli/moraine).
"""
import time

import psycopg
import pytest

from conftest import connect
from test_pg_front import Server

BASE = [
    "CREATE TABLE lake.t(a INTEGER, b VARCHAR)",
    "INSERT INTO lake.t VALUES (1, 'one'), (2, 'two'), (3, NULL)",
]
BIG = "INSERT INTO lake.big SELECT i, 'v' || i FROM range(0, {n}) r(i)"

FEATURES = {
    "create_schema_table_view_macro": dict(tables=["s1.t", "s1.v"], steps=[
        "CREATE SCHEMA lake.s1",
        "CREATE TABLE lake.s1.t(a INTEGER, b VARCHAR)",
        "INSERT INTO lake.s1.t VALUES (1, 'x'), (2, 'y')",
        "CREATE VIEW lake.s1.v AS SELECT a * 10 AS a10 FROM lake.s1.t",
        "CREATE MACRO lake.s1.plus1(x) AS x + 1",
        "CREATE MACRO lake.s1.tm(n) AS TABLE SELECT * FROM range(n)",
        "DROP VIEW lake.s1.v",
        "DROP MACRO lake.s1.plus1",
    ], extra=["SELECT lake.s1.tm.* FROM lake.s1.tm(3) ORDER BY ALL"]),
    "insert_inlined": dict(tables=["t"], steps=BASE + [
        "INSERT INTO lake.t VALUES (4, 'four')",
    ]),
    "insert_parquet": dict(tables=["big"], steps=[
        "CREATE TABLE lake.big(a INTEGER, b VARCHAR)",
        BIG.format(n=3000),
        BIG.format(n=2500),
    ]),
    "update": dict(tables=["t", "big"], steps=BASE + [
        "CREATE TABLE lake.big(a INTEGER, b VARCHAR)",
        BIG.format(n=3000),
        "UPDATE lake.t SET b = 'upd' WHERE a <> 2",
        "UPDATE lake.big SET b = 'upd' WHERE a < 5",
        "UPDATE lake.big SET b = 'again' WHERE a < 2",
    ]),
    "delete": dict(tables=["t", "big"], steps=BASE + [
        "CREATE TABLE lake.big(a INTEGER, b VARCHAR)",
        BIG.format(n=3000),
        "DELETE FROM lake.t WHERE a = 2",
        "DELETE FROM lake.big WHERE a BETWEEN 100 AND 110",
        "DELETE FROM lake.big WHERE a BETWEEN 200 AND 210",
    ]),
    "alter_columns": dict(tables=["t"], steps=BASE + [
        "ALTER TABLE lake.t ADD COLUMN c BIGINT",
        "INSERT INTO lake.t VALUES (4, 'four', 44)",
        "ALTER TABLE lake.t RENAME COLUMN b TO bb",
        "ALTER TABLE lake.t DROP COLUMN c",
        "ALTER TABLE lake.t ALTER COLUMN a SET DATA TYPE BIGINT",
        "INSERT INTO lake.t VALUES (5000000000, 'big')",
    ]),
    "rename_drop_table": dict(tables=["r", "r2"], steps=[
        "CREATE TABLE lake.r(x INTEGER)",
        "INSERT INTO lake.r VALUES (7)",
        "ALTER TABLE lake.r RENAME TO r2",
        "INSERT INTO lake.r2 VALUES (8)",
        "DROP TABLE lake.r2",
    ]),
    "partitioning": dict(tables=["p"], steps=[
        "CREATE TABLE lake.p(k INTEGER, v VARCHAR)",
        "ALTER TABLE lake.p SET PARTITIONED BY (k)",
        "INSERT INTO lake.p SELECT i % 3, 'v' || i FROM range(0, 3000) r(i)",
        "ALTER TABLE lake.p RESET PARTITIONED BY",
        "INSERT INTO lake.p SELECT 9, 'w' || i FROM range(0, 2000) r(i)",
    ], extra=["SELECT count(*) FROM lake.p WHERE k = 1"]),
    "tags_comments": dict(tables=["t", "v"], steps=BASE + [
        "CREATE VIEW lake.v AS SELECT a FROM lake.t",
        "COMMENT ON TABLE lake.t IS 'a table'",
        "COMMENT ON COLUMN lake.t.a IS 'a column'",
        "COMMENT ON VIEW lake.v IS 'a view'",
        "COMMENT ON TABLE lake.t IS 'changed'",
        "ALTER TABLE lake.t ADD COLUMN c INTEGER",
        "COMMENT ON COLUMN lake.t.a IS NULL",
    ]),
    "set_option": dict(tables=["t"], steps=BASE + [
        "CALL lake.set_option('parquet_compression', 'zstd')",
        "CALL lake.set_option('parquet_compression', 'snappy')",
        "CALL lake.set_option('data_inlining_row_limit', '5', table_name => 't')",
        "INSERT INTO lake.t SELECT i, 'x' FROM range(10, 20) r(i)",
    ]),
    "time_travel": dict(tables=["t", "big"], steps=BASE + [
        "CREATE TABLE lake.big(a INTEGER, b VARCHAR)",
        BIG.format(n=3000),
        "UPDATE lake.t SET b = 'z' WHERE a = 1",
        "DELETE FROM lake.big WHERE a < 1000",
        "DELETE FROM lake.t",
    ]),
    "table_changes": dict(tables=["t", "big"], changes=True, steps=BASE + [
        "CREATE TABLE lake.big(a INTEGER, b VARCHAR)",
        BIG.format(n=3000),
        "UPDATE lake.t SET b = 'z' WHERE a = 1",
        "UPDATE lake.big SET b = 'z' WHERE a < 3",
        "DELETE FROM lake.big WHERE a BETWEEN 10 AND 12",
        "DELETE FROM lake.t WHERE a = 3",
    ]),
    "merge_adjacent_files": dict(tables=["big"], steps=[
        "CREATE TABLE lake.big(a INTEGER, b VARCHAR)",
        BIG.format(n=3000),
        BIG.format(n=3000),
        BIG.format(n=3000),
        "CALL ducklake_merge_adjacent_files('lake')",
        BIG.format(n=2000),
    ]),
    "flush_inlined_data": dict(tables=["t"], steps=BASE + [
        "INSERT INTO lake.t VALUES (4, 'four')",
        "DELETE FROM lake.t WHERE a = 2",
        "CALL ducklake_flush_inlined_data('lake')",
        "INSERT INTO lake.t VALUES (5, 'five')",
    ]),
    "expire_snapshots": dict(tables=["t", "big"], steps=BASE + [
        "CREATE TABLE lake.big(a INTEGER, b VARCHAR)",
        BIG.format(n=3000),
        "UPDATE lake.t SET b = 'z' WHERE a = 1",
        "DELETE FROM lake.big WHERE a < 100",
        "ALTER TABLE lake.t ADD COLUMN c INTEGER",
        "CREATE TABLE lake.gone(x INTEGER)",
        "DROP TABLE lake.gone",
        "CALL ducklake_expire_snapshots('lake', versions => [2, 3, 4])",
        "CALL ducklake_expire_snapshots('lake', versions => [5, 6, 7, 8])",
        "INSERT INTO lake.t VALUES (9, 'nine', 9)",
    ]),
    "cleanup_old_files": dict(tables=["big"], steps=[
        "CREATE TABLE lake.big(a INTEGER, b VARCHAR)",
        BIG.format(n=3000),
        BIG.format(n=3000),
        "CALL ducklake_merge_adjacent_files('lake')",
        "DELETE FROM lake.big WHERE a < 100",
        "CALL ducklake_expire_snapshots('lake', versions => [2, 3])",
        "CALL ducklake_cleanup_old_files('lake', cleanup_all => true)",
        BIG.format(n=100),
    ]),
    "add_data_files": dict(tables=["ext"], steps=[
        "CREATE TABLE lake.ext(a INTEGER, b VARCHAR)",
        "COPY (SELECT i::INTEGER AS a, 'p' || i AS b FROM range(0, 50) r(i)) TO '{TMP}/ext1.parquet'",
        "CALL ducklake_add_data_files('lake', 'ext', '{TMP}/ext1.parquet')",
        "INSERT INTO lake.ext VALUES (1000, 'x')",
        "DELETE FROM lake.ext WHERE a < 10",
    ]),
}

# Features that still fail differentially: name -> the exact reason.
XFAIL = {}


def _norm(v, side):
    if isinstance(v, str):
        return v.replace(str(side["data"]), "<DATA>").replace(str(side["tmp"]), "<TMP>")
    if isinstance(v, (list, tuple)):
        return type(v)(_norm(x, side) for x in v)
    if isinstance(v, dict):
        return {k: _norm(x, side) for k, x in v.items()}
    return v


def _q(con, sql):
    try:
        return con.execute(sql).fetchall()
    except Exception as e:  # absent at that snapshot, expired, ...
        return type(e).__name__


def state(con, feature):
    """The fixed set of answers, per snapshot id."""
    out = {}
    snaps = con.execute(
        "SELECT snapshot_id, schema_version, changes::VARCHAR, author, commit_message, "
        "snapshot_time::VARCHAR FROM lake.snapshots() ORDER BY 1").fetchall()
    out["snapshots"] = [s[:5] for s in snaps]
    for (sid, *_rest, ts) in snaps:
        for t in feature["tables"]:
            out[(sid, t)] = _q(con, f"SELECT * FROM lake.{t} AT (VERSION => {sid}) ORDER BY ALL")
            if sid == snaps[-1][0] or feature.get("changes") or sid % 3 == 0:
                out[(sid, t, "ts")] = _q(
                    con, f"SELECT * FROM lake.{t} AT (TIMESTAMP => '{ts}'::TIMESTAMPTZ) ORDER BY ALL")
            if feature.get("changes"):
                sch, _, name = t.rpartition(".")
                sch = sch or "main"
                for fn in ("ducklake_table_changes", "ducklake_table_insertions",
                           "ducklake_table_deletions"):
                    out[(sid, t, fn)] = _q(
                        con, f"SELECT * FROM {fn}('lake', '{sch}', '{name}', {sid}, {sid}) ORDER BY ALL")
    out["tables"] = _q(con, "SELECT schema_name, table_name, comment FROM duckdb_tables() "
                            "WHERE database_name = 'lake' ORDER BY ALL")
    out["columns"] = _q(con, "SELECT schema_name, table_name, column_name, data_type, comment "
                             "FROM duckdb_columns() WHERE database_name = 'lake' ORDER BY ALL")
    out["views"] = _q(con, "SELECT schema_name, view_name, comment, sql FROM duckdb_views() "
                           "WHERE database_name = 'lake' ORDER BY ALL")
    out["macros"] = _q(con, "SELECT schema_name, function_name, function_type, parameters, macro_definition "
                            "FROM duckdb_functions() WHERE database_name = 'lake' ORDER BY ALL")
    out["options"] = _q(con, "SELECT option_name, value, scope, scope_entry FROM lake.options() "
                             "WHERE option_name NOT IN ('data_path', 'created_by') ORDER BY ALL")
    out["file_counts"] = {t: _q(con, f"SELECT count(*), sum(record_count) FROM ducklake_list_files('lake', "
                                     f"'{t.rpartition('.')[2]}', schema => '{t.rpartition('.')[0] or 'main'}')")
                          for t in feature["tables"]}
    for i, q in enumerate(feature.get("extra", [])):
        out[("extra", i)] = _q(con, q)
    return out


# Columns that differ by construction: times, file names and *_uuid (random).
INCIDENTAL = ("snapshot_time", "schedule_start", "path")
# A delete file holds its data file's path, whose random UUID compresses to a
# byte more or less on each side, so its sizes are incidental too.
INCIDENTAL_IN = {"ducklake_delete_file": ("file_size_bytes", "footer_size")}


# The DuckLake v1.0 metadata tables (catalog_map.c maps each of them).
METADATA = """ducklake_column ducklake_column_mapping ducklake_column_tag ducklake_data_file
ducklake_delete_file ducklake_file_column_stats ducklake_file_partition_value
ducklake_file_variant_stats ducklake_files_scheduled_for_deletion ducklake_inlined_data_tables
ducklake_macro ducklake_macro_impl ducklake_macro_parameters ducklake_metadata
ducklake_name_mapping ducklake_partition_column ducklake_partition_info ducklake_schema
ducklake_schema_versions ducklake_snapshot ducklake_snapshot_changes ducklake_sort_expression
ducklake_sort_info ducklake_table ducklake_table_column_stats ducklake_table_stats ducklake_tag
ducklake_view""".split()


def metadata_tables(con, schema):
    """METADATA plus the inlined data / delete tables the catalog names."""
    m = f"__ducklake_metadata_lake.{schema}"
    inl = [r[0] for r in con.execute(f"SELECT table_name FROM {m}.ducklake_inlined_data_tables").fetchall()]
    ids = [r[0] for r in con.execute(f"SELECT DISTINCT table_id FROM {m}.ducklake_table").fetchall()]
    return sorted(METADATA + inl + [f"ducklake_inlined_delete_{i}" for i in ids])


def raw_rows(con, schema, tables):
    """Row-faithfulness: every metadata row, minus incidental columns."""
    def skip(t):
        return ", ".join(f"'{c}'" for c in INCIDENTAL + INCIDENTAL_IN.get(t, ()))
    return {t: _q(con, f"SELECT COLUMNS(c -> c NOT IN ({skip(t)}) AND c NOT LIKE '%uuid')::VARCHAR "
                       f"FROM __ducklake_metadata_lake.{schema}.{t} ORDER BY ALL")
            for t in tables}


def attach(side):
    con = connect()
    if "server" in side:
        dsn = side["server"].dsn(**({"dbname": side["dbname"]} if side.get("dbname") else {}))
        ms = f", METADATA_SCHEMA '{side['schema']}'" if side.get("schema") else ""
        con.execute(f"ATTACH 'ducklake:postgres:{dsn}' AS lake (DATA_PATH '{side['data']}'{ms})")
    else:
        con.execute(f"ATTACH 'ducklake:{side['file']}' AS lake (DATA_PATH '{side['data']}')")
    return con


def run(con, stmt, side):
    sql = stmt.format(DATA=side["data"], TMP=side["tmp"])
    if sql.startswith("CALL ducklake_"):  # answers hold timestamps: count rows in SQL
        sql = "SELECT * FROM " + sql[len("CALL "):]
        sql = f"SELECT count(*) FROM ({sql})"
    try:
        res = con.execute(sql).fetchall()
    except Exception as e:
        return _norm(("error", type(e).__name__, str(e)[:300]), side)
    if sql.startswith("SELECT count(*) FROM (SELECT * FROM ducklake_"):
        return ("ok", res[0][0])
    # a maintenance call's answer: how many rows (paths differ by side)
    return ("ok", len(res))


def head_snapshot(con):
    return con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]


def caught_up(replica_con, writer_con, timeout=30):
    """Waits until the replica's catalog reaches the writer's head snapshot."""
    want, got, deadline = head_snapshot(writer_con), None, time.time() + timeout
    while time.time() < deadline:
        got = head_snapshot(replica_con)
        if got == want:
            return
        time.sleep(0.02)
    raise AssertionError(f"the replica is at snapshot {got}, the writer at {want}")


def wait_for_catalog(server, timeout=30, **dsn):
    """Waits until a replica has loaded the catalog the writer created
    (before that, DuckLake's ATTACH would try to create it there)."""
    deadline = time.time() + timeout
    while True:
        try:
            with psycopg.connect(server.dsn(**dsn), autocommit=True) as pg:
                if pg.execute("SELECT count(*) FROM ducklake_snapshot").fetchone()[0] > 0:
                    return
        except psycopg.Error:
            pass
        if time.time() > deadline:
            raise AssertionError("the replica never loaded the writer's catalog")
        time.sleep(0.02)


def differential(tmp_path, name, store=None, env=None, dbname=None, schema=None, replica=False):
    """store: moraine's store URL (default a temp folder); env: the
    variables it needs (an object store's endpoint and credentials);
    dbname: run on that database's catalog instead of the default one,
    with the default catalog holding other tables and snapshots beside it
    (none of which may show in the compared metadata rows); schema: the
    same with DuckLake's METADATA_SCHEMA (a catalog of its own too);
    replica: a `serve --replica` on the same store follows the writer, and
    after every step, once caught up, answers the same as the reference."""
    mschema = schema or "public"
    feature = FEATURES[name]
    ref = {"file": tmp_path / "ref.ducklake", "data": tmp_path / "ref-data", "tmp": tmp_path / "ref-tmp"}
    mor = {"data": tmp_path / "mor-data", "tmp": tmp_path / "mor-tmp",
           "store": store or "file://" + str(tmp_path / "store")}
    for side in (ref, mor):
        side["tmp"].mkdir()
    mor["server"] = Server("--store", mor["store"], env=env)
    if dbname or schema:
        mor["dbname"], mor["schema"] = dbname, schema
        beside = dict(mor, dbname=None, schema=None, data=tmp_path / "beside-data")
        bcon = attach(beside)
        bcon.execute("CREATE TABLE lake.beside(i INTEGER)")
        bcon.execute("INSERT INTO lake.beside VALUES (1), (2)")
        bcon.close()
    rep = dict(mor, server=Server("--store", mor["store"], "--replica", env=env)) if replica else None
    try:
        rcon, mcon = attach(ref), attach(mor)
        if replica:  # the writer has made the catalog by now
            wait_for_catalog(rep["server"], **({"dbname": dbname} if dbname else {}))
        pcon = attach(rep) if replica else None
        for i, stmt in enumerate(feature["steps"]):
            r, m = run(rcon, stmt, ref), run(mcon, stmt, mor)
            assert m == r, f"step {i} {stmt!r}: moraine {m} != file catalog {r}"
            assert r[0] == "ok", f"step {i} {stmt!r} fails on the file catalog: {r}"
            expected = _norm(state(rcon, feature), ref)
            got = _norm(state(mcon, feature), mor)
            assert got == expected, f"after step {i} {stmt!r}"
            tables = metadata_tables(rcon, "main")
            want_raw = _norm(raw_rows(rcon, "main", tables), ref)
            assert _norm(raw_rows(mcon, mschema, tables), mor) == want_raw, \
                f"metadata rows after step {i} {stmt!r}"
            if replica:
                caught_up(pcon, mcon)
                assert _norm(state(pcon, feature), rep) == expected, f"replica after step {i} {stmt!r}"
                assert _norm(raw_rows(pcon, mschema, tables), rep) == want_raw, \
                    f"replica metadata rows after step {i} {stmt!r}"
        raw = _norm(raw_rows(rcon, "main", tables), ref)
        # not vacuous: every fixed metadata table answered on the reference
        assert all(isinstance(raw[t], list) for t in METADATA), raw
        mcon.close()
        rcon.close()
        if replica:
            pcon.close()
            # every catch-up was applied commit by commit, or fell back on purpose
            assert "one by one failed" not in rep["server"].log(), rep["server"].log()
    finally:
        assert mor["server"].stop() == 0
        if replica:
            assert rep["server"].stop() == 0
    # the catalog comes back from the store; with no snapshot below the
    # newest resident, every answer at an older snapshot loads its history
    mor["server"] = Server("--store", mor["store"], "--resident-snapshots", "0", env=env)
    if dbname or schema:  # and the default catalog kept its own
        beside = dict(mor, dbname=None, schema=None, data=tmp_path / "beside-data")
        bcon = attach(beside)
        assert bcon.execute("SELECT i FROM lake.beside ORDER BY i").fetchall() == [(1,), (2,)]
        assert "t" not in [r[0] for r in bcon.execute("SHOW TABLES FROM lake").fetchall()]
        bcon.close()
    try:
        mcon = attach(mor)
        got = _norm(state(mcon, feature), mor)
        assert got == expected, "after restart"
        assert _norm(raw_rows(mcon, mschema, tables), mor) == raw, "metadata rows after restart"
        # and it is still writable after the load
        mcon.execute("CREATE TABLE lake.after_restart(i INTEGER)")
        mcon.execute("INSERT INTO lake.after_restart VALUES (1)")
        assert mcon.execute("SELECT * FROM lake.after_restart").fetchall() == [(1,)]
        mcon.close()
    finally:
        assert mor["server"].stop() == 0


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=XFAIL[n])) if n in XFAIL else n
    for n in FEATURES])
def test_feature_matches_file_catalog(tmp_path, name):
    """Also on a read replica of the writer's store (serve --replica), which
    must answer the same after every step once caught up."""
    differential(tmp_path, name, replica=True)


@pytest.mark.parametrize("name", ["create_schema_table_view_macro", "update", "partitioning"])
def test_feature_matches_file_catalog_in_a_second_catalog(tmp_path, name):
    """The same lockstep on a second database's catalog (its own store under
    the root's catalogs/), beside a default catalog with its own tables."""
    differential(tmp_path, name, dbname="lake2")


@pytest.mark.parametrize("name", ["insert_inlined", "delete"])
def test_feature_matches_file_catalog_in_a_metadata_schema(tmp_path, name):
    """The same lockstep with METADATA_SCHEMA 'meta_s2' on the default
    database: that schema's own catalog and store, beside public's."""
    differential(tmp_path, name, schema="meta_s2")
