"""The compiled HIP twins (kernels_hip/) in the Python twins' place: `gfxsim run --frontend asm`.

``asm_kernel_fn(name)`` is a kernel function with the Python twin's signature that runs the HIP
twin's clang-compiled entry point on each wave (gfxsim.asm.run.run_wave), so the harnesses of
host.buffers and host.twins run it unchanged. The adapter between the two — which keywords pick
compile-time defines, which the HIP twins fix — lives here, with the twins; gfxsim.asm takes a
parsed kernel and knows nothing of projects or keywords.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from collections.abc import Callable
from gfxsim.errors import ArgumentError

if TYPE_CHECKING:       # the asm front end and the HIP build load when a twin first runs, not at start-up
    from gfxsim.hip.project import Project

# Python-twin keywords that the HIP twins fix at compile time (kernels_hip/int8_attention.h)
DEFINES = {"head_dim": ("GFXSIM_HEAD_DIM", 128), "block_size": ("GFXSIM_BLOCK_SIZE", 16)}
# keywords of the Python twins that only choose between equivalent Python index formulas, or
# that the standalone HIP twins fix: (allowed value, why)
FIXED = {"kvh": (0, "the standalone HIP twins read kv head 0"),
         "num_kv_heads": (1, "the standalone HIP twins' cache holds one kv head"),
         "max_blocks": (None, "the HIP twin reads the block table's first row"),
         "formula": ("derived", "the HIP twin's index formulas are compiled in"),
         "partition_size": (256, "the HIP decode's PARTITION_SIZE is compiled in"),
         "grouping": ("fragment", "the HIP twin has one grouping")}

# Workgroups side by side in a harness's launch with provenance. A batch that folds holds one
# member's register provenance per class (the numbers, records and stores are every member's), so
# it may hold as many as the Python decode's batch (a 16K decode's 512 workgroups: one batch). A
# batch that cannot fold holds the provenance of every VGPR and AGPR byte of every member, ~15 MiB
# a decode workgroup at head_dim 128 (2.3 GiB for 128), so it runs again in batches of
# UNFOLDED_BATCH. Without provenance a batch holds every workgroup.
PROVENANCE_BATCH = 512
UNFOLDED_BATCH = 128

# the kernels_hip/ entry point run in place of each Python twin
ASM_ENTRIES = {"qk_int8": "qk_int8", "int8_kv_cache": "int8_kv_cache", "pv_bf16": "pv_bf16",
               "pv_int8": {"grouping": {"fragment": "pv_int8_fragment", "contiguous": "pv_int8_contiguous"}},
               "prefix_prefill": "prefix_prefill",
               "paged_attention_decode": {"grouping": {"fragment": "paged_attention_decode_fragment",
                                                       "contiguous": "paged_attention_decode_contiguous"}}}
# the twins' second kernels (a harness's reduce launch), run by name
SECOND_KERNELS = ("paged_attention_reduce",)


@dataclass(frozen=True, eq=False)
class CompiledTwin:
    """A kernel function with ``python_kernel``'s signature, for gfxsim.launch and the harnesses,
    that runs the compiled HIP entry point ``entry`` of ``project`` on each wave instead: Buffers bind
    to the HIP arguments by name, a keyword that is a HIP argument becomes a scalar argument,
    head_dim/block_size select the compile-time defines (a build of their own), and any other
    keyword must have the value the HIP twin fixes. ``entry`` may also be ``{keyword: {value:
    entry}}``: the entry point chosen by a keyword (pv_int8's grouping).

    ``provenance_batch`` (gfxsim.machine.options.BatchBounded): with provenance, the harness runs
    at most this many workgroups side by side; ``unfolded_batch`` (UnfoldedBounded): at most this
    many where their provenance cannot fold."""
    entry: str | dict
    python_kernel: Callable
    project: Project
    provenance_batch: int = PROVENANCE_BATCH
    unfolded_batch: int = UNFOLDED_BATCH
    # one launch at a time: (entry, defines) -> (Program, AddressSpace, kernarg) of the launch's Machine
    _launches: dict = field(default_factory=dict, init=False, repr=False)
    # a workgroup's waves may run side by side (gfxsim.machine.wavemembers; run_wave refuses a
    # program whose accesses that run cannot watch, and the workgroup then runs serially)
    waves_as_members = True

    def __post_init__(self):
        # named as a function is (launch names its Run by __name__; the harnesses read the signature)
        shown = self.entry if not isinstance(self.entry, dict) else "|".join(next(iter(self.entry.values())).values())
        object.__setattr__(self, "__name__", f"{self.python_kernel.__name__}_asm")
        object.__setattr__(self, "__qualname__", f"CompiledTwin({shown})")
        object.__setattr__(self, "__signature__", inspect.signature(self.python_kernel))

    def __call__(self, w, *buffers, **kwargs):
        from gfxsim.asm.launch import LaunchError
        from gfxsim.asm.run import run_wave
        name = self._entry_for(kwargs)
        positional = [p.name for p in list(self.__signature__.parameters.values())[1:]
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if len(buffers) != len(positional):
            raise LaunchError(f"{name}: {len(buffers)} buffers for {self.python_kernel.__name__}'s {positional}")
        defines = tuple(f"{macro}={int(kwargs[k])}" for k, (macro, compiled) in DEFINES.items()
                        if k in kwargs and kwargs[k] != compiled)
        key = (name, defines)
        launches = self._launches
        if launches.get("machine") is not w.machine:
            launches.clear()                    # one launch at a time: drop the last one's state
            launches["machine"] = w.machine
        if key not in launches:
            launches[key] = self._bind(name, defines, w.arch.name, dict(zip(positional, buffers)), kwargs)
        program, space, kernarg = launches[key]
        run_wave(w, program, space, kernarg, w.wg.ids, (w.num_waves * w.lanes, 1, 1))

    def _entry_for(self, kwargs: dict) -> str:
        """The entry point to run (a chooser keyword, if any, taken out of ``kwargs``)."""
        from gfxsim.asm.launch import LaunchError
        if not isinstance(self.entry, dict):
            return self.entry
        (chooser, choices), = self.entry.items()
        params = inspect.signature(self.python_kernel).parameters
        value = kwargs.pop(chooser, params[chooser].default if chooser in params else None)
        if value not in choices:
            raise LaunchError(f"{self.python_kernel.__name__}: {chooser}={value!r} has no compiled entry point "
                              f"(one of {', '.join(map(repr, choices))})")
        return choices[value]

    def _bind(self, name: str, defines: tuple, arch: str, args: dict, kwargs: dict):
        """The entry point built (with ``defines``) and its arguments bound: (Program, space, kernarg)."""
        from gfxsim.asm.launch import LaunchError
        from gfxsim.asm.run import address_space, program_of
        from gfxsim.hip.build import find_kernel
        project = self.project
        if defines:                              # a build of their own beside the project's
            project = project.with_build(project.build.parent / (project.build.name + "-" + "-".join(
                d.lower().replace("gfxsim_", "").replace("=", "") for d in defines)))
        program = program_of(find_kernel(name, arch, project=project, defines=defines))
        names = {a.name for a in program.abi.args}
        for k, v in kwargs.items():
            if k in names:
                args[k] = v
            elif k in FIXED and v != FIXED[k][0]:
                raise LaunchError(f"{name}: {k}={v!r} does not apply ({FIXED[k][1]}: {k}={FIXED[k][0]!r})")
            elif k not in FIXED and k not in DEFINES:
                raise LaunchError(f"{name}: keyword {k}={v!r} of {self.python_kernel.__name__} has no HIP argument "
                                  f"or define")
        extra = set(args) - names
        if extra:
            raise LaunchError(f"{name} has no argument {', '.join(sorted(extra))}")
        space, kernarg = address_space(program, args)
        return program, space, kernarg


def hip_project() -> Project:
    """This checkout's HIP twins (kernels_hip/) and their builds (build/hip/): what --frontend asm runs."""
    from gfxsim.hip.project import Project
    root = Path(__file__).resolve().parents[2]
    return Project(root / "kernels_hip", root / "build" / "hip")


def asm_kernel_fn(kernel: str) -> CompiledTwin:
    """The compiled HIP twin of ``kernel`` as a kernel function with the Python twin's signature."""
    if kernel not in ASM_ENTRIES and kernel not in SECOND_KERNELS:
        raise ArgumentError(f"--frontend asm runs {', '.join(sorted(ASM_ENTRIES))}; {kernel} is not wired to the asm "
                         "front end yet")
    from kernels_py import int8_kv_cache, paged_attention_decode, prefix_prefill, pv_bf16, pv_int8, qk_int8
    python = {"qk_int8": qk_int8.qk_int8, "int8_kv_cache": int8_kv_cache.int8_kv_cache, "pv_bf16": pv_bf16.pv_bf16,
              "pv_int8": pv_int8.pv_int8, "prefix_prefill": prefix_prefill.prefix_prefill,
              "paged_attention_decode": paged_attention_decode.paged_attention_decode,
              "paged_attention_reduce": paged_attention_decode.paged_attention_reduce}[kernel]
    return CompiledTwin(ASM_ENTRIES.get(kernel, kernel), python, hip_project())


__all__ = ["CompiledTwin", "asm_kernel_fn", "hip_project", "ASM_ENTRIES", "DEFINES", "FIXED", "PROVENANCE_BATCH",
           "UNFOLDED_BATCH"]
