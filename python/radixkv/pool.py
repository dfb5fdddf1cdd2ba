"""radixkv.Pool: the paged KV block pool (alloc/ in C).

Owns: one rkv_pool handle, destroyed by close() / the context manager /
the garbage collector. A tree created on the pool keeps the pool alive.
"""
import ctypes as C
import weakref

from . import _arrays
from . import _structs as S
from ._ffi import check, lib

DTYPES = {"f16": 0, "bf16": 1, "f32": 2}
DEVICES = {"host": 0, "cuda": 1}


class Pool:
    """A pool of ``num_blocks`` KV blocks of ``page_size`` tokens.

    ``num_layers=0`` (default) makes a metadata-only pool (no KV memory):
    what a cache index over a server's own KV memory needs. ``dtype`` is
    "f16", "bf16" or "f32"; ``device`` "host" or "cuda".
    """

    def __init__(self, num_blocks, page_size=16, num_layers=0, num_kv_heads=0,
                 head_dim=0, dtype="f16", device="host", cuda_device=0):
        cfg = S.PoolConfig()
        lib.rkv_pool_config_init(C.byref(cfg))
        cfg.num_blocks = num_blocks
        cfg.page_size = page_size
        cfg.num_layers = num_layers
        cfg.num_kv_heads = num_kv_heads
        cfg.head_dim = head_dim
        cfg.dtype = DTYPES[dtype] if isinstance(dtype, str) else int(dtype)
        cfg.device = DEVICES[device] if isinstance(device, str) else int(device)
        cfg.cuda_device = cuda_device
        h = C.c_void_p()
        check(lib.rkv_pool_create(C.byref(cfg), C.byref(h)), "rkv_pool_create")
        self._h = h.value
        self._page_size = page_size
        self._users = weakref.WeakSet()  # trees on this pool

    # -- lifetime ----------------------------------------------------------
    def close(self):
        """Destroys the pool. Its trees must be closed first (BusyError)."""
        if any(getattr(t, "_h", None) for t in getattr(self, "_users", ())):
            from .errors import BusyError
            raise BusyError("radixkv.Pool.close", "a tree on this pool is still open")
        if getattr(self, "_h", None):
            lib.rkv_pool_destroy(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # a tree still open (it closes the pool after
            self._deferred = True  # itself), or interpreter shutdown


    @property
    def handle(self):
        """The rkv_pool pointer (an int), for other bindings."""
        if not self._h:
            raise ValueError("radixkv.Pool is closed")
        return self._h

    # -- facts -------------------------------------------------------------
    @property
    def num_blocks(self):
        return lib.rkv_pool_num_blocks(self.handle)

    @property
    def num_free(self):
        return lib.rkv_pool_num_free(self.handle)

    @property
    def page_size(self):
        return self._page_size

    @property
    def bytes_per_block(self):
        return lib.rkv_pool_bytes_per_block(self.handle)

    @property
    def host_metadata_bytes(self):
        return lib.rkv_pool_host_metadata_bytes(self.handle)

    def config(self):
        """The pool's rkv_pool_config as a dict."""
        cfg = S.PoolConfig()
        check(lib.rkv_pool_get_config(self.handle, C.byref(cfg)), "rkv_pool_get_config")
        return cfg.to_dict()

    # -- blocks ------------------------------------------------------------
    def alloc(self, n=1):
        """n new blocks (ref count 1 each, held by the caller): all or none
        (NoSpaceError). The pool never evicts: see Tree.alloc_blocks."""
        out, addr = _arrays.new("u32", n)
        check(lib.rkv_pool_alloc_n(self.handle, n, addr), "rkv_pool_alloc_n")
        return out

    def ref(self, block):
        check(lib.rkv_pool_ref(self.handle, block), "rkv_pool_ref")

    def unref(self, blocks):
        """Drops one reference on each block (an int or a sequence); the
        whole call is refused if any would go below zero."""
        if isinstance(blocks, int):
            check(lib.rkv_pool_unref(self.handle, blocks), "rkv_pool_unref")
            return
        addr, n, keep = _arrays.u32_in(blocks)
        check(lib.rkv_pool_unref_n(self.handle, n, addr), "rkv_pool_unref_n")
        del keep

    def refcount(self, block):
        """References on block (0: free)."""
        return lib.rkv_pool_refcount(self.handle, block)

    def block_hash(self, block):
        return lib.rkv_pool_block_hash(self.handle, block)

    def check(self):
        """Verifies the pool's invariants (CorruptError)."""
        check(lib.rkv_pool_check(self.handle), "rkv_pool_check")


def block_hash(parent_hash, namespace, page_tokens):
    """The chained block hash rkv_block_hash(parent, ns, page)."""
    from .tokens import as_tokens
    addr, n, keep = as_tokens(page_tokens)
    h = lib.rkv_block_hash(parent_hash, namespace, addr, n)
    del keep
    return h
