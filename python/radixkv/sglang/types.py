"""Value types of the SGLang prefix-cache contract, usable without SGLang.

Owns: RadixKey (token ids + extra_key), the results of match / insert /
evict, and the KV event classes BlockStored, BlockRemoved,
AllBlocksCleared. When SGLang is importable, the event classes are
SGLang's own (so its event publisher serializes them) and so is the match
result; else the plain classes here, with the same field names.
"""
from dataclasses import dataclass
from typing import Any, List, Optional


class RadixKey:
    """A cache key: token ids and an extra_key (LoRA id, cache salt, ...).
    Keys with different extra_key values never share a cached prefix."""

    __slots__ = ("token_ids", "extra_key")

    def __init__(self, token_ids, extra_key=None):
        self.token_ids = token_ids
        self.extra_key = extra_key

    def __len__(self):
        return len(self.token_ids)

    def __iter__(self):
        return iter(self.token_ids)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return RadixKey(self.token_ids[idx], self.extra_key)
        return self.token_ids[idx]

    def __eq__(self, other):
        return (isinstance(other, RadixKey) and self.extra_key == other.extra_key
                and list(self.token_ids) == list(other.token_ids))

    def __repr__(self):
        ids = list(self.token_ids[:10])
        more = "..." if len(self.token_ids) > 10 else ""
        return f"RadixKey(extra_key={self.extra_key!r}, token_ids={ids}{more})"


@dataclass
class MatchResult:
    device_indices: Any
    last_device_node: Any
    last_host_node: Any
    host_hit_length: int = 0


@dataclass
class InsertResult:
    prefix_len: int


@dataclass
class EvictResult:
    num_tokens_evicted: int = 0


@dataclass
class BlockStored:
    block_hashes: List[int]
    parent_block_hash: Optional[int]
    token_ids: List[int]
    block_size: int
    lora_id: Optional[int] = None
    medium: Optional[str] = None


@dataclass
class BlockRemoved:
    block_hashes: List[int]
    medium: Optional[str] = None


@dataclass
class AllBlocksCleared:
    pass


def _sglang_attr(module, name):
    try:
        import importlib
        return getattr(importlib.import_module(module), name)
    except Exception:  # SGLang absent, or a version without it
        return None


_EV = "sglang.srt.disaggregation.kv_events"
BlockStored = _sglang_attr(_EV, "BlockStored") or BlockStored
BlockRemoved = _sglang_attr(_EV, "BlockRemoved") or BlockRemoved
AllBlocksCleared = _sglang_attr(_EV, "AllBlocksCleared") or AllBlocksCleared
MatchResult = (_sglang_attr("sglang.srt.mem_cache.base_prefix_cache", "MatchResult")
               or MatchResult)


def make_match_result(device_indices, node, host_hit_length=0, host_node=None):
    return MatchResult(device_indices=device_indices, last_device_node=node,
                       last_host_node=host_node if host_node is not None else node,
                       host_hit_length=host_hit_length)


def make_block_stored(hashes, parent, token_ids, block_size, lora_id=None):
    try:
        return BlockStored(block_hashes=hashes, parent_block_hash=parent, token_ids=token_ids,
                           block_size=block_size, lora_id=lora_id, medium=None)
    except TypeError:  # a version without `medium`
        return BlockStored(block_hashes=hashes, parent_block_hash=parent, token_ids=token_ids,
                           block_size=block_size, lora_id=lora_id)


def make_block_removed(hashes):
    try:
        return BlockRemoved(block_hashes=hashes, medium=None)
    except TypeError:
        return BlockRemoved(block_hashes=hashes)
