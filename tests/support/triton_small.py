"""Small @triton.jit kernels for the gfxsim.triton tests (imported only where triton is present:
``need_triton()`` first)."""
import os

import pytest


def need_triton():
    """The triton module: skip when it is missing, fail when CI said it installed it."""
    try:
        import triton
    except ImportError as e:
        if os.environ.get("GFXSIM_REQUIRE_TRITON"):
            pytest.fail(f"GFXSIM_REQUIRE_TRITON is set but triton cannot be imported: {e}")
        pytest.skip(f"triton is not installed ({e}): pip install 'gfxsim[triton]'", allow_module_level=True)
    return triton


need_triton()
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    tl.store(out_ptr + offs, x + y, mask=m)


@triton.jit
def row_sum_unmasked(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    # each program sums one row of BLOCK columns, reading all BLOCK of them whatever ``cols`` says
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * cols + offs)
    tl.store(out_ptr + row, tl.sum(x, axis=0))


@triton.jit
def row_sum(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0))


@triton.jit
def transpose(x_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr):
    # a layout change of a 2D tile goes through LDS (metadata.shared bytes, sized at launch)
    r = tl.arange(0, R)
    c = tl.arange(0, C)
    x = tl.load(x_ptr + r[:, None] * C + c[None, :])
    tl.store(out_ptr + c[:, None] * R + r[None, :], tl.trans(x))


@triton.jit
def widen(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m).to(tl.float32) * 2, mask=m)


@triton.jit
def exp2(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.math.exp2(tl.load(x_ptr + offs)))


@triton.jit
def to_fp8(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m).to(tl.float8e4b8), mask=m)


@triton.jit
def scaled(x_ptr, y_ptr, neg, h, big, BLOCK: tl.constexpr):
    # a bool, a float and a 64-bit integer passed by value
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(y_ptr + offs, tl.where(neg, -x, x) * h + (big - 4294967296).to(tl.float32))


@triton.jit
def maybe_bias(x_ptr, b_ptr, y_ptr, n, BLOCK: tl.constexpr = 128):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    if b_ptr is not None:
        x += tl.load(b_ptr + offs, mask=m)
    tl.store(y_ptr + offs, x, mask=m)
