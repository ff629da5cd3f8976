#!/usr/bin/env python3
"""Builds the seed corpora for the fuzz targets from a CRS checkout, at run time.

    fuzz/build_corpus.py [CRS_DIR] [OUT_DIR]

CRS_DIR defaults to ../../shared/crs beside the workspace, OUT_DIR to fuzz/corpus (ignored
by git: nothing from CRS is committed). Sources:
- seclang: crs-setup.conf.example and every rules/*.conf, split into blocks of directives;
- body_*: request bodies of the CRS regression tests (tests/regression/tests/**/*.yaml),
  sorted by Content-Type; query strings also go to body_urlencoded, Cookie headers to
  body_cookie; multipart seeds are `Content-Type value \\n body`;
- injection: decoded argument values (the inputs @detectSQLi/@detectXSS see)
- transformations: argument values from test URIs and bodies, each behind a chain prefix
  (length byte + transformation picks) cycling through every transformation;
- transaction: raw test requests (request line, headers, body). The target decodes its
  input with `Arbitrary`, so these only seed it with CRS-shaped bytes (first 300).
"""
import hashlib
import os
import sys
import urllib.parse

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
CRS = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "shared", "crs")
OUT = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "corpus")
MAX_SEED = 64 * 1024
# Every seed runs once before fuzzing starts; a CRS transaction under ASan takes
# milliseconds, so the transaction target gets a sample that fits a short CI run.
MAX_SEEDS = {"transaction": 300}
TRANSFORMATIONS = 35  # waf_core::internal::TRANSFORMATION_COUNT

counts = {}


def put(target, data):
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    if not data or len(data) > MAX_SEED:
        return
    if counts.get(target, 0) >= MAX_SEEDS.get(target, 1 << 30):
        return
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()
    path = os.path.join(d, name)
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(data)
        counts[target] = counts.get(target, 0) + 1


def seclang_seeds():
    files = [os.path.join(CRS, "crs-setup.conf.example")]
    rules = os.path.join(CRS, "rules")
    files += [os.path.join(rules, f) for f in sorted(os.listdir(rules)) if f.endswith(".conf")]
    for path in files:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            text = f.read()
        block = []
        for line in text.splitlines(keepends=True):
            block.append(line)
            if not line.strip() and any(l.strip() and not l.lstrip().startswith("#") for l in block):
                put("seclang", "".join(block))
                block = []
        put("seclang", "".join(block))


def headers_of(inp):
    h = inp.get("headers") or {}
    if isinstance(h, list):
        return [(str(x.get("name")), str(x.get("value"))) for x in h if isinstance(x, dict)]
    return [(str(k), str(v)) for k, v in h.items()]


def data_of(inp):
    d = inp.get("data")
    if d is None:
        return b""
    if isinstance(d, list):
        d = "\r\n".join(str(x) for x in d)
    return str(d).encode("utf-8", "surrogateescape")


def request_seeds():
    pick = 0
    tests = os.path.join(CRS, "tests", "regression", "tests")
    for root, _dirs, files in os.walk(tests):
        for fname in sorted(files):
            if not fname.endswith(".yaml"):
                continue
            try:
                with open(os.path.join(root, fname), encoding="utf-8", errors="surrogateescape") as f:
                    doc = yaml.safe_load(f)
            except Exception:
                continue
            for test in (doc or {}).get("tests", []) or []:
                for stage in test.get("stages", []) or []:
                    inp = (stage.get("input") or stage.get("stage", {}).get("input")) or {}
                    if not isinstance(inp, dict):
                        continue
                    method = str(inp.get("method", "GET"))
                    uri = str(inp.get("uri", "/"))
                    hdrs = headers_of(inp)
                    body = data_of(inp)
                    ctype = next((v for k, v in hdrs if k.lower() == "content-type"), "")
                    for k, v in hdrs:
                        if k.lower() == "cookie":
                            put("body_cookie", v)
                    query = uri.split("?", 1)[1] if "?" in uri else ""
                    if query:
                        put("body_urlencoded", query)
                    low = ctype.lower()
                    if body:
                        if "json" in low:
                            put("body_json", body)
                        elif "xml" in low:
                            put("body_xml", body)
                        elif "multipart" in low:
                            put("body_multipart", ctype.encode("utf-8", "surrogateescape") + b"\n" + body)
                        else:
                            put("body_urlencoded", body)
                    values = []
                    for part in (query + "&" + body.decode("latin-1")).split("&"):
                        if "=" in part:
                            values.append(part.split("=", 1)[1])
                    for v in values:
                        if not v:
                            continue
                        n = 1 + pick % 3
                        chain = bytes((pick + 7 * i) % TRANSFORMATIONS for i in range(n))
                        pick += 1
                        put("transformations", bytes([n]) + chain + urllib.parse.unquote_to_bytes(v))
                        put("injection", urllib.parse.unquote_to_bytes(v))
                    raw = f"{method} {uri} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs) + "\r\n"
                    put("transaction", raw.encode("utf-8", "surrogateescape") + body)


def main():
    if not os.path.isdir(os.path.join(CRS, "rules")):
        sys.exit(f"build_corpus: no CRS at {CRS}")
    seclang_seeds()
    request_seeds()
    for target, n in sorted(counts.items()):
        print(f"build_corpus: {target}: {n} seeds")


main()
