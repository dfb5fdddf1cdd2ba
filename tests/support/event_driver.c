/*
 * tests/support/event_driver.c -- random operations on one instance with
 * KV events on (see event_driver.h).
 */
#include "tests/support/event_driver.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "radix/tree_debug.h"
#include "tests/support/handles.h"

static const uint64_t kNs[3] = {0, 7, 0xFFFFFFFFFFFFFFFFull};

void evd_open(evd *d, uint32_t num_blocks, uint32_t P, uint32_t ring)
{
    memset(d, 0, sizeof *d);
    d->pool = tu_pool(num_blocks, P);
    d->tree = tu_event_tree(d->pool, ring, 0);
    d->P = P;
}

void evd_close(evd *d)
{
    rkv_tree_destroy(d->tree);
    rkv_pool_destroy(d->pool);
    memset(d, 0, sizeof *d);
}

uint32_t evd_tokens(rkv_rng *rng, int32_t *out, uint64_t *ns)
{
    /* base b: tokens f(b, i); then a short random tail over 3 symbols */
    uint32_t base = (uint32_t)rkv_rng_below(rng, 4);
    uint32_t keep = (uint32_t)rkv_rng_below(rng, 48);
    uint32_t tail = (uint32_t)rkv_rng_below(rng, 24);
    uint32_t n = 0;
    for (; n < keep; n++)
        out[n] = (int32_t)((base * 131 + n * 7) % 1000);
    for (uint32_t i = 0; i < tail && n < EVD_MAX_TOK; i++)
        out[n++] = (int32_t)(2000 + rkv_rng_below(rng, 3));
    *ns = kNs[rkv_rng_below(rng, 3) == 0 ? rkv_rng_below(rng, 3) : 0];
    return n;
}

uint64_t evd_last_seq(const evd *d)
{
    size_t n = 0;
    uint64_t seq = 0;
    cr_assert_eq(rkv_tree_snapshot(d->tree, NULL, 0, &n, &seq), RKV_OK);
    return seq;
}

rkv_block_entry *evd_snapshot(const evd *d, size_t *n, uint64_t *seq)
{
    size_t need = 0;
    cr_assert_eq(rkv_tree_snapshot(d->tree, NULL, 0, &need, NULL), RKV_OK);
    rkv_block_entry *e = malloc((need + 1) * sizeof *e);
    cr_assert_not_null(e);
    cr_assert_eq(rkv_tree_snapshot(d->tree, e, need, n, seq), RKV_OK, "%s",
                 rkv_last_error());
    cr_assert_eq(*n, need);
    return e;
}

/* A request as a server runs it. Returns the first failing status; each
 * call that fails must have recorded nothing (the driver never holds cached
 * blocks outside the tree without a lock, so alloc_blocks refuses before
 * evicting rather than after). */
static rkv_status evd_request(evd *d, const int32_t *tok, uint32_t n,
                              uint64_t ns, int oom)
{
    rkv_block_id blocks[EVD_MAX_TOK], fresh[EVD_MAX_TOK];
    rkv_match m;
    uint64_t s0 = evd_last_seq(d);
    /* inject into the match or the insert, whichever allocates */
    int oom_match = oom && (n & 1);
    if (oom_match)
        rkv_tree_debug_fail_alloc_after(d->tree, 0);
    rkv_status st = rkv_tree_match(d->tree, ns, tok, n, blocks, 0, &m);
    rkv_tree_debug_fail_alloc_after(d->tree, -1);
    cr_assert_eq(evd_last_seq(d), s0, "match recorded events");
    if (st != RKV_OK)
        return st;
    rkv_lease lease;
    if ((st = rkv_tree_lock(d->tree, m.node, &lease)) != RKV_OK)
        return st;
    uint32_t pages = n / d->P, nfresh = pages - m.num_blocks;
    st = rkv_tree_alloc_blocks(d->tree, nfresh, fresh);
    if (st != RKV_OK)
        cr_assert_eq(evd_last_seq(d), s0, "failed alloc_blocks recorded");
    if (st == RKV_OK) {
        memcpy(blocks + m.num_blocks, fresh, nfresh * sizeof *fresh);
        uint64_t s1 = evd_last_seq(d);
        if (oom && !oom_match)
            rkv_tree_debug_fail_alloc_after(d->tree, 0);
        st = rkv_tree_insert(d->tree, ns, tok, n, blocks, NULL, NULL);
        rkv_tree_debug_fail_alloc_after(d->tree, -1);
        if (st != RKV_OK)
            cr_assert_eq(evd_last_seq(d), s1, "failed insert recorded");
        cr_assert_eq(rkv_pool_unref_n(d->pool, nfresh, fresh), RKV_OK);
    }
    cr_assert_eq(rkv_tree_unlock(d->tree, &lease), RKV_OK);
    return st;
}

void evd_step(evd *d, rkv_rng *rng, int allow_oom)
{
    int32_t tok[EVD_MAX_TOK];
    uint64_t ns;
    uint32_t n = evd_tokens(rng, tok, &ns);
    uint64_t before = evd_last_seq(d);
    uint64_t op = rkv_rng_below(rng, 100);
    int oom = allow_oom && rkv_rng_below(rng, 8) == 0;
    rkv_status st = RKV_OK;
    /* a request is judged call by call (evd_request): its alloc may have
     * evicted (and recorded) before its insert failed */
    if (op < 45) {
        st = evd_request(d, tok, n, ns, oom);
        if (st == RKV_ERR_NOMEM)
            d->oom_hits++;
    } else if (op < 60) {
        rkv_match m;
        unsigned flags = rkv_rng_below(rng, 2) ? RKV_MATCH_PEEK : 0;
        if (oom)
            rkv_tree_debug_fail_alloc_after(d->tree, 0);
        st = rkv_tree_match(d->tree, ns, tok, n, NULL, flags, &m);
        rkv_tree_debug_fail_alloc_after(d->tree, -1);
        cr_assert_eq(evd_last_seq(d), before, "a match recorded events");
        if (st == RKV_OK && flags == 0 && d->nleases < EVD_MAX_LEASES &&
            rkv_rng_below(rng, 2))
            cr_assert_eq(rkv_tree_lock(d->tree, m.node,
                                       &d->leases[d->nleases++]), RKV_OK);
    } else if (op < 70) {
        uint32_t freed;
        st = rkv_tree_evict(d->tree, (uint32_t)rkv_rng_below(rng, 12), &freed);
    } else if (op < 80) {
        rkv_block_id b[32];
        uint32_t k = (uint32_t)rkv_rng_below(rng, 32);
        st = rkv_tree_alloc_blocks(d->tree, k, b);
        if (st == RKV_OK)
            cr_assert_eq(rkv_pool_unref_n(d->pool, k, b), RKV_OK);
    } else if (op < 92) {
        if (d->nleases > 0) {
            int i = (int)rkv_rng_below(rng, (uint64_t)d->nleases);
            cr_assert_eq(rkv_tree_unlock(d->tree, &d->leases[i]), RKV_OK);
            d->leases[i] = d->leases[--d->nleases];
            cr_assert_eq(evd_last_seq(d), before, "an unlock recorded events");
        }
        /* a lease that is not held: refused, nothing recorded */
        rkv_lease zero = {0};
        cr_assert_eq(rkv_tree_unlock(d->tree, &zero), RKV_ERR_STATE);
    } else if (op < 97) {
        /* invalid insert: a negative token */
        int32_t bad[8] = {1, 2, 3, -1, 5, 6, 7, 8};
        rkv_block_id b[8] = {0};
        st = rkv_tree_insert(d->tree, ns, bad, 8, b, NULL, NULL);
        cr_assert_neq(st, RKV_OK);
    } else {
        /* drop leases sometimes so reset can succeed */
        if (rkv_rng_below(rng, 2))
            while (d->nleases > 0)
                cr_assert_eq(rkv_tree_unlock(d->tree, &d->leases[--d->nleases]),
                             RKV_OK);
        st = rkv_tree_reset(d->tree);
        cr_assert_eq(st, d->nleases > 0 ? RKV_ERR_BUSY : RKV_OK);
        if (st == RKV_OK)
            d->resets++;
    }
    if (st != RKV_OK) {
        d->failed_ops++;
        /* the driver never holds cached blocks outside the tree without a
         * lock, so no eviction evicts and then fails: every failure
         * recorded nothing */
        if (op >= 45)
            cr_assert_eq(evd_last_seq(d), before, "failed op %llu (%s) "
                         "recorded events", (unsigned long long)op,
                         rkv_strerror(st));
    }
    d->ops++;
    cr_assert_eq(rkv_tree_check(d->tree), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(rkv_pool_check(d->pool), RKV_OK, "%s", rkv_last_error());
}

void evd_open_steps(evd *d, uint32_t num_blocks, uint32_t P, uint32_t ring, rkv_rng *rng,
                    uint64_t seed, int steps)
{
    evd_open(d, num_blocks, P, ring);
    rkv_rng_init(rng, seed);
    for (int i = 0; i < steps; i++)
        evd_step(d, rng, 0);
}
