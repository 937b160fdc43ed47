"""End-to-end tests of the catalog layer: DuckLake through moraine with the
catalog persisted in a SlateDB store (a temp folder), compared differentially
against the same workload on a DuckDB-file DuckLake catalog at every
snapshot, before and after a restart; and crash safety under SIGKILL.

The binary is MORAINE_BIN (default build/src/cli/moraine).
"""
import os
import signal
import threading
import time

import pytest

from conftest import connect
from test_pg_front import Server

TABLES = ["s1.t", "s1.big", "s1.v", "main.r", "main.r2"]

# A DuckLake workload touching the catalog tables a user reaches first.
WORKLOAD = [
    "CREATE SCHEMA lake.s1",
    "CREATE TABLE lake.s1.t(a INTEGER, b VARCHAR)",
    "INSERT INTO lake.s1.t VALUES (1, 'one'), (2, 'two'), (3, NULL)",          # inlined
    "INSERT INTO lake.s1.big SELECT i, 'v' || i FROM range(0, 3000) r(i)",      # Parquet
    "UPDATE lake.s1.big SET b = 'upd' WHERE a < 5",
    "DELETE FROM lake.s1.big WHERE a BETWEEN 100 AND 110",
    "DELETE FROM lake.s1.t WHERE a = 2",
    "ALTER TABLE lake.s1.t ADD COLUMN c BIGINT",
    "INSERT INTO lake.s1.t VALUES (4, 'four', 44)",
    "ALTER TABLE lake.s1.t RENAME COLUMN b TO bb",
    "ALTER TABLE lake.s1.t DROP COLUMN c",
    "CREATE VIEW lake.s1.v AS SELECT a FROM lake.s1.t",
    "COMMENT ON TABLE lake.s1.t IS 'a table'",
    "COMMENT ON COLUMN lake.s1.t.a IS 'a column'",
    "CREATE TABLE lake.r(x INTEGER)",
    "INSERT INTO lake.r VALUES (7)",
    "ALTER TABLE lake.r RENAME TO r2",
    "DROP TABLE lake.r2",
    "CALL lake.set_option('parquet_compression', 'zstd')",
]
PRE = ["CREATE TABLE lake.s1.big(a INTEGER, b VARCHAR)"]


def attach_moraine(server, data):
    con = connect()
    con.execute(f"ATTACH 'ducklake:postgres:{server.dsn()}' AS lake (DATA_PATH '{data}')")
    return con


def attach_file(path, data):
    con = connect()
    con.execute(f"ATTACH 'ducklake:{path}' AS lake (DATA_PATH '{data}')")
    return con


def run_workload(con):
    stmts = WORKLOAD[:2] + PRE + WORKLOAD[2:]
    for q in stmts:
        con.execute(q)


def state(con):
    """Everything a client sees, per snapshot: table contents, snapshot log,
    tables/columns/comments/options as DuckLake reports them."""
    snaps = con.execute(
        "SELECT snapshot_id, schema_version, changes::VARCHAR FROM lake.snapshots() ORDER BY 1"
    ).fetchall()
    out = {"snapshots": snaps}
    for (sid, _, _) in snaps:
        for t in TABLES:
            try:
                rows = con.execute(f"SELECT * FROM lake.{t} AT (VERSION => {sid}) ORDER BY ALL").fetchall()
                out[(sid, t)] = rows
            except Exception as e:  # absent at that snapshot
                out[(sid, t)] = type(e).__name__
    out["current_cols"] = con.execute(
        "SELECT table_name, column_name, data_type, comment FROM duckdb_columns() "
        "WHERE database_name = 'lake' ORDER BY ALL").fetchall()
    out["current_tables"] = con.execute(
        "SELECT schema_name, table_name, comment FROM duckdb_tables() "
        "WHERE database_name = 'lake' ORDER BY ALL").fetchall()
    out["options"] = con.execute(
        "SELECT option_name, value, scope FROM lake.options() WHERE option_name = 'parquet_compression'"
    ).fetchall()
    return out


@pytest.fixture
def store(tmp_path):
    return "file://" + str(tmp_path / "store")


def test_workload_matches_file_catalog_and_survives_restart(tmp_path, store):
    ref = attach_file(tmp_path / "ref.ducklake", tmp_path / "ref-data")
    run_workload(ref)
    expected = state(ref)
    ref.close()
    # the comparison is not vacuous: most (snapshot, table) pairs have rows
    assert sum(1 for v in expected.values() if isinstance(v, list) and v) > 20

    server = Server("--store", store)
    try:
        con = attach_moraine(server, tmp_path / "data")
        run_workload(con)
        got = state(con)
        con.close()
    finally:
        assert server.stop() == 0
    assert got == expected

    # the catalog really comes back from the store
    server = Server("--store", store)
    try:
        con = attach_moraine(server, tmp_path / "data")
        again = state(con)
        # and it is still writable after the load
        con.execute("INSERT INTO lake.s1.t VALUES (9, 'nine')")
        assert con.execute("SELECT count(*) FROM lake.s1.t WHERE a = 9").fetchone()[0] == 1
        con.close()
    finally:
        assert server.stop() == 0
    assert again == expected


def test_update_of_inlined_row_survives_restart(tmp_path, store):
    # An UPDATE of an inlined row ends the old version and inserts the new one
    # with the same row_id: inline/data_row is keyed by begin_snapshot too, so
    # both versions survive a restart, and time travel before the update works.
    server = Server("--store", store)
    try:
        con = attach_moraine(server, tmp_path / "data")
        con.execute("CREATE TABLE lake.t(a INTEGER, b VARCHAR)")
        con.execute("INSERT INTO lake.t VALUES (1, 'x'), (2, 'y')")
        v_insert = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        con.execute("UPDATE lake.t SET b = 'z' WHERE a = 1")
        before = con.execute("SELECT * FROM lake.t ORDER BY ALL").fetchall()
        old = con.execute(
            f"SELECT * FROM lake.t AT (VERSION => {v_insert}) ORDER BY ALL").fetchall()
        con.close()
    finally:
        server.stop()
    assert before == [(1, "z"), (2, "y")]
    assert old == [(1, "x"), (2, "y")]
    server = Server("--store", store)
    try:
        con = attach_moraine(server, tmp_path / "data")
        after = con.execute("SELECT * FROM lake.t ORDER BY ALL").fetchall()
        old_after = con.execute(
            f"SELECT * FROM lake.t AT (VERSION => {v_insert}) ORDER BY ALL").fetchall()
        con.close()
    finally:
        server.stop()
    assert after == before
    assert old_after == old


def test_clean_stop_after_bulk_commits_is_prompt_and_keeps_them(tmp_path, store):
    # Each 1000-row inlined commit makes the store flush its memtable to L0
    # SSTs; closing the store flushes once more, and a flush waits while L0
    # is full. With SlateDB's default compaction polling (5 s, 5 s) and L0
    # budget (8 SSTs, filled in two flushes across segments), SIGTERM after
    # such a burst took 9-12 s; the server must stop promptly and keep all.
    server = Server("--store", store)
    try:
        con = connect()
        con.execute(f"ATTACH 'ducklake:postgres:{server.dsn()}' AS lake "
                    f"(DATA_PATH '{tmp_path / 'data'}', DATA_INLINING_ROW_LIMIT 1000)")
        con.execute("CREATE TABLE lake.t(i INTEGER, s VARCHAR)")
        for k in range(12):
            con.execute(f"INSERT INTO lake.t SELECT i, 'row ' || i "
                        f"FROM range({k * 1000}, {(k + 1) * 1000}) r(i)")
        con.close()
    finally:
        t0 = time.monotonic()
        rc = server.stop()
        stop_s = time.monotonic() - t0
    assert rc == 0, server.log()
    assert stop_s < 5, f"SIGTERM took {stop_s:.1f} s to stop the server"
    server = Server("--store", store)
    try:
        con = attach_moraine(server, tmp_path / "data")
        got = con.execute("SELECT count(*), count(DISTINCT i), min(i), max(i) FROM lake.t").fetchone()
        con.close()
    finally:
        server.stop()
    assert got == (12000, 12000, 0, 11999)


def test_sigkill_keeps_every_acknowledged_commit(tmp_path, store):
    server = Server("--store", store)
    con = attach_moraine(server, tmp_path / "data")
    con.execute("CREATE TABLE lake.k(i INTEGER)")
    acked, attempted = [], []
    stop = threading.Event()

    def writer():
        i = 0
        while not stop.is_set():
            attempted.append(i)
            try:
                con.execute(f"INSERT INTO lake.k VALUES ({i})")
            except Exception:
                return
            acked.append(i)
            i += 1

    th = threading.Thread(target=writer)
    th.start()
    deadline = time.time() + 20
    while len(acked) < 20 and time.time() < deadline:
        time.sleep(0.05)
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait(timeout=30)
    stop.set()
    th.join(timeout=60)
    try:
        con.close()
    except Exception:
        pass
    assert len(acked) >= 1

    server = Server("--store", store)
    try:
        con = attach_moraine(server, tmp_path / "data")
        rows = [r[0] for r in con.execute("SELECT i FROM lake.k ORDER BY i").fetchall()]
        con.close()
    finally:
        assert server.stop() == 0
    assert set(acked) <= set(rows), "an acknowledged commit was lost"
    assert set(rows) <= set(attempted), "a row nobody wrote appeared"
    assert rows == sorted(set(rows)), "a commit landed twice"


def test_store_refused_exits_with_one_line():
    import subprocess
    from test_pg_front import MORAINE
    r = subprocess.run([MORAINE, "serve", "--listen", "127.0.0.1:0", "--store", "bogus://x"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("moraine: "), r.stderr


def test_fenced_server_stops_acknowledging_writes(tmp_path, store):
    a = Server("--store", store)
    try:
        con = attach_moraine(a, tmp_path / "data")
        con.execute("CREATE TABLE lake.f(i INTEGER)")
        b = Server("--store", store)  # fences a
        try:
            with pytest.raises(Exception):
                for i in range(3):
                    con.execute(f"INSERT INTO lake.f VALUES ({i})")
            with pytest.raises(Exception):
                con.execute("INSERT INTO lake.f VALUES (100)")
        finally:
            b.stop()
        try:
            con.close()
        except Exception:
            pass
    finally:
        a.stop()


def test_rows_of_one_commit_apply_in_dependency_order(tmp_path, store):
    # DuckLake sends the tag of a column added in the same transaction before
    # the column itself; both land, and stay after a restart. Dropping the
    # table then ends the columns and their tags together.
    def comments(con):
        return con.execute(
            "SELECT table_name, column_name, comment FROM duckdb_columns() "
            "WHERE database_name = 'lake' ORDER BY ALL").fetchall()

    steps = ["BEGIN", "COMMENT ON TABLE lake.t IS 'a table'", "ALTER TABLE lake.t ADD COLUMN c BIGINT",
             "COMMENT ON COLUMN lake.t.c IS 'new column'", "COMMIT"]
    ref = attach_file(tmp_path / "ref.ducklake", tmp_path / "ref-data")
    ref.execute("CREATE TABLE lake.t(a INTEGER)")
    for q in steps:
        ref.execute(q)
    expected = comments(ref)
    ref.close()
    assert ("t", "c", "new column") in expected

    server = Server("--store", store)
    try:
        con = attach_moraine(server, tmp_path / "data")
        con.execute("CREATE TABLE lake.t(a INTEGER)")
        for q in steps:
            con.execute(q)
        assert comments(con) == expected
        con.close()
    finally:
        assert server.stop() == 0
    server = Server("--store", store)
    try:
        con = attach_moraine(server, tmp_path / "data")
        assert comments(con) == expected
        con.execute("DROP TABLE lake.t")
        con.close()
    finally:
        assert server.stop() == 0
    server = Server("--store", store)
    try:
        con = attach_moraine(server, tmp_path / "data")
        assert comments(con) == []
        con.close()
    finally:
        assert server.stop() == 0


def test_child_row_without_parent_is_refused(tmp_path, store):
    import psycopg
    server = Server("--store", store)
    try:
        con = attach_moraine(server, tmp_path / "data")
        con.execute("CREATE TABLE lake.t(a INTEGER)")
        con.close()
        with psycopg.connect(server.dsn(), autocommit=True) as pg:
            with pytest.raises(psycopg.errors.ForeignKeyViolation) as e:
                pg.execute("INSERT INTO ducklake_column_tag VALUES (1, 99, 2, NULL, 'pii', 'true')")
            assert "ducklake_column_tag row refers to ducklake_column (table_id 1, column_id 99)" \
                in str(e.value)
            assert pg.execute("SELECT count(*) FROM ducklake_column_tag").fetchone() == (0,)
    finally:
        assert server.stop() == 0


def test_quoted_identifiers_everywhere(tmp_path, store):
    # DuckLake's catalog/quoted_identifiers with a valid connection string
    # (the suite's own appends quotes to it, which libpq cannot parse)
    server = Server("--store", store)
    try:
        con = connect()
        con.execute(f"""ATTACH 'ducklake:postgres:{server.dsn()}' AS lake (DATA_PATH
            '{tmp_path}/data ''quoted'' "path"', METADATA_SCHEMA '''quoted'' catalog "schema"')""")
        con.execute('''CREATE TABLE lake."quoted 'table' ""name"""("quoted 'column' ""name""" INTEGER)''')
        con.execute('''INSERT INTO lake."quoted 'table' ""name""" VALUES (42)''')
        assert con.execute('''SELECT "quoted 'column' ""name""" FROM lake."quoted 'table' ""name"""'''
                           ).fetchall() == [(42,)]
        con.execute('''DROP TABLE lake."quoted 'table' ""name"""''')
        con.close()
    finally:
        assert server.stop() == 0
