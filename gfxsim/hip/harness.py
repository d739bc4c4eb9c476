"""Run a HIP twin on a ROCm GPU with the numpy inputs its Python twin takes, and get its outputs
back as numpy arrays, for comparison with the simulator.

The host program <sources>/harness/run_kernel.cpp (compiled with Debian's hipcc) knows no kernel
signature: this module writes a manifest from the entry point's metadata (argument names, offsets,
sizes; the twins are compiled with -fhip-kernel-arg-name), one .npy per buffer argument, and reads
back <name>.out.npy for every buffer.

    out = run_on_gpu("pv_int8_fragment", grid=(1, 1, 1), project=Project("kernels_hip", "build/hip"),
                     args=dict(p=p, v_cache=v_cache, v_scale=v_scale, block_table=bt,
                               context_len=np.int32(n), out=np.zeros((16, 128), np.float32)))
    out["out"]            # [16, 128] f32 as the GPU wrote it
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from collections.abc import Mapping

import numpy as np

from ..asm.parse import Kernel
from ..errors import ArgumentError, GfxSimError, located
from . import build as hipbuild
from .project import Project
from .toolchain import ToolchainError, get_target

HIPCC_HINT = "apt-get install -y --no-install-recommends hipcc"
# Host code only, so any offload arch Debian's hipcc (clang-15) knows will do; naming one keeps
# hipcc from running rocm_agent_enumerator, which fails without a GPU.
HOST_FLAGS = ("--offload-arch=gfx90a", "-O2", "-std=c++17", "-Wall")


class NoRocmGpu(GfxSimError, RuntimeError):
    """No ROCm GPU here; the message says what is missing."""


def find_hipcc() -> Path:
    found = shutil.which("hipcc")
    if not found:
        raise ToolchainError(f"hipcc not found: it compiles the harness host code; install it: {HIPCC_HINT}")
    return Path(found)


def build_host(*, project: Project, force: bool = False) -> Path:
    """Compile <sources>/harness/run_kernel.cpp to <build>/harness/run_kernel (kept while source and
    hipcc are unchanged)."""
    hipcc = find_hipcc()
    host_source = project.harness_source
    if not host_source.is_file():
        raise located(FileNotFoundError, f"{host_source}: the harness host program is not in the project's sources")
    out_dir = project.build / "harness"
    out_dir.mkdir(parents=True, exist_ok=True)
    exe, rec_path = out_dir / "run_kernel", out_dir / hipbuild.RECORD
    env = {**os.environ, "HIP_PLATFORM": "amd"}     # hipcc picks nvcc whenever nvcc is on PATH
    version = subprocess.run([str(hipcc), "--version"], capture_output=True, text=True, env=env).stdout.strip()
    digest = hashlib.sha256(host_source.read_bytes()).hexdigest()
    cmd = [str(hipcc), *HOST_FLAGS, str(host_source), "-o", str(exe)]
    record = {"hipcc": str(hipcc), "version": version, "HIP_PLATFORM": "amd", "command": cmd, "source_sha256": digest}
    if not force and exe.is_file() and hipbuild.load_record(out_dir) == record:
        return exe
    tmp = out_dir / f".run_kernel.{os.getpid()}"
    r = subprocess.run([*cmd[:-1], str(tmp)], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise ArgumentError(f"hipcc failed on {host_source} (exit {r.returncode}):\n{' '.join(cmd)}\n{r.stderr.strip()}")
    os.replace(tmp, exe)
    rec_path.write_text(json.dumps(record, indent=2) + "\n")
    return exe


def rocm_gpu() -> str:
    """The processor (e.g. "gfx942") of the first gfx9 GPU agent rocminfo lists; NoRocmGpu otherwise."""
    if not Path("/dev/kfd").exists():
        raise NoRocmGpu("no ROCm GPU: /dev/kfd does not exist (no amdgpu kernel driver or no AMD GPU)")
    rocminfo = shutil.which("rocminfo") or ("/opt/rocm/bin/rocminfo" if Path("/opt/rocm/bin/rocminfo").exists() else None)
    if rocminfo is None:
        raise NoRocmGpu("no ROCm GPU check possible: rocminfo not found (apt-get install rocminfo)")
    r = subprocess.run([rocminfo], capture_output=True, text=True)
    names = re.findall(r"^\s*Name:\s+(gfx9\w*)", r.stdout, re.M)
    if r.returncode != 0 or not names:
        raise NoRocmGpu(f"no ROCm GPU: rocminfo lists no gfx9 agent (exit {r.returncode})")
    return names[0]


def _value_bytes(name: str, value, size: int) -> bytes:
    if isinstance(value, np.generic):
        data = value.tobytes()
    elif isinstance(value, (bool, np.bool_)):
        raise ArgumentError(f"argument {name}: pass a sized numpy scalar, not a bool")
    elif isinstance(value, int):
        data = np.array(value, {4: np.int32, 8: np.int64}.get(size, np.int32)).tobytes()
    elif isinstance(value, float):
        data = np.array(value, {4: np.float32, 8: np.float64}.get(size, np.float32)).tobytes()
    else:
        raise ArgumentError(f"argument {name}: a by-value argument needs a number, got {type(value).__name__}")
    if len(data) != size:
        raise ArgumentError(f"argument {name}: {len(data)} bytes given, the kernel takes {size}")
    return data


def check_call(kernel: Kernel, args: Mapping[str, object], block: int | None) -> tuple[list, int]:
    """(argument names, block) of a launch of ``kernel`` by argument name: every metadata argument
    given and no other, block (default .max_flat_workgroup_size) within that size. The GPU harness
    and run_on_sim check a call alike."""
    names = [a.get(".name") for a in kernel.metadata.get(".args", [])]
    if any(n is None for n in names):
        raise ArgumentError(f"{kernel.name}: the metadata has unnamed arguments; compile with -fhip-kernel-arg-name")
    missing, extra = [n for n in names if n not in args], sorted(set(args) - set(names))
    if missing or extra:
        raise ArgumentError(f"{kernel.name}({', '.join(names)}): " + "; ".join(
            p for p in (f"missing {', '.join(missing)}" if missing else "",
                        f"no argument named {', '.join(extra)}" if extra else "") if p))
    max_block = int(kernel.metadata.get(".max_flat_workgroup_size", 1024))
    block = block or max_block
    if block > max_block:
        raise ArgumentError(f"{kernel.name}: block {block} > .max_flat_workgroup_size {max_block}")
    return names, block


def write_manifest(kernel: Kernel, code_object: Path, grid, args: Mapping[str, object], workdir: Path,
                   block: int | None = None) -> Path:
    """One .npy per buffer argument and the manifest run_kernel reads, from the kernel's metadata."""
    meta_args = kernel.metadata.get(".args", [])
    names, block = check_call(kernel, args, block)
    grid = tuple(grid) + (1,) * (3 - len(tuple(grid)))
    lines = [f"dir {workdir}", f"code_object {code_object}", f"kernel {kernel.name}", f"grid {grid[0]} {grid[1]} {grid[2]}",
             f"block {block}", f"kernarg_size {kernel.metadata.get('.kernarg_segment_size', 0)}"]
    for a, name in zip(meta_args, names):
        kind, value = a[".value_kind"], args[name]
        if kind == "global_buffer":
            if not isinstance(value, np.ndarray):
                raise ArgumentError(f"argument {name}: a buffer needs a numpy array, got {type(value).__name__}")
            np.save(workdir / f"{name}.npy", np.ascontiguousarray(value))
            lines.append(f"buffer {a['.offset']} {name}")
        elif kind == "by_value":
            lines.append(f"value {a['.offset']} {_value_bytes(name, value, int(a['.size'])).hex()}")
        else:
            raise ArgumentError(f"{kernel.name}: argument {name} is {kind}; the twins take no hidden arguments "
                             "(build them with -nogpuinc, without hip_runtime.h)")
    path = workdir / "manifest.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def run_on_gpu(entry: str, grid, args: Mapping[str, object], *, project: Project, arch: str | None = None,
               block: int | None = None, defines=(), workdir=None, check: bool = False) -> dict[str, np.ndarray]:
    """Launch `entry` (e.g. "pv_int8_fragment") on grid `grid` with `args` by argument name, return every
    buffer argument as the kernel left it. check=True runs run_kernel --check: no GPU, the buffers
    come back unchanged (arch then defaults to gfx942). Outputs stay in `workdir` when one is given."""
    if arch is None:
        arch = "gfx942" if check else rocm_gpu()
    target = get_target(arch)
    if target.stand_in and not check:
        raise ArgumentError(f"the {arch} build is a stand-in (gfx942 code with gfx936's D-layout formulas): it computes "
                         "wrong results on real hardware; run gfx940/gfx941/gfx942 on a ROCm GPU")
    b, f = hipbuild.find_entry(entry, target.arch, project=project, defines=defines)
    host = build_host(project=project)
    with tempfile.TemporaryDirectory(prefix="gfxsim-hip-") as tmp:
        wd = Path(workdir or tmp)
        wd.mkdir(parents=True, exist_ok=True)
        manifest = write_manifest(f.kernel(entry), b.code_object, grid, args, wd, block)
        r = subprocess.run([str(host), *(["--check"] if check else []), str(manifest)], capture_output=True, text=True)
        if r.returncode != 0:
            raise located(RuntimeError, f"{host.name} {entry} failed (exit {r.returncode}): "
                          f"{r.stderr.strip() or r.stdout.strip()}")
        return {name: np.load(wd / f"{name}.out.npy") for name, v in args.items() if isinstance(v, np.ndarray)}
