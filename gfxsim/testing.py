"""Lane-level unit tests of kernels with pytest.

```python
from gfxsim.testing import run_small, assert_no_findings, assert_findings, assert_token_sets, assert_lane
```

- ``run_small(kernel, inputs=..., outputs=...)``: build Buffers from small arrays, launch, return
  ``(run, outputs)``;
- ``assert_no_findings(run_or_runs, kinds=None)`` and ``assert_findings(run, {kind: count or None})``;
- ``assert_token_sets(run, instruction, A=..., B=...)``: the token in each K slot of a matrix
  instruction (a list) or the set it consumed (a set or "{0-7,16-23}");
- ``assert_lane(run, workgroup, wave, lane, reg, expected, at=index)``: one lane's VGPR contents
  right after instruction ``at`` (needs ``trace=True``).

Every assertion raises AssertionError with a message that lists what it found. Importing this
module is cheap: numpy and the machine (numba) load on first use.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .errors import ArgumentError, GfxSimError

if TYPE_CHECKING:                       # names for the signatures only: importing stays cheap
    import numpy as np

    from .machine.launch import Run
    from .machine.trace import MmaEvent, Operand

__all__ = ["run_small", "assert_no_findings", "assert_findings", "assert_token_sets", "assert_lane",
           "NoTraceError"]


class NoTraceError(GfxSimError, ValueError):
    """A trace query on a run launched with ``trace=False``."""


# ---- findings --------------------------------------------------------------------------------

def _runs(run_or_runs) -> list:
    """A Run, a list of Runs, or anything with ``.runs`` (KernelRun, DecodeResult)."""
    if hasattr(run_or_runs, "runs"):
        return list(run_or_runs.runs)
    if isinstance(run_or_runs, (list, tuple)):
        out = []
        for r in run_or_runs:
            out.extend(_runs(r))
        return out
    return [run_or_runs]


def _findings(run_or_runs) -> list:
    return [f for r in _runs(run_or_runs) for f in r.findings]


def _listing(findings, limit: int = 10) -> str:
    lines = [f"  {f}" for f in findings[:limit]]
    if len(findings) > limit:
        lines.append(f"  ... and {len(findings) - limit} more")
    return "\n".join(lines)


def _checks_not_run(run_or_runs) -> list:
    return sorted({k for r in _runs(run_or_runs) for k in getattr(r, "checks_not_run", [])})


def assert_no_findings(run_or_runs: Run | Iterable[Run], kinds: str | Iterable[str] | None = None) -> None:
    """No findings in the run(s) (``kinds``: of these kinds only, a name or an iterable of names).
    Fails listing the offending findings; also fails when a kind asked about was not checked
    (provenance off), so "no findings" never claims more than ran."""
    from .machine.findings import REGISTRY
    if isinstance(kinds, str):
        kinds = [kinds]
    if kinds is not None:
        kinds = list(kinds)
        unknown = [k for k in kinds if k not in REGISTRY]
        if unknown:
            raise ArgumentError(f"unknown finding kind(s) {unknown}; known: {', '.join(REGISTRY)}")
    found = [f for f in _findings(run_or_runs) if kinds is None or f.kind in kinds]
    if found:
        raise AssertionError(f"expected no findings{'' if kinds is None else ' of ' + ', '.join(kinds)}, got "
                             f"{len(found)}:\n{_listing(found)}")
    not_run = [k for k in _checks_not_run(run_or_runs) if kinds is None or k in kinds]
    if not_run:          # every kind asked about (all of them by default) must have been checked
        raise AssertionError(f"no findings, but these checks did not run: {', '.join(not_run)} (a run without "
                             f"provenance checks none of them; name the kinds= that did run to assert those)")


def assert_findings(run_or_runs: Run | Iterable[Run], expected: Mapping[str, int | None]) -> None:
    """Exactly these finding kinds: ``expected`` maps kind -> count (int), or None for "at least
    one". Any other kind present, a missing kind or a wrong count fails, listing the findings."""
    from .machine.findings import REGISTRY
    unknown = [k for k in expected if k not in REGISTRY]
    if unknown:
        raise ArgumentError(f"unknown finding kind(s) {unknown}; known: {', '.join(REGISTRY)}")
    found = _findings(run_or_runs)
    by_kind: dict = {}
    for f in found:
        by_kind.setdefault(f.kind, []).append(f)
    problems = []
    for kind, n in expected.items():
        got = len(by_kind.get(kind, []))
        if n is None and got == 0:
            problems.append(f"expected at least one {kind}, got none")
        elif n is not None and got != n:
            problems.append(f"expected {n} {kind}, got {got}")
    extra = [f for f in found if f.kind not in expected]
    if extra:
        problems.append(f"unexpected kind(s): {', '.join(sorted({f.kind for f in extra}))}")
    if problems:
        counts = ", ".join(f"{len(v)} {k}" for k, v in sorted(by_kind.items())) or "none"
        raise AssertionError("; ".join(problems) + f" (findings: {counts})" + (f":\n{_listing(found)}" if found else ""))


# ---- matrix instructions ---------------------------------------------------------------------

def _mma(run, instruction):
    """The MmaEvent of ``instruction`` (its index in the launch, or an event)."""
    if hasattr(instruction, "token_set"):
        return instruction
    mm = [m for r in _runs(run) for m in r.mmacs()]
    got = [m for m in mm if m.index == int(instruction)]
    if not got:
        idx = [m.index for m in mm]
        shown = ", ".join(map(str, idx[:20])) + (", ..." if len(idx) > 20 else "")
        raise AssertionError(f"no matrix instruction with index {instruction}; matrix instructions: {shown or 'none'}")
    return got[0]


def _parse_set(text: str) -> set:
    body = text.strip().strip("{}").strip()
    out = set()
    for part in filter(None, (p.strip() for p in body.split(","))):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def assert_token_sets(run: Run, instruction: int | MmaEvent, *, field: str = "token", block: int = 0,
                      **operands: Sequence[int] | set[int] | str) -> None:
    """The tokens a matrix instruction consumed, per operand ``A=`` / ``B=``: a list is the token
    in each K slot (of row 0 of A / column 0 of B, -1 where a slot carries none), a set (or a
    string such as "{0-7,16-23}") the tokens over all of the operand. ``instruction``: its index
    in the launch (``run.mmacs()[i].index``, a finding's ``instruction``) or the event itself.
    Fails with both sides as compact ranges and the slots that differ."""
    import numpy as np
    from .arch.kslots import format_token_set
    if not operands:
        raise ArgumentError("assert_token_sets: give A=... and/or B=...")
    bad = [k for k in operands if k.upper() not in ("A", "B")]
    if bad:
        raise ArgumentError(f"assert_token_sets: operands are A and B, got {bad}")
    m = _mma(run, instruction)
    if not m.tagged:
        raise AssertionError(f"instruction #{m.index} {m.op} carries no tags (provenance off or untagged inputs)")
    problems = []
    for op, want in operands.items():
        op = op.upper()
        if isinstance(want, str):
            want = _parse_set(want)
        if isinstance(want, (set, frozenset)):
            got = m.token_set(op, field)
            want = {int(x) for x in want}
            if got != want:
                problems.append(f"{op} {field}s: expected {format_token_set(want)}, got {format_token_set(got)}; "
                                f"missing {format_token_set(want - got)}, unexpected {format_token_set(got - want)}")
        else:
            got = m.tokens(op, field, block)
            want = np.asarray(want).ravel()
            if got.shape != want.shape or not np.array_equal(got, want):
                if got.shape != want.shape:
                    diff = f"expected {want.size} K slots, the instruction has {got.size}"
                else:
                    slots = np.flatnonzero(got != want)
                    diff = "slots " + ", ".join(f"k{k}: expected {want[k]}, got {got[k]}" for k in slots[:8]) + \
                        (f", ... ({len(slots)} differ)" if len(slots) > 8 else "")
                problems.append(f"{op} {field} per K slot: expected {format_token_set(want)} "
                                f"{want.tolist()}, got {format_token_set(got)} {got.tolist()}; {diff}")
    if problems:
        raise AssertionError(f"#{m.index} {m.op} (workgroup {m.workgroup}, wave {m.wave}, {m.source}):\n  "
                             + "\n  ".join(problems))


# ---- registers -------------------------------------------------------------------------------

def assert_lane(run: Run, workgroup: int | tuple[int, ...], wave: int, lane: int, reg: int | tuple[int, int] | Operand,
                expected: float | Sequence[float], *, at: int | None = None, dtype: str = "i32", when: str = "after",
                rtol: float = 0.0, atol: float = 0.0) -> None:
    """VGPR ``reg`` of ``lane`` of ``wave`` in ``workgroup`` holds ``expected`` (viewed as
    ``dtype``: i32, u32, f32, or a narrower type: i8, f16, ... giving 4/2 elements per VGPR).
    ``reg``: a VGPR number, a (first, count) range, or an Operand of an event (``e.outputs[0]``);
    ``expected``: a scalar or a sequence (all elements of the register range).
    ``at``: the instruction index; the contents right after it executed (``when="before"``: just
    before), default the end of the wave. Needs a run launched with ``trace=True`` (NoTraceError
    otherwise). Floats compare with ``rtol``/``atol`` (0: exactly)."""
    import numpy as np
    from .machine.dtypes import np_dtype
    runs = _runs(run)
    if len(runs) != 1:
        raise ArgumentError(f"assert_lane takes one Run, got {len(runs)}")
    r = runs[0]
    if not r.trace.enabled:
        raise NoTraceError(f"assert_lane needs the trace: launch {r.kernel!r} with trace=True")
    if when not in ("after", "before"):
        raise ArgumentError(f"when must be 'after' or 'before', got {when!r}")
    st = r.replay(workgroup, wave)
    events = st.events
    if not events:
        raise AssertionError(f"workgroup {workgroup} wave {wave} of {r.kernel!r} ran no instructions")
    if at is None:
        pos = len(events)
    else:
        idx = [e.index for e in events]
        if int(at) not in idx:
            near = [i for i in idx if abs(i - int(at)) <= 5]
            raise AssertionError(f"instruction {at} is not one of workgroup {workgroup} wave {wave}'s "
                                 f"(nearby: {near or idx[:10]})")
        pos = idx.index(int(at)) + (1 if when == "after" else 0)
    st.goto(pos)
    if hasattr(reg, "regs"):
        reg = reg.regs
    first, count = (int(reg), 1) if np.isscalar(reg) else (int(reg[0]), int(reg[1]))
    if first + count > st.vgpr.shape[0]:
        raise AssertionError(f"v{first}..v{first + count - 1} was never written in workgroup {workgroup} wave {wave}")
    words = np.ascontiguousarray(st.vgpr[first:first + count, lane])
    got = words.view(np_dtype(dtype))
    written = st.written[first:first + count, lane]
    want = np.asarray(expected, dtype=got.dtype if np.issubdtype(got.dtype, np.number) else None).ravel()
    name = f"v{first}" if count == 1 else f"v[{first}:{first + count - 1}]"
    where = (f"{name} of lane {lane}, workgroup {workgroup} wave {wave}, "
             f"{'at the end' if at is None else when + ' instruction ' + str(at)}")
    if want.size not in (1, got.size):
        raise AssertionError(f"{where}: expected {want.size} {dtype} values, the register range holds {got.size}")
    if not written.all():
        raise AssertionError(f"{where}: never written (expected {want.tolist()})")
    if got.dtype.kind == "f" or want.dtype.kind == "f":
        g, e = got.astype(np.float64), want.astype(np.float64)
        ok = np.allclose(g, e, rtol=rtol, atol=atol, equal_nan=True) if (rtol or atol) else \
            np.array_equal(g, np.broadcast_to(e, g.shape), equal_nan=True)
    else:
        ok = np.array_equal(got, np.broadcast_to(want, got.shape))
    if not ok:
        writer = None
        for e in events[:pos][::-1]:
            if e.exec_mask[lane] and any(o.regs and o.regs[0] <= first < o.regs[0] + o.regs[1] for o in e.outputs):
                writer = e
                break
        raise AssertionError(f"{where} as {dtype}: expected {want.tolist()}, got {got.tolist()} "
                             f"(raw {' '.join(f'0x{int(x):08x}' for x in words)})"
                             + (f"; last written by {writer!r}" if writer is not None else ""))


# ---- running a kernel on small inputs ---------------------------------------------------------

def run_small(kernel: Callable[..., object], *, arch: str = "gfx936", grid: int | tuple[int, ...] = 1, waves: int = 1,
              inputs: Mapping[str, np.ndarray | tuple[np.ndarray, dict]] | None = None,
              outputs: Mapping[str, tuple[int | tuple[int, ...], str]] | None = None, kwargs: dict | None = None,
              trace: bool = True, provenance: bool = True, **launch_kwargs: Any) -> tuple[Run, dict[str, np.ndarray]]:
    """Run ``kernel(w, *inputs, *outputs, **kwargs)`` on small arrays in one call.

    ``inputs``: name -> array, or (array, tags) with tags a dict field -> int array broadcastable
    to the array (e.g. {"token": np.arange(64)}); ``outputs``: name -> (shape, dtype), fresh
    Buffers the kernel writes (uninitialized: a read before a write is a finding). The kernel gets
    the Buffers positionally, inputs then outputs, in the dicts' order. Returns (run, {name:
    numpy array}) with every output (and input, which a kernel may write) after the launch."""
    import numpy as np
    from .machine import Buffer, launch
    bufs = {}
    for name, spec in (inputs or {}).items():
        if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[1], dict):
            arr, tags = spec
            arr = np.ascontiguousarray(arr)
            tags = {k: np.asarray(v) for k, v in tags.items()}
            bufs[name] = Buffer(name, arr, tags)
        else:
            bufs[name] = Buffer(name, np.ascontiguousarray(spec))
    outs = {}
    for name, spec in (outputs or {}).items():
        if name in bufs:
            raise ArgumentError(f"run_small: {name!r} is both an input and an output")
        try:
            shape, dtype = spec
        except (TypeError, ValueError):
            raise ArgumentError(f"run_small: outputs[{name!r}] must be (shape, dtype), got {spec!r}") from None
        outs[name] = bufs[name] = Buffer.empty(name, shape, dtype)
    run = launch(kernel, grid=grid, waves_per_group=waves, arch=arch, args=tuple(bufs.values()), kwargs=kwargs,
                 trace=trace, provenance=provenance, **launch_kwargs)
    return run, {name: b.array for name, b in bufs.items()}
