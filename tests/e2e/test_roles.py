"""Users and roles against the real `moraine serve --users-file`: users made
with `moraine user add`, a `write` user building a lake with DuckLake, a
`read` user attaching, querying and time travelling, and every write it
tries failing with 42501 and changing nothing. The binary is MORAINE_BIN.
"""
import signal
import subprocess
import time

import psycopg
import pytest

from conftest import connect
from test_pg_front import MORAINE, Server


def user_add(path, name, role, password, *extra):
    r = subprocess.run([MORAINE, "user", "add", name, "--role", role, "--users-file", str(path),
                        *extra], input=password + "\n", capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    assert password not in path.read_text()


@pytest.fixture
def lake(tmp_path):
    users = tmp_path / "users"
    user_add(users, "bob", "write", "bob-pw")
    user_add(users, "alice", "read", "alice-pw")
    s = Server("--users-file", str(users))
    data = tmp_path / "data"
    bob = connect()
    bob.execute(f"ATTACH 'ducklake:postgres:{s.dsn(user='bob', password='bob-pw')}' AS lake "
                f"(DATA_PATH '{data}/')")
    bob.execute("CREATE TABLE lake.t (id BIGINT, v VARCHAR)")
    bob.execute("INSERT INTO lake.t VALUES (1, 'one')")
    bob.execute("INSERT INTO lake.t VALUES (2, 'two')")
    yield {"server": s, "bob": bob, "users": users, "data": data}
    bob.close()
    assert s.stop() == 0


def test_read_user_reads_and_time_travels_but_cannot_write(lake):
    s, bob = lake["server"], lake["bob"]
    alice = connect()
    alice.execute(f"ATTACH 'ducklake:postgres:{s.dsn(user='alice', password='alice-pw')}' AS lake "
                  f"(DATA_PATH '{lake['data']}/')")
    assert alice.execute("SELECT id, v FROM lake.t ORDER BY id").fetchall() == [(1, "one"),
                                                                              (2, "two")]
    versions = [r[0] for r in alice.execute(
        "SELECT snapshot_id FROM lake.snapshots() ORDER BY snapshot_id").fetchall()]
    assert alice.execute(f"SELECT count(*) FROM lake.t AT (VERSION => {versions[-2]})"
                         ).fetchone() == (1,)
    with pytest.raises(Exception, match="permission denied"):
        alice.execute("INSERT INTO lake.t VALUES (3, 'three')")
    with pytest.raises(Exception, match="permission denied"):
        alice.execute("CREATE TABLE lake.u (x INTEGER)")
    alice.close()
    # nothing changed: the writer sees its own two rows and no new snapshot
    assert bob.execute("SELECT count(*) FROM lake.t").fetchone() == (2,)
    assert bob.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0] == versions[-1]
    assert s.wait_log("refused (42501) a write by user \"alice\" (role read)")
    opened = [l for l in s.lines if "opened from" in l and '"alice"' in l]
    assert opened and all(l.endswith("no TLS, role read") for l in opened)


def test_read_user_every_write_statement_is_42501(lake):
    s = lake["server"]
    with psycopg.connect(s.dsn(user="alice", password="alice-pw"), autocommit=True) as con:
        before = con.execute("SELECT count(*) FROM ducklake_snapshot").fetchone()
        for sql in ["INSERT INTO ducklake_metadata VALUES ('k', 'v', NULL, NULL)",
                    "UPDATE ducklake_metadata SET value = 'x'",
                    "DELETE FROM ducklake_snapshot",
                    "CREATE TABLE ducklake_x (a INTEGER)",
                    "DROP TABLE ducklake_metadata"]:
            with pytest.raises(psycopg.Error) as refused:
                con.execute(sql)
            assert refused.value.sqlstate == "42501", sql
        with pytest.raises(psycopg.Error) as refused:
            with con.cursor().copy("COPY ducklake_metadata FROM STDIN") as cp:
                cp.write_row(("k", "v", None, None))
        assert refused.value.sqlstate == "42501"
        # inside an explicit transaction too, and the session goes on
        with pytest.raises(psycopg.Error):
            with con.transaction():
                con.execute("INSERT INTO ducklake_metadata VALUES ('k2', 'v', NULL, NULL)")
        assert con.execute("SELECT count(*) FROM ducklake_snapshot").fetchone() == before
    with psycopg.connect(s.dsn(user="bob", password="bob-pw"), autocommit=True) as con:
        assert con.execute("SELECT count(*) FROM ducklake_metadata WHERE key LIKE 'k%'"
                           ).fetchone() == (0,)


def test_wrong_password_and_unknown_user_look_the_same(lake):
    s = lake["server"]
    errors = []
    for user, pw in [("alice", "wrong"), ("mallory", "alice-pw")]:
        t0 = time.time()
        with pytest.raises(psycopg.OperationalError) as failed:
            psycopg.connect(s.dsn(user=user, password=pw))
        assert time.time() - t0 >= 0.9  # refused only after the delay
        errors.append(str(failed.value).replace(user, "USER"))
    assert errors[0] == errors[1] and "password authentication failed" in errors[0]
    assert s.wait_log("authentication failed for user \"mallory\"")
    assert "no such user" in [l for l in s.lines if '"mallory"' in l][0]


def test_sighup_reloads_the_users_file(lake):
    s, users = lake["server"], lake["users"]
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(s.dsn(user="carol", password="carol-pw"))
    user_add(users, "carol", "read", "carol-pw")
    user_add(users, "alice", "write", "alice-new")  # a role and password change
    s.proc.send_signal(signal.SIGHUP)
    assert s.wait_log("SIGHUP: users file reloaded")
    with psycopg.connect(s.dsn(user="carol", password="carol-pw"), autocommit=True) as con:
        with pytest.raises(psycopg.Error) as refused:
            con.execute("INSERT INTO ducklake_metadata VALUES ('c', 'v', NULL, NULL)")
        assert refused.value.sqlstate == "42501"
    with psycopg.connect(s.dsn(user="alice", password="alice-new"), autocommit=True) as con:
        con.execute("INSERT INTO ducklake_metadata VALUES ('a', 'v', NULL, NULL)")
    # a broken file keeps the users loaded before
    users.write_text("broken\n")
    s.proc.send_signal(signal.SIGHUP)
    assert s.wait_log("users file reload failed")
    psycopg.connect(s.dsn(user="carol", password="carol-pw")).close()


def test_database_grants(lake):
    s, users = lake["server"], lake["users"]
    user_add(users, "dora", "read", "dora-pw", "--databases", "lake,archive")
    s.proc.send_signal(signal.SIGHUP)
    assert s.wait_log("SIGHUP: users file reloaded")
    psycopg.connect(s.dsn(user="dora", password="dora-pw", dbname="lake")).close()
    with pytest.raises(psycopg.OperationalError, match='permission denied for database "other"'):
        psycopg.connect(s.dsn(user="dora", password="dora-pw", dbname="other"))
    # a name spanning two grants is neither of them
    with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
        psycopg.connect(s.dsn(user="dora", password="dora-pw", dbname="lake,archive"))
    assert s.wait_log('user "dora" may not use database "other"')
    assert "dora read SCRAM-SHA-256$" in users.read_text()
    assert users.read_text().count(" lake,archive\n") == 1


def test_users_file_problems_exit_with_one_line(tmp_path):
    users = tmp_path / "users"
    users.write_text("alice reader SCRAM-SHA-256$4096:AAAA$AAAA:AAAA\n")
    for args, status, reason in [
        (["--users-file", str(users)], 1, "line 1: unknown role"),
        (["--users-file", str(tmp_path / "missing")], 1, "cannot read the users file"),
        (["--users-file", str(users), "--password-file", str(users)], 2, "exclude each other"),
    ]:
        r = subprocess.run([MORAINE, "serve", "--listen", "127.0.0.1:0", "--store",
                            f"file://{tmp_path}/s", *args], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == status, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and reason in lines[0], r.stderr
    r = subprocess.run([MORAINE, "user", "add", "x", "--role", "admin", "--users-file",
                        str(users)], input="pw\n", capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "unknown role" in r.stderr
