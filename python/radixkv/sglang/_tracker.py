"""The tree's event stream for the SGLang backend.

Owns: draining the tree's KV events, with the stored pages' token ids, into
numpy buffers (only when SGLang's KV events are on). Which blocks are
cached, and their KV slots, is the slot table's (_slots.py).
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
