"""A user's SageAttention2 port whose per-thread Q scale index is read off the wrong fragment
layout: groupID and threadID_in_group exchanged (q_scale[lane % 8] where the m16n8 accumulator
needs q_scale[lane / 4]). Lane 1 holds rows 0, 8, 16, 24 but dequantizes them with row group
{1, 9, 17, 25}'s scale: a scale-group-mismatch on every QK instruction. ``sage_fixed`` takes
the index from the record's own layout and is silent.

    gfxsim run sage_attention --arch sm_90 --kernel-fn tests/defective/sage_wrong_groups.py:sage_wrong_groups
"""
from kernels_py.fp8.sage_attention import sage_attention, swapped_d_layout
from kernels_py.fp8.sage_layout import QK_MMA


def sage_wrong_groups(w, *args, **kw):
    kw["q_layout"] = swapped_d_layout(w.insn(QK_MMA[kw.get("qk", "int8")]).operand("D"))
    return sage_attention(w, *args, **kw)


def sage_fixed(w, *args, **kw):
    kw["q_layout"] = None
    return sage_attention(w, *args, **kw)
