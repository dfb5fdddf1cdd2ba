/*
 * radixkv.h -- the umbrella header of radixkv, a prefix-cache engine for
 * LLM serving: a paged KV block pool (alloc/), a token radix tree over it
 * (radix/), host and disk tiers (tier/), a cache-aware scheduler (sched/),
 * paged attention (attention/) and the fleet router's index (router/).
 * It includes one header per module (in include/radixkv/, none over 600
 * lines); each of those can be included alone, and this one is all of them.
 *
 * Conventions every function follows:
 *   - Handles are opaque; names are rkv_<noun>_<verb>().
 *   - Every call that can fail returns rkv_status. On failure nothing the call
 *     was given is changed: the pool, tree and scheduler are exactly as before.
 *     rkv_last_error() returns a sentence naming what was wrong (thread-local).
 *   - The library never aborts, never prints, and never calls exit().
 *   - Threads: an object is not thread-safe. Use each pool, tree, scheduler
 *     and attention context from one thread at a time, counting what it
 *     uses (a tree uses its pool, a scheduler its tree and pool): one
 *     thread per object group, or a lock of your own around it. Separate
 *     groups are safe on separate threads (the library keeps no shared
 *     mutable state). rkv_last_error() is per thread.
 *   - Locks on tree paths are owned (rkv_lease, see rkv_tree_lock): only
 *     the lease that took a lock releases it.
 *   - Tokens are int32 ids (negative ids are invalid). Block ids are uint32.
 */
#ifndef RADIXKV_H
#define RADIXKV_H

/* One header per module; each can be included alone. */
#include "radixkv/status.h"
#include "radixkv/pool.h"
#include "radixkv/tree.h"
#include "radixkv/retention.h"
#include "radixkv/events.h"
#include "radixkv/tiers.h"
#include "radixkv/swa.h"
#include "radixkv/sched.h"
#include "radixkv/attention.h"
#include "radixkv/kv_evict.h"
#include "radixkv/router.h"

#endif /* RADIXKV_H */
