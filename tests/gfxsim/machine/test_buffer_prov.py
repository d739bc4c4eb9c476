"""A buffer's provenance paths: a load of whole elements takes its provenance from each element's
first byte (Buffer.element_prov), the same planes the per-byte path (Buffer.load_prov) gives;
the planes a first store with provenance starts from are the buffer's own, never the caller's
tag arrays."""
import numpy as np
import pytest

from gfxsim import Buffer, launch


def _same(a, b):
    assert a.g == b.g and a.ids.keys() == b.ids.keys() and not a.fp and not b.fp and a.flags is b.flags is None
    for f in a.ids:
        assert a.ids[f].dtype == b.ids[f].dtype and np.array_equal(a.ids[f], b.ids[f]), f


@pytest.mark.parametrize("dtype, encoding, size, nbytes", [
    ("f4", None, 4, 4), ("f4", None, 4, 16), ("f4", None, 2, 8), ("i1", None, 1, 4),
    ("f2", None, 2, 8), ("u1", "e4m3fn", 1, 8), ("i4", None, 4, 12)])
def test_element_prov_is_load_prov(dtype, encoding, size, nbytes):
    rng = np.random.default_rng(7)
    shape = (6, 5, 32)
    tags = {"token": rng.integers(-1, 40, (6, 1, 1)), "dim": np.arange(32)[None, None, :],
            "row": rng.integers(0, 9, shape)}
    buf = Buffer("b", np.zeros(shape, dtype), tags, encoding=encoding)
    assert buf.whole_elements(size)
    lanes = 200
    # anywhere; and each lane at the start of a row of 32 elements (every lane's run inside the dim axis)
    for addr in (rng.integers(0, (buf.nbytes - nbytes) // nbytes + 1, lanes) * nbytes,
                 rng.integers(0, buf.nbytes // (32 * buf.itemsize), lanes) * (32 * buf.itemsize)):
        per_byte = addr[None, :] + np.arange(nbytes)[:, None]
        starts = addr[None, :] + np.arange(0, nbytes, size)[:, None]
        _same(buf.element_prov(starts, size), buf.load_prov(per_byte, size))
        # a load's elements in order (global_load's): the same planes without comparing the rows
        _same(buf.element_prov(starts, size, runs=True), buf.load_prov(per_byte, size))


def test_tags_at_of_runs_told_is_tags_at_compared():
    """tags_at told that each column's elements follow one another (``runs``) gives what it gives
    when it compares them itself, and what indexing each broadcast tag gives: runs inside and across
    a tag's axes, one and several rows, int32 and int64 indices."""
    rng = np.random.default_rng(5)
    for _ in range(300):
        shape = tuple(int(x) for x in rng.integers(1, 7, rng.integers(1, 5)))
        tags = {}
        for f in ("a", "b", "c"):
            tsh = tuple(s if rng.random() < 0.5 else 1 for s in shape)
            n = int(np.prod(tsh))
            tags[f] = (np.arange(n) if rng.random() < 0.5 else rng.integers(-2, 50, n)).reshape(tsh)
        buf = Buffer("x", np.zeros(shape, np.int8), tags)
        size = int(np.prod(shape))
        R = int(rng.integers(1, min(size, 9) + 1))
        e = rng.integers(0, size - R + 1, (1, 23)) + np.arange(R)[:, None]
        for dt in (np.int64, np.int32):
            for views in (False, True):
                told, compared = buf.tags_at(e.astype(dt), views=views, runs=True), buf.tags_at(e.astype(dt), views=views)
                for f, t in tags.items():
                    want = np.broadcast_to(t, shape).reshape(-1)[e].astype(np.int32)
                    assert told[f].dtype == np.int32 and np.array_equal(told[f], want), (shape, f)
                    assert np.array_equal(told[f], compared[f]) and told[f].strides == compared[f].strides


def test_no_element_path_across_elements_or_after_a_store():
    buf = Buffer("b", np.zeros(64, np.int8), {"token": np.arange(64)})
    assert not buf.whole_elements(4)                       # a 4-byte element spans four buffer elements
    assert not Buffer("u", np.zeros(16, np.float32)).whole_elements(4)     # nothing to carry
    out = Buffer("o", np.zeros(64, np.float32), {"token": np.arange(64)})
    assert out.whole_elements(4)

    def k(w):
        w.global_store(out, w.lane_id * 4, w.global_load(out, w.lane_id * 4))
    launch(k, provenance=True, trace=False)
    assert out.prov is not None and not out.whole_elements(4)


def test_a_store_leaves_the_callers_tag_arrays_as_they_were():
    tok = np.arange(64, dtype=np.int32)                    # full shape, int32, contiguous: no copy needed to view
    src = Buffer("src", np.ones(64, np.float32), {"token": tok[::-1].copy()})
    dst = Buffer("dst", np.zeros(64, np.float32), {"token": tok})

    def k(w):
        w.global_store(dst, w.lane_id * 4, w.global_load(src, w.lane_id * 4))
    run = launch(k, provenance=True, trace=False)
    assert {f.kind for f in run.findings} == {"store-mismatch"}
    assert np.array_equal(tok, np.arange(64))              # the planes were written, not the tags
    assert np.array_equal(dst.prov.ids["token"], np.arange(64)[::-1])     # one entry per dword


def test_store_check_untagged_bytes_are_no_mismatch_and_every_mismatching_wave_is_named():
    tok = np.arange(256)
    part = np.where(tok % 3 == 0, -1, tok)                  # a third of the value's bytes untagged
    for src_tok, dst_tok, found in ((part, tok, 0), (tok, part, 0), (part[::-1].copy(), tok, 4)):
        src = Buffer("src", np.ones(256, np.int8), {"token": src_tok})
        dst = Buffer("dst", np.zeros(256, np.int8), {"token": dst_tok})

        def k(w):
            at = w.workgroup_id[0] * 64 + w.lane_id
            w.global_store(dst, at, w.global_load(src, at, 1, "i8"))
        run = launch(k, grid=(4,), batch=4, provenance=True, trace=False)
        assert len(run.findings_of("store-mismatch")) == found, (src_tok[:4], dst_tok[:4])


def test_tags_at_is_each_tag_broadcast_and_indexed():
    """tags_at's coordinate arithmetic (a tag that is its own index is not looked up) gives what
    indexing each broadcast tag gives, as int32, each field its own array."""
    rng = np.random.default_rng(11)
    for _ in range(200):
        shape = tuple(int(x) for x in rng.integers(1, 7, rng.integers(1, 5)))
        tags = {}
        for f in ("a", "b", "c", "d"):
            tsh = tuple(s if rng.random() < 0.5 else 1 for s in shape)
            tsh = tsh[int(rng.integers(0, len(shape))):] if rng.random() < 0.3 else tsh
            n = int(np.prod(tsh))
            tags[f] = (np.arange(n) if rng.random() < 0.5 else rng.integers(-2, 50, n)).reshape(tsh)
        buf = Buffer("x", np.zeros(shape, np.float32), tags)
        size = int(np.prod(shape))
        for e in (rng.integers(0, size, (1, 17)), np.repeat(rng.integers(0, size, (1, 9)), 3, axis=0)):
            for dt in (np.int64, np.int32):
                ea = e.astype(dt)
                got = buf.tags_at(ea)
                for f, t in tags.items():
                    want = np.broadcast_to(t, shape).reshape(-1)[e].astype(np.int32)
                    assert got[f].dtype == np.int32 and np.array_equal(got[f], want), (shape, f)
                assert len({id(a) for a in got.values()}) == len(got)
                assert not any(np.shares_memory(a, b) for a in got.values() for b in got.values() if a is not b)
                assert not any(np.shares_memory(a, ea) for a in got.values())    # never the caller's elements
