/*
 * tests/support/sched_tier_kv.h -- the engine the scheduler tier tests
 * (tests/test_sched_tiers.c on a host pool, tests/test_sched_tier_cuda.c
 * on a CUDA pool) drive rkv_sched with, over a pool with real KV memory.
 *
 * It owns: the environment (pool of one layer, one head, head_dim 2, f32
 * -- a token's K is 8 bytes -- tree, host store and optional disk store,
 * scheduler); each request's shadow (tokens, and for every position the
 * hash of its prefix, namespace included); the step loop (step, check the
 * plan's copy list, run the plan, sample, commit) and the drain; the end
 * check that nothing leaks; and the scenario pieces both tests run on
 * their own pool (a stk_setup_fn): the shared prefix warmed onto the host,
 * request pairs on it, the write-through store lists and the reload from
 * the host, swap on preemption and back, write-back demotions.
 *
 * Every computed token's K is written with its prefix hash when a plan
 * computes it, and every position a plan's kv_indices point to must hold
 * its own prefix hash, so a page loaded too early, into the wrong block or
 * with the wrong bytes fails the test. Every plan's copies are checked:
 * kinds and media, the requests named, a STORE's or SWAP_OUT's source
 * blocks hold a page the engine computed (a set of page fingerprints), a
 * load's destination blocks are those the request is admitted with.
 *
 * KV is reached through the pool: a host pool's layer K directly, a CUDA
 * pool's through rkv_pool_copy_to_host / _from_host, and a block that may
 * be free already (a done STORE's, a swap-out's) through the test's peek
 * hook, and every block overwritten through its clobber hook (the CUDA
 * runtime stays in the test: this library is linked into every test, in
 * every configuration). TS_DEBUG=1 prints each step.
 */
#ifndef RKV_TESTS_SCHED_TIER_KV_H
#define RKV_TESTS_SCHED_TIER_KV_H

#include <stddef.h>
#include <stdint.h>

#include "radixkv.h"

#define STK_P 4u      /* tokens per page                                  */
#define STK_MAXR 16u  /* request ids 0 .. STK_MAXR - 1                     */
#define STK_MAXT 160u /* tokens per request                               */

typedef struct stk_req {
    int used, live;
    uint64_t ns;
    int32_t tok[STK_MAXT];
    uint64_t ph[STK_MAXT];
    uint32_t len, max_new, gen;
    int64_t first_step;     /* step of its first plan, -1 before          */
    uint32_t first_cached;  /* cached_len in that plan                    */
    uint32_t first_host;    /* cached_host_tokens then                    */
    uint32_t first_disk;    /* cached_disk_tokens then                    */
    int loads_seen, swap_out_seen, swap_in_seen;
    uint64_t load_ticket;   /* the last listed load / swap-in             */
    uint32_t load_blocks[STK_MAXT / STK_P + 1]; /* its destination blocks */
    uint32_t nload_blocks;
    int load_pending;       /* listed, not seen in a plan since           */
    int load_blocks_used;   /* admissions that used the listed blocks     */
} stk_req;

typedef struct stk_env stk_env;

struct stk_env {
    rkv_pool *pool;
    rkv_tree *tree;
    rkv_sched *s;
    rkv_store *host, *disk;
    rkv_sched_config cfg;
    char dir[64];           /* the disk store's folder ("" without one)    */
    size_t bb;              /* bytes per block                             */
    uint8_t *blk;           /* one block's bytes: K of its P tokens first  */
    uint64_t *kv;           /* a host pool's layer 0 K (NULL: CUDA pool)   */
    /* a CUDA pool's block b read from device memory, allocated or not */
    void (*peek)(stk_env *e, uint32_t b, uint64_t out[STK_P]);
    /* a CUDA pool's every block overwritten in device memory */
    void (*clobber)(stk_env *e);
    uint32_t nblocks;
    stk_req r[STK_MAXR];
    double now;
    int64_t steps;
    uint64_t live;
    uint64_t store_copies;  /* STORE pages listed                          */
    uint64_t store_queued_pages, store_done_pages; /* of them, from device */
    uint64_t *pageset;      /* fingerprints of every page the engine wrote
                               (open addressing, 0 = empty)              */
    uint32_t pageset_cap, pageset_n;
    int collect;            /* record the STORE blocks in listed[]         */
    uint32_t listed[64], nlisted;
    int tolerate_nomem;     /* a step or commit may fail NOMEM once        */
    uint64_t nomem_seen;
};

/* The token_bytes of the trees stk_setup makes: 4 unless a test sets 3. */
extern uint32_t stk_token_bytes;

/* What stk_setup found. */
enum { STK_READY, STK_NO_DEVICE, STK_NO_TIERS };

/* A pool of nblocks on device (RKV_DEVICE_HOST or RKV_DEVICE_CUDA), a host
 * store of host_blocks and a disk store of disk_blocks (none when 0) as
 * its tiers with write_policy, a scheduler with cfg. STK_NO_DEVICE: no
 * CUDA device; STK_NO_TIERS: the tree refused the tiers; both leave
 * nothing to free. */
int stk_setup(stk_env *e, rkv_device device, uint32_t nblocks,
              uint32_t host_blocks, uint32_t disk_blocks,
              const rkv_sched_config *cfg, int write_policy);
void stk_fini(stk_env *e);

/* lpm / fcfs with max_running, 64 batch tokens, no dedup threshold. */
rkv_sched_config stk_base_cfg(rkv_policy pol, uint32_t max_running);

/* Every block's K overwritten (allocated or not), so that only the lower
 * tiers' copies can serve a prefix afterwards. */
void stk_kv_clobber(stk_env *e);

rkv_status stk_submit(stk_env *e, uint64_t id, const int32_t *prompt,
                      uint32_t len, uint32_t max_new);
/* One step (+ commit when the plan runs something); the plan's size.
 * rkv_sched_check runs after both, rkv_tree_check too. */
uint32_t stk_step(stk_env *e);
void stk_steps(stk_env *e, int n);
/* Steps until every request finished; fails after max_steps. */
void stk_drain(stk_env *e, int64_t max_steps);
/* Polls the tree until no copy is queued or in flight. */
void stk_settle(stk_env *e);
/* Nothing waits; copies finish; then nothing holds a device block;
 * stk_fini. */
void stk_finish(stk_env *e);

/* A test's setup of its pool (host or CUDA) with a host store of
 * host_blocks: skips the test where it cannot run. */
typedef void (*stk_setup_fn)(stk_env *e, uint32_t nblocks, uint32_t host_blocks,
                             const rkv_sched_config *cfg, int write_policy);

/* Request 0 on the first slen tokens of shared, then `others` requests of
 * 40 tokens that push its pages off the device (write-back demotes them);
 * the prefix must then match on a lower tier: *tm says where. */
void stk_warm_lower(stk_env *e, const int32_t *shared, uint32_t slen,
                    uint32_t others, rkv_tier_match *tm);

/* stk_warm_lower with 3 others; the prefix must reach the host tier. */
void stk_warm_host(stk_env *e, const int32_t *shared, uint32_t slen);

/* The start most tests share: setup with nblocks and a host store of 64
 * blocks, write-back; the 28-token shared prefix (key 4242) written, its
 * first 24 tokens demoted to the host. */
void stk_warm_shared(stk_env *e, stk_setup_fn setup, const rkv_sched_config *c,
                     uint32_t nblocks, int32_t shared[28]);
/* The same with stk_base_cfg(pol, max_running). */
void stk_warm_base(stk_env *e, stk_setup_fn setup, rkv_policy pol,
                   uint32_t max_running, uint32_t nblocks, int32_t shared[28]);

/* Request 6 on shared (28 tokens, 3 new) and request 7 on t2, filled
 * here: the first 24 tokens of shared, then 4 of its own (key 99). */
void stk_submit_pair(stk_env *e, const int32_t shared[28], int32_t t2[28]);

/* Request 6 on shared (28 tokens, 3 new), then request 5 beside it on
 * other, filled here (12 tokens, key 778), other_new new. */
void stk_submit_beside(stk_env *e, const int32_t shared[28], int32_t other[12],
                       uint32_t other_new);

/* Write-through (setup with nblocks, a host store of 64; lpm, 2
 * running), the STORE blocks collected: request 0 on t (filled here, 24
 * tokens of key, 4 new) drained. */
void stk_store_through(stk_env *e, stk_setup_fn setup, uint32_t nblocks,
                       uint64_t key, int32_t t[24]);

/* After stk_store_through with its stores done: the listed STORE blocks
 * are exactly the cached pages of request 0's tokens, each once; those
 * pages evicted (write-through: already on the host, so nothing is
 * stored now) and every device block's bytes destroyed, request 1 on t
 * (2 new) gets the prefix back from the host with the right KV. */
void stk_reload_from_host(stk_env *e, const int32_t t[24]);

/* Swap instead of recompute, with swap and without (16 blocks, host
 * store of 64, write-back, 4 running; requests 0 .. 5 of 12 tokens, 28
 * new each): the small pool preempts; with swap the SWAP_OUT / SWAP_IN
 * copies the plans listed are the scheduler's counts, and there were
 * some; what a resumed request loaded it did not compute again. */
void stk_swap_round_trip(stk_setup_fn setup);

/* Write-back: a device eviction's demotion lists its source blocks as
 * done STORE entries, one page each time the tree copied one down (a
 * step after stk_warm_shared lists the last commit's). */
void stk_demotions_list_source_blocks(stk_setup_fn setup);

/* n steps (then, with settle, stk_settle): no store is pending or in
 * flight, the tree checks, and some pages were stored on the host; the
 * tier stats. */
rkv_tier_stats stk_stores_done(stk_env *e, int n, int settle);

/* How a pool's tier loads are timed: steps from the step that queues a
 * load to the admission it serves (the host pool: 1), and whether that
 * admission comes exactly then (a host pool, the simulator) or at or after
 * it (a GPU, whose copy may still run at that poll). */
typedef struct stk_tier {
    stk_setup_fn setup;
    int64_t load_steps;
    int exact;
} stk_tier;

/* Request id was first planned in step want (exactly, or at or after it
 * when the tier is not exact). */
void stk_admitted_at(const stk_env *e, const stk_tier *t, uint64_t id, int64_t want);

/* The scheduler counted exactly loads loads, failed of them failed; its
 * stats. */
rkv_sched_stats stk_expect_loads(stk_env *e, uint64_t loads, uint64_t failed);

/* Two requests continue one host prefix (stk_submit_pair, lpm, 4 running,
 * 16 blocks): the first step runs nothing (6 loads, 7 waits for 6's load
 * holding none of its own); then the prefix is loaded once, 6 admitted
 * when its load is done and 7 with it, on the device pages 6 loaded. */
void stk_shared_prefix_loaded_once(const stk_tier *t);

/* Request 5 beside request 6, whose prefix is on the host
 * (stk_submit_beside with other_new; lpm, 2 running, nblocks): 5 runs in
 * every step of 6's load, 6 waits for its own load only and is admitted
 * when it is done. */
void stk_others_run_while_one_loads(const stk_tier *t, uint32_t nblocks, uint32_t other_new);

#endif
