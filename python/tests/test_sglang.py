"""radixkv.sglang against SGLang's prefix-cache contract (BasePrefixCache,
the classic RadixCache API), written from its documented behaviour; runs
without SGLang. Values are KV slot indices from a SimulatedAllocator, which
raises on a double free."""
import random
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import HAVE_TORCH

from radixkv.sglang import (AllBlocksCleared, BlockRemoved, BlockStored, RadixKey,
                            RadixKVCache, create_simulated)


def vals(t):
    return [int(x) for x in (t.tolist() if hasattr(t, "tolist") else t)]


class Rec:
    """An allocator that only records what it is asked to free."""
    device = "cpu"
    size = 1 << 12

    def __init__(self):
        self.freed = []

    def free(self, idx):
        self.freed.extend(vals(idx))

    def available_size(self):
        return 0


def plain(page_size=1, **kw):
    alloc = Rec()
    return RadixKVCache(None, alloc, page_size, **kw), alloc


def insert_alloc(cache, tokens, extra_key=None):
    """Inserts tokens with fresh slots; frees the duplicates like a caller."""
    a = cache.token_to_kv_pool_allocator
    v = a.alloc(len(tokens))
    n = cache.insert(RadixKey(tokens, extra_key), v)
    a.free(v[:n])
    P = cache.page_size
    aligned = len(tokens) // P * P
    a.free(v[aligned:])
    return v, n


def test_exports_work_without_sglang():
    assert "sglang" not in sys.modules or True  # importing must not need it
    import radixkv.sglang as m
    for name in ("RadixKVCache", "RadixKey", "BlockStored", "BlockRemoved",
                 "AllBlocksCleared", "create_simulated"):
        assert hasattr(m, name)
    k = RadixKey([1, 2, 3], "x")
    assert len(k) == 3 and k[1:].token_ids == [2, 3] and k[1:].extra_key == "x"


def test_empty_cache_matches_nothing():
    c, _ = plain()
    r = c.match_prefix(RadixKey([1, 2, 3]))
    assert len(r.device_indices) == 0
    assert r.last_device_node is r.last_host_node and r.host_hit_length == 0
    assert c.inc_lock_ref(r.last_device_node) == 0
    assert c.dec_lock_ref(r.last_device_node) == 0
    assert (c.total_size(), c.evictable_size(), c.protected_size()) == (0, 0, 0)


def test_insert_returns_the_cached_prefix_and_token_ids_serve_as_values():
    c, _ = plain()
    assert c.insert(RadixKey([1, 2, 3])) == 0
    assert c.insert(RadixKey([1, 2, 3, 4, 5])) == 3
    assert c.insert(RadixKey([1, 2, 9])) == 2
    r = c.match_prefix(RadixKey([1, 2, 3, 4, 5, 6]))
    assert vals(r.device_indices) == [1, 2, 3, 4, 5]
    assert c.total_size() == 6  # 1 2 3 4 5 and 9
    c.sanity_check()


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch (python3-torch): "
                    "device_indices are numpy arrays without it")
def test_device_indices_are_int64_tensors():
    import torch
    c, _ = plain()
    c.insert(RadixKey([5, 6]), torch.tensor([40, 41]))
    r = c.match_prefix(RadixKey([5, 6]))
    assert isinstance(r.device_indices, torch.Tensor)
    assert r.device_indices.dtype == torch.int64 and vals(r.device_indices) == [40, 41]
    assert c.match_prefix(RadixKey([9])).device_indices.dtype == torch.int64


def test_page_aligned_match_and_insert():
    c, _ = plain(page_size=4)
    assert c.insert(RadixKey(list(range(10))), list(range(100, 110))) == 0
    assert c.total_size() == 8  # the partial page is not cached
    r = c.match_prefix(RadixKey(list(range(7))))
    assert vals(r.device_indices) == [100, 101, 102, 103]
    r = c.match_prefix(RadixKey(list(range(3)) + [50] * 9))
    assert len(r.device_indices) == 0
    assert c.insert(RadixKey(list(range(3)))) == 0  # shorter than a page


def test_partial_match_splits_and_locks_only_the_matched_part():
    c, _ = plain()
    c.insert(RadixKey(list(range(8))))
    r = c.match_prefix(RadixKey([0, 1, 2, 3, 99]))
    assert vals(r.device_indices) == [0, 1, 2, 3]
    assert r.last_device_node.depth == 4
    assert c._tree.stats()["splits"] == 1
    assert c.inc_lock_ref(r.last_device_node) == -4
    assert (c.protected_size(), c.evictable_size()) == (4, 4)
    assert c.evict(100) == 4  # only the unlocked tail
    assert c.total_size() == 4
    assert c.dec_lock_ref(r.last_device_node) == 4
    assert (c.protected_size(), c.evictable_size()) == (0, 4)


def test_extra_keys_never_share_a_match():
    c, _ = plain()
    c.insert(RadixKey([1, 2, 3, 4], "lora-a"), [10, 11, 12, 13])
    assert len(c.match_prefix(RadixKey([1, 2, 3, 4], "lora-b")).device_indices) == 0
    assert len(c.match_prefix(RadixKey([1, 2, 3, 4])).device_indices) == 0
    assert c.insert(RadixKey([1, 2, 3, 4], "lora-b"), [20, 21, 22, 23]) == 0
    assert vals(c.match_prefix(RadixKey([1, 2], "lora-a")).device_indices) == [10, 11]
    assert vals(c.match_prefix(RadixKey([1, 2], "lora-b")).device_indices) == [20, 21]


def test_evict_frees_lru_leaves_with_exactly_their_values():
    c = create_simulated(page_size=2, num_tokens=64)
    a = c.token_to_kv_pool_allocator
    va, _ = insert_alloc(c, [1, 1, 1, 1])
    vb, _ = insert_alloc(c, [2, 2, 2, 2])
    vc, _ = insert_alloc(c, [3, 3, 3, 3])
    c.match_prefix(RadixKey([1, 1, 1, 1]))  # a is now the most recent
    a.freed_log.clear()
    assert c.evict(4) == 4
    assert sorted(np.concatenate(a.freed_log).tolist()) == sorted(vals(vb))
    assert len(c.match_prefix(RadixKey([2, 2])).device_indices) == 0
    assert vals(c.match_prefix(RadixKey([1, 1, 1, 1])).device_indices) == vals(va)
    a.freed_log.clear()
    assert c.evict(1) == 2  # whole pages
    assert sorted(np.concatenate(a.freed_log).tolist()) == sorted(vals(vc)[2:])
    c.sanity_check()


class Keeper(Rec):
    """An allocator that keeps the very objects it is asked to free (as
    SGLang's free_group does between free_group_begin and _end) and what
    they held then."""

    def __init__(self):
        super().__init__()
        self.kept = []

    def free(self, idx):
        self.kept.append((idx, vals(idx)))
        super().free(idx)


def test_evicted_values_handed_out_stay_intact_while_the_allocator_keeps_them():
    # the backend reuses its eviction buffers: only once nobody holds them
    alloc = Keeper()
    c = RadixKVCache(None, alloc, 2)
    for i in range(40):
        c.insert(RadixKey([i, i, i + 1, i + 1]), np.arange(4 * i, 4 * i + 4))
        if i % 3 == 2:
            assert c.evict(4) == 4
        if i % 7 == 6:
            alloc.kept = alloc.kept[-1:]  # the allocator lets go of some
    for obj, was in alloc.kept:
        assert vals(obj) == was
    assert len(alloc.freed) == len(set(alloc.freed)) == 13 * 4
    c.sanity_check()


def test_match_results_kept_by_the_caller_stay_intact():
    # match results come from reused buffers too: never one still held
    c, _ = plain(page_size=2)
    for i in range(8):
        c.insert(RadixKey([i] * 6), np.arange(100 * i, 100 * i + 6))
    held = []
    for rep in range(5):
        for i in range(8):
            r = c.match_prefix(RadixKey([i] * 6 + [99]))
            if (i + rep) % 3 == 0:
                held.append((r.device_indices, list(range(100 * i, 100 * i + 6))))
    assert len(held) > 8
    for idx, want in held:
        assert vals(idx) == want


def test_evict_never_takes_locked_paths_and_stops_when_nothing_is_left():
    c = create_simulated(page_size=1, num_tokens=64)
    insert_alloc(c, [1, 2, 3])
    insert_alloc(c, [7, 8])
    node = c.match_prefix(RadixKey([1, 2, 3])).last_device_node
    c.inc_lock_ref(node)
    assert c.evict(100) == 2
    assert c.evict(100) == 0
    assert c.total_size() == 3 and c.protected_size() == 3
    c.dec_lock_ref(node)
    assert c.evict(100) == 3 and c.total_size() == 0


def test_sizes_add_up_under_nested_locks():
    c, _ = plain()
    c.insert(RadixKey([1, 2, 3, 4, 5, 6]))
    n4 = c.match_prefix(RadixKey([1, 2, 3, 4, 0])).last_device_node
    n6 = c.match_prefix(RadixKey([1, 2, 3, 4, 5, 6])).last_device_node
    assert c.inc_lock_ref(n4) == -4
    assert c.inc_lock_ref(n6) == -2
    assert c.inc_lock_ref(n6) == 0
    assert n6.lock_ref == 2
    assert c.protected_size() + c.evictable_size() == c.total_size() == 6
    assert c.dec_lock_ref(n6) == 0
    assert c.dec_lock_ref(n6) == 2
    assert c.dec_lock_ref(n4) == 4
    with pytest.raises(Exception):
        c.dec_lock_ref(n4)


def make_req(pool, tokens, out, extra_key=None):
    return SimpleNamespace(origin_input_ids=list(tokens), output_ids=list(out),
                           fill_ids=list(tokens), prefix_indices=[], last_node=None,
                           extra_key=extra_key, req_pool_idx=pool.alloc(1)[0])


def admit(c, req):
    """What the scheduler does before running a request."""
    r = c.match_prefix(RadixKey(req.fill_ids, req.extra_key))
    req.prefix_indices, req.last_node = r.device_indices, r.last_device_node
    c.inc_lock_ref(req.last_node)
    a, p = c.token_to_kv_pool_allocator, c.req_to_token_pool
    # KV exists for every token but the last sampled one
    n_pre, total = len(r.device_indices), len(req.origin_input_ids) + len(req.output_ids) - 1
    new = a.alloc(total - n_pre)
    p.write((req.req_pool_idx, slice(0, n_pre)), r.device_indices)
    p.write((req.req_pool_idx, slice(n_pre, total)), new)


def used_slots(a):
    return set(np.nonzero(a._used)[0].tolist())


@pytest.mark.parametrize("page_size", [1, 4])
def test_finished_requests_keep_every_slot_cached_or_free(page_size):
    c = create_simulated(page_size=page_size, num_tokens=4096, max_context_len=256)
    a, p = c.token_to_kv_pool_allocator, c.req_to_token_pool
    rng = random.Random(7)
    prompts = [[rng.randrange(5) for _ in range(rng.randrange(1, 40))] for _ in range(6)]
    for i in range(40):
        base = prompts[i % len(prompts)]
        req = make_req(p, base + [rng.randrange(9) for _ in range(rng.randrange(0, 9))],
                       [rng.randrange(9) for _ in range(rng.randrange(1, 6))],
                       extra_key=None if i % 3 else "t")
        admit(c, req)
        if i % 4 == 0:
            c.cache_unfinished_req(req)
            assert req.last_node is not None
        c.cache_finished_req(req)
        assert used_slots(a) == set(vals(c.all_values_flatten()))
        assert c.protected_size() == 0 and p.available_size() == p.size
        if i % 7 == 6:
            c.evict(30)
            assert used_slots(a) == set(vals(c.all_values_flatten()))
        c.sanity_check()


def test_cache_unfinished_req_moves_the_lock_and_prefix():
    c = create_simulated(page_size=1, num_tokens=256)
    p = c.req_to_token_pool
    req = make_req(p, [1, 2, 3, 4, 5], [6, 7])
    admit(c, req)
    c.cache_unfinished_req(req)
    assert vals(req.prefix_indices) == vals(p.req_to_token[req.req_pool_idx, :5])
    assert req.last_node.depth == 5 and req.last_node.lock_ref == 1
    assert c.protected_size() == 5
    req.fill_ids = [1, 2, 3, 4, 5, 6]
    c.cache_unfinished_req(req)
    assert req.last_node.depth == 6 and c.protected_size() == 6
    c.cache_finished_req(req)
    assert c.protected_size() == 0 and c.total_size() == 6  # the last token has no KV


def test_cache_finished_req_frees_duplicates():
    c = create_simulated(page_size=1, num_tokens=256)
    a, p = c.token_to_kv_pool_allocator, c.req_to_token_pool
    r1 = make_req(p, [1, 2, 3], [4])
    admit(c, r1)
    r2 = make_req(p, [1, 2, 3], [9])  # computed the same prompt concurrently
    admit(c, r2)
    c.cache_finished_req(r1)
    dup = vals(p.req_to_token[r2.req_pool_idx, :3])
    c.cache_finished_req(r2)
    assert not (set(dup) & used_slots(a))  # r2's copies were freed
    assert used_slots(a) == set(vals(c.all_values_flatten()))


def test_events_per_page_removed_and_cleared():
    c, _ = plain(page_size=2, enable_kv_cache_events=True)
    c.insert(RadixKey([1, 2, 3, 4, 5]))
    ev = c.take_events()
    assert [type(e).__name__ for e in ev] == ["BlockStored", "BlockStored"]
    assert [e.token_ids for e in ev] == [[1, 2], [3, 4]]
    assert all(len(e.token_ids) <= 2 and e.block_size == 2 for e in ev)
    assert ev[0].parent_block_hash is None
    assert ev[1].parent_block_hash == ev[0].block_hashes[0]
    assert c.take_events() == []
    c.evict(2)
    (rm,) = c.take_events()
    assert isinstance(rm, BlockRemoved) and rm.block_hashes == ev[1].block_hashes
    c.reset()
    (cl,) = c.take_events()
    assert isinstance(cl, AllBlocksCleared)
    c2, _ = plain(page_size=2)
    c2.insert(RadixKey([1, 2]))
    assert c2.take_events() == []
    assert BlockStored is type(ev[0])


def test_disable_caches_nothing():
    c = create_simulated(page_size=1, num_tokens=64, disable=True)
    a, p = c.token_to_kv_pool_allocator, c.req_to_token_pool
    assert c.insert(RadixKey([1, 2, 3])) == 0
    assert len(c.match_prefix(RadixKey([1, 2, 3])).device_indices) == 0
    req = make_req(p, [1, 2, 3], [4])
    admit(c, req)
    c.cache_finished_req(req)
    assert c.total_size() == 0 and used_slots(a) == set()


def test_parameter_objects():
    c, alloc = plain()
    ins = c.insert(SimpleNamespace(key=RadixKey([1, 2, 3]), value=[7, 8, 9]))
    assert ins.prefix_len == 0
    ins = c.insert(SimpleNamespace(key=RadixKey([1, 2, 3, 4]), value=[7, 8, 9, 10]))
    assert ins.prefix_len == 3
    r = c.match_prefix(SimpleNamespace(key=RadixKey([1, 2, 3, 4])))
    assert vals(r.device_indices) == [7, 8, 9, 10]
    ev = c.evict(SimpleNamespace(num_tokens=1))
    assert ev.num_tokens_evicted == 1 and alloc.freed == [10]
    params = SimpleNamespace(req_to_token_pool=None, token_to_kv_pool_allocator=Rec(),
                             page_size=2, disable=False, enable_kv_cache_events=True,
                             eviction_policy="lru", is_eagle=False)
    c2 = RadixKVCache(params, "server_args-like extra argument")
    assert c2.page_size == 2 and c2.enable_kv_cache_events
    with pytest.raises(ValueError):
        RadixKVCache(SimpleNamespace(req_to_token_pool=None, token_to_kv_pool_allocator=None,
                                     page_size=1, eviction_policy="lfu"))


def test_reset_drops_locks_and_contents():
    c, alloc = plain()
    c.insert(RadixKey([1, 2, 3]))
    c.inc_lock_ref(c.match_prefix(RadixKey([1, 2, 3])).last_device_node)
    c.reset()
    assert (c.total_size(), c.protected_size()) == (0, 0)
    assert alloc.freed == []  # reset frees no values
    assert c.insert(RadixKey([1, 2, 3])) == 0
    c.sanity_check()


def test_all_values_flatten_and_pretty_print(capsys):
    c, _ = plain(page_size=2)
    c.insert(RadixKey([1, 2, 3, 4]), [10, 11, 12, 13])
    c.insert(RadixKey([1, 2, 5, 6], "x"), [20, 21, 22, 23])
    assert sorted(vals(c.all_values_flatten())) == [10, 11, 12, 13, 20, 21, 22, 23]
    c.pretty_print()
    out = capsys.readouterr().out
    assert "#tokens: 8" in out and "'x'" in out


def test_insert_under_pool_pressure_evicts_through_the_allocator():
    c = create_simulated(page_size=1, num_tokens=64, capacity_tokens=8)
    a = c.token_to_kv_pool_allocator
    v1, _ = insert_alloc(c, [1, 2, 3, 4, 5, 6])
    node = c.match_prefix(RadixKey([1, 2, 3])).last_device_node
    c.inc_lock_ref(node)  # the shared prefix must survive
    v2, n = insert_alloc(c, [1, 2, 3, 9, 9, 9, 9, 9])
    assert n == 3
    assert vals(c.match_prefix(RadixKey([1, 2, 3, 9, 9, 9, 9, 9])).device_indices) == \
        vals(v1[:3]) + vals(v2[3:])
    assert used_slots(a) == set(vals(c.all_values_flatten()))
    c.dec_lock_ref(node)
    c.sanity_check()


def test_random_operations_against_a_model():
    rng = random.Random(11)
    for P in (1, 3):
        c = create_simulated(page_size=P, num_tokens=1 << 12)
        a = c.token_to_kv_pool_allocator
        model = {}  # (extra_key, page-aligned prefix tuple) -> values of that page
        locked = []
        for step in range(300):
            ek = rng.choice([None, "a"])
            toks = [rng.randrange(3) for _ in range(rng.randrange(0, 14))]
            op = rng.random()
            if op < 0.45:
                v, _ = insert_alloc(c, toks, ek)
                for i in range(len(toks) // P):
                    model.setdefault((ek, tuple(toks[:(i + 1) * P])),
                                     vals(v[i * P:(i + 1) * P]))
            elif op < 0.85:
                r = c.match_prefix(RadixKey(toks, ek))
                want = []
                for i in range(len(toks) // P):
                    page = model.get((ek, tuple(toks[:(i + 1) * P])))
                    if page is None:
                        break
                    want += page
                assert vals(r.device_indices) == want
                if rng.random() < 0.3 and len(want):
                    c.inc_lock_ref(r.last_device_node)
                    locked.append(r.last_device_node)
            elif op < 0.93 and locked:
                c.dec_lock_ref(locked.pop(rng.randrange(len(locked))))
            else:
                before = set(vals(c.all_values_flatten()))
                c.evict(rng.randrange(1, 8))
                after = set(vals(c.all_values_flatten()))
                assert after <= before
                gone = before - after
                model = {k: v for k, v in model.items() if not set(v) & gone}
            assert used_slots(a) == set(vals(c.all_values_flatten()))
            assert c.protected_size() + c.evictable_size() == c.total_size()
        c.sanity_check()


def test_eviction_frees_exactly_the_blocks_the_tree_let_go():
    c = create_simulated(page_size=2, num_tokens=256)
    for t in ([1] * 8, [2] * 6, [3] * 4):
        insert_alloc(c, t)
    tab = c._tab
    cached_before = set(tab.blocks().tolist())
    slots_before = {b: tab.gather([b]).tolist() for b in cached_before}
    # a never-cached block freed during the eviction's window: the old
    # alloc-after-evict trick had to detect it; the ids come from C now
    (x,) = c._pool.alloc(1)
    st, slots, freed = tab.evict(3)
    slots = slots.tolist()
    c._pool.unref(int(x))
    gone = cached_before - set(tab.blocks().tolist())
    assert st == 0 and freed == 3 and len(gone) == 3
    assert all(c._pool.refcount(int(b)) == 0 for b in gone)
    assert int(x) not in gone
    # the slots returned are exactly those the freed blocks held
    assert sorted(slots) == sorted(v for b in gone for v in slots_before[b])
    assert all(tab.gather([b]).tolist() == [-1, -1] for b in gone)
    assert tab.count() == c._tree.stats()["cached_blocks"]
    c.sanity_check()


def test_stored_events_carry_the_tree_s_token_ids():
    c, _ = plain(page_size=2, enable_kv_cache_events=True)
    c.insert(RadixKey([1, 2, 3, 4]))
    c.insert(RadixKey([1, 2, 5, 6, 7, 8, 9]))  # splits after the first page
    c.insert(RadixKey([9, 9], "lora"))
    ev = c.take_events()
    assert [e.token_ids for e in ev] == [[1, 2], [3, 4], [5, 6], [7, 8], [9, 9]]
    assert ev[2].parent_block_hash == ev[0].block_hashes[0]
    assert ev[3].parent_block_hash == ev[2].block_hashes[0]
    assert ev[4].parent_block_hash is None  # first page of its namespace


@pytest.mark.parametrize("cut", [5, 511, 512, 513, 2048, 2049, 3000, 4096])
def test_long_list_keys_match_where_a_full_key_would(cut):
    # list keys are converted a growing prefix at a time: the match, its
    # values and the split point must not depend on that
    c, _ = plain(page_size=1)
    base = list(range(4096))
    c.insert(RadixKey(base))
    query = base[:cut] + [-5] + base[cut + 1:]
    r = c.match_prefix(RadixKey(query))
    assert vals(r.device_indices) == base[:cut]
    assert r.last_device_node.depth == cut
    splits = c._tree.stats()["splits"]
    assert splits == (1 if cut < 4096 else 0)
    r2 = c.match_prefix(RadixKey(np.array(query, dtype=np.int32)))
    assert (r2.last_device_node.id, r2.last_device_node.gen) == \
        (r.last_device_node.id, r.last_device_node.gen)
    assert c._tree.stats()["splits"] == splits
    c.sanity_check()


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch (python3-torch)")
def test_tensor_keys_and_values():
    import torch
    c, _ = plain(page_size=2)
    k = torch.arange(10, dtype=torch.int64)
    assert c.insert(RadixKey(k), torch.arange(100, 110)) == 0
    assert vals(c.match_prefix(RadixKey(np.arange(7))).device_indices) == list(range(100, 106))
    assert c.insert(RadixKey(k[:6])) == 6


def test_bad_token_ids_raise_invalid_arg():
    import radixkv
    c, _ = plain()
    c.insert(RadixKey([1, 2]))
    for bad in ([1, 1 << 40], [1, "x"]):
        with pytest.raises(radixkv.InvalidArgError):
            c.match_prefix(RadixKey(bad))
        with pytest.raises(radixkv.InvalidArgError):
            c.insert(RadixKey(bad))
    with pytest.raises(radixkv.InvalidArgError):
        c.insert(RadixKey([1, -3]))  # the C tree refuses negative ids
    assert c.total_size() == 2
    c.sanity_check()
