"""The configuration of one `gfxsim run`: a frozen, keyword-only record validated once, on creation.

``RunConfig()`` holds the defaults (what the CLI's options default to); ``RunConfig(context=300,
grouping="contiguous")`` overrides some; a bad value is a ValueError naming its option. The CLI
builds one per context from its options (kernels_py.cli.run_config) and hands it to run_kernel,
which passes it to the kernel's runner; the harnesses take the values they need as keywords.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal, get_args
from collections.abc import Callable

from kernels_py.reference.int8_cache import BLOCK_SIZES, HEAD_DIMS
from gfxsim.errors import ArgumentError

Grouping = Literal["fragment", "contiguous"]
Formula = Literal["derived", "gfx936", "gfx942"]
Frontend = Literal["python", "asm"]
GROUPINGS = get_args(Grouping)
FORMULAS = get_args(Formula)
FRONTENDS = get_args(Frontend)
PARTITION = 256                       # 4 waves x 64 tokens: the decode's smallest partition


def check_gqa(num_heads: int, num_kv_heads: int, what: str = "num_heads {h} / num_kv_heads {kv}") -> None:
    """The GQA rule every attention harness shares: an integer ratio of 1..16 query heads per kv head."""
    if num_kv_heads < 1 or num_heads % num_kv_heads or not 1 <= num_heads // num_kv_heads <= 16:
        raise ArgumentError(f"{what.format(h=num_heads, kv=num_kv_heads)}: the GQA ratio must be an integer 1..16")


def check_partition_size(partition_size: int, what: str = "partition_size") -> None:
    if partition_size < PARTITION or partition_size % PARTITION:
        raise ArgumentError(f"{what} must be a multiple of {PARTITION} (4 waves x 64 tokens), got {partition_size}")


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """What one run_kernel call runs: shapes of the generated data, kernel choices, how it runs."""
    arch: str = "gfx936"
    context: int = 4096
    grouping: Grouping = "fragment"
    smooth_k: bool = True
    heads: int = 8
    kv_heads: int = 1
    head_dim: int = 128
    block_size: int = 16
    seed: int = 0
    partition_size: int = PARTITION
    formula: Formula = "derived"
    provenance: bool = True
    # how it runs, not what: left out of the report's params and of equality
    frontend: Frontend = field(default="python", compare=False)    # asm: the compiled HIP twin in its place
    trace: bool = field(default=False, compare=False)              # keep the full per-lane trace
    schedule: str = field(default="in-order", compare=False)       # wave order between barriers (schedule.py)
    # your kernel (a function, or "FILE.py:FN") in the project's place; run_kernel loads a file's
    kernel_fn: str | Callable | None = field(default=None, compare=False, repr=False)
    reduce_fn: str | Callable | None = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        from gfxsim.arch import get_arch
        get_arch(self.arch)
        if self.grouping not in GROUPINGS:
            raise ArgumentError(f"--grouping must be fragment or contiguous, got {self.grouping!r}")
        if self.formula not in FORMULAS:
            raise ArgumentError(f"--formula must be one of {', '.join(FORMULAS)}, got {self.formula!r}")
        if self.frontend not in FRONTENDS:
            raise ArgumentError(f"--frontend must be python or asm, got {self.frontend!r}")
        if self.frontend == "asm" and (self.kernel_fn is not None or self.reduce_fn is not None):
            flag = "--kernel-fn" if self.kernel_fn is not None else "--reduce-fn"
            raise ArgumentError(f"--frontend asm runs the compiled twin: it does not take {flag}")
        for name in ("kernel_fn", "reduce_fn"):
            fn = getattr(self, name)
            if fn is not None and not isinstance(fn, str) and not callable(fn):
                raise ArgumentError(f"{name} must be a function or 'FILE.py:FN', got {type(fn).__name__}")
        if self.schedule != "in-order":     # the default is valid: the machine need not load to say so
            from gfxsim.machine.schedule import parse_schedule     # (`gfxsim run` begins its inputs first)
            try:
                parse_schedule(self.schedule)
            except ArgumentError as e:
                raise ArgumentError(f"--{e}") from None
        if self.head_dim not in HEAD_DIMS:
            raise ArgumentError(f"--head-dim must be 64 or 128, got {self.head_dim}")
        if self.block_size not in BLOCK_SIZES:
            raise ArgumentError(f"--block-size must be 16 or 32, got {self.block_size}")
        check_partition_size(self.partition_size, "--partition-size")
        if self.context < 1:
            raise ArgumentError(f"--context must be >= 1, got {self.context}")
        if self.seed < 0:
            raise ArgumentError(f"--seed must be >= 0, got {self.seed}")
        check_gqa(self.heads, self.kv_heads, "--heads {h} / --kv-heads {kv}")

    @classmethod
    def names(cls) -> tuple:
        """The fields run_kernel takes as keywords (the shape and kernel choices)."""
        return tuple(f.name for f in dataclasses.fields(cls) if f.compare and f.name not in ("formula", "provenance"))

    def replace(self, **changes) -> RunConfig:
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


# ---- launch geometry: the keywords each harness passes its kernel, one record per harness ------

def _check_head_dim(what: str, head_dim: int) -> None:
    if head_dim not in HEAD_DIMS:
        raise ArgumentError(f"{what}: head_dim {head_dim} not in {HEAD_DIMS}")


def _check_block_size(what: str, block_size: int) -> None:
    if block_size not in BLOCK_SIZES:
        raise ArgumentError(f"{what}: block_size {block_size} not in {BLOCK_SIZES}")


class _Geometry:
    """The kernel keywords of a harness: ``kwargs()`` is what HostSetup passes to the kernel."""

    def kwargs(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.metadata.get("launch", True)}


def _harness(name: str):
    """The field naming the harness in error messages; not a kernel keyword."""
    return field(default=name, metadata={"launch": False})


@dataclass(frozen=True, kw_only=True)
class StandaloneGeometry(_Geometry):
    """qk_int8, pv_int8, pv_bf16: 16 query rows against kv head 0 of sequence 0."""
    context_len: int
    head_dim: int
    block_size: int
    num_kv_heads: int
    harness: str = _harness("qk/pv")

    def __post_init__(self):
        _check_head_dim(self.harness, self.head_dim)
        _check_block_size(self.harness, self.block_size)
        if self.context_len < 1 or self.num_kv_heads < 1:
            raise ArgumentError(f"context_len {self.context_len} and num_kv_heads {self.num_kv_heads} must be >= 1")


@dataclass(frozen=True, kw_only=True)
class PrefillGeometry(_Geometry):
    """prefix_prefill of one sequence: query_len new queries at the end of context_len tokens."""
    context_len: int
    query_len: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    block_size: int

    def __post_init__(self):
        _check_head_dim("prefix_prefill", self.head_dim)
        _check_block_size("prefix_prefill", self.block_size)
        if self.num_heads % self.num_kv_heads:
            raise ArgumentError(f"num_heads {self.num_heads} is not a multiple of num_kv_heads {self.num_kv_heads}")
        if not 1 <= self.query_len <= self.context_len:
            raise ArgumentError(f"num_queries {self.query_len} must be 1..context_len {self.context_len}")


@dataclass(frozen=True, kw_only=True)
class DecodeGeometry(_Geometry):
    """paged_attention_decode: grid (num_seqs, max_partitions, num_kv_heads)."""
    num_heads: int
    num_kv_heads: int
    head_dim: int
    block_size: int
    max_blocks: int
    max_partitions: int
    partition_size: int

    def __post_init__(self):
        check_partition_size(self.partition_size)
        check_gqa(self.num_heads, self.num_kv_heads)
        _check_head_dim("paged_attention_decode", self.head_dim)
        _check_block_size("paged_attention_decode", self.block_size)

    def reduce(self) -> ReduceGeometry:
        """The geometry of the second launch, paged_attention_reduce."""
        return ReduceGeometry(num_heads=self.num_heads, head_dim=self.head_dim, max_partitions=self.max_partitions,
                              partition_size=self.partition_size)


@dataclass(frozen=True, kw_only=True)
class ReduceGeometry(_Geometry):
    """paged_attention_reduce: grid (num_heads, num_seqs)."""
    num_heads: int
    head_dim: int
    max_partitions: int
    partition_size: int


@dataclass(frozen=True, kw_only=True)
class KVCacheGeometry(_Geometry):
    """int8_kv_cache, the producer: grid (num_tokens, num_kv_heads)."""
    num_kv_heads: int
    head_dim: int
    block_size: int

    def __post_init__(self):
        _check_head_dim("int8_kv_cache", self.head_dim)
        _check_block_size("int8_kv_cache", self.block_size)
