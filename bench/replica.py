#!/usr/bin/env python3
"""Read replica benchmark: how far behind the writer a `serve --replica`
is, and what replicas add to read throughput.

    lag         single-row DuckLake INSERT commits on the writer, one at a
                time; for each, the time from the commit's acknowledgement
                until the replica's catalog holds its snapshot (polled over
                a plain PostgreSQL connection every 1 ms). p50 / p99 / max,
                on a local folder and on the S3 emulator (moto), with the
                default --follow-interval (100 ms) and with 10 ms.
    reads       READERS DuckDB + DuckLake clients, each attached to one
                server (round robin), repeating a point query and a
                time-travel query for SECONDS; queries/s with the writer
                alone serving them, and with 1, 2 and 4 replicas.

    .venv/bin/python bench/replica.py [--commits N] [--readers N] [--seconds S]
                                      [--only lag,reads]

Prints Markdown tables (BENCHMARK.md, "Read replicas"), with the load
average: every server, client and the emulator share this machine's cores.
"""
import argparse
import os
import pathlib
import shlex
import statistics
import sys
import tempfile
import threading
import time

import psycopg

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / "bench"))
import emulators  # noqa: E402
from objstore import Moraine, loadavg, pct  # noqa: E402


def replica_head(pg):
    return pg.execute("SELECT max(snapshot_id) FROM ducklake_snapshot").fetchone()[0]


def wait_catalog(server, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with psycopg.connect(f"host=127.0.0.1 port={server.port} dbname=lake user=moraine",
                                 autocommit=True) as pg:
                if replica_head(pg) is not None:
                    return
        except psycopg.Error:
            pass
        time.sleep(0.05)
    raise RuntimeError("the replica never loaded the catalog")


def measure_lag(store, env, data, commits, follow_ms):
    writer = Moraine(store, env)
    replica = None
    try:
        duck = writer.attach(data)
        duck.execute("CREATE TABLE lake.t (id BIGINT, v VARCHAR)")
        replica = Moraine(store, env, ("--replica", "--follow-interval", str(follow_ms)))
        wait_catalog(replica)
        pg = psycopg.connect(f"host=127.0.0.1 port={replica.port} dbname=lake user=moraine",
                             autocommit=True)
        lags = []
        for i in range(commits):
            duck.execute(f"INSERT INTO lake.t VALUES ({i}, 'v{i}')")
            t0 = time.perf_counter()
            want = duck.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
            while (replica_head(pg) or 0) < want:
                time.sleep(0.001)
            lags.append((time.perf_counter() - t0) * 1000)
        pg.close()
        duck.close()
        return lags
    finally:
        for s in (replica, writer):
            if s:
                s.stop()


def measure_reads(store, data, replicas, readers, seconds, extra=()):
    writer = Moraine(store, None, tuple(extra))
    reps = []
    try:
        duck = writer.attach(data)
        duck.execute("CREATE TABLE IF NOT EXISTS lake.t (id BIGINT, v VARCHAR)")
        for i in range(20):
            duck.execute(f"INSERT INTO lake.t VALUES ({i}, 'v{i}')")
        duck.close()
        reps = [Moraine(store, None, ("--replica", *extra)) for _ in range(replicas)]
        for r in reps:
            wait_catalog(r)
        servers = reps or [writer]
        counts = [0] * readers
        start = threading.Barrier(readers + 1)
        stop = threading.Event()

        def reader(n):
            con = servers[n % len(servers)].attach(data)
            start.wait()
            while not stop.is_set():
                con.execute("SELECT v FROM lake.t WHERE id = 7").fetchall()
                con.execute("SELECT count(*) FROM lake.t AT (VERSION => 5)").fetchall()
                counts[n] += 2
            con.close()

        threads = [threading.Thread(target=reader, args=(n,)) for n in range(readers)]
        for t in threads:
            t.start()
        start.wait()
        time.sleep(seconds)
        stop.set()
        for t in threads:
            t.join()
        return sum(counts) / seconds
    finally:
        for s in reps + [writer]:
            s.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commits", type=int, default=100)
    ap.add_argument("--readers", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--only", default="lag,reads")
    ap.add_argument("--moraine-args", default="",
                    help="more `moraine serve` arguments for the reads servers, e.g. "
                         "\"--result-cache-mib 0\"")
    a = ap.parse_args()
    only = set(a.only.split(","))
    work = pathlib.Path(tempfile.mkdtemp(prefix="moraine-bench-replica-"))
    print(f"# read replicas ({time.strftime('%Y-%m-%d')}, load average {loadavg()})\n")
    if "lag" in only:
        print("| store | --follow-interval | commits | lag p50 ms | p99 ms | max ms |")
        print("|---|---|---|---|---|---|")
        emu = emulators.start("s3", work / "moto")
        try:
            for name, store, env in (("local folder", None, None), ("S3 emulator", "s3", emu.env)):
                for follow in (100, 10):
                    tag = f"{name.split()[0]}-{follow}"
                    url = emu.url(f"lag-{tag}") if store == "s3" else f"file://{work}/lag-{tag}"
                    lags = measure_lag(url, env, work / f"data-{tag}", a.commits, follow)
                    print(f"| {name} | {follow} | {len(lags)} | {statistics.median(lags):.1f} | "
                          f"{pct(lags, 99):.1f} | {max(lags):.1f} |", flush=True)
        finally:
            emu.stop()
        print()
    if "reads" in only:
        print(f"| servers answering | readers | queries/s | vs writer alone |")
        print("|---|---|---|---|")
        base = None
        for replicas in (0, 1, 2, 4):
            qps = measure_reads(f"file://{work}/reads-{replicas}", work / f"rdata-{replicas}",
                                replicas, a.readers, a.seconds, shlex.split(a.moraine_args))
            base = base or qps
            label = "writer alone" if replicas == 0 else f"{replicas} replica(s)"
            print(f"| {label} | {a.readers} | {qps:.0f} | {qps / base:.2f}x |", flush=True)
        print()
    print(f"load average after: {loadavg()}")


if __name__ == "__main__":
    main()
