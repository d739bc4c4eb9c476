"""Run a kernel on the simulator with its references, and report what happened.

``run_kernel(name, ...)`` prepares the inputs (generated or the user's), builds the INT8 cache, runs
the Python twin on the wave64 machine, computes the numpy references and returns a KernelRun whose
``report()`` is the JSON of ``gfxsim run``: metrics, one entry per matrix instruction and the findings.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from . import reference as R
from .data import make_attention_inputs
from .int8_cache_ref import build_paged_cache

DEFAULTS = dict(arch="gfx936", context=4096, grouping="fragment", smooth_k=True, heads=8, kv_heads=1, head_dim=128,
                block_size=16, seed=0, partition_size=256)


@dataclass
class KernelRun:
    kernel: str
    arch: str
    context: int
    params: dict
    out: np.ndarray                  # what the kernel wrote
    refs: dict                       # name -> reference output of the same shape
    runs: list                       # gfxsim Runs (kernel, then e.g. the reduce kernel)
    extra_metrics: dict = field(default_factory=dict)

    @property
    def run(self):
        return self.runs[0]

    @property
    def findings(self):
        return [f for r in self.runs for f in r.findings]

    def mmacs(self):
        return [m for r in self.runs for m in r.mmacs()]

    def metrics(self) -> dict:
        m = {f"vs_{name}": R.metrics(self.out, ref) for name, ref in self.refs.items()}
        m.update(self.extra_metrics)
        return m

    def checks(self) -> dict:
        """Which finding kinds did not run (provenance off: the provenance-based ones), so that an
        empty findings list does not claim more than was checked."""
        not_run = sorted({k for r in self.runs for k in r.checks_not_run})
        why = {"provenance off" for r in self.runs if not r.machine.provenance}
        why |= {v for r in self.runs for v in r.machine.not_checked.values()}
        return {"not_run": not_run, "reason": "; ".join(sorted(why)) if not_run else None}

    def report(self) -> dict:
        mm = []
        for r in self.runs:                     # one compact record per issued instruction
            for rec in r.machine.mma_log.records:
                a, b = rec.k_slots("A"), rec.k_slots("B")
                a = a.tolist() if a is not None else None
                b = b.tolist() if b is not None else None
                first, op, label, wgs, wave, src = rec.first, rec.op, rec.label, rec.workgroups, rec.wave, rec.source
                mm.extend({"index": first + m, "instruction": op, "label": label, "workgroup": list(wgs[m]),
                           "wave": wave, "source": src, "a_tokens": a[m] if a is not None else [],
                           "b_tokens": b[m] if b is not None else []} for m in rec.live)
        return {"kernel": self.kernel, "arch": self.arch, "context": self.context, "params": self.params,
                "metrics": self.metrics(), "mmacs": mm, "findings": [f.to_dict() for f in self.findings],
                "checks": self.checks(), "seconds": round(sum(r.seconds for r in self.runs), 3)}


def prepare_inputs(*, context, heads, kv_heads, head_dim, seed, inputs=None, num_queries=None):
    """The attention inputs: the user's arrays (validated by kernels_py.inputs) or generated ones."""
    if inputs is not None:
        return inputs
    return make_attention_inputs(seed=seed, num_seqs=1, num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
                                 context_lens=[context], num_queries=num_queries)


def _decode(p, inputs, trace):
    from .host import run_decode
    d = prepare_inputs(inputs=inputs, **{k: p[k] for k in ("context", "heads", "kv_heads", "head_dim", "seed")})
    if d["q"].ndim != 3:
        raise ValueError(f"paged_attention_decode needs q [num_seqs, num_heads, head_dim], got {d['q'].shape}")
    cache = build_paged_cache(d["k"], d["v"], d["context_lens"], block_size=p["block_size"], smooth_k=p["smooth_k"],
                              block_tables=d.get("block_tables"), seed=p["seed"])
    kw = {"kernel": p["kernel_fn"]} if p.get("kernel_fn") else {}
    if p.get("reduce_fn"):
        kw["reduce_kernel"] = p["reduce_fn"]
    with ThreadPoolExecutor(1) as pool:          # the references beside the simulation (numpy frees the GIL)
        refs_done = pool.submit(_decode_references, d, cache, p)
        res = run_decode(d["q"], cache, arch=p["arch"], grouping=p["grouping"], formula=p["formula"], trace=trace,
                         provenance=p["provenance"], partition_size=p["partition_size"], progress=p.get("progress"),
                         **kw)
        refs, plain = refs_done.result()
    extra = {}
    if plain is not None:       # metrics here: np.errstate (the caller's) does not reach another thread
        extra["reference_int8_without_smooth_k_vs_bf16"] = R.metrics(plain, refs["bf16"])
    return res.out, refs, res.runs, extra, int(d["context_lens"].max())


def _decode_references(d, cache, p):
    """fp32, BF16 and reference-INT8 outputs of the decode, and the INT8 math without smooth-K
    (None when smooth-K is off)."""
    refs = {"fp32": R.attention_fp32(d["q"], d["k"], d["v"], d["context_lens"]),
            "bf16": R.attention_bf16(d["q"], d["k"], d["v"], d["context_lens"]),
            "reference_int8": R.attention_int8(d["q"], cache, grouping=p["grouping"],
                                               partition_size=p["partition_size"])}
    if not p["smooth_k"]:
        return refs, None
    # the same quantized math without smooth-K, so the report shows what smooth-K buys
    plain = build_paged_cache(d["k"], d["v"], d["context_lens"], block_size=p["block_size"], smooth_k=False,
                              block_tables=d.get("block_tables"), seed=p["seed"])
    return refs, R.attention_int8(d["q"], plain, grouping=p["grouping"])


KERNELS: dict[str, Callable] = {
    "paged_attention_decode": _decode,
}


def register(name: str, fn: Callable) -> None:
    """Add a kernel runner: fn(params, inputs, trace) -> (out, refs, runs, extra_metrics, context).
    ``params["kernel_fn"]`` is the user's kernel function to run in place of the harness's (or None)."""
    KERNELS[name] = fn


# the runners whose harness has a second kernel the user may swap (--reduce-fn)
REDUCE_KERNELS = {"paged_attention_decode": "paged_attention_reduce"}


def load_kernel_fn(spec: str, option: str = "--kernel-fn") -> Callable:
    """The function ``FN`` of the Python file ``FILE`` named by ``spec`` = "FILE:FN" (the file is
    imported as a module of its own, by path). Every failure is a ValueError of one line naming
    ``option``, the file or the function: a spec without ":FN", a missing file, a file that fails
    to import (with the exception), no such function, or a name that is not callable."""
    import importlib.util
    import os
    import sys
    if not isinstance(spec, str) or ":" not in spec or spec.endswith(":") or spec.startswith(":"):
        raise ValueError(f"{option} {spec!r}: expected FILE.py:FUNCTION, e.g. my_pv.py:my_pv_int8")
    path, fn_name = spec.rsplit(":", 1)
    if not os.path.isfile(path):
        what = "is a directory" if os.path.isdir(path) else "no such file"
        raise ValueError(f"{option}: {path}: {what}")
    mod_name = "gfxsim_user_kernel_" + "".join(c if c.isalnum() else "_" for c in os.path.abspath(path))
    try:
        loader_spec = importlib.util.spec_from_file_location(mod_name, path)
        if loader_spec is None or loader_spec.loader is None:
            raise ImportError("not a Python source file")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[mod_name] = module              # dataclasses and pickling look modules up by name
        loader_spec.loader.exec_module(module)
    except Exception as e:                          # noqa: BLE001 -- anything the user's file raises
        sys.modules.pop(mod_name, None)
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise ValueError(f"{option}: {path} failed to import: {type(e).__name__}"
                         f"{': ' + first if first else ''}") from e
    if not hasattr(module, fn_name):
        defined = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
                         and getattr(v, "__module__", None) == mod_name)
        raise ValueError(f"{option}: {path} has no function {fn_name!r}"
                         f"{'; it defines ' + ', '.join(defined) if defined else ''}")
    fn = getattr(module, fn_name)
    if not callable(fn):
        raise ValueError(f"{option}: {path}:{fn_name} is a {type(fn).__name__}, not a function")
    return fn


def kernel_fn_label(fn) -> str | None:
    """How a report names a swap-in kernel: "FILE:FN" as given, else the function's module:name."""
    if fn is None:
        return None
    if isinstance(fn, str):
        return fn
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', getattr(fn, '__name__', '?'))}"


# --frontend asm: the kernels_hip/ entry point run in place of each Python twin (gfxsim.asm)
ASM_ENTRIES = {"qk_int8": "qk_int8", "int8_kv_cache": "int8_kv_cache", "pv_bf16": "pv_bf16",
               "pv_int8": {"grouping": {"fragment": "pv_int8_fragment", "contiguous": "pv_int8_contiguous"}},
               "prefix_prefill": "prefix_prefill",
               "paged_attention_decode": {"grouping": {"fragment": "paged_attention_decode_fragment",
                                                       "contiguous": "paged_attention_decode_contiguous"}}}


def asm_kernel_fn(kernel: str):
    """The compiled HIP twin of ``kernel`` as a kernel function with the Python twin's signature."""
    if kernel not in ASM_ENTRIES and kernel not in REDUCE_KERNELS.values():
        raise ValueError(f"--frontend asm runs {', '.join(sorted(ASM_ENTRIES))}; {kernel} is not wired to the asm "
                         "front end yet")
    from gfxsim.asm.run import twin_kernel
    from . import int8_kv_cache, paged_attention_decode, prefix_prefill, pv_bf16, pv_int8, qk_int8
    python = {"qk_int8": qk_int8.qk_int8, "int8_kv_cache": int8_kv_cache.int8_kv_cache, "pv_bf16": pv_bf16.pv_bf16,
              "pv_int8": pv_int8.pv_int8, "prefix_prefill": prefix_prefill.prefix_prefill,
              "paged_attention_decode": paged_attention_decode.paged_attention_decode,
              "paged_attention_reduce": paged_attention_decode.paged_attention_reduce}[kernel]
    return twin_kernel(ASM_ENTRIES.get(kernel, kernel), python, project=hip_project())


def hip_project():
    """This checkout's HIP twins (kernels_hip/) and their builds (build/hip/): what --frontend asm runs."""
    from pathlib import Path

    from gfxsim.hip.project import Project
    root = Path(__file__).resolve().parents[1]
    return Project(root / "kernels_hip", root / "build" / "hip")


def run_kernel(kernel: str, *, inputs=None, trace: bool = False, formula: str = "derived", provenance: bool = True,
               progress=None, kernel_fn=None, reduce_fn=None, frontend: str = "python", **params) -> KernelRun:
    """Run ``kernel`` with DEFAULTS overridden by ``params``. ``provenance=False`` runs faster and
    gives the numbers only: no tags travel, so no K-slot, scale-group or coverage findings.
    ``progress``: a gfxsim.progress.Progress told of every launch (runners read ``params["progress"]``).
    ``kernel_fn``: your kernel function (or "FILE.py:FN", loaded by load_kernel_fn) with the
    signature of ``kernel``'s, run in its place by the same harness (inputs, buffers, references);
    for paged_attention_decode it replaces the decode kernel, the reduce stays. ``reduce_fn``
    (paged_attention_decode only): your function with paged_attention_reduce's signature, run as
    the second launch. ``frontend="asm"``: run the clang-compiled HIP twin (kernels_hip/) on the
    asm front end in the Python twin's place, with the same harness."""
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}; kernels: {', '.join(sorted(KERNELS))}")
    if frontend not in ("python", "asm"):
        raise ValueError(f"--frontend must be python or asm, got {frontend!r}")
    if frontend == "asm":
        if kernel_fn is not None:
            raise ValueError("--frontend asm runs the compiled twin: it does not take --kernel-fn")
        kernel_fn = asm_kernel_fn(kernel)
        if kernel in REDUCE_KERNELS:
            if reduce_fn is not None:
                raise ValueError("--frontend asm runs the compiled twins: it does not take --reduce-fn")
            reduce_fn = asm_kernel_fn(REDUCE_KERNELS[kernel])
    label = kernel_fn_label(kernel_fn) if frontend == "python" else None
    if isinstance(kernel_fn, str):
        kernel_fn = load_kernel_fn(kernel_fn)
    elif kernel_fn is not None and not callable(kernel_fn):
        raise ValueError(f"kernel_fn must be a function or 'FILE.py:FN', got {type(kernel_fn).__name__}")
    reduce_label = kernel_fn_label(reduce_fn) if frontend == "python" else None
    if reduce_fn is not None and kernel not in REDUCE_KERNELS:
        raise ValueError(f"--reduce-fn: {kernel} has no second kernel to swap (only "
                         f"{', '.join(f'{k} ({v})' for k, v in REDUCE_KERNELS.items())})")
    if isinstance(reduce_fn, str):
        reduce_fn = load_kernel_fn(reduce_fn, "--reduce-fn")
    elif reduce_fn is not None and not callable(reduce_fn):
        raise ValueError(f"reduce_fn must be a function or 'FILE.py:FN', got {type(reduce_fn).__name__}")
    p = dict(DEFAULTS)
    unknown = set(params) - set(p)
    if unknown:
        raise ValueError(f"unknown parameter(s) {sorted(unknown)}; known: {sorted(p)}")
    p.update(params)
    p["formula"] = formula
    p["provenance"] = provenance
    p["progress"] = progress
    p["kernel_fn"] = kernel_fn
    p["reduce_fn"] = reduce_fn
    _validate(p)
    out, refs, runs, extra, ctx = KERNELS[kernel](p, inputs, trace)
    shown = {k: v for k, v in p.items()
             if k not in ("arch", "context", "provenance", "progress", "kernel_fn", "reduce_fn")}
    if label is not None:
        shown["kernel_fn"] = label
    if frontend != "python":
        shown["frontend"] = frontend
    if reduce_label is not None:
        shown["reduce_fn"] = reduce_label
    return KernelRun(kernel, runs[0].arch, ctx, shown, out, refs, runs, extra)


def _validate(p):
    from gfxsim.arch import get_arch
    get_arch(p["arch"])
    if p["grouping"] not in ("fragment", "contiguous"):
        raise ValueError(f"--grouping must be fragment or contiguous, got {p['grouping']!r}")
    if p["head_dim"] not in (64, 128):
        raise ValueError(f"--head-dim must be 64 or 128, got {p['head_dim']}")
    if p["block_size"] not in (16, 32):
        raise ValueError(f"--block-size must be 16 or 32, got {p['block_size']}")
    if p["partition_size"] < 256 or p["partition_size"] % 256:
        raise ValueError(f"--partition-size must be a multiple of 256 (4 waves x 64 tokens), got {p['partition_size']}")
    if p["context"] < 1:
        raise ValueError(f"--context must be >= 1, got {p['context']}")
    if p["kv_heads"] < 1 or p["heads"] % p["kv_heads"] or not 1 <= p["heads"] // p["kv_heads"] <= 16:
        raise ValueError(f"--heads {p['heads']} / --kv-heads {p['kv_heads']}: the GQA ratio must be an integer 1..16")


from . import host_twins  # noqa: E402,F401  registers qk_int8, pv_int8, pv_bf16, prefix_prefill, int8_kv_cache
from . import sage_runs  # noqa: E402,F401  registers sage_attention (sm_89/sm_90)
