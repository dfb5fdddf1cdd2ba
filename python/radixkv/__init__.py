"""radixkv: a prefix-cache engine for LLM serving, from Python.

A ctypes binding of libradixkv (include/radixkv.h): Pool (paged KV blocks),
Tree (token radix tree: match, insert, leases, eviction, retention, events,
lower tiers through Store), Scheduler (cache-aware batching). Token arrays
are lists, numpy arrays or torch tensors (int32 ones pass without a copy).
Every failing C call raises a radixkv.Error subclass carrying the status
and rkv_last_error(). ``radixkv.sglang`` is an SGLang prefix-cache backend.

    import radixkv
    pool = radixkv.Pool(num_blocks=1024, page_size=16)
    tree = radixkv.Tree(pool)
    blocks = tree.alloc_blocks(2)
    tree.insert(list(range(32)), blocks)
    pool.unref(blocks)                  # the tree holds its own references
    m = tree.match(list(range(40)))     # m.matched_tokens == 32
    with tree.lock(m.node):
        ...                             # the prefix cannot be evicted here
"""
from ._ffi import library_path, version as _version
from .errors import (BusyError, CorruptError, CudaError, DuplicateError, Error,
                     FormatError, InvalidArgError, IoError, NoDeviceError,
                     NoSpaceError, NotFoundError, OutOfMemoryError, PinCapError,
                     StaleHandleError, StateError, UnsupportedError)
from .events import Event, EventKind, Medium
from .pool import Pool, block_hash
from .sched import BatchPlan, Scheduler
from .tokens import as_tokens
from .tree import (InsertResult, Lease, MatchResult, NodeHandle, Retention, Store,
                   Tree)

__version__ = _version()

__all__ = [
    "__version__", "library_path", "Pool", "Tree", "Store", "Scheduler", "BatchPlan",
    "Lease", "NodeHandle", "MatchResult", "InsertResult", "Retention", "Event",
    "EventKind", "Medium", "block_hash", "as_tokens", "Error", "InvalidArgError",
    "OutOfMemoryError", "NoSpaceError", "StateError", "StaleHandleError", "BusyError",
    "NotFoundError", "DuplicateError", "CudaError", "NoDeviceError", "UnsupportedError",
    "FormatError", "IoError", "CorruptError", "PinCapError",
]
