"""radixkv.Tree: the token radix tree over a Pool (radix/ in C), with its
leases, retention, events, snapshot and lower tiers.

Owns: one rkv_tree handle (destroyed by close(), the context manager or
the garbage collector; it keeps its Pool and attached Stores alive), and
Lease objects. Every C failure raises a radixkv.Error subclass; on failure
the tree is unchanged (the C API's guarantee). Token arguments take lists,
numpy arrays, torch tensors or array('i') (see radixkv.tokens).
"""
import ctypes as C
from dataclasses import dataclass
from typing import Any

from . import _arrays
from . import _structs as S
from ._ffi import check, lib
from ._owned import Owned, c_property
from .events import Event, EventKind
from .tokens import as_tokens

MATCH_PEEK = 1
EVICT_POLICIES = {"lru": 0, "priority": 1, "learned": 2}
WRITE_POLICIES = {"back": 0, "through": 1, "selective": 2}


@dataclass(frozen=True)
class NodeHandle:
    """A node handle (id, generation): a value; stale after the node is
    evicted or the tree reset (calls then raise StaleHandleError)."""
    id: int
    gen: int

    def _c(self):
        return S.Node(self.id, self.gen)

    @classmethod
    def _from_c(cls, n):
        return cls(n.id, n.gen)


@dataclass
class MatchResult:
    """matched_tokens (a multiple of page_size), the matched pages' block
    ids (the tree's: no reference is handed over) and the deepest node."""
    matched_tokens: int
    blocks: Any
    node: NodeHandle
    # with tiers (Tree.match_tiers): tokens after the device prefix that a
    # load can promote, and of them on disk only
    lower_tokens: int = 0
    host_tokens: int = 0
    disk_tokens: int = 0
    loading_ticket: int = 0
    loading_tokens: int = 0


@dataclass
class InsertResult:
    prefix_tokens: int   # tokens that were already cached
    cached_tokens: int   # tokens cached for this key after the call
    new_pages: int       # pages the tree took from the given blocks
    dups: Any            # given blocks not kept (page cached under another)
    node: NodeHandle     # deepest node of the key (lockable)


class Lease:
    """An owned lock on a node's path (rkv_tree_lock). Release it once:
    ``release()``, or use it as a context manager::

        with tree.lock(match.node):
            ...  # the path's pages cannot be evicted here
    """

    def __init__(self, tree, c_lease, node):
        self._tree = tree
        self._c = c_lease
        self.node = node

    @property
    def held(self):
        return self._c.id != 0

    def release(self):
        """Releases the lock (StateError if it is not held)."""
        check(lib.rkv_tree_unlock(self._tree.handle, C.byref(self._c)), "rkv_tree_unlock")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.held and self._tree._h:
            self.release()


@dataclass
class Retention:
    """What Tree.retain applies: a priority (0..100; None: unchanged) over
    pages wholly inside [prio_begin, prio_end) tokens, and a pin of the first
    pin_tokens tokens for ttl_ms owned by ``owner`` (ttl_ms 0: the
    namespace's default, Tree.set_namespace_ttl). priority_duration_ms > 0:
    the priority reverts to the default that long after. session_end (for
    Scheduler.submit): the session's last request; when it finishes the
    scheduler calls Tree.session_end for it (retain ignores it)."""
    priority: Any = None
    prio_begin: int = 0
    prio_end: int = 0
    pin_tokens: int = 0
    ttl_ms: int = 0
    owner: int = 0
    session_end: bool = False
    priority_duration_ms: int = 0

    def _c(self):
        r = S.Retention()
        lib.rkv_retention_init(C.byref(r))
        r.priority = -1 if self.priority is None else self.priority
        r.prio_begin, r.prio_end = self.prio_begin, self.prio_end
        r.pin_tokens, r.ttl_ms, r.owner = self.pin_tokens, self.ttl_ms, self.owner
        r.session_end = int(self.session_end)
        r.priority_duration_ms = self.priority_duration_ms
        return r


class Store(Owned):
    """A lower tier (rkv_store): medium "host" or "disk". capacity_blocks
    (or capacity_bytes) must be set; block_bytes 0 = metadata only (a
    simulation) else the pool's bytes_per_block; path is the disk file or
    directory. Disk only: mac_key (32 secret bytes: keyed records),
    warm_restart with page_tokens, layout_id (Pool.layout_id) and
    model_id (reopen the file an earlier store left)."""

    def __init__(self, medium, capacity_blocks=0, capacity_bytes=0, block_bytes=0,
                 path=None, pinned=None, direct_io=None, io_uring=None, mac_key=None,
                 warm_restart=None, page_tokens=0, layout_id=0, model_id=0):
        m = {"host": 1, "disk": 2}[medium] if isinstance(medium, str) else int(medium)
        cfg = S.StoreConfig()
        lib.rkv_store_config_init(C.byref(cfg), m)
        cfg.capacity_blocks, cfg.capacity_bytes, cfg.block_bytes = (
            capacity_blocks, capacity_bytes, block_bytes)
        self._path = path.encode() if isinstance(path, str) else path
        cfg.path = self._path
        for name, v in (("pinned", pinned), ("direct_io", direct_io), ("io_uring", io_uring),
                        ("warm_restart", warm_restart)):
            if v is not None:
                setattr(cfg, name, int(v))
        cfg.page_tokens, cfg.layout_id, cfg.model_id = page_tokens, layout_id, model_id
        if mac_key is not None:
            # C reads exactly MAC_KEY_BYTES from the pointer: a shorter
            # key would be read past its end
            if not isinstance(mac_key, bytes) or len(mac_key) != S.STORE_MAC_KEY_BYTES:
                from .errors import InvalidArgError
                raise InvalidArgError("radixkv.Store",
                                      f"mac_key must be {S.STORE_MAC_KEY_BYTES} bytes")
            cfg.mac_key = mac_key  # the store copies it at create
        h = C.c_void_p()
        check(lib.rkv_store_create(C.byref(cfg), C.byref(h)), "rkv_store_create")
        self._h = h.value

    _kind = "Store"
    _attached = False  # set by the Tree it is attached to while that is open

    def _destroy(self, h):
        lib.rkv_store_destroy(h)

    def close(self):
        """Destroys the store; while attached to an open tree, the tree
        does it after destroying itself (the garbage collector finalizes a
        cycle's objects in any order, and clears weak references first, so
        only this flag, set by the tree, is reliable there)."""
        if self._attached:
            self._deferred = True
            return
        super().close()

    capacity_blocks = c_property("rkv_store_capacity_blocks")
    used_blocks = c_property("rkv_store_used_blocks")

    def info(self):
        return self._query("rkv_store_get_info", S.StoreInfo)

    def check(self):
        self._check("rkv_store_check")


class Tree(Owned):
    """A token radix tree caching prefixes as pages of ``pool``.

    event_ring > 0 records KV events (drain them with ``events()``);
    event_tokens > 0 (with event_ring) also keeps the token ids of stored
    pages, up to that many ids pending (``events(tokens=True)``);
    evict_policy is "lru", "priority" or "learned"; token_bytes=3 stores
    token ids in 3 bytes (vocabularies below 2**24; larger ids are
    refused)."""

    def __init__(self, pool, initial_nodes=0, event_ring=0, evict_policy="lru",
                 max_pinned_pct=50, use_jemalloc=None, event_tokens=0,
                 token_bytes=4):
        cfg = S.TreeConfig()
        lib.rkv_tree_config_init(C.byref(cfg))
        cfg.initial_nodes = initial_nodes
        cfg.event_ring = event_ring
        cfg.evict_policy = (EVICT_POLICIES[evict_policy]
                            if isinstance(evict_policy, str) else int(evict_policy))
        cfg.max_pinned_pct = max_pinned_pct
        cfg.event_tokens = event_tokens
        cfg.token_bytes = token_bytes
        if use_jemalloc is not None:
            cfg.use_jemalloc = int(use_jemalloc)
        h = C.c_void_p()
        check(lib.rkv_tree_create(pool.handle, C.byref(cfg), C.byref(h)), "rkv_tree_create")
        self._h = h.value
        self.pool = pool
        pool._users.add(self)
        pool._open_trees = getattr(pool, "_open_trees", 0) + 1  # see Store.close
        self.page_size = pool.page_size
        self._stores = ()
        self._event_tokens = event_tokens
        self._match = S.Match()
        self._ins = S.InsertResult()

    # -- lifetime ----------------------------------------------------------
    _kind = "Tree"

    def close(self):
        """Destroys the tree (its leases die with it; its blocks go back to
        the pool)."""
        if getattr(self, "_h", None):
            lib.rkv_tree_destroy(self._h)
            self._h = None
            self.pool._open_trees -= 1
            self._release_stores()
            if getattr(self.pool, "_deferred", False):
                self.pool.close()  # its finalizer ran while this tree lived

    # -- match / insert / lock ---------------------------------------------
    def match(self, tokens, namespace=0, peek=False):
        """Longest cached prefix of tokens in namespace. Non-peek: the path
        becomes most recently used and a match inside a node splits it."""
        addr, n, keep = as_tokens(tokens)
        out, oaddr = _arrays.new("u32", n // self.page_size)
        m = self._match
        check(lib.rkv_tree_match(self.handle, namespace, addr, n, oaddr,
                                 MATCH_PEEK if peek else 0, C.byref(m)), "rkv_tree_match")
        del keep
        return MatchResult(m.matched_tokens, _arrays.head(out, m.num_blocks),
                           NodeHandle._from_c(m.node))

    def insert(self, tokens, blocks, namespace=0):
        """Caches the full pages of tokens, blocks[i] holding page i (each
        block allocated: the tree takes its own reference on the ones it
        keeps). Returns InsertResult with the duplicate blocks."""
        addr, n, keep = as_tokens(tokens)
        baddr, nb, bkeep = _arrays.u32_in(blocks)
        if nb < n // self.page_size:
            from .errors import InvalidArgError
            raise InvalidArgError("rkv_tree_insert",
                                  f"{n // self.page_size} pages need as many blocks, got {nb}")
        dups, daddr = _arrays.new("u32", n // self.page_size)
        r = self._ins
        check(lib.rkv_tree_insert(self.handle, namespace, addr, n, baddr, daddr,
                                  C.byref(r)), "rkv_tree_insert")
        del keep, bkeep
        return InsertResult(r.prefix_tokens, r.cached_tokens, r.new_pages,
                            _arrays.head(dups, r.num_dups), NodeHandle._from_c(r.node))

    def lock(self, node):
        """Locks node's path; returns the Lease that owns the lock."""
        lease = S.Lease()
        check(lib.rkv_tree_lock(self.handle, node._c(), C.byref(lease)), "rkv_tree_lock")
        return Lease(self, lease, node)

    def evict(self, n):
        """Frees at least n blocks by evicting unlocked, unpinned leaves in
        the tree's eviction order; returns the number freed (NoSpaceError
        if fewer than n are evictable)."""
        return self._out("rkv_tree_evict", C.c_uint32, n).value

    def evict_ids(self, n):
        """evict(n) that returns WHICH blocks it freed (an array of block
        ids, in the order freed): what a server's own allocator must
        release. NoSpaceError if fewer than n are evictable (nothing
        evicted)."""
        out, addr = _arrays.new("u32", n)
        freed = C.c_uint32()
        check(lib.rkv_tree_evict_ids(self.handle, n, addr, n, C.byref(freed)),
              "rkv_tree_evict_ids")
        return _arrays.head(out, freed.value)

    def alloc_blocks(self, n):
        """Pool.alloc that evicts through the tree when the pool is short."""
        out, addr = _arrays.new("u32", n)
        check(lib.rkv_tree_alloc_blocks(self.handle, n, addr), "rkv_tree_alloc_blocks")
        return out

    def reset(self):
        """Drops every cached prefix (BusyError while a lease is held)."""
        check(lib.rkv_tree_reset(self.handle), "rkv_tree_reset")

    # -- retention -----------------------------------------------------------
    def retain(self, tokens, retention, now_ms, namespace=0):
        """Applies a Retention to the cached part of tokens; returns a dict
        (prio_pages, pinned_pages, new_pinned_pages)."""
        addr, n, keep = as_tokens(tokens)
        r = retention._c()
        out = S.RetainResult()
        check(lib.rkv_tree_retain(self.handle, namespace, addr, n, C.byref(r), now_ms,
                                  C.byref(out)), "rkv_tree_retain")
        del keep
        return out.to_dict()

    def session_end(self, tokens, owner, namespace=0):
        """owner's session ended: releases its pins and marks the pages of
        the cached context tokens that only it used, to be evicted first;
        returns the pages marked."""
        addr, n, keep = as_tokens(tokens)
        pages = C.c_uint32()
        check(lib.rkv_tree_session_end(self.handle, namespace, addr, n, owner,
                                       C.byref(pages)), "rkv_tree_session_end")
        del keep
        return pages.value

    def set_time(self, now_ms):
        check(lib.rkv_tree_set_time(self.handle, now_ms), "rkv_tree_set_time")

    def set_namespace_ttl(self, namespace, ttl_ms):
        """Default pin TTL of a namespace (0: none); NoSpaceError past
        RKV_NS_TTL_MAX namespaces."""
        check(lib.rkv_tree_set_namespace_ttl(self.handle, namespace, ttl_ms),
              "rkv_tree_set_namespace_ttl")

    def namespace_ttl(self, namespace):
        return self._out("rkv_tree_namespace_ttl", C.c_uint64, namespace).value

    def pins_extend(self, owner, ttl_ms, now_ms):
        return self._out("rkv_tree_pins_extend", C.c_uint32, owner, ttl_ms,
                         now_ms).value

    def pins_release(self, owner):
        return self._out("rkv_tree_pins_release", C.c_uint32, owner).value

    def pins_yieldable(self):
        return self._out("rkv_tree_pins_yieldable", C.c_uint64).value

    def retention_stats(self):
        return self._query("rkv_tree_retention_stats", S.RetentionStats)

    def node_priority(self, node):
        return self._out("rkv_tree_node_priority", C.c_int, node._c()).value

    # -- inspection ------------------------------------------------------------
    def stats(self):
        """rkv_tree_stats as a dict (cached_blocks, evictable_blocks, ...)."""
        return self._query("rkv_tree_get_stats", S.TreeStats)

    def node_info(self, node):
        out = self._out("rkv_tree_node_info", S.NodeInfo, node._c())
        d = out.to_dict()
        d["parent"] = NodeHandle(out.parent.id, out.parent.gen)
        return d

    def check(self):
        """Verifies every invariant (CorruptError with the broken one)."""
        self._check("rkv_tree_check")

    def events(self, max_events=1024, tokens=False):
        """Drains up to max_events recorded KV events (oldest first); the
        tree must have been created with event_ring > 0 (else StateError).
        tokens=True (a tree created with event_tokens > 0, else
        StateError): BLOCK_STORED events carry their pages' token ids in
        Event.tokens; fewer events may come back when their ids fill the
        buffer (the rest stay queued: call again)."""
        buf = (S.Event * max_events)()
        n = C.c_uint32()
        if not tokens:
            check(lib.rkv_tree_events_drain(self.handle, buf, max_events, C.byref(n)),
                  "rkv_tree_events_drain")
            return [Event._from_c(buf[i]) for i in range(n.value)]
        # the token ring never holds more than event_tokens ids, and one
        # event's always fit in EVENT_MAX_HASHES pages
        cap = max(self._event_tokens, S.EVENT_MAX_HASHES * self.page_size)
        toks, taddr = _arrays.new("i32", cap)
        nt = C.c_size_t()
        check(lib.rkv_tree_events_drain_tokens(self.handle, buf, max_events, taddr, cap,
                                               C.byref(n), C.byref(nt)),
              "rkv_tree_events_drain_tokens")
        out, at = [], 0
        for i in range(n.value):
            e = buf[i]
            t = None
            if e.kind == EventKind.BLOCK_STORED:
                k = e.num_hashes * e.page_size
                t = tuple(int(x) for x in toks[at:at + k])
                at += k
            out.append(Event._from_c(e, t))
        return out

    def snapshot(self):
        """Every cached block as (namespace, hash, parent_hash, medium), and
        the seq of the last event it includes."""
        n = C.c_size_t()
        seq = C.c_uint64()
        check(lib.rkv_tree_snapshot(self.handle, None, 0, C.byref(n), None),
              "rkv_tree_snapshot")
        buf = (S.BlockEntry * max(n.value, 1))()
        check(lib.rkv_tree_snapshot(self.handle, buf, n.value, C.byref(n), C.byref(seq)),
              "rkv_tree_snapshot")
        return [(b.ns, b.hash, b.parent_hash, b.medium) for b in buf[:n.value]], seq.value

    # -- tiers -------------------------------------------------------------------
    def attach_tiers(self, host=None, disk=None, write_policy="back", selective_hits=None,
                     store_queue=None, drop_pinned=None):
        """Attaches lower tiers (Stores) to this EMPTY tree; both None
        detaches. The tree keeps the stores alive while attached."""
        if host is None and disk is None:
            check(lib.rkv_tree_attach_tiers(self.handle, None), "rkv_tree_attach_tiers")
            self._release_stores()
            return
        cfg = S.TierConfig()
        lib.rkv_tier_config_init(C.byref(cfg))
        cfg.host = host.handle if host else None
        cfg.disk = disk.handle if disk else None
        cfg.write_policy = (WRITE_POLICIES[write_policy]
                            if isinstance(write_policy, str) else int(write_policy))
        if selective_hits is not None:
            cfg.selective_hits = selective_hits
        if store_queue is not None:
            cfg.store_queue = store_queue
        if drop_pinned is not None:
            cfg.drop_pinned = int(drop_pinned)
        check(lib.rkv_tree_attach_tiers(self.handle, C.byref(cfg)), "rkv_tree_attach_tiers")
        self._release_stores()
        self._stores = (host, disk)
        for s in self._stores:
            if s is not None:
                s._attached = True

    def _release_stores(self):
        """The stores are detached (or the tree destroyed): a store whose
        finalizer ran meanwhile is destroyed now."""
        for s in self._stores:
            if s is not None:
                s._attached = False
                if getattr(s, "_deferred", False):
                    s.close()
        self._stores = ()

    def match_tiers(self, tokens, namespace=0, peek=False):
        """match() that also says how far the path continues in lower tiers."""
        addr, n, keep = as_tokens(tokens)
        out, oaddr = _arrays.new("u32", n // self.page_size)
        m = S.Match()
        t = S.TierMatch()
        check(lib.rkv_tree_match_tiers(self.handle, namespace, addr, n, oaddr,
                                       MATCH_PEEK if peek else 0, C.byref(m), C.byref(t)),
              "rkv_tree_match_tiers")
        del keep
        return MatchResult(m.matched_tokens, _arrays.head(out, m.num_blocks),
                           NodeHandle._from_c(m.node), t.lower_tokens, t.host_tokens,
                           t.disk_tokens, t.loading_ticket, t.loading_tokens)

    def load(self, tokens, max_pages, namespace=0):
        """Promotes lower-tier pages after the device prefix; returns a dict
        (ticket, num_pages, disk_pages, device_tokens, blocks, lease) whose
        lease the caller releases once the ticket completed (tier_poll)."""
        addr, n, keep = as_tokens(tokens)
        out, oaddr = _arrays.new("u32", min(max_pages, n // self.page_size))
        ld = S.Load()
        check(lib.rkv_tree_load(self.handle, namespace, addr, n, max_pages, oaddr,
                                C.byref(ld)), "rkv_tree_load")
        del keep
        return {"ticket": ld.ticket, "num_pages": ld.num_pages, "disk_pages": ld.disk_pages,
                "device_tokens": ld.device_tokens, "blocks": _arrays.head(out, ld.num_pages),
                "lease": Lease(self, ld.lease, None) if ld.lease.id else None}

    def store_prefix(self, tokens, namespace=0):
        """Copies the cached device pages of tokens without a host copy to
        the host tier now; returns (ticket, pages)."""
        addr, n, keep = as_tokens(tokens)
        ticket, pages = C.c_uint64(), C.c_uint32()
        check(lib.rkv_tree_store_prefix(self.handle, namespace, addr, n, None,
                                        C.byref(ticket), C.byref(pages)),
              "rkv_tree_store_prefix")
        del keep
        return ticket.value, pages.value

    def tier_flush(self):
        """Before a warm restart: demotes every evictable device page and
        writes host pages down to disk (StateError without tiers)."""
        check(lib.rkv_tree_tier_flush(self.handle), "rkv_tree_tier_flush")

    def tier_poll(self, max_done=64):
        """Runs queued copies; returns the completed tickets as dicts."""
        buf = (S.TransferDone * max_done)()
        n = C.c_uint32()
        check(lib.rkv_tree_tier_poll(self.handle, buf, max_done, C.byref(n)),
              "rkv_tree_tier_poll")
        return [buf[i].to_dict() for i in range(n.value)]

    def tier_stats(self):
        return self._query("rkv_tree_tier_stats", S.TierStats)
