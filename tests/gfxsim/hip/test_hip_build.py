"""Every HIP twin compiles with a real clang for gfx940, gfx942 and the gfx936 stand-in.

Without a suitable clang these tests skip with the install hint, unless GFXSIM_REQUIRE_TOOLCHAIN=1
(.ci/run sets it after installing clang-19 lld-19 llvm-19), where they fail instead.
"""
from __future__ import annotations

import json
import os
import struct

import pytest
from support import need_toolchain, repo_project

from gfxsim.cli import main
from gfxsim.hip import build as hipbuild
from gfxsim.hip import toolchain
from gfxsim.asm import parse_file
from gfxsim.hip.toolchain import ToolchainError

PROJECT = repo_project()

ARCHS = ("gfx940", "gfx942", "gfx936")
ENTRY_POINTS = {
    "int8_kv_cache": ["int8_kv_cache"],
    "qk_int8": ["qk_int8"],
    "pv_int8": ["pv_int8_fragment", "pv_int8_contiguous"],
    "pv_bf16": ["pv_bf16"],
    "paged_attention_decode": ["paged_attention_decode_fragment", "paged_attention_decode_contiguous",
                               "paged_attention_reduce"],
    "prefix_prefill": ["prefix_prefill"],
}
# Argument order of kernels_py/ALGORITHMS.md (plus the sizes a HIP kernel must be told).
SIGNATURES = {
    "int8_kv_cache": "key value slot_mapping k_cache v_cache k_scale v_scale num_kv_heads",
    "qk_int8": "q k_cache k_scale block_table context_len s_out",
    "pv_int8_fragment": "p v_cache v_scale block_table context_len out",
    "pv_int8_contiguous": "p v_cache v_scale block_table context_len out",
    "pv_bf16": "p v_cache v_scale block_table context_len out",
    "paged_attention_decode_fragment": "q k_cache v_cache k_scale v_scale block_tables context_lens exp_sums "
                                       "max_logits tmp_out num_heads num_kv_heads max_blocks max_partitions",
    "paged_attention_reduce": "tmp_out exp_sums max_logits context_lens out num_heads max_partitions",
    "prefix_prefill": "q k_cache v_cache k_scale v_scale block_table context_len query_len out num_heads num_kv_heads",
}
EF_AMDGPU_MACH = {"gfx940": 0x40, "gfx941": 0x4B, "gfx942": 0x4C}   # ELF e_flags & 0xff (LLVM AMDGPUUsage)
EM_AMDGPU = 224




@pytest.fixture(scope="session")
def builds():
    """All twins for the three targets, compiled once per session (the build cache keeps up-to-date outputs)."""
    out = {}
    for arch in ARCHS:
        need_toolchain(arch)
        out[arch] = {b.kernel: b for b in hipbuild.build(None, arch, project=PROJECT)}
    return out


@pytest.mark.parametrize("arch", ARCHS)
def test_every_twin_compiles_to_assembly_and_a_code_object(builds, arch):
    target = toolchain.get_target(arch)
    assert set(builds[arch]) == set(PROJECT.kernels)
    for kernel, b in builds[arch].items():
        asm = parse_file(b.asm)
        assert asm.processor == target.offload_arch
        assert list(asm.kernels) == ENTRY_POINTS[kernel], f"{kernel} for {arch}"
        elf = b.code_object.read_bytes()
        assert elf[:4] == b"\x7fELF", b.code_object
        e_machine, = struct.unpack_from("<H", elf, 18)
        e_flags, = struct.unpack_from("<I", elf, 48)
        assert e_machine == EM_AMDGPU and e_flags & 0xFF == EF_AMDGPU_MACH[target.offload_arch], b.code_object
        for name in ENTRY_POINTS[kernel]:
            assert f"{name}.kd".encode() in elf, f"{name}: no kernel descriptor symbol in {b.code_object}"


def test_arguments_follow_the_specification_and_none_is_hidden(builds):
    for kernel, b in builds["gfx942"].items():
        for name, k in parse_file(b.asm).kernels.items():
            args = k.metadata[".args"]
            assert not [a for a in args if a[".value_kind"].startswith("hidden")], f"{name} has hidden kernargs"
            if name in SIGNATURES:
                assert [a[".name"] for a in args] == SIGNATURES[name].split(), name


def test_build_record_names_compiler_flags_and_sources(builds):
    for arch in ARCHS:
        rec = json.loads((hipbuild.arch_dir(arch, PROJECT) / hipbuild.RECORD).read_text())
        target = toolchain.get_target(arch)
        assert rec["arch"] == arch and rec["offload_arch"] == target.offload_arch
        assert "clang version" in rec["compiler"]["version"] and os.path.exists(rec["compiler"]["clang"])
        assert {"-nogpuinc", "-nogpulib", "-O3", f"--offload-arch={target.offload_arch}"} <= set(rec["flags"])
        assert ("-DGFXSIM_JUMP_LAYOUT=1" in rec["flags"]) == (arch == "gfx936") == rec["stand_in"]
        for kernel in PROJECT.kernels:
            entry = rec["kernels"][kernel]
            assert entry["inputs_sha256"] == hipbuild.inputs_hash(PROJECT.source(kernel), PROJECT)
            assert entry["commands"][0][-1].endswith(f"{kernel}.s") and entry["commands"][-1][-1].endswith(f"{kernel}.co")


def test_rebuilds_only_what_is_stale(tmp_path):
    need_toolchain("gfx942")
    first, = hipbuild.build(["int8_kv_cache"], "gfx942", project=PROJECT.with_build(tmp_path))
    again, = hipbuild.build(["int8_kv_cache"], "gfx942", project=PROJECT.with_build(tmp_path))
    assert first.rebuilt and not again.rebuilt
    forced, = hipbuild.build(["int8_kv_cache"], "gfx942", project=PROJECT.with_build(tmp_path), force=True)
    assert forced.rebuilt


def test_defines_select_the_head_dim(tmp_path):
    """-D GFXSIM_HEAD_DIM=64 is a different build: QK takes head_dim/32 = 2 k-steps per 16-token tile."""
    need_toolchain("gfx942")
    b, = hipbuild.build(["qk_int8"], "gfx942", project=PROJECT.with_build(tmp_path), defines=["GFXSIM_HEAD_DIM=64"])
    k = parse_file(b.asm).kernel("qk_int8")
    loop, = [lp for lp in k.loops if any(i.is_matrix for i in k.body(lp))]
    assert sum(i.is_matrix for i in k.body(loop)) == 4 * 2
    assert "-DGFXSIM_HEAD_DIM=64" in hipbuild.load_record(b.asm.parent)["flags"]


def test_missing_compiler_names_the_packages(monkeypatch, capsys):
    monkeypatch.delenv("GFXSIM_CLANG", raising=False)
    monkeypatch.setattr(toolchain, "_which", lambda name, major: None)
    with pytest.raises(ToolchainError, match="apt-get install .*clang-19 lld-19 llvm-19"):
        toolchain.find_toolchain("gfx941")
    assert main(["hip", "build", "pv_int8", "--arch", "gfx942"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gfxsim hip: error: no clang that compiles HIP for gfx942") and "clang-19" in err


def test_bad_kernel_and_arch_are_named(capsys):
    with pytest.raises(ValueError, match="unknown HIP kernel 'pv_int4'"):
        hipbuild.build(["pv_int4"], "gfx942", project=PROJECT)
    with pytest.raises(ValueError, match="unknown HIP target 'gfx908'"):
        hipbuild.build(["pv_int8"], "gfx908", project=PROJECT)
    assert main(["hip", "build", "pv_int8", "--arch", "gfx1100"]) == 2
    assert "unknown HIP target 'gfx1100'" in capsys.readouterr().err


def test_cli_build(builds, capsys):
    assert main(["hip", "build", "int8_kv_cache", "pv_int8", "--arch", "gfx942", "--arch", "gfx936"]) == 0
    out = capsys.readouterr().out
    assert "pv_int8" in out and "gfx936" in out and "up to date" in out and "build.json" in out
