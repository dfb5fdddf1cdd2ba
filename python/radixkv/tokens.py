"""Token arrays for the C API: contiguous int32, from whatever the caller has.

Owns: ``as_tokens(x)``, which returns ``(address, length, keepalive)`` for
the C calls. An int32, C-contiguous numpy array or CPU torch tensor is
passed by address, without a copy; an ``array.array('i')`` too. Anything
else (lists, tuples, ranges, other dtypes, strided or GPU tensors) is copied
once into a new int32 array; values outside int32 raise InvalidArgError
(never silently wrapped). keepalive must be held for as long as the address
is used.

An array's address comes from ``address_of`` (ctypes' buffer protocol),
about a third of what numpy's ``.ctypes.data`` costs: on the per-request
path of a cache that is a microsecond or more per call.

Lists and tuples (what a Python server holds) are packed with ``struct``:
its native "i" packer converts an int in about half the time
``array.array('i', x)`` takes (which parses each element with a format
string), with the same range check. Short ones go through array.array,
whose fixed cost is lower.
"""
import array
import ctypes as C
import struct
import sys

from .errors import InvalidArgError

_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1
_INT_ITEMSIZE_OK = array.array("i").itemsize == 4


def _np():
    return sys.modules.get("numpy")


_addressof, _char = C.addressof, C.c_char


def address_of(x):
    """The address of x's memory if x exports a writable, C-contiguous
    buffer of at least one byte (a numpy array, an array.array), else
    None. Valid while x lives."""
    try:
        return _addressof(_char.from_buffer(x))
    except (TypeError, ValueError, BufferError):
        return None


def _from_numpy(x):
    np = _np()
    if x.dtype == np.int32 and x.ndim == 1:
        a = address_of(x)  # None: empty, read-only or strided
        if a is not None:
            return a, x.shape[0], x
        if x.flags.c_contiguous:
            return x.ctypes.data, x.shape[0], x
    if x.ndim != 1:
        x = x.reshape(-1)
    if x.dtype.kind not in "iub":
        raise InvalidArgError("tokens", f"token ids must be integers, not {x.dtype}")
    if x.size and x.dtype.itemsize >= 4 and x.dtype != np.int32:
        lo, hi = int(x.min()), int(x.max())
        if lo < _I32_MIN or hi > _I32_MAX:
            raise InvalidArgError("tokens", "a token id does not fit int32")
    y = np.ascontiguousarray(x, dtype=np.int32)
    return y.ctypes.data, y.shape[0], y


def _from_torch(x):
    import torch
    if x.dim() != 1:
        x = x.reshape(-1)
    if x.dtype == torch.int32 and x.device.type == "cpu" and x.is_contiguous():
        return x.data_ptr(), x.shape[0], x
    if x.dtype.is_floating_point or x.dtype.is_complex:
        raise InvalidArgError("tokens", f"token ids must be integers, not {x.dtype}")
    x = x.detach().to("cpu")
    if x.numel() and x.dtype == torch.int64:
        lo, hi = int(x.min()), int(x.max())
        if lo < _I32_MIN or hi > _I32_MAX:
            raise InvalidArgError("tokens", "a token id does not fit int32")
    y = x.to(torch.int32).contiguous()
    return y.data_ptr(), y.shape[0], y


_PACK_MIN = 128  # below this array.array's lower fixed cost wins
_ZERO = array.array("i", [0])


def list_to_int32(x):
    """A list or tuple of ints as a new array.array('i'); InvalidArgError
    when an id is not an int or does not fit int32."""
    n = len(x)
    try:
        if n < _PACK_MIN:
            return array.array("i", x)
        a = _ZERO * n  # a block copy, no per-element work
        struct.pack_into(f"{n}i", a, 0, *x)
        return a
    except OverflowError:
        raise InvalidArgError("tokens", "a token id does not fit int32") from None
    except TypeError as e:
        raise InvalidArgError("tokens", f"token ids must be integers: {e}") from None
    except struct.error as e:
        if "format requires" in str(e):
            raise InvalidArgError("tokens", "a token id does not fit int32") from None
        raise InvalidArgError("tokens", f"token ids must be integers: {e}") from None


def as_tokens(x):
    """(address, n, keepalive) of x as contiguous int32 token ids."""
    if isinstance(x, array.array) and x.typecode == "i" and _INT_ITEMSIZE_OK:
        return x.buffer_info()[0], len(x), x
    np = _np()
    if np is not None and isinstance(x, np.ndarray):
        return _from_numpy(x)
    if type(x).__module__.startswith("torch") and hasattr(x, "data_ptr"):
        return _from_torch(x)
    if isinstance(x, (list, tuple)) and _INT_ITEMSIZE_OK:
        a = list_to_int32(x)
        return (a.buffer_info()[0] if len(a) else 0), len(a), a
    try:
        a = array.array("i", x)
    except OverflowError:
        raise InvalidArgError("tokens", "a token id does not fit int32") from None
    except TypeError as e:
        raise InvalidArgError("tokens", f"token ids must be integers: {e}") from None
    return a.buffer_info()[0], len(a), a


def to_int32_array(x):
    """x as an owned or borrowed int32 array object (array, numpy or torch)."""
    return as_tokens(x)[2]
