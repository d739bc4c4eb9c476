"""What a HIP source that includes <hip/hip_runtime.h> needs beside clang: the HIP headers and the
ROCm device libraries (ockl/ocml bitcode, where threadIdx, blockDim and the math functions live).

Debian ships both (libamdhip64-dev: /usr/include/hip, HIP 5.2; rocm-device-libs:
/usr/lib/<multiarch>/amdgcn/bitcode) but its device libraries stop at gfx940: clang-19 refuses a
gfx941/gfx942 HIP compile with "cannot find ROCm device library for gfx942". The missing library
holds one constant, ``__oclc_ISA_version`` (major*1000 + minor*100 + stepping: 9402 for gfx942),
which ``device_lib_dir`` compiles from a one-line OpenCL source with the same clang into a folder
of links to Debian's libraries plus the new file, and hands clang that folder as
--rocm-device-lib-path.
"""
from __future__ import annotations

import glob
import os
import re
import subprocess
from pathlib import Path

from .toolchain import Toolchain, ToolchainError

HIP_APT = "apt-get install -y --no-install-recommends libamdhip64-dev rocm-device-libs"
# GFXSIM_HIP_INCLUDE / GFXSIM_DEVICE_LIBS override the Debian locations
HIP_INCLUDE = Path("/usr/include")
_BITCODE_GLOB = "/usr/lib/*/amdgcn/bitcode"


def hip_include() -> Path:
    """The folder holding hip/hip_runtime.h."""
    root = Path(os.environ.get("GFXSIM_HIP_INCLUDE", HIP_INCLUDE))
    if not (root / "hip" / "hip_runtime.h").is_file():
        raise ToolchainError(f"no HIP headers: {root}/hip/hip_runtime.h is missing (a source that includes "
                             f"<hip/hip_runtime.h> needs them): {HIP_APT}")
    return root


def hip_version(include: Path) -> str:
    """MAJOR.MINOR.PATCH of the headers (hip/hip_version.h), what clang's --hip-version takes."""
    text = (include / "hip" / "hip_version.h").read_text(errors="replace")
    parts = [re.search(rf"#define\s+HIP_VERSION_{k}\s+(\d+)", text) for k in ("MAJOR", "MINOR", "PATCH")]
    if not all(parts):
        raise ToolchainError(f"{include}/hip/hip_version.h: no HIP_VERSION_MAJOR/MINOR/PATCH")
    return ".".join(m.group(1) for m in parts)


def debian_bitcode() -> Path:
    """Debian's device-library folder (ockl.bc, ocml.bc, oclc_*.bc)."""
    given = os.environ.get("GFXSIM_DEVICE_LIBS")
    found = [Path(given)] if given else [Path(p) for p in sorted(glob.glob(_BITCODE_GLOB))]
    for d in found:
        if (d / "ockl.bc").is_file():
            return d
    raise ToolchainError(f"no ROCm device libraries (ockl.bc) in {given or _BITCODE_GLOB}: a source that includes "
                         f"<hip/hip_runtime.h> links them: {HIP_APT}")


def isa_version(offload_arch: str) -> tuple[str, int]:
    """("942", 9402): the suffix of oclc_isa_version_*.bc and the value of __oclc_ISA_version."""
    m = re.fullmatch(r"gfx(\d+)([0-9a-f])([0-9a-f])", offload_arch)
    if not m:
        raise ToolchainError(f"{offload_arch}: not a gfxNNN processor name")
    major, minor, step = int(m.group(1)), int(m.group(2), 16), int(m.group(3), 16)
    return offload_arch[3:], major * 1000 + minor * 100 + step


def device_lib_dir(tc: Toolchain, offload_arch: str, cache: Path) -> Path:
    """A --rocm-device-lib-path for ``offload_arch``: Debian's folder when it has the arch's ISA
    version library, else ``cache``/device-libs/clang-N/ with links to Debian's libraries and that
    library compiled by ``tc``'s clang (once; kept for later compiles)."""
    deb = debian_bitcode()
    suffix, value = isa_version(offload_arch)
    name = f"oclc_isa_version_{suffix}.bc"
    if (deb / name).is_file():
        return deb
    out = cache / "device-libs" / f"clang-{tc.major}"
    if (out / name).is_file() and all((out / p.name).exists() for p in deb.glob("*.bc")):
        return out
    out.mkdir(parents=True, exist_ok=True)
    for p in deb.glob("*.bc"):
        link = out / p.name
        if not link.exists():
            link.unlink(missing_ok=True)          # a dangling link left by an older Debian folder
            try:
                link.symlink_to(p)
            except FileExistsError:               # another process made it meanwhile
                pass
    src = out / f"isa_version_{suffix}.{os.getpid()}.cl"
    src.write_text(f'__attribute__((visibility("protected"))) const __constant int __oclc_ISA_version = {value};\n')
    tmp = out / f".{name}.{os.getpid()}"
    cmd = [str(tc.clang), "-x", "cl", "-cl-std=CL2.0", "--target=amdgcn-amd-amdhsa", f"-mcpu={offload_arch}",
           "-nogpulib", "-emit-llvm", "-c", str(src), "-o", str(tmp)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    os.replace(src, out / f"isa_version_{suffix}.cl")     # kept: the source the library was built from
    if r.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise ToolchainError(f"building the missing device library {name} failed (exit {r.returncode}):\n"
                             f"{' '.join(cmd)}\n{r.stderr.strip()}")
    os.replace(tmp, out / name)
    return out
