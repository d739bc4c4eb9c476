"""The README's speed tables, written from a bench results file (default bench/results.json):

    python -m bench --repeat 3                # measures, writes bench/results.json
    python -m bench --only triton --repeat 3 -o bench/results_triton.json   # the Triton figure
    python -m bench --only kernels --repeat 3 -o bench/results_kernels.json   # every other kernel
    python -m bench.readme                    # prints the tables the README quotes

tests/bench/test_readme_figures.py holds the README to what this prints from the committed
results, so every figure there comes from the command that made the file.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results.json"
TRITON_RESULTS = Path(__file__).resolve().parent / "results_triton.json"
KERNEL_RESULTS = Path(__file__).resolve().parent / "results_kernels.json"
CONTEXTS = {4096: "4K", 8192: "8K", 16384: "16K", 65536: "64K"}


def _size(b: int) -> str:
    return f"{b / 2**30:.1f} GiB" if b >= 2**30 else f"{round(b / 2**20)} MiB"


def _by(figures, group, mode, ctx):
    got = [f for f in figures if f["group"] == group and f.get("mode") == mode and f.get("context") == ctx
           and not f.get("error")]
    return got[0] if got else None


def decode_table(res: dict) -> str:
    """Context by context: numpy, then gfxsim run without provenance, with it, with the full trace."""
    figs = res["figures"]
    rows = ["| context | numpy | `--no-provenance` | provenance | `--trace` (full per-lane trace) |",
            "|---|---|---|---|---|"]
    for ctx, name in CONTEXTS.items():
        numpy = _by(figs, "decode", "numpy", ctx)
        if numpy is None:
            continue
        cells = [name, f"{numpy['seconds']:.3f} s"]
        for mode in ("off", "on"):
            f = _by(figs, "decode", mode, ctx)
            if f is None:
                cells.append("—")
                continue
            ratio = f"{f['ratio']:.1f}x"                      # bold: the figures with a target
            cells.append(f"{f['seconds']:.2f} s, {_size(f['peak_rss_bytes'])} ({f'**{ratio}**' if f.get('target') else ratio})")
        t = _by(figs, "decode", "trace", ctx)
        cells.append("—" if t is None else f"{t['seconds']:.1f} s, {_size(t['peak_rss_bytes'])}")
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def asm_table(res: dict) -> str:
    """The compiled decode on the asm front end: lane-instructions per second and what they cost,
    context by context, and provenance-on's launches over provenance-off's."""
    figs = res["figures"]
    rows = ["| users' shape | lane-instr/s | launches | whole command | peak RSS | target |",
            "|---|---|---|---|---|---|"]
    for ctx, cname in CONTEXTS.items():
        for mode, name in (("asm-off", "`--no-provenance`"), ("asm-on", "provenance")):
            f = _by(figs, "asm", mode, ctx)
            if f is None:
                continue
            target = f["target"].replace(">=", "≥").replace("<=", "≤").replace("/s", "")
            rows.append(f"| {cname}, {name} | **{f['lane_instructions_per_second'] / 1e6:.1f} M** | "
                        f"{f['simulated_seconds']:.2f} s | {f['seconds']:.2f} s | {_size(f['peak_rss_bytes'])} | "
                        f"{target}: {'met' if f['met'] else 'missed'} |")
        r = _by(figs, "asm", "asm-on-over-off", ctx)
        if r is not None:
            rows.append(f"| {cname}, provenance over `--no-provenance` | | **{r['ratio']:.2f}x** | | | "
                        f"{r['target'].replace('<=', '≤')}: {'met' if r['met'] else 'missed'} |")
    call = [f for f in figs if f["group"] == "asm" and f.get("mode") == "sim-call" and not f.get("error")]
    if call:
        f = call[0]
        rows.append(f"| `run_on_sim` per call after the first, over its launch (pv_int8, 256 tokens) | | "
                    f"**{f['seconds'] * 1e3:.1f} ms** | | {_size(f['peak_rss_bytes'])} | "
                    f"{f['target'].replace('<=', '≤')}: {'met' if f['met'] else 'missed'} |")
    return "\n".join(rows)


def tinygrad_table(res: dict) -> str:
    """Each compiled twin, one launch, warm, provenance off, on the asm front end and on tinygrad's
    CDNA emulator (bench/tinygrad_side.py): lane-instructions per second of each."""
    rows = ["| twin (gfx942, one launch) | gfxsim lane-instr/s | tinygrad lane-instr/s | gfxsim / tinygrad | target |",
            "|---|---|---|---|---|"]
    for f in res["figures"]:
        if f["group"] != "tinygrad":
            continue
        if f.get("error"):
            rows.append(f"| {f.get('twin', f['figure'])} | — | — | {f['error'][:80]} | |")
            continue
        t = f.get("tinygrad_rate")
        rows.append(f"| {f['twin']} | {f['gfxsim_rate'] / 1e6:.2f} M | {t / 1e6:.2f} M | **{f['ratio']:.2f}x** | "
                    f"{f['target'].replace('>=', '≥')}: {'met' if f['met'] else 'missed'} |")
    return "\n".join(rows)


def triton_table(res: dict) -> str:
    """A Triton flash-attention forward on the asm front end (bench/triton_fa.py)."""
    rows = ["| Triton flash-attention forward | lane-instr/s | launch | whole command | peak RSS |", "|---|---|---|---|---|"]
    for f in res["figures"]:
        if f["group"] != "triton" or f.get("error"):
            continue
        name = "`--no-provenance`" if f["mode"] == "triton-off" else "provenance"
        rows.append(f"| {f['context']} tokens, {name} | **{f['lane_instructions_per_second'] / 1e6:.2f} M** | "
                    f"{f['simulated_seconds']:.2f} s | {f['seconds']:.2f} s | {_size(f['peak_rss_bytes'])} |")
    return "\n".join(rows)


def _x(r: float) -> str:
    return f"{r:,.0f}x" if r >= 100 else f"{r:.1f}x"


def _cell(f) -> str:
    if f is None:
        return "—"
    if f.get("error"):
        e = f["error"]
        if e.startswith("over "):
            return e
        if e.startswith("skipped"):
            return "not run (a shorter prompt ran over)"
        bound = re.search(r"max_trace_bytes = ([0-9.]+ GiB)", e)
        if bound:
            return f"refused: the trace is over its {bound.group(1)} bound"
        return "failed"
    ratio = ""
    if f.get("ratio") is not None:
        spread = len(f.get("ratios", [])) > 1
        ratio = f" ({_x(f['ratio'])}" + (f", {_x(f['ratio_min'])}-{_x(f['ratio_max'])}" if spread else "") + ")"
    rss = f", {_size(f['peak_rss_bytes'])}" if f.get("peak_rss_bytes") else ""
    return f"{f['seconds']:.2f} s{rss}{ratio}"


def kernels_table(res: dict) -> str:
    """Every kernel at the users' shape: the numpy yardstick, then the whole command per mode, each
    with its peak RSS and its ratio to the yardstick (median of the A B pairs, min-max), and the
    command's start-up floor (the same command at 1 head and 64 tokens)."""
    rows = ["| kernel | numpy (1 thread) | `--no-provenance` | provenance | `--trace` | start-up floor |",
            "|---|---|---|---|---|---|"]
    names = []
    for f in res["figures"]:
        if f["group"] == "kernels" and ":" in f["figure"]:
            name = f["figure"].split(":")[0]
            if name not in names:
                names.append(name)
    for name in names:
        mine = {f.get("mode"): f for f in res["figures"] if f["group"] == "kernels" and f["figure"].startswith(name + ":")}
        np_fig = mine.get("numpy")
        cells = [name, "—" if np_fig is None or np_fig.get("error") else f"{np_fig['seconds'] * 1e3:.3g} ms"]
        cells += [_cell(mine.get(m)) for m in ("off", "on", "trace")]
        fl = mine.get("floor")
        cells.append("—" if fl is None or fl.get("error") else f"{fl['seconds']:.2f} s")
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def tables(path: Path = RESULTS, triton: Path | None = TRITON_RESULTS, kernels: Path | None = KERNEL_RESULTS) -> str:
    """Every table, in the README's order: decode, asm, tinygrad (``path``), every other kernel
    (``path``'s kernels group, else the ``kernels`` file's), Triton (its own file)."""
    res = json.loads(Path(path).read_text())
    out = decode_table(res) + "\n\n" + asm_table(res)
    if any(f["group"] == "tinygrad" for f in res["figures"]):
        out += "\n\n" + tinygrad_table(res)
    if not any(f["group"] == "kernels" for f in res["figures"]) and kernels is not None and Path(kernels).is_file():
        res = json.loads(Path(kernels).read_text())
    if any(f["group"] == "kernels" for f in res["figures"]):
        out += "\n\n" + kernels_table(res)
    if triton is not None and Path(triton).is_file():
        out += "\n\n" + triton_table(json.loads(Path(triton).read_text()))
    return out


if __name__ == "__main__":
    print(tables(Path(sys.argv[1]) if len(sys.argv) > 1 else RESULTS))
