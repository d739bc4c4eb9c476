"""AMD's matrix instruction calculator as the tests use it: its golden tables
(tests/gfxsim/arch/golden/amd_calculator.json.gz, made by hw_probes/amd_calculator/make_golden.py),
matrices packed into per-lane registers and read back through those tables (never through
gfxsim's records), random operands and exact references for the matrix instructions."""
from __future__ import annotations

import gzip
import json
from fractions import Fraction
from functools import cache
from pathlib import Path

import ml_dtypes
import numpy as np

from gfxsim.arch import get_arch
from gfxsim.machine.accum import mma_f32

GOLDEN = Path(__file__).resolve().parents[1] / "gfxsim" / "arch" / "golden" / "amd_calculator.json.gz"
ARCH_OF = {"CDNA2": "gfx90a", "CDNA3": "gfx942"}
FAMILY = {v: k for k, v in ARCH_OF.items()}
NP = {"f32": np.float32, "xf32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
      "fp8": ml_dtypes.float8_e4m3fnuz, "bf8": ml_dtypes.float8_e5m2fnuz, "i8": np.int8, "i32": np.int32}


@cache
def golden() -> dict:
    with gzip.open(GOLDEN, "rt") as f:
        return json.load(f)


def loads(first: int, regs: int, sbase: int) -> list[str]:
    """Load registers first.. from buffer s[sbase:sbase+1], laid out [regs][64 lanes] of dwords."""
    out = []
    for r in range(regs):
        if r and r % 16 == 0:              # global offsets reach 4095 bytes: move the base instead
            out += [f"s_add_u32 s{sbase}, s{sbase}, 0x1000", f"s_addc_u32 s{sbase + 1}, s{sbase + 1}, 0"]
        out.append(f"global_load_dword v{first + r}, v1, s[{sbase}:{sbase + 1}] offset:{(r % 16) * 256}")
    return out


def pack(arch: str, mnemonic: str, op: str, mat: np.ndarray, regs: int) -> np.ndarray:
    """[blocks, rows, cols] values -> [regs, 64] dwords, placed by the calculator's table."""
    g = golden()["archs"][FAMILY[arch]][get_arch(arch).instruction(mnemonic).mnemonic]["layouts"][op]
    raw = np.zeros((regs, 64, 4), np.uint8)
    for (first, count, lo, bits), cells in zip(g["columns"], g["cells"]):
        idx = np.array(cells)
        vals = np.ascontiguousarray(mat[idx[:, 2], idx[:, 0], idx[:, 1]])
        by = vals.view(np.uint8).reshape(64, -1)                 # [lanes, bytes of one element]
        for w in range(count):
            nb = min(4, bits // 8)
            raw[first + w, :, lo // 8:lo // 8 + nb] = by[:, 4 * w:4 * w + nb]
    return raw.view(np.uint32)[..., 0]


def unpack(arch: str, mnemonic: str, words: np.ndarray, insn, dt) -> np.ndarray:
    g = golden()["archs"][FAMILY[arch]][insn.mnemonic]["layouts"]["D"]
    out = np.zeros((insn.blocks, insn.M, insn.N), dt)
    raw = words.reshape(-1, 64).view(np.uint8).reshape(-1, 64, 4)
    for (first, count, lo, bits), cells in zip(g["columns"], g["cells"]):
        idx = np.array(cells)
        by = np.concatenate([raw[first + w] for w in range(count)], axis=1)[:, :bits // 8]
        out[idx[:, 2], idx[:, 0], idx[:, 1]] = np.ascontiguousarray(by).view(dt)[:, 0]
    return out


def byte_tags(arch: str, mnemonic: str, op: str, regs: int, tag) -> np.ndarray:
    """int32 per byte of the [regs][64] dword buffer: ``tag(row, col, block)`` of the element it holds."""
    g = golden()["archs"][FAMILY[arch]][mnemonic]["layouts"][op]
    out = np.full((regs, 64, 4), -1, np.int32)
    for (first, count, lo, bits), cells in zip(g["columns"], g["cells"]):
        idx = np.array(cells)
        t = tag(idx[:, 0], idx[:, 1], idx[:, 2])
        for w in range(count):
            out[first + w, :, lo // 8:lo // 8 + min(4, bits // 8)] = t[:, None]
    return out.reshape(-1)


def inputs(insn, rng):
    def values(t, shape):
        if t == "i8":
            return rng.integers(-128, 128, shape).astype(np.int8)
        if t == "i32":
            return rng.integers(-2 ** 20, 2 ** 20, shape).astype(np.int32)
        scale = {"fp8": 4.0, "bf8": 4.0}.get(t, 1.0)
        return (rng.standard_normal(shape) * scale).astype(NP[t])
    bl, M, N, K = insn.blocks, insn.M, insn.N, insn.K
    return values(insn.a_type, (bl, M, K)), values(insn.b_type, (bl, K, N)), values(insn.cd_type, (bl, M, N))


def xf32(x):
    return (np.asarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def reference(insn, a, b, c) -> np.ndarray:
    """D by exact rational arithmetic, rounded once to the C/D type, or by the record's accumulator."""
    if insn.a_type == "xf32":
        a, b = xf32(a), xf32(b)
    if insn.cd_type == "i32":
        return (np.einsum("bmk,bkn->bmn", a.astype(np.int64), b.astype(np.int64)) + c).astype(np.int32)
    if not insn.accumulator.is_exact:       # the record's datapath, in matrix space (test_mmasim_golden checks it)
        return mma_f32(insn.accumulator, a, b, c.astype(NP[insn.cd_type]), insn.a_type, insn.b_type)
    fa, fb, fc = (np.vectorize(Fraction, otypes=[object])(x.astype(np.float64)) for x in (a, b, c))
    exact = np.einsum("bmk,bkn->bmn", fa, fb) + fc
    return np.vectorize(float)(exact).astype(NP[insn.cd_type])


SCALAR = {"f32": "float", "xf32": "float", "f16": "_Float16", "bf16": "short", "f64": "double", "i32": "int"}


def builtin_type(t: str, n: int, sparse: bool = False) -> str:
    """The builtin's operand type: packed 8-bit values travel as int (4), long (8; two ints for
    v_smfmac_*) or four ints (16)."""
    if t in ("i8", "fp8", "bf8"):
        return {4: "int", 8: builtin_type("i32", 2) if sparse else "long", 16: builtin_type("i32", 4)}[n]
    return SCALAR[t] if n == 1 else f"{SCALAR[t]} __attribute__((ext_vector_type({n})))"


def sparse_a(insn, rng):
    """(dense A [1, M, K] with two nonzeros per group of four K, positions [M, K/4, 2])."""
    M, G = insn.M, insn.K // 4
    pos = np.array([[rng.permutation(4)[:2] for _ in range(G)] for _ in range(M)])
    vals = inputs(insn, rng)[0][0, :, :2 * G].reshape(M, G, 2)
    vals = np.where(vals == 0, np.ones((), vals.dtype), vals)          # stored values are nonzero
    dense = np.zeros((1, M, insn.K), vals.dtype)
    for s in range(2):
        dense[0, np.arange(M)[:, None], 4 * np.arange(G)[None, :] + pos[:, :, s]] = vals[:, :, s]
    return dense, pos, vals


def pack_sparse(mnemonic: str, vals, pos, index_set: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """(A's words [regs, 64], the index word per lane) placed by the calculator's A and K tables;
    the index sets other than ``index_set`` hold random fields."""
    g = golden()["archs"]["CDNA3"][mnemonic]["layouts"]
    eb = vals.dtype.itemsize
    regs = 1 + max(c[0] for c in g["A"]["columns"])
    raw = np.zeros((regs, 64, 4), np.uint8)
    for (first, _, lo, bits), cells in zip(g["A"]["columns"], g["A"]["cells"]):
        c = np.array(cells)
        two = np.ascontiguousarray(vals[c[:, 0], c[:, 1] // 4]).view(np.uint8).reshape(64, 2 * eb)
        raw[first, :, lo // 8:lo // 8 + 2 * eb] = two
    width = 4 * len(g["K"]["columns"])                      # bits of one index set
    index = rng.integers(0, 2 ** 32, 64, dtype=np.uint64) & ~np.uint64(((1 << width) - 1) << (width * index_set))
    for (_, _, lo, _), cells in zip(g["K"]["columns"], g["K"]["cells"]):
        c = np.array(cells)
        p = pos[c[:, 0], c[:, 1] // 4]
        index |= ((p[:, 0] | (p[:, 1] << 2)).astype(np.uint64) << np.uint64(lo + width * index_set))
    return raw.view(np.uint32)[..., 0], index.astype(np.uint32)
