"""TLS against the real `moraine serve`: certificates made by the openssl
command line for each test, clients psycopg (libpq), DuckDB's postgres
extension through DuckLake, and Python's ssl module for the raw handshake.
The binary is MORAINE_BIN.
"""
import os
import signal
import socket
import ssl
import struct
import subprocess

import psycopg
import pytest

from conftest import connect
from test_pg_front import MORAINE, Server


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
            "-out", f"{name}.crt", "-days", "2", "-subj", f"/CN={name}", cwd=d)
    return d / f"{name}.crt"


def make_server_cert(d, ca, name):
    """A certificate for 127.0.0.1 / localhost signed by ca; returns (cert, key)."""
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
            f"{name}.csr", "-subj", "/CN=127.0.0.1", cwd=d)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", "san.ext", cwd=d)
    return d / f"{name}.crt", d / f"{name}.key"


@pytest.fixture
def certs(tmp_path):
    ca = make_ca(tmp_path, "ca")
    cert, key = make_server_cert(tmp_path, "ca", "server")
    return {"dir": tmp_path, "ca": ca, "cert": cert, "key": key}


def served_cert_der(server):
    """The certificate the server presents, from a raw SSLRequest + handshake."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(struct.pack("!ii", 8, 80877103))
        assert s.recv(1) == b"S"
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        with ctx.wrap_socket(s) as t:
            return t.getpeercert(binary_form=True)


def file_der(path):
    return ssl.PEM_cert_to_DER_cert(path.read_text())


def test_sslmode_require_and_verify_full(certs):
    s = Server("--tls-cert", str(certs["cert"]), "--tls-key", str(certs["key"]))
    try:
        with psycopg.connect(s.dsn(sslmode="require"), autocommit=True) as con:
            assert con.pgconn.ssl_in_use
            assert con.execute("SELECT 1").fetchone() == (1,)
            pid = con.info.backend_pid
        # the line is the server's; the test's reader thread may not have it yet
        assert s.wait_log(f"connection {pid} opened from 127.0.0.1:"), s.log()
        assert [l for l in s.lines if f"connection {pid} opened" in l][0].endswith(", TLS, role write")
        with psycopg.connect(s.dsn(sslmode="verify-full", sslrootcert=str(certs["ca"])),
                             autocommit=True) as con:
            assert con.pgconn.ssl_in_use
        # a client that asks for no TLS still gets in (--tls-required is off)
        with psycopg.connect(s.dsn(sslmode="disable"), autocommit=True) as con:
            assert not con.pgconn.ssl_in_use
        # a certificate from another authority is refused by verify-ca
        other = make_ca(certs["dir"], "other")
        with pytest.raises(psycopg.OperationalError, match="certificate verify failed"):
            psycopg.connect(s.dsn(sslmode="verify-ca", sslrootcert=str(other)))
        assert served_cert_der(s) == file_der(certs["cert"])
    finally:
        assert s.stop() == 0


def test_verify_full_refuses_a_certificate_for_another_host(certs):
    d = certs["dir"]
    (d / "other.ext").write_text("subjectAltName=DNS:db.example.com\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "elsewhere.key", "-out",
            "elsewhere.csr", "-subj", "/CN=db.example.com", cwd=d)
    openssl("x509", "-req", "-in", "elsewhere.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "elsewhere.crt", "-days", "2", "-extfile", "other.ext",
            cwd=d)
    s = Server("--tls-cert", str(d / "elsewhere.crt"), "--tls-key", str(d / "elsewhere.key"))
    try:
        with pytest.raises(psycopg.OperationalError, match="does not match host name"):
            psycopg.connect(s.dsn(sslmode="verify-full", sslrootcert=str(certs["ca"])))
        # the same certificate passes verify-ca (the chain is right, the name is not checked)
        psycopg.connect(s.dsn(sslmode="verify-ca", sslrootcert=str(certs["ca"]))).close()
    finally:
        assert s.stop() == 0


def assert_closed(c):
    """The server ends the connection (EOF or reset; a TLS alert may come
    first) within the socket's timeout."""
    try:
        while c.recv(4096):
            pass
    except ConnectionResetError:
        pass


def test_broken_tls_preambles_leave_the_server_serving(certs):
    s = Server("--tls-cert", str(certs["cert"]), "--tls-key", str(certs["key"]),
               "--auth-timeout", "2")
    ssl_request = struct.pack("!ii", 8, 80877103)
    try:
        def raw():
            return socket.create_connection(("127.0.0.1", s.port), timeout=10)

        # garbage where the ClientHello should be: the server closes
        with raw() as c:
            c.sendall(ssl_request)
            assert c.recv(1) == b"S"
            c.sendall(b"\x00garbage that is no TLS record" * 10)
            assert_closed(c)
        # plaintext pipelined behind the SSLRequest: refused, as PostgreSQL does
        with raw() as c:
            c.sendall(ssl_request + struct.pack("!ii", 8, 196608))
            assert_closed(c)
        # a client that drops mid-handshake: half a ClientHello, then gone
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        hello = ctx.wrap_bio(incoming, outgoing)
        with pytest.raises(ssl.SSLWantReadError):
            hello.do_handshake()
        record = outgoing.read()
        with raw() as c:
            c.sendall(ssl_request)
            assert c.recv(1) == b"S"
            c.sendall(record[:len(record) // 2])
        # one that asks for TLS and then says nothing: closed by the auth timeout
        silent = raw()
        silent.sendall(ssl_request)
        assert silent.recv(1) == b"S"
        assert_closed(silent)
        silent.close()
        # and everyone else is served all along
        with psycopg.connect(s.dsn(sslmode="require"), autocommit=True) as con:
            assert con.execute("SELECT 1").fetchone() == (1,)
        assert s.wait_log("TLS handshake failed"), s.log()
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("mode", ["require", "verify-full"])
def test_ducklake_over_tls(certs, tmp_path, mode):
    s = Server("--tls-cert", str(certs["cert"]), "--tls-key", str(certs["key"]), "--tls-required")
    try:
        duck = connect()
        extra = {"sslrootcert": str(certs["ca"])} if mode == "verify-full" else {}
        duck.execute(f"ATTACH 'ducklake:postgres:{s.dsn(sslmode=mode, **extra)}' AS lake "
                     f"(DATA_PATH '{tmp_path}/data/')")
        duck.execute("CREATE TABLE lake.t (id BIGINT, v VARCHAR)")
        duck.execute("INSERT INTO lake.t VALUES (1, 'a'), (2, 'b')")
        assert duck.execute("SELECT sum(id), string_agg(v, ',' ORDER BY v) FROM lake.t"
                            ).fetchall() == [(3, "a,b")]
        duck.close()
    finally:
        assert s.stop() == 0


def test_psql_verify_full(certs):
    s = Server("--tls-cert", str(certs["cert"]), "--tls-key", str(certs["key"]), "--tls-required")
    try:
        r = subprocess.run(["psql", "-X", "-A", "-t", "-c", "SELECT 41 + 1",
                            f"host=127.0.0.1 port={s.port} dbname=lake user=moraine "
                            f"sslmode=verify-full sslrootcert={certs['ca']}"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stdout.strip() == "42", r.stderr
    finally:
        assert s.stop() == 0


def test_tls_required_refuses_plain_connections(certs):
    s = Server("--tls-cert", str(certs["cert"]), "--tls-key", str(certs["key"]), "--tls-required")
    try:
        with pytest.raises(psycopg.OperationalError) as refused:
            psycopg.connect(s.dsn(sslmode="disable"))
        assert "TLS connections only" in str(refused.value)
        with psycopg.connect(s.dsn(sslmode="require"), autocommit=True) as con:
            assert con.execute("SELECT 1").fetchone() == (1,)
        assert s.wait_log("refused: no TLS")
    finally:
        assert s.stop() == 0


def test_sighup_reloads_the_certificate(certs):
    s = Server("--tls-cert", str(certs["cert"]), "--tls-key", str(certs["key"]))
    try:
        first = served_cert_der(s)
        assert first == file_der(certs["cert"])
        with psycopg.connect(s.dsn(sslmode="require"), autocommit=True) as kept:
            # a new certificate in place of the old, then SIGHUP
            cert, key = make_server_cert(certs["dir"], "ca", "renewed")
            os.replace(cert, certs["cert"])
            os.replace(key, certs["key"])
            s.proc.send_signal(signal.SIGHUP)
            assert s.wait_log("TLS certificate and key reloaded")
            assert served_cert_der(s) == file_der(certs["cert"]) != first
            # the established connection goes on
            assert kept.execute("SELECT 2").fetchone() == (2,)
        # a broken file on reload keeps the current certificate
        certs["key"].write_text("not a key\n")
        s.proc.send_signal(signal.SIGHUP)
        assert s.wait_log("TLS reload failed")
        assert served_cert_der(s) == file_der(certs["cert"])
    finally:
        assert s.stop() == 0


def test_without_tls_sslmode_require_is_refused_by_the_client():
    s = Server()
    try:
        with pytest.raises(psycopg.OperationalError, match="(?i)ssl"):
            psycopg.connect(s.dsn(sslmode="require"))
        with psycopg.connect(s.dsn(sslmode="prefer"), autocommit=True) as con:
            assert not con.pgconn.ssl_in_use
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("args,status,reason", [
    (["--tls-cert", "c.pem"], 2, "--tls-cert and --tls-key go together"),
    (["--tls-required"], 2, "--tls-required needs"),
    (["--tls-cert", "/nonexistent.pem", "--tls-key", "/nonexistent.key"], 1,
     "cannot load the certificate"),
])
def test_bad_tls_flags_exit_with_one_line(args, status, reason, tmp_path):
    r = subprocess.run([MORAINE, "serve", "--listen", "127.0.0.1:0", "--store",
                        f"file://{tmp_path}/s", *args], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == status, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and reason in lines[0], r.stderr


def test_mismatched_key_is_refused_at_start(certs, tmp_path):
    other = make_server_cert(certs["dir"], "ca", "other")[1]
    r = subprocess.run([MORAINE, "serve", "--listen", "127.0.0.1:0", "--store",
                        f"file://{tmp_path}/s", "--tls-cert", str(certs["cert"]),
                        "--tls-key", str(other)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and ("does not match" in r.stderr or "mismatch" in r.stderr), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
