"""Pool.from_tensors: KV memory the server owns (torch or numpy), through
the host tier and back, byte for byte."""
import gc

import pytest

import radixkv
from conftest import HAVE_NUMPY, HAVE_TORCH

needs_numpy = pytest.mark.skipif(not HAVE_NUMPY, reason="needs numpy (python3-numpy)")
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="needs torch (python3-torch)")

NB, P, H, D, L = 8, 4, 2, 8, 2


def roundtrip(pool, k, v, fill, block_bytes_of, zero):
    """Caches 3 pages, fills their KV, demotes them to host, zeroes the
    device copies, loads them back; returns (before, after) per page."""
    tree = radixkv.Tree(pool)
    host = radixkv.Store("host", capacity_blocks=16, block_bytes=pool.bytes_per_block)
    tree.attach_tiers(host=host)
    toks = list(range(3 * P))
    blocks = tree.alloc_blocks(3)
    for i, b in enumerate(blocks):
        fill(int(b), i)
    tree.insert(toks, blocks)
    pool.unref(blocks)
    before = [block_bytes_of(int(b)) for b in blocks]
    assert tree.evict(3) == 3  # write-back: all three go down to host
    for b in blocks:
        zero(int(b))  # the server reuses the freed slots
    assert tree.match(toks).matched_tokens == 0
    ld = tree.load(toks, max_pages=3)
    assert ld["num_pages"] == 3
    done = tree.tier_poll()
    assert [d["status"] for d in done] == [0]
    ld["lease"].release()
    m = tree.match(toks)
    assert m.matched_tokens == 3 * P
    after = [block_bytes_of(int(b)) for b in m.blocks]
    tree.check()
    return before, after


@needs_torch
def test_torch_cpu_tensors_through_the_host_tier():
    import torch
    g = torch.Generator().manual_seed(1)
    k = [torch.zeros(NB, P, H, D, dtype=torch.float16) for _ in range(L)]
    v = [torch.zeros(NB, P, H, D, dtype=torch.float16) for _ in range(L)]
    pool = radixkv.Pool.from_tensors(k, v, page_size=P)
    assert pool.kv_external and pool.num_blocks == NB
    es = 2
    assert pool.kv_strides == (P * H * D * es, H * D * es, D * es)
    assert pool.bytes_per_block == 2 * L * P * H * D * es

    def fill(b, i):
        for t in k + v:
            t[b] = torch.randn(P, H, D, generator=g).to(torch.float16)

    def page(b):
        return b"".join(t[b].numpy().tobytes() for t in k + v)

    def zero(b):
        for t in k + v:
            t[b].zero_()

    before, after = roundtrip(pool, k, v, fill, page, zero)
    assert all(len(x) == pool.bytes_per_block for x in before)
    assert before == after and any(any(x) for x in before)


@needs_numpy
def test_sglang_slot_layout_with_numpy():
    import numpy as np
    rng = np.random.default_rng(2)
    # [num_slots, H, D] per layer, slot = block * P + t; a spare slot at
    # the end (not a whole page) is left out
    k = [np.zeros((NB * P + 1, H, D), dtype=np.float32) for _ in range(L)]
    v = [np.zeros((NB * P + 1, H, D), dtype=np.float32) for _ in range(L)]
    pool = radixkv.Pool.from_tensors(k, v, page_size=P)
    assert pool.num_blocks == NB

    def rows(b):
        return slice(b * P, (b + 1) * P)

    def fill(b, i):
        for t in k + v:
            t[rows(b)] = rng.standard_normal((P, H, D))

    def page(b):
        return b"".join(t[rows(b)].tobytes() for t in k + v)

    def zero(b):
        for t in k + v:
            t[rows(b)] = 0

    before, after = roundtrip(pool, k, v, fill, page, zero)
    assert before == after and any(any(x) for x in before)


@needs_numpy
def test_the_pool_keeps_the_tensors_alive():
    import numpy as np
    import weakref

    class Arr(np.ndarray):  # weak-referenceable
        pass

    k = [np.zeros((NB, P, H, D), dtype=np.float32).view(Arr)]
    v = [np.zeros((NB, P, H, D), dtype=np.float32).view(Arr)]
    ref = weakref.ref(k[0])
    pool = radixkv.Pool.from_tensors(k, v, page_size=P)
    del k, v
    gc.collect()
    assert ref() is not None  # the pool still writes there
    pool.close()
    gc.collect()
    assert ref() is None


@needs_numpy
def test_tensors_that_do_not_form_a_pool_are_refused():
    import numpy as np
    a = np.zeros((NB, P, H, D), dtype=np.float32)
    bad = [
        ([a], [], "K layers"),
        ([a], [np.zeros((NB, P, H, D), dtype=np.float16)], "differ"),
        ([a], [np.zeros((NB, P, H, D + 1), dtype=np.float32)], "differ"),
        ([a[..., ::2]], [a[..., ::2]], "contiguous"),  # head_dim strided
        ([a.astype(np.int32)], [a.astype(np.int32)], "dtype"),
        ([np.zeros((NB, P + 1, H, D), dtype=np.float32)] * 2, [a] * 2, "differ"),
        ([[1.0]], [[1.0]], "neither"),
    ]
    for ks, vs, why in bad:
        with pytest.raises(radixkv.InvalidArgError, match=why):
            radixkv.Pool.from_tensors(ks, vs, page_size=P)
    with pytest.raises(radixkv.InvalidArgError, match="page_size"):
        radixkv.Pool.from_tensors([a], [a], page_size=P + 1)
    # two layers that alias the same bytes as K and V are the caller's
    # business (the C API does not check); overlapping strides are not:
    over = np.lib.stride_tricks.as_strided(a, (NB, P, H, D), (8, 4, 4, 4))
    with pytest.raises(radixkv.InvalidArgError):
        radixkv.Pool.from_tensors([over], [over], page_size=P)


def test_store_mac_key_must_be_whole():
    with pytest.raises(radixkv.InvalidArgError, match="32 bytes"):
        radixkv.Store("disk", capacity_blocks=4, mac_key=b"short")
