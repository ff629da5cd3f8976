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
#   PROFILE_COOKIE="a=b" benches/load/profile.sh L1 get http   # with a Cookie header
#
# Prints the instructions per request and the TOP (default 25) functions by inclusive
# instructions, per request; the callgrind file stays in $CARGO_TARGET_DIR/callgrind-methods/
# for `callgrind_annotate --inclusive=yes --tree=caller`. Instruction counts do not depend on
# the machine's load; the proxy serves ~50 times fewer requests per second under valgrind.
# Ports of its own, so that it can run beside a load run.
export BACKEND_PORT="${BACKEND_PORT:-29291}" BACKEND3_PORT="${BACKEND3_PORT:-29292}" GATEWAY_PORT="${GATEWAY_PORT:-29280}" \
  GATEWAY_TLS_PORT="${GATEWAY_TLS_PORT:-29543}" ADMIN_PORT="${ADMIN_PORT:-29281}" SMTP_PORT="${SMTP_PORT:-29225}"
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
# PROFILE_COOKIE: a Cookie header of our own instead of the gate's (what CRS makes of it).
[ -n "${PROFILE_COOKIE:-}" ] && COOKIE=$PROFILE_COOKIE
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
# Self cost grouped by component, the top functions by self cost, and the top waf_* frames
# by inclusive cost, per request.
callgrind_annotate --auto=no --threshold=100 "$out" >"$WORK/self.txt" 2>/dev/null
callgrind_annotate --inclusive=yes --auto=no --threshold=100 "$out" >"$WORK/incl.txt" 2>/dev/null
python3 - "$WORK/self.txt" "$WORK/incl.txt" "$n" "$top" <<'PY'
import re, sys
self_path, incl_path, n, top = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
LINE = re.compile(r"^\s*([0-9,]+) (?:\(\s*[0-9.]+%\))?\s+(.*)$")
def read(path):
    out, total = [], None
    for line in open(path):
        m = LINE.match(line)
        if not m:
            continue
        ir = int(m.group(1).replace(",", ""))
        rest = m.group(2)
        if rest.startswith("PROGRAM TOTALS"):
            total = ir
            continue
        obj = re.search(r" \[([^\]]*)\]$", rest)
        rest = re.sub(r" \[[^\]]*\]$", "", rest)
        file, _, func = rest.partition(":") if ":" in rest and not rest.startswith("<") else ("", "", rest)
        out.append((ir, file, func, obj.group(1) if obj else ""))
    return total, out
def component(file, func, obj):
    if "libc.so" in obj or file.startswith("./"):
        if "malloc" in file or func in ("malloc", "free", "realloc", "calloc") or func.startswith("_int_"):
            return "libc malloc/free"
        if "mem" in func or "str" in func:
            return "libc memcpy/memset/str*"
        return "libc other"
    if "ld-linux" in obj or "vdso" in obj:
        return "loader/vdso"
    name = func.lstrip("<&*")
    for pre, comp in (("waf_core::policy::gate", "waf-core gates"), ("waf_core::policy", "waf-core policy (rules, lists, limits, geo)"),
                      ("waf_core::ml", "waf-core ML"), ("waf_core::eval", "waf-core rule evaluation"),
                      ("waf_core::operators", "waf-core operators"), ("waf_core::transformations", "waf-core transformations"),
                      ("waf_core::variables", "waf-core variables"), ("waf_core::body", "waf-core body parsers"),
                      ("waf_core::host", "waf-core host glue (headers, pages)"), ("waf_core", "waf-core other"),
                      ("waf_injection", "libinjection (waf-injection)"), ("waf_proxy", "waf-proxy"),
                      ("regex_automata", "regex"), ("regex", "regex"), ("aho_corasick", "aho-corasick"),
                      ("tract", "tract (ML inference)"), ("hyper_util", "hyper"), ("hyper", "hyper"), ("httparse", "hyper"),
                      ("http::", "http (HeaderMap)"), ("tokio_rustls", "rustls"), ("rustls", "rustls"), ("ring", "ring (crypto)"),
                      ("tokio", "tokio"), ("mio", "tokio"), ("core::hash::sip", "SipHash (std HashMap)"),
                      ("hashbrown", "hashbrown"), ("serde_json", "serde_json (logs)"), ("alloc::", "std alloc/fmt"),
                      ("core::fmt", "std alloc/fmt"), ("core::", "std core"), ("std::", "std")):
        if name.startswith(pre):
            return comp
    if re.search(r"ring_core|aes_hw|gcm_|chacha|sha256|ecp_nistz256|p256|x25519|bn_", func):
        return "ring (crypto)"
    return "other"
total, selfs = read(self_path)
_, incl = read(incl_path)
print("By component (self cost):\n")
print("| component | Ir/request | share |\n|---|---:|---:|")
comps = {}
for ir, f, fn, obj in selfs:
    c = component(f, fn, obj)
    comps[c] = comps.get(c, 0) + ir
for c, ir in sorted(comps.items(), key=lambda x: -x[1]):
    if ir / total >= 0.005:
        print(f"| {c} | {ir / n:,.0f} | {100 * ir / total:.1f} % |")
print("\nTop functions by self cost (copies of one name added up):\n")
print("| Ir/request | share | function |\n|---:|---:|---|")
# One line per name: monomorphised copies and inlined instances of one function added up.
by_name = {}
for ir, f, fn, obj in selfs:
    by_name[fn] = by_name.get(fn, 0) + ir
for fn, ir in sorted(by_name.items(), key=lambda x: -x[1])[:top]:
    fn = fn if len(fn) <= 110 else fn[:107] + "..."
    print(f"| {ir / n:,.0f} | {100 * ir / total:.1f} % | `{fn.replace('|', '/')}` |")
print("\nTop waf-core / waf-proxy frames by inclusive cost:\n")
print("| Ir/request | share | function |\n|---:|---:|---|")
seen, shown = set(), 0
for ir, f, fn, obj in sorted(incl, key=lambda x: -x[0]):
    if not re.match(r"<?waf_(core|proxy|injection)", fn) or "{{closure}}" in fn and "request" not in fn and "handle" not in fn:
        continue
    if fn in seen:
        continue
    seen.add(fn)
    fn2 = fn if len(fn) <= 110 else fn[:107] + "..."
    print(f"| {ir / n:,.0f} | {100 * ir / total:.1f} % | `{fn2.replace('|', '/')}` |")
    shown += 1
    if shown >= top:
        break
PY
