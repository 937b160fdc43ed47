"""moraine on object storage, for real: a moraine server on s3:// (moto's
S3 server), gs:// (fake-gcs-server) and az:// (Azurite) stores, each
emulator started by the test on a free loopback port (tests/e2e/emulators.py;
scripts/install-emulators.sh installs them).

Covered: create, commit, restart and reload on each cloud; open failures
(missing bucket, unreachable endpoint, wrong key) as one line in bounded
time; two servers on one s3:// store (the second fences the first, nothing
acknowledged is lost); an S3 outage in the middle of a commit stream; and
the differential feature groups of test_differential.py on an s3:// store.

Time bounds here only stop a hang from hanging the suite; no assertion is
about speed. The binary is MORAINE_BIN.
"""
import itertools
import os
import socket
import subprocess
import threading

import psycopg
import pytest

import emulators
import test_differential
from conftest import connect, extension_file
from test_faults import (DEADLINE_S, RECOVERED, assert_write_refused, bounded,
                         insert_once_recovered, start_fails)
from test_pg_front import Server

_prefixes = itertools.count()


def fresh(emu):
    """A store URL no other test uses, in emu's bucket."""
    return emu.url(f"t{next(_prefixes)}")


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    emu = emulators.start("s3", tmp_path_factory.mktemp("moto"))
    yield emu
    emu.stop()


@pytest.fixture(scope="module")
def gcs(tmp_path_factory):
    emu = emulators.start("gs", tmp_path_factory.mktemp("gcs"))
    yield emu
    emu.stop()


@pytest.fixture(scope="module")
def azure(tmp_path_factory):
    emu = emulators.start("az", tmp_path_factory.mktemp("azurite"))
    yield emu
    emu.stop()


@pytest.fixture(params=["s3", "gs", "az"])
def cloud(request):
    return request.getfixturevalue({"s3": "s3", "gs": "gcs", "az": "azure"}[request.param])


def attach(server, data):
    duck = connect()
    duck.execute(f"ATTACH 'ducklake:postgres:{server.dsn()}' AS lake (DATA_PATH '{data}/')")
    return duck


def rows(duck, sql):
    return duck.execute(sql).fetchall()


# ---- create, commit, restart, reload ---------------------------------------

def test_create_commit_restart_reload(cloud, tmp_path):
    store, data = fresh(cloud), tmp_path / "data"
    server = Server("--store", store, env=cloud.env)
    try:
        duck = attach(server, data)
        duck.execute("CREATE SCHEMA lake.s")
        duck.execute("CREATE TABLE lake.s.t (id BIGINT, name VARCHAR)")
        for i in range(5):
            duck.execute(f"INSERT INTO lake.s.t VALUES ({i}, 'r{i}')")
        duck.execute("INSERT INTO lake.s.t SELECT i, 'bulk' FROM range(100, 2100) r(i)")  # Parquet
        duck.execute("DELETE FROM lake.s.t WHERE id = 3")
        before = rows(duck, "SELECT * FROM lake.s.t ORDER BY id")
        snaps = rows(duck, "SELECT snapshot_id, changes::VARCHAR FROM lake.snapshots() ORDER BY 1")
        old = snaps[4][0]  # 0 attach, 1 schema, 2 table, 3-4: two rows inserted
        at_old = rows(duck, f"SELECT * FROM lake.s.t AT (VERSION => {old}) ORDER BY id")
        duck.close()
    finally:
        assert server.stop() == 0
    assert len(before) == 4 + 2000 and len(at_old) == 2

    server = Server("--store", store, env=cloud.env)
    try:
        duck = attach(server, data)
        assert rows(duck, "SELECT * FROM lake.s.t ORDER BY id") == before
        assert rows(duck, "SELECT snapshot_id, changes::VARCHAR FROM lake.snapshots() ORDER BY 1") == snaps
        assert rows(duck, f"SELECT * FROM lake.s.t AT (VERSION => {old}) ORDER BY id") == at_old
        duck.execute("INSERT INTO lake.s.t VALUES (9, 'after')")  # still writable
        assert rows(duck, "SELECT count(*) FROM lake.s.t") == [(len(before) + 1,)]
        duck.close()
    finally:
        assert server.stop() == 0


def test_data_path_in_the_same_bucket(s3, tmp_path):
    """The README's setup: catalog and Parquet files in one bucket, DuckDB
    writing its data through httpfs (from the venv's PyPI package)."""
    store = fresh(s3)
    data = f"{store}-data/"
    server = Server("--store", store, env=s3.env)
    try:
        duck = connect()
        duck.execute(f"LOAD '{extension_file('httpfs', 'httpfs')}'")
        duck.execute(f"CREATE SECRET (TYPE s3, KEY_ID 'moraine', SECRET 'moraine', "
                     f"REGION 'us-east-1', ENDPOINT '127.0.0.1:{s3.port}', URL_STYLE 'path', "
                     f"USE_SSL false)")
        duck.execute(f"ATTACH 'ducklake:postgres:{server.dsn()}' AS lake (DATA_PATH '{data}')")
        duck.execute("CREATE TABLE lake.t (id BIGINT, name VARCHAR)")
        duck.execute("INSERT INTO lake.t SELECT i, 'n' || i FROM range(5000) r(i)")
        assert rows(duck, "SELECT count(*), sum(id) FROM lake.t") == [(5000, sum(range(5000)))]
        files = rows(duck, "SELECT data_file FROM ducklake_list_files('lake', 't')")
        assert files and all(f[0].startswith(data) for f in files), files
        duck.close()
    finally:
        assert server.stop() == 0


# ---- failures at open: one line, bounded --------------------------------------

def one_reason(err):
    lines = [line for line in err.splitlines() if line.startswith("moraine: cannot")]
    assert len(lines) == 1, err
    # the object store's own answer, not only that the deadline passed
    assert "did not complete within" not in lines[0], lines[0]
    return lines[0]


def test_missing_bucket_is_refused_with_the_reason(cloud):
    code, err = start_fails(["--store", f"{cloud.scheme}://no-such-bucket/lake"], cloud.env)
    assert code == 1
    line = one_reason(err)
    assert "no-such-bucket" in line, line


def unused_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("kind", ["s3", "gs", "az"])
def test_unreachable_endpoint_is_refused_with_the_reason(kind):
    emu_class = emulators.CLOUDS[kind]
    env = emu_class.env_for(f"http://127.0.0.1:{unused_port()}")
    code, err = start_fails(["--store", f"{kind}://{emulators.BUCKET}/lake"], env)
    assert code == 1
    line = one_reason(err)
    assert "127.0.0.1" in line or "connect" in line.lower(), line


def test_wrong_azure_key_is_refused_with_the_reason(azure):
    wrong = "d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXktd3Jvbmcta2V5LXdyb25nLWtleQ=="
    code, err = start_fails(["--store", fresh(azure)],
                            {**azure.env, "AZURE_STORAGE_ACCOUNT_KEY": wrong})
    assert code == 1
    line = one_reason(err)
    assert "403" in line or "auth" in line.lower(), line


def test_a_store_url_without_bucket_is_refused():
    for url in ("s3://", "gs:///x", "az://"):
        code, err = start_fails(["--store", url])
        assert code == 1
        assert "names no" in one_reason(err)


# ---- two servers on one s3:// store ------------------------------------------

def test_a_second_server_on_s3_fences_the_first_nothing_lost(s3, tmp_path):
    store, data = fresh(s3), tmp_path / "data"
    first = Server("--store", store, env=s3.env)
    duck = attach(first, data)
    duck.execute("CREATE TABLE lake.t (id BIGINT)")
    acked = []
    for i in range(5):
        duck.execute(f"INSERT INTO lake.t VALUES ({i})")
        acked.append(i)
    second = Server("--store", store, env=s3.env)
    try:
        # the first learns of the takeover without a write, says so, exits 3
        assert first.proc.wait(timeout=DEADLINE_S) == 3
        log = first.log()
        assert "another server has taken over" in log, log
        duck.close()
        duck = attach(second, data)
        assert [r[0] for r in rows(duck, "SELECT id FROM lake.t ORDER BY id")] == acked
        duck.execute("INSERT INTO lake.t VALUES (5)")
        assert rows(duck, "SELECT count(*) FROM lake.t") == [(6,)]
        duck.close()
    finally:
        assert second.stop() == 0


# ---- an S3 outage in a commit stream -------------------------------------------

def test_s3_outage_commits_fail_clearly_reads_go_on_nothing_lost(tmp_path, tmp_path_factory):
    # its own emulator: pausing the shared one would stall other tests' stores
    emu = emulators.start("s3", tmp_path_factory.mktemp("moto-outage"))
    store, data = fresh(emu), tmp_path / "data"
    try:
        server = Server("--store", store, env=emu.env)
        try:
            duck = attach(server, data)
            duck.execute("CREATE TABLE lake.t (id BIGINT)")
            acked, failed = [], []
            stop = threading.Event()

            def stream():
                # a writer committing one row at a time until told to stop
                with psycopg.connect(server.dsn(), autocommit=True) as conn:
                    for i in itertools.count():
                        if stop.is_set():
                            return
                        try:
                            conn.execute("INSERT INTO ducklake_metadata VALUES (%s, 'v', NULL, NULL)",
                                         (f"k{i}",))
                            acked.append(f"k{i}")
                        except psycopg.Error as e:
                            failed.append((f"k{i}", e))
                            return

            for i in range(3):
                duck.execute(f"INSERT INTO lake.t VALUES ({i})")
            writer = threading.Thread(target=stream, daemon=True)
            writer.start()
            while len(acked) < 3 and writer.is_alive():
                writer.join(0.05)
            assert len(acked) >= 3, failed
            emu.pause()  # the endpoint stops answering mid-stream
            try:
                writer.join(DEADLINE_S)
                assert not writer.is_alive(), f"a commit still had no answer after {DEADLINE_S} s"
                assert len(failed) == 1, failed
                in_doubt, error = failed[0]
                assert error.sqlstate in ("57P03", "58030"), error
                assert "store" in str(error)

                # a reader on a new connection still answers, from memory
                def read():
                    with psycopg.connect(server.dsn(), autocommit=True, connect_timeout=10) as c:
                        return c.execute("SELECT count(*) FROM ducklake_metadata "
                                         "WHERE key LIKE 'k%'").fetchone()[0]
                assert bounded(read, "a read during the outage") == len(acked)
                assert sorted(r[0] for r in rows(duck, "SELECT id FROM lake.t")) == [0, 1, 2]
                assert_write_refused(duck, "a write during the outage")
            finally:
                emu.resume()
            stop.set()
            duck.close()

            # the store answers again: the same server takes writes by itself
            duck = insert_once_recovered(server, data, 3)
            assert sorted(r[0] for r in rows(duck, "SELECT id FROM lake.t")) == [0, 1, 2, 3]
            duck.close()
        finally:
            assert server.stop() == 0
        assert any(r in server.log() for r in RECOVERED)
        # a restarted server has every acknowledged commit (and maybe the one
        # in doubt)
        again = Server("--store", store, env=emu.env)
        try:
            with psycopg.connect(again.dsn(), autocommit=True) as conn:
                keys = [r[0] for r in conn.execute(
                    "SELECT key FROM ducklake_metadata WHERE key LIKE 'k%'").fetchall()]
            assert set(acked) <= set(keys) <= set(acked) | {in_doubt}, (acked, keys)
            duck = attach(again, data)
            assert sorted(r[0] for r in rows(duck, "SELECT id FROM lake.t")) == [0, 1, 2, 3]
            duck.close()
        finally:
            assert again.stop() == 0
    finally:
        emu.stop()


# ---- the differential feature groups on s3:// -----------------------------------

# A differential group takes ~2x as long on the S3 emulator as on a folder, so
# make test runs the groups that reach the most kinds of store record (every
# entity kind and the directories; deletes and history; reads at old
# snapshots; expiry's deletes); MORAINE_S3_DIFFERENTIAL=all runs every group.
S3_GROUPS = ["create_schema_table_view_macro", "delete", "time_travel", "expire_snapshots"]
if os.environ.get("MORAINE_S3_DIFFERENTIAL") == "all":
    S3_GROUPS = list(test_differential.FEATURES)


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=test_differential.XFAIL[n]))
    if n in test_differential.XFAIL else n
    for n in S3_GROUPS])
def test_feature_matches_file_catalog_on_s3(s3, tmp_path, name):
    test_differential.differential(tmp_path, name, store=fresh(s3), env=s3.env)


def test_replica_follows_a_writer_on_s3(s3, tmp_path):
    test_differential.differential(tmp_path, "delete", store=fresh(s3), env=s3.env, replica=True)


# ---- many catalogs -----------------------------------------------------------

def test_many_catalogs_on_each_cloud(cloud, tmp_path):
    """Another database and another METADATA_SCHEMA beside the default
    catalog, each its own store under the prefix's catalogs/, found again
    after a restart (the metadata schema by one LIST of catalogs/lake/)."""
    store = fresh(cloud)

    def open_all(server):
        out = []
        for alias, dbname, schema in (("a", "lake", None), ("b", "lake2", None), ("c", "lake", "ms")):
            duck = connect()
            extra = f", METADATA_SCHEMA '{schema}'" if schema else ""
            duck.execute(f"ATTACH 'ducklake:postgres:{server.dsn(dbname=dbname)}' AS {alias} "
                         f"(DATA_PATH '{tmp_path}/{alias}/'{extra})")
            out.append(duck)
        return out

    server = Server("--store", store, env=cloud.env)
    try:
        ducks = open_all(server)
        for duck, alias in zip(ducks, "abc"):
            duck.execute(f"CREATE TABLE {alias}.t_{alias}(i INTEGER)")
            duck.execute(f"INSERT INTO {alias}.t_{alias} VALUES (1)")
        for duck in ducks:
            duck.close()
    finally:
        assert server.stop() == 0
    server = Server("--store", store, env=cloud.env)
    try:
        ducks = open_all(server)
        for duck, alias in zip(ducks, "abc"):
            assert rows(duck, f"SHOW TABLES FROM {alias}") == [(f"t_{alias}",)]
            duck.execute(f"INSERT INTO {alias}.t_{alias} VALUES (2)")
            assert rows(duck, f"SELECT count(*) FROM {alias}.t_{alias}") == [(2,)]
            duck.close()
    finally:
        assert server.stop() == 0
    assert 'metadata schemas public, "ms"' in server.log(), server.log()


# ---- TLS to the store ------------------------------------------------------

def test_s3_over_https_verifies_the_certificate(tmp_path):
    """moraine talks TLS to an https:// endpoint (rustls, ring) and checks
    its certificate against the trusted roots: moto serves a certificate
    from a throwaway CA, trusted through SSL_CERT_FILE; without it the open
    is refused with the reason, in bounded time."""
    import http.client
    import ssl

    from test_tls import make_ca, make_server_cert
    ca = make_ca(tmp_path, "ca")
    cert, key = make_server_cert(tmp_path, "ca", "moto")
    port = emulators.free_port()
    moto = emulators.ROOT / ".venv" / "bin" / "moto_server"
    log = open(tmp_path / "moto.log", "wb")
    proc = subprocess.Popen([str(moto), "-H", "127.0.0.1", "-p", str(port), "-c", str(cert),
                             "-k", str(key)], stdout=log, stderr=subprocess.STDOUT)
    try:
        emulators._wait_listening(proc, port, "moto (https)")
        ctx = ssl.create_default_context(cafile=str(ca))
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=ctx)
        conn.request("PUT", f"/{emulators.BUCKET}", headers={"Content-Length": "0"})
        assert conn.getresponse().status == 200
        conn.close()
        env = {k: v for k, v in emulators.S3.env_for(f"https://127.0.0.1:{port}").items()
               if k != "AWS_ALLOW_HTTP"}
        store = f"s3://{emulators.BUCKET}/tls"

        code, err = start_fails(["--store", store], {**env, "SSL_CERT_FILE": str(tmp_path / "none.pem")})
        assert code == 1
        line = one_reason(err)
        assert "certificate" in line.lower() or "UnknownIssuer" in line, line

        server = Server("--store", store, env={**env, "SSL_CERT_FILE": str(ca)})
        try:
            duck = attach(server, tmp_path / "data")
            duck.execute("CREATE TABLE lake.t (id BIGINT)")
            duck.execute("INSERT INTO lake.t VALUES (1), (2)")
            assert rows(duck, "SELECT sum(id) FROM lake.t") == [(3,)]
            duck.close()
        finally:
            assert server.stop() == 0
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()
