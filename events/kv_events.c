/*
 * events/kv_events.c -- KV events and snapshots of the radix tree: the
 * bounded ring (events/kv_events.h) that insert, eviction and reset record
 * into, rkv_tree_events_drain, rkv_tree_snapshot and its chunked variant
 * rkv_tree_snapshot_chunk (a cursor over the same preorder walk).
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
 *
 * Token ids (event_tokens): stored events' ids go to a second ring of
 * int32 in the same order as their records, so a record needs no offset
 * field: draining walks records and ids together. An event whose ids do
 * not fit becomes the marker, as one that finds the event ring full.
 */
#include <string.h>

#include "alloc/pool_internal.h"
#include "common/status.h"
#include "events/kv_events.h"
#include "radix/tree_core.h"
#include "radix/tree_hash.h"
#include "radix/tree_match.h"
#include "radix/tree_tokens.h"

int rkv_ev_init(rkv_ev_ring *r, rkv_node_mem *m, uint32_t cap,
                uint32_t tok_cap, uint32_t page_size)
{
    memset(r, 0, sizeof *r);
    r->next_seq = 1;
    r->page_size = page_size;
    if (cap == 0)
        return 1;
    r->ev = rkv_node_mem_alloc(m, (size_t)cap * sizeof *r->ev);
    if (r->ev == NULL)
        return 0;
    r->cap = cap;
    if (tok_cap == 0)
        return 1;
    r->tok = rkv_node_mem_alloc(m, (size_t)tok_cap * sizeof *r->tok);
    if (r->tok == NULL)
        return 0; /* the caller's rkv_ev_fini frees the ring */
    r->tok_cap = tok_cap;
    return 1;
}

void rkv_ev_fini(rkv_ev_ring *r, rkv_node_mem *m)
{
    if (r->ev != NULL)
        rkv_node_mem_free(m, r->ev, (size_t)r->cap * sizeof *r->ev);
    if (r->tok != NULL)
        rkv_node_mem_free(m, r->tok, (size_t)r->tok_cap * sizeof *r->tok);
    memset(r, 0, sizeof *r);
}

int rkv_events_attach(rkv_tree *t, uint32_t cap, uint32_t tok_cap)
{
    t->events = rkv_node_mem_alloc(&t->mem, sizeof *t->events);
    if (t->events == NULL)
        return 0;
    if (!rkv_ev_init(t->events, &t->mem, cap, tok_cap, t->P))
        return 0; /* the caller's rkv_events_detach frees it */
    if (cap != 0) {
        t->hooks.pages_stored = rkv_ev_stored;
        t->hooks.pages_removed = rkv_ev_removed;
    }
    return 1;
}

void rkv_events_detach(rkv_tree *t)
{
    if (t->events == NULL)
        return;
    rkv_ev_fini(t->events, &t->mem);
    rkv_node_mem_free(&t->mem, t->events, sizeof *t->events);
    t->events = NULL;
    t->hooks.pages_stored = NULL;
    t->hooks.pages_removed = NULL;
}

/* Tokens a recorded event holds in the token ring. */
static inline uint32_t rkv_ev_ntok(const rkv_ev_ring *r, const rkv_event *e)
{
    return r->tok_cap != 0 && e->kind == RKV_EVENT_BLOCK_STORED
               ? (uint32_t)e->num_hashes * r->page_size : 0;
}

/* Appends tokens[0..n) to the token ring (room was checked at push). */
static void rkv_ev_put_tokens(rkv_ev_ring *r, const int32_t *tokens, uint32_t n)
{
    uint32_t at = r->tok_head + r->tok_count;
    if (at >= r->tok_cap)
        at -= r->tok_cap;
    uint32_t first = r->tok_cap - at < n ? r->tok_cap - at : n;
    memcpy(r->tok + at, tokens, (size_t)first * sizeof *tokens);
    memcpy(r->tok, tokens + first, (size_t)(n - first) * sizeof *tokens);
    r->tok_count += n;
}

/* Takes the oldest n tokens out of the ring, into out (NULL: dropped). */
static void rkv_ev_take_tokens(rkv_ev_ring *r, int32_t *out, uint32_t n)
{
    uint32_t first = r->tok_cap - r->tok_head < n ? r->tok_cap - r->tok_head : n;
    if (out != NULL) {
        memcpy(out, r->tok + r->tok_head, (size_t)first * sizeof *out);
        memcpy(out + first, r->tok, (size_t)(n - first) * sizeof *out);
    }
    r->tok_head += n;
    if (r->tok_head >= r->tok_cap)
        r->tok_head -= r->tok_cap;
    r->tok_count -= n;
}

static inline rkv_event *rkv_ev_slot(rkv_ev_ring *r, uint32_t i)
{
    uint32_t k = r->head + i;
    if (k >= r->cap)
        k -= r->cap;
    return &r->ev[k];
}

/* A fresh record with the next seq, or NULL when the event is dropped
 * (counted in the marker, which this may place). ntok: token ids the
 * event carries (0 unless a stored event with tokens on); a record is made
 * only while they fit too, and the caller then appends them. */
static rkv_event *rkv_ev_push(rkv_tree *t, uint8_t kind, uint64_t ns,
                              uint32_t ntok)
{
    rkv_ev_ring *r = t->events;
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
    if (r->count == r->cap || ntok > r->tok_cap - r->tok_count) {
        /* the last free slot, or no room for the tokens: a marker */
        e->kind = RKV_EVENT_RESYNC;
        e->lost = 1;
        r->lost = 1;
        return NULL;
    }
    e->kind = kind;
    e->ns = ns;
    return e;
}

/* The same, from n stored ids at s (a node's layout). */
static void rkv_ev_put_stored(const rkv_tree *t, rkv_ev_ring *r, const uint8_t *s,
                              uint32_t n)
{
    uint32_t at = r->tok_head + r->tok_count;
    if (at >= r->tok_cap)
        at -= r->tok_cap;
    uint32_t first = r->tok_cap - at < n ? r->tok_cap - at : n;
    rkv_tok_load(t, r->tok + at, s, first);
    rkv_tok_load(t, r->tok, s + (size_t)first * t->tok_bytes, n - first);
    r->tok_count += n;
}

/* rkv_ev_stored and rkv_ev_stored_node: the ids are the caller's int32
 * (tokens) or a node's stored ones (stored). */
static void rkv_ev_stored_any(rkv_tree *t, uint64_t ns, uint64_t parent_hash,
                              const rkv_block_id *blocks, const int32_t *tokens,
                              const uint8_t *stored, uint32_t n)
{
    const uint64_t *hash = t->pool->hash;
    rkv_ev_ring *r = t->events;
    for (uint32_t i = 0; i < n; i += RKV_EVENT_MAX_HASHES) {
        uint32_t k = n - i < RKV_EVENT_MAX_HASHES ? n - i : RKV_EVENT_MAX_HASHES;
        uint32_t ntok = r->tok_cap != 0 ? k * t->P : 0;
        rkv_event *e = rkv_ev_push(t, RKV_EVENT_BLOCK_STORED, ns, ntok);
        if (e != NULL) {
            e->parent_hash = i == 0 ? parent_hash : hash[blocks[i - 1]];
            e->num_hashes = (uint16_t)k;
            for (uint32_t j = 0; j < k; j++)
                e->hashes[j] = hash[blocks[i + j]];
            if (ntok != 0 && stored != NULL)
                rkv_ev_put_stored(t, r, stored + (size_t)i * t->page_bytes, ntok);
            else if (ntok != 0)
                rkv_ev_put_tokens(r, tokens + (size_t)i * t->P, ntok);
        }
    }
}

void rkv_ev_stored(rkv_tree *t, uint64_t ns, uint64_t parent_hash,
                   const rkv_block_id *blocks, const int32_t *tokens,
                   uint32_t n)
{
    rkv_ev_stored_any(t, ns, parent_hash, blocks, tokens, NULL, n);
}

void rkv_ev_stored_node(rkv_tree *t, uint64_t ns, uint64_t parent_hash,
                        const rkv_tnode *x)
{
    rkv_ev_stored_any(t, ns, parent_hash, rkv_tnode_blocks(t, x), NULL, x->u.tok8,
                      x->num_pages);
}

void rkv_ev_removed(rkv_tree *t, uint64_t ns, const uint64_t *hashes,
                    uint32_t n)
{
    rkv_event *e = rkv_ev_push(t, RKV_EVENT_BLOCK_REMOVED, ns, 0);
    if (e == NULL)
        return;
    e->num_hashes = (uint16_t)n;
    memcpy(e->hashes, hashes, (size_t)n * sizeof *hashes);
}

void rkv_ev_medium(rkv_tree *t, uint8_t kind, uint8_t medium, uint64_t ns,
                   uint64_t parent_hash, const uint64_t *hashes,
                   const int32_t *tokens, uint32_t n)
{
    rkv_ev_ring *r = t->events;
    uint32_t ntok = r->tok_cap != 0 && kind == RKV_EVENT_BLOCK_STORED ? n * t->P : 0;
    rkv_event *e = rkv_ev_push(t, kind, ns, ntok);
    if (e == NULL)
        return;
    e->medium = medium;
    e->parent_hash = kind == RKV_EVENT_BLOCK_STORED ? parent_hash : 0;
    e->num_hashes = (uint16_t)n;
    memcpy(e->hashes, hashes, (size_t)n * sizeof *hashes);
    if (ntok != 0)
        rkv_ev_put_tokens(r, tokens, ntok);
}

void rkv_ev_cleared(rkv_tree *t)
{
    (void)rkv_ev_push(t, RKV_EVENT_ALL_CLEARED, 0, 0);
}

/* Moves up to max of the oldest records into out[] and, with tokens on,
 * their token ids into tokens[0..tok_cap) (NULL: dropped), stopping
 * before a record whose tokens would not fit there. */
static uint32_t rkv_ev_take(rkv_ev_ring *r, rkv_event *out, uint32_t max,
                            int32_t *tokens, size_t tok_cap, size_t *ntok_out)
{
    uint32_t n = 0;
    size_t ntok = 0;
    while (n < max && n < r->count) {
        const rkv_event *e = rkv_ev_slot(r, n);
        uint32_t k = rkv_ev_ntok(r, e);
        if (tokens != NULL && k > tok_cap - ntok)
            break;
        if (k != 0)
            rkv_ev_take_tokens(r, tokens != NULL ? tokens + ntok : NULL, k);
        out[n++] = *e;
        ntok += tokens != NULL ? k : 0;
    }
    r->head = r->head + n >= r->cap ? r->head + n - r->cap : r->head + n;
    r->count -= n;
    if (r->count == 0) {
        r->head = 0;
        r->lost = 0; /* the marker, always newest, went out with the rest */
        r->tok_head = 0;
    }
    *ntok_out = ntok;
    return n;
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
    rkv_ev_ring *r = tree->events;
    if (r->cap == 0)
        return rkv_set_error(RKV_ERR_STATE, "%s: the tree was created with "
                             "events off (rkv_tree_config.event_ring = 0)", fn);
    if (max == 0 || r->count == 0) /* out may be NULL: no copy into it */
        return RKV_OK;
    if (r->tok_cap == 0) {
        /* at most two contiguous runs */
        uint32_t n = r->count < max ? r->count : max;
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
    size_t ntok;
    *n_out = rkv_ev_take(r, out, max, NULL, 0, &ntok);
    return RKV_OK;
}

rkv_status rkv_tree_events_drain_tokens(rkv_tree *tree, rkv_event *out,
                                        uint32_t max, int32_t *tokens,
                                        size_t tokens_cap, uint32_t *n_out,
                                        size_t *ntokens_out)
{
    static const char fn[] = "rkv_tree_events_drain_tokens";
    if (n_out != NULL)
        *n_out = 0;
    if (ntokens_out != NULL)
        *ntokens_out = 0;
    if (tree == NULL || n_out == NULL || ntokens_out == NULL ||
        (out == NULL && max > 0) || (tokens == NULL && tokens_cap > 0))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL %s", fn,
                             tree == NULL ? "tree" : n_out == NULL ? "n_out"
                             : ntokens_out == NULL ? "ntokens_out"
                             : out == NULL ? "out" : "tokens");
    rkv_ev_ring *r = tree->events;
    if (r->cap == 0 || r->tok_cap == 0)
        return rkv_set_error(RKV_ERR_STATE, "%s: the tree was created without "
                             "event token ids (rkv_tree_config.%s = 0)", fn,
                             r->cap == 0 ? "event_ring" : "event_tokens");
    if (max == 0 || r->count == 0)
        return RKV_OK;
    uint32_t need = rkv_ev_ntok(r, rkv_ev_slot(r, 0));
    if (need > tokens_cap)
        return rkv_set_error(RKV_ERR_NO_SPACE, "%s: the next event carries %u "
                             "token ids, tokens_cap is %zu", fn, need, tokens_cap);
    /* a non-NULL tokens pointer selects copying even when tokens_cap is 0 */
    int32_t dummy;
    *n_out = rkv_ev_take(r, out, max, tokens != NULL ? tokens : &dummy,
                         tokens_cap, ntokens_out);
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
    if (RKV_UNLIKELY(t->hooks.snapshot != NULL))
        return t->hooks.snapshot(t, out, cap, n_out, seq_out);
    *n_out = (size_t)t->cached_blocks;
    if (seq_out != NULL)
        *seq_out = t->events->next_seq - 1;
    if (out == NULL)
        return RKV_OK;
    if (cap < t->cached_blocks)
        return rkv_set_error(RKV_ERR_NO_SPACE, "%s: %zu entries given, %llu "
                             "blocks cached", fn, cap,
                             (unsigned long long)t->cached_blocks);
    rkv_tree_hash_all((rkv_tree *)t); /* pages cached without their hash */
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

/* ---- chunked snapshot ---------------------------------------------------------- */

/* The cursor's next namespace root at or after cur->root with a child, and
 * its first child; finished when none is left. */
static void rkv_snap_next_root(const rkv_tree *t, rkv_snapshot_cursor *cur)
{
    for (; cur->root < t->nodes_used; cur->root++) {
        const rkv_tnode *x = &t->nodes[cur->root];
        if (x->parent == 0 && x->first_child != RKV_NIL) {
            cur->node = x->first_child;
            cur->node_gen = t->nodes[cur->node].gen;
            cur->page = 0;
            return;
        }
    }
    cur->node = RKV_NIL;
    cur->state = 2;
}

rkv_status rkv_tree_snapshot_chunk(const rkv_tree *tree,
                                   rkv_snapshot_cursor *cur,
                                   rkv_block_entry *out, size_t cap,
                                   size_t *n_out, int *done)
{
    static const char fn[] = "rkv_tree_snapshot_chunk";
    if (n_out != NULL)
        *n_out = 0;
    if (tree == NULL || cur == NULL || n_out == NULL || done == NULL ||
        (out == NULL && cap > 0))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL argument", fn);
    const rkv_tree *t = tree;
    rkv_snapshot_cursor c = *cur;
    if (c.state == 0) {
        memset(&c, 0, sizeof c);
        c.seq = t->events->next_seq - 1;
        c.total = t->cached_blocks;
        c.root = 1;
        c.state = 1;
        rkv_snap_next_root(t, &c);
    } else if (c.state == 1) {
        /* Between chunks the tree must not change. With events on every
         * change moves the seq; without, a changed block count or a freed
         * or trimmed cursor node is what shows. */
        if (c.seq != t->events->next_seq - 1 || c.total != t->cached_blocks ||
            c.node >= t->nodes_used || t->nodes[c.node].parent == RKV_NIL ||
            t->nodes[c.node].gen != c.node_gen ||
            c.page > t->nodes[c.node].num_pages)
            return rkv_set_error(RKV_ERR_STATE, "%s: the tree changed since "
                                 "the cursor began (at seq %llu); start a new "
                                 "cursor", fn, (unsigned long long)c.seq);
    } else if (c.state != 2) {
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: cursor state %u "
                             "(zero it with rkv_snapshot_cursor_init)", fn,
                             c.state);
    }
    const uint64_t *hash = t->pool->hash;
    size_t k = 0;
    while (c.state == 1 && k < cap) {
        /* pages cached without their hash get it (and the path above) */
        rkv_tree_hash_node((rkv_tree *)t, c.node);
        const rkv_tnode *nx = &t->nodes[c.node];
        const rkv_block_id *b = rkv_tnode_blocks(t, nx);
        uint64_t ns = t->nodes[c.root].u.ns;
        uint64_t parent = c.page == 0 ? rkv_tree_prev_hash(t, nx->parent)
                                      : hash[b[c.page - 1]];
        for (; c.page < nx->num_pages && k < cap; c.page++, k++) {
            out[k].ns = ns;
            out[k].hash = hash[b[c.page]];
            out[k].parent_hash = parent;
            out[k].medium = RKV_MEDIUM_DEVICE; /* as rkv_tree_snapshot */
            out[k].reserved = 0;
            parent = out[k].hash;
        }
        if (c.page < nx->num_pages)
            break;
        /* preorder successor, as rkv_tree_snapshot walks */
        uint32_t x = c.node;
        if (nx->first_child != RKV_NIL) {
            x = nx->first_child;
        } else {
            while (x != c.root && t->nodes[x].next_sib == RKV_NIL)
                x = t->nodes[x].parent;
            x = x == c.root ? RKV_NIL : t->nodes[x].next_sib;
        }
        if (x == RKV_NIL) {
            c.root++;
            rkv_snap_next_root(t, &c);
        } else {
            c.node = x;
            c.node_gen = t->nodes[x].gen;
            c.page = 0;
        }
    }
    c.done += k;
    *cur = c;
    *n_out = k;
    *done = c.state == 2;
    return RKV_OK;
}

void rkv_snapshot_cursor_init(rkv_snapshot_cursor *cur)
{
    if (cur != NULL)
        memset(cur, 0, sizeof *cur);
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
    if (r->tok_cap != 0 && (r->tok == NULL || r->tok_head >= r->tok_cap ||
                            r->tok_count > r->tok_cap))
        return CORRUPT("token ring head %u count %u cap %u", r->tok_head,
                       r->tok_count, r->tok_cap);
    uint64_t prev = 0, ntok = 0;
    for (uint32_t i = 0; i < r->count; i++) {
        uint32_t k = r->head + i;
        const rkv_event *e = &r->ev[k >= r->cap ? k - r->cap : k];
        ntok += rkv_ev_ntok(r, e);
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
    if (ntok != r->tok_count)
        return CORRUPT("stored events carry %llu token ids, the token ring "
                       "holds %u", (unsigned long long)ntok, r->tok_count);
    return RKV_OK;
}
