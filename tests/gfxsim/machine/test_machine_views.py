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


@pytest.mark.parametrize("nbytes", [1, 2, 4, 8, 12, 16])
def test_memory_accesses_move_the_bytes_a_byte_by_byte_gather_moves(nbytes):
    """Loads gather whole dwords, or one 8-/16-byte unit per lane for 8- and 16-bit elements at
    aligned addresses: every type and alignment reads exactly the bytes at each lane's address,
    and the written check finds one never-written byte among them."""
    from gfxsim.machine.dtypes import from_bytes, load_values, load_written, np_dtype
    rng = np.random.default_rng(nbytes)
    raw = rng.integers(0, 256, 1 << 16).astype(np.uint8)
    written = np.ones(raw.size, bool)
    for name in ("i8", "u8", "f16", "bf16", "i32", "f32"):
        size = np_dtype(name).itemsize
        if nbytes % size:
            continue
        for align in sorted({size, min(nbytes, 4), nbytes if nbytes != 12 else 4}):
            addr = rng.integers(0, (raw.size - 16) // align, 500) * align
            want = from_bytes(raw[addr[None, :] + np.arange(nbytes)[:, None]], name)
            got = load_values(raw, addr, nbytes, name)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (name, align)
            hole = int(addr[7]) + nbytes - 1                     # the last byte of lane 7's access
            written[hole] = False
            val, every = load_written(raw, written, addr, nbytes, name)
            written[hole] = True
            assert not every and np.array_equal(val.view(np.uint8), want.view(np.uint8))
            assert load_written(raw, written, addr, nbytes, name)[1]
