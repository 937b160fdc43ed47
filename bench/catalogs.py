#!/usr/bin/env python3
"""Catalog benchmark: the same DuckLake workload against four catalogs.

    moraine     ducklake:postgres:... against `moraine serve --store file://TMP`
    postgres    ducklake:postgres:... against a throwaway PostgreSQL 15 cluster
    sqlite      ducklake:sqlite:FILE  (needs the sqlite_scanner extension package)
    duckdb      ducklake:FILE

Per catalog: one table `t(a INTEGER, b VARCHAR)`, then COMMITS single-row
INSERTs, each its own autocommit transaction (one DuckLake snapshot each).
Measured:

    attach      fresh DuckDB connection (extensions already loaded) + ATTACH,
                median of ATTACH_N; "attach+q" adds the first query on the
                table (DuckLake reads most of the catalog lazily)
    commit      latency of one single-row INSERT commit, p50 / p99 / max
    time travel SELECT count(*) FROM lake.t AT (VERSION => k) for TT_VERSIONS
                values of k spread over the history, TT_REPS each, median;
                "first read" is the median of each version's first query
                only (no catalog answer of that version read before)
    latest read SELECT count(*) FROM lake.t on a warm connection, no commit
                in between (a dashboard's query), median of LATEST_N
    bulk        a 1000-row INSERT commit (one Parquet file), p50 of BULK_COMMITS
    writers     N writers (N in WRITERS) at once on lake.t, each its own DuckDB
                instance committing WRITER_COMMITS single-row INSERTs: commits/s
                and commits DuckLake gave up on after its retries (server
                catalogs only: a DuckDB or SQLite file admits one instance)
    SELECT 1    round trip over psycopg's extended protocol, median (server
                catalogs only)
    cold start  moraine only: process start -> ready line, on the store that
                holds the workload's catalog, median of COLD_N
    client CPU  CPU time of the client thread that runs a commit (single-row
                and 1000-row), ATTACH + first query or a time-travel query,
                median: the DuckDB client's own work, a floor under that
                latency no catalog server can remove (for a DuckDB or SQLite
                file it includes the catalog's own work)

Everything runs on loopback in temp dirs that are removed at the end; the
PostgreSQL cluster and every moraine process are stopped even on failure.
Each phase runs the catalogs interleaved round-robin (rotating which goes
first), so background load on a shared machine hits all of them alike.
The extensions come from the venv's PyPI packages (nothing is downloaded),
loaded through tests/e2e/conftest.py.

    .venv/bin/python bench/catalogs.py [--commits N] [--only moraine,duckdb]

MORAINE_BIN overrides build/src/cli/moraine; PG_BIN overrides
/usr/lib/postgresql/15/bin.
"""
import argparse
import atexit
import os
import pathlib
import platform
import pwd
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
from conftest import connect, extension_file  # noqa: E402  (shared loader, no downloads)

import duckdb  # noqa: E402

MORAINE = os.environ.get("MORAINE_BIN", str(ROOT / "build" / "src" / "cli" / "moraine"))
PG_BIN = pathlib.Path(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"))
READY = re.compile(r"^moraine: serving (\S+) on (\S+):(\d+)$")

_cleanups = []  # LIFO; each runs once, errors ignored


def on_cleanup(fn):
    _cleanups.append(fn)
    return fn


def cleanup_all():
    while _cleanups:
        fn = _cleanups.pop()
        try:
            fn()
        except Exception as e:  # keep cleaning
            print(f"cleanup: {e}", file=sys.stderr)


atexit.register(cleanup_all)


def _die(signum, _frame):
    cleanup_all()
    sys.exit(128 + signum)


signal.signal(signal.SIGTERM, _die)
signal.signal(signal.SIGINT, _die)


def tempdir(prefix, owner=None):
    d = pathlib.Path(tempfile.mkdtemp(prefix=prefix))
    if owner is not None:
        os.chown(d, owner.pw_uid, owner.pw_gid)
    on_cleanup(lambda: shutil.rmtree(d, ignore_errors=True))
    return d


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def cpu_ms(c0):
    """CPU time of the calling thread since c0 = time.thread_time(), in ms:
    the DuckDB client's own work on the thread that runs the statement. A
    thread cannot use more CPU than the time that passes, so this is a floor
    under the statement's latency that no catalog server can remove."""
    return (time.thread_time() - c0) * 1000


def ms(t0):
    return (time.perf_counter() - t0) * 1000


# ---------------------------------------------------------------- catalogs


class Moraine:
    name = "moraine"

    def __init__(self, store_dir, extra_args=(), log_path=None):
        """extra_args go to `moraine serve`; log_path, if given, gets every
        stderr line after the ready line (bench/statements.py reads it)."""
        self.store = "file://" + str(store_dir)
        self.extra_args = list(extra_args)
        self.log_path = log_path
        self.proc = None
        self.port = None
        self.drain = None

    def start(self):
        """Start on the store; return ms from spawn to the ready line."""
        t0 = time.perf_counter()
        proc = subprocess.Popen([MORAINE, "serve", "--store", self.store, "--listen", "127.0.0.1:0"]
                                + self.extra_args,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.proc = proc
        on_cleanup(lambda: proc.poll() is None and (proc.kill(), proc.wait()))
        lines = []
        timer = threading.Timer(30, proc.kill)  # bounded wait for the ready line
        timer.start()
        try:
            for line in proc.stderr:
                m = READY.match(line.rstrip("\n"))
                if m:
                    elapsed = ms(t0)
                    self.port = int(m.group(3))
                    break
                lines.append(line)
            else:
                raise RuntimeError(f"moraine did not become ready: {lines}")
        finally:
            timer.cancel()
        # keep draining stderr so a chatty server never blocks on a full pipe
        self.drain = threading.Thread(target=self._drain, args=(proc,), daemon=True)
        self.drain.start()
        return elapsed

    def _drain(self, proc):
        if self.log_path is None:
            for _ in proc.stderr:
                pass
            return
        with open(self.log_path, "a") as log:
            for line in proc.stderr:
                log.write(line)
                log.flush()  # a reader may append a mark between lines

    def log_mark(self, text):
        """Appends text as a line of the log, after every line logged so far."""
        time.sleep(0.2)  # the server writes a statement's line after answering it
        with open(self.log_path, "a") as log:
            log.write(text + "\n")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self.drain is not None:
            self.drain.join(timeout=10)  # the log is whole once stop returns
            self.drain = None

    def dsn(self):
        return f"host=127.0.0.1 port={self.port} dbname=lake user=moraine"

    def attach_sql(self, data):
        return f"ATTACH 'ducklake:postgres:{self.dsn()}' AS lake (DATA_PATH '{data}')"


class Postgres:
    """A throwaway PostgreSQL cluster: initdb in a temp dir, loopback only,
    default durability (fsync on, synchronous_commit on)."""
    name = "postgres"

    def __init__(self):
        self.user = None
        if os.geteuid() == 0:  # initdb refuses root
            self.user = pwd.getpwnam("postgres")
        self.dir = tempdir("bench-pg-", self.user)
        self.data = self.dir / "data"
        self.port = free_port()

    def _run(self, *args, timeout=120):
        cmd = [str(a) for a in args]
        if self.user is not None:
            cmd = ["runuser", "-u", self.user.pw_name, "--"] + cmd
        subprocess.run(cmd, check=True, timeout=timeout, cwd=self.dir,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def start(self):
        self._run(PG_BIN / "initdb", "-D", self.data, "-A", "trust", "-U", "postgres",
                  "--no-sync", "-E", "UTF8", "--locale=C")
        on_cleanup(self.stop)
        opts = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.dir}"
        self._run(PG_BIN / "pg_ctl", "-D", self.data, "-l", self.dir / "log", "-w", "-t", "60",
                  "-o", opts, "start")
        self._run(PG_BIN / "createdb", "-h", "127.0.0.1", "-p", self.port, "-U", "postgres", "lake")
        return None

    def stop(self):
        if (self.data / "postmaster.pid").exists():
            self._run(PG_BIN / "pg_ctl", "-D", self.data, "-m", "fast", "-w", "-t", "60", "stop")

    def version(self):
        out = subprocess.run([PG_BIN / "postgres", "--version"], capture_output=True, text=True)
        return out.stdout.strip()

    def dsn(self):
        return f"host=127.0.0.1 port={self.port} dbname=lake user=postgres"

    def attach_sql(self, data):
        return f"ATTACH 'ducklake:postgres:{self.dsn()}' AS lake (DATA_PATH '{data}')"


class SQLite:
    name = "sqlite"

    def __init__(self, d):
        self.file = d / "meta.sqlite"

    def start(self):
        return None

    def stop(self):
        pass

    def attach_sql(self, data):
        return f"ATTACH 'ducklake:sqlite:{self.file}' AS lake (DATA_PATH '{data}')"


class DuckFile:
    name = "duckdb"

    def __init__(self, d):
        self.file = d / "meta.ducklake"

    def start(self):
        return None

    def stop(self):
        pass

    def attach_sql(self, data):
        return f"ATTACH 'ducklake:{self.file}' AS lake (DATA_PATH '{data}')"


def sqlite_extension():
    """The sqlite_scanner extension file from the venv, or None."""
    try:
        return extension_file("sqlite_scanner", "sqlite_scanner")
    except (ImportError, FileNotFoundError):
        return None


def open_con(sqlite_ext):
    con = connect()
    if sqlite_ext is not None:
        con.execute(f"LOAD '{sqlite_ext}'")
    return con


# ---------------------------------------------------------------- workload


def run_all(cats, args, sqlite_ext, works):
    """Every phase runs on all catalogs interleaved (round-robin, rotating the
    order), so background load on the machine hits every catalog alike."""
    names = list(cats)
    res = {n: {} for n in names}
    rows = {n: args.commits for n in names}  # rows lake.t must hold
    data = {n: works[n] / "data" for n in names}

    def rr(i):  # rotate which catalog goes first
        k = i % len(names)
        return names[k:] + names[:k]

    for n in names:
        cats[n].start()
    try:
        cons = {}
        for n in names:
            cons[n] = open_con(sqlite_ext)
            cons[n].execute(cats[n].attach_sql(data[n]))
            cons[n].execute("CREATE TABLE lake.t(a INTEGER, b VARCHAR)")
        lat = {n: [] for n in names}
        cpu = {n: [] for n in names}
        for i in range(args.commits):
            for n in rr(i):
                c0, t0 = time.thread_time(), time.perf_counter()
                cons[n].execute(f"INSERT INTO lake.t VALUES ({i}, 'v{i}')")
                lat[n].append(ms(t0))
                cpu[n].append(cpu_ms(c0))
        snaps = {}
        for n in names:
            con = cons.pop(n)
            snaps[n] = [r[0] for r in con.execute(
                "SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall()]
            files = con.execute("SELECT count(*) FROM ducklake_list_files('lake', 't')").fetchone()[0]
            con.close()
            r = res[n]
            r["commit_p50"], r["commit_p99"], r["commit_max"] = pct(lat[n], 50), pct(lat[n], 99), max(lat[n])
            r["snapshots"], r["files"] = len(snaps[n]), files
            r["commit_cpu"] = pct(cpu[n], 50)

        # attach on fresh connections, one at a time per catalog (a DuckDB-file
        # catalog is locked by the instance that has it open)
        att = {n: [] for n in names}
        attq = {n: [] for n in names}
        attq_cpu = {n: [] for n in names}
        for i in range(args.attach_n):
            for n in rr(i):
                con = open_con(sqlite_ext)
                c0, t0 = time.thread_time(), time.perf_counter()
                con.execute(cats[n].attach_sql(data[n]))
                att[n].append(ms(t0))
                cnt = con.execute("SELECT count(*) FROM lake.t").fetchone()[0]
                attq[n].append(ms(t0))
                attq_cpu[n].append(cpu_ms(c0))
                con.close()
                assert cnt == args.commits, (n, cnt)
        for n in names:
            res[n]["attach"], res[n]["attach_q"] = statistics.median(att[n]), statistics.median(attq[n])
            res[n]["attach_q_cpu"] = statistics.median(attq_cpu[n])

        # time travel over the insert history (versions after CREATE TABLE)
        step = max(1, args.commits // args.tt_versions)
        tt = {n: [] for n in names}
        tt_first = {n: [] for n in names}
        tt_cpu = {n: [] for n in names}
        for n in names:
            cons[n] = open_con(sqlite_ext)
            cons[n].execute(cats[n].attach_sql(data[n]))
        i = 0
        for rep in range(args.tt_reps):
            for j in range(args.tt_versions):
                for n in rr(i):
                    first = snaps[n][-args.commits]  # snapshot of the first INSERT
                    k = first + j * step
                    c0, t0 = time.thread_time(), time.perf_counter()
                    cnt = cons[n].execute(f"SELECT count(*) FROM lake.t AT (VERSION => {k})").fetchone()[0]
                    tt[n].append(ms(t0))
                    if rep == 0:
                        tt_first[n].append(tt[n][-1])
                    tt_cpu[n].append(cpu_ms(c0))
                    assert cnt == k - first + 1, (n, k, cnt)
                i += 1
        # the latest rows again and again, nothing committed in between
        latest = {n: [] for n in names}
        for k in range(args.latest_n):
            for n in rr(k):
                t0 = time.perf_counter()
                cnt = cons[n].execute("SELECT count(*) FROM lake.t").fetchone()[0]
                latest[n].append(ms(t0))
                assert cnt == args.commits, (n, cnt)
        for n in names:
            cons.pop(n).close()
            res[n]["tt"] = statistics.median(tt[n])
            res[n]["tt_first"] = statistics.median(tt_first[n])
            res[n]["tt_cpu"] = statistics.median(tt_cpu[n])
            res[n]["latest"] = statistics.median(latest[n])

        # 1000-row commits: each writes one Parquet file (past the inlining limit)
        bulk = {n: [] for n in names}
        bulk_cpu = {n: [] for n in names}
        for n in names:
            cons[n] = open_con(sqlite_ext)
            cons[n].execute(cats[n].attach_sql(data[n]))
        for i in range(args.bulk_commits):
            for n in rr(i):
                c0, t0 = time.thread_time(), time.perf_counter()
                cons[n].execute("INSERT INTO lake.t SELECT i, 'bulk' FROM range(1000) r(i)")
                bulk[n].append(ms(t0))
                bulk_cpu[n].append(cpu_ms(c0))
        for n in names:
            cons.pop(n).close()
            if bulk[n]:
                res[n]["bulk_p50"] = pct(bulk[n], 50)
                res[n]["bulk_cpu"] = pct(bulk_cpu[n], 50)
            rows[n] += 1000 * args.bulk_commits

        # N writers on the one table, each its own DuckDB instance and
        # connection, as N application processes would be. Only the server
        # catalogs take part: a DuckDB or SQLite file is one writer's lock.
        for k, w in enumerate(args.writers):
            for n in rr(k):
                if not hasattr(cats[n], "dsn"):
                    continue
                ok, failed, secs = run_writers(cats[n], data[n], sqlite_ext, w, args.writer_commits)
                res[n][f"w{w}_cps"] = ok / secs
                res[n][f"w{w}_fail"] = failed
                rows[n] += ok

        # a trivial statement over the extended protocol, as a driver sends it
        for n in names:
            if hasattr(cats[n], "dsn"):
                res[n]["select1_us"] = select_one_us(cats[n].dsn(), args.select1_n)
        for n in names:
            con = open_con(sqlite_ext)
            con.execute(cats[n].attach_sql(data[n]))
            cnt = con.execute("SELECT count(*) FROM lake.t").fetchone()[0]
            con.close()
            assert cnt == rows[n], (n, cnt, rows[n])
    finally:
        for n in names:
            cats[n].stop()

    if "moraine" in cats:
        cat = cats["moraine"]
        cold = []
        for _ in range(args.cold_n):
            cold.append(cat.start())
            # ready means usable: one real ATTACH against the reloaded catalog
            con = open_con(sqlite_ext)
            con.execute(cat.attach_sql(data["moraine"]))
            assert con.execute("SELECT count(*) FROM lake.t").fetchone()[0] == rows["moraine"]
            con.close()
            cat.stop()
        res["moraine"]["cold"] = statistics.median(cold)
        res["moraine"]["cold_min"] = min(cold)
    return res


def run_writers(cat, data, sqlite_ext, writers, per_writer):
    """WRITERS threads each commit PER_WRITER single-row INSERTs into lake.t
    at once. DuckLake retries a commit that lost the race for the next
    snapshot; one that still fails after its retries counts as given up.
    Returns (commits, given up, seconds from the common start to the last)."""
    cons = []
    for _ in range(writers):
        con = open_con(sqlite_ext)
        con.execute(cat.attach_sql(data))
        cons.append(con)
    start = threading.Barrier(writers + 1)
    counts = [[0, 0] for _ in range(writers)]

    def work(i):
        start.wait()
        for j in range(per_writer):
            try:
                cons[i].execute(f"INSERT INTO lake.t VALUES ({-1 - j}, 'w{i}')")
                counts[i][0] += 1
            except duckdb.Error:
                counts[i][1] += 1

    threads = [threading.Thread(target=work, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    secs = time.perf_counter() - t0
    for con in cons:
        con.close()
    return sum(c[0] for c in counts), sum(c[1] for c in counts), secs


def select_one_us(dsn, n):
    """Median round trip of `SELECT 1` in microseconds, over N in a row on one
    psycopg connection (extended protocol: Parse/Bind/Execute/Sync)."""
    import psycopg
    with psycopg.connect(dsn, autocommit=True) as conn:
        for _ in range(50):  # warm-up
            conn.execute("SELECT 1").fetchone()
        lat = []
        for _ in range(n):
            t0 = time.perf_counter()
            conn.execute("SELECT 1").fetchone()
            lat.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(lat)


# ---------------------------------------------------------------- output

def rows_for(args):
    rows = [
        ("attach ms (median)", "attach"),
        ("attach + first query ms (median)", "attach_q"),
        ("commit p50 ms", "commit_p50"),
        ("commit p99 ms", "commit_p99"),
        ("commit max ms", "commit_max"),
        ("1000-row commit p50 ms", "bulk_p50"),
    ]
    for w in args.writers:
        rows.append((f"commits/s, {w} writer{'s' if w > 1 else ''} (higher is better)", f"w{w}_cps"))
        rows.append((f"commits given up, {w} writer{'s' if w > 1 else ''}", f"w{w}_fail"))
    rows += [
        ("time travel ms (median)", "tt"),
        ("time travel, first read of a version ms (median)", "tt_first"),
        ("latest read, no commit between ms (median)", "latest"),
        ("client CPU in a commit ms (median)", "commit_cpu"),
        ("client CPU in a 1000-row commit ms (median)", "bulk_cpu"),
        ("client CPU in attach + first query ms (median)", "attach_q_cpu"),
        ("client CPU in a time travel ms (median)", "tt_cpu"),
        ("SELECT 1 round trip us (median)", "select1_us"),
        ("cold start ms (median)", "cold"),
        ("cold start ms (min)", "cold_min"),
    ]
    return rows


def table(results, order, rows):
    cols = [c for c in order if c in results]
    anchors = [c for c in cols if c != "moraine" and "error" not in results[c]]
    head = ["metric"] + cols + [f"moraine/{a}" for a in anchors if "moraine" in results]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def cell(c, key):
        r = results[c]
        if "error" in r:
            return "skipped" if key == rows[0][1] else ""
        v = r.get(key)
        return "—" if v is None else f"{v:.2f}"

    for label, key in rows:
        row = [label] + [cell(c, key) for c in cols]
        m = results.get("moraine", {})
        for a in anchors:
            if "moraine" not in results:
                continue
            mv, av = m.get(key), results[a].get(key)
            row.append(f"{mv / av:.2f}x" if mv is not None and av else "—")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--commits", type=int, default=200)
    ap.add_argument("--attach-n", type=int, default=21)
    ap.add_argument("--tt-versions", type=int, default=10)
    ap.add_argument("--tt-reps", type=int, default=5)
    ap.add_argument("--latest-n", type=int, default=50)
    ap.add_argument("--cold-n", type=int, default=7)
    ap.add_argument("--bulk-commits", type=int, default=20, help="1000-row commits")
    ap.add_argument("--writers", default="1,4,8,16", help="writer counts for commits/s")
    ap.add_argument("--writer-commits", type=int, default=20, help="commits per writer")
    ap.add_argument("--select1-n", type=int, default=2000)
    ap.add_argument("--only", default="moraine,postgres,sqlite,duckdb")
    ap.add_argument("--moraine-args", default="",
                    help="more `moraine serve` arguments, e.g. \"--result-cache-mib 0\"")
    args = ap.parse_args()
    args.writers = [int(w) for w in args.writers.split(",") if w]
    order = ["moraine", "postgres", "sqlite", "duckdb"]
    wanted = [c for c in order if c in args.only.split(",")]

    sqlite_ext = sqlite_extension()
    results, notes = {}, []
    t_start = time.perf_counter()
    cats, works = {}, {}
    for name in wanted:
        work = tempdir(f"bench-cat-{name}-")
        if name == "moraine":
            if not os.access(MORAINE, os.X_OK):
                sys.exit(f"{MORAINE} missing: cmake --build build -j2")
            cat = Moraine(work / "store", shlex.split(args.moraine_args))
        elif name == "postgres":
            if not (PG_BIN / "initdb").exists():
                results[name] = {"error": "no PostgreSQL"}
                notes.append(f"postgres: skipped, {PG_BIN}/initdb not found")
                continue
            cat = Postgres()
            notes.append(f"postgres: {cat.version()}, fsync on, synchronous_commit on")
        elif name == "sqlite":
            if sqlite_ext is None:
                results[name] = {"error": "no sqlite extension"}
                notes.append("sqlite: skipped, the sqlite_scanner extension is not in the venv "
                             "(pip install duckdb-extension-sqlite-scanner==" + duckdb.__version__ + ")")
                continue
            cat = SQLite(work)
        else:
            cat = DuckFile(work)
        cats[name], works[name] = cat, work
    load0 = os.getloadavg()[0]
    results.update(run_all(cats, args, sqlite_ext, works))
    load1 = os.getloadavg()[0]

    any_r = next(r for r in results.values() if "error" not in r)
    print(f"DuckDB {duckdb.__version__}, {os.cpu_count()} cores, {platform.machine()} {platform.system()}; "
          f"{args.commits} single-row INSERT commits ({any_r['snapshots']} snapshots, "
          f"{any_r['files']} data files), attach x{args.attach_n}, "
          f"time travel {args.tt_versions} versions x{args.tt_reps}, cold start x{args.cold_n}; "
          f"catalogs interleaved round-robin; load average {load0:.1f} -> {load1:.1f}")
    for n in notes:
        print(n)
    print()
    print(table(results, order, rows_for(args)))
    print(f"\ntotal {ms(t_start) / 1000:.1f}s")


if __name__ == "__main__":
    try:
        main()
    finally:
        cleanup_all()
