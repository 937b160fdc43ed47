"""Read replicas: `moraine serve --replica` on the store a writer serves.

Covered: a replica applies commits one by one (no reload); a replica
behind the writer's changelog window, or after an expiry, reloads and is
still equal; a replica follows the writer through every differential feature
group (test_differential.py runs one beside each writer: after each step,
once caught up, its answers at every snapshot and its metadata rows equal
the DuckDB-file reference's), here also for a second database's catalog,
and on an s3:// store (test_object_storage.py); every
kind of write is refused with 25006 and changes nothing; two replicas on
one store; a replica keeps answering while the writer is killed and
restarted, and follows the new writer; a replica of a store that does not
exist fails its start with one line.

Time bounds here only stop a hang from hanging the suite; no assertion is
about speed. The binary is MORAINE_BIN.
"""
import signal
import subprocess
import threading
import time

import psycopg
import pytest

import test_differential
from test_differential import caught_up, wait_for_catalog
from test_pg_front import MORAINE, Server
from conftest import connect


def attach(server, data, **kw):
    duck = connect()
    duck.execute(f"ATTACH 'ducklake:postgres:{server.dsn(**kw)}' AS lake (DATA_PATH '{data}/')")
    return duck


def rows(duck, sql):
    return duck.execute(sql).fetchall()


def test_replica_follows_a_second_database(tmp_path):
    test_differential.differential(tmp_path, "update", dbname="lake2", replica=True)


@pytest.fixture
def pair(tmp_path):
    """A writer with a small catalog, and a replica of its store."""
    store = "file://" + str(tmp_path / "store")
    writer = Server("--store", store)
    duck = attach(writer, tmp_path / "data")
    duck.execute("CREATE TABLE lake.t (id BIGINT, name VARCHAR)")
    duck.execute("INSERT INTO lake.t VALUES (1, 'one'), (2, 'two')")
    replica = Server("--store", store, "--replica")
    wait_for_catalog(replica)
    yield store, writer, duck, replica
    duck.close()
    for s in (replica, writer):
        if s.proc.poll() is None:
            assert s.stop() == 0


WRITES = [
    "INSERT INTO ducklake_snapshot VALUES (99, now(), 0, 99, 99)",
    "UPDATE ducklake_table SET table_name = 'x'",
    "DELETE FROM ducklake_data_file",
    "CREATE TABLE ducklake_inlined_data_1_1 (row_id BIGINT, begin_snapshot BIGINT, "
    "end_snapshot BIGINT, id BIGINT)",
    "DROP TABLE ducklake_inlined_data_1_1",
]


def test_writes_on_a_replica_are_refused_and_change_nothing(pair, tmp_path):
    store, writer, duck, replica = pair
    rep = attach(replica, tmp_path / "data")
    caught_up(rep, duck)
    before = rows(rep, "SELECT * FROM lake.t ORDER BY id")
    snaps = rows(rep, "SELECT snapshot_id FROM lake.snapshots() ORDER BY 1")
    # through DuckLake: its commit's first write is refused, nothing lands
    with pytest.raises(Exception, match="read replica"):
        rep.execute("INSERT INTO lake.t VALUES (3, 'three')")
    with pytest.raises(Exception, match="read replica"):
        rep.execute("CREATE TABLE lake.u (i INTEGER)")
    rep.close()
    # straight over the wire: every kind of write, and COPY FROM
    with psycopg.connect(replica.dsn(), autocommit=True) as pg:
        for sql in WRITES:
            with pytest.raises(psycopg.errors.ReadOnlySqlTransaction, match="read replica"):
                pg.execute(sql)
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            with pg.cursor().copy("COPY ducklake_snapshot FROM STDIN") as cp:
                cp.write("100\t2026-01-01 00:00:00+00\t0\t1\t1\n")
    assert "refused (25006)" in replica.log()
    # nothing changed, on the writer or the replica
    assert rows(duck, "SELECT * FROM lake.t ORDER BY id") == before
    assert rows(duck, "SELECT snapshot_id FROM lake.snapshots() ORDER BY 1") == snaps
    rep = attach(replica, tmp_path / "data")
    assert rows(rep, "SELECT * FROM lake.t ORDER BY id") == before
    rep.close()


def test_two_replicas_follow_one_writer(pair, tmp_path):
    store, writer, duck, replica = pair
    second = Server("--store", store, "--replica", "--follow-interval", "20")
    try:
        reps = [attach(r, tmp_path / "data") for r in (replica, second)]
        for i in range(3, 8):
            duck.execute(f"INSERT INTO lake.t VALUES ({i}, 'r{i}')")
        duck.execute("INSERT INTO lake.t SELECT i, 'bulk' FROM range(100, 2100) r(i)")  # Parquet
        duck.execute("DELETE FROM lake.t WHERE id = 4")
        want = rows(duck, "SELECT * FROM lake.t ORDER BY id")
        old = rows(duck, "SELECT * FROM lake.t AT (VERSION => 3) ORDER BY id")
        for rep in reps:
            caught_up(rep, duck)
            assert rows(rep, "SELECT * FROM lake.t ORDER BY id") == want
            assert rows(rep, "SELECT * FROM lake.t AT (VERSION => 3) ORDER BY id") == old
            rep.close()
    finally:
        assert second.stop() == 0


def test_replica_applies_commits_one_by_one(pair, tmp_path):
    store, writer, duck, replica = pair
    rep = attach(replica, tmp_path / "data")
    duck.execute("CREATE TABLE lake.u (k INTEGER, v VARCHAR)")
    for i in range(5):
        duck.execute(f"INSERT INTO lake.u VALUES ({i}, 'v{i}')")
    duck.execute("UPDATE lake.t SET name = 'uno' WHERE id = 1")
    duck.execute("ALTER TABLE lake.u ADD COLUMN w DOUBLE")
    duck.execute("DROP TABLE lake.t")
    caught_up(rep, duck)
    assert rows(rep, "SELECT * FROM lake.u ORDER BY k") == rows(duck, "SELECT * FROM lake.u ORDER BY k")
    for v in range(1, 9):
        q = f"SELECT * FROM lake.u AT (VERSION => {v}) ORDER BY ALL"
        try:
            want = rows(duck, q)
        except Exception as e:  # u did not exist yet
            with pytest.raises(type(e)):
                rows(rep, q)
            continue
        assert rows(rep, q) == want, q
    rep.close()
    assert "reloading the catalog" not in replica.log(), replica.log()


def test_replica_reads_stay_consistent_while_the_writer_commits_fast(pair, tmp_path):
    """Commits land while the replica catches up (its reader moves on under
    the catch-up's reads): every answer must still be one snapshot's, never
    a mix. Each commit updates every row (new data files and inlined rows,
    old ones ended by delete files and inlined deletes), so a mix shows as
    rows missing or twice, or two values at once."""
    store, writer, duck, _ = pair
    # a reader catching up every 2 ms moves under the catch-up's reads often
    replica = Server("--store", store, "--replica", "--follow-interval", "2")
    duck.execute("CREATE TABLE lake.c (id BIGINT, v BIGINT)")
    duck.execute("INSERT INTO lake.c SELECT i, 0 FROM range(0, 3000) r(i)")  # a Parquet file
    duck.execute("INSERT INTO lake.c VALUES (3000, 0), (3001, 0)")  # inlined rows
    total = 3002
    stop = threading.Event()
    errors = []

    def write():
        try:
            w = attach(writer, tmp_path / "data")
            while not stop.is_set():
                w.execute("UPDATE lake.c SET v = v + 1")
            w.close()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=write)
    t.start()
    rep = attach(replica, tmp_path / "data")
    seen = set()
    try:
        deadline = time.time() + 8
        while time.time() < deadline:
            n, ids, vs, v = rows(rep, "SELECT count(*), count(DISTINCT id), count(DISTINCT v), "
                                      "max(v) FROM lake.c")[0]
            assert (n, ids, vs) == (total, total, 1), (n, ids, vs, v)
            seen.add(v)
    finally:
        stop.set()
        t.join()
    assert not errors, errors
    caught_up(rep, duck)
    assert rows(rep, "SELECT count(*), max(v) FROM lake.c") == rows(duck, "SELECT count(*), max(v) FROM lake.c")
    assert len(seen) > 3, seen  # it did follow while reading
    rep.close()
    assert replica.stop() == 0


def behind(replica, writer_con, commits):
    """Stops the replica's process while the writer commits, then lets it go on."""
    replica.proc.send_signal(signal.SIGSTOP)
    try:
        for i in range(commits):
            writer_con.execute(f"INSERT INTO lake.t VALUES ({100 + i}, 'late')")
    finally:
        replica.proc.send_signal(signal.SIGCONT)


def test_replica_behind_the_changelog_window_reloads_and_is_equal(tmp_path):
    store = "file://" + str(tmp_path / "store")
    writer = Server("--store", store, "--changelog-window", "4")
    replica = None
    try:
        duck = attach(writer, tmp_path / "data")
        duck.execute("CREATE TABLE lake.t (id BIGINT, name VARCHAR)")
        replica = Server("--store", store, "--replica")
        wait_for_catalog(replica)
        rep = attach(replica, tmp_path / "data")
        behind(replica, duck, 10)
        caught_up(rep, duck)
        assert rows(rep, "SELECT * FROM lake.t ORDER BY id") == rows(duck, "SELECT * FROM lake.t ORDER BY id")
        assert rows(rep, "SELECT * FROM lake.t AT (VERSION => 5) ORDER BY id") == \
            rows(duck, "SELECT * FROM lake.t AT (VERSION => 5) ORDER BY id")
        assert replica.wait_log("past the writer's changelog window"), replica.log()
        # and then commit by commit again
        duck.execute("INSERT INTO lake.t VALUES (1000, 'after')")
        caught_up(rep, duck)
        assert rows(rep, "SELECT count(*) FROM lake.t") == [(11,)]
        assert replica.log().count("reloading the catalog") == 1, replica.log()
        rep.close()
        duck.close()
    finally:
        for s in (replica, writer):
            if s is not None:
                assert s.stop() == 0


def test_replica_reloads_after_expiry_and_is_equal(pair, tmp_path):
    store, writer, duck, replica = pair
    rep = attach(replica, tmp_path / "data")
    for i in range(3, 6):
        duck.execute(f"INSERT INTO lake.t VALUES ({i}, 'r{i}')")
    duck.execute("CALL ducklake_expire_snapshots('lake', older_than => now())")
    duck.execute("INSERT INTO lake.t VALUES (6, 'r6')")  # expiry itself may make no snapshot
    caught_up(rep, duck)
    q = "SELECT snapshot_id, changes::VARCHAR FROM lake.snapshots() ORDER BY 1"
    assert rows(rep, q) == rows(duck, q)
    assert rows(rep, "SELECT * FROM lake.t ORDER BY id") == rows(duck, "SELECT * FROM lake.t ORDER BY id")
    # expiry removes records no changelog lists: the replica must have reloaded
    # (DuckLake's expiry is a batch of its own, without a snapshot)
    assert "reloading the catalog at snapshot" in replica.log(), replica.log()
    rep.close()


def test_replica_answers_while_the_writer_is_killed_and_follows_its_successor(pair, tmp_path):
    store, writer, duck, replica = pair
    rep = attach(replica, tmp_path / "data")
    caught_up(rep, duck)
    duck.close()
    writer.proc.send_signal(signal.SIGKILL)
    writer.proc.wait(timeout=30)
    # no writer: the replica still answers, from what was committed
    assert rows(rep, "SELECT * FROM lake.t ORDER BY id") == [(1, "one"), (2, "two")]
    successor = Server("--store", store)
    try:
        w = attach(successor, tmp_path / "data")
        w.execute("INSERT INTO lake.t VALUES (3, 'three')")
        caught_up(rep, w)
        assert rows(rep, "SELECT * FROM lake.t ORDER BY id") == [(1, "one"), (2, "two"), (3, "three")]
        w.close()
        rep.close()
    finally:
        assert successor.stop() == 0


def test_replica_of_a_missing_store_fails_with_one_line(tmp_path):
    proc = subprocess.run([MORAINE, "serve", "--replica", "--listen", "127.0.0.1:0",
                           "--store", "file://" + str(tmp_path / "nothing")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("moraine: ") and "store" in last, proc.stderr


def test_follow_interval_needs_replica():
    proc = subprocess.run([MORAINE, "serve", "--follow-interval", "50"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "--replica" in proc.stderr, proc.stderr
