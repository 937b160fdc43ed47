"""DuckLake's own maintenance against moraine: flushing inlined data,
expiring snapshots and cleaning up old files leave nothing dead behind in
the store's keys, each pass is recorded in sys/maintenance_status and in the
log, and the catalog that is left loads back after a restart with the same
answers; SlateDB's garbage collector runs without an error on a local
folder and on the S3 emulator. The binary is MORAINE_BIN.
"""
import itertools
import json
import os
import subprocess
import time

import pytest

import emulators
from conftest import connect
from test_pg_front import MORAINE, Server

_prefixes = itertools.count()


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    emu = emulators.start("s3", tmp_path_factory.mktemp("moto"))
    yield emu
    emu.stop()


@pytest.fixture(params=["file", "s3"])
def where(request, tmp_path):
    """(store URL, environment) on a local folder or in the S3 emulator."""
    if request.param == "file":
        return f"file://{tmp_path}/store", {}
    emu = request.getfixturevalue("s3")
    return emu.url(f"maint{next(_prefixes)}"), emu.env


def tool(env, *args):
    r = subprocess.run([MORAINE, *args], capture_output=True, text=True, timeout=60,
                       env={**os.environ, **env})
    assert r.returncode == 0, r.stderr
    return r.stdout


def census(env, store):
    c = json.loads(tool(env, "census", store, "--json"))
    return c["subspaces"], c["kinds"]


def attach(duck, s, tmp_path):
    duck.execute(f"ATTACH 'ducklake:postgres:{s.dsn()}' AS lake (DATA_PATH '{tmp_path}/data/')")


def test_flush_expire_and_cleanup_leave_nothing_dead(tmp_path, where):
    store, env = where
    s = Server("--store", store, env=env)
    try:
        duck = connect()
        attach(duck, s, tmp_path)
        duck.execute("CREATE TABLE lake.t (id BIGINT, v VARCHAR)")
        duck.execute("CREATE TABLE lake.gone (id BIGINT)")
        duck.execute("INSERT INTO lake.gone VALUES (1), (2)")
        for i in range(30):
            duck.execute(f"INSERT INTO lake.t VALUES ({i}, 'v{i}')")
        duck.execute("DELETE FROM lake.t WHERE id < 5")
        duck.execute("DROP TABLE lake.gone")
        subspaces, _ = census(env, store)
        assert subspaces["inline"]["keys"] >= 30

        duck.execute("CALL ducklake_flush_inlined_data('lake')")
        s.wait_log("inlined rows (recorded in sys/maintenance_status)")
        subspaces, _ = census(env, store)
        # t's 30 rows left; what stays is the two inline-table records and
        # the dropped table's rows, which time travel reads until expiry
        assert subspaces["inline"]["keys"] <= 4, subspaces
        info = json.loads(tool(env, "info", store, "--json"))
        assert info["maintenance_passes"] == 1

        expected = duck.execute("SELECT * FROM lake.t ORDER BY id").fetchall()
        assert len(expected) == 25
        duck.execute("CALL ducklake_expire_snapshots('lake', older_than => now())")
        duck.execute("CALL ducklake_cleanup_old_files('lake', cleanup_all => true)")
        s.wait_log("snapshots, ")
        subspaces, kinds = census(env, store)
        assert subspaces["snapshot"]["keys"] == 1, subspaces
        assert subspaces["inline"]["keys"] == 1, subspaces  # t's inline-table record
        assert subspaces["changelog"]["keys"] <= 2, subspaces  # went with their snapshots
        assert subspaces["history"]["keys"] == 0, subspaces
        assert kinds["table"]["current"]["keys"] == 1  # the dropped table is gone
        info = json.loads(tool(env, "info", store, "--json"))
        assert info["maintenance_passes"] == 2 and info["bytes"] > 0 and info["objects"] > 0
        text = tool(env, "info", store)
        assert "(ducklake expiry)" in text and "snapshots" in text
        duck.close()
    finally:
        assert s.stop() == 0

    s = Server("--store", store, env=env)  # what is left loads back
    try:
        duck = connect()
        attach(duck, s, tmp_path)
        assert duck.execute("SELECT * FROM lake.t ORDER BY id").fetchall() == expected
        assert duck.execute("SELECT count(*) FROM lake.snapshots()").fetchone() == (1,)
        duck.execute("INSERT INTO lake.t VALUES (100, 'after')")
        assert duck.execute("SELECT count(*) FROM lake.t").fetchone() == (26,)
        duck.close()
    finally:
        assert s.stop() == 0


def test_garbage_collector_runs_clean(tmp_path, where):
    """A fast collector (every 0.2 s, objects older than 0.5 s) over
    commits big enough for many memtable flushes (64 KiB) and merges:
    SlateDB logs no error (before the binding's conditional overwrite, every
    manifest collection failed on a folder store), and on a folder old
    manifests go."""
    store, env = where
    s = Server("--store", store, "--gc-interval", "0.2", "--gc-min-age", "0.5",
               env={**env, "MORAINE_SLATEDB_LOG": "warn"})
    try:
        duck = connect()
        attach(duck, s, tmp_path)
        cols = ", ".join(f"column_with_a_long_name_{c} VARCHAR" for c in range(200))
        for i in range(40):  # about 30 KiB of column records each
            duck.execute(f"CREATE TABLE lake.t{i} ({cols})")
        time.sleep(3)
        assert duck.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = 'lake'"
                            ).fetchone() == (40,)
        duck.close()
        errors = [line for line in s.log().splitlines() if "slatedb: error" in line]
        assert errors == [], errors
        if store.startswith("file://"):
            manifests = sorted(os.listdir(store[len("file://"):] + "/manifest"))
            assert len(manifests) * 2 < int(manifests[-1].split(".")[0]), manifests
    finally:
        assert s.stop() == 0


def test_info_size_is_the_stores_own(tmp_path):
    """`moraine info ROOT` counts the root catalog's objects, not those of
    the other databases' catalogs kept under ROOT/catalogs/."""
    root = tmp_path / "store"
    s = Server("--store", f"file://{root}")
    try:
        for db in ("lake", "other"):
            duck = connect()
            duck.execute(f"ATTACH 'ducklake:postgres:{s.dsn(dbname=db)}' AS lake "
                         f"(DATA_PATH '{tmp_path}/{db}-data/')")
            duck.execute("CREATE TABLE lake.t (id BIGINT)")
            duck.execute("INSERT INTO lake.t VALUES (1)")
            duck.close()
    finally:
        assert s.stop() == 0
    def own():
        return [p for p in root.rglob("*")
                if p.is_file() and "catalogs" not in p.relative_to(root).parts]

    assert (root / "catalogs").is_dir()
    before = own()
    info = json.loads(tool({}, "info", str(root), "--json"))
    after = own()  # the reader `info` opens checkpoints into a new manifest, and again at close
    others = [p for p in (root / "catalogs").rglob("*") if p.is_file()]
    assert len(before) <= info["objects"] <= len(after) and others
    assert sum(p.stat().st_size for p in before) <= info["bytes"] <= sum(p.stat().st_size for p in after)
