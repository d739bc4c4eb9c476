"""The record of one matrix instruction (v_mfma_* / v_mmac_*) and builders for its layouts."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from collections.abc import Mapping

from .dtypes import ElemType, elem_type
from .layout import OperandLayout
from ..errors import ArgumentError

OPERANDS = ("A", "B", "C", "D")
OPERAND_FIELDS = {"A": "Src0", "B": "Src1", "C": "Src2", "D": "Vdst"}
MODIFIERS = ("cbsz", "abid", "blgp")


ROUNDINGS = ("nearest", "truncate")
C_ENTRIES = ("exact", "fused", "after", "two_stage", "fma", "ftz_tree")


@dataclass(frozen=True)
class AccumulatorPrecision:
    """How one matrix instruction turns K products and C into D: how products are grouped, where
    they are cut, where C joins and at what width, how the result is rounded. ``mantissa_bits``
    None with ``c_entry`` "exact" means exact in the C/D type (int32: exact, overflow detected;
    f32: the K-sum plus C rounded once to fp32).

    ``c_entry`` names the datapath:
      "exact"     the exact sum of products and C, rounded to fp32 and then (``mantissa_bits``
                  set) to that many mantissa bits (SageAttention2's "FP22" read as a rounding);
      "fused"     a fused multi-term adder: C and the products of one step are aligned to the
                  largest exponent among them, each cut to ``mantissa_bits`` fraction bits below
                  it, summed exactly and rounded to fp32 (NVIDIA HMMA/QGMMA);
      "after"     the products alone go through the fused adder, then C joins by an fp32 add;
      "two_stage" the products of one step go through the fused adder (``mantissa_bits`` = F),
                  their sum meets C in a second adder ``c_bits`` (F2) wide: both aligned to the
                  larger of the two exponents, the products' sum cut toward -inf to F2 + 1
                  fraction bits, C to F, the sum renormalised and cut toward -inf to F2 bits, then
                  rounded to fp32 (CDNA3 v_mfma f16/bf16/xf32/fp8);
      "fma"       one fused multiply-add per K index in the C/D type (CDNA f32/f64 v_mfma);
      "ftz_tree"  fp32 products added pairwise within each step of ``step`` products, each
                  step's sum added to C, every fp32 operation rounded to nearest even with
                  denormal inputs, products and sums flushed to zero (CDNA2 f16/bf16 v_mfma).
    ``rounding``: what happens to the bits a cut drops, "truncate" (toward zero) or "nearest"
    (ties to even); ``final_rounding`` (None: ``rounding``) rounds the result to fp32.
    Steps: ``k_steps`` lists the K indices of each (in order), or ``step`` products per step for
    any K (None and None: all K in one step); each step's fp32 result is the next step's C.
    ``interleave``: a step's products split into that many groups by k % interleave, each group
    fused on its own, the groups' sums then aligned and cut to ``mantissa_bits`` again (CDNA3 FP8:
    2, even and odd K). A product's alignment exponent is the sum of its inputs' exponents, an input
    below the normal range counting as its type's smallest normal exponent; a zero term takes
    ``zero_exponent`` in "fused" (None: it never sets the alignment; NVIDIA's adders give zero an
    exponent below fp32's range, which cuts products far smaller still), and a zero sum is +0.
    ``result_bits`` cuts each step's result to that many mantissa bits (the H200's QGMMA writes 13:
    FP22 = 1 + 8 + 13). ``nan``: the bits of every NaN result (None: as the host's arithmetic makes
    them); ``c_far_drops``: in "two_stage", a C more than ``mantissa_bits`` + 1 binades below the
    alignment is dropped instead of cut toward -inf (CDNA3 FP8). ``measured`` says what checked the
    model bit for bit (empty: nothing has).
    The arithmetic is ``gfxsim.machine.accum``."""
    mantissa_bits: int | None = None
    note: str = "exact"
    rounding: str = "nearest"
    c_entry: str = "exact"
    source: str = ""
    k_steps: tuple[tuple[int, ...], ...] | None = None   # K indices of each fused step (None: see step)
    result_bits: int | None = None   # mantissa bits each step's result keeps (None: fp32's 23)
    step: int | None = None          # products per step, any K (None: all K at once)
    interleave: int = 1              # independent fused groups within a step (k % interleave)
    c_bits: int | None = None        # width of the adder where C joins ("two_stage": F2)
    final_rounding: str | None = None
    zero_exponent: int | None = None
    nan: int | None = None
    c_far_drops: bool = False        # "two_stage": a C below the adder's window is dropped, not cut to -1 ulp
    measured: str = ""

    def __post_init__(self):
        for r in (self.rounding, self.final_rounding or self.rounding):
            if r not in ROUNDINGS:
                raise ArgumentError(f"accumulator rounding {r!r} is not one of {ROUNDINGS}")
        if self.c_entry not in C_ENTRIES:
            raise ArgumentError(f"accumulator c_entry {self.c_entry!r} is not one of {C_ENTRIES}")
        if self.mantissa_bits is not None and not 1 <= self.mantissa_bits <= 40:
            raise ArgumentError(f"accumulator mantissa_bits {self.mantissa_bits} outside 1..40")
        if self.c_entry in ("fused", "after", "two_stage") and self.mantissa_bits is None:
            raise ArgumentError(f"accumulator c_entry {self.c_entry!r} needs mantissa_bits")
        if self.c_entry == "two_stage" and not (self.c_bits or 0) >= (self.mantissa_bits or 0):
            raise ArgumentError("accumulator c_entry 'two_stage' needs c_bits >= mantissa_bits")
        if self.c_entry == "ftz_tree" and self.step not in (2, 4):
            raise ArgumentError("accumulator c_entry 'ftz_tree' adds steps of 2 or 4 products")
        if self.interleave < 1 or (self.step is not None and self.step % self.interleave):
            raise ArgumentError(f"accumulator interleave {self.interleave} does not split a step of {self.step}")
        if self.k_steps is not None and sorted(k for st in self.k_steps for k in st) != list(
                range(sum(len(st) for st in self.k_steps))):
            raise ArgumentError("accumulator k_steps must split 0..K-1, each K index once")

    @property
    def is_exact(self) -> bool:
        """True for the exact model (one rounding of the exact K-sum plus C, no reduced width)."""
        return self.c_entry == "exact" and self.mantissa_bits is None

    def as_dict(self) -> dict:
        return {"mantissa_bits": self.mantissa_bits, "rounding": self.rounding, "c_entry": self.c_entry,
                "k_steps": [list(st) for st in self.k_steps] if self.k_steps else None,
                "result_bits": self.result_bits, "step": self.step, "interleave": self.interleave,
                "c_bits": self.c_bits, "final_rounding": self.final_rounding or self.rounding,
                "zero_exponent": self.zero_exponent, "nan": None if self.nan is None else f"{self.nan:#010x}",
                "c_far_drops": self.c_far_drops, "measured": self.measured or None,
                "note": self.note, "source": self.source}


@dataclass(frozen=True)
class MatrixInstruction:
    """One matrix instruction, frozen. Everything else (execution, tables, plots) derives from it.

    Operand shapes: A is M x K, B is K x N, C and D are M x N, each per block. A sparse
    instruction (v_smfmac_*: A 4:2 structured along K) holds A compressed: its layout is of the
    M x K/2 matrix whose column 2*g + s is the s-th stored value of A's group g (K 4g..4g+3), and
    ``index`` is the layout of the M x K/4 matrix of 4-bit compression fields (Src2), field g
    holding the positions within the group of its two stored values (bits 1:0 and 3:2).
    """
    mnemonic: str                 # verbatim ISA name
    M: int
    N: int
    K: int
    blocks: int
    a_type: str
    b_type: str
    cd_type: str
    layouts: Mapping[str, OperandLayout]
    source: str                   # where the layout was taken from
    cycles: int | None = None  # pass cycles, where the vendor publishes them
    builtin: str | None = None  # compiler builtin that emits it
    accumulator: AccumulatorPrecision = field(default_factory=AccumulatorPrecision)
    notes: str = ""
    modifiers: tuple[str, ...] = ()   # the VOP3P-MAI modifiers it accepts: "cbsz", "abid", "blgp"
    index: OperandLayout | None = None   # sparse A's compression index (v_smfmac_*), else None
    _dense: MatrixInstruction | None = field(default=None, repr=False, compare=False)   # dense_form, made once

    def __post_init__(self):
        if set(self.layouts) != set(OPERANDS):
            raise ArgumentError(f"{self.mnemonic}: layouts must name exactly {OPERANDS}")
        if not set(self.modifiers) <= set(MODIFIERS):
            raise ArgumentError(f"{self.mnemonic}: modifiers {self.modifiers} not among {MODIFIERS}")
        want = {"A": (self.M, self.K // 2 if self.sparse else self.K), "B": (self.K, self.N),
                "C": (self.M, self.N), "D": (self.M, self.N)}
        if self.sparse and (self.K % 4 or self.index.rows != self.M or self.index.cols != self.K // 4
                            or self.index.elem_bits != 4 or self.index.blocks != self.blocks):
            raise ArgumentError(f"{self.mnemonic}: a sparse record needs K a multiple of 4 and an M x K/4 "
                                f"index of 4-bit fields")
        bits = {"A": self.a.bits, "B": self.b.bits, "C": self.cd.bits, "D": self.cd.bits}
        for op, lay in self.layouts.items():
            if (lay.rows, lay.cols, lay.blocks) != (*want[op], self.blocks):
                raise ArgumentError(f"{self.mnemonic}: operand {op} layout is {lay.rows}x{lay.cols}x{lay.blocks}, "
                                 f"expected {want[op][0]}x{want[op][1]}x{self.blocks}")
            if lay.elem_bits != bits[op]:
                raise ArgumentError(f"{self.mnemonic}: operand {op} layout uses {lay.elem_bits}-bit elements, "
                                 f"type says {bits[op]}")

    @property
    def sparse(self) -> bool:
        """A is 4:2 structured sparse, held compressed, with a compression index (v_smfmac_*)."""
        return self.index is not None

    @property
    def dense_form(self) -> MatrixInstruction:
        """A sparse record's dense form: the instruction the matrix unit runs once the compression
        index has put A's stored values back at their K positions (zeros elsewhere). Its A is the
        dense M x K operand of the same layout family; a lane's dense values are exactly the groups
        its compressed values come from (compressed columns 2g, 2g+1 are group g, K 4g..4g+3), so
        the expansion never moves a value to another lane. B, C, D, accumulator and name are the record's."""
        if not self.sparse:
            raise ArgumentError(f"{self.mnemonic} is not a sparse instruction")
        if self._dense is None:
            dense = replace(self, layouts={**self.layouts, "A": ab_kgroups("A", self.M, self.K, self.a.bits)},
                            index=None, notes=f"dense form of {self.mnemonic} (A expanded by its compression index)")
            object.__setattr__(self, "_dense", dense)
        return self._dense

    @property
    def index_sets(self) -> int:
        """Sets of compression fields one 32-bit Src2 holds: two bits per compressed value of a lane."""
        return 32 // (2 * self.elems("A")) if self.sparse else 0

    @property
    def a(self) -> ElemType:
        return elem_type(self.a_type)

    @property
    def b(self) -> ElemType:
        return elem_type(self.b_type)

    @property
    def cd(self) -> ElemType:
        return elem_type(self.cd_type)

    def reads(self, operand: str) -> str | None:
        """The byte encoding operand A or B is read in (its element type's, ``dtypes.ENCODINGS``:
        gfx942's fp8/bf8 read e4m3fnuz/e5m2fnuz, NVIDIA's e4m3 reads OCP e4m3fn); None for C and
        for types whose encoding is not tracked."""
        key = operand.upper()
        if key not in ("A", "B", "C", "D"):
            raise ArgumentError(f"{self.mnemonic}: unknown operand {operand!r}; operands are A, B, C, D")
        return (self.a if key == "A" else self.b).encoding if key in "AB" else None

    def operand(self, name: str) -> OperandLayout:
        key = name.upper()
        if key not in self.layouts:
            raise ArgumentError(f"{self.mnemonic}: unknown operand {name!r}; operands are A, B, C, D")
        return self.layouts[key]

    def elem_type_of(self, name: str) -> ElemType:
        return {"A": self.a, "B": self.b, "C": self.cd, "D": self.cd}[self.operand(name).operand]

    def regs(self, name: str) -> int:
        """VGPRs per lane of the operand."""
        return self.operand(name).n_regs

    def elems(self, name: str) -> int:
        """Elements of the operand's type per lane (an f64 operand: half its VGPRs)."""
        return self.operand(name).elems_per_lane

    @property
    def wave_size(self) -> int:
        return self.layouts["A"].wave_size

    @property
    def ops(self) -> int:
        return 2 * self.M * self.N * self.K * self.blocks


# -- layout builders: one per layout family in the vendor tables ------------------------------

def ab_kgroups(op: str, mn: int, k: int, bits: int, wave: int = 64, blocks: int = 1) -> OperandLayout:
    """A (MxK) or B (KxN) of a CDNA/MMAC instruction: lane = mn + MN*block + MN*blocks*(k // kpl),
    the lane's kpl consecutive k values packed into registers little-endian (a 64-bit value takes
    a register pair). (CDNA3 16x16x32 i8: A[i][k] at lane i + 16*(k//8), reg (k//4)%2, byte k%4;
    4x4x4_16b f16: A[i][k] of block b at lane i + 4*b, reg k//2, half k%2; 4x4x4_4b f64: A[i][k]
    of block b at lane i + 4*b + 16*k.)"""
    if wave % (mn * blocks):
        raise ArgumentError(f"{op}: {mn} x {blocks} blocks do not tile a wave of {wave}")
    groups = wave // (mn * blocks)
    if k % groups:
        raise ArgumentError(f"{op}: K={k} does not split over {groups} lane groups")
    kpl, epr = k // groups, max(32 // bits, 1)
    mn_axis, k_axis = ("row", "col") if op == "A" else ("col", "row")
    return OperandLayout(op, *((mn, k) if op == "A" else (k, mn)), blocks, bits,
                         lane=[(mn, mn_axis, 1), (blocks, "block", 1), (groups, k_axis, kpl)],
                         reg=[(max(kpl // epr, 1), k_axis, epr)],
                         elem=[(min(epr, kpl), k_axis, 1)], wave_size=wave)


def cd_cdna(op: str, m: int, n: int, bits: int = 32, wave: int = 64, blocks: int = 1) -> OperandLayout:
    """CDNA C/D: lane%N is the column. 32-bit: each lane holds 4 consecutive rows per register
    group (16x16: D[i][j] at lane j + 16*(i//4), reg i%4; 32x32: lane j + 32*((i//4)%2),
    reg 4*(i//8) + i%4), further blocks in further registers (16x16x1_4b: reg i%4 + 4*block),
    except 4x4 shapes, whose blocks take lanes (D[i][j] of block b at lane j + 4*b, reg i).
    64-bit: one row per register pair (f64 16x16x4: D[i][j] at lane j + 16*(i%4), pair i//4;
    4x4x4_4b: lane j + 4*block + 16*i)."""
    lane_blocks = blocks if m == 4 else 1
    rows_run = 4 if bits <= 32 else 1          # rows a lane holds in consecutive registers
    groups = wave // (n * lane_blocks)
    if wave % (n * lane_blocks) or m % (rows_run * groups):
        raise ArgumentError(f"{op}: a {m}x{n}x{blocks}-block result does not fit the CDNA layout")
    return OperandLayout(op, m, n, blocks, bits,
                         lane=[(n, "col", 1), (lane_blocks, "block", 1), (groups, "row", rows_run)],
                         reg=[(rows_run, "row", 1), (m // (rows_run * groups), "row", rows_run * groups),
                              (blocks // lane_blocks, "block", lane_blocks)],
                         elem=[], wave_size=wave)


def cd_jump(op: str, m: int = 16, n: int = 16, bits: int = 32, wave: int = 64) -> OperandLayout:
    """Hygon gfx936/gfx928 MMAC C/D, the "jump" layout: D[m][n] at lane m + 16*(n%4), reg n//4.
    lane%16 is the row; a lane's 4 registers hold columns rowid + 4*i."""
    groups = wave // m
    return OperandLayout(op, m, n, 1, bits,
                         lane=[(m, "row", 1), (groups, "col", 1)],
                         reg=[(n // groups, "col", groups)],
                         elem=[], wave_size=wave)
