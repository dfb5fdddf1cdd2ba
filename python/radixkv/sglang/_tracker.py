"""Which blocks an eviction took, and the tree's event stream.

Owns: the set of cached blocks as a numpy flag per block (``cached``), and
finding the blocks a ``rkv_tree_evict`` call freed, whose values the
backend then frees through SGLang's allocator; and draining the tree's KV
events into a numpy buffer (only when SGLang's KV events are on).

Why this works with today's C API (which reports evictions by block hash,
not id): the backend holds no pool reference of its own on a cached block,
so an eviction that removed F pages freed exactly those F blocks. Right
after it, ``rkv_pool_alloc_n(F)`` returns F free blocks; if every one of
them was cached before the eviction, they ARE the evicted blocks (the only
cached-before blocks that can be free now), so the result is verified,
never assumed. The pool hands back its most recently freed blocks first
(a free stack), so the check passes; if a pool ever did otherwise the
fallback asks the pool for the ref count of every block still flagged
cached (slow, exact). The blocks go back to the pool at once. An eviction
API that reports block ids replaces ``evicted()``: this class is the one
place to change.

Invariant: cached[b] is True iff block b holds a page cached in the tree.
"""
import ctypes as C

import numpy as np

from .. import _structs as S
from .._ffi import check, lib

STORED, REMOVED, CLEARED, RESYNC = 1, 2, 3, 4


def _event_dtype():
    names, formats, offsets = [], [], []
    for name, ctype, *_ in S.Event._fields_:
        names.append(name)
        if name == "hashes":
            formats.append(("<u8", (S.EVENT_MAX_HASHES,)))
        else:
            formats.append(np.dtype(ctype).str)
        offsets.append(getattr(S.Event, name).offset)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets,
                     "itemsize": C.sizeof(S.Event)})


EVENT_DTYPE = _event_dtype()


class BlockTracker:
    """The cached blocks of one tree over a pool the backend owns alone."""

    def __init__(self, pool_handle, num_blocks):
        self._pool = pool_handle
        self.cached = np.zeros(num_blocks, dtype=bool)
        self._scratch = np.zeros(1024, dtype=np.uint32)
        self._scratch_addr = self._scratch.ctypes.data
        self.fallbacks = 0  # evictions resolved by the slow path

    def stored(self, blocks):
        self.cached[blocks] = True

    def evicted(self, freed):
        """The `freed` blocks the last eviction freed (int64 array)."""
        if freed == 0:
            return np.zeros(0, dtype=np.int64)
        if self._scratch.shape[0] < freed:
            self._scratch = np.zeros(max(freed, 2 * self._scratch.shape[0]), dtype=np.uint32)
            self._scratch_addr = self._scratch.ctypes.data
        buf = self._scratch[:freed]
        addr = self._scratch_addr
        check(lib.rkv_pool_alloc_n(self._pool, freed, addr), "rkv_pool_alloc_n")
        blocks = buf.astype(np.int64)
        check(lib.rkv_pool_unref_n(self._pool, freed, addr), "rkv_pool_unref_n")
        if not self.cached[blocks].all():
            blocks = self._scan()
            if blocks.shape[0] != freed:
                raise RuntimeError(f"radixkv.sglang: {freed} blocks evicted, "
                                   f"{blocks.shape[0]} found free")
        self.cached[blocks] = False
        return blocks

    def _scan(self):
        self.fallbacks += 1
        refcount = lib.rkv_pool_refcount
        live = np.nonzero(self.cached)[0]
        return np.fromiter((b for b in live.tolist() if refcount(self._pool, b) == 0),
                           dtype=np.int64)

    def blocks(self):
        return np.nonzero(self.cached)[0]

    def count(self):
        return int(np.count_nonzero(self.cached))

    def clear(self):
        self.cached[:] = False


class EventDrain:
    """Drains a tree's KV events into a reusable numpy buffer."""

    def __init__(self, tree_handle, ring):
        self._tree = tree_handle
        self._cap = ring
        self._buf = np.zeros(ring, dtype=EVENT_DTYPE)
        self._addr = self._buf.ctypes.data
        self._n = C.c_uint32()

    def drain(self):
        """The pending events (a view, valid until the next drain)."""
        check(lib.rkv_tree_events_drain(self._tree, self._addr, self._cap,
                                        C.byref(self._n)), "rkv_tree_events_drain")
        ev = self._buf[:self._n.value]
        if self._n.value and (ev["kind"] == RESYNC).any():
            # cannot happen: the ring holds every event of one call (the
            # backend sizes it so and drains after each call)
            raise RuntimeError("radixkv.sglang: the tree's event ring overflowed")
        return ev
