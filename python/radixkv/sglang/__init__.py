"""radixkv.sglang: an SGLang prefix-cache backend over radixkv's C tree.

Exports RadixKVCache (SGLang's BasePrefixCache contract, classic RadixCache
API and the parameter-object forms), RadixKey, the KV event classes
BlockStored / BlockRemoved / AllBlocksCleared, create_simulated() and the
simulated pools. Works without SGLang installed. With SGLang, ``register()``
(called by SGLang's plugin loader through the entry point group
``sglang.srt.plugins``) registers the backend as "radixkv", so
``--radix-cache-backend radixkv`` selects it.
"""
import importlib

from ._hostier import LoadTicket
from ._pool_alloc import PoolAllocator
from .cache import RadixKVCache, RadixKVNode
from .simulated import SimulatedAllocator, SimulatedReqToTokenPool, create_simulated
from .types import (AllBlocksCleared, BlockRemoved, BlockStored, EvictResult,
                    InsertResult, MatchResult, RadixKey)

BACKEND_NAME = "radixkv"

# Where SGLang versions keep register_radix_cache_backend, most recent first.
_REGISTRY_MODULES = (
    "sglang.srt.mem_cache.registry",
    "sglang.srt.mem_cache.radix_cache_registry",
    "sglang.srt.mem_cache.cache_registry",
    "sglang.srt.mem_cache",
    "sglang.srt.plugins",
)


def _find_register():
    for name in _REGISTRY_MODULES:
        try:
            mod = importlib.import_module(name)
        except Exception:
            continue
        fn = getattr(mod, "register_radix_cache_backend", None)
        if fn is not None:
            return fn
    return None


def register():
    """Registers RadixKVCache with SGLang as the radix cache backend
    "radixkv". Returns True when registered, False when SGLang (or its
    backend registry) is not importable. Safe to call more than once."""
    fn = _find_register()
    if fn is None:
        return False
    fn(BACKEND_NAME, RadixKVCache)
    return True


__all__ = ["RadixKVCache", "RadixKVNode", "RadixKey", "BlockStored", "BlockRemoved",
           "AllBlocksCleared", "MatchResult", "InsertResult", "EvictResult",
           "create_simulated", "SimulatedAllocator", "SimulatedReqToTokenPool",
           "register", "BACKEND_NAME", "PoolAllocator", "LoadTicket"]
