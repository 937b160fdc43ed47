"""`moraine migrate` end to end: a store a real server wrote (DuckLake
through moraine, data and delete files) is turned into the same catalog at
an older layout by the test-only keytool (`downgrade`: the directories that
layout lacks are deleted and sys/format rewritten, through kv and the key
tree). The server refuses it and names `moraine migrate`; the migration is
SIGKILLed between steps and run again; then `verify` is clean, the server
serves it, and DuckLake reads every row, now and at an older snapshot, and
commits again.
"""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import connect
from test_pg_front import MORAINE, Server
from test_toolbox import keytool, tool

TABLES = 12


def build(root):
    """A store with TABLES tables (one renamed), rows, delete files; returns
    (store, rows per table at the head, a middle snapshot, rows at it)."""
    store = root / "store"
    s = Server("--store", f"file://{store}")
    try:
        duck = connect()
        duck.execute(f"ATTACH 'ducklake:postgres:{s.dsn()}' AS lake "
                     f"(DATA_PATH '{root}/data/', DATA_INLINING_ROW_LIMIT 0)")
        duck.execute("CREATE SCHEMA lake.s2")
        for i in range(TABLES):
            schema = "s2" if i % 2 else "main"
            duck.execute(f"CREATE TABLE lake.{schema}.t{i} (id BIGINT, v VARCHAR)")
            duck.execute(f"INSERT INTO lake.{schema}.t{i} SELECT range, 'v' || range FROM range({10 + i})")
            duck.execute(f"DELETE FROM lake.{schema}.t{i} WHERE id % 3 = 0")
        middle = duck.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        duck.execute("ALTER TABLE lake.main.t0 RENAME TO first")
        duck.execute("INSERT INTO lake.s2.t1 VALUES (1000, 'late')")
        at_middle = duck.execute(f"SELECT count(*), sum(id) FROM lake.s2.t1 AT (VERSION => {middle})").fetchone()
        rows = read_all(duck)
        duck.close()
    finally:
        assert s.stop() == 0
    return store, rows, middle, at_middle


def read_all(duck):
    """Every table's rows, sorted, by schema.table."""
    out = {}
    for schema, name in duck.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_catalog = 'lake' ORDER BY 1, 2").fetchall():
        out[f"{schema}.{name}"] = duck.execute(f"SELECT * FROM lake.{schema}.{name} ORDER BY id").fetchall()
    return out


def info(store):
    r = tool("info", str(store), "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def refused(store):
    """The server's refusal of store (it exits at once, one line)."""
    r = subprocess.run([MORAINE, "serve", "--store", f"file://{store}", "--listen", "127.0.0.1:0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    return r.stderr


def serve_and_check(root, store, rows, middle, at_middle):
    s = Server("--store", f"file://{store}")
    try:
        duck = connect()
        duck.execute(f"ATTACH 'ducklake:postgres:{s.dsn()}' AS lake (DATA_PATH '{root}/data/')")
        assert read_all(duck) == rows
        assert duck.execute(
            f"SELECT count(*), sum(id) FROM lake.s2.t1 AT (VERSION => {middle})").fetchone() == at_middle
        # and it commits: a rename goes through the name directory the migration built
        duck.execute("ALTER TABLE lake.s2.t3 RENAME TO third")
        duck.execute("DELETE FROM lake.first WHERE id = 1")
        assert duck.execute("SELECT count(*) FROM lake.s2.third").fetchone()[0] == len(rows["s2.t3"])
        duck.close()
    finally:
        assert s.stop() == 0
    r = tool("verify", str(store))
    assert r.returncode == 0, r.stdout + r.stderr


def test_migrate_killed_mid_way_resumes(tmp_path):
    store, rows, middle, at_middle = build(tmp_path)
    before = info(store)
    assert keytool(store, "downgrade", "9")[0].endswith("keys removed")
    assert info(store)["format"] == 9
    assert "moraine migrate" in refused(store)

    # one record a step, a pause after each (test-only), killed once a
    # marker shows the migration under way
    env = {**os.environ, "MORAINE_TEST_ONLY_MIGRATE_STEP_DELAY_MS": "150"}
    p = subprocess.Popen([MORAINE, "migrate", str(store), "--step-records", "1"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and p.poll() is None:
            if info(store)["migration"] is not None:
                break
            time.sleep(0.05)
        assert p.poll() is None, "the migration ended before it could be killed"
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    mid = info(store)
    assert mid["format"] < 12
    assert mid["migration"] is not None or mid["format"] == 11
    if mid["migration"]:
        assert mid["migration"]["from_format"] == mid["format"]
    # refused with the hint while unfinished; verify walks it and says why
    stderr = refused(store)
    assert "moraine migrate" in stderr and len(stderr.strip().splitlines()) == 1, stderr
    assert tool("verify", str(store)).returncode in (1, 3)

    r = tool("migrate", str(store), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["format_before"] == mid["format"] and out["format_after"] == 12
    assert out["resumed"] == (mid["migration"] is not None)
    assert "done" in r.stderr
    after = info(store)
    assert after["format"] == 12 and after["migration"] is None
    # what the migration leaves as it was
    assert after["head_snapshot"] == before["head_snapshot"]
    assert after["created_at"] == before["created_at"]
    assert after["writer_version"] == before["writer_version"]
    serve_and_check(tmp_path, store, rows, middle, at_middle)

    # run again: nothing to do, and the store is not even opened as a writer
    r = tool("migrate", str(store))
    assert r.returncode == 0 and "nothing to migrate" in r.stdout


@pytest.mark.parametrize("layout", [10, 11])
def test_migrate_each_older_layout(tmp_path, layout):
    store, rows, middle, at_middle = build(tmp_path)
    keytool(store, "downgrade", str(layout))
    assert f"layout {layout}" in refused(store)
    r = tool("migrate", f"file://{store}")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"migrated layout {layout} -> 12")
    serve_and_check(tmp_path, store, rows, middle, at_middle)


def test_migrate_refusals(tmp_path):
    r = tool("migrate")
    assert r.returncode == 2 and "which store" in r.stderr
    r = tool("migrate", "a", "--step-records", "0")
    assert r.returncode == 2
    r = tool("migrate", str(tmp_path / "nothing"))
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = tool("migrate", "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: moraine migrate STORE")
