/*
 * tests/test_tree_tok3.c -- trees that store 3-byte token ids
 * (rkv_tree_config.token_bytes = 3, radix/tree_tokens.h): the config and
 * its refusals, ids at and past the 2^24 bound, every mismatch position
 * of runs of every length (the wide paths' front groups, the one or two
 * ids between them and the last 8, runs under 11 ids) with the wide
 * paths on and off, and the same hashes, KV event token ids, splits and
 * evictions as a 4-byte tree given the same requests, in less memory.
 * (The randomized differential test of a 3-byte tree against the model:
 * tests/test_tree_random.c, *_tok3.)
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "radix/tree_debug.h"
#include "radixkv.h"
#include "tests/support/check.h"

enum { MAXN = 100 };

typedef struct tt {
    rkv_pool *pool;
    rkv_tree *tree;
} tt;

static void tt_open(tt *w, uint32_t P, uint32_t nb, uint32_t token_bytes,
                    uint32_t events)
{
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.page_size = P;
    pc.num_blocks = nb;
    OK(rkv_pool_create(&pc, &w->pool));
    rkv_tree_config tc;
    rkv_tree_config_init(&tc);
    tc.token_bytes = token_bytes;
    tc.event_ring = events;
    tc.event_tokens = events ? 1u << 16 : 0;
    OK(rkv_tree_create(w->pool, &tc, &w->tree));
}

static void tt_close(tt *w)
{
    rkv_tree_destroy(w->tree);
    rkv_pool_destroy(w->pool);
}

/* Inserts tok[0..n) with fresh blocks (evicting as needed); returns the
 * new pages. */
static uint32_t put(tt *w, uint64_t ns, const int32_t *tok, size_t n)
{
    uint32_t P = rkv_pool_page_size(w->pool);
    rkv_block_id b[MAXN * 4];
    rkv_match m;
    OK(rkv_tree_match(w->tree, ns, tok, n, b, 0, &m));
    uint32_t np = (uint32_t)(n / P), need = np - m.num_blocks;
    rkv_lease l;
    OK(rkv_tree_lock(w->tree, m.node, &l));
    OK(rkv_tree_alloc_blocks(w->tree, need, b + m.num_blocks));
    rkv_insert_result r;
    OK(rkv_tree_insert(w->tree, ns, tok, n, b, NULL, &r));
    OK(rkv_tree_unlock(w->tree, &l));
    if (need > 0)
        OK(rkv_pool_unref_n(w->pool, need, b + m.num_blocks));
    return r.new_pages;
}

static size_t peek(tt *w, uint64_t ns, const int32_t *tok, size_t n)
{
    rkv_match m;
    OK(rkv_tree_match(w->tree, ns, tok, n, NULL, RKV_MATCH_PEEK, &m));
    return m.matched_tokens;
}

Test(tree_tok3, config)
{
    rkv_tree_config tc;
    rkv_tree_config_init(&tc);
    cr_assert_eq(tc.token_bytes, 4, "the default keeps int32 ids");
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = 8;
    rkv_pool *pool;
    OK(rkv_pool_create(&pc, &pool));
    rkv_tree *t = NULL;
    const uint32_t bad[] = {0, 1, 2, 5, 8, UINT32_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tc.token_bytes = bad[i];
        ERR(RKV_ERR_INVALID_ARG, rkv_tree_create(pool, &tc, &t));
        cr_assert_null(t);
        cr_assert_not_null(strstr(rkv_last_error(), "token_bytes"), "%s",
                           rkv_last_error());
    }
    tc.token_bytes = 3; /* the refusals left the pool free for a tree */
    OK(rkv_tree_create(pool, &tc, &t));
    /* lower tiers are taken under 3-byte ids (their records hold int32:
     * tests/test_tree_tiers.c and tests/test_tier_warm.c, *tok3*) */
    rkv_store_config sc;
    rkv_store_config_init(&sc, RKV_MEDIUM_HOST);
    sc.capacity_blocks = 4;
    rkv_store *h;
    OK(rkv_store_create(&sc, &h));
    rkv_tier_config cfg;
    rkv_tier_config_init(&cfg);
    cfg.host = h;
    OK(rkv_tree_attach_tiers(t, &cfg));
    OK(rkv_tree_check(t));
    OK(rkv_tree_attach_tiers(t, NULL)); /* and detached */
    OK(rkv_tree_check(t));
    rkv_tree_destroy(t);
    rkv_store_destroy(h);
    rkv_pool_destroy(pool);
}

/* Ids below 2^24 are cached; 2^24 and above, and negative ids, are
 * refused with nothing changed, wherever they sit (a new page, the
 * cut-off tail); a query holding one stops before its page. */
Test(tree_tok3, bound)
{
    tt w;
    tt_open(&w, 4, 32, 3, 0);
    int32_t tok[12] = {0, 1, 0xffffff, 0xfffffe, 0x800000, 0x7fffff, 0x10000,
                       0xff, 5, 6, 7, 8};
    cr_assert_eq(put(&w, 1, tok, 12), 3);
    cr_assert_eq(peek(&w, 1, tok, 12), 12);
    rkv_tree_stats s0, s1;
    OK(rkv_tree_get_stats(w.tree, &s0));
    const int32_t bad[] = {1 << 24, (1 << 24) + 0xffffff, INT32_MAX, -1,
                           INT32_MIN, (int32_t)0xff000000u};
    int32_t q[14];
    rkv_block_id b[4];
    OK(rkv_pool_alloc_n(w.pool, 4, b));
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (size_t at = 0; at < 14; at++) {
            memcpy(q, tok, sizeof tok);
            q[12] = 9;
            q[13] = 10;
            q[at] = bad[i];
            /* a new request whose only bad id is anywhere: refused */
            q[0] = at == 0 ? bad[i] : 3;
            ERR(RKV_ERR_INVALID_ARG, rkv_tree_insert(w.tree, 1, q, 14, b, NULL, NULL));
            cr_assert_not_null(strstr(rkv_last_error(), ">= 2^24"), "%s",
                               rkv_last_error());
            OK(rkv_tree_get_stats(w.tree, &s1));
            cr_assert_eq(s1.cached_blocks, s0.cached_blocks);
            cr_assert_eq(s1.inserted_pages, s0.inserted_pages);
            /* past the cached prefix: the matched pages are not re-read */
            memcpy(q, tok, sizeof tok);
            q[12] = 9;
            q[13] = 10;
            if (at >= 12) {
                q[at] = bad[i];
                ERR(RKV_ERR_INVALID_ARG,
                    rkv_tree_insert(w.tree, 1, q, 14, b, NULL, NULL));
            }
            /* a query: its page and those after it do not match */
            memcpy(q, tok, sizeof tok);
            q[at % 12] = bad[i];
            cr_assert_eq(peek(&w, 1, q, 12), (at % 12) / 4 * 4,
                         "id %d at %zu", bad[i], at % 12);
        }
    }
    /* the truncation slip: id + 2^24 is not id */
    memcpy(q, tok, sizeof tok);
    q[9] += 1 << 24;
    cr_assert_eq(peek(&w, 1, q, 12), 8);
    OK(rkv_pool_unref_n(w.pool, 4, b));
    OK(rkv_tree_check(w.tree));
    tt_close(&w);
}

/* One node of n ids (page size 1), then a query that differs at each
 * position j in each byte (and by 2^24): the match is exactly j, for
 * every n up to MAXN -- both the wide paths and the portable code. */
static void mismatch_everywhere(int simd)
{
    for (uint32_t n = 1; n <= MAXN; n++) {
        tt w;
        tt_open(&w, 1, MAXN + 1, 3, 0);
        rkv_tree_debug_tok_simd(w.tree, simd);
        int32_t tok[MAXN], q[MAXN];
        for (uint32_t i = 0; i < n; i++)
            tok[i] = (int32_t)(0xffffffu - i * 0x010203u % 0x7fffffu);
        cr_assert_eq(put(&w, 7, tok, n), n);
        cr_assert_eq(peek(&w, 7, tok, n), n);
        static const uint32_t flips[4] = {0x000001u, 0x000100u, 0x010000u,
                                          0x1000000u};
        for (uint32_t j = 0; j < n; j++) {
            for (int f = 0; f < 4; f++) {
                memcpy(q, tok, n * sizeof *q);
                q[j] = (int32_t)((uint32_t)q[j] ^ flips[f]);
                cr_assert_eq(peek(&w, 7, q, n), j, "simd %d n %u: id %u byte %d",
                             simd, n, j, f);
            }
        }
        OK(rkv_tree_check(w.tree));
        tt_close(&w);
    }
}

Test(tree_tok3, mismatch_wide) { mismatch_everywhere(1); }
Test(tree_tok3, mismatch_portable) { mismatch_everywhere(0); }

/* Splits store pieces of packed runs: insert runs of every length, then
 * split each at every page by a diverging request, through the check. */
Test(tree_tok3, splits)
{
    for (int simd = 0; simd <= 1; simd++) {
        tt w;
        tt_open(&w, 2, 16384, 3, 0);
        rkv_tree_debug_tok_simd(w.tree, simd);
        int32_t tok[MAXN];
        for (uint32_t n = 2; n <= 64; n += 2) {
            for (uint32_t i = 0; i < n; i++)
                tok[i] = (int32_t)(0x800000u + n * 1000u + i);
            put(&w, n, tok, n);
            for (uint32_t k = 2; k < n; k += 2) {
                tok[k] ^= 0x400000;
                cr_assert_eq(put(&w, n, tok, n), (n - k) / 2);
                tok[k] ^= 0x400000;
                cr_assert_eq(peek(&w, n, tok, n), n);
            }
            OK(rkv_tree_check(w.tree));
        }
        tt_close(&w);
    }
}

/* The same requests on a 3- and a 4-byte tree: same matches, chained
 * hashes (lazy and eager), event token ids and evictions; fewer host
 * bytes. */
Test(tree_tok3, same_as_int32)
{
    for (uint32_t events = 0; events <= 1; events++) {
        tt a, b;
        tt_open(&a, 16, 64, 4, events ? 256 : 0);
        tt_open(&b, 16, 64, 3, events ? 256 : 0);
        uint64_t x = 88172645463325252ull;
        int32_t tok[4 * MAXN];
        for (int r = 0; r < 300; r++) {
            /* a few prefixes shared and extended: splits and evictions */
            size_t n = 16 * (1 + (size_t)(r * 7 % 20));
            for (size_t i = 0; i < n; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                tok[i] = i < 64 ? (int32_t)(0xfffff0u + (uint32_t)(r % 3) + i % 7)
                                : (int32_t)(x & 0xffffff);
            }
            cr_assert_eq(peek(&a, 0, tok, n), peek(&b, 0, tok, n));
            cr_assert_eq(put(&a, 0, tok, n), put(&b, 0, tok, n));
            if (!events)
                continue;
            static rkv_event ea[16], eb[16];
            static int32_t ta[4096], tb[4096];
            uint32_t na, nb2;
            do {
                size_t ka, kb;
                OK(rkv_tree_events_drain_tokens(a.tree, ea, 16, ta, 4096, &na, &ka));
                OK(rkv_tree_events_drain_tokens(b.tree, eb, 16, tb, 4096, &nb2, &kb));
                cr_assert_eq(na, nb2);
                cr_assert_eq(ka, kb);
                cr_assert_eq(memcmp(ta, tb, ka * sizeof *ta), 0, "event token ids");
                for (uint32_t i = 0; i < na; i++) {
                    cr_assert_eq(ea[i].kind, eb[i].kind);
                    cr_assert_eq(ea[i].num_hashes, eb[i].num_hashes);
                    cr_assert_eq(memcmp(ea[i].hashes, eb[i].hashes,
                                        ea[i].num_hashes * sizeof ea[i].hashes[0]),
                                 0, "event hashes");
                }
            } while (na == 16);
        }
        rkv_tree_stats sa, sb;
        OK(rkv_tree_get_stats(a.tree, &sa));
        OK(rkv_tree_get_stats(b.tree, &sb));
        cr_assert_eq(sa.cached_blocks, sb.cached_blocks);
        cr_assert_eq(sa.evicted_blocks, sb.evicted_blocks);
        cr_assert_gt(sa.evicted_blocks, 0);
        cr_assert_gt(sa.splits, 0);
        cr_assert_eq(sa.splits, sb.splits);
        cr_assert_lt(sb.host_bytes, sa.host_bytes);
        for (rkv_block_id i = 0; i < 64; i++) {
            cr_assert_eq(rkv_pool_refcount(a.pool, i), rkv_pool_refcount(b.pool, i));
            if (rkv_pool_refcount(a.pool, i) != 0)
                cr_assert_eq(rkv_pool_block_hash(a.pool, i),
                             rkv_pool_block_hash(b.pool, i), "block %u", i);
        }
        OK(rkv_tree_check(a.tree));
        OK(rkv_tree_check(b.tree));
        tt_close(&a);
        tt_close(&b);
    }
}

/* The scheduler over a 3-byte tree refuses what the tree cannot cache --
 * a prompt id or a sampled id >= 2^24 -- at submit and commit, nothing
 * changed, instead of failing later inside the tree. */
Test(tree_tok3, sched_refuses_wide_ids)
{
    tt w;
    tt_open(&w, 4, 64, 3, 0);
    rkv_sched_config c;
    rkv_sched_config_init(&c);
    rkv_sched *s;
    OK(rkv_sched_create(w.tree, &c, &s));
    int32_t p[9] = {0xffffff, 0xfffffe, 7, 0x800000, 1, 2, 3, 4, 1 << 24};
    rkv_request_desc d;
    memset(&d, 0, sizeof d);
    d.id = 1;
    d.prompt = p;
    d.prompt_len = 9;
    d.max_new_tokens = 3;
    ERR(RKV_ERR_INVALID_ARG, rkv_sched_submit(s, &d));
    cr_assert_not_null(strstr(rkv_last_error(), "2^24"), "%s", rkv_last_error());
    d.prompt_len = 8;
    OK(rkv_sched_submit(s, &d));
    const rkv_batch_plan *pl;
    OK(rkv_sched_step(s, 0, &pl));
    cr_assert_eq(pl->num_reqs, 1);
    int32_t next = 1 << 24;
    ERR(RKV_ERR_INVALID_ARG, rkv_sched_commit(s, &next, NULL, 1));
    cr_assert_not_null(strstr(rkv_last_error(), "2^24"), "%s", rkv_last_error());
    OK(rkv_sched_check(s));
    next = 0xffffff;
    OK(rkv_sched_commit(s, &next, NULL, 1));
    OK(rkv_sched_check(s));
    /* the prompt's pages are cached with their 3-byte ids */
    cr_assert_eq(peek(&w, 0, p, 8), 8);
    rkv_sched_destroy(s);
    OK(rkv_tree_check(w.tree));
    tt_close(&w);
}

/* Insert's scan for bad ids (both layouts, wide paths on and off): a bad
 * id at any position of a request of any length is refused, nothing
 * changed; the same request without it is cached. */
Test(tree_tok3, scan_every_position)
{
    for (uint32_t tb = 3; tb <= 4; tb++) {
        for (int simd = 0; simd <= 1; simd++) {
            tt w;
            tt_open(&w, 1, 2 * MAXN, tb, 0);
            rkv_tree_debug_tok_simd(w.tree, simd);
            int32_t tok[MAXN];
            rkv_block_id b[MAXN];
            OK(rkv_pool_alloc_n(w.pool, MAXN, b));
            for (uint32_t n = 1; n <= MAXN; n++) {
                for (uint32_t i = 0; i < n; i++)
                    tok[i] = (int32_t)(0xffff00u + n);
                for (uint32_t j = 0; j < n; j++) {
                    int32_t keep = tok[j];
                    tok[j] = tb == 3 ? (int32_t)(keep + (1 << 24)) : -keep;
                    ERR(RKV_ERR_INVALID_ARG,
                        rkv_tree_insert(w.tree, n, tok, n, b, NULL, NULL));
                    tok[j] = keep;
                }
                rkv_tree_stats s;
                OK(rkv_tree_get_stats(w.tree, &s));
                cr_assert_eq(s.cached_blocks, 0, "tb %u simd %d n %u", tb, simd, n);
            }
            rkv_insert_result r;
            OK(rkv_tree_insert(w.tree, 1, tok, MAXN, b, NULL, &r));
            cr_assert_eq(r.new_pages, MAXN);
            OK(rkv_pool_unref_n(w.pool, MAXN, b));
            OK(rkv_tree_check(w.tree));
            tt_close(&w);
        }
    }
}
