"""out = x + y over n elements, BLOCK per program, the tail masked."""
from __future__ import annotations

import numpy as np
import triton
import triton.language as tl


@triton.jit
def vector_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def reference(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return x + y
