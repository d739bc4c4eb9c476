"""The pieces of ``python -m public_kernels`` that need no fetched checkout: the stub headers and
gfx942 device libraries (a HIP source of our own that includes hip_runtime.h and hip_bf16.h runs
on the asm front end), the device-code cut of an attention.cu (on a synthetic file), fp8 e4m3 FNUZ
arithmetic, and the model of the fp8-MFMA logits against the plain reference."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from gfxsim.asm import parse_file
from gfxsim.asm.run import run_asm
from gfxsim.machine.memory import Buffer
from public_kernels.compile import compile_device
from public_kernels.paged_cases import (SMALL, BITS, VALUE, e4m3fnuz_round, e4m3fnuz_value, fp8_mfma_logits_model,
                                        make_case, reference)
from public_kernels.vllm_source import CUT, device_copy
from support import need_toolchain

OWN = """#include <hip/hip_runtime.h>
#include <hip/hip_bf16.h>
extern "C" __global__ void to_bf16(const float* src, unsigned short* dst) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  dst[i] = __float2bfloat16(src[i] * 2.0f).data;
}
"""


def test_stub_headers_and_gfx942_device_libraries_compile_a_hip_runtime_source_that_runs(tmp_path):
    need_toolchain("gfx942")
    src = tmp_path / "own.hip"
    src.write_text(OWN)
    s = compile_device(src, tmp_path / "own.s", build=tmp_path / "build", flags=["-fhip-kernel-arg-name"])
    assert (tmp_path / "build" / "devlib" / "oclc_isa_version_942.bc").exists()
    k = parse_file(s).kernel("to_bf16")
    x = np.random.default_rng(1).standard_normal(128).astype(np.float32)
    x[:4] = [1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, -0.0, 3.0e38]        # ties to even, -0, overflow to inf
    dst = Buffer("dst", np.zeros(128, np.uint16))
    run_asm(k, grid=2, block=64, args=dict(src=Buffer("src", x), dst=dst))
    np.testing.assert_array_equal(dst.array, BITS["bf16"](x * 2))


def test_device_copy_cuts_the_host_launchers_and_points_includes_into_the_checkout(tmp_path):
    rocm = tmp_path / "csrc" / "rocm"
    quant = tmp_path / "csrc" / "quantization" / "w8a8" / "fp8" / "amd"
    rocm.mkdir(parents=True)
    quant.mkdir(parents=True)
    (rocm / "attention.cu").write_text('#include "../cuda_compat.h"\n#include "../quantization/w8a8/fp8/amd/'
                                       'quant_utils.cuh"\n__global__ void k() {}\n' + CUT + " host side\nvoid h();\n")
    (quant / "quant_utils.cuh").write_text("template <>\n__inline__ __device__ uint16_t\nscaled_vec_conversion"
                                           "<uint16_t, float2>(const float2& a, float scale) {\n  return 7;\n}\n"
                                           "int after;\n")
    text = device_copy(tmp_path, tmp_path / "b")
    assert "host side" not in text and "__global__ void k()" in text
    assert f'#include "{(tmp_path / "csrc" / "cuda_compat.h").resolve()}"' in text
    assert '#include "vllm_fp8_conversion.h"' in text
    conv = (tmp_path / "b" / "vllm_fp8_conversion.h").read_text()
    assert "return 7;" in conv and "int after" not in conv


def test_e4m3fnuz_values_and_rounding():
    codes = np.arange(256, dtype=np.uint8)
    v = e4m3fnuz_value(codes)
    assert np.isnan(v[0x80]) and v[0x7F] == 240.0 and v[0x01] == 2.0 ** -10 and v[0x08] == 2.0 ** -7
    finite = v[~np.isnan(v)]
    np.testing.assert_array_equal(e4m3fnuz_round(finite), finite)           # every code is its own rounding
    # halfway between 1 (code 0x40) and 1.125 (0x41) goes to the even code; just above goes up
    np.testing.assert_array_equal(e4m3fnuz_round(np.array([1.0625, 1.0626, -1.0625])), [1.0, 1.125, -1.0])


def test_fp8_mfma_model_is_the_reference_when_every_lane_scale_is_one():
    """With |q| = 224 somewhere in every lane's slice, every lane's scale is 1: the model is the
    plain attention over fp8-rounded Q; with N(0, 1) Q its logits shrink by about (q_max/224)^2."""
    shape = replace(SMALL, context=(300,), seqs=1)
    c = make_case(shape, "bf16", "fp8", seed=3)
    q = VALUE["bf16"](c["q"])
    ratio = np.nanmedian(fp8_mfma_logits_model(c)["max_logits"] / reference(c)["max_logits"])
    assert ratio == pytest.approx((np.abs(q).max() / 224) ** 2, rel=0.1)
    q = q * 0.25
    for r in range(4):            # lanes of row r hold head elements 16r.. and 64+16r..
        q[0, :, 16 * r] = 224.0
    c["q"] = BITS["bf16"](q)
    c8 = dict(c, q=BITS["bf16"](e4m3fnuz_round(VALUE["bf16"](c["q"]))))
    got, want = fp8_mfma_logits_model(c), reference(c8)
    # the model rescales in fp32, as the kernel does
    np.testing.assert_allclose(got["max_logits"], want["max_logits"], rtol=1e-6)
    np.testing.assert_allclose(got["exp_sums"], want["exp_sums"], rtol=1e-5)
