"""The transcendental units' denormal flushing, AMD's canonical NaN and v_div_scale_f32's zero
cases, as the ISA table computes them for both front ends (sources in gfxsim/isa/fp.py)."""
import numpy as np

from gfxsim import isa
from gfxsim.isa import fp

F32 = np.float32
DEN = F32(2.0 ** -140)


def _run(m, *a):
    r = isa.entry(m).fn(*(np.asarray(x, F32) for x in a))
    return r[0] if isinstance(r, tuple) else r


def _bits(x):
    return np.asarray(x, F32).view(np.uint32)


def test_v_exp_f32_flushes_a_denormal_result_to_plus_zero():
    got = _run("v_exp_f32", [-126, -126.5, -130, -149, -1000])
    assert got[0] == F32(2.0 ** -126) and list(_bits(got[1:])) == [0, 0, 0, 0]


def test_v_log_f32_reads_a_denormal_input_as_zero():
    got = _run("v_log_f32", [DEN, -DEN, F32(2.0 ** -126)])
    assert list(got) == [-np.inf, -np.inf, -126.0]


def test_v_rcp_f32_flushes_denormal_inputs_and_results():
    got = _run("v_rcp_f32", [DEN, -DEN, F32(2.0 ** 127), F32(-2.0 ** 126)])
    assert list(got[:2]) == [np.inf, -np.inf]
    assert _bits(got[2]) == 0 and got[3] == F32(-2.0 ** -126)     # 2^-127 is denormal: flushed; 2^-126 kept


def test_v_rsq_and_v_sqrt_f32_read_denormal_inputs_as_zero():
    assert list(_run("v_rsq_f32", [DEN, -DEN])) == [np.inf, -np.inf]
    sq = _run("v_sqrt_f32", [DEN, -DEN, F32(4.0)])
    assert list(_bits(sq)) == [0, 0x80000000, _bits(F32(2.0))]


def test_an_invalid_operation_returns_the_canonical_nan_and_an_input_nan_propagates():
    inf = F32(np.inf)
    assert _bits(_run("v_add_f32", [inf], [-inf]))[0] == 0x7FC00000
    assert _bits(_run("v_mul_f32", [inf], [0.0]))[0] == 0x7FC00000
    assert _bits(_run("v_fma_f32", [inf], [0.0], [1.0]))[0] == 0x7FC00000
    assert _bits(_run("v_sqrt_f32", [-1.0]))[0] == 0x7FC00000
    assert _bits(_run("v_rsq_f32", [-1.0]))[0] == 0x7FC00000
    assert _bits(_run("v_log_f32", [-1.0]))[0] == 0x7FC00000
    payload = np.array([0xFFC01234], np.uint32).view(F32)
    assert _bits(_run("v_add_f32", payload, [1.0]))[0] == 0xFFC01234          # a NaN input is kept


def test_v_div_scale_f32_with_a_zero_operand_is_nan_with_vcc_set():
    d, vcc = isa.entry("v_div_scale_f32").fn(*(np.asarray(x, F32) for x in ([0.0, 1.0, 3.0], [0.0, 0.0, 2.0],
                                                                           [5.0, 1.0, 3.0])))
    assert np.isnan(d[:2]).all() and list(vcc) == [True, True, False] and d[2] == F32(3.0)


def test_the_approximated_instructions_name_entries_of_the_table():
    assert set(fp.APPROXIMATED) <= set(isa.TABLE)
    assert all(v == "correctly rounded stand-in, hardware within 1 ulp" for v in fp.APPROXIMATED.values())


def test_a_run_lists_the_stand_ins_it_executed_on_both_front_ends():
    from gfxsim import launch
    from gfxsim.asm.run import kernel_from_text, run_asm

    def k(w):
        x = w.lane_id.to("f32")
        w.exp(x)                          # pseudo.exp_f32: v_mul_f32 then v_exp_f32
        x + x

    run = launch(k, arch="gfx942")
    assert run.approximations == {"v_exp_f32": "correctly rounded stand-in, hardware within 1 ulp"}
    assert "correctly rounded stand-ins (hardware within 1 ulp): v_exp_f32" in run.summary()
    asm = run_asm(kernel_from_text("v_cvt_f32_u32_e32 v1, v0\nv_rcp_f32_e32 v4, v1\nv_add_f32_e32 v5, v1, v1"),
                  args=())
    assert list(asm.approximations) == ["v_rcp_f32"]
    plain = run_asm(kernel_from_text("v_cvt_f32_u32_e32 v1, v0\nv_add_f32_e32 v5, v1, v1"), args=())
    assert plain.approximations == {}


def test_the_canonical_nan_is_found_anywhere_in_a_result():
    """canonical_nan looks for NaNs with one reduction (the minimum is NaN where any element is):
    a NaN that no input explains is made canonical wherever it lies, in f32 and f16, rows and
    columns; a result without NaNs comes back as it is."""
    for dt in (np.float32, np.float16):
        for shape, at in (((4, 96), (3, 77)), ((1, 64), (0, 63)), ((2, 5), (1, 0)), ((7,), (6,))):
            a = np.linspace(-3, 3, int(np.prod(shape))).astype(dt).reshape(shape)
            b = np.ones(shape, dt)
            a[at], b[at] = np.inf, 0                           # inf * 0: a made NaN, at one place only
            with np.errstate(all="ignore"):
                r = fp.canonical_nan(a * b, a, b)
            want = np.asarray(fp.CANONICAL_NAN[np.dtype(dt)], {np.float32: np.uint32, np.float16: np.uint16}[dt])
            assert r[at].view(want.dtype) == want
            assert np.array_equal(np.delete(r.ravel(), np.ravel_multi_index(at, shape)),
                                  np.delete((a * 1).ravel(), np.ravel_multi_index(at, shape)))
        clean = np.ones((3, 8), dt)
        assert fp.canonical_nan(clean, clean) is clean
        assert fp.canonical_nan(np.zeros((0, 4), dt)).shape == (0, 4)
