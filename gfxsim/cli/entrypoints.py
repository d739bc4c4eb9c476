"""An entry-point group's entries, remembered between processes.

Listing a group through importlib.metadata costs every command 25-35 ms (its import, then reading
the metadata of every installed distribution) for a list that changes only when a package is
installed, removed or rebuilt. The list is kept in the cache folder beside a fingerprint of what
it was read from: the interpreter, sys.path, and for each folder on it its modification time and
the time and size of every ``entry_points.txt`` of a distribution there. A different fingerprint
reads the metadata again. Where distributions could come from elsewhere (a path entry that is a
file, such as a zip, or an import finder other than the path finder that lists distributions) the
metadata is read every time, as before.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys

_INFO = (".dist-info", ".egg-info")
_FILE = "entry_points.json"


def group_entries(group: str) -> list[tuple[str, str]]:
    """(name, value) of every entry point of ``group``, in importlib.metadata's order."""
    fp = _fingerprint(group)
    path = None
    if fp is not None:
        from ..cachedir import cache_root
        path = cache_root() / _FILE
        try:
            got = json.loads(path.read_text())
            if got.get("fingerprint") == fp:
                return [(n, v) for n, v in got["entries"]]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
    from importlib.metadata import entry_points
    entries = [(ep.name, ep.value) for ep in entry_points(group=group)]
    if path is not None:
        _write(path, {"fingerprint": fp, "entries": entries})
    return entries


def _fingerprint(group: str) -> str | None:
    """A digest of where ``group``'s entries are read from, or None where it cannot be taken."""
    from importlib.machinery import PathFinder
    for finder in sys.meta_path:
        if getattr(finder, "find_distributions", None) is not None and finder is not PathFinder:
            return None
    parts = [group, sys.executable, sys.version]
    for entry in sys.path:
        try:
            root = entry or os.getcwd()
        except OSError:                             # the working folder was removed
            return None
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
    return hashlib.sha1("\n".join(parts).encode()).hexdigest()


def _write(path, obj) -> None:
    """``obj`` as JSON at ``path``, whole or not at all (a cache folder that cannot be written: not kept)."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(obj))
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass


__all__ = ["group_entries"]
