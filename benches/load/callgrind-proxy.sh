#!/usr/bin/env bash
# Instructions per request of waf-proxy's own request path (callgrind), with the WAF off:
# a machine-independent figure beside the load benchmark's wall-clock ones.
#
#   benches/load/callgrind-proxy.sh                  # GET and the 10 KB JSON POST
#   SCENARIOS=get DURATION=10 benches/load/callgrind-proxy.sh
#   MODE=block benches/load/callgrind-proxy.sh       # the same with CRS PL1 (slow)
#   MODE=protected SCENARIOS=get benches/load/callgrind-proxy.sh
#                     # WAF rules off + the "protected" policy and security headers (run.sh's
#                     # proxy-protected variant: load/protected-policy.sh)
#   EXTRA_TOML='[state] ...' MODE=protected ...   # lines appended to the config (load/fleet.sh)
#   BY_CRATE=1 benches/load/callgrind-proxy.sh  # also Ir per request by crate
#
# The backend is nginx answering the load benchmark's 389-byte page from memory; wrk drives
# the proxy (1 thread, 8 connections, keep-alive) while it runs under
# `valgrind --tool=callgrind --instr-atstart=no`. Instrumentation is switched on after
# start-up and a warm-up and off before wrk stops, so start-up and rule loading are not
# counted; the figure is the collected instructions (all threads) over the requests the
# proxy served meanwhile (its own `waf_proxy_requests_total`, read at both switches). The
# callgrind files stay in $OUT_DIR (default $CARGO_TARGET_DIR/callgrind-proxy) for
# `callgrind_annotate --inclusive=yes`.
#
# Needs: valgrind, nginx, wrk, curl; the release binary (cargo build --release -p waf-proxy).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
BIN="${WAF_PROXY_BIN:-$CARGO_TARGET_DIR/release/waf-proxy}"
PROFILE_BIN="${PROFILE_BIN:-$CARGO_TARGET_DIR/release/waf-profile}"
SCENARIOS="${SCENARIOS:-get post_json_10k}"
DURATION="${DURATION:-8}"   # seconds collected
MODE="${MODE:-off}"
CRS="${CRS_DIR:-$ROOT/../shared/crs}"
BACKEND_PORT="${BACKEND_PORT:-18191}"
PORT="${PORT:-18180}"
ADMIN_PORT="${ADMIN_PORT:-18181}"
OUT_DIR="${OUT_DIR:-$CARGO_TARGET_DIR/callgrind-proxy}"
NGINX="${NGINX:-/usr/sbin/nginx}"
for c in valgrind callgrind_control wrk curl; do
  command -v "$c" >/dev/null || { echo "callgrind-proxy: $c is missing" >&2; exit 1; }
done
[ -x "$BIN" ] || { echo "callgrind-proxy: $BIN missing (cargo build --release -p waf-proxy)" >&2; exit 1; }
mkdir -p "$OUT_DIR"
WORK="$(mktemp -d /tmp/waf-cg.XXXXXX)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

PAGE='<!DOCTYPE html><html><head><title>Welcome</title></head><body><h1>Welcome</h1><p>A small page from the benchmark backend.</p></body></html>'
mkdir -p "$WORK/nginx/tmp"
cat >"$WORK/nginx/nginx.conf" <<NGX
daemon off; master_process on; worker_processes 1; user root;
pid $WORK/nginx/nginx.pid; error_log $WORK/nginx/error.log warn;
events { worker_connections 1024; }
http {
  access_log off; client_body_temp_path $WORK/nginx/tmp/body; proxy_temp_path $WORK/nginx/tmp/p;
  fastcgi_temp_path $WORK/nginx/tmp/f; uwsgi_temp_path $WORK/nginx/tmp/u; scgi_temp_path $WORK/nginx/tmp/s;
  client_max_body_size 16m; keepalive_requests 1000000;
  server { listen 127.0.0.1:$BACKEND_PORT; location / { default_type text/html; return 200 '$PAGE'; } }
}
NGX
"$NGINX" -c "$WORK/nginx/nginx.conf" >/dev/null 2>&1 &
PIDS+=($!)

case "$MODE" in
  off) WAF='waf = { mode = "off" }' ;;
  block) WAF="waf = { mode = \"block\", crs = \"$CRS\", paranoia = 1 }" ;;
  protected)
    mkdir -p "$WORK/protected"
    "$ROOT/benches/load/protected-policy.sh" "$WORK/protected" >"$WORK/protected/policy.toml"
    WAF="waf = { mode = \"off\" }
headers = { hsts = \"max-age=31536000\", content_type_options = true, frame_options = \"DENY\", referrer_policy = \"no-referrer\", csp = \"default-src 'self'\" }
$(cat "$WORK/protected/policy.toml")" ;;
  *) echo "MODE is off, block or protected" >&2; exit 1 ;;
esac
cat >"$WORK/proxy.toml" <<TOML
[server]
listen = ["127.0.0.1:$PORT"]
workers = 1
reload_poll_ms = 0
shutdown_timeout_ms = 1000
[admin]
listen = "127.0.0.1:$ADMIN_PORT"
[log]
access = "off"
[[upstream]]
name = "backend"
servers = ["127.0.0.1:$BACKEND_PORT"]
[[host]]
names = ["*"]
upstream = "backend"
$WAF
${EXTRA_TOML:-}
TOML

if [ -x "$PROFILE_BIN" ]; then
  "$PROFILE_BIN" --print-body post_json_10k >"$WORK/body.json"
else
  # Without waf-profile: a JSON document of about the same size.
  python3 -c 'import json; print(json.dumps({"users": [{"id": i, "name": "user %d" % i, "email": "u%d@example.com" % i, "tags": ["a", "b"]} for i in range(140)]}))' >"$WORK/body.json"
fi
cat >"$WORK/post.lua" <<LUA
local f = assert(io.open("$WORK/body.json", "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
LUA

# Requests the proxy has served (the sum of waf_proxy_requests_total).
served() {
  curl -s "http://127.0.0.1:$ADMIN_PORT/metrics" |
    awk '/^waf_proxy_requests_total/ { n += $NF } END { print n + 0 }'
}

# BY_CRATE=1: exclusive Ir per request summed by the crate of each function's symbol
# (`hyper::...`, `<http::...>`, `drop_in_place<waf_proxy::...>`); malloc and libc's mem*
# on their own lines. Also: by_crate FILE REQUESTS after sourcing nothing else.
by_crate() {
  callgrind_annotate --threshold=100 --auto=no "$1" 2>/dev/null | sed -n '/file:function/,$p' |
    awk -v n="$2" '
    /^ *[0-9,]+ / {
      ir = $1; gsub(",", "", ir); f = $0
      sub(/^ *[0-9,]+ *(\([^)]*\))? */, "", f); sub(/ \[[^]]*\]$/, "", f)
      fn = substr(f, index(f, ":") + 1)
      if (fn ~ /^__rustc::|^malloc|^free|^_int_|^unlink_chunk|^realloc|^cfree/) c = "malloc"
      else if (fn ~ /^__mem|^mem/) c = "libc mem*"
      else {
        g = fn; sub(/^<+/, "", g); sub(/^core::ptr::drop_in_place<+/, "", g)
        c = match(g, /^[a-z_][a-z0-9_]*::/) ? substr(g, 1, RLENGTH - 2) : "other"
      }
      sum[c] += ir
    }
    END { for (c in sum) if (sum[c] / n >= 50) printf "  %8.0f %s\n", sum[c] / n, c }' | sort -rn
}

echo "callgrind-proxy: $(git rev-parse --short HEAD), mode $MODE, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for s in $SCENARIOS; do
  out="$OUT_DIR/callgrind.$s.$MODE.out"
  rm -f "$out"
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" \
    "$BIN" run --config "$WORK/proxy.toml" >"$WORK/proxy.log" 2>&1 &
  vpid=$!
  PIDS+=($vpid)
  for _ in $(seq 1 600); do
    if grep -q started "$WORK/proxy.log" 2>/dev/null; then break; fi
    sleep 0.1
  done
  grep -q started "$WORK/proxy.log" || { cat "$WORK/proxy.log" >&2; exit 1; }
  case "$s" in
    get) args=("http://127.0.0.1:$PORT/index.html?page=2&sort=name") ;;
    post_json_10k) args=(-s "$WORK/post.lua" "http://127.0.0.1:$PORT/api/users") ;;
    *) echo "unknown scenario $s" >&2; exit 1 ;;
  esac
  # Warm-up (pools, allocator), not collected.
  wrk -t1 -c8 -d2s "${args[@]}" >/dev/null
  # Collect inside the measured run only: on 1 s after wrk starts, off before it ends.
  wrk -t1 -c8 -d"$((DURATION + 2))"s "${args[@]}" >"$WORK/wrk.txt" &
  wpid=$!
  sleep 1
  callgrind_control -i on "$vpid" >/dev/null
  n0=$(served)
  sleep "$DURATION"
  n1=$(served)
  callgrind_control -i off "$vpid" >/dev/null
  wait "$wpid"
  kill "$vpid"
  wait "$vpid" 2>/dev/null || true
  ir=$(awk '/^totals:/ { print $2 }' "$out")
  awk -v ir="$ir" -v n="$((n1 - n0))" -v s="$s" 'BEGIN {
    printf "%-14s %12.0f Ir over %d requests: %.0f Ir/request\n", s, ir, n, ir / n }'
  if [ -n "${BY_CRATE:-}" ]; then by_crate "$out" "$((n1 - n0))"; fi
done
