"""MUBUF buffer_load/buffer_store through V# descriptors: addressing (offen, idxen with a stride,
soffset, offset:, add_tid_enable), range checks (num_records per 4-byte piece, structured
indices), the buffer-out-of-range finding and the masked-lane idiom it leaves alone, and the
tokens the bytes carry through a load and a store."""
from __future__ import annotations

import numpy as np
import pytest

from gfxsim import Buffer
from gfxsim.machine.errors import MemoryFault

from support.mubuf import COPY, MASKED, run



def xbuf(n=64, dtype=np.int32):
    return Buffer("x", (np.arange(n) + 1).astype(dtype), {"token": np.arange(n)})


def test_raw_load_and_store_move_words_and_tokens():
    y = Buffer.empty("y", (64,), np.int32, tags={"token": np.arange(64)})
    y, r = run(COPY, xbuf(), y)
    assert (y.array == np.arange(64) + 1).all() and not r.findings
    ids = y.prov.ids["token"]
    assert (np.repeat(ids, y.prov.unit)[:256].reshape(64, 4) == np.arange(64)[:, None]).all()


def test_past_num_records_reads_zero_and_is_reported():
    y, r = run(COPY, xbuf(), nr_x=100)
    assert (y.array[:25] == np.arange(25) + 1).all() and (y.array[25:] == 0).all()
    f = r.findings_of("buffer-out-of-range")
    assert len(f) == 1 and f[0].details["reason"] == "num_records" and f[0].details["lanes"] == list(range(25, 64))
    assert f[0].details["offset"] == 100 and f[0].details["access"] == "load" and f[0].lane == 25


def test_store_past_num_records_is_dropped():
    y, r = run(COPY, xbuf(), nr_y=128)
    assert (y.array[:32] == np.arange(32) + 1).all() and (y.array[32:] == -1).all()
    (f,) = r.findings
    assert f.details["access"] == "store" and f.details["lanes"] == list(range(32, 64)) and f.details["buffer"] == "y"


def test_triton_masked_lanes_read_zero_silently():
    """Triton's raw-buffer masking: num_records 0x7ffffffe, masked lanes at offset 0x80000000."""
    y, r = run(MASKED, xbuf(40), nr_x=0x7FFFFFFE, nr_y=0x7FFFFFFE)
    assert (y.array[:40] == np.arange(40) + 1).all() and (y.array[40:] == -1).all()
    assert not r.findings


def test_overrun_inside_num_records_is_reported():
    """The unmasked tail: num_records far past the tensor, lanes 40.. read past x."""
    y, r = run(COPY, xbuf(40), nr_x=0x7FFFFFFE)
    assert (y.array[40:] == 0).all()
    (f,) = r.findings
    assert f.details["reason"] == "buffer" and f.details["lanes"] == list(range(40, 64)) and f.details["offset"] == 160


def test_soffset_adds_but_is_not_range_checked():
    body = """
v_lshlrev_b32_e32 v1, 2, v0
s_movk_i32 s20, 0x40
buffer_load_dword v2, v1, s[8:11], s20 offen
s_waitcnt vmcnt(0) lgkmcnt(0)
buffer_store_dword v2, v1, s[12:15], 0 offen
"""
    y, r = run(body, xbuf(128), nr_x=256)
    assert (y.array == np.arange(64) + 17).all() and not r.findings


def test_offset_field_and_inline_soffset():
    body = """
v_lshlrev_b32_e32 v1, 2, v0
buffer_load_dword v2, v1, s[8:11], 4 offen offset:8
s_waitcnt vmcnt(0) lgkmcnt(0)
buffer_store_dword v2, v1, s[12:15], 0 offen
"""
    y, r = run(body, xbuf(128), nr_x=512)
    assert (y.array == np.arange(64) + 4).all()


def test_idxen_with_a_stride_and_the_structured_range_check():
    """Records of 8 bytes: lane l reads record l's second dword; index >= num_records reads 0."""
    body = """
v_mov_b32_e32 v1, v0
buffer_load_dword v2, v1, s[8:11], 0 idxen offset:4
s_waitcnt vmcnt(0) lgkmcnt(0)
v_lshlrev_b32_e32 v3, 2, v0
buffer_store_dword v2, v3, s[12:15], 0 offen
"""
    y, r = run(body, xbuf(128), nr_x=48, stride=8)
    assert (y.array[:48] == 2 * np.arange(48) + 2).all() and (y.array[48:] == 0).all()
    (f,) = r.findings
    assert f.details["reason"] == "num_records" and f.details["lanes"] == list(range(48, 64))


def test_idxen_and_offen_pair():
    body = """
v_lshrrev_b32_e32 v4, 1, v0
v_and_b32_e32 v5, 1, v0
v_lshlrev_b32_e32 v5, 2, v5
buffer_load_dword v2, v[4:5], s[8:11], 0 idxen offen
s_waitcnt vmcnt(0) lgkmcnt(0)
v_lshlrev_b32_e32 v3, 2, v0
buffer_store_dword v2, v3, s[12:15], 0 offen
"""
    y, r = run(body, xbuf(128), nr_x=1000, stride=8)
    assert (y.array == np.arange(64) + 1).all() and not r.findings


def test_add_tid_enable_adds_the_lane_to_the_index():
    body = """
buffer_load_dword v2, off, s[8:11], 0
s_waitcnt vmcnt(0) lgkmcnt(0)
v_lshlrev_b32_e32 v3, 2, v0
buffer_store_dword v2, v3, s[12:15], 0 offen
"""
    y, r = run(body, xbuf(), nr_x=64, stride=4, word3=0x20000 | (1 << 23))
    assert (y.array == np.arange(64) + 1).all() and not r.findings


def test_dwordx4_checks_each_dword():
    """num_records 0x108: lane 16's access [256, 272) keeps its first two dwords only."""
    body = """
v_lshlrev_b32_e32 v1, 4, v0
buffer_load_dwordx4 v[2:5], v1, s[8:11], 0 offen
s_waitcnt vmcnt(0) lgkmcnt(0)
v_lshlrev_b32_e32 v6, 2, v0
v_add_u32_e32 v2, v2, v3
v_add_u32_e32 v2, v2, v4
v_add_u32_e32 v2, v2, v5
buffer_store_dword v2, v6, s[12:15], 0 offen
"""
    y, r = run(body, xbuf(256), nr_x=0x108)
    want = np.array([sum(4 * l + k + 1 for k in range(4)) for l in range(64)])
    want[16] = 4 * 16 + 1 + 4 * 16 + 2
    want[17:] = 0
    assert (y.array == want).all()
    (f,) = r.findings
    assert f.details["lanes"] == list(range(16, 64)) and f.details["offset"] == 264


@pytest.mark.parametrize("mn,fill", [("buffer_load_ubyte", np.uint8), ("buffer_load_sbyte", np.int8),
                                     ("buffer_load_ushort", np.uint16), ("buffer_load_sshort", np.int16)])
def test_sub_dword_loads_extend(mn, fill):
    vals = np.arange(-64, 64, 2).astype(fill)
    x = Buffer("x", np.zeros(128, fill))
    x.raw[: vals.nbytes] = vals.view(np.uint8)
    size = vals.itemsize
    body = f"""
v_lshlrev_b32_e32 v1, {size.bit_length() - 1}, v0
{mn} v2, v1, s[8:11], 0 offen
s_waitcnt vmcnt(0) lgkmcnt(0)
v_lshlrev_b32_e32 v3, 2, v0
buffer_store_dword v2, v3, s[12:15], 0 offen
"""
    y, _ = run(body, x, nr_x=64 * size)
    assert (y.array == vals.astype(np.int64)).all()      # zero- or sign-extended by the value's type


@pytest.mark.parametrize("mn,keep", [("buffer_store_byte", 1), ("buffer_store_short", 2),
                                     ("buffer_store_byte_d16_hi", 1), ("buffer_store_short_d16_hi", 2)])
def test_sub_dword_stores(mn, keep):
    y = Buffer("y", np.zeros(256, np.uint8))
    body = f"""
v_lshlrev_b32_e32 v1, 2, v0
buffer_load_dword v2, v1, s[8:11], 0 offen
s_waitcnt vmcnt(0)
{mn} v2, v1, s[12:15], 0 offen
"""
    x = Buffer("x", np.arange(256, dtype=np.uint8))
    y, r = run(body, x, y)
    got = y.array.reshape(64, 4)
    src = np.arange(256, dtype=np.uint8).reshape(64, 4)
    lo = 2 if "d16_hi" in mn else 0
    assert (got[:, :keep] == src[:, lo:lo + keep]).all() and (got[:, keep:] == 0).all()


def test_swizzled_descriptor_is_refused():
    with pytest.raises(Exception, match="swizzle"):
        run("s_or_b32 s9, s9, 0x80000000\n" + COPY, xbuf())


def test_a_base_in_no_buffer_faults():
    with pytest.raises(MemoryFault, match="in no buffer"):
        run("s_mov_b32 s9, 0\ns_mov_b32 s8, 0x1000\n" + COPY, xbuf())


def test_a_null_descriptor_with_no_records_reads_zero():
    """num_records 0: every lane is out of range (reported, but no fault at the null base)."""
    y, r = run("s_mov_b64 s[8:9], 0\n" + COPY, xbuf(), nr_x=0)
    assert (y.array == 0).all()
    (f,) = r.findings
    assert f.details["reason"] == "num_records" and f.details["buffer"].startswith("(no buffer")


def _byte_tokens(buf, n=64):
    ids = buf.prov.ids["token"]
    return np.repeat(ids, buf.prov.unit)[: 4 * n].reshape(n, 4)


@pytest.mark.parametrize("form", ["buffer", "global"])
def test_d16_loads_fill_one_half_and_keep_the_other(form):
    """short_d16 then short_d16_hi into one register: the dword holds both halves, each byte its
    own token; the first load leaves the never-written high half alone (no finding)."""
    x = Buffer("x", np.arange(128, dtype=np.uint16) * 3, {"token": np.arange(128)})
    y = Buffer.empty("y", (64,), np.uint32)
    if form == "buffer":
        loads = """
buffer_load_short_d16 v2, v1, s[8:11], 0 offen
buffer_load_short_d16_hi v2, v1, s[8:11], 0 offen offset:2
s_waitcnt vmcnt(0) lgkmcnt(0)
"""
    else:
        loads = """
s_load_dwordx2 s[16:17], s[0:1], 0x0
s_waitcnt lgkmcnt(0)
global_load_short_d16 v2, v1, s[16:17]
global_load_short_d16_hi v2, v1, s[16:17] offset:2
s_waitcnt vmcnt(0) lgkmcnt(0)
"""
    body = "v_lshlrev_b32_e32 v1, 2, v0\n" + loads + "buffer_store_dword v2, v1, s[12:15], 0 offen\n"
    y, r = run(body, x, y)
    assert (y.array == (np.arange(0, 128, 2) * 3) | ((np.arange(1, 128, 2) * 3) << 16)).all() and not r.findings
    tok = _byte_tokens(y)
    assert (tok == np.repeat(np.arange(128).reshape(64, 2), 2, axis=1)).all()


@pytest.mark.parametrize("mn,want", [("buffer_load_ubyte_d16", 0x1234_00F0), ("buffer_load_sbyte_d16", 0x1234_FFF0),
                                     ("buffer_load_ubyte_d16_hi", 0x00F0_5678), ("buffer_load_sbyte_d16_hi", 0xFFF0_5678)])
def test_byte_d16_loads_extend_to_16_bits(mn, want):
    x = Buffer("x", np.full(256, 0xF0, np.uint8))
    body = f"""
v_lshlrev_b32_e32 v1, 2, v0
v_mov_b32_e32 v2, 0x12345678
{mn} v2, v1, s[8:11], 0 offen
s_waitcnt vmcnt(0) lgkmcnt(0)
buffer_store_dword v2, v1, s[12:15], 0 offen
"""
    y, _ = run(body, x)
    assert (y.array.view(np.uint32) == want).all()


def test_d16_out_of_range_zeroes_its_half_only():
    x = Buffer("x", np.full(128, 0x7777, np.uint16))
    body = """
v_lshlrev_b32_e32 v1, 2, v0
v_mov_b32_e32 v2, 0x12345678
buffer_load_short_d16_hi v2, v1, s[8:11], 0 offen
s_waitcnt vmcnt(0) lgkmcnt(0)
buffer_store_dword v2, v1, s[12:15], 0 offen
"""
    y, r = run(body, x, nr_x=128)
    got = y.array.view(np.uint32)
    assert (got[:32] == 0x7777_5678).all() and (got[32:] == 0x0000_5678).all()
    assert r.findings_of("buffer-out-of-range")[0].details["lanes"] == list(range(32, 64))


def test_every_buffer_instruction_is_one_event():
    """Whether its lanes are in range, split into pieces, or all out of range (no access at all)."""
    body = """
v_lshlrev_b32_e32 v1, 4, v0
buffer_load_dwordx4 v[2:5], v1, s[8:11], 0 offen
buffer_load_dword v6, v1, s[8:11], 0 offen offset:4000
buffer_load_short_d16_hi v6, v1, s[8:11], 0 offen
s_waitcnt vmcnt(0) lgkmcnt(0)
v_lshlrev_b32_e32 v1, 2, v0
buffer_store_dword v2, v1, s[12:15], 0 offen
"""
    _, r = run(body, xbuf(256), nr_x=0x108)
    names = [e.op for e in r.trace.events]
    for mn in ("buffer_load_dwordx4", "buffer_load_dword", "buffer_load_short_d16_hi", "buffer_store_dword"):
        assert names.count(mn) == 1, (mn, names)
    assert len(names) == len(set(e.index for e in r.trace.events))
    e = next(e for e in r.trace.events if e.op == "buffer_load_dwordx4")
    assert e.outputs and e.outputs[0].regs == (2, 4)


def test_batched_workgroups_each_use_their_own_descriptor():
    """Workgroup g copies x[64g:64g+64] by soffset = 256*g, with num_records cut at 200 words, and
    each workgroup's out-of-range lanes are its own finding: batch=2 gives batch=1's results."""
    from gfxsim.asm.run import kernel_from_text, run_asm
    from support.mubuf import ARGS, desc
    body = desc(8, 0, 800) + desc(12, 8, 0x7FFFFFFE) + """
s_lshl_b32 s20, s2, 8
v_lshlrev_b32_e32 v1, 2, v0
v_add_u32_e32 v3, s20, v1
buffer_load_dword v2, v3, s[8:11], 0 offen
s_waitcnt vmcnt(0) lgkmcnt(0)
buffer_store_dword v2, v1, s[12:15], s20 offen
"""
    k = kernel_from_text(body, "test_batch", args=ARGS)
    outs = []
    for batch in (1, 2):
        x = Buffer("x", np.arange(256, dtype=np.int32) + 1)
        y = Buffer("y", np.full(256, -1, np.int32))
        r = run_asm(k, 4, 64, args=dict(x=x, y=y), batch=batch)
        outs.append((y.array.copy(), sorted((f.workgroup, tuple(f.details["lanes"])) for f in r.findings)))
    want = np.where(np.arange(256) < 200, np.arange(256) + 1, 0)
    assert (outs[0][0] == want).all() and (outs[1][0] == want).all()
    assert outs[0][1] == outs[1][1] == [((3, 0, 0), tuple(range(8, 64)))]


def test_buffer_load_to_lds():
    """buffer_load_dword ... lds: lane l's dword lands at LDS M0 + offset: + 4l (out of range: 0),
    tokens with it; a ds_read brings it back."""
    from gfxsim.asm.run import kernel_from_text, run_asm
    from support.mubuf import ARGS, desc
    body = desc(8, 0, 200) + desc(12, 8, 256) + """
v_lshlrev_b32_e32 v1, 2, v0
s_mov_b32 m0, 0x100
buffer_load_dword v1, s[8:11], 0 offen offset:16 lds
s_waitcnt vmcnt(0)
v_add_u32_e32 v3, 0x110, v1
ds_read_b32 v2, v3
s_waitcnt vmcnt(0) lgkmcnt(0)
buffer_store_dword v2, v1, s[12:15], 0 offen
"""
    x = Buffer("x", np.arange(64, dtype=np.int32) + 1, {"token": np.arange(64)})
    y = Buffer.empty("y", (64,), np.int32)
    run_asm(kernel_from_text(body, "test_lds", args=ARGS, lds=1024), args=dict(x=x, y=y))
    want = np.where(np.arange(64) < 46, np.arange(64) + 5, 0)        # bytes 16.. of x, up to num_records 200
    assert (y.array == want).all()
    tok = _byte_tokens(y)
    assert (tok[:46] == (np.arange(46) + 4)[:, None]).all() and (tok[46:] == -1).all()


HIP = r"""
#include "gfxsim_hip.h"
extern "C" __global__ void rows(int* __restrict__ out, const int* __restrict__ in, int count, int records, int masked) {
  __amdgpu_buffer_rsrc_t src = __builtin_amdgcn_make_buffer_rsrc((void*)in, 0, records, 0x00020000);
  __amdgpu_buffer_rsrc_t dst = __builtin_amdgcn_make_buffer_rsrc((void*)out, 0, 256, 0x00020000);
  int i = threadIdx.x;
  int off = (masked && i >= count) ? (int)0x80000000 : i * 4;
  int v = __builtin_amdgcn_raw_buffer_load_b32(src, off, 0, 0);
  __builtin_amdgcn_raw_buffer_store_b32(v + 1, dst, i * 4, 0, 0);
}
"""


@pytest.mark.parametrize("records,masked,reason", [
    (0x7FFFFFFE, 1, None), (0x7FFFFFFE, 0, "buffer"), (160, 1, None), (160, 0, "num_records"), (100, 0, "num_records")])
def test_clangs_buffer_builtins(tmp_path, records, masked, reason):
    """clang's own descriptors (__builtin_amdgcn_make_buffer_rsrc) over 40 rows: masked lanes and a
    num_records that fits are silent; the unmasked tail past the tensor and a num_records short of
    the lanes are reported."""
    from gfxsim.asm.parse import parse
    from gfxsim.asm.run import run_asm
    from support.mubuf import compile_hip
    text = compile_hip(HIP, tmp_path)
    assert "buffer_load_dword" in text and "buffer_store_dword" in text
    x = Buffer("in", np.arange(40, dtype=np.int32) * 2)
    out = Buffer("out", np.full(64, -1, np.int32))
    r = run_asm(parse(text).kernel("rows"), args=dict(out=out, count=40, records=records, masked=masked, **{"in": x}))
    n = min(40, records // 4)
    assert (out.array[:n] == 2 * np.arange(n) + 1).all() and (out.array[n:] == 1).all()
    assert [f.details["reason"] for f in r.findings] == ([reason] if reason else [])


def test_scalar_buffer_loads_range_check_each_dword():
    body = """
s_movk_i32 s20, 0x18
s_buffer_load_dwordx4 s[24:27], s[8:11], s20
s_buffer_load_dword s28, s[8:11], 0x4
s_waitcnt lgkmcnt(0)
v_mov_b32_e32 v2, s24
v_mov_b32_e32 v3, s25
v_mov_b32_e32 v4, s26
v_mov_b32_e32 v5, s28
v_mov_b32_e32 v1, 0
buffer_store_dwordx4 v[2:5], v1, s[12:15], 0 offen
"""
    y, r = run(body, xbuf(), nr_x=0x20)
    assert y.array[:4].tolist() == [7, 8, 0, 2] and not r.findings     # dwords 6, 7 in range; 8 past 0x20
    assert [e.op for e in r.trace.events].count("s_buffer_load_dwordx4") == 1
