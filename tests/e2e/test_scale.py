"""A catalog of many tables loads back exactly (issue 15).

The start-up load fills the engine in bulk: inlined-data tables are created
in batches, integer / VARCHAR / BOOLEAN / BLOB columns are appended typed,
every other type goes through DuckDB's VARCHAR cast in one query per table.
This test writes every type family of test_types into many tables spread
over several schemas (each table with inlined rows, so each has its own
inlined-data table in the catalog), through a real DuckDB + DuckLake client,
on moraine and on a DuckDB-file catalog (the reference); then restarts
moraine on the same store and checks that every table reads back the same,
now and at an earlier snapshot, and that the loaded catalog still takes
writes.

The binary is MORAINE_BIN (default build/src/cli/moraine).
"""
from conftest import connect
from test_pg_front import Server
from test_types import FAMILIES, values

SCHEMAS = 3
COPIES = 5  # tables per type family


def tables():
    """(qualified name, family) of every table, spread over the schemas."""
    out = []
    for f in FAMILIES:
        for k in range(COPIES):
            out.append((f"lake.s{k % SCHEMAS}.t_{f}_{k}", f))
    return out


def workload():
    """Statements, each a transaction: schemas, all tables, all rows, then a
    few single-table changes."""
    txns = [[f"CREATE SCHEMA lake.s{s}" for s in range(SCHEMAS)]]
    creates, inserts = [], []
    for name, f in tables():
        cols, rows = FAMILIES[f]
        defs = ", ".join(f'"{c}" {typ}' for c, typ in cols)
        creates.append(f"CREATE TABLE {name}(id INTEGER, {defs})")
        inserts.append(f"INSERT INTO {name} VALUES " +
                       ", ".join(values(cols, r, i) for i, r in enumerate(rows)))
    txns += [creates, inserts]
    for name, _ in tables()[::7]:
        txns.append([f"DELETE FROM {name} WHERE id = 1"])
    return txns


def run(con, txns):
    for txn in txns:
        con.execute("BEGIN")
        for sql in txn:
            con.execute(sql)
        con.execute("COMMIT")


def state(con, version):
    """(typeof, text) of every value of every table, now and at version."""
    out = {}
    for name, f in tables():
        cols, _ = FAMILIES[f]
        sel = ", ".join(f'typeof("{c}"), CAST("{c}" AS VARCHAR)' for c, _ in cols)
        out[name] = con.execute(f"SELECT id, {sel} FROM {name} ORDER BY ALL").fetchall()
        out[name, version] = con.execute(
            f"SELECT id, {sel} FROM {name} AT (VERSION => {version}) ORDER BY ALL").fetchall()
    return out


def inserted_version(con):
    """The snapshot of the bulk insert (before the single-table deletes)."""
    snaps = [r[0] for r in con.execute("SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall()]
    return snaps[-1 - len(tables()[::7])]


def test_many_tables_of_every_type_load_back_exactly(tmp_path):
    txns = workload()
    ref = connect()
    ref.execute(f"ATTACH 'ducklake:{tmp_path / 'ref.ducklake'}' AS lake (DATA_PATH '{tmp_path / 'ref-data'}')")
    run(ref, txns)
    expected = state(ref, inserted_version(ref))
    # not vacuous: every table has rows, and the earlier snapshot differs
    assert all(expected[name] for name, _ in tables())
    assert any(expected[k] != expected[k[0]] for k in expected if isinstance(k, tuple))

    store = "file://" + str(tmp_path / "store")
    data = tmp_path / "data"
    attach = f"ATTACH 'ducklake:postgres:{{}}' AS lake (DATA_PATH '{data}')"
    server = Server("--store", store)
    try:
        con = connect()
        con.execute(attach.format(server.dsn()))
        run(con, txns)
        version = inserted_version(con)
        assert state(con, version) == expected
        con.close()
    finally:
        assert server.stop() == 0

    server = Server("--store", store)
    try:
        log = server.log()
        assert "opened catalog" in log, log
        con = connect()
        # the rows are inlined: every table has its inlined-data table in
        # the catalog, which the load created and filled
        con.execute(f"ATTACH '{server.dsn()}' AS pg (TYPE postgres, READ_ONLY)")
        inlined = con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = 'pg' "
                              "AND table_name LIKE 'ducklake_inlined_data_%'").fetchone()[0]
        assert inlined >= len(tables()), inlined
        con.execute("DETACH pg")
        con.execute(attach.format(server.dsn()))
        assert state(con, version) == expected, "after restart"
        # the loaded catalog takes writes, and they survive the next restart
        name, f = tables()[0]
        cols, rows = FAMILIES[f]
        con.execute(f"INSERT INTO {name} VALUES {values(cols, rows[0], 99)}")
        after = con.execute(f"SELECT count(*) FROM {name}").fetchone()[0]
        con.close()
    finally:
        assert server.stop() == 0
    assert after == len(expected[name]) + 1

    server = Server("--store", store)
    try:
        con = connect()
        con.execute(attach.format(server.dsn()))
        assert con.execute(f"SELECT count(*) FROM {name}").fetchone()[0] == after
        con.close()
    finally:
        assert server.stop() == 0
