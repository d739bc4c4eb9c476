"""The numba signatures a kind of command used, remembered between processes.

A compiled function's first call with an argument type loads that signature from numba's disk
cache (5-17 ms of CPU each, on whichever thread calls it: a 16K decode's first wave loaded 18 of
them, 57 ms on the critical path). Every signature in the cache is far more than one command uses,
so a command says what kind it is (``expect``: the sub-command and its settings that are not
numbers; sizes rarely change which functions run and never their types), and prewarm's thread
(gfxsim.machine.jit) loads the signatures the last command of that kind used while the main
thread builds inputs; after the command ``remember`` writes what this one used. A record is kept
per kind and place (this gfxsim's folder, Python's and numba's versions, NUMBA_CACHE_DIR: each
checkout has its own numba cache) in the cache folder, named by a checksum of both and holding them
in full; the folder keeps the KEEP most recently written, a record at most MOST entries. A record that cannot be read,
is not JSON of the expected shape or names another kind or place is ignored (nothing is loaded
ahead); an entry whose function or cached signature is gone is skipped by the loader and dropped
at the next write. This module imports nothing heavy (the CLI calls it before every command).
"""
from __future__ import annotations

import json
import os
import sys
import zlib

_FOLDER = "jit"                    # in the cache folder: one record per kind and place
KEEP = 32                          # records kept there (the least recently written go first)
MOST = 512                         # entries a record keeps (the oldest go first)
_STATE: dict = {"kind": None, "read": None}     # this process's kind; the entries read for it


def expect(kind: str | None) -> None:
    """This process runs a command of ``kind`` (None: none to remember)."""
    _STATE["kind"] = kind
    _STATE["read"] = None


def expected() -> list[tuple[str, str, tuple[str, ...]]]:
    """(module, function, argument type names) of each signature the last command of this kind
    used, oldest first; [] where there is no kind or no readable record of it. Read once."""
    if _STATE["read"] is None:
        _STATE["read"] = _read(_STATE["kind"]) if _STATE["kind"] is not None else []
    return list(_STATE["read"])


def remember() -> None:
    """After a command: the signatures this process's compiled functions hold, written as its kind's
    record where they differ from what was read (a process that never started numba writes nothing)."""
    jit = sys.modules.get("gfxsim.machine.jit")
    if _STATE["kind"] is None or jit is None or not jit.running():
        return
    read = expected()
    entries = jit.signatures_to_keep(read)[-MOST:]
    if entries != read:
        _write(_STATE["kind"], entries)
        _STATE["read"] = entries


def _place() -> str:
    numba = sys.modules.get("numba")
    return "\n".join([os.path.dirname(os.path.abspath(__file__)), sys.version, getattr(numba, "__version__", "-"),
                      os.environ.get("NUMBA_CACHE_DIR", "")])


def _key(kind: str) -> str:
    """A record's key: its kind and place, kept in full in the record it names."""
    return f"{kind}\n{_place()}"


def _path(key: str):
    from .cachedir import cache_root
    return cache_root() / _FOLDER / f"{zlib.crc32(key.encode()):08x}.json"


def _read(kind: str) -> list:
    key = _key(kind)
    try:
        got = json.loads(_path(key).read_text())
        if not isinstance(got, dict) or got.get("key") != key or not isinstance(got.get("entries"), list):
            return []
        out = []
        for mod, fn, names in got["entries"]:
            if not (isinstance(mod, str) and isinstance(fn, str) and isinstance(names, list)
                    and all(isinstance(n, str) for n in names)):
                return []
            out.append((mod, fn, tuple(names)))
        return out[-MOST:]
    except (OSError, ValueError, TypeError):      # missing, unreadable, not JSON, entries of another shape
        return []


def _write(kind: str, entries) -> None:
    """The record, whole or not at all; the folder keeps the KEEP most recently written."""
    from .cachedir import write_kept
    key = _key(kind)
    write_kept(_path(key), {"key": key, "entries": [[m, f, list(n)] for m, f, n in entries]}, KEEP)


__all__ = ["expect", "expected", "remember", "KEEP", "MOST"]
