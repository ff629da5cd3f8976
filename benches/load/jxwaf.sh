#!/usr/bin/env bash
# JXWAF's performance report, reproduced: POST / with the form body `id=1`, wrk with 1,000
# connections (JXWAF ran -t4 -c1000; here wrk has one core, so one thread), over HTTP and
# HTTPS keep-alive. Variants (lib.sh, proxy_host_lines): plain forwarding (nginx, and our
# L0), the web engine (jx-web: the built-in default profile, blocking, + the ML detector)
# and everything on (jx-all: jx-web + rate limit, IP intelligence, 4xx scoring, access log,
# headers, body limit, forwarding headers, cookie hardening and rule, a cookie challenge).
#
#   benches/load/jxwaf.sh                    # about 2 minutes
#   QUICK=1 benches/load/jxwaf.sh
source "$(dirname "$0")/lib.sh"
STAMP="${STAMP:-$(date -u +%Y%m%dT%H%M%SZ)}"
ROWS="${ROWS:-$RESULTS/jxwaf-$STAMP.tsv}"
export FIXED_CONNS="${FIXED_CONNS:-1000}" NO_LATENCY=1
[ "${QUICK:-0}" = 1 ] || DURATION="${JXWAF_DURATION:-10s}"
lib_setup
run_header jxwaf
cells=$(for transport in http https; do
  for gw in nginx L0 jx-web jx-all; do
    echo "$gw|form|$transport|$BACKEND_PORT"
  done
done)
run_cells jxwaf <<<"$cells"
[ "${NO_REPORT:-0}" = 1 ] || python3 "$ROOT/benches/load/report.py" "$ROWS"
