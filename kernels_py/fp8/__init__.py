"""Kernels with FP8 operands and no HIP twin (SageAttention2, FP8 QKᵀ), with their references and studies.

sage_attention  SageAttention2 as a warp32 twin on sm_89/sm_90 (sage_layout: its fragments)
sage_reference  the same math in numpy; sage_accuracy: `python -m kernels_py.fp8.sage_accuracy`
two_level       one- vs two-level FP8 PV accumulation: `python -m kernels_py.fp8.two_level`
fp8_qk          FP8 QKᵀ on gfx942 with per-token q and k scales (and its defective twins)
"""
