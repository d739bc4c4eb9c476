"""Compile the device code of a fetched HIP source for gfx942 with Debian's clang-19.

Only device code is compiled (``--cuda-device-only``); what the host side or a newer ROCm would
provide is replaced by small stub headers written next to the build: torch/ATen/c10 (host only,
empty), ``hip/hip_bf16.h`` and ``hip/hip_fp8.h`` (Debian's HIP 5.2 has neither; the stubs give the
types and the few conversions device code calls, on gfx942's own conversion builtins). Debian's
device libraries have no gfx942 ISA-version library: one is made from gfx940's by changing the
version constant, in a private copy of the bitcode folder.
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

from gfxsim.errors import GfxSimError

CLANG = "clang-19"
DEVLIB = Path("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode")
HIP_FLAGS = ["--rocm-path=/usr", "--hip-version=5.2.21153"]


class PublicBuildError(GfxSimError):
    """A fetched source did not compile; the message carries clang's first errors."""


STUBS = {
    "torch/all.h": "#pragma once\n#include <cfloat>\n#define TORCH_CHECK(cond, ...) ((void)0)\n",
    "ATen/cuda/CUDAContext.h": "#pragma once\n",
    "c10/cuda/CUDAGuard.h": "#pragma once\n",
    # host-only code paths of the fetched headers name CUDA's runtime; HIP's has the same calls
    "gfxsim_public_prelude.h": """#pragma once
#include <hip/hip_runtime.h>
#define cudaDeviceProp hipDeviceProp_t
#define cudaGetDevice hipGetDevice
#define cudaGetDeviceProperties hipGetDeviceProperties
""",
    # bfloat16 as ROCm 6 declares it: a struct around the 16 bits, round-to-nearest-even from float
    "hip/hip_bf16.h": """#pragma once
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
struct __hip_bfloat16 { unsigned short data; };
struct __hip_bfloat162 { __hip_bfloat16 x, y; };
__device__ __host__ inline float __bfloat162float(__hip_bfloat16 a) {
  union { unsigned int u; float f; } t; t.u = (unsigned int)a.data << 16; return t.f; }
__device__ __host__ inline __hip_bfloat16 __float2bfloat16(float f) {
  union { unsigned int u; float f; } t; t.f = f;
  unsigned int r = t.u + 0x7fffu + ((t.u >> 16) & 1u);
  __hip_bfloat16 b; b.data = (unsigned short)(r >> 16); return b; }
""",
    # gfx942's fp8 is the FNUZ encoding; saturating conversion = clamp to +-240, then the hardware
    # conversion (what ROCm's header does on gfx942)
    "hip/hip_fp8.h": """#pragma once
#include <hip/hip_runtime.h>
enum __hip_saturation_t { __HIP_NOSAT = 0, __HIP_SATFINITE = 1 };
enum __hip_fp8_interpretation_t { __HIP_E4M3_FNUZ = 0, __HIP_E5M2_FNUZ = 1 };
typedef unsigned char __hip_fp8_storage_t;
typedef unsigned short __hip_fp8x2_storage_t;
struct __hip_fp8_e4m3_fnuz {
  __hip_fp8_storage_t __x;
  static constexpr __hip_saturation_t __default_saturation = __HIP_SATFINITE;
  static constexpr __hip_fp8_interpretation_t __default_interpret = __HIP_E4M3_FNUZ;
};
struct __hip_fp8_e5m2_fnuz {
  __hip_fp8_storage_t __x;
  static constexpr __hip_saturation_t __default_saturation = __HIP_SATFINITE;
  static constexpr __hip_fp8_interpretation_t __default_interpret = __HIP_E5M2_FNUZ;
};
__device__ inline __hip_fp8x2_storage_t __hip_cvt_float2_to_fp8x2(const float2 v, __hip_saturation_t sat,
                                                                  __hip_fp8_interpretation_t t) {
  float a = v.x, b = v.y;
  if (sat == __HIP_SATFINITE) {
    const float m = t == __HIP_E4M3_FNUZ ? 240.0f : 57344.0f;
    a = fminf(fmaxf(a, -m), m); b = fminf(fmaxf(b, -m), m);
  }
  int r = t == __HIP_E4M3_FNUZ ? __builtin_amdgcn_cvt_pk_fp8_f32(a, b, 0, false)
                               : __builtin_amdgcn_cvt_pk_bf8_f32(a, b, 0, false);
  return (__hip_fp8x2_storage_t)r;
}
__device__ inline __hip_fp8_storage_t __hip_cvt_float_to_fp8(const float v, __hip_saturation_t sat,
                                                             __hip_fp8_interpretation_t t) {
  return (__hip_fp8_storage_t)__hip_cvt_float2_to_fp8x2(make_float2(v, 0.0f), sat, t);
}
""",
}


def stub_dir(build: Path) -> Path:
    """The stub headers, written under ``build``/stubs."""
    d = build / "stubs"
    for rel, text in STUBS.items():
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if not p.exists() or p.read_text() != text:
            p.write_text(text)
    return d


def device_libs(build: Path) -> Path:
    """A copy of Debian's device-library folder (links) with a gfx942 ISA-version library added:
    gfx940's bitcode with its version constant 9400 made 9402."""
    d = build / "devlib"
    target = d / "oclc_isa_version_942.bc"
    if target.exists():
        return d
    if not DEVLIB.is_dir():
        raise PublicBuildError(f"no HIP device libraries at {DEVLIB}: apt-get install rocm-device-libs")
    d.mkdir(parents=True, exist_ok=True)
    for f in DEVLIB.glob("*.bc"):
        link = d / f.name
        if not link.exists():
            link.symlink_to(f)
    ir = subprocess.run(["llvm-dis-19", str(DEVLIB / "oclc_isa_version_940.bc"), "-o", "-"],
                        capture_output=True, text=True, check=True).stdout
    if "i32 9400" not in ir:
        raise PublicBuildError("oclc_isa_version_940.bc has no ISA version constant 9400")
    subprocess.run(["llvm-as-19", "-o", str(target)], input=ir.replace("i32 9400", "i32 9402"),
                   text=True, check=True)
    return d


def compile_device(source: Path, out: Path, *, build: Path, includes=(), defines=(), flags=(),
                   arch: str = "gfx942") -> Path:
    """``source`` (HIP) compiled to ``out`` (.s) for ``arch``, device code only; clang's output is
    reused while the source, flags and stubs are unchanged."""
    if shutil.which(CLANG) is None:
        raise PublicBuildError(f"{CLANG} is not installed: apt-get install clang-19 lld-19 llvm-19")
    cmd = [CLANG, "-x", "hip", f"--offload-arch={arch}", "--cuda-device-only", "-O3", "-S",
           "-gline-tables-only", *HIP_FLAGS, f"--rocm-device-lib-path={device_libs(build)}",
           "-isystem", str(stub_dir(build)), "-include", "gfxsim_public_prelude.h",
           *(f"-I{i}" for i in includes), *(f"-D{d}" for d in defines), *flags, str(source), "-o", str(out)]
    key = hashlib.sha256((" ".join(cmd) + source.read_text() + repr(STUBS)).encode()).hexdigest()
    stamp = out.with_suffix(".key")
    if out.exists() and stamp.exists() and stamp.read_text() == key:
        return out
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        errs = [ln for ln in r.stderr.splitlines() if "error:" in ln][:6]
        raise PublicBuildError(f"{source.name}: clang-19 failed: " + (" | ".join(errs) or r.stderr[-800:]))
    stamp.write_text(key)
    return out
