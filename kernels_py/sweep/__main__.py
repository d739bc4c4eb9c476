"""`python -m kernels_py.sweep SPEC -o RESULTS ...`: `gfxsim sweep` without the installed entry point."""
import sys

from kernels_py.sweep.cli import main

sys.exit(main())
