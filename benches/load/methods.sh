#!/usr/bin/env bash
# The three published methods in one run (load/nullward.sh, load/corvus.sh, load/jxwaf.sh),
# built once, one STAMP; then load/report.py over the three row files. A full run takes
# about 25 minutes on the 2-core machine; QUICK=1 about 5.
#
#   benches/load/methods.sh
#   QUICK=1 benches/load/methods.sh
#   METHODS="corvus jxwaf" benches/load/methods.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
export STAMP="${STAMP:-$(date -u +%Y%m%dT%H%M%SZ)}"
METHODS="${METHODS:-nullward corvus jxwaf}"
if [ "${NO_BUILD:-0}" != 1 ]; then
  # shellcheck source=benches/load/lib.sh
  (source benches/load/lib.sh && build_binaries)
fi
start=$(date +%s)
files=()
for m in $METHODS; do
  echo "== $m ($(date -u +%H:%M:%S), load average $(cut -d' ' -f1-3 /proc/loadavg))"
  NO_BUILD=1 NO_REPORT=1 "benches/load/$m.sh"
  files+=("benches/results/$m-$STAMP.tsv")
done
echo "== done in $(( $(date +%s) - start )) s"
python3 benches/load/report.py "${files[@]}"
