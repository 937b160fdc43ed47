"""A hostile client against the real `moraine serve`: every attack of
issue 8 (and the statement and function families around it) is refused with
its SQLSTATE over a plain PostgreSQL connection, no file is written or read,
the engine's settings are unchanged for other sessions, and afterwards a
DuckLake client still attaches, commits and reads — also after a restart on
the same store, which proves nothing the attacker sent was persisted.

The binary is MORAINE_BIN (default build/src/cli/moraine).
"""
import os
import pathlib

import psycopg
import pytest

from conftest import connect
from test_pg_front import Server

SECRET = "moraine-hostile-secret-7f3a"

# (statement, SQLSTATE). {F} is a file that must never be read; {W} a path
# that must never be written.
ATTACKS = [
    # files: read
    ("SELECT * FROM read_text('{F}')", "42501"),
    ("SELECT * FROM read_blob('{F}')", "42501"),
    ("SELECT * FROM glob('{F}')", "42501"),
    ("SELECT * FROM read_csv('{F}')", "42501"),
    ("SELECT * FROM read_csv_auto('{F}')", "42501"),
    ("SELECT * FROM read_json('{F}')", "42501"),
    ("SELECT * FROM read_parquet('{F}')", "42501"),
    ("SELECT * FROM sniff_csv('{F}')", "42501"),
    ("SELECT * FROM \"{F}\"", "42501"),
    ("SELECT 1 WHERE EXISTS (SELECT * FROM read_text('{F}'))", "42501"),
    ("WITH x AS (SELECT content FROM read_text('{F}')) SELECT * FROM x", "42501"),
    ("SELECT * FROM ducklake_snapshot, LATERAL read_text('{F}')", "42501"),
    ("COPY ducklake_snapshot FROM '{F}'", "42501"),
    ("SELECT pg_catalog.read_text('{F}')", "42501"),
    # files: write
    ("COPY (SELECT 1) TO '{W}'", "42501"),
    ("COPY ducklake_snapshot TO '{W}'", "42501"),
    ("COPY ducklake_snapshot TO PROGRAM 'touch {W}'", "42501"),
    ("EXPORT DATABASE '{W}'", "42601"),
    ("ATTACH '{W}' AS x", "42601"),
    ("PRAGMA log_query_path='{W}'", "42601"),
    ("SET log_query_path = '{W}'", None),  # kept by the session, never the engine
    # extensions and settings
    ("INSTALL httpfs", "42601"),
    ("LOAD ducklake", "42601"),
    ("LOAD '{W}'", "42501"),
    ("SELECT * FROM duckdb_settings()", "42501"),
    ("SELECT * FROM duckdb_extensions()", "42501"),
    ("SELECT * FROM duckdb_secrets()", "42501"),
    ("SELECT current_setting('threads')", "42501"),
    ("SELECT getenv('HOME')", "42501"),
    ("CALL pragma_version()", "42501"),
    ("CREATE SECRET s (TYPE s3, KEY_ID 'a', SECRET 'b')", "42601"),
    # the engine's own databases
    ("DETACH mrpg", "42601"),
    ("USE mrpg", "42601"),
    ("SELECT * FROM mrpg.main.pg_type", "42501"),
    ("SELECT * FROM mrpg.pg_settings", "42501"),
    ("SELECT * FROM system.main.duckdb_tables", "42501"),
    ("SELECT * FROM duckdb_tables", "42501"),
    ("SELECT * FROM information_schema.tables", "42501"),
    ("INSERT INTO pg_settings VALUES ('a', 'b')", "42501"),
    ("DROP VIEW pg_class", "42501"),
    ("CREATE SCHEMA mrpg", "42501"),
    ("CREATE SCHEMA pg_mine", "42501"),
    # the catalog's own tables keep their spec shape
    ("DROP TABLE ducklake_snapshot_changes", "42501"),
    ("DROP TABLE public.ducklake_snapshot", "42501"),
    ("ALTER TABLE ducklake_snapshot ADD COLUMN x INTEGER", "42501"),
    ("ALTER TABLE ducklake_table RENAME TO t2", "42501"),
    ("TRUNCATE ducklake_snapshot", "42501"),
    ("CREATE TABLE evil (a INTEGER)", "42501"),
    ("CREATE TABLE ducklake_evil (a INTEGER)", "42501"),
    ("CREATE TABLE ducklake_inlined_data_77_1 (a INTEGER)", "42501"),
    ("CREATE TABLE ducklake_inlined_data_77_1 (row_id BIGINT, begin_snapshot BIGINT, "
     "end_snapshot BIGINT, a INTEGER)", "42501"),  # table 77 does not exist
    ("CREATE TABLE ducklake_inlined_delete_77 (file_id BIGINT, row_id BIGINT, "
     "begin_snapshot BIGINT)", "42501"),
    ("CREATE TABLE ducklake_snapshot2 AS SELECT 1", "42501"),
    ("CREATE VIEW ducklake_v AS SELECT 1", "42501"),
    ("CREATE MACRO evil(x) AS x", "42601"),
    ("CREATE FUNCTION f() RETURNS int AS 'select 1' LANGUAGE sql", "42501"),
    ("CREATE INDEX i ON ducklake_snapshot (snapshot_id)", "42501"),
    ("CREATE TEMP TABLE ducklake_snapshot (a INTEGER)", "42501"),
    ("SELECT 1 INTO ducklake_x", "42501"),
    ("WITH d AS (DELETE FROM ducklake_snapshot RETURNING *) SELECT * FROM d", "0A000"),
    ("DELETE FROM ducklake_snapshot RETURNING *", "0A000"),  # would run uncaptured
    ("UPDATE ducklake_snapshot SET snapshot_id = snapshot_id + 1000", "0A000"),  # a stored key
    ("MERGE INTO ducklake_tag t USING ducklake_tag s ON true WHEN MATCHED THEN DELETE", "42501"),
    ("GRANT ALL ON ducklake_snapshot TO public", "42501"),
    ("CHECKPOINT", "0A000"),
    ("VACUUM", "0A000"),
    ("SAVEPOINT a", "0A000"),
    ("EXPLAIN SELECT 1", "0A000"),
    # one refused statement refuses the whole string: nothing runs
    ("SELECT 1; SELECT * FROM read_text('{F}')", "42501"),
    # trees deep enough to exhaust a stack are refused before anything parses
    ("SELECT " + "1+(" * 5000 + "1" + ")" * 5000, "54001"),
    ("SELECT " + "1+" * 200000 + "1", "54001"),
    ("SELECT 1" + "::int" * 50000, "54001"),
    ("SELECT " + "(" * 9000 + "1" + ")" * 9000, "54001"),
]


@pytest.fixture
def victim(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET + "\n")
    store = tmp_path / "store"
    server = Server("--store", f"file://{store}")
    yield server, secret, tmp_path / "written", store
    server.stop()


def run_attack(conn, sql):
    with conn.cursor() as cur:
        try:
            cur.execute(sql)
            rows = cur.fetchall() if cur.description else []
        except psycopg.Error as e:
            return e.sqlstate, str(e)
    return None, rows


def test_every_attack_is_refused_and_changes_nothing(victim):
    server, secret, written, _ = victim
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        for template, state in ATTACKS:
            sql = template.format(F=secret, W=written)
            got, detail = run_attack(conn, sql)
            assert got == state, f"{sql}: expected {state}, got {got} ({detail})"
            assert SECRET not in str(detail), f"{sql} leaked the file"
            assert not written.exists(), f"{sql} wrote a file"
        # the connection is still usable and PostgreSQL's transaction rules hold
        assert run_attack(conn, "SELECT 1") == (None, [(1,)])
    # a refusal inside a transaction aborts it as PostgreSQL does
    with psycopg.connect(server.dsn()) as conn:
        with conn.cursor() as cur:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                cur.execute("SELECT * FROM read_text('/etc/hostname')")
            with pytest.raises(psycopg.errors.InFailedSqlTransaction):
                cur.execute("SELECT 1")
        conn.rollback()


def test_refusals_are_logged_once(tmp_path):
    server = Server("--store", f"file://{tmp_path}/store")
    try:
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            assert run_attack(conn, "SELECT * FROM glob('/etc/*')")[0] == "42501"
    finally:
        server.stop()
    log = server.log()
    assert log.count("refused (42501)") == 1, log
    assert "glob" in log


def test_settings_are_per_session_never_the_engine(victim):
    server = victim[0]
    with psycopg.connect(server.dsn(), autocommit=True) as a, \
            psycopg.connect(server.dsn(), autocommit=True) as b:
        a.execute("SET TimeZone = 'Asia/Tokyo'")
        a.execute("SET threads = 1")
        a.execute("SET enable_external_access = true")
        assert a.execute("SHOW TimeZone").fetchone() == ("Asia/Tokyo",)
        assert b.execute("SHOW TimeZone").fetchone() == ("UTC",)
        # the engine still refuses files even to a session that "enabled" them
        assert run_attack(a, "SELECT * FROM read_text('/etc/hostname')")[0] == "42501"
        a.execute("DISCARD ALL")
        assert a.execute("SHOW TimeZone").fetchone() == ("UTC",)


def ducklake_roundtrip(server, data, rows):
    duck = connect()
    duck.execute(f"ATTACH 'ducklake:postgres:{server.dsn()}' AS lake (DATA_PATH '{data}/')")
    duck.execute("CREATE TABLE IF NOT EXISTS lake.t (id BIGINT, v VARCHAR)")
    duck.execute(f"INSERT INTO lake.t VALUES ({rows}, 'row {rows}')")
    got = duck.execute("SELECT id FROM lake.t ORDER BY id").fetchall()
    duck.close()
    return got


def test_ducklake_still_works_and_the_store_still_loads(victim):
    server, secret, written, store = victim
    data = store.parent / "data"
    assert ducklake_roundtrip(server, data, 1) == [(1,)]
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        for template, _ in ATTACKS:
            run_attack(conn, template.format(F=secret, W=written))
        # the statements that bricked a store before issue 8
        for sql in ["DETACH mrpg", "DROP TABLE ducklake_snapshot_changes",
                    "CREATE TABLE ducklake_inlined_data_77_1 (row_id BIGINT, "
                    "begin_snapshot BIGINT, end_snapshot BIGINT, a INTEGER)",
                    "INSERT INTO ducklake_inlined_data_77_1 VALUES (1, 1, NULL, 1)"]:
            assert run_attack(conn, sql)[0] is not None, sql
    # new clients still connect and DuckLake still commits
    assert ducklake_roundtrip(server, data, 2) == [(1,), (2,)]
    server.stop()
    again = Server("--store", f"file://{store}")
    try:
        assert ducklake_roundtrip(again, data, 3) == [(1,), (2,), (3,)]
    finally:
        assert again.stop() == 0


def test_changes_the_store_could_not_keep_are_refused(victim):
    """Two shapes of DML used to run on catalog tables without reaching the
    store whole: a client's own RETURNING (not captured at all) and an UPDATE
    of a column that identifies the stored row (the old row stayed beside the
    new one). Both were served at once and differed after a restart. Both are
    refused (0A000) by both protocols, and readers see the same catalog
    before and after a restart."""
    server, _, _, store = victim
    data = store.parent / "data"
    assert ducklake_roundtrip(server, data, 1) == [(1,)]
    catalog = {"tables": "SELECT table_id, table_name FROM ducklake_table ORDER BY 1",
               "stats": "SELECT table_id, record_count FROM ducklake_table_stats ORDER BY 1"}
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        for sql in ["UPDATE ducklake_table SET table_name = 'renamed' WHERE table_name = 't' "
                    "RETURNING table_name",
                    "UPDATE ducklake_table SET table_id = 99 WHERE table_name = 't'",
                    'UPDATE ducklake_table SET "TABLE_ID" = 98',  # DuckDB ignores the case
                    "UPDATE ducklake_table_stats SET table_id = 77"]:
            assert run_attack(conn, sql)[0] == "0A000", sql
        with conn.cursor() as cur:  # a parameter: the extended protocol
            with pytest.raises(psycopg.errors.FeatureNotSupported):
                cur.execute("DELETE FROM ducklake_table WHERE table_name = %s RETURNING table_id",
                            ["t"])
            with pytest.raises(psycopg.errors.FeatureNotSupported):
                cur.execute("UPDATE ducklake_table SET table_id = %s", [98])
        before = {k: conn.execute(q).fetchall() for k, q in catalog.items()}
    assert [name for _, name in before["tables"]] == ["t"]
    server.stop()
    again = Server("--store", f"file://{store}")
    try:
        with psycopg.connect(again.dsn(), autocommit=True) as conn:
            assert {k: conn.execute(q).fetchall() for k, q in catalog.items()} == before
        assert ducklake_roundtrip(again, data, 2) == [(1,), (2,)]
    finally:
        assert again.stop() == 0


STORE_KEPT = {
    "tables": "SELECT table_id, table_name, begin_snapshot FROM ducklake_table ORDER BY 1, 3",
    "stats": "SELECT table_id, record_count FROM ducklake_table_stats ORDER BY 1",
    "options": "SELECT key, value, scope, scope_id FROM ducklake_metadata ORDER BY 1, 2",
    "versions": "SELECT table_id, begin_snapshot, schema_version FROM ducklake_schema_versions "
                "ORDER BY 1, 2",
    "inlined": "SELECT row_id, begin_snapshot, id FROM ducklake_inlined_data_1_1 ORDER BY 1, 2",
    "listed": "SELECT table_id, schema_version, table_name FROM ducklake_inlined_data_tables "
              "ORDER BY 1, 2",
}


def lake_with_table_t(tmp_path, inlined_rows):
    """A server on a fresh store whose DuckLake catalog holds table t
    (table 1), with inlined_rows rows in ducklake_inlined_data_1_1."""
    store = tmp_path / "store"
    server = Server("--store", f"file://{store}")
    try:
        duck = connect()
        duck.execute(f"ATTACH 'ducklake:postgres:{server.dsn()}' AS lake (DATA_PATH '{tmp_path}/d/')")
        duck.execute("CREATE TABLE lake.t (id BIGINT)")
        for i in range(inlined_rows):
            duck.execute(f"INSERT INTO lake.t VALUES ({i + 1})")
        duck.close()
    except Exception:
        server.stop()
        raise
    return store, server


@pytest.mark.parametrize("sql, state", [
    # a second row for a key the store keeps once: the engine would serve two
    ("INSERT INTO ducklake_table_stats VALUES (1, 5, 5, 5)", "23505"),
    ("INSERT INTO ducklake_table SELECT * FROM ducklake_table", "23505"),
    ("INSERT INTO ducklake_schema_versions SELECT * FROM ducklake_schema_versions", "23505"),
    ("INSERT INTO ducklake_inlined_data_1_1 SELECT * FROM ducklake_inlined_data_1_1", "23505"),
    ("INSERT INTO ducklake_metadata VALUES ('created_by', 'x', NULL, NULL)", "23505"),
    # an inlined table and its directory row go together
    ("DELETE FROM ducklake_inlined_data_tables", "0A000"),
    ("DROP TABLE ducklake_inlined_data_1_1", "0A000"),
])
def test_rows_the_store_keeps_once_stay_one(tmp_path, sql, state):
    """What the store keeps as one record may not become two rows (or none)
    in the engine: the commit is refused, and the catalog a reader sees is
    the same before and after a restart."""
    store, server = lake_with_table_t(tmp_path, inlined_rows=1)
    try:
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            assert run_attack(conn, sql)[0] == state
            before = {k: conn.execute(q).fetchall() for k, q in STORE_KEPT.items()}
    finally:
        assert server.stop() == 0
    again = Server("--store", f"file://{store}")
    try:
        with psycopg.connect(again.dsn(), autocommit=True) as conn:
            assert {k: conn.execute(q).fetchall() for k, q in STORE_KEPT.items()} == before
    finally:
        assert again.stop() == 0


def test_ducklake_drops_an_inlined_table_with_its_directory_row(tmp_path):
    """DuckLake's own shape (DELETE the directory row, DROP the table, one
    transaction) still commits, and the table stays gone after a restart."""
    store, server = lake_with_table_t(tmp_path, inlined_rows=0)
    try:
        with psycopg.connect(server.dsn()) as conn:
            conn.execute("DELETE FROM ducklake_inlined_data_tables WHERE table_id = 1")
            conn.execute("DROP TABLE ducklake_inlined_data_1_1")
            conn.commit()
    finally:
        assert server.stop() == 0
    again = Server("--store", f"file://{store}")
    try:
        with psycopg.connect(again.dsn(), autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM ducklake_inlined_data_tables").fetchone() == (0,)
            assert conn.execute("SELECT count(*) FROM pg_class WHERE relname = "
                                "'ducklake_inlined_data_1_1'").fetchone() == (0,)
    finally:
        assert again.stop() == 0
