"""This process's memory, as Linux reports it: the peak RSS (VmHWM, resettable) and what the
machine still has available. Used by `gfxsim run`'s memory check, `gfxsim sweep`'s per-point
figures and `python -m bench`."""
from __future__ import annotations

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


def mem_available() -> int | None:
    """Bytes the machine can still give (MemAvailable of /proc/meminfo), None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None
