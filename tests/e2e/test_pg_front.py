"""End-to-end tests of the compatibility front: the real `moraine serve`
binary spoken to by psql, psycopg (extended protocol), raw sockets, DuckDB's
postgres extension and DuckLake through it.

The binary is MORAINE_BIN (default build/src/cli/moraine); every server
listens on an ephemeral loopback port read from its ready line.
"""
import os
import pathlib
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

ROOT = pathlib.Path(__file__).resolve().parents[2]
MORAINE = os.environ.get("MORAINE_BIN", str(ROOT / "build" / "src" / "cli" / "moraine"))
READY = re.compile(r"^moraine: serving (\S+) on (\S+):(\d+)$")


class Server:
    def __init__(self, *args, env=None, cwd=None):
        if "--store" not in args and cwd is None:  # a fresh store, never ./moraine-data
            import tempfile
            args = ("--store", "file://" + tempfile.mkdtemp(prefix="moraine-store-"), *args)
        self.proc = subprocess.Popen(
            [MORAINE, "serve", "--listen", "127.0.0.1:0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, **(env or {})}, cwd=cwd)
        self.lines = []
        deadline = time.time() + 30
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.lines.append(line.rstrip("\n"))
            m = READY.match(self.lines[-1])
            if m:
                self.store, self.host, self.port = m.group(1), m.group(2), int(m.group(3))
                # from here a thread keeps stderr drained into self.lines, so a
                # chatty server never blocks on a full pipe; log() reads it
                self._drain = threading.Thread(target=self._drain_stderr, daemon=True)
                self._drain.start()
                return
        self.proc.kill()
        raise RuntimeError(f"moraine did not become ready: {self.lines}")

    def _drain_stderr(self):
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def wait_log(self, text, timeout=10):
        """True once text appears in the log, False after timeout seconds."""
        deadline = time.time() + timeout
        while time.time() < deadline and text not in self.log():
            time.sleep(0.05)
        return text in self.log()

    def log(self):
        """The server's stderr so far (all of it once the process ended)."""
        if self.proc.poll() is not None:
            self._drain.join(timeout=10)
        return "\n".join(self.lines)

    def dsn(self, **kw):
        parts = {"host": "127.0.0.1", "port": self.port, "dbname": "lake", "user": "moraine", **kw}
        return " ".join(f"{k}={v}" for k, v in parts.items())

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                raise
        return self.proc.returncode


@pytest.fixture
def server():
    s = Server()
    yield s
    assert s.stop() == 0


def psql(server, *commands, check=True, stop_on_error=True, db="lake"):
    args = ["psql", "-X", "-q", "-A", "-t", "-v", f"ON_ERROR_STOP={int(stop_on_error)}",
            "-h", "127.0.0.1",
            "-p", str(server.port), "-U", "moraine", "-d", db]
    for c in commands:
        args += ["-c", c]
    r = subprocess.run(args, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PGCONNECT_TIMEOUT": "10"})
    if check and r.returncode != 0:
        raise AssertionError(f"psql failed: {r.stderr}")
    return r


# ---- the command line ------------------------------------------------------

def test_ready_line_once_and_clean_stop(tmp_path):
    s = Server(cwd=tmp_path)  # the default store, ./moraine-data, inside tmp_path
    assert [l for l in s.lines if l.startswith("moraine: serving")] == \
        [f"moraine: serving file://./moraine-data on 127.0.0.1:{s.port}"]
    assert s.stop() == 0


def test_port_taken_exits_nonzero_with_one_line(server):
    r = subprocess.run([MORAINE, "serve", "--listen", f"127.0.0.1:{server.port}"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    lines = [l for l in r.stderr.splitlines() if l]
    assert len(lines) == 1 and lines[0].startswith("moraine: ") and "in use" in lines[0]


def test_non_loopback_without_password_is_refused():
    r = subprocess.run([MORAINE, "serve", "--listen", "0.0.0.0:0"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert "password" in r.stderr


# ---- psql: simple protocol -------------------------------------------------

def test_psql_queries(server):
    out = psql(server, "SELECT version()").stdout
    assert out.startswith("PostgreSQL 15.0 (moraine")
    # a session's temporary table is the one table a plain client may make
    out = psql(server, "CREATE TEMP TABLE items (id BIGINT, name VARCHAR)",
               "INSERT INTO items VALUES (1, 'one'), (2, NULL)",
               "SELECT id, name FROM items ORDER BY id").stdout
    assert out.splitlines() == ["1|one", "2|"]
    assert psql(server, "SHOW server_version").stdout.strip().startswith("15.0")


def test_psql_multi_statement_error_in_the_middle(server):
    r = psql(server, "CREATE TEMP TABLE m (a INT)",
             "INSERT INTO m VALUES (1); SELECT no_such_column; INSERT INTO m VALUES (2)",
             "SELECT count(*) FROM m", check=False, stop_on_error=False)
    assert "no_such_column" in r.stderr
    # one implicit transaction: the first INSERT was rolled back, the last never ran
    assert r.stdout.strip() == "0"


def test_aborted_transaction_until_rollback(server):
    with psycopg.connect(server.dsn(), autocommit=True) as con:
        con.execute("BEGIN")
        with pytest.raises(psycopg.errors.Error):
            con.execute("SELECT no_such_column")
        assert con.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            con.execute("SELECT 1")
        con.execute("ROLLBACK")
        assert con.execute("SELECT 1").fetchone() == (1,)
        assert con.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_discard_all_and_set(server):
    with psycopg.connect(server.dsn(), autocommit=True) as con:
        cur = con.execute("DISCARD ALL")
        assert cur.statusmessage == "DISCARD ALL"
        con.execute("SET application_name = 'tests'")
        assert con.execute("SHOW application_name").fetchone() == ("tests",)


# ---- psycopg: extended protocol --------------------------------------------

def test_psycopg_extended_protocol(server):
    with psycopg.connect(server.dsn()) as con:
        con.execute("CREATE TEMP TABLE p (id BIGINT, name VARCHAR, ok BOOLEAN)")
        con.execute("INSERT INTO p VALUES (%s, %s, %s)", (1, "a", True))
        con.cursor().executemany("INSERT INTO p VALUES (%s, %s, %s)", [(2, "b", False), (3, None, None)])
        con.commit()
        rows = con.execute("SELECT id, name, ok FROM p WHERE id >= %s ORDER BY id", (2,)).fetchall()
        assert rows == [(2, "b", False), (3, None, None)]
        cur = con.cursor(binary=True)
        assert cur.execute("SELECT id, name FROM p WHERE id = %s", (1,)).fetchall() == [(1, "a")]
        con.execute("UPDATE p SET name = %s WHERE id = %s", ("z", 3))
        con.rollback()
        assert con.execute("SELECT name FROM p WHERE id = 3").fetchone() == (None,)


# ---- raw protocol: malformed input, limits ---------------------------------

def startup_packet(user="moraine", db="lake"):
    body = struct.pack("!I", 196608) + b"user\0" + user.encode() + b"\0database\0" + \
        db.encode() + b"\0\0"
    return struct.pack("!I", len(body) + 4) + body


def read_until_ready(sock):
    """Reads backend messages until ReadyForQuery; returns (type, body) list."""
    msgs, buf = [], b""
    while True:
        while len(buf) < 5 or len(buf) < 1 + struct.unpack("!I", buf[1:5])[0]:
            chunk = sock.recv(65536)
            if not chunk:
                return msgs
            buf += chunk
        n = struct.unpack("!I", buf[1:5])[0]
        msgs.append((buf[:1], buf[5:1 + n]))
        buf = buf[1 + n:]
        if msgs[-1][0] == b"Z":
            return msgs


def read_all(sock, timeout=10):
    sock.settimeout(timeout)
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, socket.timeout):
            break
        if not chunk:
            break
        data += chunk
    return data


def test_ssl_request_refused_then_plaintext(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(struct.pack("!II", 8, 80877103))
        assert s.recv(1) == b"N"
        s.sendall(startup_packet())
        msgs = read_until_ready(s)
        types = [t for t, _ in msgs]
        assert types[0] == b"R" and b"K" in types and types[-1] == b"Z"
        params = dict(tuple(b.split(b"\0")[:2]) for t, b in msgs if t == b"S")
        assert params[b"server_version"].startswith(b"15.0")
        assert params[b"standard_conforming_strings"] == b"on"


@pytest.mark.parametrize("bad", [
    b"Q\x00\x00\x00\x02",                      # length below 4
    b"\x01\x00\x00\x00\x04",                   # unknown message type
    b"Q\x7f\xff\xff\xffSELECT 1",              # oversized length
    b"P\x00\x00\x00\x08ab",                    # truncated body, then EOF
])
def test_malformed_message_closes_only_that_connection(server, bad):
    with psycopg.connect(server.dsn(), autocommit=True) as other:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            s.sendall(startup_packet())
            read_until_ready(s)
            s.sendall(bad)
            if bad.startswith(b"P"):
                s.shutdown(socket.SHUT_WR)
            rest = read_all(s)
            assert rest == b"" or rest[:1] == b"E"
            if rest:
                assert b"08P01" in rest
        assert other.execute("SELECT 42").fetchone() == (42,)
    with psycopg.connect(server.dsn(), autocommit=True) as fresh:
        assert fresh.execute("SELECT 1").fetchone() == (1,)


def test_connection_limit_gives_53300():
    s = Server(env={"MORAINE_MAX_CONNECTIONS": "3"})
    try:
        held = [psycopg.connect(s.dsn(), autocommit=True) for _ in range(3)]
        with pytest.raises(psycopg.OperationalError) as e:
            psycopg.connect(s.dsn(), autocommit=True)
        assert "too many connections" in str(e.value)
        held.pop().close()
        time.sleep(0.3)
        with psycopg.connect(s.dsn(), autocommit=True) as again:
            assert again.execute("SELECT 1").fetchone() == (1,)
        for c in held:
            c.close()
    finally:
        assert s.stop() == 0


def test_scram_password(tmp_path):
    pw = tmp_path / "pw"
    pw.write_text("s3cret-pass\n")
    s = Server("--password-file", str(pw))
    try:
        with psycopg.connect(s.dsn(password="s3cret-pass"), autocommit=True) as con:
            assert con.execute("SELECT 1").fetchone() == (1,)
        with pytest.raises(psycopg.OperationalError) as e:
            psycopg.connect(s.dsn(password="wrong"))
        assert "password authentication failed" in str(e.value)
        duck = connect()
        duck.execute(f"ATTACH '{s.dsn(password='s3cret-pass')}' AS pg (TYPE postgres)")
        assert duck.execute("SELECT 1 FROM postgres_query('pg', 'SELECT 1')").fetchall() == [(1,)]
        duck.close()
    finally:
        assert s.stop() == 0


# ---- DuckDB's postgres extension ---------------------------------------------

ALL_TYPES = ("a BIGINT, b VARCHAR, c BOOLEAN, d DOUBLE, e BLOB, f TIMESTAMPTZ, g DATE, "
             "h INTEGER, i SMALLINT, j REAL, k UUID, l TIMESTAMP, m DECIMAL(10,3), "
             "n INTERVAL, o JSON")
ALL_VALUES = ("(1, 'x', true, 1.5, '\\x00\\xff'::BLOB, '2024-01-01 10:00:00+00', '2024-01-02', "
              "7, 3, 2.5, 'b1b2c3d4-0000-4000-8000-000000000001', '2024-05-06 07:08:09.123456', "
              "12.345, INTERVAL 3 DAY, '{\"a\":1}'), "
              "(2, '', false, -0.25, ''::BLOB, '1999-12-31 23:59:59.5+00', '1970-01-01', -7, -3, "
              "-2.5, '00000000-0000-0000-0000-000000000000', '1900-01-01 00:00:00', -0.001, "
              "INTERVAL '1 month 2 days 3 seconds', '[]'), "
              "(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)")
AS_TEXT = "SELECT * REPLACE (f::VARCHAR AS f) FROM {} ORDER BY a"


def test_postgres_extension_roundtrip_every_type(server, tmp_path):
    """Every type through the postgres extension's binary COPY paths, as
    DuckLake uses them: rows inlined into the catalog (INSERT), read back
    (COPY TO STDOUT, binary), updated and deleted (ctid-keyed) — on a
    DuckLake table, since moraine admits no other."""
    duck = connect()
    duck.execute(f"ATTACH 'ducklake:postgres:{server.dsn()}' AS lake (DATA_PATH '{tmp_path}/d/')")
    duck.execute(f"CREATE TABLE lake.t ({ALL_TYPES})")
    duck.execute(f"INSERT INTO lake.t VALUES {ALL_VALUES}")
    got = duck.execute(AS_TEXT.format("lake.t")).fetchall()
    duck.execute(f"CREATE TABLE ref ({ALL_TYPES})")
    duck.execute(f"INSERT INTO ref VALUES {ALL_VALUES}")
    assert got == duck.execute(AS_TEXT.format("ref")).fetchall()
    duck.execute(f"ATTACH '{server.dsn()}' AS pg (TYPE postgres)")
    assert duck.execute("SELECT count(*) FROM postgres_query('pg', "
                        "'SELECT snapshot_id FROM ducklake_snapshot')").fetchone()[0] >= 2
    duck.execute("UPDATE lake.t SET b = 'y' WHERE a = 1")
    duck.execute("DELETE FROM lake.t WHERE a = 3")
    assert duck.execute("SELECT a, b FROM lake.t ORDER BY a").fetchall() == [(1, "y"), (2, "")]
    duck.close()


# ---- DuckLake through moraine vs. a DuckDB-file catalog -----------------------

def ducklake_workload(con, lake):
    """A DuckLake workload; returns every answer it reads."""
    out = []
    q = lambda sql: out.append(con.execute(sql.format(lake=lake)).fetchall())
    con.execute(f"CREATE TABLE {lake}.events (id BIGINT, name VARCHAR, payload BLOB, "
                "ts TIMESTAMP, d DATE)")
    con.execute(f"INSERT INTO {lake}.events VALUES (1, 'one', '\\x01\\x02'::BLOB, "
                "'2024-01-01 10:00:00', '2024-01-02'), (2, NULL, NULL, NULL, NULL)")  # inlined
    q("SELECT * FROM {lake}.events ORDER BY id")
    con.execute(f"INSERT INTO {lake}.events SELECT i, 'n' || i, NULL, NULL, NULL "
                "FROM range(100, 10100) r(i)")                                         # Parquet
    q("SELECT count(*), sum(id), min(name), max(name) FROM {lake}.events")
    con.execute(f"UPDATE {lake}.events SET name = 'uno' WHERE id = 1")
    con.execute(f"DELETE FROM {lake}.events WHERE id % 2 = 0 AND id > 5000")
    con.execute(f"ALTER TABLE {lake}.events ADD COLUMN extra INTEGER")
    con.execute(f"INSERT INTO {lake}.events (id, name, extra) VALUES (7, 'seven', 77)")
    q("SELECT count(*), sum(id), sum(extra) FROM {lake}.events")
    q("SELECT * FROM {lake}.events WHERE id < 10 ORDER BY id")
    q("SELECT snapshot_id, changes FROM {lake}.snapshots() ORDER BY snapshot_id")
    q("SELECT count(*) FROM {lake}.events AT (VERSION => 2)")
    q("SELECT count(*), sum(id) FROM {lake}.events AT (VERSION => 3)")
    q("SELECT name FROM {lake}.events AT (VERSION => 4) WHERE id = 1")
    con.execute(f"CREATE SCHEMA {lake}.s2")
    con.execute(f"CREATE TABLE {lake}.s2.t2 AS SELECT 1 AS x")
    q("SELECT * FROM {lake}.s2.t2")
    con.execute(f"CALL ducklake_flush_inlined_data('{lake}')")
    q("SELECT count(*), sum(id) FROM {lake}.events")
    q("SELECT * FROM {lake}.events WHERE id < 10 ORDER BY id")
    return out


def test_ducklake_through_moraine_matches_duckdb_file_catalog(server, tmp_path):
    ref = connect()
    ref.execute(f"ATTACH 'ducklake:{tmp_path}/cat.ducklake' AS lake "
                f"(DATA_PATH '{tmp_path}/ref-data/')")
    expected = ducklake_workload(ref, "lake")
    ref.close()

    con = connect()
    con.execute(f"ATTACH 'ducklake:postgres:{server.dsn()}' AS lake "
                f"(DATA_PATH '{tmp_path}/pg-data/')")
    got = ducklake_workload(con, "lake")
    con.close()
    assert got == expected

    # a second client sees the same lake
    again = connect()
    again.execute(f"ATTACH 'ducklake:postgres:{server.dsn()}' AS lake "
                  f"(DATA_PATH '{tmp_path}/pg-data/')")
    assert again.execute("SELECT count(*), sum(id) FROM lake.events").fetchall() == expected[-2]
    again.close()


def test_concurrent_ducklake_writers(server, tmp_path):
    """Writers on separate DuckDB instances collide on the snapshot PRIMARY
    KEY at COMMIT; the error names it and DuckLake retries until all land."""
    import threading
    attach = (f"ATTACH 'ducklake:postgres:{server.dsn()}' AS lake "
              f"(DATA_PATH '{tmp_path}/data/')")
    con = connect()
    con.execute(attach)
    con.execute("CREATE TABLE lake.c (w INT, i INT)")
    con.close()
    errors = []

    def worker(w):
        c = connect()
        c.execute(attach)
        for i in range(8):
            try:
                c.execute(f"INSERT INTO lake.c VALUES ({w}, {i})")
            except Exception as e:  # noqa: BLE001 - collected for the assert
                errors.append(str(e))
        c.close()

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    con = connect()
    con.execute(attach)
    assert con.execute("SELECT count(*), count(DISTINCT (w, i)) FROM lake.c").fetchall() == [(24, 24)]
    con.close()


# ---- psql's \d family and the size functions -----------------------------

def _ducklake_catalog(server, tmp_path):
    """Creates a DuckLake catalog through the server: its tables are what psql lists."""
    con = connect()
    con.execute(f"ATTACH 'ducklake:postgres:{server.dsn()}' AS lake (DATA_PATH '{tmp_path}/data')")
    con.execute("CREATE TABLE lake.t(a INTEGER, b VARCHAR)")
    con.execute("COMMENT ON TABLE lake.t IS 'x'")
    return con


def test_psql_describe_family(server, tmp_path):
    _ducklake_catalog(server, tmp_path).close()
    # every \d-family command psql users reach for runs as on PostgreSQL
    for cmd in ["\\d", "\\dt", "\\dt+", "\\dv", "\\di", "\\ds", "\\dn", "\\l", "\\du", "\\df",
                "\\dT", "\\dx", "\\d ducklake_snapshot", "\\d+ ducklake_table"]:
        r = psql(server, cmd, check=False)
        assert r.returncode == 0 and "ERROR" not in r.stderr, (cmd, r.stderr)
    rows = psql(server, "\\dt").stdout.splitlines()
    assert "public|ducklake_snapshot|table|moraine" in rows
    assert "public|ducklake_column_tag|table|moraine" in rows
    # \dn hides pg_* schemas as PostgreSQL's regex match does (~ finds, not matches whole)
    assert "public|moraine" in psql(server, "\\dn").stdout.splitlines()
    assert not [l for l in psql(server, "\\dn").stdout.splitlines() if l.startswith("pg_")]
    # \d NAME: the regex lookup, the column list with types and nullability
    d = psql(server, "\\d ducklake_snapshot").stdout.splitlines()
    assert d[0].startswith("snapshot_id|int8||not null|")
    assert [l.split("|")[0] for l in d] == ["snapshot_id", "snapshot_time", "schema_version",
                                            "next_catalog_id", "next_file_id"]
    assert psql(server, "\\d+ ducklake_table").stdout.startswith("table_id|int8||||plain|||")
    r = psql(server, "\\d no_such_table", check=False)
    assert r.stdout == "" and "ERROR" not in r.stderr
    assert psql(server, "SELECT 'pg_catalog' ~ '^pg_', 'x' !~ 'x', 'AB' ~* 'b'").stdout.strip() == "t|f|t"


def test_current_database_is_the_one_connected_to(server):
    # as on PostgreSQL: the name the client connected with, not the
    # embedded engine's own database
    ask = ("SELECT current_database(), current_catalog, pg_catalog.current_database(), "
           "(SELECT string_agg(datname, ',') FROM pg_database), "
           "pg_database_size(current_database()) > 0")
    assert psql(server, ask).stdout.strip() == "lake|lake|lake|lake|t"
    assert psql(server, ask, db="other").stdout.strip() == "other|other|other|other|t"
    # the default database is still lake after another one opened
    assert psql(server, "SELECT current_database()").stdout.strip() == "lake"
    # a name is the client's text: it reaches the engine only as a literal
    hostile = "x'); DROP TABLE ducklake_snapshot; --"
    assert psql(server, "SELECT current_database(), pg_database_size(current_database()) > 0",
                db=hostile).stdout.strip() == hostile + "|t"
    assert psql(server, "SELECT count(*) FROM pg_database WHERE datname = current_database()",
                db=hostile).stdout.strip() == "1"


def test_pg_database_size(server, tmp_path):
    con = _ducklake_catalog(server, tmp_path)
    size = lambda: int(psql(server, "SELECT pg_database_size(current_database())").stdout)
    before = size()
    assert before > 0
    con.execute("INSERT INTO lake.t SELECT i, 'v' || i FROM range(100) r(i)")
    assert size() > before
    r = psql(server, "SELECT pg_database_size('no_such_db')", check=False)
    assert r.returncode != 0 and 'database "no_such_db" does not exist' in r.stderr
    # DuckLake's PRAGMA database_size asks the catalog server for it
    got = con.execute("SELECT database_size FROM pragma_database_size() "
                      "WHERE database_name = 'lake'").fetchone()[0]
    assert got != "0 bytes"
    con.close()
