"""A user's SageAttention2 port from CDNA3 code that quantizes V to the type its MI300 kernel used,
``fp8`` (e4m3fnuz: exponent bias 8), and hands those bytes to sm_90's e4m3 ``mma.sync``, which
reads OCP e4m3fn (bias 7): every V element is read twice as large, and ±240 as NaN. The
debugger names the encoding the bytes were written in (by the conversion) and the one the mma
reads: a format-mismatch on every PV instruction. ``sage_fixed_v`` quantizes to e4m3 and is silent.

    gfxsim run sage_attention --arch sm_90 --kernel-fn tests/defective/sage_fnuz_v.py:sage_fnuz_v
"""
from kernels_py.fp8.sage_attention import sage_attention


def sage_fnuz_v(w, *args, **kw):
    kw["v_type"] = "fp8"
    return sage_attention(w, *args, **kw)


def sage_fixed_v(w, *args, **kw):
    kw["v_type"] = "fp8_e4m3"
    return sage_attention(w, *args, **kw)
