#!/usr/bin/env python3
"""Object-storage benchmark: what moraine asks of an object store, and how
fast it commits there, on the emulators of tests/e2e/emulators.py (moto's S3
server, fake-gcs-server, Azurite), started on loopback ports.

    requests    per cloud, through a counting HTTP proxy in front of the
                emulator: requests (PUT / GET / HEAD / LIST / DELETE / POST)
                and bytes up / down for
                  open      `moraine serve` on a new store, up to ready
                  idle      per second of an idle server (background work)
                  commit    per single-row DuckLake INSERT commit (COMMITS of
                            them, background included)
                  attach    a DuckDB client's ATTACH + first query
                  restart   `moraine serve` on the store holding those
                            commits, up to ready (open + catalog load)
    latency     single-row INSERT commits, p50 / p95 and commits/s, on a
                local folder and on the S3 emulator (no proxy): 1 writer,
                and 16 writers each on its own table
    cache       the S3 emulator with and without --cache-dir: restart time
                (spawn -> ready) and time travel (AT VERSION) median, after a
                first restart that fills the cache

    .venv/bin/python bench/objstore.py [--commits N] [--only requests,latency,cache]

Prints Markdown tables (BENCHMARK.md, "Object storage"). Load average is
printed with them: the emulators share the machine's two cores with moraine
and the clients, so absolute times are those of this machine, not a cloud's.
"""
import argparse
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
import emulators  # noqa: E402
from conftest import connect  # noqa: E402  (extensions from the venv, no downloads)

MORAINE = os.environ.get("MORAINE_BIN", str(ROOT / "build" / "src" / "cli" / "moraine"))
READY = re.compile(r"^moraine: serving (\S+) on (\S+):(\d+)$")
KINDS = ["PUT", "GET", "HEAD", "LIST", "DELETE", "POST"]


class Moraine:
    def __init__(self, store, env=None, args=()):
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            [MORAINE, "serve", "--listen", "127.0.0.1:0", "--store", store, *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env={**os.environ, **(env or {})})
        lines = []
        while True:
            line = self.proc.stderr.readline()
            if not line:
                raise RuntimeError(f"moraine did not start: {lines}")
            lines.append(line.rstrip())
            m = READY.match(lines[-1])
            if m:
                self.port = int(m.group(3))
                break
        self.start_ms = (time.perf_counter() - t0) * 1000
        # keep draining stderr so the server never blocks on a full pipe
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()

    def attach(self, data):
        con = connect()
        con.execute(f"ATTACH 'ducklake:postgres:host=127.0.0.1 port={self.port} dbname=lake "
                    f"user=moraine' AS lake (DATA_PATH '{data}/')")
        return con

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=60)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def loadavg():
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def commit_rows(con, table, n, start=0):
    """n single-row INSERT commits; their latencies in ms."""
    out = []
    for i in range(start, start + n):
        t0 = time.perf_counter()
        con.execute(f"INSERT INTO lake.{table} VALUES ({i}, 'v{i}')")
        out.append((time.perf_counter() - t0) * 1000)
    return out


# ---- requests ----------------------------------------------------------------

def measure_requests(kind, commits, work):
    emu = emulators.start(kind, work / f"emu-{kind}")
    proxy = emulators.CountingProxy(emu.front_port)
    env = emu.env_for(proxy.endpoint)
    store = emu.url("bench")
    data = work / f"data-{kind}"
    out = {}
    try:
        srv = Moraine(store, env)
        out["open"] = proxy.counts.snapshot()
        con = srv.attach(data)
        con.execute("CREATE TABLE lake.t (a INTEGER, b VARCHAR)")
        commit_rows(con, "t", 5)
        proxy.counts.reset()
        idle_s = 10
        time.sleep(idle_s)
        req, up, down = proxy.counts.snapshot()
        out["idle"] = ({k: v / idle_s for k, v in req.items()}, up / idle_s, down / idle_s)
        proxy.counts.reset()
        commit_rows(con, "t", commits, start=5)
        req, up, down = proxy.counts.snapshot()
        out["commit"] = ({k: v / commits for k, v in req.items()}, up / commits, down / commits)
        con.close()
        proxy.counts.reset()
        con = srv.attach(data)
        con.execute("SELECT count(*) FROM lake.t").fetchall()
        out["attach"] = proxy.counts.snapshot()
        con.close()
        srv.stop()
        proxy.counts.reset()
        srv = Moraine(store, env)
        out["restart"] = proxy.counts.snapshot()
        srv.stop()
    finally:
        proxy.stop()
        emu.stop()
    return out


def fmt_counts(c):
    req, up, down = c
    cells = [f"{req.get(k, 0):.2f}".rstrip("0").rstrip(".") for k in KINDS]
    return cells + [f"{up:,.0f}", f"{down:,.0f}"]


# S3 Standard request prices (us-east-1, per 1,000 requests): PUT, COPY, POST
# and LIST $0.005; GET, HEAD and all other requests $0.0004; DELETE free.
PRICE_TIER1 = 0.005 / 1000
PRICE_TIER2 = 0.0004 / 1000
MONTH_S = 30 * 24 * 3600


def monthly_cost(per_commit, idle_per_s):
    """One commit per second for 30 days, in S3 request charges: the
    commit's own writes (its PUT / POST; the reads in the per-commit row are
    the background work that ran meanwhile) plus an idle server's background
    requests, which go on every second whatever the commit rate."""
    def cost(req, kinds1, kinds2):
        t1 = sum(req.get(k, 0) for k in kinds1)
        t2 = sum(req.get(k, 0) for k in kinds2)
        return (t1 * PRICE_TIER1 + t2 * PRICE_TIER2) * MONTH_S
    return (cost(per_commit[0], ("PUT", "POST"), ()),
            cost(idle_per_s[0], ("PUT", "POST", "LIST"), ("GET", "HEAD")))


def requests_phase(args, work):
    print(f"\n### Requests per operation (load average {loadavg()})\n")
    print("| cloud | operation | " + " | ".join(KINDS) + " | bytes up | bytes down |")
    print("|---|---|" + "---|" * (len(KINDS) + 2))
    costs = {}
    for kind in ("s3", "gs", "az"):
        r = measure_requests(kind, args.commits, work)
        for op in ("open", "idle", "commit", "attach", "restart"):
            label = {"idle": "idle, per second", "commit": "per commit",
                     "attach": "client ATTACH + query", "open": "open new store",
                     "restart": "restart (open + load)"}[op]
            print(f"| {kind} | {label} | " + " | ".join(fmt_counts(r[op])) + " |")
        if kind == "s3":
            costs = monthly_cost(r["commit"], r["idle"])
    c, idle = costs
    print(f"\nS3 request cost of one commit per second for 30 days: the commits' own "
          f"writes ${c:.2f} + the background of a running server ${idle:.2f} = "
          f"${c + idle:.2f}/month. Prices (S3 Standard, us-east-1): $0.005 per 1,000 "
          f"PUT/COPY/POST/LIST, $0.0004 per 1,000 GET/HEAD, DELETE free.")


# ---- latency -------------------------------------------------------------------

def writers_run(srv, data, writers, per_writer):
    """writers clients, each on its own table, per_writer commits each."""
    cons = []
    for w in range(writers):
        con = srv.attach(data)
        con.execute(f"CREATE TABLE IF NOT EXISTS lake.w{w} (a INTEGER, b VARCHAR)")
        cons.append(con)
    lat, errors = [], []
    lock = threading.Lock()

    def run(w):
        for i in range(per_writer):
            t0 = time.perf_counter()
            try:
                cons[w].execute(f"INSERT INTO lake.w{w} VALUES ({i}, 'v')")
                with lock:
                    lat.append((time.perf_counter() - t0) * 1000)
            except Exception as e:  # a conflict DuckLake gave up retrying
                with lock:
                    errors.append(str(e)[:120])

    threads = [threading.Thread(target=run, args=(w,)) for w in range(writers)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    for con in cons:
        con.close()
    return lat, errors, wall


def latency_phase(args, work):
    emu = emulators.start("s3", work / "emu-latency")
    rows = []
    try:
        stores = [("local folder", f"file://{work / 'lat-store'}", None),
                  ("S3 emulator", emu.url("latency"), emu.env)]
        for label, store, env in stores:
            srv = Moraine(store, env)
            try:
                data = work / f"lat-data-{len(rows)}"
                con = srv.attach(data)
                con.execute("CREATE TABLE lake.t (a INTEGER, b VARCHAR)")
                commit_rows(con, "t", 5)
                t0 = time.perf_counter()
                lat = commit_rows(con, "t", args.commits, start=5)
                wall = time.perf_counter() - t0
                con.close()
                rows.append((label, 1, lat, [], wall))
                lat, errors, wall = writers_run(srv, data, 16, max(2, args.commits // 16))
                rows.append((label, 16, lat, errors, wall))
            finally:
                srv.stop()
    finally:
        emu.stop()
    print(f"\n### Commit latency (load average {loadavg()})\n")
    print("| store | writers | commits | failed | p50 ms | p95 ms | commits/s |")
    print("|---|---|---|---|---|---|---|")
    for label, w, lat, errors, wall in rows:
        print(f"| {label} | {w} | {len(lat)} | {len(errors)} | {statistics.median(lat):.1f} | "
              f"{pct(lat, 95):.1f} | {len(lat) / wall:.1f} |")
    for label, w, lat, errors, wall in rows:
        if errors:
            print(f"\n{label}, {w} writers, first failure: {errors[0]}")


# ---- cache -----------------------------------------------------------------------

def cache_phase(args, work):
    emu = emulators.start("s3", work / "emu-cache")
    out = {}
    try:
        store = emu.url("cache")
        srv = Moraine(store, emu.env)
        data = work / "cache-data"
        con = srv.attach(data)
        con.execute("CREATE TABLE lake.t (a INTEGER, b VARCHAR)")
        commit_rows(con, "t", args.commits)
        versions = [r[0] for r in con.execute(
            "SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall()]
        con.close()
        srv.stop()  # flushes the memtable: the catalog is in SSTs from here on
        picks = versions[1::max(1, len(versions) // 10)][:10]
        for label, extra in (("no cache", ()),
                             ("--cache-dir", ("--cache-dir", str(work / "cache")))):
            Moraine(store, emu.env, extra).stop()  # fills the cache, if any
            starts, tts = [], []
            for _ in range(3):
                srv = Moraine(store, emu.env, extra)
                starts.append(srv.start_ms)
                con = srv.attach(data)
                for v in picks:
                    t0 = time.perf_counter()
                    con.execute(f"SELECT count(*) FROM lake.t AT (VERSION => {v})").fetchall()
                    tts.append((time.perf_counter() - t0) * 1000)
                con.close()
                srv.stop()
            out[label] = (statistics.median(starts), statistics.median(tts))
    finally:
        emu.stop()
    print(f"\n### Local cache on the S3 emulator (load average {loadavg()})\n")
    print("| | restart ms (median of 3) | time travel ms (median) |")
    print("|---|---|---|")
    for label, (s, t) in out.items():
        print(f"| {label} | {s:.0f} | {t:.1f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--commits", type=int, default=40)
    ap.add_argument("--only", default="requests,latency,cache")
    args = ap.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="moraine-objbench-"))
    try:
        print(f"# objstore bench {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, "
              f"load average {loadavg()}, {args.commits} commits")
        phases = {"requests": requests_phase, "latency": latency_phase, "cache": cache_phase}
        for name in args.only.split(","):
            phases[name](args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
