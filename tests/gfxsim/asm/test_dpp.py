"""DPP forms of VOP1/VOP2 instructions: every DPP_CTRL, with row and bank masks, bound_ctrl and
inactive lanes, against a per-lane model of the ISA's definition — values and each stored word's
token — in waves of one workgroup and of several side by side (a lane never reads another
member's); the DPP word against llvm-mc's encoding; and a HIP reduction compiled by clang-19."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

from gfxsim import Buffer
from gfxsim.asm.operands import AsmSyntaxError
from gfxsim.asm.run import Program, decode, kernel_from_text, run_asm
from gfxsim.asm.semantics import OPS

from support import ROOT, need_toolchain


def model_source(ctrl: str, lane: int) -> int | None:
    """The lane ``lane`` reads under ``ctrl`` (None: out of range), written out per control."""
    row, r = lane // 16 * 16, lane % 16
    name, _, arg = ctrl.partition(":")
    if name == "quad_perm":
        return lane // 4 * 4 + int(arg.strip("[]").split(",")[lane % 4])
    n = int(arg) if arg else 0
    if name == "row_shl":
        return lane + n if r + n < 16 else None
    if name == "row_shr":
        return lane - n if r - n >= 0 else None
    if name == "row_ror":
        return row + (r - n) % 16
    if name == "wave_shl":
        return lane + 1 if lane < 63 else None
    if name == "wave_shr":
        return lane - 1 if lane > 0 else None
    if name == "wave_rol":
        return (lane + 1) % 64
    if name == "wave_ror":
        return (lane - 1) % 64
    if name == "row_mirror":
        return row + 15 - r
    if name == "row_half_mirror":
        return lane // 8 * 8 + 7 - lane % 8
    if name == "row_bcast" and n == 15:
        return row - 1 if lane >= 16 else None
    if name == "row_bcast" and n == 31:
        return 31 if lane >= 32 else None
    if name == "row_newbcast":
        return row + n
    raise AssertionError(ctrl)


CONTROLS = ["quad_perm:[0,1,2,3]", "quad_perm:[3,2,1,0]", "quad_perm:[1,1,3,0]", "row_shl:1", "row_shl:5",
            "row_shl:15", "row_shr:1", "row_shr:7", "row_shr:15", "row_ror:1", "row_ror:8", "row_ror:15",
            "wave_shl:1", "wave_shr:1", "wave_rol:1", "wave_ror:1", "row_mirror", "row_half_mirror",
            "row_bcast:15", "row_bcast:31", "row_newbcast:0", "row_newbcast:9"]


def model(ctrl, src, old, active, row_mask=0xF, bank_mask=0xF, bound=False):
    """(value, source lane or -1 for 0 or -2 for the old value) per lane of one wave."""
    val, frm = old.copy(), np.full(64, -2)
    for l in range(64):
        if not active[l] or not (row_mask >> (l // 16)) & 1 or not (bank_mask >> (l % 16 // 4)) & 1:
            continue
        s = model_source(ctrl, l)
        if s is not None and active[s]:
            val[l], frm[l] = src[s], s
        elif bound:
            val[l], frm[l] = 0, -1
    return val, frm


def _kernel(insn: str):
    # v2 = src[g*64+l], v3 = old[...]; EXEC from mask[...] != 0 for the DPP instruction; store v3
    return kernel_from_text(f"""
  s_load_dwordx8 s[4:11], s[0:1], 0x0
  s_waitcnt lgkmcnt(0)
  s_lshl_b32 s12, s2, 8
  v_lshlrev_b32_e32 v1, 2, v0
  v_add_u32_e32 v1, s12, v1
  global_load_dword v2, v1, s[4:5]
  global_load_dword v3, v1, s[6:7]
  global_load_dword v4, v1, s[8:9]
  s_waitcnt vmcnt(0)
  s_mov_b64 s[14:15], exec
  v_cmpx_ne_u32_e32 vcc, 0, v4
  {insn}
  s_mov_b64 exec, s[14:15]
  global_store_dword v1, v3, s[10:11]
""", "dpp", args=[("src", "global_buffer", 8), ("old", "global_buffer", 8), ("mask", "global_buffer", 8),
                  ("out", "global_buffer", 8)])


def _run(insn, src, old, active, batch=1):
    G = src.size // 64
    n = src.size
    out = Buffer.empty("out", (n,), np.uint32)
    run_asm(_kernel(insn), grid=(G,), block=64, batch=batch, args={
        "src": Buffer("src", src, {"token": np.arange(n)}),
        "old": Buffer("old", old, {"token": 1000 + np.arange(n)}),
        "mask": Buffer("mask", active.astype(np.uint32)), "out": out})
    ids = out.prov.ids["token"] if out.prov is not None and "token" in out.prov.ids else None
    mp = out.prov
    tok = np.full(n, -1) if ids is None else (np.repeat(ids, mp.unit)[::4] if mp.unit == 1 else ids)
    if ids is not None and mp.unit == 1:            # per byte: every byte of a word carries the same token
        per_byte = np.asarray(ids).reshape(n, 4)
        assert (per_byte == per_byte[:, :1]).all()
        tok = per_byte[:, 0]
    return out.array, np.asarray(tok).reshape(-1)


def _data(G, seed):
    rng = np.random.default_rng(seed)
    src = rng.integers(1, 1 << 31, G * 64).astype(np.uint32)
    old = rng.integers(1, 1 << 31, G * 64).astype(np.uint32)
    active = rng.random(G * 64) < 0.8
    return src, old, active


def _expect(ctrl, src, old, active, **kw):
    G = src.size // 64
    vals, toks = [], []
    for g in range(G):
        s = slice(64 * g, 64 * g + 64)
        v, frm = model(ctrl, src[s], old[s], active[s], **kw)
        vals.append(v)
        toks.append(np.where(frm >= 0, 64 * g + frm, np.where(frm == -2, 1000 + 64 * g + np.arange(64), -1)))
    return np.concatenate(vals), np.concatenate(toks)


@pytest.mark.parametrize("ctrl", CONTROLS)
def test_every_control_moves_values_and_tokens(ctrl):
    src, old, active = _data(1, 7)
    for bound in (False, True):
        insn = f"v_mov_b32_dpp v3, v2 {ctrl} row_mask:0xf bank_mask:0xf" + (" bound_ctrl:1" if bound else "")
        got, tok = _run(insn, src, old, active)
        want, want_tok = _expect(ctrl, src, old, active, bound=bound)
        bad = np.nonzero(got != want)[0]
        assert not bad.size, f"{insn}: lane {bad[0]} holds {got[bad[0]]:#x}, expected {want[bad[0]]:#x}"
        bad = np.nonzero(tok != want_tok)[0]
        assert not bad.size, f"{insn}: lane {bad[0]} carries token {tok[bad[0]]}, expected {want_tok[bad[0]]}"


@pytest.mark.parametrize("ctrl,row_mask,bank_mask,bound", [
    ("row_shr:4", 0xF, 0xE, False), ("row_shr:8", 0xF, 0xC, True), ("row_bcast:15", 0xA, 0xF, False),
    ("row_bcast:31", 0xC, 0xF, True), ("quad_perm:[2,3,0,1]", 0x5, 0x9, False), ("wave_ror:1", 0x6, 0x3, True)])
def test_masks_keep_the_old_value(ctrl, row_mask, bank_mask, bound):
    src, old, active = _data(1, 11)
    insn = f"v_mov_b32_dpp v3, v2 {ctrl} row_mask:{row_mask:#x} bank_mask:{bank_mask:#x}" + \
        (" bound_ctrl:0" if bound else "")              # older LLVM's spelling of the same bit
    got, tok = _run(insn, src, old, active)
    want, want_tok = _expect(ctrl, src, old, active, row_mask=row_mask, bank_mask=bank_mask, bound=bound)
    assert (got == want).all() and (tok == want_tok).all(), insn


@pytest.mark.parametrize("ctrl", ["row_shr:1", "row_ror:3", "wave_shl:1", "row_bcast:15", "quad_perm:[1,0,3,2]"])
def test_members_side_by_side_never_read_each_other(ctrl):
    """Three workgroups in one back-end wave (batch=3), each with its own EXEC: each reads only its lanes."""
    src, old, active = _data(3, 5)
    for bound in (False, True):
        insn = f"v_mov_b32_dpp v3, v2 {ctrl} row_mask:0xf bank_mask:0xf" + (" bound_ctrl:1" if bound else "")
        want, want_tok = _expect(ctrl, src, old, active, bound=bound)
        for batch in (1, 3):
            got, tok = _run(insn, src, old, active, batch=batch)
            assert (got == want).all(), f"{insn} batch={batch}: lanes {np.nonzero(got != want)[0][:8]}"
            assert (tok == want_tok).all(), f"{insn} batch={batch}: tokens of lanes {np.nonzero(tok != want_tok)[0][:8]}"


def _f32(x):
    return np.asarray(x, np.float32).view(np.uint32)


@pytest.mark.parametrize("insn,fn", [
    ("v_add_f32_dpp v3, v2, v3 row_shr:1 row_mask:0xf bank_mask:0xf bound_ctrl:1", lambda s, o: s + o),
    ("v_sub_f32_dpp v3, -v2, |v3| row_shl:3 row_mask:0xf bank_mask:0xf", lambda s, o: -s - np.abs(o)),
    ("v_max_f32_dpp v3, v2, v3 row_mirror row_mask:0xf bank_mask:0xe bound_ctrl:1", np.maximum),
    ("v_mul_f32_dpp v3, v2, v2 row_half_mirror row_mask:0xb bank_mask:0xf", None),
])
def test_arithmetic_reads_src0_across_lanes(insn, fn):
    """VOP2: src0 from its source lane (modifiers applied after the move), src1 from the lane itself —
    also where both name the same register (v_mul_f32_dpp v3, v2, v2)."""
    rng = np.random.default_rng(3)
    a = rng.normal(size=64).astype(np.float32)
    b = rng.normal(size=64).astype(np.float32)
    active = rng.random(64) < 0.85
    ctrl = next(t for t in insn.split()[4:] if not t.startswith(("row_mask", "bank_mask", "bound_ctrl")))
    rm = int(insn.split("row_mask:")[1].split()[0], 16)
    bm = int(insn.split("bank_mask:")[1].split()[0], 16)
    bound = "bound_ctrl" in insn
    moved, frm = model(ctrl, a, np.zeros(64, np.float32), active, rm, bm, bound)
    got, _ = _run(insn, _f32(a), _f32(b), active)
    written = frm != -2
    if fn is None:
        want = np.where(written, moved * a, b)
    else:
        want = np.where(written, fn(moved, b), b)
    assert (got == _f32(want)).all(), f"{insn}: lanes {np.nonzero(got != _f32(want))[0][:8]}"


def test_carry_out_and_cndmask():
    """v_addc_co_u32_dpp: src0 is the first VGPR after the carry-out VCC; v_cndmask_b32_dpp selects
    between src0 (moved) and src1 (the lane's own)."""
    from support.asm_sandbox import Sandbox
    sb = Sandbox()
    lanes = np.arange(64, dtype=np.uint32)
    sb.v[1] = 0xFFFFFFF0 + lanes % 16
    sb.v[2] = lanes * 3
    sb.st.set_mask(106, np.zeros(64, bool))
    sb.v[5] = 77
    sb.run("v_add_co_u32_dpp v5, vcc, v1, v2 row_shr:2 row_mask:0xf bank_mask:0xf")
    src = np.array([model_source("row_shr:2", int(l)) for l in lanes], dtype=object)
    valid = np.array([s is not None for s in src])
    moved = np.array([0xFFFFFFF0 + (s or 0) % 16 for s in src], np.uint64)
    tot = moved + (lanes * 3).astype(np.uint64)
    assert (sb.v[5] == np.where(valid, tot & 0xFFFFFFFF, 77)).all()
    assert (sb.vcc() == (valid & (tot > 0xFFFFFFFF))).all()      # a lane not written carries nothing out
    sb.st.set_mask(106, lanes % 3 == 0)
    sb.run("v_cndmask_b32_dpp v6, v1, v2, vcc quad_perm:[3,2,1,0] row_mask:0xf bank_mask:0xf")
    perm = (lanes // 4 * 4) + (3 - lanes % 4)
    assert (sb.v[6] == np.where(lanes % 3 == 0, lanes * 3, 0xFFFFFFF0 + perm % 16)).all()


@pytest.mark.parametrize("text,msg", [
    ("v_mov_b32_dpp v1, v0 row_shl:0", "1..15"), ("v_mov_b32_dpp v1, v0 row_ror:16", "1..15"),
    ("v_mov_b32_dpp v1, v0 wave_shl:2", "by 1"), ("v_mov_b32_dpp v1, v0 row_bcast:7", "15 or 31"),
    ("v_mov_b32_dpp v1, v0 row_shl:1 row_mirror", "one of"), ("v_mov_b32_dpp v1, v0 row_mask:0xf", "none"),
    ("v_mov_b32_dpp v1, v0 quad_perm:[0,1,4,3]", "quad_perm"), ("v_mov_b32_dpp v1, v0 row_shl:1 fi:1", "fi:1"),
    ("v_mov_b32_dpp v1, s0 row_shl:1", "src0 is a VGPR"),
])
def test_controls_the_isa_does_not_define_are_refused(text, msg):
    with pytest.raises(AsmSyntaxError, match="snippet: line") as e:
        Program(kernel_from_text(text))
    assert msg in str(e.value)


def test_vopc_dpp_is_not_executed():
    """gfx9 has no DPP form of VOPC (llvm-mc refuses it): named as unsupported, not run as another form."""
    p = Program(kernel_from_text("v_cmp_gt_f32_dpp vcc, v0, v1 row_shl:1"))
    assert [u.split(": ")[1] for u in p.unsupported()] == ["v_cmp_gt_f32_dpp"]


def test_controls_match_llvm_mc_encoding(tmp_path):
    """Every control, mask and bound_ctrl spelling decodes to the DPP word llvm-mc encodes for it."""
    from gfxsim.asm.encoding import dpp_word, llvm_mc_encodings
    tc = need_toolchain("gfx942")
    if tc.llvm_mc is None:
        pytest.skip("no llvm-mc")
    forms = [f"v_mov_b32_dpp v1, v7 {c} row_mask:{rm:#x} bank_mask:{bm:#x}{b}"
             for c in CONTROLS for rm, bm, b in ((0xF, 0xF, ""), (0x5, 0xA, " bound_ctrl:0"), (0xC, 0x3, " bound_ctrl:1"))]
    forms.append("v_add_f32_dpp v1, -v7, |v2| row_ror:3 row_mask:0xf bank_mask:0xf")
    s = tmp_path / "dpp.s"
    s.write_text("\n".join(forms) + "\n")
    enc = llvm_mc_encodings(s, "gfx942", tc.llvm_mc)
    assert len(enc) == len(forms)
    for text, (mn, ops, data) in zip(forms, enc):
        d = Program(kernel_from_text(text)).decoded[0]
        word = dpp_word(data)
        assert (word["dpp_ctrl"], word["row_mask"], word["bank_mask"], word["bound_ctrl"], word["src0"]) == \
            (d.dpp.code, d.dpp.row_mask, d.dpp.bank_mask, int(d.dpp.bound_ctrl), 7), text
        src0 = d.ops.positional[1]
        assert (word["src0_neg"], word["src0_abs"]) == (int(src0.neg), int(src0.abs)), text


# -- a HIP reduction compiled by clang-19 -------------------------------------------------------
HIP = ROOT / "tests" / "gfxsim" / "asm" / "hip" / "dpp_reduce.hip"


@pytest.mark.parametrize("arch", ["gfx942", "gfx90a"])
def test_hip_dpp_reduction_end_to_end(arch, tmp_path):
    """clang-19 -O3 turns __builtin_amdgcn_update_dpp / mov_dpp into v_add_f32_dpp, v_mov_b32_dpp
    (row_shr, row_bcast, quad_perm, row_mirror, row_half_mirror, row_ror, wave_shr) with masks; the
    scan, the max and the exclusive shift match numpy in 5 workgroups run side by side."""
    from gfxsim.asm import parse_file
    from gfxsim.hip.build import CFLAGS
    tc = need_toolchain("gfx942")                 # clang-19, which compiles for gfx90a as well
    asm = tmp_path / f"dpp_reduce_{arch}.s"
    subprocess.run([str(tc.clang), *CFLAGS, f"--offload-arch={arch}", "-S", "-o", str(asm), str(HIP)], check=True)
    text = asm.read_text()
    for form in ("v_add_f32_dpp", "v_mov_b32_dpp", "row_shr:", "row_bcast:15", "row_bcast:31", "quad_perm:",
                 "row_mirror", "row_half_mirror", "row_ror:", "wave_shr:1", "bound_ctrl:1", "bank_mask:0xe"):
        assert form in text, f"clang no longer emits {form}"
    k = parse_file(asm).kernel("dpp_reduce")
    dpp = [decode(i, k.name) for i in k.instructions if i.mnemonic.endswith("_dpp")]
    assert dpp and all(d.dpp is not None and d.mnemonic in OPS for d in dpp)
    if arch == "gfx90a":
        return                  # the same forms; gfx90a's launch (its user-SGPR layout) is the ABI's, tested there
    G = 5
    rng = np.random.default_rng(2)
    x = rng.integers(-8, 9, G * 64).astype(np.float32)        # small integers: every order sums exactly
    y = rng.normal(size=G * 64).astype(np.float32)
    outs = {n: Buffer.empty(n, (G * 64,), np.float32) for n in ("scan", "vmax", "excl")}
    run_asm(k, grid=(G,), block=64, batch=G, args={"xs": Buffer("xs", x, {"token": np.arange(G * 64)}),
                                                     "ys": Buffer("ys", y), **outs})
    xs, ys = x.reshape(G, 64), y.reshape(G, 64)
    scan = np.cumsum(xs, axis=1)
    assert (outs["scan"].array.reshape(G, 64) == scan).all()
    assert (outs["vmax"].array.reshape(G, 64) == ys.max(axis=1, keepdims=True)).all()
    excl = np.concatenate([np.zeros((G, 1), np.float32), scan[:, :-1]], axis=1)
    assert (outs["excl"].array.reshape(G, 64) == excl).all()


def _sets(mask, wide) -> list:
    """The value set of every element of a provenance Mask."""
    return [mask.values_at(i, wide) for i in range(mask.base.shape[0])]


def _store_prov(body, src, old):
    k = kernel_from_text("""
  s_load_dwordx4 s[4:7], s[0:1], 0x0
  s_load_dwordx2 s[8:9], s[0:1], 0x10
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32_e32 v1, 2, v0
  global_load_dword v2, v1, s[4:5]
  global_load_dword v3, v1, s[6:7]
  s_waitcnt vmcnt(0)
""" + body + "\n  global_store_dword v1, v3, s[8:9]", "prov",
        args=[("src", "global_buffer", 8), ("old", "global_buffer", 8), ("out", "global_buffer", 8)])
    out = Buffer.empty("out", (64,), np.uint32)
    run = run_asm(k, args={"src": Buffer("src", src, {"token": np.arange(64)}),
                     "old": Buffer("old", old, {"token": 1000 + np.arange(64)}), "out": out})
    p = out.prov
    fps = {f: _sets(m.mask(), run.machine.wide) for f, m in p.fp.items()}
    return out.array, {f: np.asarray(a) for f, a in p.ids.items()}, fps


@pytest.mark.parametrize("op,ctrl", [("v_add_f32", "row_shr:1"), ("v_max_f32", "row_bcast:15 row_mask:0xa"),
                                     ("v_mul_f32", "quad_perm:[1,0,3,2]"), ("v_add_u32", "wave_shl:1")])
def test_arithmetic_on_a_moved_source_is_the_move_then_the_operation(op, ctrl):
    """The fused DPP form's value and provenance (ids and footprints) are those of v_mov_b32_dpp into
    a zeroed register followed by the plain operation, where every lane is written (bound_ctrl)."""
    rng = np.random.default_rng(9)
    src = rng.normal(size=64).astype(np.float32).view(np.uint32)
    old = rng.normal(size=64).astype(np.float32).view(np.uint32)
    masks = " row_mask:0xf" if "row_mask" not in ctrl else ""
    fused = _store_prov(f"  {op}_dpp v3, v2, v3 {ctrl}{masks} bank_mask:0xf bound_ctrl:1", src, old)
    moved = _store_prov(f"  v_mov_b32_e32 v5, 0\n  v_mov_b32_dpp v5, v2 {ctrl}{masks} bank_mask:0xf bound_ctrl:1\n"
                        f"  {op}_e32 v3, v5, v3", src, old)
    if "row_mask:0xa" in ctrl:      # rows 0 and 2 not written by the fused form: v3 keeps its old value
        moved = _store_prov(f"  v_mov_b32_dpp v5, v2 {ctrl} bank_mask:0xf bound_ctrl:1\n"
                            "  s_mov_b32 exec_lo, 0xffff0000\n  s_mov_b32 exec_hi, 0xffff0000\n"
                            f"  {op}_e32 v3, v5, v3\n  s_mov_b64 exec, -1", src, old)
    assert (fused[0] == moved[0]).all()
    assert fused[1].keys() == moved[1].keys() and all((fused[1][f] == moved[1][f]).all() for f in fused[1])
    assert fused[2] == moved[2]
    assert any(len(s) == 2 for s in fused[2]["token"])       # the result names both operands' tokens


def test_64_bit_move_row_newbcast():
    """v_mov_b64_dpp (gfx940's DP ALU DPP) takes row_newbcast only: each row reads its lane n, both words."""
    from support.asm_sandbox import Sandbox
    sb = Sandbox()
    lanes = np.arange(64)
    sb.v[2], sb.v[3] = lanes, 1000 + lanes
    sb.run("v_mov_b64_dpp v[4:5], v[2:3] row_newbcast:3 row_mask:0xf bank_mask:0xf")
    assert (sb.v[4] == lanes // 16 * 16 + 3).all() and (sb.v[5] == 1000 + lanes // 16 * 16 + 3).all()
    with pytest.raises(AsmSyntaxError, match="only row_newbcast"):
        Program(kernel_from_text("v_mov_b64_dpp v[4:5], v[2:3] row_shl:1"))


def test_traced_source_is_what_the_lanes_read():
    """The trace event of a DPP instruction shows src0 as its lanes read it."""
    k = kernel_from_text("""
  v_mov_b32_e32 v2, v0
  v_mov_b32_dpp v3, v2 row_ror:1 row_mask:0xf bank_mask:0xf""")
    run = run_asm(k, args={})
    ev = [e for e in run.trace.events if e.op == "v_mov_b32_dpp"][0]
    assert (np.asarray(ev.inputs[0].values).reshape(-1)[:64] == np.arange(64) // 16 * 16 + (np.arange(64) - 1) % 16).all()


def test_semantics_that_bypass_the_dpp_source_are_an_error(monkeypatch):
    """A VOP1/VOP2 function that reads its src0 register itself (not through semantics.u32 / vsrc)
    would compute on the unmoved lanes: its DPP form stops with an error naming the instruction."""
    from gfxsim.asm import semantics
    from gfxsim.asm.state import AsmError
    from support.asm_sandbox import Sandbox

    def raw_mov(st, d):
        semantics.put(st, d.ops[0], st.vwords("v", d.ops[1].first, 1)[0])
    monkeypatch.setitem(semantics.OPS, "v_mov_b32", raw_mov)
    sb = Sandbox()
    with pytest.raises(AsmError, match="without the DPP source path"):
        sb.run("v_mov_b32_dpp v3, v2 row_shr:1 row_mask:0xf bank_mask:0xf")


def test_a_fresh_matrix_result_stays_fresh_through_dpp_moves():
    """The dequant's freshness (semantics/dequant.py) moves with the value, as through ds_bpermute:
    v_mov_b32_dpp and v_cvt_f32_i32_dpp carry the source lane's bit; an invalid source reads 0, not fresh."""
    from support.asm_sandbox import Sandbox
    sb = Sandbox()
    lanes = np.arange(64)
    sb.v[2] = lanes
    fresh = lanes % 3 != 0
    sb.st.fresh["v"][2] = fresh
    sb.run("v_mov_b32_dpp v3, v2 row_shr:1 row_mask:0xf bank_mask:0xf bound_ctrl:1",
           "v_cvt_f32_i32_dpp v4, v2 quad_perm:[3,2,1,0] row_mask:0xf bank_mask:0xf")
    shr = np.array([model_source("row_shr:1", int(l)) for l in lanes], dtype=object)
    want3 = np.array([s is not None and bool(fresh[s]) for s in shr])
    assert (sb.st.fresh["v"][3] == want3).all()
    assert (sb.st.fresh["v"][4] == fresh[lanes // 4 * 4 + 3 - lanes % 4]).all()
    assert (sb.v[4].view(np.float32) == (lanes // 4 * 4 + 3 - lanes % 4)).all()
