"""Matrix-instruction record fields as comparable values, for tests that hold a fast path's
records to the exact path's."""
import numpy as np


def field_key(x):
    """A record field as comparable bytes (arrays by dtype, shape and content; masks by planes)."""
    if isinstance(x, np.ndarray):
        return ("nd", x.dtype.str, x.shape, x.tobytes())
    if isinstance(x, dict):
        return ("d", sorted((k, field_key(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return ("l", [field_key(y) for y in x])
    if hasattr(x, "bits") and hasattr(x, "base"):
        return ("mask", field_key(x.base), field_key(x.bits), field_key(x.wide))
    return ("o", repr(x))
