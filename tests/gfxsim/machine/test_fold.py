"""Folded provenance (gfxsim/machine/fold.py): a batch keeps provenance for one representative member
per class and a shift per member. Every launch below runs twice, folded and with every member's
provenance (GFXSIM_FOLD=0), and everything it produced must be the same: outputs, findings, each
matrix-instruction record (K-slot values, K sets, C chains), each sum of results (sides, cells,
footprints), what the stores left in the output buffers (bytes, written bits, identities,
footprints, marks). Each case also checks how the batch ran, so a fold that silently gave up
cannot pass for one that worked."""
import importlib.util

import numpy as np
import pytest

from gfxsim import Buffer, launch
from gfxsim.machine.options import LaunchOptions
from gfxsim.machine.fold import Fold, Unfolded
from gfxsim.machine.provenance import WINDOW, Mask, Prov, WideSets
from kernels_py.host.buffers import make_cache, run_decode
from kernels_py.workloads.data import make_attention_inputs
from support import DEFECTIVE
from support.fold import _same_prov, same_buffers, same_runs


def both_ways(monkeypatch, fn):
    """fn() run with every member's provenance, then folded: (unfolded result, folded result)."""
    monkeypatch.setenv("GFXSIM_FOLD", "0")
    a = fn()
    monkeypatch.setenv("GFXSIM_FOLD", "1")
    return a, fn()


def _decode(ctx, heads=8, kv_heads=1, num_seqs=1, trace=False, **kw):
    lens = ctx if isinstance(ctx, list) else [ctx] * num_seqs
    d = make_attention_inputs(seed=1, num_seqs=len(lens), num_heads=heads, num_kv_heads=kv_heads, head_dim=64,
                              context_lens=lens)
    cache = make_cache(d["k"], d["v"], d["context_lens"], block_size=16, smooth_k=True, seed=1)
    return lambda: run_decode(d["q"], cache, trace=trace, **kw)


def _check_decode(monkeypatch, fn):
    a, b = both_ways(monkeypatch, fn)
    assert np.array_equal(a.out, b.out, equal_nan=True) and np.array_equal(a.tmp_out, b.tmp_out, equal_nan=True)
    for ra, rb in zip(a.runs, b.runs):
        same_runs(ra, rb)
        for (x, _), (y, _) in zip(ra.machine.outputs, rb.machine.outputs):
            same_buffers(x, y, ra.machine.wide, rb.machine.wide)
    assert all(n["attempts"] == 0 for r in a.runs for n in r.folds)      # GFXSIM_FOLD=0: never folded
    fn.reduce_note = b.runs[1].folds[0]
    return b.runs[0].folds[0]


# -- the decode, folded or not ---------------------------------------------------------------------
@pytest.mark.parametrize("arch", ["gfx936", "gfx942"])
def test_a_decode_of_whole_partitions_folds_into_one_class(monkeypatch, arch):
    fn = _decode(1024, heads=8, kv_heads=2, arch=arch)
    note = _check_decode(monkeypatch, fn)
    assert note == {"first": (0, 0, 0), "members": 8, "classes": 1, "attempts": 1, "unfolded": None}
    # the reduce's heads read the partials other workgroups stored: each head's elements of the same
    # sums one shift from head 0's, so it folds as well
    assert fn.reduce_note == {"first": (0, 0, 0), "members": 8, "classes": 1, "attempts": 1, "unfolded": None}


def test_a_tail_partition_gets_a_class_of_its_own(monkeypatch):
    note = _check_decode(monkeypatch, _decode(1000, heads=8, kv_heads=2))
    assert note["classes"] == 2 and note["attempts"] == 2 and note["unfolded"] is None


def test_a_traced_decode_folds_and_records_the_same_events(monkeypatch):
    # the tail partition unfolds the first attempt: its events must be taken back with it
    a, b = both_ways(monkeypatch, _decode(1000, heads=8, kv_heads=2, trace=True))
    for ra, rb in zip(a.runs, b.runs):
        same_runs(ra, rb)
        ea, eb = ra.events, rb.events
        assert len(ea) == len(eb) and len(ea) > 0
        for x, y in zip(ea, eb):
            assert (x.index, x.op, x.workgroup, x.wave, x.source) == (y.index, y.op, y.workgroup, y.wave, y.source)
            assert np.array_equal(x.exec_mask, y.exec_mask)
            assert all(np.array_equal(p.values, q.values) for p, q in zip(x.outputs, y.outputs))
    assert b.runs[0].folds[0]["classes"] == 2 and b.runs[0].folds[0]["attempts"] == 2


def test_sequences_of_different_lengths(monkeypatch):
    # seq is tagged (two sequences); the shorter one's last partitions end at once (s_endpgm)
    note = _check_decode(monkeypatch, _decode([700, 1024], heads=4, kv_heads=1))
    assert note["unfolded"] is None and note["classes"] >= 2


def test_partitions_of_512_tokens(monkeypatch):
    note = _check_decode(monkeypatch, _decode(2048, heads=8, kv_heads=1, partition_size=512))
    assert note["classes"] == 1


def test_scale_findings_found_on_a_representative_are_every_members(monkeypatch):
    # the contiguous bug: found once on the representative, reported for every workgroup with its own
    # instruction, lanes and tokens — the same findings, in the same order, as the unfolded run's
    fn = _decode(1024, heads=8, kv_heads=2, grouping="contiguous")
    note = _check_decode(monkeypatch, fn)
    assert note["classes"] == 1 and note["unfolded"] is None
    res = fn()
    found = [f for f in res.runs[0].findings if f.kind == "scale-group-mismatch"]
    assert {f.workgroup for f in found} == {(0, p, h) for p in range(4) for h in range(2)}


def _user_kernel(name, fn):
    spec = importlib.util.spec_from_file_location(f"fold_{name}", DEFECTIVE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, fn)


def test_a_defective_partition_offset_is_found_the_same(monkeypatch):
    k = _user_kernel("wrong_partition", "paged_attention_decode")
    note = _check_decode(monkeypatch, _decode(1024, heads=8, kv_heads=1, partition_size=512, kernel=k))
    assert note["unfolded"] is None          # the mistake shows in the output declarations, after the launch


def test_a_defective_sequence_is_found_the_same(monkeypatch):
    # an ab-kslot-mismatch made on a representative unfolds the batch: each member finds its own
    k = _user_kernel("wrong_sequence", "paged_attention_decode")
    note = _check_decode(monkeypatch, _decode(512, heads=8, kv_heads=1, num_seqs=2, kernel=k))
    assert note["unfolded"].startswith("a load's 'seq' tags") and note["classes"] is None


def _kslot_kernel(w, a, b):
    """An MMAC whose B holds, in every K slot, the token one on from A's: an ab-kslot-mismatch in
    every member (b's tags are a's plus one)."""
    g = w.workgroup_id[0]
    at = g * 256 + (w.lane_id // 16) * 8
    w.mma("v_mmac_i32_16x16x32_i8", w.global_load(a, at, 8, "i8"), w.global_load(b, at, 8, "i8"))


def test_an_ab_kslot_mismatch_on_a_representative_runs_the_batch_unfolded(monkeypatch):
    tok = np.arange(4 * 256)

    def run():
        a = Buffer("a", np.ones(4 * 256, np.int8), {"token": tok})
        b = Buffer("b", np.ones(4 * 256, np.int8), {"token": tok + 1})
        return launch(_kslot_kernel, grid=(4,), args=(a, b), trace=False, batch=4)
    ra, rb = both_ways(monkeypatch, run)
    same_runs(ra, rb)
    assert {f.workgroup for f in rb.findings_of("ab-kslot-mismatch")} == {(g, 0, 0) for g in range(4)}
    assert rb.folds[0]["unfolded"] == "a ab-kslot-mismatch finding" and rb.folds[0]["classes"] is None


# -- a kernel built to part its members ---------------------------------------------------------------
def _parting_kernel(w, src, out, *, part):
    """Each member loads 4 token bytes, routes them (perm, shift, bpermute, LDS) and stores them;
    ``part`` makes one thing differ between members, so that the batch splits or unfolds."""
    g = w.workgroup_id[0]
    lane = w.lane_id
    x = w.global_load(src, (g * 64 + lane) * 4, 4, "u32")
    sel = 0x07060504 if part != "perm" else w.select(g.eq(1), w.const(0x03020100, "u32"), 0x07060504)
    y = w.perm(x, x, sel)
    y = (y >> 8) | (y << 24)
    src_lane = (lane + 1) % 64 if part != "bpermute" else (lane + g) % 64
    y = w.bpermute(y, src_lane)
    lds = w.view(w.shared("buf", (64,), "u32"))
    with w.if_(lane < 48 if part != "exec" else lane < 40 + 8 * (g % 2)):
        (lds + lane).store(y)
    w.barrier()
    z = (lds + (63 - lane if part != "lds" else (lane * (g + 1)) % 64)).load()
    z = w.select(z.eq(z), z, 0) if part != "select" else w.select(lane < 16 + g, z, x)
    w.view(out)[g * 64 + lane].store(z)


@pytest.mark.parametrize("part,expect", [
    ("none", dict(classes=1, attempts=1, unfolded=None)),
    ("perm", dict(classes=2, attempts=2, unfolded=None)),          # member 1 selects other bytes
    ("bpermute", dict(classes=None, unfolded="a bpermute's source lanes (then 4 classes of 4 members)")),
    ("exec", dict(classes=2, attempts=2, unfolded=None)),          # odd and even members
    ("lds", dict(classes=None, unfolded="the addresses of a ds_read of 'buf' (then 4 classes of 4 members)")),
    ("select", dict(classes=None, unfolded="a select's condition (then 4 classes of 4 members)")),
])
def test_every_place_a_member_can_part_is_checked(monkeypatch, part, expect):
    tok = np.arange(4 * 64 * 4).reshape(4 * 64, 4)

    def run():
        src = Buffer("src", np.arange(4 * 64 * 4, dtype=np.uint8).reshape(4 * 64, 4), {"token": tok})
        out = Buffer.empty("out", (4 * 64,), np.uint32)
        r = launch(_parting_kernel, grid=(4,), waves_per_group=1, args=(src, out), kwargs=dict(part=part),
                   trace=False, batch=4)
        return r, out
    (ra, oa), (rb, ob) = both_ways(monkeypatch, run)
    same_runs(ra, rb)
    same_buffers(oa, ob, ra.machine.wide, rb.machine.wide)
    note = rb.folds[0]
    assert {k: note[k] for k in expect} == expect, note


def _rows_kernel(w, src, out):
    """Each member loads 4 token bytes, puts them through LDS under an EXEC that follows its grid
    row (y) and stores them."""
    g = w.workgroup_id[0] + 4 * w.workgroup_id[1]
    lane = w.lane_id
    x = w.global_load(src, (g * 64 + lane) * 4, 4, "u32")
    lds = w.view(w.shared("buf", (64,), "u32"))
    (lds + lane).store(w.const(0, "u32"))
    with w.if_(lane < 40 + 8 * w.workgroup_id[1]):
        (lds + lane).store(x)
    w.barrier()
    w.view(out)[g * 64 + lane].store((lds + lane).load())


@pytest.mark.parametrize("apart, expect", [((), dict(classes=2, attempts=2)), ((1,), dict(classes=2, attempts=1)),
                                           ((0,), dict(classes=None, attempts=1)),   # 4 classes that part again
                                           ((0, 1), dict(classes=None, attempts=0,     # 8 classes: unfolded
                                                         unfolded="its members apart (then 8 classes of 8 members)"))])
def test_members_apart_along_a_grid_axis_start_in_classes_of_their_own(monkeypatch, apart, expect):
    """LaunchOptions.fold_apart: members whose control flow follows a grid axis start in a class per
    position along it, so the batch needs no attempt taken back; the same results as unfolded."""
    tok = np.arange(8 * 64 * 4).reshape(8 * 64, 4)

    def run():
        src = Buffer("src", np.arange(8 * 64 * 4, dtype=np.uint32).astype(np.uint8).reshape(8 * 64, 4), {"token": tok})
        out = Buffer.empty("out", (8 * 64,), np.uint32)
        r = launch(_rows_kernel, grid=(4, 2), waves_per_group=1, args=(src, out),
                   options=LaunchOptions(trace=False, batch=8, fold_apart=apart))
        return r, out
    (ra, oa), (rb, ob) = both_ways(monkeypatch, run)
    same_runs(ra, rb)
    same_buffers(oa, ob, ra.machine.wide, rb.machine.wide)
    note = rb.folds[0]
    assert note["members"] == 8 and {k: note[k] for k in expect} == expect, note


def test_an_unfolded_batch_runs_again_in_batches_of_the_unfolded_bound(monkeypatch):
    """LaunchOptions.unfolded_batch bounds a batch only where it keeps every member's provenance: a
    batch that folds runs whole; one whose members part runs again in batches of that many (each
    tried folded first), and gives what the launch unfolded in batches of that many gives."""
    tok = np.arange(4 * 64 * 4).reshape(4 * 64, 4)

    def run(part):
        src = Buffer("src", np.arange(4 * 64 * 4, dtype=np.uint8).reshape(4 * 64, 4), {"token": tok})
        out = Buffer.empty("out", (4 * 64,), np.uint32)
        r = launch(_parting_kernel, grid=(4,), waves_per_group=1, args=(src, out), kwargs=dict(part=part),
                   options=LaunchOptions(trace=False, batch=4, unfolded_batch=2))
        return r, out
    (ra, oa), (rb, ob) = both_ways(monkeypatch, lambda: run("bpermute"))
    same_runs(ra, rb)
    same_buffers(oa, ob, ra.machine.wide, rb.machine.wide)
    assert [n["members"] for n in ra.folds] == [2, 2]             # unfolded: batches of the bound
    assert [n["members"] for n in rb.folds] == [4, 2, 2]
    assert rb.folds[0]["unfolded"].endswith("(then in batches of 2)") and rb.folds[0]["classes"] is None
    assert all(n["unfolded"] and n["attempts"] >= 1 for n in rb.folds[1:])
    _, folded = both_ways(monkeypatch, lambda: run("none"))
    assert folded[0].folds == [{"first": (0, 0, 0), "members": 4, "classes": 1, "attempts": 1, "unfolded": None}]


def _accumulating_kernel(w, src, out):
    """Adds its bytes into ``out`` (a load, an add, a store), then parts member 1 from the others
    and adds again: the attempt taken back must put back what it stored, or the batch run again
    adds its first sum twice."""
    g = w.workgroup_id[0]
    x = w.global_load(src, (g * 64 + w.lane_id) * 4, 4, "u32")
    o = w.view(out)[g * 64 + w.lane_id]
    o.store(o.load() + x)
    sel = w.select(g.eq(1), w.const(0x03020100, "u32"), 0x07060504)
    o.store(w.perm(x, x, sel) + o.load())


def test_an_attempt_taken_back_puts_back_every_byte_its_stores_overwrote(monkeypatch):
    """Two launches into one output (the second brings the first's provenance into its own), the
    second taken back after its first store: the same bytes and planes as every member's run."""
    tok = np.arange(4 * 64 * 4).reshape(4 * 64, 4)
    src_bytes = np.arange(4 * 64 * 4, dtype=np.uint8).reshape(4 * 64, 4)

    def run():
        src = Buffer("src", src_bytes, {"token": tok})
        out = Buffer("out", np.zeros(4 * 64, np.uint32), {"token": 4 * np.arange(4 * 64) + 5000})   # shifts as src's
        runs = [launch(_accumulating_kernel, grid=(4,), waves_per_group=1, args=(src, out), trace=False, batch=4)
                for _ in range(2)]
        return runs, out
    (ra, oa), (rb, ob) = both_ways(monkeypatch, run)
    for x, y in zip(ra, rb):
        same_runs(x, y)
    same_buffers(oa, ob, ra[1].machine.wide, rb[1].machine.wide)
    assert [r.folds[0]["attempts"] for r in rb] == [2, 2] and rb[1].folds[0]["classes"] == 2
    x = src_bytes.view(np.uint32).ravel()       # either selector of perm(x, x) gives x: each launch adds 2x
    assert np.array_equal(oa.array, 4 * x) and np.array_equal(ob.array, oa.array)


def test_putting_back_each_store_latest_first_gives_the_buffer_as_before_it():
    """Buffer.overwritten / put_back over stores that make the provenance, add a field, give up the
    dword unit and add marks: after putting back each, the buffer is as it was before that store."""
    import copy
    from gfxsim.machine.dtypes import store_values
    buf = Buffer("b", np.zeros(16, np.uint32), {"token": np.arange(16)})
    rng = np.random.default_rng(0)

    def dwords(first, n):                     # byte addresses [4, n] of n dwords from dword ``first``
        return (4 * (first + np.arange(n)))[None, :] + np.arange(4)[:, None]
    stores = [(dwords(2, 4), Prov(4, {"token": np.array([[7, 8, 9, -1]], np.int32)},
                                  {"token": Mask.of_values(np.array([[1, 2, 3, 4]]))})),
              (dwords(4, 3), Prov(4, {"head": np.array([[1, 2, 3]], np.int32)})),
              (np.array([[9, 10, 11]]), Prov(1, {"token": np.array([[4, 5, 6]], np.int32)})),
              (dwords(0, 2), Prov(4, {"token": np.array([[3, 3]], np.int32)}, flags=np.array([[1, 2]], np.uint8))),
              (dwords(1, 1), None)]
    before, logged = [], []
    for at, p in stores:
        before.append(copy.deepcopy((buf.raw, buf.written, buf.prov)))
        logged.append(buf.overwritten(at))
        store_values(buf.raw, buf.written, at[0], at.shape[0], rng.integers(0, 255, (at.shape[0], at.shape[1]))
                     .astype(np.uint8), None)
        buf.store_prov(at, p)
    assert buf.prov.unit == 1 and sorted(buf.prov.ids) == ["head", "token"] and buf.prov.flags is not None
    for (raw, written, prov), rec in zip(reversed(before), reversed(logged)):
        buf.put_back(rec)
        assert np.array_equal(buf.raw, raw) and np.array_equal(buf.written, written)
        assert (buf.prov is None) == (prov is None)
        if prov is not None:
            assert buf.prov.unit == prov.unit
            _same_prov(buf.prov._planes(), None, prov._planes(), None, "put back")
    assert buf.prov is None and not buf.raw.any()


# -- the fold itself ---------------------------------------------------------------------------------
def load(f: Fold, plane: np.ndarray) -> dict:
    """What a tagged load of ``plane`` (one 'token' plane, every member's columns) keeps, folded."""
    return f.fold_prov(Prov(4, {"token": plane}), "a test").ids


def test_a_load_sets_each_members_shift_and_a_later_load_checks_it():
    f = Fold(3, 4)
    rep = np.array([[0, 1, -1, 3]], np.int32)
    plane = np.concatenate([rep, np.where(rep >= 0, rep + 256, -1), np.where(rep >= 0, rep + 512, -1)], axis=1)
    assert np.array_equal(load(f, plane)["token"], rep)
    assert f.shift["token"].tolist() == [0, 256, 512]
    again = plane.copy()
    again[0, 4 + 1] += 1                                   # member 1 off by one in one lane
    with pytest.raises(Unfolded, match="'token' tags") as e:
        load(f, again)
    assert e.value.keys[0] == e.value.keys[2] != e.value.keys[1]
    other = np.concatenate([rep, rep + 256 * (rep >= 0), rep + 1024 * (rep >= 0)], axis=1)
    with pytest.raises(Unfolded, match="shifts differ"):    # a later load moves member 2 elsewhere
        load(f, other)


def test_the_frozen_shifts_are_kept_while_loads_only_check_them_and_copied_anew_when_one_learns_a_shift():
    """Fold.frozen (a record's copy of the shifts) is made again only where a load set a shift: a
    class whose representative held no value learns its members' shifts at a later load."""
    f = Fold(4, 4, classes=[0, 0, 1, 1])
    rep = np.array([[0, 1, -1, 3]], np.int32)
    none = np.full((1, 4), -1, np.int32)
    first = np.concatenate([rep, rep + 256 * (rep >= 0), none, none], axis=1)     # class 1 holds nothing
    load(f, first)
    frozen = f.frozen()
    load(f, first)
    assert f.frozen() is frozen                          # only checked: the same copy
    later = np.concatenate([rep, rep + 256 * (rep >= 0), rep + 512 * (rep >= 0), rep + 768 * (rep >= 0)], axis=1)
    load(f, later)
    assert f.frozen() is not frozen and f.frozen().shift["token"].tolist() == [0, 256, 0, 256]
    assert frozen.known["token"].tolist() == [True, True, False, False]


def test_a_plane_broadcast_over_its_rows_folds_as_its_copy():
    """A load's tag the same in every row (Buffer.tags_at's views) is checked on one row: the
    same folded plane, shifts and parting members as the materialised plane's, in 1 and 2 classes."""
    rep = np.array([[0, 1, -1, 3]], np.int32)
    row = np.concatenate([rep, np.where(rep >= 0, rep + 256, -1), np.where(rep >= 0, rep + 512, -1)], axis=1)
    bad = row.copy()
    bad[0, 4 + 1] += 1
    for classes in (None, [0, 1, 0]):
        for plane in (row, bad):
            got = []
            for p in (np.broadcast_to(plane, (3, 12)), np.broadcast_to(plane, (3, 12)).copy()):
                f = Fold(3, 4, classes)
                try:
                    got.append((load(f, p)["token"], f.shift["token"], f.known["token"]))
                except Unfolded as e:
                    got.append((e.what, e.keys))
            assert len(got[0]) == len(got[1]) and all(np.array_equal(x, y) for x, y in zip(*got))
            assert len(got[0]) == (2 if plane is bad and classes is None else 3)
            if len(got[0]) == 3:
                assert got[0][0].shape == (3, 4 * (1 if classes is None else 2)) and got[0][0].flags.writeable


def test_a_loads_footprints_fold_in_place_as_on_moved_copies(monkeypatch):
    """One class: a footprint plane a load read is checked member against member 0 where it lies
    (Fold._rep_mask) — the same folded Mask, and the same Unfolded naming the same members, as
    Fold.rep on moved copies (ONE_CLASS_MASKS off); two classes and odd widths take rep either way."""
    import gfxsim.machine.fold as fold_mod
    rng = np.random.default_rng(3)
    rep = Mask.of_values(rng.integers(-1, 3 * WINDOW, (2, 4)))
    rep.wide[0, 1] = 5                                      # a wide set's id too
    tile = lambda a, n: np.concatenate([a] * n, axis=1)     # noqa: E731
    good = Mask(tile(rep.base, 3), tile(rep.bits, 3), tile(rep.wide, 3))
    cases = [good]
    for part in ("base", "bits", "wide"):                  # member 1 or 2 parts in one array
        m = Mask(good.base.copy(), good.bits.copy(), good.wide.copy())
        a = getattr(m, part)
        a[(1, 4 * (1 + (part == "wide")) + 2)] += 1
        cases.append(m)
    for classes in (None, [0, 1, 0]):
        for m in cases:
            got = []
            for on in (True, False):
                monkeypatch.setattr(fold_mod, "ONE_CLASS_MASKS", on)
                f = Fold(3, 4, classes)
                try:
                    got.append(f.fold_prov(Prov(4, {}, {"token": m}), "a test").fp["token"])
                except Unfolded as e:
                    got.append((e.what, e.keys.tolist()))
            if isinstance(got[0], tuple):
                assert got[0] == got[1] and m is not good
            else:
                assert all(np.array_equal(x, y) and x.dtype == y.dtype and x.flags.c_contiguous
                           for x, y in ((got[0].base, got[1].base), (got[0].bits, got[1].bits),
                                        (got[0].wide, got[1].wide)))
                assert m is good or classes is not None


def test_unfolding_moves_identities_names_and_footprints_by_each_members_shift():
    f = Fold(2, 2)
    load(f, np.array([[5, -1, 5 + WINDOW, -1]], np.int32))
    m = Mask.of_values(np.array([[5, 7]]))
    p = Prov(4, {"token": np.array([[5, -1]], np.int32), "@mma": np.array([[3, -1]], np.int32),
                 "@mn": np.array([[9, -1]], np.int32)}, {"token": m})
    u = f.unfold(p, None, "a test")
    assert u.ids["token"].tolist() == [[5, -1, 5 + WINDOW, -1]]
    assert u.ids["@mma"].tolist() == [[3, -1, 4, -1]] and u.ids["@mn"].tolist() == [[9, -1, 9, -1]]
    assert [set(u.fp["token"].values_at((0, c), None)) for c in range(4)] == \
        [{5}, {7}, {5 + WINDOW}, {7 + WINDOW}]


def test_a_footprint_moved_by_part_of_a_window_or_wider_than_one_moves_by_its_values():
    wide = WideSets()
    f = Fold(2, 2, wide=wide)
    load(f, np.array([[0, -1, 200, -1]], np.int32))       # member 1: 200 tokens on
    sets = [{10, 100}, set(range(250, 300))]                           # in one window / across two
    m = Mask.empty((1, 2))
    m.base[0, 0] = 0
    m.bits[0, 0, 0], m.bits[0, 0, 1] = np.uint64(1 << 10), np.uint64(1 << (100 - 64))
    m.wide[0, 1] = wide.intern(sets[1])
    u = f.unfold(Prov(4, {}, {"token": m}), None, "a test")
    got = [set(u.fp["token"].values_at((0, c), wide)) for c in range(4)]
    assert got == sets + [{v + 200 for v in s} for s in sets]


def test_members_that_differ_split_into_classes_by_what_they_held():
    f = Fold(4, 2)
    x = np.array([1, 2, 1, 2, 3, 3, 1, 2])
    with pytest.raises(Unfolded) as e:
        f.rep(x, "a test")
    keys = e.value.keys
    assert keys[0] == keys[1] == keys[3] != keys[2]
    g = Fold(4, 2, keys)
    assert g.classes == 2 and g.reps.tolist() == [0, 2] and np.array_equal(g.rep(x, "a test"), [1, 2, 3, 3])


def test_a_sums_plan_kept_per_classes_gives_what_a_fresh_fold_makes():
    """Fold.pair keeps what it derives from its elements' classes (_pair_plan): each sum, the
    classes repeated or not, holds the record, @mn and element sources a fresh Fold makes for it."""
    from gfxsim.machine.mmalog import MmaLog

    def sums(f, log, order):
        out = []
        for k, cls in enumerate(order):
            n = len(cls)
            left = (np.full(n, 5, np.int32), np.arange(n, dtype=np.int32))
            right = (np.full(n, 9, np.int32), np.arange(n, dtype=np.int32)[::-1].copy())
            pid, mn, src, member = f.pair(log, left, right, np.asarray(cls, np.int64), ("site", k))
            rec = log.pairs[pid - (1 << 28)]
            out.append((mn.tolist(), src.tolist(), member.tolist(), rec.member_base.tolist(), rec.fold_shift.tolist(),
                        [x.tolist() for side in (rec.left, rec.right) for x in side]))
        return out
    order = [[0, 0, 1, 1, 1], [0, 1], [0, 0, 1, 1, 1], [1, 1], [0, 0], [0, 1], [0, 0, 0, 1, 1], [1, 1, 1]]
    kept = sums(Fold(5, 4, classes=[0, 1, 1, 0, 1]), MmaLog(), order)
    for k, cls in enumerate(order):
        fresh = Fold(5, 4, classes=[0, 1, 1, 0, 1])
        log = MmaLog()
        log.pairs.extend([None] * k)                    # the same pair ids
        assert sums(fresh, log, [cls])[0] == kept[k]


def test_a_folded_sums_elements_read_alone_are_those_placed_for_every_member(monkeypatch):
    """FoldedPair.cell_at and SpreadFp.at (a few elements placed) against cell / index (all placed)."""
    from gfxsim.machine.foldrec import FoldedPair, SpreadFp
    monkeypatch.setenv("GFXSIM_FOLD", "1")
    res = _decode(1024, heads=8, kv_heads=2)()
    rng = np.random.default_rng(0)
    seen = 0
    for run in res.runs:
        log = run.machine.mma_log
        for rec in log.pairs:
            if not isinstance(rec, FoldedPair) or not rec.has_footprints:
                continue
            n = rec.size()
            e = rng.integers(0, n, 7)
            assert n == len(rec.cell) and np.array_equal(rec.cell_at(e), rec.cell[e])
            for u, d in rec.fp.values():
                for x in (u, d):
                    if isinstance(x, SpreadFp):
                        seen += 1
                        assert np.array_equal(x.at(e).index, x.index[e]) and x.at(e).index.dtype == x.index.dtype
    assert seen                      # the reduce's sums are folded and read


def test_a_folded_records_k_sets_read_at_its_representatives_are_those_placed_for_every_member(monkeypatch):
    """consumed._rep_table (a folded record's K sets at its representatives' rows, from the fields
    as the batch made them, the record not placed) against _row_table (the record placed for every
    member), row by row, by value: whole partitions (one class), and a tail partition (two)."""
    from gfxsim.machine import consumed
    monkeypatch.setenv("GFXSIM_FOLD", "1")
    seen = 0
    for run in _decode(1024, heads=8, kv_heads=2)().runs + _decode(1000, heads=8, kv_heads=2)().runs:
        log, wide = run.machine.mma_log, run.machine.wide
        for i, rec in enumerate(log.records):
            if not rec.held_per_class or rec._placed_fields is not None:
                continue
            bl = rec.insn.blocks
            rows = (rec._folded.frozen.reps[:, None] * bl + np.arange(bl)).ravel()
            got = consumed._rep_table(log, i, rec, rows, wide)
            assert rec._placed_fields is None                 # read without placing
            want = consumed._row_table(log, i, rec, wide)
            assert (got is None) == (want is None or rec.chained())
            if got is None:
                continue
            table, at = got
            assert table.keys() == want.keys()
            for f in table:
                for j, r in enumerate(rows.tolist()):
                    assert table[f].values_at((int(at[j]),), wide) == want[f].values_at((r,), wide), (i, f, r)
            seen += len(np.unique(at))
    assert seen > 2                  # the decode's QK records are folded and read at their representatives


def test_cells_of_one_pair_or_one_earlier_launch_are_those_looked_up_kind_by_kind(monkeypatch):
    """consumed.cells' shortcut (every id of one pair, or of one earlier launch) against
    _cells_by_kind, on every side of every sum of a decode and its reduce (folded and not), each
    side alone and two sides of different kinds together, in a shuffled order."""
    from gfxsim.machine import consumed
    from gfxsim.machine.mmalog import FOREIGN_BASE, PAIR_BASE
    rng = np.random.default_rng(0)
    kinds = set()
    for fold in ("0", "1"):
        monkeypatch.setenv("GFXSIM_FOLD", fold)
        for run in _decode(1000, heads=8, kv_heads=2)().runs:
            log = run.machine.mma_log
            sides = []
            for rec in log.pairs:
                for ids, mn in (rec.left, rec.right):
                    ids, mn = np.asarray(ids, np.int64), np.asarray(mn, np.int64)
                    p = rng.permutation(len(ids))
                    sides.append((ids[p], mn[p]))
            for i, (ids, mn) in enumerate(sides):
                got = consumed.cells(log, ids, mn)
                assert got.dtype == np.int64 and np.array_equal(got, consumed._cells_by_kind(log, ids, mn))
                kinds.add("pair" if (ids >= PAIR_BASE).all() and (ids < FOREIGN_BASE).all() else
                          "foreign" if (ids >= FOREIGN_BASE).all() else "other")
                if i:
                    both = tuple(np.concatenate([a, b]) for a, b in zip(sides[i - 1], (ids, mn)))
                    assert np.array_equal(consumed.cells(log, *both), consumed._cells_by_kind(log, *both))
    assert {"pair", "foreign"} <= kinds


def test_exec_on_the_provenance_columns_is_kept_until_exec_is_set_again():
    """Wave.pexec keeps its answer for the EXEC it was asked about: each answer equals Fold.rep of
    that EXEC (one class and several), is read-only, is asked again after set_exec, and EXEC whose
    members differ raises Unfolded every time (nothing kept)."""
    from types import SimpleNamespace

    from gfxsim.machine.wave import Wave
    rng = np.random.default_rng(3)
    for classes in ([0, 0, 0, 0], [0, 1, 0, 1]):
        fold = Fold(4, 8, classes)
        w = SimpleNamespace(fold=fold, pw=fold.width, _pexec=None)
        w.set_exec = lambda m, w=w: Wave.set_exec(w, m)
        seen = 0
        for _ in range(12):
            rep = rng.random(fold.width) < 0.5
            if rng.random() < 0.25:
                rep[:] = True
            m = np.take(rep, fold.member_cols)          # every member as its representative
            w.set_exec(m)
            a = Wave.pexec(w, "EXEC")
            assert not a.flags.writeable
            assert np.array_equal(a, np.ones(fold.width, bool) if m.all() else fold.rep(m, "EXEC"))
            assert Wave.pexec(w, "EXEC") is a                  # kept while EXEC is that array
            w.set_exec(m.copy())                                 # the same lanes, set again: asked anew
            assert Wave.pexec(w, "EXEC") is not a and np.array_equal(Wave.pexec(w, "EXEC"), a)
            seen += 1
            bad = m.copy()
            bad[3 * fold.lanes + 1] = not bad[fold.rep_of[3] * fold.lanes + 1]    # member 3 parts from its class
            w.set_exec(bad)
            for _ in range(2):
                with pytest.raises(Unfolded):
                    Wave.pexec(w, "EXEC")
        assert seen == 12
