"""The GIL's switch interval while a run's threads share the work: short.

A run simulates on one thread while others make its data, its cache and its numpy references
(kernels_py.host.runners) or start numba (machine.jit.prewarm). numpy frees the GIL inside each
large call; the thread that comes back from one waits for the GIL until its holder reaches a
switch point, up to the switch interval (5 ms by default) when the holder runs Python (the
simulation's statements, numba's start). The reference thread's many short calls each waited
so: beside a 16K decode it ran three times longer than its CPU time, and the decode waited for it.
``short_switch_interval()`` holds the interval at 0.5 ms inside the block; holders nest and
overlap across threads, and the interval before the first is restored when the last leaves.
"""
from __future__ import annotations

import sys
import threading
from contextlib import contextmanager

SHORT_SWITCH_INTERVAL = 0.0005      # seconds

_LOCK = threading.Lock()
_HOLDERS = {"count": 0, "saved": None}


def hold() -> None:
    """Start holding the short interval (release() ends it); the first holder saves the interval."""
    with _LOCK:
        if _HOLDERS["count"] == 0:
            saved = sys.getswitchinterval()
            # a shorter one is kept as it is (set again, it would round down to the microsecond)
            _HOLDERS["saved"] = saved if saved > SHORT_SWITCH_INTERVAL else None
            if _HOLDERS["saved"] is not None:
                sys.setswitchinterval(SHORT_SWITCH_INTERVAL)
        _HOLDERS["count"] += 1


def release() -> None:
    """Stop holding it; the last holder restores the interval the first one saved."""
    with _LOCK:
        if _HOLDERS["count"] == 0:
            from .errors import GfxSimError
            raise GfxSimError("gil.release: the short switch interval is not held (a release without its hold)")
        _HOLDERS["count"] -= 1
        if _HOLDERS["count"] == 0 and _HOLDERS["saved"] is not None:
            sys.setswitchinterval(_HOLDERS["saved"])


@contextmanager
def short_switch_interval():
    """The GIL's switch interval at most SHORT_SWITCH_INTERVAL inside the block (see the module)."""
    hold()
    try:
        yield
    finally:
        release()


__all__ = ["SHORT_SWITCH_INTERVAL", "hold", "release", "short_switch_interval"]
