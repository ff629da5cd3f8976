#!/usr/bin/env bash
# NullWard's sizing report, reproduced: a ladder of feature levels through waf-proxy, each
# adding to the one before, beside plain nginx, nginx + ModSecurity + CRS PL1 and nginx +
# our module (waf-ffi/nginx) + CRS PL1. What each level is: lib.sh (proxy_host_lines).
#
#   benches/load/nullward.sh                 # every gateway and scenario (about 17 minutes)
#   QUICK=1 benches/load/nullward.sh         # smoke test: 1 s points, two steps, one latency point
#   GATEWAYS="nginx L0 L1" SCENARIOS="get-http json-http" benches/load/nullward.sh
#
# Requests: GET / answered with a 180-byte page, and POST /api/users with the benign
# 10,287-byte JSON body (`waf-profile --print-body post_json_10k`); transports: plain HTTP
# keep-alive (http), HTTPS keep-alive (https: TLS 1.3, ECDSA P-256 certificate made at run
# time) and a new connection with a full TLS handshake per request (newconn, GET only).
# Per (gateway, scenario): a fresh gateway; closed-loop saturation with wrk at CONNS
# connections (16 32 64 128), stopping when a step gains under 3 % or its p99 passes 1 s;
# then open-loop latency (src/bin/openloop.rs) at 25, 50 and 75 % of the maximum, with the
# maximum's connections. A row with any non-2xx answer or socket error is marked invalid.
# Rows go to benches/results/nullward-STAMP.tsv; load/report.py writes the table (.md) and
# the chart (.png) beside it.
source "$(dirname "$0")/lib.sh"
STAMP="${STAMP:-$(date -u +%Y%m%dT%H%M%SZ)}"
ROWS="${ROWS:-$RESULTS/nullward-$STAMP.tsv}"
lib_setup
run_header nullward
cells=$(for scenario in get-http json-http get-https json-https get-newconn; do
  for gw in nginx modsec nginx-waf L0 L1 L2 L3 L4 L5 L6; do
    echo "$gw|${scenario%-*}|${scenario#*-}|$BACKEND_PORT"
  done
done)
run_cells nullward <<<"$cells"
[ "${NO_REPORT:-0}" = 1 ] || python3 "$ROOT/benches/load/report.py" "$ROWS"
