"""MFMA's broadcast controls: CBSZ/ABID (one block of lanes feeds A to all) and BLGP (B's lanes
permuted). Each run of a broadcast instruction is compared with the plain instruction on registers
whose lanes numpy permuted as the ISA defines — values, and the token in every K slot of every
block — and, at the matrix level, with what the controls mean for the blocks of
v_mfma_f32_4x4x4_16b_f16 (block b in lanes 4b..4b+3 of A and B)."""
from __future__ import annotations

import numpy as np
import pytest

from gfxsim import Buffer
from gfxsim.asm.run import kernel_from_text, run_asm
from gfxsim.asm.state import AsmError
from gfxsim.machine.trace import MmaEvent


ND = {"v_mfma_f32_4x4x4_16b_f16": 4, "v_mfma_f32_32x32x8_f16": 16, "v_mfma_f32_16x16x32_fp8_fp8": 4}


def a_src(cbsz, abid):
    s = 64 >> cbsz
    return np.arange(64) % s + s * abid


def b_src(blgp):
    l = np.arange(64)
    return {0: l, 1: l % 32, 2: l % 32 + 32, 3: (l + 16) % 64, 4: l % 16, 5: l % 16 + 16,
            6: l % 16 + 32, 7: l % 16 + 48}[blgp]


def _run(insn, mods, a, b, batch=1):
    """D of ``insn v[8:..], v[2:3], v[4:5], 0 mods`` per workgroup (a, b: f16 [G*64, 4]), and the trace's
    matrix events (one per workgroup)."""
    G = a.shape[0] // 64
    nd = ND[insn]
    k = kernel_from_text(f"""
  s_load_dwordx4 s[4:7], s[0:1], 0x0
  s_load_dwordx2 s[8:9], s[0:1], 0x10
  s_waitcnt lgkmcnt(0)
  s_lshl_b32 s12, s2, 9
  v_lshlrev_b32_e32 v1, 3, v0
  v_add_u32_e32 v1, s12, v1
  global_load_dwordx2 v[2:3], v1, s[4:5]
  global_load_dwordx2 v[4:5], v1, s[6:7]
  s_waitcnt vmcnt(0)
  {insn} v[8:{7 + nd}], v[2:3], v[4:5], 0 {mods}
  s_nop 7
  s_nop 7
  v_mul_u32_u24_e32 v6, {4 * nd}, v0
  s_mul_i32 s13, s2, {4 * nd * 64}
  v_add_u32_e32 v6, s13, v6
""" + "\n".join(f"  global_store_dword v6, v{8 + r}, s[8:9] offset:{4 * r}" for r in range(nd)),
        "bcast", args=[("a", "global_buffer", 8), ("b", "global_buffer", 8), ("out", "global_buffer", 8)])
    n = a.shape[0]
    out = Buffer.empty("out", (n, nd), np.float32)
    run = run_asm(k, grid=(G,), block=64, batch=batch, args={
        "a": Buffer("a", a, {"token": np.arange(a.size).reshape(a.shape)}),
        "b": Buffer("b", b, {"token": 100000 + np.arange(b.size).reshape(b.shape)}), "out": out})
    events = [e for e in run.trace.events if isinstance(e, MmaEvent)]
    return out.array, events


def _data(G=1, seed=0, insn="v_mfma_f32_4x4x4_16b_f16"):
    rng = np.random.default_rng(seed)
    if "fp8" in insn:          # fp8 (e4m3fnuz) codes of small magnitude, either sign; 0x80 (NaN) avoided
        codes = np.concatenate([np.arange(0x00, 0x40), np.arange(0x81, 0xC0)]).astype(np.uint8)
        return rng.choice(codes, (G * 64, 8)), rng.choice(codes, (G * 64, 8))
    a = rng.integers(-4, 5, (G * 64, 4)).astype(np.float16)
    b = rng.integers(-4, 5, (G * 64, 4)).astype(np.float16)
    return a, b


def _permuted(x, src, G):
    return np.concatenate([x[64 * g:64 * g + 64][src] for g in range(G)])


def _tokens_permuted(tok, src, G):
    return np.concatenate([tok.reshape(-1, 64, tok.shape[1])[g][src] for g in range(G)])


def _plain(insn, a, b, pa, pb):
    """The plain instruction on lane-permuted registers, with the tokens moved as the values were."""
    G = a.shape[0] // 64
    ta, tb = np.arange(a.size).reshape(a.shape), 100000 + np.arange(b.size).reshape(b.shape)
    a2, b2 = _permuted(a, pa, G), _permuted(b, pb, G)
    ta2, tb2 = _tokens_permuted(ta, pa, G), _tokens_permuted(tb, pb, G)
    nd = ND[insn]
    k = kernel_from_text(f"""
  s_load_dwordx4 s[4:7], s[0:1], 0x0
  s_load_dwordx2 s[8:9], s[0:1], 0x10
  s_waitcnt lgkmcnt(0)
  s_lshl_b32 s12, s2, 9
  v_lshlrev_b32_e32 v1, 3, v0
  v_add_u32_e32 v1, s12, v1
  global_load_dwordx2 v[2:3], v1, s[4:5]
  global_load_dwordx2 v[4:5], v1, s[6:7]
  s_waitcnt vmcnt(0)
  {insn} v[8:{7 + nd}], v[2:3], v[4:5], 0
""", "plain", args=[("a", "global_buffer", 8), ("b", "global_buffer", 8), ("out", "global_buffer", 8)])
    run = run_asm(k, grid=(G,), block=64, args={"a": Buffer("a", a2, {"token": ta2}),
                                                 "b": Buffer("b", b2, {"token": tb2}),
                                                 "out": Buffer.empty("out", (1,), np.float32)})
    return [e for e in run.trace.events if isinstance(e, MmaEvent)]


def _d_plain(insn, a, b, pa, pb):
    G = a.shape[0] // 64
    out, _ = _run(insn, "", _permuted(a, pa, G), _permuted(b, pb, G))
    return out


CASES = [("v_mfma_f32_4x4x4_16b_f16", c, ab, 0) for c, ab in ((1, 0), (1, 1), (2, 3), (3, 5), (4, 0), (4, 9), (4, 15))] + \
        [("v_mfma_f32_4x4x4_16b_f16", 0, 0, g) for g in range(1, 8)] + \
        [("v_mfma_f32_4x4x4_16b_f16", 2, 1, 3), ("v_mfma_f32_4x4x4_16b_f16", 4, 6, 5)] + \
        [("v_mfma_f32_32x32x8_f16", 0, 0, g) for g in (1, 2, 3, 4, 7)] + \
        [("v_mfma_f32_16x16x32_fp8_fp8", 0, 0, g) for g in (2, 3, 5)]


@pytest.mark.parametrize("insn,cbsz,abid,blgp", CASES)
def test_broadcast_is_the_plain_instruction_on_permuted_lanes(insn, cbsz, abid, blgp):
    a, b = _data(1, seed=cbsz * 16 + abid + 100 * blgp, insn=insn)
    mods = " ".join(f"{k}:{v}" for k, v in (("cbsz", cbsz), ("abid", abid), ("blgp", blgp)) if v)
    pa = a_src(cbsz, abid) if cbsz else np.arange(64)
    pb = b_src(blgp)
    got, ev = _run(insn, mods, a, b)
    want = _d_plain(insn, a, b, pa, pb)
    assert (got == want).all(), f"{insn} {mods}: D differs from the plain instruction on permuted lanes"
    ref = _plain(insn, a, b, pa, pb)
    for op in "AB":
        assert (ev[0].slot_tags(op) == ref[0].slot_tags(op)).all(), f"{insn} {mods}: {op}'s K-slot tokens"
    if insn == "v_mfma_f32_4x4x4_16b_f16":        # what the controls mean for the 16 blocks
        _, ev0 = _run(insn, "", a, b)
        ta, tb = ev0[0].slot_tags("A"), ev0[0].slot_tags("B")
        blocks = np.arange(16)
        srca = blocks % (16 >> cbsz) + (16 >> cbsz) * abid if cbsz else blocks
        srcb = b_src(blgp)[4 * blocks] // 4
        assert (ev[0].slot_tags("A") == ta[srca]).all() and (ev[0].slot_tags("B") == tb[srcb]).all()
        # the numbers: D[b] = A[srca[b]] @ B[srcb[b]] per block, from the tokens' elements
        av = a.reshape(-1)[ta]
        bv = b.reshape(-1)[tb - 100000]
        d = np.einsum("bik,bkj->bij", av[srca].astype(np.float32), bv[srcb].astype(np.float32))
        assert np.allclose(np.sort(got.reshape(-1)), np.sort(d.reshape(-1)))


def test_members_of_a_batch_broadcast_their_own_lanes():
    """Three workgroups side by side in one wave: each broadcasts within its own 64 lanes."""
    a, b = _data(3, seed=4)
    mods = "cbsz:2 abid:3 blgp:6"
    got1, ev1 = _run("v_mfma_f32_4x4x4_16b_f16", mods, a, b, batch=1)
    got3, ev3 = _run("v_mfma_f32_4x4x4_16b_f16", mods, a, b, batch=3)
    assert (got1 == got3).all()
    want = _d_plain("v_mfma_f32_4x4x4_16b_f16", a, b, a_src(2, 3), b_src(6))
    assert (got3 == want).all()
    for e1, e3 in zip(ev1, ev3):
        for op in "AB":
            assert (e1.slot_tags(op) == e3.slot_tags(op)).all()


@pytest.mark.parametrize("insn,mods,msg", [
    ("v_mfma_f32_4x4x4_16b_f16", "cbsz:5", "has 16"), ("v_mfma_f32_4x4x4_16b_f16", "cbsz:1 abid:2", "abid:2"),
    ("v_mfma_f32_4x4x4_16b_f16", "abid:1", "abid:1"), ("v_mfma_f32_32x32x8_f16", "cbsz:1", "has 1"),
])
def test_controls_outside_the_isa_are_refused(insn, mods, msg):
    a, b = _data()
    with pytest.raises(AsmError, match=msg):
        _run(insn, mods, a, b)


# -- a HIP kernel compiled by clang-19: the decode-style broadcast of one block's A ------------------
def _mfma4_ref(a, b, cbsz, abid, blgp):
    """D of v_mfma_f32_4x4x4_16b_f16 per lane [64, 4] from the documented layouts (block b of A in
    lanes 4b+i, element k; of B in lanes 4b+j, element k; D[b,i,j] in lane 4b+j, register i) with the
    broadcast's lane permutations applied to the registers first."""
    pa = a_src(cbsz, abid) if cbsz else np.arange(64)
    A = a.astype(np.float32)[pa].reshape(16, 4, 4)            # [b, i, k]
    B = b.astype(np.float32)[b_src(blgp)].reshape(16, 4, 4)   # [b, j, k]
    D = np.einsum("bik,bjk->bij", A, B)                       # [b, i, j]
    return D.transpose(0, 2, 1).reshape(64, 4)                # lane 4b+j, register i


def test_hip_decode_broadcast_end_to_end(tmp_path):
    """clang-19 compiles __builtin_amdgcn_mfma_f32_4x4x4f16(a, b, 0, 4, i, 0) for i = 0..15 into
    cbsz:4 abid:i, after a row_ror:4 DPP move of B, and blgp:3: every output against numpy, in three
    workgroups side by side, and the tokens of A's K slots in every block are block i's."""
    import subprocess
    from gfxsim.asm import parse_file
    from gfxsim.hip.build import CFLAGS
    from support import ROOT, need_toolchain
    tc = need_toolchain("gfx942")
    src = ROOT / "tests" / "gfxsim" / "asm" / "hip" / "mfma4_bcast.hip"
    asm = tmp_path / "mfma4_bcast.s"
    subprocess.run([str(tc.clang), *CFLAGS, "--offload-arch=gfx942", "-S", "-o", str(asm), str(src)], check=True)
    text = asm.read_text()
    assert "row_ror:4" in text and "cbsz:4 abid:15" in text and "blgp:3" in text
    G = 3
    rng = np.random.default_rng(12)
    a = rng.integers(-4, 5, (G * 64, 4)).astype(np.float16)
    b = rng.integers(-4, 5, (G * 64, 4)).astype(np.float16)
    out = Buffer.empty("out", (G * 17 * 64, 4), np.float32)
    run = run_asm(parse_file(asm).kernel("mfma4_bcast"), grid=(G,), block=64, batch=G,
                  args={"a": Buffer("a", a, {"token": np.arange(a.size).reshape(a.shape)}), "b": Buffer("b", b),
                        "out": out})
    lanes = np.arange(64)
    ror = lanes // 16 * 16 + (lanes - 4) % 16                  # row_ror:4: lane l reads (l - 4) mod 16 of its row
    for g in range(G):
        ag, bg = a[64 * g:64 * g + 64], b[64 * g:64 * g + 64][ror]
        o = out.array[g * 17 * 64:(g + 1) * 17 * 64].reshape(17, 64, 4)
        for i in range(16):
            assert (o[i] == _mfma4_ref(ag, bg, 4, i, 0)).all(), f"workgroup {g}, abid {i}"
        assert (o[16] == _mfma4_ref(ag, bg, 0, 0, 3)).all(), f"workgroup {g}, blgp 3"
    ev = [e for e in run.trace.events if isinstance(e, MmaEvent)]
    assert len(ev) == 17 * G
    for g in range(G):
        evs = [e for e in ev if (e.workgroup[0] if isinstance(e.workgroup, tuple) else e.workgroup) == g][:16]
        assert len(evs) == 16
        for i, e in enumerate(evs):                # issued in order: abid 0..15
            tags = e.slot_tags("A")
            want = (64 * g + 4 * i + np.arange(4))[:, None] * 4 + np.arange(4)[None, :]   # block i's A tokens
            assert (tags == want[None]).all(), f"workgroup {g}, abid {i}: A's K slots carry {tags[0].tolist()}"
