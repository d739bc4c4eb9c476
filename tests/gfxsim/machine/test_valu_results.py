"""Where a VALU statement's result lands, without copies the general code made: ``x op= y``
takes the statement's own result array (valu.ADOPT_RESULTS), and a value written under a
partial EXEC holds its written bits as a read-only view of one copy of EXEC
(wave.EXEC_ROWS_SHARED). Held to the copying code: the same bits, written bits, registers,
findings and instruction count, on several batched members under full and partial EXEC."""
import numpy as np
import pytest

from gfxsim import launch
from gfxsim.machine import valu as valu_mod
from gfxsim.machine import wave as wave_mod
from gfxsim.machine.vgpr import VGPRs


def _updates(w, out):
    """In-place updates (+=, -=, *=) of ints and floats, special values included, under full EXEC,
    a partial one and a nested one, each result recorded as it stands; then reads that see the
    written bits (a value made under a partial EXEC read under the full one)."""
    lane = w.lane_id + w.workgroup_id[0] * 3 if w.members > 1 else w.lane_id
    x = (lane * 7 - 100).to("f32") * 0.37
    y = w.cat(*[(lane * k - 50).to("f32") for k in (3, 5)])
    i = lane * 11 - 300
    special = w.select(lane.eq(5), float("inf"), w.select(lane.eq(9), float("nan"), x))
    vals = [x, y[0], i, special]
    for v in vals:
        out.append(v)
    acc = w.zeros("f32", 2)
    acc += y
    out.append(acc)
    acc -= w.cat(x, x)
    out.append(acc)
    acc *= 1.5
    out.append(acc)
    s = special * 1.0
    s += x
    out.append(s)
    k = i + 0
    k *= 3
    k -= i
    out.append(k)
    with w.if_(lane % 3 > 0):
        acc += y                                   # partial EXEC: a masked write, no adoption
        out.append(acc)
        part = x * 2.0                             # written bits from the partial EXEC
        out.append(part)
        with w.if_(lane % 2 > 0):
            k += 7
            out.append(k)
            inner = part + 1.0
            out.append(inner)
    out.append(part + 1.0)                         # reads never-written lanes: a finding per member
    out.append(acc)
    for f in (abs, lambda v: w.exp(v * 0.01), w.rcp, lambda v: w.sqrt(abs(v)),
              lambda v: w.select(lane < 7, v, special), lambda v: w.select(lane < 7, 2.5, v)):
        out.append(f(special))
        with w.if_(lane % 4 > 0):
            out.append(f(x))
    keep = y * 1.0
    keep2 = keep
    keep2 += x                                     # the old array of keep2 is keep's: keep must stay
    out.append(keep)
    out.append(keep2)


def _run(**kw):
    out = []
    run = launch(lambda w: _updates(w, out), grid=(3,), batch=3, arch="gfx936", trace=False, **kw)
    rows = [(v.dtype, v.regs, v.val.copy(), None if v.valid is None else np.array(v.valid)) for v in out]
    return rows, run


def _same(a, b):
    for (da, ra, va, wa), (db, rb, vb, wb) in zip(a, b):
        assert (da, ra) == (db, rb)
        assert va.dtype == vb.dtype and va.tobytes() == vb.tobytes()
        assert (wa is None) == (wb is None)
        if wa is not None:
            assert np.array_equal(wa, wb)


@pytest.mark.parametrize("provenance", [False, True])
def test_results_taken_and_shared_exec_bits_give_what_copies_give(provenance, monkeypatch):
    fast, run_f = _run(provenance=provenance)
    with monkeypatch.context() as m:
        m.setattr(valu_mod, "ADOPT_RESULTS", False)
        m.setattr(wave_mod, "EXEC_ROWS_SHARED", False)
        slow, run_s = _run(provenance=provenance)
    assert len(fast) == len(slow) == 29
    _same(fast, slow)
    assert [f.kind for f in run_f.findings] == [f.kind for f in run_s.findings]
    assert [str(f) for f in run_f.findings] == [str(f) for f in run_s.findings]
    assert sum(f.kind == "uninitialized-read" for f in run_f.findings) >= 1
    assert run_f.trace.n_events == run_s.trace.n_events > 0


def test_an_updated_value_owns_its_array(monkeypatch):
    """x += y leaves y and every other value as they were, also where x's new array was taken
    from the statement, and a later masked write into x changes x alone."""
    seen = {}

    def kernel(w):
        y = w.lane_id.to("f32") * 2.0
        x = w.zeros("f32")
        x += y
        seen["after"] = (x.val.copy(), y.val.copy())
        assert not np.may_share_memory(x.val, y.val)
        with w.if_(w.lane_id < 10):
            x += 1.0
        seen["masked"] = (x.val.copy(), y.val.copy())
        z = w.zeros("f32")
        z[:] = y                                   # a write of the caller's value: copied
        with w.if_(w.lane_id < 10):
            z += 1.0
            seen["exec"] = ((y * 2.0).valid, w.exec)
        seen["set"] = (z.val.copy(), y.val.copy())

    launch(kernel, grid=(2,), batch=2, arch="gfx936", trace=False, provenance=False)
    x0, y0 = seen["after"]
    x1, y1 = seen["masked"]
    assert np.array_equal(x0, y0) and np.array_equal(y1, y0)
    lanes = np.tile(np.arange(64), 2)
    assert np.array_equal(x1[0], np.where(lanes < 10, y0[0] + 1, y0[0]))
    z, y2 = seen["set"]
    assert np.array_equal(y2, y0) and np.array_equal(z, x1)
    valid, exec_ = seen["exec"]
    assert valid is not None and not np.may_share_memory(valid, exec_)     # not EXEC's own array


def test_a_result_handed_back_as_an_operand_is_copied():
    """_result keeps the array an ISA function made, converts another type, and copies one that is
    (a view of) an operand's."""
    x = np.arange(8, dtype=np.float32).reshape(1, 8)
    made = x * 2
    assert valu_mod._result(made, np.dtype(np.float32), x) is made
    assert valu_mod._result(made, np.dtype(np.float64), x).dtype == np.float64
    back = valu_mod._result(x, np.dtype(np.float32), x)
    assert back is not x and not np.may_share_memory(back, x) and np.array_equal(back, x)
    assert not np.may_share_memory(valu_mod._result(x[:, 2:], np.dtype(np.float32), x), x)


def test_a_result_that_is_an_operand_is_copied():
    """_own refuses a result array that is (a view of) an operand's or that cannot be written."""
    a = VGPRs(None, np.arange(8, dtype=np.float32).reshape(1, 8), "f32", regs=(0, 1))
    b = VGPRs(None, np.ones((1, 8), np.float32), "f32", regs=(1, 1))
    assert valu_mod._own(VGPRs(None, np.zeros((1, 8), np.float32), "f32", regs=(2, 1)), a, b)
    assert not valu_mod._own(VGPRs(None, a.val[:, :], "f32", regs=(2, 1)), a, b)
    assert not valu_mod._own(VGPRs(None, b.val, "f32", regs=(2, 1)), 3.0, b)
    ro = np.zeros((1, 8), np.float32)
    ro.flags.writeable = False
    assert not valu_mod._own(VGPRs(None, ro, "f32", regs=(2, 1)), a, b)


def test_written_bits_of_a_partial_exec_are_read_only():
    """The shared view of EXEC cannot be written into: a unit that tried would raise, not change
    another value's written bits."""
    got = {}

    def kernel(w):
        with w.if_(w.lane_id < 5):
            got["v"] = w.lane_id * 3

    launch(kernel, grid=(1,), arch="gfx936", trace=False, provenance=False)
    valid = got["v"].valid
    assert valid is not None and valid.shape == (4, 64)
    assert np.array_equal(valid, np.broadcast_to(np.arange(64) < 5, (4, 64)))
    with pytest.raises(ValueError):
        valid[0, 0] = True
