/*
 * tests/test_tree_tiers.c -- the radix tree with a host tier below the
 * device pool (residency/tier*.c): a randomized differential test against
 * a reference model of what was cached, with rkv_tree_check (residency
 * invariant, host slot ownership, host LRU, stats) after every operation.
 *
 * The pool holds real KV bytes and every page's bytes are a function of its
 * chained hash (which includes the namespace), written when the page is
 * computed; every load is read back and compared, so a load that brought
 * another page's (or another namespace's) bytes fails the test.
 *
 * Model: the set of pages (by chained hash) ever inserted since the last
 * reset. "exact" runs (a host large enough never to drop a page, no
 * injected failure, write-back): every page stays in the tree, so device +
 * lower match of every sequence equals the model's longest inserted prefix.
 * "faulty" runs (a small host, a store queue of 2..4, every write policy,
 * injected store failures and out-of-memory): what the tree reports cached
 * is always a subset of the model, loads that fail leave the pages matchable
 * on the lower tier or gone (never wrong), and nothing leaks.
 * The chain device -> host -> disk runs the same way (mode 2): a small host
 * over a disk store with real records; in exact runs the disk is large
 * enough never to drop a page, so every page the host evicts is on disk.
 * Pins (issue 13) are made and released along the way, and the whole pool
 * is taken at once now and then, so pins are lowered into the tiers
 * (residency/lowered_pins.c) under every mode, policy and fault.
 * The same runs on a tree keeping 3-byte ids (rkv_tree_config.token_bytes
 * = 3) over ids near 2^24 that differ in one of their three bytes
 * (tok3_ids): every read of a lower node's ids (walks, records, events,
 * lowered pins) must go through the layout, and the run's figures must be
 * those of a 4-byte tree given the same ids.
 * At the end: priorities in the lower tiers (the host and disk drop order
 * against a scanning reference, and issue 13's priority-90 case).
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "radix/tree_debug.h"
#include "radixkv.h"
#include "tests/support/event_model.h"
#include "tests/support/handles.h"
#include "tests/support/tree_tier_fixture.h"
#include "tier/store.h"

#ifndef TP /* CMake builds this file at page 16 too (test_tree_tiers_p16) */
#define TP 4u
#endif
#define MAX_PAGES 12u
#define NSEQ 48u
#define MODEL_CAP 4096u

typedef struct seq {
    uint64_t ns;
    uint32_t npages;
    int32_t tok[MAX_PAGES * TP];
} seq;

typedef struct env {
    tt_fixture fx;   /* owns the pool, tree and stores below */
    rkv_pool *pool;  /* fx's */
    rkv_tree *tree;  /* fx's */
    rkv_store *host; /* the store right below the device: fx.host, or mode
                        1's disk store */
    rkv_store *disk; /* mode 2: the disk below the host, else NULL */
    size_t bb;
    uint64_t model[MODEL_CAP]; /* open addressing; 0 = empty */
    uint32_t model_n;
    seq seqs[NSEQ];
    uint64_t rng;
    int exact;
    int tok;  /* 0: ids 0..4 on a 4-byte tree; 3 / 4: tok3_ids on a
                 3- / 4-byte tree */
    uint8_t *buf, *want;
    uint64_t loads_ok, loads_failed, hits_lower;
    evd d;    /* pool, tree, TP for the event model */
    evm m;
} env;

static uint64_t rnd(env *e)
{
    e->rng ^= e->rng << 13;
    e->rng ^= e->rng >> 7;
    e->rng ^= e->rng << 17;
    return e->rng;
}

static void model_add(env *e, uint64_t h)
{
    if (h == 0)
        h = 1;
    uint32_t i = (uint32_t)(h % MODEL_CAP);
    while (e->model[i] != 0 && e->model[i] != h)
        i = (i + 1) % MODEL_CAP;
    if (e->model[i] == 0) {
        cr_assert(e->model_n < MODEL_CAP * 3 / 4);
        e->model[i] = h;
        e->model_n++;
    }
}

static int model_has(const env *e, uint64_t h)
{
    if (h == 0)
        h = 1;
    uint32_t i = (uint32_t)(h % MODEL_CAP);
    while (e->model[i] != 0) {
        if (e->model[i] == h)
            return 1;
        i = (i + 1) % MODEL_CAP;
    }
    return 0;
}

/* Pages of s (from the start) that the model holds. */
static uint32_t model_prefix(const env *e, const seq *s)
{
    uint64_t h = RKV_HASH_ROOT;
    uint32_t k = 0;
    for (; k < s->npages; k++) {
        h = rkv_block_hash(h, s->ns, s->tok + (size_t)k * TP, TP);
        if (!model_has(e, h))
            break;
    }
    return k;
}

static void pattern(const env *e, uint64_t h, uint8_t *out)
{
    for (size_t j = 0; j < e->bb; j++)
        out[j] = (uint8_t)((h >> ((j % 8) * 8)) ^ (j * 131));
}

static void check_all(env *e)
{
    tt_check(&e->fx);
    /* KV events (with media) replayed into the model give the snapshot */
    while (evm_drain(&e->d, &e->m, 64, 8) == 64)
        ;
    evm_compare(&e->d, &e->m);
}

/* Device + lower match of s must agree with the model. */
static void verify_seq(env *e, const seq *s)
{
    rkv_match m;
    rkv_tier_match tm;
    rkv_status st = rkv_tree_match_tiers(e->tree, s->ns, s->tok,
                                         (size_t)s->npages * TP, NULL,
                                         RKV_MATCH_PEEK, &m, &tm);
    cr_assert_eq(st, RKV_OK, "%s", rkv_last_error());
    size_t have = (m.matched_tokens + tm.lower_tokens) / TP;
    uint32_t want = model_prefix(e, s);
    if (e->exact)
        cr_assert_eq(have, want, "exact: tree has %zu pages of a sequence, "
                     "model %u", have, want);
    else
        cr_assert(have <= want, "tree has %zu pages, model only %u", have,
                  want);
    cr_assert_eq(tm.host_tokens + tm.disk_tokens, tm.lower_tokens);
    if (e->disk == NULL)
        cr_assert(tm.host_tokens == 0 || tm.disk_tokens == 0, "one lower tier");
}

static void verify_blocks(env *e, const seq *s, const rkv_block_id *blocks,
                          uint32_t from, uint32_t to)
{
    uint64_t h = RKV_HASH_ROOT;
    for (uint32_t k = 0; k < to; k++) {
        h = rkv_block_hash(h, s->ns, s->tok + (size_t)k * TP, TP);
        if (k < from)
            continue;
        cr_assert_eq(rkv_pool_block_hash(e->pool, blocks[k]), h);
        cr_assert_eq(rkv_pool_copy_to_host(e->pool, 1, &blocks[k], e->buf), RKV_OK);
        pattern(e, h, e->want);
        cr_assert(memcmp(e->buf, e->want, e->bb) == 0,
                  "page %u: loaded KV bytes are not the page's", k);
    }
}

static int ok_or(rkv_status st, rkv_status a, rkv_status b)
{
    return st == RKV_OK || st == a || st == b;
}

/* A request: match (with the lower tier), load and wait, compute the rest,
 * insert. Faults may make any step give up; nothing may go wrong. */
static void serve(env *e, const seq *s, uint32_t upto)
{
    size_t n = (size_t)upto * TP;
    rkv_match m;
    rkv_tier_match tm;
    rkv_block_id blocks[MAX_PAGES];
    rkv_status st = rkv_tree_match_tiers(e->tree, s->ns, s->tok, n, NULL, 0,
                                         &m, &tm);
    cr_assert(ok_or(st, RKV_ERR_NOMEM, RKV_ERR_NOMEM), "%s", rkv_last_error());
    if (st != RKV_OK)
        return;
    check_all(e);
    rkv_lease held = {0};
    if (tm.lower_tokens > 0) {
        e->hits_lower += tm.lower_tokens;
        rkv_load ld;
        rkv_block_id lb[MAX_PAGES];
        st = rkv_tree_load(e->tree, s->ns, s->tok, n, UINT32_MAX, lb, &ld);
        cr_assert(ok_or(st, RKV_ERR_NOMEM, RKV_ERR_NO_SPACE), "load: %s",
                  rkv_last_error());
        check_all(e);
        if (st == RKV_OK && ld.ticket != 0) {
            cr_assert_eq(ld.num_pages * TP, tm.lower_tokens);
            /* the lease cannot go before the load completes */
            rkv_lease tmp = ld.lease;
            cr_assert_eq(rkv_tree_unlock(e->tree, &tmp), RKV_ERR_BUSY);
            rkv_transfer_done done[4];
            uint32_t nd = 0;
            cr_assert_eq(rkv_tree_tier_poll(e->tree, done, 4, &nd), RKV_OK);
            cr_assert_eq(nd, 1);
            cr_assert_eq(done[0].ticket, ld.ticket);
            cr_assert_eq(done[0].kind, RKV_TRANSFER_LOAD);
            check_all(e);
            if (done[0].status == RKV_OK) {
                e->loads_ok++;
                rkv_match m2;
                cr_assert_eq(rkv_tree_match(e->tree, s->ns, s->tok, n, blocks,
                                            RKV_MATCH_PEEK, &m2), RKV_OK);
                cr_assert_eq(m2.matched_tokens, ld.device_tokens);
                /* the load's blocks are the ones the match now returns */
                uint32_t d0 = (uint32_t)(m.matched_tokens / TP);
                for (uint32_t i = 0; i < ld.num_pages; i++)
                    cr_assert_eq(lb[i], blocks[d0 + i], "load block %u", i);
                verify_blocks(e, s, blocks, (uint32_t)(m.matched_tokens / TP),
                              (uint32_t)(m2.matched_tokens / TP));
            } else {
                cr_assert(!e->exact, "a load failed in an exact run: %d",
                          done[0].status);
                e->loads_failed++;
            }
            held = ld.lease;
        }
    }
    /* the device prefix now, locked */
    st = rkv_tree_match(e->tree, s->ns, s->tok, n, blocks, 0, &m);
    cr_assert(ok_or(st, RKV_ERR_NOMEM, RKV_ERR_NOMEM));
    rkv_lease lease = {0};
    if (st == RKV_OK)
        st = rkv_tree_lock(e->tree, m.node, &lease);
    cr_assert(ok_or(st, RKV_ERR_NOMEM, RKV_ERR_NOMEM));
    if (held.id != 0)
        cr_assert_eq(rkv_tree_unlock(e->tree, &held), RKV_OK, "%s",
                     rkv_last_error());
    if (st != RKV_OK)
        return;
    check_all(e);
    verify_blocks(e, s, blocks, 0, (uint32_t)m.num_blocks);
    uint32_t d = (uint32_t)m.num_blocks, need = upto - d;
    if (need > 0) {
        st = rkv_tree_alloc_blocks(e->tree, need, blocks + d);
        cr_assert(ok_or(st, RKV_ERR_NOMEM, RKV_ERR_NO_SPACE), "alloc: %s",
                  rkv_last_error());
        check_all(e);
        if (st == RKV_OK) {
            uint64_t h = RKV_HASH_ROOT;
            for (uint32_t k = 0; k < upto; k++) {
                h = rkv_block_hash(h, s->ns, s->tok + (size_t)k * TP, TP);
                if (k < d)
                    continue;
                pattern(e, h, e->buf);
                cr_assert_eq(rkv_pool_copy_from_host(e->pool, 1, &blocks[k],
                                                     e->buf), RKV_OK);
            }
            rkv_insert_result ir;
            rkv_block_id dups[MAX_PAGES];
            st = rkv_tree_insert(e->tree, s->ns, s->tok, n, blocks, dups, &ir);
            cr_assert(ok_or(st, RKV_ERR_NOMEM, RKV_ERR_NOMEM), "insert: %s",
                      rkv_last_error());
            if (st == RKV_OK) {
                h = RKV_HASH_ROOT;
                for (uint32_t k = 0; k < ir.cached_tokens / TP; k++) {
                    h = rkv_block_hash(h, s->ns, s->tok + (size_t)k * TP, TP);
                    model_add(e, h);
                }
            }
            cr_assert_eq(rkv_pool_unref_n(e->pool, need, blocks + d), RKV_OK);
        }
    }
    cr_assert_eq(rkv_tree_unlock(e->tree, &lease), RKV_OK, "%s",
                 rkv_last_error());
    check_all(e);
}

/* Letter i as a 3-byte world's id: near 2^24, consecutive letters
 * differing in one byte (top, middle, low in turn), so a conversion that
 * drops or mixes a byte merges two letters. */
static int32_t tok3_ids(uint32_t i)
{
    static const uint32_t flip[3] = {0x800000u, 0x008000u, 0x000080u};
    uint32_t v = 0xffffffu - (i / 3) * 0x010101u;
    return (int32_t)(v ^ (i % 3 ? flip[i % 3 - 1] : 0));
}

static void make_seqs(env *e)
{
    /* a few shared stems, two namespaces with the same tokens */
    int32_t stems[4][MAX_PAGES * TP];
    for (int a = 0; a < 4; a++)
        for (uint32_t j = 0; j < MAX_PAGES * TP; j++)
            stems[a][j] = (int32_t)(rnd(e) % 5);
    for (uint32_t i = 0; i < NSEQ; i++) {
        seq *s = &e->seqs[i];
        s->ns = (rnd(e) % 4 == 0) ? 7 : 3;
        s->npages = 1 + (uint32_t)(rnd(e) % MAX_PAGES);
        int a = (int)(rnd(e) % 4);
        uint32_t keep = (uint32_t)(rnd(e) % (s->npages * TP + 1));
        for (uint32_t j = 0; j < s->npages * TP; j++)
            s->tok[j] = j < keep ? stems[a][j] : (int32_t)(rnd(e) % 5);
    }
    if (e->tok != 0) /* after the draws: the same sequences, other ids */
        for (uint32_t i = 0; i < NSEQ; i++)
            for (uint32_t j = 0; j < e->seqs[i].npages * TP; j++)
                e->seqs[i].tok[j] = tok3_ids((uint32_t)e->seqs[i].tok[j]);
}

/* What a run did, for comparing two layouts' runs. */
typedef struct run_out {
    uint64_t disk_loads, hits_lower, loads_ok, loads_failed;
    rkv_tier_stats ts;
    rkv_tree_stats st;
    rkv_retention_stats rs;
} run_out;

/* mode: 0 a host store, 1 a disk store, 2 a host over a disk store; tok:
 * env.tok. Fills *out (NULL: not wanted); returns the pages loaded from
 * the disk. */
static uint64_t run_tok(uint64_t seed, int exact, uint32_t steps, int mode,
                        int tok, run_out *out)
{
    int64_t live0 = rkv_debug_live_tree_allocs_global();
    env *e = calloc(1, sizeof *e);
    cr_assert_not_null(e);
    e->rng = seed * 0x9E3779B97F4A7C15ull + 1;
    e->exact = exact;
    e->tok = tok;
    /* the draws in this order: the seeds' runs stay the same */
    uint32_t top_cap = exact ? 4096 : 16 + (uint32_t)(rnd(e) % 24);
    if (mode == 2) /* the host overflows to disk; in exact runs it exceeds
                      the 40 device blocks (swap-out copies of device pages
                      hold host slots no LRU can take) */
        top_cap = exact ? 44 + (uint32_t)(rnd(e) % 8)
                        : 4 + (uint32_t)(rnd(e) % 16);
    uint32_t disk_cap = 0;
    if (mode == 2)
        disk_cap = exact ? 4096 : 8 + (uint32_t)(rnd(e) % 24);
    rkv_tier_config cfg;
    rkv_tier_config_init(&cfg);
    if (!exact) {
        cfg.write_policy = (int)(rnd(e) % 3);
        cfg.selective_hits = 1 + (uint32_t)(rnd(e) % 3);
        cfg.store_queue = 2 + (uint32_t)(rnd(e) % 3);
    }
    rkv_tree_config tc;
    rkv_tree_config_init(&tc);
    tc.event_ring = 1024;
    tc.token_bytes = tok == 3 ? 3 : 4;
    /* mode 1: the one store is a disk store */
    tt_open(&e->fx, &(tt_spec){.pool_blocks = 40, .page_size = TP,
                               .head_dim = 4, .tree = &tc,
                               .host_blocks = mode == 1 ? 0 : top_cap,
                               .disk_blocks = mode == 1 ? top_cap : disk_cap,
                               .tier = &cfg});
    e->pool = e->fx.pool;
    e->tree = e->fx.tree;
    e->host = mode == 1 ? e->fx.disk : e->fx.host;
    e->disk = mode == 2 ? e->fx.disk : NULL;
    e->d.pool = e->pool;
    e->d.tree = e->tree;
    e->d.P = TP;
    e->m.next_seq = 1;
    e->bb = rkv_pool_bytes_per_block(e->pool);
    e->buf = malloc(e->bb);
    e->want = malloc(e->bb);
    make_seqs(e);
    check_all(e);
    for (uint32_t step = 0; step < steps; step++) {
        const seq *s = &e->seqs[rnd(e) % NSEQ];
        uint32_t r = (uint32_t)(rnd(e) % 100);
        if (!exact && r % 7 == 0)
            rkv_store_fail_after(e->host, 1 + (uint32_t)(rnd(e) % 6));
        if (!exact && e->disk != NULL && r % 5 == 0)
            rkv_store_fail_after(e->disk, 1 + (uint32_t)(rnd(e) % 6));
        if (!exact && r % 11 == 0)
            rkv_tree_debug_fail_alloc_after(e->tree, (int64_t)(rnd(e) % 4));
        if (r < 56) {
            serve(e, s, 1 + (uint32_t)(rnd(e) % s->npages));
        } else if (r < 60) {
            /* pins (issue 13): device pressure in serve lowers them into
             * the tiers, which must keep every check and the model */
            rkv_retention rt;
            rkv_retention_init(&rt);
            rt.pin_tokens = (size_t)(1 + rnd(e) % s->npages) * TP;
            rt.ttl_ms = 20 + rnd(e) % 400;
            rt.owner = 1 + rnd(e) % 3;
            rkv_status st = rkv_tree_retain(e->tree, s->ns, s->tok,
                                            (size_t)s->npages * TP, &rt,
                                            (uint64_t)step * 10, NULL);
            cr_assert(ok_or(st, RKV_ERR_PIN_CAP, RKV_ERR_NOMEM), "%s",
                      rkv_last_error());
            if (rnd(e) % 4 == 0)
                cr_assert_eq(rkv_tree_pins_release(e->tree, 1 + rnd(e) % 3,
                                                   NULL), RKV_OK);
            if (rnd(e) % 2 == 0) {
                /* the whole pool at once: pins must yield (be lowered) */
                rkv_block_id all[40];
                st = rkv_tree_alloc_blocks(e->tree, 40, all);
                cr_assert(ok_or(st, RKV_ERR_NO_SPACE, RKV_ERR_NOMEM), "%s",
                          rkv_last_error());
                if (st == RKV_OK)
                    cr_assert_eq(rkv_pool_unref_n(e->pool, 40, all), RKV_OK);
            }
        } else if (r < 75) {
            for (uint32_t i = 0; i < NSEQ; i++)
                verify_seq(e, &e->seqs[i]);
        } else if (r < 85) {
            uint32_t freed = 0;
            rkv_status st = rkv_tree_evict(e->tree, 1 + (uint32_t)(rnd(e) % 8),
                                           &freed);
            cr_assert(ok_or(st, RKV_ERR_NO_SPACE, RKV_ERR_NO_SPACE));
        } else if (r < 95) {
            uint64_t tk = 0;
            uint32_t pages = 0;
            rkv_block_id dev[MAX_PAGES], src[MAX_PAGES];
            rkv_match dm;
            cr_assert_eq(rkv_tree_match(e->tree, s->ns, s->tok,
                                        (size_t)s->npages * TP, dev,
                                        RKV_MATCH_PEEK, &dm), RKV_OK);
            rkv_status st = rkv_tree_store_prefix(e->tree, s->ns, s->tok,
                                                  (size_t)s->npages * TP, src,
                                                  &tk, &pages);
            cr_assert(ok_or(st, RKV_ERR_NOMEM, RKV_ERR_NOMEM), "%s",
                      rkv_last_error());
            check_all(e);
            /* the source blocks: some of the device prefix's, in order */
            for (uint32_t k = 0, j = 0; st == RKV_OK && k < pages; k++, j++) {
                while (j < dm.num_blocks && dev[j] != src[k])
                    j++;
                cr_assert_lt(j, dm.num_blocks, "swap-out block %u (%u) is "
                             "not on the device path in order", k, src[k]);
            }
            rkv_transfer_done done[8];
            uint32_t nd = 0;
            cr_assert_eq(rkv_tree_tier_poll(e->tree, done, 8, &nd), RKV_OK);
            if (tk != 0) {
                cr_assert_eq(nd, 1);
                cr_assert_eq(done[0].kind, RKV_TRANSFER_SWAP_OUT);
                cr_assert(done[0].num_pages <= pages);
            }
        } else if (r < 97) {
            rkv_tree_debug_fail_alloc_after(e->tree, -1);
            cr_assert_eq(rkv_tree_reset(e->tree), RKV_OK, "%s", rkv_last_error());
            memset(e->model, 0, sizeof e->model);
            e->model_n = 0;
            cr_assert_eq(rkv_store_used_blocks(e->host), 0);
            if (e->disk != NULL)
                cr_assert_eq(rkv_store_used_blocks(e->disk), 0);
        } else {
            rkv_transfer_done done[8];
            uint32_t nd = 0;
            cr_assert_eq(rkv_tree_tier_poll(e->tree, done, 8, &nd), RKV_OK);
            cr_assert_eq(nd, 0);
        }
        rkv_tree_debug_fail_alloc_after(e->tree, -1);
        rkv_store_fail_after(e->host, 0);
        if (e->disk != NULL)
            rkv_store_fail_after(e->disk, 0);
        check_all(e);
        if (exact)
            verify_seq(e, s);
    }
    rkv_tier_stats ts;
    cr_assert_eq(rkv_tree_tier_stats(e->tree, &ts), RKV_OK);
    cr_assert(e->hits_lower > 0, "no lower-tier hit in %u steps", steps);
    cr_assert(e->loads_ok > 0);
    int med = mode == 1 ? RKV_MEDIUM_DISK : RKV_MEDIUM_HOST;
    cr_assert_gt(ts.loads_blocks[med], 0);
    cr_assert_eq(ts.resident_pages[med], rkv_store_used_blocks(e->host));
    if (mode == 2) {
        cr_assert_eq(ts.resident_pages[RKV_MEDIUM_DISK],
                     rkv_store_used_blocks(e->disk));
        /* what the disk holds came from the host's evictions */
        cr_assert_leq(ts.stores_blocks[RKV_MEDIUM_DISK],
                      ts.evictions[RKV_MEDIUM_HOST]);
    }
    uint64_t disk_loads = ts.loads_blocks[RKV_MEDIUM_DISK];
    if (out != NULL) {
        memset(out, 0, sizeof *out);
        out->disk_loads = disk_loads;
        out->hits_lower = e->hits_lower;
        out->loads_ok = e->loads_ok;
        out->loads_failed = e->loads_failed;
        out->ts = ts;
        cr_assert_eq(rkv_tree_get_stats(e->tree, &out->st), RKV_OK);
    }
    if (exact) {
        /* the lowest tier never dropped a page */
        cr_assert_eq(ts.evictions[mode == 0 ? RKV_MEDIUM_HOST : RKV_MEDIUM_DISK],
                     0);
        cr_assert_eq(ts.failed_loads, 0);
    }
    rkv_retention_stats rs;
    cr_assert_eq(rkv_tree_retention_stats(e->tree, &rs), RKV_OK);
    cr_assert_eq(rs.pins, rs.pins_made - rs.pins_expired - rs.pins_released -
                              rs.pins_revoked);
    if (out != NULL)
        out->rs = rs;
    if (getenv("RKV_TEST_VERBOSE"))
        fprintf(stderr, "pins made %llu lowered %llu revoked %llu\n",
                (unsigned long long)rs.pins_made,
                (unsigned long long)rs.pins_demoted,
                (unsigned long long)rs.pins_revoked);
    if (getenv("RKV_TEST_VERBOSE"))
        fprintf(stderr, "seed %llu exact %d: lower hits %llu loads ok %llu "
                "failed %llu; stores %llu skipped %llu failed %llu; host "
                "evictions %llu; disk stores %llu loads %llu evictions "
                "%llu; device evictions %llu\n",
                (unsigned long long)seed, exact,
                (unsigned long long)e->hits_lower,
                (unsigned long long)e->loads_ok,
                (unsigned long long)e->loads_failed,
                (unsigned long long)ts.stores_blocks[med],
                (unsigned long long)ts.stores_skipped,
                (unsigned long long)ts.failed_stores,
                (unsigned long long)ts.evictions[med],
                (unsigned long long)ts.stores_blocks[RKV_MEDIUM_DISK],
                (unsigned long long)ts.loads_blocks[RKV_MEDIUM_DISK],
                (unsigned long long)ts.evictions[RKV_MEDIUM_DISK],
                (unsigned long long)ts.evictions[RKV_MEDIUM_DEVICE]);
    tt_close(&e->fx);
    free(e->m.e);
    free(e->buf);
    free(e->want);
    free(e);
    cr_assert_eq(rkv_debug_live_tree_allocs_global(), live0, "tree memory leaked");
    return disk_loads;
}

static uint64_t run(uint64_t seed, int exact, uint32_t steps, int mode)
{
    return run_tok(seed, exact, steps, mode, 0, NULL);
}

/* run() for seeds 1 .. seeds with the other arguments fixed. */
static void run_seeds(uint64_t seeds, int exact, uint32_t steps, int mode)
{
    for (uint64_t seed = 1; seed <= seeds; seed++)
        (void)run(seed, exact, steps, mode);
}

Test(tree_tiers, exact_big_host) { run_seeds(6, 1, 600, 0); }
Test(tree_tiers, faulty_small_host) { run_seeds(12, 0, 800, 0); }
/* The same with a disk store (real records and I/O) as the lower tier. */
Test(tree_tiers, exact_disk) { run_seeds(2, 1, 400, 1); }
Test(tree_tiers, faulty_disk) { run_seeds(3, 0, 500, 1); }

/* The chain device -> host -> disk: a small host writes back to a disk
 * store (real records); exact runs lose nothing, faulty runs inject store
 * failures on both stores and out-of-memory. */
Test(tree_tiers, exact_host_disk)
{
    uint64_t disk_loads = 0;
    for (uint64_t seed = 1; seed <= 3; seed++)
        disk_loads += run(seed, 1, 500, 2);
    cr_assert_gt(disk_loads, 0, "no page was loaded from the disk");
}

Test(tree_tiers, faulty_host_disk)
{
    uint64_t disk_loads = 0;
    for (uint64_t seed = 1; seed <= 6; seed++)
        disk_loads += run(seed, 0, 600, 2);
    cr_assert_gt(disk_loads, 0, "no page was loaded from the disk");
}

/* 3-byte ids (env.tok): each run on a 3-byte tree keeps every check and
 * the model, and does what a 4-byte tree does with the same ids -- the
 * same hits, loads, stores, evictions and lowered pins. */
static void run_tok3(uint64_t seeds, int exact, uint32_t steps, int mode)
{
    for (uint64_t seed = 1; seed <= seeds; seed++) {
        run_out o3, o4;
        (void)run_tok(seed, exact, steps, mode, 3, &o3);
        (void)run_tok(seed, exact, steps, mode, 4, &o4);
        cr_assert_eq(o3.hits_lower, o4.hits_lower, "seed %llu",
                     (unsigned long long)seed);
        cr_assert_eq(o3.loads_ok, o4.loads_ok);
        cr_assert_eq(o3.loads_failed, o4.loads_failed);
        cr_assert(memcmp(&o3.ts, &o4.ts, sizeof o3.ts) == 0,
                  "seed %llu: tier stats differ between 3- and 4-byte ids",
                  (unsigned long long)seed);
        cr_assert_eq(o3.st.queried_tokens, o4.st.queried_tokens);
        cr_assert_eq(o3.st.hit_tokens, o4.st.hit_tokens);
        cr_assert_eq(o3.st.cached_blocks, o4.st.cached_blocks);
        cr_assert_eq(o3.st.nodes, o4.st.nodes);
        cr_assert_eq(o3.st.evicted_blocks, o4.st.evicted_blocks);
        cr_assert_eq(o3.st.splits, o4.st.splits);
        cr_assert_eq(o3.rs.pins_made, o4.rs.pins_made);
        cr_assert_eq(o3.rs.pins_demoted, o4.rs.pins_demoted);
        cr_assert_eq(o3.rs.pins_revoked, o4.rs.pins_revoked);
        cr_assert_eq(o3.rs.pins_lowered, o4.rs.pins_lowered);
    }
}

Test(tree_tiers, exact_big_host_tok3) { run_tok3(3, 1, 600, 0); }
Test(tree_tiers, faulty_small_host_tok3) { run_tok3(4, 0, 800, 0); }
Test(tree_tiers, exact_disk_tok3) { run_tok3(1, 1, 400, 1); }
Test(tree_tiers, faulty_disk_tok3) { run_tok3(1, 0, 500, 1); }
Test(tree_tiers, exact_host_disk_tok3) { run_tok3(2, 1, 500, 2); }
Test(tree_tiers, faulty_host_disk_tok3) { run_tok3(3, 0, 600, 2); }

/* The KV events of a demotion to the host and of the load back carry the
 * pages' int32 ids on a 3-byte tree too (a promotion's STORED events are
 * built from the node's stored ids, 16 pages an event): each event's ids
 * are those of the pages its hashes name, and the stream is a 4-byte
 * tree's. */
#define EV_PAGES 20u
static uint32_t events_of(uint32_t token_bytes, const int32_t *toks,
                          rkv_event *ev, uint32_t cap, int32_t *evtok,
                          size_t tokcap, size_t *ntok)
{
    rkv_tree_config tc;
    rkv_tree_config_init(&tc);
    tc.token_bytes = token_bytes;
    tc.event_ring = 256;
    tc.event_tokens = 4096;
    tt_fixture f;
    tt_open(&f, &(tt_spec){.pool_blocks = EV_PAGES + 4, .page_size = TP,
                           .tree = &tc, .host_blocks = EV_PAGES + 8});
    cr_assert_eq(tt_try_cache(&f, 5, toks, EV_PAGES, NULL), RKV_OK);
    uint32_t freed = 0;
    cr_assert_eq(rkv_tree_evict(f.tree, EV_PAGES, &freed), RKV_OK);
    cr_assert_eq(freed, EV_PAGES);
    rkv_load ld;
    rkv_block_id lb[EV_PAGES];
    cr_assert_eq(rkv_tree_load(f.tree, 5, toks, (size_t)EV_PAGES * TP, UINT32_MAX,
                               lb, &ld), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(ld.num_pages, EV_PAGES);
    rkv_transfer_done done = tt_poll_one(&f);
    cr_assert_eq(done.status, RKV_OK);
    cr_assert_eq(rkv_tree_unlock(f.tree, &ld.lease), RKV_OK);
    tt_check(&f);
    uint32_t n = 0;
    cr_assert_eq(rkv_tree_events_drain_tokens(f.tree, ev, cap, evtok, tokcap,
                                              &n, ntok), RKV_OK);
    cr_assert_lt(n, cap, "every event drained");
    tt_close(&f);
    return n;
}

Test(tree_tiers, events_tok3)
{
    int32_t toks[EV_PAGES * TP];
    uint64_t h[EV_PAGES];
    for (uint32_t i = 0; i < EV_PAGES * TP; i++)
        toks[i] = tok3_ids(i % 7 + i / 13);
    for (uint32_t k = 0; k < EV_PAGES; k++)
        h[k] = rkv_block_hash(k == 0 ? RKV_HASH_ROOT : h[k - 1], 5,
                              toks + (size_t)k * TP, TP);
    static rkv_event e3[128], e4[128];
    static int32_t t3[4096], t4[4096];
    size_t nt3 = 0, nt4 = 0;
    uint32_t n3 = events_of(3, toks, e3, 128, t3, 4096, &nt3);
    uint32_t n4 = events_of(4, toks, e4, 128, t4, 4096, &nt4);
    cr_assert_eq(n3, n4);
    cr_assert_eq(nt3, nt4);
    cr_assert(memcmp(t3, t4, nt3 * sizeof *t3) == 0, "event ids differ");
    uint32_t stored[RKV_MEDIUM_COUNT] = {0};
    size_t at = 0;
    for (uint32_t i = 0; i < n3; i++) {
        const rkv_event *a = &e3[i], *b = &e4[i];
        cr_assert_eq(a->kind, b->kind, "event %u", i);
        cr_assert_eq(a->medium, b->medium);
        cr_assert_eq(a->num_hashes, b->num_hashes);
        cr_assert_eq(a->parent_hash, b->parent_hash);
        cr_assert(memcmp(a->hashes, b->hashes, a->num_hashes * sizeof *a->hashes) == 0);
        if (a->kind != RKV_EVENT_BLOCK_STORED)
            continue;
        stored[a->medium] += a->num_hashes;
        uint32_t k = 0;
        while (k < EV_PAGES && h[k] != a->hashes[0])
            k++;
        cr_assert_lt(k, EV_PAGES, "event %u names no page", i);
        cr_assert(memcmp(t3 + at, toks + (size_t)k * TP,
                         (size_t)a->num_hashes * TP * sizeof *toks) == 0,
                  "event %u: the ids are not its pages'", i);
        at += (size_t)a->num_hashes * TP;
    }
    cr_assert_eq(at, nt3);
    /* cached, demoted, loaded back: each page stored twice on the device */
    cr_assert_eq(stored[RKV_MEDIUM_DEVICE], 2 * EV_PAGES);
    cr_assert_eq(stored[RKV_MEDIUM_HOST], EV_PAGES);
}

/* Attach: an empty tree only, one tree per store, block sizes must agree;
 * a host over a disk is taken (the disk must be a disk store). */
Test(tree_tiers, attach_rules)
{
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = 8;
    pc.page_size = TP;
    rkv_pool *pool, *pool2;
    rkv_tree *t, *t2;
    cr_assert_eq(rkv_pool_create(&pc, &pool), RKV_OK);
    cr_assert_eq(rkv_pool_create(&pc, &pool2), RKV_OK);
    cr_assert_eq(rkv_tree_create(pool, NULL, &t), RKV_OK);
    cr_assert_eq(rkv_tree_create(pool2, NULL, &t2), RKV_OK);
    rkv_store_config sc;
    rkv_store_config_init(&sc, RKV_MEDIUM_HOST);
    sc.capacity_blocks = 4;
    rkv_store *h;
    cr_assert_eq(rkv_store_create(&sc, &h), RKV_OK);
    rkv_tier_config cfg;
    rkv_tier_config_init(&cfg);
    cr_assert_eq(cfg.write_policy, RKV_WRITE_BACK);
    cr_assert_eq(cfg.store_queue, 1024);
    cfg.host = h;
    cr_assert_eq(rkv_tree_attach_tiers(t, &cfg), RKV_OK);
    cr_assert_eq(rkv_tree_attach_tiers(t2, &cfg), RKV_ERR_BUSY);
    cr_assert_eq(rkv_tree_check(t), RKV_OK, "%s", rkv_last_error());
    /* not empty: refused */
    int32_t tok[TP] = {1, 2, 3, 4};
    rkv_block_id b;
    cr_assert_eq(rkv_pool_alloc(pool, &b), RKV_OK);
    cr_assert_eq(rkv_tree_insert(t, 0, tok, TP, &b, NULL, NULL), RKV_OK);
    cr_assert_eq(rkv_pool_unref(pool, b), RKV_OK);
    cr_assert_eq(rkv_tree_attach_tiers(t, NULL), RKV_ERR_BUSY);
    /* evicted to the host, then the host keeps it */
    uint32_t freed = 0;
    cr_assert_eq(rkv_tree_evict(t, 1, &freed), RKV_OK);
    cr_assert_eq(freed, 1);
    cr_assert_eq(rkv_store_used_blocks(h), 1);
    rkv_match m;
    rkv_tier_match tm;
    cr_assert_eq(rkv_tree_match_tiers(t, 0, tok, TP, NULL, 0, &m, &tm), RKV_OK);
    cr_assert_eq(m.matched_tokens, 0);
    cr_assert_eq(tm.host_tokens, TP);
    /* another namespace never sees it */
    cr_assert_eq(rkv_tree_match_tiers(t, 1, tok, TP, NULL, 0, &m, &tm), RKV_OK);
    cr_assert_eq(tm.lower_tokens, 0);
    cr_assert_eq(rkv_tree_check(t), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(rkv_tree_reset(t), RKV_OK);
    cr_assert_eq(rkv_store_used_blocks(h), 0);
    cr_assert_eq(rkv_tree_attach_tiers(t, NULL), RKV_OK);
    cr_assert_eq(rkv_tree_attach_tiers(t2, &cfg), RKV_OK);
    cfg.disk = h;
    cr_assert_eq(rkv_tree_attach_tiers(t, &cfg), RKV_ERR_INVALID_ARG);
    rkv_tree_destroy(t2);
    rkv_tree_destroy(t);
    rkv_store_destroy(h);
    rkv_pool_destroy(pool);
    rkv_pool_destroy(pool2);
}

/* ---- targeted cases ------------------------------------------------------- */

typedef struct small {
    tt_fixture fx; /* a 16-block pool; a host or a disk store */
    int32_t tok[8 * TP];
} small;

/* A host of host_cap blocks, or (host_cap 0) a disk of disk_cap alone. */
static void small_open(small *s, uint32_t host_cap, uint32_t disk_cap)
{
    tt_open(&s->fx, &(tt_spec){.pool_blocks = 16, .page_size = TP,
                               .host_blocks = host_cap,
                               .disk_blocks = disk_cap});
    for (uint32_t j = 0; j < 8 * TP; j++)
        s->tok[j] = (int32_t)(j * 7 + 1);
}

/* Caches pages 0..n-1 of s->tok on the device, then demotes them all. */
static void small_fill_host(small *s, uint32_t n)
{
    cr_assert_leq(n, 8);
    cr_assert_eq(tt_try_cache(&s->fx, 5, s->tok, n, NULL), RKV_OK);
    uint32_t freed = 0;
    cr_assert_eq(rkv_tree_evict(s->fx.tree, n, &freed), RKV_OK);
    cr_assert_eq(freed, n);
    cr_assert_eq(rkv_tree_check(s->fx.tree), RKV_OK, "%s", rkv_last_error());
}

/* A host copy that fails verification: the load fails with
 * RKV_ERR_CORRUPT, that page and everything after it leave the tree, the
 * pages before it stay in the host, the device blocks come back. */
Test(tree_tiers, corrupt_host_copy)
{
    small s;
    small_open(&s, 16, 0);
    small_fill_host(&s, 4);
    /* find page 1's slot by its (hash, ns), then overwrite the record */
    uint64_t h0 = rkv_block_hash(RKV_HASH_ROOT, 5, s.tok, TP);
    uint64_t h1 = rkv_block_hash(h0, 5, s.tok + TP, TP);
    tt_corrupt_host_copy(&s.fx, h1, 5);
    uint32_t free0 = rkv_pool_num_free(s.fx.pool);
    rkv_load ld;
    cr_assert_eq(rkv_tree_load(s.fx.tree, 5, s.tok, 4 * TP, UINT32_MAX, NULL, &ld), RKV_OK);
    cr_assert_eq(ld.num_pages, 4);
    cr_assert_eq(rkv_pool_num_free(s.fx.pool), free0 - 4);
    cr_assert_eq(rkv_tree_check(s.fx.tree), RKV_OK, "%s", rkv_last_error());
    rkv_transfer_done done = tt_poll_one(&s.fx);
    cr_assert_eq(done.status, RKV_ERR_CORRUPT);
    cr_assert_eq(done.num_pages, 0);
    cr_assert_eq(rkv_tree_check(s.fx.tree), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(rkv_pool_num_free(s.fx.pool), free0);
    rkv_match m;
    rkv_tier_match tm;
    cr_assert_eq(rkv_tree_match_tiers(s.fx.tree, 5, s.tok, 4 * TP, NULL,
                                      RKV_MATCH_PEEK, &m, &tm), RKV_OK);
    cr_assert_eq(m.matched_tokens, 0);
    cr_assert_eq(tm.host_tokens, TP, "page 0 stays, 1.. are gone");
    cr_assert_eq(rkv_store_used_blocks(s.fx.host), 1);
    rkv_tier_stats ts;
    cr_assert_eq(rkv_tree_tier_stats(s.fx.tree, &ts), RKV_OK);
    cr_assert_eq(ts.corrupt_blocks, 1);
    cr_assert_eq(ts.failed_loads, 4);
    /* the lease moved to the node above the path (the namespace root) */
    cr_assert_eq(rkv_tree_unlock(s.fx.tree, &ld.lease), RKV_OK, "%s",
                 rkv_last_error());
    cr_assert_eq(rkv_tree_check(s.fx.tree), RKV_OK, "%s", rkv_last_error());
    tt_close(&s.fx);
}

/* An I/O error at poll leaves every page in the host; a retry loads it. */
Test(tree_tiers, failed_copy_then_retry)
{
    small s;
    small_open(&s, 16, 0);
    small_fill_host(&s, 3);
    rkv_load ld;
    cr_assert_eq(rkv_tree_load(s.fx.tree, 5, s.tok, 3 * TP, UINT32_MAX, NULL, &ld), RKV_OK);
    rkv_store_fail_after(s.fx.host, 2);
    rkv_transfer_done done;
    uint32_t nd = 0;
    cr_assert_eq(rkv_tree_tier_poll(s.fx.tree, &done, 1, &nd), RKV_OK);
    cr_assert_eq(done.status, RKV_ERR_IO);
    cr_assert_eq(rkv_tree_unlock(s.fx.tree, &ld.lease), RKV_OK);
    cr_assert_eq(rkv_tree_check(s.fx.tree), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(rkv_store_used_blocks(s.fx.host), 3);
    rkv_block_id lb[2] = {RKV_NO_BLOCK, RKV_NO_BLOCK};
    cr_assert_eq(rkv_tree_load(s.fx.tree, 5, s.tok, 3 * TP, 2, lb, &ld),
                 RKV_OK);
    cr_assert_eq(ld.num_pages, 2, "max_pages bounds a load");
    /* in flight: another caller's match sees the load's ticket, not a
     * lower continuation */
    rkv_match ml;
    rkv_tier_match tml;
    cr_assert_eq(rkv_tree_match_tiers(s.fx.tree, 5, s.tok, 3 * TP, NULL,
                                      RKV_MATCH_PEEK, &ml, &tml), RKV_OK);
    cr_assert_eq(ml.matched_tokens, 0);
    cr_assert_eq(tml.lower_tokens, 0);
    cr_assert_eq(tml.loading_ticket, ld.ticket);
    cr_assert_eq(tml.loading_tokens, 2 * TP);
    cr_assert_eq(rkv_tree_match_tiers(s.fx.tree, 5, s.tok, TP, NULL,
                                      RKV_MATCH_PEEK, &ml, &tml), RKV_OK);
    cr_assert_eq(tml.loading_tokens, TP, "a shorter match covers less");
    cr_assert_eq(rkv_tree_tier_poll(s.fx.tree, &done, 1, &nd), RKV_OK);
    cr_assert_eq(done.status, RKV_OK);
    cr_assert_eq(done.num_pages, 2);
    rkv_match m;
    rkv_tier_match tm;
    cr_assert_eq(rkv_tree_match_tiers(s.fx.tree, 5, s.tok, 3 * TP, NULL,
                                      RKV_MATCH_PEEK, &m, &tm), RKV_OK);
    cr_assert_eq(m.matched_tokens, 2 * TP);
    cr_assert_eq(tm.host_tokens, TP);
    cr_assert_eq(tm.loading_ticket, 0, "completed");
    cr_assert_eq(tm.loading_tokens, 0);
    rkv_block_id mb[3];
    cr_assert_eq(rkv_tree_match(s.fx.tree, 5, s.tok, 3 * TP, mb, RKV_MATCH_PEEK,
                                &m), RKV_OK);
    cr_assert_eq(m.num_blocks, 2);
    cr_assert(lb[0] == mb[0] && lb[1] == mb[1], "load blocks %u %u, match "
              "%u %u", lb[0], lb[1], mb[0], mb[1]);
    /* write-back: the loaded pages left the host (exclusive tiers) */
    cr_assert_eq(rkv_store_used_blocks(s.fx.host), 1);
    cr_assert_eq(rkv_tree_unlock(s.fx.tree, &ld.lease), RKV_OK);
    cr_assert_eq(rkv_tree_check(s.fx.tree), RKV_OK, "%s", rkv_last_error());
    tt_close(&s.fx);
}

/* A full store queue: write-through copies queue up to store_queue pages;
 * the rest are skipped (counted), and a write-back eviction that meets the
 * full queue drops the page instead of storing it. */
Test(tree_tiers, full_store_queue)
{
    small s;
    small_open(&s, 16, 0);
    rkv_tier_config cfg;
    rkv_tier_config_init(&cfg);
    cfg.host = s.fx.host;
    cfg.write_policy = RKV_WRITE_THROUGH;
    cfg.store_queue = 2;
    cr_assert_eq(rkv_tree_attach_tiers(s.fx.tree, &cfg), RKV_OK);
    /* X: 2 pages, their copies fill the queue; Y: 3 pages, skipped */
    const int32_t *x = s.tok, *y = s.tok + 4 * TP;
    rkv_block_id b[3];
    cr_assert_eq(rkv_tree_alloc_blocks(s.fx.tree, 2, b), RKV_OK);
    cr_assert_eq(rkv_tree_insert(s.fx.tree, 5, x, 2 * TP, b, NULL, NULL),
                 RKV_OK);
    cr_assert_eq(rkv_pool_unref_n(s.fx.pool, 2, b), RKV_OK);
    cr_assert_eq(rkv_tree_alloc_blocks(s.fx.tree, 3, b), RKV_OK);
    cr_assert_eq(rkv_tree_insert(s.fx.tree, 5, y, 3 * TP, b, NULL, NULL),
                 RKV_OK);
    cr_assert_eq(rkv_pool_unref_n(s.fx.pool, 3, b), RKV_OK);
    rkv_tier_stats ts;
    cr_assert_eq(rkv_tree_tier_stats(s.fx.tree, &ts), RKV_OK);
    cr_assert_eq(ts.pending_stores, 2);
    cr_assert_eq(ts.stores_skipped, 3);
    cr_assert_eq(rkv_tree_check(s.fx.tree), RKV_OK, "%s", rkv_last_error());
    /* X used again: Y is the eviction's victim while X's copies are still
     * queued (the queue is full), so Y's pages are dropped, not stored */
    rkv_match m;
    rkv_tier_match tm;
    cr_assert_eq(rkv_tree_match_tiers(s.fx.tree, 5, x, 2 * TP, NULL, 0, &m,
                                      &tm), RKV_OK);
    cr_assert_eq(m.matched_tokens, 2 * TP);
    uint32_t freed = 0;
    cr_assert_eq(rkv_tree_evict(s.fx.tree, 3, &freed), RKV_OK);
    cr_assert_eq(freed, 3);
    cr_assert_eq(rkv_tree_check(s.fx.tree), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(rkv_tree_match_tiers(s.fx.tree, 5, y, 3 * TP, NULL,
                                      RKV_MATCH_PEEK, &m, &tm), RKV_OK);
    cr_assert_eq(m.matched_tokens + tm.lower_tokens, 0, "Y was dropped");
    cr_assert_eq(rkv_tree_tier_stats(s.fx.tree, &ts), RKV_OK);
    cr_assert_eq(ts.stores_skipped, 4); /* Y's first page; the rest follow it */
    cr_assert_eq(ts.stores_blocks[RKV_MEDIUM_HOST], 0);
    /* poll makes X's copies; X then survives an eviction in the host */
    uint32_t nd = 0;
    rkv_transfer_done done;
    cr_assert_eq(rkv_tree_tier_poll(s.fx.tree, &done, 1, &nd), RKV_OK);
    cr_assert_eq(nd, 0);
    cr_assert_eq(rkv_tree_tier_stats(s.fx.tree, &ts), RKV_OK);
    cr_assert_eq(ts.pending_stores, 0);
    cr_assert_eq(ts.stores_blocks[RKV_MEDIUM_HOST], 2);
    cr_assert_eq(rkv_tree_evict(s.fx.tree, 2, &freed), RKV_OK);
    cr_assert_eq(rkv_tree_match_tiers(s.fx.tree, 5, x, 2 * TP, NULL,
                                      RKV_MATCH_PEEK, &m, &tm), RKV_OK);
    cr_assert_eq(tm.host_tokens, 2 * TP);
    cr_assert_eq(rkv_tree_check(s.fx.tree), RKV_OK, "%s", rkv_last_error());
    tt_close(&s.fx);
}

/* Out of memory at every allocation of loads, swap-outs and attach: the
 * call fails with RKV_ERR_NOMEM and the tree (snapshot, pool, host) is
 * exactly as before; nothing leaks. */
static size_t snap_of(rkv_tree *t, rkv_block_entry *buf, size_t cap)
{
    size_t n = 0;
    cr_assert_eq(rkv_tree_snapshot(t, buf, cap, &n, NULL), RKV_OK, "%s",
                 rkv_last_error());
    return n;
}

Test(tree_tiers, oom_every_allocation)
{
    int64_t live0 = rkv_debug_live_tree_allocs_global();
    int64_t fired_runs = 0;
    for (int64_t k = 0; k < 64; k++) {
        small s;
        small_open(&s, 16, 0);
        small_fill_host(&s, 6);
        rkv_block_entry before[64], after[64];
        size_t nb = snap_of(s.fx.tree, before, 64);
        uint32_t free0 = rkv_pool_num_free(s.fx.pool);
        uint64_t used0 = rkv_store_used_blocks(s.fx.host);
        rkv_tree_debug_fail_alloc_after(s.fx.tree, k);
        /* a load that ends inside a lower node (a split), then a swap-out */
        rkv_load ld;
        rkv_status st = rkv_tree_load(s.fx.tree, 5, s.tok, 3 * TP, UINT32_MAX, NULL, &ld);
        int fired = 0;
        if (st == RKV_ERR_NOMEM) {
            fired = 1;
            cr_assert_eq(ld.ticket, 0);
            size_t na = snap_of(s.fx.tree, after, 64);
            cr_assert_eq(na, nb);
            cr_assert(memcmp(before, after, nb * sizeof *before) == 0);
            cr_assert_eq(rkv_pool_num_free(s.fx.pool), free0);
            cr_assert_eq(rkv_store_used_blocks(s.fx.host), used0);
            cr_assert_eq(rkv_tree_check(s.fx.tree), RKV_OK, "%s", rkv_last_error());
            rkv_tree_debug_fail_alloc_after(s.fx.tree, -1);
            st = rkv_tree_load(s.fx.tree, 5, s.tok, 3 * TP, UINT32_MAX, NULL,
                               &ld);
        }
        cr_assert_eq(st, RKV_OK, "k=%lld: %s", (long long)k, rkv_last_error());
        rkv_transfer_done done;
        uint32_t nd = 0;
        cr_assert_eq(rkv_tree_tier_poll(s.fx.tree, &done, 1, &nd), RKV_OK);
        cr_assert_eq(done.status, RKV_OK);
        cr_assert_eq(rkv_tree_unlock(s.fx.tree, &ld.lease), RKV_OK);
        uint64_t tk = 0;
        nb = snap_of(s.fx.tree, before, 64);
        rkv_block_id src[3];
        st = rkv_tree_store_prefix(s.fx.tree, 5, s.tok, 3 * TP, src, &tk, NULL);
        if (st == RKV_ERR_NOMEM) {
            fired = 1;
            cr_assert_eq(tk, 0);
            size_t na = snap_of(s.fx.tree, after, 64);
            cr_assert_eq(na, nb);
            cr_assert(memcmp(before, after, nb * sizeof *before) == 0);
            rkv_tree_debug_fail_alloc_after(s.fx.tree, -1);
            st = rkv_tree_store_prefix(s.fx.tree, 5, s.tok, 3 * TP, src, &tk,
                                       NULL);
        }
        cr_assert_eq(st, RKV_OK, "%s", rkv_last_error());
        cr_assert_neq(tk, 0);
        rkv_block_id dev[3];
        rkv_match dm;
        cr_assert_eq(rkv_tree_match(s.fx.tree, 5, s.tok, 3 * TP, dev,
                                    RKV_MATCH_PEEK, &dm), RKV_OK);
        cr_assert_eq(dm.num_blocks, 3);
        for (uint32_t i = 0; i < 3; i++)
            cr_assert_eq(src[i], dev[i], "swap-out source block %u", i);
        cr_assert_eq(rkv_tree_tier_poll(s.fx.tree, &done, 1, &nd), RKV_OK);
        cr_assert_eq(nd, 1);
        cr_assert_eq(done.num_pages, 3);
        cr_assert_eq(rkv_tree_check(s.fx.tree), RKV_OK, "%s", rkv_last_error());
        rkv_tree_debug_fail_alloc_after(s.fx.tree, -1);
        tt_close(&s.fx);
        cr_assert_eq(rkv_debug_live_tree_allocs_global(), live0);
        if (!fired)
            break; /* k is past the last allocation of the scenario */
        fired_runs++;
    }
    cr_assert_geq(fired_runs, 4, "the loads and swap-outs allocate: %lld",
                  (long long)fired_runs);
    /* attach itself */
    for (int64_t k = 0; k < 8; k++) {
        small s;
        small_open(&s, 4, 0);
        cr_assert_eq(rkv_tree_attach_tiers(s.fx.tree, NULL), RKV_OK);
        rkv_tier_config cfg;
        rkv_tier_config_init(&cfg);
        cfg.host = s.fx.host;
        rkv_tree_debug_fail_alloc_after(s.fx.tree, k);
        rkv_status st = rkv_tree_attach_tiers(s.fx.tree, &cfg);
        cr_assert(st == RKV_OK || st == RKV_ERR_NOMEM);
        cr_assert_eq(rkv_tree_check(s.fx.tree), RKV_OK, "%s", rkv_last_error());
        rkv_tree_debug_fail_alloc_after(s.fx.tree, -1);
        tt_close(&s.fx);
        cr_assert_eq(rkv_debug_live_tree_allocs_global(), live0);
    }
}

/* Overwrites every record of the disk store's file in dir behind the
 * store's back (the file header stays). */
static void corrupt_disk_records(const char *dir)
{
    char path[96];
    snprintf(path, sizeof path, "%s/radixkv-tier.blocks", dir);
    int fd = open(path, O_WRONLY);
    cr_assert_geq(fd, 0);
    uint8_t junk[4096];
    memset(junk, 0x5a, sizeof junk);
    off_t end = lseek(fd, 0, SEEK_END);
    for (off_t off = 4096; off < end; off += (off_t)sizeof junk)
        cr_assert_eq(pwrite(fd, junk, sizeof junk, off), (ssize_t)sizeof junk);
    cr_assert_eq(fsync(fd), 0);
    close(fd);
}

/* A corrupted disk block (through the real disk store): the file's records
 * are overwritten behind the store's back; the load fails with
 * RKV_ERR_CORRUPT (verification, never wrong KV), the page and everything
 * after it leave the tree, the device blocks come back, nothing leaks. */
Test(tree_tiers, corrupt_disk_block)
{
    small s;
    small_open(&s, 0, 8);
    small_fill_host(&s, 3);
    rkv_match m;
    rkv_tier_match tm;
    cr_assert_eq(rkv_tree_match_tiers(s.fx.tree, 5, s.tok, 3 * TP, NULL,
                                      RKV_MATCH_PEEK, &m, &tm), RKV_OK);
    cr_assert_eq(tm.disk_tokens, 3 * TP);
    cr_assert_eq(tm.host_tokens, 0);
    /* overwrite every record (the file header stays) */
    corrupt_disk_records(s.fx.dir);
    uint32_t free0 = rkv_pool_num_free(s.fx.pool);
    rkv_load ld;
    cr_assert_eq(rkv_tree_load(s.fx.tree, 5, s.tok, 3 * TP, UINT32_MAX, NULL, &ld), RKV_OK);
    cr_assert_eq(ld.disk_pages, 3);
    rkv_transfer_done done = tt_poll_one(&s.fx);
    cr_assert_eq(done.status, RKV_ERR_CORRUPT, "status %d", done.status);
    cr_assert_eq(rkv_tree_unlock(s.fx.tree, &ld.lease), RKV_OK);
    cr_assert_eq(rkv_tree_check(s.fx.tree), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(rkv_pool_num_free(s.fx.pool), free0);
    cr_assert_eq(rkv_tree_match_tiers(s.fx.tree, 5, s.tok, 3 * TP, NULL,
                                      RKV_MATCH_PEEK, &m, &tm), RKV_OK);
    cr_assert_eq(m.matched_tokens + tm.lower_tokens, 0);
    cr_assert_eq(rkv_store_used_blocks(s.fx.disk), 0);
    rkv_tier_stats ts;
    cr_assert_eq(rkv_tree_tier_stats(s.fx.tree, &ts), RKV_OK);
    cr_assert_eq(ts.corrupt_blocks, 1);
    tt_close(&s.fx);
}

/* ---- the chain device -> host -> disk -------------------------------------- */

typedef struct chain {
    tt_fixture fx; /* a 16-block pool, a 2-block host over an 8-block disk */
    int32_t tok[4][2 * TP]; /* four 2-page sequences, distinct from page 0 */
} chain;

static void chain_open(chain *c)
{
    rkv_tree_config tc;
    rkv_tree_config_init(&tc);
    tc.event_ring = 256;
    tt_open(&c->fx, &(tt_spec){.pool_blocks = 16, .page_size = TP,
                               .tree = &tc, .host_blocks = 2,
                               .disk_blocks = 8});
    for (int a = 0; a < 4; a++)
        for (uint32_t j = 0; j < 2 * TP; j++)
            c->tok[a][j] = (int32_t)(a * 1000 + j + 1);
}

/* Caches the four sequences on the device (A first), then evicts them all
 * in LRU order: each demotion goes to the 2-slot host, which writes the
 * one it held back to the disk. Store failures may lose pages, never
 * more. */
static void chain_fill(chain *c)
{
    for (int a = 0; a < 4; a++) {
        cr_assert_eq(tt_try_cache(&c->fx, 5, c->tok[a], 2, NULL), RKV_OK);
        tt_check(&c->fx);
    }
    uint32_t freed = 0;
    cr_assert_eq(rkv_tree_evict(c->fx.tree, 8, &freed), RKV_OK);
    cr_assert_eq(freed, 8);
    tt_check(&c->fx);
}

/* Host over disk: the host's LRU writes back to the disk, match splits
 * host / disk, stats, snapshot and events per medium, loads from both. */
Test(tree_tiers, host_disk_chain)
{
    chain c;
    chain_open(&c);
    chain_fill(&c);
    rkv_match m;
    rkv_tier_match tm;
    for (int a = 0; a < 4; a++) {
        cr_assert_eq(rkv_tree_match_tiers(c.fx.tree, 5, c.tok[a], 2 * TP, NULL,
                                          RKV_MATCH_PEEK, &m, &tm), RKV_OK);
        cr_assert_eq(m.matched_tokens, 0);
        cr_assert_eq(tm.host_tokens, a == 3 ? 2 * TP : 0, "seq %d", a);
        cr_assert_eq(tm.disk_tokens, a == 3 ? 0 : 2 * TP, "seq %d", a);
        /* another namespace sees nothing, on any tier */
        cr_assert_eq(rkv_tree_match_tiers(c.fx.tree, 6, c.tok[a], 2 * TP, NULL,
                                          RKV_MATCH_PEEK, &m, &tm), RKV_OK);
        cr_assert_eq(tm.lower_tokens, 0);
    }
    rkv_tier_stats ts;
    cr_assert_eq(rkv_tree_tier_stats(c.fx.tree, &ts), RKV_OK);
    cr_assert_eq(ts.resident_pages[RKV_MEDIUM_HOST], 2);
    cr_assert_eq(ts.resident_pages[RKV_MEDIUM_DISK], 6);
    cr_assert_eq(ts.stores_blocks[RKV_MEDIUM_HOST], 8);
    cr_assert_eq(ts.stores_blocks[RKV_MEDIUM_DISK], 6);
    cr_assert_eq(ts.evictions[RKV_MEDIUM_HOST], 6);
    cr_assert_eq(ts.evictions[RKV_MEDIUM_DISK], 0);
    /* one snapshot entry per (page, medium) */
    rkv_block_entry snap[16];
    size_t n = 0;
    cr_assert_eq(rkv_tree_snapshot(c.fx.tree, snap, 16, &n, NULL), RKV_OK);
    cr_assert_eq(n, 8);
    uint32_t per[RKV_MEDIUM_COUNT] = {0};
    for (size_t k = 0; k < n; k++)
        per[snap[k].medium]++;
    cr_assert_eq(per[RKV_MEDIUM_HOST], 2);
    cr_assert_eq(per[RKV_MEDIUM_DISK], 6);
    /* the events say the same: 8 host stores, 6 disk stores, 6 host
     * removals, 8 device removals */
    rkv_event ev[64];
    uint32_t ne = 0;
    uint32_t stored[RKV_MEDIUM_COUNT] = {0}, removed[RKV_MEDIUM_COUNT] = {0};
    cr_assert_eq(rkv_tree_events_drain(c.fx.tree, ev, 64, &ne), RKV_OK, "%s",
                 rkv_last_error());
    cr_assert_lt(ne, 64);
    for (uint32_t k = 0; k < ne; k++) {
        cr_assert_neq(ev[k].kind, RKV_EVENT_RESYNC);
        if (ev[k].kind == RKV_EVENT_BLOCK_STORED)
            stored[ev[k].medium] += ev[k].num_hashes;
        else if (ev[k].kind == RKV_EVENT_BLOCK_REMOVED)
            removed[ev[k].medium] += ev[k].num_hashes;
    }
    cr_assert_eq(stored[RKV_MEDIUM_DEVICE], 8);
    cr_assert_eq(stored[RKV_MEDIUM_HOST], 8);
    cr_assert_eq(stored[RKV_MEDIUM_DISK], 6);
    cr_assert_eq(removed[RKV_MEDIUM_DEVICE], 8);
    cr_assert_eq(removed[RKV_MEDIUM_HOST], 6);
    cr_assert_eq(removed[RKV_MEDIUM_DISK], 0);
    /* load A from disk (verified read) and D from host */
    for (int a = 0; a < 4; a += 3) {
        rkv_load ld;
        cr_assert_eq(rkv_tree_load(c.fx.tree, 5, c.tok[a], 2 * TP, UINT32_MAX,
                                   NULL, &ld), RKV_OK, "%s", rkv_last_error());
        cr_assert_eq(ld.num_pages, 2);
        cr_assert_eq(ld.disk_pages, a == 0 ? 2 : 0);
        rkv_transfer_done done = tt_poll_one(&c.fx);
        cr_assert_eq(done.status, RKV_OK);
        cr_assert_eq(rkv_tree_unlock(c.fx.tree, &ld.lease), RKV_OK);
        tt_check(&c.fx);
        cr_assert_eq(rkv_tree_match_tiers(c.fx.tree, 5, c.tok[a], 2 * TP, NULL,
                                          RKV_MATCH_PEEK, &m, &tm), RKV_OK);
        cr_assert_eq(m.matched_tokens, 2 * TP);
    }
    cr_assert_eq(rkv_tree_tier_stats(c.fx.tree, &ts), RKV_OK);
    cr_assert_eq(ts.loads_blocks[RKV_MEDIUM_DISK], 2);
    cr_assert_eq(ts.loads_blocks[RKV_MEDIUM_HOST], 2);
    cr_assert_eq(ts.resident_pages[RKV_MEDIUM_HOST], 0);
    cr_assert_eq(ts.resident_pages[RKV_MEDIUM_DISK], 4);
    tt_close(&c.fx);
}

/* Store and load failures at every I/O call of either store in the
 * fill-and-load scenario: every state checks, nothing leaks, a sequence is
 * never reported longer than cached. */
Test(tree_tiers, host_disk_every_io_fails)
{
    for (int which = 0; which < 2; which++)
        for (uint32_t k = 1; k <= 24; k++) {
            chain c;
            chain_open(&c);
            rkv_store_fail_after(which ? c.fx.disk : c.fx.host, k);
            chain_fill(&c);
            for (int a = 0; a < 4; a++) {
                rkv_load ld;
                cr_assert_eq(rkv_tree_load(c.fx.tree, 5, c.tok[a], 2 * TP,
                                           UINT32_MAX, NULL, &ld), RKV_OK);
                tt_check(&c.fx);
                if (ld.ticket == 0)
                    continue;
                rkv_transfer_done done;
                uint32_t nd = 0;
                cr_assert_eq(rkv_tree_tier_poll(c.fx.tree, &done, 1, &nd),
                             RKV_OK);
                cr_assert_eq(nd, 1);
                cr_assert_eq(rkv_tree_unlock(c.fx.tree, &ld.lease), RKV_OK);
                tt_check(&c.fx);
                rkv_match m;
                rkv_tier_match tm;
                cr_assert_eq(rkv_tree_match_tiers(c.fx.tree, 5, c.tok[a],
                                                  2 * TP, NULL, RKV_MATCH_PEEK,
                                                  &m, &tm), RKV_OK);
                cr_assert_leq(m.matched_tokens + tm.lower_tokens, 2 * TP);
                if (done.status == RKV_OK)
                    cr_assert_eq(m.matched_tokens, ld.device_tokens);
            }
            rkv_store_fail_after(which ? c.fx.disk : c.fx.host, 0);
            tt_close(&c.fx);
        }
}

/* A corrupted disk record below a host: the load of a page that only the
 * disk holds fails verification, that page and what follows leave the
 * tree, the host's pages are untouched. */
Test(tree_tiers, host_disk_corrupt_block)
{
    chain c;
    chain_open(&c);
    chain_fill(&c);
    corrupt_disk_records(c.fx.dir);
    uint32_t free0 = rkv_pool_num_free(c.fx.pool);
    rkv_load ld;
    cr_assert_eq(rkv_tree_load(c.fx.tree, 5, c.tok[1], 2 * TP, UINT32_MAX, NULL, &ld),
                 RKV_OK);
    cr_assert_eq(ld.disk_pages, 2);
    rkv_transfer_done done = tt_poll_one(&c.fx);
    cr_assert_eq(done.status, RKV_ERR_CORRUPT);
    cr_assert_eq(rkv_tree_unlock(c.fx.tree, &ld.lease), RKV_OK);
    tt_check(&c.fx);
    cr_assert_eq(rkv_pool_num_free(c.fx.pool), free0);
    rkv_match m;
    rkv_tier_match tm;
    cr_assert_eq(rkv_tree_match_tiers(c.fx.tree, 5, c.tok[1], 2 * TP, NULL,
                                      RKV_MATCH_PEEK, &m, &tm), RKV_OK);
    cr_assert_eq(m.matched_tokens + tm.lower_tokens, 0);
    cr_assert_eq(rkv_tree_match_tiers(c.fx.tree, 5, c.tok[3], 2 * TP, NULL,
                                      RKV_MATCH_PEEK, &m, &tm), RKV_OK);
    cr_assert_eq(tm.host_tokens, 2 * TP);
    rkv_tier_stats ts;
    cr_assert_eq(rkv_tree_tier_stats(c.fx.tree, &ts), RKV_OK);
    cr_assert_eq(ts.corrupt_blocks, 1);
    cr_assert_eq(ts.resident_pages[RKV_MEDIUM_DISK], 4);
    tt_close(&c.fx);
}

/* ---- priorities in the lower tiers ------------------------------------------
 * Under RKV_EVICT_PRIORITY the host and disk evict lowest priority first,
 * oldest among equals, as the device does; under the other policies plain
 * LRU (priority ignored). The reference below knows nothing of buckets or
 * lists: before each operation it scans every node for the ones the tier
 * may take (host-only: LOWER leaves; chain: host nodes with no host child
 * for the host, DISK leaves for the disk) and their key (priority under
 * RKV_EVICT_PRIORITY else 0, then last use); the first page each tier
 * gives up during the operation (KV events) must belong to one of them
 * with the smallest key. Every node holds one page (each insert adds one
 * page under a cached prefix, with fresh tokens: no split, no conflict)
 * and each operation demotes at most one device node, so the first page a
 * tier gives up is taken before anything new reaches that tier. */

#include "residency/tier.h"

#define PR_MAXP 5u
#define PR_NPATH 40u

typedef struct pr_path {
    uint32_t npages;
    int32_t tok[PR_MAXP * TP];
} pr_path;

typedef struct pr_env {
    tt_fixture fx; /* pool, tree, host (and disk) */
    int policy;
    pr_path paths[PR_NPATH];
    uint32_t npaths;
    int32_t next_tok;
    uint64_t rng;
    uint64_t checked[2]; /* first drops checked: host (or lowest), disk */
} pr_env;

#define PR_OK(expr) cr_assert_eq((expr), RKV_OK, "%s: %s", #expr, rkv_last_error())

static uint64_t pr_rnd(pr_env *e)
{
    e->rng ^= e->rng << 13;
    e->rng ^= e->rng >> 7;
    e->rng ^= e->rng << 17;
    return e->rng;
}

static void pr_open(pr_env *e, int policy, uint32_t blocks, uint32_t host_cap,
                    uint32_t disk_cap)
{
    memset(e, 0, sizeof *e);
    e->policy = policy;
    e->next_tok = 1;
    rkv_tree_config tc;
    rkv_tree_config_init(&tc);
    tc.evict_policy = policy;
    tc.event_ring = 4096;
    tt_open(&e->fx, &(tt_spec){.pool_blocks = blocks, .page_size = TP,
                               .tree = &tc, .host_blocks = host_cap,
                               .disk_blocks = disk_cap});
}

/* Device pages of path p (a PEEK match). */
static uint32_t pr_dev_pages(pr_env *e, const pr_path *p)
{
    rkv_match m;
    PR_OK(rkv_tree_match(e->fx.tree, 5, p->tok, (size_t)p->npages * TP, NULL,
                         RKV_MATCH_PEEK, &m));
    return m.num_blocks;
}

/* Sets the priority of page k of path p (its own node) if it is cached. */
static void pr_prio(pr_env *e, const pr_path *p, uint32_t k, int prio)
{
    rkv_retention r = tu_prio(prio, (size_t)k * TP, (size_t)(k + 1) * TP);
    rkv_retain_result out;
    PR_OK(rkv_tree_retain(e->fx.tree, 5, p->tok, (size_t)p->npages * TP, &r, 0,
                          &out));
}

/* Caches path p, whose first npages-1 pages are on the device: one new
 * block (device pressure demotes at most one one-page node), then the
 * new page's priority. */
static void pr_insert(pr_env *e, const pr_path *p, int prio)
{
    rkv_block_id b[PR_MAXP];
    rkv_match m;
    rkv_lease l = {0};
    uint32_t k = p->npages - 1;
    PR_OK(rkv_tree_match(e->fx.tree, 5, p->tok, (size_t)k * TP, b, 0, &m));
    cr_assert_eq(m.num_blocks, k);
    if (k > 0)
        PR_OK(rkv_tree_lock(e->fx.tree, m.node, &l));
    PR_OK(rkv_tree_alloc_blocks(e->fx.tree, 1, &b[k]));
    PR_OK(rkv_tree_insert(e->fx.tree, 5, p->tok, (size_t)p->npages * TP, b,
                          NULL, NULL));
    PR_OK(rkv_pool_unref(e->fx.pool, b[k]));
    if (k > 0)
        PR_OK(rkv_tree_unlock(e->fx.tree, &l));
    pr_prio(e, p, k, prio);
}

/* The reference's key of node y and the tier (0 host, 1 disk; -1 none)
 * that may take it. */
typedef struct pr_cand {
    uint64_t hash; /* its (only) page */
    uint32_t prio;
    uint64_t last;
} pr_cand;

static int pr_tier_of(const rkv_tree *t, uint32_t y)
{
    const rkv_tnode *x = &t->nodes[y];
    if (x->parent == RKV_NIL || x->parent == 0 || !(t->tiers.tn[y].flags & RKV_TN_LOWER))
        return -1;
    int disk = (t->tiers.tn[y].flags & RKV_TN_DISK) != 0;
    if (t->tiers.tier->disk == NULL || disk)
        return x->first_child == RKV_NIL ? disk : -1;
    for (uint32_t c = x->first_child; c != RKV_NIL; c = t->nodes[c].next_sib)
        if (!(t->tiers.tn[c].flags & RKV_TN_DISK))
            return -1;
    return 0;
}

static uint32_t pr_snapshot(pr_env *e, int d, pr_cand *out, uint32_t cap)
{
    const rkv_tree *t = e->fx.tree;
    uint32_t n = 0;
    for (uint32_t y = 1; y < t->nodes_used; y++) {
        if (pr_tier_of(t, y) != d)
            continue;
        const rkv_tnode *x = &t->nodes[y];
        cr_assert_eq(x->num_pages, 1);
        cr_assert_lt(n, cap);
        const rkv_page_residency *tp = rkv_tnode_tpages(t, x);
        out[n].hash = (uint64_t)tp[0].hlo | ((uint64_t)tp[0].hhi << 32);
        out[n].prio = e->policy != RKV_EVICT_PRIORITY ? 0
                      : t->retain.meta != NULL ? t->retain.meta[y].prio
                                        : RKV_PRIORITY_DEFAULT;
        out[n].last = x->last_access;
        n++;
    }
    return n;
}

/* The first page tier d gave up must be a smallest-key candidate. */
static void pr_judge(pr_env *e, int d, const pr_cand *c, uint32_t n,
                     uint64_t hash, uint64_t step)
{
    uint32_t best = UINT32_MAX, hit = UINT32_MAX;
    for (uint32_t i = 0; i < n; i++) {
        if (best == UINT32_MAX || c[i].prio < c[best].prio ||
            (c[i].prio == c[best].prio && c[i].last < c[best].last))
            best = i;
        if (c[i].hash == hash)
            hit = i;
    }
    cr_assert_neq(hit, UINT32_MAX, "step %llu: %s gave up a page it may not "
                  "take", (unsigned long long)step, d ? "disk" : "host");
    cr_assert(c[hit].prio == c[best].prio && c[hit].last == c[best].last,
              "step %llu: %s took priority %u last use %llu before priority "
              "%u last use %llu", (unsigned long long)step, d ? "disk" : "host",
              c[hit].prio, (unsigned long long)c[hit].last, c[best].prio,
              (unsigned long long)c[best].last);
    e->checked[d]++;
}

static void pr_random(int policy, uint64_t seed, uint32_t steps, int with_disk)
{
    static const int prios[] = {0, 1, 20, 35, 35, 60, 90, 100};
    pr_env *e = malloc(sizeof *e);
    cr_assert_not_null(e);
    pr_open(e, policy, 6, with_disk ? 4 : 8, with_disk ? 8 : 0);
    e->rng = seed * 0x9E3779B97F4A7C15ull + 1;
    pr_cand *cand[2];
    for (int d = 0; d < 2; d++) {
        cand[d] = malloc(256 * sizeof *cand[d]);
        cr_assert_not_null(cand[d]);
    }
    rkv_event ev[64];
    for (uint64_t step = 0; step < steps; step++) {
        uint32_t nc[2];
        for (int d = 0; d < 2; d++)
            nc[d] = pr_snapshot(e, d, cand[d], 256);
        uint32_t op = (uint32_t)(pr_rnd(e) % 100);
        int prio = prios[pr_rnd(e) % (sizeof prios / sizeof prios[0])];
        pr_path *p = e->npaths > 0 ? &e->paths[pr_rnd(e) % e->npaths] : NULL;
        if (op < 70 || p == NULL) {
            /* a new page under a path on the device, or a new root page */
            pr_path np;
            memset(&np, 0, sizeof np);
            if (op < 55 && p != NULL && p->npages < PR_MAXP &&
                pr_dev_pages(e, p) == p->npages)
                np = *p;
            for (uint32_t j = 0; j < TP; j++)
                np.tok[np.npages * TP + j] = e->next_tok++;
            np.npages++;
            pr_insert(e, &np, prio);
            if (e->npaths < PR_NPATH)
                e->paths[e->npaths++] = np;
            else
                e->paths[pr_rnd(e) % PR_NPATH] = np;
        } else if (op < 85) {
            /* a use of its device part (stamps it; the lower part waits) */
            rkv_match m;
            PR_OK(rkv_tree_match(e->fx.tree, 5, p->tok, (size_t)p->npages * TP,
                                 NULL, 0, &m));
        } else {
            /* a new priority for its last device page */
            uint32_t k = pr_dev_pages(e, p);
            if (k > 0)
                pr_prio(e, p, k - 1, prio);
        }
        tt_check(&e->fx);
        int seen[2] = {0, 0};
        uint32_t got;
        do {
            PR_OK(rkv_tree_events_drain(e->fx.tree, ev, 64, &got));
            for (uint32_t i = 0; i < got; i++) {
                cr_assert_neq(ev[i].kind, RKV_EVENT_RESYNC);
                if (ev[i].kind != RKV_EVENT_BLOCK_REMOVED ||
                    ev[i].medium == RKV_MEDIUM_DEVICE)
                    continue;
                int d = ev[i].medium == RKV_MEDIUM_DISK;
                if (!seen[d])
                    pr_judge(e, d, cand[d], nc[d], ev[i].hashes[0], step);
                seen[d] = 1;
            }
        } while (got > 0);
    }
    /* the runs must have made the tiers choose, many times */
    cr_assert_gt(e->checked[0], steps / 10, "host chose %llu times",
                 (unsigned long long)e->checked[0]);
    if (with_disk)
        cr_assert_gt(e->checked[1], steps / 10, "disk chose %llu times",
                     (unsigned long long)e->checked[1]);
    for (int d = 0; d < 2; d++)
        free(cand[d]);
    tt_close(&e->fx);
    free(e);
}

Test(tree_tiers, lower_drops_by_priority)
{
    for (uint64_t seed = 1; seed <= 4; seed++) {
        pr_random(RKV_EVICT_PRIORITY, seed, 1500, 0);
        pr_random(RKV_EVICT_PRIORITY, seed, 1500, 1);
    }
}

/* LRU and learned: the tiers ignore priorities (their order as before). */
Test(tree_tiers, lower_drops_lru_ignore_priority)
{
    for (uint64_t seed = 1; seed <= 2; seed++) {
        pr_random(RKV_EVICT_LRU, seed, 1000, 0);
        pr_random(RKV_EVICT_LRU, seed, 1000, 1);
        pr_random(RKV_EVICT_LEARNED, seed, 1000, 0);
        pr_random(RKV_EVICT_LEARNED, seed, 1000, 1);
    }
}

/* Issue 13's case: a priority-90 context demoted to the host stays there
 * while a younger priority-1 one is dropped (plain LRU drops the older). */
static void pr_survivor(int policy)
{
    pr_env e;
    pr_open(&e, policy, 1, 2, 0);
    pr_path a = {1, {1, 2, 3, 4}}, b = {1, {5, 6, 7, 8}},
            c = {1, {9, 10, 11, 12}}, d = {1, {13, 14, 15, 16}};
    pr_insert(&e, &a, 90);
    tt_check(&e.fx);
    pr_insert(&e, &b, 1); /* demotes a */
    tt_check(&e.fx);
    pr_insert(&e, &c, 50); /* demotes b: host [a (90, older), b (1)] */
    tt_check(&e.fx);
    pr_insert(&e, &d, 50); /* demotes c: the host is full, one must go */
    tt_check(&e.fx);
    rkv_match m;
    rkv_tier_match tm;
    PR_OK(rkv_tree_match_tiers(e.fx.tree, 5, a.tok, TP, NULL, RKV_MATCH_PEEK,
                               &m, &tm));
    size_t a_left = tm.host_tokens;
    PR_OK(rkv_tree_match_tiers(e.fx.tree, 5, b.tok, TP, NULL, RKV_MATCH_PEEK,
                               &m, &tm));
    size_t b_left = tm.host_tokens;
    if (policy == RKV_EVICT_PRIORITY) {
        cr_assert_eq(a_left, TP, "the priority-90 page left the host");
        cr_assert_eq(b_left, 0, "the priority-1 page stayed");
    } else {
        cr_assert_eq(a_left, 0, "LRU kept the older page");
        cr_assert_eq(b_left, TP);
    }
    tt_close(&e.fx);
}

Test(tree_tiers, priority_90_survives_in_host)
{
    pr_survivor(RKV_EVICT_PRIORITY);
    pr_survivor(RKV_EVICT_LRU);
}
