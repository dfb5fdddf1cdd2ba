/*
 * sched/sched_internal.h -- the scheduler's data structures, shared by the
 * files of sched/ (sched.c: create, submit, abort, stats; sched_map.c: the
 * u64 hash map; sched_kv.c: a request's KV (admission, growth, insertion,
 * retention, release) and the time; sched_order.c: waiting-queue order per
 * policy; sched_step.c: step, plan, commit; sched_check.c: invariants;
 * sched_query.c: the per-request query).
 *
 * Request model (one struct per live request, found by id in `by_id`):
 *   tokens[0..len) = prompt + generated tokens; cap = prompt_len + max_new
 *   is the most it can hold, tok_cap what is allocated (len <= tok_cap <=
 *   cap): it starts at the prompt and grows at the steps that sample, so
 *   a large max_new_tokens costs nothing up front.
 *   A RUNNING request has KV for tokens[0..kv_len), kv_len < len between
 *   steps: the next step runs tokens[kv_len .. min(len, kv_len + chunk)), and
 *   the step that reaches len samples a token (len grows by one). A decode is
 *   the case kv_len == len - 1 after the prefill; a prefill chunk is
 *   everything before. So after a prompt of L tokens and m sampled tokens the
 *   KV holds L + m - 1 tokens, as the engine's does.
 *   blocks[0..nblocks) is the block table, nblocks = ceil(kv_len / P) (plus
 *   this step's growth while a plan is pending). blocks[0..locked_pages) are
 *   tree pages covered by the lock on lock_node (depth locked_pages * P),
 *   owned by the request's lease (rkv_tree_lock), which never leaves sched/;
 *   the request holds NO pool reference on them. blocks[locked_pages..) are
 *   the request's own: exactly one pool reference each.
 *   A WAITING request holds nothing: no lock, no blocks (a preempted request
 *   keeps its tokens and generated count, and re-matches on readmission).
 */
#ifndef RKV_SCHED_INTERNAL_H
#define RKV_SCHED_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "radixkv.h"

/* ---- u64 -> u64 open-addressing map (linear probing, backward-shift
 * deletion). Used for id -> request and for the dedup page-hash multiset. */
typedef struct rkv_u64map {
    uint64_t *keys;
    uint64_t *vals;
    uint8_t *used;
    uint32_t cap; /* power of two, or 0 */
    uint32_t count;
} rkv_u64map;

void rkv_u64map_fini(rkv_u64map *m);
/* Makes room for `extra` more entries (load <= 1/2). */
rkv_status rkv_u64map_reserve(rkv_u64map *m, uint32_t extra);
/* Pointer to the value of key, or NULL. */
uint64_t *rkv_u64map_get(const rkv_u64map *m, uint64_t key);
/* Inserts (capacity must have been reserved); returns the value slot
 * (zero for a new key). */
uint64_t *rkv_u64map_put(rkv_u64map *m, uint64_t key);
void rkv_u64map_del(rkv_u64map *m, uint64_t key);

/* ---- requests ---------------------------------------------------------- */

typedef struct rkv_sched_req {
    uint64_t id;
    rkv_namespace ns;
    int32_t *tokens;
    uint32_t len, cap, prompt_len, max_new, generated;
    uint32_t tok_cap;      /* allocated length of tokens[]                */
    int32_t priority;
    double arrival_ms;
    uint64_t seq;          /* submission order: the last tie-break        */
    rkv_req_state state;
    rkv_finish_reason finish; /* set when it leaves (commit or abort)     */
    uint32_t preemptions;

    /* waiting: cached PEEK match, refreshed when the tree changed */
    size_t peek_tokens;
    rkv_node peek_node;      /* zeroed: re-match from the root              */
    size_t peek_depth;       /* depth of peek_node in tokens                  */
    uint64_t peek_epoch;     /* peek_node's children_epoch at the match       */
    int peek_valid;          /* matched at least once since it (re)queued   */
    uint32_t order_stamp;       /* live stamp of r's entry in sched->order     */
    uint32_t arrival_stamp;       /* live stamp of r's entry in sched->arrivals  */
    double key;            /* policy sort key (smaller first)             */
    size_t peek_host, peek_disk; /* tiers: the peek match's lower continuation
                              (rkv_tier_match host_tokens / disk_tokens)  */
    /* the watch lists (sched_watch.c): RKV_WNONE when not grouped */
    uint32_t wgrp;         /* group of peek_node                          */
    int wother;            /* in the group's other list, not a bucket     */
    int wmark;             /* named for a re-match in this refresh        */
    uint64_t wkey;         /* its bucket (wother == 0)                     */
    struct rkv_sched_req *gnext, *gprev; /* the group's members           */
    struct rkv_sched_req *snext, *sprev; /* the bucket or the other list  */

    /* tiers (sched_tier.c): a waiting request's own load. load_ticket != 0:
     * queued, in sched->tickets; load_ready: completed, pages on the device
     * held by load_lease until admission; both 0: no lease. */
    uint64_t load_ticket;
    int load_ready;
    int load_failed;       /* its last load failed: compute, do not reload */
    rkv_lease load_lease;
    uint32_t load_pages, load_disk_pages;
    uint32_t swapped_pages; /* pages swapped out at its last preemption   */
    uint32_t admitted_host, admitted_disk; /* of cached_len, loaded from host / disk */
    /* prefetch (sched_prefetch.c): pages rkv_tree_prefetch moved for it
     * while it waited (0: none pending), when that started and when the
     * disk is done with them (caller's clock) */
    uint32_t pf_pages;
    double pf_start_ms, pf_done_ms;

    /* running */
    rkv_block_id *blocks;
    uint32_t nblocks, blocks_cap;
    uint32_t kv_len;
    uint32_t locked_pages;
    rkv_node lock_node;
    rkv_lease lease;       /* owns the lock on lock_node (only the
                              scheduler holds it: nobody else can unpin
                              a running request's prefix)                 */
    uint32_t cached_len;   /* tokens matched at admission                 */
    int prefilling;        /* until the chunk that reaches len commits    */
    uint32_t ridx;         /* index in sched->running                     */
    uint32_t sched_q;      /* tokens planned this step (0: not planned)   */

    /* dedup: chained page hashes of tokens[0..nhash * P) */
    uint64_t *hashes;
    uint32_t nhash, hash_cap;
    uint32_t inflight_from, inflight_to; /* pages registered as in flight         */
    int dedup_held;        /* held for dedup at the last look             */

    /* retention (rkv_request_desc.retention), applied after inserts */
    int has_retention;
    rkv_retention retention;
} rkv_sched_req;

/* An order-array entry: live iff req->state == WAITING and stamp matches. */
typedef struct rkv_queue_entry {
    rkv_sched_req *req;
    uint32_t stamp;
} rkv_queue_entry;

/* A sorted queue of waiting requests with lazy removal and batched
 * re-insertion (see sched_order.c). */
typedef struct rkv_sched_queue {
    rkv_queue_entry *a;
    uint32_t n, cap;
    rkv_queue_entry *b;      /* key order: a short sorted side run, read
                                merged with a (see sched_order.c)          */
    uint32_t nb, bcap;
    rkv_queue_entry *add;    /* entries to insert at the next sort               */
    uint32_t nadd, addcap;
    uint32_t dead;    /* entries known to be dead                         */
    int by_arrival;   /* comparator: 1 arrival order, 0 by req->key       */
} rkv_sched_queue;

/* Waiting requests whose PEEK match ends at one node (sched_watch.c). */
#define RKV_WNONE UINT32_MAX
typedef struct rkv_watch_group {
    rkv_node node;        /* the peek node; id 0: nothing matched          */
    rkv_node head;        /* its first child at the last look (id 0: none) */
    uint64_t epoch;       /* its children_epoch at the last look           */
    struct rkv_sched_req *all;   /* members (gnext)                        */
    struct rkv_sched_req *other; /* members not in a bucket (snext)        */
    uint32_t n;           /* members                                       */
} rkv_watch_group;

typedef struct rkv_tree_sig {
    uint64_t inserted, evicted, splits, nodes, namespaces, cached;
    uint64_t lower, lower_evicted, loaded; /* tiers: residency below */
} rkv_tree_sig;

struct rkv_sched {
    rkv_tree *tree;
    rkv_pool *pool;
    uint32_t P, num_blocks;
    rkv_sched_config cfg;

    rkv_u64map by_id;        /* id -> rkv_sched_req *                          */
    rkv_sched_req **waiting;      /* unordered set of waiting requests         */
    uint32_t nwaiting, waiting_cap;
    rkv_sched_req **running;      /* capacity grows with the live requests,
                                not with cfg.max_running                 */
    uint32_t nrunning, running_cap;
    /* finished/aborted requests, in the order they ended, freed at the
     * next rkv_order_update once no queue entry can point at them (queues
     * delete lazily); capacity reserved at submit, so burying never fails.
     * Until then rkv_sched_request_info reports them (sched_query.c). */
    rkv_sched_req **grave;
    uint32_t ngrave, grave_cap;
    uint32_t nlimbo;         /* grave[0..nlimbo): forgotten by a step (not
                                reported) but not yet freed: a side run of
                                the order may still hold dead entries
                                naming them (sched_order.c)                */
    uint64_t next_seq;

    rkv_sched_queue order;        /* policy order                              */
    rkv_sched_queue arrivals;     /* bounded policy: arrival order             */
    int dfs_dirty;           /* dfs order must be rebuilt                 */
    rkv_tree_sig sig;        /* tree signature at the last refresh        */
    int sig_valid;
    rkv_u64map memo_epoch;   /* per-refresh: handle -> children_epoch + 1  */
    rkv_u64map memo_depth;   /* per-refresh: handle -> depth in tokens     */
    /* watch lists (sched_watch.c), without tiers */
    rkv_watch_group *wgroups;
    uint32_t nwgroups, wgroups_cap;
    rkv_u64map wgroup_map;   /* peek node key -> group index + 1           */
    rkv_u64map wbucket;      /* bucket key -> its first request            */
    rkv_sched_req **wtodo;   /* requests a refresh re-matches              */
    uint32_t wtodo_cap;
    int watch_valid;         /* 0: every waiting request is (re)grouped at
                                the next refresh                           */

    rkv_u64map inflight;     /* page hash -> count of running prefills    */

    /* the pending plan */
    int plan_pending;
    rkv_sched_req **plan_reqs;    /* NULL entries: aborted since the step      */
    uint32_t plan_n, plan_cap;
    rkv_batch_plan plan;
    uint64_t *plan_ids;
    uint32_t *plan_qo, *plan_prefix, *plan_cached, *plan_kvptr, *plan_last;
    uint32_t plan_arrays_cap;
    uint32_t *plan_kvidx;
    uint32_t plan_kvidx_cap;
    uint32_t *plan_slots;
    int32_t *plan_inputs;
    uint32_t plan_tok_cap;
    uint8_t *plan_emits;

    rkv_block_id *scratch;   /* n / P block ids for inserts / matches     */
    uint32_t scratch_cap;

    /* tiers (sched_tier.c) */
    int tiers_live;          /* lower pages were seen: matches look below  */
    rkv_u64map tickets;      /* load ticket -> rkv_sched_req * (waiting)        */
    rkv_u64map orphans;      /* load ticket -> lease id of an aborted
                                request: the tree keeps a loading node's
                                lease until the load completes; unlocked
                                when the poll reports it                   */
    uint32_t nloading;       /* waiting requests with a load (queued or
                                ready): they hold a running slot           */
    rkv_plan_copy *copies;   /* this step's plan.copies                    */
    uint32_t ncopies, copies_cap;
    uint32_t *copy_indptr;   /* plan.copy_indptr [ncopies + 1] (cap
                                copy_indptr_cap >= copies_cap + 1)        */
    uint32_t copy_indptr_cap;
    uint32_t *copy_blocks;   /* plan.copy_blocks [copy_indptr[ncopies]]    */
    uint32_t copy_blocks_cap;
    int store_log_on;             /* the scheduler turned the tree's store log on
                                (and turns it off at destroy)             */

    /* prefetch (sched_prefetch.c) */
    uint64_t *pf_ids;        /* requests submitted since the last step     */
    uint32_t npf, pf_cap;
    double pf_disk_free_ms;  /* the disk is busy with prefetches until then */
    double pf_now_ms;        /* the current step's time                     */

    double new_token_ratio;  /* admission headroom (see sched_step.c)    */
    int bounded_turn;        /* bounded: 1 = the next pick is overdue     */
    uint64_t now_ms;         /* time given to the tree (never goes back)  */

    rkv_sched_stats st;
};

/* sched.c */
void rkv_sched_req_free(rkv_sched_req *r);
/* Removes r from the waiting set (not from the order arrays: lazy). */
void rkv_sched_waiting_remove(rkv_sched *s, rkv_sched_req *r);
rkv_status rkv_sched_waiting_add(rkv_sched *s, rkv_sched_req *r);
void rkv_sched_running_remove(rkv_sched *s, rkv_sched_req *r);
/* A request leaves the scheduler (finished or aborted): off by_id, into
 * the grave. */
void rkv_sched_bury(rkv_sched *s, rkv_sched_req *r);
void rkv_sched_free_grave(rkv_sched *s);
/* A step forgets the requests that ended: freed at once when no queue
 * entry can name them, else kept unreported until then. */
void rkv_sched_forget_grave(rkv_sched *s, int freeable);

/* libc allocation with the test-only injection of sched/sched_debug.h;
 * release with free(). */
void *rkv_sched_mem_malloc(size_t n);
void *rkv_sched_mem_calloc(size_t n, size_t size);
void *rkv_sched_mem_realloc(void *p, size_t n);

rkv_status rkv_ensure_cap(void **p, uint32_t *cap, uint32_t need,
                          size_t elem);

/* sched_kv.c */
/* Grows r's block table to hold `tokens` KV tokens, evicting through the
 * tree. RKV_ERR_NO_SPACE / NOMEM: nothing changed. */
rkv_status rkv_sched_req_grow(rkv_sched *s, rkv_sched_req *r, uint32_t tokens);
/* Caches r's computed full pages (tokens[0..kv_len)) in the tree and moves
 * its lock down to them. Best effort: a failure leaves r as it was. */
void rkv_sched_req_insert_computed(rkv_sched *s, rkv_sched_req *r);
/* Drops r's own block references beyond `tokens` KV tokens (after a step
 * was cancelled). */
void rkv_sched_req_shrink(rkv_sched *s, rkv_sched_req *r, uint32_t tokens);
/* Inserts computed pages, unlocks, releases every block: r holds nothing. */
void rkv_sched_req_release(rkv_sched *s, rkv_sched_req *r);
/* Moves the scheduler's (and the tree's) time to max(now, tree's time). */
rkv_status rkv_sched_set_time(rkv_sched *s, double now_ms);
/* Admission: non-peek match of tokens[0..len-1), lock (its pages are put
 * in flight by the caller once the admission sticks). */
rkv_status rkv_sched_req_admit(rkv_sched *s, rkv_sched_req *r);
/* Chained page hashes up to `pages` pages. */
rkv_status rkv_sched_req_hashes(rkv_sched *s, rkv_sched_req *r, uint32_t pages);
void rkv_inflight_add(rkv_sched *s, rkv_sched_req *r, uint32_t from, uint32_t to);
void rkv_inflight_drop(rkv_sched *s, rkv_sched_req *r, uint32_t upto);
rkv_status rkv_ensure_scratch(rkv_sched *s, uint32_t pages);

/* sched_tier.c */
/* Polls the tree's transfers: completed loads make their requests ready
 * (or failed: they will compute). */
rkv_status rkv_sched_tier_poll(rkv_sched *s);
/* Tokens of credit for r's lower continuation (see radixkv.h). */
double rkv_sched_tier_credit(const rkv_sched *s, size_t host, size_t disk);
/* Admission: *loading 1 if r got a load instead (or waits for its own), 2
 * if it waits for another request's load of its continuation, 0 if it
 * should be admitted now; avail: blocks a load may take. */
rkv_status rkv_sched_tier_try_load(rkv_sched *s, rkv_sched_req *r, uint64_t avail,
                                   int *loading);
/* After r's admission stuck: the loaded pages count as cached by medium,
 * and the load's lease goes. */
void rkv_sched_tier_admitted(rkv_sched *s, rkv_sched_req *r, size_t matched);
/* Nothing runs and the pool is full: every completed load but keep's lets
 * go of its pages (they stay cached, evictable; those requests re-match
 * later). */
void rkv_sched_tier_release_ready(rkv_sched *s, const rkv_sched_req *keep);
/* rkv_sched_destroy: drops every waiting request's load, lets queued
 * loads complete where the backend allows, frees the tier state. */
void rkv_sched_tier_destroy(rkv_sched *s);
/* Drops r's load (abort, destroy): lease released (or, while the tree
 * still loads it, when its ticket completes), ticket forgotten. */
void rkv_sched_tier_drop(rkv_sched *s, rkv_sched_req *r);
/* Preemption: swap r's computed pages to host when cheaper (before its
 * release; r still locks them). */
void rkv_sched_tier_swap_out(rkv_sched *s, rkv_sched_req *r);
/* Room for n more plan copies listing `blocks` block ids between them
 * (reserved before a transfer is queued). */
rkv_status rkv_sched_tier_copies_reserve(rkv_sched *s, uint32_t n, uint32_t blocks);
/* The store log's capacity for a pool: room for a step that evicts the
 * whole pool twice and queues a full store queue (more is counted, not
 * listed), at most 2^20 records (16 MiB). */
uint32_t rkv_sched_tier_log_cap(const rkv_pool *pool);
/* End of a step: the tree's store log (write-policy and demotion stores
 * since the last step) drained into the copies; the plan's copy fields. */
void rkv_sched_tier_plan(rkv_sched *s);
/* Check of r's load state and of the ticket map. */
rkv_status rkv_sched_tier_check(const rkv_sched *s);

/* sched_prefetch.c */
/* Submit: r (just queued) is prefetched at the next step. Capacity first
 * (RKV_ERR_NOMEM: nothing changed), then the id. */
rkv_status rkv_sched_prefetch_reserve(rkv_sched *s);
void rkv_sched_prefetch_note(rkv_sched *s, const rkv_sched_req *r);
/* Step: prefetches the requests submitted since the last step. */
rkv_status rkv_sched_prefetch_step(rkv_sched *s, double now_ms);
/* Admission: 1 while r's prefetch holds it (WAIT, TIMEOUT). */
int rkv_sched_prefetch_holds(rkv_sched *s, const rkv_sched_req *r);
/* Pages of r's prefetch still on their way by the clock (at most
 * host_pages, its continuation's host pages): the tail of them. */
uint32_t rkv_sched_prefetch_late(const rkv_sched *s, const rkv_sched_req *r,
                                 uint32_t host_pages);
/* sched_watch.c */
/* Room for n more grouped requests. */
rkv_status rkv_watch_reserve(rkv_sched *s, uint32_t n);
/* Groups r by its peek match (room reserved; r not grouped). */
void rkv_watch_add(rkv_sched *s, rkv_sched_req *r);
/* Ungroups r (no-op when not grouped). */
void rkv_watch_remove(rkv_sched *s, rkv_sched_req *r);
/* After a change of the tree: the requests whose match may have moved go
 * to wtodo[0..returned), marked (wmark); every group is up to date with
 * the tree afterwards. Room for nwaiting todo entries must be reserved. */
uint32_t rkv_watch_collect(rkv_sched *s);
/* Ungroups everyone. fini frees the arrays without reading a request
 * (rkv_sched_destroy frees them first). */
void rkv_watch_clear(rkv_sched *s);
void rkv_watch_fini(rkv_sched *s);
rkv_status rkv_watch_check(const rkv_sched *s);

/* sched_order.c */
void rkv_sched_queue_fini(rkv_sched_queue *q);
/* Queues r for (re)insertion into the policy order (new arrival, changed
 * key). */
rkv_status rkv_order_push(rkv_sched *s, rkv_sched_req *r);
/* Refreshes matches when needed and brings the order up to date. */
rkv_status rkv_order_update(rkv_sched *s);
/* Walks the waiting requests in admission order (dead entries skipped). */
typedef struct rkv_order_iter {
    uint32_t i;      /* cursor in sched->order's main run                 */
    uint32_t j;      /* cursor in its side run                            */
    uint32_t ia;     /* bounded: cursor in sched->arrivals                */
    int overdue_done; /* bounded: no overdue request left                 */
    double now_ms;
} rkv_order_iter;
void rkv_order_iter_init(rkv_sched *s, rkv_order_iter *it, double now_ms);
rkv_sched_req *rkv_order_next(rkv_sched *s, rkv_order_iter *it);
/* The tree counters a refresh compares (unchanged: no match moved). */
void rkv_tree_sig_get(const rkv_sched *s, rkv_tree_sig *g);
/* Live entries of a queue (for checks). */
uint32_t rkv_order_live(const rkv_sched *s, const rkv_sched_queue *q);

#endif
