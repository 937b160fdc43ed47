#!/usr/bin/env python3
"""Scale benchmark: moraine and PostgreSQL 15 as DuckLake catalogs of 1,
1,000 and 10,000 tables (the last with a million data files), side by side.

Per size N, each catalog is built through DuckDB + DuckLake over the wire:
20 schemas, N tables of 10 columns (integer, text, decimal, temporal,
interval, list and struct types) spread over them, created BATCH tables per
transaction, then one seed row inserted into every table (BATCH tables per
transaction; DuckLake inlines the rows, so every table also gets its
inlined-data table in the catalog). Sizes from --synthetic-from up (default
10,000) are instead written as rows (bench/synthetic.py): N tables of the
same columns with --files Parquet files each (default 100: a million files
at 10,000 tables), loaded into moraine by `moraine import` (the store API)
and into PostgreSQL through the postgres extension; their "build" row is
that load. Then measured:

    commit      COMMITS single-row INSERTs, each its own transaction, spread
                over the tables (a stride through them); p50 / p95, and p50
                of the first and last 10% (does it grow as the catalog grows?)
    attach      fresh DuckDB connection (extensions loaded) + ATTACH, median
    attach+q    the same + SELECT count(*) of one table
    time travel fresh connection + ATTACH, then the first
                SELECT count(*) ... AT (VERSION => k): that query's time
    cold start  moraine only: spawn -> ready line on the built store, median
    rss idle    moraine only: VmRSS of the restarted server, ready and idle
    client CPU  CPU time of the client thread that runs a commit, ATTACH +
                count and the first time travel, median: a floor under each
                latency that no catalog server can remove (bench/catalogs.py)

The catalogs' phases are interleaved round-robin so background load hits
both alike. Everything runs on loopback in temp dirs removed at the end.

    .venv/bin/python bench/scale.py [--sizes 1,1000,10000] [--commits 200] [--files 100]
                                    [--synthetic-commits 20]
    make bench-scale

MORAINE_BIN overrides build/src/cli/moraine; PG_BIN the PostgreSQL 15 bin
folder (see bench/catalogs.py, whose catalog drivers this reuses).
"""
import argparse
import math
import os
import pathlib
import platform
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import catalogs  # noqa: E402  (catalog drivers, temp dirs, cleanup)
import synthetic  # noqa: E402  (catalogs written as rows, for the large sizes)
from catalogs import Moraine, Postgres, cpu_ms, ms, pct, tempdir  # noqa: E402

import duckdb  # noqa: E402

SCHEMAS = 20
COLUMNS = ("id BIGINT, name VARCHAR, amount DECIMAL(18,3), ratio DOUBLE, day DATE, "
           "ts TIMESTAMP, span INTERVAL, tags VARCHAR[], attrs STRUCT(k VARCHAR, v INTEGER), "
           "flag BOOLEAN")


def row(i):
    return (f"({i}, 'name {i}', {i}.125, {i} / 7.0, DATE '2024-01-01' + {i % 365}, "
            f"TIMESTAMP '2024-01-01 00:00:00' + INTERVAL {i} SECOND, INTERVAL {i % 50} MINUTE, "
            f"['a{i}', 'b'], {{'k': 'k{i}', 'v': {i}}}, {str(i % 2 == 0).lower()})")


def table_name(j):
    return f"lake.s{j % SCHEMAS}.t{j}"


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None


def build(con, n, batch):
    """Schemas, N tables, one seed row each; returns the build seconds."""
    t0 = time.perf_counter()
    con.execute("BEGIN")
    for s in range(SCHEMAS):
        con.execute(f"CREATE SCHEMA IF NOT EXISTS lake.s{s}")
    con.execute("COMMIT")
    for lo in range(0, n, batch):
        con.execute("BEGIN")
        for j in range(lo, min(n, lo + batch)):
            con.execute(f"CREATE TABLE {table_name(j)}({COLUMNS})")
        con.execute("COMMIT")
    for lo in range(0, n, batch):
        con.execute("BEGIN")
        for j in range(lo, min(n, lo + batch)):
            con.execute(f"INSERT INTO {table_name(j)} VALUES {row(j)}")
        con.execute("COMMIT")
    return time.perf_counter() - t0


def stride(n):
    """A step coprime with n: i * step % n visits every table, spread out."""
    return next(s for s in (7919, 104729, 13, 7, 1) if math.gcd(s, n) == 1)


def run_size(n, args):
    names = args.only
    cats, data = {}, {}
    synth = n >= args.synthetic_from
    for name in names:
        work = tempdir(f"bench-scale-{name}-")
        cats[name] = Moraine(work / "store") if name == "moraine" else Postgres()
        data[name] = work / "data"
    res = {name: {} for name in names}
    rows0 = 1  # rows of table 0 before the measured commits
    # the DuckLake client's memory grows by hundreds of MB per commit on a
    # catalog of a million files (100 commits ran it past 20 GB), on either
    # catalog: fewer measured commits there
    commits = min(args.commits, args.synthetic_commits) if synth else args.commits
    if synth:
        t0 = time.perf_counter()
        src, sdata = synthetic.build_file_catalog(tempdir("bench-scale-synthetic-"), n,
                                                  args.files, COLUMNS, SCHEMAS)
        print(f"size {n}: synthetic catalog written in {ms(t0) / 1000:.1f}s", file=sys.stderr)
        rows0 = args.files
        for name in names:
            data[name] = sdata
            if name == "moraine":
                res[name]["build_s"] = synthetic.load_into_moraine(src, cats[name].store)

    def rr(i):
        k = i % len(names)
        return names[k:] + names[:k]

    for name in names:
        cats[name].start()
    try:
        cons = {}
        for name in names:
            if synth and name == "postgres":
                dsn = cats[name].attach_sql(data[name]).split("'")[1][len("ducklake:postgres:"):]
                res[name]["build_s"] = synthetic.load_into_postgres(src, dsn, data[name])
            con = catalogs.open_con(None)
            con.execute(cats[name].attach_sql(data[name]))
            if not synth:
                res[name]["build_s"] = build(con, n, args.batch)
            cons[name] = con
        lat = {name: [] for name in names}
        cpu = {name: [] for name in names}
        step = stride(n)
        for i in range(commits):
            j = (i * step) % n
            for name in rr(i):
                c0, t0 = time.thread_time(), time.perf_counter()
                cons[name].execute(f"INSERT INTO {table_name(j)} VALUES {row(n + i)}")
                lat[name].append(ms(t0))
                cpu[name].append(cpu_ms(c0))
        tenth = max(1, commits // 10)
        for name in names:
            snaps = [r[0] for r in cons[name].execute(
                "SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall()]
            cons.pop(name).close()
            r, xs = res[name], lat[name]
            r["commit_p50"], r["commit_p95"] = pct(xs, 50), pct(xs, 95)
            r["commit_first"], r["commit_last"] = pct(xs[:tenth], 50), pct(xs[-tenth:], 50)
            r["commit_cpu"] = pct(cpu[name], 50)
            r["snapshots"] = len(snaps)
            # time travel to the snapshot before the measured commits
            r["tt_version"] = snaps[-commits - 1]

        att, attq, tt, attq_cpu, tt_cpu = ({name: [] for name in names} for _ in range(5))
        for i in range(args.attach_n):
            for name in rr(i):
                con = catalogs.open_con(None)
                c0, t0 = time.thread_time(), time.perf_counter()
                con.execute(cats[name].attach_sql(data[name]))
                att[name].append(ms(t0))
                cnt = con.execute(f"SELECT count(*) FROM {table_name(0)}").fetchone()[0]
                attq[name].append(ms(t0))
                attq_cpu[name].append(cpu_ms(c0))
                con.close()
                assert cnt >= 1, (name, cnt)
                con = catalogs.open_con(None)
                con.execute(cats[name].attach_sql(data[name]))
                v = res[name]["tt_version"]
                c0, t0 = time.thread_time(), time.perf_counter()
                cnt = con.execute(f"SELECT count(*) FROM {table_name(0)} AT (VERSION => {v})").fetchone()[0]
                tt[name].append(ms(t0))
                tt_cpu[name].append(cpu_ms(c0))
                con.close()
                assert cnt == rows0, (name, v, cnt)
        for name in names:
            res[name]["attach"] = statistics.median(att[name])
            res[name]["attach_q"] = statistics.median(attq[name])
            res[name]["tt"] = statistics.median(tt[name])
            res[name]["attach_q_cpu"] = statistics.median(attq_cpu[name])
            res[name]["tt_cpu"] = statistics.median(tt_cpu[name])
    finally:
        for name in names:
            cats[name].stop()

    if "moraine" in cats:
        cat, cold, rss = cats["moraine"], [], []
        for _ in range(args.cold_n):
            cold.append(cat.start())
            time.sleep(1.0)  # idle: let start-up garbage settle
            rss.append(rss_kib(cat.proc.pid) / 1024)
            con = catalogs.open_con(None)  # ready means usable
            con.execute(cat.attach_sql(data["moraine"]))
            assert con.execute(f"SELECT count(*) FROM {table_name(0)}").fetchone()[0] >= 1
            con.close()
            cat.stop()
        res["moraine"]["cold"] = statistics.median(cold)
        res["moraine"]["rss"] = statistics.median(rss)
    return res


ROWS = [
    ("single-row commit p50 ms", "commit_p50"),
    ("single-row commit p95 ms", "commit_p95"),
    ("commit p50, first 10% ms", "commit_first"),
    ("commit p50, last 10% ms", "commit_last"),
    ("ATTACH ms (median)", "attach"),
    ("ATTACH + count(*) ms (median)", "attach_q"),
    ("first time travel after ATTACH ms (median)", "tt"),
    ("client CPU in a commit ms (median)", "commit_cpu"),
    ("client CPU in ATTACH + count(*) ms (median)", "attach_q_cpu"),
    ("client CPU in the first time travel ms (median)", "tt_cpu"),
    ("cold start spawn->ready ms (median)", "cold"),
    ("server RSS idle after restart MiB", "rss"),
    ("build (schemas, tables, seed rows) s; synthetic: load s", "build_s"),
]


def table(all_res, names):
    head = ["metric"]
    for n in all_res:
        head += [f"{c} @{n}" for c in names]
        if "moraine" in names and "postgres" in names:
            head.append(f"ratio @{n}")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, key in ROWS:
        cells = [label]
        for n, res in all_res.items():
            for c in names:
                v = res[c].get(key)
                cells.append("—" if v is None else f"{v:.1f}")
            if "moraine" in names and "postgres" in names:
                m, p = res["moraine"].get(key), res["postgres"].get(key)
                cells.append(f"{m / p:.2f}x" if m is not None and p else "—")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1,1000,10000")
    ap.add_argument("--commits", type=int, default=200)
    ap.add_argument("--batch", type=int, default=100, help="tables per build transaction")
    ap.add_argument("--attach-n", type=int, default=5)
    ap.add_argument("--cold-n", type=int, default=3)
    ap.add_argument("--only", default="moraine,postgres")
    ap.add_argument("--synthetic-from", type=int, default=10000,
                    help="sizes from this one up are written as rows (bench/synthetic.py)")
    ap.add_argument("--synthetic-commits", type=int, default=20,
                    help="measured commits at synthetic sizes (at most --commits)")
    ap.add_argument("--files", type=int, default=100,
                    help="data files per table in a synthetic catalog")
    args = ap.parse_args()
    args.only = [c for c in ("moraine", "postgres") if c in args.only.split(",")]
    if "moraine" in args.only and not os.access(catalogs.MORAINE, os.X_OK):
        sys.exit(f"{catalogs.MORAINE} missing: make build")
    if "postgres" in args.only and not (catalogs.PG_BIN / "initdb").exists():
        sys.exit(f"{catalogs.PG_BIN}/initdb missing (PG_BIN overrides)")
    t_start = time.perf_counter()
    load0 = os.getloadavg()[0]
    all_res = {}
    for n in [int(x) for x in args.sizes.split(",")]:
        all_res[n] = run_size(n, args)
        print(f"size {n}: done after {ms(t_start) / 1000:.0f}s", file=sys.stderr)
    load1 = os.getloadavg()[0]
    print(f"DuckDB {duckdb.__version__}, {os.cpu_count()} cores, {platform.machine()} "
          f"{platform.system()}; tables of 10 columns over {SCHEMAS} schemas, built "
          f"{args.batch} per transaction through DuckLake, one inlined seed row each; "
          f"{args.commits} measured single-row commits "
          f"({min(args.commits, args.synthetic_commits)} at synthetic sizes); "
          f"attach x{args.attach_n}, "
          f"cold start x{args.cold_n}; load average {load0:.1f} -> {load1:.1f}")
    if "postgres" in args.only:
        print(f"postgres: {Postgres().version()}, fsync on, synchronous_commit on")
    print(f"moraine: {catalogs.MORAINE}")
    print()
    print(table(all_res, args.only))
    print(f"\ntotal {ms(t_start) / 1000:.1f}s")


if __name__ == "__main__":
    try:
        main()
    finally:
        catalogs.cleanup_all()
