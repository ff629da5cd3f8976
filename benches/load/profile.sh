#!/usr/bin/env bash
# Where a waf-proxy gateway's time goes at one of the methods' levels: instructions per
# request (callgrind) and the functions that take them, for the rows whose target is missed.
# The gateway is configured exactly as in the load run (lib.sh, proxy_host_lines), cookies
# included, and driven by wrk (1 thread, 8 connections, keep-alive or a new TLS connection
# per request) while it runs under `valgrind --tool=callgrind --instr-atstart=no`; collection
# is switched on after start-up and a warm-up, for DURATION seconds (as callgrind-proxy.sh).
#
#   benches/load/profile.sh GATEWAY REQUEST TRANSPORT [TOP]
#   benches/load/profile.sh L1 get http              # L1 + CRS PL1, GET /
#   benches/load/profile.sh c-protected get http     # Corvus's protected, 3-byte backend
#   benches/load/profile.sh jx-all form https
#
# Prints the instructions per request and the TOP (default 25) functions by inclusive
# instructions, per request; the callgrind file stays in $CARGO_TARGET_DIR/callgrind-methods/
# for `callgrind_annotate --inclusive=yes --tree=caller`. Instruction counts do not depend on
# the machine's load; the proxy serves ~50 times fewer requests per second under valgrind.
source "$(dirname "$0")/lib.sh"
gw="${1:?usage: profile.sh GATEWAY REQUEST TRANSPORT [TOP]}"
req="${2:?request: get, json or form}"
transport="${3:?transport: http, https or newconn}"
top="${4:-25}"
PDURATION="${PDURATION:-10}"
for c in valgrind callgrind_control callgrind_annotate; do need "$c" "apt-get install -y valgrind"; done
is_proxy "$gw" || { echo "profile: $gw is not a waf-proxy gateway" >&2; exit 1; }
OUT_DIR="$CARGO_TARGET_DIR/callgrind-methods"
mkdir -p "$OUT_DIR"
out="$OUT_DIR/callgrind.$gw.$req.$transport.out"
rm -f "$out"
NO_BUILD=1 lib_setup
port=$BACKEND_PORT
case "$gw" in c-*) port=$BACKEND3_PORT ;; esac
[ "$gw" = L0 ] && [ "$req" = get ] && [ -n "${CORVUS:-}" ] && port=$BACKEND3_PORT
export GATEWAY_WRAPPER="valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=$out"
WAIT_SECS=300 start_gateway "$gw" "$port" || { echo "profile: $WHY" >&2; exit 1; }
vpid=${PIDS[-1]}
request_args "$req" "$transport"
served() {
  curl -s "http://127.0.0.1:$ADMIN_PORT/metrics" | awk '/^waf_proxy_requests_total/ { n += $NF } END { print n + 0 }'
}
status=$(probe "$URL" "${CURL_ARGS[@]}")
taskset -c "$WRK_CPUS" env LD_PRELOAD="$WORK/no_resume.so" wrk -t1 -c8 -d3s "${WRK_ARGS[@]}" "$URL" >/dev/null
taskset -c "$WRK_CPUS" env LD_PRELOAD="$WORK/no_resume.so" wrk -t1 -c8 -d"$((PDURATION + 2))"s --timeout 10s "${WRK_ARGS[@]}" "$URL" >"$WORK/wrk.txt" &
wpid=$!
sleep 1
callgrind_control -i on "$vpid" >/dev/null
n0=$(served)
sleep "$PDURATION"
n1=$(served)
callgrind_control -i off "$vpid" >/dev/null
wait "$wpid"
stop_last
n=$((n1 - n0))
ir=$(awk '/^totals:/ { print $2 }' "$out")
echo "profile: $gw $req $transport, commit $(git rev-parse --short HEAD), probe $status, $n requests collected, load average $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v ir="$ir" -v n="$n" 'BEGIN { printf "total: %.0f Ir/request\n", ir / n }'
echo
echo "| Ir/request (inclusive) | % | function |"
echo "|---:|---:|---|"
callgrind_annotate --inclusive=yes --auto=no "$out" 2>/dev/null |
  awk -v n="$n" -v top="$top" '
    /^-+$/ { dash++; next }
    dash >= 3 && NF >= 2 && $1 ~ /^[0-9,]+$/ {
      ir = $1; gsub(",", "", ir); pct = $2; gsub(/[()%]/, "", pct)
      $1 = ""; $2 = ""; sub(/^ +/, "")
      f = $0; sub(/ \[[^]]*\]$/, "", f); sub(/^[^:]*:/, "", f)
      if (length(f) > 120) f = substr(f, 1, 117) "..."
      gsub(/\|/, "\\|", f)
      printf "| %.0f | %s | `%s` |\n", ir / n, pct, f
      if (++shown >= top) exit
    }'
