"""launch(): run a kernel over a grid of workgroups, and the Run it returns."""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

import numpy as np

from ..arch import get_arch
from .findings import Finding
from .provenance import TagTable
from .trace import Trace
from .wave import Wave
from .workgroup import Workgroup


class Machine:
    """State shared by every wave of one launch: arch, tags, trace, findings."""

    def __init__(self, arch, kernel_name, *, trace=True, provenance=True, check_races=True, lds_bytes=None):
        self.arch = get_arch(arch)
        self.kernel_name = kernel_name
        self.tags = TagTable()
        self.trace = Trace(trace)
        self.provenance = provenance
        self.check_races = check_races
        self.lds_bytes = lds_bytes or self.arch.lds_bytes
        if self.lds_bytes > self.arch.lds_bytes:
            raise ValueError(f"{kernel_name}: {self.lds_bytes} B of LDS requested, {self.arch.name} has "
                             f"{self.arch.lds_bytes}")
        self.findings: list[Finding] = []
        self._dedupe: dict = {}
        self._common_cache: dict = {}
        self._operand_cache: dict = {}
        self._plan_cache: dict = {}
        self._verdicts: dict = {}

    def report(self, kind, message, *, dedupe=None, details=None, **coords):
        if dedupe is not None:
            key = (kind,) + tuple(dedupe)
            got = self._dedupe.get(key)
            if got is not None:
                got.details["count"] = got.details.get("count", 1) + 1
                return got
        f = Finding(kind, message, kernel=self.kernel_name, details=dict(details or {}), **coords)
        if dedupe is not None:
            f.details["count"] = 1
            self._dedupe[(kind,) + tuple(dedupe)] = f
        self.findings.append(f)
        return f

    def scale_verdict(self, fp_id, ka_id, kb_id):
        """None when a scale with footprint fp fits a result whose K sets are ka (A rows) / kb
        (B columns); else (field, scale's values, K set's values). Memoised: a kernel applies the
        same few scale/K-set pairs over and over."""
        key = (fp_id, ka_id, kb_id)
        if key in self._verdicts:
            return self._verdicts[key]
        t = self.tags
        fp = t.sets[fp_id]
        verdict = None
        if fp != t.sets[ka_id] and fp != t.sets[kb_id]:
            # compare along the field that varies over the K set (token for PV, dim for QK): the
            # scale must cover exactly the elements the instruction summed over
            field_name = _varying_field(t, t.sets[ka_id]) or _varying_field(t, fp)
            if field_name is not None:
                f_vals = t.set_field_values(fp_id, field_name)
                k_vals = t.set_field_values(ka_id, field_name)
                if k_vals and f_vals != k_vals and f_vals != t.set_field_values(kb_id, field_name):
                    verdict = (field_name, f_vals, k_vals)
        self._verdicts[key] = verdict
        return verdict

    def report_scale(self, wave, res, verdict, lane, mask):
        """One scale-group finding per instruction (and workgroup), naming the foreign tokens."""
        field_name, f_vals, k_vals = verdict
        wg, _ = wave._coords(lane)
        insn_index = res.mma_event + (lane // wave.lanes if wave.members > 1 else 0)
        lanes = [int(x) % wave.lanes for x in np.unique(np.nonzero(mask)[1])]
        key = ("scale", insn_index, wave.wave_id)
        seen = self._dedupe.get(("scale-group-mismatch",) + key + (wg,))
        if seen is not None:          # one finding per instruction: add this row's lanes
            seen.details["lanes"] = sorted(set(seen.details["lanes"]) | set(lanes))
            seen.details["groups"] = seen.details.get("groups", 1) + 1
            return
        foreign = sorted(k_vals - f_vals)            # consumed by the instruction, scale from elsewhere
        extra = sorted(f_vals - k_vals)              # in the scale's group, not in the instruction
        from ..arch.kslots import format_token_set
        wave.finding(
            "scale-group-mismatch",
            f"scale applied to the result of instruction #{insn_index} was computed over "
            + (f"{field_name}s {format_token_set(sorted(f_vals))}" if f_vals else f"no {field_name}s")
            + f", but the instruction consumed {format_token_set(sorted(k_vals))}: "
            + "; ".join(x for x in (
                f"{len(foreign)} {field_name}s took their scale from another group {format_token_set(foreign)}"
                if foreign else "",
                f"the scale also covers {len(extra)} {field_name}s the instruction did not consume "
                f"{format_token_set(extra)}" if extra else "") if x),
            lane=lane, instruction=res.mma_event,
            field=field_name, scale_over=sorted(f_vals), k_set=sorted(k_vals), foreign=foreign, extra=extra,
            lanes=lanes, mma_event=insn_index, dedupe=key)


def _varying_field(t, members):
    vals = {}
    for i in members:
        for f, v in t.identities[i]:
            vals.setdefault(f, set()).add(v)
    var = [t.fields[f] for f, s in vals.items() if len(s) > 1]
    for pref in ("token", "dim"):
        if pref in var:
            return pref
    return var[0] if var else None


@dataclass
class Run:
    """What one launch produced: trace, findings and the buffers after the kernel."""
    kernel: str
    arch: str
    grid: tuple
    waves_per_group: int
    trace: Trace
    findings: list
    machine: Machine = field(repr=False)
    seconds: float = 0.0
    lane_threads: int = 0

    def mmacs(self):
        return self.trace.mmacs()

    @property
    def events(self):
        return self.trace.events

    def findings_of(self, kind: str):
        return [f for f in self.findings if f.kind == kind]

    @property
    def errors(self):
        """Correctness findings (everything but performance findings)."""
        return [f for f in self.findings if not f.is_performance]

    def replay(self, workgroup=(0, 0, 0), wave=0):
        return self.trace.replay(_wg(workgroup), wave)

    def history(self, workgroup, wave, lane, reg):
        return self.trace.history(_wg(workgroup), wave, lane, reg)

    def summary(self) -> str:
        kinds = {}
        for f in self.findings:
            kinds[f.kind] = kinds.get(f.kind, 0) + 1
        found = ", ".join(f"{v} {k}" for k, v in sorted(kinds.items())) or "no findings"
        return (f"{self.kernel} on {self.arch}: grid {self.grid} x {self.waves_per_group} waves, "
                f"{self.trace.n_events} events, {len(self.mmacs())} matrix instructions traced, {found} "
                f"({self.seconds:.2f} s)")


def _wg(x, fill=0):
    """A workgroup id (missing dims 0) or, with fill=1, a grid (missing dims 1)."""
    if isinstance(x, (int, np.integer)):
        x = (int(x),)
    x = tuple(int(v) for v in x)
    return x + (fill,) * (3 - len(x))


def launch(kernel, grid=(1,), waves_per_group: int = 1, *, arch="gfx936", args=(), kwargs=None,
           trace: bool = True, provenance: bool = True, check_races: bool = True, lds_bytes=None,
           name: str | None = None, batch: int = 1) -> Run:
    """Run ``kernel(w, *args, **kwargs)`` on every wave of every workgroup of ``grid``.

    Workgroups run one after another in x-fastest order, each with fresh (poisoned) LDS; within a
    workgroup, waves run deterministically between barriers. Returns a Run with the trace and the
    findings; errors (out-of-bounds access, bad operands) raise with their coordinates.

    ``batch=N`` runs N workgroups side by side: every wave statement then acts on N waves at once
    (one register array N*wave_size wide), which amortises the simulator's per-statement cost.
    The kernel must then treat workgroup ids and scalar loads as per-lane values (uniform per wave)
    and branch on them with w.if_/w.end_program; the full per-lane trace needs batch=1.
    """
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    if batch > 1 and trace:
        raise ValueError("the full trace records one workgroup at a time: use trace=False with batch > 1")
    prof = get_arch(arch)
    if not 1 <= waves_per_group <= 16:
        raise ValueError(f"waves_per_group must be 1..16, got {waves_per_group}")
    grid = _wg(grid, fill=1)
    if any(g < 1 for g in grid):
        raise ValueError(f"grid {grid} has an empty dimension")
    for a in list(args) + list((kwargs or {}).values()):
        if isinstance(a, np.ndarray):
            raise TypeError("pass device memory as gfxsim Buffer objects, not bare numpy arrays "
                            f"(got an array of shape {a.shape})")
    kname = name or getattr(kernel, "__name__", "kernel")
    m = Machine(prof, kname, trace=trace, provenance=provenance, check_races=check_races, lds_bytes=lds_bytes)
    t0 = time.perf_counter()
    kw = kwargs or {}
    fn = lambda w: kernel(w, *args, **kw)
    ids = [(x, y, z) for z, y, x in itertools.product(range(grid[2]), range(grid[1]), range(grid[0]))]
    for i in range(0, len(ids), batch):
        wg = Workgroup(m, ids[i:i + batch], waves_per_group)
        wg.run(fn, lambda g, i: Wave(m, g, i))
    run = Run(kname, prof.name, grid, waves_per_group, m.trace, m.findings, m,
              seconds=time.perf_counter() - t0,
              lane_threads=int(np.prod(grid)) * waves_per_group * prof.wave_size)
    return run


class coverage:
    """``with w.coverage(key, expect=tokens):`` — count, per output tile, how often each expected
    token fed a K slot of the matrix instructions issued inside; zero or several is a finding.
    ``expect`` is an iterable of tokens, or (lo, hi) for tokens lo..hi-1 where lo and hi may be
    per-lane values (uniform per wave; one range per workgroup of a batched launch)."""

    def __init__(self, wave, key, expect, field="token", operand="B"):
        self.wave, self.key, self.field, self.operand = wave, key, field, operand.upper()
        self.expect = [self._expected(expect, m) for m in range(wave.members)]
        self.counts = [dict() for _ in range(wave.members)]
        self.first = None

    def _expected(self, expect, member):
        if isinstance(expect, tuple) and len(expect) == 2:
            lo, hi = (int(x.val[0, member * self.wave.lanes]) if hasattr(x, "val") else int(x) for x in expect)
            return list(range(lo, hi))
        return sorted(int(x) for x in expect)

    def add(self, wave, insn, a_ids, b_ids, idx):
        if a_ids is None:
            return
        ids = b_ids if self.operand == "B" else a_ids
        vals = wave.machine.tags.field_values(ids, self.field)
        per_k = vals[::insn.blocks, :, 0] if self.operand == "B" else vals[::insn.blocks, 0, :]   # [members, K]
        live = wave.exec.reshape(wave.members, wave.lanes).any(axis=1)
        for m in np.nonzero(live)[0].tolist():
            counts = self.counts[m]
            for v in per_k[m].tolist():
                counts[v] = counts.get(v, 0) + 1
        self.first = idx if self.first is None else self.first

    def __enter__(self):
        self.wave._coverage.append(self)
        return self

    def __exit__(self, *exc):
        self.wave._coverage.remove(self)
        if exc[0] is not None:
            return False
        from ..arch.kslots import format_token_set
        for m, (expect, counts) in enumerate(zip(self.expect, self.counts)):
            never = [t for t in expect if counts.get(t, 0) == 0]
            multi = {t: c for t, c in counts.items() if t in set(expect) and c > 1}
            if never or multi:
                msg = []
                if never:
                    msg.append(f"{len(never)} {self.field}s never consumed {format_token_set(never)}")
                if multi:
                    msg.append(f"{len(multi)} consumed more than once {format_token_set(sorted(multi))}")
                self.wave.finding("token-coverage", f"output tile {self.key!r}: " + "; ".join(msg),
                                  lane=m * self.wave.lanes, instruction=self.first, tile=repr(self.key),
                                  never=never, multiple={int(k): int(v) for k, v in multi.items()})
        return False


def _coverage_method(self, key, expect, field="token", operand="B"):
    return coverage(self, key, expect, field, operand)


Wave.coverage = _coverage_method
