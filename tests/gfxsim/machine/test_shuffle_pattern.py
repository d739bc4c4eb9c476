"""A shuffle whose source lanes are one pattern for every member of a batch (shfl_xor, a
bpermute by lane numbers) reads each member's lanes by one take over the lane axis; a bpermute by
a per-column register takes the general path. Both give the same values, written bits,
provenance, findings and events, batched and folded or not, with and without provenance."""
import numpy as np
import pytest

from gfxsim import Buffer, launch
from gfxsim.machine import routing

MEMBERS = 4


def _shuffles(pattern: bool, provenance: bool, partial: bool):
    tok = np.arange(MEMBERS * 64)
    buf = Buffer("x", (tok * 3 % 251).astype(np.float32), {"token": tok})
    out = Buffer("out", np.zeros((4, MEMBERS * 64), np.float32), {"token": tok[None, :] * 0 - 1})
    lanes = np.random.default_rng(5).integers(-70, 140, 64)
    lane_buf = Buffer("lanes", lanes.astype(np.int32))

    def k(w):
        at = w.workgroup_id[0] * 64 + w.lane_id
        with w.if_(w.lane_id < (48 if partial else 64)):          # partial: a value with never-written lanes
            v = w.global_load(buf, at * 4)
        # the same instructions either way; only what each bpermute is given differs
        xors = {m: w.lane_id ^ m for m in (1, 2, 4, 5, 8, 16, 32)}
        seven, per_lane = w.lane_id * 0 + 7, w.global_load(lane_buf, w.lane_id * 4)
        src = (lambda m: m) if pattern else (lambda m: xors[m])
        got = [w.bpermute(v, src(5)), w.bpermute(v, lanes if pattern else per_lane),
               w.bpermute(v, 7 if pattern else seven)]
        r = v
        for m in (1, 2, 4, 8, 16, 32):
            r = w.max(r, w.shfl_xor(r, m) if pattern else w.bpermute(r, xors[m]))
        got.append(r)
        if pattern:
            got[0] = w.shfl_xor(v, 5)
        else:
            got[0] = w.bpermute(v, xors[5])
        for i, g in enumerate(got):
            w.global_store(out, (i * MEMBERS * 64 + at) * 4, g)
    run = launch(k, grid=(MEMBERS,), batch=MEMBERS, provenance=provenance, trace=False)
    return run, out


@pytest.mark.parametrize("provenance", [False, True])
@pytest.mark.parametrize("partial", [False, True])
def test_a_lane_pattern_shuffle_is_the_per_column_bpermute(provenance, partial):
    (r1, o1), (r2, o2) = _shuffles(True, provenance, partial), _shuffles(False, provenance, partial)
    assert np.array_equal(o1.array.view(np.uint32), o2.array.view(np.uint32))
    assert [(f.kind, f.message) for f in r1.findings] == [(f.kind, f.message) for f in r2.findings]
    assert bool(r1.findings) == partial
    if provenance:
        assert o1.prov.ids.keys() == o2.prov.ids.keys()
        for f in o1.prov.ids:
            assert np.array_equal(o1.prov.ids[f], o2.prov.ids[f]), f
    assert r1.lane_instructions == r2.lane_instructions


# the butterfly's l ^ m blocks swapped by strided copies (routing.xor_blocks) against the take
@pytest.mark.parametrize("provenance", [False, True])
@pytest.mark.parametrize("partial", [False, True])
def test_launches_with_block_swaps_are_the_takes(monkeypatch, provenance, partial):
    monkeypatch.setattr(routing, "XOR_BLOCKS", True)
    r1, o1 = _shuffles(True, provenance, partial)
    monkeypatch.setattr(routing, "XOR_BLOCKS", False)
    r2, o2 = _shuffles(True, provenance, partial)
    assert np.array_equal(o1.array.view(np.uint32), o2.array.view(np.uint32))
    assert [(f.kind, f.message) for f in r1.findings] == [(f.kind, f.message) for f in r2.findings]
    assert r1.lane_instructions == r2.lane_instructions
    if provenance:
        assert o1.prov.ids.keys() == o2.prov.ids.keys()
        for f in o1.prov.ids:
            assert np.array_equal(o1.prov.ids[f], o2.prov.ids[f]), f
