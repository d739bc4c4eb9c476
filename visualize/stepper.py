"""Step through one wave of a traced run in a notebook, and look at one lane.

``RunStepper`` walks the wave's events forward and back (gfxsim's Trace.replay underneath, which
rebuilds the VGPR file), names the instruction about to execute, lists the selected lane's
operand registers, and draws the operands: for a matrix instruction, A and B as matrices whose
cells carry the token in each K slot (or the value, for untagged data), the cells the lane holds
outlined; for any other instruction, each operand VGPR across the 64 lanes, the lane outlined.

``widget()`` adds buttons and a lane slider when ipywidgets is installed (``pip install
'gfxsim[notebook]'``); without it the same view is static: ``show()`` after ``step()`` /
``back()`` / ``next_mma()``, which is what the notebook tests run.

>>> st = RunStepper(run_kernel("paged_attention_decode", context=64, trace=True), lane=21)
>>> st.next_mma(over_tokens=True).show()
"""
from __future__ import annotations

import html
import io
from dataclasses import replace

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from gfxsim.machine.trace import MmaEvent, words_of

from . import grid, style
from .runs import runs_of, sums_over_tokens
from gfxsim.errors import ArgumentError

MAX_REG_PANELS = 4               # VGPRs drawn for a non-matrix instruction (the rest are listed)


class RunStepper:
    """Replay of one wave of ``run`` (a traced gfxsim Run, or a KernelRun: its first Run)."""

    def __init__(self, run, workgroup=(0, 0, 0), wave: int = 0, lane: int = 0):
        r = runs_of(run)[0]
        if not r.trace.enabled:
            raise ArgumentError(f"{r.kernel}: stepping replays the trace; run with trace=True (gfxsim run --trace)")
        self.run = r
        self.workgroup, self.wave = tuple(workgroup) + (0,) * (3 - len(tuple(workgroup))), wave
        self.replay = r.replay(self.workgroup, wave)
        if not self.replay.events:
            raise ArgumentError(f"{r.kernel}: workgroup {self.workgroup} wave {wave} issued no instruction")
        self.lanes = len(self.replay.events[0].exec_mask)
        self.lane = lane

    # -- where we are ------------------------------------------------------------------------------
    @property
    def lane(self) -> int:
        return self._lane

    @lane.setter
    def lane(self, lane: int):
        if not 0 <= lane < self.lanes:
            raise ArgumentError(f"lane {lane} is not in the wave (lanes 0-{self.lanes - 1})")
        self._lane = int(lane)

    @property
    def current(self):
        """The event about to execute (None past the last one)."""
        return self.replay.current

    @property
    def position(self) -> int:
        """How many of the wave's events have executed."""
        return self.replay.pos

    # -- moving ------------------------------------------------------------------------------------
    def step(self, n: int = 1) -> RunStepper:
        self.replay.step(n)
        return self

    def back(self, n: int = 1) -> RunStepper:
        self.replay.back(n)
        return self

    def goto_event(self, index: int) -> RunStepper:
        """Stop just before the event with trace index ``index`` (#2057)."""
        pos = next((i for i, e in enumerate(self.replay.events) if e.index == index), None)
        if pos is None:
            raise ArgumentError(f"event #{index} is not in workgroup {self.workgroup} wave {self.wave}")
        self.replay.goto(pos)
        return self

    def next_mma(self, over_tokens: bool = False) -> RunStepper:
        """Stop before the next matrix instruction (one that sums over tokens, if asked)."""
        return self._seek(+1, over_tokens)

    def prev_mma(self, over_tokens: bool = False) -> RunStepper:
        return self._seek(-1, over_tokens)

    def _seek(self, direction: int, over_tokens: bool):
        ev = self.replay.events
        i = self.replay.pos + (1 if direction > 0 else -1)
        while 0 <= i < len(ev):
            e = ev[i]
            if isinstance(e, MmaEvent) and (not over_tokens or sums_over_tokens(e)):
                self.replay.goto(i)
                return self
            i += direction
        what = "matrix instruction summing over tokens" if over_tokens else "matrix instruction"
        raise ArgumentError(f"no {what} {'after' if direction > 0 else 'before'} event {self.replay.pos} of "
                         f"workgroup {self.workgroup} wave {self.wave}")

    # -- the lane's registers ---------------------------------------------------------------------
    def operands(self) -> list:
        """[(role, Operand)] of the current instruction: what it reads, then what it writes."""
        e = self.current
        if e is None:
            return []
        names = ("A", "B", "C") if isinstance(e, MmaEvent) else tuple(f"src{i}" for i in range(len(e.inputs)))
        dst = ("D",) if isinstance(e, MmaEvent) else tuple(f"dst{i}" for i in range(len(e.outputs)))
        return list(zip(names, e.inputs)) + list(zip(dst, e.outputs))

    def registers(self) -> list:
        """[(role, register name, dtype, this lane's values)] of the current instruction's operands;
        sources are the values the instruction reads, destinations the values it writes."""
        return [(role, o.name if o.regs is not None else "constant", o.dtype, o.values[:, self.lane].tolist())
                for role, o in self.operands()]

    def vgprs(self) -> dict:
        """{VGPR: 32-bit word} of every VGPR of the lane written so far in the replay."""
        rows = np.nonzero(self.replay.written[:, self.lane])[0]
        return {int(r): int(self.replay.vgpr[r, self.lane]) for r in rows}

    def lane_tokens(self, role: str) -> list:
        """Tokens of the matrix elements the lane holds in operand ``role`` (A or B), register order."""
        e = self.current
        if not isinstance(e, MmaEvent):
            raise ArgumentError("tokens per lane are recorded for matrix instructions only")
        lay = e.insn.operand(role)
        rows, cols, blocks = lay.matrix_of()[:, :, :, self.lane]          # [regs, elems] each
        tags = e.slot_tags(role)
        return [int(tags[b, r, c]) for b, r, c in zip(blocks.ravel(), rows.ravel(), cols.ravel())]

    def instruction(self) -> str:
        """'#2060 v_mmac_i32_16x16x32_i8 at pv_int8.py:98': the event about to execute."""
        e = self.current
        return "end of the wave" if e is None else f"#{e.index} {e.op} at {e.source}"

    def text(self) -> str:
        e = self.current
        head = (f"workgroup {self.workgroup} wave {self.wave}, lane {self.lane} (rowid {self.lane // 16}, "
                f"lane16id {self.lane % 16}); {self.position} of {len(self.replay.events)} events executed")
        if e is None:
            return head + "; at the end of the wave"
        lines = [head, f"next: {self.instruction()}" + ("" if e.exec_mask[self.lane] else
                                                       "  (this lane is off in EXEC)")]
        for role, name, dtype, vals in self.registers():
            verb = "writes" if role == "D" or role.startswith("dst") else "reads"
            shown = " ".join(_fmt(v, dtype) for v in vals)
            tok = ""
            if isinstance(e, MmaEvent) and role in ("A", "B") and e.tagged:
                tok = "   tokens " + " ".join(str(t) if t >= 0 else "·" for t in self.lane_tokens(role))
            lines.append(f"  {verb:<6} {role:<4} {name:<11} {dtype} x{len(vals)}: {shown}{tok}")
        lines.append(f"  {len(self.vgprs())} VGPRs of lane {self.lane} written so far (.vgprs())")
        return "\n".join(lines)

    def __repr__(self):
        return self.text()

    # -- pictures ----------------------------------------------------------------------------------
    def figure(self, values: bool = False) -> Figure:
        """The current instruction's operands, the lane's cells outlined; a matrix instruction's
        cells carry tokens where the data is tagged, its values with ``values=True``."""
        e = self.current
        if e is None:
            raise ArgumentError("at the end of the wave: step back first")
        if isinstance(e, MmaEvent):
            return self._mma_figure(e, values)
        return self._register_figure(e)

    def show(self, values: bool = False) -> Figure:
        """Print the lane's registers and return the figure (a notebook cell displays it)."""
        print(self.text())
        return self.figure(values)

    def _title(self, e) -> str:
        return (f"#{e.index} {e.op} at {e.source}: workgroup {self.workgroup} wave {self.wave}, "
                f"lane {self.lane} outlined")

    def _mma_figure(self, e, values: bool) -> Figure:
        panels = [self.mma_panel(e, op, values) for op in ("A", "B")]
        sizes = [grid.sizing([p]) for p in panels]
        handles = grid.legend_handles(np.concatenate([p.groups.ravel() for p in panels]), [_lane_patch(self.lane)])
        note = ("cell: the element's value" if values else
                "cell: the token in that element (· = none) or, for untagged data, its value")
        blocks = e.insn.blocks
        title = self._title(e) + (f" (block 0 of {blocks})" if blocks > 1 else "")
        fig = grid.figure(sum(s.width for s in sizes) + 0.4, max(s.height for s in sizes) + 0.4, title, handles, note)
        for sub, p, s in zip(fig.subfigures(1, 2, width_ratios=[s.width for s in sizes]), panels, sizes):
            sub.suptitle(p.title, fontsize=style.LABEL_SIZE + 1)       # above the axis words, not under them
            grid.draw(sub, [replace(p, title="")], s)
        return fig

    def mma_panel(self, e, op: str, values: bool = False) -> grid.Panel:
        """Operand ``op`` of matrix event ``e`` (block 0) as a matrix; the lane's cells outlined."""
        lay, operand = e.insn.operand(op), dict(self.operands())[op]
        lane, reg, elem = lay.slot_of()[:, 0]                               # [rows, cols] each
        tokens = e.slot_tags(op)[0] if e.tagged and op in "AB" else None
        if not values and tokens is not None and (tokens >= 0).any():
            labels = np.vectorize(lambda t: str(t) if t >= 0 else "·", otypes=[object])(tokens)
            what = "tokens"
        else:
            per = 32 // lay.elem_bits                                       # elements per VGPR
            labels = np.vectorize(lambda l, r, x: _fmt(operand.values[r * per + x, l], operand.dtype),
                                  otypes=[object])(lane, reg, elem)
            what = "values"
        rname, cname = lay.axis_names()
        return grid.Panel(labels=labels, groups=lane // style.LANES_PER_GROUP,
                          title=f"{op} ({lay.rows}×{lay.cols}, {what}) {operand.name}",
                          gid=f"stepper:{e.index}:{op}", xticks=[str(c) for c in range(lay.cols)],
                          yticks=[str(r) for r in range(lay.rows)],
                          xlabel=f"{cname} ({'K' if cname == 'k' else 'N'})",
                          ylabel=f"{rname} ({'K' if rname == 'k' else 'M'})", outline=lane == self.lane)

    def _register_figure(self, e) -> Figure:
        panels = []
        for role, o in self.operands():
            if o.regs is None:
                continue
            words = words_of(o.values)
            for k in range(o.regs[1]):
                panels.append(self.register_panel(e, role, o, o.regs[0] + k, words[k]))
        if not panels:                          # scalar instructions, s_barrier: nothing per lane to draw
            fig = Figure(figsize=(grid.text_inches(self._title(e), style.TITLE_SIZE) + 0.4, 0.8), dpi=style.DPI)
            fig.suptitle(self._title(e), fontsize=style.TITLE_SIZE)
            fig.text(0.5, 0.3, "no VGPR operand: nothing per lane to draw", ha="center", fontsize=style.LABEL_SIZE)
            return fig
        shown = panels[:MAX_REG_PANELS]
        size = grid.sizing(shown)
        more = f"; the first {len(shown)} of {len(panels)} VGPRs" if len(panels) > len(shown) else ""
        handles = grid.legend_handles(np.concatenate([p.groups.ravel() for p in shown]), [_lane_patch(self.lane)])
        fig = grid.figure(size.width, size.height, self._title(e), handles,
                          f"cell: the VGPR's value in that lane (32-bit word in hex for packed types){more}")
        grid.draw(fig, shown, size)
        return fig

    def register_panel(self, e, role, o, reg: int, words) -> grid.Panel:
        """One VGPR across the wave: rows are lane groups (rowid), columns lane16id."""
        rows = self.lanes // style.LANES_PER_GROUP
        lanes = np.arange(self.lanes).reshape(rows, style.LANES_PER_GROUP)
        if np.dtype(o.values.dtype).itemsize == 4:
            vals = words.view(o.values.dtype)
            labels = np.vectorize(lambda v: _fmt(v, o.dtype), otypes=[object])(vals[lanes])
        else:
            labels = np.vectorize(lambda w: f"{int(w):08x}", otypes=[object])(words[lanes])
        verb = "writes" if role == "D" or role.startswith("dst") else "reads"
        return grid.Panel(labels=labels, groups=lanes // style.LANES_PER_GROUP, title=f"{verb} v{reg} ({o.dtype})",
                          gid=f"stepper:{e.index}:v{reg}", xticks=[str(c) for c in range(style.LANES_PER_GROUP)],
                          yticks=[f"rowid {r}" for r in range(rows)], xlabel="lane16id", ylabel="lane group",
                          outline=lanes == self.lane)

    # -- interactive -------------------------------------------------------------------------------
    def widget(self):
        """Buttons (back, step, previous/next matrix instruction) and a lane slider, when ipywidgets
        is installed; otherwise prints how to get it and returns the static figure."""
        try:
            import ipywidgets as W
        except ImportError:
            print("ipywidgets is not installed (pip install 'gfxsim[notebook]'); static view. Move with "
                  ".step() / .back() / .next_mma() and call .show() again.")
            return self.show()
        # Text and picture go into HTML and Image widgets rather than an Output widget: no display
        # call is captured, so the view works the same in Jupyter and in headless notebook runners.
        text, image, status = W.HTML(), W.Image(format="png"), W.HTML()

        def redraw():
            text.value = f"<pre>{html.escape(self.text())}</pre>"
            image.value = _png(self.figure()) if self.current is not None else b""

        def move(fn):
            def click(_):
                try:
                    fn()
                except ValueError as err:        # no further matrix instruction: say so, stay put
                    status.value = f"<i>{html.escape(str(err))}</i>"
                    return
                status.value = ""
                redraw()
            return click

        buttons = [("◀ back", self.back), ("step ▶", self.step),
                   ("◀ matrix instr.", self.prev_mma), ("matrix instr. ▶", self.next_mma)]
        row = []
        for label, fn in buttons:
            b = W.Button(description=label)
            b.on_click(move(fn))
            row.append(b)
        lane = W.IntSlider(value=self.lane, min=0, max=self.lanes - 1, description="lane")

        def set_lane(change):
            self.lane = change["new"]
            redraw()
        lane.observe(set_lane, names="value")
        redraw()
        return W.VBox([W.HBox(row), lane, status, text, image])


def _png(fig) -> bytes:
    import matplotlib
    buf = io.BytesIO()
    with matplotlib.rc_context({"hatch.linewidth": style.HATCH_LINEWIDTH}):
        fig.savefig(buf, format="png", dpi=style.DPI)
    return buf.getvalue()


def _lane_patch(lane: int):
    return Patch(facecolor="white", edgecolor=style.DIFF_EDGE, linewidth=style.DIFF_LINEWIDTH,
                 label=f"outlined: lane {lane}")


def _fmt(v, dtype: str) -> str:
    if dtype.startswith(("f", "bf")):
        return f"{float(v):.4g}"
    return str(int(v))


__all__ = ["RunStepper"]
