/*
 * tests/test_tree_random.c -- randomized differential test of the radix tree
 * (radix/) and block pool (alloc/) against the naive page-set model of
 * tests/support/ref_model.h.
 *
 * Each Criterion test runs one page size (1, 2, 4, 16) on a small pool, so
 * the pool is always full and every insert evicts. Operations, as a server
 * issues them: match (peek, non-peek, match_from), insert (after a locked
 * match with fresh blocks for the rest, or with fresh blocks for everything
 * so the cached part comes back as duplicates), lock (valid and stale
 * handles) and unlock (held leases; leases released earlier, forged ids,
 * ids one bit away from a held one, zero: RKV_ERR_STATE), evict,
 * alloc_blocks, reset (BUSY while locked) and zeroed handles and leases,
 * and retention (rkv_tree_retain): priorities on random token ranges (the
 * *_priority tests run the RKV_EVICT_PRIORITY policy, the others LRU, where
 * priorities must not change the order), TTL pins of four owners under a
 * 25 % cap, time steps that expire them, release and extension by owner,
 * and allocations that revoke pins.
 * The model knows a lease only by the id the tree handed out: every new id
 * must be nonzero and unlike every held one. Token streams share
 * prefixes heavily (a few base sequences, short random extensions over a
 * 4-token alphabet; a 64-token one in page1_wide) and use five namespaces
 * chosen to collide under plausible mistakes (see kNamespaces). Fresh
 * blocks come from rkv_tree_alloc_blocks (evicting) or rkv_pool_alloc_n.
 *
 * After every operation: every returned figure (matched tokens, block ids,
 * insert result, duplicate ids, statuses, freed counts) equals the model's;
 * the stats (cached / evictable / locked pages, queried and hit tokens,
 * namespaces, inserted and evicted pages) and the pool's free count equal
 * the model's; and each page the model evicted is gone from the tree, which
 * with equal counts means the tree evicted exactly the model's pages.
 * Every CHECK_EVERY operations and at the end: rkv_tree_check,
 * rkv_pool_check, every model leaf's full prefix matches in the tree with
 * the same blocks (ref count 1: only the tree holds cached blocks between
 * operations), and every stored handle is valid in the tree iff it is in
 * the model, with the same depth.
 *
 * The *_tok3 tests run a tree that stores 3-byte token ids
 * (rkv_tree_config.token_bytes = 3) with every id near 2^24 (ids that
 * differ in one of their three bytes only, see tok3_ids), with the wide
 * token paths on and off (radix/tree_tokens.c); there, 1 % of the steps
 * also try an id no 3-byte tree stores (2^24 and above, negative): a
 * match that must end before its page, exactly as the model's (which
 * compares int32 ids), or an insert that must be refused with nothing
 * changed.
 *
 * Seeds: rkv_test_seed() prints one per test; RKV_TEST_SEED replays it.
 * RKV_TEST_SCALE scales the operation count (1,000,000 in all by default).
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "radix/tree_debug.h"
#include "radixkv.h"
#include "tests/support/handles.h"
#include "tests/support/ref_model.h"
#include "tests/support/test_util.h"

#define NBASE 4
#define MAXTOK 128
#define NHANDLES 32
#define NHELD 4
#define NPAST 16
#define CHECK_EVERY 1000

typedef struct hpair {
    rkv_node h;
    ref_handle r;
} hpair;

/* A held lock: its lease and the position it locks. */
typedef struct held_lock {
    rkv_lease l;
    hpair hp;
} held_lock;

typedef struct world {
    uint32_t P, num_blocks, max_tokens;
    int policy;        /* rkv_evict_policy of the tree and the model      */
    uint32_t alphabet; /* extension tokens are drawn from 0..alphabet-1 */
    uint64_t seed, op;
    rkv_rng rng;
    rkv_pool *pool;
    rkv_tree *tree;
    ref_model m;
    int32_t base[NBASE][MAXTOK];
    hpair hs[NHANDLES];
    uint32_t nhs;
    held_lock held[NHELD];
    uint32_t nheld;
    rkv_lease past[NPAST]; /* leases handed out (copies; most released)   */
    uint32_t npast;
    /* scratch */
    int32_t tok[MAXTOK];
    int32_t tok2[MAXTOK];
    rkv_block_id bt[MAXTOK], br[MAXTOK], fresh[MAXTOK], all[MAXTOK];
    rkv_block_id dt[MAXTOK], dr[MAXTOK];
    ref_evicted *ev; /* num_blocks records */
    /* coverage counters, printed at the end */
    uint64_t n_stale, n_state, n_nospace, n_dups, n_locks, n_resets, n_busy;
    uint64_t n_any_held; /* op_unlock_any that hit a held lease          */
    uint64_t n_prio;     /* pages given a priority                        */
    uint64_t now;        /* the tree's time                               */
    uint64_t n_pins, n_pin_cap; /* pins made or renewed; refused          */
    /* 3-byte worlds: the id of each alphabet letter, whether the wide
     * token paths run, ids out of range tried */
    uint32_t token_bytes;
    int32_t ids[64];
    int simd;
    uint64_t n_bad;
} world;

#define REQ(w, cond, fmt, ...)                                                 \
    cr_assert((cond), "[P=%u RKV_TEST_SEED=%llu op=%llu] " fmt " (last error: %s)", \
              (w)->P, (unsigned long long)(w)->seed,                           \
              (unsigned long long)(w)->op, __VA_ARGS__, rkv_last_error())

/* 2 looks like a token; 1 << 32 equals 0 if truncated to 32 bits; the
 * extremes catch sign and overflow slips. */
static const uint64_t kNamespaces[5] = {0, 1, UINT64_MAX, 1ULL << 32, 2};

/* ---- set-up ------------------------------------------------------------------- */

/* Letter i's id in a 3-byte world: near 2^24, consecutive letters
 * differing in one byte (top, middle, low in turn), so a slip that drops
 * or mixes a byte merges two letters. */
static int32_t tok3_ids(uint32_t i)
{
    static const uint32_t flip[3] = {0x800000u, 0x008000u, 0x000080u};
    uint32_t v = 0xffffffu - (i / 3) * 0x010101u;
    return (int32_t)(v ^ (i % 3 ? flip[i % 3 - 1] : 0));
}

/* Letter v of the alphabet as a token id. */
static int32_t letter(const world *w, uint32_t v)
{
    return w->token_bytes == 3 ? w->ids[v] : (int32_t)v;
}

static void world_init(world *w, uint32_t P, uint32_t num_blocks,
                        uint32_t max_tokens, uint32_t alphabet, int policy,
                        const char *name, uint32_t token_bytes, int simd)
{
    memset(w, 0, sizeof *w);
    w->token_bytes = token_bytes;
    for (uint32_t i = 0; i < 64; i++)
        w->ids[i] = tok3_ids(i);
    w->policy = policy;
    w->P = P;
    w->alphabet = alphabet;
    w->num_blocks = num_blocks;
    w->max_tokens = max_tokens;
    w->seed = rkv_test_seed(name);
    rkv_rng_init(&w->rng, w->seed);
    w->pool = tu_pool(num_blocks, P);
    rkv_tree_config tc = tu_tree_config(policy, 25);
    tc.token_bytes = token_bytes;
    w->tree = tu_tree(w->pool, &tc);
    w->simd = rkv_tree_debug_tok_simd(w->tree, simd);
    cr_assert_eq(ref_model_init(&w->m, P, num_blocks), 0);
    w->m.policy = policy;
    w->m.pin_cap = (uint64_t)num_blocks * 25 / 100;
    w->ev = calloc(num_blocks, sizeof *w->ev);
    cr_assert_not_null(w->ev);
    /* base sequences: 0 and 1 share their first half, 2 is 0 shifted by
     * a page, 3 is its own; all over a 4-token alphabet */
    for (uint32_t i = 0; i < MAXTOK; i++) {
        w->base[0][i] = letter(w, (uint32_t)rkv_rng_below(&w->rng, 4));
        w->base[1][i] = i < max_tokens / 2
                            ? w->base[0][i]
                            : letter(w, (uint32_t)rkv_rng_below(&w->rng, 4));
        w->base[3][i] = letter(w, (uint32_t)rkv_rng_below(&w->rng, 4));
    }
    for (uint32_t i = 0; i < MAXTOK; i++)
        w->base[2][i] = i + P < MAXTOK ? w->base[0][i + P] : letter(w, 0);
}


static void world_fini(world *w)
{
    rkv_tree_destroy(w->tree);
    cr_assert_eq(rkv_pool_num_free(w->pool), w->num_blocks,
                 "destroying the tree must return every block");
    rkv_pool_destroy(w->pool);
    ref_model_fini(&w->m);
    free(w->ev);
}

/* A token sequence (length 0..max_tokens) into w->tok; returns n. */
static size_t gen_seq(world *w, uint64_t *ns)
{
    uint64_t r = rkv_rng_below(&w->rng, 10);
    *ns = r < 5 ? kNamespaces[0] : kNamespaces[1 + rkv_rng_below(&w->rng, 4)];
    size_t n = 0;
    if (rkv_rng_below(&w->rng, 100) < 85) {
        const int32_t *b = w->base[rkv_rng_below(&w->rng, NBASE)];
        n = rkv_rng_below(&w->rng, w->max_tokens + 1);
        memcpy(w->tok, b, n * sizeof *w->tok);
    }
    size_t ext = rkv_rng_below(&w->rng, w->max_tokens - n + 1);
    if (rkv_rng_below(&w->rng, 2))
        ext = ext < 2 * w->P ? ext : 2 * w->P; /* mostly short extensions */
    for (size_t i = 0; i < ext; i++)
        w->tok[n + i] = letter(w, (uint32_t)rkv_rng_below(&w->rng, w->alphabet));
    return n + ext;
}

static void remember(world *w, rkv_node h, ref_handle r)
{
    hpair p = {h, r};
    if (w->nhs < NHANDLES)
        w->hs[w->nhs++] = p;
    else
        w->hs[rkv_rng_below(&w->rng, NHANDLES)] = p;
}

/* ---- comparisons ------------------------------------------------------------------ */

static void compare_stats(world *w)
{
    rkv_tree_stats s;
    REQ(w, rkv_tree_get_stats(w->tree, &s) == RKV_OK, "%s", "get_stats");
    const ref_model *m = &w->m;
    REQ(w, s.cached_blocks == m->cached, "cached %llu, model %llu",
        (unsigned long long)s.cached_blocks, (unsigned long long)m->cached);
    REQ(w, s.locked_blocks == m->locked_pages, "locked %llu, model %llu",
        (unsigned long long)s.locked_blocks, (unsigned long long)m->locked_pages);
    REQ(w, s.evictable_blocks == ref_evictable(m), "evictable %llu, model %llu",
        (unsigned long long)s.evictable_blocks,
        (unsigned long long)ref_evictable(m));
    REQ(w, s.queried_tokens == m->queried_tokens && s.hit_tokens == m->hit_tokens,
        "queried/hit %llu/%llu, model %llu/%llu",
        (unsigned long long)s.queried_tokens, (unsigned long long)s.hit_tokens,
        (unsigned long long)m->queried_tokens, (unsigned long long)m->hit_tokens);
    REQ(w, s.namespaces == ref_namespaces(m), "namespaces %llu, model %u",
        (unsigned long long)s.namespaces, ref_namespaces(m));
    REQ(w, s.inserted_pages == m->inserted_pages, "inserted %llu, model %llu",
        (unsigned long long)s.inserted_pages, (unsigned long long)m->inserted_pages);
    REQ(w, s.evicted_blocks == m->evicted_pages, "evicted %llu, model %llu",
        (unsigned long long)s.evicted_blocks, (unsigned long long)m->evicted_pages);
    rkv_retention_stats rs;
    REQ(w, rkv_tree_retention_stats(w->tree, &rs) == RKV_OK, "%s", "retention");
    REQ(w, rs.pins == m->npins && rs.pinned_blocks == m->pinned_pages,
        "pins %llu pinning %llu pages, model %u pinning %llu",
        (unsigned long long)rs.pins, (unsigned long long)rs.pinned_blocks,
        m->npins, (unsigned long long)m->pinned_pages);
    /* between operations the caller holds no block: free = total - cached */
    REQ(w, rkv_pool_num_free(w->pool) == w->num_blocks - m->cached,
        "pool free %u, expected %llu", rkv_pool_num_free(w->pool),
        (unsigned long long)(w->num_blocks - m->cached));
}

/* Each page the model just evicted must be gone from the tree. */
static void compare_evicted(world *w, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        const ref_evicted *e = &w->ev[i];
        size_t len = (size_t)e->depth * w->P;
        if (len > REF_MAX_TOKENS)
            continue;
        rkv_match mm;
        REQ(w, rkv_tree_match(w->tree, e->ns, e->tokens, len, NULL,
                              RKV_MATCH_PEEK, &mm) == RKV_OK, "%s", "peek");
        REQ(w, mm.num_blocks < e->depth,
            "the model evicted page %u (block %u, ns %llu) first, the tree kept it",
            e->depth, e->block, (unsigned long long)e->ns);
    }
}

static void compare_handle(world *w, const hpair *p)
{
    rkv_node_info info;
    rkv_status st = rkv_tree_node_info(w->tree, p->h, &info);
    if (!ref_handle_valid(&w->m, p->r)) {
        REQ(w, st == RKV_ERR_STALE_HANDLE,
            "handle {%u,%u} is stale in the model, node_info gave %d", p->h.id,
            p->h.gen, (int)st);
        return;
    }
    REQ(w, st == RKV_OK, "handle {%u,%u} valid in the model, node_info gave %d",
        p->h.id, p->h.gen, (int)st);
    REQ(w, info.ns == p->r.ns && info.depth_tokens ==
                                     (size_t)ref_handle_depth(&w->m, p->r) * w->P,
        "handle {%u,%u}: depth %zu ns %llu, model depth %u ns %llu", p->h.id,
        p->h.gen, info.depth_tokens, (unsigned long long)info.ns,
        ref_handle_depth(&w->m, p->r), (unsigned long long)p->r.ns);
}

static void full_check(world *w)
{
    REQ(w, rkv_tree_check(w->tree) == RKV_OK, "%s", "rkv_tree_check");
    REQ(w, rkv_pool_check(w->pool) == RKV_OK, "%s", "rkv_pool_check");
    compare_stats(w);
    const ref_model *m = &w->m;
    for (uint32_t s = 0; s < m->cap; s++) {
        const ref_page *pg = &m->pages[s];
        if (!pg->used)
            continue;
        REQ(w, rkv_pool_refcount(w->pool, pg->block) == 1,
            "cached block %u has ref count %u, expected 1 (the tree's)",
            pg->block, rkv_pool_refcount(w->pool, pg->block));
        if (pg->children != 0)
            continue;
        uint32_t d = ref_page_prefix(m, s, w->tok2, w->br);
        rkv_match mm;
        REQ(w, rkv_tree_match(w->tree, pg->ns, w->tok2, (size_t)d * w->P, w->bt,
                              RKV_MATCH_PEEK, &mm) == RKV_OK, "%s", "peek");
        REQ(w, mm.num_blocks == d, "model leaf at depth %u: tree matched %u",
            d, mm.num_blocks);
        REQ(w, memcmp(w->bt, w->br, d * sizeof *w->bt) == 0,
            "block ids differ along a model leaf's prefix (depth %u)", d);
    }
    for (uint32_t i = 0; i < w->nhs; i++)
        compare_handle(w, &w->hs[i]);
    for (uint32_t i = 0; i < w->nheld; i++) {
        REQ(w, ref_handle_valid(m, w->held[i].hp.r), "%s", "held lock went stale");
        REQ(w, ref_lease_held(m, w->held[i].l.id), "%s",
            "the model lost a held lease");
        compare_handle(w, &w->held[i].hp);
    }
    REQ(w, m->nleases >= w->nheld, "model holds %u leases, test %u",
        m->nleases, w->nheld);
}

/* ---- operations ------------------------------------------------------------------ */

/* Non-peek or peek match of w->tok; compares; returns the matched pages
 * and the handle pair. */
static uint32_t do_match(world *w, uint64_t ns, size_t n, int peek, hpair *hp)
{
    rkv_match mm;
    rkv_status st = rkv_tree_match(w->tree, ns, w->tok, n, w->bt,
                                   peek ? RKV_MATCH_PEEK : 0, &mm);
    REQ(w, st == RKV_OK, "match returned %d", (int)st);
    ref_handle rh;
    uint32_t k = ref_match(&w->m, ns, w->tok, n, w->br, peek, &rh);
    REQ(w, mm.matched_tokens == (size_t)k * w->P && mm.num_blocks == k,
        "match (peek %d, ns %llu, n %zu): %zu tokens, model %u pages", peek,
        (unsigned long long)ns, n, mm.matched_tokens, k);
    REQ(w, memcmp(w->bt, w->br, k * sizeof *w->bt) == 0,
        "match (peek %d): block ids differ", peek);
    hp->h = mm.node;
    if (!peek) {
        hp->r = rh;
        compare_handle(w, hp);
        return k;
    }
    if (rh.null) {
        REQ(w, mm.node.id == 0, "peek in an unknown namespace gave node %u",
            mm.node.id);
        hp->r = rh;
        return k;
    }
    /* peek: the handle is the deepest FULLY matched node, at or above k */
    rkv_node_info info;
    REQ(w, rkv_tree_node_info(w->tree, mm.node, &info) == RKV_OK, "%s",
        "peek handle must be valid");
    REQ(w, info.depth_tokens % w->P == 0 && info.depth_tokens <= (size_t)k * w->P,
        "peek handle depth %zu, matched %u pages", info.depth_tokens, k);
    uint32_t d = (uint32_t)(info.depth_tokens / w->P);
    hp->r = ref_handle_at(&w->m, ns, w->tok, d);
    compare_handle(w, hp);
    if (rkv_rng_below(&w->rng, 2) && d <= k) {
        /* continue from the handle: same result, blocks from d on */
        rkv_match m2;
        memset(w->bt, 0xff, sizeof w->bt);
        REQ(w, rkv_tree_match_from(w->tree, mm.node, (size_t)d * w->P, w->tok, n,
                                   w->bt, &m2) == RKV_OK, "%s", "match_from");
        REQ(w, m2.num_blocks == k && m2.matched_tokens == (size_t)k * w->P,
            "match_from from depth %u: %u pages, model %u", d, m2.num_blocks, k);
        REQ(w, memcmp(w->bt + d, w->br + d, (k - d) * sizeof *w->bt) == 0, "%s",
            "match_from: block ids differ");
    }
    return k;
}

/* rkv_tree_alloc_blocks(n) against the model's eviction. */
static rkv_status do_alloc(world *w, uint32_t n, rkv_block_id *out)
{
    uint64_t free_now = w->num_blocks - w->m.cached; /* caller holds none */
    rkv_status exp = RKV_OK;
    uint32_t nev = 0;
    if (free_now < n) {
        nev = (uint32_t)(n - free_now);
        exp = ref_make_room(&w->m, nev); /* pins yield if they must */
        if (exp == RKV_OK)
            exp = ref_evict(&w->m, nev, w->ev);
        if (exp != RKV_OK)
            nev = 0;
    }
    rkv_status st = rkv_tree_alloc_blocks(w->tree, n, out);
    w->n_nospace += st == RKV_ERR_NO_SPACE;
    REQ(w, st == exp, "alloc_blocks(%u): %d, model %d (free %llu, evictable %llu)",
        n, (int)st, (int)exp, (unsigned long long)free_now,
        (unsigned long long)ref_evictable(&w->m));
    compare_evicted(w, nev);
    if (st == RKV_OK) {
        for (uint32_t i = 0; i < n; i++)
            REQ(w, rkv_pool_refcount(w->pool, out[i]) == 1,
                "fresh block %u has ref count %u", out[i],
                rkv_pool_refcount(w->pool, out[i]));
    }
    return st;
}

/* insert w->tok[0..n) with w->all; compares result and duplicates. */
static hpair do_insert(world *w, uint64_t ns, size_t n)
{
    rkv_insert_result ir;
    ref_insert_result rr;
    rkv_status st = rkv_tree_insert(w->tree, ns, w->tok, n, w->all, w->dt, &ir);
    REQ(w, st == RKV_OK, "insert returned %d", (int)st);
    ref_insert(&w->m, ns, w->tok, n, w->all, w->dr, &rr);
    uint32_t np = (uint32_t)(n / w->P);
    REQ(w, ir.prefix_tokens == (size_t)rr.prefix_pages * w->P &&
               ir.cached_tokens == (size_t)np * w->P &&
               ir.new_pages == rr.new_pages && ir.num_dups == rr.num_dups,
        "insert: prefix %zu cached %zu new %u dups %u; model prefix %u new %u "
        "dups %u", ir.prefix_tokens, ir.cached_tokens, ir.new_pages, ir.num_dups,
        rr.prefix_pages * w->P, rr.new_pages, rr.num_dups);
    REQ(w, memcmp(w->dt, w->dr, rr.num_dups * sizeof *w->dt) == 0, "%s",
        "insert: duplicate ids differ");
    w->n_dups += ir.num_dups;
    hpair hp = {ir.node, rr.handle};
    compare_handle(w, &hp);
    return hp;
}

/* Locks hp in the tree and the model; returns the status (both agree).
 * On success the lease is in *out and remembered in past[]. */
static rkv_status lock_both(world *w, const hpair *hp, rkv_lease *out)
{
    rkv_status st = rkv_tree_lock(w->tree, hp->h, out);
    rkv_status exp = ref_handle_valid(&w->m, hp->r) ? RKV_OK
                                                     : RKV_ERR_STALE_HANDLE;
    REQ(w, st == exp, "lock {%u,%u}: %d, model %d", hp->h.id, hp->h.gen,
        (int)st, (int)exp);
    if (st != RKV_OK) {
        REQ(w, out->id == 0, "failed lock (%d) left lease %#llx", (int)st,
            (unsigned long long)out->id);
        return st;
    }
    REQ(w, out->id != 0 && !ref_lease_held(&w->m, out->id),
        "lock handed out lease %#llx: zero or already held",
        (unsigned long long)out->id);
    exp = ref_lock(&w->m, hp->r, out->id);
    REQ(w, exp == RKV_OK, "lock {%u,%u} succeeded, model %d", hp->h.id,
        hp->h.gen, (int)exp);
    if (w->npast < NPAST)
        w->past[w->npast++] = *out;
    else
        w->past[rkv_rng_below(&w->rng, NPAST)] = *out;
    return st;
}

/* Unlocks a copy of l in both; returns the status (both agree). */
static rkv_status unlock_both(world *w, rkv_lease l)
{
    rkv_lease c = l;
    rkv_status st = rkv_tree_unlock(w->tree, &c);
    rkv_status exp = ref_unlock(&w->m, l.id);
    REQ(w, st == exp, "unlock of lease %#llx: %d, model %d",
        (unsigned long long)l.id, (int)st, (int)exp);
    REQ(w, c.id == (st == RKV_OK ? 0 : l.id), "unlock (%d) left lease %#llx",
        (int)st, (unsigned long long)c.id);
    return st;
}

static void push_held(world *w, rkv_lease l, hpair hp)
{
    held_lock h = {l, hp};
    w->held[w->nheld++] = h;
}

/* Server flow: locked match, fresh blocks for the rest, insert, unlock. */
static void op_insert_after_match(world *w)
{
    uint64_t ns;
    size_t n = gen_seq(w, &ns);
    hpair mh;
    uint32_t k = do_match(w, ns, n, 0, &mh);
    memcpy(w->all, w->bt, k * sizeof *w->all);
    rkv_lease ml;
    REQ(w, lock_both(w, &mh, &ml) == RKV_OK, "%s", "lock after match");
    compare_stats(w);
    uint32_t np = (uint32_t)(n / w->P), need = np - k;
    if (do_alloc(w, need, w->fresh) == RKV_OK) {
        memcpy(w->all + k, w->fresh, need * sizeof *w->all);
        hpair ih = do_insert(w, ns, n);
        REQ(w, rkv_pool_unref_n(w->pool, need, w->fresh) == RKV_OK, "%s",
            "caller releases its fresh blocks");
        if (w->nheld < NHELD && rkv_rng_below(&w->rng, 4) == 0) {
            /* keep the new path locked, as a request still running */
            rkv_lease il;
            REQ(w, lock_both(w, &ih, &il) == RKV_OK, "%s", "lock insert");
            push_held(w, il, ih);
        }
        remember(w, ih.h, ih.r);
    }
    REQ(w, unlock_both(w, ml) == RKV_OK, "%s", "unlock after insert");
    remember(w, mh.h, mh.r);
}

/* A request that computed everything itself: the cached part comes back
 * as duplicates, which the caller frees with its own references. */
static void op_insert_fresh(world *w)
{
    uint64_t ns;
    size_t n = gen_seq(w, &ns);
    uint32_t np = (uint32_t)(n / w->P);
    if (rkv_rng_below(&w->rng, 2)) {
        /* straight from the pool: no eviction, all or nothing */
        rkv_status exp = np <= w->num_blocks - w->m.cached ? RKV_OK : RKV_ERR_NO_SPACE;
        rkv_status st = rkv_pool_alloc_n(w->pool, np, w->fresh);
        REQ(w, st == exp, "pool_alloc_n(%u): %d, expected %d", np, (int)st, (int)exp);
        w->n_nospace += st == RKV_ERR_NO_SPACE;
        if (st != RKV_OK)
            return;
    } else if (do_alloc(w, np, w->fresh) != RKV_OK) {
        return;
    }
    memcpy(w->all, w->fresh, np * sizeof *w->all);
    hpair ih = do_insert(w, ns, n);
    REQ(w, rkv_pool_unref_n(w->pool, np, w->fresh) == RKV_OK, "%s",
        "caller releases its fresh blocks (dups included)");
    remember(w, ih.h, ih.r);
}

static void op_match(world *w, int peek)
{
    uint64_t ns;
    size_t n = gen_seq(w, &ns);
    hpair hp;
    do_match(w, ns, n, peek, &hp);
    remember(w, hp.h, hp.r);
}

/* A priority for a random token range of a random sequence: the pages set
 * must be the model's (then every later eviction compares the order). */
static void op_priority(world *w)
{
    uint64_t ns;
    size_t n = gen_seq(w, &ns);
    rkv_retention r;
    rkv_retention_init(&r);
    r.priority = (int)rkv_rng_below(&w->rng, RKV_PRIORITY_MAX + 1);
    r.prio_begin = rkv_rng_below(&w->rng, n + 1);
    r.prio_end = r.prio_begin + rkv_rng_below(&w->rng, n - r.prio_begin + 1);
    rkv_retain_result out;
    rkv_status st = rkv_tree_retain(w->tree, ns, w->tok, n, &r, w->now, &out);
    REQ(w, st == RKV_OK, "retain: status %d", (int)st);
    uint32_t want = ref_set_priority(&w->m, ns, w->tok, n, r.prio_begin,
                                     r.prio_end, r.priority);
    REQ(w, out.prio_pages == want, "retain set %u pages, model %u",
        out.prio_pages, want);
    w->n_prio += want;
}

/* A pin of a random prefix by one of four owners. */
static void op_pin(world *w)
{
    uint64_t ns;
    size_t n = gen_seq(w, &ns);
    rkv_retention r;
    rkv_retention_init(&r);
    r.pin_tokens = rkv_rng_below(&w->rng, n + 1);
    r.ttl_ms = 1 + rkv_rng_below(&w->rng, 40);
    r.owner = rkv_rng_below(&w->rng, 4);
    rkv_retain_result out;
    rkv_status st = rkv_tree_retain(w->tree, ns, w->tok, n, &r, w->now, &out);
    uint32_t pinned = 0;
    rkv_status exp = ref_pin_prefix(&w->m, ns, w->tok, n, r.pin_tokens, r.ttl_ms,
                                    r.owner, &pinned);
    REQ(w, st == exp, "pin: status %d, model %d", (int)st, (int)exp);
    if (st == RKV_OK)
        REQ(w, out.pinned_pages == pinned, "pinned %u pages, model %u",
            out.pinned_pages, pinned);
    w->n_pins += st == RKV_OK && pinned > 0;
    w->n_pin_cap += st == RKV_ERR_PIN_CAP;
}

static void op_time(world *w)
{
    w->now += rkv_rng_below(&w->rng, 7);
    REQ(w, rkv_tree_set_time(w->tree, w->now) == RKV_OK, "%s", "set_time");
    ref_set_time(&w->m, w->now);
}

static void op_owner(world *w)
{
    uint64_t owner = rkv_rng_below(&w->rng, 4);
    uint32_t n = 12345, want;
    if (rkv_rng_below(&w->rng, 3) == 0) {
        REQ(w, rkv_tree_pins_release(w->tree, owner, &n) == RKV_OK, "%s",
            "pins_release");
        want = ref_pins_release(&w->m, owner);
    } else {
        uint64_t ttl = rkv_rng_below(&w->rng, 40);
        REQ(w, rkv_tree_pins_extend(w->tree, owner, ttl, w->now, &n) == RKV_OK,
            "%s", "pins_extend");
        want = ref_pins_extend(&w->m, owner, ttl);
    }
    REQ(w, n == want, "owner call counted %u pins, model %u", n, want);
}

static hpair *pick_handle(world *w)
{
    return w->nhs ? &w->hs[rkv_rng_below(&w->rng, w->nhs)] : NULL;
}

static void op_lock(world *w)
{
    hpair *p = pick_handle(w);
    if (p == NULL || w->nheld >= NHELD)
        return;
    rkv_lease l;
    rkv_status st = lock_both(w, p, &l);
    w->n_stale += st == RKV_ERR_STALE_HANDLE;
    w->n_locks += st == RKV_OK;
    if (st == RKV_OK)
        push_held(w, l, *p);
}

static void op_unlock_held(world *w)
{
    if (w->nheld == 0)
        return;
    uint32_t i = (uint32_t)rkv_rng_below(&w->rng, w->nheld);
    held_lock h = w->held[i];
    w->held[i] = w->held[--w->nheld];
    REQ(w, unlock_both(w, h.l) == RKV_OK, "unlock of a held lease %#llx",
        (unsigned long long)h.l.id);
}

/* Unlock of a lease that is mostly not held: one handed out earlier
 * (released, or still held), one bit away from a held one, random, or
 * zero. Only the held ones may succeed. */
static void op_unlock_any(world *w)
{
    rkv_lease l = {0};
    uint64_t r = rkv_rng_below(&w->rng, 10);
    if (r < 6 && w->npast > 0)
        l = w->past[rkv_rng_below(&w->rng, w->npast)];
    else if (r < 8 && w->nheld > 0)
        l.id = w->held[rkv_rng_below(&w->rng, w->nheld)].l.id ^
               (UINT64_C(1) << rkv_rng_below(&w->rng, 64));
    else if (r < 9)
        l.id = rkv_rng_next(&w->rng);
    rkv_status st = unlock_both(w, l);
    w->n_state += st == RKV_ERR_STATE;
    if (st != RKV_OK)
        return;
    /* it released one of our held locks: forget it */
    w->n_any_held++;
    for (uint32_t i = 0; i < w->nheld; i++) {
        if (w->held[i].l.id == l.id) {
            w->held[i] = w->held[--w->nheld];
            return;
        }
    }
    REQ(w, 0, "%s", "unlock succeeded on a lease we do not hold");
}

static void op_evict(world *w)
{
    uint32_t n = (uint32_t)rkv_rng_below(&w->rng, 3 * w->max_tokens / w->P / 2 + 2);
    rkv_status exp = ref_evict(&w->m, n, w->ev);
    uint32_t freed = 12345;
    rkv_status st = rkv_tree_evict(w->tree, n, &freed);
    REQ(w, st == exp, "evict(%u): %d, model %d", n, (int)st, (int)exp);
    REQ(w, freed == (st == RKV_OK ? n : 0), "evict(%u) freed %u", n, freed);
    if (st == RKV_OK)
        compare_evicted(w, n);
}

static void op_alloc_free(world *w)
{
    uint32_t n = (uint32_t)rkv_rng_below(&w->rng, w->max_tokens / w->P + 2);
    if (do_alloc(w, n, w->fresh) == RKV_OK)
        REQ(w, rkv_pool_unref_n(w->pool, n, w->fresh) == RKV_OK, "%s", "unref_n");
}

static void op_reset(world *w)
{
    if (w->nheld > 0 && rkv_rng_below(&w->rng, 2)) {
        while (w->nheld > 0)
            op_unlock_held(w);
    }
    rkv_status st = rkv_tree_reset(w->tree);
    rkv_status exp = ref_reset(&w->m);
    REQ(w, st == exp, "reset: %d, model %d", (int)st, (int)exp);
    w->n_resets += st == RKV_OK;
    w->n_busy += st == RKV_ERR_BUSY;
}

static void op_zero_handle(world *w)
{
    rkv_node z = {0, 0};
    rkv_lease zl = {0};
    rkv_match mm;
    REQ(w, rkv_tree_lock(w->tree, z, &zl) == RKV_ERR_STALE_HANDLE, "%s",
        "lock {0,0}");
    REQ(w, rkv_tree_unlock(w->tree, &zl) == RKV_ERR_STATE, "%s",
        "unlock of a zero lease");
    REQ(w, rkv_tree_match_from(w->tree, z, 0, w->tok, 0, NULL, &mm) ==
               RKV_ERR_STALE_HANDLE, "%s", "match_from {0,0}");
}

/* 3-byte worlds: one id of a sequence made one no 3-byte tree stores --
 * its letter plus 2^24 (what truncation to 24 bits would take for the
 * letter), 2^24 itself, INT32_MAX or negative. A match ends before its
 * page, as in the model; an insert is refused with nothing changed. */
static void op_bad_id(world *w)
{
    uint64_t ns;
    size_t n = gen_seq(w, &ns);
    if (n == 0)
        return;
    static const int32_t bad[4] = {1 << 24, INT32_MAX, -1, INT32_MIN};
    size_t at = rkv_rng_below(&w->rng, n);
    uint64_t kind = rkv_rng_below(&w->rng, 5);
    w->tok[at] = kind == 4 ? (int32_t)((uint32_t)w->tok[at] + (1u << 24)) : bad[kind];
    w->n_bad++;
    if (rkv_rng_below(&w->rng, 2)) {
        hpair hp;
        do_match(w, ns, n, (int)rkv_rng_below(&w->rng, 2), &hp);
        remember(w, hp.h, hp.r);
        return;
    }
    rkv_insert_result ir;
    rkv_status st = rkv_tree_insert(w->tree, ns, w->tok, n, NULL, NULL, &ir);
    REQ(w, st == RKV_ERR_INVALID_ARG,
        "insert with id %d at %zu of %zu: status %d, want INVALID_ARG",
        w->tok[at], at, n, (int)st);
    REQ(w, strstr(rkv_last_error(), ">= 2^24") != NULL,
        "insert refusal names the bound: %s", rkv_last_error());
    REQ(w, rkv_tree_check(w->tree) == RKV_OK, "%s", "check after a refusal");
}

static void op_match_take(world *w) { op_match(w, 0); }
static void op_match_peek(world *w) { op_match(w, 1); }

/* Each step draws r below 1000 and runs the first op whose bound exceeds
 * it: the bounds are cumulative, so the gaps are the ops' weights. */
static const struct {
    uint64_t below;
    void (*op)(world *w);
} op_mix[] = {
    {140, op_match_take},          {160, op_priority},
    {180, op_pin},                 {190, op_time},
    {200, op_owner},               {300, op_match_peek},
    {520, op_insert_after_match},  {620, op_insert_fresh},
    {700, op_lock},                {780, op_unlock_held},
    {850, op_unlock_any},          {920, op_evict},
    {990, op_alloc_free},          {998, op_zero_handle},
    {1000, op_reset},
};

static void run_random3(uint32_t P, uint32_t num_blocks, uint32_t max_tokens,
                        uint32_t alphabet, int policy, uint64_t ops,
                        const char *name, uint32_t token_bytes, int simd)
{
    world *w = calloc(1, sizeof *w);
    cr_assert_not_null(w);
    world_init(w, P, num_blocks, max_tokens, alphabet, policy, name,
                token_bytes, simd);
    if (simd)
        fprintf(stderr, "[%s] wide token paths: %s\n", name,
                w->simd ? "on" : "not on this CPU (portable code runs)");
    ops = rkv_test_scaled(ops);
    for (w->op = 1; w->op <= ops; w->op++) {
        if (token_bytes == 3 && rkv_rng_below(&w->rng, 100) == 0) {
            op_bad_id(w);
            compare_stats(w);
            continue;
        }
        uint64_t r = rkv_rng_below(&w->rng, 1000);
        size_t k = 0;
        while (r >= op_mix[k].below)
            k++;
        op_mix[k].op(w);
        compare_stats(w);
        if (w->op % CHECK_EVERY == 0)
            full_check(w);
    }
    full_check(w);
    while (w->nheld > 0)
        op_unlock_held(w);
    full_check(w);
    rkv_tree_stats s;
    rkv_tree_get_stats(w->tree, &s);
    rkv_retention_stats rs;
    rkv_tree_retention_stats(w->tree, &rs);
    fprintf(stderr, "[%s] pins: %llu made, %llu renewed, %llu expired, %llu "
            "released, %llu revoked, %llu refused\n", name,
            (unsigned long long)rs.pins_made, (unsigned long long)rs.pins_renewed,
            (unsigned long long)rs.pins_expired,
            (unsigned long long)rs.pins_released,
            (unsigned long long)rs.pins_revoked,
            (unsigned long long)rs.pins_refused);
    fprintf(stderr,
            "[%s] %llu ops: hit %llu of %llu tokens, %llu pages inserted, %llu "
            "evicted, %llu splits, %llu dups, %llu locks, %llu stale, %llu "
            "unlocks not held, %llu no-space, %llu resets, %llu busy\n",
            name, (unsigned long long)ops, (unsigned long long)s.hit_tokens,
            (unsigned long long)s.queried_tokens,
            (unsigned long long)s.inserted_pages,
            (unsigned long long)s.evicted_blocks, (unsigned long long)s.splits,
            (unsigned long long)w->n_dups, (unsigned long long)w->n_locks,
            (unsigned long long)w->n_stale, (unsigned long long)w->n_state,
            (unsigned long long)w->n_nospace, (unsigned long long)w->n_resets,
            (unsigned long long)w->n_busy);
    /* The generator must keep reaching every path it exists to test; a
     * change that stopped producing one would otherwise still pass. */
    if (ops >= 50000) {
        const struct { const char *what; uint64_t n; } seen[] = {
            {"hits", s.hit_tokens},        {"evictions", s.evicted_blocks},
            {"splits", s.splits},          {"duplicate pages", w->n_dups},
            {"locks", w->n_locks},         {"stale handles", w->n_stale},
            {"unlocks of leases not held", w->n_state}, {"NO_SPACE", w->n_nospace},
            {"resets", w->n_resets},       {"BUSY resets", w->n_busy},
            {"unlocks of a remembered lease still held", w->n_any_held},
            {"priorities set", w->n_prio},
            {"pins made or renewed", w->n_pins},
            {"pins refused at the cap", w->n_pin_cap},
            {"pins expired", rs.pins_expired},
            /* only the small pools run short often enough to revoke in
             * every run (page16 and page1_wide: a few times, or none) */
            {"pins revoked for an allocation",
             w->P <= 4 && w->num_blocks <= 96 ? rs.pins_revoked : 1},
            {"ids out of range tried", token_bytes == 3 ? w->n_bad : 1},
        };
        for (size_t i = 0; i < sizeof seen / sizeof seen[0]; i++)
            cr_assert_gt(seen[i].n, 0, "%s: no %s in %llu operations", name,
                         seen[i].what, (unsigned long long)ops);
    }
    world_fini(w);
    free(w);
}

static void run_random(uint32_t P, uint32_t num_blocks, uint32_t max_tokens,
                       uint32_t alphabet, int policy, uint64_t ops,
                       const char *name)
{
    run_random3(P, num_blocks, max_tokens, alphabet, policy, ops, name, 4, 0);
}

/* 1,000,000 operations in all (before RKV_TEST_SCALE). */
Test(tree_random, page1)
{
    run_random(1, 96, 32, 4, RKV_EVICT_LRU, 250000, "tree_random::page1");
}

Test(tree_random, page2)
{
    run_random(2, 64, 48, 4, RKV_EVICT_LRU, 250000, "tree_random::page2");
}

Test(tree_random, page4)
{
    run_random(4, 48, 64, 4, RKV_EVICT_LRU, 250000, "tree_random::page4");
}

Test(tree_random, page16)
{
    run_random(16, 40, 128, 4, RKV_EVICT_LRU, 250000, "tree_random::page16");
}

/* A larger pool and a wide alphabet: many children per node (child index
 * and slot table growth), deeper trees, LRU placement walks. */
Test(tree_random, page1_wide)
{
    run_random(1, 640, 128, 64, RKV_EVICT_LRU, 100000, "tree_random::page1_wide");
}

/* The priority policy against the model's priority order (fewer
 * operations: the LRU tests above cover everything else). */
Test(tree_random, page2_priority)
{
    run_random(2, 64, 48, 4, RKV_EVICT_PRIORITY, 100000,
               "tree_random::page2_priority");
}

Test(tree_random, page4_priority)
{
    run_random(4, 48, 64, 4, RKV_EVICT_PRIORITY, 100000,
               "tree_random::page4_priority");
}

/* 3-byte token ids near 2^24 (see the header): page sizes whose pages are
 * shorter and longer than the wide paths' 11-id minimum, the portable
 * code, and a wide alphabet (64 ids). */
Test(tree_random, page16_tok3)
{
    run_random3(16, 40, 128, 4, RKV_EVICT_LRU, 100000, "tree_random::page16_tok3",
                3, 1);
}

Test(tree_random, page4_tok3)
{
    run_random3(4, 48, 64, 4, RKV_EVICT_LRU, 100000, "tree_random::page4_tok3",
                3, 1);
}

Test(tree_random, page16_tok3_portable)
{
    run_random3(16, 40, 128, 4, RKV_EVICT_LRU, 60000,
                "tree_random::page16_tok3_portable", 3, 0);
}

Test(tree_random, page1_wide_tok3)
{
    run_random3(1, 640, 128, 64, RKV_EVICT_LRU, 60000,
                "tree_random::page1_wide_tok3", 3, 1);
}
