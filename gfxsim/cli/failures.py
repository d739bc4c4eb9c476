"""How a command ends when something raises, and its exit status.

Whose error it is decides the form, never the exception's class alone:

- a GfxSimError (gfxsim's own errors, each with its coordinates): one line, exit 2;
- an exception raised in the user's code (a ``--kernel-fn`` file, a kernel of one's own): its
  type, message, file and line, the kernel, workgroup and wave it ran in, and the user's frames of
  the stack, gfxsim's left out; exit 1;
- a builtin error gfxsim meant (``stated``): one a ``raise`` statement of gfxsim's code raised (a
  ValueError naming an option), an OSError (the file system's answer, naming the path), or a
  LookupError/ValueError/TypeError raised inside gfxsim under a call from the user's code (an
  argument of theirs that gfxsim took without checking; the line names the user's call): one
  line, exit 2, as a GfxSimError;
- anything else raised inside gfxsim is a bug (a failed lookup, an AttributeError): the whole
  stack, exit 3.

Whose code raised is read from the stack: the innermost frame that is neither a library's (the
standard library, site-packages) nor gfxsim's (the packages in ``OWN_PACKAGES``) is the user's.
``--traceback`` prints the whole stack in every case; the exit status stays the same.
"""
from __future__ import annotations

import os
import sys
import traceback
from functools import lru_cache, cache

from ..errors import GfxSimError          # imports nothing: start-up stays cheap

EXIT_USER = 1
EXIT_ERROR = 2
EXIT_BUG = 3
EXIT_INTERRUPTED = 130

EXIT_HELP = ("exit status: 0 done; 1 an exception raised by your own code (--kernel-fn, --reduce-fn, ...): its "
             "type, message and your frames; 2 a gfxsim error or bad usage: one line naming what and where "
             "(kernel, workgroup, wave, lane, instruction, source line); 3 an unexpected exception inside gfxsim "
             "(a bug: the whole stack); 130 interrupted. --traceback shows the whole stack of any error.")

# gfxsim's packages: a frame in them is never the user's
OWN_PACKAGES = ("gfxsim", "kernels_py", "visualize", "bench")

# builtin errors that gfxsim's own code raises to name a bad option, input or file
STATED = (LookupError, ValueError)
# ... and those a user's argument may cause inside gfxsim
ARGUMENT = (LookupError, ValueError, TypeError)


@lru_cache(maxsize=1)
def _own_dirs() -> tuple[str, ...]:
    from importlib.util import find_spec
    dirs = []
    for name in OWN_PACKAGES:
        try:
            spec = find_spec(name)
        except (ImportError, ValueError):
            continue
        for d in (spec.submodule_search_locations or ()) if spec else ():
            dirs.append(os.path.realpath(d) + os.sep)
    return tuple(dirs)


@lru_cache(maxsize=1)
def _library_dirs() -> tuple[str, ...]:
    import sysconfig
    paths = sysconfig.get_paths()
    dirs = {os.path.realpath(paths[k]) + os.sep for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    return tuple(sorted(dirs))


@cache
def owner(filename: str) -> str:
    """Whose a frame's file is: "gfxsim", "library" or "user"."""
    if filename.startswith("<"):                  # <frozen runpy>, <string>: the interpreter's
        return "library"
    path = os.path.realpath(filename)
    if path.startswith(_own_dirs()):
        return "gfxsim"
    if (path.startswith(_library_dirs()) or f"{os.sep}site-packages{os.sep}" in path
            or f"{os.sep}dist-packages{os.sep}" in path):
        return "library"
    return "user"


def frames(exc: BaseException) -> list:
    """The stack from the command's call down to where ``exc`` was raised (FrameSummary, outermost first)."""
    return list(traceback.extract_tb(exc.__traceback__))


def raised_by(exc: BaseException) -> str:
    """Whose code raised ``exc``: the owner of the innermost frame that is not a library's."""
    for f in reversed(frames(exc)):
        who = owner(f.filename)
        if who != "library":
            return who
    return "gfxsim"


def stated(exc: BaseException) -> bool:
    """Whether a builtin error raised inside gfxsim is one gfxsim meant (see the module docstring)."""
    if isinstance(exc, OSError):
        return True
    stack = frames(exc)
    if isinstance(exc, ARGUMENT) and any(owner(f.filename) == "user" for f in stack):
        return True
    last = stack[-1] if stack else None
    return (isinstance(exc, STATED) and last is not None and owner(last.filename) == "gfxsim"
            and (last.line or "").lstrip().startswith("raise"))


def _where(f) -> str:
    return f"{f.filename}:{f.lineno}"


def message(exc: BaseException) -> str:
    """The exception's message (a KeyError's without the quotes str() gives it)."""
    if isinstance(exc, KeyError) and not isinstance(exc, GfxSimError) and len(exc.args) == 1:
        return str(exc.args[0])
    return str(exc)


def wave_of(exc: BaseException) -> str:
    """" (kernel .., workgroup .., wave ..)" of the simulated wave whose kernel code raised ``exc``
    (the innermost frame holding a gfxsim Wave; a batch's first workgroup), or "" outside a wave."""
    wave_module = sys.modules.get("gfxsim.machine.wave")      # not loaded: no wave ran
    if wave_module is None:
        return ""
    wave, tb = None, exc.__traceback__
    while tb is not None:
        found = [v for v in tb.tb_frame.f_locals.values() if isinstance(v, wave_module.Wave)]
        wave = found[0] if found else wave
        tb = tb.tb_next
    if wave is None:
        return ""
    c = wave.error(Exception, "").coords
    return f" (kernel {c['kernel']}, workgroup {c['workgroup']}, wave {c['wave']})"


def user_report(exc: BaseException, command: str) -> str:
    """The compact form of an exception from the user's code: what and where, then the user's frames
    (each with its source line), gfxsim's and the libraries' left out."""
    mine = [f for f in frames(exc) if owner(f.filename) == "user"]
    where = f" in your code at {_where(mine[-1])}" if mine else ""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    lines = [f"gfxsim {command}: {text}{where}{wave_of(exc)}"]
    for f in mine:
        lines.append(f"  {_where(f)} in {f.name}" + (f": {f.line.strip()}" if f.line and f.line.strip() else ""))
    lines.append("  (gfxsim's frames left out; --traceback shows the whole stack)")
    return "\n".join(lines)


def error_line(exc: BaseException, command: str) -> str:
    """The one line of a gfxsim error; a builtin error gfxsim raised while running the user's code
    also names the user's innermost frame."""
    line = f"gfxsim {command}: error: {message(exc)}"
    if not isinstance(exc, GfxSimError):
        mine = [f for f in frames(exc) if owner(f.filename) == "user"]
        if mine:
            line += f" (called from {_where(mine[-1])} in {mine[-1].name})"
    return line


def report(exc: BaseException, command: str, *, full: bool = False, stream=None) -> int:
    """Print ``exc`` as the command's end and return the exit status (see the module docstring)."""
    stream = sys.stderr if stream is None else stream
    who = raised_by(exc)
    if isinstance(exc, GfxSimError) or (who == "gfxsim" and stated(exc)):
        status, text = EXIT_ERROR, error_line(exc, command)
    elif who == "user":
        status, text = EXIT_USER, user_report(exc, command)
    else:
        status, text = EXIT_BUG, None
    if full or text is None:
        traceback.print_exception(exc, file=stream)
    if text is None:
        text = f"gfxsim {command}: internal error: {type(exc).__name__}: {exc} (a gfxsim bug: the stack is above)"
    if not full or status == EXIT_BUG:
        print(text, file=stream)
    return status
