"""What a matrix chain's provenance keeps instead of asking again, held to asking again: a union
of two one-set masks and an operand's rows checked once are OneSets (provenance.py), whose
``one_set`` answers from the triple kept, not a pass; a field's one value along K is made once
(summaries.Field.one_along_k); an instruction's @mma plane is one add where D fills every
register slot (plans.name_absent); a one-member pair record's member base is not counted."""
import numpy as np

from gfxsim.arch import get_instruction
from gfxsim.machine import jit
from gfxsim.machine.plans import name_absent, name_planes
from gfxsim.machine.provenance import WINDOW, Mask, OneSet, WideSets, known_one
from gfxsim.machine.summaries import Field


def _window(wide, lo, hi) -> int:
    """The id of values lo..hi-1 of one window."""
    base = lo // WINDOW * WINDOW
    bits = np.zeros(WINDOW, bool)
    bits[lo - base:hi - base] = True
    return wide.intern_window(base, np.packbits(bits, bitorder="little").view("<u8"))


def _masks(rng, wide, shape):
    """One-set masks of every kind (windows that agree or differ, empty, wide), and masks whose
    elements differ."""
    out = []
    for lo, hi in ((0, 5), (3, 200), (WINDOW, WINDOW + 9), (7 * WINDOW + 60, 7 * WINDOW + 70)):
        m = Mask.of_values(np.full(shape, lo))
        for v in range(lo + 1, hi):
            m = Mask(m.base, m.bits | Mask.of_values(np.full(shape, v)).bits, m.wide)
        out.append(m)
    out.append(Mask.empty(shape))
    w = Mask.empty(shape)
    w.wide[...] = wide.union(_window(wide, 0, 256), _window(wide, 300, 310))
    out.append(w)
    out.append(Mask.of_values(rng.integers(-1, 3 * WINDOW, shape)))       # sets that differ
    return out


def _found(m: Mask):
    """What a pass over ``m`` finds (Mask.one_set, not a OneSet's kept triple)."""
    return Mask.one_set(Mask(m.base, m.bits, m.wide))


def _same(a, b):
    if a is None or b is None:
        return a is None and b is None
    return a[0] == b[0] and a[2] == b[2] and a[1].dtype == b[1].dtype and np.array_equal(a[1], b[1])


def test_a_union_of_one_sets_keeps_the_triple_a_pass_finds(monkeypatch):
    from gfxsim.machine import provenance
    jit.prewarm()
    jit.join_start()                         # running(): prewarm's thread has made every module
    rng = np.random.default_rng(5)
    for numba in (True, False):                  # the compiled and the numpy pass
        if not numba:
            monkeypatch.setattr(provenance, "running", lambda: False)
        wide = WideSets()
        masks = _masks(rng, wide, (2, 16))
        seen = 0
        for a in masks:
            for b in masks:
                u = a.union(b, wide)
                if isinstance(u, OneSet):
                    seen += 1
                    assert _same(u.one_set(), _found(u))
                    again = u.union(a, wide)              # asked again, through a chain's next link
                    assert _same(again.one_set(), _found(again))
                    assert np.array_equal(again.base, Mask.union(Mask(u.base, u.bits, u.wide), a, wide).base)
                k = known_one(a)
                assert _same(k.one_set(), _found(a))
                assert isinstance(k, OneSet) == (_found(a) is not None)
        assert seen >= 25


def test_a_one_set_written_into_forgets_its_triple():
    wide = WideSets()
    u = Mask.of_values(np.full((4,), 3)).union(Mask.of_values(np.full((4,), 9)), wide)
    assert isinstance(u, OneSet) and u.one_set() is not None
    u.assign((np.array([1]),), Mask.of_values(np.array([WINDOW + 1])))
    assert u.one_set() is None and _found(u) is None
    kept = u.union(u, wide)
    assert not isinstance(kept, OneSet) or _same(kept.one_set(), _found(kept))


def test_one_value_along_k_is_the_formula_made_once():
    rng = np.random.default_rng(2)
    for _ in range(20):
        v = rng.integers(-1, 4, (2, 8, 16)).astype(np.int32)
        v[:, ::3] = v[:, ::3, :1]                    # rows that hold one value along K
        v[0, 1] = -1                                 # a row of nothing
        f = Field(v)
        want = np.where((f.hi_k >= 0) & (f.lo_k == f.hi_k), f.hi_k, -1)
        got = f.one_along_k()
        assert got.dtype == want.dtype and np.array_equal(got, want)
        assert f.one_along_k() is got
        for b in range(2):
            for r in range(8):
                present = set(v[b, r][v[b, r] >= 0].tolist())
                assert got[b, r] == (present.pop() if len(present) == 1 else -1)


def test_the_mma_plane_by_one_add_is_the_where_of_the_member_plane():
    for arch, mnemonic in (("gfx942", "v_mfma_f32_16x16x16_bf16"), ("gfx942", "v_mfma_f32_4x4x4_16b_f16"),
                           ("sm_90", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32")):
        insn = get_instruction(arch, mnemonic)
        lanes = insn.operand("D").wave_size
        ids = np.array([0, 2], np.int64)
        regs = insn.elems("D")
        for shape in ((regs, 2 * lanes), (regs + 1, 2 * lanes)):      # every slot D's, or a register over
            cache: dict = {}
            member = name_planes(cache, insn, shape, ids, lanes)[0]
            absent = name_absent(cache, insn, shape, ids, lanes)
            assert (absent is None) == (member >= 0).all()
            for idx in (0, 17, 2 ** 30):
                plane = member + np.int32(idx)
                if absent is not None:
                    plane[absent] = -1
                want = np.where(member >= 0, member + np.int32(idx), np.int32(-1))
                assert plane.dtype == want.dtype and np.array_equal(plane, want)
        assert name_absent({}, insn, (regs + 1, 2 * lanes), ids, lanes) is not None


def test_a_pair_records_member_base_of_one_member_is_the_count():
    """valueprov._member_base's one-member answer, [0, elements], is the counted one; two members
    (or a member past the first) count."""
    from gfxsim.machine.valueprov import _member_base

    def counted(m, members):
        return np.concatenate([[0], np.cumsum(np.bincount(m, minlength=members))]).astype(np.int64)
    for m, members in ((np.zeros(0, np.int64), 1), (np.zeros(7, np.int64), 1), (np.array([0, 0, 1, 1, 1]), 2),
                       (np.array([0, 1, 1]), 3), (np.array([1, 1]), 2)):
        got = _member_base(m, members)
        assert got.dtype == np.int64 and np.array_equal(got, counted(m, members))
