#!/usr/bin/env bash
# Instruction counts per waf-core transaction (CRS, steady state) with callgrind, and the
# top functions by self and inclusive instructions (self costs merged over inlined files).
#
#   benches/callgrind.sh [PL] [OUT_DIR] [REQUEST...]
#   ENGINE=modsec benches/callgrind.sh ...   # libmodsecurity instead (apt-get install libmodsecurity3)
#   BACKEND=hyperscan benches/callgrind.sh ... # the Hyperscan prefilter (apt-get install libhyperscan-dev)
#
# Builds `waf-profile` (release, debug info), runs each request once to warm up, then N
# times under `--toggle-collect='*measured*'`, and prints `request: Ir per transaction`.
# Needs valgrind (apt-get install valgrind) and CRS at $CRS_DIR or ../shared/crs.
set -euo pipefail
cd "$(dirname "$0")/.."
PL="${1:-1}"
ENGINE="${ENGINE:-ours}"
BACKEND="${BACKEND:-literals}"
FEATURES=()
[ "$BACKEND" = hyperscan ] && FEATURES=(--features hyperscan)
TAG="$ENGINE"
[ "$BACKEND" = hyperscan ] && TAG="$ENGINE-hyperscan"
OUT="${2:-${CARGO_TARGET_DIR:-target}/callgrind}"
shift 2 2>/dev/null || shift $#
REQUESTS=("$@")
[ ${#REQUESTS[@]} -eq 0 ] && REQUESTS=(get_simple post_form_small post_json_10k post_form_10k post_json_100k get_sqli)
mkdir -p "$OUT"
cargo build --release -q -p waf-bench --bin waf-profile "${FEATURES[@]}"
BIN="${CARGO_TARGET_DIR:-target}/release/waf-profile"
for r in "${REQUESTS[@]}"; do
  n=10
  case "$r" in post_json_100k) n=1 ;; post_json_10k | post_form_10k) n=3 ;; esac
  valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.pl$PL.$r.$TAG.out" \
    --toggle-collect='*measured*' "$BIN" "$r" "$n" "$PL" "$ENGINE" >"$OUT/cg.pl$PL.$r.$TAG.log" 2>&1
  ir=$(sed -n 's/.*I *refs: *//p' "$OUT/cg.pl$PL.$r.$TAG.log" | tr -d ,)
  echo "$r ($TAG): $((ir / n)) Ir per transaction (PL$PL, mean of $n)"
done

# Top functions of each profile: self cost merged per function name, and inclusive cost.
for r in "${REQUESTS[@]}"; do
  f="$OUT/cg.pl$PL.$r.$TAG.out"
  echo
  echo "== $r (PL$PL): top 25 functions by self instructions"
  callgrind_annotate --inclusive=no --auto=no --threshold=100 "$f" 2>/dev/null | python3 -c '
import re, sys, collections
tot = collections.Counter()
for line in sys.stdin:
    m = re.match(r"\s*([\d,]+)\s+\([ \d.]+%\)\s+(.*)$", line)
    if not m or "PROGRAM TOTALS" in line:
        continue
    name = m.group(2)
    name = re.sub(r" \[[^\]]*\]$", "", name)
    name = name.split(":", 1)[1] if ":" in name else name
    tot[name] += int(m.group(1).replace(",", ""))
total = sum(tot.values())
for name, ir in tot.most_common(25):
    print(f"{ir:>14,} {100*ir/total:5.1f}%  {name[:150]}")
'
  echo
  echo "== $r (PL$PL): top 30 by inclusive instructions"
  callgrind_annotate --inclusive=yes --auto=no "$f" 2>/dev/null | sed -n '/file:function/,$p' | sed 1,2d | head -40 |
    sed -E 's#/root/.cargo/registry/src/[^/]*/##; s#/work/[^ ]*/waf-core/#waf-core/#; s#/rustc/[0-9a-f]*/##; s# \[[^]]*\]$##' |
    grep -v 'lang_start\|libc_start\|below main\|backtrace\|ld-linux\|:main$\|waf_profile::' | head -30 | cut -c1-180
done
