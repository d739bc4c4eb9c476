"""What a sweep found, from its results rows: the text on stdout and the data of its picture.

Three views, in this order: the points with findings (correctness findings first, then performance
ones; failed points beside them), the error against context for every shape (the worst over the
seeds: a sweep validates the worst case), and the slowest points with their peak memory. Tables
show only the parameters that vary over the sweep.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

# the error of the "error against context" view: the first of these metrics the rows have
ERROR_METRICS = ("vs_bf16.max_abs", "vs_fp32.max_abs", "vs_sage_reference.max_abs")
AGGREGATED = ("seed",)            # folded (worst value) in the error view
SLOWEST = 5
FIRST_FINDING_WIDTH = 110


@dataclass
class SweepSummary:
    name: str
    varied: list                   # parameter columns that vary over the points
    rows: list                     # the sweep's rows, in spec order
    ran: int = 0                   # points run by this invocation
    skipped: int = 0               # points already in the results
    others: int = 0                # rows of the table that are no point of this spec (kept, not shown)
    metric: str | None = None
    findings: list = field(default_factory=list)        # rows with findings, worst first
    failed: list = field(default_factory=list)
    grid: dict = field(default_factory=dict)            # shape label -> {context: worst metric}
    grid_findings: set = field(default_factory=set)     # shape labels with a point with findings
    contexts: list = field(default_factory=list)
    slowest: list = field(default_factory=list)

    def label(self, row, leave_out=()) -> str:
        keys = [k for k in self.varied if k not in leave_out]
        return " ".join(f"{k}={_short(row.get(k))}" for k in keys) or row.get("kernel", "")


def summarize(sweep, rows_by_id: dict, ran: int = 0, skipped: int = 0) -> SweepSummary:
    rows = [rows_by_id[p.point_id] for p in sweep.points if p.point_id in rows_by_id]
    s = SweepSummary(sweep.name, sweep.varied(), rows, ran, skipped, others=len(rows_by_id) - len(rows))
    ok = [r for r in rows if r.get("status") == "ok"]
    s.failed = [r for r in rows if r.get("status") != "ok"]
    order = {id(r): i for i, r in enumerate(rows)}
    s.findings = sorted((r for r in ok if r.get("findings")),
                        key=lambda r: (-(r.get("correctness_findings") or 0), -r["findings"], order[id(r)]))
    s.metric = next((m for m in ERROR_METRICS if any(r.get(m) is not None for r in ok)), None)
    if s.metric is not None:
        shape_keys = [k for k in s.varied if k != "context" and k not in AGGREGATED]
        for r in ok:
            label = " ".join(f"{k}={_short(r.get(k))}" for k in shape_keys) or r.get("kernel", "")
            # a kernel without the main metric's reference (e.g. int8_kv_cache: no bf16) shows its own
            m = next((m for m in ERROR_METRICS if r.get(m) is not None), s.metric)
            if m != s.metric:
                label += f" [{m}]"
            v = r.get(m)
            cell = s.grid.setdefault(label, {})
            ctx = r.get("context")
            if v is not None and not (isinstance(v, float) and math.isnan(v)):
                cell[ctx] = max(cell.get(ctx, -math.inf), v)
            elif ctx not in cell:
                cell[ctx] = math.nan
            if r.get("correctness_findings"):
                s.grid_findings.add(label)
        s.contexts = sorted({c for cells in s.grid.values() for c in cells if c is not None})
    timed = [r for r in rows if r.get("wall_s") is not None]
    s.slowest = sorted(timed, key=lambda r: -r["wall_s"])[:SLOWEST]
    return s


def _short(v):
    if v is None:
        return "-"
    if isinstance(v, str) and ("/" in v or "\\" in v):
        return v.replace("\\", "/").rsplit("/", 1)[-1]
    return v


def _kinds(row) -> str:
    counts = [(k[len("findings."):], n) for k, n in row.items() if k.startswith("findings.") and n]
    return ", ".join(f"{n} {k}" for k, n in sorted(counts, key=lambda kn: -kn[1]))


def _table(headers, rows) -> list:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    fmt = lambda cells: "  " + "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return [fmt(headers), *(fmt(r) for r in rows)]


def _mib(n) -> str:
    return "" if n is None else f"{n / 2**20:.0f} MiB"


def _num(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    return f"{v:.3g}"


def text(s: SweepSummary, results: str | None = None, picture: str | None = None) -> str:
    n, ok = len(s.rows), sum(r.get("status") == "ok" for r in s.rows)
    no_prov = [r for r in s.rows if r.get("status") == "ok" and r.get("checks_not_run")]
    head = (f"sweep {s.name}: {n} points ({s.ran} run now, {s.skipped} already in the results); {ok} ok, "
            f"{len(s.failed)} failed; {len(s.findings)} with findings")
    lines = [head]
    if results:
        lines.append(f"results: {results}" + (f"   picture: {picture}" if picture else ""))
    if s.others:
        lines.append(f"({s.others} more row(s) of the results are points this spec does not name: kept, not shown)")
    if no_prov:
        lines.append(f"{len(no_prov)} point(s) ran with checks not run ({no_prov[0].get('checks_not_run_reason')}): "
                     "their finding counts cover only the checks that ran")
    varied = [k for k in s.varied]
    if s.findings:
        lines += ["", f"points with findings ({len(s.findings)}, correctness first):"]
        body = []
        for r in s.findings:
            first = r.get("first_finding") or ""
            first = first.split("] ", 1)[1] if first.startswith("[") and "] " in first else first   # kind shown beside
            if len(first) > FIRST_FINDING_WIDTH:
                first = first[:FIRST_FINDING_WIDTH - 3] + "..."
            body.append([*(_short(r.get(k)) for k in varied), _kinds(r), first])
        lines += _table([*varied, "findings", "first finding"], body)
    else:
        lines += ["", "points with findings: none"]
    if s.failed:
        lines += ["", f"failed points ({len(s.failed)}):"]
        lines += _table([*varied, "error"], [[*(_short(r.get(k)) for k in varied), r.get("error") or ""]
                                              for r in s.failed])
    if s.metric is not None:
        agg = [k for k in AGGREGATED if k in s.varied]
        lines += ["", f"error against context and shape ({s.metric}{', worst over ' + ', '.join(agg) if agg else ''}; "
                      "* a shape with findings):"]
        body = [[("* " if label in s.grid_findings else "  ") + label,
                 *(_num(cells.get(c)) for c in s.contexts)] for label, cells in s.grid.items()]
        lines += _table(["shape", *(f"context {c}" for c in s.contexts)], body)
    if s.slowest:
        lines += ["", f"slowest points ({len(s.slowest)} of {n}):"]
        lines += _table([*varied, "wall s", "peak RSS"],
                        [[*(_short(r.get(k)) for k in varied), f"{r['wall_s']:.1f}", _mib(r.get("peak_rss_bytes"))]
                         for r in s.slowest])
    return "\n".join(lines)


def picture_data(s: SweepSummary) -> dict:
    """Plain data for visualize.sweep.draw_sweep (which knows nothing of kernels_py)."""
    kinds = sorted({k[len("findings."):] for r in s.findings for k, n in r.items() if k.startswith("findings.") and n})
    return dict(
        name=s.name,
        points=len(s.rows),
        findings=[dict(label=s.label(r), counts={k: r.get(f"findings.{k}") or 0 for k in kinds}) for r in s.findings],
        failed=[dict(label=s.label(r), error=r.get("error") or "") for r in s.failed],
        metric=s.metric,
        contexts=list(s.contexts),
        grid={label: [cells.get(c) for c in s.contexts] for label, cells in s.grid.items()},
        grid_findings=sorted(s.grid_findings),
        slowest=[dict(label=s.label(r), wall_s=r["wall_s"], peak_rss_bytes=r.get("peak_rss_bytes"))
                 for r in s.slowest],
    )
