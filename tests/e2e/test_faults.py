"""Faults for real against the real `moraine serve`: a store on a full disk,
and a second server taking the store over. Each must become a clear error in
bounded time, reads must go on, and no acknowledged commit may be lost.

The full-disk test mounts a small tmpfs (it needs root; it is skipped with
the reason otherwise). The binary is MORAINE_BIN.
"""
import concurrent.futures
import os
import subprocess
import time

import psycopg
import pytest

from conftest import connect
from test_pg_front import Server

DEADLINE_S = 30  # the store write deadline is 10 s; generous for a slow CI


def bounded(fn, what):
    """fn() in a thread; a fault that hangs instead of failing fails the test
    (the bound is the point, not the speed)."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(fn).result(timeout=DEADLINE_S)
    except concurrent.futures.TimeoutError:
        raise AssertionError(f"{what} still had no answer after {DEADLINE_S} s") from None
    finally:
        pool.shutdown(wait=False)


def assert_write_refused(duck, what):
    """While its store is failed this server is read-only: a write into
    lake.t fails, within the bound, with an error that names the store."""
    def write():
        try:
            duck.execute("INSERT INTO lake.t VALUES (99)")
        except Exception as e:
            return e
        return None
    refused = bounded(write, what)
    assert refused is not None and "store" in str(refused)


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(path):
    """Fills the file system holding path; returns the filler file."""
    filler = path / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * (1 << 20))
                f.flush()
        except OSError:
            pass
    return filler


def attach(server, data):
    duck = connect()
    duck.execute(f"ATTACH 'ducklake:postgres:{server.dsn()}' AS lake (DATA_PATH '{data}/')")
    return duck


RECOVERED = ("the store answers again; writes resume", "restarting to reload the catalog")


def insert_once_recovered(server, data, value):
    """Once its store answers again the server takes writes by itself: in
    place, or (when a write it reported failed landed after all) after
    executing itself again on the same port to reload. Retries an INSERT of
    value into lake.t on fresh clients until one commits; returns that
    client."""
    deadline = time.time() + DEADLINE_S
    while True:
        duck = None
        try:
            duck = attach(server, data)
            duck.execute(f"INSERT INTO lake.t VALUES ({value})")
            return duck
        except Exception as e:
            if duck is not None:
                duck.close()
            if time.time() > deadline:
                raise AssertionError(f"no write committed {DEADLINE_S} s after the store came "
                                     f"back: {e}\nserver log:\n{server.log()}") from None
            time.sleep(0.5)


def test_full_disk_fails_in_bounded_time_reads_go_on_nothing_lost(small_disk, tmp_path):
    store = small_disk / "store"
    data = tmp_path / "data"
    server = Server("--store", f"file://{store}")
    try:
        duck = attach(server, data)
        duck.execute("CREATE TABLE lake.t (id BIGINT)")
        acked = []
        for i in range(5):
            duck.execute(f"INSERT INTO lake.t VALUES ({i})")
            acked.append(i)
        filler = fill(small_disk)
        # a commit on the full disk: a clear error within the deadline
        def failing_commit():
            with psycopg.connect(server.dsn(), autocommit=True) as conn:
                try:
                    conn.execute("INSERT INTO ducklake_metadata VALUES ('k', 'v', NULL, NULL)")
                except psycopg.Error as e:
                    return e
            return None
        failed = bounded(failing_commit, "a commit on a full disk")
        assert failed is not None, "the commit on a full disk succeeded"
        assert failed.sqlstate in ("53100", "57P03", "58030"), failed
        # reads go on, on a new connection too
        with psycopg.connect(server.dsn(), autocommit=True, connect_timeout=10) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
            assert conn.execute("SELECT count(*) FROM ducklake_snapshot").fetchone()[0] >= 6
        assert sorted(r[0] for r in duck.execute("SELECT id FROM lake.t").fetchall()) == acked
        # later writes are refused at once, with the reason
        assert_write_refused(duck, "a write after the store failed")
        duck.close()
        # space is back: the same server takes writes again by itself
        filler.unlink()
        duck = insert_once_recovered(server, data, 100)
        assert sorted(r[0] for r in duck.execute("SELECT id FROM lake.t").fetchall()) == acked + [100]
        duck.close()
    finally:
        assert server.stop() == 0
    log = server.log()
    assert "store write failed" in log, log
    assert any(r in log for r in RECOVERED), log
    # and a restart finds every acknowledged row
    again = Server("--store", f"file://{store}")
    try:
        duck = attach(again, data)
        assert sorted(r[0] for r in duck.execute("SELECT id FROM lake.t").fetchall()) == acked + [100]
        duck.close()
    finally:
        assert again.stop() == 0


def test_a_second_server_fences_the_first_which_stops(tmp_path):
    store, data = tmp_path / "store", tmp_path / "data"
    first = Server("--store", f"file://{store}")
    duck = attach(first, data)
    duck.execute("CREATE TABLE lake.t (id BIGINT)")
    duck.execute("INSERT INTO lake.t VALUES (1), (2)")
    duck.close()
    second = Server("--store", f"file://{store}")
    try:
        # the first learns of the takeover without a write, says so, exits 3
        assert first.proc.wait(timeout=DEADLINE_S) == 3
        log = first.log()
        assert "another server has taken over" in log, log
        duck = attach(second, data)
        assert duck.execute("SELECT id FROM lake.t ORDER BY id").fetchall() == [(1,), (2,)]
        duck.execute("INSERT INTO lake.t VALUES (3)")
        assert duck.execute("SELECT count(*) FROM lake.t").fetchone() == (3,)
        duck.close()
    finally:
        assert second.stop() == 0


def test_a_read_only_store_is_refused_at_start_in_bounded_time(small_disk, tmp_path):
    store = small_disk / "store"
    server = Server("--store", f"file://{store}")
    duck = attach(server, tmp_path / "data")
    duck.execute("CREATE TABLE lake.t (id BIGINT)")
    duck.close()
    assert server.stop() == 0
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    code, err = start_fails(["--store", f"file://{store}"])
    assert code != 0
    lines = [line for line in err.splitlines() if line.startswith("moraine: cannot")]
    assert len(lines) == 1, err


def start_fails(args, env=None):
    """Runs `moraine serve ARGS`, which must exit within the bound (a hang
    fails the test); returns (exit code, stderr)."""
    import test_pg_front
    r = subprocess.run([test_pg_front.MORAINE, "serve", "--listen", "127.0.0.1:0", *args],
                       capture_output=True, text=True, timeout=DEADLINE_S,
                       env={**os.environ, **(env or {})})
    return r.returncode, r.stderr


def test_a_corrupt_manifest_is_refused_at_start(tmp_path):
    store = tmp_path / "store"
    server = Server("--store", f"file://{store}")
    duck = attach(server, tmp_path / "data")
    duck.execute("CREATE TABLE lake.t (id BIGINT)")
    duck.close()
    assert server.stop() == 0
    manifests = sorted((store / "manifest").iterdir())
    assert manifests
    for m in manifests:
        m.write_bytes(b"\x00garbage" * 16)
    code, err = start_fails(["--store", f"file://{store}"])
    assert code != 0
    assert len([l for l in err.splitlines() if l.startswith("moraine: cannot")]) == 1, err


def test_an_unreachable_object_store_is_refused_at_start_in_bounded_time(tmp_path):
    import socket
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"AWS_ENDPOINT": f"http://127.0.0.1:{port}", "AWS_ALLOW_HTTP": "true",
           "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y", "AWS_REGION": "us-east-1"}
    code, err = start_fails(["--store", "s3://bucket/lake"], env)
    assert code != 0
    assert len([l for l in err.splitlines() if l.startswith("moraine: cannot")]) == 1, err
