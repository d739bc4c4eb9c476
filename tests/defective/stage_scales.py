"""A kernel a user might write: wave 0 stages 64 per-channel scales in LDS, every wave of the
workgroup scales its 64 values by them. ``stage_scales`` forgets the barrier between the staging
and the reads: run in order (wave 0 first) the numbers come out right and only the ``lds-race``
finding says anything; in any other order a wave reads the scales before wave 0 wrote them
(``gfxsim run ... --schedule reverse``). ``stage_scales_fixed`` has the barrier.
(tests/gfxsim/machine/test_schedule.py)
"""
from __future__ import annotations

WAVES = 4


def _stage_and_scale(w, x, scale, out, barrier: bool):
    lds = w.shared("scales", (64,), "f32")
    if w.wave_id == 0:                                   # one wave stages the table for all
        w.lds_store(lds, w.lane_id * 4, w.global_load(scale, w.lane_id * 4, 4, "f32"))
    if barrier:
        w.barrier()
    s = w.lds_load(lds, w.lane_id * 4, 4, "f32")
    i = ((w.workgroup_id[0] * WAVES + w.wave_id) * 64 + w.lane_id) * 4
    w.global_store(out, i, w.global_load(x, i, 4, "f32") * s)


def stage_scales(w, x, scale, out):
    _stage_and_scale(w, x, scale, out, barrier=False)


def stage_scales_fixed(w, x, scale, out):
    _stage_and_scale(w, x, scale, out, barrier=True)
