#!/usr/bin/env bash
# Installs the object-store emulators the tests and benchmarks run moraine
# against, idempotently, into the project's own folders (nothing global):
#   S3     moto in server mode      (PyPI, into .venv; pinned in tests/requirements.txt)
#   Azure  Azurite                  (npm, into .deps/azurite)
#   GCS    fake-gcs-server          (Go module, built into .deps/bin)
# Called by install-deps.sh after the venv exists.
set -euo pipefail

AZURITE_VERSION=3.37.0
FAKE_GCS_VERSION=v1.56.1
root=$(cd "$(dirname "$0")/.." && pwd)
deps="$root/.deps"
log() { printf 'install-emulators: %s\n' "$*" >&2; }

# moto[server] comes with tests/requirements.txt; install-deps checks the
# import, this only repairs a venv made before moto was added.
if ! "$root/.venv/bin/python" -c 'import moto.server, flask' 2>/dev/null; then
  log "moto (server mode)"
  "$root/.venv/bin/python" -m pip install -q -r "$root/tests/requirements.txt"
fi

if [ "$(cat "$deps/azurite/VERSION" 2>/dev/null)" != "$AZURITE_VERSION" ] ||
   [ ! -x "$deps/azurite/node_modules/.bin/azurite-blob" ]; then
  log "azurite $AZURITE_VERSION"
  mkdir -p "$deps/azurite"
  npm install --silent --no-audit --no-fund --prefix "$deps/azurite" "azurite@$AZURITE_VERSION" >/dev/null
  echo "$AZURITE_VERSION" > "$deps/azurite/VERSION"
fi

if [ "$(cat "$deps/bin/fake-gcs-server.VERSION" 2>/dev/null)" != "$FAKE_GCS_VERSION" ] ||
   [ ! -x "$deps/bin/fake-gcs-server" ]; then
  go=$(command -v go || true)
  [ -n "$go" ] || [ ! -x /usr/local/go/bin/go ] || go=/usr/local/go/bin/go
  if [ -z "$go" ]; then
    log "go is required to build fake-gcs-server; none found"; exit 1
  fi
  log "fake-gcs-server $FAKE_GCS_VERSION"
  mkdir -p "$deps/bin"
  # go lists every module it downloads; show that only when the build fails.
  out=$(mktemp)
  if ! GOBIN="$deps/bin" "$go" install "github.com/fsouza/fake-gcs-server@$FAKE_GCS_VERSION" >"$out" 2>&1; then
    cat "$out" >&2; rm -f "$out"; exit 1
  fi
  rm -f "$out"
  echo "$FAKE_GCS_VERSION" > "$deps/bin/fake-gcs-server.VERSION"
fi
