"""radixkv.Pool: the paged KV block pool (alloc/ in C).

Owns: one rkv_pool handle, destroyed by close() / the context manager /
the garbage collector. A tree created on the pool keeps the pool alive; a
pool over server-owned tensors (Pool.from_tensors) keeps the tensors alive
until it is destroyed (the C pool reads and writes them until then).
"""
import ctypes as C
import weakref

from . import _arrays
from . import _structs as S
from ._ffi import check, lib
from ._owned import Owned, c_property

DTYPES = {"f16": 0, "bf16": 1, "f32": 2}
DEVICES = {"host": 0, "cuda": 1}


class Pool(Owned):
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
        self._kv = None

    @classmethod
    def from_tensors(cls, k_layers, v_layers, page_size):
        """A pool whose KV lives in the caller's tensors (torch, CPU or
        CUDA, or numpy): k_layers[l] / v_layers[l] hold layer l's K and V,
        each [num_blocks, page_size, heads, head_dim] or SGLang's
        [num_slots, heads, head_dim] (slot = block * page_size + t), all
        alike, head_dim contiguous; byte strides are taken from the
        tensors (rkv_pool_create_external). Nothing is copied: the pool
        reads and writes the tensors' memory, and keeps the tensors alive
        until it is closed; the caller must not resize or move them."""
        from . import _kvbuf
        fields, ks, vs, (bs, ts, hs) = _kvbuf.describe(k_layers, v_layers, page_size)
        cfg = S.PoolConfig()
        lib.rkv_pool_config_init(C.byref(cfg))
        for name, v in fields.items():
            setattr(cfg, name, v)
        karr, varr = _kvbuf.pointer_array(ks), _kvbuf.pointer_array(vs)
        kv = S.KVBuffers(C.cast(karr, C.POINTER(C.c_void_p)),
                         C.cast(varr, C.POINTER(C.c_void_p)), bs, ts, hs)
        h = C.c_void_p()
        check(lib.rkv_pool_create_external(C.byref(cfg), C.byref(kv), C.byref(h)),
              "rkv_pool_create_external")
        self = cls.__new__(cls)
        self._h = h.value
        self._page_size = page_size
        self._users = weakref.WeakSet()
        self._kv = (list(k_layers), list(v_layers))  # the memory the pool uses
        return self

    # -- lifetime ----------------------------------------------------------
    _kind = "Pool"

    def close(self):
        """Destroys the pool. Its trees must be closed first (BusyError)."""
        # _open_trees: the weak set is empty of a garbage cycle's trees
        # while the collector finalizes them, so it cannot be relied on there
        if getattr(self, "_open_trees", 0) or any(
                getattr(t, "_h", None) for t in getattr(self, "_users", ())):
            from .errors import BusyError
            raise BusyError("radixkv.Pool.close", "a tree on this pool is still open")
        if getattr(self, "_h", None):
            lib.rkv_pool_destroy(self._h)
            self._h = None
            self._kv = None  # the tensors may go now

    def __del__(self):
        try:
            self.close()
        except Exception:  # a tree still open (it closes the pool after
            self._deferred = True  # itself), or interpreter shutdown

    # -- facts -------------------------------------------------------------
    num_blocks = c_property("rkv_pool_num_blocks")
    num_free = c_property("rkv_pool_num_free")

    @property
    def page_size(self):
        return self._page_size

    bytes_per_block = c_property("rkv_pool_bytes_per_block")
    host_metadata_bytes = c_property("rkv_pool_host_metadata_bytes")

    @property
    def kv_external(self):
        """True for a pool over server-owned tensors (from_tensors)."""
        return bool(lib.rkv_pool_kv_external(self.handle))

    @property
    def kv_strides(self):
        """(block, token, head) byte strides of the KV addressing
        (StateError for a metadata-only pool)."""
        b, t, h = C.c_size_t(), C.c_size_t(), C.c_size_t()
        check(lib.rkv_pool_kv_strides(self.handle, C.byref(b), C.byref(t), C.byref(h)),
              "rkv_pool_kv_strides")
        return b.value, t.value, h.value

    layout_id = c_property(
        "rkv_pool_layout_id",
        "The KV layout's fingerprint (Store(layout_id=...) for warm restart).")

    def config(self):
        """The pool's rkv_pool_config as a dict."""
        return self._query("rkv_pool_get_config", S.PoolConfig)

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
        self._check("rkv_pool_check")


def block_hash(parent_hash, namespace, page_tokens):
    """The chained block hash rkv_block_hash(parent, ns, page)."""
    from .tokens import as_tokens
    addr, n, keep = as_tokens(page_tokens)
    h = lib.rkv_block_hash(parent_hash, namespace, addr, n)
    del keep
    return h
