"""A user's Python file, imported by path as a module of its own (`gfxsim run --kernel-fn FILE:FN`,
`gfxsim triton FILE:KERNEL`): every failure a UsageError of one line naming the file and, where the
exception came from it, the file's line."""
from __future__ import annotations

import importlib.util
import os
import sys
import traceback
from types import ModuleType

from .errors import UsageError


def import_user_file(path: str, prefix: str, label: str = "", neighbours: bool = False) -> ModuleType:
    """The module of ``path`` (a file that exists), registered in sys.modules as ``prefix`` + its
    path (dataclasses, pickling and triton look modules up by name). ``label``: the start of an error
    message ("--kernel-fn: "); ``neighbours``: the file's folder is on sys.path while it imports."""
    mod_name = prefix + "".join(c if c.isalnum() else "_" for c in os.path.abspath(path))
    folder = os.path.dirname(os.path.abspath(path))
    added = neighbours and folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        spec = importlib.util.spec_from_file_location(mod_name, path)
        if spec is None or spec.loader is None:
            raise ImportError("not a Python source file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module
        spec.loader.exec_module(module)
    except Exception as e:                          # noqa: BLE001 -- anything the user's file raises
        sys.modules.pop(mod_name, None)
        first = (str(e).strip().splitlines() or [""])[0]
        lines = [f"{f.filename}:{f.lineno}" for f in traceback.extract_tb(e.__traceback__)
                 if os.path.realpath(f.filename) == os.path.realpath(path)]
        if isinstance(e, SyntaxError) and e.lineno:
            lines.append(f"{e.filename}:{e.lineno}")
        raise UsageError(f"{label}{path} failed to import: {type(e).__name__}{': ' + first if first else ''}",
                         source=lines[-1] if lines else None) from e
    finally:
        if added:
            sys.path.remove(folder)
    return module
