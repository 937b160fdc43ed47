#!/usr/bin/env python3
"""Soak benchmark: a catalog that lives long, then expires its history.

Built through DuckLake over the real server: one table, COMMITS single-row
INSERT commits (each inlined, one snapshot each), every PARQUET_EVERY-th
commit instead a 1000-row INSERT (one Parquet file). The same workload runs
against moraine on a local folder and, unless --only moraine, against a
throwaway PostgreSQL 15 cluster. Beyond COMMITS, up to --history snapshots,
moraine's history is grown through the store API (build/bench/store/
soak_history: snapshot records carrying no data change, written while the
server is stopped; DuckLake would need hours for 100,000 commits here), and
at each checkpoint the server is restarted and WINDOW more DuckLake commits
are measured.

Printed:
  - commit latency p50 / p99 over the WINDOW commits before each checkpoint
    (100, 1,000, 10,000, 100,000 snapshots, as far as COMMITS reaches), for
    single-row and for Parquet commits, and moraine's server RSS there;
  - moraine's store bytes (objects under its folder, `moraine info`) before
    expiry; right after ducklake_flush_inlined_data +
    ducklake_expire_snapshots(older_than => now()) +
    ducklake_cleanup_old_files(cleanup_all => true); and after GC_WAIT
    seconds of SlateDB merging and collecting (docs/operations.md "Space"
    says about 21 minutes) while the pipeline goes on with TRICKLE commits a
    second, against a fresh catalog holding the same live rows (one table,
    the same rows in one commit, after a clean stop). The commits made while
    waiting are live history of their own, so the two are compared per live
    byte: the store's object bytes over its live key + value bytes
    (`moraine census`), for each.

    .venv/bin/python bench/soak.py [--commits N] [--gc-wait S] [--only moraine]

MORAINE_BIN overrides build/src/cli/moraine; PG_BIN as in bench/catalogs.py.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import catalogs as C  # noqa: E402  (server wrappers, cleanup, PostgreSQL)

CHECKPOINTS = [100, 1000, 10000, 100000]


def info(store_dir):
    r = subprocess.run([C.MORAINE, "info", str(store_dir), "--json"], capture_output=True,
                       text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"moraine info: {r.stderr.strip()}")
    return json.loads(r.stdout)


def live_bytes(store_dir):
    """Key + value bytes of every live key (`moraine census`)."""
    r = subprocess.run([C.MORAINE, "census", str(store_dir), "--json"], capture_output=True,
                       text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"moraine census: {r.stderr.strip()}")
    return sum(v["bytes"] for v in json.loads(r.stdout)["subspaces"].values())


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    return None


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))] if xs else float("nan")


def commit(con, parquet, next_id):
    """One DuckLake commit of the workload: a 1000-row INSERT (one Parquet
    file) or a single-row one (inlined). Returns its ms and the next row id."""
    t0 = time.perf_counter()
    if parquet:
        con.execute(f"INSERT INTO lake.t SELECT {next_id} + range, 'p' FROM range(1000)")
        next_id += 1000
    else:
        con.execute(f"INSERT INTO lake.t VALUES ({next_id}, 'v')")
        next_id += 1
    return (time.perf_counter() - t0) * 1e3, next_id


def build(cat, con, args, progress):
    """Runs the commit workload; returns {checkpoint: row} and the rows held."""
    con.execute("CREATE TABLE lake.t (id BIGINT, v VARCHAR)")
    single, parquet, out, next_id = [], [], {}, 0
    t_start = time.monotonic()
    for i in range(1, args.commits + 1):
        is_pq = i % args.parquet_every == 0
        ms, next_id = commit(con, is_pq, next_id)
        (parquet if is_pq else single).append(ms)
        if i in CHECKPOINTS or i == args.commits:
            w1, w2 = single[-args.window:], parquet[-max(1, args.window // args.parquet_every):]
            out[i] = {"p50": pct(w1, 0.5), "p99": pct(w1, 0.99),
                      "pq_p50": pct(w2, 0.5), "pq_p99": pct(w2, 0.99),
                      "rss": progress(i) if progress else None}
        if i % 500 == 0:
            rate = i / (time.monotonic() - t_start)
            print(f"  {cat}: {i}/{args.commits} commits ({rate:.0f}/s)", file=sys.stderr, flush=True)
    return out, next_id


def grow(args, m, d, con, res, nrows):
    """Past COMMITS: history grown through the store API, then WINDOW DuckLake
    commits measured at each checkpoint. Returns the server and connection."""
    tool = os.environ.get("SOAK_HISTORY_BIN", str(C.ROOT / "build" / "bench" / "store" / "soak_history"))
    for cp in [c for c in CHECKPOINTS if args.commits < c <= args.history]:
        con.close()
        m.stop()
        target = cp - args.window
        print(f"  moraine: growing the history to {target:,} snapshots", file=sys.stderr, flush=True)
        table_id = "1"
        subprocess.run([str(tool), m.store, str(target), table_id], check=True, timeout=3600)
        start_ms = m.start()
        con = C.connect()
        con.execute(m.attach_sql(d / "data"))
        single, parquet = [], []
        for i in range(args.window):
            is_pq = i % args.parquet_every == args.parquet_every - 1
            ms, nrows = commit(con, is_pq, nrows)
            (parquet if is_pq else single).append(ms)
        res[cp] = {"p50": pct(single, 0.5), "p99": pct(single, 0.99),
                   "pq_p50": pct(parquet, 0.5), "pq_p99": pct(parquet, 0.99),
                   "rss": rss_mib(m.proc.pid), "start_ms": start_ms}
    return m, con, nrows


def store_at(args, d, name):
    """A Moraine server wrapper on a local folder, or on the S3 emulator."""
    m = C.Moraine(d / name)
    if args.emulator is not None:
        m.store = args.emulator.url(name)
    return m


def run_moraine(args, d):
    m = store_at(args, d, "store")
    m.start()
    con = C.connect()
    con.execute(m.attach_sql(d / "data"))
    res, nrows = build("moraine", con, args, lambda i: rss_mib(m.proc.pid))
    m, con, nrows = grow(args, m, d, con, res, nrows)
    space = {"before": info(m.store)["bytes"]}
    con.execute("CALL ducklake_flush_inlined_data('lake')")
    con.execute("CALL ducklake_expire_snapshots('lake', older_than => now())")
    con.execute("CALL ducklake_cleanup_old_files('lake', cleanup_all => true)")
    space["expired"] = info(m.store)["bytes"]
    # the pipeline goes on committing (TRICKLE a second) while SlateDB merges
    # the removals down and collects what they freed
    t0 = time.monotonic()
    next_print = 60
    while time.monotonic() - t0 < args.gc_wait:
        _, nrows = commit(con, False, nrows)
        time.sleep(1 / args.trickle)
        if time.monotonic() - t0 >= next_print:
            next_print += 60
            b = info(m.store)["bytes"]
            print(f"  moraine: {time.monotonic() - t0:.0f} s after expiry: {b:,} bytes",
                  file=sys.stderr, flush=True)
    space["after_gc"] = info(m.store)["bytes"]
    space["live"] = live_bytes(m.store)
    space["rss_end"] = rss_mib(m.proc.pid)
    assert con.execute("SELECT count(*) FROM lake.t").fetchone() == (nrows,)
    con.close()
    m.stop()

    fresh = store_at(args, d, "fresh")  # the same live rows, built in one commit
    fresh.start()
    con = C.connect()
    con.execute(fresh.attach_sql(d / "fresh-data"))
    con.execute("CREATE TABLE lake.t (id BIGINT, v VARCHAR)")
    con.execute(f"INSERT INTO lake.t SELECT range, 'v' FROM range({nrows})")
    con.close()
    fresh.stop()
    space["fresh"] = info(fresh.store)["bytes"]
    space["fresh_live"] = live_bytes(fresh.store)
    return res, space


def run_postgres(args, d):
    pg = C.Postgres()
    pg.start()
    con = C.connect()
    con.execute(pg.attach_sql(d / "pg-data"))
    res, _ = build("postgres", con, args, None)
    con.close()
    pg.stop()
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commits", type=int, default=3000)
    ap.add_argument("--window", type=int, default=100, help="commits per latency window")
    ap.add_argument("--parquet-every", type=int, default=50)
    ap.add_argument("--history", type=int, default=100000,
                    help="grow moraine's history to this many snapshots (store API)")
    ap.add_argument("--gc-wait", type=int, default=1320, help="seconds to wait for SlateDB GC")
    ap.add_argument("--trickle", type=float, default=0.5,
                    help="commits per second while waiting for GC")
    ap.add_argument("--only", default="moraine,postgres")
    ap.add_argument("--s3", action="store_true",
                    help="moraine's stores in the S3 emulator (moto) instead of a local folder")
    args = ap.parse_args()
    only = set(args.only.split(","))
    d = C.tempdir("bench-soak-")
    args.emulator = None
    if args.s3:
        sys.path.insert(0, str(C.ROOT / "tests" / "e2e"))
        import emulators
        args.emulator = emulators.start("s3", d)
        C.on_cleanup(args.emulator.stop)
        os.environ.update(args.emulator.env)  # for the server and `moraine info`
    try:
        pg = run_postgres(args, d) if "postgres" in only else {}
        mo, space = run_moraine(args, d)
    finally:
        C.cleanup_all()
    where = "the S3 emulator" if args.s3 else "a local folder"
    print(f"\nsoak on {where}: {args.commits} commits (every {args.parquet_every}th a 1000-row Parquet commit), "
          f"latency over the last {args.window} single-row commits before each point, ms; "
          f"load average {os.getloadavg()[0]:.1f}\n")
    print("| snapshots | moraine p50 / p99 | moraine Parquet p50 / p99 | moraine RSS MiB "
          "| moraine start ms | PostgreSQL p50 / p99 | PostgreSQL Parquet p50 / p99 | p50 ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for n, r in sorted(mo.items()):
        p = pg.get(n)
        pgc = f"{p['p50']:.1f} / {p['p99']:.1f}" if p else "—"
        pgq = f"{p['pq_p50']:.1f} / {p['pq_p99']:.1f}" if p else "—"
        ratio = f"{r['p50'] / p['p50']:.2f}x" if p else "—"
        start = f"{r['start_ms']:.0f}" if r.get("start_ms") else "—"
        print(f"| {n:,} | {r['p50']:.1f} / {r['p99']:.1f} | {r['pq_p50']:.1f} / {r['pq_p99']:.1f} "
              f"| {r['rss']} | {start} | {pgc} | {pgq} | {ratio} |")
    print(f"\nmoraine store bytes: before expiry {space['before']:,}; right after flush + expiry + "
          f"cleanup {space['expired']:,}; {args.gc_wait} s later {space['after_gc']:,}; a fresh "
          f"catalog with the same live rows {space['fresh']:,} "
          f"({space['after_gc'] / space['fresh']:.2f}x); server RSS at the end {space['rss_end']} MiB")
    print(f"live keys + values (census): expired catalog {space['live']:,} (its objects hold "
          f"{space['after_gc'] / space['live']:.2f}x that), fresh catalog {space['fresh_live']:,} "
          f"({space['fresh'] / space['fresh_live']:.2f}x)")


if __name__ == "__main__":
    main()
