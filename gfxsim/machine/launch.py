"""launch(): run a kernel over a grid of workgroups, and the Run it returns.

One launch loop serves both front ends: ``launch`` (a Python kernel function) and
``gfxsim.asm.run.run_asm`` (a parsed kernel) each make a Machine and a wave function, then
``run_grid`` runs the grid in batches — folded where it can be (fold.py) — under one
LaunchOptions (options.py) and returns the Run.
"""
from __future__ import annotations

import ctypes
import functools
import gc
import itertools
import operator
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from collections.abc import Iterable

import numpy as np

from ..arch import get_arch
from .findings import Finding, FindingLog
from . import plans
from .fold import MAX_CLASSES, RETRIES, Attempt, Fold, Unfolded
from .memory import Buffer
from .consumed import check_outputs
from .mmalog import MmaLog
from .options import MAX_STEPS, MAX_TRACE_BYTES, LaunchOptions, fold_default
from .provenance import WideSets
from .trace import Trace
from .wave import Wave
from .schedule import IN_ORDER
from .workgroup import Workgroup
from .wavemembers import serial_order
from ..errors import ArgumentError, ArgumentTypeError

__all__ = ["launch", "run_grid", "run_batch", "Machine", "Run", "LaunchOptions", "fold_default", "GC_BATCH"]


class Machine:
    """State shared by every wave of one launch: arch, trace, matrix-instruction log, findings."""

    def __init__(self, arch, kernel_name, *, trace=True, provenance=True, check_races=True, lds_bytes=None,
                 declared: Iterable[str] = (), max_steps: int = MAX_STEPS, max_trace_bytes: int | None = MAX_TRACE_BYTES):
        """``declared``: the K fields the launch's output Buffers declare (Buffer.expect), which the
        matrix-instruction log keeps the K sets of (consumed.py)."""
        self.arch = get_arch(arch)
        self.kernel_name = kernel_name
        self.trace = Trace(trace, max_trace_bytes)
        self.max_steps = max_steps       # instructions one wave may execute (Wave.event)
        self.wide = WideSets()           # exact sets of footprints wider than a window
        self.mma_log = MmaLog(self.wide, set(declared), kernel_name)
        self.outputs: list = []          # (Buffer with Buffer.expect declarations, its first store's source)
        self.trace.mma_log = self.mma_log
        self.provenance = provenance
        self.check_races = check_races
        self.lds_bytes = lds_bytes or self.arch.lds_bytes
        if self.lds_bytes > self.arch.lds_bytes:
            raise ArgumentError(f"{kernel_name}: {self.lds_bytes} B of LDS requested, {self.arch.name} has "
                             f"{self.arch.lds_bytes}")
        self.log = FindingLog(kernel_name)
        self.findings = self.log.findings
        self.plan_cache: dict = plans.launch_cache(self.arch)     # the matrix unit's operand plans
        self.not_checked: dict = {}      # finding kind -> why a front end cannot check it (asm: no scale marks)
        self.attempt = None              # the folded batch being run (fold.Attempt), if any
        self.folds: list = []            # per batch: how its provenance was kept (launch.run_batch)
        self.lane_instructions: int | None = None   # active lanes x instructions (asm front end)
        self.approximated: set = set()   # executed mnemonics whose numbers are stand-ins (isa.fp.APPROXIMATED)
        self.schedule = IN_ORDER         # the order waves run in between barriers (run_grid sets the launch's)

    def report(self, kind, message, *, details=None, **coords):
        if self.attempt is not None:     # a folded batch's: reported if the attempt stands (fold.Attempt)
            self.attempt.pending.append((kind, message, dict(details or {}), coords))
            return None
        return self.log.report(kind, message, dict(details or {}), **coords)

    @property
    def checks_not_run(self) -> list:
        """The finding kinds this launch could not check (provenance off: the provenance-based ones)."""
        kinds = [] if self.provenance else list(PROVENANCE_KINDS)
        return kinds + [k for k in self.not_checked if k not in kinds]


PROVENANCE_KINDS = ("ab-kslot-mismatch", "kslot-unknown-origin", "scale-group-mismatch", "dequant-direction",
                    "store-mismatch", "token-coverage", "double-count", "identity-mismatch",
                    "accumulator-carried", "format-mismatch")


@dataclass
class Run:
    """What one launch produced: trace, findings and the buffers after the kernel."""
    kernel: str
    arch: str
    grid: tuple[int, int, int]
    waves_per_group: int
    trace: Trace
    findings: list[Finding]
    machine: Machine = field(repr=False)
    seconds: float = 0.0
    lane_threads: int = 0
    folds: list = field(default_factory=list)    # per batch: how its provenance was kept (fold.py)

    @property
    def checks_not_run(self) -> list:
        """Finding kinds that did not run (provenance off), so "no findings" does not overclaim."""
        return self.machine.checks_not_run

    @property
    def provenance(self) -> bool:
        """Whether the launch carried provenance (the provenance-based checks ran)."""
        return self.machine.provenance

    @property
    def checks_not_run_why(self) -> list:
        """Why checks did not run: "provenance off", and each front end's reason (the asm front end:
        compiled code has no scale marks)."""
        why = [] if self.provenance else ["provenance off"]
        return why + [v for v in self.machine.not_checked.values() if v not in why]

    @property
    def records(self) -> list:
        """The matrix-instruction records (matrix.MmaRecord), one per issued instruction of a batch,
        in issue order; what the report's ``mmacs`` and the token checks read."""
        return self.machine.mma_log.records

    @property
    def schedule(self) -> str:
        """The wave order the launch ran (``in-order``, ``reverse``, ``random:SEED``; schedule.py)."""
        return str(self.machine.schedule)

    @property
    def lane_instructions(self) -> int | None:
        """Active lanes x instructions the asm front end executed (its speed figure); None for a
        Python kernel, which has no instruction stream of its own."""
        return self.machine.lane_instructions

    def mmacs(self):
        return self.trace.mmacs()

    def mmac_count(self) -> int:
        """How many events ``mmacs()`` holds, without making them."""
        return self.trace.mmac_count()

    def tagged_mmacs(self):
        """The events of ``mmacs()`` whose operands carried provenance, made lazily."""
        return self.trace.tagged_mmacs()

    def mmacs_carrying(self, operand: str, field: str = "token"):
        """The events of ``mmacs()`` whose ``operand`` carries ``field`` values, made lazily."""
        return self.trace.mmacs_carrying(operand, field)

    @property
    def approximations(self) -> dict:
        """The instructions this launch executed whose last bit is a stand-in, mnemonic -> what it is
        ("correctly rounded stand-in, hardware within 1 ulp")."""
        from ..isa.fp import APPROXIMATED
        return {m: APPROXIMATED[m] for m in sorted(self.machine.approximated)}

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
        return self.trace.replay(self._wave_of(workgroup, wave), wave)

    def history(self, workgroup, wave, lane, reg):
        wg = self._wave_of(workgroup, wave)
        lanes = get_arch(self.arch).wave_size
        if not 0 <= int(lane) < lanes:
            raise ArgumentError(f"lane {lane}: a wave of {self.arch} has lanes 0..{lanes - 1}")
        if int(reg) < 0:
            raise ArgumentError(f"register {reg}: VGPR numbers start at 0")
        return self.trace.history(wg, wave, lane, reg)

    def _wave_of(self, workgroup, wave) -> tuple:
        """The workgroup id, checked to be in the grid, and the wave in it (asking for one that never
        ran would give an empty stepper that looks like a wave which did nothing)."""
        wg = _wg(workgroup)
        if any(not 0 <= g < n for g, n in zip(wg, self.grid)):
            raise ArgumentError(f"workgroup {wg} is outside the grid {self.grid}")
        if not 0 <= int(wave) < self.waves_per_group:
            raise ArgumentError(f"wave {wave}: the launch ran {self.waves_per_group} wave(s) per workgroup "
                             f"(0..{self.waves_per_group - 1})")
        return wg

    def summary(self) -> str:
        kinds = {}
        for f in self.findings:
            kinds[f.kind] = kinds.get(f.kind, 0) + 1
        found = ", ".join(f"{v} {k}" for k, v in sorted(kinds.items())) or "no findings"
        approx = (f"; correctly rounded stand-ins (hardware within 1 ulp): {', '.join(self.approximations)}"
                  if self.approximations else "")
        return (f"{self.kernel} on {self.arch}: grid {self.grid} x {self.waves_per_group} waves, "
                f"{self.trace.n_events} events, {self.mmac_count()} matrix instructions traced, {found} "
                f"({self.seconds:.2f} s){approx}")


def _wg(x, fill=0):
    """A workgroup id (missing dims 0) or, with fill=1, a grid (missing dims 1)."""
    if isinstance(x, (int, np.integer)):
        x = (int(x),)
    x = tuple(int(v) for v in x)
    return x + (fill,) * (3 - len(x))


# Between batches of at least this many workgroups a launch collects garbage: a wave and the values
# it made point at each other (VGPRs.wave, the lane ids, a front end's register files), so a
# finished batch's arrays (GiBs with provenance) would otherwise wait for a collection the small
# number of Python objects rarely triggers. Smaller batches are cheap to keep a while longer.
GC_BATCH = 16
# a batch that ran this long gives the C heap's free pages back to the system after it: glibc keeps
# what a batch's wave threads freed in their arenas (a prefill batch of 4 query blocks with
# provenance: ~0.3 GiB, which the next batch stacked on); a trim takes milliseconds and the next
# batch faults its pages in again, so short batches (the cache producer's, the decode's) skip it
TRIM_AFTER_S = 1.0


@functools.cache
def _malloc_trim():
    """glibc's malloc_trim, or None (another C library)."""
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


def release_heap() -> None:
    """The C heap's free pages given back (malloc_trim(0)); nothing where there is no glibc."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@contextmanager
def _launch_garbage(big: bool):
    """Yields the collection to make after each batch. While a launch of big batches runs, the
    objects that were there before it (the modules of numpy, numba and the front ends: ~0.1 M,
    ~0.06 s per full collection) are set aside (gc.freeze), and after each collection what
    survived it (numba's modules, imported meanwhile by its start-up thread), so each visits the
    objects made since the last only; all are given back at the launch's end. (Freezing frees
    nothing later: an object is still freed when its last reference goes.) A process that froze
    objects itself keeps its own arrangement, with full collections."""
    mine = big and gc.get_freeze_count() == 0

    def collect():
        gc.collect()
        if mine:
            gc.freeze()

    if mine:
        gc.freeze()
    try:
        yield collect
    finally:
        if mine:
            gc.unfreeze()


def launch(kernel, grid=(1,), waves_per_group: int = 1, *, arch="gfx936", args=(), kwargs=None,
           trace: bool = True, provenance: bool = True, check_races: bool = True, lds_bytes: int | None = None,
           name: str | None = None, batch: int = 1, progress: Callable[[int, int], object] | None = None,
           fold: bool | None = None, options: LaunchOptions | None = None) -> Run:
    """Run ``kernel(w, *args, **kwargs)`` on every wave of every workgroup of ``grid``.

    Workgroups run one after another in x-fastest order, each with fresh (poisoned) LDS; within a
    workgroup, waves run deterministically between barriers. Returns a Run with the trace and the
    findings; errors (out-of-bounds access, bad operands) raise with their coordinates.

    ``batch=N`` runs N workgroups side by side: every wave statement then acts on N waves at once
    (one register array N*wave_size wide), which amortises the simulator's per-statement cost.
    The kernel must then treat workgroup ids and scalar loads as per-lane values (uniform per wave)
    and branch on them with w.if_/w.end_program. The full trace records every statement once for
    the whole batch; ``run.events`` and ``run.replay(workgroup, wave)`` view one workgroup.

    ``progress(done, total)``, if given, is called with the workgroups done: once at the start
    and after every batch.

    ``fold`` (default ``fold_default()``): with provenance, a batch keeps provenance for one
    representative member per class and a shift per member (fold.py);
    a batch whose members part from their representatives is run again with finer classes, or
    with every member's provenance: the results are the same either way (``Run.folds`` says how
    each batch ran).

    The keywords trace .. fold are LaunchOptions' fields (options.py documents each); ``options=``
    gives them as one record instead, and the keywords must then be left at their defaults.
    """
    given = dict(trace=trace, provenance=provenance, check_races=check_races, lds_bytes=lds_bytes, batch=batch,
                 progress=progress, fold=fold)
    options = launch_options(options, given)
    prof = get_arch(arch)
    if not 1 <= waves_per_group <= 16:
        raise ArgumentError(f"waves_per_group must be 1..16, got {waves_per_group}")
    grid = _wg(grid, fill=1)
    if any(g < 1 for g in grid):
        raise ArgumentError(f"grid {grid} has an empty dimension")
    for a in list(args) + list((kwargs or {}).values()):
        if isinstance(a, np.ndarray):
            raise ArgumentTypeError("pass device memory as gfxsim Buffer objects, not bare numpy arrays "
                            f"(got an array of shape {a.shape})")
    distinct_buffers(list(args) + list((kwargs or {}).values()))
    kname = name or getattr(kernel, "__name__", "kernel")
    m = Machine(prof, kname, trace=options.trace, provenance=options.provenance, check_races=options.check_races,
                lds_bytes=options.lds_bytes, declared=declared_fields(list(args) + list((kwargs or {}).values())),
                max_steps=options.max_steps, max_trace_bytes=options.max_trace_bytes)
    kw = kwargs or {}
    # a kernel function may run a workgroup's waves side by side (a compiled twin: wavemembers.py)
    return run_grid(m, grid, waves_per_group, lambda w: kernel(w, *args, **kw), options,
                    waves_as_members=bool(getattr(kernel, "waves_as_members", False)))


def launch_options(options: LaunchOptions | None, given: dict) -> LaunchOptions:
    """``options``, or the record of the keywords ``given``; both only where the keywords are defaults."""
    if options is None:
        return LaunchOptions(**given)
    if not isinstance(options, LaunchOptions):
        raise ArgumentTypeError(f"options must be a LaunchOptions, got {type(options).__name__}")
    defaults = LaunchOptions()
    both = [k for k, v in given.items() if v != getattr(defaults, k)]
    if both:
        raise ArgumentError(f"got options= and {', '.join(k + '=' for k in both)}: give each setting once")
    return options


def distinct_buffers(args: Iterable, where: str = "", error: type = ArgumentError) -> dict:
    """The Buffers among ``args`` by name, each name one Buffer (findings and stored provenance name
    a buffer by its name; one Buffer passed twice is fine); else ``error`` naming it."""
    named: dict = {}
    for a in args:
        if isinstance(a, Buffer) and named.setdefault(a.name, a) is not a:
            raise error(f"{where}{': ' if where else ''}two different Buffers are named {a.name!r}: give each "
                        "its own name")
    return named


def declared_fields(args: Iterable) -> set:
    """The K fields the Buffers among ``args`` declare their elements must consume (Buffer.expect)."""
    return {f for a in args if isinstance(a, Buffer) for f in a.expects}


def run_grid(m: Machine, grid: tuple, waves: int, fn: Callable[[Wave], object], options: LaunchOptions,
             lane_threads: int | None = None, waves_as_members: bool = False) -> Run:
    """Run ``fn(w)`` on every wave of every workgroup of ``grid`` (x-fastest order, or the axes of
    ``options.batch_order``), in batches of ``options.side_by_side`` workgroups, folded where they
    can be (run_batch); then the output declarations are checked and the Run returned. Both front
    ends launch through here. ``lane_threads``: work-items launched (default grid x waves x wave size).
    ``waves_as_members``: ``fn`` can run a workgroup's waves side by side as the members of one wave
    (wavemembers.py); a batch of one workgroup is tried so first, where the launch allows it."""
    t0 = time.perf_counter()
    m.schedule = options.wave_order
    fast, mid, slow = options.batch_order
    pos = [0, 0, 0]                      # where each grid axis sits in product's (slow, mid, fast)
    pos[slow], pos[mid], pos[fast] = 0, 1, 2
    # each workgroup's (x, y, z) picked in C: int8_kv_cache's 32,768 built one by one cost ~25 ms
    ids = list(map(operator.itemgetter(*pos), itertools.product(range(grid[slow]), range(grid[mid]),
                                                                range(grid[fast]))))
    progress = options.progress
    if progress is not None:
        progress(0, len(ids))
    batch, folding = options.side_by_side, options.folding
    with _launch_garbage(batch >= GC_BATCH) as collect:
        for i in range(0, len(ids), batch):
            started = time.perf_counter()
            run_batch(m, ids[i:i + batch], waves, fn, folding, options.unfolded_batch, waves_as_members,
                      options.fold_apart)
            if batch >= GC_BATCH:
                collect()        # a wave and its values point at each other: free a big batch's now
            if time.perf_counter() - started >= TRIM_AFTER_S:
                release_heap()
            if progress is not None:
                progress(min(i + batch, len(ids)), len(ids))
    if m.provenance:
        check_outputs(m)                 # the output declarations (Buffer.expect) of what it stored
    if lane_threads is None:
        lane_threads = int(np.prod(grid)) * waves * m.arch.wave_size
    return Run(m.kernel_name, m.arch.name, grid, waves, m.trace, m.findings, m,
               seconds=time.perf_counter() - t0, lane_threads=lane_threads, folds=m.folds)


def run_batch(m: Machine, members: list, waves: int, fn, folding: bool, unfolded: int | None = None,
              waves_as_members: bool = False, apart: tuple = ()):
    """Run one batch of workgroups: folded where it can be (fold.py), else keeping every member's
    provenance. A folded attempt that meets a member parting from its representative is taken
    back and run again with the members split by what differed (at most RETRIES times and
    MAX_CLASSES classes), or unfolded — in batches of at most ``unfolded`` members, each tried
    folded first (LaunchOptions.unfolded_batch); ``m.folds`` records how each batch ran.
    ``waves_as_members``: a batch of one workgroup of several waves is first run with its waves
    side by side (_waves_side_by_side), then, where that cannot be exact, one after another.
    ``apart``: grid axes whose members start in classes of their own (LaunchOptions.fold_apart)."""
    make = lambda g, i: Wave(m, g, i)
    note = {"first": members[0], "members": len(members), "classes": None, "attempts": 0, "unfolded": None}
    m.folds.append(note)
    if waves_as_members and len(members) == 1 and waves > 1 and WAVES_AS_MEMBERS and not m.provenance \
            and not m.trace.enabled and m.schedule == IN_ORDER:
        note["waves"] = _waves_side_by_side(m, members, waves, fn, make)
        if note["waves"] == "side by side":
            return
    if folding and len(members) > 1:
        classes = _classes_apart(members, apart)
        for _ in range(RETRIES):
            f = Fold(len(members), m.arch.wave_size, classes, m.wide)
            if f.classes > min(MAX_CLASSES, len(members) // 2):      # folding would no longer pay
                note["unfolded"] = (f"{note['unfolded'] or 'its members apart'} (then {f.classes} classes of "
                                    f"{len(members)} members)")
                break
            attempt = m.attempt = Attempt(m)
            counted = m.lane_instructions
            note["attempts"] += 1
            try:
                Workgroup(m, members, waves, fold=f).run(fn, make)
            except Unfolded as e:
                attempt.take_back()
                m.lane_instructions = counted       # the attempt's instructions are run again
                note["unfolded"] = e.what
                gc.collect()             # the attempt's values (and their cycles) before the next one
                if e.keys is None:
                    break
                keys = np.asarray(e.keys, np.int64)
                classes = f.cls * (int(keys.max()) + 1) + keys            # split each class by its keys
                continue
            finally:
                m.attempt = None
            attempt.stand()
            note["classes"], note["unfolded"] = f.classes, None
            return
    if m.provenance and unfolded is not None and len(members) > unfolded:
        note["unfolded"] = f"{note['unfolded'] or 'not folded'} (then in batches of {unfolded})"
        for i in range(0, len(members), unfolded):
            run_batch(m, members[i:i + unfolded], waves, fn, folding, unfolded, apart=apart)
        return
    Workgroup(m, members, waves).run(fn, make)


def _classes_apart(members: list, apart: tuple):
    """Each member's first class: its workgroup id along the ``apart`` axes (None: one class)."""
    if not apart:
        return None
    keys = [tuple(wg[a] for a in apart) for wg in members]
    return np.unique(np.array(keys, np.int64), axis=0, return_inverse=True)[1].ravel()


# whether a launch that allows it runs a workgroup's waves side by side (tests compare both ways)
WAVES_AS_MEMBERS = True


class _WavesAttempt(Attempt):
    """An Attempt of waves side by side (provenance off): the bytes each store overwrites are
    logged as the members store (wavemembers.MemberAccesses.undo), without provenance planes."""

    def __init__(self, machine):
        super().__init__(machine)
        self.undo: list = []             # (buffer, byte indices, their bytes, their written bits) per store

    def before_store(self, buf, byte_addr):
        pass

    def take_back(self):
        super().take_back()
        for buf, at, raw, written in reversed(self.undo):
            buf.raw[at] = raw
            if written is not None:
                buf.written[at] = written


def _waves_side_by_side(m: Machine, members: list, waves: int, fn, make) -> str:
    """One workgroup's waves run as the members of one wave (wavemembers.py), as an attempt that
    is taken back (buffers, records, events) where the order of the waves could show: a race, a
    finding, an error. Returns "side by side", or why the workgroup must run serially."""
    attempt = m.attempt = _WavesAttempt(m)
    counted, approximated = m.lane_instructions, set(m.approximated)
    why = None
    try:
        wg = Workgroup(m, members[0], waves, waves_as_members=True)
        wg.accesses.undo = attempt.undo
        wg.run(fn, make)
    except Exception as e:               # noqa: BLE001 - the serial run raises it again, or not
        why = f"serially: {type(e).__name__}: {e}"
    finally:
        m.attempt = None
    if why is None and attempt.pending:
        why = f"serially: {len(attempt.pending)} finding(s), numbered as the serial run numbers them"
    if why is not None:
        attempt.take_back()
        m.lane_instructions, m.approximated = counted, approximated
        return why
    serial_order(m, attempt.n_events, attempt.records, wg)
    return "side by side"
