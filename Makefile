# moraine — developer entry points. Every target installs what it needs first
# (scripts/install-deps.sh is idempotent), so each works on a fresh machine.
#
#   make serve      start moraine on ./moraine-data, listening on 127.0.0.1:5433
#   make test       everything CI runs: unit tests, end-to-end tests,
#                   the unit tests again under ASan+UBSan, and a short fuzz run
#   make test-unit  C unit tests (ctest)      make test-e2e  pytest suite
#   make sanitize   unit tests under ASan+UBSan   make valgrind  under valgrind
#   make e2e-sanitize  the end-to-end suite against a server built with
#                   ASan+UBSan; fails on any report (~12 min; not in make test)
#   make fuzz       libFuzzer targets, FUZZ_SECONDS each (default 30), JOBS at once
#   make bench      benchmarks (prints the tables recorded in BENCHMARK.md)
#   make bench-soak a long catalog life, expiry and the space that comes back (~30 min)
#   make bench-replica  read replicas: lag behind the writer, read throughput
#   make bench-scale  moraine vs PostgreSQL 15 as catalogs of 1, 1,000 and 10,000
#                   tables (bench/scale.py; several minutes; not in make test)
#   make bench-history  start time and memory as history grows 1x, 10x, 100x
#                   over a fixed current catalog (bench/history.py)
#   make bench-statements  where one workload's server time goes, statement by
#                   statement (STATEMENTS_ARGS, e.g. "writers --writers 16")
#   make format / make lint
#   make ducklake-suite  DuckLake's own test suite against the freshly built
#                   server (not part of make test: needs a local copy of the
#                   suite, DUCKLAKE_SUITE; see tests/ducklake-suite/README.md)

SHELL := /bin/bash
GENERATOR := $(shell command -v ninja >/dev/null && echo Ninja || echo "Unix Makefiles")
JOBS ?= 2
FUZZ_SECONDS ?= 30
# pytest-xdist workers for the end-to-end tests (each test starts its own
# servers on free ports, so they run side by side; 1 runs them in order)
E2E_WORKERS ?= 2
# The store model test under ASan: fewer random ops per seed than the plain
# run (which does the full 300), so make test stays well inside CI's time.
SANITIZE_STORE_OPS ?= 60
PY := .venv/bin/python
MORAINE := build/src/cli/moraine
ARGS ?=
# a folder holding test/sql and data/ of duckdb/ducklake at tag v1.5-variegata
DUCKLAKE_SUITE ?= /tmp/ducklake
SUITE_ARGS ?=

.PHONY: all deps deps-build build serve test test-unit test-e2e sanitize e2e-sanitize valgrind fuzz bench bench-soak bench-scale bench-history bench-replica bench-statements format lint clean \
  ducklake-suite

all: build

deps:
	@bash scripts/install-deps.sh all

# only what building and serving needs (no test tools, venv or emulators)
deps-build:
	@bash scripts/install-deps.sh build

build: deps-build
	cmake -S . -B build -G "$(GENERATOR)" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build build -j$(JOBS)

serve: build
	$(MORAINE) serve $(ARGS)

test: test-unit test-e2e sanitize fuzz

test-unit: build deps
	cd build && ctest --output-on-failure -j$(JOBS)

test-e2e: build deps
	MORAINE_BIN=$(CURDIR)/$(MORAINE) $(PY) -m pytest -q -n $(E2E_WORKERS) tests/e2e

sanitize: deps
	cmake -S . -B build-asan -G "$(GENERATOR)" -DCMAKE_BUILD_TYPE=Debug -DMORAINE_SANITIZE=ON >/dev/null
	cmake --build build-asan -j$(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  MORAINE_STORE_OPS=$(SANITIZE_STORE_OPS) ctest --output-on-failure -j$(JOBS)

# The server under real DuckLake clients, built with ASan+UBSan: every
# report (a memory error, a leak at a clean stop, undefined behaviour) lands
# in build-asan/e2e-reports, and any report fails the target.
E2E_REPORTS := $(CURDIR)/build-asan/e2e-reports
e2e-sanitize: deps
	cmake -S . -B build-asan -G "$(GENERATOR)" -DCMAKE_BUILD_TYPE=Debug -DMORAINE_SANITIZE=ON >/dev/null
	cmake --build build-asan -j$(JOBS) --target moraine
	rm -rf $(E2E_REPORTS) && mkdir -p $(E2E_REPORTS)
	ASAN_OPTIONS=detect_leaks=1:log_path=$(E2E_REPORTS)/asan \
	  UBSAN_OPTIONS=print_stacktrace=1:log_path=$(E2E_REPORTS)/ubsan \
	  MORAINE_BIN=$(CURDIR)/build-asan/src/cli/moraine MORAINE_SANITIZED=1 \
	  $(PY) -m pytest -q -n $(E2E_WORKERS) tests/e2e
	@if [ -n "$$(ls -A $(E2E_REPORTS))" ]; then cat $(E2E_REPORTS)/*; \
	  echo "e2e-sanitize: sanitizer reports above" >&2; exit 1; fi

valgrind: build deps
	cd build && ctest --output-on-failure -T memcheck -j$(JOBS)

fuzz: deps
	CC=clang cmake -S . -B build-fuzz -G "$(GENERATOR)" -DCMAKE_BUILD_TYPE=Debug -DMORAINE_FUZZ=ON >/dev/null
	cmake --build build-fuzz -j$(JOBS) --target fuzz_key_decode fuzz_value_decode fuzz_pg_message fuzz_sql_plan
	@bash scripts/run-fuzz.sh $(FUZZ_SECONDS) $(JOBS)

# Every file of the suite, each against a fresh server started from the
# binary just built; fails on any failure not listed in expected-failures.txt.
ducklake-suite: build deps
	@if [ ! -d "$(DUCKLAKE_SUITE)/test/sql" ]; then \
	  echo "ducklake-suite: no DuckLake test suite at DUCKLAKE_SUITE=$(DUCKLAKE_SUITE)"; \
	  echo "  (it needs test/sql and data/ of duckdb/ducklake, tag v1.5-variegata:"; \
	  echo "   see tests/ducklake-suite/README.md); nothing was run"; \
	  exit 1; \
	fi
	$(PY) tests/ducklake-suite/slt.py --tests "$(DUCKLAKE_SUITE)" --config moraine \
	  --moraine $(CURDIR)/$(MORAINE) --out $(CURDIR)/build/ducklake-suite.tsv \
	  --logs $(CURDIR)/build/ducklake-suite-logs \
	  --expect-fail $(CURDIR)/tests/ducklake-suite/expected-failures.txt $(SUITE_ARGS)

bench-soak: build deps
	MORAINE_BIN=$(CURDIR)/$(MORAINE) $(PY) bench/soak.py

bench: build deps
	build/bench/store/bench_store
	$(PY) bench/catalogs.py
	MORAINE_BIN=$(CURDIR)/$(MORAINE) $(PY) bench/objstore.py

# SCALE_ARGS e.g. --sizes 1,1000 --commits 200 (see bench/scale.py)
SCALE_ARGS ?=
bench-replica: build deps
	MORAINE_BIN=$(CURDIR)/$(MORAINE) $(PY) bench/replica.py

bench-scale: build deps
	MORAINE_BIN=$(CURDIR)/$(MORAINE) $(PY) bench/scale.py $(SCALE_ARGS)

# HISTORY_ARGS e.g. --sizes 1000,10000 --tables 50 (see bench/history.py)
HISTORY_ARGS ?=
bench-history: build deps
	MORAINE_BIN=$(CURDIR)/$(MORAINE) $(PY) bench/history.py $(HISTORY_ARGS)

# STATEMENTS_ARGS: a workload (commit, attach, timetravel, writers) and its
# options (see bench/statements.py --help)
STATEMENTS_ARGS ?= commit
bench-statements: build deps
	MORAINE_BIN=$(CURDIR)/$(MORAINE) $(PY) bench/statements.py $(STATEMENTS_ARGS)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

lint: build deps
	cppcheck --enable=warning,performance,portability --error-exitcode=1 --quiet \
	  --suppress=missingIncludeSystem -I src -I build/generated $$(git ls-files 'src/*.c')

clean:
	rm -rf build build-asan build-fuzz
