#!/usr/bin/env bash
# Load benchmark of waf-proxy on loopback (the method of ../shared/notes/proxy-limit.md,
# shortened): nginx answering "ok" as the upstream and wrk on CPU 0, waf-proxy with one
# current_thread worker on CPU 1. Prints one wrk summary per WAF profile.
#
#   cargo build --release -p waf-proxy
#   BIN=$CARGO_TARGET_DIR/release/waf-proxy waf-proxy/bench/load.sh [off|rules|crs|crs-excl ...]
#
# Needs nginx and wrk. Ports 28182 (upstream) and 28183 (proxy) on 127.0.0.1.
set -euo pipefail
BIN=${BIN:-target/release/waf-proxy}
CRS=${CRS:-$(cd "$(dirname "$0")/../../.." && pwd)/shared/crs}
DURATION=${DURATION:-10s}
PROFILES=("${@:-off rules crs}")
read -r -a PROFILES <<<"${PROFILES[*]}"
# On-CPU time of all threads of a process, in ns (robust to a busy machine, unlike req/s).
cpu_ns() {
  cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%d", s}'
}
tmp=$(mktemp -d)
trap 'kill $(cat "$tmp"/*.pid 2>/dev/null) 2>/dev/null || true; rm -rf "$tmp"' EXIT

mkdir -p "$tmp/logs"
cat >"$tmp/nginx.conf" <<NGINX
worker_processes 1;
daemon off;
pid $tmp/nginx.pid;
error_log $tmp/logs/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $tmp/body;
  proxy_temp_path $tmp/proxy;
  fastcgi_temp_path $tmp/fcgi;
  uwsgi_temp_path $tmp/uwsgi;
  scgi_temp_path $tmp/scgi;
  keepalive_requests 100000;
  server { listen 127.0.0.1:28182; location / { return 200 "ok\n"; } }
}
NGINX
taskset -c 0 nginx -c "$tmp/nginx.conf" -p "$tmp" &
sleep 0.5

cat >"$tmp/rules.conf" <<'RULES'
SecRuleEngine On
SecRequestBodyAccess On
SecRule ARGS "@rx (?i)union\s+select" "id:1001,phase:2,deny,status:403"
RULES

for profile in "${PROFILES[@]}"; do
  case $profile in
    off) waf='waf = { mode = "off" }' ;;
    rules) waf="waf = { mode = \"block\", rules = [\"$tmp/rules.conf\"] }" ;;
    crs) waf="waf = { mode = \"block\", crs = \"$CRS\", paranoia = 1 }" ;;
    # CRS with one path-scoped exclusion: the proxy assembles CRS itself (state.rs).
    crs-excl) waf="waf = { mode = \"block\", crs = \"$CRS\", paranoia = 1, exclusions = [{ rule_ids = [942100], path_prefix = \"/api/\" }] }" ;;
    *) echo "unknown profile $profile" >&2; exit 2 ;;
  esac
  cat >"$tmp/proxy.toml" <<TOML
[server]
listen = ["127.0.0.1:28183"]
workers = 1
reload_poll_ms = 0
[log]
access = "off"
[[upstream]]
name = "nginx"
servers = ["127.0.0.1:28182"]
[[host]]
names = ["*"]
upstream = "nginx"
$waf
TOML
  taskset -c 1 "$BIN" run --config "$tmp/proxy.toml" 2>"$tmp/proxy.err" &
  echo $! >"$tmp/proxy.pid"
  for _ in $(seq 100); do
    grep -q started "$tmp/proxy.err" && break
    sleep 0.1
  done
  curl -sf -o /dev/null "http://127.0.0.1:28183/index.html?page=2&sort=name"
  echo "== profile $profile: GET /index.html?page=2&sort=name, 64 connections, $DURATION"
  taskset -c 0 wrk -t1 -c64 -d3s "http://127.0.0.1:28183/index.html?page=2&sort=name" >/dev/null
  pid=$(cat "$tmp/proxy.pid")
  cpu0=$(cpu_ns "$pid")
  taskset -c 0 wrk -t1 -c64 -d"$DURATION" --latency "http://127.0.0.1:28183/index.html?page=2&sort=name" >"$tmp/wrk.out"
  cpu1=$(cpu_ns "$pid")
  grep -E "Requests/sec|Latency  |50%|99%" "$tmp/wrk.out"
  n=$(awk '/requests in/ {print $1}' "$tmp/wrk.out")
  echo "    proxy CPU per request: $(( (cpu1 - cpu0) / n / 1000 )) us ($n requests)"
  kill "$(cat "$tmp/proxy.pid")"
  wait "$(cat "$tmp/proxy.pid")" 2>/dev/null || true
  rm -f "$tmp/proxy.pid"
done
