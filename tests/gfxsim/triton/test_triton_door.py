"""gfxsim.triton.run: a @triton.jit kernel specialised, compiled for gfx942 and run on the asm
front end, as kernel[grid](...) would run it on a GPU."""
import numpy as np
import pytest

from support.triton_small import need_triton

need_triton()

from gfxsim import triton as gt  # noqa: E402
from gfxsim.triton import compile as tc  # noqa: E402
from gfxsim.triton.door import compile_for, hidden_pointers  # noqa: E402
from support import triton_small as ks  # noqa: E402


def test_vector_add_matches_numpy_with_outputs_by_parameter_name():
    n = 1000
    x = np.arange(n, dtype=np.float32)
    y = np.full(n, 0.5, np.float32)
    out, run, k = gt.run(ks.add, (4,), x, y, np.zeros(n, np.float32), n, BLOCK=256)
    assert list(out) == ["x_ptr", "y_ptr", "out_ptr"]
    np.testing.assert_array_equal(out["out_ptr"], x + y)
    assert run.findings == []
    # the launch's specialisation: pointer_range=32 makes every access a MUBUF buffer op
    mns = {i.mnemonic for i in k.instructions}
    assert "buffer_load_dword" in mns and "buffer_store_dword" in mns
    assert not any(m.startswith("global_") for m in mns)
    # block = num_warps x 64 work-items
    assert run.lane_instructions and tuple(run.grid)[:1] == (4,)


def test_plain_form_uses_global_memory_instructions():
    n = 300
    x = np.arange(n, dtype=np.float32)
    out, run, k = gt.run(ks.add, (2,), x, x, np.zeros(n, np.float32), n, BLOCK=256, plain=True)
    np.testing.assert_array_equal(out["out_ptr"], 2 * x)
    mns = {i.mnemonic for i in k.instructions}
    assert "global_load_dword" in mns and not any(m.startswith("buffer_") for m in mns)


def test_arguments_are_named_after_the_jit_signature_without_constants():
    x = np.zeros(256, np.float32)
    _, _, compiled = compile_for(ks.add, (x, x, x, 256), {"BLOCK": 256})
    kernel = gt.door.load(compiled)
    names = [a.name for a in kernel.program.abi.args]
    assert names[:4] == ["x_ptr", "y_ptr", "out_ptr", "n"]
    assert names[4:] == list(hidden_pointers(kernel, compiled)) == ["global_scratch", "profile_scratch"]
    # n == 1 is a constant to Triton's binder: the compiled kernel has no n
    _, _, one = compile_for(ks.add, (x, x, x, 1), {"BLOCK": 256})
    assert "n" not in one.runtime and one.asm != compiled.asm


def test_a_read_past_the_tensor_is_a_finding_naming_the_triton_line_and_the_masked_one_is_silent():
    rows, cols = 4, 48
    x = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)
    out, run, _ = gt.run(ks.row_sum, (rows,), x, np.zeros(rows, np.float32), cols, BLOCK=64)
    np.testing.assert_allclose(out["out_ptr"], x.sum(1))
    assert run.findings == []
    out, run, _ = gt.run(ks.row_sum_unmasked, (rows,), x, np.zeros(rows, np.float32), cols, BLOCK=64)
    over = [f for f in run.findings if f.kind == "buffer-out-of-range"]
    assert over, run.findings
    f = over[0]
    assert f.details["buffer"] == "x_ptr" and f.details["reason"] == "buffer"
    line = next(i for i, t in enumerate(open(ks.__file__).read().splitlines(), 1)
                if "x = tl.load(x_ptr + row * cols + offs)" in t)
    assert f.source.endswith(f"triton_small.py:{line}"), f.source


def test_dynamic_lds_comes_from_the_metadata():
    R, C = 32, 64
    x = np.arange(R * C, dtype=np.float32).reshape(R, C)
    fn, _, compiled = compile_for(ks.transpose, (x, np.zeros((C, R), np.float32)), {"R": R, "C": C})
    assert compiled.metadata["shared"] > 0
    assert gt.door.load(compiled).program.abi.lds_bytes == 0         # the descriptor leaves it to the launch
    out, run, _ = gt.run(ks.transpose, (1,), x, np.zeros((C, R), np.float32), R=R, C=C)
    np.testing.assert_array_equal(out["out_ptr"], x.T)


def test_compiled_kernels_are_cached_by_source_and_specialisation(monkeypatch, tmp_path):
    monkeypatch.setenv("GFXSIM_CACHE_DIR", str(tmp_path))
    tc.clear()
    x = np.zeros(512, np.float32)
    first = compile_for(ks.add, (x, x, x, 512), {"BLOCK": 128})[2]
    assert first.asm.is_relative_to(tmp_path)
    calls = []
    real = tc._compile
    monkeypatch.setattr(tc, "_compile", lambda *a: calls.append(a) or real(*a))
    assert compile_for(ks.add, (x, x, x, 512), {"BLOCK": 128})[2] is first          # in memory
    tc.clear()
    assert compile_for(ks.add, (x, x, x, 512), {"BLOCK": 128})[2].asm == first.asm   # from disk
    assert calls == []
    compile_for(ks.add, (x, x, x, 512), {"BLOCK": 64})                                 # another constant
    compile_for(ks.add, (x, x, x, 500), {"BLOCK": 128})                                # n not divisible by 16
    assert len(calls) == 2
    tc.clear()


def test_fp8_and_bf16_arrays_pass_as_their_triton_types():
    import ml_dtypes
    n = 256
    for dt in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2fnuz):
        x = np.linspace(-2, 2, n).astype(dt)
        out, run, _ = gt.run(ks.widen, (1,), x, np.zeros(n, np.float32), n, BLOCK=256)
        assert out["x_ptr"].dtype == np.dtype(dt)
        np.testing.assert_array_equal(out["out_ptr"], x.astype(np.float32) * 2)


def test_a_kernel_triton_cannot_compile_is_a_gfxsim_error_naming_it():
    import ml_dtypes

    from gfxsim.triton.compile import TritonCompileError
    x = np.zeros(64, ml_dtypes.float8_e4m3fnuz)
    with pytest.raises(TritonCompileError, match="add"):
        gt.run(ks.add, (1,), x, x, x, 64, BLOCK=64)


def test_missing_triton_says_how_to_install_it(monkeypatch):
    import sys

    from gfxsim.errors import GfxSimError
    from gfxsim.triton.toolchain import TritonMissing
    monkeypatch.setitem(sys.modules, "triton", None)
    with pytest.raises(TritonMissing, match=r"pip install 'gfxsim\[triton\]'") as e:
        gt.run(ks.add, (1,), np.zeros(4, np.float32))
    assert isinstance(e.value, GfxSimError)


def test_bad_arguments_name_the_parameters():
    from gfxsim.errors import ArgumentError
    x = np.zeros(4, np.float32)
    with pytest.raises(ArgumentError, match="parameter n not given"):
        gt.run(ks.add, (1,), x, x, x, BLOCK=64)
    with pytest.raises(ArgumentError, match="no parameter NOPE"):
        gt.run(ks.add, (1,), x, x, x, 4, BLOCK=64, NOPE=1)


def test_triton_exp2_is_the_bare_v_exp_f32_and_flushes_denormal_results():
    x = np.linspace(-140, -110, 256).astype(np.float32)
    out, run, k = gt.run(ks.exp2, (1,), x, np.zeros_like(x), BLOCK=256)
    assert "v_exp_f32_e32" in {i.mnemonic for i in k.instructions}
    got = out["out_ptr"]
    assert (got[x < -126] == 0).all()
    np.testing.assert_allclose(got[x >= -126], np.exp2(x[x >= -126].astype(np.float64)), rtol=1e-7)


def test_a_cross_wave_reduction_of_replicated_data_is_no_race():
    # 128 columns over 4 waves: waves 2-3 hold copies of waves 0-1's data and store the same partials
    from support.triton_small import row_sum
    x = np.arange(3 * 100, dtype=np.float32).reshape(3, 100)
    out, run, k = gt.run(row_sum, (3,), x, np.zeros(3, np.float32), 100, BLOCK=128)
    assert any(i.mnemonic.startswith("ds_write") for i in k.instructions)
    np.testing.assert_allclose(out["out_ptr"], x.sum(1))
    assert run.findings == []


def test_triton_fp8_downcasts_saturate_through_mode_fp16_ovfl():
    import ml_dtypes
    x = np.array([1.0, -3.5, 239.0, 300.0, -1000.0, 1e6, np.nan, 0.0] * 32, np.float32)
    out, run, k = gt.run(ks.to_fp8, (1,), x, np.zeros(256, ml_dtypes.float8_e4m3fnuz), 256, BLOCK=256)
    assert any(i.mnemonic == "s_setreg_imm32_b32" for i in k.instructions)
    got = out["y_ptr"].astype(np.float32)
    want = np.where(np.isfinite(x) & (np.abs(x) > 240), np.sign(x) * 240, x.astype(ml_dtypes.float8_e4m3fnuz)
                    .astype(np.float32))
    np.testing.assert_array_equal(got, want)


def test_batched_programs_with_replicated_reductions_equal_one_at_a_time():
    from support.triton_small import row_sum
    x = np.arange(6 * 100, dtype=np.float32).reshape(6, 100)
    x[::2] = 3.0                                  # members whose duplicate stores differ from the others'
    outs = [gt.run(row_sum, (6,), x, np.zeros(6, np.float32), 100, BLOCK=128, batch=b) for b in (1, 6)]
    for out, run, _ in outs:
        np.testing.assert_allclose(out["out_ptr"], x.sum(1))
        assert run.findings == []


def test_what_the_front_end_cannot_run_is_listed_before_anything_runs(monkeypatch):
    from gfxsim.asm import semantics
    from gfxsim.asm.run import AsmError
    monkeypatch.delitem(semantics.OPS, "v_add_f32")
    x = np.zeros(256, np.float32)
    with pytest.raises(AsmError, match=r"cannot run on the asm front end: .*v_add_f32"):
        gt.run(ks.add, (1,), x, x, x, 256, BLOCK=256)


def test_trace_events_name_the_assembly_and_the_triton_line():
    x = np.zeros(256, np.float32)
    _, run, _ = gt.run(ks.add, (1,), x, x, x, 256, BLOCK=256, trace=True)
    lines = open(ks.__file__).read().splitlines()
    loads = [e.source for e in run.trace.events if "buffer_load" in str(e.op)]
    assert loads and all(" <- triton_small.py:" in s for s in loads)
    named = {lines[int(s.rsplit(":", 1)[1]) - 1].strip() for s in loads}
    assert named == {"x = tl.load(x_ptr + offs, mask=m)", "y = tl.load(y_ptr + offs, mask=m)"}


@pytest.mark.parametrize("neg", [True, False])
def test_scalars_take_their_triton_types_bytes(neg):
    x = np.arange(64, dtype=np.float32)
    out, _, k = gt.run(ks.scaled, (1,), x, np.zeros_like(x), neg, np.float64(0.5), 4294967296 + 3, BLOCK=64)
    sizes = {a.name: a.size for a in k.program.abi.args}
    assert (sizes["neg"], sizes["h"], sizes["big"]) == (1, 4, 8)
    np.testing.assert_array_equal(out["y_ptr"], (-x if neg else x) * 0.5 + 3)


def test_a_grid_callable_defaults_and_a_none_pointer_as_triton_takes_them():
    import triton
    n = 300
    x, b = np.arange(n, dtype=np.float32), np.full(n, 0.25, np.float32)
    grid = lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),)
    out, run, k = gt.run(ks.maybe_bias, grid, x, b, np.zeros(n, np.float32), n)
    np.testing.assert_array_equal(out["y_ptr"], x + b)
    assert tuple(run.grid)[0] == 3                      # BLOCK's default, 128
    out, run, k = gt.run(ks.maybe_bias, grid, x, None, np.zeros(n, np.float32), n)
    np.testing.assert_array_equal(out["y_ptr"], x)
    assert "b_ptr" not in [a.name for a in k.program.abi.args]       # None: a constant to Triton


def test_hidden_pointers_are_named_by_count_and_more_is_an_error():
    import dataclasses

    from gfxsim.asm.cache import parse_cached
    from gfxsim.errors import ArgumentError
    x = np.zeros(256, np.float32)
    _, _, compiled = compile_for(ks.add, (x, x, x, 256), {"BLOCK": 256})
    kernel = parse_cached(compiled.asm).kernel(compiled.name)
    assert hidden_pointers(kernel, compiled) == ("global_scratch", "profile_scratch")
    fewer = dataclasses.replace(compiled, runtime=compiled.runtime + ("global_scratch",))
    assert hidden_pointers(kernel, fewer) == ("global_scratch",)        # a triton appending one pointer
    with pytest.raises(ArgumentError, match="appends at most the pointers global_scratch, profile_scratch"):
        hidden_pointers(kernel, dataclasses.replace(compiled, runtime=compiled.runtime[:1]))
