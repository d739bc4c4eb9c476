"""`gfxsim run sage_attention --arch sm_89|sm_90`: the SageAttention2 twin on generated or --inputs data.

The kernel takes the last 32 query positions of head 0 of sequence 0 (prefill data: generated
with 32 queries, or the user's q [S, N >= 32, H, d]) over the whole context (a multiple of 64),
causal, with per-thread INT8 QK, smooth-Q/K (``smooth_k`` on), FP8 PV and two-level accumulation.
References: exact fp32 attention and sage_reference (the same math in numpy).
"""
from __future__ import annotations

import numpy as np

from . import reference as R
from .runs import prepare_inputs, register
from .sage_attention import run_sage_attention
from .sage_layout import BLKK, WARPQ
from .sage_reference import SageConfig, sage_head

ARCHS = ("sm_89", "sm_90")


def _sage(p, inputs, trace):
    from gfxsim.arch import get_arch
    arch = get_arch(p["arch"]).name
    if arch not in ARCHS:
        raise ValueError(f"sage_attention runs on the NVIDIA warp32 profiles {', '.join(ARCHS)}, not {arch}")
    d = prepare_inputs(inputs=inputs, num_queries=WARPQ,
                       **{k: p[k] for k in ("context", "heads", "kv_heads", "head_dim", "seed")})
    if d["q"].ndim != 4 or d["q"].shape[1] < WARPQ:
        raise ValueError(f"sage_attention needs prefill q [num_seqs, num_queries >= {WARPQ}, heads, head_dim], "
                         f"got {d['q'].shape}")
    ctx = int(d["context_lens"][0])
    if ctx % BLKK:
        raise ValueError(f"sage_attention needs a context that is a multiple of {BLKK}, got {ctx}")
    q = np.ascontiguousarray(d["q"][0, -WARPQ:, 0], np.float32)
    k = np.ascontiguousarray(d["k"][0, :ctx, 0], np.float32)
    v = np.ascontiguousarray(d["v"][0, :ctx, 0], np.float32)
    cfg = SageConfig(arch=arch, q_block=WARPQ, smooth_q=p["smooth_k"], smooth_k=p["smooth_k"])
    pos = ctx - WARPQ
    out, run = run_sage_attention(q, k, v, cfg, q_pos0=pos, provenance=p["provenance"], kernel=p.get("kernel_fn"),
                                  trace=trace)
    refs = {"fp32": R.attention_fp32(q[None, :, None], k[None, :, None], v[None, :, None], [ctx])[0, :, 0],
            "sage_reference": sage_head(q, k, v, cfg, q_pos=pos + np.arange(WARPQ))}
    return out, refs, [run], {}, ctx


register("sage_attention", _sage)
