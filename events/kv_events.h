/*
 * events/kv_events.h -- the events layer's KV event ring
 * (events/kv_events.c). The core reaches it only through the page hooks
 * rkv_events_attach registers (pages stored by insert, pages evicted); the
 * facade (treeapi/tree_api.c) attaches, clears and checks it; the
 * residency layer records its media's events directly (rkv_ev_medium).
 *
 * The ring is a circular array of cap rkv_event records allocated at create
 * time (cap == 0: events off, every hook is one predictable branch). Slots
 * head .. head+count-1 (mod cap) hold recorded events in seq order. While
 * `lost` is set the newest record is the RESYNC marker and every new event
 * only bumps its `lost` count and next_seq; otherwise count <= cap - 1
 * (one slot is kept for a marker). next_seq is the seq the next event gets.
 *
 * Token ids (tok_cap != 0, only with events on): a second circular array
 * of tok_cap int32 holds, in event order, the tokens of every recorded
 * BLOCK_STORED event (num_hashes * page_size each, possibly wrapping);
 * tok_count is their sum over the recorded records and tok_head the
 * oldest record's first token. An event whose tokens do not fit is lost
 * like one that finds the event ring full (it becomes the marker).
 */
#ifndef RKV_EVENTS_KV_EVENTS_H
#define RKV_EVENTS_KV_EVENTS_H

#include <stdint.h>

#include "radixkv.h"
#include "radix/node_mem.h"

typedef struct rkv_ev_ring {
    rkv_event *ev;      /* [cap], NULL when off                            */
    uint32_t cap;       /* 0: off                                          */
    uint32_t head;      /* oldest record                                   */
    uint32_t count;     /* records held                                    */
    int lost;           /* the newest record is a RESYNC marker            */
    uint64_t next_seq;  /* from 1                                          */
    int32_t *tok;       /* [tok_cap] token ids of stored events, or NULL   */
    uint32_t tok_cap;   /* 0: events carry no token ids                    */
    uint32_t tok_head;  /* first token of the oldest record                */
    uint32_t tok_count; /* tokens held                                     */
    uint32_t page_size; /* tokens per hash of a stored event               */
} rkv_ev_ring;

#define RKV_EV_MAX_RING (1u << 24)

struct rkv_tree;
struct rkv_tnode;

/* Largest token ring (tokens): 2^28 int32, 1 GiB. */
#define RKV_EV_MAX_TOKENS (1u << 28)

/* Allocates the ring from m (create); cap 0 = off; tok_cap token ids of
 * stored events (0 = none; page_size tokens per page). 0 on failure is the
 * caller's RKV_ERR_NOMEM. Returns 1 on success. */
int rkv_ev_init(rkv_ev_ring *r, rkv_node_mem *m, uint32_t cap,
                uint32_t tok_cap, uint32_t page_size);
void rkv_ev_fini(rkv_ev_ring *r, rkv_node_mem *m);

/* The events layer of tree t (create): its ring (cap 0 = off; tok_cap
 * token ids of stored events) and, when on, the core's page hooks. 0 on
 * failure (the caller's rkv_events_detach frees what was made). */
int rkv_events_attach(struct rkv_tree *t, uint32_t cap, uint32_t tok_cap);
/* Frees the ring; no events from here on (destroy). */
void rkv_events_detach(struct rkv_tree *t);

/* Records pages blocks[0..n) just cached under ns, after parent_hash (the
 * pool holds their chained hashes); tokens: their n * page_size token ids
 * (read only when the ring records tokens). */
void rkv_ev_stored(struct rkv_tree *t, uint64_t ns, uint64_t parent_hash,
                   const rkv_block_id *blocks, const int32_t *tokens,
                   uint32_t n);
/* The same for the pages of node x (its blocks and its stored token ids,
 * in either layout: radix/tree_tokens.h), a lower tier's promotion. */
void rkv_ev_stored_node(struct rkv_tree *t, uint64_t ns, uint64_t parent_hash,
                        const struct rkv_tnode *x);
/* Records the removal of hashes[0..n) (n <= RKV_EVENT_MAX_HASHES). */
void rkv_ev_removed(struct rkv_tree *t, uint64_t ns, const uint64_t *hashes,
                    uint32_t n);
void rkv_ev_cleared(struct rkv_tree *t);
/* Tiers: one BLOCK_STORED (parent_hash and tokens, n * page_size ids,
 * used) or BLOCK_REMOVED event of hashes[0..n) (n <= RKV_EVENT_MAX_HASHES)
 * in medium. */
void rkv_ev_medium(struct rkv_tree *t, uint8_t kind, uint8_t medium,
                   uint64_t ns, uint64_t parent_hash, const uint64_t *hashes,
                   const int32_t *tokens, uint32_t n);

/* The ring's invariants; RKV_ERR_CORRUPT naming the broken one. */
rkv_status rkv_ev_check(const rkv_ev_ring *r);

#endif
