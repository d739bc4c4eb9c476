"""The hardware harness: host code compiled with Debian's hipcc (everywhere), the Python -> manifest
-> host -> .npy path checked without a GPU (run_kernel --check), and the twins run on a ROCm GPU
(marker `rocm`: skipped, with the reason, where there is none).

Without hipcc or clang these tests skip with the install hint, unless GFXSIM_REQUIRE_TOOLCHAIN=1.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from support import repo_project

from gfxsim.hip import harness, toolchain
from gfxsim.hip.toolchain import ToolchainError

PROJECT = repo_project()

F32 = np.float32
HEAD_DIM, BLOCK_SIZE = 128, 16                       # the default build of the twins


def need(fn, *args):
    try:
        return fn(*args)
    except ToolchainError as e:
        if os.environ.get("GFXSIM_REQUIRE_TOOLCHAIN"):
            pytest.fail(str(e))
        pytest.skip(str(e))


def pv_inputs(context_len: int, seed: int = 0) -> dict:
    """pv_int8 / pv_bf16 arguments: P rows summing to 1, a shuffled block table, per-token V scales."""
    rng = np.random.default_rng(seed)
    nblk = -(-context_len // BLOCK_SIZE)
    p = rng.random((16, context_len), dtype=F32)
    p /= p.sum(1, keepdims=True)
    return dict(p=p, v_cache=rng.integers(-127, 128, (nblk + 2, 1, HEAD_DIM, BLOCK_SIZE), dtype=np.int8),
                v_scale=rng.uniform(1e-3, 2e-2, (nblk + 2, 1, BLOCK_SIZE)).astype(F32),
                block_table=rng.permutation(nblk + 2)[:nblk].astype(np.int32), context_len=np.int32(context_len),
                out=np.full((16, HEAD_DIM), np.nan, F32))


def gather_v(a: dict):
    t = np.arange(int(a["context_len"]))
    blk, off = a["block_table"][t // BLOCK_SIZE], t % BLOCK_SIZE
    return a["v_cache"][blk, 0, :, off].astype(np.int64), a["v_scale"][blk, 0, off]     # Vq [t, d], sV [t]


def pv_int8_reference(a: dict, grouping: str) -> np.ndarray:
    """ALGORITHMS.md "pv_int8" in numpy, fp32 as the kernel computes it (up to FMA contraction)."""
    n = int(a["context_len"])
    vq, sv = gather_v(a)
    kset = [np.array([16 * r + 8 * j + b for r in range(4) for b in range(8)]) for j in range(2)]
    groups = kset if grouping == "fragment" else [np.arange(32), np.arange(32, 64)]
    waves = [np.zeros((16, HEAD_DIM), F32) for _ in range(4)]
    for c in range(-(-n // 64)):
        m = min(64, n - 64 * c)
        w = np.zeros((16, 64), F32)
        v = np.zeros((64, HEAD_DIM), np.int64)
        w[:, :m] = a["p"][:, 64 * c:64 * c + m] * sv[64 * c:64 * c + m]
        v[:m] = vq[64 * c:64 * c + m]
        wq, sw = np.zeros((16, 64), np.int64), np.zeros((16, 2), F32)
        for g, idx in enumerate(groups):
            amax = np.abs(w[:, idx]).max(1).astype(F32)
            live = amax >= F32(127) / np.finfo(F32).max
            inv = np.where(live, F32(127) / np.where(live, amax, 1), 0).astype(F32)
            wq[:, idx] = np.clip(np.rint(w[:, idx] * inv[:, None]), -127, 127)
            sw[:, g] = np.where(live, amax / F32(127), 0)
        for j in range(2):
            waves[c % 4] += (wq[:, kset[j]] @ v[kset[j]]).astype(F32) * sw[:, j:j + 1]
    return ((waves[0] + waves[1]) + waves[2]) + waves[3]


def test_host_code_compiles_with_hipcc(tmp_path):
    exe = need(lambda: harness.build_host(project=PROJECT.with_build(tmp_path), force=True))
    assert exe.is_file() and os.access(exe, os.X_OK)
    rec = (tmp_path / "harness" / "build.json").read_text()
    assert "HIP version" in rec and "--offload-arch=gfx90a" in rec


def test_inputs_reach_the_host_and_come_back(tmp_path):
    """run_kernel --check: the manifest written from pv_int8_fragment's metadata, every .npy read,
    the kernarg segment packed at the metadata's offsets, every buffer written back."""
    need(toolchain.find_toolchain, "gfx942")
    need(harness.find_hipcc)
    a = pv_inputs(100)
    out = harness.run_on_gpu("pv_int8_fragment", (1,), a, project=PROJECT, check=True, workdir=tmp_path)
    assert set(out) == {"p", "v_cache", "v_scale", "block_table", "out"}
    for name, arr in out.items():
        assert arr.dtype == a[name].dtype and arr.shape == a[name].shape
        np.testing.assert_array_equal(arr, a[name])
    manifest = (tmp_path / "manifest.txt").read_text().splitlines()
    assert manifest[2:5] == ["kernel pv_int8_fragment", "grid 1 1 1", "block 256"]
    assert manifest[6:] == ["buffer 0 p", "buffer 8 v_cache", "buffer 16 v_scale", "buffer 24 block_table",
                            f"value 32 {np.int32(100).tobytes().hex()}", "buffer 40 out"]


def test_bad_launches_are_named(tmp_path):
    need(toolchain.find_toolchain, "gfx942")
    need(harness.find_hipcc)
    a = pv_inputs(64)
    with pytest.raises(ValueError, match=r"pv_int8_fragment\(p, v_cache.*missing out"):
        harness.run_on_gpu("pv_int8_fragment", (1,), {k: v for k, v in a.items() if k != "out"}, project=PROJECT, check=True)
    with pytest.raises(ValueError, match="context_len: 8 bytes given, the kernel takes 4"):
        harness.run_on_gpu("pv_int8_fragment", (1,), {**a, "context_len": np.int64(64)}, project=PROJECT, check=True)
    with pytest.raises(ValueError, match="stand-in"):
        harness.run_on_gpu("pv_int8_fragment", (1,), a, project=PROJECT, arch="gfx936")


def rocm_arch() -> str:
    try:
        return harness.rocm_gpu()
    except harness.NoRocmGpu as e:
        pytest.skip(str(e))


def save(outputs: dict, name: str, tmp_path: Path) -> Path:
    """Outputs kept for comparison with the simulator: $GFXSIM_HIP_OUT or the test's tmp dir."""
    d = Path(os.environ.get("GFXSIM_HIP_OUT", tmp_path))
    d.mkdir(parents=True, exist_ok=True)
    for k, v in outputs.items():
        np.save(d / f"{name}.{k}.npy", v)
    return d


@pytest.mark.rocm
def test_pv_int8_on_gpu(tmp_path):
    """Both groupings on the GPU: each matches the fp32 recipe; against the exact product the
    contiguous grouping (the bug) is at least 10x worse than the fragment-aligned one."""
    arch = rocm_arch()
    a = pv_inputs(4096 + 37)                               # full chunks and a partial one
    vq, sv = gather_v(a)
    exact = (a["p"].astype(np.float64) * sv) @ vq
    err = {}
    for grouping in ("fragment", "contiguous"):
        out = harness.run_on_gpu(f"pv_int8_{grouping}", (1,), a, project=PROJECT, arch=arch)["out"]
        save({"out": out}, f"pv_int8_{grouping}.{arch}", tmp_path)
        ref = pv_int8_reference(a, grouping)
        np.testing.assert_allclose(out, ref, rtol=0, atol=1e-5 * np.abs(ref).max())
        err[grouping] = np.abs(out - exact).max()
    assert err["contiguous"] >= 10 * err["fragment"], err


@pytest.mark.rocm
def test_qk_int8_on_gpu(tmp_path):
    arch = rocm_arch()
    rng = np.random.default_rng(1)
    n = 1000
    nblk = -(-n // BLOCK_SIZE)
    a = dict(q=rng.standard_normal((16, HEAD_DIM)).astype(F32),
             k_cache=rng.integers(-127, 128, (nblk, 1, HEAD_DIM // 16, BLOCK_SIZE, 16), dtype=np.int8),
             k_scale=rng.uniform(1e-3, 2e-2, (nblk, 1, BLOCK_SIZE)).astype(F32),
             block_table=rng.permutation(nblk).astype(np.int32), context_len=np.int32(n),
             s_out=np.full((16, n), np.nan, F32))
    s = harness.run_on_gpu("qk_int8", (1,), a, project=PROJECT, arch=arch)["s_out"]
    save({"s_out": s}, f"qk_int8.{arch}", tmp_path)
    t = np.arange(n)
    blk, off = a["block_table"][t // BLOCK_SIZE], t % BLOCK_SIZE
    kq = a["k_cache"][blk, 0, :, off, :].reshape(n, HEAD_DIM).astype(np.int64)
    amax = np.abs(a["q"]).max(1)
    qq = np.clip(np.rint(a["q"] * (F32(127) / amax)[:, None]), -127, 127).astype(np.int64)
    ref = (qq @ kq.T).astype(F32) * (amax / F32(127))[:, None] * a["k_scale"][blk, 0, off] * F32(1 / np.sqrt(HEAD_DIM))
    np.testing.assert_allclose(s, ref, rtol=1e-6, atol=1e-6)


def test_run_on_sim_answers_the_gpu_harness_call():
    """gfxsim.hip.run_on_sim: run_on_gpu's call and return value, on the asm front end (no GPU):
    the same pv_int8 recipe check as the GPU test, the contiguous bug 10x worse, and the Run's findings
    (the compiled contiguous kernel's scale-group findings; none for the fragment kernel)."""
    from support import need_toolchain
    from gfxsim.hip.sim import run_on_sim
    need_toolchain("gfx942")
    a = pv_inputs(256 + 37)                                # full chunks and a partial one
    vq, sv = gather_v(a)
    exact = (a["p"].astype(np.float64) * sv) @ vq
    err, kinds = {}, {}
    from gfxsim import Buffer
    n = int(a["context_len"])
    token = np.full(a["v_cache"].shape[0] * BLOCK_SIZE, -1)
    token[(a["block_table"][:, None] * BLOCK_SIZE + np.arange(BLOCK_SIZE)).ravel()] = np.arange(
        a["block_table"].size * BLOCK_SIZE)
    token = np.where(token < n, token, -1).reshape(-1, 1, 1, BLOCK_SIZE)
    tagged = dict(a, p=Buffer("p", a["p"], {"token": np.arange(n)[None, :]}),
                  v_cache=Buffer("v_cache", a["v_cache"], {"token": token}))
    for grouping in ("fragment", "contiguous"):
        outs = run_on_sim(f"pv_int8_{grouping}", (1,), a, project=PROJECT)
        outs_t, run = run_on_sim(f"pv_int8_{grouping}", (1,), tagged, project=PROJECT, run=True)
        np.testing.assert_array_equal(outs_t["out"], outs["out"])
        assert set(outs) == {"p", "v_cache", "v_scale", "block_table", "out"}       # every buffer argument
        assert np.isnan(a["out"]).all()                   # the caller's arrays are not written
        ref = pv_int8_reference(a, grouping)
        np.testing.assert_allclose(outs["out"], ref, rtol=0, atol=1e-5 * np.abs(ref).max())
        err[grouping] = np.abs(outs["out"] - exact).max()
        kinds[grouping] = {f.kind for f in run.findings}
    assert err["contiguous"] >= 10 * err["fragment"], err
    assert kinds == {"fragment": set(), "contiguous": {"scale-group-mismatch"}}, kinds
    with pytest.raises(ValueError, match="missing out"):
        run_on_sim("pv_int8_fragment", (1,), {k: v for k, v in a.items() if k != "out"}, project=PROJECT)
    with pytest.raises(ValueError, match="block 2048"):
        run_on_sim("pv_int8_fragment", (1,), a, project=PROJECT, block=2048)
