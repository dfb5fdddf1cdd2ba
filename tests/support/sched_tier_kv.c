/*
 * tests/support/sched_tier_kv.c -- see sched_tier_kv.h.
 */
#include "tests/support/sched_tier_kv.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "radix/tree_debug.h"
#include "residency/tier_debug.h"
#include "tests/test_sched_engine.h"

#define P STK_P
#define MAXR STK_MAXR
#define MAXT STK_MAXT

uint32_t stk_token_bytes = 4;

int stk_setup(stk_env *e, rkv_device device, uint32_t nblocks,
              uint32_t host_blocks, uint32_t disk_blocks,
              const rkv_sched_config *cfg, int write_policy)
{
    memset(e, 0, sizeof *e);
    rkv_pool_config pc = tu_kv_config(nblocks, P, 1, 1, 2, device);
    pc.dtype = RKV_DTYPE_F32;
    rkv_status st = rkv_pool_create(&pc, &e->pool);
    if (st == RKV_ERR_NO_DEVICE)
        return STK_NO_DEVICE;
    cr_assert_eq(st, RKV_OK, "pool: %s", rkv_last_error());
    rkv_tree_config trc;
    rkv_tree_config_init(&trc);
    trc.token_bytes = stk_token_bytes;
    OK(rkv_tree_create(e->pool, &trc, &e->tree));
    e->nblocks = nblocks;
    e->bb = rkv_pool_bytes_per_block(e->pool);
    cr_assert_geq(e->bb, P * sizeof(uint64_t));
    e->blk = malloc(e->bb);
    cr_assert_not_null(e->blk);
    if (device == RKV_DEVICE_HOST) {
        void *k = NULL, *v = NULL;
        OK(rkv_pool_layer_kv(e->pool, 0, &k, &v));
        e->kv = k;
    }
    rkv_store_config sc;
    rkv_tier_config tc;
    rkv_tier_config_init(&tc);
    if (host_blocks > 0) {
        sc = tu_store_config(RKV_MEDIUM_HOST, host_blocks, e->bb, NULL);
        if (device == RKV_DEVICE_HOST)
            sc.pinned = 0;
        st = rkv_store_create(&sc, &e->host);
        tc.host = e->host;
    }
    if (st == RKV_OK && disk_blocks > 0) {
        sc = tu_store_config(RKV_MEDIUM_DISK, disk_blocks, e->bb, NULL);
        strcpy(e->dir, "/tmp/rkv_sched_tier_XXXXXX");
        cr_assert_not_null(mkdtemp(e->dir));
        sc.path = e->dir;
        st = rkv_store_create(&sc, &e->disk);
        tc.disk = e->disk;
    }
    if (st == RKV_OK) {
        tc.write_policy = write_policy;
        st = rkv_tree_attach_tiers(e->tree, &tc);
    }
    if (st == RKV_ERR_UNSUPPORTED) {
        stk_fini(e);
        return STK_NO_TIERS;
    }
    cr_assert_eq(st, RKV_OK, "tiers: %s", rkv_last_error());
    e->cfg = *cfg;
    OK(rkv_sched_create(e->tree, cfg, &e->s));
    e->pageset_cap = 1u << 14;
    e->pageset = calloc(e->pageset_cap, sizeof *e->pageset);
    cr_assert_not_null(e->pageset);
    return STK_READY;
}

void stk_fini(stk_env *e)
{
    free(e->pageset);
    free(e->blk);
    rkv_sched_destroy(e->s);
    rkv_tree_destroy(e->tree);
    rkv_store_destroy(e->host);
    rkv_store_destroy(e->disk);
    rkv_pool_destroy(e->pool);
    if (e->dir[0] != '\0')
        (void)rmdir(e->dir);
}

rkv_sched_config stk_base_cfg(rkv_policy pol, uint32_t max_running)
{
    rkv_sched_config c;
    rkv_sched_config_init(&c);
    c.policy = pol;
    c.max_running = max_running;
    c.max_batch_tokens = 64;
    c.dedup_min_tokens = 0;
    return c;
}

/* Block b's P K values; b must be allocated (why names the reader). */
static void kv_read(stk_env *e, uint32_t b, uint64_t out[P], const char *why)
{
    cr_assert_gt(rkv_pool_refcount(e->pool, b), 0, "%s: block %u is free", why, b);
    if (e->kv != NULL) {
        memcpy(out, e->kv + (size_t)b * P, P * sizeof *out);
        return;
    }
    OK(rkv_pool_copy_to_host(e->pool, 1, &b, e->blk));
    memcpy(out, e->blk, P * sizeof *out);
}

/* Block b's K, allocated or not: a done STORE's or a swap-out's source
 * block may be free already (the copy was made, then the block freed),
 * and the pool's copy refuses free blocks. */
static void kv_peek(stk_env *e, uint32_t b, uint64_t out[P])
{
    if (e->kv != NULL) {
        memcpy(out, e->kv + (size_t)b * P, P * sizeof *out);
        return;
    }
    cr_assert_not_null(e->peek, "a CUDA pool needs the test's peek");
    e->peek(e, b, out);
}

void stk_kv_clobber(stk_env *e)
{
    if (e->kv != NULL) {
        memset(e->kv, 0xee, (size_t)e->nblocks * P * sizeof *e->kv);
        return;
    }
    cr_assert_not_null(e->clobber, "a CUDA pool needs the test's clobber");
    e->clobber(e);
}

/* Writes K of token `off` in block b (the rest of the block unchanged). */
static void kv_write(stk_env *e, uint32_t b, uint32_t off, uint64_t v)
{
    if (e->kv != NULL) {
        e->kv[(size_t)b * P + off] = v;
        return;
    }
    OK(rkv_pool_copy_to_host(e->pool, 1, &b, e->blk));
    memcpy(e->blk + (size_t)off * sizeof v, &v, sizeof v);
    OK(rkv_pool_copy_from_host(e->pool, 1, &b, e->blk));
}

static void extend(stk_req *r, int32_t t)
{
    cr_assert_lt(r->len, MAXT);
    r->tok[r->len] = t;
    r->ph[r->len] = eng_mix(r->len ? r->ph[r->len - 1] : eng_mix(r->ns, 77),
                            (uint64_t)t);
    r->len++;
}

rkv_status stk_submit(stk_env *e, uint64_t id, const int32_t *prompt,
                      uint32_t len, uint32_t max_new)
{
    cr_assert_lt(id, MAXR);
    rkv_request_desc d = tu_request(id, prompt, len, max_new);
    d.arrival_ms = e->now;
    rkv_status st = rkv_sched_submit(e->s, &d);
    if (st != RKV_OK)
        return st;
    stk_req *r = &e->r[id];
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
static int pageset_has(stk_env *e, uint64_t fp, int add)
{
    uint32_t mask = e->pageset_cap - 1;
    for (uint32_t i = (uint32_t)fp & mask;; i = (i + 1) & mask) {
        if (e->pageset[i] == fp)
            return 1;
        if (e->pageset[i] == 0) {
            if (e->pageset_n * 2 > e->pageset_cap)
                return 1;
            if (!add)
                return 0;
            e->pageset[i] = fp;
            e->pageset_n++;
            return 1;
        }
    }
}

/* A STORE from the device lists its source blocks (issue 12): each holds,
 * when the plan is made, the bytes of a full page the engine computed --
 * the page the tree stores (queued) or stored (done) from it. */
static void check_store_blocks(stk_env *e, const rkv_batch_plan *p, uint32_t i)
{
    const rkv_plan_copy *c = &p->copies[i];
    uint32_t b0 = p->copy_indptr[i], b1 = p->copy_indptr[i + 1];
    if (b1 == b0)
        return; /* host -> disk, or dropped by a full log: a count */
    cr_assert_eq(b1 - b0, c->pages);
    uint64_t k[P];
    for (uint32_t j = b0; j < b1; j++) {
        uint32_t b = p->copy_blocks[j];
        cr_assert_lt(b, e->nblocks);
        if (c->done) /* made, and the block possibly freed right after */
            kv_peek(e, b, k);
        else /* queued: the block keeps the page until the poll runs it */
            kv_read(e, b, k, "STORE queued");
        cr_assert(pageset_has(e, page_fp(k), 0),
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

/* A SWAP_OUT's source blocks, one per page, all distinct, hold the
 * victim's computed pages (the store may have run already: a demotion
 * that met it ran it and freed the block, hence a peek). */
static void check_swap_out(stk_env *e, const rkv_batch_plan *p, uint32_t i)
{
    cr_assert_eq(p->copies[i].medium, RKV_MEDIUM_HOST);
    uint32_t b0 = p->copy_indptr[i], b1 = p->copy_indptr[i + 1];
    uint64_t k[P];
    for (uint32_t j = b0; j < b1; j++) {
        cr_assert_lt(p->copy_blocks[j], e->nblocks);
        for (uint32_t j2 = b0; j2 < j; j2++)
            cr_assert_neq(p->copy_blocks[j2], p->copy_blocks[j]);
        kv_peek(e, p->copy_blocks[j], k);
        cr_assert(pageset_has(e, page_fp(k), 0),
                  "SWAP_OUT block %u holds no computed page", p->copy_blocks[j]);
    }
}

/* A LOAD / SWAP_IN: its request is waiting (never in this plan); the
 * destination blocks, the host entry of a ticket before its disk entry,
 * are recorded for run_plan to find at the request's admission. */
static void note_load(stk_env *e, const rkv_batch_plan *p, uint32_t i)
{
    const rkv_plan_copy *c = &p->copies[i];
    stk_req *r = &e->r[c->req_id];
    for (uint32_t k = 0; k < p->num_reqs; k++)
        cr_assert_neq(p->req_ids[k], c->req_id,
                      "request %llu runs while it loads",
                      (unsigned long long)c->req_id);
    if (c->ticket != r->load_ticket) {
        r->load_ticket = c->ticket;
        r->nload_blocks = 0;
    }
    for (uint32_t j = p->copy_indptr[i]; j < p->copy_indptr[i + 1]; j++) {
        cr_assert_lt(p->copy_blocks[j], e->nblocks);
        cr_assert_lt(r->nload_blocks, MAXT / P + 1);
        r->load_blocks[r->nload_blocks++] = p->copy_blocks[j];
    }
    r->load_pending = 1;
    if (c->kind == RKV_TRANSFER_LOAD)
        r->loads_seen++;
    else
        r->swap_in_seen++;
}

static void check_copies(stk_env *e, const rkv_batch_plan *p)
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
            cr_assert(e->r[c->req_id].live, "copy for request %llu, not live",
                      (unsigned long long)c->req_id);
            /* the blocks: `pages` of them */
            cr_assert_not_null(p->copy_indptr);
            uint32_t b0 = p->copy_indptr[i], b1 = p->copy_indptr[i + 1];
            cr_assert_eq(b1 - b0, c->pages, "copy %u lists %u blocks for "
                         "%u pages", i, b1 - b0, c->pages);
            if (c->kind == RKV_TRANSFER_SWAP_OUT) {
                e->r[c->req_id].swap_out_seen++;
                check_swap_out(e, p, i);
            } else {
                note_load(e, p, i);
            }
            break;
        }
        default:
            cr_assert_fail("copy kind %d", c->kind);
        }
    }
}

/* Request q of the plan, admitted after its load: the pages it got from
 * a lower tier are the blocks the plan listed, in order, in its block
 * table. */
static void check_load_blocks(stk_env *e, const rkv_batch_plan *p, uint32_t q,
                              const rkv_request_info *info)
{
    uint64_t id = p->req_ids[q];
    stk_req *r = &e->r[id];
    r->load_pending = 0;
    if (info->cached_host_tokens + info->cached_disk_tokens == 0)
        return;
    const uint32_t *bt = p->kv_indices + p->kv_indptr[q];
    uint32_t nbt = p->kv_indptr[q + 1] - p->kv_indptr[q], at = 0;
    while (at < nbt && bt[at] != r->load_blocks[0])
        at++;
    cr_assert_leq(at + r->nload_blocks, nbt, "request %llu: load block %u "
                  "not in its block table", (unsigned long long)id,
                  r->load_blocks[0]);
    for (uint32_t k = 0; k < r->nload_blocks; k++)
        cr_assert_eq(bt[at + k], r->load_blocks[k], "request %llu: load "
                     "block %u", (unsigned long long)id, k);
    r->load_blocks_used++;
}

/* Verifies every attended position in the pool's KV, then writes the
 * computed ones (the engine's "forward pass"). */
static void run_plan(stk_env *e, const rkv_batch_plan *p)
{
    uint64_t k[P];
    for (uint32_t q = 0; q < p->num_reqs; q++) {
        uint64_t id = p->req_ids[q];
        cr_assert_lt(id, MAXR);
        stk_req *r = &e->r[id];
        cr_assert(r->live);
        uint32_t n = p->qo_indptr[q + 1] - p->qo_indptr[q];
        uint32_t pre = p->prefix_len[q];
        cr_assert_leq(pre + n, r->len);
        cr_assert_eq(p->emits_token[q] != 0, pre + n == r->len);
        const uint32_t *bt = p->kv_indices + p->kv_indptr[q];
        for (uint32_t pos = 0; pos < pre; pos++) {
            if (pos % P == 0)
                kv_read(e, bt[pos / P], k, "attended");
            cr_assert_eq(k[pos % P], r->ph[pos],
                         "request %llu position %u: wrong KV in block %u",
                         (unsigned long long)id, pos, bt[pos / P]);
        }
        for (uint32_t j = 0; j < n; j++) {
            uint32_t pos = pre + j, slot = bt[pos / P] * P + pos % P;
            cr_assert_eq(p->slots[p->qo_indptr[q] + j], slot);
            cr_assert_eq(p->input_tokens[p->qo_indptr[q] + j], r->tok[pos]);
        }
        rkv_request_info info;
        OK(rkv_sched_request_info(e->s, id, &info));
        if (r->load_pending)
            check_load_blocks(e, p, q, &info);
        if (r->first_step < 0) {
            r->first_step = e->steps - 1; /* stk_step counted it already */
            r->first_cached = p->cached_len[q];
            cr_assert_eq(info.loading, 0);
            cr_assert_leq((uint64_t)info.cached_host_tokens +
                              info.cached_disk_tokens,
                          info.cached_tokens);
            r->first_host = info.cached_host_tokens;
            r->first_disk = info.cached_disk_tokens;
        }
    }
    for (uint32_t q = 0; q < p->num_reqs; q++) {
        stk_req *r = &e->r[p->req_ids[q]];
        const uint32_t *bt = p->kv_indices + p->kv_indptr[q];
        uint32_t end = p->prefix_len[q] + p->qo_indptr[q + 1] - p->qo_indptr[q];
        for (uint32_t pos = p->prefix_len[q]; pos < end; pos++) {
            kv_write(e, bt[pos / P], pos % P, r->ph[pos]);
            if (pos % P == P - 1) /* a full page: one the tree may store */
                (void)pageset_has(e, page_fp(&r->ph[pos + 1 - P]), 1);
        }
    }
}

static void debug_step(stk_env *e, const rkv_batch_plan *p)
{
    rkv_sched_stats ss;
    OK(rkv_sched_get_stats(e->s, &ss));
    fprintf(stderr, "step %lld: %u reqs [", (long long)e->steps - 1, p->num_reqs);
    for (uint32_t q = 0; q < p->num_reqs; q++)
        fprintf(stderr, " %llu(c%u)", (unsigned long long)p->req_ids[q],
                p->cached_len[q]);
    fprintf(stderr, " ] copies %u loading %llu waiting %llu running %llu "
            "inflight %u free %u\n", p->num_copies,
            (unsigned long long)ss.loading, (unsigned long long)ss.waiting,
            (unsigned long long)ss.running, rkv_tree_debug_copy_inflight(e->tree),
            rkv_pool_num_free(e->pool));
}

uint32_t stk_step(stk_env *e)
{
    const rkv_batch_plan *p = eng_sched_step(e->s, e->now, e->tolerate_nomem,
                                             &e->nomem_seen);
    OK(rkv_tree_check(e->tree));
    e->steps++;
    check_copies(e, p);
    if (getenv("TS_DEBUG") != NULL)
        debug_step(e, p);
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
    OK(rkv_tree_check(e->tree));
    for (uint32_t q = 0; q < n; q++) {
        if (!emits[q])
            continue;
        stk_req *r = &e->r[ids[q]];
        extend(r, next[q]);
        if (++r->gen >= r->max_new) {
            r->live = 0;
            e->live--;
        }
    }
    return n;
}

void stk_steps(stk_env *e, int n)
{
    for (int k = 0; k < n; k++)
        (void)stk_step(e);
}

void stk_drain(stk_env *e, int64_t max_steps)
{
    int64_t k = 0;
    while (e->live > 0) {
        cr_assert_lt(k++, max_steps, "no progress after %lld steps",
                     (long long)max_steps);
        (void)stk_step(e);
    }
}

void stk_settle(stk_env *e)
{
    rkv_transfer_done d[8];
    for (uint32_t i = 0; i < 1000000; i++) {
        rkv_tier_stats ts;
        OK(rkv_tree_tier_stats(e->tree, &ts));
        if (ts.pending_loads + ts.pending_stores == 0 &&
            rkv_tree_debug_copy_inflight(e->tree) == 0)
            return;
        uint32_t n = 0;
        OK(rkv_tree_tier_poll(e->tree, d, 8, &n));
        OK(rkv_tree_check(e->tree));
    }
    cr_assert_fail("tier copies never completed");
}

static void no_leak(stk_env *e)
{
    rkv_sched_stats st;
    OK(rkv_sched_get_stats(e->s, &st));
    cr_assert_eq(st.waiting + st.running + st.loading, 0);
    /* pending stores finish, then nothing holds a device block */
    stk_settle(e);
    OK(rkv_tree_reset(e->tree));
    OK(rkv_tree_check(e->tree));
    OK(rkv_pool_check(e->pool));
    cr_assert_eq(rkv_pool_num_free(e->pool), e->nblocks);
}

void stk_finish(stk_env *e)
{
    no_leak(e);
    stk_fini(e);
}

void stk_warm_lower(stk_env *e, const int32_t *shared, uint32_t slen,
                    uint32_t others, rkv_tier_match *tm)
{
    OK(stk_submit(e, 0, shared, slen, 1));
    stk_drain(e, 200);
    int32_t t[48];
    for (uint64_t id = 1; id <= others; id++) {
        fill_tokens(t, 40, 900 + id);
        OK(stk_submit(e, id, t, 40, 1));
        stk_drain(e, 200);
    }
    rkv_match m;
    OK(rkv_tree_match_tiers(e->tree, 0, shared, slen - 1, NULL,
                            RKV_MATCH_PEEK, &m, tm));
    cr_assert_gt(tm->lower_tokens, 0, "the shared prefix did not reach a "
                 "lower tier (device %zu tokens)", m.matched_tokens);
}

void stk_warm_host(stk_env *e, const int32_t *shared, uint32_t slen)
{
    rkv_tier_match tm;
    stk_warm_lower(e, shared, slen, 3, &tm);
    cr_assert_gt(tm.host_tokens, 0, "the shared prefix did not reach the "
                 "host tier (disk %zu tokens)", (size_t)tm.disk_tokens);
}

void stk_warm_shared(stk_env *e, stk_setup_fn setup, const rkv_sched_config *c,
                     uint32_t nblocks, int32_t shared[28])
{
    setup(e, nblocks, 64, c, RKV_WRITE_BACK);
    fill_tokens(shared, 28, 4242);
    stk_warm_host(e, shared, 24);
}

void stk_warm_base(stk_env *e, stk_setup_fn setup, rkv_policy pol,
                   uint32_t max_running, uint32_t nblocks, int32_t shared[28])
{
    rkv_sched_config c = stk_base_cfg(pol, max_running);
    stk_warm_shared(e, setup, &c, nblocks, shared);
}

void stk_submit_pair(stk_env *e, const int32_t shared[28], int32_t t2[28])
{
    memcpy(t2, shared, 28 * sizeof *t2);
    fill_tokens(t2 + 24, 4, 99);
    OK(stk_submit(e, 6, shared, 28, 3));
    OK(stk_submit(e, 7, t2, 28, 3));
}

void stk_submit_beside(stk_env *e, const int32_t shared[28], int32_t other[12],
                       uint32_t other_new)
{
    fill_tokens(other, 12, 778);
    OK(stk_submit(e, 6, shared, 28, 3));
    OK(stk_submit(e, 5, other, 12, other_new));
}

void stk_store_through(stk_env *e, stk_setup_fn setup, uint32_t nblocks,
                       uint64_t key, int32_t t[24])
{
    rkv_sched_config c = stk_base_cfg(RKV_POLICY_LPM, 2);
    setup(e, nblocks, 64, &c, RKV_WRITE_THROUGH);
    e->collect = 1;
    fill_tokens(t, 24, key);
    OK(stk_submit(e, 0, t, 24, 4));
    stk_drain(e, 200);
}

/* The listed STORE blocks (collect) are exactly the cached pages of
 * request id's tokens, each once; their count in *num_blocks. */
static void check_listed_are_cached(stk_env *e, uint64_t id, size_t *num_blocks)
{
    stk_req *r = &e->r[id];
    rkv_block_id bl[MAXT / P + 1];
    rkv_match m;
    OK(rkv_tree_match(e->tree, 0, r->tok, r->len, bl, RKV_MATCH_PEEK, &m));
    cr_assert_eq(m.num_blocks, e->nlisted, "%zu cached pages, %u listed",
                 m.num_blocks, e->nlisted);
    for (size_t k = 0; k < m.num_blocks; k++) {
        uint32_t found = 0;
        for (uint32_t j = 0; j < e->nlisted; j++)
            found += e->listed[j] == bl[k];
        cr_assert_eq(found, 1, "cached block %u listed %u times", bl[k], found);
    }
    *num_blocks = m.num_blocks;
}

void stk_reload_from_host(stk_env *e, const int32_t t[24])
{
    size_t nb = 0;
    check_listed_are_cached(e, 0, &nb);
    uint32_t freed = 0;
    OK(rkv_tree_evict(e->tree, (uint32_t)nb, &freed));
    OK(rkv_tree_check(e->tree));
    cr_assert_eq(freed, nb);
    cr_assert_eq(rkv_pool_num_free(e->pool), e->nblocks);
    stk_kv_clobber(e); /* only the host copies can serve now */
    OK(stk_submit(e, 1, t, 24, 2));
    stk_drain(e, 200);
    OK(rkv_tree_check(e->tree));
    cr_assert_gt(e->r[1].first_host, 0, "the prefix came back from the host");
}


static void swap_run(stk_env *e, int swap, rkv_sched_stats *out)
{
    int32_t t[12];
    for (uint64_t id = 0; id < 6; id++) {
        fill_tokens(t, 12, 100 + id);
        OK(stk_submit(e, id, t, 12, 28));
    }
    stk_drain(e, 2000);
    OK(rkv_sched_get_stats(e->s, out));
    cr_assert_gt(out->preemptions, 0, "the scenario must preempt");
    if (swap) {
        uint32_t outs = 0, ins = 0;
        for (uint64_t id = 0; id < 6; id++) {
            outs += (uint32_t)e->r[id].swap_out_seen;
            ins += (uint32_t)e->r[id].swap_in_seen;
        }
        cr_assert_eq(outs, out->swap_outs);
        cr_assert_eq(ins, out->swap_ins);
        cr_assert_gt(out->swap_outs, 0);
        cr_assert_gt(out->swap_out_pages, 0);
        cr_assert_gt(out->swap_ins, 0, "no swapped request came back by load");
    } else {
        cr_assert_eq(out->swap_outs + out->swap_ins, 0);
    }
}

static void swap_scenario(stk_setup_fn setup, int swap, rkv_sched_stats *out)
{
    stk_env e;
    rkv_sched_config c = stk_base_cfg(RKV_POLICY_LPM, 4);
    c.swap = swap;
    setup(&e, 16, 64, &c, RKV_WRITE_BACK);
    swap_run(&e, swap, out);
    stk_finish(&e);
}

void stk_swap_round_trip(stk_setup_fn setup)
{
    rkv_sched_stats on, off;
    swap_scenario(setup, 1, &on);
    swap_scenario(setup, 0, &off);
    cr_assert_leq(on.computed_tokens, off.computed_tokens);
}

void stk_demotions_list_source_blocks(stk_setup_fn setup)
{
    stk_env e;
    int32_t shared[28];
    stk_warm_base(&e, setup, RKV_POLICY_LPM, 2, 12, shared);
    (void)stk_step(&e); /* the last commit's demotions */
    OK(rkv_tree_check(e.tree));
    rkv_tier_stats ts;
    OK(rkv_tree_tier_stats(e.tree, &ts));
    cr_assert_gt(e.store_done_pages, 0);
    cr_assert_eq(e.store_queued_pages, 0, "write-back queues nothing");
    cr_assert_eq(e.store_done_pages, ts.stores_blocks[RKV_MEDIUM_HOST]);
    stk_finish(&e);
}

rkv_tier_stats stk_stores_done(stk_env *e, int n, int settle)
{
    stk_steps(e, n);
    if (settle)
        stk_settle(e);
    OK(rkv_tree_check(e->tree));
    rkv_tier_stats ts;
    OK(rkv_tree_tier_stats(e->tree, &ts));
    cr_assert_eq(ts.pending_stores, 0);
    cr_assert_eq(rkv_tree_debug_copy_inflight(e->tree), 0);
    cr_assert_gt(ts.stores_blocks[RKV_MEDIUM_HOST], 0);
    return ts;
}

void stk_admitted_at(const stk_env *e, const stk_tier *t, uint64_t id, int64_t want)
{
    int64_t got = e->r[id].first_step;
    if (t->exact)
        cr_assert_eq(got, want, "request %llu admitted in step %lld, not %lld",
                     (unsigned long long)id, (long long)got, (long long)want);
    else
        cr_assert_geq(got, want, "request %llu admitted in step %lld, before %lld",
                      (unsigned long long)id, (long long)got, (long long)want);
}

rkv_sched_stats stk_expect_loads(stk_env *e, uint64_t loads, uint64_t failed)
{
    rkv_sched_stats st;
    OK(rkv_sched_get_stats(e->s, &st));
    cr_assert_eq(st.loads, loads, "%llu loads, not %llu", (unsigned long long)st.loads,
                 (unsigned long long)loads);
    cr_assert_eq(st.failed_loads, failed, "%llu failed loads, not %llu",
                 (unsigned long long)st.failed_loads, (unsigned long long)failed);
    return st;
}

void stk_shared_prefix_loaded_once(const stk_tier *t)
{
    stk_env e;
    int32_t shared[28], t2[28];
    stk_warm_base(&e, t->setup, RKV_POLICY_LPM, 4, 16, shared);
    stk_submit_pair(&e, shared, t2);
    int64_t s0 = e.steps;
    cr_assert_eq(stk_step(&e), 0, "7 waits for 6's load instead of computing");
    rkv_request_info info;
    OK(rkv_sched_request_info(e.s, 7, &info));
    cr_assert_eq(info.state, RKV_REQ_WAITING);
    cr_assert_eq(info.loading, 0, "7 holds no load of its own");
    stk_drain(&e, 400);
    rkv_sched_stats st = stk_expect_loads(&e, 1, 0); /* the shared prefix once */
    cr_assert_geq(st.load_waits, 1);
    cr_assert_gt(e.r[6].first_host, 0);
    stk_admitted_at(&e, t, 6, s0 + t->load_steps);
    stk_admitted_at(&e, t, 7, e.r[6].first_step); /* with 6, not later */
    cr_assert_geq(e.r[7].first_cached, 24, "7 got the loaded prefix (cached %u)",
                  e.r[7].first_cached);
    cr_assert_eq(e.r[7].first_host, 0, "on the device: 6's load, not 7's");
    stk_finish(&e);
}

void stk_others_run_while_one_loads(const stk_tier *t, uint32_t nblocks, uint32_t other_new)
{
    stk_env e;
    int32_t shared[28], other[12];
    stk_warm_base(&e, t->setup, RKV_POLICY_LPM, 2, nblocks, shared);
    stk_submit_beside(&e, shared, other, other_new);
    int64_t s0 = e.steps;
    for (int64_t k = 0; k < t->load_steps; k++) {
        cr_assert_eq(stk_step(&e), 1, "step %lld: the other request runs beside the load",
                     (long long)k);
        cr_assert_eq(e.r[6].first_step, -1);
    }
    cr_assert_eq(e.r[5].first_step, s0);
    cr_assert_eq(e.r[6].loads_seen, 1);
    stk_drain(&e, 400);
    stk_admitted_at(&e, t, 6, s0 + t->load_steps);
    cr_assert_gt(e.r[6].first_host, 0);
    stk_finish(&e);
}
