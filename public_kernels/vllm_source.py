"""vLLM's ROCm paged attention (``csrc/rocm/attention.cu`` of a vLLM checkout) as device code only.

The file is copied into the build folder up to its host launchers (the first
``#define LAUNCH_CUSTOM_ATTENTION_MFMA16``), its relative includes made absolute into the checkout,
and its one include that needs ROCm 6 beyond the stubs (``quant_utils.cuh``, which wants c10's fp8
types) replaced by a header holding vLLM's own ``scaled_vec_conversion<uint16_t, float2>``, cut
from that file, so the fp8-MFMA path quantizes Q with vLLM's code. Each kernel instance is one
explicit template instantiation appended to the copy, compiled to its own ``.s``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .compile import PublicBuildError, compile_device

ATTENTION = "csrc/rocm/attention.cu"
QUANT_UTILS = "csrc/quantization/w8a8/fp8/amd/quant_utils.cuh"
CUT = "#define LAUNCH_CUSTOM_ATTENTION_MFMA16"

QKV_PARAMS = ("const {T}* __restrict__, const {C}* __restrict__, const {C}* __restrict__, const int, const float, "
              "const int* __restrict__, const int* __restrict__, const int* __restrict__, const int, "
              "const float* __restrict__, const int, const int, const int, float* __restrict__, "
              "float* __restrict__, {T}* __restrict__, {T}* __restrict__, int, const float*, const float*")
REDUCE_PARAMS = ("{T}* __restrict__, const float* __restrict__, const float* __restrict__, "
                 "const {T}* __restrict__, const int* __restrict__, const int* __restrict__, const int, "
                 "const float* __restrict__")

DTYPES = {"bf16": "__hip_bfloat16", "fp16": "_Float16"}
KV = {"auto": ("{T}", "vllm::Fp8KVCacheDataType::kAuto"), "fp8": ("uint8_t", "vllm::Fp8KVCacheDataType::kFp8E4M3")}


@dataclass(frozen=True)
class Instance:
    """One template instance of a vLLM kernel."""
    kernel: str          # "mfma16", "mfma4" or "reduce"
    dtype: str           # "bf16" | "fp16": Q, outputs
    kv: str = "auto"     # "auto" (the cache holds dtype) | "fp8" (e4m3 FNUZ bytes)
    mfma: str = "F16"    # the fp8 cache's QK/PV matrix type: "F16" (converted) or "Fp8" (opt-in fp8 MFMA)
    gqa: int = 8
    head: int = 128
    block: int = 16
    npar_loops: int = 1  # reduce: partitions per lane / 64

    @property
    def label(self) -> str:
        if self.kernel == "reduce":
            return f"reduce {self.dtype} npar{self.npar_loops}"
        mf = "" if self.kv == "auto" else f" mfma={self.mfma}"
        return f"{self.kernel} {self.dtype} kv={self.kv}{mf} gqa{self.gqa}"

    @property
    def stem(self) -> str:
        return re.sub(r"[^A-Za-z0-9]+", "_", self.label)

    def instantiation(self) -> str:
        T = DTYPES[self.dtype]
        if self.kernel == "reduce":
            return (f"template __global__ void paged_attention_ll4mi_reduce_kernel<{T}, {T}, {self.head}, "
                    f"{self.head}, 256, {self.npar_loops}>({REDUCE_PARAMS.format(T=T)});\n")
        C, kvt = KV[self.kv]
        C = C.format(T=T)
        params = QKV_PARAMS.format(T=T, C=C)
        if self.kernel == "mfma16":
            return (f"template __global__ void paged_attention_ll4mi_QKV_mfma16_kernel<{T}, {C}, {kvt}, {T}, "
                    f"{self.block}, {self.head}, 256, false, {self.gqa}, MFMAType::{self.mfma}>({params});\n")
        return (f"template __global__ void paged_attention_ll4mi_QKV_mfma4_kernel<{T}, {C}, {kvt}, {T}, "
                f"{self.block}, {self.head}, 256, false, {self.gqa}>({params});\n")


def conversion_header(checkout: Path) -> str:
    """vLLM's scaled fp8x2 conversion, cut from its quant_utils.cuh, in the namespace it lives in."""
    text = (checkout / QUANT_UTILS).read_text()
    m = re.search(r"template <>\s*__inline__ __device__ uint16_t\s*scaled_vec_conversion<uint16_t, float2>"
                  r"\(.*?\n\}\n", text, re.S)
    if not m:
        raise PublicBuildError(f"{QUANT_UTILS}: no scaled_vec_conversion<uint16_t, float2> definition found")
    return ("#pragma once\n#include <hip/hip_fp8.h>\nnamespace vllm { namespace fp8 {\n"
            "using fp8_type = __hip_fp8_e4m3_fnuz;\n"
            "template <typename Tout, typename Tin>\n"
            "__inline__ __device__ Tout vec_conversion(const Tin& x) { return x; }\n"
            "template <typename Tout, typename Tin>\n"
            "__inline__ __device__ Tout scaled_vec_conversion(const Tin& x, const float scale) { return x; }\n"
            + m.group(0) + "} }\n")


def device_copy(checkout: Path, build: Path) -> str:
    """attention.cu up to its host launchers, includes pointing into ``checkout``."""
    src = checkout / ATTENTION
    if not src.is_file():
        raise PublicBuildError(f"{src}: not found (give the root of a vLLM checkout)")
    text = src.read_text()
    cut = text.find(CUT)
    if cut < 0:
        raise PublicBuildError(f"{ATTENTION}: no {CUT!r} line to cut the host launchers at")
    head = text[:cut]
    build.mkdir(parents=True, exist_ok=True)
    (build / "vllm_fp8_conversion.h").write_text(conversion_header(checkout))
    csrc = (checkout / "csrc").resolve()

    def include(m):
        rel = m.group(1)
        if rel.endswith("quant_utils.cuh"):
            return '#include "vllm_fp8_conversion.h"'
        return f'#include "{(csrc / "rocm" / rel).resolve()}"'
    return re.sub(r'#include "(\.\./[^"]+)"', include, head)


def compile_instance(inst: Instance, checkout: Path, build: Path, *, arg_names: bool = False) -> Path:
    """The ``.s`` of one instance (``arg_names``: metadata with argument names, which clang writes
    only when asked)."""
    build.mkdir(parents=True, exist_ok=True)
    src = build / f"{inst.stem}.hip"
    text = device_copy(checkout, build) + "\n" + inst.instantiation()
    if not src.exists() or src.read_text() != text:
        src.write_text(text)
    return compile_device(src, build / f"{inst.stem}{'_named' if arg_names else ''}.s", build=build,
                          includes=[str(build)], defines=["USE_ROCM", "ENABLE_FP8"],
                          flags=["-fhip-kernel-arg-name"] if arg_names else [])
