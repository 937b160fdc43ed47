#!/usr/bin/env python3
"""Where a DuckLake workload spends moraine's server time, statement by statement.

Starts `moraine serve --log-min-duration 0 --log-commit-phases` on a fresh
folder store, runs one DuckLake workload against it from a real DuckDB +
DuckLake client, and reads the server's own log back: every message it
handled after the warm-up, grouped by statement shape (the SQL with its
numbers replaced by N), with how many ran per unit of work, the median
server time of each, and each shape's share of the server time. For
commits it also prints the median of each commit phase.

    workloads
      commit      single-row INSERT commits on one table (a unit: one commit)
      typed       the same on a table of DOUBLE, TIMESTAMP, DATE and DECIMAL
                  columns too, whose inlined values the commit's load-back
                  check casts (a unit: one commit)
      bulk        1000-row INSERT commits, each one Parquet file (a unit: one
                  commit)
      attach      a fresh DuckDB connection: ATTACH + SELECT count(*) (a unit:
                  one attach and its first query)
      timetravel  SELECT count(*) ... AT (VERSION => k) on a warm connection
      writers     --writers DuckDB connections committing on one table at once
                  (a unit: one commit that landed); prints the commits that
                  DuckLake gave up on and the last error of each

    .venv/bin/python bench/statements.py commit [--n 200]
    .venv/bin/python bench/statements.py writers --writers 16 --n 20

The client-side latency printed next to it is the median of the units; the
gap between the two is the client's own work and the wakeups in between.
MORAINE_BIN overrides build/src/cli/moraine. Exits 1 with a reason on stderr
if the server does not start or the workload fails.
"""
import argparse
import collections
import re
import shlex
import statistics
import sys
import threading
import time

from catalogs import Moraine, connect, tempdir

LINE = re.compile(r"connection (\d+): (statement|sync|bind|settle)(?: \('.'\))? took ([\d.]+) ms(?:: (.*))?$")
PHASES = re.compile(r"commit of (\d+) rows: lock wait ([\d.]+) ms, map ([\d.]+) ms, "
                    r"store write ([\d.]+) ms, engine commit ([\d.]+) ms, total ([\d.]+) ms")
MARK = "=== statements.py: measured workload starts"


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def run(args, srv, folder):
    """Runs the workload; returns (units, client latencies in ms, notes)."""
    attach = srv.attach_sql(folder / "data")
    con = connect()
    con.execute(attach)
    typed = args.workload == "typed"
    if typed:
        con.execute("CREATE TABLE lake.t (a INTEGER, b VARCHAR, c DOUBLE, d TIMESTAMP, e DATE, "
                    "f DECIMAL(18,3), g DOUBLE)")
    else:
        con.execute("CREATE TABLE lake.t (a INTEGER, b VARCHAR)")

    def row(i, b):
        if typed:
            return (f"({i}, '{b}', {i}.25, TIMESTAMP '2026-12-08 10:00:00' + INTERVAL {i} SECOND, "
                    f"DATE '2026-12-08' + {i % 300}, {i}.125, -{i}.5)")
        return f"({i}, '{b}')"

    for i in range(20):  # warm-up: the server's statement caches, DuckLake's own
        con.execute(f"INSERT INTO lake.t VALUES {row(i, 'warm')}")
    lat, notes = [], []
    if args.workload in ("commit", "typed"):
        srv.log_mark(MARK)
        lat = [timed(lambda i=i: con.execute(f"INSERT INTO lake.t VALUES {row(i, 'x')}"))
               for i in range(args.n)]
        return args.n, lat, notes
    if args.workload == "bulk":
        srv.log_mark(MARK)
        lat = [timed(lambda: con.execute("INSERT INTO lake.t SELECT i, 'bulk' FROM range(1000) r(i)"))
               for _ in range(args.n)]
        return args.n, lat, notes
    if args.workload == "timetravel":
        srv.log_mark(MARK)
        lat = [timed(lambda i=i: con.execute(
            f"SELECT count(*) FROM lake.t AT (VERSION => {2 + i % 18})").fetchall())
            for i in range(args.n)]
        return args.n, lat, notes
    con.close()
    if args.workload == "attach":
        srv.log_mark(MARK)
        for _ in range(args.n):
            c = connect()
            lat.append(timed(lambda: (c.execute(attach),
                                      c.execute("SELECT count(*) FROM lake.t").fetchall())))
            c.close()
        return args.n, lat, notes
    # writers: each its own DuckDB instance, all on lake.t
    cons = []
    for _ in range(args.writers):
        c = connect()
        c.execute(attach)
        cons.append(c)
    srv.log_mark(MARK)
    landed, lock = [0], threading.Lock()

    def writer(k, c):
        for i in range(args.n):
            try:
                lat_ms = timed(lambda: c.execute(f"INSERT INTO lake.t VALUES ({i}, 'w{k}')"))
                with lock:
                    landed[0] += 1
                    lat.append(lat_ms)
            except Exception as e:  # DuckLake gave up after its retries
                with lock:
                    notes.append(f"writer {k}: gave up: ...{str(e)[-160:]!r}")

    threads = [threading.Thread(target=writer, args=(k, c)) for k, c in enumerate(cons)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in cons:
        c.close()
    notes.insert(0, f"{landed[0]} commits landed, {len(notes)} given up")
    return landed[0], lat, notes


def report(log_path, units, lat, notes):
    text = log_path.read_text()
    if MARK not in text:
        sys.exit("statements.py: the server log lost its mark")
    shapes = collections.OrderedDict()
    phases = []
    for line in text.split(MARK + "\n", 1)[1].splitlines():
        m = LINE.search(line)
        if m:
            what = m.group(4) or f"({m.group(2)})"
            shape = re.sub(r"\s+", " ", re.sub(r"\d+", "N", what)).strip()[:100]
            shapes.setdefault(shape, []).append(float(m.group(3)))
            continue
        p = PHASES.search(line)
        if p:
            phases.append([float(x) for x in p.groups()[1:]])
    total = sum(sum(v) for v in shapes.values())
    print(f"units: {units}; client latency p50 {statistics.median(lat):.2f} ms; "
          f"server time per unit {total / max(units, 1):.3f} ms (sum over messages)")
    print()
    print("| per unit | median ms | share | statement |")
    print("|---|---|---|---|")
    for shape, v in sorted(shapes.items(), key=lambda kv: -sum(kv[1])):
        print(f"| {len(v) / max(units, 1):.2f} | {statistics.median(v):.3f} | "
              f"{100 * sum(v) / total:.1f}% | `{shape.replace('|', '/')}` |")
    if phases:
        names = ["lock wait", "map", "store write", "engine commit", "total"]
        cols = list(zip(*phases))
        print()
        print(f"commit phases, median of {len(phases)}: " +
              ", ".join(f"{n} {statistics.median(c):.3f} ms" for n, c in zip(names, cols)))
    for n in notes:
        print(n)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("workload", choices=["commit", "typed", "bulk", "attach", "timetravel", "writers"])
    ap.add_argument("--n", type=int, default=200, help="units (per writer for writers)")
    ap.add_argument("--writers", type=int, default=16)
    ap.add_argument("--moraine-args", default="",
                    help="more `moraine serve` arguments, e.g. \"--result-cache-mib 0\"")
    args = ap.parse_args()
    folder = tempdir("moraine-statements-")
    log_path = folder / "server.log"
    srv = Moraine(folder / "store", ["--log-min-duration", "0", "--log-commit-phases"]
                  + shlex.split(args.moraine_args), log_path)
    try:
        srv.start()
        units, lat, notes = run(args, srv, folder)
    except Exception as e:  # duckdb.Error, a server that never got ready: one line
        sys.exit(f"statements.py: the {args.workload} workload failed: {e}")
    finally:
        time.sleep(0.2)
        srv.stop()
    if not lat:
        sys.exit("statements.py: no unit of the workload completed")
    report(log_path, units, lat, notes)


if __name__ == "__main__":
    main()
