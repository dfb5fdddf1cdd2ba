"""Finds and loads libradixkv and declares the C functions the binding calls.

Owns: the one ctypes.CDLL of the process, every prototype (argtypes and
restype, so ctypes converts and checks arguments), and ``check()``, which
turns a failing rkv_status into a radixkv.Error carrying rkv_last_error().

Where the library is looked for, first found wins:
  1. $RADIXKV_LIBRARY (a path to libradixkv.so*);
  2. the path recorded at install (``_install_paths.py``, written by
     ``cmake --install``: the library installed beside this package);
  3. the dynamic loader's search path (libradixkv.so.0, then libradixkv.so).
"""
import ctypes as C
import os

from . import _structs as S
from .errors import Error, error_for

P = C.POINTER
vp, sz, u32, u64, i32, cint = C.c_void_p, C.c_size_t, C.c_uint32, C.c_uint64, C.c_int32, C.c_int
ST = C.c_int  # rkv_status


def _candidates():
    env = os.environ.get("RADIXKV_LIBRARY")
    if env:
        yield env
    try:
        from . import _install_paths  # written by cmake --install
        here = os.path.dirname(os.path.abspath(__file__))
        yield os.path.normpath(os.path.join(here, _install_paths.LIBRARY))
    except ImportError:
        pass
    yield "libradixkv.so.0"
    yield "libradixkv.so"


def _load():
    tried = []
    for path in _candidates():
        try:
            return C.CDLL(path), path
        except OSError as e:
            tried.append(f"{path}: {e}")
            if path == os.environ.get("RADIXKV_LIBRARY"):
                break  # an explicit path that fails is an error, not a hint
    raise ImportError("radixkv: cannot load libradixkv (set RADIXKV_LIBRARY to "
                      "its path); tried:\n  " + "\n  ".join(tried))


lib, library_path = _load()

# name: (restype, argtypes). Pointers to caller buffers are c_void_p so a
# numpy / torch / array address (an int) passes without conversion.
_PROTOS = {
    "rkv_version": (C.c_char_p, []),
    "rkv_strerror": (C.c_char_p, [ST]),
    "rkv_last_error": (C.c_char_p, []),
    # pool
    "rkv_pool_config_init": (None, [P(S.PoolConfig)]),
    "rkv_pool_create": (ST, [P(S.PoolConfig), P(vp)]),
    "rkv_pool_create_external": (ST, [P(S.PoolConfig), P(S.KVBuffers), P(vp)]),
    "rkv_pool_kv_strides": (ST, [vp, P(sz), P(sz), P(sz)]),
    "rkv_pool_kv_external": (cint, [vp]),
    "rkv_pool_layout_id": (u64, [vp]),
    "rkv_pool_destroy": (None, [vp]),
    "rkv_pool_get_config": (ST, [vp, P(S.PoolConfig)]),
    "rkv_pool_num_blocks": (u32, [vp]),
    "rkv_pool_num_free": (u32, [vp]),
    "rkv_pool_page_size": (u32, [vp]),
    "rkv_pool_bytes_per_block": (sz, [vp]),
    "rkv_pool_host_metadata_bytes": (sz, [vp]),
    "rkv_pool_layer_kv": (ST, [vp, u32, P(vp), P(vp)]),
    "rkv_pool_alloc": (ST, [vp, P(u32)]),
    "rkv_pool_alloc_n": (ST, [vp, u32, vp]),
    "rkv_pool_ref": (ST, [vp, u32]),
    "rkv_pool_unref": (ST, [vp, u32]),
    "rkv_pool_unref_n": (ST, [vp, u32, vp]),
    "rkv_pool_refcount": (u32, [vp, u32]),
    "rkv_block_hash": (u64, [u64, u64, vp, u32]),
    "rkv_pool_block_hash": (u64, [vp, u32]),
    "rkv_pool_copy_to_host": (ST, [vp, u32, vp, vp]),
    "rkv_pool_copy_from_host": (ST, [vp, u32, vp, vp]),
    "rkv_pool_check": (ST, [vp]),
    # tree
    "rkv_evict_policy_from_name": (ST, [C.c_char_p, P(cint)]),
    "rkv_evict_policy_name": (C.c_char_p, [cint]),
    "rkv_tree_config_init": (None, [P(S.TreeConfig)]),
    "rkv_tree_create": (ST, [vp, P(S.TreeConfig), P(vp)]),
    "rkv_tree_destroy": (None, [vp]),
    "rkv_tree_match": (ST, [vp, u64, vp, sz, vp, C.c_uint, P(S.Match)]),
    "rkv_tree_match_from": (ST, [vp, S.Node, sz, vp, sz, vp, P(S.Match)]),
    "rkv_tree_insert": (ST, [vp, u64, vp, sz, vp, vp, P(S.InsertResult)]),
    "rkv_tree_lock": (ST, [vp, S.Node, P(S.Lease)]),
    "rkv_tree_unlock": (ST, [vp, P(S.Lease)]),
    "rkv_tree_evict": (ST, [vp, u32, P(u32)]),
    "rkv_tree_evict_ids": (ST, [vp, u32, vp, u32, P(u32)]),
    "rkv_tree_alloc_blocks": (ST, [vp, u32, vp]),
    "rkv_tree_lock_counted": (ST, [vp, S.Node, P(S.Lease), P(u64)]),
    "rkv_tree_unlock_counted": (ST, [vp, P(S.Lease), P(u64)]),
    "rkv_slot_table_create": (ST, [vp, C.c_uint, P(vp)]),
    "rkv_slot_table_destroy": (None, [vp]),
    "rkv_slot_table_set": (ST, [vp, u32, vp, vp]),
    "rkv_slot_table_drop": (ST, [vp, u32, vp]),
    "rkv_slot_table_clear": (None, [vp]),
    "rkv_slot_table_count": (u64, [vp]),
    "rkv_slot_table_blocks": (ST, [vp, vp, u64, P(u64)]),
    "rkv_slot_table_gather": (ST, [vp, u32, vp, vp]),
    "rkv_tree_match_slots": (ST, [vp, vp, u64, vp, sz, C.c_uint, vp, P(S.Match)]),
    "rkv_tree_insert_slots": (ST, [vp, vp, u64, vp, sz, vp, P(S.InsertResult)]),
    "rkv_tree_evict_slots": (ST, [vp, vp, u32, vp, sz, P(u32), P(sz)]),
    "rkv_retention_init": (None, [P(S.Retention)]),
    "rkv_tree_retain": (ST, [vp, u64, vp, sz, P(S.Retention), u64, P(S.RetainResult)]),
    "rkv_tree_set_time": (ST, [vp, u64]),
    "rkv_tree_set_namespace_ttl": (ST, [vp, u64, u64]),
    "rkv_tree_namespace_ttl": (ST, [vp, u64, P(u64)]),
    "rkv_tree_session_end": (ST, [vp, u64, vp, sz, u64, P(u32)]),
    "rkv_tree_tier_flush": (ST, [vp]),
    "rkv_tree_pins_extend": (ST, [vp, u64, u64, u64, P(u32)]),
    "rkv_tree_pins_release": (ST, [vp, u64, P(u32)]),
    "rkv_tree_pins_yieldable": (ST, [vp, P(u64)]),
    "rkv_tree_retention_stats": (ST, [vp, P(S.RetentionStats)]),
    "rkv_tree_node_priority": (ST, [vp, S.Node, P(cint)]),
    "rkv_tree_reset": (ST, [vp]),
    "rkv_tree_events_drain": (ST, [vp, vp, u32, P(u32)]),
    "rkv_tree_events_drain_tokens": (ST, [vp, vp, u32, vp, sz, P(u32), P(sz)]),
    "rkv_tree_snapshot": (ST, [vp, vp, sz, P(sz), P(u64)]),
    "rkv_tree_get_stats": (ST, [vp, P(S.TreeStats)]),
    "rkv_tree_node_info": (ST, [vp, S.Node, P(S.NodeInfo)]),
    "rkv_tree_check": (ST, [vp]),
    # tiers
    "rkv_store_config_init": (None, [P(S.StoreConfig), cint]),
    "rkv_store_create": (ST, [P(S.StoreConfig), P(vp)]),
    "rkv_store_destroy": (None, [vp]),
    "rkv_store_capacity_blocks": (u64, [vp]),
    "rkv_store_used_blocks": (u64, [vp]),
    "rkv_store_check": (ST, [vp]),
    "rkv_store_get_info": (ST, [vp, P(S.StoreInfo)]),
    "rkv_tier_config_init": (None, [P(S.TierConfig)]),
    "rkv_tree_attach_tiers": (ST, [vp, P(S.TierConfig)]),
    "rkv_tree_match_tiers": (ST, [vp, u64, vp, sz, vp, C.c_uint, P(S.Match),
                                  P(S.TierMatch)]),
    "rkv_tree_load": (ST, [vp, u64, vp, sz, u32, vp, P(S.Load)]),
    "rkv_tree_store_prefix": (ST, [vp, u64, vp, sz, vp, P(u64), P(u32)]),
    "rkv_tree_tier_poll": (ST, [vp, P(S.TransferDone), u32, P(u32)]),
    "rkv_tree_tier_stats": (ST, [vp, P(S.TierStats)]),
    # scheduler
    "rkv_policy_from_name": (ST, [C.c_char_p, P(cint)]),
    "rkv_policy_name": (C.c_char_p, [cint]),
    "rkv_sched_config_init": (None, [P(S.SchedConfig)]),
    "rkv_sched_create": (ST, [vp, P(S.SchedConfig), P(vp)]),
    "rkv_sched_destroy": (None, [vp]),
    "rkv_sched_submit": (ST, [vp, P(S.RequestDesc)]),
    "rkv_sched_step": (ST, [vp, C.c_double, P(P(S.BatchPlan))]),
    "rkv_sched_commit": (ST, [vp, vp, vp, C.c_double]),
    "rkv_sched_abort": (ST, [vp, u64]),
    "rkv_sched_request_info": (ST, [vp, u64, P(S.RequestInfo)]),
    "rkv_sched_get_stats": (ST, [vp, P(S.SchedStats)]),
    "rkv_sched_check": (ST, [vp]),
}

for _name, (_res, _args) in _PROTOS.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args

_last_error = lib.rkv_last_error

# The *_config_init functions write the whole C struct (memset or every
# field). Run each into a buffer longer than the ctypes mirror, filled with
# a pattern: a byte changed past the mirror's end means the library's
# struct is larger than this binding declares -- every later call would
# read and write past Python's buffers (a crash, or silently wrong
# options), so refuse to load instead.
_GUARD = 0xA5
_GUARD_SLACK = 256


def _check_struct_sizes(pairs):
    """pairs: (ctypes struct, init(address)). Raises ImportError naming the
    first struct the library writes beyond."""
    for struct, init in pairs:
        n = C.sizeof(struct)
        buf = (C.c_uint8 * (n + _GUARD_SLACK))(*([_GUARD] * (n + _GUARD_SLACK)))
        init(C.addressof(buf))
        tail = bytes(buf[n:])
        if tail != bytes([_GUARD]) * _GUARD_SLACK:
            last = max(i for i, b in enumerate(tail) if b != _GUARD)
            raise ImportError(
                f"radixkv: {library_path} writes at least {n + last + 1} bytes "
                f"into {struct._c_name_}, this binding declares {n}: the "
                f"binding (radixkv/_structs.py) does not match the library")


def _init_pairs():
    def cast(f, t):
        return lambda a: f(C.cast(a, P(t)))
    return [
        (S.PoolConfig, cast(lib.rkv_pool_config_init, S.PoolConfig)),
        (S.TreeConfig, cast(lib.rkv_tree_config_init, S.TreeConfig)),
        (S.StoreConfig, lambda a: lib.rkv_store_config_init(
            C.cast(a, P(S.StoreConfig)), 2)),  # RKV_MEDIUM_DISK
        (S.TierConfig, cast(lib.rkv_tier_config_init, S.TierConfig)),
        (S.SchedConfig, cast(lib.rkv_sched_config_init, S.SchedConfig)),
        (S.SnapshotCursor, cast(lib.rkv_snapshot_cursor_init, S.SnapshotCursor)),
    ]


_check_struct_sizes(_init_pairs())


def check(status, function):
    """Raise the radixkv.Error subclass for a failing status (0 passes)."""
    if status:
        raise error_for(status, function, _last_error().decode("utf-8", "replace"))


def version():
    return lib.rkv_version().decode()


__all__ = ["lib", "library_path", "check", "version", "Error"]
