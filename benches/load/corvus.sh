#!/usr/bin/env bash
# Corvus's benchmark, reproduced: GET / answered with 3 bytes, wrk with 64 connections, each
# variant as a share of plain nginx. Variants (lib.sh, proxy_host_lines): the default host
# (L0: WAF off), "protected" (c-protected: 30 non-matching block rules on path, query,
# header, User-Agent, referer, method, host, scheme, IP and country, a 1,000-CIDR list,
# exploit blocking by the built-in default profile, security headers, a never-triggered
# 100,000 r/s rate limit; c-policy: the same without the exploit rules), HTTPS keep-alive,
# a full TLS handshake per request, a waiting room with a valid admission cookie (c-queue)
# and a cookie challenge with a valid pass cookie (c-challenge). nginx is measured over the
# same three transports, so each row also has a share of nginx over its own transport.
#
#   benches/load/corvus.sh                   # about 2 minutes
#   QUICK=1 benches/load/corvus.sh
source "$(dirname "$0")/lib.sh"
STAMP="${STAMP:-$(date -u +%Y%m%dT%H%M%SZ)}"
ROWS="${ROWS:-$RESULTS/corvus-$STAMP.tsv}"
export FIXED_CONNS="${FIXED_CONNS:-64}" NO_LATENCY=1
[ "${QUICK:-0}" = 1 ] || DURATION="${CORVUS_DURATION:-5s}"
lib_setup
run_header corvus
run_cells corvus <<CELLS
nginx|get|http|$BACKEND3_PORT
nginx|get|https|$BACKEND3_PORT
nginx|get|newconn|$BACKEND3_PORT
L0|get|http|$BACKEND3_PORT
c-protected|get|http|$BACKEND3_PORT
c-policy|get|http|$BACKEND3_PORT
L0|get|https|$BACKEND3_PORT
L0|get|newconn|$BACKEND3_PORT
c-queue|get|http|$BACKEND3_PORT
c-challenge|get|http|$BACKEND3_PORT
CELLS
[ "${NO_REPORT:-0}" = 1 ] || python3 "$ROOT/benches/load/report.py" "$ROWS"
