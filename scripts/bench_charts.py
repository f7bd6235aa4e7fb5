"""The results file of scripts/bench and the SVG charts drawn from it.

scripts/bench writes, at the end of a run, a JSON document (`--results`,
results_document/write_results); draw_all turns one into hand-written SVG
files (no plotting library), as does `scripts/bench-charts RESULTS OUTDIR`:

- throughput-<persistence>-p<P>.svg: ops/s per row, hozon beside redis
  (median of the rounds, a whisker from the slowest to the fastest round);
- cpu-<persistence>-p<P>.svg: server CPU µs per request, the same layout;
- bgsave-ping-round<N>.svg: PING round trip over time around a BGSAVE, a
  line per server (log scale), and the same for each AOF-rewrite variant
  (rewrite-<variant>-ping-round<N>.svg) when that section ran;
- memory-per-type.svg: bytes per key of each type (RSS and used_memory
  growth) when the memory-per-type section ran.
"""
import datetime
import json
import math
import os
import statistics
from xml.sax.saxutils import escape

FORMAT = "hozon-bench-results/1"
SERVERS = ("hozon", "redis")
COLORS = {"hozon": "#2b6cb0", "redis": "#c53030"}
LIGHT = {"hozon": "#90b4e0", "redis": "#eb9a9a"}
COLUMN_PX = 3
FONT = "font-family='DejaVu Sans, Arial, Helvetica, sans-serif'"


# ---------------------------------------------------------------- results --


def ping_series(starts, lats, t_base0, t_job0, t_job1, max_points=4000):
    """The PING loop's round trips from the baseline's start to the job's
    end as {"points": [[seconds since the job's command was sent, round trip
    µs], ...], "bucket_ms", "pings", "job_secs", "baseline_secs"}. Above
    max_points PINGs the window is cut into max_points equal buckets and
    each keeps its longest round trip (at that PING's start), so every
    spike survives; bucket_ms is 0 when every PING is kept."""
    sel = [(st, lat) for st, lat in zip(starts, lats) if st + lat >= t_base0 and st <= t_job1]
    span = max(1, t_job1 - t_base0)
    out = {"pings": len(sel), "job_secs": (t_job1 - t_job0) / 1e9,
           "baseline_secs": (t_job0 - t_base0) / 1e9, "bucket_ms": 0.0}
    if len(sel) > max_points:
        width = span / max_points
        best = {}
        for st, lat in sel:
            b = min(max_points - 1, max(0, int((st - t_base0) / width)))
            if b not in best or lat > best[b][1]:
                best[b] = (st, lat)
        sel = [best[b] for b in sorted(best)]
        out["bucket_ms"] = round(width / 1e6, 4)
    out["points"] = [[round((st - t_job0) / 1e9, 5), round(lat / 1e3, 1)] for st, lat in sel]
    return out


def jsonable(v):
    """v with sets, tuples, bytes and non-finite floats made JSON-safe."""
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, (set, frozenset)):
        return sorted(jsonable(x) for x in v)
    if isinstance(v, bytes):
        return v.decode(errors="replace")
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    return str(v)


def results_document(args, started, machine, rev, redis_version, sections=(), snapshot=None,
                     rewrite=None, memtypes=None, replication=None):
    """The results file's document. `rows` has one entry per (persistence,
    row, pipeline) the throughput section ran: each server's successful
    rounds in run order (`ops`: ops/s, `cpu_us`: server CPU µs per op, and
    the row's other figures) and the first error per server. `snapshot`
    and `rewrite` are those sections' figures (each BGSAVE/BGREWRITEAOF
    round with its PING `series`), `memory_types` the memory-per-type
    section's, `replication` the replication section's (scripts/
    bench_repl.py's `repl_bench`: throughput, lag, WAIT and full syncs,
    per mode); None when a section did not run."""
    rows = []
    for mode, row_list, res in sections:
        for (test, pipe) in row_list:
            r = res[(test, pipe)]
            rows.append({"persistence": mode, "row": test, "pipeline": pipe,
                         "rounds": {name: jsonable(r[name]) for name in SERVERS},
                         "errors": jsonable(r["errors"])})
    settings = {k: v for k, v in vars(args).items() if k not in ("tls_certs",)}
    return {"format": FORMAT, "started": started.isoformat(timespec="seconds"),
            "machine": machine, "hozon": rev, "redis": redis_version,
            "settings": jsonable(settings), "rows": rows,
            "snapshot": jsonable(snapshot) if snapshot is not None else None,
            "rewrite": jsonable(rewrite) if rewrite is not None else None,
            "memory_types": jsonable(memtypes) if memtypes is not None else None,
            "replication": jsonable(replication) if replication is not None else None}


def write_results(path, doc):
    """Writes doc to path (its directory made), through a temporary file."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    os.replace(tmp, path)


# -------------------------------------------------------------------- svg --


def _num(v, unit=""):
    """A short number: 1.23M, 456k, 12.3, 0.456."""
    a = abs(v)
    if a >= 1e9:
        s = f"{v / 1e9:.3g}G"
    elif a >= 1e6:
        s = f"{v / 1e6:.3g}M"
    elif a >= 1e4:
        s = f"{v / 1e3:.3g}k"
    elif a >= 100:
        s = f"{v:.0f}"
    elif a >= 10:
        s = f"{v:.1f}"
    else:
        s = f"{v:.3g}"
    return s + unit


def _nice_ticks(vmax, n=5):
    """Round tick values from 0 to at least vmax."""
    if vmax <= 0:
        return [0, 1]
    raw = vmax / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    ticks, t = [], 0.0
    while t < vmax - 1e-9 * step:
        ticks.append(t)
        t += step
    ticks.append(t)
    return ticks


class Svg:
    def __init__(self, width, height):
        self.w, self.h = width, height
        self.parts = []

    def add(self, s):
        self.parts.append(s)

    def text(self, x, y, s, size=12, anchor="start", color="#222", weight="normal",
             rotate=None):
        tr = f" transform='rotate({rotate} {x:.1f} {y:.1f})'" if rotate is not None else ""
        self.add(f"<text x='{x:.1f}' y='{y:.1f}' font-size='{size}' text-anchor='{anchor}' "
                 f"fill='{color}' font-weight='{weight}'{tr}>{escape(str(s))}</text>")

    def line(self, x1, y1, x2, y2, color="#000", width=1, dash=None):
        d = f" stroke-dasharray='{dash}'" if dash else ""
        self.add(f"<line x1='{x1:.1f}' y1='{y1:.1f}' x2='{x2:.1f}' y2='{y2:.1f}' "
                 f"stroke='{color}' stroke-width='{width}'{d}/>")

    def rect(self, x, y, w, h, fill, stroke="none"):
        self.add(f"<rect x='{x:.1f}' y='{y:.1f}' width='{max(0.0, w):.1f}' "
                 f"height='{max(0.0, h):.1f}' fill='{fill}' stroke='{stroke}'/>")

    def polyline(self, pts, color, width=1.2):
        if pts:
            p = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
            self.add(f"<polyline points='{p}' fill='none' stroke='{color}' "
                     f"stroke-width='{width}' stroke-linejoin='round'/>")

    def render(self):
        return (f"<?xml version='1.0' encoding='UTF-8'?>\n"
                f"<svg xmlns='http://www.w3.org/2000/svg' width='{self.w}' height='{self.h}' "
                f"viewBox='0 0 {self.w} {self.h}' {FONT}>\n"
                f"<rect x='0' y='0' width='{self.w}' height='{self.h}' fill='white'/>\n"
                + "\n".join(self.parts) + "\n</svg>\n")


def _header(svg, title, subtitle, legend, x0):
    svg.text(x0, 24, title, size=16, weight="bold")
    svg.text(x0, 42, subtitle, size=11, color="#555")
    x = x0
    for label, color in legend:
        if color is None:  # a whisker
            svg.line(x, 57, x + 14, 57, color="#222", width=1.2)
            svg.line(x, 53, x, 61, color="#222", width=1.2)
            svg.line(x + 14, 53, x + 14, 61, color="#222", width=1.2)
        else:
            svg.rect(x, 52, 14, 10, color)
        svg.text(x + 19, 61, label, size=12)
        x += 30 + 7.2 * len(label)


def bar_chart(title, subtitle, rows, axis_label, unit="", note=None, whiskers=True):
    """Horizontal grouped bars. rows: [(label, {server: (median, lo, hi) |
    str (shown instead of a bar) | None})]. Each row's hozon/redis ratio of
    the medians is printed at the right."""
    left, right, top, bar_h, gap = 150, 110, 80, 13, 12
    left = max(left, 24 + 7.5 * max((len(label) for label, _ in rows), default=0))
    plot_w = 600
    row_h = bar_h * len(SERVERS) + gap
    height = top + row_h * max(1, len(rows)) + 60 + (18 if note else 0)
    svg = Svg(int(left + plot_w + right), height)
    _header(svg, title, subtitle, [(s, COLORS[s]) for s in SERVERS]
            + ([("min-max of rounds", None)] if whiskers else []), 16)
    vmax = max([v[2] for _, cells in rows for v in cells.values() if isinstance(v, tuple)]
               + [0])
    ticks = _nice_ticks(vmax * 1.08 if vmax else 1)
    scale = plot_w / ticks[-1]
    bottom = top + row_h * max(1, len(rows))
    for t in ticks:
        x = left + t * scale
        svg.line(x, top - 4, x, bottom, color="#ddd")
        svg.text(x, bottom + 15, _num(t), size=11, anchor="middle", color="#444")
    svg.text(left + plot_w / 2, bottom + 34, axis_label, size=12, anchor="middle")
    svg.text(left + plot_w + right - 16, top - 8, "hozon/redis", size=11, anchor="end",
             color="#444")
    for i, (label, cells) in enumerate(rows):
        y0 = top + i * row_h + gap / 2
        svg.text(left - 8, y0 + bar_h + 4, label, size=12, anchor="end")
        for j, name in enumerate(SERVERS):
            v = cells.get(name)
            y = y0 + j * bar_h
            if isinstance(v, tuple):
                med, lo, hi = v
                svg.rect(left, y + 1, med * scale, bar_h - 2, COLORS[name])
                if hi > lo:
                    svg.line(left + lo * scale, y + bar_h / 2, left + hi * scale,
                             y + bar_h / 2, color="#222", width=1.2)
                    for e in (lo, hi):
                        svg.line(left + e * scale, y + 3, left + e * scale, y + bar_h - 3,
                                 color="#222", width=1.2)
                svg.text(left + max(med, hi) * scale + 5, y + bar_h - 3, _num(med, unit),
                         size=10, color="#333")
            else:
                svg.text(left + 5, y + bar_h - 3, v or "n/a", size=10, color="#888")
        h, r = cells.get("hozon"), cells.get("redis")
        if isinstance(h, tuple) and isinstance(r, tuple) and r[0]:
            svg.text(left + plot_w + right - 16, y0 + bar_h + 4, f"{h[0] / r[0]:.2f}×",
                     size=12, anchor="end", weight="bold")
    svg.line(left, top - 4, left, bottom, color="#444")
    if note:
        svg.text(16, height - 8, note, size=10, color="#666")
    return svg.render()


def _log_ticks(lo, hi):
    out = []
    e = math.floor(math.log10(lo))
    while 10 ** e <= hi * 1.0001:
        out.append(10 ** e)
        e += 1
    return out


def _us_label(us):
    if us >= 1e6:
        return f"{us / 1e6:g} s"
    if us >= 1e3:
        return f"{us / 1e3:g} ms"
    return f"{us:g} µs"


def latency_chart(title, subtitle, series, job_label):
    """PING round trip over time, a line per server (log y axis). series:
    {server: ping_series dict}; x is seconds since the job was sent."""
    left, right, top, plot_w, plot_h = 80, 30, 80, 760, 340
    svg = Svg(left + plot_w + right, top + plot_h + 70)
    legend = []
    for name in SERVERS:
        s = series.get(name)
        if s and s.get("points"):
            # The longest round trip in flight while the job ran (as the tables).
            during = [us for t, us in s["points"] if t <= s["job_secs"] and t + us / 1e6 >= 0]
            mx = max(during, default=0)
            legend.append((f"{name} (longest during it {_us_label(round(mx / 1000, 2) * 1000)}"
                           f", {job_label} {s['job_secs']:.2f} s)", COLORS[name]))
    _header(svg, title, subtitle, legend, 16)
    pts_all = [p for s in series.values() if s for p in s.get("points", [])]
    if not pts_all:
        svg.text(left + plot_w / 2, top + plot_h / 2, "no PING data", size=14,
                 anchor="middle")
        return svg.render()
    xmin = min(p[0] for p in pts_all)
    xmax = max([p[0] for p in pts_all] + [s["job_secs"] for s in series.values() if s])
    # The baseline shown no longer than the longest job (at least 0.25 s),
    # so that a short job is not a sliver at the right.
    longest_job = max(s["job_secs"] for s in series.values() if s)
    xmin = max(min(xmin, 0.0), -max(0.25, longest_job))
    clipped = xmin > min(p[0] for p in pts_all)
    pts_all = [p for p in pts_all if p[0] >= xmin] or pts_all
    xmax = xmax + 0.02 * (xmax - xmin or 1)
    ylo = max(1.0, 10 ** math.floor(math.log10(max(1.0, min(p[1] for p in pts_all)))))
    yhi = 10 ** math.ceil(math.log10(max(ylo * 10, max(p[1] for p in pts_all))))
    lx = lambda t: left + (t - xmin) / (xmax - xmin) * plot_w  # noqa: E731
    ly = lambda us: top + plot_h - (math.log10(max(us, ylo)) - math.log10(ylo)) \
        / (math.log10(yhi) - math.log10(ylo)) * plot_h  # noqa: E731
    for t in _log_ticks(ylo, yhi):
        svg.line(left, ly(t), left + plot_w, ly(t), color="#ddd")
        svg.text(left - 6, ly(t) + 4, _us_label(t), size=11, anchor="end", color="#444")
    step = _nice_ticks(xmax - xmin, 8)[1]
    k = math.ceil(xmin / step)
    while k * step <= xmax:
        x = k * step
        svg.line(lx(x), top, lx(x), top + plot_h, color="#eee")
        svg.text(lx(x), top + plot_h + 15, f"{round(x, 6):g}", size=11, anchor="middle",
                 color="#444")
        k += 1
    svg.line(lx(0), top, lx(0), top + plot_h, color="#333", dash="5,3")
    far_right = lx(0) > left + plot_w * 0.7
    svg.text(lx(0) + (-4 if far_right else 4), top + 12, f"{job_label} sent", size=11,
             color="#333", anchor="end" if far_right else "start")
    for name in SERVERS:
        s = series.get(name)
        if not s or not s.get("points"):
            continue
        # The longest round trip per column of COLUMN_PX pixels: every spike
        # shows, without a line zigzagging between neighbouring PINGs.
        cols = {}
        for t, us in s["points"]:
            c = int((lx(t) - left) // COLUMN_PX)
            cols[c] = max(cols.get(c, 0), us)
        svg.polyline([(left + (c + 0.5) * COLUMN_PX, ly(us)) for c, us in sorted(cols.items())
                      if c >= 0], COLORS[name], width=1.4)
        xe = lx(s["job_secs"])
        svg.line(xe, top, xe, top + plot_h, color=COLORS[name], dash="2,3", width=1.2)
        svg.text(xe - 4, top + 26 + 14 * SERVERS.index(name), f"{name} done", size=10,
                 anchor="end", color=COLORS[name])
    svg.line(left, top + plot_h, left + plot_w, top + plot_h, color="#444")
    svg.line(left, top, left, top + plot_h, color="#444")
    svg.text(left + plot_w / 2, top + plot_h + 36,
             f"seconds since {job_label} was sent (before 0: baseline without it"
             + (f", its last {-xmin:.3g} s)" if clipped else ")"), size=12,
             anchor="middle")
    svg.text(18, top + plot_h / 2, "PING round trip (log scale)", size=12, anchor="middle",
             rotate=-90)
    buckets = [s.get("bucket_ms") for s in series.values() if s and s.get("bucket_ms")]
    col_ms = (xmax - xmin) / plot_w * COLUMN_PX * 1000
    note = (f"one PING in flight at a time on one connection; the line joins the longest "
            f"round trip of each {col_ms:.3g} ms"
            + (f" (the file keeps the longest of each {max(buckets):.3g} ms)" if buckets
               else ""))
    svg.text(16, top + plot_h + 60, note, size=10, color="#666")
    return svg.render()


# ----------------------------------------------------------------- charts --

ROW_LABELS = {"evalsha": "EVALSHA", "xreadgroup": "XREADGROUP (acked)",
              "publish": "PUBLISH"}


def _stat(rounds, key):
    vals = [m.get(key) for m in rounds]
    if not vals or any(v is None for v in vals):
        return None
    return (statistics.median(vals), min(vals), max(vals))


def _subtitle(doc):
    try:
        when = datetime.datetime.fromisoformat(doc["started"]).strftime("%Y-%m-%d %H:%M %Z")
    except (KeyError, ValueError):
        when = doc.get("started", "?")
    return f"hozon {doc.get('hozon', '?')}, {when}; {doc.get('machine', '')}"


def draw_all(doc, outdir):
    """Writes every chart the document has data for into outdir; returns
    their paths."""
    if doc.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} document")
    os.makedirs(outdir, exist_ok=True)
    written = []

    def save(name, text):
        path = os.path.join(outdir, name)
        with open(path, "w") as f:
            f.write(text)
        written.append(path)

    sub = _subtitle(doc)
    groups = {}
    for r in doc.get("rows", []):
        groups.setdefault((r["persistence"], r["pipeline"]), []).append(r)
    for (mode, pipe), rows in groups.items():
        ptxt = f"P={pipe}" if pipe is not None else "no -P (own clients)"
        pname = f"p{pipe}" if pipe is not None else "p-"
        nr = max((len(r["rounds"].get(s, [])) for r in rows for s in SERVERS), default=0)
        for key, fname, title, axis, unit in (
                ("ops", "throughput", "Throughput", "requests per second, higher is better",
                 ""),
                ("cpu_us", "cpu", "Server CPU per request",
                 "server CPU µs per request, lower is better", " µs")):
            cells = []
            for r in rows:
                c = {}
                for s in SERVERS:
                    if s in r.get("errors", {}):
                        c[s] = "n/a (errors)"
                    else:
                        c[s] = _stat(r["rounds"].get(s, []), key)
                if all(v is None for v in c.values()):
                    continue
                cells.append((ROW_LABELS.get(r["row"], r["row"].upper()), c))
            if not cells:
                continue
            save(f"{fname}-{mode}-{pname}.svg", bar_chart(
                f"{title}, hozon vs redis, {ptxt}, persistence {mode}", sub, cells,
                f"{axis} (median of {nr} round(s); whisker: min-max)", unit,
                note=f"redis: {doc.get('redis', '?')}"))
    for sec, job, label, prefix in (("snapshot", None, "BGSAVE", "bgsave"),
                                    ("rewrite", "runs", "BGREWRITEAOF", "rewrite")):
        data = doc.get(sec)
        if not data:
            continue
        if sec == "snapshot":
            variants = {None: {s: data.get(s, {}).get("bg", []) for s in SERVERS}}
        else:
            variants = {}
            for s in SERVERS:
                for v, runs in (data.get(s, {}).get("runs") or {}).items():
                    variants.setdefault(v, {})[s] = runs
        for v, per in variants.items():
            n = max((len(x) for x in per.values()), default=0)
            for i in range(n):
                series = {s: (per.get(s) or [])[i].get("series")
                          if i < len(per.get(s) or []) else None for s in SERVERS}
                if not any(series.values()):
                    continue
                what = f" ({v})" if v else ""
                save(f"{prefix}{'-' + v if v else ''}-ping-round{i + 1}.svg", latency_chart(
                    f"PING round trip during {label}{what}, round {i + 1}, "
                    f"{data.get('nkeys', 0):,} mixed keys", sub, series, label))
    mt = doc.get("memory_types")
    if mt:
        rows = []
        for t, e in list(mt.get("types", {}).items()) + [("all (mixed)", mt.get("total"))]:
            if not e:
                continue
            for key, what in (("rss_per_key", "RSS"), ("used_per_key", "used_memory")):
                c = {}
                for s in SERVERS:
                    m = e.get(s)
                    c[s] = (m[key], m[key], m[key]) if m and m.get(key) is not None \
                        else "n/a (errors)"
                rows.append((f"{t} {what}", c))
        if rows:
            save("memory-per-type.svg", bar_chart(
                f"Memory per key by type, {mt.get('nkeys', 0):,} mixed keys", sub, rows,
                "bytes per key (growth over an empty server)", " B",
                note=f"redis: {doc.get('redis', '?')}", whiskers=False))
    return written
