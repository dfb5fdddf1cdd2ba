"""Output buffers for the C calls: numpy arrays when numpy is installed,
else array.array, so the binding works with the standard library alone.

Owns: ``new(kind, n)`` -> (array, address) and ``copy_from(ptr, kind, n)``.
kind is one of "u32", "i32", "u64", "u8".
"""
import array
import ctypes as C

try:
    import numpy as np
except ImportError:  # numpy is optional
    np = None

_NP = {"u32": "uint32", "i32": "int32", "u64": "uint64", "u8": "uint8"}
_TC = {"u32": "I", "i32": "i", "u64": "Q", "u8": "B"}
_CT = {"u32": C.c_uint32, "i32": C.c_int32, "u64": C.c_uint64, "u8": C.c_uint8}


def new(kind, n):
    """A zeroed array of n elements and its address (0 when n == 0)."""
    if np is not None:
        a = np.zeros(n, dtype=_NP[kind])
        return a, (a.ctypes.data if n else 0)
    a = array.array(_TC[kind], bytes(n * C.sizeof(_CT[kind])))
    return a, (a.buffer_info()[0] if n else 0)


def copy_from(ptr, kind, n):
    """A copy of n elements at ptr (a ctypes pointer or NULL with n == 0)."""
    if n == 0 or not ptr:
        return new(kind, 0)[0]
    raw = C.string_at(C.cast(ptr, C.c_void_p), n * C.sizeof(_CT[kind]))
    if np is not None:
        return np.frombuffer(raw, dtype=_NP[kind]).copy()
    return array.array(_TC[kind], raw)


def head(a, n):
    """The first n elements of an array from new()."""
    return a[:n]


def u32_in(ids):
    """(address, n, keepalive) of ids as contiguous uint32."""
    if np is not None:
        a = np.ascontiguousarray(ids, dtype=np.uint32)
        if a.ndim != 1:
            a = a.reshape(-1)
        return (a.ctypes.data if a.size else 0), a.shape[0], a
    a = array.array("I", ids)
    return (a.buffer_info()[0] if len(a) else 0), len(a), a
