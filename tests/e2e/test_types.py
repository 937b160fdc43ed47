"""Every value round-trips (issue 8): a type matrix written by a real DuckDB +
DuckLake client through moraine and through a DuckDB-file catalog (the
reference), read back at every snapshot on both, then again after moraine
restarts on the same store — which loads the inlined rows back from it.

One DuckLake table per type family. Each gets a few rows (inlined into the
catalog), an UPDATE and a DELETE of inlined rows, then 3000 rows (Parquet,
with file statistics); after the restart inlined rows are copied and a
loaded inlined row is updated, and moraine restarts once more. Values are compared as (typeof, text form) so NaN compares
equal to NaN. The inlined rows are checked to be inlined (no data file) and
the large insert to be Parquet.

The binary is MORAINE_BIN (default build/src/cli/moraine).
"""
import pytest

from conftest import connect
from test_pg_front import Server

# family -> (columns, rows): a column is (name, DuckDB type); a row holds one
# SQL literal per column. Rows are few enough to be inlined.
FAMILIES = {
    "interval": ([("iv", "INTERVAL")], [
        ("INTERVAL '1 month 2 days 3 seconds'",),
        ("INTERVAL '-1 year 3 hours 0.000001 seconds'",),
        ("INTERVAL '178000000 years'",),
        ("NULL",),
    ]),
    "hugeint": ([("h", "HUGEINT"), ("u", "UHUGEINT")], [
        ("170141183460469231731687303715884105727", "340282366920938463463374607431768211455"),
        ("-170141183460469231731687303715884105727 - 1", "0"),
        ("NULL", "NULL"),
    ]),
    "uuid": ([("u", "UUID")], [
        ("'00000000-0000-0000-0000-000000000000'",),
        ("'ffffffff-ffff-ffff-ffff-ffffffffffff'",),
        ("'0189d4e2-7b1c-7cc0-8a4e-3f1f2d0c9b11'",),
        ("NULL",),
    ]),
    "blob": ([("b", "BLOB")], [
        ("'\\x00\\xFFab\\x5C'::BLOB",),
        ("''::BLOB",),
        ("NULL",),
    ]),
    "decimal": ([("d38", "DECIMAL(38,10)"), ("d4", "DECIMAL(4,1)"), ("d18", "DECIMAL(18,3)")], [
        ("9999999999999999999999999999.9999999999", "-999.9", "123456789012345.678"),
        ("-0.0000000001", "0.0", "-0.001"),
        ("NULL", "NULL", "NULL"),
    ]),
    "date": ([("d", "DATE")], [
        ("'infinity'::DATE",),
        ("'-infinity'::DATE",),
        ("DATE '2024-02-29'",),
        ("'0044-03-15 (BC)'::DATE",),
        ("NULL",),
    ]),
    "timestamp": ([("ts", "TIMESTAMP"), ("ns", "TIMESTAMP_NS"), ("s", "TIMESTAMP_S"),
                   ("ms", "TIMESTAMP_MS"), ("tz", "TIMESTAMPTZ")], [
        ("'infinity'::TIMESTAMP", "'2262-04-11 23:47:16.854775806'::TIMESTAMP_NS",
         "'2020-01-01 01:02:03'::TIMESTAMP_S", "'2020-01-01 01:02:03.123'::TIMESTAMP_MS",
         "'2020-01-01 01:02:03.123456+05:30'::TIMESTAMPTZ"),
        ("'-infinity'::TIMESTAMP", "'1677-09-22 00:00:00.000000001'::TIMESTAMP_NS",
         "'1970-01-01 00:00:00'::TIMESTAMP_S", "'1969-12-31 23:59:59.999'::TIMESTAMP_MS",
         "'infinity'::TIMESTAMPTZ"),
        ("'2024-02-29 12:34:56.789012'::TIMESTAMP", "NULL", "NULL", "NULL",
         "'-infinity'::TIMESTAMPTZ"),
        ("NULL", "NULL", "NULL", "NULL", "NULL"),
    ]),
    "time": ([("t", "TIME"), ("tz", "TIMETZ")], [
        ("'24:00:00'::TIME", "'10:11:12.5+15:59'::TIMETZ"),
        ("'00:00:00.000001'::TIME", "'00:00:00-15:59'::TIMETZ"),
        ("NULL", "NULL"),
    ]),
    "nested": ([("l", "INTEGER[]"), ("sl", "VARCHAR[]"), ("st", 'STRUCT(a INTEGER, "b c" VARCHAR)'),
                ("m", "MAP(VARCHAR, INTEGER[])"), ("ls", "STRUCT(l INTEGER[], s VARCHAR)[]")], [
        ("[1, NULL, 3]", "['a', 'b,c', 'd''e', 'f\"g', NULL, 'NULL', '', ' x ', '[', ']']",
         "{'a': 1, 'b c': 'x, y}'}", "MAP {'k=1': [1, 2], 'x': NULL}",
         "[{'l': [1], 's': 'it''s'}, NULL]"),
        ("[]", "[]", "{'a': NULL, 'b c': ''}", "MAP {}", "[]"),
        ("NULL", "NULL", "NULL", "NULL", "NULL"),
    ]),
    "varchar": ([("s", "VARCHAR")], [
        ("'héllo ☃ 𝄞 ''q'' \"d\" \\'",),
        ("''",),
        ("'NULL'",),
        ("NULL",),
    ]),
    "boolean": ([("b", "BOOLEAN")], [("true",), ("false",), ("NULL",)]),
    "ints": ([("i8", "TINYINT"), ("i16", "SMALLINT"), ("i32", "INTEGER"), ("i64", "BIGINT"),
              ("u8", "UTINYINT"), ("u16", "USMALLINT"), ("u32", "UINTEGER"), ("u64", "UBIGINT")], [
        ("-128", "-32768", "-2147483648", "-9223372036854775807 - 1", "0", "0", "0", "0"),
        ("127", "32767", "2147483647", "9223372036854775807", "255", "65535", "4294967295",
         "18446744073709551615"),
        ("NULL",) * 8,
    ]),
    "float": ([("f", "FLOAT"), ("d", "DOUBLE")], [
        ("'nan'::FLOAT", "'nan'::DOUBLE"),
        ("'inf'::FLOAT", "'-inf'::DOUBLE"),
        ("'-inf'::FLOAT", "5e-324"),
        ("3.4028235e38", "1.7976931348623157e308"),
        ("'-0.0'::FLOAT", "0.1"),
        ("NULL", "NULL"),
    ]),
    "json": ([("j", "JSON")], [
        ("'{\"a\": [1, \"x\\\"y\"], \"b\": null}'",),
        ("'[]'",),
        ("NULL",),
    ]),
}

# Rows only inlining can hold (Parquet has no negative intervals): left out of
# the Parquet insert. family -> row indices.
INLINE_ONLY = {"interval": {1}}

BIG = 3000


def values(cols, row, rid):
    lits = ", ".join(f"CAST({lit} AS {typ})" for (_, typ), lit in zip(cols, row))
    return f"({rid}, {lits})"


def steps(family):
    """The statements, in order, and the tables they leave."""
    cols, rows = FAMILIES[family]
    t = f"lake.t_{family}"
    defs = ", ".join(f'"{name}" {typ}' for name, typ in cols)
    small = ", ".join(values(cols, r, i) for i, r in enumerate(rows))
    # the same values, many times: [v0, v1, ...][1 + i % n] per column
    many = [r for i, r in enumerate(rows) if i not in INLINE_ONLY.get(family, ())]
    picks = ", ".join(
        f"[{', '.join(f'CAST({r[c]} AS {typ})' for r in many)}][1 + (i % {len(many)})]"
        for c, (_, typ) in enumerate(cols))
    first = ", ".join(f'"{name}" = CAST({rows[1][c]} AS {typ})' for c, (name, typ) in enumerate(cols))
    return [
        ("create", f"CREATE TABLE {t}(id INTEGER, {defs})"),
        ("inlined", f"INSERT INTO {t} VALUES {small}"),
        ("update", f"UPDATE {t} SET {first} WHERE id = 0"),
        ("delete", f"DELETE FROM {t} WHERE id = 1"),
        ("parquet", f"INSERT INTO {t} SELECT 1000 + i, {picks} FROM range({BIG}) r(i)"),
    ]


def after_restart(family):
    cols, rows = FAMILIES[family]
    t = f"lake.t_{family}"
    first = ", ".join(f'"{name}" = CAST({rows[0][c]} AS {typ})' for c, (name, typ) in enumerate(cols))
    return [
        f"INSERT INTO {t} SELECT id + 10000, * EXCLUDE (id) FROM {t} WHERE id < 1000",
        f"UPDATE {t} SET {first} WHERE id = 2",
    ]


def attach(side):
    con = connect()
    if "server" in side:
        con.execute(f"ATTACH 'ducklake:postgres:{side['server'].dsn()}' AS lake (DATA_PATH '{side['data']}')")
    else:
        con.execute(f"ATTACH 'ducklake:{side['file']}' AS lake (DATA_PATH '{side['data']}')")
    return con


def answer(con, sql):
    try:
        return con.execute(sql).fetchall()
    except Exception as e:  # noqa: BLE001 - e.g. the table does not exist at that snapshot
        return ("error", type(e).__name__)


def state(con, family):
    """What a client reads at every snapshot: (typeof, text) of each value."""
    cols, _ = FAMILIES[family]
    sel = ", ".join(f'typeof("{n}"), CAST("{n}" AS VARCHAR)' for n, _ in cols)
    snaps = [r[0] for r in con.execute("SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall()]
    out = {"snapshots": snaps}
    for sid in snaps:
        out[sid] = answer(con, f"SELECT id, {sel} FROM lake.t_{family} AT (VERSION => {sid}) ORDER BY ALL")
    out["files"] = answer(con, f"SELECT count(*) FROM ducklake_list_files('lake', 't_{family}')")
    return out


def data_files(con, family):
    return con.execute(f"SELECT count(*) FROM ducklake_list_files('lake', 't_{family}')").fetchone()[0]


def run(con, sql):
    try:
        con.execute(sql)
        return "ok"
    except Exception as e:  # noqa: BLE001 - compared across both sides
        return f"error {type(e).__name__}: {str(e)[:300]}"


@pytest.mark.parametrize("family", list(FAMILIES))
def test_type_family_round_trips(tmp_path, family):
    ref = {"file": tmp_path / "ref.ducklake", "data": tmp_path / "ref-data"}
    mor = {"data": tmp_path / "mor-data", "store": "file://" + str(tmp_path / "store")}
    mor["server"] = Server("--store", mor["store"])
    try:
        rcon, mcon = attach(ref), attach(mor)
        for what, sql in steps(family):
            r = run(rcon, sql)
            assert r == "ok", f"{what} fails on the file catalog: {r}"
            assert run(mcon, sql) == "ok", f"{what} through moraine: {sql}"
            if what == "inlined":  # the rows live in the catalog, not in a file
                assert data_files(rcon, family) == 0 and data_files(mcon, family) == 0
            if what == "parquet":
                assert data_files(rcon, family) > 0 and data_files(mcon, family) > 0
        expected = state(rcon, family)
        assert state(mcon, family) == expected
        mcon.close()
    finally:
        assert mor["server"].stop() == 0

    # the store starts again and gives back every value at every snapshot
    mor["server"] = Server("--store", mor["store"])
    try:
        mcon = attach(mor)
        assert state(mcon, family) == expected, "after restart"
        # written after the load: inlined rows copied (read back from the
        # loaded catalog) and a loaded inlined row updated, on both sides
        for sql in after_restart(family):
            assert run(rcon, sql) == "ok", f"{sql} fails on the file catalog"
            assert run(mcon, sql) == "ok", f"through moraine after restart: {sql}"
        expected = state(rcon, family)
        assert state(mcon, family) == expected
        mcon.close()
    finally:
        assert mor["server"].stop() == 0
    mor["server"] = Server("--store", mor["store"])
    try:
        mcon = attach(mor)
        assert state(mcon, family) == expected, "after the second restart"
        mcon.close()
    finally:
        assert mor["server"].stop() == 0
    rcon.close()
