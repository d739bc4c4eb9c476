"""Every CDNA2/CDNA3 v_mfma_* and v_smfmac_* record against AMD's matrix instruction calculator, every lane,
register, element and block.

The golden file is the calculator's own output (hw_probes/amd_calculator/make_golden.py dumps
`matrix_calculator.py -a CDNA2|CDNA3 -d` and `-M -A/-B/-C/-D/-k --csv` for every instruction): per
register column (first VGPR, VGPR count, low bit, bits) the (row, col, block) of every lane. For
the sparse v_smfmac_* a column of A or of the compression index K names a group of four K
positions (its first kept): A's column holds that group's two stored values, K's its 4-bit field.
"""
import numpy as np
import pytest

from gfxsim.arch import get_arch
from support.amd_calculator import ARCH_OF, golden

TYPES = {"FP32": "f32", "FP16": "f16", "BF16": "bf16", "int8": "i8", "int32": "i32", "FP64": "f64",
         "FP8": "fp8", "BF8": "bf8"}


def _cases():
    return [(fam, mn) for fam, insns in golden()["archs"].items() for mn in sorted(insns)]


@pytest.mark.parametrize("family", sorted(ARCH_OF))
def test_every_calculator_instruction_has_a_record_and_no_other(family):
    want = set(golden()["archs"][family])
    have = {m for m in get_arch(ARCH_OF[family]).instructions if m.startswith(("v_mfma_", "v_smfmac_"))}
    assert have == want, f"missing {sorted(want - have)}, extra {sorted(have - want)}"


@pytest.mark.parametrize("family,mnemonic", _cases())
def test_record_facts_match_the_calculator(family, mnemonic):
    g = golden()["archs"][family][mnemonic]
    insn = get_arch(ARCH_OF[family]).instruction(mnemonic)
    assert (insn.M, insn.N, insn.K, insn.blocks) == (g["M"], g["N"], g["K"], g["blocks"])
    assert insn.cycles == g["cycles"]
    assert {op: insn.regs(op) for op in g["gprs"]} == g["gprs"]
    assert insn.sparse == g["sparse"]
    types = {op: TYPES[t] for op, t in g["types"].items()}
    if "xf32" in mnemonic:           # the calculator prints xf32 operands as FP32 registers
        types["A"] = types["B"] = "xf32"
    assert (insn.a_type, insn.b_type, insn.cd_type, insn.cd_type) == tuple(types[op] for op in "ABCD")
    assert ("cbsz" in insn.modifiers, "abid" in insn.modifiers) == (g["cbsz_abid"],) * 2
    assert ("blgp" in insn.modifiers) == g["blgp"]
    assert ("CBSZ/ABID:" in insn.notes) == g["cbsz_abid"] and ("BLGP:" in insn.notes) == g["blgp"]


@pytest.mark.parametrize("family,mnemonic", _cases())
def test_every_slot_matches_the_calculator(family, mnemonic):
    g = golden()["archs"][family][mnemonic]
    insn = get_arch(ARCH_OF[family]).instruction(mnemonic)
    for op, gl in g["layouts"].items():
        lay = insn.index if op == "K" else insn.operand(op)
        grouped = gl["group"] == 4                # sparse A or its index: one 4:2 group per column
        per_column = 2 if grouped and op == "A" else 1
        assert len(gl["columns"]) * per_column == lay.reg_slots * lay.n_elems, f"{op}: register columns"
        seen = np.zeros((lay.blocks, lay.rows, lay.cols), int)
        lanes = np.arange(lay.wave_size)
        for (first, count, lo, bits), cells in zip(gl["columns"], gl["cells"]):
            assert bits == per_column * lay.elem_bits and count == lay.words_per_reg, f"{op}: v{first} [{lo}+{bits}]"
            reg, elem = (first // 2, 0) if bits == 64 else (first, lo // lay.elem_bits)
            want = np.array(cells)
            if grouped:                           # group g: A's columns 2g, 2g+1; K's field g
                want[:, 1] = want[:, 1] // 4 * per_column
            for s in range(per_column):
                got = np.stack(lay.to_matrix(lanes, reg, elem + s), axis=1)
                bad = np.nonzero((got != want + [0, s, 0]).any(axis=1))[0]
                assert not bad.size, (f"{op} v{first}.[{lo + bits - 1}:{lo}] +{s} lane {bad[0]}: record says "
                                      f"{got[bad[0]].tolist()}, calculator {(want[bad[0]] + [0, s, 0]).tolist()}")
                seen[got[:, 2], got[:, 0], got[:, 1]] += 1
        assert (seen == 1).all(), f"{op}: the calculator's table does not hold every element once"


def test_layout_cli_lists_and_names_the_new_records(capsys):
    """`gfxsim layout` lists every CDNA record with its other spelling, and names a 64-bit element's
    register pair as the calculator does (`-a CDNA3 -i v_mfma_f64_16x16x4_f64 -D -g -I 5 -J 3`)."""
    from gfxsim.cli import main
    assert main(["layout", "gfx942", "--list"]) == 0
    out = capsys.readouterr().out
    for mn in golden()["archs"]["CDNA3"]:
        assert mn in out
    assert "v_mfma_f64_4x4x4f64" in out and "cbsz,abid,blgp" in out
    assert main(["layout", "gfx942", "v_mfma_f64_16x16x4_f64", "-o", "D", "-g", "5", "3"]) == 0
    assert capsys.readouterr().out.strip() == "D[5][3] = v[3:2]{19}"
    assert main(["layout", "gfx90a", "v_mfma_f32_16x16x1f32", "-o", "D", "-g", "5", "3", "-b", "2"]) == 0
    assert capsys.readouterr().out.strip() == "D[5][3].B2 = v9{19}"
    assert main(["layout", "gfx942", "v_mfma_f32_16x16x16bf16_1k", "-d"]) == 0      # the CDNA2 spelling
    assert "v_mfma_f32_16x16x16_bf16" in capsys.readouterr().out
