"""LDS bank conflicts of a traced run, per access.

Top: every DS access (ds_read_b*/ds_write_b*) of the run counted by statement and by the conflict
degree gfxsim recorded for it (1-way = conflict-free). Bottom: one access lane by lane: which
bank each lane's dwords fall in, one row per pass, the lanes that share a bank with another
dword of their pass outlined. Passes are gfxsim's gfx9 phases (gfxsim.machine.banks): 32 lanes of
b8-b32, 16 of b64, and for b128 two groups of 4 lanes such as {0-3, 20-23}.

>>> from visualize import plot_banks
>>> fig = plot_banks(run_kernel("paged_attention_decode", context=300, trace=True))
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from gfxsim.arch import get_arch
from gfxsim.arch.kslots import format_token_set
from gfxsim.machine.banks import phases

from . import grid, style
from .runs import name_of, runs_of
from gfxsim.errors import ArgumentError

# ds_read_bN / ds_write_bN move N bits per lane (the ISA's names; gfxsim records the access so).
WIDTH = {"b8": 1, "b16": 2, "b32": 4, "b64": 8, "b96": 12, "b128": 16}


def width(op: str) -> int:
    suffix = op.rsplit("_", 1)[-1]
    if suffix not in WIDTH:
        raise ArgumentError(f"{op}: not an LDS access gfxsim models (widths {', '.join(WIDTH)})")
    return WIDTH[suffix]


def accesses(run) -> list:
    """[(Run, Event)] of every LDS read and write with its recorded bank-conflict degree."""
    out = []
    for r in runs_of(run):
        if not r.trace.enabled:
            raise ArgumentError(f"{r.kernel}: the LDS view reads each access from the trace; run with trace=True "
                             "(gfxsim run --trace)")
        out += [(r, e) for e in r.events if e.op.startswith(("ds_read_b", "ds_write_b"))
                and "bank_conflict" in e.details]
    if not out:
        raise ArgumentError(f"{name_of(run)} made no LDS access")
    return out


def statement(e) -> str:
    return f"{e.op} '{e.details.get('region')}' at {e.source}"


@dataclass(frozen=True)
class BankMap:
    """One access lane by lane: ``banks[pass][i]`` the banks lane ``lanes[pass][i]`` touches."""
    event: object
    lanes: list                 # [pass] -> lane numbers
    banks: list                 # [pass] -> [lane] -> tuple of banks (one per dword)
    conflicted: list            # [pass] -> [lane] -> True if a bank it uses serves another dword too
    degree: int                 # most distinct dwords one bank serves in one pass
    cycles: int


def bank_map(e, n_banks: int, bank_bytes: int, lanes_per_wave: int = 64, rule: str = "gfx9") -> BankMap:
    nbytes = width(e.op)
    dwords = max(1, nbytes // bank_bytes)
    addr = np.asarray(e.details["address"], np.int64)
    lanes, banks, conflicted = [], [], []
    degree = cycles = 0
    ph = phases(nbytes, lanes_per_wave, rule)        # the machine's phases: b128 pairs {0-3, 20-23}, ...
    for p in range(int(ph.max()) + 1):
        members = [int(l) for l in np.nonzero(ph == p)[0]]
        ls = [l for l in members if e.exec_mask[l]]
        dw = {l: [int(addr[l]) // bank_bytes + d for d in range(dwords)] for l in ls}
        served = {}                                             # bank -> distinct dwords
        for l in ls:
            for d in dw[l]:
                served.setdefault(d % n_banks, set()).add(d)
        deg = max((len(s) for s in served.values()), default=0)
        if ls:
            degree, cycles = max(degree, deg), cycles + deg
        lanes.append(members)
        banks.append([tuple(d % n_banks for d in dw.get(l, [])) for l in lanes[-1]])
        conflicted.append([any(len(served[b]) > 1 for b in bk) for bk in banks[-1]])
    return BankMap(e, lanes, banks, conflicted, degree, cycles)


def _bank_label(bk) -> str:
    if not bk:
        return "off"                                            # lane not in EXEC
    return f"{bk[0]}-{bk[-1]}" if len(bk) > 2 else ",".join(str(b) for b in bk)


# Accesses by conflict degree: light grey for conflict-free, then darker and hatched as the degree
# grows (lightness carries the order in greyscale, the hatch tells them apart without colour).
DEGREE_STYLE = (("#E6E6E6", ""), ("#E69F00", "//"), ("#D55E00", "xx"), ("#7A2E00", "\\\\"), ("#2B1000", ".."))


def degree_style(degree: int):
    """(fill, hatch) of accesses of a conflict degree: 1, 2, 3-4, 5-8, more."""
    step = 0 if degree <= 1 else min(len(DEGREE_STYLE) - 1, int(np.ceil(np.log2(degree))))
    return DEGREE_STYLE[step]


def by_statement(acc) -> dict:
    """{statement: Counter(degree -> accesses)} in first-issue order."""
    out = {}
    for _, e in acc:
        out.setdefault(statement(e), Counter())[int(e.details["bank_conflict"])] += 1
    return out


def draw_summary(ax, acc):
    """Horizontal bars: one per DS statement, its accesses stacked by conflict degree."""
    ax.set_gid("lds:statements")
    rows = by_statement(acc)
    top = max(sum(c.values()) for c in rows.values())
    for y, (stmt, counts) in enumerate(rows.items()):
        left = 0
        for d in sorted(counts):
            face, hatch = degree_style(d)
            ax.barh(y, counts[d], left=left, color=face, hatch=hatch or None, edgecolor="#555555", linewidth=0.5,
                    gid=f"lds:statements/{y}/{d}")
            left += counts[d]
        worst = max(counts)
        bad = sum(v for d, v in counts.items() if d > 1)
        note = "conflict-free" if worst == 1 else f"{bad} conflict, worst {worst}-way"
        ax.text(left + top * 0.01, y, f"{left} ({note})", va="center", fontsize=style.FONT_SIZE)
    ax.set_yticks(range(len(rows)), list(rows), fontsize=style.TICK_SIZE)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(0, top * 1.35)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.tick_params(axis="x", labelsize=style.TICK_SIZE)
    ax.set_xlabel("LDS accesses (one per DS instruction a wave issued)", fontsize=style.LABEL_SIZE)
    ax.set_ylabel("DS statement", fontsize=style.LABEL_SIZE)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def map_panel(bm: BankMap) -> grid.Panel:
    labels = np.array([[_bank_label(b) for b in row] for row in bm.banks], dtype=object)
    groups = np.array([[l // style.LANES_PER_GROUP for l in row] for row in bm.lanes])
    per = len(bm.lanes[0])
    return grid.Panel(labels=labels, groups=groups, title="", gid=f"lds:access:{bm.event.index}",
                      xticks=[str(i) for i in range(per)],
                      yticks=[f"pass {p}: lanes {format_token_set(row)[1:-1]}" for p, row in enumerate(bm.lanes)],
                      xlabel="lane within the pass; cell: the LDS bank(s) of the lane's dwords",
                      ylabel="pass", outline=np.array(bm.conflicted))


def pick(acc, event=None):
    """The access to draw: trace index ``event``, else the first access of the highest degree."""
    if event is None:
        return max(acc, key=lambda re: (int(re[1].details["bank_conflict"]), -re[1].index))
    hits = [re for re in acc if re[1].index == event]
    if not hits:
        raise ArgumentError(f"trace event #{event} is not an LDS access; LDS accesses are e.g. "
                         + ", ".join(f"#{e.index} {e.op}" for _, e in acc[:4]))
    return hits[0]


def plot_banks(run, event=None) -> Figure:
    """DS accesses by statement and conflict degree, and one access (``event``, default the worst)
    lane by lane."""
    acc = accesses(run)
    r, e = pick(acc, event)
    arch = get_arch(r.arch)
    bm = bank_map(e, arch.lds_banks, arch.lds_bank_bytes, len(e.exec_mask), arch.lds_rule)
    bottom = map_panel(bm)
    s_bot = grid.sizing([bottom])
    top_h = 0.22 * len(by_statement(acc)) + 0.8
    n_conf = sum(int(x.details["bank_conflict"]) > 1 for _, x in acc)
    title = (f"{name_of(run)}: LDS bank conflicts, {arch.lds_banks} banks of {arch.lds_bank_bytes} bytes\n"
             + (f"{n_conf} of {len(acc)} DS accesses conflict" if n_conf else f"all {len(acc)} DS accesses are "
                "conflict-free"))
    degrees = sorted({degree_style(int(x.details["bank_conflict"])) for _, x in acc}, key=DEGREE_STYLE.index)
    names = {DEGREE_STYLE[0]: "conflict-free access", DEGREE_STYLE[1]: "2-way", DEGREE_STYLE[2]: "3-4-way",
             DEGREE_STYLE[3]: "5-8-way", DEGREE_STYLE[4]: "more than 8-way"}
    handles = [Patch(facecolor=f, hatch=h or None, edgecolor="#555555", linewidth=0.5, label=names[(f, h)])
               for f, h in degrees]
    handles = grid.legend_handles(bottom.groups.ravel(), handles + [
        Patch(facecolor="white", edgecolor=style.DIFF_EDGE, linewidth=style.DIFF_LINEWIDTH,
              label="outlined lane: its bank serves another dword in the pass")])
    fig = grid.figure(max(8.0, s_bot.width), top_h + s_bot.height + 0.4, title, handles,
                      "bars: accesses by conflict degree; grid: one access, lane by lane")
    up, down = fig.subfigures(2, 1, height_ratios=[top_h, s_bot.height + 0.4])
    draw_summary(up.subplots(), acc)
    grid.draw(down, [bottom], s_bot)
    where = f"wg{e.workgroup} wave {e.wave}"
    verdict = f"{bm.degree}-way conflict" if bm.degree > 1 else "conflict-free"
    down.suptitle(f"#{e.index} {statement(e)}, {where}: {verdict}, {bm.cycles} cycles for {len(bm.lanes)} passes",
                  fontsize=style.LABEL_SIZE)
    return fig


__all__ = ["plot_banks", "bank_map", "accesses", "BankMap", "WIDTH"]
