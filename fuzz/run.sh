#!/usr/bin/env bash
# Runs every fuzz target for a bounded time: first the regression inputs in
# fuzz/regressions/<target>/ (each must pass), then fuzzing from seeds built from CRS.
#
#   fuzz/run.sh [SECONDS_PER_TARGET] [TARGET...]     # default 20 s, all targets
#
# Uses stable Rust with RUSTC_BOOTSTRAP=1 (cargo-fuzz needs -Z flags); needs cargo-fuzz
# (`cargo install --locked cargo-fuzz`) and python3 with PyYAML for the seeds. A crash
# leaves its input in fuzz/artifacts/<target>/ and makes this script fail.
set -euo pipefail
cd "$(dirname "$0")"
SECONDS_PER_TARGET="${1:-20}"
shift || true
export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}/fuzz"
CORPUS="${FUZZ_CORPUS:-$CARGO_TARGET_DIR/corpus}"
CRS_DIR="${CRS_DIR:-$PWD/../../shared/crs}"

TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && mapfile -t TARGETS < <(cargo fuzz list)

[ -d "$CORPUS" ] || python3 build_corpus.py "$CRS_DIR" "$CORPUS"
cargo fuzz build -O

for t in "${TARGETS[@]}"; do
  mkdir -p "$CORPUS/$t"
  mapfile -t regressions < <(find "regressions/$t" -type f ! -name '.*' ! -name '*.md' 2>/dev/null | sort)
  if [ ${#regressions[@]} -gt 0 ]; then
    echo "fuzz: $t: ${#regressions[@]} regression inputs"
    cargo fuzz run -O "$t" "${regressions[@]}" -- -runs=1
  fi
  echo "fuzz: $t: ${SECONDS_PER_TARGET} s"
  log="$CARGO_TARGET_DIR/fuzz-$t.log"
  status=0
  cargo fuzz run -O "$t" "$CORPUS/$t" -- \
    -max_total_time="$SECONDS_PER_TARGET" -max_len=65536 -rss_limit_mb=4096 -timeout=30 \
    -print_final_stats=1 >"$log" 2>&1 || status=$?
  grep -E '^stat::(number_of_executed_units|peak_rss_mb)' "$log" | tr '\n' ' ' || true
  echo
  if [ "$status" -ne 0 ]; then
    tail -60 "$log" >&2
    echo "fuzz: $t FAILED (exit $status); the input is in fuzz/artifacts/$t/" >&2
    exit 1
  fi
done
echo "fuzz: ${#TARGETS[@]} targets, ${SECONDS_PER_TARGET} s each: no crash"
