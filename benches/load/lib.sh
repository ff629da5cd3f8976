# shellcheck shell=bash
# The shared machinery of the published-benchmark methods (load/nullward.sh, load/corvus.sh,
# load/jxwaf.sh; load/methods.sh runs all three): sourced, not run. It is run.sh's machinery
# (one backend nginx answering from memory, gateways restarted per measurement and pinned to
# their own core, wrk with the no-resumption shim, gateway CPU and peak RSS from /proc),
# plus what the methods need beyond it:
#
#   - the gateways: plain nginx, nginx + ModSecurity + CRS PL1, nginx + our module
#     (waf-ffi/nginx) + CRS PL1, and waf-proxy at the ladder's levels L0..L6 and the Corvus
#     and JXWAF variants (proxy_host_lines below says what each one is);
#   - a closed-loop saturation search (wrk at 16, 32, 64, 128 connections, stopping when a
#     step gains under 3 % or p99 passes 1 s) and open-loop latency points (src/bin/openloop.rs);
#   - the cookies a visitor who passed a gate carries (load/gates.sh);
#   - one row per measurement, as `key=value` fields separated by tabs, in $ROWS: load/report.py
#     turns a run's rows into the markdown tables and the PNG charts.
#
# Knobs (environment): DURATION (closed-loop point), LAT_DURATION (open-loop point), WARMUP,
# TIMEOUT, CONNS (saturation steps), QUICK=1 (a smoke test: 1 s points, two steps, one latency
# point), NO_BUILD=1 (use the binaries as they are), BACKEND_CPUS / GATEWAY_CPUS / WRK_CPUS,
# GATEWAYS / SCENARIOS (a method's subset), the ports below.
#
# Needs what run.sh needs (nginx, libnginx-mod-http-modsecurity, wrk, curl, openssl, gcc,
# taskset) plus nginx-dev (the module build), libmaxmind-db-writer-perl (the country .mmdb),
# python3 with aiosmtpd (the sign-in's SMTP sink) and matplotlib (the charts).

set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

if [ "${QUICK:-0}" = 1 ]; then
  DURATION="${DURATION:-1s}"
  LAT_DURATION="${LAT_DURATION:-1}"
  WARMUP="${WARMUP:-1s}"
  CONNS="${CONNS:-64}"
  LAT_SHARES="${LAT_SHARES:-50}"
else
  DURATION="${DURATION:-3s}"
  LAT_DURATION="${LAT_DURATION:-3}"
  WARMUP="${WARMUP:-1s}"
  CONNS="${CONNS:-16 32 64 128}"
  LAT_SHARES="${LAT_SHARES:-25 50 75}"
fi
TIMEOUT="${TIMEOUT:-10s}"
GAIN_MIN="${GAIN_MIN:-3}"        # % a saturation step must add to go on
P99_MAX_MS="${P99_MAX_MS:-1000}" # a saturation step over this stops the search
BACKEND_CPUS="${BACKEND_CPUS:-0}"
GATEWAY_CPUS="${GATEWAY_CPUS:-1}"
WRK_CPUS="${WRK_CPUS:-0}"
# Ports of their own, away from run.sh's 18xxx, so that a run.sh or another engineer's
# proxy started meanwhile does not collide (lib_setup refuses to start on a busy port).
BACKEND_PORT="${BACKEND_PORT:-29191}"   # the 180-byte page (NullWard, JXWAF)
BACKEND3_PORT="${BACKEND3_PORT:-29192}" # the 3-byte answer (Corvus)
GATEWAY_PORT="${GATEWAY_PORT:-29180}"
GATEWAY_TLS_PORT="${GATEWAY_TLS_PORT:-29443}"
ADMIN_PORT="${ADMIN_PORT:-29181}"
export SMTP_PORT="${SMTP_PORT:-29125}"  # load/gates.sh's SMTP sink for the sign-in
NGINX="${NGINX:-/usr/sbin/nginx}"
NGINX_SRC="${NGINX_SRC:-/usr/share/nginx/src}"
MODSEC_MODULE="${MODSEC_MODULE:-/usr/lib/nginx/modules/ngx_http_modsecurity_module.so}"
CRS="${CRS_DIR:-$ROOT/../shared/crs}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
BIN_DIR="$CARGO_TARGET_DIR/release-lto"
WAF_PROXY_BIN="${WAF_PROXY_BIN:-$BIN_DIR/waf-proxy}"
OPENLOOP_BIN="${OPENLOOP_BIN:-$BIN_DIR/openloop}"
PROFILE_BIN="${PROFILE_BIN:-$BIN_DIR/waf-profile}"
FFI_LIB="${FFI_LIB:-$BIN_DIR/libwaf_ffi.a}"
MODULE_DIR="${MODULE_DIR:-$CARGO_TARGET_DIR/ngx-waf-module}"
RESULTS="$ROOT/benches/results"
CLK_TCK=$(getconf CLK_TCK)
PIDS=()
SESSION_COOKIE=""

# The backend's answers: a 180-byte HTML page, and Corvus's 3 bytes.
PAGE180='<!DOCTYPE html><html><head><title>Welcome</title></head><body><h1>Welcome</h1><p>A small page from the benchmark backend, about one hundred and eighty bytes long.</p></body></html>'
PAGE3='ok\n' # nginx turns \n into a newline: 3 bytes

lib_cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "${WORK:-}" ] && rm -rf "$WORK"
}

need() { command -v "$1" >/dev/null 2>&1 || { echo "load: $1 is missing ($2)" >&2; exit 1; }; }

# The release-lto binaries: waf-proxy, openloop and waf-profile in one invocation (one
# feature set, so nothing is built twice), and waf-ffi's static library alone (a staticlib
# only: the cdylib would cost a second fat-LTO link) with waf-core's features of the first
# build, so that waf-core is not compiled again.
build_binaries() {
  cargo build -q --profile release-lto -p waf-proxy -p waf-bench --bin waf-proxy --bin openloop --bin waf-profile
  cargo rustc -q --profile release-lto -p waf-ffi --features waf-core/ml --crate-type staticlib
}

# Checks the tools, builds the binaries (unless NO_BUILD=1), writes the inputs (certificate,
# bodies, configurations, the no-resumption shim) under a new $WORK, starts the backend.
lib_setup() {
  need wrk "apt-get install -y wrk"
  need curl "apt-get install -y curl"
  need openssl "apt-get install -y openssl"
  need cc "apt-get install -y gcc"
  need taskset "util-linux"
  need pgrep "procps"
  need python3 "apt-get install -y python3"
  [ -x "$NGINX" ] || { echo "load: $NGINX is missing (apt-get install -y nginx)" >&2; exit 1; }
  if [ "${NO_BUILD:-0}" != 1 ]; then
    build_binaries
  fi
  local b
  for b in "$WAF_PROXY_BIN" "$OPENLOOP_BIN" "$PROFILE_BIN"; do
    [ -x "$b" ] || { echo "load: $b is missing (see build_binaries in benches/load/lib.sh)" >&2; exit 1; }
  done
  local p
  for p in "$BACKEND_PORT" "$BACKEND3_PORT" "$GATEWAY_PORT" "$GATEWAY_TLS_PORT" "$ADMIN_PORT" "$SMTP_PORT"; do
    if ss -Hltn "sport = :$p" | grep -q .; then
      echo "load: port $p is in use (ss -ltnp 'sport = :$p'); set the *_PORT variables" >&2
      exit 1
    fi
  done
  WORK="$(mktemp -d /tmp/waf-methods.XXXXXX)"
  trap lib_cleanup EXIT
  "$PROFILE_BIN" --print-config 1 >"$WORK/crs-pl1.conf"
  "$PROFILE_BIN" --print-body post_json_10k >"$WORK/body.json"
  printf 'id=1' >"$WORK/form.txt"
  local name file ctype
  for name in json form; do
    if [ $name = json ]; then file="$WORK/body.json" ctype=application/json; else file="$WORK/form.txt" ctype=application/x-www-form-urlencoded; fi
    cat >"$WORK/post-$name.lua" <<EOF
local f = assert(io.open("$file", "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "$ctype"
EOF
  done
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null
  cc -O2 -shared -fPIC -o "$WORK/no_resume.so" "$ROOT/benches/load/no_resume.c" -ldl
  backend_start
}

# Common nginx settings: foreground, everything under $WORK, one worker (copied from run.sh).
nginx_conf() { # $1 name, $2 extra main-context lines, $3 http-context lines
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

wait_port() { # $1 port; up to WAIT_SECS (60) s (CRS loading on a loaded machine)
  local _
  for _ in $(seq 1 $((${WAIT_SECS:-60} * 10))); do
    curl -s -o /dev/null "http://127.0.0.1:$1/" && return 0
    sleep 0.1
  done
  return 1
}

start_nginx() { # $1 cpus, $2 conf ($WORK/NAME/nginx.conf; stderr to $WORK/NAME.out)
  taskset -c "$1" "$NGINX" -c "$2" >"${2%/nginx.conf}.out" 2>&1 &
  PIDS+=($!)
}

stop_last() {
  local pid="${PIDS[-1]}"
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  unset 'PIDS[-1]'
  sleep 0.3
}

backend_start() {
  local conf
  conf=$(nginx_conf backend "" "server {
    listen 127.0.0.1:$BACKEND_PORT reuseport;
    location / { default_type text/html; return 200 '$PAGE180'; }
  }
  server {
    listen 127.0.0.1:$BACKEND3_PORT reuseport;
    location / { default_type text/plain; return 200 '$PAGE3'; }
  }")
  start_nginx "$BACKEND_CPUS" "$conf"
  wait_port "$BACKEND_PORT" || { echo "load: backend nginx did not start:" >&2; cat "$WORK/backend/error.log" >&2; exit 1; }
  BACKEND_PID=${PIDS[-1]}
}

# The gateway's processes: the started PID (nginx master / waf-proxy) and its children.
gateway_pids() {
  local root="${PIDS[-1]}"
  echo "$root"
  pgrep -P "$root" || true
}

# utime+stime in clock ticks over the gateway's processes (all threads).
gateway_ticks() {
  local total=0 pid t
  for pid in $(gateway_pids); do
    t=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | awk '{ print $12 + $13 }') || t=0
    total=$((total + ${t:-0}))
  done
  echo "$total"
}

# VmHWM in kB over the gateway's processes.
gateway_hwm_kb() {
  local total=0 pid k
  for pid in $(gateway_pids); do
    k=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status" 2>/dev/null) || k=0
    total=$((total + ${k:-0}))
  done
  echo "$total"
}

# Waits until the gateway is idle (under 2 ticks in 0.5 s), at most 60 s.
wait_idle() {
  local a b _
  for _ in $(seq 1 120); do
    a=$(gateway_ticks)
    sleep 0.5
    b=$(gateway_ticks)
    [ $((b - a)) -lt 2 ] && return 0
  done
  echo "load: gateway still busy 60 s after the last load" >&2
}

# ---------------------------------------------------------------------------------------
# Gateways.

# nginx's proxy server block to port $1, with extra location lines $2.
nginx_proxy_block() {
  echo "upstream backend { server 127.0.0.1:$1; keepalive 64; }
  server {
    listen 127.0.0.1:$GATEWAY_PORT;
    listen 127.0.0.1:$GATEWAY_TLS_PORT ssl;
    ssl_certificate $WORK/cert.pem;
    ssl_certificate_key $WORK/key.pem;
    ssl_protocols TLSv1.2 TLSv1.3;
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection \"\";
      $2
    }
  }"
}

# The nginx module (waf-ffi/nginx) built against Debian's nginx-dev sources and the
# release-lto static library, as waf-ffi/tests/nginx.rs builds it; rebuilt when the library
# is newer than the module.
build_ngx_module() {
  local so="$MODULE_DIR/objs/ngx_http_waf_module.so"
  [ -f "$FFI_LIB" ] || { echo "load: $FFI_LIB is missing (see build_binaries)" >&2; return 1; }
  if [ -f "$so" ] && [ "$so" -nt "$FFI_LIB" ] && [ "$so" -nt "$ROOT/waf-ffi/nginx/ngx_http_waf_module.c" ]; then
    echo "$so"; return 0
  fi
  [ -f "$NGINX_SRC/conf_flags" ] || { echo "load: $NGINX_SRC is missing (apt-get install -y nginx-dev)" >&2; return 1; }
  rm -rf "$MODULE_DIR"
  cp -r "$NGINX_SRC" "$MODULE_DIR"
  (
    cd "$MODULE_DIR"
    # shellcheck disable=SC1091
    . ./conf_flags
    WAF_FFI_LIB="$FFI_LIB" ./configure "${NGX_CONF_FLAGS[@]}" --add-dynamic-module="$ROOT/waf-ffi/nginx" >configure.log 2>&1 ||
      { tail -30 configure.log >&2; exit 1; }
    WAF_FFI_LIB="$FFI_LIB" make -f objs/Makefile modules >make.log 2>&1 || { tail -30 make.log >&2; exit 1; }
  ) || return 1
  echo "$so"
}

# The [[host]] lines of a waf-proxy gateway, in three parts written to files:
# $WORK/$1.keys (keys of the [[host]] table), $WORK/$1.tables (its sub-tables),
# $WORK/$1.top (top-level tables); $WORK/$1.log holds the access-log target.
#
#   L0 proxy: WAF off
#   L1 + CRS PL1, blocking (the same CRS as the nginx gateways)
#   L2 + the ML detector in detect mode (`ml = "default"`)
#   L3 + email-code sign-in on every path; every request carries the session cookie of a
#        visitor who signed in through the real flow (load/gates.sh, aiosmtpd as the SMTP sink)
#   L4 + a 100,000 r/s rate limit every request goes through (never triggered), IP
#        intelligence (country from a .mmdb, a scored reputation list of 1,000 CIDRs, both
#        read by block rules that do not match), behaviour scoring of 4xx answers with bans
#   L5 + the JSON access log, to a file
#   L6 + HSTS and the security headers, a 1 MiB request-body limit, X-Forwarded-*/Forwarded
#        headers, cookie hardening (Secure, HttpOnly, SameSite) and a block rule on a cookie
#   c-protected  Corvus's "protected": 30 non-matching block rules, a 1,000-CIDR list, a
#        100,000 r/s rate limit (load/protected-policy.sh), exploit blocking (the built-in
#        default profile, blocking) and the security headers
#   c-policy     the same without exploit blocking (WAF rules off): run.sh's proxy-protected
#   c-queue, c-challenge  WAF off + a waiting room / a cookie challenge on every path; every
#        request carries the admission / pass cookie (load/gates.sh)
#   jx-web  JXWAF's "web engine": the built-in default profile, blocking, + the ML detector
#   jx-all  JXWAF's "everything on": jx-web + L4, L5 and L6's protections + a cookie
#        challenge on every path (the bot side of JXWAF's traffic engine; requests carry the
#        pass cookie)
proxy_host_lines() {
  local gw="$1" level=-1 keys="$WORK/$1.keys" tables="$WORK/$1.tables" top="$WORK/$1.top"
  : >"$keys"; : >"$tables"; : >"$top"; echo off >"$WORK/$1.logto"
  case "$gw" in
    L[0-6]) level=${gw#L} ;;
  esac
  local waf='waf = { mode = "off" }'
  case "$gw" in
    L*) [ "$level" -ge 1 ] && waf="waf = { mode = \"block\", crs = \"$CRS\", paranoia = 1 }"
        [ "$level" -ge 2 ] && waf="waf = { mode = \"block\", crs = \"$CRS\", paranoia = 1, ml = \"default\" }" ;;
    c-protected) waf='waf = { mode = "block" }' ;;
    jx-web | jx-all) waf='waf = { mode = "block", ml = "default" }' ;;
  esac
  echo "$waf" >>"$keys"
  local headers='headers = { hsts = "max-age=31536000", content_type_options = true, frame_options = "DENY", referrer_policy = "no-referrer", csp = "default-src '"'self'"'" }'
  # L3: sign-in.
  if [ "$level" -ge 3 ]; then
    "$ROOT/benches/load/gates.sh" config sign-in "$WORK" >>"$tables"
  fi
  # L4 (and jx-all): rate limit, IP intelligence, scoring.
  if [ "$level" -ge 4 ] || [ "$gw" = jx-all ]; then
    ensure_mmdb
    cat >>"$tables" <<EOF
[[host.rules]]
name = "bad-reputation"
expression = 'ip.src.reputation >= 50'
action = "block"

[[host.rules]]
name = "embargo"
expression = 'ip.src.country in {"KP" "XX"}'
action = "block"

[[host.rate_limit]]
name = "flood"
requests = 100000
period_secs = 1
burst = 100000

[host.scoring]
threshold = 20
half_life_secs = 60

[host.bans]
ttl_secs = 600
EOF
    {
      echo "[geo]"
      echo "country_db = \"$WORK/mmdb/country.mmdb\""
      echo
      echo "[[reputation]]"
      echo 'name = "scanners"'
      echo 'category = "scanner"'
      echo 'score = 80'
      python3 -c 'print("items = [%s]" % ", ".join("\"10.%d.%d.0/24\"" % (i // 256, i % 256) for i in range(1000)))'
    } >>"$top"
  fi
  # L5 (and jx-all): the access log.
  if [ "$level" -ge 5 ] || [ "$gw" = jx-all ]; then
    echo "$WORK/access.log" >"$WORK/$1.logto"
  fi
  # L6 (and jx-all): headers, body limit, forwarding, cookies.
  if [ "$level" -ge 6 ] || [ "$gw" = jx-all ]; then
    {
      echo "$headers"
      echo 'limits = { max_request_body = 1048576 }'
      echo 'forwarding = { x_forwarded = true, forwarded = true }'
      echo 'cookies = { secure = true, http_only = true, same_site = "Lax" }'
    } >>"$keys"
    cat >>"$tables" <<'EOF'
[[host.rules]]
name = "debug-cookie"
expression = 'http.request.cookies["debug"] == "1"'
action = "block"
EOF
  fi
  case "$gw" in
    c-protected | c-policy)
      echo "$headers" >>"$keys"
      ensure_mmdb
      # protected-policy.sh prints host tables then the top-level [[list]] and [geo].
      cat "$WORK/mmdb/protected.toml" >>"$tables" ;;
    c-queue) "$ROOT/benches/load/gates.sh" config queue "$WORK" >>"$tables" ;;
    c-challenge | jx-all) "$ROOT/benches/load/gates.sh" config challenge-pass "$WORK" >>"$tables" ;;
  esac
}

# The country .mmdb and the "protected" policy (load/protected-policy.sh), once per run.
ensure_mmdb() {
  [ -f "$WORK/mmdb/protected.toml" ] && return 0
  mkdir -p "$WORK/mmdb"
  "$ROOT/benches/load/protected-policy.sh" "$WORK/mmdb" >"$WORK/mmdb/protected.toml"
}

# Writes $WORK/$1.toml for waf-proxy gateway $1, upstream port $2.
proxy_config() {
  local gw="$1" port="$2"
  proxy_host_lines "$gw"
  local logto
  logto=$(cat "$WORK/$gw.logto")
  {
    cat <<TOML
[server]
listen = ["127.0.0.1:$GATEWAY_PORT"]
listen_tls = ["127.0.0.1:$GATEWAY_TLS_PORT"]
workers = 1
reload_poll_ms = 0
shutdown_timeout_ms = 1000
[admin]
listen = "127.0.0.1:$ADMIN_PORT"
[log]
access = "$logto"
[[upstream]]
name = "backend"
servers = ["127.0.0.1:$port"]
[[host]]
names = ["*"]
upstream = "backend"
tls = { cert = "$WORK/cert.pem", key = "$WORK/key.pem" }
TOML
    cat "$WORK/$gw.keys"
    echo
    cat "$WORK/$gw.tables"
    echo
    cat "$WORK/$gw.top"
  } >"$WORK/$gw.toml"
}

is_proxy() { case "$1" in L[0-6] | c-* | jx-*) return 0 ;; *) return 1 ;; esac; }

# Starts gateway $1 in front of backend port $2; returns 1 with the reason in $WHY.
WHY=""
start_gateway() {
  local gw="$1" port="$2"
  WHY=""
  case "$gw" in
    nginx) start_nginx "$GATEWAY_CPUS" "$(nginx_conf nginx "" "$(nginx_proxy_block "$port" "")")" ;;
    modsec)
      [ -f "$MODSEC_MODULE" ] || { WHY="missing $MODSEC_MODULE (apt-get install -y libnginx-mod-http-modsecurity)"; return 1; }
      start_nginx "$GATEWAY_CPUS" "$(nginx_conf modsec "load_module $MODSEC_MODULE;" \
        "$(nginx_proxy_block "$port" "modsecurity on; modsecurity_rules_file $WORK/crs-pl1.conf;")")" ;;
    nginx-waf)
      local so
      so=$(build_ngx_module) || { WHY="the nginx module did not build"; return 1; }
      start_nginx "$GATEWAY_CPUS" "$(nginx_conf nginx-waf "load_module $so;" \
        "$(nginx_proxy_block "$port" "waf on; waf_rules_file $WORK/crs-pl1.conf;")")" ;;
    *)
      is_proxy "$gw" || { WHY="unknown gateway"; return 1; }
      proxy_config "$gw" "$port"
      # GATEWAY_WRAPPER: a command the proxy runs under (load/profile.sh: valgrind).
      # shellcheck disable=SC2086
      taskset -c "$GATEWAY_CPUS" ${GATEWAY_WRAPPER:-} "$WAF_PROXY_BIN" run --config "$WORK/$gw.toml" >"$WORK/$gw.out" 2>&1 &
      PIDS+=($!) ;;
  esac
  if ! wait_port "$GATEWAY_PORT" || ! kill -0 "${PIDS[-1]}" 2>/dev/null; then
    stop_last
    WHY="did not start: $(tail -3 "$WORK/$gw.out" "$WORK/$gw/error.log" 2>/dev/null | tr '\n' ' ')"
    return 1
  fi
  # The cookie a visitor who passed the gateway's gate carries (empty: no gate).
  COOKIE=""
  case "$gw" in
    L[3-6])
      if [ -z "$SESSION_COOKIE" ]; then
        # Minted once through the real sign-in; the session is a signed token (HMAC, the
        # same key in every run of the gateway), valid across restarts.
        SESSION_COOKIE=$("$ROOT/benches/load/gates.sh" cookie sign-in "http://127.0.0.1:$GATEWAY_PORT" "$WORK/signin")
      fi
      COOKIE=$SESSION_COOKIE ;;
    c-queue) COOKIE=$("$ROOT/benches/load/gates.sh" cookie queue "http://127.0.0.1:$GATEWAY_PORT" "$WORK") ;;
    c-challenge | jx-all) COOKIE=$("$ROOT/benches/load/gates.sh" cookie challenge-pass "http://127.0.0.1:$GATEWAY_PORT" "$WORK") ;;
  esac
  return 0
}

stop_gateway() {
  stop_last
  rm -f "$WORK/access.log"
}

# Non-2xx answers the proxy has counted so far (its /metrics), or 0 for the nginx gateways.
# 499 (client_abort) is not an answer: the requests in flight when wrk stops its clock and
# closes its connections (up to one per connection per step).
proxy_non2xx() {
  is_proxy "$1" || { echo 0; return; }
  curl -s "http://127.0.0.1:$ADMIN_PORT/metrics" |
    awk '/^waf_proxy_requests_total/ { if (match($0, /status="[0-9]+"/)) { s = substr($0, RSTART + 8, 3); if (s !~ /^2/ && s != "499") n += $NF } } END { print n + 0 }'
}

# ---------------------------------------------------------------------------------------
# Requests.

# Sets URL, WRK_ARGS, OL_ARGS (openloop), CURL_ARGS for request $1 over transport $2
# (http, https, newconn), with $COOKIE.
request_args() {
  local req="$1" transport="$2" path="/"
  local base="http://127.0.0.1:$GATEWAY_PORT"
  [ "$transport" != http ] && base="https://127.0.0.1:$GATEWAY_TLS_PORT"
  WRK_ARGS=() OL_ARGS=() CURL_ARGS=(-H "User-Agent:")
  case "$req" in
    get) ;;
    json) path=/api/users
      WRK_ARGS+=(-s "$WORK/post-json.lua")
      OL_ARGS+=(--method POST --body "$WORK/body.json" --header "Content-Type: application/json")
      CURL_ARGS+=(-X POST --data-binary "@$WORK/body.json" -H "Content-Type: application/json") ;;
    form)
      WRK_ARGS+=(-s "$WORK/post-form.lua")
      OL_ARGS+=(--method POST --body "$WORK/form.txt" --header "Content-Type: application/x-www-form-urlencoded")
      CURL_ARGS+=(-X POST --data-binary "@$WORK/form.txt" -H "Content-Type: application/x-www-form-urlencoded") ;;
    *) echo "load: unknown request $req" >&2; exit 1 ;;
  esac
  if [ "$transport" = newconn ]; then
    WRK_ARGS+=(-H "Connection: close")
    OL_ARGS+=(--new-conn)
  fi
  if [ -n "$COOKIE" ]; then
    WRK_ARGS+=(-H "Cookie: $COOKIE")
    OL_ARGS+=(--header "Cookie: $COOKIE")
    CURL_ARGS+=(-H "Cookie: $COOKIE")
  fi
  URL="$base$path"
}

probe() { # URL [curl args] → HTTP status
  local url="$1"
  shift
  curl -sk -o /dev/null -w '%{http_code}' --max-time 30 "$@" "$url" || true
}

# wrk -c $1 -d $2 with WRK_ARGS on URL; prints "rps|p50_ms|p99_ms|errors|requests".
run_wrk() {
  local c="$1" d="$2"
  taskset -c "$WRK_CPUS" env LD_PRELOAD="$WORK/no_resume.so" \
    wrk -t1 -c"$c" -d"$d" --timeout "$TIMEOUT" --latency "${WRK_ARGS[@]}" "$URL" 2>&1 | tee "$WORK/last-wrk.txt" |
    awk '
      function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /m$/) return v * 60000; if (v ~ /s$/) return v * 1000; return v }
      /Requests\/sec:/ { rps = $2 }
      / requests in / { n = $1 }
      /^ +50%/ { p50 = ms($2) } /^ +99%/ { p99 = ms($2) }
      /Non-2xx or 3xx responses:/ { bad = $NF }
      /Socket errors:/ { gsub(",", ""); for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+$/) bad += $i }
      END { printf "%s|%.3f|%.3f|%d|%d\n", rps + 0, p50, p99, bad, n }' || true
}

# openloop at rate $1 with $2 connections for LAT_DURATION; prints its key=value line.
run_openloop() {
  taskset -c "$WRK_CPUS" "$OPENLOOP_BIN" --url "$URL" --rate "$1" --connections "$2" \
    --duration "$LAT_DURATION" "${OL_ARGS[@]}" 2>&1 | tail -1 || true
}

kv() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" <<<"$2"; }

# One cell: gateway $1 (started by the caller), request $2, transport $3, method $4.
# Saturation search (closed loop) unless FIXED_CONNS is set (one wrk point at that many
# connections, as Corvus and JXWAF publish), then the open-loop latency points (unless
# NO_LATENCY=1). Appends one row to $ROWS.
measure_cell() {
  local gw="$1" req="$2" transport="$3" method="$4"
  request_args "$req" "$transport"
  local benign sqli
  benign=$(probe "$URL" "${CURL_ARGS[@]}")
  sqli=$(probe "https://127.0.0.1:$GATEWAY_TLS_PORT/?id=1%27%20OR%20%271%27%3D%271" -H "User-Agent:" ${COOKIE:+-H "Cookie: $COOKIE"})
  local load
  load=$(cut -d' ' -f1 /proc/loadavg)
  local steps
  if [ -n "${FIXED_CONNS:-}" ]; then steps=$FIXED_CONNS; else steps=$CONNS; fi
  local first
  first=${steps%% *}
  if [ "$WARMUP" != 0 ]; then
    run_wrk "$first" "$WARMUP" >/dev/null
    wait_idle
  fi
  local bad0
  bad0=$(proxy_non2xx "$gw")
  local c best_rps=0 best_c=0 best_p50=0 best_p99=0 best_cpu=0 best_cpureq=0 errors=0 prev=0 points=""
  local line rps p50 p99 bad n t0 t1 c0 c1 cpu cpureq stop=""
  for c in $steps; do
    c0=$(gateway_ticks); t0=$(date +%s.%N)
    line=$(run_wrk "$c" "$DURATION")
    IFS='|' read -r rps p50 p99 bad n <<<"$line"
    if [ "$n" -lt 20 ]; then
      # Too slow for DURATION to say anything (nginx + ModSecurity on the 10 KB JSON POST:
      # a few requests per second): the step again, four times as long.
      wait_idle
      c0=$(gateway_ticks); t0=$(date +%s.%N)
      line=$(run_wrk "$c" "$(( ${DURATION%s} * 4 ))s")
      IFS='|' read -r rps p50 p99 bad n <<<"$line"
    fi
    t1=$(date +%s.%N); c1=$(gateway_ticks)
    errors=$((errors + bad))
    cpu=$(awk -v c=$((c1 - c0)) -v hz="$CLK_TCK" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", 100 * c / hz / (b - a) }')
    cpureq=$(awk -v c=$((c1 - c0)) -v hz="$CLK_TCK" -v n="$n" 'BEGIN { if (n > 0) printf "%.1f", 1e6 * c / hz / n; else print 0 }')
    points="$points${points:+,}$c:$rps:$p50:$p99:$cpu"
    if awk -v a="$rps" -v b="$best_rps" 'BEGIN { exit !(a > b) }'; then
      best_rps=$rps best_c=$c best_p50=$p50 best_p99=$p99 best_cpu=$cpu best_cpureq=$cpureq
    fi
    wait_idle
    if awk -v p="$p99" -v m="$P99_MAX_MS" 'BEGIN { exit !(p > m) }'; then stop="p99"; break; fi
    if [ "$prev" != 0 ] && awk -v a="$rps" -v b="$prev" -v g="$GAIN_MIN" 'BEGIN { exit !(a < b * (1 + g / 100)) }'; then stop="gain"; break; fi
    prev=$rps
  done
  # Open-loop latency at shares of the maximum, with the connections of the maximum.
  local lat="" s rate ol
  if [ "${NO_LATENCY:-0}" != 1 ]; then
    for s in $LAT_SHARES; do
      rate=$(awk -v r="$best_rps" -v s="$s" 'BEGIN { x = r * s / 100; if (x < 1) x = 1; printf "%.1f", x }')
      ol=$(run_openloop "$rate" "$best_c")
      errors=$((errors + $(kv non2xx "$ol") + $(kv errors "$ol")))
      lat="$lat${lat:+,}$s:$rate:$(kv rate "$ol"):$(kv p50_us "$ol"):$(kv p99_us "$ol"):$(kv sent "$ol")"
      wait_idle
    done
  fi
  local bad1 hwm
  bad1=$(proxy_non2xx "$gw")
  # The proxy's own count of non-2xx answers over the measurements (3xx included, which
  # wrk does not count).
  local proxy_bad=$((bad1 - bad0))
  [ "$proxy_bad" -gt "$errors" ] && errors=$proxy_bad
  hwm=$(gateway_hwm_kb)
  local valid=yes
  [ "$errors" -gt 0 ] && valid=no
  awk -v r="$best_rps" 'BEGIN { exit !(r > 0) }' || valid=no
  case "$benign" in 2??) ;; *) valid=no ;; esac
  printf 'method=%s\tgateway=%s\trequest=%s\ttransport=%s\trps=%s\tconns=%s\tp50_ms=%s\tp99_ms=%s\tcpu_pct=%s\tcpu_us=%s\trss_mib=%s\terrors=%s\tvalid=%s\tbenign=%s\tsqli=%s\tload=%s\tstop=%s\tpoints=%s\tlatency=%s\n' \
    "$method" "$gw" "$req" "$transport" "$best_rps" "$best_c" "$best_p50" "$best_p99" "$best_cpu" "$best_cpureq" \
    "$(awk -v k="$hwm" 'BEGIN { printf "%.1f", k / 1024 }')" "$errors" "$valid" "$benign" "$sqli" "$load" "${stop:-end}" "$points" "$lat" |
    tee -a "$ROWS" | cut -f2-13
}

# Runs method $1's cells: "gateway|request|transport|backend port" lines on stdin.
run_cells() {
  local method="$1" gw req transport port
  while IFS='|' read -r gw req transport port; do
    [ -z "$gw" ] && continue
    if [ -n "${GATEWAYS:-}" ] && ! [[ " $GATEWAYS " == *" $gw "* ]]; then continue; fi
    if [ -n "${SCENARIOS:-}" ] && ! [[ " $SCENARIOS " == *" $req-$transport "* ]]; then continue; fi
    if ! start_gateway "$gw" "$port" </dev/null; then
      printf 'method=%s\tgateway=%s\trequest=%s\ttransport=%s\tskipped=%s\n' "$method" "$gw" "$req" "$transport" "$WHY" | tee -a "$ROWS"
      continue
    fi
    measure_cell "$gw" "$req" "$transport" "$method" </dev/null
    stop_gateway
  done
}

# The run's header fields (one "#" line in $ROWS).
run_header() {
  printf '# method=%s\tstamp=%s\tcommit=%s\thost=%s\tcpus=%s\tload=%s\tduration=%s\tlat_duration=%s\tconns=%s\tquick=%s\tnginx=%s\topenssl=%s\twrk=%s\n' \
    "$1" "$(date -u +%Y%m%dT%H%M%SZ)" "$(git rev-parse --short HEAD)$(git diff --quiet || echo +)" "$(uname -nr)" "$(nproc)" \
    "$(cut -d' ' -f1-3 /proc/loadavg)" "$DURATION" "$LAT_DURATION" "${FIXED_CONNS:-$CONNS}" "${QUICK:-0}" \
    "$($NGINX -v 2>&1 | sed 's/.*: //')" "$(openssl version | cut -d' ' -f1-2)" "$(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2)" >>"$ROWS"
}
