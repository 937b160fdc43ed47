"""Big results stream in bounded memory, and an abandoned one stops: the
real `moraine serve`, a 20-million-row result read partly (binary COPY, as
DuckDB's postgres extension reads, and a simple-protocol SELECT), then the
client goes away. The server's RSS is read from /proc.

The binary is MORAINE_BIN.
"""
import time

import psycopg

from test_pg_front import Server

ROWS = 20_000_000
GROWTH_LIMIT_MB = 400  # the whole result would be gigabytes


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


class PeakRss:
    """Samples a process's RSS every 50 ms while in the `with` block."""

    def __init__(self, pid):
        import threading
        self.pid, self.base, self.peak, self.stop = pid, rss_mb(pid), rss_mb(pid), False
        self.thread = threading.Thread(target=self._watch)

    def _watch(self):
        while not self.stop:
            self.peak = max(self.peak, rss_mb(self.pid))
            time.sleep(0.05)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop = True
        self.thread.join()

    @property
    def growth(self):
        return self.peak - self.base


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def settles(pid, seconds=15):
    """True once the server stops burning CPU (the abandoned work ended)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        before = cpu_ticks(pid)
        time.sleep(1)
        if cpu_ticks(pid) - before < 20:  # < 0.2 s of CPU in 1 s
            return True
    return False


def test_binary_copy_streams_and_stops_when_abandoned(tmp_path):
    server = Server("--store", f"file://{tmp_path}/store")
    pid = server.proc.pid
    try:
        conn = psycopg.connect(server.dsn(), autocommit=True)
        with PeakRss(pid) as rss, conn.cursor() as cur:
            with cur.copy(f"COPY (SELECT i, 'row ' || i AS v FROM generate_series(1, {ROWS}) "
                          f"t(i)) TO STDOUT (FORMAT binary)") as copy:
                got = 0
                for block in copy:
                    got += len(block)
                    if got > 32 << 20:  # 32 MiB of the result, then walk away
                        break
        conn.pgconn.finish()  # the client disappears mid-result
        assert rss.growth < GROWTH_LIMIT_MB, f"RSS grew {rss.growth:.0f} MB"
        assert settles(pid), "the server kept working on an abandoned result"
        with psycopg.connect(server.dsn(), autocommit=True) as again:
            assert again.execute("SELECT 1").fetchone() == (1,)
    finally:
        assert server.stop() == 0


def test_simple_select_streams(tmp_path):
    server = Server("--store", f"file://{tmp_path}/store")
    pid = server.proc.pid
    try:
        conn = psycopg.connect(server.dsn(), autocommit=True)
        with PeakRss(pid) as rss:
            n = 0
            for _ in conn.cursor().stream(f"SELECT i, i * 0.5 AS half, DATE '2000-01-01' + "
                                          f"CAST(i % 1000 AS INTEGER) AS d FROM "
                                          f"generate_series(1, {ROWS}) t(i)"):
                n += 1
                if n >= 200_000:
                    break
        conn.pgconn.finish()
        assert rss.growth < GROWTH_LIMIT_MB, f"RSS grew {rss.growth:.0f} MB"
        assert settles(pid), "the server kept working on an abandoned result"
    finally:
        assert server.stop() == 0


def test_memory_limit_bounds_the_engine(tmp_path):
    """--memory-limit caps the engine: a query whose hash table would take
    hundreds of MB runs within it (or fails with 53200), and the server keeps
    answering."""
    server = Server("--store", f"file://{tmp_path}/store", "--memory-limit", "64MB")
    try:
        with PeakRss(server.proc.pid) as rss, \
                psycopg.connect(server.dsn(), autocommit=True) as conn:
            try:
                got = conn.execute("SELECT count(DISTINCT s) FROM (SELECT i::VARCHAR || "
                                   "'padding-padding-padding' AS s FROM "
                                   "generate_series(1, 8000000) t(i)) x").fetchone()
                assert got == (8000000,)
            except psycopg.Error as e:
                assert e.sqlstate == "53200", e
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        assert server.stop() == 0
    assert rss.growth < 250, f"RSS grew {rss.growth:.0f} MB under a 64MB limit"


def test_a_bad_memory_limit_is_one_line(tmp_path):
    import subprocess
    import test_pg_front
    r = subprocess.run([test_pg_front.MORAINE, "serve", "--memory-limit", "lots",
                        "--store", f"file://{tmp_path}/s", "--listen", "127.0.0.1:0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "invalid memory limit" in r.stderr
