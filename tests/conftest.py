import os

os.environ.setdefault("MPLBACKEND", "Agg")

# The tests hold each compiled path to its numpy path in this process: they need the compiled path
# from its first call, so a narrow wave starts numba and waits, as before jit.START_BESIDE
# (tests/gfxsim/machine/test_jit_start.py holds START_BESIDE itself, in child processes).
from gfxsim.machine import jit  # noqa: E402

jit.START_BESIDE = False
