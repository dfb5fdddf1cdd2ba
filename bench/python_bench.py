#!/usr/bin/env python3
"""bench/python_bench.py -- what the Python layer costs, on the Mooncake
conversation trace (bench/traces/, 12,031 requests), replayed in file order
with 3,000,000 tokens of capacity at page sizes 16 and 512:

  (a) radixkv.Tree (the ctypes binding) doing what tree_bench does per
      request -- match (non-peek), lock, alloc_blocks (evicting), insert,
      unlock, unref -- timed per call; and tree_bench itself (the C API)
      run on the same trace, page size and capacity in the same run, so
      the two are compared on the same machine and load;
  (b) radixkv.sglang.RadixKVCache doing a prefix cache's tree work per
      request: match_prefix, inc_lock_ref, evict (when the KV allocator is
      short), insert (with KV slot values), dec_lock_ref -- over a
      separate server allocator (values kept in the cache's C slot table,
      eviction frees them through the allocator) and over
      radixkv.sglang.PoolAllocator
      (the cache's own pool allocates the KV pages: no table); the whole
      trace's sum is set against SGLang's RadixCache figures on the same
      trace (bench/traces/README.md: 7.4-8.5 s at page 512, 9.2-9.3 s at
      page 16, one request at a time, same capacity).

Token ids: block id h expands to h*512 .. h*512+511 (equal ids, equal
tokens), cut to input_length. Keys are given as int32 numpy arrays (passed
to C without a copy) and, for (b), also as Python lists, what SGLang's
scheduler holds (converted to int32 by the binding: a cost per token).
No output tokens are cached. Timing: time.perf_counter_ns around each call
(wall time, as tree_bench measures), or with --clock cpu the thread's CPU
time (time.thread_time_ns: a shared, loaded machine then does not count the
time the process waits for a core; each reading is a system call, which the
figures include); the fastest of --reps repetitions is reported (figures,
never pass/fail).

Usage: python_bench.py [--build DIR] [--quick] [--reps N] [--page-size P]
                       [--trace FILE] [--no-lists] [--clock wall|cpu]
                       [--python DIR] [--only-lists]
  --build DIR   the build with libradixkv.so and tree_bench (default build)
  --quick       first 2,000 requests only (not comparable to SGLang's figures)
  --python DIR  the radixkv package to import (default python/): A/B of two
                versions of the Python layer on the same build
  --only-lists  only radixkv.sglang with list keys (no tree_bench, no others)
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
TRACE = os.path.join(ROOT, "bench", "traces", "mooncake_conversation_trace.jsonl")
CAPACITY = 3_000_000
CLOCK = time.perf_counter_ns
SGLANG = {512: (7.4, 8.5, 91, 102, 63, 70, 163, 182), 16: (9.2, 9.3, 98, 101, 67, 68, 248, 251)}


def load_trace(path, limit):
    reqs = []
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            ids = np.asarray(r["hash_ids"], dtype=np.int64)
            toks = (ids[:, None] * 512 + np.arange(512, dtype=np.int64)[None, :]).reshape(-1)
            toks = toks[:r["input_length"]]
            assert toks.max(initial=0) < 2**31
            reqs.append(toks.astype(np.int32))
            if limit and len(reqs) >= limit:
                break
    return reqs


def bench_binding(radixkv, reqs, P):
    """(a): the Tree binding, tree_bench's protocol."""
    pool = radixkv.Pool(num_blocks=CAPACITY // P, page_size=P)
    tree = radixkv.Tree(pool)
    t_match = t_insert = t_alloc = 0
    hit = total = 0
    clock = CLOCK
    for toks in reqs:
        n = toks.shape[0] // P * P
        t0 = clock()
        m = tree.match(toks)
        t1 = clock()
        lease = tree.lock(m.node)
        new = n // P - len(m.blocks)
        t2 = clock()
        blocks = tree.alloc_blocks(new) if new else None
        t3 = clock()
        if new:
            allb = np.concatenate([m.blocks, blocks])
            t4 = clock()
            tree.insert(toks[:n], allb)
            t5 = clock()
            t_insert += t5 - t4
        lease.release()
        if new:
            pool.unref(blocks)
        t_match += t1 - t0
        t_alloc += t3 - t2
        hit += m.matched_tokens
        total += toks.shape[0]
    tree.close()
    pool.close()
    k = len(reqs)
    return {"match_us": t_match / k / 1e3, "insert_us": t_insert / k / 1e3,
            "alloc_us": t_alloc / k / 1e3, "hit": hit / total,
            "tree_s": (t_match + t_insert + t_alloc) / 1e9}


class BenchAllocator:
    """KV slots a page at a time from a numpy stack: free() and alloc() are
    a few vectorized operations, as cheap as SGLang's tensor allocator."""

    def __init__(self, size, P):
        self.size, self.page_size, self.device = size, P, "cpu"
        self.stack = np.arange(size // P, dtype=np.int64)[::-1].copy()
        self.top = self.stack.shape[0]
        self.ar = np.arange(P, dtype=np.int64)

    def available_size(self):
        return self.top * self.page_size

    def alloc(self, n):
        pages = (n + self.page_size - 1) // self.page_size
        got = self.stack[self.top - pages:self.top]
        self.top -= pages
        return (got[:, None] * self.page_size + self.ar[None, :]).reshape(-1)[:n]

    def free(self, idx):
        idx = idx.numpy() if hasattr(idx, "numpy") else np.asarray(idx)
        pages = idx[::self.page_size] // self.page_size
        self.stack[self.top:self.top + pages.shape[0]] = pages
        self.top += pages.shape[0]


def bench_sglang(sg, reqs, P, as_list, pool_alloc=False):
    """(b): RadixKVCache's tree work per request. pool_alloc: the KV
    allocator is radixkv.sglang.PoolAllocator (the cache's own pool: a
    page's values are its block's slots, eviction frees into the pool)
    instead of a separate server allocator."""
    if pool_alloc:
        import radixkv
        alloc = sg.PoolAllocator(radixkv.Pool(num_blocks=CAPACITY // P, page_size=P))
    else:
        alloc = BenchAllocator(CAPACITY, P)
    cache = sg.RadixKVCache(None, alloc, P, capacity_tokens=CAPACITY)
    t_match = t_insert = t_evict = t_lock = 0
    hit = total = 0
    clock = CLOCK
    for toks in reqs:
        if as_list:
            toks = toks.tolist()  # untimed: the scheduler holds lists
        n = len(toks) // P * P
        key = sg.RadixKey(toks[:n] if as_list else toks)
        t0 = clock()
        res = cache.match_prefix(key)
        t1 = clock()
        node = res.last_device_node
        cache.inc_lock_ref(node)
        t2 = clock()
        m = len(res.device_indices)
        new = n - m
        te = 0
        if new > alloc.available_size():
            te0 = clock()
            cache.evict(new - alloc.available_size())
            te = clock() - te0
        if new:
            slots = alloc.alloc(new)
            values = np.concatenate([res.device_indices.numpy() if hasattr(
                res.device_indices, "numpy") else res.device_indices,
                slots.numpy() if hasattr(slots, "numpy") else slots])
            t3 = clock()
            cache.insert(key, values)
            t4 = clock()
            t_insert += t4 - t3
        t5 = clock()
        cache.dec_lock_ref(node)
        t6 = clock()
        t_match += t1 - t0
        t_lock += (t2 - t1) + (t6 - t5)
        t_evict += te
        hit += m
        total += len(toks)
    cache.sanity_check()
    cache.close()
    k = len(reqs)
    return {"match_us": t_match / k / 1e3, "insert_us": t_insert / k / 1e3,
            "evict_us": t_evict / k / 1e3, "lock_us": t_lock / k / 1e3, "hit": hit / total,
            "tree_s": (t_match + t_insert + t_evict + t_lock) / 1e9}


def run_tree_bench(build, P, quick, trace):
    exe = os.path.join(build, "tree_bench")
    if not os.path.exists(exe):
        return None
    args = [exe, "--trace", trace, "--page-size", str(P), "--capacity-tokens", str(CAPACITY)]
    if quick:
        args.append("--quick")
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == "mooncake" and f[1] == str(P):
            # workload page reqs hit% match_us ns/mtok m/memcmp insert_us i/hash alloc_us ...
            return {"match_us": float(f[4]), "insert_us": float(f[7]),
                    "alloc_us": float(f[9]), "hit": float(f[3].rstrip("%")) / 100,
                    "tree_s": float(f[-1])}
    raise RuntimeError("tree_bench: no mooncake line in its output:\n" + out)


def best(fn, reps):
    runs = [fn() for _ in range(reps)]
    return min(runs, key=lambda r: r["tree_s"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--page-size", type=int, action="append")
    ap.add_argument("--no-lists", action="store_true", help="skip the list-key runs")
    ap.add_argument("--trace", default=TRACE, help="the trace (default: the copy in "
                    "bench/traces/, the same file as ../shared/traces/)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    ap.add_argument("--python", default=os.path.join(ROOT, "python"))
    ap.add_argument("--only-lists", action="store_true")
    args = ap.parse_args()
    global CLOCK
    CLOCK = time.thread_time_ns if args.clock == "cpu" else time.perf_counter_ns
    build = os.path.abspath(args.build)
    os.environ.setdefault("RADIXKV_LIBRARY", os.path.join(build, "libradixkv.so"))
    sys.path.insert(0, os.path.abspath(args.python))
    import radixkv
    import radixkv.sglang as sg
    print(f"python_bench: radixkv from {os.path.dirname(radixkv.__file__)}")
    reqs = load_trace(args.trace, 2000 if args.quick else 0)
    print(f"python_bench: {len(reqs)} requests, capacity {CAPACITY} tokens, "
          f"library {radixkv.library_path}, Python {sys.version.split()[0]}, "
          f"fastest of {args.reps}, {args.clock} clock (tree_bench: wall)")
    for P in args.page_size or [16, 512]:
        if args.only_lists:
            r = [bench_sglang(sg, reqs, P, True) for _ in range(args.reps)]
            print(f"\npage {P}: radixkv.sglang, list keys, each repetition: " + "; ".join(
                f"match {x['match_us']:.2f} us, insert {x['insert_us']:.2f} us, evict "
                f"{x['evict_us']:.2f} us, lock {x['lock_us']:.2f} us, tree {x['tree_s']:.3f} s"
                for x in r))
            continue
        c = run_tree_bench(build, P, args.quick, args.trace)
        b = best(lambda: bench_binding(radixkv, reqs, P), args.reps)
        s_np = best(lambda: bench_sglang(sg, reqs, P, False), args.reps)
        s_pa = best(lambda: bench_sglang(sg, reqs, P, False, True), args.reps)
        s_li = None if args.no_lists else best(lambda: bench_sglang(sg, reqs, P, True), args.reps)
        print(f"\npage {P}")
        print(f"  {'layer':36s} {'hit%':>7s} {'match_us':>9s} {'insert_us':>10s} "
              f"{'alloc/evict_us':>15s} {'tree_s':>8s}")
        rows = []
        if c:
            rows.append(("C API (tree_bench)", c, c["alloc_us"]))
        rows.append(("radixkv.Tree (ctypes)", b, b["alloc_us"]))
        rows.append(("radixkv.sglang, int32 array keys", s_np, s_np["evict_us"]))
        rows.append(("  the same over its PoolAllocator", s_pa, s_pa["evict_us"]))
        if s_li:
            rows.append(("radixkv.sglang, list keys", s_li, s_li["evict_us"]))
        for name, r, ev in rows:
            print(f"  {name:36s} {100 * r['hit']:6.2f}% {r['match_us']:9.2f} "
                  f"{r['insert_us']:10.2f} {ev:15.2f} {r['tree_s']:8.3f}")
        if c:
            print(f"  binding over C: match {b['match_us'] - c['match_us']:+.2f} us, "
                  f"insert {b['insert_us'] - c['insert_us']:+.2f} us per request")
        lo, hi = SGLANG[P][0], SGLANG[P][1]
        for name, r in (("array keys", s_np), ("array keys, PoolAllocator", s_pa),
                        ("list keys", s_li)):
            if r:
                print(f"  radixkv.sglang ({name}) whole-trace tree work {r['tree_s']:.3f} s "
                      f"(lock {r['lock_us']:.2f} us/request) vs SGLang RadixCache "
                      f"{lo}-{hi} s: {lo / r['tree_s']:.1f}-{hi / r['tree_s']:.1f}x"
                      + ("  (--quick: not comparable)" if args.quick else ""))


if __name__ == "__main__":
    main()
