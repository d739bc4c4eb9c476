"""Parsed assembly kept by content: a .s read again (the same build, another run) is not parsed
again, and its kernels keep their decoded Programs (Kernel.program), so a launch of an unchanged
file starts at once. The key is the SHA-256 of the file's bytes: a rebuilt file that came out the
same is still a hit, a changed one never is. The most recent ``SIZE`` files are kept.
"""
from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections import OrderedDict
from pathlib import Path

from .parse import parse, parse_file

SIZE = 32
_files: OrderedDict = OrderedDict()       # sha256 -> AsmFile
_lock = threading.Lock()


def parse_cached(path: Path | str):
    """``parse_file(path)``, parsed once per distinct content (the AsmFile names ``path``)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError:
        return parse_file(path)          # parse_file names what is wrong
    key = hashlib.sha256(data).hexdigest()
    with _lock:
        hit = _files.get(key)
        if hit is not None:
            _files.move_to_end(key)
    if hit is None:
        try:
            text = data.decode("utf-8") if data.strip() else None
        except UnicodeDecodeError:
            text = None
        if text is None:                 # empty or not text: parse_file names what is wrong
            return parse_file(path)
        hit = parse(text, path)
        with _lock:
            _files[key] = hit
            while len(_files) > SIZE:
                _files.popitem(last=False)
    return hit if hit.path == path else dataclasses.replace(hit, path=path)


def clear() -> None:
    with _lock:
        _files.clear()
