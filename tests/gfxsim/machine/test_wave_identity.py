"""A batched wave's identity registers (Wave.__init__, built with tiles and repeats): lane_id,
thread_id, workgroup_id and member_starts hold, column by column, what their definitions say for
every member of every batch of a launch over a 3-D grid, with provenance and without."""
import numpy as np
import pytest

from gfxsim import launch

GRID = (5, 3, 2)


def _seen(w, out):
    """Each column's identities as the kernel sees them, against their definitions."""
    width, lanes = w.width, w.lanes
    col = np.arange(width)
    ids = w.wg.ids
    assert np.array_equal(w.lane_id.val[0], col % lanes) and w.lane_id.val.dtype == np.int32
    assert np.array_equal(w.thread_id.val[0], col % lanes + w.wave_id * lanes) and w.thread_id.val.dtype == np.int32
    assert np.array_equal(w.member_starts, (col // lanes) * lanes) and w.member_starts.dtype == np.int64
    if w.members > 1:
        for d in range(3):
            x = w.workgroup_id[d].val
            assert x.dtype == np.int32 and np.array_equal(x[0], [ids[c // lanes][d] for c in col])
    out.extend(ids)


@pytest.mark.parametrize("provenance", [True, False])
@pytest.mark.parametrize("batch", [1, 4, 30])
def test_identity_registers_are_their_definitions(provenance, batch):
    seen = []
    launch(lambda w: _seen(w, seen), grid=GRID, waves_per_group=2, provenance=provenance, trace=False,
           batch=batch)
    assert sorted(set(seen)) == sorted((x, y, z) for x in range(GRID[0]) for y in range(GRID[1]) for z in range(GRID[2]))
