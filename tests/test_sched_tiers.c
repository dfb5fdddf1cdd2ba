/*
 * tests/test_sched_tiers.c -- the scheduler over a tree with a host tier
 * (issue 12, "Tiers in the scheduler" in radixkv.h).
 *
 * A small engine drives the scheduler as a server does, on a pool with real
 * KV memory (one layer, one head, head_dim 2, f32: a token's K is 8 bytes)
 * and a host store of the same block size, so loads and swaps move real
 * bytes: every token's K holds a hash of its request's prefix (namespace
 * included), written when the plan computes it, and every position a plan
 * attends to must hold its own prefix hash -- so a page loaded from the
 * host with the wrong bytes, in the wrong block or too early fails the
 * test. rkv_sched_check runs after every step and commit; every plan's copy
 * list is checked (kinds, media, pages, requests named) and recorded.
 *
 * Covered: lower-tier hits ordered as cached under lpm (with one running
 * slot the loading request goes before an older request fcfs would
 * take); a request waits only for its own load (others run in the step
 * that queues it); a failed load (injected copy error) falls back to
 * computing; swap on preemption and back; the plan's copy lists (every
 * STORE from the device lists source blocks that hold a page the engine
 * computed, checked on every plan of every test); selective write-through
 * storing hit pages; the scheduler's own allocations failing one by one
 * with tiers on.
 * While the tree's tiers are placeholders (attach refuses), every test
 * skips with a message.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "radixkv.h"
#include "radix/tree_debug.h"
#include "sched/sched_debug.h"
#include "tier/store.h"
#include "tests/test_sched_engine.h"

#define P 4u
#define MAXR 16u
#define MAXT 160u

typedef struct treq {
    int used, live;
    uint64_t ns;
    int32_t tok[MAXT];
    uint64_t ph[MAXT];
    uint32_t len, max_new, gen;
    int64_t first_step;     /* step of its first plan, -1 before          */
    uint32_t first_cached;  /* cached_len in that plan                    */
    uint32_t first_host;    /* cached_host_tokens then                    */
    int loads_seen, swap_out_seen, swap_in_seen;
    uint64_t load_ticket;   /* the last listed load / swap-in             */
    uint32_t load_blocks[MAXT / P + 1]; /* its destination blocks, listed */
    uint32_t nload_blocks;
    int load_pending;       /* listed, not seen in a plan since           */
    int load_blocks_used;   /* admissions that used the listed blocks     */
} treq;

typedef struct tenv {
    rkv_pool *pool;
    rkv_tree *tree;
    rkv_sched *s;
    rkv_store *host;
    rkv_sched_config cfg;
    uint64_t *kv;           /* layer 0 K: one uint64 per slot             */
    uint32_t nblocks;
    treq r[MAXR];
    double now;
    int64_t steps;
    uint64_t live;
    uint64_t store_copies;  /* STORE pages listed                          */
    uint64_t store_queued_pages, store_done_pages; /* of them, from device */
    uint64_t *pageset;      /* fingerprints of every page the engine wrote
                               (open addressing, 0 = empty)              */
    uint32_t pageset_cap, pageset_n;
    int collect;            /* record the queued STORE blocks in listed[]  */
    uint32_t listed[64], nlisted;
    int tolerate_nomem;
    uint64_t nomem_seen;
} tenv;

/* 1 when the tree's tiers work; 0: skipped (placeholders). */
static int tsetup(tenv *e, uint32_t nblocks, uint32_t host_blocks,
                  const rkv_sched_config *cfg, int write_policy)
{
    memset(e, 0, sizeof *e);
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = nblocks;
    pc.page_size = P;
    pc.num_layers = 1;
    pc.num_kv_heads = 1;
    pc.head_dim = 2;
    pc.dtype = RKV_DTYPE_F32;
    OK(rkv_pool_create(&pc, &e->pool));
    OK(rkv_tree_create(e->pool, NULL, &e->tree));
    void *k = NULL, *v = NULL;
    OK(rkv_pool_layer_kv(e->pool, 0, &k, &v));
    e->kv = k;
    rkv_store_config sc;
    rkv_store_config_init(&sc, RKV_MEDIUM_HOST);
    sc.capacity_blocks = host_blocks;
    sc.block_bytes = rkv_pool_bytes_per_block(e->pool);
    sc.pinned = 0;
    rkv_status st = rkv_store_create(&sc, &e->host);
    if (st == RKV_OK) {
        rkv_tier_config tc;
        rkv_tier_config_init(&tc);
        tc.host = e->host;
        tc.write_policy = write_policy;
        st = rkv_tree_attach_tiers(e->tree, &tc);
    }
    if (st == RKV_ERR_UNSUPPORTED) {
        rkv_tree_destroy(e->tree);
        rkv_store_destroy(e->host);
        rkv_pool_destroy(e->pool);
        return 0;
    }
    cr_assert_eq(st, RKV_OK, "tiers: %s", rkv_last_error());
    e->cfg = *cfg;
    OK(rkv_sched_create(e->tree, cfg, &e->s));
    e->pageset_cap = 1u << 14;
    e->pageset = calloc(e->pageset_cap, sizeof *e->pageset);
    cr_assert_not_null(e->pageset);
    e->nblocks = nblocks;
    return 1;
}

#define SETUP_OR_SKIP(e, nb, hb, cfg, wp)                                     \
    do {                                                                      \
        if (!tsetup((e), (nb), (hb), (cfg), (wp)))                            \
            cr_skip_test("the tree's tiers are not built (placeholders)");   \
    } while (0)

static void tfini(tenv *e)
{
    free(e->pageset);
    rkv_sched_destroy(e->s);
    rkv_tree_destroy(e->tree);
    rkv_store_destroy(e->host);
    rkv_pool_destroy(e->pool);
}

static void extend(treq *r, int32_t t)
{
    cr_assert_lt(r->len, MAXT);
    r->tok[r->len] = t;
    r->ph[r->len] = eng_mix(r->len ? r->ph[r->len - 1] : eng_mix(r->ns, 77),
                        (uint64_t)t);
    r->len++;
}

static rkv_status tsubmit(tenv *e, uint64_t id, const int32_t *prompt,
                          uint32_t len, uint32_t max_new, int32_t prio)
{
    cr_assert_lt(id, MAXR);
    rkv_request_desc d;
    memset(&d, 0, sizeof d);
    d.id = id;
    d.prompt = prompt;
    d.prompt_len = len;
    d.max_new_tokens = max_new;
    d.priority = prio;
    d.arrival_ms = e->now;
    rkv_status st = rkv_sched_submit(e->s, &d);
    if (st != RKV_OK)
        return st;
    treq *r = &e->r[id];
    memset(r, 0, sizeof *r);
    r->used = r->live = 1;
    for (uint32_t i = 0; i < len; i++)
        extend(r, prompt[i]);
    r->max_new = max_new;
    r->first_step = -1;
    e->live++;
    return RKV_OK;
}

static int32_t token_of(uint64_t id, uint32_t len)
{
    return (int32_t)(eng_mix(id * 0x100000001b3ull, len) % 5000) + 1;
}

/* A page's fingerprint: its P slots' K values (never 0). */
static uint64_t page_fp(const uint64_t *k)
{
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (uint32_t j = 0; j < P; j++)
        h = eng_mix(h, k[j]);
    return h ? h : 1;
}

/* 1: fp was found (add 0) or added (add 1); 0: not there. A full set
 * stops growing and answers 1 (the check then proves less, never fails
 * wrongly). */
static int pageset_has(tenv *e, uint64_t fp, int add)
{
    uint32_t mask = e->pageset_cap - 1;
    for (uint32_t i = (uint32_t)fp & mask;; i = (i + 1) & mask) {
        if (e->pageset[i] == fp)
            return 1;
        if (e->pageset[i] == 0) {
            if (!add)
                return e->pageset_n * 2 > e->pageset_cap;
            if (e->pageset_n * 2 > e->pageset_cap)
                return 1;
            e->pageset[i] = fp;
            e->pageset_n++;
            return 1;
        }
    }
}

/* A STORE from the device lists its source blocks (issue 12): each holds,
 * when the plan is made, the bytes of a full page the engine computed --
 * the page the tree stores (queued) or stored (done) from it. */
static void check_store_blocks(tenv *e, const rkv_batch_plan *p, uint32_t i)
{
    const rkv_plan_copy *c = &p->copies[i];
    uint32_t b0 = p->copy_indptr[i], b1 = p->copy_indptr[i + 1];
    if (b1 == b0)
        return; /* host -> disk, or dropped by a full log: a count */
    cr_assert_eq(b1 - b0, c->pages);
    for (uint32_t k = b0; k < b1; k++) {
        uint32_t b = p->copy_blocks[k];
        cr_assert_lt(b, e->nblocks);
        cr_assert(pageset_has(e, page_fp(e->kv + (size_t)b * P), 0),
                  "STORE block %u (%s) does not hold a computed page", b,
                  c->done ? "done" : "queued");
        if (e->collect && e->nlisted < 64)
            e->listed[e->nlisted++] = b;
    }
    if (c->done)
        e->store_done_pages += c->pages;
    else
        e->store_queued_pages += c->pages;
}

static void check_copies(tenv *e, const rkv_batch_plan *p)
{
    for (uint32_t i = 0; i < p->num_copies; i++) {
        const rkv_plan_copy *c = &p->copies[i];
        cr_assert_gt(c->pages, 0);
        cr_assert(c->medium == RKV_MEDIUM_HOST || c->medium == RKV_MEDIUM_DISK);
        switch (c->kind) {
        case RKV_TRANSFER_STORE:
            cr_assert_eq(c->req_id, 0);
            cr_assert_eq(c->ticket, 0);
            e->store_copies += c->pages;
            check_store_blocks(e, p, i);
            break;
        case RKV_TRANSFER_LOAD:
        case RKV_TRANSFER_SWAP_IN:
        case RKV_TRANSFER_SWAP_OUT: {
            cr_assert_lt(c->req_id, MAXR);
            cr_assert_neq(c->ticket, 0);
            treq *r = &e->r[c->req_id];
            cr_assert(r->live, "copy for request %llu, not live",
                      (unsigned long long)c->req_id);
            if (c->kind == RKV_TRANSFER_SWAP_OUT) {
                r->swap_out_seen++;
                cr_assert_eq(c->medium, RKV_MEDIUM_HOST);
                /* the source blocks, one per page, all distinct */
                cr_assert_not_null(p->copy_indptr);
                uint32_t b0 = p->copy_indptr[i], b1 = p->copy_indptr[i + 1];
                cr_assert_eq(b1 - b0, c->pages);
                for (uint32_t k = b0; k < b1; k++) {
                    cr_assert_lt(p->copy_blocks[k], e->nblocks);
                    for (uint32_t k2 = b0; k2 < k; k2++)
                        cr_assert_neq(p->copy_blocks[k2], p->copy_blocks[k]);
                }
            } else {
                /* a loading request is waiting: never in this plan */
                for (uint32_t k = 0; k < p->num_reqs; k++)
                    cr_assert_neq(p->req_ids[k], c->req_id,
                                  "request %llu runs while it loads",
                                  (unsigned long long)c->req_id);
                /* the destination blocks: `pages` of them, the host
                 * entry of a ticket before its disk entry */
                cr_assert_not_null(p->copy_indptr);
                uint32_t b0 = p->copy_indptr[i], b1 = p->copy_indptr[i + 1];
                cr_assert_eq(b1 - b0, c->pages, "copy %u lists %u blocks for "
                             "%u pages", i, b1 - b0, c->pages);
                if (c->ticket != r->load_ticket) {
                    r->load_ticket = c->ticket;
                    r->nload_blocks = 0;
                }
                for (uint32_t k = b0; k < b1; k++) {
                    cr_assert_lt(p->copy_blocks[k], e->nblocks);
                    cr_assert_lt(r->nload_blocks, MAXT / P + 1);
                    r->load_blocks[r->nload_blocks++] = p->copy_blocks[k];
                }
                r->load_pending = 1;
                if (c->kind == RKV_TRANSFER_LOAD)
                    r->loads_seen++;
                else
                    r->swap_in_seen++;
            }
            break;
        }
        default:
            cr_assert_fail("copy kind %d", c->kind);
        }
    }
}

/* Verifies the plan on the real KV memory and runs it. */
static void run_plan(tenv *e, const rkv_batch_plan *p)
{
    for (uint32_t q = 0; q < p->num_reqs; q++) {
        uint64_t id = p->req_ids[q];
        cr_assert_lt(id, MAXR);
        treq *r = &e->r[id];
        cr_assert(r->live);
        uint32_t n = p->qo_indptr[q + 1] - p->qo_indptr[q];
        uint32_t pre = p->prefix_len[q];
        cr_assert_leq(pre + n, r->len);
        cr_assert_eq(p->emits_token[q] != 0, pre + n == r->len);
        const uint32_t *bt = p->kv_indices + p->kv_indptr[q];
        for (uint32_t pos = 0; pos < pre; pos++) {
            uint32_t slot = bt[pos / P] * P + pos % P;
            cr_assert_eq(e->kv[slot], r->ph[pos],
                         "request %llu position %u: wrong KV in block %u",
                         (unsigned long long)id, pos, bt[pos / P]);
        }
        for (uint32_t j = 0; j < n; j++) {
            uint32_t pos = pre + j, slot = bt[pos / P] * P + pos % P;
            cr_assert_eq(p->slots[p->qo_indptr[q] + j], slot);
            cr_assert_eq(p->input_tokens[p->qo_indptr[q] + j], r->tok[pos]);
        }
        if (r->load_pending) {
            /* admitted after its load: the pages it got from the host are
             * the blocks the plan listed, in order, in its block table */
            r->load_pending = 0;
            rkv_request_info info;
            OK(rkv_sched_request_info(e->s, id, &info));
            if (info.cached_host_tokens + info.cached_disk_tokens > 0) {
                uint32_t nbt = p->kv_indptr[q + 1] - p->kv_indptr[q], at = 0;
                while (at < nbt && bt[at] != r->load_blocks[0])
                    at++;
                cr_assert_leq(at + r->nload_blocks, nbt, "request %llu: "
                              "load block %u not in its block table",
                              (unsigned long long)id, r->load_blocks[0]);
                for (uint32_t k = 0; k < r->nload_blocks; k++)
                    cr_assert_eq(bt[at + k], r->load_blocks[k], "request "
                                 "%llu: load block %u", (unsigned long long)id,
                                 k);
                r->load_blocks_used++;
            }
        }
        if (r->first_step < 0) {
            r->first_step = e->steps - 1; /* tstep counted it already */
            r->first_cached = p->cached_len[q];
            rkv_request_info info;
            OK(rkv_sched_request_info(e->s, id, &info));
            cr_assert_eq(info.loading, 0);
            cr_assert_leq((uint64_t)info.cached_host_tokens +
                              info.cached_disk_tokens,
                          info.cached_tokens);
            r->first_host = info.cached_host_tokens;
        }
    }
    for (uint32_t q = 0; q < p->num_reqs; q++) {
        treq *r = &e->r[p->req_ids[q]];
        const uint32_t *bt = p->kv_indices + p->kv_indptr[q];
        for (uint32_t pos = p->prefix_len[q];
             pos < p->prefix_len[q] + p->qo_indptr[q + 1] - p->qo_indptr[q];
             pos++) {
            e->kv[bt[pos / P] * P + pos % P] = r->ph[pos];
            if (pos % P == P - 1) /* a full page: one the tree may store */
                (void)pageset_has(e, page_fp(&r->ph[pos + 1 - P]), 1);
        }
    }
}

/* One step (+ commit when the plan runs something); the plan's size. */
static uint32_t tstep(tenv *e)
{
    const rkv_batch_plan *p = eng_sched_step(e->s, e->now, e->tolerate_nomem,
                                             &e->nomem_seen);
    e->steps++;
    check_copies(e, p);
    if (getenv("TS_DEBUG")) {
        rkv_sched_stats ss;
        rkv_sched_get_stats(e->s, &ss);
        fprintf(stderr, "step %lld: %u reqs [", (long long)e->steps - 1, p->num_reqs);
        for (uint32_t q = 0; q < p->num_reqs; q++)
            fprintf(stderr, " %llu(c%u)", (unsigned long long)p->req_ids[q], p->cached_len[q]);
        fprintf(stderr, " ] copies %u loading %llu waiting %llu running %llu free %u\n", p->num_copies,
                (unsigned long long)ss.loading, (unsigned long long)ss.waiting, (unsigned long long)ss.running, rkv_pool_num_free(e->pool));
    }
    uint32_t n = p->num_reqs;
    e->now += 1.0;
    if (n == 0)
        return 0;
    run_plan(e, p);
    int32_t next[MAXR];
    uint8_t fin[MAXR], emits[MAXR];
    uint64_t ids[MAXR];
    cr_assert_leq(n, MAXR);
    for (uint32_t q = 0; q < n; q++) {
        ids[q] = p->req_ids[q];
        emits[q] = p->emits_token[q];
        fin[q] = 0;
        next[q] = emits[q] ? token_of(ids[q], e->r[ids[q]].len) : 0;
    }
    eng_sched_commit(e->s, next, fin, e->now, e->tolerate_nomem, &e->nomem_seen);
    for (uint32_t q = 0; q < n; q++) {
        if (!emits[q])
            continue;
        treq *r = &e->r[ids[q]];
        extend(r, next[q]);
        if (++r->gen >= r->max_new) {
            r->live = 0;
            e->live--;
        }
    }
    return n;
}

static void tdrain(tenv *e, int64_t max_steps)
{
    int64_t k = 0;
    while (e->live > 0) {
        cr_assert_lt(k++, max_steps, "no progress after %lld steps",
                     (long long)max_steps);
        (void)tstep(e);
    }
}

static void no_leak(tenv *e)
{
    rkv_sched_stats st;
    OK(rkv_sched_get_stats(e->s, &st));
    cr_assert_eq(st.waiting + st.running + st.loading, 0);
    /* pending stores finish, then nothing holds a device block */
    uint32_t n = 0;
    rkv_transfer_done d[8];
    OK(rkv_tree_tier_poll(e->tree, d, 8, &n));
    OK(rkv_tree_reset(e->tree));
    OK(rkv_pool_check(e->pool));
    cr_assert_eq(rkv_pool_num_free(e->pool), e->nblocks);
}

/* Runs a request with the shared prefix, then enough others to push its
 * pages off the device (write-back demotes them to host). */
static void warm_host(tenv *e, const int32_t *shared, uint32_t slen)
{
    OK(tsubmit(e, 0, shared, slen, 1, 0));
    tdrain(e, 200);
    int32_t t[48];
    for (uint64_t id = 1; id <= 3; id++) {
        fill_tokens(t, 40, 900 + id);
        OK(tsubmit(e, id, t, 40, 1, 0));
        tdrain(e, 200);
    }
    rkv_match m;
    rkv_tier_match tm;
    OK(rkv_tree_match_tiers(e->tree, 0, shared, slen - 1, NULL,
                            RKV_MATCH_PEEK, &m, &tm));
    cr_assert_gt(tm.host_tokens, 0, "the shared prefix did not reach the "
                 "host tier (device %zu tokens)", m.matched_tokens);
}

/* The start most tests share: the environment (host store of 64 blocks,
 * write-back) with the 28-token shared prefix (key 4242) written, its
 * first 24 tokens warmed onto the host tier. */
static void warm_shared(tenv *e, const rkv_sched_config *c, uint32_t nblocks,
                        int32_t shared[28])
{
    SETUP_OR_SKIP(e, nblocks, 64, c, RKV_WRITE_BACK);
    fill_tokens(shared, 28, 4242);
    warm_host(e, shared, 24);
}

/* Request 6 on the warmed prefix: its first step only starts its load. */
static void submit_loading(tenv *e, const int32_t *shared)
{
    OK(tsubmit(e, 6, shared, 28, 2, 0));
    cr_assert_eq(tstep(e), 0);
    cr_assert_eq(e->r[6].loads_seen, 1);
}

static rkv_sched_config base_cfg(rkv_policy pol, uint32_t max_running)
{
    rkv_sched_config c;
    rkv_sched_config_init(&c);
    c.policy = pol;
    c.max_running = max_running;
    c.max_batch_tokens = 64;
    c.dedup_min_tokens = 0;
    return c;
}

/* With one slot, lpm admits the request whose prefix is on the host (its
 * load takes the slot) before an older unrelated one; the loaded pages
 * are then served from the host, with the right KV. */
Test(sched_tiers, host_hits_ordered_as_cached)
{
    tenv e;
    rkv_sched_config c = base_cfg(RKV_POLICY_LPM, 1);
    int32_t shared[28], other[20];
    warm_shared(&e, &c, 12, shared);
    fill_tokens(other, 20, 777);
    OK(tsubmit(&e, 5, other, 20, 2, 0));   /* older */
    e.now += 1;
    OK(tsubmit(&e, 6, shared, 28, 2, 0));  /* shares 24 tokens, on host */
    int64_t s0 = e.steps;
    cr_assert_eq(tstep(&e), 0, "the load holds the only slot");
    rkv_request_info info;
    OK(rkv_sched_request_info(e.s, 6, &info));
    cr_assert_eq(info.state, RKV_REQ_WAITING);
    cr_assert_eq(info.loading, 1);
    cr_assert_eq(e.r[6].loads_seen, 1);
    tdrain(&e, 400);
    cr_assert_lt(e.r[6].first_step, e.r[5].first_step,
                 "lpm must take the host hit first (steps %lld vs %lld)",
                 (long long)e.r[6].first_step, (long long)e.r[5].first_step);
    cr_assert_eq(e.r[6].first_step, s0 + 1, "admitted right after its load");
    cr_assert_gt(e.r[6].first_host, 0);
    cr_assert_geq(e.r[6].first_cached, e.r[6].first_host);
    rkv_sched_stats st;
    OK(rkv_sched_get_stats(e.s, &st));
    cr_assert_eq(st.loads, 1);
    cr_assert_eq(st.failed_loads, 0);
    cr_assert_eq(st.cached_tokens_by_medium[RKV_MEDIUM_HOST], e.r[6].first_host);
    /* the plan listed the load's destination blocks; run_plan found them
     * in request 6's block table at its admission */
    cr_assert_eq(e.r[6].nload_blocks * P, e.r[6].first_host);
    cr_assert_eq(e.r[6].load_blocks_used, 1);
    no_leak(&e);
    tfini(&e);
}

/* fcfs ignores the cache: the older request goes first, no load ahead. */
Test(sched_tiers, fcfs_does_not_reorder)
{
    tenv e;
    rkv_sched_config c = base_cfg(RKV_POLICY_FCFS, 1);
    int32_t shared[28], other[20];
    warm_shared(&e, &c, 12, shared);
    fill_tokens(other, 20, 777);
    OK(tsubmit(&e, 5, other, 20, 2, 0));
    e.now += 1;
    OK(tsubmit(&e, 6, shared, 28, 2, 0));
    tdrain(&e, 400);
    cr_assert_lt(e.r[5].first_step, e.r[6].first_step);
    no_leak(&e);
    tfini(&e);
}

/* A request waits for its own load only: the step that queues it runs the
 * other request, and the loading one runs once its ticket is done. */
Test(sched_tiers, waits_only_for_own_load)
{
    tenv e;
    rkv_sched_config c = base_cfg(RKV_POLICY_LPM, 2);
    int32_t shared[28], other[12];
    warm_shared(&e, &c, 12, shared);
    fill_tokens(other, 12, 778);
    OK(tsubmit(&e, 6, shared, 28, 3, 0));
    OK(tsubmit(&e, 5, other, 12, 3, 0));
    int64_t s0 = e.steps;
    cr_assert_eq(tstep(&e), 1, "the other request runs beside the load");
    cr_assert_eq(e.r[5].first_step, s0);
    cr_assert_eq(e.r[6].first_step, -1);
    cr_assert_eq(e.r[6].loads_seen, 1);
    tdrain(&e, 400);
    cr_assert_eq(e.r[6].first_step, s0 + 1);
    cr_assert_gt(e.r[6].first_host, 0);
    no_leak(&e);
    tfini(&e);
}

/* Two requests continue the same host prefix and arrive together: the
 * second does not load the pages the first is loading (while LOADING they
 * are neither matchable nor a lower continuation) and does not compute
 * them either: it waits for the first one's ticket and is admitted with
 * the loaded pages on the device. Both finish with the right KV; the
 * prefix is loaded once. */
Test(sched_tiers, shared_prefix_loaded_once)
{
    tenv e;
    rkv_sched_config c = base_cfg(RKV_POLICY_LPM, 4);
    int32_t shared[28], t2[28];
    warm_shared(&e, &c, 16, shared);
    memcpy(t2, shared, sizeof t2);
    fill_tokens(t2 + 24, 4, 99);
    OK(tsubmit(&e, 6, shared, 28, 3, 0));
    OK(tsubmit(&e, 7, t2, 28, 3, 0));
    int64_t s0 = e.steps;
    cr_assert_eq(tstep(&e), 0, "7 waits for 6's load instead of computing");
    rkv_request_info info;
    OK(rkv_sched_request_info(e.s, 7, &info));
    cr_assert_eq(info.state, RKV_REQ_WAITING);
    cr_assert_eq(info.loading, 0, "7 holds no load of its own");
    tdrain(&e, 400);
    rkv_sched_stats st;
    OK(rkv_sched_get_stats(e.s, &st));
    cr_assert_eq(st.failed_loads, 0);
    cr_assert_eq(st.loads, 1, "the shared prefix was loaded %llu times",
                 (unsigned long long)st.loads);
    cr_assert_geq(st.load_waits, 1);
    cr_assert_gt(e.r[6].first_host, 0);
    cr_assert_eq(e.r[7].first_step, s0 + 1, "7 runs once the load is done");
    cr_assert_geq(e.r[7].first_cached, 24, "7 got the loaded prefix "
                  "(cached %u)", e.r[7].first_cached);
    cr_assert_eq(e.r[7].first_host, 0, "on the device: 6's load, not 7's");
    no_leak(&e);
    tfini(&e);
}

/* Aborting a request whose load is queued: the tree holds the loading
 * node's lease until the copy completes; the scheduler lets go of it at
 * the next step's poll. Nothing leaks, rkv_sched_check holds throughout. */
Test(sched_tiers, abort_while_loading)
{
    tenv e;
    rkv_sched_config c = base_cfg(RKV_POLICY_LPM, 2);
    int32_t shared[28];
    warm_shared(&e, &c, 12, shared);
    submit_loading(&e, shared);
    OK(rkv_sched_abort(e.s, 6));
    e.r[6].live = 0;
    e.live--;
    OK(rkv_sched_check(e.s));
    (void)tstep(&e); /* its ticket completes: the lease goes */
    no_leak(&e);
    tfini(&e);
}

/* Loads counted as not worth it (load slower than compute) are not made:
 * the request computes and nothing is loaded. */
Test(sched_tiers, load_not_worth_it_computes)
{
    tenv e;
    rkv_sched_config c = base_cfg(RKV_POLICY_LPM, 2);
    c.compute_ms_per_token = 0.01;
    c.host_load_ms_per_page = 1.0; /* 25x the compute of its 4 tokens */
    int32_t shared[28];
    warm_shared(&e, &c, 12, shared);
    OK(tsubmit(&e, 6, shared, 28, 2, 0));
    tdrain(&e, 400);
    rkv_sched_stats st;
    OK(rkv_sched_get_stats(e.s, &st));
    cr_assert_eq(st.loads, 0);
    cr_assert_eq(e.r[6].first_host, 0);
    no_leak(&e);
    tfini(&e);
}

/* Swap instead of recompute: a small pool preempts; the victim's computed
 * pages go to host (SWAP_OUT in the plan), device eviction takes them, and
 * its resumption loads them back (SWAP_IN) with the right KV. */
static void swap_scenario(int swap, rkv_sched_stats *out)
{
    tenv e;
    rkv_sched_config c = base_cfg(RKV_POLICY_LPM, 4);
    c.swap = swap;
    SETUP_OR_SKIP(&e, 16, 64, &c, RKV_WRITE_BACK);
    int32_t t[12];
    for (uint64_t id = 0; id < 6; id++) {
        fill_tokens(t, 12, 100 + id);
        OK(tsubmit(&e, id, t, 12, 28, 0));
    }
    tdrain(&e, 2000);
    OK(rkv_sched_get_stats(e.s, out));
    cr_assert_gt(out->preemptions, 0, "the scenario must preempt");
    if (swap) {
        uint32_t outs = 0, ins = 0;
        for (uint64_t id = 0; id < 6; id++) {
            outs += (uint32_t)e.r[id].swap_out_seen;
            ins += (uint32_t)e.r[id].swap_in_seen;
        }
        cr_assert_eq(outs, out->swap_outs);
        cr_assert_eq(ins, out->swap_ins);
        cr_assert_gt(out->swap_outs, 0);
        cr_assert_gt(out->swap_out_pages, 0);
        cr_assert_gt(out->swap_ins, 0, "no swapped request came back by load");
    } else {
        cr_assert_eq(out->swap_outs + out->swap_ins, 0);
    }
    no_leak(&e);
    tfini(&e);
}

Test(sched_tiers, swap_on_preempt_round_trip)
{
    rkv_sched_stats on, off;
    swap_scenario(1, &on);
    swap_scenario(0, &off);
    /* what a resumed request loaded it did not compute again */
    cr_assert_leq(on.computed_tokens, off.computed_tokens);
}

/* Write-through lists its stores in the plans (STORE copies), and the
 * pages the tree stored equal the pages listed. */
Test(sched_tiers, plan_lists_stores)
{
    tenv e;
    rkv_sched_config c = base_cfg(RKV_POLICY_LPM, 2);
    SETUP_OR_SKIP(&e, 12, 64, &c, RKV_WRITE_THROUGH);
    int32_t t[24];
    fill_tokens(t, 24, 55);
    OK(tsubmit(&e, 0, t, 24, 4, 0));
    tdrain(&e, 200);
    (void)tstep(&e); /* an empty step lists the last commit's stores */
    rkv_tier_stats ts;
    OK(rkv_tree_tier_stats(e.tree, &ts));
    cr_assert_gt(ts.stores_blocks[RKV_MEDIUM_HOST], 0);
    cr_assert_eq(e.store_copies, ts.stores_blocks[RKV_MEDIUM_HOST]);
    no_leak(&e);
    tfini(&e);
}

/* Issue 12: write-through STORE entries name their source device blocks
 * (they were a count only). Every listed block held a computed page when
 * listed (check_store_blocks); here the listed blocks are exactly the
 * request's cached pages, and the host copies made from them carry the
 * right bytes: with the device KV overwritten, a second request loads the
 * prefix back and attends to the right KV (run_plan). */
Test(sched_tiers, store_copies_list_source_blocks)
{
    tenv e;
    rkv_sched_config c = base_cfg(RKV_POLICY_LPM, 2);
    SETUP_OR_SKIP(&e, 16, 64, &c, RKV_WRITE_THROUGH);
    e.collect = 1;
    int32_t t[24];
    fill_tokens(t, 24, 56);
    OK(tsubmit(&e, 0, t, 24, 4, 0));
    tdrain(&e, 200);
    (void)tstep(&e); /* lists the last commit's stores and runs the rest */
    (void)tstep(&e);
    OK(rkv_tree_check(e.tree));
    rkv_tier_stats ts;
    OK(rkv_tree_tier_stats(e.tree, &ts));
    cr_assert_eq(ts.pending_stores, 0);
    /* queued at a commit, taken by the next step's poll: that step's plan
     * lists them done (their blocks may be evicted later in the step) */
    cr_assert_eq(e.store_queued_pages, 0);
    cr_assert_eq(e.store_done_pages, ts.stores_blocks[RKV_MEDIUM_HOST]);
    cr_assert_eq(e.nlisted, e.store_done_pages);
    /* the listed blocks are the cached pages of the request's tokens */
    treq *r = &e.r[0];
    rkv_block_id bl[MAXT / P + 1];
    rkv_match m;
    OK(rkv_tree_match(e.tree, 0, r->tok, r->len, bl, RKV_MATCH_PEEK, &m));
    cr_assert_eq(m.num_blocks, e.nlisted, "%zu cached pages, %u listed",
                 m.num_blocks, e.nlisted);
    for (size_t k = 0; k < m.num_blocks; k++) {
        uint32_t found = 0;
        for (uint32_t j = 0; j < e.nlisted; j++)
            found += e.listed[j] == bl[k];
        cr_assert_eq(found, 1, "cached block %u listed %u times", bl[k], found);
    }
    /* everything off the device (write-through: already on the host, so
     * nothing is stored now), the device bytes destroyed */
    uint32_t freed = 0;
    OK(rkv_tree_evict(e.tree, (uint32_t)m.num_blocks, &freed));
    OK(rkv_tree_check(e.tree));
    cr_assert_eq(freed, m.num_blocks);
    cr_assert_eq(rkv_pool_num_free(e.pool), e.nblocks);
    memset(e.kv, 0xee, (size_t)e.nblocks * P * sizeof *e.kv);
    OK(tsubmit(&e, 1, t, 24, 2, 0));
    tdrain(&e, 200);
    OK(rkv_tree_check(e.tree));
    cr_assert_gt(e.r[1].first_host, 0, "the prefix came back from the host");
    no_leak(&e);
    tfini(&e);
}

/* Write-back: a device eviction's demotion lists its source blocks as
 * done STORE entries, one page each time the tree copied one down. */
Test(sched_tiers, demotions_list_source_blocks)
{
    tenv e;
    rkv_sched_config c = base_cfg(RKV_POLICY_LPM, 2);
    int32_t shared[28];
    warm_shared(&e, &c, 12, shared);
    (void)tstep(&e); /* the last commit's demotions */
    OK(rkv_tree_check(e.tree));
    rkv_tier_stats ts;
    OK(rkv_tree_tier_stats(e.tree, &ts));
    cr_assert_gt(e.store_done_pages, 0);
    cr_assert_eq(e.store_queued_pages, 0, "write-back queues nothing");
    cr_assert_eq(e.store_done_pages, ts.stores_blocks[RKV_MEDIUM_HOST]);
    no_leak(&e);
    tfini(&e);
}

/* Selective write-through (k = 2) under the scheduler: a prompt admitted
 * three times has its cached pages hit twice by admission, so they are
 * copied down. Admission's match must count the hits (it once used a match
 * that never did, and selective stored nothing). */
Test(sched_tiers, selective_stores_hit_pages)
{
    tenv e;
    rkv_sched_config c = base_cfg(RKV_POLICY_LPM, 2);
    SETUP_OR_SKIP(&e, 24, 64, &c, RKV_WRITE_SELECTIVE);
    int32_t t[24];
    fill_tokens(t, 24, 66);
    rkv_tier_stats ts;
    for (uint64_t id = 0; id < 3; id++) {
        OK(tsubmit(&e, id, t, 24, 2, 0));
        tdrain(&e, 200);
        OK(rkv_tree_check(e.tree));
        OK(rkv_tree_tier_stats(e.tree, &ts));
        if (id < 2) /* hit fewer than k times: nothing copied down yet */
            cr_assert_eq(ts.stores_blocks[RKV_MEDIUM_HOST] +
                             ts.pending_stores, 0);
    }
    (void)tstep(&e); /* polls: the queued stores run */
    OK(rkv_tree_check(e.tree));
    OK(rkv_tree_tier_stats(e.tree, &ts));
    /* the 23 tokens admission may match: 5 full pages */
    cr_assert_geq(ts.stores_blocks[RKV_MEDIUM_HOST], 5, "selective stored "
                  "%llu pages", (unsigned long long)ts.stores_blocks[RKV_MEDIUM_HOST]);
    cr_assert_gt(ts.hit_tokens[RKV_MEDIUM_DEVICE], 0);
    no_leak(&e);
    tfini(&e);
}

/* The host store fails its next copy: the load fails, the request
 * computes those tokens and finishes with the right KV; nothing leaks. */
Test(sched_tiers, failed_load_falls_back_to_compute)
{
    tenv e;
    rkv_sched_config c = base_cfg(RKV_POLICY_LPM, 2);
    int32_t shared[28];
    warm_shared(&e, &c, 12, shared);
    submit_loading(&e, shared);
    rkv_store_fail_after(e.host, 1);
    tdrain(&e, 400);
    rkv_sched_stats st;
    OK(rkv_sched_get_stats(e.s, &st));
    cr_assert_eq(st.failed_loads, 1);
    cr_assert_eq(e.r[6].first_host, 0, "a failed load serves nothing");
    no_leak(&e);
    tfini(&e);
}

/* Failure injection in a tiers scenario (host hits, loads, preemption
 * with swap): each of the scheduler's own allocations (SCHED), each of the
 * tree's node-memory allocations (TREE) and each of the host store's
 * copies (STORE) fails in turn. A failed call surfaces as NOMEM with the
 * scheduler consistent and the retry succeeds; a failed copy is a failed
 * load (computed instead) or a store not made; every request finishes with
 * the right KV (run_plan checks every attended position) and nothing
 * leaks. */
enum { SCHED_ALLOCS, TREE_ALLOCS, STORE_COPIES };

static uint64_t oom_scenario(int which, int64_t fail_k, uint64_t *surfaced)
{
    tenv e;
    rkv_sched_config c = base_cfg(RKV_POLICY_LPM, 3);
    c.swap = 1;
    if (!tsetup(&e, 16, 64, &c, RKV_WRITE_BACK))
        return 0;
    e.tolerate_nomem = 1;
    int32_t shared[28];
    fill_tokens(shared, 28, 4242);
    warm_host(&e, shared, 24);
    uint64_t tree0 = rkv_tree_debug_alloc_calls(e.tree);
    if (which == SCHED_ALLOCS)
        rkv_sched_debug_fail_alloc_after(fail_k < 0 ? INT64_MAX / 2 : fail_k);
    else if (which == TREE_ALLOCS && fail_k >= 0)
        rkv_tree_debug_fail_alloc_after(e.tree, fail_k);
    else if (which == STORE_COPIES && fail_k >= 0)
        rkv_store_fail_after(e.host, (uint32_t)fail_k + 1);
    int32_t t[40];
    for (uint64_t id = 4; id < 10; id++) {
        memcpy(t, shared, sizeof shared);
        fill_tokens(t + 24, 8, 300 + id);
        rkv_status st = tsubmit(&e, id, id % 2 ? t : t + 8, 24, 20, 0);
        if (st == RKV_ERR_NOMEM) {
            OK(rkv_sched_check(e.s));
            e.nomem_seen++;
            st = tsubmit(&e, id, id % 2 ? t : t + 8, 24, 20, 0);
        }
        OK(st);
    }
    tdrain(&e, 4000);
    uint64_t used = 0;
    if (which == SCHED_ALLOCS) {
        used = (uint64_t)(INT64_MAX / 2 - rkv_sched_debug_alloc_countdown());
        rkv_sched_debug_fail_alloc_after(-1);
    } else if (which == TREE_ALLOCS) {
        used = rkv_tree_debug_alloc_calls(e.tree) - tree0;
        rkv_tree_debug_fail_alloc_after(e.tree, -1);
    } else {
        rkv_tier_stats ts;
        OK(rkv_tree_tier_stats(e.tree, &ts));
        used = ts.failed_loads + ts.failed_stores; /* the failure happened */
        rkv_store_fail_after(e.host, 0);
    }
    *surfaced += e.nomem_seen;
    no_leak(&e);
    tfini(&e);
    return used;
}

Test(sched_tiers, sched_allocations_fail_one_by_one, .timeout = 300)
{
    uint64_t surfaced = 0;
    uint64_t n = oom_scenario(SCHED_ALLOCS, -1, &surfaced);
    if (n == 0)
        cr_skip_test("the tree's tiers are not built (placeholders)");
    cr_assert_eq(surfaced, 0);
    for (uint64_t k = 0; k < n; k++) {
        uint64_t before = surfaced;
        oom_scenario(SCHED_ALLOCS, (int64_t)k, &surfaced);
        cr_assert_leq(surfaced, before + 1);
    }
    cr_assert_gt(surfaced, 0);
}

Test(sched_tiers, tree_allocations_fail_one_by_one, .timeout = 300)
{
    uint64_t surfaced = 0;
    uint64_t n = oom_scenario(TREE_ALLOCS, -1, &surfaced);
    if (n == 0)
        cr_skip_test("the tree's tiers are not built (placeholders)");
    cr_assert_eq(surfaced, 0);
    for (uint64_t k = 0; k < n; k++) {
        uint64_t before = surfaced;
        oom_scenario(TREE_ALLOCS, (int64_t)k, &surfaced);
        cr_assert_leq(surfaced, before + 1);
    }
    cr_log_info("%llu tree allocations, each failed once; %llu surfaced",
                (unsigned long long)n, (unsigned long long)surfaced);
}

/* Every copy of the host store fails in turn, until the scenario makes
 * fewer copies than the failure's position. */
Test(sched_tiers, store_copies_fail_one_by_one, .timeout = 300)
{
    uint64_t surfaced = 0;
    if (oom_scenario(SCHED_ALLOCS, -1, &surfaced) == 0)
        cr_skip_test("the tree's tiers are not built (placeholders)");
    uint64_t k = 0, failed = 0;
    for (; k < 400; k++) {
        uint64_t f = oom_scenario(STORE_COPIES, (int64_t)k, &surfaced);
        if (f == 0)
            break; /* past the last copy */
        failed++;
    }
    cr_assert_gt(failed, 0, "no copy failed: the injection did not reach");
    cr_assert_lt(k, 400, "copies kept failing past 400");
    cr_assert_eq(surfaced, 0, "a failed copy surfaced from the scheduler");
}

/* Config ranges of the tier fields. */
Test(sched_tiers, config_ranges)
{
    rkv_pool *pool;
    rkv_tree *tree;
    eng_pool_tree(8, P, &pool, &tree);
    rkv_sched_config c;
    rkv_sched_config_init(&c);
    cr_assert_eq(c.use_tiers, 1);
    cr_assert_eq(c.swap, 0);
    rkv_sched *s = NULL;
    double bad[] = {-1.0, 1.0 / 0.0, 0.0 / 0.0};
    for (int f = 0; f < 3; f++) {
        for (int b = 0; b < 3; b++) {
            rkv_sched_config x = c;
            double *fld = f == 0 ? &x.compute_ms_per_token
                          : f == 1 ? &x.host_load_ms_per_page
                                   : &x.disk_load_ms_per_page;
            *fld = bad[b];
            cr_assert_eq(rkv_sched_create(tree, &x, &s), RKV_ERR_INVALID_ARG);
            cr_assert_null(s);
        }
    }
    /* without tiers: no copies, no loads, swap is a no-op */
    c.swap = 1;
    OK(rkv_sched_create(tree, &c, &s));
    int32_t t[10];
    fill_tokens(t, 10, 1);
    rkv_request_desc d;
    memset(&d, 0, sizeof d);
    d.id = 1;
    d.prompt = t;
    d.prompt_len = 10;
    d.max_new_tokens = 1;
    OK(rkv_sched_submit(s, &d));
    const rkv_batch_plan *p;
    OK(rkv_sched_step(s, 0, &p));
    cr_assert_eq(p->num_reqs, 1);
    cr_assert_eq(p->num_copies, 0);
    OK(rkv_sched_check(s));
    rkv_sched_destroy(s);
    rkv_tree_destroy(tree);
    rkv_pool_destroy(pool);
}
