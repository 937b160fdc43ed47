"""The result cache (docs/pgwire.md "Result cache") through real DuckLake
clients: answers kept between commits are served (the server's count says
so), yet no reader ever misses a commit that was acknowledged before its
query, a transaction keeps its snapshot while others commit, and time
travel answers every version the same before and after a restart and with
the cache off.

The binary is MORAINE_BIN (default build/src/cli/moraine).
"""
import re
import threading

from conftest import connect
from test_pg_front import Server

COUNTS = re.compile(r'closed catalog "lake" \(server stop\); result cache: (\d+) hits, (\d+) misses')


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
