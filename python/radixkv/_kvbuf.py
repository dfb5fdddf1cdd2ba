"""Server-owned KV tensors described as an rkv_kv_buffers (Pool.from_tensors).

Owns: reading a layer list of torch tensors or numpy arrays -- shape,
element type, byte strides, base addresses, device -- and checking that
they form one pool: every layer's K and V the same shape, dtype, strides
and device, head_dim elements contiguous. Invariant: what it returns
addresses exactly the tensors it was given (no copies are ever made: a
copy would be KV memory the server no longer sees), so a tensor that is
not already laid out right is refused, never converted.

Accepted shapes, per layer (P = page_size):
  [num_blocks, P, H, D]   a paged layout (vLLM's flash-attn layout);
  [num_slots, H, D]       SGLang's MHATokenToKVPool, slot = block * P + t
                          (num_slots rounded down to whole pages).
"""
import ctypes as C

from .errors import InvalidArgError

_TORCH_DTYPES = {"torch.float16": 0, "torch.bfloat16": 1, "torch.float32": 2}
_NUMPY_DTYPES = {"float16": 0, "float32": 2}
_ELEM = {0: 2, 1: 2, 2: 4}


def _bad(msg):
    return InvalidArgError("radixkv.Pool.from_tensors", msg)


def _describe(t):
    """(dtype code, shape, byte strides, address, device, cuda index)."""
    if hasattr(t, "data_ptr") and hasattr(t, "element_size"):  # torch
        code = _TORCH_DTYPES.get(str(t.dtype))
        if code is None:
            raise _bad(f"dtype {t.dtype} is not float16, bfloat16 or float32")
        es = t.element_size()
        strides = tuple(s * es for s in t.stride())
        dev = 1 if t.device.type == "cuda" else 0
        if t.device.type not in ("cpu", "cuda"):
            raise _bad(f"device {t.device} is neither cpu nor cuda")
        return code, tuple(t.shape), strides, t.data_ptr(), dev, t.device.index or 0
    if hasattr(t, "__array_interface__") and hasattr(t, "strides"):  # numpy
        code = _NUMPY_DTYPES.get(str(t.dtype))
        if code is None:
            raise _bad(f"dtype {t.dtype} is not float16 or float32")
        if not t.flags.writeable:
            raise _bad("a read-only array cannot hold KV")
        return code, tuple(t.shape), tuple(t.strides), t.ctypes.data, 0, 0
    raise _bad(f"{type(t).__name__} is neither a torch tensor nor a numpy array")


def describe(k_layers, v_layers, page_size):
    """(pool config fields as a dict, [k addresses], [v addresses],
    (block, token, head) byte strides)."""
    k_layers, v_layers = list(k_layers), list(v_layers)
    if not k_layers or len(k_layers) != len(v_layers):
        raise _bad(f"{len(k_layers)} K layers and {len(v_layers)} V layers "
                   "(need the same number, at least one)")
    if page_size < 1:
        raise _bad("page_size must be >= 1")
    first = _describe(k_layers[0])
    code, shape, strides, _a, dev, idx = first
    for i, t in enumerate(k_layers + v_layers):
        d = _describe(t)
        if (d[0], d[1], d[2], d[4], d[5]) != (code, shape, strides, dev, idx):
            which = ("K", "V")[i >= len(k_layers)]
            raise _bad(f"{which} layer {i % len(k_layers)}: dtype, shape, strides or "
                       "device differ from K layer 0 (all must be alike)")
    es = _ELEM[code]
    if len(shape) == 4:
        nb, p, h, dim = shape
        if p != page_size:
            raise _bad(f"shape {shape}: dim 1 is {p}, page_size is {page_size}")
        bs, ts, hs, ds = strides
    elif len(shape) == 3:
        slots, h, dim = shape
        nb = slots // page_size
        ts, hs, ds = strides
        bs = ts * page_size
    else:
        raise _bad(f"shape {shape}: need [num_blocks, page_size, heads, head_dim] "
                   "or [num_slots, heads, head_dim]")
    if ds != es:
        raise _bad(f"head_dim elements must be contiguous (stride {ds} bytes, "
                   f"element {es})")
    if nb < 1 or h < 1 or dim < 1:
        raise _bad(f"shape {shape} holds no whole block")
    if min(bs, ts, hs) < 0:
        raise _bad("negative strides")
    cfg = {"num_blocks": nb, "page_size": page_size, "num_kv_heads": h,
           "head_dim": dim, "dtype": code, "device": dev, "cuda_device": idx,
           "num_layers": len(k_layers)}
    ks = [_describe(t)[3] for t in k_layers]
    vs = [_describe(t)[3] for t in v_layers]
    return cfg, ks, vs, (bs, ts, hs)


def pointer_array(addrs):
    return (C.c_void_p * len(addrs))(*addrs)
