"""A busy team against one moraine with default settings: 16 DuckLake writer
processes committing into one table at once (each DuckDB client grows its
own connection pool). No connection may be refused, and every commit a
writer saw acknowledged must be in the table exactly once.

The binary is MORAINE_BIN.
"""
import json
import subprocess
import sys
import textwrap

from conftest import connect
from test_pg_front import Server

WRITERS = 16
COMMITS = 6

WRITER = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {tests!r})
    from conftest import connect
    dsn, data, w, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    duck = connect()
    duck.execute(f"ATTACH 'ducklake:postgres:{{dsn}}' AS lake (DATA_PATH '{{data}}/')")
    acked, errors = [], []
    for i in range(n):
        key = w * 1000 + i
        try:
            duck.execute(f"INSERT INTO lake.t VALUES ({{key}}, {{w}})")
            acked.append(key)
        except Exception as e:  # a conflict DuckLake gave up on is not acked
            errors.append(str(e)[:300])
    print(json.dumps({{"acked": acked, "errors": errors}}))
""")


def test_sixteen_writer_processes(tmp_path):
    server = Server("--store", f"file://{tmp_path}/store")
    data = tmp_path / "data"
    try:
        duck = connect()
        duck.execute(f"ATTACH 'ducklake:postgres:{server.dsn()}' AS lake (DATA_PATH '{data}/')")
        duck.execute("CREATE TABLE lake.t (id BIGINT, writer INTEGER)")
        script = tmp_path / "writer.py"
        script.write_text(WRITER.format(tests=str(__import__("pathlib").Path(__file__).parent)))
        procs = [subprocess.Popen([sys.executable, str(script), server.dsn(), str(data), str(w),
                                   str(COMMITS)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for w in range(WRITERS)]
        acked, errors = [], []
        for p in procs:
            out, err = p.communicate(timeout=600)
            assert p.returncode == 0, err
            result = json.loads(out.strip().splitlines()[-1])
            acked += result["acked"]
            errors += result["errors"]
        refused = [e for e in errors if "too many" in e or "53300" in e or "connect" in e.lower()]
        assert not refused, refused[:3]
        rows = duck.execute("SELECT id, count(*) FROM lake.t GROUP BY id").fetchall()
        counts = dict(rows)
        assert all(counts.get(k) == 1 for k in acked), "an acknowledged commit is missing or doubled"
        assert all(c == 1 for c in counts.values()), "a commit landed twice"
        assert len(acked) >= WRITERS * COMMITS // 2, f"only {len(acked)} commits, errors: {errors[:3]}"
        duck.close()
    finally:
        assert server.stop() == 0
    # the store holding all of it starts again and answers the same
    again = Server("--store", f"file://{tmp_path}/store")
    try:
        duck = connect()
        duck.execute(f"ATTACH 'ducklake:postgres:{again.dsn()}' AS lake (DATA_PATH '{data}/')")
        assert dict(duck.execute("SELECT id, count(*) FROM lake.t GROUP BY id").fetchall()) == counts
        duck.close()
    finally:
        assert again.stop() == 0
