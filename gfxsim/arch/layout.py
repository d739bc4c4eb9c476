"""Operand layouts: the map (lane, reg, elem) <-> (row, col, block) of one matrix operand.

A layout is written compactly as mixed-radix digits (the CuTe idea): each slot coordinate
(lane, reg, elem) is split into digits, least significant first, and every digit adds
``digit * stride`` to one matrix axis. Every layout in the CDNA/MMAC tables has this form,
so a record needs a handful of digits instead of a 2048-row table, and the closed-form
formulas both ways are printed from the same digits.

Construction needs no numpy (so `gfxsim layout` queries that need no table start fast): the
bijection is proved from the digits, and the whole tables (numpy) are built, and checked slot by
slot against the maps, on first use.
"""
from __future__ import annotations

import math
from functools import cached_property
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from ..errors import ArgumentError, OutOfRangeError

if TYPE_CHECKING:
    import numpy as np

AXES = ("row", "col", "block")
SLOTS = ("lane", "reg", "elem")


@dataclass(frozen=True)
class Digit:
    """One mixed-radix digit of a slot coordinate: ``extent`` values, feeding ``axis`` with ``stride``."""
    extent: int
    axis: str      # "row" | "col" | "block"
    stride: int

    def __post_init__(self):
        if self.axis not in AXES:
            raise ArgumentError(f"digit axis {self.axis!r} is not one of {AXES}")
        if self.extent < 1 or self.stride < 1:
            raise ArgumentError(f"digit {self} needs extent >= 1 and stride >= 1")


def _digits(spec) -> tuple[Digit, ...]:
    return tuple(d if isinstance(d, Digit) else Digit(*d) for d in spec if (d[0] if not isinstance(d, Digit) else d.extent) > 1)


@dataclass(frozen=True)
class OperandLayout:
    """Layout of one operand (A: MxK, B: KxN, C/D: MxN), per block.

    Type of the map:  (lane, reg, elem) -> (row, col, block)   and its inverse.
    ``reg`` counts VGPRs from the operand's first register; ``elem`` is the element inside
    the 32-bit register (byte for 8-bit types, half for 16-bit, 0 for 32-bit). A 64-bit element
    (f64) fills a register pair: there ``reg`` counts pairs (VGPRs 2*reg, 2*reg+1) and ``elem`` is 0.
    Construction proves the map is a bijection: each matrix axis must be covered by its digits
    as one mixed-radix number (strides 1, e1, e1*e2, ... up to the axis size), which holds exactly
    when every slot holds one element and every element one slot. The tables (first use) check it
    again point by point.
    """
    operand: str
    rows: int
    cols: int
    blocks: int
    elem_bits: int
    lane: tuple[Digit, ...]
    reg: tuple[Digit, ...]
    elem: tuple[Digit, ...]
    wave_size: int = 64
    _tables: dict = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        for name in SLOTS:
            object.__setattr__(self, name, _digits(getattr(self, name)))
        if 32 % self.elem_bits and self.elem_bits != 64:
            raise ArgumentError(f"{self.operand}: element width {self.elem_bits} neither divides 32 bits nor is 64")
        if self.n_lanes != self.wave_size:
            raise ArgumentError(f"{self.operand}: lane digits cover {self.n_lanes} lanes, wave has {self.wave_size}")
        if self.n_elems > max(32 // self.elem_bits, 1):
            raise ArgumentError(f"{self.operand}: {self.n_elems} elements of {self.elem_bits} bits overflow a 32-bit register")
        self._prove()

    # -- sizes -------------------------------------------------------------------------
    @staticmethod
    def _extent(digits) -> int:
        return math.prod(d.extent for d in digits)

    @property
    def n_lanes(self) -> int:
        return self._extent(self.lane)

    @cached_property
    def n_regs(self) -> int:
        """VGPRs per lane that the operand occupies (kept: every matrix instruction asks)."""
        return self._extent(self.reg) * self.words_per_reg

    @property
    def reg_slots(self) -> int:
        """Values ``reg`` takes: VGPRs, or register pairs for 64-bit elements."""
        return self._extent(self.reg)

    @property
    def words_per_reg(self) -> int:
        """VGPRs one ``reg`` step covers: 2 for 64-bit elements, else 1."""
        return max(self.elem_bits // 32, 1)

    @cached_property
    def elems_per_lane(self) -> int:
        """Elements of the operand's type one lane holds."""
        return self.n_regs * 32 // self.elem_bits

    @property
    def n_elems(self) -> int:
        """Elements used per 32-bit register."""
        return self._extent(self.elem)

    @property
    def size(self) -> int:
        return self.rows * self.cols * self.blocks

    # -- the maps (vectorised numpy; scalars work too) ---------------------------------
    def to_matrix(self, lane, reg, elem=0):
        """(lane, reg, elem) -> (row, col, block)."""
        import numpy as np
        lane, reg, elem = (np.asarray(x, dtype=np.int64) for x in (lane, reg, elem))
        self._check_range("lane", lane, self.wave_size)
        self._check_range("reg", reg, self.reg_slots)
        self._check_range("elem", elem, self.n_elems)
        out = {a: np.zeros(np.broadcast(lane, reg, elem).shape, np.int64) for a in AXES}
        for value, digits in ((lane, self.lane), (reg, self.reg), (elem, self.elem)):
            place = 1
            for d in digits:
                out[d.axis] = out[d.axis] + ((value // place) % d.extent) * d.stride
                place *= d.extent
        return out["row"], out["col"], out["block"]

    def to_register(self, row, col, block=0):
        """(row, col, block) -> (lane, reg, elem)."""
        import numpy as np
        row, col, block = (np.asarray(x, dtype=np.int64) for x in (row, col, block))
        self._check_range("row", row, self.rows)
        self._check_range("col", col, self.cols)
        self._check_range("block", block, self.blocks)
        coord = {"row": row, "col": col, "block": block}
        res = []
        for digits in (self.lane, self.reg, self.elem):
            value, place = 0, 1
            for d in digits:
                value = value + ((coord[d.axis] // d.stride) % d.extent) * place
                place *= d.extent
            res.append(np.asarray(value, dtype=np.int64) + np.zeros_like(row))
        return tuple(res)

    def element_of(self, lane: int, reg: int, elem: int = 0) -> tuple[int, int, int]:
        """``to_matrix`` for one slot, in plain ints (no numpy)."""
        coord = {"lane": int(lane), "reg": int(reg), "elem": int(elem)}
        for name, limit in (("lane", self.wave_size), ("reg", self.reg_slots), ("elem", self.n_elems)):
            self._check_int(name, coord[name], limit)
        out = dict.fromkeys(AXES, 0)
        for slot, digits in zip(SLOTS, (self.lane, self.reg, self.elem)):
            place = 1
            for d in digits:
                out[d.axis] += ((coord[slot] // place) % d.extent) * d.stride
                place *= d.extent
        return out["row"], out["col"], out["block"]

    def register_of(self, row: int, col: int, block: int = 0) -> tuple[int, int, int]:
        """``to_register`` for one element, in plain ints (no numpy)."""
        coord = {"row": int(row), "col": int(col), "block": int(block)}
        for name, limit in (("row", self.rows), ("col", self.cols), ("block", self.blocks)):
            self._check_int(name, coord[name], limit)
        res = []
        for digits in (self.lane, self.reg, self.elem):
            value, place = 0, 1
            for d in digits:
                value += ((coord[d.axis] // d.stride) % d.extent) * place
                place *= d.extent
            res.append(value)
        return tuple(res)

    def _check_int(self, name, value, limit):
        if not 0 <= value < limit:
            raise OutOfRangeError(f"{self.operand}: {name} {value} out of range [0, {limit}) "
                             f"for a {self.rows}x{self.cols}x{self.blocks}-block operand")

    def _check_range(self, name, value, limit):
        import numpy as np
        bad = (value < 0) | (value >= limit)
        if np.any(bad):
            v = int(np.asarray(value)[bad].flat[0]) if np.ndim(value) else int(value)
            raise OutOfRangeError(f"{self.operand}: {name} {v} out of range [0, {limit}) "
                             f"for a {self.rows}x{self.cols}x{self.blocks}-block operand")

    # -- the proof and the whole tables ---------------------------------------------------
    def _prove(self) -> None:
        """The bijection, from the digits alone (the messages of the point-by-point check)."""
        n_slots = self.wave_size * self.reg_slots * self.n_elems
        if n_slots != self.size:
            raise ArgumentError(f"{self.operand}: {n_slots} register slots for {self.size} matrix elements")
        digits = [d for ds in (self.lane, self.reg, self.elem) for d in ds]
        axes = [(name, lim, sorted((d for d in digits if d.axis == name), key=lambda d: (d.stride, d.extent)))
                for name, lim in (("row", self.rows), ("col", self.cols), ("block", self.blocks))]
        for name, lim, mine in axes:
            top = sum((d.extent - 1) * d.stride for d in mine)
            if top >= lim:
                raise ArgumentError(f"{self.operand}: layout sends a slot to {name} {top} (size {lim})")
        for name, lim, mine in axes:
            if self._extent(mine) != lim or any(d.stride != s for d, s in zip(mine, _places(mine))):
                raise ArgumentError(f"{self.operand}: layout is not a bijection (two slots hold one element)")

    def _table_dict(self) -> dict:
        if self._tables is None:
            object.__setattr__(self, "_tables", self._build_and_prove())
        return self._tables

    def _build_and_prove(self) -> dict:
        import numpy as np
        lane, reg, elem = np.meshgrid(np.arange(self.wave_size), np.arange(self.reg_slots),
                                      np.arange(self.n_elems), indexing="ij")
        lane, reg, elem = lane.ravel(), reg.ravel(), elem.ravel()
        if lane.size != self.size:
            raise ArgumentError(f"{self.operand}: {lane.size} register slots for {self.size} matrix elements")
        row, col, block = self.to_matrix(lane, reg, elem)
        for name, v, lim in (("row", row, self.rows), ("col", col, self.cols), ("block", block, self.blocks)):
            if v.min() < 0 or v.max() >= lim:
                raise ArgumentError(f"{self.operand}: layout sends a slot to {name} {v.max()} (size {lim})")
        flat = (block * self.rows + row) * self.cols + col
        if np.any(np.bincount(flat, minlength=self.size) != 1):
            raise ArgumentError(f"{self.operand}: layout is not a bijection (two slots hold one element)")
        back = self.to_register(row, col, block)
        if not all(np.array_equal(a, b) for a, b in zip(back, (lane, reg, elem))):
            raise ArgumentError(f"{self.operand}: inverse map disagrees with forward map")
        table = np.zeros(self.size, dtype=[(n, np.int32) for n in SLOTS + AXES])
        for n, v in zip(SLOTS + AXES, (lane, reg, elem, row, col, block)):
            table[n] = v
        inv = np.zeros((3, self.blocks, self.rows, self.cols), np.int32)
        inv[:, block, row, col] = np.stack([lane, reg, elem])
        for a in (table, inv):
            a.setflags(write=False)
        return {"table": table, "inverse": inv}

    def table(self) -> np.ndarray:
        """Every slot, ordered by (lane, reg, elem): structured array with fields
        lane, reg, elem, row, col, block (read-only)."""
        return self._table_dict()["table"]

    def slot_of(self) -> np.ndarray:
        """Array ``[3, blocks, rows, cols]`` holding (lane, reg, elem) of every element (read-only)."""
        return self._table_dict()["inverse"]

    def matrix_of(self) -> np.ndarray:
        """Array ``[3, reg_slots, elems, lanes]`` holding (row, col, block) of every slot."""
        import numpy as np
        t = self.table()
        out = np.zeros((3, self.reg_slots, self.n_elems, self.wave_size), np.int32)
        for i, a in enumerate(AXES):
            out[i, t["reg"], t["elem"], t["lane"]] = t[a]
        return out

    # -- closed-form formulas ------------------------------------------------------------
    def axis_names(self):
        """Names of (row, col) for this operand, as the ISA tables use them."""
        return {"A": ("i", "k"), "B": ("k", "j"), "C": ("i", "j"), "D": ("i", "j"), "K": ("i", "g")}[self.operand]

    def formulas_to_matrix(self) -> dict:
        """Closed forms (row, col, block) in terms of lane, reg, elem."""
        names = dict(zip(("row", "col"), self.axis_names()), block="block")
        terms = {a: [] for a in AXES}
        for slot, digits in zip(SLOTS, (self.lane, self.reg, self.elem)):
            total, place = self._extent(digits), 1
            for d in digits:
                terms[d.axis].append(_term(slot, place, d.extent, total, d.stride))
                place *= d.extent
        return {names[a]: (" + ".join(sorted(t, key=_term_order)) or "0") for a, t in terms.items()
                if a != "block" or self.blocks > 1}

    def formulas_to_register(self) -> dict:
        """Closed forms (lane, reg, elem) in terms of the matrix coordinates."""
        names = dict(zip(("row", "col"), self.axis_names()), block="block")
        size = {"row": self.rows, "col": self.cols, "block": self.blocks}
        out = {}
        for slot, digits in zip(SLOTS, (self.lane, self.reg, self.elem)):
            parts, place = [], 1
            for d in digits:
                parts.append(_term(names[d.axis], d.stride, d.extent, size[d.axis] // 1, place))
                place *= d.extent
            out[slot] = " + ".join(sorted(parts, key=_term_order)) or "0"
        return out


def _places(digits):
    """1, e1, e1*e2, ...: the strides that make ``digits`` one mixed-radix number."""
    place = 1
    for d in digits:
        yield place
        place *= d.extent


def _term(var, div, extent, total, mul) -> str:
    """Render ``((var // div) % extent) * mul``, dropping the parts that do nothing."""
    s = var if div == 1 else f"{var} // {div}"
    if div * extent < total:
        s = f"{s} % {extent}" if div == 1 else f"({s}) % {extent}"
    if mul == 1:
        return s
    return f"{mul}*{s}" if s == var else f"{mul}*({s})"


def _term_order(t: str):
    # Larger multipliers first reads like the ISA guide: "8*(lane // 16) + 4*reg + elem".
    head = t.split("*", 1)[0]
    return -int(head) if head.isdigit() else 0
