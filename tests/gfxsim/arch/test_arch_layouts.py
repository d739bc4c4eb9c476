"""Layout records against the vendors' published closed forms, over every lane/register/element."""
import json

import numpy as np
import pytest
from hypothesis import given, strategies as st

from gfxsim.arch import ARCHS, get_arch, get_instruction
from gfxsim.arch.kslots import format_token_set, tokens_per_instruction
from gfxsim.cli import main

# Closed forms transcribed from the AMD Matrix Instruction Calculator's "-d" output (register ->
# element), written independently of gfxsim's digit descriptions. f(lane, gpr, elem) -> (row, col, block).
K8 = lambda mn, kpl: (lambda l, r, e: (l % mn, kpl * (l // mn) + 4 * r + e, 0))          # A: i, k
K16 = lambda mn, kpl: (lambda l, r, e: (l % mn, kpl * (l // mn) + 2 * r + e, 0))
KB8 = lambda mn, kpl: (lambda l, r, e: (kpl * (l // mn) + 4 * r + e, l % mn, 0))         # B: k, j
KB16 = lambda mn, kpl: (lambda l, r, e: (kpl * (l // mn) + 2 * r + e, l % mn, 0))
CD16 = lambda l, r, e: (4 * (l // 16) + r % 4, l % 16, 0)
CD32 = lambda l, r, e: ((8 * (r // 4)) % 32 + 4 * (l // 32) + r % 4, l % 32, 0)
JUMP = lambda l, r, e: (l % 16, (l // 16) + 4 * r, 0)                                     # gfx936 C/D

# NVIDIA PTX ISA fragment tables ("Matrix Fragments for mma.m16n8k16/k32/k64"), transcribed as
# the PTX writes them: per thread element index i (a_i, b_i, c_i) with groupID = lane >> 2 and
# threadID_in_group = lane % 4; i = reg * (32 / bits) + elem.
def _ptx_a(epr):
    def f(l, r, e):
        g, t, i = l >> 2, l % 4, r * epr + e
        row = g if (i < epr or 2 * epr <= i < 3 * epr) else g + 8
        return row, t * epr + (i % epr) + (4 * epr if i >= 2 * epr else 0), 0
    return f


def _ptx_b(epr):
    def f(l, r, e):
        g, t, i = l >> 2, l % 4, r * epr + e
        return t * epr + (i % epr) + (4 * epr if i >= epr else 0), g, 0
    return f


PTX_CD = lambda l, r, e: ((l >> 2) + (8 if r >= 2 else 0), (l % 4) * 2 + (r & 1), 0)
PTX = {"s8": (_ptx_a(4), _ptx_b(4), PTX_CD), "e4m3": (_ptx_a(4), _ptx_b(4), PTX_CD),
       "s4": (_ptx_a(8), _ptx_b(8), PTX_CD), "f16": (_ptx_a(2), _ptx_b(2), PTX_CD), "bf16": (_ptx_a(2), _ptx_b(2), PTX_CD)}
NV_MNEMONICS = {"s8": "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32",
                "s4": "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32",
                "e4m3": "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32",
                "f16": "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
                "bf16": "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"}

PUBLISHED = {
    **{(arch, mn): PTX[t] for arch in ("sm_89", "sm_90") for t, mn in NV_MNEMONICS.items()},
    ("gfx942", "v_mfma_i32_16x16x32_i8"): (K8(16, 8), KB8(16, 8), CD16),
    ("gfx942", "v_mfma_f32_16x16x32_fp8_fp8"): (K8(16, 8), KB8(16, 8), CD16),
    ("gfx942", "v_mfma_i32_32x32x16_i8"): (K8(32, 8), KB8(32, 8), CD32),
    ("gfx942", "v_mfma_f32_16x16x16_f16"): (K16(16, 4), KB16(16, 4), CD16),
    ("gfx942", "v_mfma_f32_16x16x16_bf16"): (K16(16, 4), KB16(16, 4), CD16),
    ("gfx942", "v_mfma_f32_32x32x8_f16"): (K16(32, 4), KB16(32, 4), CD32),
    ("gfx942", "v_mfma_f32_4x4x4_16b_f16"): (lambda l, r, e: (l % 4, 2 * r + e, l // 4),
                                             lambda l, r, e: (2 * r + e, l % 4, l // 4),
                                             lambda l, r, e: (r % 4, l % 4, l // 4)),
    ("gfx90a", "v_mfma_i32_16x16x16i8"): (lambda l, r, e: (l % 16, 4 * (l // 16) + e, 0),
                                          lambda l, r, e: (4 * (l // 16) + e, l % 16, 0), CD16),
    ("gfx90a", "v_mfma_i32_32x32x8i8"): (lambda l, r, e: (l % 32, 4 * (l // 32) + e, 0),
                                         lambda l, r, e: (4 * (l // 32) + e, l % 32, 0), CD32),
    ("gfx90a", "v_mfma_f32_16x16x16f16"): (K16(16, 4), KB16(16, 4), CD16),
    ("gfx90a", "v_mfma_f32_16x16x16bf16_1k"): (K16(16, 4), KB16(16, 4), CD16),
    ("gfx936", "v_mmac_i32_16x16x32_i8"): (K8(16, 8), KB8(16, 8), JUMP),
    ("gfx936", "v_mmac_f32_16x16x16_f16"): (K16(16, 4), KB16(16, 4), JUMP),
    ("gfx936", "v_mmac_f32_16x16x16_bf16"): (K16(16, 4), KB16(16, 4), JUMP),
}


def test_every_listed_instruction_exists():
    """Every record is checked against a published source: the closed forms here, or (CDNA's
    v_mfma_*) the calculator's tables replayed by test_calculator_golden.py."""
    listed = {(a, m) for a, m in PUBLISHED}
    have = {(a.name, m) for a in ARCHS.values() for m in a.instructions}
    replayed = {(a, m) for a, m in have if a in ("gfx90a", "gfx942") and m.startswith(("v_mfma_", "v_smfmac_"))}
    assert listed <= have and have == listed | replayed


@pytest.mark.parametrize("arch,mn", sorted(PUBLISHED))
def test_every_slot_matches_published_closed_form(arch, mn):
    insn = get_instruction(arch, mn)
    fa, fb, fcd = PUBLISHED[(arch, mn)]
    for op, f in zip("ABCD", (fa, fb, fcd, fcd)):
        t = insn.operand(op).table()
        got = np.stack([t["row"], t["col"], t["block"]])
        want = np.array([f(int(l), int(r), int(e)) for l, r, e in zip(t["lane"], t["reg"], t["elem"])]).T
        assert np.array_equal(got, want), f"{arch} {mn} {op}"
        assert len(t) == insn.operand(op).size          # every element has exactly one slot


@pytest.mark.parametrize("arch,mn", sorted(PUBLISHED))
def test_bijection_over_every_point(arch, mn):
    insn = get_instruction(arch, mn)
    for op in "ABCD":
        lay = insn.operand(op)
        b, r, c = np.meshgrid(np.arange(lay.blocks), np.arange(lay.rows), np.arange(lay.cols), indexing="ij")
        lane, reg, elem = lay.to_register(r, c, b)
        slots = (reg * lay.n_elems + elem) * lay.wave_size + lane
        assert np.unique(slots).size == lay.size
        assert all(np.array_equal(x, y) for x, y in zip(lay.to_matrix(lane, reg, elem), (r, c, b)))


@given(st.sampled_from(sorted(PUBLISHED)), st.sampled_from("ABCD"), st.data())
def test_roundtrip_hypothesis(key, op, data):
    lay = get_instruction(*key).operand(op)
    lane = data.draw(st.integers(0, lay.wave_size - 1))
    reg = data.draw(st.integers(0, lay.n_regs - 1))
    elem = data.draw(st.integers(0, lay.n_elems - 1))
    assert tuple(int(x) for x in lay.to_register(*lay.to_matrix(lane, reg, elem))) == (lane, reg, elem)


def test_spot_values_from_amd_tables():
    insn = get_instruction("gfx942", "v_mfma_i32_16x16x32_i8")
    # B[13][2] = v1{18}.[15:8]: second VGPR, lane 18, byte 1 (bits 15:8)
    assert tuple(map(int, insn.operand("B").to_register(13, 2))) == (18, 1, 1)
    assert tuple(map(int, insn.operand("D").to_register(5, 7))) == (23, 1, 0)  # D[5][7] = v1{23}
    assert insn.regs("A") == insn.regs("B") == 2 and insn.regs("D") == 4 and insn.cycles == 16
    assert get_instruction("gfx942", "v_mfma_i32_32x32x16_i8").regs("D") == 16
    assert get_instruction("gfx90a", "v_mfma_i32_16x16x16i8").regs("A") == 1


def test_gfx936_jump_layout_and_aliases():
    d = get_instruction("gfx936", "v_mmac_i32_16x16x32_i8").operand("D")
    for m, n in [(0, 0), (3, 5), (15, 15), (7, 12)]:
        assert tuple(map(int, d.to_register(m, n))) == (m + 16 * (n % 4), n // 4, 0)
    assert get_arch("gfx928").name == "gfx936"
    assert get_arch("gfx940").name == get_arch("gfx941").name == "gfx942"
    assert get_arch("gfx936").wave_size == 64 and get_arch("gfx936").lds_bytes == 65536


def test_seed_token_sets_16_byte_load():
    insn = get_instruction("gfx936", "v_mmac_i32_16x16x32_i8")
    t = tokens_per_instruction(insn, "B", 16)
    assert [format_token_set(x) for x in t] == ["{0-7,16-23,32-39,48-55}", "{8-15,24-31,40-47,56-63}"]
    assert set(t[0]) == {16 * g + b for g in range(4) for b in range(8)}
    assert sorted(np.concatenate(t)) == list(range(64))            # each token exactly once
    # A uses the same K placement, so A and B K slots see the same tokens
    assert np.array_equal(t, tokens_per_instruction(insn, "A", 16))


@pytest.mark.parametrize("bad", [("gfx999", "v_mfma_i32_16x16x32_i8", "gfx999"),
                                 ("gfx942", "v_mmac_i32_16x16x32_i8", "v_mmac_i32_16x16x32_i8")])
def test_unknown_names_are_named(bad):
    arch, mn, name = bad
    with pytest.raises(KeyError, match=name):
        get_instruction(arch, mn)


def test_out_of_range_coordinates_are_named():
    lay = get_instruction("gfx942", "v_mfma_i32_16x16x32_i8").operand("A")
    with pytest.raises(IndexError, match="col 32"):
        lay.to_register(0, 32)
    with pytest.raises(IndexError, match="lane 64"):
        lay.to_matrix(64, 0, 0)
    with pytest.raises(IndexError, match="reg 2"):
        lay.to_matrix(0, 2, 0)
    with pytest.raises(ValueError, match="operand 'E'"):
        get_instruction("gfx942", "v_mfma_i32_16x16x32_i8").operand("E")


def test_non_bijective_description_is_rejected():
    from gfxsim.arch.layout import OperandLayout
    with pytest.raises(ValueError, match="bijection"):
        OperandLayout("D", 16, 16, 1, 32, lane=[(16, "col", 1), (4, "row", 1)], reg=[(4, "row", 1)], elem=[])


def run_cli(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_json_schema_and_values(capsys):
    rc, out, _ = run_cli(capsys, "layout", "gfx942", "v_mfma_i32_16x16x32_i8", "--format", "json")
    assert rc == 0
    doc = json.loads(out)
    assert {k: doc[k] for k in ("arch", "instruction", "M", "N", "K", "blocks")} == \
        {"arch": "gfx942", "instruction": "v_mfma_i32_16x16x32_i8", "M": 16, "N": 16, "K": 32, "blocks": 1}
    assert set(doc["operands"]) == set("ABCD")
    b = {(e["row"], e["col"]): (e["lane"], e["reg"], e["elem"]) for e in doc["operands"]["B"]}
    assert b[(13, 2)] == (18, 1, 1) and len(b) == 512
    assert all(set(e) == {"lane", "reg", "elem", "row", "col", "block"} for e in doc["operands"]["D"])


@pytest.mark.parametrize("arch,mn", sorted(PUBLISHED))
def test_cli_json_agrees_with_published_forms(capsys, arch, mn):
    rc, out, _ = run_cli(capsys, "layout", arch, mn, "--format", "json")
    doc = json.loads(out)
    for op, f in zip("ABCD", PUBLISHED[(arch, mn)] + (PUBLISHED[(arch, mn)][2],)):
        for e in doc["operands"][op]:
            assert (e["row"], e["col"], e["block"]) == f(e["lane"], e["reg"], e["elem"])


def test_cli_compare_gfx936_vs_gfx942(capsys):
    rc, out, _ = run_cli(capsys, "layout", "--compare", "gfx936", "v_mmac_i32_16x16x32_i8",
                         "gfx942", "v_mfma_i32_16x16x32_i8", "--format", "json")
    ops = json.loads(out)["operands"]
    assert ops["A"]["differ"] == 0 and ops["B"]["differ"] == 0
    assert ops["C"]["differ"] > 0 and ops["D"]["differ"] > 0
    # only D[0][0], D[5][5], D[10][10], D[15][15] sit in the same slot on both
    assert ops["D"]["differ"] == 256 - 4


def test_cli_views_and_queries(capsys):
    rc, out, _ = run_cli(capsys, "layout", "gfx942", "v_mfma_i32_16x16x32_i8", "-o", "B", "-g", "13", "2")
    assert "B[13][2] = v1{18}.[15:8]" in out
    rc, out, _ = run_cli(capsys, "layout", "gfx942", "v_mfma_i32_16x16x32_i8", "-o", "B", "-m", "17", "1")
    assert "v1{17}.[7:0] = B[12][1]" in out and "B[15][1]" in out
    rc, out, _ = run_cli(capsys, "layout", "gfx936", "v_mmac_i32_16x16x32_i8", "-o", "D", "--format", "csv")
    lines = out.splitlines()
    assert lines[0].startswith("D[row][col]") and lines[1].split(",")[6] == "v1{16}"   # D[0][5]
    rc, out, _ = run_cli(capsys, "layout", "gfx936", "v_mmac_i32_16x16x32_i8", "-o", "D", "--view", "register",
                         "--format", "markdown")
    assert "| 16 | D[0][1] | D[0][5] | D[0][9] | D[0][13] |" in out
    rc, out, _ = run_cli(capsys, "layout", "gfx936", "v_mmac_i32_16x16x32_i8", "--detail")
    assert "lane = 16*(j % 4) + i; reg = j // 4" in out
    rc, out, _ = run_cli(capsys, "layout", "gfx90a", "--list")
    assert "v_mfma_i32_16x16x16i8" in out
    rc, out, err = run_cli(capsys, "layout", "gfx999", "x")
    assert rc == 2 and "unknown arch 'gfx999'" in err
    rc, out, err = run_cli(capsys, "layout", "gfx942", "v_mfma_i32_16x16x32_i8", "-o", "A", "-g", "16", "0")
    assert rc == 2 and "row 16 out of range" in err
