"""radixkv.sglang with a host tier (SGLang's HiRadixCache contract, from its
documented behaviour): host hits after demotion, loads back with the right
KV bytes (a pool over numpy / torch tensors), tickets polled to
completion, the documented errors, and no leaked page or lock."""
import numpy as np
import pytest

import radixkv
from conftest import HAVE_TORCH
from radixkv.sglang import LoadTicket, PoolAllocator, RadixKey, RadixKVCache

NB, P, H, D, L = 16, 4, 2, 8, 2


def kv_pool(kind="numpy"):
    if kind == "torch":
        import torch
        k = [torch.zeros(NB * P, H, D, dtype=torch.float16) for _ in range(L)]
        v = [torch.zeros(NB * P, H, D, dtype=torch.float16) for _ in range(L)]
    else:
        k = [np.zeros((NB * P, H, D), dtype=np.float16) for _ in range(L)]
        v = [np.zeros((NB * P, H, D), dtype=np.float16) for _ in range(L)]
    return radixkv.Pool.from_tensors(k, v, page_size=P), k, v


def make(kind="numpy", host_blocks=32):
    pool, k, v = kv_pool(kind)
    alloc = PoolAllocator(pool)
    host = radixkv.Store("host", capacity_blocks=host_blocks,
                         block_bytes=pool.bytes_per_block)
    cache = RadixKVCache(None, alloc, P, host_tier=host)
    return cache, alloc, pool, k, v, host


def as_np(x):
    return x.numpy() if hasattr(x, "numpy") else np.asarray(x)


def write_kv(k, v, slots, seed):
    """Fills the slots' K and V with values that name (seed, slot, layer)."""
    for layer in range(L):
        for t in (k[layer], v[layer]):
            for s in as_np(slots).tolist():
                val = seed * 1000 + s * 10 + layer + (0.5 if t is v[layer] else 0)
                t[s] = val % 2048


def read_kv(k, v, slots):
    out = []
    for layer in range(L):
        for t in (k[layer], v[layer]):
            out.append(np.stack([np.asarray(as_np(t[s]), dtype=np.float32)
                                 for s in as_np(slots).tolist()]))
    return out


def serve(cache, alloc, k, v, tokens, seed):
    """A request: match, compute (write KV) the rest, insert, free the
    caller's duplicates -- SGLang's cache_finished_req in short."""
    r = cache.match_prefix(RadixKey(tokens))
    cached = len(r.device_indices)
    n = len(tokens) // P * P
    slots = alloc.alloc(n - cached)
    write_kv(k, v, slots, seed)
    vals = np.concatenate([as_np(r.device_indices), as_np(slots)]).astype(np.int64)
    prefix = cache.insert(RadixKey(tokens[:n]), vals)
    if prefix > cached:
        alloc.free(vals[cached:prefix])
    return vals


def demote(cache, alloc, k, v, tokens, seed, pages):
    """Serves tokens, evicts pages pages from the device (to the host tier)
    and returns the match of tokens after it."""
    serve(cache, alloc, k, v, tokens, seed=seed)
    cache.evict(pages * P)
    return cache.match_prefix(RadixKey(tokens))


def no_leaks(cache, pool, host):
    cache.sanity_check()
    pool.check()
    host.check()
    assert not cache._leases and cache.loads_in_flight() == 0


@pytest.mark.parametrize("kind", ["numpy"] + (["torch"] if HAVE_TORCH else []))
def test_host_hit_after_demotion_loads_back_the_same_kv(kind):
    cache, alloc, pool, k, v, host = make(kind)
    toks = list(range(100, 100 + 3 * P))
    vals = serve(cache, alloc, k, v, toks, seed=1)
    before = read_kv(k, v, vals)
    assert cache.total_size() == 3 * P and alloc.available_size() == (NB - 3) * P
    # device pressure: the three pages go down to the host tier
    assert cache.evict(3 * P) == 3 * P
    assert alloc.available_size() == NB * P and host.used_blocks == 3
    write_kv(k, v, vals, seed=9)  # the server reuses the freed slots
    r = cache.match_prefix(RadixKey(toks + [7]))
    assert len(r.device_indices) == 0 and r.host_hit_length == 3 * P
    assert r.last_host_node is not r.last_device_node
    idx, node = cache.init_load_back(r.last_host_node, r.host_hit_length)
    assert len(idx) == 3 * P and node.loading
    assert cache.inc_lock_ref(node) == 0 and node.lock_ref == 1
    assert cache.loads_in_flight() == 1
    cache.check_hicache_events()  # the host backend copies at the first poll
    assert not node.loading and cache.loads_in_flight() == 0
    assert node.lock_ref == 1 and cache.protected_size() == 3 * P
    after = read_kv(k, v, idx)
    for a, b in zip(before, after):
        assert np.array_equal(a, b)
    r2 = cache.match_prefix(RadixKey(toks))
    assert as_np(r2.device_indices).tolist() == as_np(idx).tolist()
    assert r2.host_hit_length == 0
    cache.dec_lock_ref(node)
    assert cache.protected_size() == 0
    no_leaks(cache, pool, host)
    cache.close()


def test_partial_device_prefix_then_host_part():
    cache, alloc, pool, k, v, host = make()
    a = list(range(4 * P))
    serve(cache, alloc, k, v, a, seed=2)
    # demote the last two pages only (LRU tail first)
    assert cache.evict(2 * P) == 2 * P
    r = cache.match_prefix(RadixKey(a))
    assert len(r.device_indices) == 2 * P and r.host_hit_length == 2 * P
    tk = cache.load_back_start(r.last_host_node, r.host_hit_length)
    assert isinstance(tk, LoadTicket) and not tk.ready
    assert cache.load_ready(tk) and tk.ok and tk.num_tokens == 2 * P
    assert tk.node.depth == 4 * P
    r2 = cache.match_prefix(RadixKey(a))
    assert len(r2.device_indices) == 4 * P
    assert as_np(r2.device_indices)[2 * P:].tolist() == as_np(tk.device_indices).tolist()
    no_leaks(cache, pool, host)


def test_locks_taken_while_loading_move_to_the_loaded_path():
    cache, alloc, pool, k, v, host = make()
    a = list(range(3 * P))
    r = demote(cache, alloc, k, v, a, seed=3, pages=3)
    idx, node = cache.init_load_back(r.last_host_node, r.host_hit_length)
    cache.inc_lock_ref(node)
    cache.inc_lock_ref(node)
    cache.dec_lock_ref(node)
    cache.ready_to_load_host_cache()
    assert node.lock_ref == 1
    # the loaded path is locked: device pressure cannot take it
    assert cache.evict(3 * P) == 0
    assert cache.dec_lock_ref(node) == 3 * P
    assert cache.evict(3 * P) == 3 * P
    no_leaks(cache, pool, host)


def test_stale_node_after_reset_or_host_eviction_raises():
    cache, alloc, pool, k, v, host = make(host_blocks=2)
    a = list(range(2 * P))
    r = demote(cache, alloc, k, v, a, seed=4, pages=2)
    assert r.host_hit_length == 2 * P
    cache.reset()
    with pytest.raises(radixkv.StaleHandleError):
        cache.init_load_back(r.last_host_node, r.host_hit_length)
    # the host tier evicts the path (it holds 2 pages): the match is stale
    r = demote(cache, alloc, k, v, a, seed=5, pages=2)
    b = list(range(500, 500 + 2 * P))
    serve(cache, alloc, k, v, b, seed=6)
    cache.evict(2 * P)  # b's pages push a's out of the host tier
    with pytest.raises(radixkv.StaleHandleError):
        cache.load_back_start(r.last_host_node)
    no_leaks(cache, pool, host)


def test_no_room_on_the_device_raises_no_space_and_changes_nothing():
    cache, alloc, pool, k, v, host = make()
    a = list(range(4 * P))
    r = demote(cache, alloc, k, v, a, seed=7, pages=4)
    held = alloc.alloc((NB - 2) * P)  # the server holds all but 2 pages
    with pytest.raises(radixkv.NoSpaceError):
        cache.init_load_back(r.last_host_node, r.host_hit_length)
    assert cache.loads_in_flight() == 0 and host.used_blocks == 4
    # mem_quota below the hit: nothing is loaded (HiRadixCache's rule)
    idx, node = cache.init_load_back(r.last_host_node, r.host_hit_length, mem_quota=P)
    assert len(idx) == 0 and node is r.last_host_node
    alloc.free(held)
    tk = cache.load_back_start(r.last_host_node)
    assert cache.load_ready(tk) and tk.ok
    no_leaks(cache, pool, host)


def test_bad_arguments():
    cache, alloc, pool, k, v, host = make()
    with pytest.raises(ValueError):
        RadixKVCache(None, object(), P, host_tier=host)
    a = list(range(2 * P))
    with pytest.raises(radixkv.InvalidArgError):  # not whole pages of the pool
        cache.insert(RadixKey(a), np.arange(1, 2 * P + 1))
    odd = np.arange(2 * P)
    odd[P + 1] = 5 * P  # page 1 starts on a boundary but does not run on
    with pytest.raises(radixkv.InvalidArgError):
        cache.insert(RadixKey(a), odd)
    with pytest.raises(radixkv.InvalidArgError):  # past the pool
        cache.insert(RadixKey(a), np.arange(NB * P, NB * P + 2 * P))
    assert cache.total_size() == 0
    r = demote(cache, alloc, k, v, a, seed=8, pages=2)
    with pytest.raises(radixkv.InvalidArgError):
        cache.load_back_start(r.last_host_node, 3 * P)
    plain = RadixKVCache(None, None, P)
    with pytest.raises(radixkv.StateError):
        plain.load_back_start(r.last_host_node)
    no_leaks(cache, pool, host)


def test_request_protocol_with_a_host_tier():
    """cache_finished_req / cache_unfinished_req over a PoolAllocator:
    every page is the tree's, the request's or free -- never lost."""
    from radixkv.sglang import SimulatedReqToTokenPool
    from types import SimpleNamespace
    cache, alloc, pool, k, v, host = make()
    reqs = SimulatedReqToTokenPool(4, 64)
    cache.req_to_token_pool = reqs
    ids = list(range(3 * P + 2))
    i = reqs.alloc(1)[0]
    slots = alloc.alloc(len(ids))
    row = as_np(slots).astype(np.int32)
    if HAVE_TORCH:
        import torch
        row = torch.from_numpy(row)
    reqs.write((i, slice(0, len(ids))), row)
    req = SimpleNamespace(req_pool_idx=i, origin_input_ids=ids[:-1], output_ids=ids[-1:],
                          fill_ids=ids, prefix_indices=np.zeros(0, dtype=np.int64),
                          last_node=None, extra_key=None)
    cache.cache_finished_req(req)
    assert cache.total_size() == 3 * P
    assert alloc.available_size() == (NB - 3) * P
    cache.evict(3 * P)
    assert alloc.available_size() == NB * P
    no_leaks(cache, pool, host)


def test_collector_finalizing_the_store_or_pool_first_frees_nothing_in_use():
    """A cache is a reference cycle (its nodes point back at it): the
    collector finalizes its tree, pool and store in any order and clears
    weak references first. A store or pool finalized while its tree is
    open must wait for the tree (it used to be destroyed under it)."""
    cache, alloc, pool, k, v, host = make()
    a = list(range(2 * P))
    serve(cache, alloc, k, v, a, seed=10)
    cache.evict(2 * P)  # pages in the host store
    host.close()  # what the store's finalizer does
    assert host._h  # still there: the tree uses it
    pool._users.clear()  # the collector cleared the weak set
    with pytest.raises(radixkv.BusyError):
        pool.close()
    r = cache.match_prefix(RadixKey(a))
    assert r.host_hit_length == 2 * P
    tk = cache.load_back_start(r.last_host_node)
    assert cache.load_ready(tk) and tk.ok
    cache.close()  # destroys the tree, then the deferred store
    assert not host._h


def test_a_dropped_cache_with_a_host_tier_is_collected_cleanly():
    import subprocess
    import sys
    import os
    code = (
        "import gc, sys; sys.path.insert(0, %r)\n"
        "import test_sglang_hostier as t\n"
        "for i in range(20):\n"
        "    cache, alloc, pool, k, v, host = t.make()\n"
        "    t.serve(cache, alloc, k, v, list(range(3 * t.P)), seed=i)\n"
        "    cache.evict(t.P)\n"
        "    del cache, alloc, pool, host\n"
        "    gc.collect()\n"
        "print('ok')\n") % os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_pool_allocator_without_a_host_tier_frees_into_the_pool():
    """Over a PoolAllocator alone the cache keeps no values table: eviction
    returns the pages to the allocator's pool directly."""
    pool = radixkv.Pool(num_blocks=NB, page_size=P)
    alloc = PoolAllocator(pool)
    cache = RadixKVCache(None, alloc, P)
    a = list(range(3 * P))
    slots = alloc.alloc(3 * P + 1)  # a partial page too
    assert alloc.available_size() == (NB - 4) * P
    assert cache.insert(RadixKey(a), slots[:3 * P]) == 0
    alloc.free(slots[3 * P:])
    assert alloc.available_size() == (NB - 3) * P  # the cache holds 3 pages
    r = cache.match_prefix(RadixKey(a))
    assert as_np(r.device_indices).tolist() == as_np(slots[:3 * P]).tolist()
    assert r.host_hit_length == 0
    assert cache.evict(2 * P) == 2 * P
    assert alloc.available_size() == (NB - 1) * P
    cache.sanity_check()
    cache.close()
    pool.check()
    assert alloc.available_size() == NB * P


def test_inserting_a_key_whose_pages_sit_in_the_host_tier():
    """A request recomputes a path the host tier holds (it did not load
    it): the insert takes exactly the pages the tree keeps, the caller
    frees the rest, and no page is lost or held twice."""
    cache, alloc, pool, k, v, host = make()
    a = list(range(3 * P))
    r = demote(cache, alloc, k, v, a, seed=11, pages=2)  # pages 1 and 2 in the host tier
    assert len(r.device_indices) == P and r.host_hit_length == 2 * P
    slots = as_np(alloc.alloc(2 * P)).astype(np.int64)
    vals = np.concatenate([as_np(r.device_indices), slots])
    prefix = cache.insert(RadixKey(a), vals)
    if prefix > P:
        alloc.free(vals[P:prefix])
    cache.sanity_check()
    pool.check()
    host.check()
    assert pool.num_free * P + cache.total_size() == NB * P
    r2 = cache.match_prefix(RadixKey(a))
    assert len(r2.device_indices) + r2.host_hit_length == 3 * P
    cache.evict(3 * P)
    assert alloc.available_size() == NB * P
    no_leaks(cache, pool, host)


def test_inserting_a_key_whose_pages_are_loading_takes_only_what_the_tree_kept():
    """A request recomputes a path whose host pages are being loaded: the
    insert ends at the loading pages, so the caller's pages past them are
    not the tree's -- they must be freed, not counted as cached."""
    cache, alloc, pool, k, v, host = make()
    a = list(range(4 * P))
    r = demote(cache, alloc, k, v, a, seed=12, pages=2)  # pages 2 and 3 in the host tier
    assert len(r.device_indices) == 2 * P and r.host_hit_length == 2 * P
    tk = cache.load_back_start(r.last_host_node, r.host_hit_length)
    assert tk is not None and not tk.ready  # loading: copies run at the next poll
    slots = as_np(alloc.alloc(2 * P)).astype(np.int64)
    vals = np.concatenate([as_np(r.device_indices), slots])
    assert cache.insert(RadixKey(a), vals) == 2 * P
    cache.sanity_check()  # the pages not taken are not counted as cached
    pool.check()
    assert all(pool.refcount(int(s) // P) == 0 for s in slots[::P])
    assert cache.load_ready(tk) and tk.ok
    assert len(cache.match_prefix(RadixKey(a)).device_indices) == 4 * P
    no_leaks(cache, pool, host)
