#!/usr/bin/env bash
# The native policy of the scenario Corvus calls "protected", as waf-proxy `[[host]]` lines:
# 30 rules that do not match the load benchmark's traffic, over path, query, header,
# User-Agent, referer, method, host, scheme, IP and country conditions; one IP list of 1,000
# CIDRs; a rate limit of 100,000 requests per second (key: client IP) that every request
# goes through and none triggers. The security headers of the scenario are the variant's own
# `headers = ...` line (run.sh, callgrind-proxy.sh).
#
#   benches/load/protected-policy.sh DIR   # writes DIR/country.mmdb, prints the TOML lines
#
# The rules and the list are those of the in-process bench (benches/benches/policy.rs), with
# three rules changed so that they do not match what wrk and curl send here (no User-Agent
# from wrk, curl's User-Agent from the probes, `Host: 127.0.0.1:PORT`):
#   http.user_agent == ""                          → == "-"
#   http.user_agent matches "...(python-requests|curl|go-http-client)/"  → libwww-perl for curl
#   http.host matches "^[0-9.]+$"                  → r"^10\.[0-9.]+$"
# The country database is written here with Debian's libmaxmind-db-writer-perl (nothing is
# downloaded); it gives 127.0.0.0/8 a country (FR), so the benchmark's client is found in
# it as the in-process bench's client is. The print-out is appended after the host's other
# keys: `[[host.rules]]` and `[[host.rate_limit]]` belong to the last `[[host]]`, `[[list]]`
# and `[geo]` are top-level tables.
set -euo pipefail
dir="${1:?usage: protected-policy.sh DIR}"
mkdir -p "$dir"
perl -MMaxMind::DB::Writer::Tree -e 1 2>/dev/null ||
  { echo "protected-policy: perl MaxMind::DB::Writer is missing (apt-get install -y libmaxmind-db-writer-perl)" >&2; exit 1; }
perl -e '
use strict; use MaxMind::DB::Writer::Tree;
my %types = (country => "map", iso_code => "utf8_string");
my $t = MaxMind::DB::Writer::Tree->new(ip_version => 6, record_size => 24, remove_reserved_networks => 0,
  database_type => "Bench-Country", languages => ["en"], description => { en => "bench" },
  map_key_type_callback => sub { $types{ $_[0] } });
my @cc = ("DE", "FR", "US", "GB", "NL", "XX");
for my $i (0 .. 255) { $t->insert_network("$i.0.0.0/8", { country => { iso_code => $cc[$i % 6] } }) unless $i == 0 || $i >= 224 || $i % 6 == 5; }
open my $fh, ">:raw", $ARGV[0] or die; $t->write_tree($fh); close $fh or die;
' "$dir/country.mmdb"

python3 - "$dir/country.mmdb" <<'PY'
import ipaddress, sys

# The in-process bench's list: n CIDRs, nine in ten IPv4 /28s, one in ten IPv6 /64s in
# 2001:db8::/32, from the same xorshift32.
def cidrs(n):
    x = 0x9E3779B9
    out = []
    for i in range(n):
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        if i % 10 == 9:
            out.append("2001:db8:%x:%x::/64" % (x >> 16, x & 0xFFFF))
        else:
            out.append("%s/28" % ipaddress.IPv4Address(x & ~0xF & 0xFFFFFFFF))
    return out

blocked = cidrs(1000)
client = ipaddress.ip_address("127.0.0.1")
assert not any(client in ipaddress.ip_network(c) for c in blocked), "client in the list"

rules = [
    r'http.request.uri.path starts_with "/wp-admin"',
    r'http.request.uri.path matches r"\.(bak|old|swp)$"',
    r'http.request.uri.path contains "/.git/"',
    r'http.request.uri.query contains "union select"',
    r'http.request.uri.args["debug"] == "1"',
    r'http.request.uri.query matches "(?i)<script"',
    r'http.request.headers["x-forwarded-host"] != "" and http.request.headers["x-forwarded-host"] != "shop.example"',
    r'http.request.headers["x-original-url"] != ""',
    r'http.request.headers["content-type"] contains "multipart/mixed"',
    r'http.user_agent in {"sqlmap" "nikto" "masscan"}',
    r'http.user_agent matches "(?i)(python-requests|libwww-perl|go-http-client)/"',
    r'http.user_agent == "-"',
    r'http.referer contains "casino"',
    r'http.referer wildcard "*.spam.example/*"',
    r'http.referer starts_with "http://localhost"',
    r'http.request.method in {"TRACE" "TRACK" "CONNECT"}',
    r'http.request.method == "DELETE" and http.request.uri.path starts_with "/api/admin"',
    r'http.request.method == "PUT" and not http.request.uri.path starts_with "/api/"',
    r'http.host == "internal.shop.example"',
    r'http.host ends_with ".onion"',
    r'http.host matches r"^10\.[0-9.]+$"',
    r'http.request.scheme == "https" and http.request.uri.path == "/http-only"',
    r'http.request.scheme == "http" and http.request.uri.path starts_with "/account"',
    r'http.request.scheme == "http" and http.request.uri.path == "/checkout"',
    r'ip.src in $blocked',
    r'ip.src in {198.18.0.0/15 100.64.0.0/10}',
    r'ip.src == 192.0.2.250',
    r'ip.src.country in {"KP" "XX"}',
    r'ip.src.country == "ZZ" and http.request.uri.path starts_with "/admin"',
    r'not ip.src.country in {"DE" "FR" "US" "GB" "NL"} and http.request.uri.path == "/internal"',
]
assert len(rules) == 30
for i, r in enumerate(rules):
    print("[[host.rules]]\nname = \"r%d\"\nexpression = '''%s'''\naction = \"block\"\n" % (i, r))
print('[[host.rate_limit]]\nname = "flood"\nrequests = 100000\nperiod_secs = 1\nburst = 100000\n')
print('[[list]]\nname = "blocked"\nkind = "ip"\nitems = [%s]\n' % ", ".join('"%s"' % c for c in blocked))
print('[geo]\ncountry_db = "%s"' % sys.argv[1])
PY
