"""Start time and memory of a server as a catalog's history grows (issue 13).

The current catalog is fixed: N tables with F data files each. History is
H snapshots, each of which replaced one data file (the old version ends,
a new one begins), so the store holds H old snapshots and H ended file
versions, with their column stats, on top of the same current state. The catalogs are written as
rows (synthetic.py) and loaded with `moraine import`; DuckLake could not
make 100,000 commits here in reasonable time.

For each history size and each --load-history mode (on-demand, the
default; all, every snapshot and ended file at start as before) it prints:
cold start (spawn -> ready line, median; it includes opening the store,
whose cost depends on how its LSM happens to be laid out after the import,
and right after one on the thousands of objects SlateDB keeps for 15
minutes: --settle-minutes measures the stores as they stay),
the catalog load alone with the rows it materialized and the store keys it
read (the server's "opened catalog" line), the server's RSS when ready, the
first ATTACH + count(*) of one table (which loads that table's ended files:
the postgres extension scans files by table and begin snapshot only), the
first time-travel query on it, and the RSS after them.

    .venv/bin/python bench/history.py     # 100 current files; H = 100 / 1,000 / 10,000
    .venv/bin/python bench/history.py --sizes 1000,10000 --tables 50
    .venv/bin/python bench/history.py --resident-snapshots 100
    .venv/bin/python bench/history.py --settle-minutes 17 --starts 9   # stores as they stay

`moraine import` replays the history commit by commit (about 14 ms a
snapshot here), so building the largest catalog dominates the run.
"""
import argparse
import pathlib
import re
import statistics
import subprocess
import tempfile
import time

from catalogs import MORAINE, connect
from synthetic import build_file_catalog, load_into_moraine

COLUMNS = "id BIGINT, a INTEGER, b VARCHAR"
READY = re.compile(r"^moraine: serving \S+ on (\S+):(\d+)$")
OPENED = re.compile(r"opened catalog \"lake\": (\d+) rows in (\d+) ms, (\d+) store keys read")


def add_history(file, n, f, h):
    """Snapshots 4 .. 3 + h; snapshot 4 + i replaces file slot i mod n*f."""
    con = connect()
    con.execute(f"ATTACH '{file}' AS m")
    q = con.execute
    slots = n * f
    (sv, ncat) = q("SELECT schema_version, next_catalog_id FROM m.ducklake_snapshot "
                   "WHERE snapshot_id = 3").fetchone()
    q("BEGIN")
    q(f"""INSERT INTO m.ducklake_snapshot
          SELECT 4 + i, now(), {sv}, {ncat}, {slots} + i + 1 FROM range(0, {h}) r(i)""")
    q(f"""INSERT INTO m.ducklake_snapshot_changes
          SELECT 4 + i, 'inserted_into_table:1', NULL, NULL, NULL FROM range(0, {h}) r(i)""")
    # slot of file j*f + k is k*n + j; its first replacement is at 4 + slot
    q(f"""INSERT INTO m.ducklake_data_file
          SELECT d.* REPLACE ({slots} + i AS data_file_id, 4 + i AS begin_snapshot,
                            CASE WHEN i + {slots} < {h} THEN 4 + i + {slots} END AS end_snapshot)
          FROM range(0, {h}) r(i)
          JOIN m.ducklake_data_file d ON d.data_file_id = (i % {n}) * {f} + (i // {n}) % {f}""")
    q(f"""UPDATE m.ducklake_data_file SET end_snapshot = 4 + (data_file_id % {f}) * {n}
                                                         + data_file_id // {f}
          WHERE data_file_id < {slots} AND (data_file_id % {f}) * {n} + data_file_id // {f} < {h}""")
    # every file, current or ended, has column stats as DuckLake writes them
    # (the template's): ended files' stats stay current keys until GC
    q("""INSERT INTO m.ducklake_file_column_stats
          SELECT s.* REPLACE (d.data_file_id AS data_file_id, d.table_id AS table_id)
          FROM m.ducklake_data_file d, m.ducklake_file_column_stats s
          WHERE s.data_file_id = 0 AND d.data_file_id <> 0""")
    q("COMMIT")
    con.close()


def rss_mib(pid):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


RESIDENT = []  # extra serve arguments: --resident-snapshots N when asked


def start(store, mode):
    t0 = time.perf_counter()
    p = subprocess.Popen([MORAINE, "serve", "--store", store, "--listen", "127.0.0.1:0",
                          "--load-history", mode] + RESIDENT, stderr=subprocess.PIPE, text=True)
    opened = None
    for line in p.stderr:
        opened = OPENED.search(line) or opened
        m = READY.match(line.rstrip("\n"))
        if m:
            return p, time.perf_counter() - t0, int(m.group(2)), opened
    raise RuntimeError("moraine did not become ready")


def stop(p):
    p.terminate()
    p.wait(timeout=60)


def measure(store, data, mode, starts):
    times = []
    for _ in range(starts - 1):
        p, t, _, _ = start(store, mode)
        times.append(t)
        stop(p)
    p, t, port, opened = start(store, mode)
    load = tuple(int(x) for x in opened.groups()) if opened else (0, 0, 0)
    times.append(t)
    ready_rss = rss_mib(p.pid)
    con = connect()
    t0 = time.perf_counter()
    con.execute(f"ATTACH 'ducklake:postgres:host=127.0.0.1 port={port} dbname=lake user=m' "
                f"AS lake (DATA_PATH '{data}')")
    con.execute("SELECT count(*) FROM lake.s0.t0").fetchall()
    attach_q = time.perf_counter() - t0
    t0 = time.perf_counter()
    con.execute("SELECT count(*) FROM lake.s0.t0 AT (VERSION => 5)").fetchall()
    travel = time.perf_counter() - t0
    con.close()
    after_rss = rss_mib(p.pid)
    stop(p)
    return statistics.median(times), ready_rss, attach_q, travel, after_rss, load


def settle(stores, minutes):
    """Serves every store for `minutes` (one server each, no clients), with a
    progress line a minute, then stops them."""
    servers = [subprocess.Popen([MORAINE, "serve", "--store", store, "--listen", "127.0.0.1:0"],
                                stderr=subprocess.DEVNULL) for _, store, _ in stores]
    end = time.monotonic() + minutes * 60
    while (left := end - time.monotonic()) > 0:
        print(f"settling: {left / 60:.1f} min left", flush=True)
        time.sleep(min(60, left))
    for p in servers:
        stop(p)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100,1000,10000", help="history sizes (snapshots)")
    ap.add_argument("--tables", type=int, default=10)
    ap.add_argument("--files", type=int, default=10, help="current data files per table")
    ap.add_argument("--starts", type=int, default=3, help="cold starts per point (median)")
    ap.add_argument("--resident-snapshots", type=int,
                    help="the server's resident snapshot tail (default: the server's, 1000)")
    ap.add_argument("--settle-minutes", type=float, default=0,
                    help="serve every imported store this long before measuring, so that "
                         "SlateDB's collector takes the import's garbage (its compaction "
                         "checkpoints pin it for 15 minutes); 0: measure at once")
    a = ap.parse_args()
    if a.resident_snapshots is not None:
        RESIDENT.extend(["--resident-snapshots", str(a.resident_snapshots)])
    sizes = [int(s) for s in a.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="moraine-history-") as tmp:
        stores = []
        for h in sizes:
            folder = pathlib.Path(tmp) / f"h{h}"
            folder.mkdir()
            file, data = build_file_catalog(folder, a.tables, a.files, COLUMNS, 4)
            add_history(file, a.tables, a.files, h)
            store = "file://" + str(folder / "store")
            secs = load_into_moraine(file, store)
            print(f"history {h}: catalog imported in {secs:.1f} s", flush=True)
            stores.append((h, store, data))
        if a.settle_minutes > 0:
            settle(stores, a.settle_minutes)
        for h, store, data in stores:
            print(f"history {h}:", flush=True)
            for mode in ("on-demand", "all"):
                r = measure(store, data, mode, a.starts)
                rows.append((h, mode) + r)
                print(f"  {mode}: start {r[0]*1000:.0f} ms, RSS {r[1]:.0f} MiB", flush=True)
    base = {m: next(r for r in rows if r[1] == m) for m in ("on-demand", "all")}
    print(f"\n{a.tables} tables x {a.files} current files; history = snapshots = ended files\n")
    print("| history | mode | cold start ms | vs smallest | catalog load ms | rows loaded "
          "| store keys read | RSS ready MiB | vs smallest | ATTACH + count ms "
          "| first time travel ms | RSS after MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for h, mode, t, rss, aq, tt, rss2, (nrows, load_ms, keys) in rows:
        b = base[mode]
        print(f"| {h:,} | {mode} | {t*1000:.0f} | {t/b[2]:.2f}x | {load_ms} | {nrows:,} | {keys:,} "
              f"| {rss:.0f} | {rss/b[3]:.2f}x | {aq*1000:.0f} | {tt*1000:.0f} | {rss2:.0f} |")


if __name__ == "__main__":
    main()
