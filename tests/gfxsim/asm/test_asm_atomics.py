"""Global and buffer atomics: every operation's numbers against numpy on distinct addresses, lanes
that share an address applied in lane order (the returned pre-op values are prefix results), the
returned value with sc0/glc, x2 and f64 forms, and where the bytes' tokens go: a returned value
carries the memory's (or the earlier swapping lane's) tokens, memory after a swap the data's,
after an add none."""
from __future__ import annotations

import numpy as np
import pytest

from gfxsim import Buffer
from gfxsim.asm.run import kernel_from_text, run_asm

from support import mubuf

ARGS = [("mem", "global_buffer", 8), ("src", "global_buffer", 8), ("ret", "global_buffer", 8)]


def atomic(op: str, mem, src, *, span=64, ret=True, size=4, name="atomics"):
    """Lane l applies ``op`` with src[l] at mem[l % span]; returns (mem, returned, Run)."""
    n = size // 4
    dst = f"v[10:{9 + n}], " if n > 1 else "v10, "
    data = f"v[2:{1 + n}]" if n > 1 else "v2"
    if "cmpswap" in op:
        data = f"v[2:{1 + 2 * n}]" if n > 1 else "v[2:3]"
    load = {4: "global_load_dword", 8: "global_load_dwordx2", 16: "global_load_dwordx4"}[(2 if "cmpswap" in op else 1) * size]
    body = f"""
s_load_dwordx2 s[4:5], s[0:1], 0x0
s_load_dwordx2 s[6:7], s[0:1], 0x8
s_load_dwordx2 s[8:9], s[0:1], 0x10
s_waitcnt lgkmcnt(0)
v_lshlrev_b32_e32 v1, {(2 if 'cmpswap' in op else 1) * size // 4 + 1}, v0
global_load_{load[len('global_load_'):]} {data}, v1, s[6:7]
s_waitcnt vmcnt(0) lgkmcnt(0)
v_and_b32_e32 v9, {span - 1}, v0
v_lshlrev_b32_e32 v9, {size.bit_length() - 1}, v9
{op} {dst if ret else ''}v9, {data}, s[4:5]{' sc0' if ret else ''}
s_waitcnt vmcnt(0) lgkmcnt(0)
v_lshlrev_b32_e32 v1, {size.bit_length() - 1}, v0
""" + (f"global_store_dword{'x2' if n == 2 else ''} v1, {dst[:-2]}, s[8:9]" if ret else "")
    out = Buffer("ret", np.zeros(64, mem.array.dtype))
    r = run_asm(kernel_from_text(body, name, args=ARGS, vgprs=16), args=dict(mem=mem, src=src, ret=out))
    return mem.array, out.array, r


rng = np.random.default_rng(7)
I = rng.integers(-2**31, 2**31, 64).astype(np.int32)
J = rng.integers(-2**31, 2**31, 64).astype(np.int32)
J[::5] = I[::5]                                              # some equal (cmpswap hits, max ties)


@pytest.mark.parametrize("op,want", [
    ("add", lambda a, b: a + b), ("sub", lambda a, b: a - b), ("smax", np.maximum), ("smin", np.minimum),
    ("umax", lambda a, b: np.maximum(a.view(np.uint32), b.view(np.uint32)).view(np.int32)),
    ("umin", lambda a, b: np.minimum(a.view(np.uint32), b.view(np.uint32)).view(np.int32)),
    ("and", np.bitwise_and), ("or", np.bitwise_or), ("xor", np.bitwise_xor), ("swap", lambda a, b: b),
    ("inc", lambda a, b: np.where(a.view(np.uint32) >= b.view(np.uint32), 0, a + 1).astype(np.int32)),
    ("dec", lambda a, b: np.where((a == 0) | (a.view(np.uint32) > b.view(np.uint32)), b, a - 1).astype(np.int32)),
])
def test_32_bit_integer_atomics_return_the_old_value(op, want):
    mem = Buffer("mem", I.copy())
    got, old, r = atomic(f"global_atomic_{op}", mem, Buffer("src", J.copy()))
    with np.errstate(over="ignore"):
        assert (got == want(I, J)).all() and (old == I).all(), op
    assert not r.findings


def test_cmpswap_swaps_where_memory_equals_the_compare_value():
    pairs = np.stack([J, I], axis=1).reshape(-1)                 # (data, cmp) per lane: cmp = I where hits
    pairs[1::2][1::2] = 12345                                   # odd lanes compare against a miss
    mem = Buffer("mem", I.copy())
    got, old, _ = atomic("global_atomic_cmpswap", mem, Buffer("src", pairs.astype(np.int32)))
    hit = np.arange(64) % 2 == 0
    assert (got == np.where(hit, J, I)).all() and (old == I).all()


def test_lanes_on_one_address_apply_in_lane_order():
    mem = Buffer("mem", np.array([100], np.int32))
    got, old, _ = atomic("global_atomic_add", mem, Buffer("src", np.arange(1, 65, dtype=np.int32)), span=1)
    assert got[0] == 100 + 64 * 65 // 2
    assert (old == 100 + np.concatenate([[0], np.cumsum(np.arange(1, 64))])).all()


def test_max_on_one_address_returns_the_running_max():
    vals = np.array(rng.permutation(64) - 20, np.int32)
    mem = Buffer("mem", np.array([0], np.int32))
    got, old, _ = atomic("global_atomic_smax", mem, Buffer("src", vals), span=1)
    assert got[0] == vals.max() and (old == np.maximum.accumulate(np.concatenate([[0], vals[:-1]]))).all()


def test_without_sc0_nothing_is_returned_and_memory_updates():
    mem = Buffer("mem", np.zeros(4, np.int32))
    got, old, _ = atomic("global_atomic_add", mem, Buffer("src", np.ones(64, np.int32)), span=4, ret=False)
    assert (got == 16).all() and (old == 0).all()


def test_float_atomics_round_as_the_isa_table():
    x = (rng.standard_normal(64) * 1e3).astype(np.float32)
    mem = Buffer("mem", np.array([0.1], np.float32))
    got, old, _ = atomic("global_atomic_add_f32", mem, Buffer("src", x), span=1)
    acc = np.float32(0.1)
    seq = []
    for v in x:
        seq.append(acc)
        acc = np.float32(acc + v)
    assert got[0] == acc and (old == np.array(seq, np.float32)).all()


def test_packed_f16_add():
    a = rng.standard_normal(128).astype(np.float16)
    b = rng.standard_normal(128).astype(np.float16)
    mem = Buffer("mem", a.view(np.int32).copy())
    got, old, _ = atomic("global_atomic_pk_add_f16", mem, Buffer("src", b.view(np.int32).copy()))
    assert (got.view(np.float16) == (a + b)).all() and (old.view(np.float16) == a).all()


@pytest.mark.parametrize("op,want", [
    ("global_atomic_add_x2", lambda a, b: a + b), ("global_atomic_smin_x2", np.minimum),
    ("global_atomic_umax_x2", lambda a, b: np.maximum(a.view(np.uint64), b.view(np.uint64)).view(np.int64)),
    ("global_atomic_swap_x2", lambda a, b: b), ("global_atomic_xor_x2", np.bitwise_xor),
])
def test_64_bit_atomics(op, want):
    a = rng.integers(-2**62, 2**62, 64).astype(np.int64)
    b = rng.integers(-2**62, 2**62, 64).astype(np.int64)
    mem = Buffer("mem", a.copy())
    got, old, _ = atomic(op, mem, Buffer("src", b), size=8)
    assert (got == want(a, b)).all() and (old == a).all()


@pytest.mark.parametrize("op,want", [("global_atomic_add_f64", np.add), ("global_atomic_max_f64", np.fmax),
                                     ("global_atomic_min_f64", np.fmin)])
def test_f64_atomics(op, want):
    a, b = rng.standard_normal(64), rng.standard_normal(64)
    b[3] = np.nan
    mem = Buffer("mem", a.view(np.int64).copy())                  # f64 bits in 64-bit words
    got, old, _ = atomic(op, mem, Buffer("src", b.view(np.int64).copy()), size=8)
    got, old = got.view(np.float64), old.view(np.float64)
    if op.endswith("add_f64"):
        assert np.array_equal(got, a + b, equal_nan=True)
    else:
        assert (got == want(a, b)).all()
    assert (old == a).all()


def _tokens(buf, n=64):
    p = buf.prov
    if p is None or p.empty():
        return np.full(n, -1)
    ids = np.repeat(p.ids.get("token", np.full(p.size // p.unit, -1)), p.unit)[: 4 * n].reshape(n, 4)
    return np.where((ids == ids[:, :1]).all(axis=1), ids[:, 0], -2)


def test_tokens_through_swap_and_add():
    """swap on one address: lane l returns lane l-1's data (its token), lane 0 the memory's; the
    memory ends holding lane 63's. add: returned values after lane 0 and the memory carry none."""
    tok = {"token": np.arange(64)}
    mem = Buffer("mem", np.array([5], np.int32), {"token": np.array([100])})
    atomic("global_atomic_swap", mem, Buffer("src", np.arange(64, dtype=np.int32), tok), span=1)
    assert _tokens(mem, 1)[0] == 63
    mem2 = Buffer("mem", np.array([5], np.int32), {"token": np.array([100])})
    out = Buffer("ret", np.zeros(64, np.int32))

    body_ret = _swap_body()
    run_asm(kernel_from_text(body_ret, "swaps", args=ARGS, vgprs=16),
            args=dict(mem=mem2, src=Buffer("src", np.arange(64, dtype=np.int32), tok), ret=out))
    got = _tokens(out)
    assert got[0] == 100 and (got[1:] == np.arange(63)).all()
    assert (out.array == np.concatenate([[5], np.arange(63)])).all()
    mem3 = Buffer("mem", np.array([5], np.int32), {"token": np.array([100])})
    out3 = Buffer("ret", np.zeros(64, np.int32))
    run_asm(kernel_from_text(body_ret.replace("global_atomic_swap", "global_atomic_add"), "adds", args=ARGS, vgprs=16),
            args=dict(mem=mem3, src=Buffer("src", np.arange(64, dtype=np.int32), tok), ret=out3))
    got = _tokens(out3)
    assert got[0] == 100 and (got[1:] == -1).all() and _tokens(mem3, 1)[0] == -1


def _swap_body():
    return """
s_load_dwordx2 s[4:5], s[0:1], 0x0
s_load_dwordx2 s[6:7], s[0:1], 0x8
s_load_dwordx2 s[8:9], s[0:1], 0x10
s_waitcnt lgkmcnt(0)
v_lshlrev_b32_e32 v1, 2, v0
global_load_dword v2, v1, s[6:7]
s_waitcnt vmcnt(0) lgkmcnt(0)
v_mov_b32_e32 v3, 0
global_atomic_swap v10, v3, v2, s[4:5] sc0
s_waitcnt vmcnt(0) lgkmcnt(0)
global_store_dword v1, v10, s[8:9]
"""


BUFFER_ADD = """
v_mov_b32_e32 v1, 0
v_mov_b32_e32 v2, 1
v_lshlrev_b32_e32 v3, 2, v0
v_and_b32_e32 v4, 7, v0
v_lshlrev_b32_e32 v4, 2, v4
v_cmp_gt_u32_e32 vcc, 48, v0
v_mov_b32_e32 v5, 0x80000000
v_cndmask_b32_e32 v4, v5, v4, vcc
buffer_atomic_add v2, v4, s[8:11], 0 offen glc
s_waitcnt vmcnt(0) lgkmcnt(0)
buffer_store_dword v2, v3, s[12:15], 0 offen
"""


def test_buffer_atomic_with_glc_and_masked_lanes():
    """Lanes 0-47 add 1 to x[l % 8] and get the old value back; lanes 48.. are masked (offset
    0x80000000): dropped, they return 0, nothing reported."""
    x = Buffer("x", np.zeros(8, np.int32))
    y, r = mubuf.run(BUFFER_ADD, x, nr_x=0x7FFFFFFE)
    assert (x.array == 6).all()
    assert (y.array[:48] == np.arange(48) // 8).all() and (y.array[48:] == 0).all() and not r.findings


def test_buffer_atomic_past_num_records_is_reported():
    x = Buffer("x", np.zeros(8, np.int32))
    _, r = mubuf.run(BUFFER_ADD.replace("0x80000000", "0x40"), x, nr_x=0x7FFFFFFE)
    (f,) = r.findings
    assert f.details["access"] == "atomic" and f.details["reason"] == "buffer" and f.details["lanes"] == list(range(48, 64))


FLAT = """
s_load_dwordx2 s[4:5], s[0:1], 0x0
s_load_dwordx2 s[6:7], s[0:1], 0x8
s_load_dwordx2 s[8:9], s[0:1], 0x10
s_waitcnt lgkmcnt(0)
v_lshlrev_b32_e32 v1, 2, v0
v_mov_b32_e32 v3, s7
v_add_co_u32_e32 v2, vcc, s6, v1
v_addc_co_u32_e32 v3, vcc, 0, v3, vcc
flat_load_dword v6, v[2:3]
s_waitcnt vmcnt(0) lgkmcnt(0)
v_mov_b32_e32 v5, s5
v_mov_b32_e32 v4, s4
flat_atomic_add v7, v[4:5], v6 offset:4 sc0
s_waitcnt vmcnt(0) lgkmcnt(0)
v_mov_b32_e32 v3, s9
v_add_co_u32_e32 v2, vcc, s8, v1
v_addc_co_u32_e32 v3, vcc, 0, v3, vcc
flat_store_dword v[2:3], v7
"""


def test_flat_forms_address_the_buffers():
    """flat_load / flat_atomic (returning) / flat_store on pointers into the launch's buffers."""
    mem = Buffer("mem", np.array([0, 10], np.int32))
    out = Buffer("ret", np.zeros(64, np.int32))
    run_asm(kernel_from_text(FLAT, "flat", args=ARGS, vgprs=16),
            args=dict(mem=mem, src=Buffer("src", np.arange(64, dtype=np.int32)), ret=out))
    assert mem.array[1] == 10 + 63 * 64 // 2
    assert (out.array == 10 + np.concatenate([[0], np.cumsum(np.arange(63))])).all()


def test_buffer_atomic_swap_returns_the_memory_tokens():
    """Lanes 0-7 swap first at x[l % 8] and get x's bytes (tokens 100..107); later lanes get the
    earlier lane's data, a lane id with no identity, and x ends holding lanes 56-63's."""
    x = Buffer("x", np.arange(8, dtype=np.int32) + 50, {"token": np.arange(100, 108)})
    y = Buffer.empty("y", (64,), np.int32)
    body = BUFFER_ADD.replace("buffer_atomic_add", "buffer_atomic_swap").replace("v_mov_b32_e32 v2, 1",
                                                                                  "v_mov_b32_e32 v2, v0")
    y, r = mubuf.run(body.replace("48, v0", "64, v0"), x, y, nr_x=32)
    assert (x.array == np.arange(56, 64)).all() and not r.findings
    assert (y.array[:8] == np.arange(8) + 50).all() and (y.array[8:] == np.arange(56)).all()
    tok = _tokens(y)
    assert (tok[:8] == np.arange(100, 108)).all() and (tok[8:] == -1).all()
    assert (_tokens(x, 8) == -1).all()


HIP = r"""
#include "gfxsim_hip.h"
extern "C" __global__ void tally(unsigned* __restrict__ counter, float* __restrict__ total, unsigned* __restrict__ seen,
                                 const float* __restrict__ x) {
  int i = blockIdx.x * 64 + threadIdx.x;
  unsigned slot = __hip_atomic_fetch_add(counter, 1u, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
  __hip_atomic_fetch_max(counter + 1, (unsigned)i, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
  __hip_atomic_fetch_add(total, x[i], __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
  seen[i] = slot;
}
"""


@pytest.mark.parametrize("batch", [1, 2])
def test_clangs_atomics_with_its_wave_reduction(tmp_path, batch):
    """clang turns a uniform-address atomicAdd into one atomic per wave (v_mbcnt, s_bcnt1, a
    readfirstlane of the returned base) and a max/fadd into a readlane loop: every work-item gets a
    distinct slot, the max and the float sum are exact (small integers)."""
    from gfxsim.asm.parse import parse
    from support.mubuf import compile_hip
    text = compile_hip(HIP, tmp_path)
    assert "global_atomic_add" in text and "v_readlane_b32" in text
    counter = Buffer("counter", np.array([7, 0], np.uint32))
    total = Buffer("total", np.zeros(1, np.float32))
    seen = Buffer("seen", np.zeros(256, np.uint32))
    x = np.arange(256, dtype=np.float32)
    run_asm(parse(text).kernel("tally"), grid=4, args=dict(counter=counter, total=total, seen=seen, x=Buffer("x", x)),
            batch=batch)
    assert counter.array.tolist() == [7 + 256, 255]
    assert sorted(seen.array.tolist()) == list(range(7, 7 + 256)) and total.array[0] == x.sum()


LDS = """
s_load_dwordx2 s[4:5], s[0:1], 0x0
s_waitcnt vmcnt(0) lgkmcnt(0)
v_mov_b32_e32 v5, 0
v_cmp_gt_u32_e32 vcc, 16, v0
s_and_saveexec_b64 s[6:7], vcc
v_lshlrev_b32_e32 v1, 2, v0
ds_write_b32 v1, v5
s_or_b64 exec, exec, s[6:7]
s_waitcnt lgkmcnt(0)
s_barrier
v_and_b32_e32 v1, 3, v0
v_lshlrev_b32_e32 v1, 2, v1
v_mov_b32_e32 v2, 1
ds_add_rtn_u32 v3, v1, v2
s_waitcnt vmcnt(0) lgkmcnt(0)
v_mov_b32_e32 v4, 100
v_mov_b32_e32 v6, 7
ds_cmpst_rtn_b32 v7, v5, v4, v6 offset:16
s_waitcnt vmcnt(0) lgkmcnt(0)
ds_max_u32 v5, v0 offset:32
s_waitcnt lgkmcnt(0)
s_barrier
v_lshlrev_b32_e32 v8, 3, v0
s_waitcnt lgkmcnt(0)
global_store_dwordx2 v8, v[6:7], s[4:5]
v_lshlrev_b32_e32 v8, 2, v0
s_waitcnt lgkmcnt(0)
"""


def test_lds_atomics_across_two_waves_count_and_do_not_race():
    """128 work-items add 1 to LDS[l % 4] (32 each, the returned values in lane and wave order),
    compare-and-swap LDS[4] (cmp first: 100 never matches 0), and max their id into LDS[8]."""
    out = Buffer("out", np.zeros(512, np.int32))
    body = LDS + """
v_mov_b32_e32 v9, 0
ds_read_b128 v[10:13], v9
ds_read_b32 v14, v9 offset:32
s_waitcnt lgkmcnt(0)
v_add_u32_e32 v6, 0x400, v8
global_store_dword v6, v3, s[4:5]
global_store_dwordx4 v9, v[10:13], s[4:5] offset:1536
global_store_dword v9, v14, s[4:5] offset:1552
"""
    r = run_asm(kernel_from_text(body, "lds_atomics", args=[("out", "global_buffer", 8)], lds=64, vgprs=16),
                grid=1, block=128, args=dict(out=out))
    assert not r.findings, r.findings
    pairs = out.array[:256].reshape(128, 2)           # every lane's (7, the value its cmpst returned)
    assert (pairs[:, 0] == 7).all() and (pairs[:, 1] == 0).all()
    got = out.array[256:384]                          # ds_add_rtn's returns: wave 0's lanes, then wave 1's
    assert (got[:64] == np.arange(64) // 4).all() and (got[64:] == 16 + np.arange(64) // 4).all()
    assert out.array[384:388].tolist() == [32, 32, 32, 32] and out.array[388] == 127


HIST = r"""
#include "gfxsim_hip.h"
extern "C" __global__ void hist(unsigned* __restrict__ out, const unsigned char* __restrict__ in) {
  __shared__ unsigned bins[16];
  __shared__ float fs[4];
  __shared__ long long ls[2];
  int i = threadIdx.x;
  if (i < 16) bins[i] = 0;
  if (i < 4) fs[i] = 0;
  if (i < 2) ls[i] = 0;
  __syncthreads();
  __hip_atomic_fetch_add(&bins[in[blockIdx.x * 128 + i] & 15], 1u, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP);
  __hip_atomic_fetch_add(&fs[i & 3], 0.5f, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP);
  __hip_atomic_fetch_max(&ls[i & 1], (long long)i, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP);
  __syncthreads();
  if (i < 16) out[blockIdx.x * 32 + i] = bins[i];
  if (i < 4) out[blockIdx.x * 32 + 16 + i] = (unsigned)(fs[i] * 2);
  if (i < 2) out[blockIdx.x * 32 + 20 + i] = (unsigned)ls[i];
}
"""


def test_clangs_shared_memory_histogram(tmp_path):
    """A shared-memory histogram of two waves per workgroup: ds_add_u32, ds_add_f32, ds_max_i64."""
    from gfxsim.asm.parse import parse
    from support.mubuf import compile_hip
    text = compile_hip(HIST, tmp_path)
    assert "ds_add_u32" in text and "ds_add_f32" in text and "ds_max_i64" in text
    data = rng.integers(0, 256, 256).astype(np.uint8)
    out = Buffer("out", np.zeros(64, np.uint32))
    r = run_asm(parse(text).kernel("hist"), grid=2, block=128, args=dict(out=out, **{"in": Buffer("in", data)}))
    assert not r.findings
    for b in range(2):
        got = out.array[32 * b:32 * b + 22]
        assert (got[:16] == np.bincount(data[128 * b:128 * (b + 1)] & 15, minlength=16)).all()
        assert got[16:20].tolist() == [32] * 4 and got[20:22].tolist() == [126, 127]
