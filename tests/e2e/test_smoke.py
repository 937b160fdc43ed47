"""Toolchain smoke test: real DuckDB 1.5.5 + DuckLake on a DuckDB-file catalog."""


def test_ducklake_duckdb_file_catalog_roundtrip(duck, tmp_path):
    catalog = tmp_path / "catalog.ducklake"
    data = tmp_path / "data"
    duck.execute(f"ATTACH 'ducklake:{catalog}' AS lake (DATA_PATH '{data}/')")
    duck.execute("CREATE TABLE lake.main.t (id BIGINT, name VARCHAR)")
    duck.execute("INSERT INTO lake.main.t VALUES (1, 'one'), (2, 'two'), (3, NULL)")
    rows = duck.execute("SELECT id, name FROM lake.main.t ORDER BY id").fetchall()
    assert rows == [(1, "one"), (2, "two"), (3, None)]
    snapshots = duck.execute("SELECT count(*) FROM lake.snapshots()").fetchone()[0]
    assert snapshots >= 3  # catalog creation, CREATE TABLE, INSERT
    version = duck.execute("SELECT version()").fetchone()[0]
    assert version == "v1.5.5"
