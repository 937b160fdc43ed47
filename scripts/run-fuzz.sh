#!/usr/bin/env bash
# Runs every libFuzzer target in build-fuzz/tests/fuzz for SECONDS each,
# JOBS of them at once (each target still gets its full time: on two cores
# the four targets take half the wall time one after another would).
# Corpora grow in build-fuzz/corpus/<target>; seeds come from
# tests/fuzz/seeds/<target>. Exits non-zero, with the failing target's
# output, when any target finds a crash.
# usage: scripts/run-fuzz.sh SECONDS JOBS
set -euo pipefail
seconds=${1:?usage: run-fuzz.sh SECONDS JOBS}
jobs=${2:?usage: run-fuzz.sh SECONDS JOBS}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

run_one() {
  local f=$1 seconds=$2 name
  name=$(basename "$f")
  local seeds=tests/fuzz/seeds/$name
  [ -d "$seeds" ] || seeds=
  mkdir -p "build-fuzz/corpus/$name"
  # shellcheck disable=SC2086 # no seeds folder: no argument
  if "$f" -max_total_time="$seconds" -print_final_stats=1 "build-fuzz/corpus/$name" $seeds \
      > "build-fuzz/$name.log" 2>&1; then
    printf 'fuzz: %s for %ss: %s\n' "$name" "$seconds" "$(grep -m1 'stat::number_of_executed_units' "build-fuzz/$name.log" | tr -s ' ')"
  else
    printf 'fuzz: %s FAILED; its output:\n' "$name"
    tail -n 60 "build-fuzz/$name.log"
    return 1
  fi
}
export -f run_one

targets=()
for f in build-fuzz/tests/fuzz/fuzz_*; do
  [ -x "$f" ] && targets+=("$f")
done
[ ${#targets[@]} -gt 0 ] || { echo "fuzz: no targets in build-fuzz/tests/fuzz" >&2; exit 1; }
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one "$1" "$2"' _ {} "$seconds"
