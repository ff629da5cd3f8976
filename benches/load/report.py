#!/usr/bin/env python3
"""Tables and charts of the published-benchmark methods (load/nullward.sh, corvus.sh, jxwaf.sh).

    python3 benches/load/report.py benches/results/nullward-STAMP.tsv [more .tsv ...]

For each row file (one method, one run; written by load/lib.sh) writes beside it:
  METHOD-STAMP.md   the run's conditions, one table (req/s, p50, p99, gateway CPU per
                    request, peak RSS, errors, share of plain nginx and of our L0; NullWard
                    also the open-loop latency at 25/50/75 % of the maximum), the published
                    figures beside ours, and the issue's targets, met or missed;
  METHOD-STAMP.png  the chart: share of plain nginx per level, our bars beside the
                    published figures (matplotlib: `pip install matplotlib`).

Shares: "vs nginx" is req/s over plain nginx's in the same request and transport of the
same run; "vs L0" over our own L0's (waf-proxy, WAF off); "by CPU/req" is plain nginx's
gateway CPU per request over ours (what the req/s share would be with both gateways held to
their core: where plain nginx is limited by the load generator, the req/s share flatters us). The published figures are shares
of each product's own baseline (NullWard: their L0; Corvus: plain nginx; JXWAF: their plain
forwarding), so the chart shows ours both ways.
"""

import os
import sys

# Published figures (issue 19), in %: {(gateway, request, transport): share}.
PUBLISHED = {
    "nullward": {  # share of NullWard's own L0, 1 vCPU
        ("L1", "get", "https"): 37.6,
        ("L1", "get", "http"): 28.1,
        ("L6", "get", "https"): 12.8,
        ("L6", "get", "http"): 10.7,
        ("L1", "json", "http"): 0.19,
        ("L1", "json", "https"): 0.19,
        ("L6", "json", "http"): 0.19,
        ("L6", "json", "https"): 0.19,
        ("L6", "get", "newconn"): 21.0,
    },
    "corvus": {  # share of plain nginx
        ("L0", "get", "http"): 78.0,
        ("c-protected", "get", "http"): 56.0,
        ("L0", "get", "https"): 61.0,
        ("L0", "get", "newconn"): 4.0,
        ("c-queue", "get", "http"): 60.0,
        ("c-challenge", "get", "http"): 65.0,
    },
    "jxwaf": {  # share of JXWAF's plain forwarding
        ("L0", "form", "http"): 100.0,
        ("L0", "form", "https"): 100.0,
        ("jx-web", "form", "http"): 54.0,
        ("jx-web", "form", "https"): 56.0,
        ("jx-all", "form", "http"): 16.0,
        ("jx-all", "form", "https"): 14.0,
    },
}
PUBLISHED_BASE = {"nullward": "their L0", "corvus": "plain nginx", "jxwaf": "their plain forwarding"}

# Targets (issue 19 item 3): shares of plain nginx in the same run.
# (method, gateway, request, transports, minimum %, label)
TARGETS = [
    ("nullward", "L1", "get", ("http", "https"), 45.0, "L1 ≥ 45 % (GET)"),
    ("nullward", "L6", "get", ("http", "https"), 35.0, "L6 ≥ 35 % (GET)"),
    ("nullward", "L6", "json", ("http", "https"), 3.0, "10 KB JSON at L6 ≥ 3 %"),
    ("corvus", "c-protected", "get", ("http",), 80.0, "Corvus-protected ≥ 80 %"),
    ("corvus", "c-queue", "get", ("http",), 75.0, "queue ≥ 75 %"),
    ("corvus", "c-challenge", "get", ("http",), 75.0, "challenge-pass ≥ 75 %"),
    ("jxwaf", "jx-web", "form", ("http", "https"), 70.0, "JXWAF web engine ≥ 70 %"),
    ("jxwaf", "jx-all", "form", ("http", "https"), 40.0, "JXWAF everything on ≥ 40 %"),
]

GATEWAY_NAMES = {
    "nginx": "nginx",
    "modsec": "nginx + ModSecurity + CRS PL1",
    "nginx-waf": "nginx + our module + CRS PL1",
    "L0": "L0 proxy",
    "L1": "L1 + CRS PL1",
    "L2": "L2 + ML",
    "L3": "L3 + sign-in",
    "L4": "L4 + rate/IP/4xx",
    "L5": "L5 + access log",
    "L6": "L6 + headers/limits",
    "c-protected": "protected",
    "c-policy": "protected, no exploit rules",
    "c-queue": "queue (admission cookie)",
    "c-challenge": "challenge (pass cookie)",
    "jx-web": "web engine (default profile + ML)",
    "jx-all": "everything on",
}


def read_rows(path):
    header, rows = {}, []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            if line.startswith("# "):
                header = dict(kv.split("=", 1) for kv in line[2:].split("\t"))
                continue
            rows.append(dict(kv.split("=", 1) for kv in line.split("\t")))
    return header, rows


def num(v, default=0.0):
    try:
        return float(v)
    except (TypeError, ValueError):
        return default


def fmt_rps(v):
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def fmt_ms(v):
    if v >= 1000:
        return f"{v / 1000:.2f} s"
    if v >= 10:
        return f"{v:.1f} ms"
    return f"{v:.2f} ms"


def fmt_us(v):
    return f"{v / 1000:.1f} ms" if v >= 1000 else f"{v:.0f} µs"


def fmt_share(v):
    if v is None:
        return ""
    if v >= 10:
        return f"{v:.0f} %"
    if v >= 1:
        return f"{v:.1f} %"
    return f"{v:.2g} %"


def shares(rows):
    """Adds share_nginx, share_l0 (same request and transport) and share_nginx_http."""
    base, cpu = {}, {}
    for r in rows:
        if "skipped" in r:
            continue
        base[(r["gateway"], r["request"], r["transport"])] = num(r["rps"])
        cpu[(r["gateway"], r["request"], r["transport"])] = num(r["cpu_us"])
    for r in rows:
        if "skipped" in r:
            continue
        key = (r["request"], r["transport"])
        rps = num(r["rps"])
        n = base.get(("nginx",) + key)
        l0 = base.get(("L0",) + key)
        nh = base.get(("nginx", r["request"], "http"))
        r["share_nginx"] = 100 * rps / n if n else None
        r["share_l0"] = 100 * rps / l0 if l0 else None
        r["share_nginx_http"] = 100 * rps / nh if nh else None
        # By CPU per request: what the share would be if both were held to their core (where
        # plain nginx is limited by the load generator, its req/s share flatters us).
        cn = cpu.get(("nginx",) + key)
        mine = num(r["cpu_us"])
        r["share_cpu"] = 100 * cn / mine if cn and mine else None


def latency_cells(r):
    """'25:rate:achieved:p50_us:p99_us:sent,...' → {share: 'p50 / p99 (achieved)'}."""
    out = {}
    for item in filter(None, r.get("latency", "").split(",")):
        share, rate, achieved, p50, p99, sent = item.split(":")
        note = ""
        if num(rate) > 0 and num(achieved) < 0.95 * num(rate):
            note = f" (sent {fmt_rps(num(achieved))}/s of {fmt_rps(num(rate))})"
        out[share] = f"{fmt_us(num(p50))} / {fmt_us(num(p99))}{note}"
    return out


def table(method, rows):
    lat = method == "nullward"
    head = ["scenario", "gateway", "req/s (max)", "conns", "p50", "p99", "gateway CPU", "CPU/req",
            "peak RSS", "errors", "vs plain nginx", "vs our L0", "vs nginx by CPU/req"]
    if method == "corvus":
        head[10] = "vs nginx, same transport"
        head.insert(11, "vs nginx HTTP")
    if lat:
        head += ["open loop 25 %: p50 / p99", "50 %", "75 %"]
    head += ["benign → / SQLi →"]
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" if i < 2 else "---:" for i in range(len(head))) + "|"]
    for r in rows:
        scen = f"{r['request']} {r['transport']}"
        name = GATEWAY_NAMES.get(r["gateway"], r["gateway"])
        if "skipped" in r:
            out.append(f"| {scen} | {name} | skipped: {r['skipped']} |" + " |" * (len(head) - 3))
            continue
        cells = [scen, name, fmt_rps(num(r["rps"])), r["conns"], fmt_ms(num(r["p50_ms"])), fmt_ms(num(r["p99_ms"])),
                 f"{r['cpu_pct']} %", fmt_us(num(r["cpu_us"])), f"{r['rss_mib']} MiB",
                 r["errors"] + ("" if r["valid"] == "yes" else " **invalid**"),
                 fmt_share(r["share_nginx"]), fmt_share(r["share_l0"]), fmt_share(r["share_cpu"])]
        if method == "corvus":
            cells.insert(11, fmt_share(r["share_nginx_http"]))
        if lat:
            lc = latency_cells(r)
            cells += [lc.get("25", ""), lc.get("50", ""), lc.get("75", "")]
        cells.append(f"{r['benign']} / {r['sqli']}")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def published_table(method, rows):
    pub = PUBLISHED[method]
    out = [f"| level | scenario | published (share of {PUBLISHED_BASE[method]}) | ours, share of plain nginx | ours, share of our L0 |",
           "|---|---|---:|---:|---:|"]
    by = {(r["gateway"], r["request"], r["transport"]): r for r in rows if "skipped" not in r}
    for (gw, req, tr), share in pub.items():
        r = by.get((gw, req, tr))
        ours_n = ours_l = "not run"
        if r:
            ours_n = fmt_share(r["share_nginx_http"] if method == "corvus" else r["share_nginx"])
            ours_l = fmt_share(r["share_l0"])
        out.append(f"| {GATEWAY_NAMES.get(gw, gw)} | {req} {tr} | {fmt_share(share)} | {ours_n} | {ours_l} |")
    return "\n".join(out)


def targets(method, rows):
    by = {(r["gateway"], r["request"], r["transport"]): r for r in rows if "skipped" not in r}
    out = []
    for m, gw, req, trs, minimum, label in TARGETS:
        if m != method:
            continue
        for tr in trs:
            r = by.get((gw, req, tr))
            if not r or r.get("share_nginx") is None:
                out.append(f"| {label} | {req} {tr} | not run | |")
                continue
            s = r["share_nginx"]
            status = "met" if s >= minimum else "**missed**"
            out.append(f"| {label} | {req} {tr} | {fmt_share(s)} | {status} | {fmt_share(r['share_cpu'])} |")
    if not out:
        return ""
    return ("| target (share of plain nginx) | scenario | ours (req/s) | | ours by CPU/req |\n|---|---|---:|---|---:|\n"
            + "\n".join(out))


def profiles(method, header, rows, folder):
    """The sections of a profiles-STAMP.md (load/profiles.sh) for this method's missed targets."""
    # PROFILES_FILE, else the newest profiles-*.md beside the rows.
    path = os.environ.get("PROFILES_FILE")
    if not path:
        found = sorted(f for f in os.listdir(folder or ".") if f.startswith("profiles-") and f.endswith(".md"))
        if not found:
            return []
        path = os.path.join(folder, found[-1])
    sections, name = {}, None
    for line in open(path):
        if line.startswith("## "):
            name = line[3:].strip()
            sections[name] = []
        elif name:
            sections[name].append(line.rstrip("\n"))
    by = {(r["gateway"], r["request"], r["transport"]): r for r in rows if "skipped" not in r}
    out = []
    for m, gw, req, trs, minimum, label in TARGETS:
        if m != method:
            continue
        missed = [tr for tr in trs if by.get((gw, req, tr)) and (by[(gw, req, tr)]["share_nginx"] or 0) < minimum]
        if not missed:
            continue
        for tr in dict.fromkeys(missed + ["http"]):
            key = f"{gw} {req} {tr}"
            if key in sections:
                out += ["", f"### Where the time goes: {label}, {key} (missed)", ""] + sections[key]
                break
    # Instructions per request of every profiled gateway of this method: the ladder's costs.
    mine = {"nullward": ("L",), "corvus": ("L0", "c-"), "jxwaf": ("L0", "jx-")}[method]
    totals = []
    for key, body in sections.items():
        if not key.startswith(mine):
            continue
        for line in body:
            if line.startswith("total: "):
                totals.append((key, int(float(line.split()[1]))))
    if totals:
        base = dict(totals).get("L0 get http")
        out = ["", f"Instructions per request (callgrind, `{os.path.basename(path)}`):", "",
               "| gateway, request, transport | Ir/request | × L0 GET |", "|---|---:|---:|"] + [
            f"| {k} | {v:,} | {v / base:.1f} |" if base else f"| {k} | {v:,} | |" for k, v in totals] + out
    if out:
        out = ["", f"Profiles of the missed targets (from `{os.path.basename(path)}`; L0's, the reference, is there too):"] + out
    return out


def chart(method, header, rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("report: matplotlib is missing (pip install matplotlib): no chart", file=sys.stderr)
        return False
    pub = PUBLISHED[method]
    good = [r for r in rows if "skipped" not in r and r["gateway"] != "nginx"]
    if method == "nullward":
        groups = []
        for r in good:
            k = (r["request"], r["transport"])
            if k not in groups:
                groups.append(k)
    else:
        groups = [None]
    fig, axes = plt.subplots(len(groups), 1, figsize=(11, 3.6 * len(groups)), squeeze=False)
    for ax, g in zip(axes[:, 0], groups):
        sel = [r for r in good if g is None or (r["request"], r["transport"]) == g]
        labels = [GATEWAY_NAMES.get(r["gateway"], r["gateway"]) + ("" if g else f"\n{r['transport']}") for r in sel]
        if method == "corvus":
            ours = [r["share_nginx_http"] or 0 for r in sel]
        else:
            ours = [r["share_nginx"] or 0 for r in sel]
        l0 = [r["share_l0"] or 0 for r in sel]
        pb = [pub.get((r["gateway"], r["request"], r["transport"])) for r in sel]
        x = range(len(sel))
        w = 0.27
        b1 = ax.bar([i - w for i in x], ours, w, label="ours, share of plain nginx" + (" (HTTP)" if method == "corvus" else ""), color="#1f77b4")
        b2 = ax.bar(list(x), l0, w, label="ours, share of our L0", color="#9ecae1")
        b3 = ax.bar([i + w for i in x], [p or 0 for p in pb], w, label=f"published, share of {PUBLISHED_BASE[method]}", color="#ff7f0e")
        for bars, vals in ((b1, ours), (b2, l0), (b3, pb)):
            for bar, v in zip(bars, vals):
                if v:
                    ax.annotate(fmt_share(v).replace(" ", ""), (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                                ha="center", va="bottom", fontsize=7)
        ax.set_xticks(list(x))
        ax.set_xticklabels(labels, fontsize=8, rotation=20, ha="right")
        ax.set_ylabel("% req/s")
        top = max([v for v in ours + l0 + [p or 0 for p in pb]] + [10])
        if g and g[0] == "json":
            # The 10 KB JSON POST: a few % and less under CRS, 50-100 % without; a log axis
            # shows both.
            ax.set_yscale("log")
            ax.set_ylim(0.01, 1000)
        else:
            ax.set_ylim(0, min(top * 1.35, 160))
        title = {"nullward": "NullWard ladder", "corvus": "Corvus (GET /, 3 bytes, 64 connections)",
                 "jxwaf": "JXWAF (POST id=1, 1,000 connections)"}[method]
        if g:
            title += f": {g[0]} over {g[1]}"
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7, loc="upper right")
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(f"{header.get('stamp', '')} · {header.get('commit', '')} · gateway on 1 core · load average {header.get('load', '?')} at start"
                 + (" · QUICK" if header.get("quick") == "1" else ""), fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 0.985))
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def report(path):
    header, rows = read_rows(path)
    if not rows:
        print(f"report: {path} has no rows", file=sys.stderr)
        return
    method = header.get("method") or rows[0]["method"]
    shares(rows)
    base = path[:-4] if path.endswith(".tsv") else path
    png = base + ".png"
    have_chart = chart(method, header, rows, png)
    invalid = [r for r in rows if r.get("valid") == "no"]
    loads = ", ".join(r["load"] for r in rows if "load" in r)
    lines = [f"# {method} {header.get('stamp', '')}" + (" (QUICK smoke test)" if header.get("quick") == "1" else ""), ""]
    lines.append(f"Commit {header.get('commit')}; {header.get('host')}, {header.get('cpus')} CPUs; {header.get('nginx')}, "
                 f"{header.get('openssl')}, {header.get('wrk')}. Load average at the start: {header.get('load')}; "
                 f"1-minute load average at the start of each row, in order: {loads}.")
    lines.append("")
    lines.append(f"Closed loop: wrk -t1, {header.get('duration')} per point at {header.get('conns')} connections"
                 + (" (saturation search: stop when a step gains under 3 % or p99 > 1 s; the row shows the best step)" if method == "nullward" else "")
                 + f"; open loop: src/bin/openloop.rs, {header.get('lat_duration')} s per point. Backend nginx and the load"
                 " generator on CPU 0, the gateway alone on CPU 1, restarted per row. Gateway CPU: % of one core over the best"
                 " step; CPU/req: that CPU time per request; peak RSS: VmHWM over the gateway's life (start-up included);"
                 " errors: non-2xx answers (the proxy's own count, 3xx included) and socket errors over every step.")
    lines.append("")
    if invalid:
        lines.append(f"**Invalid rows** (a non-2xx answer or a socket error): {', '.join(r['gateway'] + ' ' + r['request'] + ' ' + r['transport'] for r in invalid)}.")
        lines.append("")
    lines.append(table(method, rows))
    lines.append("")
    lines.append("Published beside ours:")
    lines.append("")
    lines.append(published_table(method, rows))
    t = targets(method, rows)
    if t:
        lines += ["", "Targets (issue 19 item 3):", "", t]
    if have_chart:
        lines += ["", f"![{method}]({os.path.basename(png)})"]
    lines += profiles(method, header, rows, os.path.dirname(path))
    lines += ["", f"Rows: `{os.path.basename(path)}`; regenerate with `python3 benches/load/report.py {os.path.relpath(path)}`."]
    with open(base + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"report: wrote {base}.md" + (f" and {png}" if have_chart else ""))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    for p in sys.argv[1:]:
        report(p)
