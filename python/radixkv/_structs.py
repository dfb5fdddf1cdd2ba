"""ctypes mirrors of the structs in radixkv.h.

Owns: one ctypes.Structure per C struct the binding passes or reads, each
naming its C type in ``_c_name_``. Invariant: size and every field offset
equal the C compiler's (python/tests/check_struct_layout.py compiles a
program from this very module's declarations and compares; ctest
python_struct_layout). This module loads no library, so the check runs in
every build, sanitizer builds included.
"""
import ctypes as C

u8, u16, u32, u64 = C.c_uint8, C.c_uint16, C.c_uint32, C.c_uint64
i32, cint, size_t, dbl, flt = C.c_int32, C.c_int, C.c_size_t, C.c_double, C.c_float
ptr = C.c_void_p

MEDIUM_COUNT = 3
EVENT_MAX_HASHES = 16
STORE_MAC_KEY_BYTES = 32


class _S(C.Structure):
    _c_name_ = ""

    def __repr__(self):
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n, *_ in self._fields_)
        return f"{self._c_name_}({fields})"

    def to_dict(self):
        """Fields as a dict (arrays as lists, nested structs as dicts)."""
        out = {}
        for name, *_ in self._fields_:
            v = getattr(self, name)
            if isinstance(v, C.Array):
                v = list(v)
            elif isinstance(v, _S):
                v = v.to_dict()
            out[name] = v
        return out


class PoolConfig(_S):
    _c_name_ = "rkv_pool_config"
    _fields_ = [("num_blocks", u32), ("page_size", u32), ("num_layers", u32),
                ("num_kv_heads", u32), ("head_dim", u32), ("dtype", cint),
                ("device", cint), ("cuda_device", cint), ("layout", cint),
                ("kv_lora_rank", u32), ("qk_rope_dim", u32), ("quant_group", u32),
                ("act_dtype", cint)]


class KVBuffers(_S):
    _c_name_ = "rkv_kv_buffers"
    _fields_ = [("k", C.POINTER(ptr)), ("v", C.POINTER(ptr)),
                ("block_stride", size_t), ("token_stride", size_t),
                ("head_stride", size_t)]


class Node(_S):
    _c_name_ = "rkv_node"
    _fields_ = [("id", u32), ("gen", u32)]


class TreeConfig(_S):
    _c_name_ = "rkv_tree_config"
    _fields_ = [("initial_nodes", u32), ("use_jemalloc", cint),
                ("event_ring", u32), ("evict_policy", cint),
                ("max_pinned_pct", u32), ("event_tokens", u32),
                ("token_bytes", u32)]


class Match(_S):
    _c_name_ = "rkv_match"
    _fields_ = [("matched_tokens", size_t), ("num_blocks", u32), ("node", Node)]


class InsertResult(_S):
    _c_name_ = "rkv_insert_result"
    _fields_ = [("prefix_tokens", size_t), ("cached_tokens", size_t),
                ("new_pages", u32), ("num_dups", u32), ("node", Node)]


class Lease(_S):
    _c_name_ = "rkv_lease"
    _fields_ = [("id", u64)]


class Retention(_S):
    _c_name_ = "rkv_retention"
    _fields_ = [("priority", cint), ("prio_begin", size_t), ("prio_end", size_t),
                ("pin_tokens", size_t), ("ttl_ms", u64), ("owner", u64),
                ("session_end", cint), ("priority_duration_ms", u64)]


class RetainResult(_S):
    _c_name_ = "rkv_retain_result"
    _fields_ = [("prio_pages", u32), ("pinned_pages", u32),
                ("new_pinned_pages", u32)]


class RetentionStats(_S):
    _c_name_ = "rkv_retention_stats"
    _fields_ = [(n, u64) for n in (
        "pins", "pinned_blocks", "pin_cap_blocks", "now_ms", "pins_made",
        "pins_renewed", "pins_expired", "pins_released", "pins_revoked",
        "pins_refused", "pins_demoted", "pins_lowered")] + [
        ("pinned_by_medium", u64 * MEDIUM_COUNT),
        ("pin_cap_by_medium", u64 * MEDIUM_COUNT),
        ("pinned_lowered_on_device", u64), ("prio_reverted", u64)]


class Event(_S):
    _c_name_ = "rkv_event"
    _fields_ = [("seq", u64), ("kind", u8), ("medium", u8), ("num_hashes", u16),
                ("page_size", u32), ("ns", u64), ("parent_hash", u64),
                ("lost", u64), ("hashes", u64 * EVENT_MAX_HASHES)]


class BlockEntry(_S):
    _c_name_ = "rkv_block_entry"
    _fields_ = [("ns", u64), ("hash", u64), ("parent_hash", u64),
                ("medium", u32), ("reserved", u32)]


class SnapshotCursor(_S):
    _c_name_ = "rkv_snapshot_cursor"
    _fields_ = [("seq", u64), ("total", u64), ("done", u64), ("root", u32),
                ("node", u32), ("node_gen", u32), ("page", u32), ("state", u32),
                ("reserved", u32)]


class TreeStats(_S):
    _c_name_ = "rkv_tree_stats"
    _fields_ = [(n, u64) for n in (
        "cached_blocks", "evictable_blocks", "locked_blocks", "nodes",
        "namespaces", "queried_tokens", "hit_tokens", "inserted_pages",
        "evicted_blocks", "evicted_nodes", "splits", "lru_reorder_steps",
        "host_bytes", "guard_lru_hit_tokens", "guard_fallbacks")] + [
        ("guard_on_lru", u32)]


class NodeInfo(_S):
    _c_name_ = "rkv_node_info"
    _fields_ = [("parent", Node), ("ns", u64), ("depth_tokens", size_t),
                ("num_pages", u32), ("num_children", u32), ("lock_count", u32),
                ("last_access", u64), ("children_epoch", u64)]


class StoreConfig(_S):
    _c_name_ = "rkv_store_config"
    _fields_ = [("medium", cint), ("capacity_blocks", u64),
                ("capacity_bytes", u64), ("block_bytes", size_t),
                ("path", C.c_char_p), ("pinned", cint), ("direct_io", cint),
                ("io_uring", cint), ("mac_key", C.c_char_p),
                ("warm_restart", cint), ("page_tokens", u32),
                ("layout_id", u64), ("model_id", u64)]


class StoreInfo(_S):
    _c_name_ = "rkv_store_info"
    _fields_ = [("medium", cint), ("capacity_blocks", u64), ("used_blocks", u64),
                ("block_bytes", size_t), ("pinned", cint), ("direct_io", cint),
                ("io_uring", cint), ("path", C.c_char_p), ("file_bytes", u64),
                ("file_origin", cint), ("keyed", cint),
                ("reads", u64), ("writes", u64), ("warm_records", u64),
                ("warm_skipped", u64), ("warm_dropped", u64)]


class TierConfig(_S):
    _c_name_ = "rkv_tier_config"
    _fields_ = [("host", ptr), ("disk", ptr), ("write_policy", cint),
                ("selective_hits", u32), ("store_queue", u32),
                ("drop_pinned", cint)]


class TierMatch(_S):
    _c_name_ = "rkv_tier_match"
    _fields_ = [("host_tokens", size_t), ("disk_tokens", size_t),
                ("lower_tokens", size_t), ("loading_ticket", u64),
                ("loading_tokens", size_t)]


class Load(_S):
    _c_name_ = "rkv_load"
    _fields_ = [("ticket", u64), ("num_pages", u32), ("disk_pages", u32),
                ("device_tokens", size_t), ("lease", Lease)]


class TransferDone(_S):
    _c_name_ = "rkv_transfer_done"
    _fields_ = [("ticket", u64), ("kind", cint), ("status", cint),
                ("num_pages", u32)]


class TierStats(_S):
    _c_name_ = "rkv_tier_stats"
    _fields_ = [("resident_pages", u64 * MEDIUM_COUNT),
                ("hit_tokens", u64 * MEDIUM_COUNT),
                ("loads_blocks", u64 * MEDIUM_COUNT),
                ("loads_bytes", u64 * MEDIUM_COUNT),
                ("stores_blocks", u64 * MEDIUM_COUNT),
                ("stores_bytes", u64 * MEDIUM_COUNT),
                ("failed_loads", u64), ("failed_stores", u64),
                ("stores_skipped", u64), ("evictions", u64 * MEDIUM_COUNT),
                ("corrupt_blocks", u64), ("pending_stores", u64),
                ("pending_loads", u64)]


class StoreRecord(_S):
    _c_name_ = "rkv_store_record"
    _fields_ = [("hash", u64), ("block", u32), ("from_", u8), ("medium", u8),
                ("queued", u8), ("reserved", u8)]
    # `from` is a Python keyword: the field is from_ here.
    _c_field_names_ = {"from_": "from"}


class StoreLog(_S):
    _c_name_ = "rkv_store_log"
    _fields_ = [("records", C.POINTER(StoreRecord)), ("num_records", u32),
                ("lost", u64 * MEDIUM_COUNT)]


class SchedConfig(_S):
    _c_name_ = "rkv_sched_config"
    _fields_ = [("policy", cint), ("max_batch_tokens", u32),
                ("max_running", u32), ("dedup_min_tokens", u32),
                ("max_wait_ms", dbl), ("aging_per_s", dbl), ("use_tiers", cint),
                ("swap", cint), ("compute_ms_per_token", dbl),
                ("host_load_ms_per_page", dbl), ("disk_load_ms_per_page", dbl),
                ("prefetch", cint), ("prefetch_timeout_ms", dbl)]


class RequestDesc(_S):
    _c_name_ = "rkv_request_desc"
    _fields_ = [("id", u64), ("ns", u64), ("prompt", C.POINTER(i32)),
                ("prompt_len", u32), ("max_new_tokens", u32), ("priority", i32),
                ("arrival_ms", dbl), ("retention", C.POINTER(Retention))]


class PlanCopy(_S):
    _c_name_ = "rkv_plan_copy"
    _fields_ = [("req_id", u64), ("ticket", u64), ("kind", cint), ("medium", cint),
                ("pages", u32), ("done", cint)]


class BatchPlan(_S):
    _c_name_ = "rkv_batch_plan"
    _fields_ = [("num_reqs", u32), ("num_prefill", u32), ("num_tokens", u32),
                ("req_ids", C.POINTER(u64)), ("qo_indptr", C.POINTER(u32)),
                ("prefix_len", C.POINTER(u32)), ("cached_len", C.POINTER(u32)),
                ("kv_indptr", C.POINTER(u32)), ("kv_indices", C.POINTER(u32)),
                ("kv_last_page_len", C.POINTER(u32)), ("slots", C.POINTER(u32)),
                ("input_tokens", C.POINTER(i32)), ("emits_token", C.POINTER(u8)),
                ("num_copies", u32), ("copies", C.POINTER(PlanCopy)),
                ("copy_indptr", C.POINTER(u32)), ("copy_blocks", C.POINTER(u32))]


class RequestInfo(_S):
    _c_name_ = "rkv_request_info"
    _fields_ = [("id", u64), ("state", cint), ("finish", cint)] + [
        (n, u32) for n in ("prompt_len", "max_new_tokens", "generated_tokens",
                           "cached_tokens", "kv_tokens", "preemptions",
                           "cached_host_tokens", "cached_disk_tokens")] + [
        ("loading", cint)]


class SchedStats(_S):
    _c_name_ = "rkv_sched_stats"
    _fields_ = [(n, u64) for n in (
        "waiting", "running", "finished", "aborted", "preemptions", "steps",
        "prompt_tokens", "cached_tokens", "computed_tokens", "dedup_holds",
        "peak_blocks_used", "retains", "pins_refused", "retain_failed",
        "sessions_ended")] + [
        ("cached_tokens_by_medium", u64 * MEDIUM_COUNT)] + [(n, u64) for n in (
            "loading", "loads", "load_pages", "load_disk_pages", "failed_loads",
            "swap_outs", "swap_out_pages", "swap_ins", "swap_in_pages",
            "loads_released", "load_waits", "prefetches", "prefetch_pages",
            "prefetch_waits", "prefetch_late_pages")]


class AttnParams(_S):
    _c_name_ = "rkv_attn_params"
    _fields_ = [("layer", u32), ("num_qo_heads", u32), ("sm_scale", flt),
                ("window_left", u32), ("num_sink_tokens", u32)]


class PagedKV(_S):
    _c_name_ = "rkv_paged_kv"
    _fields_ = [("num_reqs", u32), ("indptr", C.POINTER(u32)),
                ("indices", C.POINTER(u32)), ("last_page_len", C.POINTER(u32))]


def all_structs():
    """Every struct this module declares (what the layout check covers)."""
    return [v for v in globals().values()
            if isinstance(v, type) and issubclass(v, _S) and v is not _S]
