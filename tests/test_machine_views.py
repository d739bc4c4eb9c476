"""Views index a Buffer or an LDS region as the HIP code does (``v[row][col]``, ``v + off``,
``v.at(off)``), and their loads and stores are the machine's: same values, same provenance, the same
errors with coordinates."""
import numpy as np
import pytest

from gfxsim import Buffer, launch
from gfxsim.machine.errors import MemoryFault


def run(kernel, *bufs):
    return launch(kernel, grid=(1,), waves_per_group=1, args=bufs, trace=False)


def test_rows_and_columns_address_like_a_2d_array():
    a = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    src, dst = Buffer("src", a, {"row": np.arange(16)[:, None], "col": np.arange(8)[None, :]}), \
        Buffer.empty("dst", (64,), np.float32)

    def k(w, src, dst):
        v = w.view(src)
        lane = w.lane_id
        x = v[lane % 16][lane // 16 + 2].load()               # src[lane % 16][lane / 16 + 2]
        w.view(dst).at(lane).store(x)
        assert v.shape == (16, 8) and v[3].shape == (8,)
    r = run(k, src, dst)
    lane = np.arange(64)
    np.testing.assert_array_equal(dst.array, a[lane % 16, lane // 16 + 2])
    assert r.findings == []


def test_pointer_arithmetic_and_wide_loads_read_the_same_bytes_as_global_load():
    a = np.arange(256, dtype=np.int8)
    buf = Buffer("b", a)
    got = {}

    def k(w, b):
        v = w.view(b)
        got["view"] = (v + 8 * w.lane_id % 64).load(8).numpy()
        got["raw"] = w.global_load(b, 8 * w.lane_id % 64, 8, "i8").numpy()
        got["flat"] = v.at(3).load().numpy()
    run(k, buf)
    np.testing.assert_array_equal(got["view"], got["raw"])
    assert (got["flat"] == 3).all()


def test_an_lds_region_view_stores_and_loads_per_lane():
    out = Buffer.empty("out", (64,), np.int32)

    def k(w, out):
        lds = w.view(w.shared("t", (4, 16), np.int32))        # int t[4][16]
        rowid, lane16id = w.lane_id // 16, w.lane_id % 16
        lds[rowid][lane16id].store(w.lane_id * 10)
        w.view(out).at(w.lane_id).store(lds[rowid][lane16id].load())
    r = run(k, out)
    np.testing.assert_array_equal(out.array, np.arange(64) * 10)
    assert r.findings == []


def test_bad_views_and_indices_are_named():
    buf = Buffer("b", np.zeros((4, 4), np.float32))

    def k(w, b):
        v = w.view(b)
        with pytest.raises(IndexError, match="index 4 out of range for dimension of size 4"):
            v[4]
        with pytest.raises(TypeError, match="index one dimension at a time"):
            v[1, 2]
        with pytest.raises(TypeError, match="needs a Buffer or an LDS region"):
            w.view(np.zeros(4))
        with pytest.raises(MemoryFault, match="global_load from 'b'"):
            v.at(w.lane_id * 4).load()                         # lanes past the 16 elements
    run(k, buf)
