"""Every family of CDNA matrix instruction executed through the asm front end: a hand-written
kernel loads A, B and C register by register from buffers, runs the mnemonic, stores D; D is
compared with a numpy matmul under the record's documented arithmetic (i8: exact int32; float:
the record's accumulator datapath, computed in matrix space; xf32: the inputs cut to 10 mantissa
bits first), over every block.

The host packs the matrices into per-lane registers through AMD's calculator tables (the golden
file), not through gfxsim's records, so a wrong record layout fails here too.
"""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from gfxsim.arch import get_arch
from gfxsim.asm.run import kernel_from_text, run_asm
from gfxsim.machine.memory import Buffer

from support.amd_calculator import byte_tags, inputs, loads, NP, pack, reference, unpack

A_AT, B_AT, C_AT, D_AT = 2, 4, 8, 64       # first VGPR of each operand (C and D: up to 32 VGPRs)


def _kernel(mnemonic: str, insn, arch: str):
    ra, rb, rc, rd = (insn.regs(op) for op in "ABCD")
    rng = lambda first, n: f"v[{first}:{first + n - 1}]" if n > 1 else f"v{first}"
    body = ["s_load_dwordx2 s[4:5], s[0:1], 0x0", "s_load_dwordx2 s[6:7], s[0:1], 0x8",
            "s_load_dwordx2 s[8:9], s[0:1], 0x10", "s_load_dwordx2 s[10:11], s[0:1], 0x18",
            "s_waitcnt lgkmcnt(0)", "v_lshlrev_b32_e32 v1, 2, v0",
            *loads(A_AT, ra, 4), *loads(B_AT, rb, 6), *loads(C_AT, rc, 8), "s_waitcnt vmcnt(0)",
            f"{mnemonic} {rng(D_AT, rd)}, {rng(A_AT, ra)}, {rng(B_AT, rb)}, {rng(C_AT, rc)}", "s_nop 7", "s_nop 7"]
    for r in range(rd):
        if r and r % 16 == 0:
            body += ["s_add_u32 s10, s10, 0x1000", "s_addc_u32 s11, s11, 0"]
        body.append(f"global_store_dword v1, v{D_AT + r}, s[10:11] offset:{(r % 16) * 256}")
    args = [(n, "global_buffer", 8) for n in ("a", "b", "c", "d")]
    return kernel_from_text("\n".join(body), "mfma_" + mnemonic, args=args, vgprs=128, arch=arch)


# at least one instruction of every family, multi-block shapes of each width included
CASES = [
    ("gfx942", "v_mfma_f32_32x32x1_2b_f32"), ("gfx942", "v_mfma_f32_16x16x1_4b_f32"),
    ("gfx942", "v_mfma_f32_4x4x1_16b_f32"), ("gfx942", "v_mfma_f32_16x16x4_f32"), ("gfx90a", "v_mfma_f32_32x32x2f32"),
    ("gfx942", "v_mfma_f32_16x16x8_xf32"), ("gfx942", "v_mfma_f32_32x32x4_xf32"),
    ("gfx942", "v_mfma_f64_16x16x4_f64"), ("gfx942", "v_mfma_f64_4x4x4_4b_f64"), ("gfx90a", "v_mfma_f64_4x4x4f64"),
    ("gfx942", "v_mfma_f32_32x32x4_2b_f16"), ("gfx942", "v_mfma_f32_16x16x4_4b_f16"),
    ("gfx942", "v_mfma_f32_4x4x4_16b_bf16"), ("gfx942", "v_mfma_f32_32x32x8_bf16"),
    ("gfx942", "v_mfma_f32_16x16x4f16"),          # gfx942 takes the CDNA2 spelling too
    ("gfx90a", "v_mfma_f32_32x32x2bf16"), ("gfx90a", "v_mfma_f32_16x16x8bf16"), ("gfx90a", "v_mfma_f32_4x4x4bf16_1k"),
    ("gfx942", "v_mfma_i32_32x32x4_2b_i8"), ("gfx942", "v_mfma_i32_16x16x4_4b_i8"),
    ("gfx942", "v_mfma_i32_4x4x4_16b_i8"), ("gfx90a", "v_mfma_i32_32x32x4i8"), ("gfx90a", "v_mfma_i32_16x16x16i8"),
    *(("gfx942", f"v_mfma_f32_{s}_{x}_{y}") for s in ("16x16x32", "32x32x16") for x in ("fp8", "bf8")
      for y in ("fp8", "bf8")),
]


@pytest.mark.parametrize("arch,mnemonic", CASES)
def test_mfma_executes_as_the_numpy_reference(arch, mnemonic):
    insn = get_arch(arch).instruction(mnemonic)
    a, b, c = inputs(insn, np.random.default_rng(zlib.crc32(mnemonic.encode())))
    bufs = {op: Buffer(op.lower(), pack(arch, mnemonic, op, m, insn.regs(op)).reshape(-1))
            for op, m in (("A", a), ("B", b), ("C", c))}
    d = Buffer.empty("d", (insn.regs("D") * 64,), np.uint32)
    run = run_asm(_kernel(mnemonic, insn, arch), args={**{k.lower(): v for k, v in bufs.items()}, "d": d},
                  arch=arch)
    assert not run.findings, [f.message for f in run.findings]
    got = unpack(arch, mnemonic, d.array, insn, NP[insn.cd_type])
    want = reference(insn, a, b, c)
    assert np.array_equal(got, want), f"{mnemonic}: {int((got != want).sum())} of {got.size} elements differ"


@pytest.mark.parametrize("arch,mnemonic", [("gfx942", "v_mfma_f64_16x16x4_f64"), ("gfx90a", "v_mfma_f64_4x4x4f64"),
                                           ("gfx942", "v_mfma_f32_16x16x4_4b_f16"),
                                           ("gfx942", "v_mfma_i32_4x4x4_16b_i8"), ("gfx90a", "v_mfma_f32_32x32x2bf16")])
@pytest.mark.parametrize("aligned", [True, False])
def test_k_slot_provenance_through_every_block(arch, mnemonic, aligned):
    """A and B tagged by their K index: one token per K slot in every block (no finding); B's tags
    shifted by one K slot in the last block only: the K-slot check names the mismatch. Two
    workgroups side by side (batch=2)."""
    insn = get_arch(arch).instruction(mnemonic)
    a, b, c = inputs(insn, np.random.default_rng(7))
    last = insn.blocks - 1
    shift = lambda blk: 0 if aligned else (blk == last).astype(np.int64)
    tags = {"A": lambda r, k, blk: k, "B": lambda k, j, blk: (k + shift(blk)) % insn.K}
    bufs = {}
    for op, m in (("A", a), ("B", b), ("C", c)):
        raw = pack(arch, mnemonic, op, m, insn.regs(op)).reshape(-1).view(np.uint8)
        t = {"token": byte_tags(arch, mnemonic, op, insn.regs(op), tags[op])} if op in tags else None
        bufs[op.lower()] = Buffer(op.lower(), raw, t)
    d = Buffer.empty("d", (insn.regs("D") * 64,), np.uint32)
    run = run_asm(_kernel(mnemonic, insn, arch), grid=(2,), batch=2, args={**bufs, "d": d}, arch=arch)
    kinds = [f.kind for f in run.findings]
    if aligned or insn.K == 1:
        assert kinds == [], [f.message for f in run.findings]
    else:
        assert set(kinds) == {"ab-kslot-mismatch"}, [f.message for f in run.findings]
    assert np.array_equal(unpack(arch, mnemonic, d.array, insn, NP[insn.cd_type]), reference(insn, a, b, c))


@pytest.mark.parametrize("arch,mnemonic,a_reg", [("gfx942", "v_mfma_f64_4x4x4_4b_f64", "f64"),
                                                 ("gfx90a", "v_mfma_f64_16x16x4f64", "f64"),
                                                 ("gfx942", "v_mfma_f32_16x16x8_xf32", "f32"),
                                                 ("gfx942", "v_mfma_f32_16x16x8_xf32", "xf32")])
def test_python_front_end_takes_f64_and_fp32_registers_for_xf32(arch, mnemonic, a_reg):
    """w.mma with per-lane values placed by the record: f64 operands one element per register pair,
    and an xf32 instruction reading plain f32 registers (xf32 is how the unit reads them)."""
    from gfxsim.machine import launch
    insn = get_arch(arch).instruction(mnemonic)
    a, b, c = inputs(insn, np.random.default_rng(3))
    got = {}

    def per_lane(op, mat, dtype):
        lane, reg, elem = insn.operand(op).slot_of()
        lay = insn.operand(op)
        vals = np.zeros((insn.elems(op), 64), NP[dtype])
        vals[reg * lay.n_elems + elem, lane] = mat
        return vals

    def kernel(w):
        va = w.from_lanes(per_lane("A", a, a_reg), a_reg)
        vb = w.from_lanes(per_lane("B", b, a_reg), a_reg)
        vc = w.from_lanes(per_lane("C", c, insn.cd_type), insn.cd_type)
        got["d"] = w.mma(mnemonic, va, vb, vc).val.copy()

    launch(kernel, arch=arch)
    lane, reg, elem = insn.operand("D").slot_of()
    assert np.array_equal(got["d"][reg * insn.operand("D").n_elems + elem, lane], reference(insn, a, b, c))
    assert got["d"].shape == (insn.elems("D"), 64)
