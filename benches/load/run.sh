#!/usr/bin/env bash
# Side-by-side load benchmark: the same requests through several gateways in front of one
# nginx backend, measured with wrk. Prints a markdown table and writes it to
# benches/results/load-<UTC timestamp>.md.
#
#   benches/load/run.sh                 # all gateways whose binaries exist
#   GATEWAYS="nginx modsec" benches/load/run.sh
#
# Gateways (a gateway whose binary is missing is skipped and listed as such):
#   nginx     nginx as a plain reverse proxy (the ceiling)
#   modsec    nginx + ModSecurity-nginx + libmodsecurity 3 + CRS PL1 (same configuration
#             as the in-process benchmarks: `waf-profile --print-config 1`)
#   proxy-*   waf-proxy variants (see WAF_PROXY_VARIANTS below); waf-proxy is still being
#             written, so their command lines are templates to adjust when its CLI lands
#
# Scenarios: GET /index.html?page=2&sort=name and POST of the 10 KB JSON body
# (`waf-profile --print-body post_json_10k`), keep-alive.
#
# CPU placement on 2 cores (as in notes/anchors-measured.md): backend nginx and wrk on
# CPU 0, the gateway on CPU 1 (one worker / one thread), so the gateway has a core to itself
# and its throughput is what is measured. With more cores set BACKEND_CPUS, GATEWAY_CPUS,
# WRK_CPUS.
#
# Needs: nginx, libnginx-mod-http-modsecurity, wrk, curl (apt-get install -y nginx
# libnginx-mod-http-modsecurity wrk curl), CRS at $CRS_DIR or ../shared/crs, cargo.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

DURATION="${DURATION:-10s}"
CONNECTIONS="${CONNECTIONS:-64}"
THREADS="${THREADS:-1}"
BACKEND_CPUS="${BACKEND_CPUS:-0}"
GATEWAY_CPUS="${GATEWAY_CPUS:-1}"
WRK_CPUS="${WRK_CPUS:-0}"
GATEWAYS="${GATEWAYS:-nginx modsec proxy-off proxy-crs-pl1 proxy-all}"
BACKEND_PORT="${BACKEND_PORT:-18091}"
GATEWAY_PORT="${GATEWAY_PORT:-18080}"
NGINX="${NGINX:-/usr/sbin/nginx}"
MODSEC_MODULE="${MODSEC_MODULE:-/usr/lib/nginx/modules/ngx_http_modsecurity_module.so}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
WAF_PROXY_BIN="${WAF_PROXY_BIN:-$CARGO_TARGET_DIR/release/waf-proxy}"
# waf-proxy variants: name|the `waf = ...` line of the variant's host ({crs} is the CRS
# directory, {rules} the ModSecurity-equivalent CRS PL1 config). Each variant gets a config
# file (one current_thread worker, access log off) and runs as `waf-proxy run --config`.
if [ -z "${WAF_PROXY_VARIANTS:-}" ]; then
  WAF_PROXY_VARIANTS=$(cat <<'VARIANTS'
proxy-off|waf = { mode = "off" }
proxy-crs-pl1|waf = { mode = "block", crs = "{crs}", paranoia = 1 }
proxy-all|waf = { mode = "block", crs = "{crs}", paranoia = 1 }
headers = { hsts = "max-age=31536000", content_type_options = true, frame_options = "DENY", referrer_policy = "no-referrer", csp = "default-src 'self'" }
cookies = { secure = true, http_only = true, same_site = "Lax" }
VARIANTS
)
fi

WORK="$(mktemp -d /tmp/waf-load.XXXXXX)"
RESULTS="$ROOT/benches/results"
mkdir -p "$RESULTS"
STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
OUT="$RESULTS/load-$STAMP.md"
PIDS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

need() { command -v "$1" >/dev/null 2>&1 || { echo "load: $1 is missing ($2)" >&2; exit 1; }; }
need wrk "apt-get install -y wrk"
need curl "apt-get install -y curl"
need taskset "util-linux"
[ -x "$NGINX" ] || { echo "load: $NGINX is missing (apt-get install -y nginx)" >&2; exit 1; }

# The benchmark's configuration and body, from the same code as the criterion benches.
cargo build -q --release -p waf-bench --bin waf-profile
PROFILE_BIN="$CARGO_TARGET_DIR/release/waf-profile"
"$PROFILE_BIN" --print-config 1 >"$WORK/crs-pl1.conf"
"$PROFILE_BIN" --print-body post_json_10k >"$WORK/body.json"
cat >"$WORK/post.lua" <<EOF
local f = assert(io.open("$WORK/body.json", "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
EOF

# Common nginx settings: foreground, everything under $WORK, one worker.
nginx_conf() { # $1 name, $2 extra main-context lines, $3 server block
  local d="$WORK/$1"
  mkdir -p "$d/tmp"
  cat >"$d/nginx.conf" <<EOF
$2
daemon off;
master_process on;
worker_processes 1;
user root;
pid $d/nginx.pid;
error_log $d/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $d/tmp/body;
  proxy_temp_path $d/tmp/proxy;
  fastcgi_temp_path $d/tmp/fastcgi;
  uwsgi_temp_path $d/tmp/uwsgi;
  scgi_temp_path $d/tmp/scgi;
  client_max_body_size 16m;
  client_body_buffer_size 128k;
  keepalive_requests 1000000;
  $3
}
EOF
  echo "$d/nginx.conf"
}

wait_port() { # $1 port
  for _ in $(seq 1 100); do
    curl -s -o /dev/null "http://127.0.0.1:$1/" && return 0
    sleep 0.1
  done
  return 1
}

start_nginx() { # $1 cpus, $2 conf
  taskset -c "$1" "$NGINX" -c "$2" >/dev/null 2>&1 &
  PIDS+=($!)
}

stop_last() {
  local pid="${PIDS[-1]}"
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  unset 'PIDS[-1]'
  sleep 0.3
}

# Backend: a small HTML page for every request (POSTs too: `return` answers before the body
# matters), on BACKEND_CPUS.
PAGE='<!DOCTYPE html><html><head><title>Welcome</title></head><body><h1>Welcome</h1><p>A small page from the benchmark backend.</p></body></html>'
backend_conf=$(nginx_conf backend "" "server {
    listen 127.0.0.1:$BACKEND_PORT reuseport;
    location / { default_type text/html; return 200 '$PAGE'; }
  }")
start_nginx "$BACKEND_CPUS" "$backend_conf"
wait_port "$BACKEND_PORT" || { echo "load: backend nginx did not start:" >&2; cat "$WORK/backend/error.log" >&2; exit 1; }

PROXY_BLOCK="upstream backend { server 127.0.0.1:$BACKEND_PORT; keepalive 64; }
  server {
    listen 127.0.0.1:$GATEWAY_PORT;
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection \"\";
      MODSEC_LINES
    }
  }"

# Starts gateway $1; returns 1 if it cannot run here, with the reason in $WHY.
WHY=""
start_gateway() {
  WHY=""
  local why
  why=$(start_gateway_inner_check "$1") || { WHY=$why; return 1; }
  start_gateway_inner "$1"
  if ! wait_port "$GATEWAY_PORT"; then
    stop_last
    WHY="did not start (see $WORK/$1*)"
    return 1
  fi
}

# Says why gateway $1 cannot run here (exit 1), or nothing.
start_gateway_inner_check() {
  case "$1" in
    nginx) ;;
    modsec)
      [ -f "$MODSEC_MODULE" ] || { echo "binary missing: $MODSEC_MODULE (apt-get install libnginx-mod-http-modsecurity)"; return 1; } ;;
    proxy-*)
      [ -x "$WAF_PROXY_BIN" ] || { echo "binary missing: $WAF_PROXY_BIN (cargo build --release -p waf-proxy)"; return 1; }
      printf '%s\n' "$WAF_PROXY_VARIANTS" | grep -q "^$1|" || { echo "no command line in WAF_PROXY_VARIANTS"; return 1; } ;;
    *) echo "unknown gateway"; return 1 ;;
  esac
}

# Starts gateway $1 (checked by start_gateway_inner_check) in the background.
start_gateway_inner() {
  case "$1" in
    nginx)
      start_nginx "$GATEWAY_CPUS" "$(nginx_conf nginx "" "${PROXY_BLOCK/MODSEC_LINES/}")"
      ;;
    modsec)
      start_nginx "$GATEWAY_CPUS" "$(nginx_conf modsec "load_module $MODSEC_MODULE;" \
        "${PROXY_BLOCK/MODSEC_LINES/modsecurity on; modsecurity_rules_file $WORK/crs-pl1.conf;}")"
      ;;
    proxy-*)
      local waf
      # The variant's lines: everything after "name|" up to the next variant.
      waf=$(printf '%s\n' "$WAF_PROXY_VARIANTS" | awk -v n="$1" -F'|' '
        /^proxy-[a-z0-9-]+\|/ { on = ($1 == n); if (on) { sub(/^[^|]*\|/, ""); print }; next }
        on { print }')
      waf=${waf//\{crs\}/${CRS_DIR:-$ROOT/../shared/crs}}
      waf=${waf//\{rules\}/$WORK/crs-pl1.conf}
      cat >"$WORK/$1.toml" <<TOML
[server]
listen = ["127.0.0.1:$GATEWAY_PORT"]
workers = 1
reload_poll_ms = 0
[log]
access = "off"
[[upstream]]
name = "backend"
servers = ["127.0.0.1:$BACKEND_PORT"]
[[host]]
names = ["*"]
upstream = "backend"
$waf
TOML
      taskset -c "$GATEWAY_CPUS" "$WAF_PROXY_BIN" run --config "$WORK/$1.toml" >"$WORK/$1.log" 2>&1 &
      PIDS+=($!)
      ;;
  esac
}

# wrk output → "req/s|p50|p99|errors"
parse_wrk() {
  awk '
    /Requests\/sec:/ { rps = $2 }
    /^ +50%/ { p50 = $2 } /^ +99%/ { p99 = $2 }
    /Non-2xx or 3xx responses:/ { non2xx = $NF }
    /Socket errors:/ { gsub(",", ""); for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+$/) serr += $i }
    END { printf "%s|%s|%s|%d\n", rps, p50, p99, non2xx + serr }'
}

{
  echo "# Load benchmark $STAMP"
  echo
  echo "wrk -t$THREADS -c$CONNECTIONS -d$DURATION, keep-alive; backend nginx on CPU $BACKEND_CPUS, gateway on CPU $GATEWAY_CPUS, wrk on CPU $WRK_CPUS;"
  echo "$(nproc) CPUs, load average before: $(cut -d' ' -f1-3 /proc/loadavg). Host: $(uname -nr)."
  echo
  echo "| scenario | gateway | req/s | p50 | p99 | errors (non-2xx, socket) | vs plain nginx | benign → | SQLi → |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
} | tee "$OUT"

declare -A BASE
for gw in $GATEWAYS; do
  if ! start_gateway "$gw"; then
    echo "| all | $gw | skipped: $WHY | | | | | | |" | tee -a "$OUT"
    continue
  fi
  benign=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$GATEWAY_PORT/index.html?page=2&sort=name")
  sqli=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$GATEWAY_PORT/index.html?id=1%27%20OR%20%271%27%3D%271")
  for scenario in get post_json_10k; do
    url="http://127.0.0.1:$GATEWAY_PORT/index.html?page=2&sort=name"
    extra=()
    [ "$scenario" = post_json_10k ] && { url="http://127.0.0.1:$GATEWAY_PORT/api/users"; extra=(-s "$WORK/post.lua"); }
    IFS='|' read -r rps p50 p99 errors < <(taskset -c "$WRK_CPUS" wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" \
      --latency "${extra[@]}" "$url" 2>&1 | tee "$WORK/wrk-$gw-$scenario.txt" | parse_wrk)
    [ "$gw" = nginx ] && BASE[$scenario]=$rps
    rel=""
    if [ -n "${BASE[$scenario]:-}" ] && [ -n "$rps" ]; then
      rel=$(awk -v a="$rps" -v b="${BASE[$scenario]}" 'BEGIN { if (b > 0) printf "%.3g %%", 100 * a / b }')
    fi
    echo "| $scenario | $gw | $rps | $p50 | $p99 | $errors | $rel | $benign | $sqli |" | tee -a "$OUT"
  done
  stop_last
done
echo | tee -a "$OUT"
echo "Written to ${OUT#"$ROOT"/}." | tee -a "$OUT"
