"""The asm front end's operand parser: every operand of every line clang writes
for the HIP twins, each operand form, and errors that name kernel, line and form."""
from __future__ import annotations

import pytest
from support import need_toolchain, repo_project

from gfxsim.asm.operands import AsmSyntaxError, parse_instruction_operands, parse_operands
from gfxsim.asm.run import Program, kernel_from_text
from gfxsim.hip import build as hipbuild
from gfxsim.asm import Instruction, parse_file

ARCHS = ("gfx942", "gfx940", "gfx941", "gfx936")


@pytest.mark.parametrize("arch", ARCHS)
def test_every_operand_of_every_twin_parses(arch):
    need_toolchain(arch)
    n = 0
    forms = set()
    for b in hipbuild.build(None, arch, project=repo_project()):
        for k in parse_file(b.asm).kernels.values():
            for ins in k.instructions:
                ops = parse_instruction_operands(ins, k.name)
                # nothing dropped: the parsed operands and modifiers rebuild the text
                assert ops.text == " ".join(ins.operands.split()), (k.name, ins.line)
                forms |= {o.kind for o in ops.positional} | set(ops.mods)
                n += 1
            Program(k)          # decodes, and the descriptor/metadata give a launch ABI
    assert n > 15000
    # the forms the issue lists are all among them
    assert {"reg", "int", "float", "label", "off", "offset", "offset0", "offset1", "op_sel_hi", "neg_lo",
            "neg_hi", "dst_sel", "dst_unused", "src0_sel", "vmcnt", "lgkmcnt"} <= forms


def test_registers_and_named_registers():
    ops = parse_operands("v[6:7], s[4:11], a3, vcc, exec, m0, vcc_lo, exec_hi, scc")
    got = [(o.kind, o.file, o.first, o.count) for o in ops.positional]
    assert got == [("reg", "v", 6, 2), ("reg", "s", 4, 8), ("reg", "a", 3, 1), ("reg", "s", 106, 2),
                   ("reg", "s", 126, 2), ("reg", "s", 124, 1), ("reg", "s", 106, 1), ("reg", "s", 127, 1),
                   ("scc", "", 0, 1)]


def test_constants_inline_and_literal():
    ops = parse_operands("v1, -16, 64, 65, 0x42fe0000, -1.0, 0.5, 0.15915494, -17")
    kinds = [(o.kind, o.value, o.inline) for o in ops.positional[1:]]
    assert kinds == [("int", -16, True), ("int", 64, True), ("int", 65, False), ("int", 0x42fe0000, False),
                     ("float", -1.0, True), ("float", 0.5, True), ("float", 0.15915494, True), ("int", -17, False)]
    assert ops[4].is_literal and not ops[2].is_literal


def test_source_modifiers():
    ops = parse_operands("v9, -v3, |v2|, -|v4|, sext(v5)")
    assert [(o.neg, o.abs, o.sext) for o in ops.positional[1:]] == [(True, False, False), (False, True, False),
                                                                   (True, True, False), (False, False, True)]
    assert ops[1].first == 3 and ops[4].first == 5


def test_sdwa_vop3p_ds_global_and_waitcnt_modifiers():
    assert dict(parse_operands("v10, v10 dst_sel:WORD_1 dst_unused:UNUSED_PAD src0_sel:DWORD").mods) == \
        {"dst_sel": "WORD_1", "dst_unused": "UNUSED_PAD", "src0_sel": "DWORD"}
    m = parse_operands("v[6:7], v[4:5], v[6:7] op_sel:[1,0] op_sel_hi:[0,1] neg_lo:[1,0] neg_hi:[0,1]").mods
    assert m == {"op_sel": (1, 0), "op_sel_hi": (0, 1), "neg_lo": (1, 0), "neg_hi": (0, 1)}
    assert dict(parse_operands("v[4:7], v0 offset0:8 offset1:12").mods) == {"offset0": 8, "offset1": 12}
    g = parse_operands("v[2:5], v[10:11], off offset:16 sc0 sc1")
    assert g[2].kind == "off" and dict(g.mods) == {"offset": 16, "sc0": True, "sc1": True}
    assert dict(parse_operands("vmcnt(0) lgkmcnt(3)").mods) == {"vmcnt": 0, "lgkmcnt": 3}
    mf = parse_operands("a[0:3], v[4:5], v[44:45], 0")
    assert mf[0].file == "a" and mf[3].kind == "int" and mf[3].value == 0
    assert parse_operands(".LBB0_2")[0].kind == "label"


@pytest.mark.parametrize("text,form", [
    ("v1, ttmp0, v2", "ttmp0"),
    ("v1, v2 offset:x", "offset:x"),
    ("v1, v2 src0_sel:BYTE_9", "src0_sel:BYTE_9"),
    ("v1, 3.7", "3.7"),
    ("v1 clamp, v2", "v1 clamp"),
    ("v1, v2 row_share:1", "row_share:1"),
    ("v[3:1]", "v[3:1]"),
    ("v1, %v2", "%v2"),
])
def test_unknown_forms_are_named_with_kernel_and_line(text, form):
    ins = Instruction(0, 123, "v_add_f32_e64", text, "k")
    with pytest.raises(AsmSyntaxError) as e:
        parse_instruction_operands(ins, "my_kernel")
    msg = str(e.value)
    assert "my_kernel" in msg and "line 123" in msg and form in msg


def test_unsupported_opcode_and_dpp_are_named():
    k = kernel_from_text("v_sin_f32_e32 v1, v2\nv_cmp_gt_f32_dpp vcc, v1, v2 quad_perm:[1,0,3,2]")
    p = Program(k)
    assert [u.split(": ")[1] for u in p.unsupported()] == ["v_sin_f32_e32", "v_cmp_gt_f32_dpp"]
    from support.asm_sandbox import run_snippet
    with pytest.raises(Exception, match=r"snippet: 1 instruction\(s\) the asm front end cannot execute: "
                                        r"line \d+: v_sin_f32_e32$"):
        run_snippet("v_sin_f32_e32 v1, v2")



def test_line_tables_name_each_instructions_source_line():
    """`.file` / `.loc` directives (clang -g, -gline-tables-only) give every instruction after them
    its "file:line" (the name without its directory); line 0 (code with no source line) gives none,
    and so does code before the first .loc."""
    k = kernel_from_text("""
        .file 0 "/work" "/work/kernels_hip/k.hip" md5 0x00
        .file 1 "kernels_hip" "k.hip" md5 0x00
        .file 2 "helpers.h"
        v_mov_b32_e32 v1, 0
        .loc 1 12 7 prologue_end
        v_mov_b32_e32 v2, 0
        .loc 2 40 3
        v_add_u32_e32 v1, v1, v0
        v_add_u32_e32 v2, v2, v0
        .loc 1 0 0
        v_add_u32_e32 v3, v1, v2
        .loc 1 13 1
        """)
    assert [i.source for i in k.instructions] == [None, "k.hip:12", "helpers.h:40", "helpers.h:40", None, "k.hip:13"]
