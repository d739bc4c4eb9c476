"""The tinygrad side-by-side's own parts (no tinygrad needed): the code-object loader and the
comparison that decides whether tinygrad's run counts."""
import ctypes
import struct

import numpy as np
from support import ROOT, need_toolchain, repo_project

from bench.tinygrad_side import compare, load_code


def test_equal_and_close_buffers_count_and_others_do_not():
    a = np.arange(8, dtype=np.float32).view(np.uint8)
    assert compare({"out": a}, {"out": a.copy()}) == {"same": True, "differ": {}}
    b = a.view(np.float32).copy()
    b[3] = np.nextafter(b[3], np.float32(9))             # one value 1 ulp off: a sum in another order
    close = compare({"out": a}, {"out": b.view(np.uint8)})
    assert close["same"] and "1 of 8 float32 values" in close["differ"]["out"]
    b[3] = 3.5
    assert not compare({"out": a}, {"out": b.view(np.uint8)})["same"]
    assert not compare({"x": np.arange(3, dtype=np.uint8)}, {"x": np.zeros(3, np.uint8)})["same"]
    k = np.zeros(64, np.uint8)                             # the kernarg holds other addresses: not compared
    assert compare({"kernarg": k}, {"kernarg": k + 1})["same"]


def test_the_code_object_is_laid_out_with_its_descriptor():
    from gfxsim.hip import build as hipbuild
    need_toolchain("gfx942")
    hipbuild.build(["int8_kv_cache"], "gfx942", project=repo_project())      # kept where up to date
    co = ROOT / "build" / "hip" / "gfx942" / "int8_kv_cache.co"
    image, size, entry, rsrc2 = load_code(co, "int8_kv_cache")
    base = ctypes.addressof(image)
    assert base < entry < base + size
    assert rsrc2 & 0x3E == 2 << 1                         # two user SGPRs: the kernarg segment pointer
    first = struct.unpack_from("<I", bytes(image[entry - base:entry - base + 4]))[0]
    assert first != 0                                      # code, not padding
