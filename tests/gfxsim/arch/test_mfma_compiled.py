"""Matrix instructions as clang compiles them: an OpenCL C kernel (clang-19, -nogpulib) reads each
lane's A, B and C registers from buffers, calls the record's builtin and stores D; its .s runs on
the asm front end (clang's register allocation: AGPRs, accvgpr moves, register pairs) and D is
compared with the exact reference. Inputs are packed by AMD's calculator tables (a v_smfmac_*'s
compression index read per lane from a buffer too)."""
from __future__ import annotations

import subprocess
import zlib

import numpy as np
import pytest
from support import need_toolchain

from gfxsim.arch import get_arch
from gfxsim.asm import parse_file
from gfxsim.asm.run import run_asm
from gfxsim.machine.memory import Buffer
from support.amd_calculator import NP, builtin_type, inputs, pack, pack_sparse, reference, sparse_a, unpack


def _source(insn) -> str:
    """One kernel: union each operand's VGPR words with the builtin's vector type."""
    sparse = insn.sparse
    lines = ["kernel void mm(global const uint *a, global const uint *b, global const uint *c, "
             "global const uint *ix, global uint *d) {", "  uint l = __builtin_amdgcn_workitem_id_x();"]
    types = ["#pragma OPENCL EXTENSION cl_khr_fp16 : enable"]       # OpenCL's half is the builtins' f16
    types += [f"typedef {builtin_type(t, insn.elems(op), sparse).replace('_Float16', 'half')} T{op};" for op, t in
             (("A", insn.a_type), ("B", insn.b_type), ("C", insn.cd_type), ("D", insn.cd_type))]
    for op, src in (("A", "a"), ("B", "b"), ("C", "c")):
        n = insn.regs(op)
        lines += [f"  union {{ uint w[{n}]; T{op} v; }} u{op};",
                  f"  for (int r = 0; r < {n}; ++r) u{op}.w[r] = {src}[r * 64 + l];"]
    n = insn.regs("D")
    extra = "ix[l], 0, 0" if sparse else "0, 0, 0"
    lines = types + lines
    lines += [f"  union {{ uint w[{n}]; TD v; }} uD;",
              f"  uD.v = {insn.builtin}(uA.v, uB.v, uC.v, {extra});",
              f"  for (int r = 0; r < {n}; ++r) d[r * 64 + l] = uD.w[r];", "}"]
    return "\n".join(lines) + "\n"


# gfx942 only: a gfx90a kernel's descriptor asks for the pre-gfx940 private segment buffer user SGPRs,
# which the asm launch does not set up yet (its gfx90a records run in the hand-written snippets of
# test_mfma_execution.py)
CASES = [("gfx942", "v_mfma_f64_16x16x4_f64"), ("gfx942", "v_mfma_f64_4x4x4_4b_f64"), ("gfx942", "v_mfma_f32_16x16x8_xf32"),
         ("gfx942", "v_mfma_f32_32x32x1_2b_f32"), ("gfx942", "v_mfma_f32_16x16x1_4b_f32"),
         ("gfx942", "v_mfma_f32_4x4x4_16b_f16"), ("gfx942", "v_mfma_f32_32x32x4_2b_bf16"),
         ("gfx942", "v_mfma_i32_16x16x4_4b_i8"), ("gfx942", "v_mfma_i32_32x32x4_2b_i8"),
         ("gfx942", "v_mfma_f32_32x32x16_bf8_fp8"), ("gfx942", "v_smfmac_f32_16x16x32_f16")]


@pytest.mark.parametrize("arch,mnemonic", CASES)
def test_clang_compiled_matrix_instruction_runs(arch, mnemonic, tmp_path):
    tc = need_toolchain("gfx942")
    insn = get_arch(arch).instruction(mnemonic)
    src, asm = tmp_path / "mm.cl", tmp_path / "mm.s"
    src.write_text(_source(insn))
    subprocess.run([str(tc.clang), "--target=amdgcn-amd-amdhsa", f"-mcpu={arch}", "-nogpulib", "-O2", "-x", "cl",
                    "-cl-std=CL2.0", "-cl-kernel-arg-info", "-S", "-o", str(asm), str(src)],
                   check=True, capture_output=True, text=True)
    assert mnemonic in asm.read_text()
    rng = np.random.default_rng(zlib.crc32(mnemonic.encode()))
    a, b, c = inputs(insn, rng)
    index = np.zeros(64, np.uint32)
    if insn.sparse:                                    # A 4:2 sparse: compressed, index set 0
        a, pos, vals = sparse_a(insn, rng)
        a_words, index = pack_sparse(mnemonic, vals, pos, 0, rng)
    packed = {op: pack(arch, mnemonic, "D" if op == "C" and insn.sparse else op, m, insn.regs(op))
              for op, m in (("A", a), ("B", b), ("C", c)) if not (op == "A" and insn.sparse)}
    if insn.sparse:
        packed["A"] = a_words
    bufs = {op.lower(): Buffer(op.lower(), w.reshape(-1)) for op, w in packed.items()}
    d = Buffer.empty("d", (insn.regs("D") * 64,), np.uint32)
    run = run_asm(parse_file(asm).kernel("mm"), args={**bufs, "ix": Buffer("ix", index), "d": d}, arch=arch)
    assert not run.findings, [f.message for f in run.findings]
    got = unpack(arch, mnemonic, d.array, insn, NP[insn.cd_type])
    assert np.array_equal(got, reference(insn, a, b, c)), f"{int((got != reference(insn, a, b, c)).sum())} differ"
