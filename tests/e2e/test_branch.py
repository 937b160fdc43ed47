"""`moraine branch STORE --at SNAPSHOT NEW_STORE` end to end: a catalog a
real server wrote through DuckLake (data files, delete files, inlined rows,
a rename, a drop, a table made after the branch point) is branched at a
middle snapshot while that server keeps serving it. The branch is served
and DuckLake sees exactly what the source shows at AT (VERSION => n); then
branch and source take commits each and neither sees the other's. The
source's head and `verify` are unchanged by the branching.
"""
import json
import shutil
import subprocess

import pytest

from conftest import connect
from test_pg_front import MORAINE, Server
from test_toolbox import tool


def attach(duck, server, root, name="lake"):
    duck.execute(f"ATTACH 'ducklake:postgres:{server.dsn()}' AS {name} "
                 f"(DATA_PATH '{root}/data/', DATA_INLINING_ROW_LIMIT 5)")


def rows(duck, rel, at=None):
    travel = f" AT (VERSION => {at})" if at is not None else ""
    return duck.execute(f"SELECT * FROM {rel}{travel} ORDER BY ALL").fetchall()


def tables_of(duck, catalog):
    return sorted(duck.execute(
        "SELECT table_schema || '.' || table_name FROM information_schema.tables "
        f"WHERE table_catalog = '{catalog}'").fetchall())


def snapshot(duck):
    return duck.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]


def test_branch_serves_the_snapshot_and_diverges(tmp_path):
    source = tmp_path / "source"
    branch = tmp_path / "branch"
    s = Server("--store", f"file://{source}")
    b = None
    try:
        duck = connect()
        attach(duck, s, tmp_path)
        duck.execute("CREATE SCHEMA lake.s2")
        duck.execute("CREATE TABLE lake.t (id BIGINT, v VARCHAR)")
        duck.execute("INSERT INTO lake.t SELECT range, 'v' || range FROM range(100)")   # a data file
        duck.execute("DELETE FROM lake.t WHERE id % 7 = 0")                             # a delete file
        duck.execute("CREATE TABLE lake.s2.small (a INT)")
        duck.execute("INSERT INTO lake.s2.small VALUES (1), (2), (3)")                  # inlined rows
        duck.execute("CREATE TABLE lake.gone (x INT)")
        duck.execute("INSERT INTO lake.gone VALUES (42)")
        at = snapshot(duck)
        expect = {rel: rows(duck, f"lake.{rel}") for rel in ["main.t", "s2.small", "main.gone"]}
        # after the branch point: more rows, a delete, a rename, a drop, a new table
        duck.execute("INSERT INTO lake.t SELECT range, 'w' || range FROM range(100, 150)")
        duck.execute("DELETE FROM lake.s2.small WHERE a = 2")
        duck.execute("INSERT INTO lake.s2.small VALUES (9)")
        duck.execute("ALTER TABLE lake.t RENAME TO renamed")
        duck.execute("DROP TABLE lake.gone")
        duck.execute("CREATE TABLE lake.later (y INT)")
        duck.execute("INSERT INTO lake.later VALUES (7)")
        head = snapshot(duck)
        # the source as DuckLake shows it at AT (names as they were then)
        for rel, want in expect.items():
            assert rows(duck, f"lake.{rel}", at) == want, rel
        source_now = {rel: rows(duck, f"lake.{rel}") for rel in ["main.renamed", "s2.small", "main.later"]}

        # branch while the source's server keeps serving it
        before = json.loads(tool("info", str(source), "--json").stdout)
        r = tool("branch", str(source), "--at", str(at), str(branch), "--json")
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["at"] == at and out["source_head"] == head and out["records_removed"] > 0
        assert out["records_restored"] > 0   # the renamed table, the deleted inlined row, the dropped table
        after = json.loads(tool("info", str(source), "--json").stdout)
        assert (after["head_snapshot"], after["batch_count"]) == (before["head_snapshot"], before["batch_count"])
        assert tool("verify", str(source)).returncode == 0
        duck.execute("INSERT INTO lake.s2.small VALUES (10)")  # the source's writer was not disturbed
        source_now["s2.small"] = rows(duck, "lake.s2.small")

        r = tool("verify", str(branch))
        assert r.returncode == 0, r.stdout + r.stderr
        r = tool("info", str(branch), "--json")
        binfo, sinfo = json.loads(r.stdout), json.loads(tool("info", str(source), "--json").stdout)
        assert binfo["head_snapshot"] == at and binfo["created_at"] > sinfo["created_at"]

        b = Server("--store", f"file://{branch}")
        bduck = connect()
        attach(bduck, b, tmp_path)
        assert tables_of(bduck, "lake") == [("main.gone",), ("main.t",), ("s2.small",)]
        for rel, want in expect.items():
            assert rows(bduck, f"lake.{rel}") == want, rel
        assert snapshot(bduck) == at

        # each side commits; neither sees the other's
        bduck.execute("INSERT INTO lake.t VALUES (1000, 'branch')")
        bduck.execute("CREATE TABLE lake.branch_only (z INT)")
        duck.execute("CREATE TABLE lake.source_only (z INT)")
        assert ("main.source_only",) not in tables_of(bduck, "lake")
        assert ("main.branch_only",) not in tables_of(duck, "lake")
        assert rows(bduck, "lake.t") == sorted(expect["main.t"] + [(1000, "branch")])
        for rel, want in source_now.items():
            assert rows(duck, f"lake.{rel}") == want, rel
        assert rows(duck, "lake.t", at) == expect["main.t"]
        bduck.close()
        duck.close()
    finally:
        if b is not None:
            assert b.stop() == 0
        assert s.stop() == 0
    for store in (source, branch):
        r = tool("verify", str(store))
        assert r.returncode == 0, r.stdout + r.stderr


def test_branch_refusals(tmp_path):
    store = tmp_path / "store"
    s = Server("--store", f"file://{store}")
    try:
        duck = connect()
        attach(duck, s, tmp_path)
        duck.execute("CREATE TABLE lake.t (a INT)")
        head = snapshot(duck)
        duck.close()
    finally:
        assert s.stop() == 0
    r = tool("branch", str(store), str(tmp_path / "b"))
    assert r.returncode == 2 and "--at" in r.stderr
    r = tool("branch", str(store), "--at", str(head + 5), str(tmp_path / "b"))
    assert r.returncode == 1 and "after the head" in r.stderr, r.stderr
    r = tool("branch", str(store), "--at", "0", str(store))
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = tool("branch", str(tmp_path / "none"), "--at", "0", str(tmp_path / "b"))
    assert r.returncode == 1
    r = tool("branch", "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: moraine branch STORE")
    # a branch into a store that exists is refused, and the first stays good
    r = tool("branch", str(store), "--at", "0", str(tmp_path / "b"))
    assert r.returncode == 0, r.stderr
    r = tool("branch", str(store), "--at", "0", str(tmp_path / "b"))
    assert r.returncode == 1 and "already holds a store" in r.stderr, r.stderr
    assert tool("verify", str(tmp_path / "b")).returncode == 0
    # a folder whose path has a character object paths escape serves and
    # verifies as ever, but is not branched
    odd = tmp_path / "odd ~#%"
    shutil.copytree(store, odd)
    assert tool("verify", str(odd)).returncode == 0
    r = tool("branch", str(odd), "--at", "0", str(tmp_path / "c"))
    assert r.returncode == 1 and "cannot be branched" in r.stderr, r.stderr


def test_branch_on_s3(tmp_path):
    """Two prefixes of one bucket (moto's S3): the branch serves the
    snapshot, the tools read it, and a branch into another bucket is refused."""
    import os
    import emulators
    emu = emulators.start("s3", tmp_path / "moto")
    env = {**os.environ, **emu.env}
    run = lambda *a: subprocess.run([MORAINE, *a], capture_output=True, text=True, timeout=120, env=env)
    try:
        source, branch = emu.url("source"), emu.url("branch")
        s = Server("--store", source, env=emu.env)
        try:
            duck = connect()
            attach(duck, s, tmp_path)
            duck.execute("CREATE TABLE lake.t (id BIGINT)")
            duck.execute("INSERT INTO lake.t SELECT range FROM range(20)")
            at = snapshot(duck)
            want = rows(duck, "lake.t")
            duck.execute("DELETE FROM lake.t WHERE id < 10")
            duck.close()
        finally:
            assert s.stop() == 0
        r = run("branch", source, "--at", str(at), branch)
        assert r.returncode == 0, r.stderr
        r = run("verify", branch)
        assert r.returncode == 0, r.stdout + r.stderr
        b = Server("--store", branch, env=emu.env)
        try:
            duck = connect()
            attach(duck, b, tmp_path)
            assert rows(duck, "lake.t") == want
            duck.execute("INSERT INTO lake.t VALUES (100)")
            duck.close()
        finally:
            assert b.stop() == 0
        r = run("branch", source, "--at", str(at), "s3://another-bucket/branch")
        assert r.returncode == 1 and "one object store" in r.stderr, r.stderr
    finally:
        emu.stop()
