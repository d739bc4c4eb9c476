"""Parsed assembly kept by content: a .s read again (the same build, another run, another process)
is not parsed again, and its kernels keep their decoded Programs (Kernel.program), so a launch of an
unchanged file starts at once. The key is the SHA-256 of the file's bytes: a rebuilt file that came
out the same is still a hit, a changed one never is. The most recent ``SIZE`` files are kept in
memory; on disk (``disk_dir()``, under gfxsim's cache folder) each parse and each kernel's decoded
instructions are kept under that key and a digest of the modules that make them (``code_version``),
so a changed parser or decoder never reads an old entry. A disk entry that cannot be written or read
is skipped: the file is parsed as if it were not there.
"""
from __future__ import annotations

import copyreg
import dataclasses
import hashlib
import io
import os
import pickle
import sys
import threading
from collections import OrderedDict
from functools import cache
from pathlib import Path
from types import MappingProxyType

from ..cachedir import cache_root
from .parse import parse, parse_file

SIZE = 32
DISK = True                               # False: memory only
_files: OrderedDict = OrderedDict()       # sha256 -> AsmFile
_lock = threading.Lock()
# the modules whose code decides what a parse or a decode gives
_MAKERS = ("parse.py", "operands.py", "encoding.py", "run.py", "semantics/dpp.py")


@cache
def code_version() -> str:
    """A digest of the parser and decoder sources and the Python version (a disk entry's namespace)."""
    h = hashlib.sha256(f"{sys.version_info[0]}.{sys.version_info[1]}".encode())
    here = Path(__file__).parent
    for m in _MAKERS:
        h.update(m.encode() + b"\0" + (here / m).read_bytes() + b"\0")
    return h.hexdigest()[:16]


def disk_dir() -> Path:
    return cache_root() / "asm" / code_version()


def _proxy(d: dict) -> MappingProxyType:
    return MappingProxyType(d)


def _dumps(obj) -> bytes:
    f = io.BytesIO()
    p = pickle.Pickler(f, pickle.HIGHEST_PROTOCOL)
    p.dispatch_table = copyreg.dispatch_table.copy()
    p.dispatch_table[MappingProxyType] = lambda m: (_proxy, (dict(m),))     # the parse's read-only maps
    p.dump(obj)
    return f.getvalue()


def _disk_read(name: str):
    if not DISK:
        return None
    try:
        return pickle.loads((disk_dir() / name).read_bytes())
    except Exception:                    # absent, unreadable or from an incompatible install: parse again
        return None


def _disk_write(name: str, obj) -> None:
    if not DISK:
        return
    try:
        d = disk_dir()
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f".{name}.{os.getpid()}.{threading.get_ident()}"
        tmp.write_bytes(_dumps(obj))
        os.replace(tmp, d / name)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        pass                             # a read-only or full cache folder costs a parse next time


def _keyed(f, key: str):
    """Mark each kernel of ``f`` with the content key, so its decoded Program can be kept by it."""
    for k in f.kernels.values():
        object.__setattr__(k, "_content_key", key)
    return f


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
        hit = _disk_read(f"{key}.parse")
        if hit is None:
            hit = parse(text, path)
            _disk_write(f"{key}.parse", hit)
        hit = _keyed(hit, key)
        with _lock:
            _files[key] = hit
            while len(_files) > SIZE:
                _files.popitem(last=False)
    return hit if hit.path == path else dataclasses.replace(hit, path=path)


def _decoded_name(kernel) -> str | None:
    key = getattr(kernel, "_content_key", None)
    if key is None:
        return None
    return f"{key}.{hashlib.sha256(kernel.name.encode()).hexdigest()[:16]}.decoded"


def load_decoded(kernel):
    """The decoded instructions of a kernel parsed through ``parse_cached``, as a decode of it
    stored them (each as (mnemonic, enc, operands, dpp), the Instruction left out), or None."""
    name = _decoded_name(kernel)
    got = None if name is None else _disk_read(name)
    if got is None or len(got) != len(kernel.instructions):
        return None
    return got


def store_decoded(kernel, decoded) -> None:
    """Keep a kernel's decoded instructions (run.Decoded) on disk under its content key."""
    name = _decoded_name(kernel)
    if name is not None:
        _disk_write(name, [(d.mnemonic, d.enc, d.ops, d.dpp) for d in decoded])


def clear() -> None:
    """Forget the parses kept in memory (the disk's entries stay)."""
    with _lock:
        _files.clear()
