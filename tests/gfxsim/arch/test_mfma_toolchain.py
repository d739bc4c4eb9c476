"""Every CDNA record's mnemonic and builtin as LLVM spells them: clang compiles each record's
builtin for its target and emits exactly the record's mnemonic; llvm-mc assembles the mnemonic
(and gfx942's CDNA2 spellings) with the record's register counts and prints the record's name.
Skips without clang-19 (fails under GFXSIM_REQUIRE_TOOLCHAIN=1, as CI sets)."""
from __future__ import annotations

import re
import subprocess

import pytest
from support import need_toolchain

from gfxsim.arch import get_arch
from support.amd_calculator import builtin_type as _ctype

ARCHS = ("gfx942", "gfx90a")
def _source(arch) -> str:
    out = []
    for i, insn in enumerate(arch.instructions.values()):
        ta, tb, tc = (_ctype(t, insn.elems(op), insn.sparse) for op, t in (("A", insn.a_type), ("B", insn.b_type),
                                                                              ("C", insn.cd_type)))
        idx = "ix, " if insn.sparse else ""          # v_smfmac_*: the compression index, then CBSZ, ABID
        mods = "0, 0" if insn.sparse else "0, 0, 0"
        out.append(f"typedef {ta} A{i}; typedef {tb} B{i}; typedef {tc} C{i};\n"
                   f"void k{i}(A{i} *a, B{i} *b, C{i} *c, int ix) {{ c[0] = {insn.builtin}(a[0], b[0], c[0], "
                   f"{idx}{mods}); }}")
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("arch_name", ARCHS)
def test_each_builtin_emits_the_records_mnemonic(arch_name, tmp_path):
    tc = need_toolchain("gfx942")
    arch = get_arch(arch_name)
    src = tmp_path / "mfma.c"
    src.write_text(_source(arch))
    asm = tmp_path / "mfma.s"
    subprocess.run([str(tc.clang), "--target=amdgcn-amd-amdhsa", f"-mcpu={arch_name}", "-nogpulib", "-O1", "-S",
                    "-o", str(asm), str(src)], check=True, capture_output=True, text=True)
    text = asm.read_text()
    for i, mn in enumerate(arch.instructions):
        body = text.split(f"\nk{i}:", 1)[1].split(f".Lfunc_end{i}:", 1)[0]
        assert re.findall(r"\bv_s?mfmac?_\w+", body) == [mn], f"{arch_name} {arch.instructions[mn].builtin}"


def _operands(insn) -> str:
    regs = lambda first, n: f"v[{first}:{first + n - 1}]" if n > 1 else f"v{first}"
    last = "v50" if insn.sparse else regs(0, insn.regs("C"))       # v_smfmac_*: Src2 is the index
    return f"{regs(0, insn.regs('D'))}, {regs(40, insn.regs('A'))}, {regs(44, insn.regs('B'))}, {last}"


@pytest.mark.parametrize("arch_name", ARCHS)
def test_llvm_mc_takes_every_mnemonic_and_alias(arch_name, tmp_path):
    tc = need_toolchain("gfx942")
    if tc.llvm_mc is None:
        pytest.skip("llvm-mc (package llvm-19) is not installed")
    arch = get_arch(arch_name)
    spelled = [(mn, mn) for mn in arch.instructions] + list(arch.insn_aliases.items())
    src = tmp_path / "mfma.s"
    src.write_text("".join(f"{name} {_operands(arch.instructions[mn])}\n" for name, mn in spelled))
    out = subprocess.run([str(tc.llvm_mc), "-arch=amdgcn", f"-mcpu={arch_name}", str(src)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    printed = re.findall(r"^\s*(v_s?mfmac?_\w+)", out.stdout, re.M)
    assert printed == [mn for _, mn in spelled]
