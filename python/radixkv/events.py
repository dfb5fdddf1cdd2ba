"""KV events of a tree (rkv_tree_events_drain, and _tokens) as Python values.

Owns: EventKind, Medium and the immutable Event record built from a C
rkv_event. Event semantics (sequence numbers, RESYNC on overflow, chain
order of hashes) are the C API's: see include/radixkv.h, "KV events".
"""
import enum
from dataclasses import dataclass


class EventKind(enum.IntEnum):
    BLOCK_STORED = 1
    BLOCK_REMOVED = 2
    ALL_CLEARED = 3
    RESYNC = 4


class Medium(enum.IntEnum):
    DEVICE = 0
    HOST = 1
    DISK = 2


@dataclass(frozen=True)
class Event:
    """One KV event. hashes: the pages' chained block hashes (chain order
    for BLOCK_STORED, order dropped for BLOCK_REMOVED); parent_hash: the
    hash before hashes[0] (BLOCK_STORED); lost: events dropped (RESYNC)."""
    seq: int
    kind: EventKind
    medium: Medium
    page_size: int
    namespace: int
    parent_hash: int
    lost: int
    hashes: tuple
    # BLOCK_STORED drained with tokens=True: the pages' token ids,
    # len(hashes) * page_size of them (page i's at [i * page_size, ...));
    # else None
    tokens: tuple = None

    @classmethod
    def _from_c(cls, e, tokens=None):
        return cls(e.seq, EventKind(e.kind), Medium(e.medium), e.page_size, e.ns,
                   e.parent_hash, e.lost, tuple(e.hashes[:e.num_hashes]), tokens)
