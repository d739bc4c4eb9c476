"""A folded batch's store under a partial EXEC unfolds only the writing columns (Fold.unfold
``at``): what the stores leave (bytes, identities, footprints, flags) and the findings equal the
same launch with every member's provenance kept (fold=False)."""
import numpy as np
import pytest

from gfxsim import Buffer, launch

MEMBERS = 8


def _run(fold: bool, lanes_writing: int, mismatch: bool):
    tok = np.arange(MEMBERS * 64)
    src = Buffer("src", (tok % 13).astype(np.float32), {"token": tok, "dim": np.tile(np.arange(64), MEMBERS)})
    out_tok = (np.arange(MEMBERS)[:, None] + (1 if mismatch else 0)) * 64 + np.arange(2)[None, :]
    out = Buffer("out", np.zeros((MEMBERS, 2), np.float32), {"token": out_tok})

    def k(w):
        g = w.workgroup_id[0]
        v = w.global_load(src, (g * 64 + w.lane_id) * 4)
        m = w.reduce(v, "max")                   # every dim of the wave's token: a footprint
        with w.if_(w.lane_id < lanes_writing):
            w.global_store(out, (g * 2 + w.lane_id % 2) * 4, m if lanes_writing == 1 else v)
    run = launch(k, grid=(MEMBERS,), batch=MEMBERS, fold=fold, provenance=True, trace=False)
    return run, out


@pytest.mark.parametrize("lanes_writing", [1, 2])
@pytest.mark.parametrize("mismatch", [False, True])
def test_a_partial_exec_store_of_a_folded_batch_is_the_unfolded_one(lanes_writing, mismatch):
    (r1, o1), (r2, o2) = _run(True, lanes_writing, mismatch), _run(False, lanes_writing, mismatch)
    assert r1.folds[0]["classes"] == 1                       # it did fold
    assert np.array_equal(o1.raw, o2.raw)
    assert [(f.kind, f.message) for f in r1.findings] == [(f.kind, f.message) for f in r2.findings]
    assert bool(r1.findings) == (mismatch and lanes_writing == 2)      # a footprint names no one token
    p1, p2 = o1.prov, o2.prov
    assert p1.ids.keys() == p2.ids.keys() and p1.fp.keys() == p2.fp.keys()
    for f in p1.ids:
        assert np.array_equal(p1.ids[f], p2.ids[f]), f
    for f in p1.fp:
        a, b = p1.fp[f].mask(), p2.fp[f].mask()          # dense, whatever the planes' storage
        assert np.array_equal(a.base, b.base) and np.array_equal(a.bits, b.bits) and np.array_equal(a.wide, b.wide), f
    assert (p1.flags is None) == (p2.flags is None) and (p1.flags is None or np.array_equal(p1.flags, p2.flags))
