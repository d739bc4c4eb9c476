"""Your own HIP kernel through the door (gfxsim.hip.run): real HIP sources that include
<hip/hip_runtime.h>, compiled with Debian's clang, HIP headers and device libraries from a plain
folder, run on the asm front end with tags, checked before they run, cached by content."""
import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest
from support import need_toolchain

import gfxsim.hip as hip
from gfxsim.asm import cache
from gfxsim.asm.inspect import check_kernel
from gfxsim.asm.run import AsmError, kernel_from_text
from gfxsim.hip.build import BuildError
from gfxsim.hip.door import demangled
from gfxsim.hip.source import compile_source

SOURCES = Path(__file__).parent / "sources"
TAGS = {"p": {1: "token"}, "v": {1: "token"}, "s_tok": {0: "token"}}


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A plain folder holding the test kernels, the compile cache beside it."""
    need_toolchain("gfx942")
    monkeypatch.setenv("GFXSIM_CACHE_DIR", str(tmp_path / "cache"))
    d = tmp_path / "work"
    d.mkdir()
    for f in SOURCES.glob("*.hip"):
        shutil.copy(f, d)
    monkeypatch.chdir(d)
    return d


def pv_inputs(seed=0):
    rng = np.random.default_rng(seed)
    p = rng.integers(-20, 20, (16, 64), dtype=np.int8)
    v = rng.integers(-20, 20, (16, 64), dtype=np.int8)
    s = rng.uniform(0.5, 2, 64).astype(np.float32)
    return p, v, s


def pv_reference(p, v, s, contiguous=False):
    """Instruction j consumes tokens {16g + 8j + i}; its scale is the max of s over that set (or,
    contiguous, over 32j..32j+31)."""
    out = np.zeros((16, 16))
    for j in range(2):
        k = [t for t in range(64) if (t % 16) // 8 == j]
        group = list(range(32 * j, 32 * j + 32)) if contiguous else k
        out += float(s[group].max()) * (p[:, k].astype(np.int64) @ v[:, k].T.astype(np.int64))
    return out


def assert_close(out, ref):
    """Within fp32 rounding of the largest element (the kernel sums two scaled products in fp32)."""
    np.testing.assert_allclose(out.reshape(ref.shape), ref, rtol=0, atol=1e-6 * np.abs(ref).max())


@pytest.mark.parametrize("arch", ["gfx942", "gfx940"])
def test_a_hip_runtime_kernel_runs_from_a_plain_folder(folder, arch):
    x = np.arange(300, dtype=np.float32)
    out = np.zeros(300, np.float32)
    res, run, k = hip.run("scale.hip", "scale", 2, 64, arch=arch, out=out, x=x, s=0.5, count=300)
    assert k.name == "_Z5scalePfPKffi" and k.target.endswith(arch)      # compiled for it
    assert np.array_equal(res["out"], x * 0.5) and np.array_equal(res["x"], x)
    assert not out.any()                                   # the caller's array is copied, not written
    assert run.findings == [] and run.lane_instructions > 0
    assert run.replay().step() is not None                 # the Run steps as the twins' do


def test_tags_give_token_level_findings(folder):
    p, v, s = pv_inputs()
    for contiguous in (False, True):
        res, run, _ = hip.run("pv_scaled.hip", "pv_scaled", 1, 64, tags=TAGS,
                              defines=["CONTIGUOUS"] if contiguous else [], p=p, v=v, s_tok=s,
                              out=np.zeros(256, np.float32))
        assert_close(res["out"], pv_reference(p, v, s, contiguous))
        sets = sorted(sorted(m.token_set("B")) for m in run.mmacs())
        assert sets == [[t for t in range(64) if (t % 16) // 8 == j] for j in (0, 1)]
        kinds = {f.kind for f in run.findings}
        assert kinds == ({"scale-group-mismatch"} if contiguous else set()), run.findings
    untagged = hip.run("pv_scaled.hip", "pv_scaled", 1, 64, defines=["CONTIGUOUS"], p=p, v=v, s_tok=s,
                       out=np.zeros(256, np.float32)).run
    assert untagged.findings == []                          # without tags there is no token to check


def test_a_gfx936_kernel_runs_with_gfx936s_d_layout(folder):
    p, v, s = pv_inputs(1)
    res, run, _ = hip.run("pv_scaled.hip", "pv_scaled", 1, 64, arch="gfx936", tags=TAGS, p=p, v=v, s_tok=s,
                          out=np.zeros(256, np.float32))
    assert {m.op for m in run.mmacs()} == {"v_mmac_i32_16x16x32_i8"} and run.findings == []
    assert_close(res["out"], pv_reference(p, v, s))
    # the same .s (its __gfx936__ branch: jump-layout stores) on gfx942's D layout is wrong
    asm = compile_source("pv_scaled.hip", "gfx936").asm
    wrong = hip.run(asm, "pv_scaled", 1, 64, arch="gfx942", p=p, v=v, s_tok=s, out=np.zeros(256, np.float32))
    with pytest.raises(AssertionError):
        assert_close(wrong.outputs["out"], pv_reference(p, v, s))


def test_a_second_call_neither_compiles_nor_parses(folder, monkeypatch):
    calls = []
    real = cache.parse
    monkeypatch.setattr(cache, "parse", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    cache.clear()
    args = dict(out=np.zeros(64, np.float32), x=np.ones(64, np.float32), s=2.0, count=64)
    first = hip.run("scale.hip", "scale", 1, 64, **args)
    assert len(calls) == 1
    second = hip.run("scale.hip", "scale", 1, 64, **args)
    assert len(calls) == 1 and second.kernel is first.kernel        # and its decoded Program with it
    assert not compile_source("scale.hip").rebuilt
    Path("scale.hip").write_text(Path("scale.hip").read_text() + "\n// changed\n")
    assert compile_source("scale.hip").rebuilt
    hip.run("scale.hip", "scale", 1, 64, **args)
    assert len(calls) == 2


def test_run_on_sim_parses_a_project_once():
    need_toolchain("gfx942")
    from support import repo_project

    from gfxsim.hip.build import find_kernel
    first = find_kernel("qk_int8", "gfx942", project=repo_project())
    assert find_kernel("qk_int8", "gfx942", project=repo_project()) is first


def test_a_header_debians_hip_lacks_is_named(folder):
    Path("fp8.hip").write_text("#include <hip/hip_runtime.h>\n#include <hip/hip_fp8.h>\n"
                               "__global__ void k(float* o) { o[threadIdx.x] = 0; }\n")
    with pytest.raises(BuildError, match=r"fp8.hip includes <hip/hip_fp8.h>.*HIP 5\.2.* do not have it"):
        hip.run("fp8.hip", "k", 1, 64, o=np.zeros(64, np.float32))
    Path("own.hip").write_text('#include "mine.h"\n__global__ void k(float* o) {}\n')
    with pytest.raises(BuildError, match="own.hip includes <mine.h>.*--include DIR"):
        compile_source("own.hip")
    Path("inc").mkdir()
    Path("inc/mine.h").write_text("#define SCALE 3.0f\n")
    Path("own.hip").write_text('#include <hip/hip_runtime.h>\n#include "mine.h"\n'
                               "__global__ void k(float* o) { o[threadIdx.x] = SCALE; }\n")
    out = hip.run("own.hip", "k", 1, 64, include=["inc"], o=np.zeros(64, np.float32)).outputs["o"]
    assert (out == 3).all()
    Path("inc/mine.h").write_text("#define SCALE 4.0f\n")        # the header is part of the cache key
    out = hip.run("own.hip", "k", 1, 64, include=["inc"], o=np.zeros(64, np.float32)).outputs["o"]
    assert (out == 4).all()
    b = compile_source("own.hip", include=["inc"], flags=["-ffast-math"])
    assert b.rebuilt and "-ffast-math" in b.command


def test_check_lists_every_problem_before_anything_runs(folder):
    k = kernel_from_text("""
        v_qsad_pk_u16_u8 v[0:1], v[2:3], v4, v[6:7]
        v_mfma_f32_32x32x8_f16 v[0:15], v[0:1], v[2:3], 0
        v_mov_b32 v1, v0
    """, extra_descriptor={".amdhsa_system_sgpr_workgroup_info": 1}, vgprs=32)
    problems = check_kernel(k, "gfx936")
    assert [(p.kind, p.line is not None) for p in problems] == [
        ("instruction", True), ("matrix record", True), ("abi", False)], problems
    assert "v_qsad_pk_u16_u8" in problems[0].text
    assert "v_mfma_f32_32x32x8_f16 has no record on gfx936" in problems[1].text
    assert "workgroup info" in problems[2].text
    assert [p.kind for p in check_kernel(k, "gfx942")] == ["instruction", "abi"]     # gfx942 has the record
    # every ABI feature, not only the first the launch refuses
    two = kernel_from_text("v_mov_b32 v1, v0", args=[("out", "global_buffer", 8)], extra_descriptor={
        ".amdhsa_uses_dynamic_stack": 1, ".amdhsa_system_sgpr_workgroup_info": 1})
    meta = {**two.metadata, ".args": [*two.metadata[".args"],
                                      {".offset": 8, ".size": 8, ".value_kind": "hidden_new_thing"}]}
    abi = [p.text for p in check_kernel(dataclasses.replace(two, metadata=meta)) if p.kind == "abi"]
    # a dynamic stack runs (a per-lane stack is added); the workgroup info SGPR and an unknown hidden argument do not
    assert len(abi) == 2 and "workgroup info" in abi[0] and "hidden_new_thing" in abi[1], abi
    asm = Path("bad.s")
    asm.write_text(compile_source("scale.hip").asm.read_text().replace(
        "\ts_endpgm", "\tv_qsad_pk_u16_u8 v[0:1], v[2:3], v4, v[6:7]\n\ts_endpgm", 1))
    with pytest.raises(AsmError, match="cannot run on the asm front end for gfx942: instruction line .*v_qsad"):
        hip.run(asm, "scale", 1, 64, out=np.zeros(64, np.float32), x=np.ones(64, np.float32), s=1.0, count=64)


def test_entry_points_by_function_name():
    assert demangled("_Z5scalePfPKffi") == "scale"
    assert demangled("_ZN2ns4stepEPf") == "ns::step"
    assert demangled("plain_c") == "plain_c"


def test_null_pointers_and_dynamic_lds_are_passed_to_the_launch(folder):
    """None (a null pointer) and lds= (extern __shared__ bytes) go to run_asm as they are; a front
    end without dynamic LDS says so rather than run with none."""
    import inspect

    from gfxsim.asm.run import run_asm
    from gfxsim.errors import ArgumentError
    x, bias = np.arange(64, dtype=np.float32), np.full(64, 0.5, np.float32)
    if "dynamic_lds" not in inspect.signature(run_asm).parameters:
        with pytest.raises(ArgumentError, match="lds=256: this asm front end sizes LDS from the kernel descriptor"):
            hip.run("reverse.hip", "reverse", 1, 64, out=np.zeros(64, np.float32), x=x, bias=bias, lds=256)
        return
    res, run, _ = hip.run("reverse.hip", "reverse", 1, 64, lds=256, out=np.zeros(64, np.float32), x=x, bias=bias)
    assert np.array_equal(res["out"], (x + bias)[::-1]) and run.findings == []
    res, run, _ = hip.run("reverse.hip", "reverse", 1, 64, lds=256, out=np.zeros(64, np.float32), x=x, bias=None)
    assert np.array_equal(res["out"], x[::-1]) and "bias" not in res


def test_gfx90a_sources_compile_and_run_once_the_launch_sets_them_up(folder):
    """gfx90a (Debian's device libraries have its ISA-version file): compiled with hip_runtime.h,
    no call left unlinked; it runs where the launch sets up its user SGPRs, and otherwise the
    refusal names the ABI feature before anything runs."""
    b = compile_source("scale.hip", "gfx90a")
    text = b.asm.read_text()
    assert '.amdgcn_target "amdgcn-amd-amdhsa--gfx90a' in text and "s_swappc_b64" not in text
    args = dict(out=np.zeros(100, np.float32), x=np.arange(100, dtype=np.float32), s=2.0, count=100)
    if check_kernel(hip.door.load("scale.hip", "gfx90a")[0].kernel("_Z5scalePfPKffi"), "gfx90a"):
        with pytest.raises(AsmError, match="cannot run on the asm front end for gfx90a: abi: "):
            hip.run("scale.hip", "scale", 2, 64, arch="gfx90a", **args)
        return
    res, run, _ = hip.run("scale.hip", "scale", 2, 64, arch="gfx90a", **args)
    assert np.array_equal(res["out"], args["x"] * 2) and run.findings == []


def test_the_isa_version_rule_is_debians():
    """__oclc_ISA_version = major*1000 + minor*100 + stepping, as in each of Debian's libraries
    (read back with llvm-dis), so the gfx941/gfx942 ones built here follow the same rule."""
    import re
    import subprocess

    from gfxsim.hip.devicelibs import debian_bitcode, isa_version
    from gfxsim.hip.toolchain import ToolchainError
    dis = shutil.which("llvm-dis-19")
    try:
        libs = sorted(debian_bitcode().glob("oclc_isa_version_9*.bc"))
    except ToolchainError as e:
        pytest.skip(str(e))
    if dis is None or not libs:
        pytest.skip("needs llvm-dis-19 and Debian's rocm-device-libs")
    assert isa_version("gfx942") == ("942", 9402) and isa_version("gfx90a") == ("90a", 9010)
    for lib in libs:
        text = subprocess.run([dis, "-o", "-", str(lib)], capture_output=True, text=True, check=True).stdout
        value = int(re.search(r"@__oclc_ISA_version = .* i32 (\d+)", text).group(1))
        assert isa_version("gfx" + lib.stem.rpartition("_")[2]) == (lib.stem.rpartition("_")[2], value), lib


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_gfx936s_16_bit_mmac_builtins_run_as_v_mmac(folder, dtype):
    """Each MMAC builtin of gfx936's records (here the f16 and bf16 ones) compiles in a kernel's
    __gfx936__ branch and runs as its v_mmac with the jump layout; the gfx942 branch as v_mfma."""
    import ml_dtypes
    rng = np.random.default_rng(2)
    a, b = (rng.integers(-8, 8, (16, 16)).astype(np.float32) / 4 for _ in range(2))   # exact in both types
    t = ml_dtypes.bfloat16 if dtype == "bf16" else np.float16
    args = dict(a=a.astype(t).view(np.int64), bt=np.ascontiguousarray(b.T).astype(t).view(np.int64),
                d=np.zeros(256, np.float32))
    for arch, op in (("gfx936", "v_mmac"), ("gfx942", "v_mfma")):
        res, run, _ = hip.run("mm16.hip", "mm16", 1, 64, arch=arch, defines=["BF16"] if dtype == "bf16" else [],
                              **args)
        assert {m.op for m in run.mmacs()} == {f"{op}_f32_16x16x16_{dtype}"}
        assert np.array_equal(res["d"].reshape(16, 16), a @ b), arch


def test_a_buffers_expected_coverage_and_unwritten_bytes_travel(folder):
    """A Buffer argument keeps what it declares: out.expect(...) gives token-coverage findings
    (each output element consumes all 64 tokens, so a 32-token expectation is broken); the
    caller's Buffer (made with Buffer.empty: every byte unwritten) is copied, not written."""
    from gfxsim import Buffer
    p, v, s = pv_inputs()
    tagged = {k: t for k, t in TAGS.items() if k != "s_tok"}
    good = Buffer.empty("out", (256,), "f32").expect("token", 0, 64)
    run = hip.run("pv_scaled.hip", "pv_scaled", 1, 64, tags=tagged, p=p, v=v, s_tok=s, out=good).run
    assert run.findings_of("token-coverage") == []
    bad = Buffer.empty("out", (256,), "f32").expect("token", 0, 32)
    run = hip.run("pv_scaled.hip", "pv_scaled", 1, 64, tags=tagged, p=p, v=v, s_tok=s, out=bad).run
    assert run.findings_of("token-coverage")
    assert bad.written is not None and not bad.written.any()             # the caller's Buffer is not written
