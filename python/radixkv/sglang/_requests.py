"""How a request's KV enters the cache: SGLang's cache_finished_req and
cache_unfinished_req over RadixKVCache's insert / match / locks.

Owns: the request protocol only (which KV slots are cached, which freed,
where the request's lock moves), as a mixin of RadixKVCache. Reads from a
request: req_pool_idx, origin_input_ids, output_ids, fill_ids,
prefix_indices, last_node, extra_key, and when present kv_committed_len and
cache_protected_len (newer SGLang). Invariant kept: after either call every
KV slot of the request is cached in the tree, freed through the allocator,
or (unfinished requests) still the request's own -- never two of these.
"""
import numpy as np

from . import types as T

try:
    import torch
except ImportError:
    torch = None


class RequestCaching:
    def _req_kv(self, req, n):
        return self.req_to_token_pool.req_to_token[req.req_pool_idx, :n]

    def _extra_key(self, req):
        return getattr(req, "extra_key", None)

    def cache_finished_req(self, req, is_insert=True, **kwargs):
        """A finished request: caches its computed tokens (the page-aligned
        part), frees the KV of its duplicate and unaligned tokens, releases
        its request slot and its lock."""
        all_ids = list(req.origin_input_ids) + list(req.output_ids)
        committed = getattr(req, "kv_committed_len", None)
        n = len(all_ids) - 1 if committed is None else committed
        n = max(n, 0)
        kv = self._req_kv(req, n)
        alloc = self.token_to_kv_pool_allocator
        if self.disable or not is_insert:
            if self.disable:
                alloc.free(kv)
            else:
                protected = getattr(req, "cache_protected_len", len(req.prefix_indices))
                alloc.free(kv[protected:])
            self.req_to_token_pool.free(req.req_pool_idx)
            self.dec_lock_ref(getattr(req, "last_node", None))
            return
        P = self.page_size
        aligned = n // P * P
        if aligned < n:
            alloc.free(kv[aligned:])
        new_prefix = self._insert(T.RadixKey(all_ids[:aligned], self._extra_key(req)),
                                  kv[:aligned])
        protected = getattr(req, "cache_protected_len", None)
        if protected is None:
            protected = len(req.prefix_indices)
        if new_prefix > protected:
            alloc.free(kv[protected:new_prefix])
        self.req_to_token_pool.free(req.req_pool_idx)
        self.dec_lock_ref(getattr(req, "last_node", None))

    def cache_unfinished_req(self, req, chunked=False, **kwargs):
        """A request still running (a prefill chunk done): caches its
        page-aligned tokens so far, frees the KV of duplicates, points the
        request at the cached slots and moves its lock to the new node."""
        if self.disable:
            return
        ids = list(req.fill_ids)
        n = len(ids)
        P = self.page_size
        aligned = n // P * P
        kv = self._req_kv(req, n)
        ekey = self._extra_key(req)
        new_prefix = self._insert(T.RadixKey(ids[:aligned], ekey), kv[:aligned])
        old = len(req.prefix_indices)
        if new_prefix > old:
            self.token_to_kv_pool_allocator.free(kv[old:new_prefix])
        res = self.match_prefix(T.RadixKey(ids[:aligned], ekey))
        new_idx, new_node = res.device_indices, res.last_device_node
        if len(new_idx) > old:
            self.req_to_token_pool.write((req.req_pool_idx, slice(old, len(new_idx))),
                                         new_idx[old:])
        self.dec_lock_ref(getattr(req, "last_node", None))
        self.inc_lock_ref(new_node)
        if P != 1 and torch is not None and isinstance(new_idx, torch.Tensor):
            req.prefix_indices = torch.cat([new_idx, kv[len(new_idx):].to(new_idx.device,
                                                                           torch.int64)])
        elif P != 1:
            req.prefix_indices = np.concatenate([np.asarray(new_idx),
                                                 self._to_numpy64(kv[len(new_idx):])])
        else:
            req.prefix_indices = new_idx
        if hasattr(req, "cache_protected_len"):
            req.cache_protected_len = len(new_idx)
        req.last_node = new_node
