"""Where gfxsim keeps what it makes once and reads again: $GFXSIM_CACHE_DIR, else
$XDG_CACHE_HOME/gfxsim, else ~/.cache/gfxsim (compiled HIP sources, device libraries, Triton
builds, parsed assembly)."""
from __future__ import annotations

import json
import os
from pathlib import Path


def cache_root() -> Path:
    """The cache folder (not created here)."""
    given = os.environ.get("GFXSIM_CACHE_DIR")
    if given:
        return Path(given).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gfxsim"


def write_kept(path: Path, obj, keep: int) -> None:
    """``obj`` as JSON at ``path``, whole or not at all (a cache folder that cannot be written: not
    kept, no error); then the folder's ``.json`` files beyond the ``keep`` most recently written
    are removed, so a folder of small records stays bounded."""
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
        return
    try:
        files = [(e.stat().st_mtime_ns, e.path) for e in os.scandir(path.parent) if e.name.endswith(".json")]
    except OSError:
        return
    for _, old in sorted(files, reverse=True)[keep:]:
        try:
            os.remove(old)
        except OSError:                             # another process removed it first
            pass
