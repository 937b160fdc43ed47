"""The front's limits against the real `moraine serve` (issue 9, parts 4-6):
silent and slow clients are dropped after --auth-timeout and never keep a
DuckLake client out; oversized messages before authentication are refused
without growing the server's memory; CancelRequest (with the right key
only) and statement_timeout stop a running query with 57014; a client that
disconnects has its statement cancelled; --max-connections answers 53300;
a wrong password is delayed and logged once; SIGTERM lets running
statements finish, ends idle sessions with 57P01, and exits 0.

Bounds on time are generous ("within 10 s"): they prove "bounded", not
speed. The Server class comes from test_pg_front.py (MORAINE_BIN selects the
binary). A thread drains each server's stderr into server.lines, so the log
never blocks the server and tests can look for their lines.
"""
import re
import signal
import socket
import struct
import subprocess
import threading
import time

import psycopg
import pytest

from conftest import connect
from test_pg_front import MORAINE, Server, read_all, read_until_ready, startup_packet

# A query that runs for minutes unless stopped (generate_series is admitted).
LONG = "SELECT count(*) FROM generate_series(1, 1000000000000)"


def start(*args):
    """A Server (its stderr is read continuously into server.lines)."""
    return Server(*args)


def wait_for(predicate, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def log_lines(s, text):
    return [line for line in list(s.lines) if text in line]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def msg(kind, body=b""):
    return kind + struct.pack("!I", len(body) + 4) + body


def raw_session(server):
    """A raw, authenticated connection; returns (socket, pid, key)."""
    s = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    s.sendall(startup_packet())
    msgs = read_until_ready(s)
    keys = [b for t, b in msgs if t == b"K"]
    assert len(keys) == 1 and msgs[-1][0] == b"Z"
    pid, key = struct.unpack("!II", keys[0])
    return s, pid, key


def cancel_request(server, pid, key):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as c:
        c.sendall(struct.pack("!IIII", 16, 80877102, pid, key))
        assert read_all(c, timeout=10) == b""  # PostgreSQL answers nothing


def error_fields(body):
    return {f[:1].decode(): f[1:].decode() for f in body.split(b"\0") if f}


@pytest.fixture
def server():
    s = start()
    yield s
    assert s.stop() == 0


# ---- silent and slow clients ---------------------------------------------------------

def test_silent_sockets_neither_block_ducklake_nor_stay(tmp_path):
    timeout_s = 15
    s = start("--auth-timeout", str(timeout_s))
    try:
        before = rss_kib(s.proc.pid)
        opened = time.time()
        silent = [socket.create_connection(("127.0.0.1", s.port), timeout=30) for _ in range(200)]
        # a DuckLake client attaches and commits while all 200 are held open
        t0 = time.time()
        duck = connect()
        duck.execute(f"ATTACH 'ducklake:postgres:{s.dsn()}' AS lake (DATA_PATH '{tmp_path}/d/')")
        duck.execute("CREATE TABLE lake.t (id BIGINT, name VARCHAR)")
        duck.execute("INSERT INTO lake.t VALUES (1, 'one'), (2, 'two')")
        assert duck.execute("SELECT * FROM lake.t ORDER BY id").fetchall() == [(1, "one"), (2, "two")]
        duck.close()
        ducklake_s = time.time() - t0
        assert ducklake_s < 60
        held_rss = rss_kib(s.proc.pid)
        if time.time() - opened < timeout_s - 2:  # the timeout cannot have passed yet
            for sock in silent:
                sock.setblocking(False)
                with pytest.raises(BlockingIOError):  # still open, nothing sent
                    sock.recv(1)
                sock.setblocking(True)
        # then the server closes every one of them, soon after the timeout
        for sock in silent:
            sock.settimeout(timeout_s + 20)
            assert sock.recv(1) == b""
        dropped_after = time.time() - opened
        assert dropped_after >= timeout_s - 1
        assert dropped_after < timeout_s + 20
        assert wait_for(lambda: len(log_lines(s, f"not authenticated within {timeout_s * 1000} ms"))
                        == 200, 10)
        print(f"\n200 silent sockets: DuckLake attach+commit {ducklake_s:.2f} s while held; "
              f"RSS {before} KiB -> {held_rss} KiB with them open; all dropped "
              f"{dropped_after:.2f} s after opening (--auth-timeout {timeout_s})")
        for sock in silent:
            sock.close()
    finally:
        assert s.stop() == 0


def test_stalled_startup_packet_is_dropped():
    """A client that sends part of its startup packet and stalls."""
    s = start("--auth-timeout", "1")
    try:
        with socket.create_connection(("127.0.0.1", s.port), timeout=30) as c:
            c.sendall(struct.pack("!I", 40) + b"\x00\x03")
            t0 = time.time()
            c.settimeout(20)
            assert c.recv(1) == b""
            assert time.time() - t0 < 20
        with psycopg.connect(s.dsn(), autocommit=True) as con:
            assert con.execute("SELECT 1").fetchone() == (1,)
    finally:
        assert s.stop() == 0


def test_stalled_sasl_exchange_is_dropped(tmp_path):
    pw = tmp_path / "pw"
    pw.write_text("s3cret-pass\n")
    s = start("--password-file", str(pw), "--auth-timeout", "1")
    try:
        with socket.create_connection(("127.0.0.1", s.port), timeout=30) as c:
            c.sendall(startup_packet())
            assert c.recv(65536)[:1] == b"R"  # AuthenticationSASL; then silence
            c.settimeout(20)
            assert c.recv(65536) == b""
        assert wait_for(lambda: log_lines(s, "not authenticated within 1000 ms"), 10)
    finally:
        assert s.stop() == 0


# ---- oversized messages before authentication ---------------------------------------

def test_oversized_startup_packets_keep_rss_bounded():
    s = start()
    try:
        with psycopg.connect(s.dsn(), autocommit=True) as con:
            con.execute("SELECT 1")
        before = rss_kib(s.proc.pid)
        socks = []
        for _ in range(20):
            c = socket.create_connection(("127.0.0.1", s.port), timeout=30)
            c.sendall(struct.pack("!II", 200 << 20, 196608))  # declares 200 MiB
            socks.append(c)
        chunk = b"\0" * (1 << 20)
        for c in socks:
            try:
                for _ in range(4):  # 4 MiB more each, were anything to buffer it
                    c.sendall(chunk)
            except OSError:
                pass  # refused and closed: what we want
        for c in socks:
            rest = read_all(c, timeout=10)
            assert rest == b"" or (rest[:1] == b"E" and b"08P01" in rest)
            c.close()
        after = rss_kib(s.proc.pid)
        print(f"\n20 oversized startup packets: RSS {before} KiB -> {after} KiB")
        assert after - before < 16 * 1024
        with psycopg.connect(s.dsn(), autocommit=True) as con:
            assert con.execute("SELECT 1").fetchone() == (1,)
    finally:
        assert s.stop() == 0


def test_oversized_sasl_messages_keep_rss_bounded(tmp_path):
    pw = tmp_path / "pw"
    pw.write_text("s3cret-pass\n")
    s = start("--password-file", str(pw))
    try:
        before = rss_kib(s.proc.pid)
        socks = []
        for _ in range(20):
            c = socket.create_connection(("127.0.0.1", s.port), timeout=30)
            c.sendall(startup_packet())
            assert c.recv(65536)[:1] == b"R"
            # a SASLInitialResponse declaring 256 MiB, just over the 8 KiB cap
            c.sendall(b"p" + struct.pack("!I", 256 << 20) + b"SCRAM-SHA-256\0")
            socks.append(c)
        for c in socks:
            try:
                c.sendall(b"\0" * (4 << 20))
            except OSError:
                pass
        for c in socks:
            rest = read_all(c, timeout=10)
            assert rest[:1] == b"E" and b"08P01" in rest
            c.close()
        after = rss_kib(s.proc.pid)
        print(f"\n20 oversized SASL messages: RSS {before} KiB -> {after} KiB")
        assert after - before < 16 * 1024
        # a small, well-formed exchange still works
        with psycopg.connect(s.dsn(password="s3cret-pass"), autocommit=True) as con:
            assert con.execute("SELECT 1").fetchone() == (1,)
    finally:
        assert s.stop() == 0


# ---- cancel -----------------------------------------------------------------------------

def test_cancel_request_needs_the_right_key(server):
    sock, pid, key = raw_session(server)
    with sock:
        sock.sendall(msg(b"Q", LONG.encode() + b"\0"))
        time.sleep(0.5)
        cancel_request(server, pid, key ^ 0x5A5A5A5A)  # wrong key
        cancel_request(server, pid + 1, key)            # another (unknown) process id
        sock.settimeout(2)
        with pytest.raises(socket.timeout):  # still running: no answer at all
            sock.recv(1)
        assert wait_for(lambda: len(log_lines(server, "no such connection or wrong key")) == 2, 10)
        t0 = time.time()
        cancel_request(server, pid, key)
        sock.settimeout(10)
        msgs = read_until_ready(sock)
        assert time.time() - t0 < 10
        errors = [error_fields(b) for t, b in msgs if t == b"E"]
        assert len(errors) == 1
        assert errors[0]["C"] == "57014"
        assert errors[0]["M"] == "canceling statement due to user request"
        assert msgs[-1] == (b"Z", b"I")
        # the session goes on
        sock.sendall(msg(b"Q", b"SELECT 41 + 1\0"))
        msgs = read_until_ready(sock)
        assert [t for t, _ in msgs] == [b"T", b"D", b"C", b"Z"]
    assert wait_for(lambda: log_lines(server, "statement cancelled: cancel request"), 10)


def test_libpq_cancel_inside_a_transaction(server):
    with psycopg.connect(server.dsn(), autocommit=True) as con:
        con.execute("BEGIN")
        threading.Timer(0.5, con.cancel).start()
        t0 = time.time()
        with pytest.raises(psycopg.errors.QueryCanceled) as e:
            con.execute(LONG)
        assert time.time() - t0 < 10
        assert e.value.sqlstate == "57014"
        assert "user request" in str(e.value)
        assert con.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        con.execute("ROLLBACK")
        assert con.execute("SELECT 1").fetchone() == (1,)


def test_cancel_when_idle_does_nothing(server):
    with psycopg.connect(server.dsn(), autocommit=True) as con:
        con.cancel()
        time.sleep(0.3)
        assert con.execute("SELECT 7").fetchone() == (7,)


# ---- statement_timeout ------------------------------------------------------------------

def test_statement_timeout_stops_a_long_query(server):
    with psycopg.connect(server.dsn(), autocommit=True) as con:
        con.execute("SET statement_timeout = '200ms'")
        t0 = time.time()
        with pytest.raises(psycopg.errors.QueryCanceled) as e:
            con.execute(LONG)
        assert time.time() - t0 < 10
        assert e.value.sqlstate == "57014"
        assert str(e.value).startswith("canceling statement due to statement timeout")
        # the session still works, and quick statements are untouched
        assert con.execute("SELECT 1").fetchone() == (1,)
        # extended protocol (a bound parameter) is covered too
        with pytest.raises(psycopg.errors.QueryCanceled):
            con.execute("SELECT count(*) FROM generate_series(1, %s::BIGINT)", (10 ** 12,))
        con.execute("RESET statement_timeout")
        assert con.execute("SELECT count(*) FROM generate_series(1, 1000)").fetchone() == (1000,)
    assert wait_for(lambda: log_lines(server, "statement cancelled: statement_timeout of 200 ms"), 10)


def test_statement_timeout_set_in_the_same_query_string(server):
    """The deadline is taken per statement: a SET earlier in the same
    simple-protocol string applies to the statements after it."""
    with psycopg.connect(server.dsn(), autocommit=True) as con:
        t0 = time.time()
        with pytest.raises(psycopg.errors.QueryCanceled):
            con.execute(f"SET statement_timeout = '300ms'; {LONG}")
        assert time.time() - t0 < 10
        assert con.execute("SHOW statement_timeout").fetchone()[0] in ("300ms", "300")


# ---- disconnect ---------------------------------------------------------------------------

def test_disconnect_cancels_the_running_statement(server):
    sock, pid, key = raw_session(server)
    sock.sendall(msg(b"Q", LONG.encode() + b"\0"))
    time.sleep(0.5)
    sock.close()
    assert wait_for(lambda: [l for l in log_lines(server, f"connection {pid} (")
                             if "statement cancelled: client disconnected" in l], 10)
    assert wait_for(lambda: log_lines(server, f"connection {pid} closed"), 10)


# ---- connection limit ---------------------------------------------------------------------

def test_max_connections_answers_53300():
    s = start("--max-connections", "3")
    try:
        held = [psycopg.connect(s.dsn(), autocommit=True) for _ in range(3)]
        with pytest.raises(psycopg.OperationalError) as e:
            psycopg.connect(s.dsn(), autocommit=True)
        assert "too many" in str(e.value)
        assert getattr(e.value, "sqlstate", None) in (None, "53300")
        held.pop().close()
        assert wait_for(lambda: log_lines(s, "closed from"), 10)
        with psycopg.connect(s.dsn(), autocommit=True) as again:
            assert again.execute("SELECT 1").fetchone() == (1,)
        for c in held:
            c.close()
        assert log_lines(s, "refused: sorry, too many clients already")
    finally:
        assert s.stop() == 0


def test_raw_53300_has_the_sqlstate():
    s = start("--max-connections", "1")
    try:
        with psycopg.connect(s.dsn(), autocommit=True):
            with socket.create_connection(("127.0.0.1", s.port), timeout=10) as c:
                c.sendall(startup_packet())
                rest = read_all(c)
                assert rest[:1] == b"E"
                fields = error_fields(rest[5:])
                assert fields["S"] == "FATAL" and fields["C"] == "53300"
    finally:
        assert s.stop() == 0


def test_bad_flag_values_exit_2():
    for args in (["--max-connections", "0"], ["--auth-timeout", "soon"],
                 ["--log-level", "loud"], ["--shutdown-timeout", "-1"]):
        r = subprocess.run([MORAINE, "serve", "--listen", "127.0.0.1:0", *args],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 2, args
        lines = [l for l in r.stderr.splitlines() if l]
        assert len(lines) == 1 and lines[0].startswith("moraine: serve: "), lines


# ---- authentication failures --------------------------------------------------------------

def test_wrong_password_is_delayed_and_logged_once(tmp_path):
    pw = tmp_path / "pw"
    pw.write_text("s3cret-pass\n")
    s = start("--password-file", str(pw), "--log-level", "warn")
    try:
        t0 = time.time()
        with pytest.raises(psycopg.OperationalError) as e:
            psycopg.connect(s.dsn(password="wrong", user="mallory"))
        took = time.time() - t0
        assert "password authentication failed" in str(e.value)
        assert took >= 0.9  # the 1 s delay
        assert wait_for(lambda: log_lines(s, "authentication failed"), 10)
        failed = log_lines(s, "authentication failed")
        assert len(failed) == 1
        assert failed[0].startswith("moraine: warn: ")
        assert 'user "mallory"' in failed[0] and "127.0.0.1:" in failed[0]
        with psycopg.connect(s.dsn(password="s3cret-pass"), autocommit=True) as con:
            assert con.execute("SELECT 1").fetchone() == (1,)
        # --log-level warn: no info lines (connection opened/closed)
        assert not [l for l in s.lines if l.startswith("moraine: info:")]
    finally:
        assert s.stop() == 0


# ---- logging --------------------------------------------------------------------------------

def test_connection_open_and_close_are_logged(server):
    with psycopg.connect(server.dsn(dbname="lake", user="alice"), autocommit=True) as con:
        pid = con.info.backend_pid
        con.execute("SELECT 1")
    assert wait_for(lambda: log_lines(server, f"connection {pid} closed"), 10)
    opened = log_lines(server, f"connection {pid} opened")
    closed = log_lines(server, f"connection {pid} closed")
    assert len(opened) == 1 and len(closed) == 1
    for line in opened + closed:
        assert line.startswith("moraine: info: ")
        assert '"alice"' in line and '"lake"' in line and "127.0.0.1:" in line
    assert closed[0].rstrip().endswith(" s")  # the duration


def test_log_commit_phases_times_each_commit():
    s = start("--log-commit-phases")
    try:
        with psycopg.connect(s.dsn(), autocommit=True) as con:
            pid = con.info.backend_pid
            con.execute("CREATE TABLE ducklake_metadata(key VARCHAR NOT NULL, "
                        "value VARCHAR NOT NULL, scope VARCHAR, scope_id BIGINT)")
            con.execute("SELECT 1")  # a read commits nothing: no line
            con.execute("INSERT INTO ducklake_metadata VALUES ('a', '1', NULL, NULL), "
                        "('b', '2', NULL, NULL)")
            with con.transaction():
                con.execute("INSERT INTO ducklake_metadata VALUES ('c', '3', NULL, NULL)")
                con.execute("DELETE FROM ducklake_metadata WHERE key = 'a'")
        lines = lambda: log_lines(s, f"connection {pid}: commit of")
        assert wait_for(lambda: len(lines()) == 3, 10), s.log()
        pattern = re.compile(r"commit of (\d+) rows: lock wait [\d.]+ ms, map [\d.]+ ms, "
                             r"store write ([\d.]+) ms, engine commit [\d.]+ ms, total ([\d.]+) ms$")
        got = [pattern.search(line) for line in lines()]
        assert all(got), lines()
        assert [int(m.group(1)) for m in got] == [1, 2, 2]  # the DDL counts one
        for m in got[1:]:  # a durable write happened, and is part of the total
            assert 0 < float(m.group(2)) <= float(m.group(3))
    finally:
        assert s.stop() == 0


# ---- SIGTERM --------------------------------------------------------------------------------

def test_sigterm_lets_running_statements_finish_and_exits_0():
    s = start()
    busy = psycopg.connect(s.dsn(), autocommit=True)
    idle = psycopg.connect(s.dsn(), autocommit=True)
    result = {}

    def run():
        try:
            # a statement of about a second
            result["rows"] = busy.execute(
                "SELECT count(*) FROM generate_series(1, 3000000000)").fetchall()
        except Exception as e:  # noqa: BLE001 - checked below
            result["error"] = e

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.3)
    s.proc.send_signal(signal.SIGTERM)
    t.join(30)
    assert result.get("rows") == [(3000000000,)], result
    with pytest.raises(psycopg.errors.AdminShutdown):
        idle.execute("SELECT 1")
    assert s.proc.wait(timeout=30) == 0
    busy.close()
    idle.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", s.port), timeout=5).close()


def test_sigterm_cancels_what_outlives_the_shutdown_timeout():
    s = start("--shutdown-timeout", "1")
    con = psycopg.connect(s.dsn(), autocommit=True)
    result = {}

    def run():
        try:
            con.execute(LONG)
        except Exception as e:  # noqa: BLE001 - checked below
            result["error"] = e

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.3)
    t0 = time.time()
    s.proc.send_signal(signal.SIGTERM)
    assert s.proc.wait(timeout=30) == 0
    assert time.time() - t0 < 20
    t.join(10)
    assert isinstance(result.get("error"), psycopg.errors.AdminShutdown), result
    con.close()
    assert log_lines(s, "still busy after 1000 ms")
