"""A folded store's tag check on member 0's elements and the members' offsets (vmem.SEPARABLE_STORE_TAGS:
Buffer.member_tags, Fold.agrees_by) against every element looked up and compared (Buffer.tags_at,
Fold.agrees): the same tags, the same answer, and a launch that leaves the same (findings, bytes,
written bits, planes, footprints) either way, stores into the wrong slots and attempts taken back
included."""
import numpy as np
import pytest

from kernels_py.int8_kv_cache import int8_kv_cache
from kernels_py.prefix_prefill import prefix_prefill
from gfxsim.machine import fold as F, vmem
from gfxsim.machine.memory import Buffer
from support.fold import same_buffers, same_runs
from support.twins import kv_setup, prefill_setup, wrong_block_size
from test_folded_store_check import kv_full


def _buffer(rng, shape):
    """A buffer of ``shape`` with tags varying on random sets of axes (one constant, some -1s)."""
    tags = {}
    for k in range(4):
        tshape = tuple(n if rng.random() < 0.5 else 1 for n in shape)
        if k == 0:
            tshape = (1,) * len(shape)
        t = rng.integers(-1, 50, tshape).astype(np.int64)
        tags[f"f{k}"] = t[(0,) * (len(shape) - rng.integers(0, len(shape) + 1))] if k == 3 else t
    return Buffer("b", np.zeros(shape, np.float32), tags)


def _moved(rng, shape, M, L, R):
    """Elements [R, M*L]: member 0's in a box of the inner axes, each member moved along the outer
    axes (separable), as flat indices."""
    nd = len(shape)
    split = int(rng.integers(0, nd + 1))
    lane_axes = list(rng.permutation(nd)[:split])
    coords = np.zeros((nd, R, L), np.int64)
    for d in lane_axes:
        coords[d] = rng.integers(0, shape[d], (R, L))
    member = np.zeros((nd, M), np.int64)
    for d in range(nd):
        if d not in lane_axes:
            member[d] = rng.integers(0, shape[d], M)
    c = coords[:, :, None, :] + member[:, None, :, None]          # [nd, R, M, L]
    return np.ravel_multi_index(tuple(c), shape).reshape(R, M * L)


def test_member_tags_are_the_tags_of_every_element():
    """Where member_tags answers, its tags placed for every member are tags_at's; moved copies of
    member 0's elements are mostly answered; a member moved otherwise, a move that may carry into the
    next axis and one element off are either answered rightly or left to tags_at (None)."""
    answered = {0: 0, 1: 0, 2: 0}
    for seed in range(240):
        rng = np.random.default_rng(seed)
        nd = int(rng.integers(1, 5))
        shape = tuple(int(rng.integers(1, 7)) for _ in range(nd))
        buf = _buffer(rng, shape)
        M, L, R = int(rng.integers(1, 6)), int(rng.choice([1, 4, 8])), int(rng.integers(1, 4))
        elem = _moved(rng, shape, M, L, R)
        case = seed % 3
        if case == 1:                                                  # one element elsewhere
            r, c = rng.integers(0, R), rng.integers(0, M * L)
            elem[r, c] = (elem[r, c] + 1) % buf.array.size
        elif case == 2:                                                # member offsets as flat numbers
            elem = (elem[:, :L][:, None, :] + rng.integers(0, buf.array.size, M)[None, :, None]).reshape(R, -1)
            elem = np.minimum(elem, buf.array.size - 1)
        fields = list(buf.tag_fields)
        got = buf.member_tags(elem, L, fields)
        want = buf.tags_at(elem, fields)
        if got is None:
            continue
        answered[case] += 1
        for f in fields:
            kind, x = got[f]
            assert x.dtype == np.int32
            placed = np.broadcast_to(np.repeat(x, L)[None, :], (R, M * L)) if kind == "member" else np.tile(x, (1, M))
            assert np.array_equal(placed, want[f]), (seed, f)
    assert answered[0] >= 20, answered


def test_member_tags_answers_a_cache_store():
    """A k_cache-like layout [blk][kvh][d/16][off][d%16]: token and kv head per member, dim per lane."""
    blocks, kvh, hd, bs = 4, 2, 64, 16
    tok = np.arange(blocks * bs).reshape(blocks, bs)
    buf = Buffer("k", np.zeros((blocks, kvh, hd // 16, bs, 16), np.int8),
                 {"token": tok[:, None, None, :, None], "kv_head": np.arange(kvh)[None, :, None, None, None],
                  "dim": np.arange(hd).reshape(hd // 16, 1, 16)[None, None]})
    d = np.arange(hd)
    slots, heads = np.array([5, 17, 40, 63]), np.array([0, 1, 1, 0])
    head = (slots // bs * kvh + heads) * hd * bs
    elem = ((d // 16) * (bs * 16) + d % 16)[None, :] + (head + slots % bs * 16)[:, None]
    got = buf.member_tags(elem.reshape(1, -1), hd, ["token", "kv_head", "dim"])
    assert got["token"][0] == "member" and got["token"][1].tolist() == slots.tolist()
    assert got["kv_head"][0] == "member" and got["kv_head"][1].tolist() == heads.tolist()
    assert got["dim"][0] == "lane" and got["dim"][1].tolist() == [d.tolist()]
    elem[2, 3] += 1                                   # not a moved copy: looked up element by element
    assert buf.member_tags(elem.reshape(1, -1), hd, ["token"]) is None


@pytest.mark.parametrize("seed", range(60))
def test_agrees_by_is_agrees(seed):
    """Fold.agrees_by against Fold.agrees on the want it stands for: random held planes, shifts that
    wrap int32, several classes, a member unknown, a want off by one; exact where every value is
    held, and never True where agrees is False."""
    rng = np.random.default_rng(seed)
    R, M, L = int(rng.integers(1, 4)), int(rng.integers(1, 6)), int(rng.choice([4, 8]))
    classes = None
    if seed % 2 == 0 and M > 1:
        classes = rng.integers(0, 3, M)
        classes[:2] = (0, 1)
    fd = F.Fold(M, L, classes)
    shift = rng.choice(np.array([0, 1, -3, 2 ** 31, 2 ** 32 + 5], np.int64), M)
    fd.shift["token"], fd.known["token"] = shift, np.ones(M, bool)
    if seed % 5 == 1:
        fd.known["token"][rng.integers(0, M)] = False
    per = np.where(fd.known["token"], shift, 0).astype(np.int32)
    kind = "member" if seed % 3 else "lane"
    if kind == "member":
        alpha = rng.choice(np.array([0, 7, 2 ** 31 - 1], np.int32), fd.classes)
        a = np.repeat(np.repeat(alpha, L)[None, :], R, axis=0)
        x = np.add(alpha[fd.cls], per, dtype=np.int32)
        want = np.repeat(np.repeat(x, L)[None, :], R, axis=0)
    else:
        x = rng.choice(np.array([0, 5, 2 ** 31 - 1, 123], np.int32), (R, L))
        a = np.tile(x, (1, fd.classes))
        # every member of a class must share the shift for the lane kind to agree
        if seed % 4 == 0:
            per[:] = per[0]
            fd.shift["token"] = np.full(M, per[0], np.int64)
            fd.known["token"] = np.ones(M, bool)
        a = np.subtract(a, np.repeat(per[fd.reps], L)[None, :], dtype=np.int32)
        want = np.tile(x, (1, M))
    a = np.ascontiguousarray(a, np.int32)
    if seed % 7 == 3:                                 # a member's want off by one
        if kind == "member":
            x = x.copy()
            x[rng.integers(0, M)] ^= 1
            want = np.repeat(np.repeat(x, L)[None, :], R, axis=0)
        else:
            x = x.copy()
            x[rng.integers(0, R), rng.integers(0, L)] ^= 1
            want = np.tile(x, (1, M))
    if seed % 11 == 4:                                # a value not held: agrees_by cannot tell
        a[0, 0] = -1
    by, full = fd.agrees_by("token", a, kind, x), fd.agrees("token", a, want)
    assert not by or full
    if a.min() >= 0:
        assert by == full


_MEMBER_TAGS, _STORE_FOLDED = vmem.VmemOps._member_tags, vmem.VmemOps._store_folded


def _runs(monkeypatch, make, kernel, on: bool, launches: int = 1):
    monkeypatch.setattr(vmem, "SEPARABLE_STORE_TAGS", on)
    answered, placed = [], []
    mt, sf = _MEMBER_TAGS, _STORE_FOLDED
    monkeypatch.setattr(vmem.VmemOps, "_member_tags",
                        lambda self, *a: answered.append(mt(self, *a)) or answered[-1])
    monkeypatch.setattr(vmem.VmemOps, "_store_folded", lambda self, *a: placed.append(sf(self, *a)) or placed[-1])
    setup = make()
    runs = [setup.launch(kernel, trace=False) for _ in range(launches)]
    return setup, runs, [x is not None for x in answered], placed


@pytest.mark.parametrize("make, kernel, finds", [(kv_full, int8_kv_cache, False), (kv_full, wrong_block_size, True),
                                                 (kv_setup, int8_kv_cache, False), (kv_setup, wrong_block_size, True),
                                                 (prefill_setup, prefix_prefill, False)])
@pytest.mark.parametrize("launches", [1, 2])
def test_the_separable_check_leaves_what_every_element_leaves(monkeypatch, make, kernel, finds, launches):
    """Each folded store's provenance (the tags it stores as its fields' identities, read where a
    plane is made) and the launches' findings, records and buffers are the same either way."""
    (a, ra, _, pa), (b, rb, answered, pb) = (_runs(monkeypatch, make, kernel, on, launches) for on in (False, True))
    if make is kv_full and not finds:
        assert answered and all(answered)             # the producer's stores: every one answered
    assert len(pa) == len(pb)
    for x, y in zip(pa, pb):
        assert (x is None) == (y is None)
        if x is not None:
            assert x[1] == y[1] and x[0].g == y[0].g and x[0].ids.keys() == y[0].ids.keys()
            for f in x[0].ids:
                assert x[0].ids[f].dtype == y[0].ids[f].dtype and np.array_equal(x[0].ids[f], y[0].ids[f]), f
    for x, y in zip(ra, rb):
        assert bool(y.findings) == finds
        same_runs(x, y)
    for name in a.outputs:
        same_buffers(a.buffers[name], b.buffers[name], ra[-1].machine.wide, rb[-1].machine.wide)
