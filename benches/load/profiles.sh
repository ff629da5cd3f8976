#!/usr/bin/env bash
# The profiles behind the missed targets of issue 19 (load/profile.sh for each), in one file:
# benches/results/profiles-STAMP.md, one "## GATEWAY REQUEST TRANSPORT" section each, which
# load/report.py appends to the method's table for every missed target.
#
#   benches/load/profiles.sh STAMP                   # the default list below
#   PROFILES="L1:get:http L6:json:http" benches/load/profiles.sh STAMP
#
# Instruction counts do not depend on the machine's load, so this can run while others
# build (not during a load run: the proxy under valgrind takes CPU 1).
set -euo pipefail
cd "$(dirname "$0")/../.."
stamp="${1:?usage: profiles.sh STAMP}"
PROFILES="${PROFILES:-L0:get:http L1:get:http L2:get:http L3:get:http L4:get:http L5:get:http L6:get:http L1:json:http L6:json:http L1:get:https c-protected:get:http c-queue:get:http c-challenge:get:http jx-web:form:http jx-all:form:http}"
out="benches/results/profiles-$stamp.md"
{
  echo "# Where the time goes, per missed target ($stamp)"
  echo
  echo "Instructions per request of the release-lto waf-proxy under callgrind, configured as in the load run"
  echo "(benches/load/lib.sh, proxy_host_lines), driven by wrk -t1 -c8; commit $(git rev-parse --short HEAD)."
  echo "L0 is the reference: what the proxy costs with nothing on."
} >"$out"
for p in $PROFILES; do
  IFS=: read -r gw req transport <<<"$p"
  echo "== $gw $req $transport ($(date -u +%H:%M:%S))" >&2
  {
    echo
    echo "## $gw $req $transport"
    echo
    echo "\`benches/load/profile.sh $gw $req $transport\`"
    echo
    benches/load/profile.sh "$gw" "$req" "$transport" 15 2>/dev/null | grep -v '^tls-handshakes\|^sending command'
  } >>"$out"
done
echo "profiles: wrote $out" >&2
