#!/usr/bin/env bash
# The gate variants of the load benchmark (load/run.sh): a visitor that already passed a
# gate, so every request carries a valid signed cookie that the proxy checks.
#
#   benches/load/gates.sh config NAME DIR        # prints the variant's [[host]] lines
#   benches/load/gates.sh cookie NAME URL DIR    # prints the Cookie header wrk sends
#
#   challenge-pass  a `challenge` rule on every path (cookie challenge); the pass cookie
#   queue           a waiting room on every path (capacity 1000); the admission cookie
#   sign-in         email-code sign-in on every path; the session cookie, from a real
#                   sign-in: an aiosmtpd server started in DIR receives the code (pip install
#                   aiosmtpd), the flow is run with Python's http.client
#
# Cookies are bound to the client's IP prefix and User-Agent, so they are minted from
# 127.0.0.1 with no User-Agent header, as wrk sends its requests.
set -euo pipefail
cmd="${1:?usage: gates.sh config|cookie NAME ...}"
name="${2:?variant name}"
KEYS='keys = ["load benchmark key, thirty-two bytes or more"]'
SMTP_PORT="${SMTP_PORT:-18025}"

case "$cmd" in
config)
  echo "[host.gates]"
  echo "$KEYS"
  case "$name" in
    challenge-pass)
      printf '%s\n' '[[host.rules]]' 'name = "everyone"' "expression = 'http.request.uri.path starts_with \"/\"'" \
        'action = "challenge"' 'challenge = "cookie"' ;;
    queue)
      printf '%s\n' '[[host.gates.waiting_room]]' 'name = "all"' 'capacity = 1000' 'idle_secs = 600' \
        'admission_ttl_secs = 3600' ;;
    sign-in)
      printf '%s\n' '[host.gates.sign_in]' 'allowed = ["@example.com"]' '[smtp]' 'server = "127.0.0.1"' \
        "port = $SMTP_PORT" 'security = "plain"' 'from = "bench@example.com"' ;;
    *) echo "gates.sh: unknown variant $name" >&2; exit 1 ;;
  esac
  ;;
cookie)
  url="${3:?URL}"
  dir="${4:?DIR}"
  case "$name" in
    challenge-pass | queue)
      # The first answer sets the cookie (the cookie challenge's redirect; admission into
      # the empty room).
      curl -s -o /dev/null -D - -H 'User-Agent:' "$url/index.html" |
        tr -d '\r' | awk -F'[ ;]' 'tolower($1) == "set-cookie:" && $2 ~ /^__waf_(pass|admit)=/ { print $2; exit }'
      ;;
    sign-in)
      python3 -c 'import aiosmtpd' 2>/dev/null || { echo "gates.sh: pip install aiosmtpd" >&2; exit 1; }
      mkdir -p "$dir"
      python3 -m aiosmtpd -n -l "127.0.0.1:$SMTP_PORT" -c aiosmtpd.handlers.Mailbox "$dir/mail" &
      smtp=$!
      trap 'kill $smtp 2>/dev/null || true' EXIT
      python3 - "$url" "$dir/mail" <<'PY'
import glob, http.client, os, re, sys, time, urllib.parse
url, maildir = sys.argv[1], sys.argv[2]
u = urllib.parse.urlsplit(url)
for _ in range(100):
    try:
        import socket; socket.create_connection(("127.0.0.1", int(os.environ.get("SMTP_PORT", "18025"))), 1).close(); break
    except OSError:
        time.sleep(0.1)
jar = {}
def req(method, path, body=None):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=20)
    h = {}
    if jar:
        h["Cookie"] = "; ".join(f"{k}={v}" for k, v in jar.items())
    if body is not None:
        body = urllib.parse.urlencode(body)
        h["Content-Type"] = "application/x-www-form-urlencoded"
    h["Accept"] = "text/html"
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    for k, v in r.getheaders():
        if k.lower() == "set-cookie":
            n, _, rest = v.partition("=")
            jar[n] = rest.split(";")[0]
    return r.status, r.read().decode()
def field(page, name):
    return re.search(r'name="%s" value="([^"]*)"' % name, page).group(1)
_, page = req("GET", "/.waf/sign-in?return_to=/")
_, page = req("POST", "/.waf/sign-in", {"email": "bench@example.com", "return_to": "/", "form_token": field(page, "form_token")})
deadline = time.time() + 20
while not glob.glob(maildir + "/new/*"):
    assert time.time() < deadline, "no mail"
    time.sleep(0.1)
mail = open(glob.glob(maildir + "/new/*")[0]).read()
code = re.search(r"code is (\d{6})", mail).group(1)
status, _ = req("POST", "/.waf/sign-in/code", {"code": code, "return_to": "/", "pending": field(page, "pending"), "form_token": field(page, "form_token")})
assert status == 303, status
print("__waf_session=" + jar["__waf_session"])
PY
      ;;
    *) echo "gates.sh: unknown variant $name" >&2; exit 1 ;;
  esac
  ;;
*) echo "usage: gates.sh config|cookie NAME ..." >&2; exit 1 ;;
esac
