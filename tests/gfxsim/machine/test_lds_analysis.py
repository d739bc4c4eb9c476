"""Batched LDS analysis (bank conflicts, races) equals the per-workgroup functions, member by member."""
import numpy as np
import pytest

from gfxsim.machine.banks import bank_conflicts, bank_conflicts_batched, bank_conflicts_rows
from gfxsim.machine.lds_races import RaceState, track, track_np

NBYTES = (1, 2, 4, 8, 12, 16)
LANES = 64


def loop_conflicts(addr, active, nbytes, banks=32, bank_bytes=4):
    out = np.zeros((3, addr.shape[0]), np.int64)
    for m in range(addr.shape[0]):
        if active[m].any():
            out[:, m] = bank_conflicts(addr[m], active[m], nbytes, banks, bank_bytes)
    return out


def random_row(rng, nbytes, size=4096):
    kind = rng.integers(4)
    lane = np.arange(LANES)
    if kind == 0:                                         # fully random, aligned to the access
        a = rng.integers(0, size // nbytes - 1, LANES) * nbytes
    elif kind == 1:                                       # strided
        a = lane * int(rng.choice([nbytes, 16, 64, 128, 132, 256])) % (size - 16)
    elif kind == 2:                                       # few distinct addresses (broadcasts)
        a = rng.choice(rng.integers(0, size - 16, 3), LANES)
    else:                                                 # unaligned bytes
        a = rng.integers(0, size - 16, LANES)
    return a.astype(np.int64)


def random_active(rng):
    kind = rng.integers(4)
    if kind == 0:
        return np.ones(LANES, bool)
    if kind == 1:
        return rng.random(LANES) < 0.5
    if kind == 2:
        return np.arange(LANES) < rng.integers(0, LANES + 1)
    return np.zeros(LANES, bool)


def batch(rng, nbytes, members, mode):
    """[members, lanes] rows: identical, shifted by multiples of 128 B (or not), or all different."""
    a0, on0 = random_row(rng, nbytes), random_active(rng)
    on0[rng.integers(LANES)] = True
    if mode == "identical":
        addr, on = np.tile(a0, (members, 1)), np.tile(on0, (members, 1))
    elif mode == "shifted":
        addr = a0[None, :] + 128 * rng.integers(0, 8, (members, 1))
        on = np.tile(on0, (members, 1))
    elif mode == "shifted-by-dwords":
        addr = a0[None, :] + rng.choice([0, 4, 8, 12, 16, 64, 124, 128, 256], (members, 1))
        on = np.tile(on0, (members, 1))
    elif mode == "shifted-by-bytes":                      # may change the result: must not be reused
        addr = a0[None, :] + rng.choice([0, 1, 2, 3, 5, 6, 130], (members, 1))
        on = np.tile(on0, (members, 1))
    elif mode == "mixed":
        addr, on = np.tile(a0, (members, 1)), np.tile(on0, (members, 1))
        for m in rng.choice(members, members // 3, replace=False):
            addr[m], on[m] = random_row(rng, nbytes), random_active(rng)
        on[rng.random(members) < 0.1] = False
    else:
        addr = np.stack([random_row(rng, nbytes) for _ in range(members)])
        on = np.stack([random_active(rng) for _ in range(members)])
    return addr, on


@pytest.mark.parametrize("nbytes", NBYTES)
@pytest.mark.parametrize("mode", ["identical", "shifted", "shifted-by-dwords", "shifted-by-bytes", "mixed", "different"])
def test_bank_conflicts_batched_equals_loop(nbytes, mode):
    rng = np.random.default_rng(nbytes * 100 + len(mode))
    for _ in range(20):
        addr, on = batch(rng, nbytes, int(rng.integers(1, 40)), mode)
        got = np.stack(bank_conflicts_batched(addr, on, nbytes))
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, loop_conflicts(addr, on, nbytes))


@pytest.mark.parametrize("nbytes", NBYTES)
@pytest.mark.parametrize("mode", ["identical", "shifted", "shifted-by-dwords", "shifted-by-bytes", "mixed", "different"])
def test_bank_conflicts_rows_equals_loop(nbytes, mode):
    rng = np.random.default_rng(nbytes * 100 + len(mode) + 1)
    for _ in range(20):
        addr, on = batch(rng, nbytes, int(rng.integers(1, 40)), mode)
        for banks, bank_bytes in ((32, 4), (16, 8)):
            got = np.stack(bank_conflicts_rows(np.asarray(addr, np.int64), on, nbytes, banks, bank_bytes))
            np.testing.assert_array_equal(got, loop_conflicts(addr, on, nbytes, banks, bank_bytes))


def test_bank_conflicts_batched_other_geometry_and_flat_input():
    rng = np.random.default_rng(7)
    for nbytes in NBYTES:
        addr, on = batch(rng, nbytes, 16, "mixed")
        for banks, bank_bytes in ((32, 4), (64, 4), (16, 8)):
            got = np.stack(bank_conflicts_batched(addr, on, nbytes, banks, bank_bytes))
            np.testing.assert_array_equal(got, loop_conflicts(addr, on, nbytes, banks, bank_bytes))
        flat = np.stack(bank_conflicts_batched(addr.ravel(), on.ravel(), nbytes))
        np.testing.assert_array_equal(flat, loop_conflicts(addr, on, nbytes))


def test_byte_shift_is_not_a_dword_shift():
    addr = np.zeros((2, LANES), np.int64)
    addr[:, 1] = 3                                       # member 0: bytes 0 and 3, one dword
    addr[1] += 1                                         # member 1: bytes 1 and 4, two dwords
    on = np.zeros((2, LANES), bool)
    on[:, :2] = True
    assert bank_conflicts(addr[0], on[0], 1) == (1, 1, 1)
    assert bank_conflicts(addr[1], on[1], 1) == (1, 1, 1)
    addr[:, 1] += 128                                    # now dwords 0, 32 (2-way) vs 0, 33 (none)
    assert [bank_conflicts(addr[m], on[m], 1)[0] for m in range(2)] == [2, 1]
    assert bank_conflicts_batched(addr, on, 1)[0].tolist() == [2, 1]
    assert bank_conflicts_batched(addr[::-1].copy(), on, 1)[0].tolist() == [1, 2]


def test_bank_conflicts_batched_inactive_members_and_empty():
    addr = np.tile(np.arange(LANES) * 4, (3, 1))
    on = np.ones((3, LANES), bool)
    on[1] = False
    deg, cyc, pas = bank_conflicts_batched(addr, on, 4)
    assert deg.tolist() == [1, 0, 1] and cyc.tolist() == [2, 0, 2] and pas.tolist() == [2, 0, 2]
    deg, cyc, pas = bank_conflicts_batched(np.zeros((0, LANES), np.int64), np.zeros((0, LANES), bool), 4)
    assert deg.shape == cyc.shape == pas.shape == (0,)
    with pytest.raises(ValueError):
        bank_conflicts_batched(np.zeros((2, 32), np.int64), np.ones((2, 32), bool), 4)


def test_b128_pairs_lanes_0_3_with_20_23():
    # lanes 0-3 and 20-23 (one phase) read the same 16 bytes of bank 0..3 offset by 128 B: 2-way;
    # the other lanes read conflict-free addresses
    lane = np.arange(LANES)
    addr = lane * 16
    addr[20:24] = 128 + lane[0:4] * 16 + 512       # bank of lane l-20 + 128 B: collides with lanes 0-3
    on = np.zeros(LANES, bool)
    on[0:4] = on[20:24] = True
    assert bank_conflicts(addr, on, 16)[0] == 2
    # lanes 0-3 and 4-7 are different phases: the same collision costs nothing
    addr2 = lane * 16
    addr2[4:8] = 512 + lane[0:4] * 16
    on2 = np.zeros(LANES, bool)
    on2[0:8] = True
    assert bank_conflicts(addr2, on2, 16) == (1, 2, 2)
    got = bank_conflicts_batched(np.stack([addr, addr2]), np.stack([on, on2]), 16)
    assert got[0].tolist() == [2, 1] and got[1].tolist() == [2, 2] and got[2].tolist() == [1, 2]


def test_row_stride_128_is_16_way_and_broadcast_is_free():
    lane = np.arange(LANES)
    stride = lane * 128                                # row stride 128 B: every lane on bank 0
    assert bank_conflicts(stride, np.ones(LANES, bool), 4) == (32, 64, 2)   # 32 dwords per phase
    on16 = (lane % 32) < 16                            # 16 lanes of each phase: the 16-way conflict
    assert bank_conflicts(stride, on16, 4) == (16, 32, 2)
    half = (lane % 16) * 128                           # 16 distinct rows, each dword read by 2 lanes
    assert bank_conflicts(half, np.ones(LANES, bool), 4) == (16, 32, 2)
    bcast = np.full(LANES, 36)
    assert bank_conflicts(bcast, np.ones(LANES, bool), 4) == (1, 2, 2)
    members = 8
    got = bank_conflicts_batched(np.tile(half, (members, 1)) + 1024 * np.arange(members)[:, None],
                                 np.ones((members, LANES), bool), 4)
    assert got[0].tolist() == [16] * members
    got = bank_conflicts_batched(np.tile(bcast, (members, 1)) + 4 * np.arange(members)[:, None],
                                 np.ones((members, LANES), bool), 4)
    assert got[0].tolist() == [1] * members and got[1].tolist() == [2] * members


# ---------------------------------------------------------------------------------------- races
def ref_track(addr, active, nbytes, wave, epoch, is_write, w_wave, w_epoch, r_mask, r_epoch):
    """lds_track (memory.py) transcribed: one member, 1-D state."""
    bit = 1 << wave
    hit = (-1, -1, -1)
    for l in range(addr.shape[0]):
        if not active[l]:
            continue
        for b in range(nbytes):
            a = int(addr[l]) + b
            if w_epoch[a] == epoch and w_wave[a] != wave and hit[0] < 0:
                hit = (l, a, int(w_wave[a]))
            if is_write:
                others = int(r_mask[a]) & ~bit
                if r_epoch[a] == epoch and others and hit[0] < 0:
                    hit = (l, a, (others & -others).bit_length() - 1)
                w_wave[a], w_epoch[a] = wave, epoch
            elif r_epoch[a] != epoch:
                r_epoch[a], r_mask[a] = epoch, bit
            else:
                r_mask[a] = int(r_mask[a]) | bit
    return hit


def per_member_loop(func, state, addr, on, nbytes, wave, epoch, is_write):
    hits = np.full((3, addr.shape[0]), -1, np.int64)
    for m in range(addr.shape[0]):
        hits[:, m] = func(addr[m], on[m], nbytes, wave, epoch, is_write, state.w_wave[m], state.w_epoch[m],
                          state.r_mask[m], state.r_epoch[m])
    return hits


def test_track_equals_per_member_loop():
    func = ref_track            # the transcription of the per-wave tracker the batched one replaced
    rng = np.random.default_rng(3)
    members, size = 6, 512
    got_state, want_state = RaceState(members, size), RaceState(members, size)
    epoch = 0
    n_races = 0
    for step in range(300):
        nbytes = int(rng.choice(NBYTES))
        if rng.random() < 0.05:
            epoch += 1
        wave = int(rng.integers(0, 16))
        is_write = bool(rng.random() < 0.5)
        base = rng.integers(0, (size - 16) // 16, LANES) * 16 if rng.random() < 0.5 else \
            rng.integers(0, size - nbytes, LANES)
        addr = np.tile(base, (members, 1))
        addr[rng.random(members) < 0.3] = rng.integers(0, size - nbytes, LANES)
        on = rng.random((members, LANES)) < rng.random()
        got = np.stack(got_state.track(addr, on, nbytes, wave, epoch, is_write))
        want = per_member_loop(func, want_state, addr, on, nbytes, wave, epoch, is_write)
        np.testing.assert_array_equal(got, want, err_msg=f"step {step}")
        n_races += int((got[0] >= 0).sum())
        for name in ("w_wave", "w_epoch", "r_mask", "r_epoch"):
            np.testing.assert_array_equal(getattr(got_state, name), getattr(want_state, name))
    assert n_races > 0


def one(addr_list, members=2):
    addr = np.zeros((members, LANES), np.int64)
    on = np.zeros((members, LANES), bool)
    for m, a in enumerate(addr_list):
        if a is not None:
            addr[m, 0], on[m, 0] = a, True
    return addr, on


def test_race_cases():
    st = RaceState(2, 256)
    addr, on = one([8, 8])
    st.track(addr, on, 4, 0, 0, True)
    hl, ha, hw = st.track(*one([10, None]), 1, 1, 0, False)      # read of a byte wave 0 wrote: race
    assert (hl.tolist(), ha.tolist(), hw.tolist()) == ([0, -1], [10, -1], [0, -1])
    hl, ha, hw = st.track(*one([8, 8]), 4, 0, 0, False)           # the writer reading back: none
    assert hl.tolist() == [-1, -1]
    hl, ha, hw = st.track(*one([8, 11]), 4, 2, 1, False)          # next epoch: none
    assert hl.tolist() == [-1, -1]
    hl, ha, hw = st.track(*one([8, 8]), 4, 3, 1, False)           # read/read in one epoch: none
    assert hl.tolist() == [-1, -1]
    hl, ha, hw = st.track(*one([None, 11]), 1, 5, 1, True)        # write after waves 2, 3 read: race,
    assert (hl.tolist(), ha.tolist(), hw.tolist()) == ([-1, 0], [-1, 11], [-1, 2])   # the lowest named
    hl, ha, hw = st.track(*one([None, 9]), 1, 5, 1, True)         # byte 9: only wave 3 read it
    assert (hl.tolist(), ha.tolist(), hw.tolist()) == ([-1, 0], [-1, 9], [-1, 3])
    hl, ha, hw = st.track(*one([100, 100]), 8, 7, 1, True)        # write / write of different waves
    hl, ha, hw = st.track(*one([104, 96]), 8, 6, 1, True)
    assert (hl.tolist(), ha.tolist(), hw.tolist()) == ([0, 0], [104, 100], [7, 7])
    hl, ha, hw = st.track(*one([104, 96]), 8, 6, 2, True)         # and in the next epoch: none
    assert hl.tolist() == [-1, -1]


def test_track_bounds_and_wave_checks():
    st = RaceState(2, 64)
    with pytest.raises(IndexError):
        st.track(*one([62, 0]), 4, 0, 0, True)
    assert (st.w_epoch == -1).all()                               # nothing recorded
    with pytest.raises(ValueError):
        st.track(*one([0, 0]), 4, 64, 0, True)
    flat_addr, flat_on = (x.ravel() for x in one([4, 8]))
    st.track(flat_addr, flat_on, 4, 0, 0, True)
    assert st.w_wave[0, 4:8].tolist() == [0] * 4 and st.w_wave[1, 8:12].tolist() == [0] * 4
    addr, on = one([4, 8])
    hl, _, _ = track(addr, on, 4, 1, 0, False, st.w_wave, st.w_epoch, st.r_mask, st.r_epoch, np.zeros_like(on))
    assert hl.tolist() == [0, 0]


@pytest.mark.parametrize("members", [1, 3])
def test_track_np_equals_track(members):
    """The numpy tracker (one-member states: a batch whose workgroups agree) equals the numba one,
    hits and state, on random accesses that overlap within and across waves and epochs."""
    rng = np.random.default_rng(members)
    size, n_races = 64, 0
    for trial in range(300):
        a = RaceState(members, size)
        b = RaceState(members, size)
        for step in range(6):
            nbytes = int(rng.choice(NBYTES))
            lanes = int(rng.choice([4, 8, LANES]))
            addr = rng.integers(0, size - nbytes + 1, (members, lanes)).astype(np.int64)
            on = rng.random((members, lanes)) < 0.6
            args = (addr, on, nbytes, int(rng.integers(0, 3)), int(rng.integers(0, 2)), bool(rng.integers(2)))
            same = on & (rng.random((members, lanes)) < 0.3)
            want = track(*args, a.w_wave, a.w_epoch, a.r_mask, a.r_epoch, same)
            got = track_np(*args, b.w_wave, b.w_epoch, b.r_mask, b.r_epoch, same)
            np.testing.assert_array_equal(np.stack(got), np.stack(want), err_msg=f"trial {trial} step {step}")
            n_races += int((want[0] >= 0).sum())
            for name in ("w_wave", "w_epoch", "r_mask", "r_epoch"):
                np.testing.assert_array_equal(getattr(b, name), getattr(a, name))
    assert n_races > 100
    with pytest.raises(IndexError):
        track_np(np.array([[62]]), np.array([[True]]), 4, 0, 0, True, *(np.zeros((1, 64), t) for t in
                                                                          (np.int32, np.int64, np.uint64, np.int64)),
                 np.zeros((1, 1), bool))


@pytest.mark.parametrize("pattern", ["same in every workgroup", "per workgroup"])
def test_batched_lds_accesses_equal_one_workgroup_at_a_time(pattern):
    """An LDS address the same in every batched workgroup (under the same EXEC) is made and checked
    for one workgroup's lanes and broadcast; one that differs goes column by column. Either way
    the values, the bank-conflict findings per workgroup and the written bytes equal a run of one
    workgroup at a time."""
    from gfxsim import Buffer, launch

    def k(w, out):
        x = w.workgroup_id[0]
        reg = w.shared("s", (8 * 64,), np.int32)
        shift = 0 if pattern == "same in every workgroup" else x % 2       # odd workgroups one dword on
        a = (w.lane_id % 32) * 8 + shift              # lanes 8 dwords apart share banks: conflicts
        w.lds_store(reg, a * 4, w.lane_id + x * 1000)
        with w.if_(w.lane_id < 48):                   # a narrower EXEC, the same in every member
            w.global_store(out, (x * 64 + w.lane_id) * 4, w.lds_load(reg, a * 4, 4, "i32"))
    outs, runs = [], []
    for b in (1, 4):
        out = Buffer.empty("out", (4, 64), np.int32)
        runs.append(launch(k, grid=4, arch="gfx942", args=(out,), trace=False, batch=b))
        outs.append(out)
    lane = np.arange(64)
    want = np.where(lane < 32, lane + 32, lane) + 1000 * np.arange(4)[:, None]    # lanes 32-63 wrote last
    for out in outs:
        assert np.array_equal(out.array[:, :48], want[:, :48])
        assert not out.written.reshape(4, 64, 4)[:, 48:].any()
    key = lambda r: sorted((f.workgroup, f.lane, f.details["degree"]) for f in r.findings_of("lds-bank-conflict"))
    assert key(runs[0]) == key(runs[1]) and len(key(runs[0])) == 8     # a store and a load per workgroup


def test_a_batched_out_of_bounds_lds_access_names_the_first_workgroup_and_lane():
    """The uniform path checks one workgroup's lanes: the fault names the same lane and address as
    a run of that workgroup alone."""
    from gfxsim import MemoryFault, launch

    def k(w):
        reg = w.shared("s", (64,), np.int32)
        w.lds_load(reg, (w.lane_id + 3) * 4, 4, "i32")                   # lanes 61-63 past the end
    msgs = []
    for b in (1, 4):
        with pytest.raises(MemoryFault, match=r"lane 61 accesses bytes \[256, 260\) outside \[0, 256\)") as e:
            launch(k, grid=4, arch="gfx942", batch=b)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


@pytest.mark.parametrize("nbytes,name", [(1, "i8"), (2, "f16"), (4, "f32"), (4, "i8"), (8, "i8"), (8, "i32"),
                                         (12, "i32"), (16, "i8"), (16, "f32")])
def test_row_access_equals_an_index_per_column(nbytes, name):
    """load_rows / store_rows (one pattern, every member's own row) move the same bytes, and mark
    the same bytes written, as load_values / store_values with one address per column, aligned or
    not, all lanes or some (lanes that write the same bytes included); None / False where they do
    not apply."""
    from gfxsim.machine.dtypes import load_rows, load_values, np_dtype, store_rows, store_values
    rng = np.random.default_rng(nbytes)
    members, lanes, stride = 3, 64, 1024
    for trial in range(20):
        step = nbytes if trial % 3 else 1                      # every third pattern unaligned
        idx = rng.integers(0, (stride - nbytes) // step, lanes) * step
        if trial % 4 == 1:
            idx[5] = idx[9]                                    # two lanes, one address
        flat = (idx[None, :] + stride * np.arange(members)[:, None]).ravel()
        raw = rng.integers(0, 256, members * stride).astype(np.uint8)
        got = load_rows(raw.reshape(members, stride), idx, nbytes, name)
        if got is not None:
            np.testing.assert_array_equal(got, load_values(raw, flat, nbytes, name))
        else:
            assert (idx % min(nbytes, 4)).any() or nbytes % 4
        n = nbytes // np_dtype(name).itemsize
        val = rng.integers(0, 256, (n * np_dtype(name).itemsize, members * lanes)).astype(np.uint8)
        val = np.ascontiguousarray(val.T).view(np_dtype(name)).reshape(members * lanes, n).T.copy()
        some = np.flatnonzero(rng.random(lanes) < 0.7) if trial % 2 else None
        a, b = raw.copy(), raw.copy()
        wa, wb = np.zeros(raw.size, bool), np.zeros(raw.size, bool)
        if store_rows(a.reshape(members, stride), wa.reshape(members, stride), idx, nbytes, val, some):
            cols = None if some is None else np.zeros(members * lanes, bool)
            if cols is not None:
                cols.reshape(members, lanes)[:, some] = True
            store_values(b, wb, flat, nbytes, val, cols)
            np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(wa, wb)             # the same bytes marked written
            assert wa.any()
        else:
            assert nbytes % 4 or (idx % 4).any()
            np.testing.assert_array_equal(a, raw)              # nothing written
            assert not wa.any()


def test_shared_written_bits_split_where_workgroups_part():
    """Written bits are kept once while every batched workgroup writes the same LDS bytes, and per
    workgroup from the first store that differs: a read of bytes only some workgroups wrote is an
    uninitialized-read in exactly those that did not, as when each workgroup runs alone."""
    from gfxsim import launch

    def k(w):
        x = w.workgroup_id[0]
        reg = w.shared("s", (3 * 64,), np.int32)
        w.lds_store(reg, w.lane_id * 4, w.lane_id)                     # the same in every workgroup
        w.lds_load(reg, w.lane_id * 4, 4, "i32")                       # all written: no finding
        with w.if_(w.lane_id < 8):
            w.lds_store(reg, (64 + w.lane_id + 64 * (x % 2)) * 4, w.lane_id)   # odd workgroups write further on
        w.lds_load(reg, (64 + w.lane_id % 8) * 4, 4, "i32")            # even ones wrote these
        w.lds_load(reg, (128 + w.lane_id % 8) * 4, 4, "i32")           # odd ones wrote these
    runs = [launch(k, grid=4, arch="gfx942", batch=b) for b in (1, 4)]
    key = lambda r: sorted((f.workgroup, f.lane, f.address) for f in r.findings_of("uninitialized-read"))
    assert key(runs[0]) == key(runs[1])
    assert sorted({(wg[0], addr // 4 // 64) for wg, _, addr in key(runs[1])}) == [(0, 2), (1, 1), (2, 2), (3, 1)]


def test_others_wrote_of_a_uniform_access_looks_at_one_member():
    """A uniform access against the shared state is answered from one member's look: the same
    answer as every member's, hit or miss, before and after the state splits."""
    from gfxsim.machine.lds_races import RaceTracker
    M, L = 4, 8
    t = RaceTracker(M, 256)
    rel = np.broadcast_to(np.arange(L) * 4, (M, L))
    act = np.ones((M, L), bool)
    t.track(rel, act, 4, 1, 0, True, True)                     # wave 1 writes bytes 0..31
    for wave, want in ((0, True), (1, False)):
        assert t.others_wrote(rel, act, 4, wave, 0, True) is t.others_wrote(rel, act, 4, wave, 0) is want
    far = np.broadcast_to(np.arange(L) * 4 + 64, (M, L))
    assert t.others_wrote(far, act, 4, 0, 0, True) is t.others_wrote(far, act, 4, 0, 0) is False
    part = np.array(rel)
    part[1] += 128                                              # members part: the state splits
    t.track(part, act, 4, 2, 0, True, False)
    assert t.split
    assert t.others_wrote(rel, act, 4, 0, 0, True) is t.others_wrote(rel, act, 4, 0, 0) is True


def _stale_offsets_kernel(w, out):
    """Two waves; lanes 0-31 store to LDS and read back another wave's words. The offset register
    of lanes 32-63 (outside EXEC at the store) holds a different value in every workgroup, as a
    compiled kernel's register keeps another tile's address."""
    g = w.workgroup_id[0]
    lane = w.lane_id
    lds = w.view(w.shared("buf", (128,), "u32"))
    off = w.select(lane < 32, lane + 32 * w.wave_id, lane + g)
    with w.if_(lane < 32):
        (lds + off).store(lane + 100 * w.wave_id)
    w.barrier()
    z = (lds + (lane % 32) + 32 * (1 - w.wave_id)).load() if w.wave_id < 2 else None
    with w.if_(lane < 32):
        w.view(out)[(g * 2 + w.wave_id) * 64 + lane].store(z)


def test_offsets_of_lanes_outside_exec_leave_a_batchs_lds_state_shared(monkeypatch):
    """A batch whose members store at the same offsets in their active lanes keeps one shared
    race state (it is not copied for every member: 0.2 GiB for a 512-workgroup decode), and gives
    what one workgroup at a time gives, the traced events' addresses (each member's own) too."""
    from gfxsim import Buffer, launch
    runs = {}
    for batch in (1, 4):
        if batch == 4:
            def shared_only(*a, **k):
                raise AssertionError("the race state was copied for every member")
            monkeypatch.setattr(RaceState, "repeated", shared_only)
        out = Buffer.empty("out", (4 * 2 * 64,), np.uint32)
        run = launch(_stale_offsets_kernel, grid=(4,), waves_per_group=2, args=(out,), batch=batch, trace=True)
        runs[batch] = (run, out.array.copy())
    (r1, o1), (r4, o4) = runs[1], runs[4]
    np.testing.assert_array_equal(o1.reshape(4, 2, 64)[:, :, :32], o4.reshape(4, 2, 64)[:, :, :32])
    assert [f.kind for f in r1.findings] == [f.kind for f in r4.findings] == []

    def addresses(run):
        return sorted((e.workgroup, e.wave, e.op, tuple(np.asarray(e.details["address"]).tolist()))
                      for e in run.trace.events if e.op.startswith("ds_"))
    got = addresses(r1)
    assert len(got) == 4 * 2 * 2 and got == addresses(r4)


@pytest.mark.parametrize("members", [1, 3])
def test_tracker_shortcuts_equal_the_full_look(members):
    """A tracker's answers where it takes a shortcut (one workgroup's one row; others_wrote answered
    from the waves that wrote in the epoch) equal the full look at the state: others_wrote against
    every member's bytes, track against a RaceState of every member, hits and state."""
    from gfxsim.machine.lds_races import RaceTracker
    rng = np.random.default_rng(7 + members)
    size, n_races, n_wrote = 64, 0, 0
    for trial in range(60):
        t, ref = RaceTracker(members, size), RaceState(members, size)
        epoch = 0
        for step in range(12):
            epoch += int(rng.random() < 0.2)
            nbytes = int(rng.choice(NBYTES))
            base = rng.integers(0, size - nbytes + 1, LANES).astype(np.int64)
            uniform = members == 1 or bool(rng.random() < 0.5)
            addr = np.tile(base, (members, 1)) if uniform else \
                rng.integers(0, size - nbytes + 1, (members, LANES)).astype(np.int64)
            on = rng.random(LANES) < 0.7
            act = np.tile(on, (members, 1)) if uniform else rng.random((members, LANES)) < 0.7
            wave, is_write = int(rng.integers(0, 3)), bool(rng.integers(2))
            at = addr[:, :, None] + np.arange(nbytes)
            want_wrote = bool(((ref.w_epoch[np.arange(members)[:, None, None], at] == epoch) &
                               (ref.w_wave[np.arange(members)[:, None, None], at] != wave) & act[:, :, None]).any())
            assert t.others_wrote(addr, act, nbytes, wave, epoch, uniform) is want_wrote, (trial, step)
            n_wrote += want_wrote
            got = t.track(addr, act, nbytes, wave, epoch, is_write, uniform)
            want = ref.track(addr, act, nbytes, wave, epoch, is_write)
            np.testing.assert_array_equal(np.stack(got), np.stack(want), err_msg=f"trial {trial} step {step}")
            n_races += int((want[0] >= 0).sum())
            if t.split or members == 1:
                for name in ("w_wave", "w_epoch", "r_mask", "r_epoch"):
                    np.testing.assert_array_equal(getattr(t.state, name), getattr(ref, name))
    assert n_races > 20 and n_wrote > 20


def set_conflicts(addr, active, nbytes, banks=32, bank_bytes=4, rule="gfx9"):
    """One row's (degree, cycles, phases used) from Python sets: the distinct dwords each phase's
    active lanes touch, counted per bank."""
    from gfxsim.machine.banks import phases
    ph = phases(nbytes, len(addr), rule)
    seen = {}
    for lane in np.flatnonzero(active):
        for k in range(max(1, nbytes // bank_bytes)):
            seen.setdefault(int(ph[lane]), set()).add(int(addr[lane]) // bank_bytes + k)
    degree = [max(np.bincount([d % banks for d in dws], minlength=banks)) for dws in seen.values()]
    return (max(degree), sum(degree), len(degree)) if degree else (0, 0, 0)


@pytest.mark.parametrize("rule", ["gfx9", "nvidia"])
def test_row_conflicts_count_the_distinct_dwords_of_each_phase(rule):
    """The row model finds each phase's distinct dwords by sorting (not np.unique): the same counts
    as sets of them, negative offsets from the first active lane included."""
    from gfxsim.machine.banks import _row_np_uncached
    rng = np.random.default_rng(11)
    for nbytes in NBYTES:
        for _ in range(60):
            addr, on = random_row(rng, nbytes), random_active(rng)
            if not on.any():
                continue
            rel = addr - (addr[np.flatnonzero(on)[0]] // 4) * 4
            assert _row_np_uncached(rel, on, nbytes, 32, 4, rule) == set_conflicts(rel, on, nbytes, rule=rule)
            assert bank_conflicts(addr, on, nbytes, rule=rule) == set_conflicts(addr, on, nbytes, rule=rule)


@pytest.mark.parametrize("per_member", [False, True])
def test_others_wrote_compiled_equals_the_numpy_look(per_member):
    """others_wrote's compiled pass (first hit, then stop) answers as the members x lanes x bytes
    look in numpy: random states of several waves and epochs, partial EXEC, inactive lanes'
    addresses anywhere (negative, past the end), active ones near both ends (clipped alike)."""
    from gfxsim.machine.lds_races import others_wrote_np, others_wrote_rows
    rng = np.random.default_rng(11)
    size, members = 96, 5
    counts = [0, 0]
    for trial in range(400):
        rows = members if per_member else 1
        w_wave = rng.integers(-1, 4, (rows, size)).astype(np.int32)
        w_epoch = rng.integers(-1, 3, (rows, size)).astype(np.int64)
        nbytes = int(rng.choice(NBYTES))
        rel = rng.integers(-8, size + 8, (members, LANES)).astype(np.int64)
        act = rng.random((members, LANES)) < rng.choice([0.0, 0.05, 0.3, 1.0])
        wave, epoch = int(rng.integers(0, 4)), int(rng.integers(0, 3))
        want = others_wrote_np(rel, act, nbytes, wave, epoch, w_wave, w_epoch, per_member)
        assert others_wrote_rows(rel, act, nbytes, wave, epoch, w_wave, w_epoch, per_member) is want, trial
        counts[want] += 1
    assert min(counts) > 40
