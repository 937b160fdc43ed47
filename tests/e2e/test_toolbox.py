"""The read-only toolbox (`moraine info`, `moraine census`) against stores a
real server wrote, while that server keeps running and after it stopped.
The binary is MORAINE_BIN.
"""
import json
import subprocess

import psycopg

from conftest import connect
from test_pg_front import MORAINE, Server


def tool(*args):
    return subprocess.run([MORAINE, *args], capture_output=True, text=True, timeout=60)


def test_info_and_census_beside_a_running_writer(tmp_path):
    store = tmp_path / "store"
    s = Server("--store", f"file://{store}")
    try:
        duck = connect()
        duck.execute(f"ATTACH 'ducklake:postgres:{s.dsn()}' AS lake (DATA_PATH '{tmp_path}/data/')")
        duck.execute("CREATE TABLE lake.t (id BIGINT)")
        for i in range(5):
            duck.execute(f"INSERT INTO lake.t VALUES ({i})")
        with psycopg.connect(s.dsn(), autocommit=True) as con:
            head = con.execute("SELECT max(snapshot_id), count(*) FROM ducklake_snapshot").fetchone()

        r = tool("info", str(store), "--json")
        assert r.returncode == 0, r.stderr
        info = json.loads(r.stdout)
        assert info["format"] == 12 and info["head_snapshot"] == head[0]
        assert info["batch_count"] >= head[1] and info["head_time"].endswith("Z")
        r = tool("census", f"file://{store}", "--json")
        assert r.returncode == 0, r.stderr
        census = json.loads(r.stdout)
        assert census["subspaces"]["snapshot"]["keys"] == head[1]
        assert census["kinds"]["table"]["current"]["keys"] == 1
        assert census["subspaces"]["sys"]["keys"] >= 2  # format and head

        # the writer was not disturbed: it still commits
        duck.execute("INSERT INTO lake.t VALUES (99)")
        assert duck.execute("SELECT count(*) FROM lake.t").fetchone() == (6,)
        duck.close()
    finally:
        assert s.stop() == 0
    r = tool("info", str(store))
    assert r.returncode == 0, r.stderr
    assert f"head snapshot      {head[0] + 1}" in r.stdout
    r = tool("census", str(store))
    assert r.returncode == 0 and "subspace" in r.stdout and "table" in r.stdout


def test_toolbox_failures_are_one_line(tmp_path):
    r = tool("info", str(tmp_path / "nothing-here"))
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = tool("census")
    assert r.returncode == 2 and "which store" in r.stderr
    r = tool("info", "a", "b")
    assert r.returncode == 2
    r = tool("info", "--help")
    assert r.returncode == 0 and "read-only" in r.stdout
