"""The result cache (docs/pgwire.md "Result cache") through real DuckLake
clients: answers kept between commits are served (the server's count says
so), yet no reader ever misses a commit that was acknowledged before its
query, a transaction keeps its snapshot while others commit, and time
travel answers every version the same before and after a restart and with
the cache off. Refresh ahead (docs/pgwire.md): a writer's repeated reads are
kept again after each of its commits, and what readers see is the same with
it off.

The binary is MORAINE_BIN (default build/src/cli/moraine).
"""
import re
import subprocess
import threading

from conftest import connect
from test_pg_front import MORAINE, Server, psql

COUNTS = re.compile(r'closed catalog "lake" \(server stop\); result cache: (\d+) hits, (\d+) misses')
REFRESHED = re.compile(r'closed catalog "lake" \(server stop\); result cache: .*, (\d+) refreshed ahead')


def attach(server, data):
    con = connect()
    con.execute(f"ATTACH 'ducklake:postgres:{server.dsn()}' AS lake (DATA_PATH '{data}')")
    return con


def stop_counts(server):
    """Stops the server; returns the result cache's (hits, misses)."""
    assert server.stop() == 0
    m = COUNTS.search(server.log())
    assert m, server.log()
    return int(m.group(1)), int(m.group(2))


def history(con, versions):
    return {v: con.execute(f"SELECT count(*), sum(a) FROM lake.t AT (VERSION => {v})").fetchone()
            for v in versions}


def test_readers_see_every_acknowledged_commit(tmp_path):
    server = Server("--store", f"file://{tmp_path / 'store'}")
    try:
        writer = attach(server, tmp_path / "data")
        reader = attach(server, tmp_path / "data")
        writer.execute("CREATE TABLE lake.t(a INTEGER)")
        versions = []
        for i in range(1, 26):
            writer.execute(f"INSERT INTO lake.t VALUES ({i})")
            versions.append(writer.execute(
                "SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0])
            # a fresh query after the commit returned: never an older answer
            assert reader.execute("SELECT count(*), sum(a) FROM lake.t").fetchone() == (i, i * (i + 1) // 2)
            # and again, unchanged rows: the same answer (now kept)
            assert reader.execute("SELECT count(*), sum(a) FROM lake.t").fetchone() == (i, i * (i + 1) // 2)
        want = {v: (k + 1, (k + 1) * (k + 2) // 2) for k, v in enumerate(versions)}
        for _ in range(3):  # each version read three times over
            assert history(reader, versions) == want
        # a transaction keeps its snapshot while another connection commits
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM lake.t").fetchone() == (25,)
        writer.execute("INSERT INTO lake.t VALUES (100)")
        assert reader.execute("SELECT count(*) FROM lake.t").fetchone() == (25,)
        reader.execute("COMMIT")
        assert reader.execute("SELECT count(*) FROM lake.t").fetchone() == (26,)
        writer.close()
        reader.close()
    finally:
        hits, misses = stop_counts(server)
    assert hits > 100, (hits, misses)  # the cache did answer: the checks above were on it

    # the same answers after a restart, with the cache and without it
    for args in ((), ("--result-cache-mib", "0")):
        server = Server("--store", f"file://{tmp_path / 'store'}", *args)
        try:
            con = attach(server, tmp_path / "data")
            assert history(con, versions) == want
            assert history(con, versions) == want
            assert con.execute("SELECT count(*) FROM lake.t").fetchone() == (26,)
            con.close()
        finally:
            hits, _ = stop_counts(server)
        assert (hits > 0) == (args == ()), (args, hits)


def test_concurrent_readers_never_go_back(tmp_path):
    """Readers on their own connections race a writer: each read must count
    at least the commits acknowledged before it began, and never fewer than
    that reader saw before."""
    server = Server("--store", f"file://{tmp_path / 'store'}")
    acked = [0]
    done = threading.Event()
    failures = []

    def read_loop(con):
        last = 0
        try:
            while not done.is_set():
                floor = acked[0]
                n = con.execute("SELECT count(*) FROM lake.t").fetchone()[0]
                if n < floor or n < last:
                    failures.append((floor, last, n))
                last = n
        except Exception as e:  # noqa: BLE001 — reported below
            failures.append(repr(e))

    try:
        writer = attach(server, tmp_path / "data")
        writer.execute("CREATE TABLE lake.t(a INTEGER)")
        readers = [attach(server, tmp_path / "data") for _ in range(2)]
        threads = [threading.Thread(target=read_loop, args=(c,)) for c in readers]
        for t in threads:
            t.start()
        for i in range(1, 41):
            writer.execute(f"INSERT INTO lake.t VALUES ({i})")
            acked[0] = i
        done.set()
        for t in threads:
            t.join(60)
        assert not failures, failures[:5]
        for c in readers + [writer]:
            c.close()
    finally:
        done.set()
        stop_counts(server)


def test_a_writers_repeated_reads_are_refreshed_ahead(tmp_path):
    """A DuckLake writer reads the same catalog rows in every commit; with
    refresh ahead they are kept again after each commit. Readers and the
    writer see every commit the same with it on and off."""
    for mode in ("on", "off"):
        store = tmp_path / mode
        server = Server("--store", f"file://{store / 'store'}", "--refresh-ahead", mode)
        try:
            writer = attach(server, store / "data")
            reader = attach(server, store / "data")
            writer.execute("CREATE TABLE lake.t(a INTEGER, b VARCHAR)")
            for i in range(1, 31):
                writer.execute(f"INSERT INTO lake.t VALUES ({i}, 'row {i}')")
                assert writer.execute("SELECT count(*), sum(a) FROM lake.t").fetchone() == \
                    (i, i * (i + 1) // 2)
                assert reader.execute("SELECT count(*), max(b) FROM lake.t").fetchone() == \
                    (i, max(f"row {k}" for k in range(1, i + 1)))
            writer.execute("DELETE FROM lake.t WHERE a <= 10")
            assert reader.execute("SELECT count(*), min(a) FROM lake.t").fetchone() == (20, 11)
            writer.close()
            reader.close()
        finally:
            assert server.stop() == 0
        m = REFRESHED.search(server.log())
        assert m, server.log()
        refreshed = int(m.group(1))
        if mode == "on":
            assert refreshed >= 30, refreshed  # each commit refreshed its reads
        else:
            assert refreshed == 0


def test_refresh_ahead_wants_on_or_off(tmp_path):
    r = subprocess.run([MORAINE, "serve", "--store", f"file://{tmp_path}", "--listen", "127.0.0.1:0",
                        "--refresh-ahead", "sometimes"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    lines = [l for l in r.stderr.splitlines() if l]
    assert lines == ["moraine: serve: --refresh-ahead wants on or off, got 'sometimes'"]


def test_simple_query_selects_are_kept_and_move_on(tmp_path):
    """A pure SELECT sent as a simple query (psql) is answered from the cache
    between commits, and sees each commit DuckLake makes."""
    server = Server("--store", f"file://{tmp_path / 'store'}")
    try:
        lake = attach(server, tmp_path / "data")
        lake.execute("CREATE TABLE lake.t(a INTEGER)")
        q = "SELECT count(*), max(snapshot_id) FROM ducklake_snapshot"
        for i in range(1, 6):
            lake.execute(f"INSERT INTO lake.t VALUES ({i})")
            want = lake.execute("SELECT count(*), max(snapshot_id) FROM lake.snapshots()").fetchone()
            for _ in range(3):  # run once, then kept
                out = psql(server, q, "SELECT 1").stdout.split()
                assert out == [f"{want[0]}|{want[1]}", "1"], (out, want)
        lake.close()
    finally:
        hits, _ = stop_counts(server)
    assert hits >= 20, hits  # 5 commits x (2 kept answers x 2 reruns)


def test_a_fresh_attach_sees_the_tables_of_every_commit(tmp_path):
    """The extension's catalog load at ATTACH (pg_class and its kin) and its
    secrets probe are kept between commits; a DuckLake table created since,
    with the inlined-data table DuckLake makes for it, is in the next
    ATTACH's load, and psql's pg_class lists it."""
    server = Server("--store", f"file://{tmp_path / 'store'}")
    try:
        writer = attach(server, tmp_path / "data")
        listed = ("SELECT count(*) FROM pg_class "
                  "WHERE relname LIKE 'ducklake_inlined_data%'")
        before = int(psql(server, listed).stdout.split()[0])
        for k in range(1, 5):
            writer.execute(f"CREATE TABLE lake.t{k}(a INTEGER)")
            writer.execute(f"INSERT INTO lake.t{k} VALUES ({k})")
            assert int(psql(server, listed).stdout.split()[0]) > before
            before = int(psql(server, listed).stdout.split()[0])
            for _ in range(2):  # the first ATTACH after the commit runs the load, the second is kept
                fresh = attach(server, tmp_path / "data")
                got = [fresh.execute(f"SELECT count(*), sum(a) FROM lake.t{j}").fetchone()
                       for j in range(1, k + 1)]
                assert got == [(1, j) for j in range(1, k + 1)]
                fresh.close()
        writer.close()
    finally:
        hits, _ = stop_counts(server)
    assert hits >= 4 * 5, hits  # each second ATTACH: catalog load's five SELECTs at least
