"""radixkv.Scheduler: the cache-aware scheduler over a Tree (sched/ in C).

Owns: one rkv_sched handle (it keeps its Tree alive) and BatchPlan, an
owned copy of a C rkv_batch_plan (the C plan is valid only until the next
step or commit; the copy has no such limit).
"""
import ctypes as C
from dataclasses import dataclass
from typing import Any

from . import _arrays
from . import _structs as S
from ._ffi import check, lib
from ._owned import Owned
from .tokens import as_tokens

POLICIES = {"fcfs": 0, "lpm": 1, "dfs": 2, "priority": 3, "bounded": 4}
REQ_STATES = {0: "waiting", 1: "running", 2: "finished"}
FINISH_REASONS = {0: None, 1: "stop", 2: "length", 3: "abort"}


@dataclass
class BatchPlan:
    """One step's work: request r's new tokens are rows
    qo_indptr[r]..qo_indptr[r+1] (input_tokens, KV written at slots); its
    block table is kv_indices[kv_indptr[r]..kv_indptr[r+1]) with
    kv_last_page_len[r] tokens in the last page."""
    num_reqs: int
    num_prefill: int
    num_tokens: int
    req_ids: Any
    qo_indptr: Any
    prefix_len: Any
    cached_len: Any
    kv_indptr: Any
    kv_indices: Any
    kv_last_page_len: Any
    slots: Any
    input_tokens: Any
    emits_token: Any
    copies: list

    @classmethod
    def _from_c(cls, p):
        r, t = p.num_reqs, p.num_tokens
        cp = _arrays.copy_from
        kv_ind = cp(p.kv_indptr, "u32", r + 1)
        copies = [p.copies[i].to_dict() for i in range(p.num_copies)]
        if p.num_copies and p.copy_indptr:
            ind = cp(p.copy_indptr, "u32", p.num_copies + 1)
            blocks = cp(p.copy_blocks, "u32", int(ind[-1]))
            for i, c in enumerate(copies):
                c["blocks"] = blocks[int(ind[i]):int(ind[i + 1])]
        return cls(r, p.num_prefill, t, cp(p.req_ids, "u64", r), cp(p.qo_indptr, "u32", r + 1),
                   cp(p.prefix_len, "u32", r), cp(p.cached_len, "u32", r), kv_ind,
                   cp(p.kv_indices, "u32", int(kv_ind[-1]) if r else 0),
                   cp(p.kv_last_page_len, "u32", r), cp(p.slots, "u32", t),
                   cp(p.input_tokens, "i32", t), cp(p.emits_token, "u8", r), copies)


class Scheduler(Owned):
    """Admits, batches and preempts requests over ``tree``. Keyword
    arguments set rkv_sched_config fields (policy by name: "fcfs", "lpm",
    "dfs", "priority", "bounded")."""

    def __init__(self, tree, policy="fcfs", **config):
        cfg = S.SchedConfig()
        lib.rkv_sched_config_init(C.byref(cfg))
        cfg.policy = POLICIES[policy] if isinstance(policy, str) else int(policy)
        for k, v in config.items():
            if not hasattr(cfg, k):
                raise TypeError(f"Scheduler: unknown config field {k!r}")
            setattr(cfg, k, v)
        h = C.c_void_p()
        check(lib.rkv_sched_create(tree.handle, C.byref(cfg), C.byref(h)), "rkv_sched_create")
        self._h = h.value
        self.tree = tree
        tree.pool._users.add(self)

    _kind = "Scheduler"

    def _destroy(self, h):
        """Destroys the scheduler (aborting what still runs)."""
        lib.rkv_sched_destroy(h)

    def submit(self, req_id, prompt, max_new_tokens, namespace=0, priority=0,
               arrival_ms=0.0, retention=None):
        """Queues a request (the prompt is copied)."""
        addr, n, keep = as_tokens(prompt)
        d = S.RequestDesc()
        d.id, d.ns, d.prompt_len, d.max_new_tokens = req_id, namespace, n, max_new_tokens
        d.prompt = C.cast(addr, C.POINTER(C.c_int32))
        d.priority, d.arrival_ms = priority, arrival_ms
        r = retention._c() if retention is not None else None
        if r is not None:
            d.retention = C.pointer(r)
        check(lib.rkv_sched_submit(self.handle, C.byref(d)), "rkv_sched_submit")
        del keep

    def step(self, now_ms):
        """Plans the next step; a BatchPlan, or None when nothing can run."""
        p = C.POINTER(S.BatchPlan)()
        check(lib.rkv_sched_step(self.handle, now_ms, C.byref(p)), "rkv_sched_step")
        plan = BatchPlan._from_c(p.contents)
        return plan if plan.num_reqs or plan.copies else None

    def commit(self, next_tokens, finished=None, now_ms=0.0):
        """Reports a step's sampled tokens (one per plan request) and which
        requests stopped."""
        addr, n, keep = as_tokens(next_tokens)
        faddr, fkeep = 0, None
        if finished is not None:
            fkeep, faddr = _arrays.new("u8", len(finished))
            for i, f in enumerate(finished):
                fkeep[i] = 1 if f else 0
        check(lib.rkv_sched_commit(self.handle, addr, faddr or None, now_ms),
              "rkv_sched_commit")
        del keep, fkeep

    def abort(self, req_id):
        check(lib.rkv_sched_abort(self.handle, req_id), "rkv_sched_abort")

    def request_info(self, req_id):
        """A dict with state ("waiting", "running", "finished"), finish
        reason and token counts (NotFoundError for an unknown id)."""
        out = self._out("rkv_sched_request_info", S.RequestInfo, req_id)
        d = out.to_dict()
        d["state"] = REQ_STATES.get(out.state, out.state)
        d["finish"] = FINISH_REASONS.get(out.finish, out.finish)
        return d

    def stats(self):
        return self._query("rkv_sched_get_stats", S.SchedStats)

    def check(self):
        self._check("rkv_sched_check")
