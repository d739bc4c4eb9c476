"""The per-statement path every kernel takes thousands of times: literal operands (their arrays
made once per number, type and width), ``w.if_`` (a scope object; ``if_(True)`` leaves EXEC as it
is) and the stand-in mnemonics an event notes, held to what the general code gives."""
import numpy as np
import pytest

from gfxsim import launch
from gfxsim.machine import wave as wave_mod


def run1(kernel, **kw):
    out = {}
    run = launch(lambda w: out.setdefault("r", kernel(w)), grid=1, arch="gfx936", args=(), **kw)
    return out.get("r"), run


def _uncached(monkeypatch):
    """Every int literal's array made afresh, as before the cache."""
    monkeypatch.setattr(wave_mod, "_literal", wave_mod._literal_array)


LITERALS = [0, 1, -1, 3, 16, 127, -128, 255, 2 ** 15, 2 ** 31 - 1, -(2 ** 31)]


def _literal_kernel(w):
    """Every literal of LITERALS with values of three types, one after another (the same number
    meets each type), as (result type, values, dtype, registers), or the error it raised."""
    xs = {"i32": w.lane_id * 37 - 900, "u32": (w.lane_id * 37 + 5).to("u32"), "f32": (w.lane_id * 37 - 900).to("f32")}
    out = []
    for c in LITERALS:
        for dtype, x in xs.items():
            for f in (lambda v: v + c, lambda v: c - v, lambda v: v * c, lambda v: w.max(v, c), lambda v: v < c):
                try:
                    r = f(x)
                except Exception as e:          # noqa: BLE001 -- the error itself is compared
                    out.append((type(e).__name__, str(e)))
                    continue
                out.append((type(r).__name__, np.array(r.mask if hasattr(r, "mask") else r.val).copy(),
                            getattr(r, "dtype", None), getattr(r, "regs", None)))
    return out


@pytest.mark.parametrize("provenance", [False, True])
def test_cached_literals_give_the_bits_types_registers_and_errors_of_fresh_ones(provenance, monkeypatch):
    """A number made an i32, a u32 and an f32 literal in turn: each its own array (a negative
    number is no u32: that error stays), the same bits, registers and instruction count as
    literals made afresh, from an empty cache and from a warm one."""
    wave_mod._LITERALS.clear()
    cached, run_c = run1(_literal_kernel, provenance=provenance)
    again, _ = run1(_literal_kernel, provenance=provenance)
    with monkeypatch.context() as m:
        _uncached(m)
        fresh, run_f = run1(_literal_kernel, provenance=provenance)
    assert len(cached) == len(fresh) == len(again) == len(LITERALS) * 15
    assert sum(len(c) == 2 for c in fresh) >= 5                      # the u32 literals of negative numbers
    for c, a, f in zip(cached, again, fresh):
        if len(f) == 2:
            assert c == a == f
            continue
        assert c[0] == a[0] == f[0] and c[2] == a[2] == f[2] and c[3] == a[3] == f[3]
        assert c[1].dtype == f[1].dtype and c[1].tobytes() == a[1].tobytes() == f[1].tobytes()
    assert run_c.lane_instructions == run_f.lane_instructions
    assert all(not a.flags.writeable and a.strides == (0, 0) for a in wave_mod._LITERALS.values())


def test_literals_of_other_types_are_not_taken_for_ints():
    """-0.0, 0.0, False and 0 are equal as dict keys; only Python ints are cached, so each keeps
    its own value (the sign of a float zero, a bool's type check)."""
    def kernel(w):
        x = w.const(-1.0, "f32")
        return [np.signbit((x * v).val[0, 0]) for v in (0, -0.0, 0.0, 0, False)]
    got, _ = run1(kernel)
    assert got == [True, False, True, True, True]


def test_an_int_literal_out_of_its_type_fails_the_same_with_the_cache(monkeypatch):
    def kernel(w):
        try:
            w.lane_id + 2 ** 40
        except Exception as e:          # noqa: BLE001 -- the error itself is compared
            return type(e), str(e)
    got, _ = run1(kernel)
    with monkeypatch.context() as m:
        _uncached(m)
        want, _ = run1(kernel)
    assert got == want and got[0] is not None
    assert not any(k[0] == 2 ** 40 for k in wave_mod._LITERALS)


def test_the_literal_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(wave_mod, "_LITERALS_MAX", 5)
    wave_mod._LITERALS.clear()

    def kernel(w):
        return [(w.lane_id + c).val[0, 1] for c in range(20)]
    got, _ = run1(kernel)
    assert got == [1 + c for c in range(20)]
    assert 0 < len(wave_mod._LITERALS) <= 5


def _exec_trace(w, conds):
    """EXEC as a lane mask before, inside and after nested ``w.if_`` scopes of ``conds``, an
    s_endpgm inside the innermost, and a scope left by an exception."""
    lane = w.lane_id
    seen = [w.exec.copy()]
    with w.if_(conds[0]) as c0:
        seen += [w.exec.copy(), c0.mask.copy(), w.exec_full]
        with w.if_(conds[1]) as c1:
            seen += [w.exec.copy(), c1.mask.copy(), w.exec_full]
            w.end_program(lane.eq(5))
            seen += [w.exec.copy(), w.exec_full]
        seen += [w.exec.copy(), w.exec_full]
    seen += [w.exec.copy(), w.exec_full]
    try:
        with w.if_(conds[1]):
            w.end_program(lane < 3)
            raise KeyError("inside")
    except KeyError:
        pass
    seen += [w.exec.copy(), w.exec_full]
    return seen


@pytest.mark.parametrize("conds", [(True, True), (True, "odd"), ("odd", True), (False, True), ("odd", "low")])
def test_if_scopes_narrow_and_restore_exec_as_a_mask_of_all_ones_does(conds):
    """``w.if_(True)`` leaves EXEC as it is instead of narrowing it by a mask of ones: inside, after
    an s_endpgm inside, after an exception and nested, EXEC and exec_full are what the same
    scopes give with the all-ones lane mask; each scope restores the EXEC it found."""
    def pick(w, c, literal):
        lane = w.lane_id
        if c == "odd":
            return (lane % 2).eq(1)
        if c == "low":
            return lane < 40
        return c if literal else np.full(64, c)
    got, _ = run1(lambda w: _exec_trace(w, [pick(w, c, True) for c in conds]))
    want, _ = run1(lambda w: _exec_trace(w, [pick(w, c, False) for c in conds]))
    assert len(got) == len(want)
    for g, x in zip(got, want):
        assert np.array_equal(g, x)
    before, inner_before = got[0], got[1]
    assert np.array_equal(got[-6], inner_before)             # the inner scope restored the outer's EXEC
    assert np.array_equal(got[-4], before) and np.array_equal(got[-2], before)     # ... and the outer, the first
    assert got[-1] is True


def test_a_bad_condition_fails_when_the_scope_is_entered():
    def kernel(w):
        scope = w.if_(3)
        try:
            with scope:
                pass
        except TypeError as e:
            return str(e)
    msg, _ = run1(kernel)
    assert "w.if_ needs a condition" in msg


def test_an_event_notes_the_stand_ins_its_instructions_use():
    def kernel(w):
        x = w.const(0.5, "f32")
        w.exp(x)                 # pseudo.exp_f32: v_mul_f32 then v_exp_f32 (a stand-in)
        w.rcp(x)                 # v_rcp_f32 (a stand-in)
        return x + x             # none
    _, run = run1(kernel)
    assert set(run.approximations) == {"v_exp_f32", "v_rcp_f32"}
