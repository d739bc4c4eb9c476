"""Lazy numba: `@njit` functions that import and start numba on their first call.

numba costs ~0.3 s to import and ~0.6 s more on the first call of any compiled function (its CPU
target loads its registries; half of that was numba.np.arraymath importing scipy.linalg only to
learn whether a BLAS exists, which none of gfxsim's compiled functions uses: _without_scipy). A run
that never needs a compiled kernel (the provenance-off path, a layout query) should not pay that.
``@njit`` marks a function; the first call of any marked function of a module compiles every marked
function of that module (numba resolves calls between them through the module's globals, so they
must all be dispatchers by then).

Compiled code is cached on disk (numba's ``cache=True``), so only the first process of an install
compiles: beside each source file (``__pycache__``), or, where the installed package cannot be
written, in the user's cache directory (numba's own fallback; ``NUMBA_CACHE_DIR`` chooses another).
A cache entry is keyed by the source file's time stamp and the argument types, so an edit or a new
argument type compiles once more; numba inlines the compiled functions of other modules a function
calls, so its key here also holds the stamps of those modules' files (``_depends``): an edit of a
callee's module compiles its callers again instead of running the old callee from their cache.
Only module-level functions can be cached (a closure's cells are not part of the key), so ``@njit``
refuses anything else. ``announce_compiles`` has the first compilation of a process say so on
stderr (`gfxsim run` unless --quiet); ``compiles()`` counts them.

Loading a signature from the disk cache still costs 3-17 ms of CPU on the thread whose call first
needs it (a 16K decode with provenance: 18 of them on its wave threads). A command names its kind
(gfxsim.jitrecord, from the CLI), and prewarm's thread, once numba is up, loads the signatures the
last command of that kind needed, in that order, while the run goes on (_load_recorded).
"""
from __future__ import annotations

import contextlib
import functools
import sys
import threading

_LAZY: dict[str, list] = {}          # module name -> its lazy functions
_JIT_MODULES: set[str] = set()       # every module that marked a function (a caller's dependencies)
_LOCK = threading.RLock()            # one thread starts numba and swaps a module's functions
_PREWARMED = False                   # prewarm() has started (once per process)
_COMPILED: list[str] = []            # module.function of each signature compiled (not loaded from the cache)
_MADE: list = []                     # (module, name, dispatcher) of every dispatcher made, in order
_LOADS: list = []                    # (module, name, type names) of each signature loaded from the disk cache, in order
_ABSENT: set = set()                 # recorded signatures prewarm's thread found gone (module, name, type names)
_NOTE: dict = {"stream": None, "said": False}   # announce_compiles' stream; whether the note is out
PREWARM_SWITCH_INTERVAL = 0.0005     # seconds: the GIL switch interval while numba starts (see prewarm)


def njit(fn):
    """``numba.njit(cache=True)(fn)``, created on first use (see the module docstring)."""
    mod = fn.__module__
    if "<locals>" in fn.__qualname__ or fn.__code__.co_freevars:
        from ..errors import ArgumentError
        raise ArgumentError(f"jit.njit: {mod}.{fn.__qualname__} is not a module-level function; numba's on-disk "
                            "cache cannot key a closure, so every process would compile it again")

    @functools.wraps(fn)
    def first_call(*args):
        _compile_module(mod)
        return sys.modules[mod].__dict__[fn.__name__](*args)

    first_call.py_func = fn
    _LAZY.setdefault(mod, []).append(first_call)
    _JIT_MODULES.add(mod)
    return first_call


def _compile_module(mod: str) -> None:
    with _LOCK:                      # a prewarm thread may be at it: wait, then find it done
        import numba
        _start_target()
        g = sys.modules[mod].__dict__
        unbound = []
        for lazy in _LAZY.pop(mod, ()):
            name = lazy.py_func.__name__
            if g.get(name) is lazy:
                g[name] = _noting_loads(_depends(numba.njit(cache=True)(lazy.py_func), mod, g), mod, name)
                _MADE.append((mod, name, g[name]))
            elif name not in g:      # decorated, not yet bound: its module is importing on another thread
                unbound.append(lazy)
        if unbound:                  # kept for the next call, or its first call would call itself
            _LAZY.setdefault(mod, []).extend(unbound)


def _importing(mod: str) -> bool:
    """Whether module ``mod`` is being imported (its body still running, maybe on another thread):
    prewarm's thread leaves it to its first call. Dispatchers made now would miss the functions it
    has not yet defined, which theirs call through its globals."""
    spec = getattr(sys.modules.get(mod), "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


def _depends(dispatcher, mod: str, g: dict):
    """``dispatcher`` with its cache entry keyed also by the files of the other compiled modules
    ``mod`` names (a module, or a function of one): numba checks only the function's own file."""
    import os
    import types
    files = set()
    for v in list(g.values()):
        name = v.__name__ if isinstance(v, types.ModuleType) else getattr(v, "__module__", None)
        if isinstance(name, str) and name != mod and name in _JIT_MODULES:
            f = getattr(sys.modules.get(name), "__file__", None)
            if f:
                files.add(f)
    if not files:
        return dispatcher
    index = dispatcher._cache._cache_file         # numba's internals: no public hook (test_numba_cache)
    deps = []
    for f in sorted(files):
        st = os.stat(f)
        deps.append((f, st.st_mtime, st.st_size))
    index._source_stamp = (index._source_stamp, tuple(deps))
    return dispatcher


def _noting_loads(dispatcher, mod: str, name: str):
    """``dispatcher`` with each signature it loads from the disk cache noted in _LOADS, in the order
    the process needed them (the order a record keeps: prewarm's thread loads the first needed
    first). Only a load is noted, not a call: numba's own dispatch is untouched."""
    cache = dispatcher._cache                     # numba's internals, as _depends
    load = cache.load_overload

    def load_overload(sig, target_context):
        got = load(sig, target_context)
        if got is not None:
            _LOADS.append((mod, name, _type_names(got.signature.args)))
        return got
    cache.load_overload = load_overload
    return dispatcher


def prewarm() -> threading.Thread | None:
    """Start numba beside the caller: import it, load its CPU target (~0.5 s, the cost of the
    first compiled call) and make dispatchers of every lazy function imported so far, on a
    daemon thread. A run with provenance calls this before it generates its data (numpy, which
    frees the GIL), so the start-up overlaps that work; a compiled call made meanwhile waits.
    Then, with the gates open (``starting`` false, ``running`` true), the same thread loads from
    numba's disk cache the signatures the last command of this kind used (gfxsim.jitrecord;
    _load_recorded), which the run's first compiled calls would otherwise load on its critical path.
    Once per process (later calls return None): a sweep's worker runs many points."""
    global _PREWARMED, _STARTING, _THREAD
    with _LOCK:
        if _PREWARMED:
            return None
        _PREWARMED = _STARTING = True

    # numba's start is Python code that holds the GIL; the caller's numpy work gets it back only
    # when the switch interval expires (5 ms), after each of its many short calls. A short interval
    # while numba starts: a 16K decode's data generation took 1.1 s beside it instead of 0.4 s.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(min(interval, PREWARM_SWITCH_INTERVAL))

    def work():
        global _STARTING
        try:
            try:
                with _LOCK:
                    _start_target()
                    for mod in list(_LAZY):
                        if not _importing(mod):
                            _compile_module(mod)
            finally:
                _STARTING = False
            _load_recorded()
        finally:
            sys.setswitchinterval(interval)
    t = _THREAD = threading.Thread(target=work, name="gfxsim-numba-start", daemon=True)
    t.start()
    return t


_STARTING = False                    # prewarm's thread is at it (numba's target and dispatchers not all there yet)
_THREAD: threading.Thread | None = None     # prewarm's thread


PRELOAD = True                       # False: prewarm's thread loads no recorded signature (the tests' A/B)


def _load_recorded() -> None:
    """Load each signature of the command kind's record (gfxsim.jitrecord.expected) whose module is
    imported and whose entry numba's cache index holds for this source and machine: a signature the
    index lacks is skipped (never compiled here: that is the run's own business, where it needs it)
    and left out of the next record. A compiled call of the run meanwhile takes numba's compiler lock
    as ever: it finds its signature loaded, or loads it itself."""
    if not PRELOAD:
        return
    from ..jitrecord import expected
    by_fn: dict = {}
    for mod, name, names in expected():
        by_fn.setdefault((mod, name), []).append(names)
    for (mod, name), wanted in by_fn.items():
        module = sys.modules.get(mod)
        if module is None or mod not in _JIT_MODULES or _importing(mod):
            continue                                # not imported (yet): kept in the record, not loaded
        fn = module.__dict__.get(name)
        if fn is None or getattr(fn, "py_func", None) is None:
            _ABSENT.update((mod, name, n) for n in wanted)
            continue
        try:
            if not hasattr(fn, "overloads"):        # still lazy: make the module's dispatchers
                _compile_module(mod)
                fn = module.__dict__[name]
            for sig in _cached_signatures(fn, wanted):
                fn.compile(sig)
        except Exception:                           # noqa: BLE001 -- a hint only: the run loads what it needs
            continue
        have = {_type_names(s) for s in fn.overloads}
        _ABSENT.update((mod, name, n) for n in wanted if n not in have)


def _cached_signatures(dispatcher, wanted) -> list:
    """The signatures of ``dispatcher``'s cache index, for this source and machine, whose argument
    type names are in ``wanted`` (numba's internals, as _depends: no public hook)."""
    cache = dispatcher._cache
    index = cache._cache_file._load_index()
    codegen = dispatcher.targetctx.codegen()
    wanted = set(wanted)
    return [key[0] for key in index
            if _type_names(key[0]) in wanted and cache._index_key(key[0], codegen) == key]


def _type_names(sig) -> tuple[str, ...]:
    return tuple(str(t) for t in sig)


def signatures_to_keep(read: list) -> list:
    """The record to write after a command that read ``read``: its entries not found gone, in their
    order, then each signature this process's dispatchers hold that it lacks, in the order they
    were loaded (those compiled here last)."""
    out = [e for e in read if e not in _ABSENT]
    seen = set(out)
    for e in list(_LOADS) + [(mod, name, _type_names(sig)) for mod, name, d in list(_MADE) for sig in list(d.overloads)]:
        if e not in seen:                           # loaded first, in that order; then compiled here
            seen.add(e)
            out.append(e)
    return out


def join_start() -> None:
    """Wait for prewarm's thread, where one was started (a harness that times warm launches)."""
    if _THREAD is not None:
        _THREAD.join()


def starting(mod: str) -> bool:
    """Whether a compiled function of module ``mod`` would now wait for numba's start on prewarm's
    thread (~0.3 s of the GIL), or start numba itself where the run asked for twins first
    (``twins_first``): a caller holding an exact numpy twin of it runs that meanwhile (its tests
    hold the two to the same results), and the compiled one once every module is made."""
    # all of prewarm's work holds the lock: a module it has made already still waits for the modules after it
    if _STARTING:
        return mod in _JIT_MODULES
    return _TWINS_FIRST and not _TARGET_STARTED and mod in _LAZY


_TWINS_FIRST = False                 # twins_first() was called: numba is not started for a twin's sake


def twins_first() -> None:
    """Until numba runs in this process, the compiled functions that have an exact numpy twin (the
    callers of ``starting``) run the twin rather than start numba: for a run whose compiled work is
    small next to numba's start (~0.4 s of CPU holding the GIL, ~100 MiB): the cache producer, whose
    folded batches merge on one representative's 64 columns. Once numba runs (prewarm, or a compiled
    function without a twin, which starts it as ever), the compiled functions are taken."""
    global _TWINS_FIRST
    _TWINS_FIRST = True


_TARGET_STARTED = False


def _start_target() -> None:
    """Import numba and load its CPU target (registries) once, before any dispatcher is visible,
    without scipy (_without_scipy). Called under _LOCK."""
    global _TARGET_STARTED
    if _TARGET_STARTED:
        return
    import numba  # noqa: F401
    from numba.core import event
    from numba.core.registry import cpu_target
    with _without_scipy():
        cpu_target.target_context.refresh()
        cpu_target.typing_context.refresh()
    event.register("numba:compile", _compile_listener())
    _TARGET_STARTED = True


@contextlib.contextmanager
def announce_compiles(stream=None):
    """Inside, the first compilation of this process writes one line to ``stream`` (default
    sys.stderr at that moment): a first run spends seconds there that later ones do not."""
    before = _NOTE["stream"]
    _NOTE["stream"] = stream if stream is not None else "stderr"
    try:
        yield
    finally:
        _NOTE["stream"] = before


def compiles() -> list[str]:
    """``module.function`` of every gfxsim signature this process compiled rather than loaded
    from the on-disk cache, in order (the helpers numba compiles inside one are not counted)."""
    return list(_COMPILED)


def _on_compile(dispatcher) -> None:
    """A dispatcher found no cache entry and compiles (numba's "numba:compile" event; a cache hit
    fires nothing): count it, and say so once where announce_compiles asked."""
    py = dispatcher.py_func
    if py.__module__.split(".")[0] != __name__.split(".")[0]:
        return                                  # numba's own helpers, compiled inside ours
    _COMPILED.append(f"{py.__module__}.{py.__name__}")
    stream = _NOTE["stream"]
    if stream is None or _NOTE["said"]:
        return
    _NOTE["said"] = True
    print(f"gfxsim: compiling the simulator's numba functions (the first run only; cached in "
          f"{dispatcher.stats.cache_path})", file=sys.stderr if stream == "stderr" else stream, flush=True)


def _compile_listener():
    from numba.core.event import Listener

    class OnCompile(Listener):
        def on_start(self, event) -> None:
            _on_compile(event.data["dispatcher"])

        def on_end(self, event) -> None:
            pass
    return OnCompile()


class _NoScipy:
    """A meta-path finder that refuses scipy.linalg (see _without_scipy)."""

    def find_spec(self, name, path=None, target=None):
        if name == "scipy.linalg" or name.startswith("scipy.linalg."):
            raise ImportError(f"{name}: not imported while numba starts (gfxsim.machine.jit)")
        return None


@contextlib.contextmanager
def _without_scipy():
    """numba's start with scipy.linalg unimportable, unless it is already imported (numba's own
    import takes scipy's top package, ~0.02 s, to check its version): numba.np.arraymath
    imports scipy.linalg (~0.3 s, GIL held) at its import only to set a flag that picks a BLAS inner
    product for np.correlate/np.convolve in compiled code; without it they use numba's own loop (the
    same results). np.dot and the rest of numba's linear algebra import scipy themselves when they
    are first compiled, after this, so they still work. gfxsim's compiled functions use none."""
    if "scipy.linalg" in sys.modules:
        yield
        return
    finder = _NoScipy()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


# the widest wave (columns) for which a path without provenance starts numba: a wider one (a batch of
# many workgroups) amortises numpy's per-call cost, and a process running only such waves would pay
# numba's start (~0.5-1 s) for little; where numba runs already, every width takes the compiled path
START_WIDTH = 4096
# True: without numba up, a narrow wave's compiled paths take their numpy paths and count the work they
# did (lane rows, accesses: ~10-30 µs each on numpy); once a process has done START_WORK of it, numba
# starts beside the run (prewarm's thread) and the compiled paths are taken once it is up. A short
# command (the batched asm decode's reduce launch, ~0.1 s of numpy lines) then never pays numba's start
# (~0.5-1 s, and its GIL beside the run), and a long one pays it once its numpy work has cost about as
# much. Both paths give the same bits (each compiled path is held to its numpy path by its tests).
# False: the first narrow wave starts numba on its own thread and waits (the tests, which hold the
# compiled paths to the numpy ones, need the compiled path from the first call).
START_BESIDE = True
START_WORK = 20_000
_WORK = 0                           # that work so far (see START_BESIDE)


def worth_starting(width: int, work: int = 1) -> bool:
    """Whether a compiled path may be taken now for a wave of ``width`` columns that would do ``work``
    (lane rows, accesses) on it (see START_WIDTH and START_BESIDE)."""
    global _WORK
    if _TARGET_STARTED and not _STARTING:
        return True
    if width > START_WIDTH:
        return False
    if not START_BESIDE:
        return True
    _WORK += work
    if _WORK >= START_WORK and not _PREWARMED:  # read without the lock: prewarm's thread holds it while numba starts
        prewarm()
    return False


def running() -> bool:
    """Whether numba's target has started in this process (prewarm or a compiled call) and prewarm's
    thread is done making the dispatchers: a compiled path costs no start-up any more. While that
    thread is at it (it holds the lock past the target's start), a compiled call would wait for it."""
    return _TARGET_STARTED and not _STARTING


def loaded() -> bool:
    """Whether numba has been imported in this process (tests check the off path stays free of it)."""
    return "numba" in sys.modules
