"""Which blocks an eviction took, and the tree's event stream.

Owns: the set of cached blocks as a numpy flag per block (``cached``), and
evicting through ``rkv_tree_evict_ids``, which lists exactly the blocks
whose pool ref count reached 0 (the backend then frees their values
through SGLang's allocator); and draining the tree's KV events, with the
stored pages' token ids, into numpy buffers (only when SGLang's KV events
are on).

Invariant: cached[b] is True iff block b holds a page cached in the tree.
"""
import ctypes as C

import numpy as np

from .. import _structs as S
from .._ffi import check, lib

STORED, REMOVED, CLEARED, RESYNC = 1, 2, 3, 4
_evict_ids = lib.rkv_tree_evict_ids


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

    def __init__(self, tree_handle, num_blocks):
        self._tree = tree_handle
        self.cached = np.zeros(num_blocks, dtype=bool)
        self._scratch = np.zeros(1024, dtype=np.uint32)
        self._saddr = self._scratch.ctypes.data
        self._freed = C.c_uint32()
        self._freed_ref = C.byref(self._freed)

    def stored(self, blocks):
        self.cached[blocks] = True

    def evict(self, n):
        """rkv_tree_evict_ids(n): (status, the freed blocks: a uint32 view,
        valid until the next call). A failing status is returned, not
        raised: NO_SPACE may still have freed some (listed), which the
        caller must release."""
        if self._scratch.shape[0] < n:
            self._scratch = np.zeros(max(n, 2 * self._scratch.shape[0]), dtype=np.uint32)
            self._saddr = self._scratch.ctypes.data
        self._freed.value = 0
        st = _evict_ids(self._tree, n, self._saddr, n, self._freed_ref)
        blocks = self._scratch[:self._freed.value]
        self.cached[blocks] = False
        return st, blocks

    def blocks(self):
        return np.nonzero(self.cached)[0]

    def count(self):
        return int(np.count_nonzero(self.cached))

    def clear(self):
        self.cached[:] = False


class EventDrain:
    """Drains a tree's KV events, and the token ids of the stored pages,
    into reusable numpy buffers."""

    def __init__(self, tree_handle, ring, tokens):
        self._tree = tree_handle
        self._cap = ring
        self._buf = np.zeros(ring, dtype=EVENT_DTYPE)
        self._tcap = tokens
        self._toks = np.zeros(tokens, dtype=np.int32)
        self._n = C.c_uint32()
        self._nt = C.c_size_t()

    def drain(self):
        """(events, tokens): the pending events and the ids of their
        BLOCK_STORED pages, one event after another (views, valid until the
        next drain)."""
        check(lib.rkv_tree_events_drain_tokens(
            self._tree, self._buf.ctypes.data, self._cap, self._toks.ctypes.data,
            self._tcap, C.byref(self._n), C.byref(self._nt)),
            "rkv_tree_events_drain_tokens")
        ev = self._buf[:self._n.value]
        if self._n.value and (ev["kind"] == RESYNC).any():
            # cannot happen: the rings hold every event of one call (the
            # backend sizes them so and drains after each call)
            raise RuntimeError("radixkv.sglang: the tree's event ring overflowed")
        return ev, self._toks[:self._nt.value]
