"""One server, many catalogs: each database a client names is its own catalog
(its own store under the root's catalogs/, its own engine, head and
fencing), opened on first use, closed when idle (docs/catalogs.md).

Covered: two databases side by side with writers on both at once, each
seeing only its own tables and snapshots, across a restart; a catalog
opened by name on a folder store survives restart and idle close;
--unknown-databases refuse (3D000); a catalog taken over by another server
is closed alone while the default one keeps serving; 1,000 catalogs opened
in turn in bounded memory.

The binary is MORAINE_BIN (default build/src/cli/moraine).
"""
import os
import threading
import time

import psycopg
import pytest

from conftest import connect
from test_faults import DEADLINE_S, fill, small_disk  # noqa: F401 (a fixture)
from test_front_limits import rss_kib
from test_pg_front import Server


def attach(server, data, dbname="lake"):
    duck = connect()
    duck.execute(f"ATTACH 'ducklake:postgres:{server.dsn(dbname=dbname)}' AS lake (DATA_PATH '{data}/')")
    return duck


def tables(duck):
    return sorted(r[0] for r in duck.execute("SHOW TABLES FROM lake").fetchall())


def snapshots(duck):
    return [r[0] for r in duck.execute("SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall()]


def test_two_databases_side_by_side_writers_on_both(tmp_path):
    store = f"file://{tmp_path}/store"
    server = Server("--store", store)
    try:
        a, b = attach(server, tmp_path / "a"), attach(server, tmp_path / "b", "lake2")
        a.execute("CREATE TABLE lake.ta(i BIGINT)")
        b.execute("CREATE TABLE lake.tb(i BIGINT)")
        errors = []

        def writer(duck, table, n):
            try:
                cur = duck.cursor()
                for i in range(n):
                    cur.execute(f"INSERT INTO lake.{table} VALUES ({i})")
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=writer, args=(a, "ta", 20)),
                   threading.Thread(target=writer, args=(b, "tb", 20))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert tables(a) == ["ta"] and tables(b) == ["tb"]
        assert a.execute("SELECT count(*) FROM lake.ta").fetchone() == (20,)
        assert b.execute("SELECT count(*) FROM lake.tb").fetchone() == (20,)
        # each catalog numbers its own snapshots: 0 (create), 1 (table), 2..21
        assert snapshots(a) == list(range(22)) and snapshots(b) == list(range(22))
        # psql-level view: each database's metadata holds only its own
        with psycopg.connect(server.dsn(dbname="lake2"), autocommit=True) as pg:
            assert pg.execute("SELECT table_name FROM ducklake_table").fetchall() == [("tb",)]
        a.close()
        b.close()
    finally:
        assert server.stop() == 0
    log = server.log()
    assert f'moraine: opening catalog "lake2" from {store}/catalogs/lake2/public' in log, log
    assert 'moraine: opened catalog "lake2"' in log, log
    assert 'moraine: closed catalog "lake2" (server stop)' in log, log
    # both come back from their stores after a restart, still separate and writable
    again = Server("--store", store)
    try:
        a, b = attach(again, tmp_path / "a"), attach(again, tmp_path / "b", "lake2")
        assert tables(a) == ["ta"] and tables(b) == ["tb"]
        a.execute("INSERT INTO lake.ta VALUES (100)")
        b.execute("INSERT INTO lake.tb VALUES (100)")
        assert a.execute("SELECT count(*) FROM lake.ta").fetchone() == (21,)
        assert b.execute("SELECT count(*) FROM lake.tb").fetchone() == (21,)
        assert snapshots(a) == list(range(23)) and snapshots(b) == list(range(23))
        a.close()
        b.close()
    finally:
        assert again.stop() == 0


def attach_schema(server, data, schema, alias="lake", dbname="lake"):
    duck = connect()
    duck.execute(f"ATTACH 'ducklake:postgres:{server.dsn(dbname=dbname)}' AS {alias} "
                 f"(DATA_PATH '{data}/', METADATA_SCHEMA '{schema}')")
    return duck


def test_metadata_schemas_side_by_side_writers_on_both(tmp_path):
    """DuckLake's transaction/transaction_schema, and more: each
    METADATA_SCHEMA of a database is its own catalog and its own store."""
    store = f"file://{tmp_path}/store"
    server = Server("--store", store)
    try:
        main = attach(server, tmp_path / "main")
        main.execute("CREATE TABLE lake.pub(i INTEGER)")
        s1 = attach_schema(server, tmp_path / "s1", "metadata_s1")
        s1.execute("CREATE TABLE lake.tbl(i INTEGER)")
        s1.execute("INSERT INTO lake.tbl VALUES (42)")
        s2 = attach_schema(server, tmp_path / "s2", "metadata_s2")
        assert tables(s2) == []  # a new metadata schema is a new, empty catalog
        s2.execute("CREATE TABLE lake.tbl(s VARCHAR)")
        s2.execute("INSERT INTO lake.tbl VALUES ('hello world')")
        other = attach_schema(server, tmp_path / "o1", "metadata_s1", dbname="lake2")
        assert tables(other) == []  # same schema name, another database
        errors = []

        def writer(duck, n, value):
            try:
                cur = duck.cursor()
                for _ in range(n):
                    cur.execute(f"INSERT INTO lake.tbl VALUES ({value})")
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=writer, args=(s1, 15, "1")),
                   threading.Thread(target=writer, args=(s2, 15, "'x'"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert s1.execute("SELECT count(*) FROM lake.tbl").fetchone() == (16,)
        assert s2.execute("SELECT count(*) FROM lake.tbl").fetchone() == (16,)
        assert tables(main) == ["pub"]
        assert snapshots(s1) == list(range(18)) and snapshots(s2) == list(range(18))
        assert snapshots(main) == [0, 1]
        # one transaction writing two metadata schemas' catalogs is refused
        with psycopg.connect(server.dsn(), autocommit=True) as pg:
            with pytest.raises(psycopg.errors.FeatureNotSupported) as e:
                with pg.transaction():
                    pg.execute("INSERT INTO metadata_s1.ducklake_metadata VALUES ('a', 'b', NULL, NULL)")
                    pg.execute("INSERT INTO public.ducklake_metadata VALUES ('a', 'b', NULL, NULL)")
            assert "one metadata schema" in str(e.value)
        for d in (main, s1, s2, other):
            d.close()
    finally:
        assert server.stop() == 0
    assert (tmp_path / "store" / "catalogs" / "lake" / "metadata_s1").is_dir()
    assert (tmp_path / "store" / "catalogs" / "lake2" / "metadata_s1").is_dir()
    # after a restart each schema loads from its own store, still writable
    again = Server("--store", store)
    try:
        main = attach(again, tmp_path / "main")
        s1 = attach_schema(again, tmp_path / "s1", "metadata_s1")
        s2 = attach_schema(again, tmp_path / "s2", "metadata_s2")
        assert tables(main) == ["pub"] and tables(s1) == ["tbl"] and tables(s2) == ["tbl"]
        assert s1.execute("SELECT sum(i) FROM lake.tbl").fetchone() == (42 + 15,)
        s2.execute("INSERT INTO lake.tbl VALUES ('after')")
        assert s2.execute("SELECT count(*) FROM lake.tbl").fetchone() == (17,)
        for d in (main, s1, s2):
            d.close()
    finally:
        assert again.stop() == 0
    log = again.log()
    assert 'metadata schemas public, "metadata_s1", "metadata_s2"' in log, log


def test_a_catalog_closes_when_idle_and_reopens_with_its_data(tmp_path):
    store = f"file://{tmp_path}/store"
    server = Server("--store", store, "--catalog-idle-timeout", "0.3")
    try:
        d = attach(server, tmp_path / "d", "Sales.EU")
        d.execute("CREATE TABLE lake.orders(i INTEGER)")
        d.execute("INSERT INTO lake.orders VALUES (1), (2), (3)")
        d.close()
        deadline = time.time() + 10
        while 'closed catalog "Sales.EU" (idle)' not in server.log():
            assert time.time() < deadline, server.log()
            time.sleep(0.1)
        d = attach(server, tmp_path / "d", "Sales.EU")
        assert d.execute("SELECT sum(i) FROM lake.orders").fetchone() == (6,)
        d.close()
    finally:
        assert server.stop() == 0
    # a name with capitals and a dot is stored under a safe encoding
    assert (tmp_path / "store" / "catalogs" / "-53ales-2e-45-55" / "public").is_dir()
    again = Server("--store", store)
    try:
        d = attach(again, tmp_path / "d", "Sales.EU")
        assert d.execute("SELECT sum(i) FROM lake.orders").fetchone() == (6,)
        d.close()
    finally:
        assert again.stop() == 0


def test_a_second_database_rides_out_a_full_disk(small_disk, tmp_path):
    """A store write of another database's catalog fails on a full disk:
    that commit gets its SQLSTATE, the default catalog keeps serving, and
    once space is back the database takes writes again by itself (in place,
    or reopened for new sessions if the failed write landed after all) —
    the server never restarts for it."""
    server = Server("--store", f"file://{small_disk}/store")
    try:
        duck = attach(server, tmp_path / "d2", "lake2")
        duck.execute("CREATE TABLE lake.t(i BIGINT)")
        duck.execute("INSERT INTO lake.t VALUES (1)")
        main = attach(server, tmp_path / "d1")
        main.execute("CREATE TABLE lake.m(i BIGINT)")
        filler = fill(small_disk)
        with psycopg.connect(server.dsn(dbname="lake2"), autocommit=True) as pg:
            with pytest.raises(psycopg.Error) as e:
                pg.execute("INSERT INTO ducklake_metadata VALUES ('k', 'v', NULL, NULL)")
            assert e.value.sqlstate in ("53100", "57P03", "58030"), e.value
        assert main.execute("SELECT count(*) FROM lake.m").fetchone() == (0,)
        duck.close()
        filler.unlink()
        deadline = time.time() + DEADLINE_S
        while True:
            d = None
            try:
                d = attach(server, tmp_path / "d2", "lake2")
                d.execute("INSERT INTO lake.t VALUES (2)")
                break
            except Exception as ex:  # noqa: BLE001
                if d is not None:
                    d.close()
                assert time.time() < deadline, f"{ex}\n{server.log()}"
                time.sleep(0.5)
        assert sorted(r[0] for r in d.execute("SELECT i FROM lake.t").fetchall()) == [1, 2]
        d.close()
        main.close()
        assert server.proc.poll() is None  # served throughout, never restarted
    finally:
        assert server.stop() == 0
    log = server.log()
    assert "store write failed" in log, log
    assert ("writes resume" in log or 'catalog "lake2" is behind its store' in log), log


def test_unknown_databases_can_be_refused(tmp_path):
    store = f"file://{tmp_path}/store"
    server = Server("--store", store)
    try:
        attach(server, tmp_path / "k", "known").close()
    finally:
        assert server.stop() == 0
    server = Server("--store", store, "--unknown-databases", "refuse")
    try:
        with pytest.raises(psycopg.OperationalError) as e:
            psycopg.connect(server.dsn(dbname="nope"))
        assert 'database "nope" does not exist' in str(e.value)
        # the server answered 3D000 as PostgreSQL does
        assert e.value.sqlstate in (None, "3D000")
        with psycopg.connect(server.dsn(dbname="known"), autocommit=True) as pg:
            assert pg.execute("SELECT count(*) FROM ducklake_snapshot").fetchone() == (1,)
        with psycopg.connect(server.dsn(), autocommit=True) as pg:  # the default one always
            assert pg.execute("SELECT 1").fetchone() == (1,)
    finally:
        assert server.stop() == 0
    assert not (tmp_path / "store" / "catalogs" / "nope").exists()


def test_a_catalog_taken_over_closes_alone(tmp_path):
    root = tmp_path / "store"
    first = Server("--store", f"file://{root}")
    duck = attach(first, tmp_path / "m", "lake")
    duck.execute("CREATE TABLE lake.main_t(i INTEGER)")
    other = attach(first, tmp_path / "o", "other")
    other.execute("CREATE TABLE lake.t(i INTEGER)")
    other.execute("INSERT INTO lake.t VALUES (1)")
    other.close()
    # a second server whose default catalog is the first's "other"
    second = Server("--store", f"file://{root}/catalogs/other/public", "--default-database", "other")
    try:
        deadline = time.time() + 20
        while 'closed catalog "other" (taken over by another server)' not in first.log():
            assert first.proc.poll() is None, first.log()
            assert time.time() < deadline, first.log()
            time.sleep(0.2)
        # the first still serves its default catalog, reads and writes
        duck.execute("INSERT INTO lake.main_t VALUES (7)")
        assert duck.execute("SELECT * FROM lake.main_t").fetchall() == [(7,)]
        o2 = attach(second, tmp_path / "o", "other")
        o2.execute("INSERT INTO lake.t VALUES (2)")
        assert o2.execute("SELECT count(*) FROM lake.t").fetchone() == (2,)
        o2.close()
    finally:
        duck.close()
        assert second.stop() == 0
        assert first.stop() == 0
    assert "another server has taken over" in first.log()


# A DuckLake-like first commit, small: snapshot 0 and one metadata row (what
# a DuckLake ATTACH writes, minus 25 empty tables), one implicit transaction.
FIRST_COMMIT = """
CREATE TABLE ducklake_metadata("key" VARCHAR NOT NULL, "value" VARCHAR NOT NULL, "scope" VARCHAR,
  "scope_id" BIGINT);
CREATE TABLE ducklake_snapshot("snapshot_id" BIGINT PRIMARY KEY, "snapshot_time" TIMESTAMP WITH TIME ZONE,
  "schema_version" BIGINT, "next_catalog_id" BIGINT, "next_file_id" BIGINT);
CREATE TABLE ducklake_snapshot_changes("snapshot_id" BIGINT PRIMARY KEY, "changes_made" VARCHAR,
  "author" VARCHAR, "commit_message" VARCHAR, "commit_extra_info" VARCHAR);
INSERT INTO ducklake_snapshot VALUES (0, NOW(), 0, 1, 0);
INSERT INTO ducklake_snapshot_changes VALUES (0, 'created_schema:"main"', NULL, NULL, NULL);
INSERT INTO ducklake_metadata VALUES ('i', '{i}', NULL, NULL)"""


@pytest.mark.skipif(os.environ.get("MORAINE_SANITIZED") == "1",
                    reason="ASan holds freed memory in its quarantine: RSS is not the server's")
def test_a_thousand_catalogs_in_turn_in_bounded_memory(tmp_path):
    """1,000 databases, each opened by a connection that writes one row into
    its catalog, then closed when idle: the server's resident memory after
    them stays within a fixed bound of what it was after the first 100."""
    store = f"file://{tmp_path}/store"
    server = Server("--store", store, "--catalog-idle-timeout", "0.05", "--log-level", "warn")
    n, warm = int(os.environ.get("MORAINE_THOUSAND", "1000")), 100
    try:
        pid = server.proc.pid
        start = time.time()
        rss_warm = None
        for i in range(n):
            with psycopg.connect(server.dsn(dbname=f"c{i}"), autocommit=True) as pg:
                pg.execute(FIRST_COMMIT.format(i=i))
            if i + 1 == warm:
                time.sleep(0.5)
                rss_warm = rss_kib(pid)
        time.sleep(1.0)  # the last ones close
        rss_end = rss_kib(pid)
        seconds = time.time() - start
        opened = server.log().count("moraine: opened catalog")
        print(f"\n{n} catalogs in {seconds:.0f} s; RSS after {warm}: {rss_warm // 1024} MiB, "
              f"after {n}: {rss_end // 1024} MiB")
        # bounded: growth after the warm-up stays under 128 MiB (an open catalog
        # costs ~10-20 MiB; 1,000 kept open would be far beyond this)
        assert rss_end - rss_warm < 128 * 1024, (rss_warm, rss_end)
        # every catalog kept its row: spot checks after idle close
        for i in (0, n // 2, n - 1):
            with psycopg.connect(server.dsn(dbname=f"c{i}"), autocommit=True) as pg:
                assert pg.execute("SELECT value FROM ducklake_metadata").fetchall() == [(str(i),)]
    finally:
        assert server.stop() == 0
    assert opened >= n
