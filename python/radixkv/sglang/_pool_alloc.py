"""PoolAllocator: SGLang's token-to-KV allocator over a radixkv Pool, for a
RadixKVCache with a host tier.

Why it exists: with a host tier the C tree moves a page's KV bytes itself
(demotion copies the device block down, a load copies it back into a block
the tree allocates), so a cached page's KV slots must be its C block's
slots -- page b is slots b*P .. b*P+P-1 of the pool's memory (what
Pool.from_tensors over SGLang's [num_slots, heads, head_dim] buffers
addresses). One allocator must then own the device pages: this one, over
the same Pool the cache's tree uses.

Owns: nothing but the references it hands out. alloc(n) takes whole pages
(ref count 1 each, the caller's); free(slots) drops one reference on each
page the slots touch (a part of a page frees the page, as SGLang's paged
allocator does). A page the cache keeps is handed over to the tree at
insert (the cache drops the caller's reference), so the caller frees only
what the cache did not take -- SGLang's RadixCache contract.
"""
import numpy as np

from .._ffi import check, lib

try:
    import torch
except ImportError:
    torch = None


class PoolAllocator:
    """alloc / free / available_size / size / page_size / device over
    ``pool`` (a radixkv.Pool)."""

    def __init__(self, pool, device="cpu"):
        self.pool = pool
        self.page_size = pool.page_size
        self.size = pool.num_blocks * self.page_size
        self.device = device
        self._ph = pool.handle
        self._ar = np.arange(self.page_size, dtype=np.int64)

    def available_size(self):
        return lib.rkv_pool_num_free(self._ph) * self.page_size

    def alloc(self, need_size):
        """need_size slots in whole pages (rounded up), or None when the pool
        has too few free pages (the caller evicts through the cache)."""
        P = self.page_size
        pages = (int(need_size) + P - 1) // P
        if pages == 0:
            return self._out(np.zeros(0, dtype=np.int64))
        if pages > lib.rkv_pool_num_free(self._ph):
            return None
        blocks = np.zeros(pages, dtype=np.uint32)
        check(lib.rkv_pool_alloc_n(self._ph, pages, blocks.ctypes.data), "rkv_pool_alloc_n")
        slots = (blocks.astype(np.int64)[:, None] * P + self._ar[None, :]).reshape(-1)
        return self._out(slots[:need_size])

    def free(self, free_index):
        """Drops the caller's reference on every page free_index touches
        (InvalidArgError, nothing changed, if one is not allocated)."""
        if torch is not None and isinstance(free_index, torch.Tensor):
            vals = free_index.detach().to("cpu", torch.int64).numpy()
        else:
            vals = np.asarray(free_index, dtype=np.int64).reshape(-1)
        if vals.size == 0:
            return
        pages = np.unique(vals // self.page_size).astype(np.uint32)
        check(lib.rkv_pool_unref_n(self._ph, pages.shape[0], pages.ctypes.data),
              "rkv_pool_unref_n")

    def clear(self):
        """SGLang calls this with the cache's reset (flush_cache, nothing
        running): the cache's reset already returned its pages, and no
        request holds any, so there is nothing left to free."""

    def _out(self, arr):
        if torch is None:
            return arr
        t = torch.from_numpy(arr)
        return t if str(self.device) == "cpu" else t.to(self.device)
