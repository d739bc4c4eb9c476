"""Each finding fires on a minimal kernel with the defect and stays silent on the corrected one."""

import numpy as np
import pytest

from gfxsim import Buffer, launch
from gfxsim.arch.kslots import format_token_set

from support.pv_tile import MMAC, ROW, TOK, pv_tile, run_pv  # noqa: F401


def test_seed_16_byte_load_reports_the_interleaved_token_sets():
    run, W, V, out = run_pv()
    sets = [(format_token_set(m.token_set("A")), format_token_set(m.token_set("B"))) for m in run.mmacs()]
    assert sets == [("{0-7,16-23,32-39,48-55}",) * 2, ("{8-15,24-31,40-47,56-63}",) * 2]
    assert list(run.mmacs()[0].tokens("B")) == [16 * (k // 8) + k % 8 for k in range(32)]
    assert run.findings == []
    # and the numbers are the fragment-grouped INT8 PV computed independently in numpy
    groups = [np.array([16 * r + 8 * j + b for r in range(4) for b in range(8)]) for j in range(2)]
    ref = np.zeros((16, 16), np.float64)
    for g in groups:
        amax = np.abs(W[:, g]).max(axis=1, keepdims=True).astype(np.float32)
        wq = np.clip(np.rint(W[:, g] * (np.float32(127.0) / amax)), -127, 127)
        ref += (wq @ V[:, g].T.astype(np.float64)) * (amax * np.float32(1 / 127))
    got = np.zeros((16, 16))
    lane = np.arange(64)
    for i in range(4):     # gfx936 jump layout: lane (rowid, lane16id) reg i = O[lane16id][rowid + 4i]
        got[lane % 16, lane // 16 + 4 * i] = out[lane, i]
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-5)


def test_seed_contiguous_scales_are_a_scale_group_finding_per_mmac():
    run, *_ = run_pv("contiguous")
    f = run.findings_of("scale-group-mismatch")
    assert [x.instruction for x in f] == [m.index for m in run.mmacs()]
    assert f[0].details["foreign"] == list(range(32, 40)) + list(range(48, 56))
    assert f[1].details["foreign"] == list(range(8, 16)) + list(range(24, 32))
    assert f[0].details["scale_over"] == list(range(32)) and len(f[0].details["lanes"]) == 64
    assert "took their scale from another group {32-39,48-55}" in f[0].message


def test_seed_8_byte_load_reports_tokens_never_consumed():
    run, *_ = run_pv(load_bytes=8)
    cov = run.findings_of("token-coverage")
    assert len(cov) == 1 and cov[0].details["never"] == [t for t in range(64) if (t % 16) >= 8]
    assert run.findings_of("ab-kslot-mismatch")          # A brought tokens 8-15.., B 0-7..
    assert not run_pv(load_bytes=16)[0].findings_of("token-coverage")


@pytest.mark.parametrize("barrier_at", [None, 0, 1, 2])
def test_lds_race_reported_exactly_when_no_barrier_separates(barrier_at):
    """wave 0 writes LDS, wave 1 reads it; the barrier sits before the write (0), between (1),
    after the read (2) or nowhere. Only placement 1 orders them."""
    def k(w):
        reg = w.shared("x", (64,), np.float32)
        for step in range(3):
            if step == barrier_at:
                w.barrier()
            if step == 0 and w.wave_id == 0:
                w.lds_store(reg, w.lane_id * 4, w.lane_id.to("f32"))
            if step == 1 and w.wave_id == 1:
                w.lds_load(reg, w.lane_id * 4, 4, "f32")
    run = launch(k, grid=1, waves_per_group=2, arch="gfx942")
    races = run.findings_of("lds-race")
    assert bool(races) == (barrier_at != 1)
    if races:
        assert races[0].wave == 1 and races[0].details["other_wave"] == 0 and races[0].address is not None


def test_lds_race_write_after_read():
    def k(w, sync):
        reg = w.shared("x", (64,), np.float32)
        if w.wave_id == 0:
            w.lds_store(reg, w.lane_id * 4, w.lane_id.to("f32"))
        w.barrier()
        if w.wave_id == 1:
            w.lds_load(reg, w.lane_id * 4, 4, "f32")
        if sync:
            w.barrier()
        if w.wave_id == 0:
            w.lds_store(reg, w.lane_id * 4, w.lane_id.to("f32"))
    assert launch(k, 1, 2, arch="gfx942", args=(False,)).findings_of("lds-race")
    assert not launch(k, 1, 2, arch="gfx942", args=(True,)).findings_of("lds-race")


@pytest.mark.parametrize("same", [True, False])
def test_two_waves_storing_the_same_bytes_in_one_epoch_do_not_race(same):
    # data replicated across waves, every copy stored (a compiler's cross-wave reduction of a
    # tensor smaller than the workgroup): the order does not matter, so no race; different bytes do
    def k(w):
        reg = w.shared("x", (64,), np.float32)
        v = w.lane_id.to("f32") + (0.0 if same else w.wave_id * 1.0)
        w.lds_store(reg, w.lane_id * 4, v)
        w.barrier()
        w.lds_load(reg, w.lane_id * 4, 4, "f32")
    races = launch(k, 1, 2, arch="gfx942").findings_of("lds-race")
    assert bool(races) == (not same)


def test_duplicate_stores_in_some_batched_workgroups_only_equal_one_at_a_time():
    # one address pattern in every workgroup of the batch, a duplicate store in workgroup 0 only
    def k(w):
        reg = w.shared("x", (64,), np.float32)
        w.lds_store(reg, w.lane_id * 4, w.lane_id.to("f32"))
        w.barrier()
        if w.wave_id == 1:
            x = w.workgroup_id[0]                 # an int, or one per member in a batch
            w.lds_store(reg, w.lane_id * 4, w.lane_id.to("f32") + (x * 0.5 if isinstance(x, int) else x.to("f32") * 0.5))
        w.barrier()
        w.lds_load(reg, w.lane_id * 4, 4, "f32")
    runs = [launch(k, (3,), 2, arch="gfx942", batch=b) for b in (1, 3)]
    for r in runs:
        assert r.findings_of("lds-race") == []


def test_a_same_value_store_after_another_waves_read_still_races():
    def k(w):
        reg = w.shared("x", (64,), np.float32)
        w.lds_store(reg, w.lane_id * 4, w.lane_id.to("f32"))
        w.barrier()
        if w.wave_id == 1:
            w.lds_load(reg, w.lane_id * 4, 4, "f32")
        if w.wave_id == 0:
            w.lds_store(reg, w.lane_id * 4, w.lane_id.to("f32"))
    assert launch(k, 1, 2, arch="gfx942").findings_of("lds-race")


def test_uninitialized_register_and_lds_reads():
    def k(w, fixed):
        v = w.zeros("f32") if fixed else None
        with w.if_(w.lane_id < 32):
            v2 = w.lane_id.to("f32")
        v = v2 if not fixed else w.select(w.lane_id < 32, w.lane_id.to("f32"), v)
        v + 1.0                                             # read in all 64 lanes
        reg = w.shared("s", (64,), np.float32)
        if fixed:
            w.lds_store(reg, w.lane_id * 4, v)
        w.lds_load(reg, w.lane_id * 4, 4, "f32")
    bad = launch(k, arch="gfx942", args=(False,)).findings_of("uninitialized-read")
    assert len(bad) == 2 and "never-written v" in bad[0].message and bad[0].lane == 32
    assert "LDS" in bad[1].message
    assert not launch(k, arch="gfx942", args=(True,)).findings_of("uninitialized-read")


def test_uninitialized_global_output_read():
    out = Buffer.empty("out", (64,), np.float32)

    def k(w):
        w.global_load(out, w.lane_id * 4, 4, "f32")
    assert launch(k).findings_of("uninitialized-read")[0].details["count"] == 1


@pytest.mark.parametrize("nbytes,stride,degree", [(4, 4, 1), (4, 128, 32), (4, 8, 2), (4, 0, 1),
                                                   (8, 8, 1), (8, 16, 2), (16, 16, 1), (16, 32, 2), (16, 128, 8)])
def test_lds_bank_conflicts_gfx9_rules(nbytes, stride, degree):
    def k(w):
        reg = w.shared("b", (64 * 128 + 16,), np.uint8)
        w.lds_store(reg, w.lane_id * stride, w.zeros("u8", nbytes))
    run = launch(k, arch="gfx942")
    f = run.findings_of("lds-bank-conflict")
    if degree == 1:
        assert not f
    else:
        assert f[0].details["degree"] == degree and f[0].is_performance and not run.errors


def test_ab_kslot_mismatch_names_the_slots():
    tok = np.broadcast_to(np.arange(64), (16, 64))
    a = Buffer("a", np.ones((16, 64), np.int8), {"token": tok})
    b = Buffer("b", np.ones((16, 64), np.int8), {"token": tok})

    def k(w, shift):
        r, c = w.lane_id // 16, w.lane_id % 16
        av = w.global_load(a, c * 64 + r * 8, 8, "i8")
        bv = w.global_load(b, c * 64 + r * 8 + shift, 8, "i8")
        w.mma(MMAC, av, bv)
    f = launch(k, args=(8,)).findings_of("ab-kslot-mismatch")
    assert f and f[0].details["k_slot"] == 0 and f[0].details["a_values"] == [0] and f[0].details["b_values"] == [8]
    assert not launch(k, args=(0,)).findings


def test_reduction_identity_stays_the_aggregate():
    """max over tokens 0..3 has no single token, whatever order the elements arrive in."""
    tok = np.broadcast_to(np.arange(4), (64, 4))
    buf = Buffer("x", np.arange(256, dtype=np.float32).reshape(64, 4), {"token": tok})

    def k(w):
        v = w.global_load(buf, w.lane_id * 16, 16, "f32")
        m = v[0]
        for i in range(1, 4):
            m = w.max(m, v[i])
        return m.tags("token"), m.footprint("token")
    out = {}
    launch(lambda w: out.setdefault("r", k(w)))
    tags, fp = out["r"]
    assert np.all(tags == -1) and fp == {0, 1, 2, 3}


def test_batched_launch_keeps_workgroups_apart():
    """Four workgroups side by side: separate LDS (no race across them), per-workgroup early exit,
    per-workgroup findings with their own coordinates."""
    out = Buffer.empty("out", (4, 2, 64), np.float32)

    def k(w, out):
        x = w.workgroup_id[0]
        if w.end_program(x == 3 if isinstance(x, int) else x.eq(3)):   # workgroup 3 ends at once
            return
        reg = w.shared("s", (64,), np.float32)
        if w.wave_id == 0:
            w.lds_store(reg, w.lane_id * 4, w.lane_id.to("f32") + (x * 100).to("f32") if not isinstance(x, int)
                        else w.lane_id.to("f32") + float(x * 100))
        w.barrier()
        v = w.lds_load(reg, (63 - w.lane_id) * 4, 4, "f32")
        w.global_store(out, ((x * 2 + w.wave_id) * 64 + w.lane_id) * 4, v)
        if w.wave_id == 1:
            w.lds_load(w.shared("t", (64,), np.float32), w.lane_id * 4, 4, "f32")   # never written
    runs = [launch(k, grid=4, waves_per_group=2, arch="gfx942", args=(out,), trace=False, batch=b) for b in (1, 4)]
    want = np.stack([np.stack([(63 - np.arange(64)) + 100.0 * x] * 2) for x in range(4)])
    assert np.array_equal(out.array[:3], want[:3]) and not out.written.reshape(4, -1)[3].any()
    for r in runs:
        assert not r.findings_of("lds-race")
        assert sorted(f.workgroup for f in r.findings_of("uninitialized-read")) == [(0, 0, 0), (1, 0, 0), (2, 0, 0)]


def test_b128_phases_pair_non_adjacent_lane_groups():
    """gfx9 serves ds_*_b128 in phases {0-3,20-23}, {4-7,16-19}, ...: lanes 0-3 and 20-23 hitting
    the same banks conflict even though every 8 consecutive lanes cover all 32 banks."""
    from gfxsim.machine.banks import phases
    ph = phases(16)
    assert ph[0] == ph[3] == ph[20] == ph[23] and ph[4] == ph[16] and ph[8] == ph[28] and ph[12] == ph[24]
    assert ph[0] != ph[4] and ph[32] == ph[52] and ph[0] != ph[32]
    l = np.arange(64)
    # 8 consecutive lanes cover banks 0-31; lanes 20-23 reuse 0-3's banks at other addresses
    addr = 16 * (l % 4) + 64 * (((l // 4) + (l // 16)) % 2) + 1024 * (l // 8)

    def k(w):
        reg = w.shared("b", (8 * 1024 + 64,), np.uint8)
        w.lds_store(reg, w.from_lanes(addr, "i32"), w.zeros("u8", 16))
    f = launch(k, arch="gfx942").findings_of("lds-bank-conflict")
    assert f and f[0].details["degree"] == 2
