#!/usr/bin/env bash
# The cost of fleet state (issue 15): the "protected" scenario of run.sh (30 policy rules, a
# 1,000-CIDR list, a rate limit every request goes through, security headers) with its
# state local (proxy-protected) against the same with `[state]` on a real redis-server
# (proxy-protected-fleet: the rate-limit bucket and the ban list reconciled every
# interval_ms), interleaved on one machine, plus the Redis commands per second the node
# sends at that load.
#
#   benches/load/fleet.sh                     # GET, 10 s per measurement, twice each
#   DURATION=5s ROUNDS=3 INTERVAL_MS=50 benches/load/fleet.sh
#   CALLGRIND=1 benches/load/fleet.sh         # instead: instructions per request of both
#                                             # variants (load/callgrind-proxy.sh, GET)
#
# Target (issue 15): the fleet variant at most 5 % fewer req/s than local-only, p99 within
# 10 %. The commands: a sampler reads redis `INFO commandstats` every second during the
# whole run; the figure is the median of the per-second rates while a fleet variant is
# under load (the local-only variant sends none). With one client (wrk, one IP) one bucket
# is active, so a round is `GET` of the ban-list version plus one `EVAL` of the bucket:
# commands/s per node = (1 + active buckets per interval) / interval, whatever the req/s.
#
# Everything else (CPU pinning, wrk, columns, where the table is written) is run.sh's;
# redis-server runs on BACKEND_CPUS beside the backend and wrk. Needs what run.sh needs,
# plus redis-server and redis-cli (apt-get install -y redis-server redis-tools).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

ROUNDS="${ROUNDS:-2}"
INTERVAL_MS="${INTERVAL_MS:-100}"
REDIS_PORT="${REDIS_PORT:-18379}"
BACKEND_CPUS="${BACKEND_CPUS:-0}"
command -v redis-server >/dev/null || { echo "fleet: redis-server is missing (apt-get install -y redis-server)" >&2; exit 1; }
command -v redis-cli >/dev/null || { echo "fleet: redis-cli is missing (apt-get install -y redis-tools)" >&2; exit 1; }

WORK="$(mktemp -d /tmp/waf-fleet.XXXXXX)"
REDIS_PID=""
SAMPLER_PID=""
cleanup() {
  [ -n "$SAMPLER_PID" ] && kill "$SAMPLER_PID" 2>/dev/null || true
  [ -n "$REDIS_PID" ] && kill "$REDIS_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

taskset -c "$BACKEND_CPUS" redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' \
  --appendonly no --dir "$WORK" >"$WORK/redis.log" 2>&1 &
REDIS_PID=$!
for _ in $(seq 1 100); do
  [ "$(redis-cli -p "$REDIS_PORT" PING 2>/dev/null)" = PONG ] && break
  sleep 0.1
done
[ "$(redis-cli -p "$REDIS_PORT" PING 2>/dev/null)" = PONG ] || { echo "fleet: redis-server did not start" >&2; cat "$WORK/redis.log" >&2; exit 1; }

# Total calls of every command but the sampler's own INFO, once a second: "unix_time calls".
(
  while true; do
    calls=$(redis-cli -p "$REDIS_PORT" INFO commandstats 2>/dev/null |
      awk -F'[:,=]' '/^cmdstat_/ && $1 != "cmdstat_info" { s += $3 } END { print s + 0 }')
    echo "$(date +%s) $calls"
    sleep 1
  done
) >"$WORK/samples" &
SAMPLER_PID=$!

if [ -n "${CALLGRIND:-}" ]; then
  # Instructions per request (all threads, the reconciliation thread included: under
  # valgrind the proxy serves ~50 times fewer requests per second while the thread still
  # runs every interval, so its share per request is an upper bound).
  for extra in "" "[state]
redis = \"redis://127.0.0.1:$REDIS_PORT\"
interval_ms = $INTERVAL_MS"; do
    if [ -n "$extra" ]; then echo "== fleet: with [state]"; else echo "== fleet: local only"; fi
    EXTRA_TOML="$extra" MODE=protected SCENARIOS=get OUT_DIR="$WORK/cg${extra:+-fleet}" \
      "$ROOT/benches/load/callgrind-proxy.sh"
  done
  echo "redis calls: $(redis-cli -p "$REDIS_PORT" INFO commandstats | grep -E '^cmdstat_(eval|get):' | tr '\n' ' ')"
  exit 0
fi

# The two variants: run.sh's proxy-protected, and the same with [state] after the policy's
# top-level tables ([[list]], [geo]).
STATE="[state]
redis = \"redis://127.0.0.1:$REDIS_PORT\"
interval_ms = $INTERVAL_MS"
export WAF_PROXY_VARIANTS="proxy-protected|waf = { mode = \"off\" }
headers = { hsts = \"max-age=31536000\", content_type_options = true, frame_options = \"DENY\", referrer_policy = \"no-referrer\", csp = \"default-src 'self'\" }
{protected}
proxy-protected-fleet|waf = { mode = \"off\" }
headers = { hsts = \"max-age=31536000\", content_type_options = true, frame_options = \"DENY\", referrer_policy = \"no-referrer\", csp = \"default-src 'self'\" }
{protected}
$STATE"
gateways=""
for _ in $(seq 1 "$ROUNDS"); do gateways="$gateways proxy-protected proxy-protected-fleet"; done
export GATEWAYS="${gateways# }"
export SCENARIOS="${SCENARIOS:-get}"
"$ROOT/benches/load/run.sh" | tee "$WORK/table.md"

kill "$SAMPLER_PID" 2>/dev/null || true
wait "$SAMPLER_PID" 2>/dev/null || true
SAMPLER_PID=""
# Per-second rates; the busy seconds are those of a fleet variant under load (the local
# variant and the idle waits send at most the idle rounds, which are not 0 either: a round
# reads the ban-list version even when nothing happens).
rates=$(awk 'NR > 1 && $1 > t { r = ($2 - c) / ($1 - t); if (r > 0) print r } { t = $1; c = $2 }' "$WORK/samples" | sort -n)
n=$(printf '%s\n' "$rates" | grep -c . || true)
if [ "$n" -gt 0 ]; then
  median=$(printf '%s\n' "$rates" | awk -v n="$n" 'NR == int((n + 1) / 2) { print; exit }')
  max=$(printf '%s\n' "$rates" | tail -1)
else
  median=0 max=0
fi
summary=$(
  echo "Redis (one redis-server on CPU $BACKEND_CPUS, interval_ms = $INTERVAL_MS, one node): commands/s while a fleet variant ran: median $median, max $max (over $n one-second samples)"
  redis-cli -p "$REDIS_PORT" INFO commandstats | grep -E '^cmdstat_(eval|get|hset|hdel|incr|hgetall):' || true
  echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
)
printf '\n%s\n' "$summary"
# Beside run.sh's table in benches/results.
latest=$(ls -t "$ROOT"/benches/results/load-*.md 2>/dev/null | head -1 || true)
[ -n "$latest" ] && printf '\n%s\n' "$summary" >>"$latest"
exit 0
