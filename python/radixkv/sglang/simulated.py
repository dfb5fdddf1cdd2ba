"""Stand-ins for SGLang's two memory pools, for tests and benchmarks run
without SGLang (and without a GPU).

Owns: SimulatedAllocator (KV slots handed out a page at a time, like
SGLang's paged token-to-KV allocator: alloc / free / available_size /
size / device) and SimulatedReqToTokenPool (the request -> KV slot table:
req_to_token, alloc / free / write), and create_simulated(). Both check
their own use: freeing a slot that is not allocated raises ValueError, so
a cache that frees a value twice is caught.
"""
import numpy as np

try:
    import torch
except ImportError:
    torch = None


def _as_np(x):
    if torch is not None and isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy().astype(np.int64, copy=False)
    return np.asarray(x, dtype=np.int64).reshape(-1)


class SimulatedAllocator:
    """``size`` KV slots in pages of ``page_size`` (slot 0 .. size-1)."""

    def __init__(self, size, page_size=1, device="cpu"):
        self.size = size
        self.page_size = page_size
        self.device = device
        self._free_pages = list(range(size // page_size - 1, -1, -1))
        self._used = np.zeros(size, dtype=bool)
        self.freed_log = []  # every free() call's values, in order

    def available_size(self):
        return len(self._free_pages) * self.page_size

    def alloc(self, need_size):
        """need_size slots (whole pages: need_size is rounded up), or None."""
        P = self.page_size
        pages = (need_size + P - 1) // P
        if pages > len(self._free_pages):
            return None
        got = [self._free_pages.pop() for _ in range(pages)]
        slots = (np.asarray(got, dtype=np.int64)[:, None] * P
                 + np.arange(P, dtype=np.int64)[None, :]).reshape(-1)[:need_size]
        self._used[slots] = True
        return torch.from_numpy(slots) if torch is not None else slots

    def free(self, free_index):
        vals = _as_np(free_index)
        if vals.size == 0:
            return
        if not self._used[vals].all() or len(np.unique(vals)) != len(vals):
            raise ValueError("SimulatedAllocator.free: a slot is not allocated "
                             "(freed twice?)")
        self._used[vals] = False
        self.freed_log.append(vals.copy())
        P = self.page_size
        pages = np.unique(vals // P)
        for p in pages.tolist():
            if not self._used[p * P:(p + 1) * P].any():
                self._free_pages.append(p)

    def clear(self):
        self.__init__(self.size, self.page_size, self.device)


class SimulatedReqToTokenPool:
    """``size`` request slots of ``max_context_len`` KV slots each."""

    def __init__(self, size, max_context_len):
        self.size = size
        self.max_context_len = max_context_len
        if torch is not None:
            self.req_to_token = torch.zeros((size, max_context_len), dtype=torch.int32)
        else:
            self.req_to_token = np.zeros((size, max_context_len), dtype=np.int32)
        self._free = list(range(size - 1, -1, -1))

    def available_size(self):
        return len(self._free)

    def alloc(self, need_size=1):
        if need_size > len(self._free):
            return None
        return [self._free.pop() for _ in range(need_size)]

    def free(self, idx):
        for i in ([idx] if isinstance(idx, int) else list(idx)):
            if i in self._free:
                raise ValueError(f"SimulatedReqToTokenPool.free: slot {i} is free")
            self._free.append(i)

    def write(self, indices, values):
        self.req_to_token[indices] = values

    def clear(self):
        self._free = list(range(self.size - 1, -1, -1))


def create_simulated(page_size=1, num_tokens=1 << 16, max_reqs=64, max_context_len=4096,
                     disable=False, enable_kv_cache_events=False, **kwargs):
    """A RadixKVCache over a SimulatedAllocator of num_tokens KV slots and a
    SimulatedReqToTokenPool (both reachable from the cache's attributes)."""
    from .cache import RadixKVCache
    alloc = SimulatedAllocator(num_tokens, page_size)
    reqs = SimulatedReqToTokenPool(max_reqs, max_context_len)
    return RadixKVCache(reqs, alloc, page_size, disable=disable,
                        enable_kv_cache_events=enable_kv_cache_events, **kwargs)
