"""Every byte-routing form of both front ends, driven with a token-tagged buffer: each lane loads
one dword of four tokens (4l .. 4l+3), rearranges its bytes and stores the word; the stored bytes
must carry exactly the tokens of the bytes they hold — none lost, none kept by a byte the
instruction cleared."""
from __future__ import annotations

import numpy as np
import pytest

from gfxsim import Buffer, launch
from gfxsim.asm.run import kernel_from_text, run_asm

# byte i of the stored word comes from byte SRC[i] of the loaded one (-1: a byte that is zero)
ASM = {
    "v_lshlrev_b32 | v_lshrrev_b32": ("""
  v_lshlrev_b32_e32 v4, 8, v2
  v_lshrrev_b32_e32 v5, 24, v2
  v_or_b32_e32 v3, v4, v5""", [3, 0, 1, 2]),
    "v_perm_b32": ("  v_perm_b32 v3, v2, v2, 0x10203", [3, 2, 1, 0]),
    "v_perm_b32 zero bytes": ("  v_perm_b32 v3, v2, v2, 0xc0c0100", [0, 1, -1, -1]),
    "v_and_b32 mask first": ("  v_and_b32_e32 v3, 0xff00, v2", [-1, 1, -1, -1]),
    "v_and_b32 mask second": ("  v_and_b32_e64 v3, v2, 0xff0000", [-1, -1, 2, -1]),
    "v_bfe_u32": ("  v_bfe_u32 v3, v2, 8, 16", [1, 2, -1, -1]),
    "v_lshl_or_b32": ("  v_lshrrev_b32_e32 v4, 16, v2\n  v_lshl_or_b32 v3, v2, 16, v4", [2, 3, 0, 1]),
    "v_and_or_b32": ("  v_lshlrev_b32_e32 v4, 16, v2\n  v_and_or_b32 v3, v2, 0xffff, v4", [0, 1, 0, 1]),
    "v_or3_b32": ("""
  v_and_b32_e32 v4, 0xff, v2
  v_and_b32_e32 v5, 0xff0000, v2
  v_lshrrev_b32_e32 v6, 24, v2
  v_lshlrev_b32_e32 v6, 8, v6
  v_or3_b32 v3, v4, v5, v6""", [0, 3, 2, -1]),
    "v_or_b32_sdwa src1_sel:BYTE_0": ("""
  v_lshlrev_b32_e32 v4, 8, v2
  v_or_b32_sdwa v3, v4, v2 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:DWORD src1_sel:BYTE_0""", [0, 0, 1, 2]),
    "v_lshlrev_b32_sdwa src1_sel:BYTE_0": (
        "  v_lshlrev_b32_sdwa v3, 8, v2 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:DWORD src1_sel:BYTE_0",
        [-1, 0, -1, -1]),
    "v_or_b32_sdwa src0_sel:BYTE_3 src1_sel:WORD_1": (
        "  v_or_b32_sdwa v3, v2, v2 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:BYTE_3 src1_sel:WORD_1",
        [None, 3, -1, -1]),   # byte 0 = b3 | b2: two tokens in one byte (not compared); byte 1 = b3
    "v_alignbit_b32 by 16": ("  v_alignbit_b32 v3, v2, v2, 16", [2, 3, 0, 1]),
    "v_mov_b32_sdwa dst_sel:WORD_1 UNUSED_PRESERVE": ("""
  v_mov_b32_e32 v3, v2
  v_mov_b32_sdwa v3, v2 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:WORD_0""", [0, 1, 0, 1]),
    "v_mov_b32_sdwa of a constant, UNUSED_PRESERVE": ("""
  v_mov_b32_e32 v3, v2
  v_mov_b32_e32 v5, 0x7070707
  v_mov_b32_sdwa v3, v5 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:WORD_0""", [0, 1, None, None]),
    "v_mov_b32_sdwa dst_sel:BYTE_2 UNUSED_PAD": (
        "  v_mov_b32_sdwa v3, v2 dst_sel:BYTE_2 dst_unused:UNUSED_PAD src0_sel:BYTE_1", [-1, -1, 1, -1]),
    "v_alignbyte_b32": ("  v_alignbyte_b32 v3, v2, v2, 1", [1, 2, 3, 0]),
    "v_cndmask_b32": ("  v_cmp_eq_u32_e32 vcc, v0, v0\n  v_cndmask_b32_e32 v3, 0, v2, vcc", [0, 1, 2, 3]),
    "v_pk_mov_b32 op_sel:[1,0]": ("  v_mov_b32_e32 v5, v2\n  v_mov_b32_e32 v4, 0\n"
                                  "  v_pk_mov_b32 v[3:4], v[4:5], v[4:5] op_sel:[1,0]", [0, 1, 2, 3]),
}


def _stored_tokens(buf) -> np.ndarray:
    """The token each stored byte carries, [lanes, 4] (-1: none)."""
    mp = buf.prov
    assert mp is not None and not mp.empty(), "the store carried no provenance"
    ids = mp.ids.get("token")
    if ids is None:
        return np.full((64, 4), -1)
    return np.repeat(ids, mp.unit)[: 256].reshape(64, 4) if mp.unit > 1 else ids.reshape(64, 4)


def _expected(src) -> np.ndarray:
    base = 4 * np.arange(64)[:, None]
    s = np.asarray(src)[None, :]
    return np.where(s >= 0, base + s, -1)


def _data():
    rng = np.random.default_rng(1)
    k = rng.integers(1, 255, (64, 4)).astype(np.uint8)            # no zero byte: every byte is data
    return k, np.arange(256).reshape(64, 4)


@pytest.mark.parametrize("form", sorted(ASM))
def test_asm_byte_routes(form):
    body, src = ASM[form]
    k, tok = _data()
    out = Buffer.empty("out", (64, 4), np.uint8)
    kern = kernel_from_text("""
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_load_dwordx2 s[6:7], s[0:1], 0x8
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32_e32 v1, 2, v0
  global_load_dword v2, v1, s[4:5]
  s_waitcnt vmcnt(0)
""" + body + """
  global_store_dword v1, v3, s[6:7]
""", "routes", args=[("k", "global_buffer", 8), ("out", "global_buffer", 8)])
    run_asm(kern, args={"k": Buffer("k", k, {"token": tok}), "out": out})
    got = _stored_tokens(out)
    known = np.array([s is not None for s in src])
    src = np.array([-1 if s is None else s for s in src])
    want = _expected(src)
    assert (got == want)[:, known].all(), f"{form}: lane 0 stored tokens {got[0].tolist()}, expected {want[0].tolist()}"
    # the numbers: the same bytes moved
    kb = k.astype(np.int64)
    exp_bytes = np.where(src[None, :] >= 0, kb[:, np.maximum(src, 0)], 0)
    assert (out.array.astype(np.int64) == exp_bytes)[:, known].all(), form


def _py(fn, dtype):
    def kernel(w, kbuf, obuf):
        v = w.global_load(kbuf, w.lane_id * 4, nbytes=4, dtype=dtype)
        w.global_store(obuf, w.lane_id * 4, fn(w, v))
    return kernel


PY = {
    "<< | >>": (lambda w, v: (v << 8) | (v >> 24), "u32", [3, 0, 1, 2]),
    "& mask": (lambda w, v: v & 0xFF00, "u32", [-1, 1, -1, -1]),
    "perm": (lambda w, v: w.perm(v, v, 0x00010203), "u32", [3, 2, 1, 0]),
    "bytes + cat": (lambda w, v: w.cat(v.bytes(2, 2), v.bytes(0, 2)), "u8", [2, 3, 0, 1]),
    "select": (lambda w, v: w.select(w.lane_id >= 0, v >> 16, v), "u32", [2, 3, -1, -1]),
}


@pytest.mark.parametrize("form", sorted(PY))
def test_python_byte_routes(form):
    fn, dtype, src = PY[form]
    k, tok = _data()
    out = Buffer.empty("out", (64, 4), np.uint8)
    launch(_py(fn, dtype), grid=1, arch="gfx942", args=(Buffer("k", k, {"token": tok}), out))
    got = _stored_tokens(out)
    assert (got == _expected(src)).all(), f"{form}: lane 0 stored {got[0].tolist()}, expected {src}"


def test_16_bit_loads_widen_with_their_bytes():
    """global_load_ushort / sshort and ds_read_u16 / i16 (clang's loads of f16, bf16 and short
    data): the value zero- or sign-extended, the two loaded bytes carrying their token, the
    extension bytes none (zero) or the top byte's (a sign copy)."""
    k = kernel_from_text("""
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_load_dwordx2 s[6:7], s[0:1], 0x8
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32_e32 v1, 1, v0
  global_load_ushort v2, v1, s[4:5]
  global_load_sshort v4, v1, s[4:5]
  s_waitcnt vmcnt(0)
  ds_write_b16 v1, v2
  s_waitcnt lgkmcnt(0)
  ds_read_u16 v5, v1
  ds_read_i16 v6, v1
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32_e32 v3, 2, v0
  global_store_dword v3, v2, s[6:7]
  global_store_dword v3, v4, s[6:7] offset:256
  global_store_dword v3, v5, s[6:7] offset:512
  global_store_dword v3, v6, s[6:7] offset:768""", "loads16", args=[("a", "global_buffer", 8), ("out", "global_buffer", 8)],
                         lds=128)
    vals = (np.arange(64) * 1000 - 20000).astype(np.int16)
    a = Buffer("a", vals.view(np.uint16), {"token": np.arange(64)})
    out = Buffer.empty("out", (4, 64), np.uint32)
    run = run_asm(k, args={"a": a, "out": out})
    assert run.findings == []
    got = out.array.view(np.int32)
    zext, sext = vals.view(np.uint16).astype(np.int32), vals.astype(np.int32)
    for row, want in enumerate((zext, sext, zext, sext)):
        assert (got[row] == want).all(), row
    mp = out.prov
    ids = np.repeat(mp.ids["token"], mp.unit).reshape(4, 64, 4)
    lane = np.arange(64)[:, None]
    for row in (0, 2):                       # zero-extended: bytes 2-3 carry nothing
        assert (ids[row] == np.concatenate([np.repeat(lane, 2, 1), np.full((64, 2), -1)], 1)).all()
    for row in (1, 3):                       # sign-extended: every byte is the loaded element's
        assert (ids[row] == np.repeat(lane, 4, 1)).all()
