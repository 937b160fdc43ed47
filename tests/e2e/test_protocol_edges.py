"""Protocol edges: malformed extended-protocol and startup messages sent over
raw sockets to a real `moraine serve`.

A bad Bind (format counts, format codes, lengths, parameter counts) is an
ERROR with PostgreSQL's SQLSTATE; the connection skips to Sync and then
keeps working. A badly framed message (a huge declared length) or a bad
startup packet is FATAL and ends only that connection. After each case the
server must still serve other connections.

The Server class comes from test_pg_front.py (MORAINE_BIN selects the binary).
"""
import socket
import struct

import psycopg
import pytest

from test_pg_front import Server, read_all, read_until_ready, startup_packet


@pytest.fixture(scope="module")
def server():
    s = Server()
    yield s
    assert s.stop() == 0


# ---- building frontend messages -----------------------------------------------

def msg(kind, body=b""):
    return kind + struct.pack("!I", len(body) + 4) + body


def cstr(s):
    return s.encode() + b"\0"


def parse(query, types=(), name=""):
    return msg(b"P", cstr(name) + cstr(query) + struct.pack("!H", len(types)) +
               b"".join(struct.pack("!I", t) for t in types))


def bind_body(values, param_formats=(), result_formats=(), portal="", stmt=""):
    body = cstr(portal) + cstr(stmt) + struct.pack("!H", len(param_formats))
    body += b"".join(struct.pack("!h", f) for f in param_formats)
    body += struct.pack("!H", len(values))
    for v in values:
        body += struct.pack("!i", -1) if v is None else struct.pack("!i", len(v)) + v
    body += struct.pack("!H", len(result_formats))
    body += b"".join(struct.pack("!h", f) for f in result_formats)
    return body


def bind(values, **kw):
    return msg(b"B", bind_body(values, **kw))


def describe(kind=b"P", name=""):
    return msg(b"D", kind + cstr(name))


def execute(portal=""):
    return msg(b"E", cstr(portal) + struct.pack("!i", 0))


SYNC = msg(b"S")


def query(sql):
    return msg(b"Q", cstr(sql))


# ---- reading backend messages --------------------------------------------------

def fields(body):
    """ErrorResponse body -> {field code: text}."""
    out = {}
    for part in body.split(b"\0"):
        if part:
            out[part[:1].decode()] = part[1:].decode()
    return out


def errors(msgs):
    return [fields(b) for t, b in msgs if t == b"E"]


def session(server):
    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    s.sendall(startup_packet())
    assert read_until_ready(s)[-1][0] == b"Z"
    return s


def exchange(s, data):
    s.sendall(data)
    return read_until_ready(s)


def assert_still_serving(server, s=None):
    """The same connection (when given) and a fresh one both answer."""
    if s is not None:
        msgs = exchange(s, query("SELECT 41 + 1"))
        assert [t for t, _ in msgs] == [b"T", b"D", b"C", b"Z"]
        assert msgs[1][1].endswith(b"42")
    with psycopg.connect(server.dsn(), autocommit=True) as fresh:
        assert fresh.execute("SELECT 1").fetchone() == (1,)


def assert_fatal_and_closed(s, sqlstate):
    rest = read_all(s)
    assert rest[:1] == b"E", rest
    n = struct.unpack("!I", rest[1:5])[0]
    f = fields(rest[5:1 + n])
    assert f["S"] == "FATAL" and f["C"] == sqlstate, f
    assert rest[1 + n:] == b""  # nothing after it: the connection is closed


# ---- Bind --------------------------------------------------------------------------

def test_bind_two_param_formats_for_one_parameter(server):
    with psycopg.connect(server.dsn(), autocommit=True) as other:
        with session(server) as s:
            msgs = exchange(s, parse("SELECT $1", [23]) +
                            bind([b"1"], param_formats=(0, 0)) + execute() + SYNC)
            types = [t for t, _ in msgs]
            assert types == [b"1", b"E", b"Z"]  # Execute skipped: straight to Sync
            (e,) = errors(msgs)
            assert e["S"] == "ERROR" and e["C"] == "08P01"
            assert "2 parameter formats but 1 parameters" in e["M"]
            assert_still_serving(server, s)
        assert other.execute("SELECT 42").fetchone() == (42,)


@pytest.mark.parametrize("where", ["param", "result"])
def test_format_code_7(server, where):
    kw = {"param_formats": (7,)} if where == "param" else {"result_formats": (7,)}
    with session(server) as s:
        msgs = exchange(s, parse("SELECT $1", [23]) + bind([b"1"], **kw) + execute() + SYNC)
        assert [t for t, _ in msgs] == [b"1", b"E", b"Z"]
        (e,) = errors(msgs)
        assert e["C"] == "22023" and "unsupported format code: 7" in e["M"]
        assert_still_serving(server, s)


def test_truncated_bind(server):
    full = bind_body([b"hello", b"x"])
    with session(server) as s:
        exchange(s, parse("SELECT $1, $2", [25, 25]) + SYNC)
        for cut in (3, 7, len(full) - 4, len(full) - 1):
            msgs = exchange(s, msg(b"B", full[:cut]) + execute() + SYNC)
            assert [t for t, _ in msgs] == [b"E", b"Z"], cut
            assert errors(msgs)[0]["C"] == "08P01"
        msgs = exchange(s, msg(b"B", full + b"\0") + SYNC)  # a trailing byte
        assert errors(msgs)[0]["C"] == "08P01"
        msgs = exchange(s, msg(b"B", full) + execute() + SYNC)  # the whole one works
        assert [t for t, _ in msgs] == [b"2", b"D", b"C", b"Z"]
        assert_still_serving(server, s)


def test_value_length_larger_than_message(server):
    body = cstr("") + cstr("") + struct.pack("!HH", 0, 1) + struct.pack("!i", 1000) + b"abc" + \
        struct.pack("!H", 0)
    with session(server) as s:
        exchange(s, parse("SELECT $1", [25]) + SYNC)
        msgs = exchange(s, msg(b"B", body) + execute() + SYNC)
        assert [t for t, _ in msgs] == [b"E", b"Z"]
        assert errors(msgs)[0]["C"] == "08P01"
        negative = body.replace(struct.pack("!i", 1000), struct.pack("!i", -7))
        msgs = exchange(s, msg(b"B", negative) + SYNC)
        assert errors(msgs)[0]["C"] == "08P01"
        huge_count = cstr("") + cstr("") + struct.pack("!HH", 0, 0xFFFF)
        msgs = exchange(s, msg(b"B", huge_count) + SYNC)
        assert errors(msgs)[0]["C"] == "08P01"
        assert_still_serving(server, s)


def test_parameter_count_must_match_statement(server):
    with session(server) as s:
        msgs = exchange(s, parse("SELECT $1", [23]) + bind([b"1", b"2"]) + execute() + SYNC)
        (e,) = errors(msgs)
        assert e["C"] == "08P01" and "supplies 2 parameters" in e["M"]
        msgs = exchange(s, parse("SELECT $1", [23]) + bind([]) + SYNC)
        assert errors(msgs)[0]["C"] == "08P01"
        assert_still_serving(server, s)


def test_result_format_count_must_match_columns(server):
    with session(server) as s:
        msgs = exchange(s, parse("SELECT 1 AS a, 2 AS b") + bind([], result_formats=(0, 0, 0)) +
                        SYNC)
        (e,) = errors(msgs)
        assert e["C"] == "08P01" and "3 result formats but query has 2 columns" in e["M"]
        msgs = exchange(s, parse("SELECT 1 AS a, 2 AS b") + bind([], result_formats=(0, 0)) +
                        describe() + execute() + SYNC)
        assert [t for t, _ in msgs] == [b"1", b"2", b"T", b"D", b"C", b"Z"]
        assert_still_serving(server, s)


# ---- Parse, Describe, Close, Execute ------------------------------------------------

def test_other_malformed_extended_messages(server):
    with session(server) as s:
        cases = [
            msg(b"P", cstr("") + cstr("SELECT 1") + struct.pack("!H", 500)),  # types missing
            msg(b"P", cstr("") + b"SELECT 1"),                                # unterminated
            msg(b"D", b"X" + cstr("")),                                       # bad subtype
            msg(b"D", b"S"),                                                  # no name
            msg(b"C", b"Q" + cstr("")),                                       # bad subtype
            msg(b"E", cstr("") + b"\0\0"),                                    # max rows cut
            msg(b"E", cstr("") + struct.pack("!i", 0) + b"junk"),             # trailing bytes
        ]
        for m in cases:
            msgs = exchange(s, m + SYNC)
            assert [t for t, _ in msgs] == [b"E", b"Z"], m
            assert errors(msgs)[0]["C"] == "08P01", m
        msgs = exchange(s, msg(b"Q", b"SELECT 1"))  # unterminated Query: ERROR, then ready
        assert [t for t, _ in msgs] == [b"E", b"Z"]
        assert errors(msgs)[0]["C"] == "08P01"
        assert_still_serving(server, s)


def test_deallocate_and_discard_all_end_prepared_statements(server):
    """DEALLOCATE and DISCARD ALL (a pooler's reset query) reach the
    protocol's prepared statements and portals, as in PostgreSQL: the next
    client on a pooled connection cannot run the last one's statements."""
    with session(server) as s:
        msgs = exchange(s, parse("SELECT 7", name="a") + parse("SELECT 8", name="b") +
                        parse("SELECT 9", name="c") + SYNC)
        assert [t for t, _ in msgs] == [b"1", b"1", b"1", b"Z"]
        msgs = exchange(s, query("DEALLOCATE a"))
        assert [t for t, _ in msgs] == [b"C", b"Z"] and msgs[0][1] == b"DEALLOCATE\0"
        msgs = exchange(s, bind([], stmt="a") + SYNC)
        assert errors(msgs)[0]["C"] == "26000"
        msgs = exchange(s, query("DEALLOCATE a"))  # gone: PostgreSQL's error
        assert errors(msgs)[0]["C"] == "26000"
        # b still runs; a statement can deallocate itself (freed after it ran)
        msgs = exchange(s, bind([], stmt="b") + execute() + SYNC)
        assert msgs[1][0] == b"D" and msgs[1][1].endswith(b"8")
        msgs = exchange(s, parse("DEALLOCATE self", name="self") + bind([], stmt="self") +
                        execute() + SYNC)
        assert [t for t, _ in msgs] == [b"1", b"2", b"C", b"Z"], msgs
        assert errors(exchange(s, bind([], stmt="self") + SYNC))[0]["C"] == "26000"
        # a named portal on c, then DISCARD ALL run through the unnamed statement
        msgs = exchange(s, bind([], stmt="c", portal="p") + SYNC)
        assert [t for t, _ in msgs] == [b"2", b"Z"]
        msgs = exchange(s, parse("DISCARD ALL") + bind([]) + execute() + SYNC)
        assert [t for t, _ in msgs] == [b"1", b"2", b"C", b"Z"], msgs
        for gone in (bind([], stmt="b"), bind([], stmt="c"), execute("p")):
            assert errors(exchange(s, gone + SYNC))[0]["C"] in ("26000", "34000"), gone
        # the names are free again
        msgs = exchange(s, parse("SELECT 10", name="b") + bind([], stmt="b") + execute() + SYNC)
        assert msgs[2][1].endswith(b"10"), msgs
        msgs = exchange(s, query("DEALLOCATE ALL"))
        assert msgs[0] == (b"C", b"DEALLOCATE ALL\0"), msgs
        assert errors(exchange(s, bind([], stmt="b") + SYNC))[0]["C"] == "26000"
        assert_still_serving(server, s)


# ---- framing: huge declared lengths ----------------------------------------------------

@pytest.mark.parametrize("header", [
    b"B\x7f\xff\xff\xff",   # over the 256 MiB cap
    b"Q\xff\xff\xff\xff",   # over the cap, and negative as an int32
    b"S\x00\x10\x00\x00",   # 1 MiB for a Sync: over the small-message limit
    b"D\x00\x01\x00\x00",   # 64 KiB for a Describe
])
def test_huge_declared_length_is_fatal(server, header):
    with psycopg.connect(server.dsn(), autocommit=True) as other:
        with session(server) as s:
            s.sendall(header)
            assert_fatal_and_closed(s, "08P01")
        assert other.execute("SELECT 42").fetchone() == (42,)
    assert_still_serving(server)


def test_declared_length_never_sent(server):
    """200 MiB declared (under the cap), 3 bytes sent, then EOF: the server
    waits for bytes, allocates only for what came, and drops the socket."""
    with session(server) as s:
        s.sendall(b"B" + struct.pack("!I", 200 << 20) + b"abc")
        s.shutdown(socket.SHUT_WR)
        assert read_all(s) == b""
    assert_still_serving(server)


# ---- startup and authentication ---------------------------------------------------------

def raw_startup(body):
    return struct.pack("!I", len(body) + 4) + body


@pytest.mark.parametrize("body,sqlstate", [
    (struct.pack("!I", 196608) + b"user\0moraine\0", "08P01"),       # no terminator
    (struct.pack("!I", 196608) + b"user\0", "08P01"),                # name without value
    (struct.pack("!I", 196608) + b"user\0moraine\0\0junk", "08P01"),  # bytes after it
    (struct.pack("!I", 0x00020000) + b"\0", "0A000"),                 # protocol 2.0
    (struct.pack("!II", 80877103, 0), "08P01"),                       # SSLRequest too long
])
def test_bad_startup_packet_is_fatal(server, body, sqlstate):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(raw_startup(body))
        assert_fatal_and_closed(s, sqlstate)
    assert_still_serving(server)


def test_startup_packet_length_over_limit(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(struct.pack("!II", 0x7FFFFFFF, 196608))
        assert_fatal_and_closed(s, "08P01")
    assert_still_serving(server)


def test_repeated_ssl_request_is_fatal(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(struct.pack("!II", 8, 80877103))
        assert s.recv(1) == b"N"
        s.sendall(struct.pack("!II", 8, 80877103))
        assert_fatal_and_closed(s, "08P01")
    assert_still_serving(server)


def test_cancel_request_of_wrong_length(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(raw_startup(struct.pack("!III", 80877102, 1, 2)))  # valid: just closed
        assert read_all(s) == b""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(raw_startup(struct.pack("!II", 80877102, 1)))  # key missing
        rest = read_all(s)
        assert rest == b"" or b"08P01" in rest
    assert_still_serving(server)


@pytest.fixture(scope="module")
def password_server(tmp_path_factory):
    pw = tmp_path_factory.mktemp("pw") / "pw"
    pw.write_text("s3cret-pass\n")
    s = Server("--password-file", str(pw))
    yield s
    assert s.stop() == 0


@pytest.mark.parametrize("body", [
    cstr("SCRAM-SHA-256") + struct.pack("!i", 1000) + b"n,,n=,r=abc",  # length past the end
    cstr("SCRAM-SHA-256") + struct.pack("!i", -2),                     # negative length
    cstr("SCRAM-SHA-256") + struct.pack("!i", 3) + b"n,,junk",         # trailing bytes
    cstr("SCRAM-SHA-256") + b"\0\0",                                    # length cut short
    b"SCRAM-SHA-256",                                                  # unterminated name
    cstr("PLAIN") + struct.pack("!i", 3) + b"n,,",                      # unknown mechanism
])
def test_malformed_sasl_initial_response(password_server, body):
    with socket.create_connection(("127.0.0.1", password_server.port), timeout=10) as s:
        s.sendall(startup_packet())
        s.recv(65536)  # AuthenticationSASL
        s.sendall(msg(b"p", body))
        assert_fatal_and_closed(s, "08P01")
    with psycopg.connect(password_server.dsn(password="s3cret-pass"), autocommit=True) as con:
        assert con.execute("SELECT 1").fetchone() == (1,)
