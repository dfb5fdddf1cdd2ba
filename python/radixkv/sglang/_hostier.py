"""The host tier under SGLang: host hits in match_prefix, and loading them
back (init_load_back, or the ticket API) -- the part of SGLang's
HiRadixCache contract a scheduler calls, over the C tree's tiers.

Owns, as a mixin of RadixKVCache: the loads in flight (``_loads``: C
ticket -> LoadTicket) and the host record a match leaves on its
last_host_node (the key's int32 ids, the device and host lengths, the
cache epoch it was made in).

How a load goes (one request): match_prefix reports host_hit_length tokens
after the device prefix that sit in the host tier; init_load_back (or
load_back_start) frees device pages if the pool is short (evicting --
demoting -- other pages, never the request's prefix), asks the tree to
promote the pages (rkv_tree_load: a ticket, and the device blocks the copy
fills) and returns those blocks' KV slots at once; the copies run in
rkv_tree_tier_poll, which ready_to_load_host_cache / check_hicache_events
/ poll_loads call. The returned node is PENDING until its ticket
completes: the load's own lease keeps its pages locked, and
inc_lock_ref / dec_lock_ref on it are counted; at completion each counted
lock becomes a real lock on the loaded path and the load's lease is
released (so the pages never pass through an unlocked moment while the
request holds the node).

Invariants: every LoadTicket in ``_loads`` holds its C lease; a pending
node's ``_pending`` is its LoadTicket and it has no entry in ``_leases``;
the blocks of a load are held in the slot table from the start
of the load (they are the tree's) until a failed load frees them.
"""
import ctypes as C

import numpy as np

from .. import _structs as S
from .._ffi import check, lib
from ..errors import InvalidArgError, NoSpaceError, StaleHandleError, StateError

from ._capi import (PEEK as _PEEK, byref as _byref, load as _load, lock as _lock,
                    match as _match, match_tiers as _match_tiers, tier_poll as _poll,
                    unlock as _unlock)

_LOAD = 1  # RKV_TRANSFER_LOAD
_POLL_MAX = 64


class HostRecord:
    """What a match found past the device prefix (on last_host_node)."""

    __slots__ = ("tokens", "addr", "ns", "device_tokens", "host_tokens", "epoch")

    def __init__(self, tokens, addr, ns, device_tokens, host_tokens, epoch):
        self.tokens, self.addr, self.ns = tokens, addr, ns
        self.device_tokens, self.host_tokens, self.epoch = device_tokens, host_tokens, epoch


class LoadTicket:
    """One load back from the host tier. ``device_indices``: the KV slots
    the copy fills (valid once ``ready`` and ``ok``); ``node``: the node of
    the loaded path (pending until ready). ``status`` is 0 or the failing
    rkv_status of the copy: a failed load frees its slots, the node then
    stands for the device prefix the request had, and the server computes
    those tokens instead."""

    __slots__ = ("ticket", "node", "device_indices", "blocks", "num_tokens", "status",
                 "ready", "locks", "_lease", "_rec", "_end")

    @property
    def ok(self):
        return self.ready and self.status == 0

    def __repr__(self):
        return (f"LoadTicket(ticket={self.ticket}, tokens={self.num_tokens}, "
                f"ready={self.ready}, status={self.status})")


class HostTier:
    """Mixin: needs the cache's _th, _pool, _tree, _tab, _leases, _epoch,
    _slots, _tensor, _evict_pages, page_size."""

    def _tier_setup(self):
        self._loads = {}
        self._tm = S.TierMatch()
        self._done = (S.TransferDone * _POLL_MAX)()
        self._ndone = C.c_uint32()

    # -- match ------------------------------------------------------------------
    def _match_host(self, ns, addr, n, keep, baddr):
        """The non-peek match with residency; returns (match, host tokens,
        host record or None)."""
        m, t = self._m, self._tm
        check(_match_tiers(self._th, ns, addr, n, baddr, 0, _byref(m), _byref(t)),
              "rkv_tree_match_tiers")
        host = t.lower_tokens
        if host == 0:
            return m, 0, None
        return m, host, HostRecord(keep, addr, ns, m.matched_tokens, host, self._epoch)

    # -- loads ------------------------------------------------------------------
    def load_back_start(self, last_host_node, host_hit_length=None, mem_quota=None):
        """Starts loading the host part of a match back to the device: a
        LoadTicket, or None when there is nothing to load (no host hit, or
        more than mem_quota tokens). host_hit_length (default: all the
        match found) is rounded down to whole pages. Raises
        StaleHandleError when the path changed since the match (re-match),
        NoSpaceError when the device cannot free enough pages (all locked),
        StateError without a host tier."""
        if getattr(self, "_tier", None) is None:
            raise StateError("load_back_start", "this cache has no host tier")
        rec = getattr(last_host_node, "_host", None)
        if rec is None:
            return None
        if rec.epoch != self._epoch:
            raise StaleHandleError("load_back_start", "the cache was reset since the match")
        P = self.page_size
        hit = rec.host_tokens if host_hit_length is None else int(host_hit_length)
        if hit < 0 or hit > rec.host_tokens:
            raise InvalidArgError("load_back_start", f"host_hit_length {hit} is not in "
                                  f"0..{rec.host_tokens} (the match's host hit)")
        hit = hit // P * P
        if hit == 0 or (mem_quota is not None and hit > mem_quota):
            return None
        end = rec.device_tokens + hit
        m, t = S.Match(), S.TierMatch()
        check(_match_tiers(self._th, rec.ns, rec.addr, end, None, _PEEK, _byref(m),
                           _byref(t)), "rkv_tree_match_tiers")
        if m.matched_tokens != rec.device_tokens or t.lower_tokens < hit:
            raise StaleHandleError(
                "load_back_start", f"the match's path changed: {m.matched_tokens} tokens on "
                f"the device (was {rec.device_tokens}), {t.lower_tokens} in the host tier "
                f"(need {hit})")
        pages = hit // P
        short = pages - lib.rkv_pool_num_free(self._ph)
        if short > 0:
            self._make_room_for_load(rec, end, short)
        blocks = np.zeros(pages, dtype=np.uint32)
        ld = S.Load()
        check(_load(self._th, rec.ns, rec.addr, end, pages, blocks.ctypes.data, _byref(ld)),
              "rkv_tree_load")
        if ld.ticket == 0:
            return None
        blocks = blocks[:ld.num_pages].astype(np.int64)
        self._tab.set(blocks)
        tk = LoadTicket()
        tk.ticket, tk.blocks, tk.num_tokens = ld.ticket, blocks, ld.num_pages * P
        tk.status, tk.ready, tk.locks, tk._lease, tk._rec = 0, False, 0, ld.lease, rec
        tk._end = ld.device_tokens
        tk.device_indices = self._tensor(self._slots(blocks))
        from .cache import RadixKVNode
        node = RadixKVNode(self, 0, 0, rec.ns, ld.device_tokens)
        node._pending = tk
        tk.node = node
        self._loads[ld.ticket] = tk
        return tk

    def _make_room_for_load(self, rec, end, short):
        """Evicts `short` device pages, the request's device prefix locked."""
        lease = S.Lease()
        locked = False
        if rec.device_tokens:
            m = S.Match()
            check(_match(self._th, rec.ns, rec.addr, rec.device_tokens, None, 0, _byref(m)),
                  "rkv_tree_match")
            check(_lock(self._th, m.node, _byref(lease)), "rkv_tree_lock")
            locked = True
        try:
            self._evict_pages(short)
        finally:
            if locked:
                check(_unlock(self._th, _byref(lease)), "rkv_tree_unlock")
        if lib.rkv_pool_num_free(self._ph) < short:
            raise NoSpaceError("load_back_start", f"{short} more device pages needed, "
                               "the rest are locked")

    def poll_loads(self):
        """Runs the queued copies (rkv_tree_tier_poll) and returns the
        LoadTickets that completed, now ready (ok or failed)."""
        done = []
        if getattr(self, "_tier", None) is None:
            return done
        while True:
            check(_poll(self._th, self._done, _POLL_MAX, _byref(self._ndone)),
                  "rkv_tree_tier_poll")
            k = self._ndone.value
            for i in range(k):
                d = self._done[i]
                tk = self._loads.pop(d.ticket, None) if d.kind == _LOAD else None
                if tk is not None:
                    self._finish_load(tk, d.status)
                    done.append(tk)
            if k < _POLL_MAX:
                return done

    def _finish_load(self, tk, status):
        tk.status, tk.ready = status, True
        rec = tk._rec
        if status:
            self._tab.drop(tk.blocks)  # the failed load freed them
            end = rec.device_tokens
        else:
            end = tk._end
        node = tk.node
        m = S.Match()
        if end:
            check(_match(self._th, rec.ns, rec.addr, end, None, 0, _byref(m)),
                  "rkv_tree_match")
        node.id, node.gen, node.depth = m.node.id, m.node.gen, m.matched_tokens
        try:
            if node.id:
                for _ in range(tk.locks):
                    lease = S.Lease()
                    check(_lock(self._th, m.node, _byref(lease)), "rkv_tree_lock")
                    self._leases.setdefault((node.id, node.gen), []).append(lease.id)
        finally:
            node._pending = None
            check(_unlock(self._th, _byref(tk._lease)), "rkv_tree_unlock")

    def load_ready(self, ticket):
        """Polls, then says whether ticket (a LoadTicket) completed."""
        if not ticket.ready:
            self.poll_loads()
        return ticket.ready

    def loads_in_flight(self):
        return len(self._loads) if getattr(self, "_tier", None) is not None else 0

    # -- SGLang's HiRadixCache hooks ------------------------------------------------
    def init_load_back(self, last_host_node, host_hit_length=0, mem_quota=None, *args,
                       **kwargs):
        """SGLang's hook: starts loading host_hit_length tokens of
        last_host_node's path back to the device and returns (the KV slots
        the copy fills, the node to lock for them), as HiRadixCache does;
        (empty, last_host_node) when nothing is loaded. The
        slots hold the KV once the load completed (check_hicache_events /
        ready_to_load_host_cache poll it; load_ready(node) says)."""
        tk = None
        if getattr(self, "_tier", None) is not None and host_hit_length:
            tk = self.load_back_start(last_host_node, host_hit_length, mem_quota)
        if tk is None:
            return self._empty, last_host_node
        return tk.device_indices, tk.node

    def ready_to_load_host_cache(self):
        """Runs the queued load copies now; returns the loads in flight."""
        self.poll_loads()
        return self.loads_in_flight()

    def check_hicache_events(self, *args, **kwargs):
        """Completes the loads whose copies finished (one poll)."""
        self.poll_loads()
        return None
