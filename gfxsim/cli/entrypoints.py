"""An entry-point group's entries, remembered between processes.

Listing a group through importlib.metadata costs every command 25-35 ms (its import, then reading
the metadata of every installed distribution) for a list that changes only when a package is
installed, removed or rebuilt. The list is kept in the cache folder beside a stamp of what it was
read from: for each folder on sys.path its modification time and the time and size of every
``entry_points.txt`` of a distribution there. A different stamp reads the metadata again. Each
place the list is read from (the interpreter and its sys.path: a checkout run as ``python -m
gfxsim`` from its own folder has its own) keeps its own file, named by a checksum of that place and
holding the place in full, so checkouts that take turns each find their own list instead of
overwriting one file; the folder keeps the KEEP most recently written. Where distributions could
come from elsewhere (a path entry that is a file, such as a zip, or an import finder other than the
path finder that lists distributions) the metadata is read every time, as before.
"""
from __future__ import annotations

import json
import os
import sys
import zlib

_INFO = (".dist-info", ".egg-info")
_FOLDER = "entry_points"          # in the cache folder: one file per place the entries are read from
KEEP = 16                         # files kept there (the least recently written go first)


def group_entries(group: str) -> list[tuple[str, str]]:
    """(name, value) of every entry point of ``group``, in importlib.metadata's order."""
    fp = _fingerprint(group)
    path = None
    if fp is not None:
        place, stamp = fp
        from ..cachedir import cache_root, write_kept
        path = cache_root() / _FOLDER / f"{zlib.crc32(place.encode()):08x}.json"
        try:
            got = json.loads(path.read_text())
            if got.get("place") == place and got.get("stamp") == stamp:
                return [(n, v) for n, v in got["entries"]]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
    from importlib.metadata import entry_points
    entries = [(ep.name, ep.value) for ep in entry_points(group=group)]
    if path is not None:
        write_kept(path, {"place": place, "stamp": stamp, "entries": entries}, KEEP)
    return entries


def _fingerprint(group: str) -> tuple[str, str] | None:
    """(where ``group``'s entries are read from: the group, the interpreter and sys.path; the stamp
    of what is there), or None where it cannot be taken."""
    from importlib.machinery import PathFinder
    for finder in sys.meta_path:
        if getattr(finder, "find_distributions", None) is not None and finder is not PathFinder:
            return None
    place = [group, sys.executable, sys.version]
    parts = []
    for entry in sys.path:
        try:
            root = entry or os.getcwd()
        except OSError:                             # the working folder was removed
            return None
        place.append(root)
        try:
            st = os.stat(root)
        except OSError:
            parts.append(f"{entry}|-")
            continue
        if not os.path.isdir(root):
            return None
        parts.append(f"{entry}|{st.st_mtime_ns}")
        try:
            names = os.listdir(root)
        except OSError:
            return None
        for name in sorted(names):
            low = name.lower()
            if low.endswith(_INFO) or low == "egg-info":
                try:
                    eps = os.stat(os.path.join(root, name, "entry_points.txt"))
                    parts.append(f"{name}|{eps.st_mtime_ns}|{eps.st_size}")
                except OSError:
                    parts.append(f"{name}|-")
    return "\n".join(place), "\n".join(parts)


__all__ = ["group_entries"]
