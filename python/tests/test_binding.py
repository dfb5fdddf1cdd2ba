"""The core binding over the C API: loading, errors, pool, tree, leases,
tokens without copies, events, retention, tiers, scheduler."""
import ctypes
import os
import subprocess
import sys

import pytest

import radixkv
from conftest import HAVE_NUMPY, HAVE_TORCH

needs_numpy = pytest.mark.skipif(not HAVE_NUMPY, reason="needs numpy (python3-numpy)")
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="needs torch (python3-torch)")


def make(num_blocks=64, page_size=4, **tree_kw):
    pool = radixkv.Pool(num_blocks=num_blocks, page_size=page_size)
    return pool, radixkv.Tree(pool, **tree_kw)


def cache(tree, tokens, ns=0):
    """Inserts tokens the way a server does; returns the insert result."""
    pages = len(tokens) // tree.page_size
    blocks = tree.alloc_blocks(pages)
    r = tree.insert(tokens, blocks, namespace=ns)
    tree.pool.unref(blocks)
    return r


def test_version_comes_from_the_library():
    lib = ctypes.CDLL(radixkv.library_path)
    lib.rkv_version.restype = ctypes.c_char_p
    assert radixkv.__version__ == lib.rkv_version().decode()
    assert radixkv.__version__.count(".") == 2


def test_loads_in_a_fresh_system_python():
    # the dlopen that failed with jemalloc's static TLS
    code = "import ctypes,sys; ctypes.CDLL(sys.argv[1])"
    r = subprocess.run(["/usr/bin/python3", "-c", code, radixkv.library_path],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_errors_carry_status_and_last_error():
    pool, tree = make()
    with pytest.raises(radixkv.InvalidArgError) as ei:
        tree.insert([1, 2, 3, -4], [0])
    e = ei.value
    assert isinstance(e, radixkv.Error) and isinstance(e, ValueError)
    assert e.status == 1 and e.status_name == "RKV_ERR_INVALID_ARG"
    assert e.function == "rkv_tree_insert" and "negative" in e.detail
    with pytest.raises(radixkv.StateError) as ei:
        pool.unref(7)  # a free block
    assert ei.value.status == 4 and ei.value.detail
    with pytest.raises(radixkv.InvalidArgError):
        radixkv.Pool(num_blocks=0)


def test_pool_blocks_and_refcounts():
    pool = radixkv.Pool(num_blocks=8, page_size=16)
    assert (pool.num_blocks, pool.num_free, pool.page_size) == (8, 8, 16)
    b = pool.alloc(3)
    assert len(b) == 3 and pool.num_free == 5
    pool.ref(int(b[0]))
    assert pool.refcount(int(b[0])) == 2
    pool.unref(b)
    assert pool.refcount(int(b[0])) == 1 and pool.num_free == 7
    with pytest.raises(radixkv.NoSpaceError):
        pool.alloc(8)
    assert pool.num_free == 7  # all or nothing
    pool.unref(int(b[0]))
    pool.check()


def test_match_insert_split_and_namespaces():
    pool, tree = make(page_size=4)
    r = cache(tree, list(range(12)))
    assert (r.prefix_tokens, r.cached_tokens, r.new_pages) == (0, 12, 3)
    m = tree.match(list(range(8)) + [99, 98, 97, 96])
    assert m.matched_tokens == 8 and len(m.blocks) == 2
    assert tree.stats()["splits"] == 1
    assert tree.match(list(range(12)), namespace=5).matched_tokens == 0
    r2 = cache(tree, list(range(16)))
    assert r2.prefix_tokens == 12 and r2.new_pages == 1
    tree.check()


def test_three_byte_token_ids():
    pool, tree = make(page_size=4, token_bytes=3)
    top = (1 << 24) - 1
    r = cache(tree, [top, top - 1, 0, 5] * 3)
    assert r.new_pages == 3
    assert tree.match([top, top - 1, 0, 5] * 3).matched_tokens == 12
    # 2**24 + id is not id; an id no 3-byte tree stores is refused
    assert tree.match([top, top - 1, 0, 5 + (1 << 24)]).matched_tokens == 0
    blocks = tree.alloc_blocks(1)
    with pytest.raises(radixkv.InvalidArgError) as ei:
        tree.insert([1 << 24, 0, 0, 0], blocks)
    assert "2^24" in str(ei.value)
    pool.unref(blocks)
    assert tree.stats()["cached_blocks"] == 3
    tree.check()
    with pytest.raises(radixkv.InvalidArgError):
        radixkv.Tree(radixkv.Pool(num_blocks=8, page_size=4), token_bytes=2)


def test_lease_context_manager_protects_the_path():
    pool, tree = make(num_blocks=4, page_size=4)
    cache(tree, list(range(8)))
    m = tree.match(list(range(8)))
    with tree.lock(m.node) as lease:
        assert lease.held
        assert tree.stats()["locked_blocks"] == 2
        with pytest.raises(radixkv.NoSpaceError):
            tree.evict(1)
        with pytest.raises(radixkv.BusyError):
            tree.reset()
    assert not lease.held
    assert tree.stats()["locked_blocks"] == 0
    with pytest.raises(radixkv.StateError):
        lease.release()  # released once already
    assert tree.evict(2) == 2
    with pytest.raises(radixkv.StaleHandleError):
        tree.lock(m.node)


@needs_numpy
def test_numpy_int32_tokens_pass_without_copy():
    import numpy as np
    a = np.arange(32, dtype=np.int32)
    addr, n, keep = radixkv.as_tokens(a)
    assert addr == a.ctypes.data and n == 32 and keep is a
    b = np.arange(32, dtype=np.int64)
    addr, n, keep = radixkv.as_tokens(b)
    assert keep.dtype == np.int32 and addr != b.ctypes.data
    with pytest.raises(radixkv.InvalidArgError):
        radixkv.as_tokens(np.array([1 << 40]))
    with pytest.raises(radixkv.InvalidArgError):
        radixkv.as_tokens(np.array([1.5]))
    pool, tree = make()
    cache(tree, a[:16])
    assert tree.match(b).matched_tokens == 16
    # read-only and strided int32 arrays: passed by address, or copied
    ro = np.frombuffer(a.tobytes(), dtype=np.int32)
    addr, n, keep = radixkv.as_tokens(ro)
    assert addr == ro.ctypes.data and n == 32 and keep is ro
    st = np.arange(64, dtype=np.int32)[::2]
    addr, n, keep = radixkv.as_tokens(st)
    assert n == 32 and keep.flags.c_contiguous and list(keep) == list(range(0, 64, 2))
    assert tree.match(ro).matched_tokens == 16
    assert radixkv.as_tokens(np.zeros(0, dtype=np.int32))[1] == 0


@needs_torch
def test_torch_int32_tokens_pass_without_copy():
    import torch
    t = torch.arange(32, dtype=torch.int32)
    addr, n, keep = radixkv.as_tokens(t)
    assert addr == t.data_ptr() and n == 32
    t64 = torch.arange(32)
    addr, n, keep = radixkv.as_tokens(t64)
    assert keep.dtype == torch.int32 and addr != t64.data_ptr()
    strided = torch.arange(64, dtype=torch.int32)[::2]
    assert list(radixkv.as_tokens(strided)[2]) == list(range(0, 64, 2))
    with pytest.raises(radixkv.InvalidArgError):
        radixkv.as_tokens(torch.tensor([1 << 40]))
    pool, tree = make()
    cache(tree, t[:16])
    assert tree.match(list(range(20))).matched_tokens == 16


def test_list_tokens_out_of_range():
    with pytest.raises(radixkv.InvalidArgError):
        radixkv.as_tokens([1, 1 << 33])
    with pytest.raises(radixkv.InvalidArgError):
        radixkv.as_tokens(["a"])


def test_events_and_snapshot_agree():
    pool, tree = make(page_size=4, event_ring=64)
    cache(tree, list(range(12)))
    cache(tree, list(range(4)) + [7] * 8, ns=3)
    ev = tree.events()
    assert [e.kind for e in ev] == [radixkv.EventKind.BLOCK_STORED] * 2
    assert sum(len(e.hashes) for e in ev) == 6  # another namespace shares nothing
    assert ev[1].namespace == 3 and ev[0].seq < ev[1].seq
    snap, seq = tree.snapshot()
    assert seq == ev[-1].seq
    assert {(ns, h) for ns, h, _p, _m in snap} == {
        (e.namespace, h) for e in ev for h in e.hashes}
    tree.evict(1)
    (rem,) = tree.events()
    assert rem.kind == radixkv.EventKind.BLOCK_REMOVED and len(rem.hashes) == 1
    tree.reset()
    assert [e.kind for e in tree.events()] == [radixkv.EventKind.ALL_CLEARED]
    h0 = radixkv.block_hash(0, 0, [0, 1, 2, 3])
    assert h0 == ev[0].hashes[0]
    _p2, t2 = make(event_ring=0)
    with pytest.raises(radixkv.StateError):
        t2.events()


def test_evict_ids_lists_exactly_the_freed_blocks():
    pool, tree = make(num_blocks=8, page_size=4)
    blocks = tree.alloc_blocks(3)
    tree.insert(list(range(12)), blocks)
    held = int(blocks[2])  # the tail page, still referenced by us
    pool.unref(blocks[:2])
    got = tree.evict_ids(2)
    # tail first; the tail's block stays allocated (we hold it), so it is
    # not listed and eviction goes on until two blocks were freed
    assert [int(b) for b in got] == [int(blocks[1]), int(blocks[0])]
    assert pool.refcount(held) == 1
    assert all(pool.refcount(int(b)) == 0 for b in got)
    pool.unref([held])
    with pytest.raises(radixkv.NoSpaceError):
        tree.evict_ids(1)
    tree.check()


def test_events_carry_token_ids():
    pool, tree = make(page_size=4, event_ring=64, event_tokens=256)
    cache(tree, list(range(12)))
    cache(tree, list(range(4)) + [7] * 4)
    cache(tree, [5] * 4, ns=3)
    tree.evict(1)
    ev = tree.events(tokens=True)
    kinds = [e.kind for e in ev]
    S, R = radixkv.EventKind.BLOCK_STORED, radixkv.EventKind.BLOCK_REMOVED
    assert kinds == [S, S, S, R]
    assert ev[0].tokens == tuple(range(12)) and len(ev[0].hashes) == 3
    assert ev[1].tokens == (7,) * 4 and ev[1].parent_hash == ev[0].hashes[0]
    assert ev[2].tokens == (5,) * 4 and ev[2].namespace == 3
    assert ev[3].tokens is None
    # the same hashes as a drain without tokens would give
    assert ev[0].hashes[0] == radixkv.block_hash(0, 0, [0, 1, 2, 3])
    _p2, t2 = make(page_size=4, event_ring=64)
    cache(t2, list(range(4)))
    with pytest.raises(radixkv.StateError):
        t2.events(tokens=True)  # created without event_tokens
    assert t2.events()[0].tokens is None


def test_retention_pins_and_priority():
    pool, tree = make(num_blocks=8, page_size=4, evict_policy="priority")
    cache(tree, list(range(16)))
    r = tree.retain(list(range(16)), radixkv.Retention(priority=90, prio_begin=0,
                    prio_end=8, pin_tokens=8, ttl_ms=100, owner=7), now_ms=10)
    assert r["pinned_pages"] == 2 and r["prio_pages"] == 2
    st = tree.retention_stats()
    assert st["pins"] == 1 and st["pinned_blocks"] == 2
    assert tree.pins_extend(7, 500, now_ms=20) == 1
    with pytest.raises(radixkv.InvalidArgError):
        tree.set_time(5)  # time never goes back
    assert tree.pins_release(7) == 1
    with pytest.raises(radixkv.InvalidArgError):
        tree.retain([1] * 4, radixkv.Retention(priority=101), now_ms=30)


def test_namespace_ttl_and_priority_duration():
    pool, tree = make(num_blocks=8, page_size=4, evict_policy="priority")
    cache(tree, list(range(8)), ns=3)
    with pytest.raises(radixkv.InvalidArgError):  # no ttl_ms, no default
        tree.retain(list(range(8)), radixkv.Retention(pin_tokens=8), now_ms=0,
                    namespace=3)
    tree.set_namespace_ttl(3, 50)
    assert tree.namespace_ttl(3) == 50 and tree.namespace_ttl(4) == 0
    tree.retain(list(range(8)), radixkv.Retention(pin_tokens=8, priority=90,
                prio_end=8, priority_duration_ms=20), now_ms=0, namespace=3)
    tree.set_time(19)
    st = tree.retention_stats()
    assert st["pins"] == 1 and st["prio_reverted"] == 0
    tree.set_time(20)
    assert tree.retention_stats()["prio_reverted"] == 1
    tree.set_time(50)
    assert tree.retention_stats()["pins"] == 0
    with pytest.raises(radixkv.InvalidArgError):  # a duration needs a priority
        tree.retain([1] * 4, radixkv.Retention(priority_duration_ms=5), now_ms=60)
    tree.check()


def test_session_end_releases_pins_and_marks_the_session_s_pages():
    pool, tree = make(num_blocks=8, page_size=4)
    shared = list(range(8))
    cache(tree, shared + [60] * 4)  # another session, used less recently
    cache(tree, shared + [50] * 8)  # session 7's context shares the first 8
    tree.retain(shared + [50] * 8, radixkv.Retention(pin_tokens=16, ttl_ms=100,
                owner=7), now_ms=1)
    assert tree.retention_stats()["pins"] == 1
    assert tree.session_end(shared + [50] * 8, owner=7) == 2  # its own 2 pages
    assert tree.retention_stats()["pins"] == 0
    # marked pages go first, although the other session's tail is older
    # (a match through a marked page would make it ordinary again)
    tree.evict(2)
    assert tree.match(shared + [50] * 8, peek=True).matched_tokens == 8
    assert tree.match(shared + [60] * 4, peek=True).matched_tokens == 12
    tree.check()


def test_tier_flush_demotes_the_device_pages():
    pool, tree = make(num_blocks=8, page_size=4)
    with pytest.raises(radixkv.StateError):
        tree.tier_flush()  # no tiers
    host = radixkv.Store("host", capacity_blocks=16)
    tree.attach_tiers(host=host)
    cache(tree, list(range(12)))
    tree.tier_flush()
    m = tree.match_tiers(list(range(12)), peek=True)
    assert m.matched_tokens == 0 and m.host_tokens == 12
    tree.check()


def test_tiers_metadata_only_host_store():
    pool, tree = make(num_blocks=4, page_size=4)
    host = radixkv.Store("host", capacity_blocks=16)
    tree.attach_tiers(host=host)
    cache(tree, list(range(16)))
    tree.evict(2)  # demoted to host, not dropped
    m = tree.match_tiers(list(range(16)), peek=True)
    assert m.matched_tokens == 8 and m.lower_tokens == 8 and m.host_tokens == 8
    ld = tree.load(list(range(16)), max_pages=4)
    assert ld["num_pages"] == 2 and ld["ticket"]
    done = tree.tier_poll()
    assert [d["ticket"] for d in done] == [ld["ticket"]] and done[0]["status"] == 0
    ld["lease"].release()
    assert tree.match(list(range(16))).matched_tokens == 16
    assert tree.tier_stats()["loads_blocks"][1] == 2
    assert host.info()["medium"] == 1
    tree.check()


def test_scheduler_runs_requests_to_the_end():
    pool, tree = make(num_blocks=64, page_size=4)
    with radixkv.Scheduler(tree, policy="lpm", max_batch_tokens=64) as s:
        s.submit(1, list(range(10)), max_new_tokens=2)
        s.submit(2, list(range(10)) + [50], max_new_tokens=2)
        now, finished = 0.0, set()
        while len(finished) < 2:
            plan = s.step(now)
            assert plan is not None
            assert plan.qo_indptr[-1] == plan.num_tokens == len(plan.input_tokens)
            s.commit([5] * plan.num_reqs, now_ms=now)
            for rid in plan.req_ids:
                if s.request_info(int(rid))["state"] == "finished":
                    finished.add(int(rid))
            now += 1.0
        s.check()
        assert s.stats()["finished"] == 2
        with pytest.raises(radixkv.DuplicateError):
            s.submit(3, [1, 2], 1)
            s.submit(3, [1, 2], 1)


def test_pool_refuses_close_under_a_live_tree():
    pool, tree = make()
    with pytest.raises(radixkv.BusyError):
        pool.close()
    tree.close()
    pool.close()
    with pytest.raises(ValueError):
        pool.num_free


def layout_check(extra=()):
    cc = os.environ.get("RKV_CC")
    incs = os.environ.get("RKV_INCLUDE_DIRS")
    if not cc or not incs:
        pytest.skip("needs RKV_CC and RKV_INCLUDE_DIRS (ctest sets them; "
                    "ctest python_struct_layout runs the same check)")
    here = os.path.dirname(os.path.abspath(__file__))
    args = [sys.executable, os.path.join(here, "check_struct_layout.py"), "--cc", cc]
    for d in incs.split(os.pathsep):
        args += ["-I", d]
    return subprocess.run(args + list(extra), capture_output=True, text=True)


def test_struct_layout_matches_the_header():
    r = layout_check()
    assert r.returncode == 0, r.stdout + r.stderr


def test_struct_layout_check_finds_a_wrong_declaration(tmp_path):
    bad = tmp_path / "bad_structs.py"
    bad.write_text(
        "import ctypes as C\n"
        "class Node(C.Structure):\n"
        "    _c_name_ = 'rkv_node'\n"
        "    _fields_ = [('gen', C.c_uint32), ('id', C.c_uint32)]  # swapped\n"
        "def all_structs():\n"
        "    return [Node]\n")
    r = layout_check(["--structs-file", str(bad)])
    assert r.returncode == 1
    assert "rkv_node.id: Python 4, C 0" in r.stdout


def test_core_binding_works_without_numpy_and_torch():
    code = """
import sys
sys.modules["numpy"] = None  # import numpy now fails
sys.modules["torch"] = None
import radixkv
pool = radixkv.Pool(num_blocks=64, page_size=4)
tree = radixkv.Tree(pool)
b = tree.alloc_blocks(3)
tree.insert(list(range(12)), b)
pool.unref(b)
m = tree.match(range(14))
assert m.matched_tokens == 12 and list(m.blocks) == list(b)
with radixkv.Scheduler(tree) as s:
    s.submit(1, [1, 2, 3], 2)
    p = s.step(0.0)
    assert list(p.input_tokens) == [1, 2, 3]
print("ok")
"""
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), ".."))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr


def test_library_writes_no_more_than_the_declared_structs():
    # the binding's own load-time guard, run again here: each config init
    # writes within the ctypes mirror (a larger C struct crashed pytest)
    from radixkv import _ffi
    _ffi._check_struct_sizes(_ffi._init_pairs())


def test_struct_size_guard_refuses_a_short_declaration():
    from radixkv import _ffi, _structs

    class ShortTreeConfig(ctypes.Structure):
        _c_name_ = "rkv_tree_config"
        _fields_ = _structs.TreeConfig._fields_[:-1]  # the field a merge added

    init = _ffi.lib.rkv_tree_config_init
    pair = (ShortTreeConfig, lambda a: init(ctypes.cast(a, ctypes.POINTER(_structs.TreeConfig))))
    with pytest.raises(ImportError, match="rkv_tree_config.*does not match"):
        _ffi._check_struct_sizes([pair])


# Long lists take another conversion path (struct packing from 128 ids on):
# both sides of that threshold must give the same ids and the same errors.
@pytest.mark.parametrize("n", [1, 127, 128, 129, 1000])
def test_token_lists_convert_exactly_on_both_paths(n):
    from radixkv.tokens import list_to_int32

    ids = [(i * 2654435761) % (2**31) - (i % 3) * 2**30 for i in range(n)]
    ids[0] = -(2**31)
    ids[-1] = 2**31 - 1
    assert list(list_to_int32(ids)) == ids
    assert list(list_to_int32(tuple(ids))) == ids
    for bad in (2**31, -(2**31) - 1):
        with pytest.raises(radixkv.InvalidArgError, match="does not fit int32"):
            list_to_int32(ids[:-1] + [bad])
    with pytest.raises(radixkv.InvalidArgError, match="must be integers"):
        list_to_int32(ids[:-1] + [1.5])
