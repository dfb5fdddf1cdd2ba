"""RadixKVCache: SGLang's prefix-cache contract (BasePrefixCache, the classic
RadixCache API) over radixkv's C radix tree.

Owns: a metadata-only C pool and tree (one C block per cached page of
``page_size`` tokens), the C slot table (block id -> the page's KV slot
indices as SGLang's allocator handed them out; _slots.py), the extra_key ->
namespace map, the leases behind inc_lock_ref / dec_lock_ref, and the
SGLang-side KV events.

Why each operation is one C call (rkv_tree_match_slots, _insert_slots,
_evict_slots, rkv_tree_lock_counted / _unlock_counted): a ctypes call costs
about a microsecond and a numpy pass over a request's slots several, which
were most of this layer's time; the C calls read and write the slots
themselves.

Invariants:
  - a page is cached iff its block is held in the slot table, with its
    values; the backend holds no pool reference of its own on cached
    blocks (the tree's is the only one), so eviction frees them, and
    rkv_tree_evict_slots says which (and their values);
  - every value the tree caches is freed through the allocator exactly once:
    by ``evict`` (and an insert that needs room evicts the same way), never
    by reset (SGLang's contract: the caller resets the allocator too);
  - ``_leases[(id, gen)]`` lists the ids of the live C leases taken by
    inc_lock_ref on that node; dec_lock_ref releases the newest;
  - extra_key None is namespace 0; each other extra_key gets its own
    namespace id on first insert (exact: two keys never share a namespace).
Sizes are in tokens at this interface (pages * page_size).

Over a PoolAllocator (_pool_alloc.py; a host tier needs one) the cache
runs on the Pool that also allocates the server's KV pages: a page's
values are its block's slots (b*P .. b*P+P-1: an identity slot table),
inserting hands the caller's pages to the tree, and eviction (with a host tier:
demotion) returns the blocks to that pool -- nothing goes through
allocator.free. Host hits and loads are in _hostier.py.
"""

import ctypes as C

import numpy as np

from .. import _structs as S
from .._ffi import check, lib
from ..errors import InvalidArgError, NoSpaceError, StateError
from ..pool import Pool
from ..tokens import address_of, as_tokens, list_to_int32
from ..tree import Tree
from . import types as T
from ._hostier import HostTier
from ._pool_alloc import PoolAllocator
from ._requests import RequestCaching
from ._slots import SlotTable
from ._tracker import REMOVED, STORED, EventDrain

try:
    import torch
except ImportError:  # torch is optional: results are numpy arrays then
    torch = None

DEFAULT_CAPACITY_TOKENS = 1 << 22
_FIRST_CHUNK = 512  # tokens converted before the first match probe

from ._capi import (PEEK as _PEEK, byref as _byref, insert_slots as _insert_slots,
                    lock as _lock, lock_counted as _lock_counted, match as _match,
                    match_slots as _match_slots, stats as _stats, unlock as _unlock,
                    unlock_counted as _unlock_counted)

_NO_SPACE = NoSpaceError.status
_I64 = np.dtype(np.int64)


def _sglang_base():
    try:
        from sglang.srt.mem_cache.base_prefix_cache import BasePrefixCache
        return BasePrefixCache
    except Exception:
        return object


class RadixKVNode:
    """A node handle as SGLang sees it (``last_device_node``): what
    inc_lock_ref / dec_lock_ref take. Valid while its prefix stays cached."""

    __slots__ = ("_cache", "id", "gen", "namespace", "depth", "_pending", "_host")

    def __init__(self, cache, node_id, gen, namespace, depth):
        self._cache = cache
        self.id = node_id
        self.gen = gen
        self.namespace = namespace
        self.depth = depth  # tokens from the namespace root
        self._pending = None  # the LoadTicket of a node still loading
        self._host = None  # last_host_node: what lies in the host tier

    @property
    def is_root(self):
        return self.id == 0

    @property
    def lock_ref(self):
        if self._pending is not None:
            return self._pending.locks
        return len(self._cache._leases.get((self.id, self.gen), ()))

    @property
    def loading(self):
        """True while the load that made this node runs."""
        return self._pending is not None

    evicted = False
    backuped = False

    def __repr__(self):
        return (f"RadixKVNode(id={self.id}, gen={self.gen}, ns={self.namespace}, "
                f"depth={self.depth}, lock_ref={self.lock_ref})")


def _is_params(obj, *attrs):
    return obj is not None and all(hasattr(obj, a) for a in attrs)


class _RadixKVCacheImpl(RequestCaching, HostTier):
    """SGLang prefix cache backed by radixkv.

    Classic form::

        RadixKVCache(req_to_token_pool, token_to_kv_pool_allocator, page_size,
                     disable=False, enable_kv_cache_events=False)

    or SGLang's ``CacheInitParams`` as the first argument. Extra keyword:
    ``capacity_tokens`` (tokens the C pool indexes; default the allocator's
    size, else 4M); ``host_tier`` (a radixkv.Store, medium "host": device
    pages evicted are demoted there, match_prefix reports host hits and
    init_load_back / load_back_start load them back) with
    ``write_policy`` ("back", "through", "selective") -- the allocator must
    then be a PoolAllocator (its pool, e.g. Pool.from_tensors over the
    server's KV buffers, becomes the cache's), or None: one over a
    metadata-only pool of capacity_tokens is made (no KV bytes move).
    Unknown keywords and extra positional arguments (what a
    newer SGLang may pass) are ignored.
    """

    def __init__(self, *args, **kwargs):
        params = kwargs.pop("params", None) or kwargs.pop("cache_init_params", None)
        if params is None and args and _is_params(args[0], "req_to_token_pool",
                                                  "token_to_kv_pool_allocator"):
            params, args = args[0], args[1:]
        if params is not None:
            g = lambda name, default=None: getattr(params, name, default)  # noqa: E731
            req_to_token_pool = g("req_to_token_pool")
            allocator = g("token_to_kv_pool_allocator")
            page_size = g("page_size", 1)
            disable = bool(g("disable", False))
            events = bool(g("enable_kv_cache_events", False))
            policy = g("eviction_policy", "lru")
            if g("is_eagle", False):
                raise ValueError("radixkv.sglang: EAGLE bigram keys are not supported")
        else:
            names = ("req_to_token_pool", "token_to_kv_pool_allocator", "page_size",
                     "disable", "enable_kv_cache_events")
            vals = dict(zip(names, args))
            for n in names:
                if n in kwargs:
                    vals[n] = kwargs.pop(n)
            req_to_token_pool = vals.get("req_to_token_pool")
            allocator = vals.get("token_to_kv_pool_allocator")
            page_size = vals.get("page_size", 1)
            disable = bool(vals.get("disable", False))
            events = bool(vals.get("enable_kv_cache_events", False))
            policy = kwargs.get("eviction_policy", "lru")
        if policy not in ("lru", "priority"):
            raise ValueError(f"radixkv.sglang: eviction policy {policy!r} is not "
                             "supported (lru, priority)")
        if not isinstance(page_size, int) or page_size < 1:
            raise ValueError(f"radixkv.sglang: page_size must be a positive int, "
                             f"not {page_size!r}")
        self.req_to_token_pool = req_to_token_pool
        self.token_to_kv_pool_allocator = allocator
        self.page_size = page_size
        self.disable = disable
        self.enable_kv_cache_events = events
        self.device = getattr(allocator, "device", "cpu") if allocator is not None else "cpu"
        cap = kwargs.get("capacity_tokens")
        if cap is None:
            cap = getattr(allocator, "size", None) or DEFAULT_CAPACITY_TOKENS
        self.capacity_tokens = int(cap)
        self._policy = policy
        self._tier = kwargs.get("host_tier")
        self._write_policy = kwargs.get("write_policy", "back")
        self._epoch = 0
        if self._tier is not None:
            if allocator is None:
                P = self.page_size
                allocator = PoolAllocator(Pool(num_blocks=max(1, self.capacity_tokens // P),
                                               page_size=P), device=self.device)
                self.token_to_kv_pool_allocator = allocator
            elif not isinstance(allocator, PoolAllocator):
                raise ValueError("radixkv.sglang: a host tier needs the KV allocator to be "
                                 "radixkv.sglang.PoolAllocator (the tree moves KV pages "
                                 "itself)")
        if isinstance(allocator, PoolAllocator):
            if allocator.page_size != self.page_size:
                raise ValueError("radixkv.sglang: the PoolAllocator's page size is "
                                 f"{allocator.page_size}, the cache's {self.page_size}")
            self.capacity_tokens = allocator.size
        self._build()

    # -- set-up ---------------------------------------------------------------
    def _build(self):
        P = self.page_size
        pages = max(1, self.capacity_tokens // P + 1)
        # one call stores at most `pages` new pages (16 per event) and
        # evicts in chunks of at most _evict_chunk pages (>= 1 event each)
        # KV events only when SGLang asks for them (else they cost nothing):
        # one call stores at most `pages` new pages (16 per event) and
        # evicts in chunks of at most _evict_chunk pages (>= 1 event each)
        ring = min(1 << 24, max(1024, pages // 16 + 64)) if self.enable_kv_cache_events else 0
        # the stored pages' token ids come with the events: one insert
        # stores at most `pages` pages
        ntok = (min(1 << 28, (pages + 2 * S.EVENT_MAX_HASHES) * P)
                if self.enable_kv_cache_events else 0)
        self._evict_chunk = ring - 64 if ring else pages
        # over a PoolAllocator a page's values are its block's slots: no
        # values table, and eviction frees straight into that pool
        self._identity = isinstance(self.token_to_kv_pool_allocator, PoolAllocator)
        if self._identity:
            self._pool = self.token_to_kv_pool_allocator.pool  # the allocator's
            pages = self._pool.num_blocks
        else:
            self._pool = Pool(num_blocks=pages, page_size=P)
        self._tree = Tree(self._pool, event_ring=ring, evict_policy=self._policy,
                          event_tokens=ntok)
        if self._tier is not None:
            self._tree.attach_tiers(host=self._tier, write_policy=self._write_policy)
        self._tier_setup()
        self._th = self._tree.handle
        self._ph = self._pool.handle
        self._cpu = str(self.device) == "cpu"
        self._tab = SlotTable(self._th, self._ph, P, self._identity)
        self._tabh = self._tab.handle
        self._drain = EventDrain(self._th, ring, ntok) if ring else None
        self._ar = np.arange(P, dtype=np.int64)
        self._num_blocks = pages
        self._blk = np.zeros(1024, dtype=np.uint32)  # the tier path's block ids
        self._blk_addr = self._blk.ctypes.data
        self._sl = np.zeros(1024 * P, dtype=np.int64)  # a match's slots
        self._sl_addr = self._sl.ctypes.data
        self._m = S.Match()
        self._ir = S.InsertResult()
        self._st = S.TreeStats()
        self._cn = S.Node()  # the node a lock call takes (copied by ctypes)
        self._lease = S.Lease()
        self._moved = C.c_uint64()
        # pointers made once: each call passes them as they are
        self._m_ref, self._ir_ref, self._st_ref = (
            _byref(self._m), _byref(self._ir), _byref(self._st))
        self._lease_ref, self._moved_ref = _byref(self._lease), _byref(self._moved)
        self._ns = {None: 0}
        self._leases = {}
        self._kv_events = []
        self.root_node = RadixKVNode(self, 0, 0, 0, 0)
        self._empty = self._tensor(np.zeros(0, dtype=np.int64))

    def close(self):
        """Frees the C tree and pool (the cache is unusable afterwards)."""
        if getattr(self, "_tree", None) is not None:
            self._tab.close()
            self._tree.close()
            if not self._identity:  # else the allocator's: it outlives us
                self._pool.close()
            self._tree = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # -- helpers ----------------------------------------------------------------
    def _tensor(self, arr):
        if torch is None:
            return arr
        t = torch.from_numpy(arr)
        return t if self._cpu else t.to(self.device)

    @staticmethod
    def _to_numpy64(value):
        if torch is not None and isinstance(value, torch.Tensor):
            return value.detach().to("cpu", torch.int64).numpy()
        return np.asarray(value, dtype=np.int64).reshape(-1)

    def _slots(self, blocks):
        """The KV slots of blocks' pages, concatenated (int64)."""
        if not self._identity:
            return self._tab.gather(blocks)
        b = blocks.astype(np.int64)
        if self.page_size == 1:
            return b
        return (b[:, None] * self.page_size + self._ar).reshape(-1)

    def _slots_buf(self, k):
        """The match's slot scratch (room for k) and its address."""
        if self._sl.shape[0] < k:
            self._sl = np.zeros(max(k, 2 * self._sl.shape[0]), dtype=np.int64)
            self._sl_addr = self._sl.ctypes.data
        return self._sl_addr

    def _values_arg(self, value, n, keep):
        """(address, keepalive) of n int64 KV slots for the C insert: value
        as given when it is contiguous int64 on the CPU (no copy), else
        converted; value None: the token ids (keep, int32) serve."""
        if value is None:
            vals = (np.frombuffer(keep, dtype=np.int32, count=n) if not hasattr(keep, "numpy")
                    else keep[:n].numpy()).astype(np.int64)
            return address_of(vals), vals
        if torch is not None and isinstance(value, torch.Tensor):
            if not (value.dtype == torch.int64 and value.device.type == "cpu"
                    and value.dim() == 1 and value.is_contiguous()):
                value = value.detach().to("cpu", torch.int64).reshape(-1).contiguous()
            if value.shape[0] < n:
                raise ValueError(f"radixkv.sglang.insert: {n} tokens need as many "
                                 f"values, got {value.shape[0]}")
            return value.data_ptr(), value
        if not (type(value) is np.ndarray and value.dtype is _I64 and value.ndim == 1):
            value = np.ascontiguousarray(self._to_numpy64(value))
        if value.shape[0] < n:
            raise ValueError(f"radixkv.sglang.insert: {n} tokens need as many "
                             f"values, got {value.shape[0]}")
        a = address_of(value)
        if a is None:  # read-only or strided
            value = np.array(value, dtype=np.int64)
            a = value.ctypes.data
        return a, value

    def _blocks_buf(self, k):
        """The block scratch array (room for k) and its address."""
        if self._blk.shape[0] < k:
            self._blk = np.zeros(max(k, 2 * self._blk.shape[0]), dtype=np.uint32)
            self._blk_addr = self._blk.ctypes.data
        return self._blk, self._blk_addr

    def _stats_now(self):
        st = _stats(self._th, self._st_ref)
        if st:
            check(st, "rkv_tree_get_stats")
        return self._st

    def _namespace(self, extra_key, create):
        ns = self._ns.get(extra_key)
        if ns is None and create:
            ns = len(self._ns)
            self._ns[extra_key] = ns
        return ns

    def _empty_match(self):
        return T.make_match_result(self._empty, self.root_node)

    # -- match ------------------------------------------------------------------
    def match_prefix(self, key, **kwargs):
        """The longest cached page-aligned prefix of key: device_indices
        (int64, one KV slot per matched token), last_device_node (lockable),
        last_host_node and host_hit_length: without a host tier the same
        node and 0; with one, the tokens after the device prefix whose pages
        are in the host tier (whole pages) and a node that
        init_load_back takes to load them. A match that ends inside a
        cached node splits it there. Accepts a RadixKey or SGLang's
        MatchPrefixParams (its ``key``)."""
        if not hasattr(key, "token_ids") and hasattr(key, "key"):
            key = key.key
        if self.disable:
            return self._empty_match()
        tokens = key.token_ids
        P = self.page_size
        n = len(tokens) // P * P
        if n == 0:
            return self._empty_match()
        ns = self._ns.get(key.extra_key)
        if ns is None:  # nothing was ever inserted under this extra_key
            return self._empty_match()
        m = self._m
        if self._tier is not None:
            blk, baddr = self._blocks_buf(n // P)
            return self._match_prefix_tiers(tokens, n, ns, blk, baddr)
        if isinstance(tokens, (list, tuple)):
            # Convert only as far as the match can reach: probe (peek) a
            # growing prefix; the real match then runs on a prefix that
            # reaches past the match end, so it splits where a full key would.
            # Each id is converted once: a longer probe appends to the
            # array, so growing by 2 costs no reconversion.
            conv = min(n, _FIRST_CHUNK)
            arr, done = None, 0
            while True:
                try:
                    part = list_to_int32(tokens[done:conv] if done or conv < len(tokens)
                                         else tokens)
                except InvalidArgError as e:
                    raise InvalidArgError("match_prefix", e.detail) from None
                if arr is None:
                    arr = part
                else:
                    arr.extend(part)
                done = conv
                addr = arr.buffer_info()[0]  # extend may move it
                if conv == n:
                    break
                check(_match(self._th, ns, addr, conv, None, _PEEK, _byref(m)),
                      "rkv_tree_match")
                if m.matched_tokens < conv:
                    break
                conv = min(n, conv * 2)
            keep = arr
        else:
            addr, _, keep = as_tokens(tokens)
            conv = n
        sl = self._sl_addr if self._sl.shape[0] >= n else self._slots_buf(n)
        st = _match_slots(self._th, self._tabh, ns, addr, conv, 0, sl, self._m_ref)
        if st:
            check(st, "rkv_tree_match_slots")
        del keep
        k = m.matched_tokens
        if k == 0:
            return self._empty_match()
        idx = self._sl[:k].copy()
        node = RadixKVNode(self, m.node.id, m.node.gen, ns, k)
        return T.make_match_result(self._tensor(idx), node)

    def _match_prefix_tiers(self, tokens, n, ns, blk, baddr):
        try:
            addr, _, keep = as_tokens(tokens)
        except InvalidArgError as e:
            raise InvalidArgError("match_prefix", e.detail) from None
        m, host, rec = self._match_host(ns, addr, n, keep, baddr)
        k = m.num_blocks
        node = RadixKVNode(self, m.node.id, m.node.gen, ns, m.matched_tokens)
        idx = self._tensor(self._slots(blk[:k])) if k else self._empty
        if rec is None:
            return T.make_match_result(idx, node)
        hnode = RadixKVNode(self, m.node.id, m.node.gen, ns, m.matched_tokens)
        hnode._host = rec
        return T.make_match_result(idx, node, host, hnode)

    # -- insert -----------------------------------------------------------------
    def insert(self, key, value=None, **kwargs):
        """Caches key's full pages with ``value`` (one KV slot per token;
        None: the token ids serve as values) and returns how many tokens
        were already cached (SGLang's InsertParams: an InsertResult with
        prefix_len). Values of already-cached tokens are not taken: the
        caller frees its duplicates, as with SGLang's RadixCache."""
        params = None
        if not hasattr(key, "token_ids") and hasattr(key, "key"):
            params, key, value = key, key.key, getattr(key, "value", value)
        n_cached = self._insert(key, value)
        return T.InsertResult(prefix_len=n_cached) if params is not None else n_cached

    def _insert(self, key, value):
        if self.disable:
            return 0
        P = self.page_size
        tokens = key.token_ids
        n = len(tokens) // P * P
        if n == 0:
            return 0
        addr, _, keep = as_tokens(tokens)
        if value is None and self._identity:
            raise InvalidArgError("insert", "a cache over a PoolAllocator needs the KV "
                                  "slots (value) of the key")
        vaddr, vkeep = self._values_arg(value, n, keep)
        ns = self._namespace(key.extra_key, create=True)
        st = _insert_slots(self._th, self._tabh, ns, addr, n, vaddr, self._ir_ref)
        if st == _NO_SPACE and not self._identity:
            self._make_room(ns, addr, n)
            st = _insert_slots(self._th, self._tabh, ns, addr, n, vaddr, self._ir_ref)
        if st:
            check(st, "rkv_tree_insert_slots")
        if self._drain is not None:
            self._record_stored(*self._drain.drain())
        del keep, vkeep
        return self._ir.prefix_tokens

    def _make_room(self, ns, addr, n):
        """The C pool is short of blocks for the key's new pages: evict
        (freeing values through the allocator) while the key's cached prefix
        is locked, so it stays cached."""
        m, lease = S.Match(), S.Lease()
        # not a peek: its node ends exactly at the match, so the lease
        # covers every matched page (a peek's node may end above it)
        check(_match(self._th, ns, addr, n, None, 0, _byref(m)), "rkv_tree_match")
        locked = m.num_blocks > 0
        if locked:
            check(_lock(self._th, m.node, _byref(lease)), "rkv_tree_lock")
        try:
            new = n // self.page_size - m.num_blocks
            self._evict_pages(new - lib.rkv_pool_num_free(self._ph))
        finally:
            if locked:
                check(_unlock(self._th, _byref(lease)), "rkv_tree_unlock")

    def _record_stored(self, ev, tokens):
        """SGLang's BlockStored per page, with the token ids the tree
        recorded for it (tokens: the STORED events' ids, in event order)."""
        P = self.page_size
        lora = None
        at = 0
        for e in ev[ev["kind"] == STORED]:
            parent = int(e["parent_hash"])
            for h in e["hashes"][:e["num_hashes"]].tolist():
                toks = tokens[at:at + P].tolist()
                # a namespace's first page has no parent (RKV_HASH_ROOT)
                self._kv_events.append(T.make_block_stored(
                    [h], None if parent == 0 else parent, toks, P, lora))
                parent = h
                at += P

    # -- eviction ------------------------------------------------------------------
    def evict(self, num_tokens, **kwargs):
        """Evicts at least num_tokens tokens (whole pages) of unlocked leaves,
        least recently used first, as far as there are any, and frees their
        values through the allocator. Returns the tokens evicted (an
        EvictResult for SGLang's EvictParams)."""
        params = None
        if hasattr(num_tokens, "num_tokens"):
            params, num_tokens = num_tokens, num_tokens.num_tokens
        num_tokens = int(num_tokens)
        done = 0
        if not self.disable and num_tokens > 0:
            P = self.page_size
            done = self._evict_pages((int(num_tokens) + P - 1) // P) * P
        return T.EvictResult(num_tokens_evicted=done) if params is not None else done

    def _evict_pages(self, pages):
        total = 0
        shrunk = False
        while pages > 0:
            chunk = min(pages, self._evict_chunk)
            st, slots, n = self._tab.evict(chunk)
            if st == _NO_SPACE and n == 0 and not shrunk:
                # fewer than chunk evictable: the call changed nothing;
                # take what there is (SGLang's evict stops when it runs out)
                shrunk = True
                pages = min(pages, self._stats_now().evictable_blocks)
                continue
            if slots.shape[0]:  # identity: none, back in the allocator's pool
                self._free_values(slots)
            if self._drain is not None:
                ev, _ = self._drain.drain()
                for e in ev[ev["kind"] == REMOVED]:
                    self._kv_events.append(T.make_block_removed(
                        e["hashes"][:e["num_hashes"]].tolist()))
            total += n
            if st == _NO_SPACE or n == 0:
                break
            check(st, "rkv_tree_evict_ids")
            pages -= n
        return total

    def _free_values(self, vals):
        alloc = self.token_to_kv_pool_allocator
        if self._identity:
            return  # the blocks went back to the allocator's pool
        if alloc is not None and vals.shape[0]:
            alloc.free(self._tensor(vals))

    # -- locks -----------------------------------------------------------------------
    def inc_lock_ref(self, node):
        """Protects node's path from eviction; returns the change of the
        evictable size (<= 0, in tokens)."""
        if node is None:
            return 0
        if getattr(node, "_pending", None) is not None:
            node._pending.locks += 1  # taken on the loaded path at completion
            return 0
        nid = getattr(node, "id", 0)
        if nid == 0:
            return 0
        cn = self._cn
        cn.id, cn.gen = nid, node.gen
        st = _lock_counted(self._th, cn, self._lease_ref, self._moved_ref)
        if st:
            check(st, "rkv_tree_lock")
        key = (nid, node.gen)
        leases = self._leases.get(key)
        if leases is None:
            self._leases[key] = [self._lease.id]
        else:
            leases.append(self._lease.id)
        return -self._moved.value * self.page_size

    def dec_lock_ref(self, node, swa_uuid_for_lock=None):
        """Releases one inc_lock_ref of node; returns the change of the
        evictable size (>= 0, in tokens)."""
        if node is None:
            return 0
        tk = getattr(node, "_pending", None)
        if tk is not None:
            if tk.locks == 0:
                raise StateError("dec_lock_ref", "the loading node holds no lock")
            tk.locks -= 1
            return 0
        nid = getattr(node, "id", 0)
        if nid == 0:
            return 0
        key = (nid, node.gen)
        leases = self._leases.get(key)
        if not leases:
            raise StateError("dec_lock_ref", f"node {key} holds no lock of this cache")
        self._lease.id = leases[-1]
        st = _unlock_counted(self._th, self._lease_ref, self._moved_ref)
        if st:
            check(st, "rkv_tree_unlock")
        leases.pop()
        if not leases:
            del self._leases[key]
        return self._moved.value * self.page_size

    def _unlock_id(self, lease_id):
        """Releases the C lease lease_id (reset, loads)."""
        self._lease.id = lease_id
        return _unlock(self._th, self._lease_ref)

    # -- sizes and state -------------------------------------------------------------
    def evictable_size(self):
        """Tokens in unlocked cached pages."""
        return self._stats_now().evictable_blocks * self.page_size

    def protected_size(self):
        """Tokens in locked cached pages."""
        return self._stats_now().locked_blocks * self.page_size

    def total_size(self):
        """Tokens cached."""
        return self._stats_now().cached_blocks * self.page_size

    def full_evictable_size(self):
        return self.evictable_size()

    def full_protected_size(self):
        return self.protected_size()

    def available_and_evictable_str(self):
        alloc = self.token_to_kv_pool_allocator
        avail = alloc.available_size() if alloc is not None else 0
        ev = self.evictable_size()
        return (f"Available tokens: {avail + ev} ({avail=} + {ev=})\n")

    def is_chunk_cache(self):
        return False

    def is_tree_cache(self):
        return True

    def supports_swa(self):
        return False

    def supports_mamba(self):
        return False

    def sanity_check(self):
        """Verifies the C tree's invariants and this layer's bookkeeping."""
        self._tree.check()
        st = self._stats_now()
        if st.cached_blocks != self._tab.count():
            raise RuntimeError(f"radixkv.sglang: {st.cached_blocks} pages cached, "
                               f"{self._tab.count()} in the slot table")

    def reset(self):
        """Drops everything cached (values are not freed: the allocator is
        reset with the cache) and every lock. With a host tier: completes
        the loads in flight first (BusyError if one is still copying);
        their nodes and every earlier last_host_node go stale."""
        if self._tier is not None and self._loads:
            self.poll_loads()
            if self._loads:
                from ..errors import BusyError
                raise BusyError("reset", f"{len(self._loads)} loads still copying: poll "
                                "them (check_hicache_events) first")
        self._epoch += 1
        for leases in self._leases.values():
            for lease_id in leases:
                self._unlock_id(lease_id)
        self._leases.clear()
        if not self.disable or self._stats_now().cached_blocks:
            check(lib.rkv_tree_reset(self._th), "rkv_tree_reset")
        if self._drain is not None:
            self._drain.drain()
        self._tab.clear()
        self._ns = {None: 0}
        if self.enable_kv_cache_events:
            self._kv_events.append(T.AllBlocksCleared())

    def all_values_flatten(self):
        """Every cached token's value (KV slot), concatenated."""
        blocks = self._tab.blocks()
        if not blocks.shape[0]:
            return self._empty
        return self._tensor(self._slots(blocks))

    def take_events(self):
        """The KV events since the last call (empty unless
        enable_kv_cache_events): BlockStored per page, BlockRemoved per
        evicted run, AllBlocksCleared on reset."""
        if not self.enable_kv_cache_events:
            return []
        ev, self._kv_events = self._kv_events, []
        return ev

    def pretty_print(self):
        """Prints the cached block chains per namespace and the sizes."""
        entries, _ = self._tree.snapshot()
        children = {}
        for ns, h, parent, _medium in entries:
            children.setdefault((ns, parent), []).append(h)
        names = {v: k for k, v in self._ns.items()}

        def walk(ns, parent, depth):
            for h in children.get((ns, parent), ()):
                print("  " * depth + f"[{self.page_size} tokens] {h:016x}")
                walk(ns, h, depth + 1)

        for ns in sorted({e[0] for e in entries}):
            print(f"namespace {ns} (extra_key={names.get(ns)!r}):")
            walk(ns, 0, 1)
        print(f"#tokens: {self.total_size()}, evictable: {self.evictable_size()}, "
              f"protected: {self.protected_size()}")

    # init_load_back, ready_to_load_host_cache, check_hicache_events: the
    # HostTier mixin (_hostier.py); without a host tier they load nothing
    def flush_write_through_acks(self):
        return None


def _make_class():
    base = _sglang_base()
    bases = (_RadixKVCacheImpl,) if base is object else (_RadixKVCacheImpl, base)
    cls = type("RadixKVCache", bases, {"__doc__": _RadixKVCacheImpl.__doc__,
                                       "__module__": "radixkv.sglang"})
    # everything SGLang's base declares abstract is implemented above or is
    # a hook this backend does not need
    cls.__abstractmethods__ = frozenset()
    return cls


RadixKVCache = _make_class()
