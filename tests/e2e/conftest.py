"""Shared fixtures for the end-to-end suite.

Every DuckDB connection here is a real DuckDB 1.5.5 with the ducklake and
postgres extensions loaded from the installed PyPI packages: nothing is
downloaded at run time (autoinstall is off).
"""
import importlib
import pathlib
import tempfile

import duckdb
import pytest

# PyPI package -> the extension's own name. DuckDB derives the entry point
# from the file name, and the postgres package ships its extension
# (postgres_scanner) as postgres.duckdb_extension, so it is linked under its
# real name in a private folder before loading.
EXTENSIONS = {"ducklake": "ducklake", "postgres": "postgres_scanner"}
_LINK_DIR = pathlib.Path(tempfile.mkdtemp(prefix="moraine-ext-"))


def extension_file(package: str, name: str) -> pathlib.Path:
    module = importlib.import_module(f"duckdb_extension_{package}")
    base = pathlib.Path(module.__file__).parent / "extensions" / f"v{duckdb.__version__}"
    shipped = base / f"{package}.duckdb_extension"
    if not shipped.exists():
        raise FileNotFoundError(f"{shipped} missing: run scripts/install-deps.sh")
    link = _LINK_DIR / f"{name}.duckdb_extension"
    if not link.exists():
        link.symlink_to(shipped)
    return link


def connect(database: str = ":memory:") -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with ducklake + postgres loaded from local files."""
    con = duckdb.connect(database, config={"autoinstall_known_extensions": False,
                                           "autoload_known_extensions": False})
    for package, name in EXTENSIONS.items():
        con.execute(f"LOAD '{extension_file(package, name)}'")
    return con


@pytest.fixture
def duck():
    con = connect()
    yield con
    con.close()
