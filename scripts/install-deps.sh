#!/usr/bin/env bash
# Installs what moraine needs, idempotently, in two tiers:
#   install-deps.sh build   what building and serving needs: the Debian build
#                           packages and the pinned libduckdb + duckdb.h (from
#                           registry packages, into .deps/). `make serve` stops
#                           here, so a newcomer's server is not kept waiting on
#                           test tools.
#   install-deps.sh [all]   the above, plus the test tools (PostgreSQL, clang,
#                           valgrind...), the project venv (.venv) with the
#                           pinned DuckDB clients, and the object-store
#                           emulators (scripts/install-emulators.sh).
# Safe to run again: each step checks what is already there.
set -euo pipefail

tier=${1:-all}
case "$tier" in
  build|all) ;;
  *) printf 'install-deps: unknown tier "%s" (want build or all)\n' "$tier" >&2; exit 2 ;;
esac

DUCKDB_VERSION=1.5.5
NODE_BINDINGS_VERSION=1.5.5-r.5
root=$(cd "$(dirname "$0")/.." && pwd)
deps="$root/.deps"
log() { printf 'install-deps: %s\n' "$*" >&2; }

apt_packages=(
  build-essential cmake pkg-config
  libprotobuf-c-dev protobuf-c-compiler
  libssl-dev libcmocka-dev libpg-query-dev
  python3-pip python3-venv
)
if [ "$tier" = all ]; then
  apt_packages+=(
    clang libclang-rt-14-dev clang-format cppcheck valgrind
    postgresql-15 postgresql-client-15
  )
fi
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  log "apt packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if ! command -v npm >/dev/null; then
  log "npm not found; installing Debian's"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends npm
fi
if ! command -v cargo >/dev/null; then
  log "cargo is required (rustup toolchain); none found on PATH"; exit 1
fi

# libduckdb.so ships in the npm package of DuckDB's node bindings; duckdb.h of
# the same release ships in the PyPI source distribution of duckdb.
mkdir -p "$deps/duckdb"
if [ ! -f "$deps/duckdb/libduckdb.so" ] || [ ! -f "$deps/duckdb/duckdb.h" ] ||
   [ "$(cat "$deps/duckdb/VERSION" 2>/dev/null)" != "$DUCKDB_VERSION" ]; then
  tmp=$(mktemp -d)
  log "libduckdb $DUCKDB_VERSION"
  (cd "$tmp" && npm pack --silent "@duckdb/node-bindings-linux-x64@$NODE_BINDINGS_VERSION" >/dev/null)
  tar -xzf "$tmp"/duckdb-node-bindings-linux-x64-*.tgz -C "$tmp" package/libduckdb.so
  cp "$tmp/package/libduckdb.so" "$deps/duckdb/libduckdb.so"
  log "duckdb.h $DUCKDB_VERSION"
  python3 -m pip download -q --no-deps --no-binary duckdb -d "$tmp" "duckdb==$DUCKDB_VERSION"
  tar -xzf "$tmp/duckdb-$DUCKDB_VERSION.tar.gz" -C "$tmp" \
    "duckdb-$DUCKDB_VERSION/external/duckdb/src/include/duckdb.h"
  cp "$tmp/duckdb-$DUCKDB_VERSION/external/duckdb/src/include/duckdb.h" "$deps/duckdb/duckdb.h"
  echo "$DUCKDB_VERSION" > "$deps/duckdb/VERSION"
  rm -rf "$tmp"
fi

if [ "$tier" = build ]; then
  log "ok (build tier)"
  exit 0
fi

# The project venv: pinned clients whose extensions load from the installed
# packages, never downloaded at run time.
if [ ! -x "$root/.venv/bin/python" ]; then
  log "venv"
  python3 -m venv "$root/.venv"
fi
if ! "$root/.venv/bin/python" -c 'import duckdb, pytest, xdist, psycopg, pytz, duckdb_extension_ducklake, duckdb_extension_postgres, duckdb_extension_sqlite_scanner, duckdb_extension_httpfs, moto.server' 2>/dev/null ||
   [ "$("$root/.venv/bin/python" -c 'import duckdb; print(duckdb.__version__)')" != "$DUCKDB_VERSION" ]; then
  log "python packages"
  "$root/.venv/bin/python" -m pip install -q --upgrade pip
  "$root/.venv/bin/python" -m pip install -q -r "$root/tests/requirements.txt"
fi

# Object-store emulators (S3, Azure, GCS) for the tests and benchmarks.
bash "$root/scripts/install-emulators.sh"
log "ok"
