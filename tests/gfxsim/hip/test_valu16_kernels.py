"""Small HIP kernels of 16-bit, fp8 and binary64 arithmetic, compiled with clang-19 (-nogpuinc
-nogpulib, as the twins) and run end to end on the asm front end against numpy: an f16
matrix-vector product accumulating in fp32 (fma_mix / cvt, v_cvt_f16_f32), packed f16 math and
packs, 16-bit integer ops, fp8/bf8 round trips, bf16 arithmetic (clang's integer rounding),
integer-to-half conversions, and binary64 division, sqrt, rounding and conversions."""
import numpy as np
import pytest
from support import need_toolchain

from gfxsim.asm import parse_file
from gfxsim.asm.run import run_asm
from gfxsim.machine.memory import Buffer

SOURCE = r"""
#define __global__ __attribute__((global))
typedef _Float16 half;
typedef half half2 __attribute__((ext_vector_type(2)));
typedef float float2 __attribute__((ext_vector_type(2)));
typedef unsigned uint32_t;
typedef unsigned short uint16_t;
#define TID __builtin_amdgcn_workitem_id_x()

// y = A x over k columns, fp32 accumulation, one row per lane
extern "C" __global__ void hgemv(const half* a, const half* x, half* yo, int k) {
  const int row = __builtin_amdgcn_workgroup_id_x() * 64 + TID;
  float acc = 0.f;
  for (int j = 0; j < k; ++j) acc += (float)a[row * k + j] * (float)x[j];
  yo[row] = (half)acc;
}

// two f32 rounded to halves, packed; h*h + h per half; a half max/difference; one scaled half
extern "C" __global__ void hpack(const float* a, uint32_t* out, half* o2) {
  const int i = TID;
  half2 h = {(half)a[2 * i], (half)a[2 * i + 1]};
  h = h * h + h;
  out[i] = __builtin_bit_cast(uint32_t, h);
  half s = h.x > h.y ? h.x - h.y : __builtin_fmaxf16(h.x, h.y);
  o2[i] = s * (half)3.0f;
}

// two fp32 rounded to halves and packed into one word, nothing else
extern "C" __global__ void topack(const float* a, half2* out) {
  const int i = TID;
  out[i] = half2{(half)a[2 * i], (half)a[2 * i + 1]};
}

extern "C" __global__ void hops(const uint16_t* a, const short* b, uint16_t* o) {
  const int i = TID;
  uint16_t u = a[i];
  short s = b[i];
  o[i] = (uint16_t)(u * 3 + (u << 2)) ^ (uint16_t)(s >> 3);
  o[64 + i] = u > (uint16_t)s ? u : (uint16_t)(s - u);
}

extern "C" __global__ void fp8(const float* a, uint32_t* o, float* back) {
  const int i = TID;
  int w = __builtin_amdgcn_cvt_pk_fp8_f32(a[4 * i], a[4 * i + 1], 0, false);
  w = __builtin_amdgcn_cvt_pk_bf8_f32(a[4 * i + 2], a[4 * i + 3], w, true);
  o[i] = w;
  back[4 * i] = __builtin_amdgcn_cvt_f32_fp8(w, 1);
  back[4 * i + 1] = __builtin_amdgcn_cvt_f32_bf8(w, 3);
  float2 p = __builtin_amdgcn_cvt_pk_f32_fp8(w, false);
  back[4 * i + 2] = p.x;
  back[4 * i + 3] = p.y;
}

// bf16 arithmetic has no ALU of its own: clang widens to fp32 with shifts and rounds back with
// integer ops (v_bfe_u32, v_add3_u32, a NaN select)
extern "C" __global__ void bfk(const __bf16* a, const __bf16* b, __bf16* c, float* d) {
  const int i = TID;
  __bf16 x = a[i], y = b[i];
  c[i] = x * y + x;
  d[i] = (float)x - (float)y;
  c[64 + i] = (__bf16)((float)x / 3.0f);
}

typedef half half4 __attribute__((ext_vector_type(4)));
extern "C" __global__ void h4(const half4* a, const half4* b, half4* c, float* s) {
  const int i = TID;
  half4 x = a[i], y = b[i];
  half4 z = __builtin_elementwise_max(x * y - x, y);
  c[i] = z;
  float acc = 0;
  for (int k = 0; k < 4; ++k) acc += (float)z[k] * (float)x[k];
  s[i] = acc;
}

// integers to binary16 (v_cvt_f16_i16 / _u16 / through fp32) and to bf16
extern "C" __global__ void cvh(const int* a, const short* b, half* h, __bf16* o) {
  const int i = TID;
  h[i] = (half)a[i] + (half)b[i] + (half)(unsigned short)b[i];
  o[i] = (__bf16)(float)a[i];
}

extern "C" __global__ void dmath(const double* a, const double* b, double* c, float* f, int* ni) {
  const int i = TID;
  double x = a[i], y = b[i];
  double q = x / y;
  double s = __builtin_sqrt(__builtin_fabs(x));
  c[i] = q + s * y + __builtin_fmin(x, y) + __builtin_floor(x) + __builtin_trunc(y) + __builtin_rint(x);
  c[64 + i] = q;
  c[128 + i] = s;
  f[i] = (float)(x * y);
  ni[i] = (int)x + (x < y) + (int)(double)(unsigned)ni[i];
}
"""


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    need_toolchain("gfx942")
    from gfxsim.hip import build as hipbuild
    from gfxsim.hip.project import Project
    d = tmp_path_factory.mktemp("valu16")
    (d / "src").mkdir()
    (d / "src" / "valu16.hip").write_text(SOURCE)
    (b,) = hipbuild.build(["valu16"], "gfx942", project=Project(d / "src", d / "build"))
    return parse_file(b.asm)


def _run(kernels, name, grid=1, **arrays):
    bufs = {n: (Buffer(n, a) if isinstance(a, np.ndarray) else a) for n, a in arrays.items()}
    run = run_asm(kernels.kernel(name), grid=(grid,), block=64, args=bufs)
    assert run.findings == []
    return {n: b.array for n, b in bufs.items() if isinstance(b, Buffer)}


def test_f16_gemv_accumulates_in_fp32_and_rounds_once(kernels):
    rng = np.random.default_rng(1)
    k = 24
    a = rng.standard_normal((128, k)).astype(np.float16)
    x = rng.standard_normal(k).astype(np.float16)
    out = _run(kernels, "hgemv", grid=2, a=a.reshape(-1), x=x, yo=np.zeros(128, np.float16), k=k)
    acc = np.zeros(128, np.float32)
    for j in range(k):     # fp32 fma per step (the products are exact in fp32)
        acc = (acc.astype(np.float64) + a[:, j].astype(np.float64) * x[j]).astype(np.float32)
    np.testing.assert_array_equal(out["yo"], acc.astype(np.float16))


def test_packed_half_math_and_packs(kernels):
    a = np.array([1.0, -2.0, 0.5, 65504.0, 300.0, 1e-7, -0.0, 3.0] * 16, np.float32)
    out = _run(kernels, "hpack", a=a, out=np.zeros(64, np.uint32), o2=np.zeros(64, np.float16))
    h = a.astype(np.float16).reshape(64, 2)
    with np.errstate(over="ignore"):
        r = (h.astype(np.float64) * h + h).astype(np.float16)        # v_pk_fma_f16: one rounding
    np.testing.assert_array_equal(out["out"], r[:, 0].view(np.uint16).astype(np.uint32)
                                  | (r[:, 1].view(np.uint16).astype(np.uint32) << 16))
    with np.errstate(invalid="ignore", over="ignore"):
        s = np.where(r[:, 0] > r[:, 1], r[:, 0] - r[:, 1], np.fmax(r[:, 0], r[:, 1])) * np.float16(3)
    np.testing.assert_array_equal(out["o2"].view(np.uint16), s.astype(np.float16).view(np.uint16))
    assert np.isinf(r[1::4, 1]).all()            # 65504^2 overflows binary16


def test_16_bit_integer_ops_wrap(kernels):
    a = np.array([0, 1, 0xFFFF, 0x8000, 0x7FFF, 12345, 300, 7] * 8, np.uint16)
    b = np.array([-1, 5, -32768, 32767, 0, -7, 1000, 2] * 8, np.int16)
    out = _run(kernels, "hops", a=a, b=b, o=np.zeros(128, np.uint16))
    u, s = a.astype(np.int64), b.astype(np.int64)
    want0 = ((u * 3 + (u << 2)) & 0xFFFF) ^ ((s >> 3) & 0xFFFF)
    want1 = np.where(u > (s & 0xFFFF), u, (s - u) & 0xFFFF)
    np.testing.assert_array_equal(out["o"], np.concatenate([want0, want1]).astype(np.uint16))


def test_fp8_and_bf8_round_trips(kernels):
    import ml_dtypes
    rng = np.random.default_rng(2)
    a = (rng.standard_normal(256) * 40).astype(np.float32)
    a[:8] = [240.0, 250.0, -0.0, 1e-9, 57344.0, 1e6, np.nan, 2.0 ** -10]
    out = _run(kernels, "fp8", a=a, o=np.zeros(64, np.uint32), back=np.zeros(256, np.float32))
    q = a.reshape(64, 4)
    e4 = q[:, :2].astype(ml_dtypes.float8_e4m3fnuz).view(np.uint8).astype(np.uint32)
    e5 = q[:, 2:].astype(ml_dtypes.float8_e5m2fnuz).view(np.uint8).astype(np.uint32)
    word = e4[:, 0] | (e4[:, 1] << 8) | (e5[:, 0] << 16) | (e5[:, 1] << 24)
    np.testing.assert_array_equal(out["o"], word)
    back = out["back"].reshape(64, 4)
    dec4 = e4.astype(np.uint8).view(ml_dtypes.float8_e4m3fnuz).astype(np.float32)
    dec5 = e5.astype(np.uint8).view(ml_dtypes.float8_e5m2fnuz).astype(np.float32)
    np.testing.assert_array_equal(back[:, 0], dec4[:, 1])
    np.testing.assert_array_equal(back[:, 1], dec5[:, 1])
    np.testing.assert_array_equal(back[:, 2:], dec4)
    assert word[0] & 0xFF == 0x7F and word[1] & 0xFFFF == 0x8080     # 240 is e4m3fnuz's max; beyond: NaN


def test_double_division_sqrt_rounding_and_conversions(kernels):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(64) * 10
    b = rng.standard_normal(64) * 3
    a[:4] = [1e300, -0.0, 2.5, 7.0]
    b[:4] = [1e100, 3.0, 0.5, 7.0]
    ni = np.arange(64, dtype=np.int32)
    out = _run(kernels, "dmath", a=a, b=b, c=np.zeros(192), f=np.zeros(64, np.float32), ni=ni.copy())
    np.testing.assert_array_equal(out["c"][64:128], a / b)                 # IEEE division
    np.testing.assert_array_equal(out["c"][128:], np.sqrt(np.abs(a)))      # correctly rounded sqrt
    want = a / b + np.sqrt(np.abs(a)) * b + np.fmin(a, b) + np.floor(a) + np.trunc(b) + np.rint(a)
    np.testing.assert_allclose(out["c"][4:64], want[4:], rtol=1e-14, atol=1e-12)      # fma contractions
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out["f"], (a * b).astype(np.float32))
    with np.errstate(invalid="ignore"):
        whole = np.clip(np.trunc(a), -2.0 ** 31, 2.0 ** 31 - 1).astype(np.int64).astype(np.int32)
    np.testing.assert_array_equal(out["ni"], whole + (a < b) + ni)


def test_bf16_through_integer_ops_and_half4_math(kernels):
    import ml_dtypes
    bf = ml_dtypes.bfloat16
    rng = np.random.default_rng(3)
    a, b = ((rng.standard_normal(64) * 3).astype(bf) for _ in range(2))
    out = _run(kernels, "bfk", a=a.view(np.uint16), b=b.view(np.uint16), c=np.zeros(128, np.uint16),
               d=np.zeros(64, np.float32))
    x, y = a.astype(np.float32), b.astype(np.float32)
    np.testing.assert_array_equal(out["c"][:64], (x * y + x).astype(bf).view(np.uint16))   # fp32 fma, then RNE
    np.testing.assert_array_equal(out["c"][64:], (x / np.float32(3)).astype(bf).view(np.uint16))
    np.testing.assert_array_equal(out["d"], x - y)
    ha, hb = (rng.standard_normal(256).astype(np.float16) for _ in range(2))
    out = _run(kernels, "h4", a=ha, b=hb, c=np.zeros(256, np.float16), s=np.zeros(64, np.float32))
    z = np.maximum((ha.astype(np.float64) * hb - ha).astype(np.float16), hb)                # v_pk_fma_f16
    np.testing.assert_array_equal(out["c"], z)
    prod = (z.astype(np.float32) * ha.astype(np.float32)).reshape(64, 4)
    acc = np.zeros(64, np.float32)
    for k in range(4):
        acc = (acc.astype(np.float64) + prod[:, k]).astype(np.float32)
    np.testing.assert_array_equal(out["s"], acc)


def test_integers_to_half_and_bf16(kernels):
    import ml_dtypes
    rng = np.random.default_rng(4)
    a = rng.integers(-70000, 70000, 64).astype(np.int32)
    b = rng.integers(-32768, 32767, 64).astype(np.int16)
    a[:3] = [65519, 65520, -70000]
    out = _run(kernels, "cvh", a=a, b=b, h=np.zeros(64, np.float16), o=np.zeros(64, np.uint16))
    with np.errstate(over="ignore"):
        want = (a.astype(np.float16) + b.astype(np.float16)) + b.view(np.uint16).astype(np.float16)
    np.testing.assert_array_equal(out["h"].view(np.uint16), want.view(np.uint16))
    np.testing.assert_array_equal(out["o"], a.astype(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16))


def test_compiled_packs_put_each_token_in_its_half(kernels):
    """Tags on the fp32 inputs: each half of the packed output carries its own input's token."""
    a = np.linspace(-3, 3, 128).astype(np.float32)
    out = Buffer.empty("out", (64,), np.uint32)
    run = run_asm(kernels.kernel("topack"), grid=(1,), block=64,
                  args={"a": Buffer("a", a, {"token": np.arange(128)}), "out": out})
    assert run.findings == []
    np.testing.assert_array_equal(out.array, a.astype(np.float16).view(np.uint16).reshape(64, 2).astype(np.uint32)
                                  @ np.array([1, 1 << 16], np.uint32))
    mp = out.prov
    ids = (np.repeat(mp.ids["token"], mp.unit) if mp.unit > 1 else mp.ids["token"].reshape(-1))[:256].reshape(64, 4)
    lane = np.arange(64)[:, None]
    assert (ids == np.concatenate([np.repeat(2 * lane, 2, 1), np.repeat(2 * lane + 1, 2, 1)], 1)).all(), ids[1]
