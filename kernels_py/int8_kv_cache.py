"""The INT8 KV-cache producer (ALGORITHMS.md "int8_kv_cache").

Grid (num_tokens, num_kv_heads), one wave per (token, kv head): lane l holds head elements
l + 64e. K and V of the token are quantized per token over head_dim (absmax/127 by a wave
reduction) and scattered into the paged cache: k_cache[blk][kvh][d/16][off][d%16],
v_cache[blk][kvh][d][off], k_scale/v_scale[blk][kvh][off]. Slot -1 skips the token. Smooth-K (the
per-channel mean of K subtracted first) is the caller's job.
"""
from __future__ import annotations

from .int8_attention import max_over_lanes, quant_inv, quant_scale, quantize
from gfxsim.errors import ArgumentError


def int8_kv_cache(w, key, value, slot_mapping, k_cache, v_cache, k_scale, v_scale, *, num_kv_heads, head_dim,
                  block_size):
    """key, value [num_tokens][num_kv_heads][head_dim] f32; slot_mapping [num_tokens] i32."""
    if head_dim % w.lanes:
        raise ArgumentError(f"int8_kv_cache: head_dim {head_dim} is not a multiple of the wave size {w.lanes}")
    token, kvh = w.workgroup_id[0], w.workgroup_id[1]
    slot = w.scalar_load(slot_mapping, token * 4, "i32")
    if w.end_program(slot < 0):                                  # padding token
        return
    blk, off = slot // block_size, slot % block_size
    he = head_dim // w.lanes                                     # head elements per lane
    d = w.cat(*[w.lane_id + w.lanes * e for e in range(he)])    # the lane's head elements l + 64e
    src = (d + (token * num_kv_heads + kvh) * head_dim) * 4
    # [k_0, v_0, k_1, v_1, ...]: K and V side by side, so each step of the reduction serves both
    kv = w.cat(*[w.global_load(x, src[e], 4, "f32") for e in range(he) for x in (key, value)])
    a = abs(kv)
    amax = a[0:2]
    for e in range(1, he):
        amax = w.max(amax, a[2 * e:2 * e + 2])
    amax = max_over_lanes(w, amax, masks=tuple(1 << k for k in reversed(range(w.lanes.bit_length() - 1))))
    inv = quant_inv(w, amax)                                     # [inv_k, inv_v]
    scale = w.group_scale(quant_scale(w, amax))                  # computed over the token's head_dim
    kvq = quantize(w, kv, w.cat(*[inv] * he))
    head = (blk * num_kv_heads + kvh) * head_dim * block_size    # byte 0 of (blk, kvh) in either cache
    k_addr = (d // 16) * (block_size * 16) + d % 16 + (head + off * 16)      # [blk][kvh][d/16][off][d%16]
    v_addr = d * block_size + (head + off)                                    # [blk][kvh][d][off]
    for e in range(he):
        w.global_store(k_cache, k_addr[e], kvq[2 * e])
        w.global_store(v_cache, v_addr[e], kvq[2 * e + 1])
    with w.if_(w.lane_id.eq(0)):
        scale_addr = ((blk * num_kv_heads + kvh) * block_size + off) * 4
        w.global_store(k_scale, scale_addr, scale[0])
        w.global_store(v_scale, scale_addr, scale[1])
