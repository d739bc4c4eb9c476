"""A user's copy of a kernels_py kernel, as one self-contained file."""
import re

from support import ROOT

KP = ROOT / "kernels_py"


def copy_of(module: str, fn: str, new_name: str, mistake=None) -> str:
    """kernels_py/<module>.py as a user's file would hold it: one file (the helpers of
    kernels_py/int8_attention.py it imports copied in, absolute imports), the kernel renamed, with
    ``mistake`` = (old, new) applied once, wherever it is."""
    src = (KP / f"{module}.py").read_text()
    shared = re.search(r"^from \.int8_attention import \([^)]*\)\n|^from \.int8_attention import [^\n]*\n", src, re.M)
    if shared:
        helpers = (KP / "int8_attention.py").read_text().split("from __future__ import annotations\n", 1)[1]
        src = src[:shared.start()] + helpers + src[shared.end():]
    src = src.replace("from .", "from kernels_py.")
    src = src.replace(f"def {fn}(w,", f"def {new_name}(w,")
    if mistake is not None:
        old, new = mistake
        assert src.count(old) == 1, old
        src = src.replace(old, new)
    return src
