"""DuckLake's own maintenance against moraine: flushing inlined data,
expiring snapshots and cleaning up old files leave nothing dead behind in
the store's keys, each pass is recorded in sys/maintenance_status and in the
log, and the catalog that is left loads back after a restart with the same
answers. The binary is MORAINE_BIN.
"""
import json
import subprocess

from conftest import connect
from test_pg_front import MORAINE, Server


def tool(*args):
    r = subprocess.run([MORAINE, *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def census(store):
    c = json.loads(tool("census", str(store), "--json"))
    return c["subspaces"], c["kinds"]


def attach(duck, s, tmp_path):
    duck.execute(f"ATTACH 'ducklake:postgres:{s.dsn()}' AS lake (DATA_PATH '{tmp_path}/data/')")


def test_flush_expire_and_cleanup_leave_nothing_dead(tmp_path):
    store = tmp_path / "store"
    s = Server("--store", f"file://{store}")
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
        subspaces, _ = census(store)
        assert subspaces["inline"]["keys"] >= 30

        duck.execute("CALL ducklake_flush_inlined_data('lake')")
        s.wait_log("inlined rows (recorded in sys/maintenance_status)")
        subspaces, _ = census(store)
        # t's 30 rows left; what stays is the two inline-table records and
        # the dropped table's rows, which time travel reads until expiry
        assert subspaces["inline"]["keys"] <= 4, subspaces
        info = json.loads(tool("info", str(store), "--json"))
        assert info["maintenance_passes"] == 1

        expected = duck.execute("SELECT * FROM lake.t ORDER BY id").fetchall()
        assert len(expected) == 25
        duck.execute("CALL ducklake_expire_snapshots('lake', older_than => now())")
        duck.execute("CALL ducklake_cleanup_old_files('lake', cleanup_all => true)")
        s.wait_log("snapshots, ")
        subspaces, kinds = census(store)
        assert subspaces["snapshot"]["keys"] == 1, subspaces
        assert subspaces["inline"]["keys"] == 1, subspaces  # t's inline-table record
        assert subspaces["history"]["keys"] == 0, subspaces
        assert kinds["table"]["current"]["keys"] == 1  # the dropped table is gone
        info = json.loads(tool("info", str(store), "--json"))
        assert info["maintenance_passes"] == 2 and info["bytes"] > 0 and info["objects"] > 0
        text = tool("info", str(store))
        assert "(ducklake expiry)" in text and "snapshots" in text
        duck.close()
    finally:
        assert s.stop() == 0

    s = Server("--store", f"file://{store}")  # what is left loads back
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
