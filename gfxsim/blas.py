"""The BLAS thread pool while a run simulates: one thread.

A run simulates on one core while its numpy references run on another (kernels_py.host.runners).
OpenBLAS's own threads spin while they wait for work, so every small GEMM of the simulation (one per
matrix-instruction statement) or of a reference took the other core from whoever had it: a 16K
decode spent a third more CPU, and its wall time with it. ``one_blas_thread()`` holds the BLAS
pools of this process at one thread for the duration and restores them after.
"""
from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def one_blas_thread():
    """Hold every BLAS pool of the process (OpenBLAS, MKL, BLIS, as threadpoolctl finds them) at one
    thread inside the block; the previous sizes are restored on exit."""
    from threadpoolctl import threadpool_limits
    with threadpool_limits(limits=1, user_api="blas"):
        yield


__all__ = ["one_blas_thread"]
