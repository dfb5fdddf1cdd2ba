"""SlotTable: the C server slot table (rkv_slot_table, include/radixkv/
tree.h "Server slot tables") of one RadixKVCache.

Owns: the C table and the buffers its evictions write to. The table
holds, per cached block, the KV slots SGLang's allocator gave that page
(or, over a PoolAllocator, only which blocks are cached: a page's slots
are its block's), so match, insert and eviction are one C call each that
reads or writes the slots: no per-page work here.

Invariant: a block is held iff the tree caches it -- inserts and evictions
through the *_slots calls keep it so; the host tier's loads (set / drop)
and reset (clear) are the other changes.
"""
import ctypes as C
import sys

import numpy as np

from .._ffi import check, lib
from ..tokens import address_of

IDENTITY = 1  # RKV_SLOTS_IDENTITY
_evict = lib.rkv_tree_evict_slots
_refs = sys.getrefcount


class BufferRing:
    """int64 buffers handed out as results (the evicted slots), each reused
    once nobody references it any more: the caller may keep a result as
    long as it likes (SGLang's free_group keeps what it is asked to free),
    and a result dropped in time saves the next call a new buffer, whose
    first write costs the kernel a page fault per 4 KiB -- more than the
    eviction itself at page 512."""

    def __init__(self, size=4):
        self._ring = [np.zeros(0, dtype=np.int64)] * size
        self._next = 0

    def get(self, cap):
        """A buffer of at least cap int64 that nobody else references."""
        ring = self._ring
        for i in range(len(ring)):
            b = ring[i]
            # references: the ring's, b's and getrefcount's argument
            if b.shape[0] >= cap and _refs(b) == 3:
                return b
        b = np.empty(max(cap, 1024), dtype=np.int64)
        ring[self._next] = b
        self._next = (self._next + 1) % len(ring)
        return b


class SlotTable:
    def __init__(self, tree_handle, pool_handle, page_size, identity):
        self._tree = tree_handle
        self.page_size = page_size
        self.identity = identity
        h = C.c_void_p()
        check(lib.rkv_slot_table_create(pool_handle, IDENTITY if identity else 0,
                                        C.byref(h)), "rkv_slot_table_create")
        self.handle = h.value
        self._freed, self._nslots = C.c_uint32(), C.c_size_t()
        self._freed_ref, self._nslots_ref = C.byref(self._freed), C.byref(self._nslots)
        self._none = np.zeros(0, dtype=np.int64)
        self.spare = BufferRing().get  # eviction outputs

    def close(self):
        if self.handle:
            lib.rkv_slot_table_destroy(self.handle)
            self.handle = None

    def evict(self, n):
        """rkv_tree_evict_slots(n): (status, the freed pages' slots -- a
        view the caller may keep (the allocator's free may hold on to it:
        its buffer is not reused while referenced), empty for an identity
        table --, blocks freed). A failing status is
        returned, not raised: NO_SPACE may still have freed some (their
        slots are listed), which the caller must release."""
        if self.identity:
            st = _evict(self._tree, self.handle, n, None, 0, self._freed_ref, self._nslots_ref)
            return st, self._none, self._freed.value
        cap = n * self.page_size
        out = self.spare(cap)
        st = _evict(self._tree, self.handle, n, address_of(out) if cap else None, cap,
                    self._freed_ref, self._nslots_ref)
        return st, out[:self._nslots.value], self._freed.value

    def set(self, blocks, slots=None):
        """Records blocks (uint32-convertible) as cached, with slots (int64,
        page_size per block; None for an identity table)."""
        b = np.ascontiguousarray(blocks, dtype=np.uint32)
        s = None if slots is None else np.ascontiguousarray(slots, dtype=np.int64)
        check(lib.rkv_slot_table_set(self.handle, b.shape[0], b.ctypes.data,
                                     None if s is None else s.ctypes.data),
              "rkv_slot_table_set")

    def drop(self, blocks):
        b = np.ascontiguousarray(blocks, dtype=np.uint32)
        check(lib.rkv_slot_table_drop(self.handle, b.shape[0], b.ctypes.data),
              "rkv_slot_table_drop")

    def gather(self, blocks):
        """The slots of blocks (int64, page_size each; -1 for one not held)."""
        b = np.ascontiguousarray(blocks, dtype=np.uint32)
        out = np.empty(b.shape[0] * self.page_size, dtype=np.int64)
        check(lib.rkv_slot_table_gather(self.handle, b.shape[0], b.ctypes.data,
                                        out.ctypes.data), "rkv_slot_table_gather")
        return out

    def blocks(self):
        """The held blocks, ascending (uint32)."""
        k = self.count()
        out = np.empty(k, dtype=np.uint32)
        got = C.c_uint64()
        check(lib.rkv_slot_table_blocks(self.handle, out.ctypes.data, k, C.byref(got)),
              "rkv_slot_table_blocks")
        return out[:got.value]

    def count(self):
        return int(lib.rkv_slot_table_count(self.handle))

    def clear(self):
        lib.rkv_slot_table_clear(self.handle)
