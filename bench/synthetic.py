"""A DuckLake catalog of N tables and N x F data files, written as rows rather
than built through DuckLake (which would take hours at 10,000 tables and a
million files on 2 cores), then loaded into each catalog under test.

The rows are what DuckLake itself writes, cloned: DuckLake creates one
template table (the scale benchmark's 10 columns) and commits one Parquet
file into it; the other tables, their columns and column stats are copies of
the template's rows with new ids, and every table gets F data files that all
name the template's Parquet file (absolute path) with their own row ids, so a
count(*) of any table reads real Parquet and answers F. Files beyond the
template's carry no per-file column stats (DuckLake treats those as unknown).
All of it lands in snapshot 3; the ids in ducklake_snapshot are raised so
that DuckLake's next commit allocates past them.

    build_file_catalog(folder, n, f, columns, schemas) -> (file, data, stats)
    load_into_moraine(file, store_url)      moraine import (the store API)
    load_into_postgres(file, dsn, data)     DuckLake creates its tables on
                                            PostgreSQL; the rows are copied in
                                            with psql's \\copy
"""
import subprocess
import time

from catalogs import MORAINE, PG_BIN, connect


def _sql(con, text):
    con.execute(text)


def build_file_catalog(folder, n, f, columns, schemas):
    """Writes folder/synthetic.ducklake with data in folder/data; returns
    (file, data folder, {table: rows}) with the row counts per table name."""
    file, data = folder / "synthetic.ducklake", folder / "data"
    con = connect()
    con.execute(f"ATTACH 'ducklake:{file}' AS lake (DATA_PATH '{data}', DATA_INLINING_ROW_LIMIT 0)")
    con.execute("CREATE SCHEMA lake.s0")
    con.execute(f"CREATE TABLE lake.s0.t0({columns})")
    con.execute("INSERT INTO lake.s0.t0 (id) VALUES (1)")
    con.execute("DETACH lake")
    con.execute(f"ATTACH '{file}' AS m")
    q = con.execute
    (tid0,) = q("SELECT table_id FROM m.ducklake_table").fetchone()
    (sid0,) = q("SELECT schema_id FROM m.ducklake_schema WHERE schema_name = 's0'").fetchone()
    (fpath, fsize, ffoot) = q("SELECT path, file_size_bytes, footer_size FROM m.ducklake_data_file").fetchone()
    fpath = str(data / "s0" / "t0" / fpath)
    (next_id,) = q("SELECT max(next_catalog_id) FROM m.ducklake_snapshot").fetchone()
    # new ids: schemas s1.. take next_id.., tables t1.. follow them
    schema_base, table_base = next_id, next_id + schemas - 1
    q("BEGIN")
    q(f"""INSERT INTO m.ducklake_schema
          SELECT {schema_base} + i - 1, uuid(), 1, NULL, 's' || i, 's' || i || '/', true
          FROM range(1, {schemas}) r(i)""")
    # table j lives in schema s(j % schemas)
    sch = f"CASE WHEN j % {schemas} = 0 THEN {sid0} ELSE {schema_base} + j % {schemas} - 1 END"
    tid = f"({table_base} + j - 1)"
    q(f"""INSERT INTO m.ducklake_table
          SELECT {tid}, uuid(), 2, NULL, {sch}, 't' || j, 't' || j || '/', true
          FROM range(1, {n}) r(j)""")
    q(f"""INSERT INTO m.ducklake_column
          SELECT c.column_id, c.begin_snapshot, c.end_snapshot, {tid}, c.column_order, c.column_name,
                 c.column_type, c.initial_default, c.default_value, c.nulls_allowed,
                 c.parent_column, c.default_value_type, c.default_value_dialect
          FROM m.ducklake_column c, range(1, {n}) r(j) WHERE c.table_id = {tid0}""")
    q(f"""INSERT INTO m.ducklake_table_column_stats
          SELECT {tid}, s.column_id, s.contains_null, s.contains_nan, s.min_value, s.max_value,
                 s.extra_stats
          FROM m.ducklake_table_column_stats s, range(1, {n}) r(j) WHERE s.table_id = {tid0}""")
    q(f"""INSERT INTO m.ducklake_schema_versions
          SELECT v.begin_snapshot, v.schema_version, {tid}
          FROM m.ducklake_schema_versions v, range(1, {n}) r(j) WHERE v.table_id = {tid0}""")
    # files: table j's k-th file is data_file_id j * f + k (the template's is 0)
    tidj = f"CASE WHEN j = 0 THEN {tid0} ELSE {tid} END"
    q(f"""INSERT INTO m.ducklake_data_file
          SELECT j * {f} + k, {tidj}, 3, NULL, NULL, '{fpath}', false, 'parquet', 1,
                 {fsize}, {ffoot}, k, NULL, NULL, NULL, NULL
          FROM range(0, {n}) r(j), range(0, {f}) s(k) WHERE j > 0 OR k > 0""")
    q(f"DELETE FROM m.ducklake_table_stats")
    q(f"""INSERT INTO m.ducklake_table_stats
          SELECT {tidj}, {f}, {f}, {f} * {fsize} FROM range(0, {n}) r(j)""")
    q(f"""UPDATE m.ducklake_snapshot SET next_catalog_id = {table_base + n - 1}
          WHERE snapshot_id >= 1""")
    q(f"UPDATE m.ducklake_snapshot SET next_file_id = {n * f} WHERE snapshot_id = 3")
    q("COMMIT")
    con.close()
    return file, data


def load_into_moraine(file, store_url):
    """moraine import: every row through the store API, as one catalog."""
    t0 = time.perf_counter()
    subprocess.run([MORAINE, "import", str(file), store_url], check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


# The metadata tables in an order that needs no foreign parents first
# (DuckLake's PostgreSQL schema declares none, but keep it natural).
TABLES = ("ducklake_metadata", "ducklake_snapshot", "ducklake_snapshot_changes",
          "ducklake_schema", "ducklake_table", "ducklake_column", "ducklake_schema_versions",
          "ducklake_data_file", "ducklake_file_column_stats", "ducklake_table_stats",
          "ducklake_table_column_stats")


def load_into_postgres(file, dsn, data):
    """DuckLake creates its schema on PostgreSQL; then its rows are replaced
    by the file catalog's, table by table: DuckDB writes each table as CSV
    and psql's \\copy streams it in (the postgres extension's INSERT held a
    million-row table in memory, ~20 GB at 10,000 tables)."""
    t0 = time.perf_counter()
    con = connect()
    con.execute(f"ATTACH 'ducklake:postgres:{dsn}' AS lake (DATA_PATH '{data}')")
    con.execute("DETACH lake")
    con.execute(f"ATTACH '{file}' AS src (READ_ONLY)")
    csv = file.parent / "rows.csv"
    for t in TABLES:
        cols = [r[0] for r in con.execute(f"DESCRIBE src.main.{t}").fetchall()]
        con.execute(f"COPY src.main.{t} TO '{csv}' (FORMAT csv, HEADER false)")
        names = ", ".join(f'"{c}"' for c in cols)
        subprocess.run([str(PG_BIN / "psql"), "-q", "-v", "ON_ERROR_STOP=1", dsn,
                        "-c", f"TRUNCATE public.{t}",
                        "-c", f"\\copy public.{t} ({names}) FROM '{csv}' WITH (FORMAT csv)"],
                       check=True, stdout=subprocess.DEVNULL)
    csv.unlink()
    con.close()
    return time.perf_counter() - t0
