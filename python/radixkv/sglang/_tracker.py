"""Which cache blocks an eviction took, from the tree's KV events.

Owns: the C tree's event stream as seen by the SGLang backend -- draining
it into a numpy buffer, the map from a cached page's chained block hash to
the backend's block id, and turning BLOCK_REMOVED hashes back into block
ids (whose values the backend then frees through SGLang's allocator).

Why hashes: today's C API reports evictions by block hash only. The map is
filled from the BLOCK_STORED events of each insert (hashes in chain order
for exactly the new pages) and emptied by BLOCK_REMOVED. Invariant: the
map's keys are the hashes of the cached pages, its values their block ids.
An eviction API that reports block ids directly replaces ``removed()`` and
makes the map unnecessary: this class is the one place to change.
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


class EventTracker:
    """Drains a tree's events; maps page hashes to block ids."""

    def __init__(self, tree_handle, ring):
        self._tree = tree_handle
        self._cap = ring
        self._buf = np.zeros(ring, dtype=EVENT_DTYPE)
        self._addr = self._buf.ctypes.data
        self._n = C.c_uint32()
        self.h2b = {}

    def drain(self):
        """The pending events as a structured array (a view, valid until
        the next drain)."""
        check(lib.rkv_tree_events_drain(self._tree, self._addr, self._cap,
                                        C.byref(self._n)), "rkv_tree_events_drain")
        ev = self._buf[:self._n.value]
        if self._n.value and (ev["kind"] == RESYNC).any():
            # cannot happen: the ring holds every event of one call (the
            # backend sizes it so and drains after each call)
            raise RuntimeError("radixkv.sglang: the tree's event ring overflowed")
        return ev

    @staticmethod
    def hashes_of(ev, kind):
        """Hashes of the events of one kind, in order, as a uint64 array."""
        sel = ev[ev["kind"] == kind]
        if not len(sel):
            return np.zeros(0, dtype=np.uint64)
        counts = sel["num_hashes"].astype(np.int64)
        mask = np.arange(S.EVENT_MAX_HASHES)[None, :] < counts[:, None]
        return sel["hashes"][mask]

    def stored(self, hashes, blocks):
        """Records the new pages of one insert (hashes in chain order)."""
        self.h2b.update(zip(hashes.tolist(), blocks.tolist()))

    def removed(self, hashes):
        """Block ids of evicted pages, forgetting them."""
        pop = self.h2b.pop
        return np.fromiter((pop(h) for h in hashes.tolist()), dtype=np.int64,
                           count=len(hashes))

    def clear(self):
        self.h2b.clear()

    def blocks(self):
        """Every cached page's block id."""
        return np.fromiter(self.h2b.values(), dtype=np.int64, count=len(self.h2b))
