/*
 * tests/test_router_groups.c -- the router at a full fleet of slot groups:
 * a page's entries in every group share one home cluster in the table,
 * and the route probes a page for all its groups by one walk over it.
 * Differential, against a closed-form model and against overlaps + choose
 * on a twin router.
 *
 * NB chains of LEN pages; chain b shares its first share[b] pages with
 * chain 0. Each chain is held in a drawn set of slot groups: all of them
 * (a page's cluster full), one, two or three far apart (their entries
 * share the cluster with other pages'), or a random half. 1,024 instances
 * (every group full), each holding a prefix of one chain its group may
 * hold (chain 0 otherwise); some lose their tail (removals, whose shifts
 * move entries back toward their homes), some are replaced by a snapshot
 * (their group is full, so the staging slot and then the instance are in
 * the spare group 16), some resync. Tables start small and grow, or are
 * held to a bytes budget (homes by a multiply); with many pages, some
 * clusters pass the table's end and wrap. Every instance's overlap must
 * equal the model; rkv_router_route and route_top (room for 5) must pick
 * what choose picks over the overlaps, bit for bit; rkv_router_check
 * after each phase.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "radixkv_router.h"
#include "tests/support/router_util.h"
#include "tests/support/test_util.h"

#define NB 40
#define LEN 48
#define NINST 1024u
#define GROUPS 16u

typedef struct chains {
    uint32_t share[NB];
    uint32_t groups[NB]; /* mask of the slot groups that may hold chain b */
} chains;

typedef struct inst {
    uint64_t id, seq;
    uint32_t b, len;
    int resync;
} inst;

static void apply_all(rkv_router **tw, uint64_t id, const rkv_event *e)
{
    for (int t = 0; t < 4; t++)
        cr_assert_eq(rkv_router_apply(tw[t], id, e, 1), RKV_OK, "%s", rkv_last_error());
}

/* Stores pages [from, to) of x's chain. */
static void store(rkv_router **tw, const chains *c, inst *x, uint32_t from, uint32_t to)
{
    for (uint32_t j = from; j < to;) {
        uint64_t h[RKV_EVENT_MAX_HASHES];
        uint32_t k = 0;
        while (k < RKV_EVENT_MAX_HASHES && j + k < to) {
            h[k] = rt_chain_hash(c->share, x->b, j + k);
            k++;
        }
        rkv_event e = rt_event(++x->seq, RKV_EVENT_BLOCK_STORED, 16,
                               j ? rt_chain_hash(c->share, x->b, j - 1) : RKV_HASH_ROOT, h, k);
        apply_all(tw, x->id, &e);
        j += k;
    }
}

/* Removes x's last r pages (the deepest first, as a tree evicts). */
static void trim(rkv_router **tw, const chains *c, inst *x, uint32_t r)
{
    uint64_t h[RKV_EVENT_MAX_HASHES];
    uint32_t k = 0;
    for (; k < r && k < RKV_EVENT_MAX_HASHES; k++)
        h[k] = rt_chain_hash(c->share, x->b, x->len - 1 - k);
    rkv_event e = rt_event(++x->seq, RKV_EVENT_BLOCK_REMOVED, 16, 0, h, k);
    apply_all(tw, x->id, &e);
    x->len -= k;
}

/* Replaces x's entries by a snapshot of pages [0, len) of chain b. */
static void snapshot(rkv_router **tw, const chains *c, inst *x, uint32_t b, uint32_t len)
{
    rkv_block_entry blocks[LEN];
    for (uint32_t j = 0; j < len; j++)
        blocks[j] = (rkv_block_entry){0, rt_chain_hash(c->share, b, j),
                                      j ? rt_chain_hash(c->share, b, j - 1) : RKV_HASH_ROOT,
                                      RKV_MEDIUM_DEVICE, 0};
    x->seq += 3;
    for (int t = 0; t < 4; t++)
        cr_assert_eq(rkv_router_apply_snapshot(tw[t], x->id, blocks, len, x->seq),
                     RKV_OK, "%s", rkv_last_error());
    x->b = b;
    x->len = len;
    x->resync = 0;
}

static uint32_t model_lead(const chains *c, const inst *x, uint32_t b, uint32_t n)
{
    if (x->resync)
        return 0;
    uint32_t l = rt_chain_common(c->share, LEN, b, x->b);
    l = x->len < l ? x->len : l;
    return l < n ? l : n;
}

static uint32_t draw_groups(rkv_rng *rng)
{
    switch (rkv_rng_below(rng, 5)) {
    case 0:
    case 1:
        return (1u << GROUPS) - 1;
    case 2:
        return 1u << rkv_rng_below(rng, GROUPS);
    case 3: { /* two or three groups far apart */
        uint32_t g = (uint32_t)rkv_rng_below(rng, 4);
        uint32_t m = 1u << g | 1u << (g + 12);
        if (rkv_rng_below(rng, 2))
            m |= 1u << (g + 6);
        return m;
    }
    default:
        return (uint32_t)rkv_rng_next(rng) & ((1u << GROUPS) - 1);
    }
}

static void check_queries(rkv_router **tw, const chains *c, const inst *x,
                          rkv_rng *rng, int queries)
{
    rkv_router_overlap *all = malloc(RKV_ROUTER_MAX_INSTANCES * sizeof *all);
    uint64_t h[LEN + 8];
    cr_assert_not_null(all);
    for (int q = 0; q < queries; q++) {
        uint32_t b = (uint32_t)rkv_rng_below(rng, NB);
        uint32_t n = (uint32_t)rkv_rng_below(rng, LEN + 8);
        for (uint32_t j = 0; j < n; j++)
            h[j] = j < LEN ? rt_chain_hash(c->share, b, j) : rkv_rng_next(rng);
        uint32_t k = 0;
        cr_assert_eq(rkv_router_overlaps(tw[1], 0, h, n, all, RKV_ROUTER_MAX_INSTANCES,
                                         &k), RKV_OK);
        cr_assert_eq(k, NINST);
        for (uint32_t i = 0; i < k; i++) {
            /* ids are 1..NINST, listed in id order */
            cr_assert_eq(all[i].instance, i + 1);
            cr_assert_eq(all[i].pages, model_lead(c, &x[i], b, n),
                         "query %d (chain %u, %u pages), instance %u", q, b, n, i + 1);
        }
        rt_same_choice(tw, h, n, all, k, q);
    }
    free(all);
}

static void run(uint64_t seed, uint64_t table_bytes)
{
    rkv_rng rng;
    rkv_rng_init(&rng, seed);
    chains c;
    c.share[0] = LEN;
    c.groups[0] = (1u << GROUPS) - 1;
    for (uint32_t b = 1; b < NB; b++) {
        c.share[b] = (uint32_t)rkv_rng_below(&rng, 8);
        c.groups[b] = draw_groups(&rng);
    }
    rkv_router_config cfg;
    rkv_router_config_init(&cfg);
    cfg.seed = seed;
    cfg.initial_blocks = 1; /* grows: every size on the way */
    cfg.max_table_bytes = table_bytes;
    rkv_router *tw[4];
    for (int t = 0; t < 4; t++)
        tw[t] = rt_mk_with(&cfg);
    inst *x = calloc(NINST, sizeof *x);
    cr_assert_not_null(x);
    for (uint32_t i = 0; i < NINST; i++) {
        x[i].id = i + 1; /* slot i: group i / 64 */
        for (int t = 0; t < 4; t++)
            cr_assert_eq(rkv_router_add_instance(tw[t], x[i].id), RKV_OK);
        uint32_t g = i / 64, b = 0;
        for (int tries = 0; tries < 8; tries++) {
            uint32_t d = (uint32_t)rkv_rng_below(&rng, NB);
            if (c.groups[d] >> g & 1) {
                b = d;
                break;
            }
        }
        x[i].b = b;
        uint32_t len = (uint32_t)rkv_rng_below(&rng, LEN + 1);
        store(tw, &c, &x[i], 0, len);
        x[i].len = len;
    }
    for (int t = 0; t < 4; t++)
        rt_ok(tw[t]);
    check_queries(tw, &c, x, &rng, 60);
    /* tails removed: deletions shift later entries of a cluster back */
    for (uint32_t i = 0; i < NINST; i++)
        if (x[i].len > 0 && rkv_rng_below(&rng, 3) == 0)
            trim(tw, &c, &x[i], 1 + (uint32_t)rkv_rng_below(&rng, x[i].len));
    /* snapshots: every group of instances is full, so the staging slot
     * and then the instance move to the spare group 16 */
    for (int k = 0; k < 24; k++) {
        inst *y = &x[rkv_rng_below(&rng, NINST)];
        uint32_t b = rkv_rng_below(&rng, 2) ? y->b : (uint32_t)rkv_rng_below(&rng, NB);
        snapshot(tw, &c, y, b, (uint32_t)rkv_rng_below(&rng, LEN + 1));
    }
    /* resyncs (they hold nothing) and loads: equal ones (ties) or spread */
    for (uint32_t i = 0; i < NINST; i++) {
        if (rkv_rng_below(&rng, 25) == 0) {
            x[i].resync = 1;
            for (int t = 0; t < 4; t++)
                cr_assert_eq(rkv_router_heartbeat(tw[t], x[i].id, x[i].seq + 5), RKV_OK);
        }
        uint64_t q = seed % 2 ? rkv_rng_below(&rng, 4000) : 16 * rkv_rng_below(&rng, 2);
        for (int t = 0; t < 4; t++)
            cr_assert_eq(rkv_router_set_load(tw[t], x[i].id, 0, q), RKV_OK);
    }
    /* and stores again on top (their tails grow back) */
    for (uint32_t i = 0; i < NINST; i++)
        if (!x[i].resync && rkv_rng_below(&rng, 4) == 0) {
            uint32_t to = x[i].len + (uint32_t)rkv_rng_below(&rng, LEN - x[i].len + 1);
            store(tw, &c, &x[i], x[i].len, to);
            x[i].len = to;
        }
    for (int t = 0; t < 4; t++)
        rt_ok(tw[t]);
    check_queries(tw, &c, x, &rng, 120);
    for (int t = 0; t < 4; t++)
        rt_done(tw[t]);
    free(x);
}

Test(router_groups, growing_tables) {
    for (uint64_t seed = 1; seed <= 4; seed++)
        run(seed, 0);
}

/* held to a bytes budget that is not a power of two: homes by a multiply,
 * the table sized at once */
Test(router_groups, budget_tables) {
    for (uint64_t seed = 11; seed <= 14; seed++)
        run(seed, 16u * 60004u);
}
