"""The asm side of gfxsim, independent of how the code was built: parse clang's AMDGPU assembly
into kernels, instructions, loops and metadata (parse.py), check encoding families against llvm-mc
(encoding.py), and report the figures of `gfxsim hip inspect` (inspect.py). The HIP toolchain
(gfxsim/hip/) builds the .s files; an asm front end executes them.
"""
from .parse import FAMILIES, AsmFile, Instruction, Kernel, encoding_family, parse, parse_file

__all__ = ["AsmFile", "Kernel", "Instruction", "FAMILIES", "encoding_family", "parse", "parse_file"]
