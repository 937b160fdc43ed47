"""History stays in the store until a statement reads it (issue 13, part 1).

A server started over a catalog with history keeps old snapshots and ended
data / delete file versions out of its engine; reads of a table, time
travel, change feeds and DuckLake's snapshot list load just what they name, and every answer equals
what the server gave before the restart. The server's log line for each load
names the tables it read and counts the store keys it read: a time travel on
one table must not read the other table's history.
"""
import re

import psycopg

from conftest import connect
from test_pg_front import Server

LOADED = re.compile(r"moraine: loaded catalog history:(.*) \((\d+) records, (\d+) rows, "
                    r"(\d+) keys read")


def attach(server, data, inlining=0):
    con = connect()
    con.execute(f"ATTACH 'ducklake:postgres:{server.dsn()}' AS lake "
                f"(DATA_PATH '{data}/', DATA_INLINING_ROW_LIMIT {inlining})")
    return con


def answers(con, versions):
    """Every answer the test compares: counts and sums of both tables at
    each snapshot, the change feed of a, and DuckLake's snapshot list."""
    out = {}
    for v in versions:
        for t in ("a", "b"):
            try:
                out[(t, v)] = con.execute(
                    f"SELECT count(*), sum(x) FROM lake.{t} AT (VERSION => {v})").fetchall()
            except Exception as e:  # the table did not exist yet
                out[(t, v)] = type(e).__name__
    out["changes"] = con.execute(
        "SELECT snapshot_id, change_type, x FROM ducklake_table_changes('lake', 'main', 'a', 1, "
        f"{versions[-1]}) ORDER BY ALL").fetchall()
    out["snapshots"] = con.execute(
        "SELECT snapshot_id, changes FROM ducklake_snapshots('lake') ORDER BY snapshot_id").fetchall()
    return out


def table_ids(server):
    with psycopg.connect(server.dsn(), autocommit=True) as pg:
        return dict(pg.execute("SELECT table_name, table_id FROM ducklake_table "
                               "WHERE end_snapshot IS NULL").fetchall())


def file_stats(server, table_id=None):
    where = f"WHERE table_id = {table_id}" if table_id else ""
    with psycopg.connect(server.dsn(), autocommit=True) as pg:
        return pg.execute("SELECT table_id, data_file_id, column_id, value_count, min_value, "
                          f"max_value FROM ducklake_file_column_stats {where} "
                          "ORDER BY 1, 2, 3").fetchall()


def loads(server):
    return [(m.group(1), int(m.group(2)), int(m.group(4)))
            for m in LOADED.finditer(server.log())]


def test_history_loads_on_demand_and_answers_as_before(tmp_path):
    store = "file://" + str(tmp_path / "store")
    data = tmp_path / "data"
    server = Server("--store", store)
    try:
        con = attach(server, data)
        con.execute("CREATE TABLE lake.a(x INTEGER)")
        con.execute("CREATE TABLE lake.b(x INTEGER)")
        # a: 3 generations of files ended by full deletes; b: 12
        for t, rounds in (("a", 3), ("b", 12)):
            for i in range(rounds):
                con.execute(f"INSERT INTO lake.{t} SELECT range FROM range({i}, {i + 5})")
                con.execute(f"INSERT INTO lake.{t} VALUES ({100 + i})")
                con.execute(f"DELETE FROM lake.{t}")
            con.execute(f"INSERT INTO lake.{t} VALUES (7), (8)")
            con.execute(f"DELETE FROM lake.{t} WHERE x = 7")  # a delete file, current
        head = con.execute("SELECT max(snapshot_id) FROM ducklake_snapshots('lake')").fetchone()[0]
        versions = list(range(1, head + 1))
        before = answers(con, versions)
        con.close()
        ids = table_ids(server)
        with psycopg.connect(server.dsn(), autocommit=True) as pg:
            ended = dict(pg.execute(
                "SELECT table_id, count(*) FROM ducklake_data_file WHERE end_snapshot IS NOT NULL "
                "GROUP BY table_id").fetchall())
        assert ended[ids["a"]] == 6 and ended[ids["b"]] == 24, ended
        stats = file_stats(server)
        assert len(stats) > 30, stats  # one per file, the ended ones' included
    finally:
        assert server.stop() == 0

    server = Server("--store", store, "--resident-snapshots", "2")
    try:
        assert loads(server) == []  # nothing but the load itself yet
        con = attach(server, data)
        # the postgres extension scans a table's files by table and begin
        # snapshot only (DuckDB filters end_snapshot itself), so the first
        # read of a loads a's ended files; b's stay in the store
        assert con.execute("SELECT x FROM lake.a").fetchall() == [(8,)]
        assert (con.execute("SELECT count(*), sum(x) FROM lake.a AT (VERSION => 5)").fetchall()
                == before[("a", 5)])
        got = loads(server)
        assert got, "time travel loaded no history"
        named = " ".join(w for w, _, _ in got)
        assert f"data_file of table {ids['a']}" in named, got
        assert f"table {ids['b']}" not in named and "every table" not in named, got
        assert sum(n for _, n, _ in got) < ended[ids["b"]], got
        assert sum(k for _, _, k in got) < ended[ids["b"]], got  # b's history was not read
        # and every answer, at every snapshot, is what it was
        after = answers(con, versions)
        for key in before:
            assert after[key] == before[key], key
        con.close()
        # the ended files' column stats load apart from the files, once:
        # a's first, then everyone's, each row exactly once
        assert file_stats(server, ids["a"]) == [r for r in stats if r[0] == ids["a"]]
        assert file_stats(server) == stats
        named = " ".join(w for w, _, _ in loads(server))
        assert f"file_stats of table {ids['a']}" in named, named
        assert "file_stats of every table" in named, named
    finally:
        assert server.stop() == 0


def test_a_transaction_sees_history_loaded_after_it_began(tmp_path):
    """A DuckLake transaction that has read the catalog, then travels in
    time: the history loaded meanwhile is visible to it."""
    store = "file://" + str(tmp_path / "store")
    data = tmp_path / "data"
    server = Server("--store", store)
    try:
        con = attach(server, data)
        con.execute("CREATE TABLE lake.a(x INTEGER)")
        con.execute("INSERT INTO lake.a VALUES (1), (2)")
        con.execute("DELETE FROM lake.a")
        con.execute("INSERT INTO lake.a VALUES (3)")
        con.close()
    finally:
        assert server.stop() == 0
    server = Server("--store", store, "--resident-snapshots", "0")
    try:
        con = attach(server, data)
        con.execute("BEGIN")
        assert con.execute("SELECT x FROM lake.a").fetchall() == [(3,)]
        assert con.execute("SELECT x FROM lake.a AT (VERSION => 2) ORDER BY x").fetchall() == \
            [(1,), (2,)]
        con.execute("COMMIT")
        # a write after a history load in the same transaction still commits
        con.execute("BEGIN")
        assert con.execute("SELECT count(*) FROM lake.a AT (VERSION => 1)").fetchall() == [(0,)]
        con.execute("INSERT INTO lake.a VALUES (4)")
        con.execute("COMMIT")
        assert con.execute("SELECT x FROM lake.a ORDER BY x").fetchall() == [(3,), (4,)]
        con.close()
    finally:
        assert server.stop() == 0


OPENED = re.compile(r"moraine: opened catalog \"lake\": (\d+) rows.* (\d+) store keys read")


def test_start_after_a_thousand_commits_reads_no_history(tmp_path):
    """1,000 commits later (b: a file written and ended 500 times), the
    start reads neither the old snapshots nor the ended files nor their
    column stats (the store's own read counter, in the opened line), and a
    time travel on a reads a's history: not b's ended files, not the
    snapshots it does not name."""
    store = "file://" + str(tmp_path / "store")
    data = tmp_path / "data"
    server = Server("--store", store)
    try:
        con = attach(server, data)
        con.execute("CREATE TABLE lake.a(x INTEGER)")
        # b's files carry 8 column stats each: 4,000 stats keys end with them
        con.execute("CREATE TABLE lake.b(x INTEGER, " + ", ".join(f"c{j} INTEGER" for j in range(7)) + ")")
        for i in range(4):
            con.execute(f"INSERT INTO lake.a VALUES ({i})")
            con.execute("DELETE FROM lake.a")
        before = con.execute("SELECT count(*) FROM lake.a AT (VERSION => 5)").fetchall()
        assert before == [(1,)]
        for i in range(500):
            con.execute(f"INSERT INTO lake.b (x) VALUES ({i})")
            con.execute("DELETE FROM lake.b")
        (head,) = con.execute("SELECT max(snapshot_id) FROM ducklake_snapshots('lake')").fetchone()
        con.close()
    finally:
        assert server.stop() == 0
    assert head > 1000

    server = Server("--store", store, "--resident-snapshots", "10")
    try:
        m = OPENED.search(server.log())
        assert m, server.log()
        # materialized: the current catalog and 10 snapshots, not the 1,000
        # others nor 504 ended files and their 4,000 stats; read: only those
        # (the stats scan seeks past the stats of files that are not current)
        assert int(m.group(1)) < 100, m.group(0)
        assert int(m.group(2)) < 100, m.group(0)
        con = attach(server, data)
        assert con.execute("SELECT count(*) FROM lake.a AT (VERSION => 5)").fetchall() == before
        got = loads(server)
        named = " ".join(w for w, _, _ in got)
        assert "every table" not in named and "snapshots below" not in named, got
        ids = table_ids(server)
        assert f"table {ids['b']}" not in named, got
        assert sum(k for _, _, k in got) <= 4 + 4 + 1, got  # a's ended files, their stats, snapshot 5
        assert con.execute("SELECT count(*) FROM lake.b").fetchall() == [(0,)]
        con.close()
    finally:
        assert server.stop() == 0


def inlined_rows(server):
    """Every row of every inlined data table, as the server holds it."""
    with psycopg.connect(server.dsn(), autocommit=True) as pg:
        names = [n for (n,) in pg.execute(
            "SELECT table_name FROM ducklake_inlined_data_tables ORDER BY 1").fetchall()]
        return {n: pg.execute(f"SELECT row_id, begin_snapshot, end_snapshot FROM {n} "
                              "ORDER BY 1, 2").fetchall() for n in names}


def test_current_inlined_rows_load_with_their_tables_first_statement(tmp_path):
    """On a writer even a table's current inlined rows stay in the store
    until a statement names its inlined-data table; a blind INSERT loads
    them first (so no row is ever loaded twice), the tables nobody named
    keep theirs in the store, and another restart reads every row back."""
    store = "file://" + str(tmp_path / "store")
    data = tmp_path / "data"
    server = Server("--store", store)
    try:
        con = attach(server, data, inlining=100)
        for t in ("e", "f", "g"):
            con.execute(f"CREATE TABLE lake.{t}(x INTEGER, y VARCHAR)")
            con.execute(f"INSERT INTO lake.{t} SELECT i, '{t}' || i FROM range(20) r(i)")
        con.execute("DELETE FROM lake.g WHERE x < 5")
        con.close()
    finally:
        assert server.stop() == 0

    server = Server("--store", store)
    try:
        m = OPENED.search(server.log())
        assert m and loads(server) == [], server.log()
        opened_rows = int(m.group(1))
        con = attach(server, data, inlining=100)
        con.execute("INSERT INTO lake.e VALUES (100, 'e100')")  # a blind insert first
        ids = table_ids(server)
        got = [(w.strip(), n) for w, n, _ in loads(server)]
        assert (f"current inlined rows of table {ids['e']}", 20) in got, got
        assert all(f"table {ids[t]}" not in w for w, _ in got for t in "fg"), got
        assert con.execute("SELECT count(*), sum(x) FROM lake.e").fetchall() == [(21, 290)]
        assert con.execute("SELECT count(*), sum(x) FROM lake.g").fetchall() == [(15, 180)]
        con.close()
    finally:
        assert server.stop() == 0

    server = Server("--store", store)
    try:
        m = OPENED.search(server.log())
        # one more snapshot's rows, none of the 56 current inlined rows
        assert m and int(m.group(1)) <= opened_rows + 3, (opened_rows, server.log())
        # a read whose predicate sees no history still loads the current rows
        ids = table_ids(server)
        with psycopg.connect(server.dsn(), autocommit=True) as pg:
            (name,) = pg.execute("SELECT table_name FROM ducklake_inlined_data_tables "
                                 f"WHERE table_id = {ids['g']}").fetchone()
            assert pg.execute(f"SELECT count(*) FROM {name} "
                              "WHERE end_snapshot IS NULL").fetchone() == (15,)
        con = attach(server, data)
        for t, want in (("e", [(21, 290)]), ("f", [(20, 190)]), ("g", [(15, 180)])):
            assert con.execute(f"SELECT count(*), sum(x) FROM lake.{t}").fetchall() == want, t
        con.close()
        live = {n: [r for r in rows if r[2] is None] for n, rows in inlined_rows(server).items()}
        assert sorted(len(r) for r in live.values()) == [15, 20, 21], live
    finally:
        assert server.stop() == 0


def test_ended_inlined_rows_stay_in_the_store_until_read(tmp_path):
    """A table's inlined rows that have ended (updated or deleted) are not
    loaded at start; the first read of that table loads them, only them,
    and every answer and every row is what it was. DuckLake's flush of
    inlined data after a restart deletes them from the store too."""
    store = "file://" + str(tmp_path / "store")
    data = tmp_path / "data"
    server = Server("--store", store)
    try:
        con = attach(server, data, inlining=100)
        con.execute("CREATE TABLE lake.c(x INTEGER, y VARCHAR)")
        con.execute("CREATE TABLE lake.d(x INTEGER)")
        con.execute("INSERT INTO lake.c VALUES (0, 'a'), (100, 'b')")
        con.execute("INSERT INTO lake.d VALUES (1)")
        for i in range(1, 31):
            con.execute(f"UPDATE lake.c SET x = {i} WHERE y = 'a'")  # ends a row, adds one
        con.execute("DELETE FROM lake.c WHERE y = 'b'")
        head = con.execute("SELECT max(snapshot_id) FROM ducklake_snapshots('lake')").fetchone()[0]
        before = {v: con.execute(f"SELECT * FROM lake.c AT (VERSION => {v}) ORDER BY ALL").fetchall()
                  for v in range(3, head + 1)}
        con.close()
        rows = inlined_rows(server)
        assert sum(len(r) for r in rows.values()) >= 33, rows
    finally:
        assert server.stop() == 0

    server = Server("--store", store)
    try:
        m = OPENED.search(server.log())
        assert m and int(m.group(1)) < 100, server.log()  # not the 31 ended rows
        assert loads(server) == []
        con = attach(server, data)
        assert con.execute("SELECT * FROM lake.d").fetchall() == [(1,)]
        named = " ".join(w for w, _, _ in loads(server))
        ids = table_ids(server)
        assert f"inlined rows of table {ids['c']}" not in named, named  # d's read is not c's
        for v, want in before.items():
            assert con.execute(f"SELECT * FROM lake.c AT (VERSION => {v}) ORDER BY ALL").fetchall() == want, v
        got = {w.strip(): n for w, n, _ in loads(server) if "inlined rows" in w}
        # each table's current rows and its ended ones, once: d's 1 + 0, c's 1 + 31
        assert got == {f"current inlined rows of table {ids['d']}, inlined rows of table {ids['d']}": 1,
                       f"current inlined rows of table {ids['c']}, inlined rows of table {ids['c']}": 32}, got
        con.close()
        assert inlined_rows(server) == rows
        # flush the inlined rows to Parquet on a fresh start: DuckLake deletes
        # every inlined row, the ended ones too, which are not loaded yet
    finally:
        assert server.stop() == 0
    server = Server("--store", store)
    try:
        con = attach(server, data)
        con.execute("CALL ducklake_flush_inlined_data('lake')")
        after_flush = inlined_rows(server)
        assert after_flush and all(r == [] for r in after_flush.values()), after_flush
        con.close()
    finally:
        assert server.stop() == 0
    server = Server("--store", store, "--load-history", "all")
    try:
        assert inlined_rows(server) == after_flush
        con = attach(server, data)
        assert con.execute("SELECT * FROM lake.c ORDER BY ALL").fetchall() == before[head]
        con.close()
    finally:
        assert server.stop() == 0


def test_a_client_naming_endless_tables_keeps_the_marks_bounded(tmp_path):
    """History marks come from what statements name. A client naming table
    ids (or inlined tables) that exist nowhere, one after another, gets one
    load of the whole class after 1,024 of them, not a mark per id forever;
    the server answers on, and starts again on its store."""
    store = "file://" + str(tmp_path / "store")
    data = tmp_path / "data"
    server = Server("--store", store)
    try:
        con = attach(server, data)
        con.execute("CREATE TABLE lake.a(x INTEGER)")
        con.execute("INSERT INTO lake.a VALUES (1)")
        con.execute("DELETE FROM lake.a")
        con.close()
    finally:
        assert server.stop() == 0
    server = Server("--store", store)
    try:
        with psycopg.connect(server.dsn(), autocommit=True) as pg:
            for t in range(1000, 1000 + 1030):
                assert pg.execute("SELECT count(*) FROM ducklake_data_file "
                                  f"WHERE table_id = {t}").fetchone() == (0,)
            assert pg.execute("SELECT count(*) FROM ducklake_data_file "
                              "WHERE end_snapshot IS NOT NULL").fetchone() == (1,)
        named = [w.strip() for w, _, _ in loads(server)]
        per_table = [w for w in named if w.startswith("data_file of table")]
        assert len(per_table) == 1024, len(per_table)
        assert named[1024:] == ["data_file of every table"], named[1024:]
        con = attach(server, data)
        assert con.execute("SELECT count(*) FROM lake.a").fetchall() == [(0,)]
        con.close()
    finally:
        assert server.stop() == 0
    server = Server("--store", store)  # and the store still starts
    try:
        con = attach(server, data)
        assert con.execute("SELECT count(*) FROM lake.a AT (VERSION => 2)").fetchall() == [(1,)]
        con.close()
    finally:
        assert server.stop() == 0
