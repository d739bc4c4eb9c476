"""The configuration of one `gfxsim run`: a frozen, keyword-only record validated once, on creation.

``RunConfig()`` holds the defaults (what the CLI's options default to); ``RunConfig(context=300,
grouping="contiguous")`` overrides some; a bad value is a ValueError naming its option. The runners,
run_kernel and the CLI read the fields; the harnesses take the values they need as keywords.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from kernels_py.reference.int8_cache import BLOCK_SIZES, HEAD_DIMS

GROUPINGS = ("fragment", "contiguous")
FORMULAS = ("derived", "gfx936", "gfx942")
PARTITION = 256                       # 4 waves x 64 tokens: the decode's smallest partition


def check_gqa(num_heads: int, num_kv_heads: int, what: str = "num_heads {h} / num_kv_heads {kv}") -> None:
    """The GQA rule every attention harness shares: an integer ratio of 1..16 query heads per kv head."""
    if num_kv_heads < 1 or num_heads % num_kv_heads or not 1 <= num_heads // num_kv_heads <= 16:
        raise ValueError(f"{what.format(h=num_heads, kv=num_kv_heads)}: the GQA ratio must be an integer 1..16")


def check_partition_size(partition_size: int, what: str = "partition_size") -> None:
    if partition_size < PARTITION or partition_size % PARTITION:
        raise ValueError(f"{what} must be a multiple of {PARTITION} (4 waves x 64 tokens), got {partition_size}")


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """What one run_kernel call runs: shapes of the generated data, kernel choices, how it runs."""
    arch: str = "gfx936"
    context: int = 4096
    grouping: str = "fragment"
    smooth_k: bool = True
    heads: int = 8
    kv_heads: int = 1
    head_dim: int = 128
    block_size: int = 16
    seed: int = 0
    partition_size: int = PARTITION
    formula: str = "derived"
    provenance: bool = True
    # how it runs, not what: left out of the report's params and of equality
    progress: Any = field(default=None, compare=False, repr=False)
    kernel_fn: Optional[Callable] = field(default=None, compare=False, repr=False)
    reduce_fn: Optional[Callable] = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        from gfxsim.arch import get_arch
        get_arch(self.arch)
        if self.grouping not in GROUPINGS:
            raise ValueError(f"--grouping must be fragment or contiguous, got {self.grouping!r}")
        if self.formula not in FORMULAS:
            raise ValueError(f"--formula must be one of {', '.join(FORMULAS)}, got {self.formula!r}")
        if self.head_dim not in HEAD_DIMS:
            raise ValueError(f"--head-dim must be 64 or 128, got {self.head_dim}")
        if self.block_size not in BLOCK_SIZES:
            raise ValueError(f"--block-size must be 16 or 32, got {self.block_size}")
        check_partition_size(self.partition_size, "--partition-size")
        if self.context < 1:
            raise ValueError(f"--context must be >= 1, got {self.context}")
        if self.seed < 0:
            raise ValueError(f"--seed must be >= 0, got {self.seed}")
        check_gqa(self.heads, self.kv_heads, "--heads {h} / --kv-heads {kv}")

    @classmethod
    def names(cls) -> tuple:
        """The fields run_kernel takes as keywords (the shape and kernel choices)."""
        return tuple(f.name for f in dataclasses.fields(cls) if f.compare and f.name not in ("formula", "provenance"))

    def replace(self, **changes) -> "RunConfig":
        """A copy with ``changes``, validated again."""
        return dataclasses.replace(self, **changes)

    def shape(self) -> dict:
        """The keywords of prepare_inputs: what generated data is made of."""
        return dict(context=self.context, heads=self.heads, kv_heads=self.kv_heads, head_dim=self.head_dim,
                    seed=self.seed)

    def params(self) -> dict:
        """The report's params: every choice but the arch and context (reported beside them)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.compare and f.name not in ("arch", "context", "provenance")}
