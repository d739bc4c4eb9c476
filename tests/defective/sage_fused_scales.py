"""A user's SageAttention2 port that applies the Q and K scales as one product, S = int(QKᵀ)·(sQ·sK),
and forgets to reduce the K block's amax across the lanes of its group: each lane's K scale covers
only the head dims that lane holds, while the instruction sums them all. The union of the two
scales' dims is every dim (sQ covers them), so only a check of each factor finds it: a
scale-group-mismatch on dims for every QK instruction (and, the lane's scale being its own tokens'
rather than its token group's, one on the token group). ``sage_fused_fixed`` reduces the amax and
is silent.

    gfxsim run sage_attention --arch sm_90 --kernel-fn tests/defective/sage_fused_scales.py:sage_fused_lane_k
"""
from kernels_py.fp8.sage_attention import sage_attention


def sage_fused_lane_k(w, *args, **kw):
    return sage_attention(w, *args, **dict(kw, fused_scales=True, k_group_reduce=False))


def sage_fused_fixed(w, *args, **kw):
    return sage_attention(w, *args, **dict(kw, fused_scales=True))
