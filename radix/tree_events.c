/*
 * radix/tree_events.c -- KV events and snapshots of the radix tree: the
 * bounded ring (radix/tree_events.h) that insert, eviction and reset record
 * into, rkv_tree_events_drain, and rkv_tree_snapshot.
 *
 * Why a ring of fixed-size records: recording happens inside the commit
 * phase of calls that must not fail once they change the tree, so it must
 * not allocate; fixed records (a long store is split into events of at most
 * RKV_EVENT_MAX_HASHES hashes, each chaining its parent hash) keep the ring
 * one array allocated at create and make drain a plain copy into memory the
 * caller owns.
 *
 * Loss: a record is added only while count + 1 < cap, so a slot is always
 * free for the RESYNC marker, which is placed at the point of loss; later
 * events only count in it until it is drained. Dropped events still take a
 * seq, so a consumer that checks seq continuity sees the gap even if it
 * ignored the marker.
 */
#include <string.h>

#include "alloc/pool_internal.h"
#include "common/status.h"
#include "radix/tree_internal.h"

int rkv_ev_init(rkv_ev_ring *r, rkv_node_mem *m, uint32_t cap)
{
    memset(r, 0, sizeof *r);
    r->next_seq = 1;
    if (cap == 0)
        return 1;
    r->ev = rkv_node_mem_alloc(m, (size_t)cap * sizeof *r->ev);
    if (r->ev == NULL)
        return 0;
    r->cap = cap;
    return 1;
}

void rkv_ev_fini(rkv_ev_ring *r, rkv_node_mem *m)
{
    if (r->ev != NULL)
        rkv_node_mem_free(m, r->ev, (size_t)r->cap * sizeof *r->ev);
    memset(r, 0, sizeof *r);
}

static inline rkv_event *rkv_ev_slot(rkv_ev_ring *r, uint32_t i)
{
    uint32_t k = r->head + i;
    if (k >= r->cap)
        k -= r->cap;
    return &r->ev[k];
}

/* A fresh record with the next seq, or NULL when the event is dropped
 * (counted in the marker, which this may place). */
static rkv_event *rkv_ev_push(rkv_tree *t, uint8_t kind, uint64_t ns)
{
    rkv_ev_ring *r = &t->events;
    uint64_t seq = r->next_seq++;
    if (r->lost) {
        rkv_ev_slot(r, r->count - 1)->lost++;
        return NULL;
    }
    rkv_event *e = rkv_ev_slot(r, r->count++);
    memset(e, 0, offsetof(rkv_event, hashes));
    e->seq = seq;
    e->page_size = t->P;
    e->medium = RKV_MEDIUM_DEVICE;
    if (r->count == r->cap) {
        /* the last free slot: it becomes the marker */
        e->kind = RKV_EVENT_RESYNC;
        e->lost = 1;
        r->lost = 1;
        return NULL;
    }
    e->kind = kind;
    e->ns = ns;
    return e;
}

void rkv_ev_stored(rkv_tree *t, uint64_t ns, uint64_t parent_hash,
                   const rkv_block_id *blocks, uint32_t n)
{
    const uint64_t *hash = t->pool->hash;
    for (uint32_t i = 0; i < n; i += RKV_EVENT_MAX_HASHES) {
        uint32_t k = n - i < RKV_EVENT_MAX_HASHES ? n - i : RKV_EVENT_MAX_HASHES;
        rkv_event *e = rkv_ev_push(t, RKV_EVENT_BLOCK_STORED, ns);
        if (e != NULL) {
            e->parent_hash = i == 0 ? parent_hash : hash[blocks[i - 1]];
            e->num_hashes = (uint16_t)k;
            for (uint32_t j = 0; j < k; j++)
                e->hashes[j] = hash[blocks[i + j]];
        }
    }
}

void rkv_ev_removed(rkv_tree *t, uint64_t ns, const uint64_t *hashes,
                    uint32_t n)
{
    rkv_event *e = rkv_ev_push(t, RKV_EVENT_BLOCK_REMOVED, ns);
    if (e == NULL)
        return;
    e->num_hashes = (uint16_t)n;
    memcpy(e->hashes, hashes, (size_t)n * sizeof *hashes);
}

void rkv_ev_medium(rkv_tree *t, uint8_t kind, uint8_t medium, uint64_t ns,
                   uint64_t parent_hash, const uint64_t *hashes, uint32_t n)
{
    rkv_event *e = rkv_ev_push(t, kind, ns);
    if (e == NULL)
        return;
    e->medium = medium;
    e->parent_hash = kind == RKV_EVENT_BLOCK_STORED ? parent_hash : 0;
    e->num_hashes = (uint16_t)n;
    memcpy(e->hashes, hashes, (size_t)n * sizeof *hashes);
}

void rkv_ev_cleared(rkv_tree *t)
{
    (void)rkv_ev_push(t, RKV_EVENT_ALL_CLEARED, 0);
}

rkv_status rkv_tree_events_drain(rkv_tree *tree, rkv_event *out, uint32_t max,
                                 uint32_t *n_out)
{
    static const char fn[] = "rkv_tree_events_drain";
    if (n_out != NULL)
        *n_out = 0;
    if (tree == NULL || n_out == NULL || (out == NULL && max > 0))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL %s", fn,
                             tree == NULL ? "tree" : n_out == NULL ? "n_out" : "out");
    rkv_ev_ring *r = &tree->events;
    if (r->cap == 0)
        return rkv_set_error(RKV_ERR_STATE, "%s: the tree was created with "
                             "events off (rkv_tree_config.event_ring = 0)", fn);
    uint32_t n = r->count < max ? r->count : max;
    if (n == 0) /* out may be NULL (max 0): no memcpy with a null pointer */
        return RKV_OK;
    /* at most two contiguous runs */
    uint32_t first = r->cap - r->head < n ? r->cap - r->head : n;
    memcpy(out, &r->ev[r->head], (size_t)first * sizeof *out);
    memcpy(out + first, r->ev, (size_t)(n - first) * sizeof *out);
    r->head = r->head + n >= r->cap ? r->head + n - r->cap : r->head + n;
    r->count -= n;
    if (r->count == 0) {
        r->head = 0;
        r->lost = 0; /* the marker, always newest, went out with the rest */
    }
    *n_out = n;
    return RKV_OK;
}

/* ---- snapshot ---------------------------------------------------------------- */

rkv_status rkv_tree_snapshot(const rkv_tree *tree, rkv_block_entry *out,
                             size_t cap, size_t *n_out, uint64_t *seq_out)
{
    static const char fn[] = "rkv_tree_snapshot";
    if (tree == NULL || n_out == NULL || (out == NULL && cap > 0))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL %s", fn,
                             tree == NULL ? "tree" : n_out == NULL ? "n_out" : "out");
    const rkv_tree *t = tree;
    if (RKV_UNLIKELY(t->tier != NULL))
        return rkv_tier_snapshot(t, out, cap, n_out, seq_out);
    *n_out = (size_t)t->cached_blocks;
    if (seq_out != NULL)
        *seq_out = t->events.next_seq - 1;
    if (out == NULL)
        return RKV_OK;
    if (cap < t->cached_blocks)
        return rkv_set_error(RKV_ERR_NO_SPACE, "%s: %zu entries given, %llu "
                             "blocks cached", fn, cap,
                             (unsigned long long)t->cached_blocks);
    const uint64_t *hash = t->pool->hash;
    size_t k = 0;
    /* Preorder walk of each namespace's subtree through parent and sibling
     * links: no stack, so no allocation. */
    for (uint32_t root = 1; root < t->nodes_used; root++) {
        if (t->nodes[root].parent != 0)
            continue;
        uint64_t ns = t->nodes[root].u.ns;
        uint32_t x = t->nodes[root].first_child;
        while (x != RKV_NIL) {
            const rkv_tnode *nx = &t->nodes[x];
            uint64_t parent = rkv_tree_prev_hash(t, nx->parent);
            const rkv_block_id *b = rkv_tnode_blocks(t, nx);
            for (uint32_t i = 0; i < nx->num_pages; i++) {
                out[k].ns = ns;
                out[k].hash = hash[b[i]];
                out[k].parent_hash = parent;
                out[k].medium = RKV_MEDIUM_DEVICE;
                out[k].reserved = 0;
                parent = out[k].hash;
                k++;
            }
            if (nx->first_child != RKV_NIL) {
                x = nx->first_child;
                continue;
            }
            while (x != root && t->nodes[x].next_sib == RKV_NIL)
                x = t->nodes[x].parent;
            x = x == root ? RKV_NIL : t->nodes[x].next_sib;
        }
    }
    *n_out = k;
    return RKV_OK;
}

/* ---- check ----------------------------------------------------------------- */

#define CORRUPT(...) rkv_set_error(RKV_ERR_CORRUPT, "rkv_tree_check: events: " __VA_ARGS__)

rkv_status rkv_ev_check(const rkv_ev_ring *r)
{
    if (r->cap == 0)
        return r->ev == NULL && r->count == 0 && !r->lost
                   ? RKV_OK : CORRUPT("ring off but not empty");
    if (r->ev == NULL || r->head >= r->cap || r->count > r->cap)
        return CORRUPT("head %u count %u cap %u", r->head, r->count, r->cap);
    if (r->lost && r->count == 0)
        return CORRUPT("events marked lost with no marker");
    if (!r->lost && r->count >= r->cap)
        return CORRUPT("no slot kept for a marker");
    uint64_t prev = 0;
    for (uint32_t i = 0; i < r->count; i++) {
        uint32_t k = r->head + i;
        const rkv_event *e = &r->ev[k >= r->cap ? k - r->cap : k];
        int last = i + 1 == r->count;
        if (e->seq <= prev || e->seq >= r->next_seq)
            return CORRUPT("record %u has seq %llu after %llu (next %llu)", i,
                           (unsigned long long)e->seq, (unsigned long long)prev,
                           (unsigned long long)r->next_seq);
        prev = e->seq;
        if (e->kind < RKV_EVENT_BLOCK_STORED || e->kind > RKV_EVENT_RESYNC ||
            e->num_hashes > RKV_EVENT_MAX_HASHES)
            return CORRUPT("record %u: kind %u, %u hashes", i, e->kind,
                           e->num_hashes);
        if ((e->kind == RKV_EVENT_RESYNC) != (last && r->lost))
            return CORRUPT("record %u: a marker must be exactly the newest "
                           "record while events are lost", i);
        if (e->kind == RKV_EVENT_RESYNC && e->seq + e->lost != r->next_seq)
            return CORRUPT("marker seq %llu + lost %llu != next seq %llu",
                           (unsigned long long)e->seq,
                           (unsigned long long)e->lost,
                           (unsigned long long)r->next_seq);
        if ((e->kind == RKV_EVENT_BLOCK_STORED ||
             e->kind == RKV_EVENT_BLOCK_REMOVED) && e->num_hashes == 0)
            return CORRUPT("record %u: a block event without hashes", i);
    }
    return RKV_OK;
}
