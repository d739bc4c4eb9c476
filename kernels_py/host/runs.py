"""Run a kernel on the simulator with its references, and report what happened.

``run_kernel(name, ...)`` prepares the inputs (generated or the user's), builds the INT8 cache, runs
the Python twin on the wave64 machine, computes the numpy references and returns a KernelRun whose
``report()`` is the JSON of ``gfxsim run``: metrics, one entry per matrix instruction and the findings.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from collections.abc import Callable

import numpy as np

from kernels_py.host.config import RunConfig
from kernels_py.host.hip_twins import asm_kernel_fn
from kernels_py.host.runners import KERNELS, NUMPY_TWINS, REDUCE_KERNELS, Swap
from kernels_py.reference import attention as R
from gfxsim.errors import ArgumentError

DEFAULTS = RunConfig()            # the defaults of every run option (RunConfig's field defaults)


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
    metrics_ahead: R.MetricsAhead | None = field(default=None, repr=False, compare=False)   # begun beside the kernel

    @property
    def run(self):
        return self.runs[0]

    @property
    def findings(self):
        return [f for r in self.runs for f in r.findings]

    def mmacs(self):
        return [m for r in self.runs for m in r.mmacs()]

    def mmac_count(self) -> int:
        return sum(r.mmac_count() for r in self.runs)

    def mmacs_carrying(self, operand: str, field: str = "token"):
        """The matrix instructions whose ``operand`` carries ``field`` values, in order, made lazily
        (a 16K decode has 65,536 events: the text report shows two)."""
        for r in self.runs:
            yield from r.mmacs_carrying(operand, field)

    def metrics(self) -> dict:
        m = {f"vs_{name}": got for name, got in R.metrics_against(self.out, self.refs, self.metrics_ahead).items()}
        m.update(self.extra_metrics)
        return m

    def checks(self) -> dict:
        """Which finding kinds did not run (provenance off: the provenance-based ones), so that an
        empty findings list does not claim more than was checked."""
        not_run = sorted({k for r in self.runs for k in r.checks_not_run})
        why = {v for r in self.runs for v in r.checks_not_run_why}
        unknown = [f for f in self.findings if f.kind == "kslot-unknown-origin"]
        # K slots fed by bytes whose tokens gfxsim could not follow: their tokens were not checked
        out = {"not_run": not_run, "reason": "; ".join(sorted(why)) if not_run else None}
        if "kslot-unknown-origin" not in not_run:
            out["kslots_of_unknown_origin"] = sum(len(f.details.get("slots", ())) * f.details.get("count", 1)
                                                  for f in unknown)
        return out

    def report(self, token_arrays: bool = False, json_rows: bool | bytes = False) -> dict:
        """The report as a dict. ``token_arrays``: each instruction's a_tokens / b_tokens as a numpy
        int64 row rather than a list (what the JSON writer serializes directly: a 16K decode's
        table is 4M tokens, which as Python ints cost ~1 s and ~150 MB); an empty list where none
        were recorded. ``json_rows``: ``mmacs`` as its JSON text already written (an
        orjson.Fragment: 65,536 rows at 16K as one dict each took ~0.1 s to build and as long to
        write); bytes: that JSON text in their place (``gfxsim run --report json`` writes the rows
        there as made, kernels_py.cli.write_json_report)."""
        out = {"kernel": self.kernel, "arch": self.arch, "context": self.context, "params": self.params,
               "metrics": self.metrics(),
               "mmacs": self._mmacs_json() if json_rows is True else _fragment(json_rows) if json_rows
               else self._mmacs(token_arrays),
               "findings": [f.to_dict() for f in self.findings], "checks": self.checks(),
               "seconds": round(sum(r.seconds for r in self.runs), 3),
               "approximated": {m: v for r in self.runs for m, v in r.approximations.items()}}
        lane = [r.lane_instructions for r in self.runs]
        if any(x is not None for x in lane):    # --frontend asm: active lanes x instructions executed
            out["lane_instructions"] = int(sum(x or 0 for x in lane))
        return out

    def _mmacs(self, token_arrays: bool) -> list:
        """One dict per issued instruction and live workgroup (report's ``mmacs``)."""
        mm = []
        wgs, wgl = None, None                   # a batch's workgroup ids as lists, made once per batch
        none = []       # no tokens recorded (provenance off): the JSON writer takes an empty list ~1.6x
        #                 faster than an empty numpy row (65,536 rows at 16K)
        for r in self.runs:                     # one compact record per issued instruction
            for rec in r.records:
                a, b = rec.k_slots("A"), rec.k_slots("B")
                if not token_arrays:
                    a = a.tolist() if a is not None else None
                    b = b.tolist() if b is not None else None
                else:
                    a = np.ascontiguousarray(a) if a is not None else None
                    b = np.ascontiguousarray(b) if b is not None else None
                if rec.workgroups is not wgs:   # a batch's records share their workgroups list
                    wgs, wgl = rec.workgroups, [list(g) for g in rec.workgroups]
                first, op, label, wave, src = rec.first, rec.op, rec.label, rec.wave, rec.source
                mm.extend([{"index": first + m, "instruction": op, "label": label, "workgroup": wgl[m],
                            "wave": wave, "source": src, "a_tokens": a[m] if a is not None else none,
                            "b_tokens": b[m] if b is not None else none} for m in rec.live])
        return mm

    def _mmacs_json(self):
        """``_mmacs`` as JSON text (an orjson.Fragment), the same bytes orjson writes for the dicts:
        each record's constant fields encoded once, its token rows by one orjson call per operand."""
        import orjson
        return orjson.Fragment(b"".join(self.mmacs_json_parts()))

    def mmacs_json_parts(self):
        """``_mmacs_json``'s text in parts (bytes, one per record), made as asked for: a writer that
        writes each as it comes never holds the table (a prefill's is millions of rows)."""
        import orjson
        wgs, wgl = None, None
        sep = b"["
        for r in self.runs:
            for rec in r.records:
                live = rec.live
                if not live:
                    continue
                if rec.workgroups is not wgs:   # a batch's records share their workgroups list
                    wgs, wgl = rec.workgroups, [orjson.dumps(list(g)) for g in rec.workgroups]
                a, b = (_token_rows(rec.k_slots(op), live) for op in "AB")
                mid = b',"instruction":' + orjson.dumps(rec.op) + b',"label":' + orjson.dumps(rec.label) + \
                    b',"workgroup":'
                end = b',"wave":%d,"source":%b,"a_tokens":' % (int(rec.wave), orjson.dumps(rec.source))
                first = rec.first
                yield sep + b",".join([b'{"index":%d%b%b%b%b,"b_tokens":%b}' % (first + m, mid, wgl[m], end, ta, tb)
                                       for m, ta, tb in zip(live, a, b)])
                sep = b","
        yield b"]" if sep == b"," else b"[]"


def _fragment(text: bytes):
    import orjson
    return orjson.Fragment(text)


def _token_rows(slots, live) -> list:
    """The JSON text (bytes) of each live member's row of ``slots`` (int [members, K], or None: none)."""
    if slots is None:
        return [b"[]"] * len(live)
    import orjson
    text = orjson.dumps(np.ascontiguousarray(slots[live]), option=orjson.OPT_SERIALIZE_NUMPY)
    return [b"[" + row + b"]" for row in text[2:-2].split(b"],[")]


def load_kernel_fn(spec: str, option: str = "--kernel-fn") -> Callable:
    """The function ``FN`` of the Python file ``FILE`` named by ``spec`` = "FILE:FN" (the file is
    imported as a module of its own, by path). Every failure is a UsageError (a ValueError) of one
    line naming ``option``, the file or the function: a spec without ":FN", a missing file, a file
    that fails to import (with the exception and the file's line it came from), no such function, or
    a name that is not callable."""
    import os

    from gfxsim.errors import UsageError
    from gfxsim.userfile import import_user_file
    if not isinstance(spec, str) or ":" not in spec or spec.endswith(":") or spec.startswith(":"):
        raise UsageError(f"{option} {spec!r}: expected FILE.py:FUNCTION, e.g. my_pv.py:my_pv_int8")
    path, fn_name = spec.rsplit(":", 1)
    if not os.path.isfile(path):
        what = "is a directory" if os.path.isdir(path) else "no such file"
        raise UsageError(f"{option}: {path}: {what}")
    module = import_user_file(path, "gfxsim_user_kernel_", f"{option}: ")
    if not hasattr(module, fn_name):
        defined = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
                         and getattr(v, "__module__", None) == module.__name__)
        raise UsageError(f"{option}: {path} has no function {fn_name!r}"
                         f"{'; it defines ' + ', '.join(defined) if defined else ''}")
    fn = getattr(module, fn_name)
    if not callable(fn):
        raise UsageError(f"{option}: {path}:{fn_name} is a {type(fn).__name__}, not a function")
    return fn


def kernel_fn_label(fn) -> str | None:
    """How a report names a swap-in kernel: "FILE:FN" as given, else the function's module:name."""
    if fn is None:
        return None
    if isinstance(fn, str):
        return fn
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', getattr(fn, '__name__', '?'))}"


def run_kernel(kernel: str, *, config: RunConfig | None = None, inputs=None, progress=None,
               **params) -> KernelRun:
    """Run ``kernel`` with ``config`` (a RunConfig, what `gfxsim run` builds from its options), or
    with ``RunConfig(**params)`` (its defaults overridden by ``params``, validated there).
    ``provenance=False`` runs faster and gives the numbers only: no tags travel, so no K-slot,
    scale-group or coverage findings. ``trace=True`` keeps the full per-lane trace.
    ``progress``: a gfxsim.progress.Progress told of every launch (how this call shows itself, not
    configuration: RunConfig holds no display).
    ``kernel_fn``: your kernel function (or "FILE.py:FN", loaded by load_kernel_fn) with the
    signature of ``kernel``'s, run in its place by the same harness (inputs, buffers, references);
    for paged_attention_decode it replaces the decode kernel, the reduce stays. ``reduce_fn``
    (paged_attention_decode only): your function with paged_attention_reduce's signature, run as
    the second launch. ``frontend="asm"``: run the clang-compiled HIP twin (kernels_hip/) on the
    asm front end in the Python twin's place, with the same harness."""
    if kernel not in KERNELS:
        raise ArgumentError(f"unknown kernel {kernel!r}; kernels: {', '.join(sorted(KERNELS))}")
    if config is None:
        unknown = set(params) - {f.name for f in dataclasses.fields(RunConfig)}
        if unknown:
            raise ArgumentError(f"unknown parameter(s) {sorted(unknown)}; known: {sorted(RunConfig.names())}")
        config = RunConfig(**params)
    elif params:
        raise ArgumentError(f"run_kernel got config= and {', '.join(sorted(params))}: give each setting once")
    cfg = config
    if cfg.provenance and kernel in NUMPY_TWINS and cfg.frontend != "asm":
        from gfxsim.machine.jit import twins_first
        twins_first()
    elif cfg.provenance:            # numba starts while the data is generated (provenance's merges need it)
        from gfxsim.machine.jit import prewarm
        prewarm()
    if cfg.reduce_fn is not None and kernel not in REDUCE_KERNELS:
        raise ArgumentError(f"--reduce-fn: {kernel} has no second kernel to swap (only "
                         f"{', '.join(f'{k} ({v})' for k, v in REDUCE_KERNELS.items())})")
    shown = cfg.params()
    if cfg.frontend == "asm":
        swap = Swap(asm_kernel_fn(kernel), asm_kernel_fn(REDUCE_KERNELS[kernel]) if kernel in REDUCE_KERNELS
                    else None, progress)
        shown["frontend"] = cfg.frontend
    else:
        for name in ("kernel_fn", "reduce_fn"):
            label = kernel_fn_label(getattr(cfg, name))
            if label is not None:
                shown[name] = label
        swap = Swap(*(load_kernel_fn(f, flag) if isinstance(f, str) else f
                      for f, flag in ((cfg.kernel_fn, "--kernel-fn"), (cfg.reduce_fn, "--reduce-fn"))), progress)
    if cfg.schedule != "in-order":
        shown["schedule"] = cfg.schedule
    from gfxsim.blas import one_blas_thread
    from gfxsim.machine.schedule import scheduled
    # every launch of the harness runs the schedule (the harnesses build their own LaunchOptions)
    with one_blas_thread(), scheduled(cfg.schedule):
        ran = KERNELS[kernel](cfg, inputs, swap)
    return KernelRun(kernel, ran.runs[0].arch, ran.context, shown, ran.out, ran.refs, ran.runs, ran.extra_metrics,
                     ran.metrics_ahead)
