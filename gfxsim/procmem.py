"""This process's memory, as Linux reports it: the peak RSS (VmHWM, resettable) and what the
machine still has available. Used by `gfxsim run`'s memory check, `gfxsim sweep`'s per-point
figures and `python -m bench`."""
from __future__ import annotations

import os
import sys


def reset_peak_rss() -> bool:
    """Reset this process's peak RSS (VmHWM) through /proc/self/clear_refs "5" (Linux 4.0+);
    False where that is not possible (the peak then counts from the process's start)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_bytes() -> int | None:
    """This process's peak RSS since the last reset (VmHWM of /proc/self/status), else
    getrusage's ru_maxrss (since the start), else None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource
        r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return r if sys.platform == "darwin" else r * 1024       # bytes on macOS, KiB on Linux
    except (ImportError, OSError):
        return None


MEM_AVAILABLE_ENV = "GFXSIM_MEM_AVAILABLE"


def mem_available() -> int | None:
    """Bytes the machine can still give (MemAvailable of /proc/meminfo), None where unknown.
    GFXSIM_MEM_AVAILABLE (bytes) replaces it: `python -m bench` gives its children the budget it
    enforces on them, so a figure does not depend on what other processes hold at that moment."""
    given = os.environ.get(MEM_AVAILABLE_ENV)
    if given is not None:
        try:
            return int(given)
        except ValueError:
            from .errors import ArgumentError
            raise ArgumentError(f"{MEM_AVAILABLE_ENV}={given!r}: a number of bytes expected") from None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8


def keep_freed_pages(libc_name: str = "libc.so.6") -> bool:
    """Have glibc's malloc keep the memory a run frees for its next arrays instead of handing it
    back to the kernel: a simulation frees and allocates arrays of 0.1-32 MiB all the time (one
    value of a batched wave is 0.5 MiB), and by default glibc maps each one afresh and unmaps it
    when freed, on each of the threads' arenas, so every page is faulted in again. One arena, no
    trimming, and blocks up to 32 MiB from the heap halve the page faults of a 16K decode (87k ->
    38k), its system time (0.22 -> 0.15 s) and the full trace's (3-6.6 s -> 1.2-1.8 s), without
    raising the peak RSS. The console script calls it; a library user's process is left alone.
    False (nothing changed) where there is no glibc."""
    try:
        import ctypes
        mallopt = ctypes.CDLL(libc_name).mallopt
    except (OSError, AttributeError):
        return False
    ok = mallopt(_M_ARENA_MAX, 1) and mallopt(_M_TRIM_THRESHOLD, 1 << 30) and mallopt(_M_MMAP_THRESHOLD, 32 << 20)
    return bool(ok)


HUGEPAGE_ENV = "NUMPY_MADVISE_HUGEPAGE"       # numpy's own switch, read when numpy is imported


def small_pages() -> bool:
    """Have numpy stop asking Linux for transparent huge pages: by default it madvises every array
    of 4 MiB and more MADV_HUGEPAGE, and where THP's defrag setting is "madvise" (a common default,
    this VM's) the first touch of each 2 MiB page may compact memory on the spot and the whole
    page is zeroed, used or not. On the 2-core VM the 16K decode without provenance spent 0.39-0.52 s
    of system time with them and 0.23-0.27 s without, user time and peak RSS the same (4 runs
    each, alternating); 192 MiB first touched by a bare process: 0.20-0.57 s of CPU against
    0.12-0.14 s. Numbers are not touched: only how pages are mapped. Where the user set
    NUMPY_MADVISE_HUGEPAGE, it decides. Set through that variable before numpy is imported (so a
    command that never imports numpy does not pay for it; processes the command starts inherit
    it), else numpy's setter. The console script calls it; a library user's process is left
    alone. Returns whether this call turned them off."""
    if os.environ.get(HUGEPAGE_ENV) is not None:
        return False
    np = sys.modules.get("numpy")
    if np is None:
        os.environ[HUGEPAGE_ENV] = "0"
        return True
    core = getattr(np, "_core", None) or getattr(np, "core", None)
    setter = getattr(getattr(core, "multiarray", None), "_set_madvise_hugepage", None)
    if setter is None:
        return False
    setter(False)
    return True


# the cyclic collector's thresholds for a command (gc.set_threshold): young collections every
# 20,000 new objects instead of 700, older ones as often relative to those
COLLECT_THRESHOLDS = (20_000, 20, 20)


def collect_less() -> tuple[int, int, int]:
    """Have Python's cyclic garbage collector run less often: a run with provenance makes millions
    of small objects that live to its end, and with the default thresholds every 700 new objects
    started a collection that walked the young ones and, twice in a 16K decode, every object the
    process held (0.5 s of collections that found ~1,400 objects in cycles; 0.1 s with these
    thresholds, the peak RSS unchanged). Cycles are still collected. The console script calls it;
    a library user's process is left alone. Returns the thresholds before."""
    import gc
    before = gc.get_threshold()
    gc.set_threshold(*COLLECT_THRESHOLDS)
    return before
