"""The postgres extension's statements that moraine answers in its own way.

DuckDB's postgres extension sends one UNION ALL over pg_class, pg_attribute,
pg_type, pg_description and pg_constraint for every table it binds, and
DuckLake makes it bind one that does not exist on every read of a table
with inlined rows. moraine recognizes that statement (src/sql/sql_pginfo.h)
and answers it from its relation directory; two more it sends at every
ATTACH (enum and composite types) are empty by construction. A relay between a real
DuckDB + DuckLake client and the server keeps the statements the client
sent; then:
- the test-only planner tool (tests/tools/sqltool.c) must take every
  lookup among them as the lookup: if the installed extension changes its text, this
  fails here rather than silently going slow;
- each, sent again, must give the same columns, types and rows as the same
  statement wrapped in `SELECT * FROM (...)`, which the planner does not
  recognize and which therefore runs over the pg_catalog views (the order
  of the lookup's rows is checked by test_sql_pginfo).
"""
import os
import pathlib
import socket
import struct
import subprocess
import threading

import psycopg

from conftest import connect
from test_pg_front import MORAINE, server  # noqa: F401  (fixture)

ROOT = pathlib.Path(__file__).resolve().parents[2]


def sqltool_path():
    """MORAINE_SQLTOOL, else beside MORAINE_BIN, else in this checkout's build."""
    if os.environ.get("MORAINE_SQLTOOL"):
        return os.environ["MORAINE_SQLTOOL"]
    beside = pathlib.Path(MORAINE).parent / "moraine-sqltool"
    return str(beside if beside.exists() else ROOT / "build/tests/tools/moraine-sqltool")


def planned(query):
    r = subprocess.run([sqltool_path(), "plan"], input=query, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def read_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


class Relay:
    """Relays client connections to the server and keeps the text of every
    simple-protocol Query message a client sends."""

    def __init__(self, port):
        self.port_to = port
        self.queries = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            up = socket.create_connection(("127.0.0.1", self.port_to))
            threading.Thread(target=self._down, args=(up, client), daemon=True).start()
            threading.Thread(target=self._up, args=(client, up), daemon=True).start()

    @staticmethod
    def _down(up, client):
        try:
            while data := up.recv(65536):
                client.sendall(data)
        except OSError:
            pass
        client.close()

    def _up(self, client, up):
        try:
            while True:  # untyped messages first: an SSL / GSS request, then the startup
                (n,) = struct.unpack("!i", read_exact(client, 4))
                body = read_exact(client, n - 4)
                up.sendall(struct.pack("!i", n) + body)
                if struct.unpack("!i", body[:4])[0] not in (80877103, 80877104):
                    break
            while True:
                head = read_exact(client, 5)
                body = read_exact(client, struct.unpack("!i", head[1:])[0] - 4)
                if head[:1] == b"Q":
                    self.queries.append(body[:-1].decode())
                up.sendall(head + body)
        except (EOFError, OSError):
            pass
        up.close()

    def close(self):
        self.listener.close()


def results(dsn, query):
    """Every result set of a simple-protocol query: (columns, rows) each."""
    out = []
    with psycopg.connect(dsn, autocommit=True, cursor_factory=psycopg.ClientCursor) as c:
        cur = c.cursor()
        cur.execute(query)
        while True:
            if cur.description is not None:
                out.append(([(d.name, d.type_code) for d in cur.description], cur.fetchall()))
            if not cur.nextset():
                break
        c.execute("ROLLBACK")  # the catalog load opens a block of its own
    return out


def test_the_extensions_lookups_are_answered_from_the_directory(server, tmp_path):  # noqa: F811
    relay = Relay(server.port)
    con = connect()
    dsn = f"host=127.0.0.1 port={relay.port} dbname=lake user=moraine"
    con.execute(f"ATTACH 'ducklake:postgres:{dsn}' AS lake (DATA_PATH '{tmp_path}/data')")
    con.execute("CREATE TABLE lake.t (a INTEGER, b VARCHAR)")
    for i in range(3):
        con.execute(f"INSERT INTO lake.t VALUES ({i}, 'x')")
    assert con.execute("SELECT count(*) FROM lake.t AT (VERSION => 3)").fetchone() == (2,)
    assert con.execute("SELECT sum(a) FROM lake.t").fetchone() == (3,)
    # the extension alone, as a DuckDB user attaches a PostgreSQL database
    con.execute(f"ATTACH '{dsn}' AS pg (TYPE postgres, READ_ONLY)")
    keys = con.execute("SELECT table_name, constraint_type FROM duckdb_constraints() "
                       "WHERE database_name = 'pg' AND constraint_type = 'PRIMARY KEY' "
                       "ORDER BY 1").fetchall()
    assert ("ducklake_snapshot", "PRIMARY KEY") in keys
    assert con.execute("SELECT count(*) FROM pg.public.ducklake_snapshot").fetchone() == (5,)
    con.close()
    relay.close()

    # the extension's statements, one by one (it separates them with ";\n")
    statements = dict.fromkeys(st.strip() for q in relay.queries for st in q.split(";\n")
                               if "pg_" in st and not st.strip().upper().startswith("BEGIN"))
    plans = {st: planned(st) for st in statements}
    assert all(len(p) == 1 for p in plans.values()), plans
    known = {st: p[0] for st, p in plans.items() if p[0] != "other"}
    for st, p in plans.items():  # every table lookup the client sent is recognized
        if "pg_constraint" in st and "pg_attribute" in st:
            assert p[0].startswith("lookup "), st
    seen = set(known.values())
    assert "lookup public ducklake_inlined_delete_1" in seen  # DuckLake's probe of a missing table
    assert "lookup public ducklake_snapshot" in seen
    assert "lookup * *" in seen  # the extension's catalog load at ATTACH
    assert sum(1 for p in known.values() if p == "empty") == 2  # its enum and composite types

    direct = f"host=127.0.0.1 port={server.port} dbname=lake user=moraine"
    for st, p in known.items():
        views = f"SELECT * FROM ({st}) AS through_the_views"
        assert planned(views) == ["other"]
        got, want = results(direct, st), results(direct, views)
        assert [cols for cols, _ in got] == [cols for cols, _ in want], st
        assert [sorted(rows, key=repr) for _, rows in got] == \
            [sorted(rows, key=repr) for _, rows in want], st
        rows = sum(len(r) for _, r in got)
        assert rows == 0 if p == "empty" or "inlined_delete" in p else rows > 0, st

    # a hostile table name in the client's own copy of the lookup: the value
    # reaches the engine only as a quoted literal, and finds nothing
    one = next(st for st, p in known.items() if p == "lookup public ducklake_snapshot")
    hostile = one.replace("'ducklake_snapshot'", "'x'');DROP TABLE ducklake_snapshot;--'")
    assert planned(hostile) == ["lookup public x');DROP TABLE ducklake_snapshot;--"]
    got = results(direct, hostile)
    assert got == results(direct, f"SELECT * FROM ({hostile}) AS through_the_views")
    assert sum(len(r) for _, r in got) == 0
    assert sum(len(r) for _, r in results(direct, one)) > 0  # ducklake_snapshot is still there
