/*
 * tests/test_tree.c -- unit tests of radix/: the token radix tree.
 *
 * Each test builds a metadata-only pool and a tree, and calls
 * rkv_pool_check() and rkv_tree_check() after every operation (CHECK).
 * Expected values are derived from the scenario (token counts, page sizes,
 * which blocks were given), never read back from the code under test.
 * Peer bugs each have a test: lock walk skipping the node itself, dups
 * freed by the caller while the tree still needs them, double-counted
 * evictable pages, a match ending inside a node, a forgeable namespace.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/pool_internal.h"
#include "radix/tree_debug.h"
#include "radix/tree_core.h"
#include "radixkv.h"
#include "tests/support/test_util.h"
#include "tests/support/tree_fixture.h"

static void setup_sized(uint32_t nblocks, uint32_t page)
{
    tf_open(nblocks, page, NULL);
}

static void setup_small(void) { setup_sized(64, 4); }
static void setup_big(void) { setup_sized(1u << 16, 16); }

/* Allocates npages blocks, inserts, drops the caller's references to the
 * blocks the tree kept and to duplicates (the normal caller protocol). */
static rkv_insert_result insert_release(rkv_namespace ns, const int32_t *tok,
                                        size_t n)
{
    uint32_t np = (uint32_t)(n / g_page);
    rkv_block_id *b = calloc(np + 1, sizeof *b);
    rkv_block_id *dups = calloc(np + 1, sizeof *dups);
    cr_assert(b && dups);
    OK(rkv_tree_alloc_blocks(g_tree, np, b));
    CHECK();
    rkv_insert_result r;
    OK(rkv_tree_insert(g_tree, ns, tok, n, b, dups, &r));
    CHECK();
    OK(rkv_pool_unref_n(g_pool, np, b));
    CHECK();
    free(b);
    free(dups);
    return r;
}

/* Fills tok with 1..n, inserts it and locks the node it ends on. */
static rkv_insert_result insert_locked(rkv_namespace ns, int32_t *tok,
                                       size_t n, rkv_lease *l)
{
    tf_seq(tok, n, 1);
    rkv_insert_result r = insert_release(ns, tok, n);
    OK(rkv_tree_lock(g_tree, r.node, l));
    return r;
}

static rkv_match match(rkv_namespace ns, const int32_t *tok, size_t n,
                       rkv_block_id *blocks, unsigned flags)
{
    rkv_match m;
    OK(rkv_tree_match(g_tree, ns, tok, n, blocks, flags, &m));
    CHECK();
    return m;
}

static rkv_tree_stats stats(void)
{
    rkv_tree_stats s;
    OK(rkv_tree_get_stats(g_tree, &s));
    return s;
}

static size_t node_depth(rkv_node h)
{
    rkv_node_info info;
    OK(rkv_tree_node_info(g_tree, h, &info));
    return info.depth_tokens;
}

/* A snapshot of everything observable, to assert "nothing changed". */
typedef struct snap {
    rkv_tree_stats st;
    uint32_t nfree;
    uint32_t *ref;
    uint64_t *hash;
} snap;

static void snap_take(snap *s)
{
    s->st = stats();
    s->nfree = rkv_pool_num_free(g_pool);
    uint32_t n = rkv_pool_num_blocks(g_pool);
    s->ref = malloc(n * sizeof *s->ref);
    s->hash = malloc(n * sizeof *s->hash);
    for (uint32_t i = 0; i < n; i++) {
        s->ref[i] = rkv_pool_refcount(g_pool, i);
        s->hash[i] = rkv_pool_block_hash(g_pool, i);
    }
}

static void snap_same(snap *s, int ignore_host_bytes)
{
    rkv_tree_stats now = stats();
    if (ignore_host_bytes)
        now.host_bytes = s->st.host_bytes;
    cr_assert(memcmp(&now, &s->st, sizeof now) == 0, "tree stats changed");
    cr_assert_eq(rkv_pool_num_free(g_pool), s->nfree);
    uint32_t n = rkv_pool_num_blocks(g_pool);
    for (uint32_t i = 0; i < n; i++) {
        cr_assert_eq(rkv_pool_refcount(g_pool, i), s->ref[i], "block %u ref", i);
        cr_assert_eq(rkv_pool_block_hash(g_pool, i), s->hash[i], "block %u hash", i);
    }
    free(s->ref);
    free(s->hash);
}

TestSuite(tree, .init = setup_small, .fini = tf_close);
TestSuite(tree_big, .init = setup_big, .fini = tf_close);

Test(tree, config_and_create)
{
    rkv_tree_config cfg;
    rkv_tree_config_init(&cfg);
    cr_assert_eq(cfg.initial_nodes, 0);
#ifdef RKV_HAVE_JEMALLOC
    cr_assert_eq(cfg.use_jemalloc, 1);
#endif
    cr_assert_eq(rkv_tree_pool(g_tree), g_pool);
    rkv_tree *t2 = NULL;
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_create(NULL, NULL, &t2));
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_create(g_pool, NULL, NULL));
    cfg.use_jemalloc = 0;
    cfg.initial_nodes = 1000;
    rkv_pool *p2 = NULL;
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = 8;
    OK(rkv_pool_create(&pc, &p2));
    OK(rkv_tree_create(p2, &cfg, &t2));
    OK(rkv_tree_check(t2));
    rkv_tree_destroy(t2);
    rkv_pool_destroy(p2);
    rkv_tree_destroy(NULL);
    rkv_tree_stats s = stats();
    cr_assert_eq(s.cached_blocks, 0);
    cr_assert_eq(s.nodes, 0);
    cr_assert_gt(s.host_bytes, 0);
}

Test(tree, insert_then_match)
{
    int32_t tok[14];
    tf_seq(tok, 14, 100); /* 3 full pages + 2 tokens */
    rkv_block_id b[3];
    OK(rkv_tree_alloc_blocks(g_tree, 3, b));
    rkv_insert_result r;
    OK(rkv_tree_insert(g_tree, 7, tok, 14, b, NULL, &r));
    CHECK();
    cr_assert_eq(r.prefix_tokens, 0);
    cr_assert_eq(r.cached_tokens, 12, "partial last page ignored");
    cr_assert_eq(r.new_pages, 3);
    cr_assert_eq(r.num_dups, 0);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(rkv_pool_refcount(g_pool, b[i]), 2, "caller + tree");
    /* chained hashes set */
    uint64_t h = RKV_HASH_ROOT;
    for (int i = 0; i < 3; i++) {
        h = rkv_block_hash(h, 7, tok + 4 * i, 4);
        cr_assert_eq(rkv_pool_block_hash(g_pool, b[i]), h);
    }
    rkv_block_id got[3] = {RKV_NO_BLOCK, RKV_NO_BLOCK, RKV_NO_BLOCK};
    rkv_match m = match(7, tok, 14, got, 0);
    cr_assert_eq(m.matched_tokens, 12);
    cr_assert_eq(m.num_blocks, 3);
    cr_assert_eq(memcmp(got, b, sizeof b), 0);
    cr_assert_eq(m.node.id, r.node.id);
    cr_assert_eq(m.node.gen, r.node.gen);
    /* a query diverging in page 2 matches 1 page */
    tok[5] = 9999;
    m = match(7, tok, 14, got, 0);
    cr_assert_eq(m.matched_tokens, 4);
    cr_assert_eq(got[0], b[0]);
    /* fewer than one page matches nothing, in a known namespace */
    m = match(7, tok, 3, NULL, 0);
    cr_assert_eq(m.matched_tokens, 0);
    rkv_node_info info;
    OK(rkv_tree_node_info(g_tree, m.node, &info));
    cr_assert_eq(info.depth_tokens, 0, "namespace root");
    cr_assert_eq(info.ns, 7);
    rkv_tree_stats s = stats();
    cr_assert_eq(s.queried_tokens, 14 + 14 + 3);
    cr_assert_eq(s.hit_tokens, 12 + 4);
    cr_assert_eq(s.inserted_pages, 3);
    OK(rkv_pool_unref_n(g_pool, 3, b));
    CHECK();
}

Test(tree, match_ending_inside_node_splits)
{
    int32_t tok[16];
    tf_seq(tok, 16, 1);
    rkv_insert_result r = insert_release(0, tok, 16); /* one node, 4 pages */
    rkv_tree_stats s0 = stats();
    cr_assert_eq(s0.nodes, 1);
    int32_t q[16];
    memcpy(q, tok, sizeof q);
    q[9] = 5000; /* diverges in page 2: 2 pages match */
    rkv_match m = match(0, q, 16, NULL, 0);
    cr_assert_eq(m.matched_tokens, 8);
    rkv_tree_stats s1 = stats();
    cr_assert_eq(s1.splits, 1);
    cr_assert_eq(s1.nodes, 2);
    cr_assert_eq(s1.cached_blocks, 4);
    /* the handle ends exactly at the match, the old one still at 16 */
    cr_assert_eq(node_depth(m.node), 8);
    cr_assert_eq(node_depth(r.node), 16, "split keeps the old handle's end");
    rkv_node_info info;
    OK(rkv_tree_node_info(g_tree, r.node, &info));
    cr_assert_eq(info.parent.id, m.node.id);
    cr_assert_eq(info.num_pages, 2);
    /* locking the head protects it but not the tail */
    rkv_lease lm;
    OK(rkv_tree_lock(g_tree, m.node, &lm));
    CHECK();
    s1 = stats();
    cr_assert_eq(s1.locked_blocks, 2);
    cr_assert_eq(s1.evictable_blocks, 2);
    /* a peek that ends inside the head does not split */
    rkv_match pk = match(0, tok, 4, NULL, RKV_MATCH_PEEK);
    cr_assert_eq(pk.matched_tokens, 4);
    cr_assert_eq(stats().splits, 1);
    OK(rkv_tree_unlock(g_tree, &lm));
    CHECK();
}

Test(tree, insert_diverging_mid_edge)
{
    int32_t a[16], b[20];
    tf_seq(a, 16, 1);
    memcpy(b, a, 8 * sizeof(int32_t));
    tf_seq(b + 8, 12, 700); /* shares 2 pages, then 3 own pages */
    insert_release(0, a, 16);
    rkv_insert_result r = insert_release(0, b, 20);
    cr_assert_eq(r.prefix_tokens, 8);
    cr_assert_eq(r.new_pages, 3);
    rkv_tree_stats s = stats();
    cr_assert_eq(s.nodes, 3);
    cr_assert_eq(s.cached_blocks, 4 + 3);
    cr_assert_eq(s.evictable_blocks, 7, "shared pages counted once");
    cr_assert_eq(s.splits, 1);
    cr_assert_eq(node_depth(r.node), 20);
    cr_assert_eq(match(0, a, 16, NULL, 0).matched_tokens, 16);
    cr_assert_eq(match(0, b, 20, NULL, 0).matched_tokens, 20);
    /* insert of a prefix of an edge splits so the node ends at the key */
    int32_t c[12];
    tf_seq(c, 12, 1);
    r = insert_release(0, c, 12);
    cr_assert_eq(r.new_pages, 0);
    cr_assert_eq(node_depth(r.node), 12);
    cr_assert_eq(stats().splits, 2);
}

Test(tree, duplicates_reported_and_tree_keeps_its_refs)
{
    int32_t tok[12];
    tf_seq(tok, 12, 40);
    rkv_block_id first[3], second[3], dups[3];
    OK(rkv_tree_alloc_blocks(g_tree, 3, first));
    rkv_insert_result r;
    OK(rkv_tree_insert(g_tree, 0, tok, 12, first, NULL, &r));
    OK(rkv_pool_unref_n(g_pool, 3, first)); /* request done: tree-only now */
    CHECK();
    /* a second request computed the same 3 pages + 1 more under new blocks */
    int32_t tok2[16];
    memcpy(tok2, tok, sizeof tok);
    tf_seq(tok2 + 12, 4, 900);
    rkv_block_id sec4[4];
    OK(rkv_tree_alloc_blocks(g_tree, 4, sec4));
    memcpy(second, sec4, sizeof second);
    rkv_block_id dups4[4];
    OK(rkv_tree_insert(g_tree, 0, tok2, 16, sec4, dups4, &r));
    CHECK();
    cr_assert_eq(r.num_dups, 3);
    cr_assert_eq(r.new_pages, 1);
    cr_assert_eq(r.prefix_tokens, 12);
    memcpy(dups, dups4, sizeof dups);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(dups[i], second[i]);
    /* the caller releases everything it holds: dups are freed, the tree's
     * own blocks are still referenced */
    OK(rkv_pool_unref_n(g_pool, 4, sec4));
    CHECK();
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(rkv_pool_refcount(g_pool, first[i]), 1);
        cr_assert_eq(rkv_pool_refcount(g_pool, second[i]), 0, "dup freed");
    }
    cr_assert_eq(rkv_pool_refcount(g_pool, sec4[3]), 1, "kept by the tree");
    rkv_block_id got[4];
    cr_assert_eq(match(0, tok2, 16, got, 0).matched_tokens, 16);
    cr_assert_eq(memcmp(got, first, sizeof first), 0);
    cr_assert_eq(got[3], sec4[3]);
    cr_assert_eq(stats().cached_blocks, 4);
}

Test(tree, same_block_reinsert_is_not_a_dup)
{
    int32_t tok[8];
    tf_seq(tok, 8, 3);
    rkv_block_id b[2];
    OK(rkv_tree_alloc_blocks(g_tree, 2, b));
    rkv_insert_result r;
    OK(rkv_tree_insert(g_tree, 0, tok, 8, b, NULL, &r));
    CHECK();
    rkv_block_id dups[2] = {RKV_NO_BLOCK, RKV_NO_BLOCK};
    OK(rkv_tree_insert(g_tree, 0, tok, 8, b, dups, &r));
    CHECK();
    cr_assert_eq(r.num_dups, 0);
    cr_assert_eq(r.new_pages, 0);
    cr_assert_eq(r.prefix_tokens, 8);
    cr_assert_eq(rkv_pool_refcount(g_pool, b[0]), 2, "no second tree ref");
    cr_assert_eq(stats().inserted_pages, 2);
    OK(rkv_pool_unref_n(g_pool, 2, b));
    CHECK();
}

Test(tree, namespaces_isolated)
{
    int32_t tok[8];
    tf_seq(tok, 8, 50);
    insert_release(1, tok, 8);
    cr_assert_eq(match(1, tok, 8, NULL, 0).matched_tokens, 8);
    cr_assert_eq(match(2, tok, 8, NULL, 0).matched_tokens, 0);
    /* namespace values forged from the token pattern (a scheme that mixes
     * ns into the first tokens or hashes would collide) */
    uint64_t forged[4] = {((uint64_t)(uint32_t)tok[1] << 32) | (uint32_t)tok[0],
                          ((uint64_t)(uint32_t)tok[0] << 32) | (uint32_t)tok[1],
                          (uint64_t)tok[0], 0};
    for (int i = 0; i < 4; i++) {
        rkv_match m = match(forged[i], tok, 8, NULL, RKV_MATCH_PEEK);
        cr_assert_eq(m.matched_tokens, 0, "forged ns %d hit", i);
    }
    /* the unknown namespace of a peek gives a zeroed handle */
    rkv_match m = match(12345, tok, 8, NULL, RKV_MATCH_PEEK);
    cr_assert_eq(m.node.id, 0);
    cr_assert_eq(m.node.gen, 0);
    rkv_lease lz = {12345};
    ERR(RKV_ERR_STALE_HANDLE, rkv_tree_lock(g_tree, m.node, &lz));
    cr_assert_eq(lz.id, 0, "a failed lock hands out no lease");
    /* same tokens in ns 2 get their own blocks */
    insert_release(2, tok, 8);
    rkv_block_id b1[2], b2[2];
    cr_assert_eq(match(1, tok, 8, b1, 0).matched_tokens, 8);
    cr_assert_eq(match(2, tok, 8, b2, 0).matched_tokens, 8);
    cr_assert_neq(b1[0], b2[0]);
    cr_assert_neq(rkv_pool_block_hash(g_pool, b1[0]),
                  rkv_pool_block_hash(g_pool, b2[0]));
    rkv_tree_stats s = stats();
    cr_assert_eq(s.namespaces, 2);
    cr_assert_eq(s.cached_blocks, 4);
}

Test(tree, lock_unlock_misuse)
{
    int32_t a[8], b[8];
    tf_seq(a, 8, 1);
    memcpy(b, a, 4 * sizeof(int32_t));
    tf_seq(b + 4, 4, 77);
    insert_release(0, a, 8);
    insert_release(0, b, 8);
    rkv_match ma = match(0, a, 8, NULL, 0);
    snap s;
    rkv_lease l1, l2;
    OK(rkv_tree_lock(g_tree, ma.node, &l1));
    CHECK();
    cr_assert_neq(l1.id, 0);
    OK(rkv_tree_lock(g_tree, ma.node, &l2)); /* locks nest: two leases */
    CHECK();
    cr_assert_neq(l2.id, 0);
    cr_assert_neq(l1.id, l2.id, "each lock has its own lease");
    rkv_lease copy1 = l1;
    OK(rkv_tree_unlock(g_tree, &l1));
    cr_assert_eq(l1.id, 0, "unlock zeroes the lease");
    CHECK();
    cr_assert_eq(stats().locked_blocks, 2, "the other lease still holds");
    /* the released lease (a copy, or the zeroed original) releases nothing */
    snap_take(&s);
    ERR(RKV_ERR_STATE, rkv_tree_unlock(g_tree, &copy1));
    cr_assert_neq(copy1.id, 0, "a refused lease is left as it was");
    ERR(RKV_ERR_STATE, rkv_tree_unlock(g_tree, &l1));
    CHECK();
    snap_same(&s, 0);
    rkv_node_info info;
    OK(rkv_tree_node_info(g_tree, ma.node, &info));
    cr_assert_eq(info.lock_count, 1);
    /* forged leases: neighbours of a live id in every bit, and values */
    snap_take(&s);
    for (int bit = 0; bit < 64; bit++) {
        rkv_lease f = {l2.id ^ (UINT64_C(1) << bit)};
        ERR(RKV_ERR_STATE, rkv_tree_unlock(g_tree, &f));
    }
    const uint64_t forged[] = {1, 2, UINT64_MAX, l2.id + 1, l2.id - 1,
                               copy1.id + 1};
    for (size_t i = 0; i < sizeof forged / sizeof forged[0]; i++) {
        rkv_lease f = {forged[i]};
        ERR(RKV_ERR_STATE, rkv_tree_unlock(g_tree, &f));
    }
    rkv_lease zero = {0};
    ERR(RKV_ERR_STATE, rkv_tree_unlock(g_tree, &zero));
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_unlock(g_tree, NULL));
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_unlock(NULL, &l2));
    CHECK();
    snap_same(&s, 0);
    OK(rkv_tree_unlock(g_tree, &l2));
    CHECK();
    cr_assert_eq(stats().locked_blocks, 0);
    ERR(RKV_ERR_STATE, rkv_tree_unlock(g_tree, &l2));
    /* lock misuse */
    rkv_node znode = {0, 0};
    rkv_lease out = {99};
    ERR(RKV_ERR_STALE_HANDLE, rkv_tree_lock(g_tree, znode, &out));
    cr_assert_eq(out.id, 0);
    rkv_node forged_node = {ma.node.id, ma.node.gen + 1};
    ERR(RKV_ERR_STALE_HANDLE, rkv_tree_lock(g_tree, forged_node, &out));
    rkv_node far = {1000000, 1};
    ERR(RKV_ERR_STALE_HANDLE, rkv_tree_lock(g_tree, far, &out));
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_lock(NULL, ma.node, &out));
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_lock(g_tree, ma.node, NULL));
    CHECK();
    cr_assert_eq(stats().locked_blocks, 0);
}

/* issue 10 item 3, in the tree alone: a caller's second unlock must not
 * release a lock someone else holds on the same node */
Test(tree, double_unlock_cannot_release_another_owners_lock)
{
    int32_t a[8];
    rkv_lease theirs, mine; /* theirs: e.g. the scheduler's */
    rkv_insert_result r = insert_locked(0, a, 8, &theirs);
    OK(rkv_tree_lock(g_tree, r.node, &mine));
    rkv_lease again = mine;
    OK(rkv_tree_unlock(g_tree, &mine));
    ERR(RKV_ERR_STATE, rkv_tree_unlock(g_tree, &again));
    ERR(RKV_ERR_STATE, rkv_tree_unlock(g_tree, &mine));
    CHECK();
    uint32_t freed = 0;
    ERR(RKV_ERR_NO_SPACE, rkv_tree_evict(g_tree, 1, &freed));
    cr_assert_eq(match(0, a, 8, NULL, RKV_MATCH_PEEK).matched_tokens, 8,
                 "the other owner's path stays cached");
    OK(rkv_tree_unlock(g_tree, &theirs));
    OK(rkv_tree_evict(g_tree, 2, &freed));
    CHECK();
}

/* A released lease stays refused after its slot is reused by new locks. */
Test(tree, released_lease_refused_after_slot_reuse)
{
    int32_t a[8];
    rkv_lease old;
    rkv_insert_result r = insert_locked(0, a, 8, &old);
    rkv_lease stale = old;
    OK(rkv_tree_unlock(g_tree, &old));
    rkv_lease held[40];
    for (int i = 0; i < 40; i++) { /* the table grows past its first size */
        OK(rkv_tree_lock(g_tree, r.node, &held[i]));
        cr_assert_neq(held[i].id, stale.id);
        for (int j = 0; j < i; j++)
            cr_assert_neq(held[i].id, held[j].id, "two live leases alike");
    }
    CHECK();
    ERR(RKV_ERR_STATE, rkv_tree_unlock(g_tree, &stale));
    for (int i = 0; i < 40; i++) {
        rkv_lease l = held[i];
        OK(rkv_tree_unlock(g_tree, &held[i]));
        OK(rkv_tree_lock(g_tree, r.node, &held[i])); /* reuse each slot */
        cr_assert_neq(held[i].id, l.id);
        ERR(RKV_ERR_STATE, rkv_tree_unlock(g_tree, &l));
        ERR(RKV_ERR_STATE, rkv_tree_unlock(g_tree, &stale));
    }
    CHECK();
    for (int i = 0; i < 40; i++)
        OK(rkv_tree_unlock(g_tree, &held[i]));
    CHECK();
    cr_assert_eq(stats().locked_blocks, 0);
    /* after a reset the old leases stay refused */
    OK(rkv_tree_reset(g_tree));
    r = insert_release(0, a, 8);
    OK(rkv_tree_lock(g_tree, r.node, &old));
    ERR(RKV_ERR_STATE, rkv_tree_unlock(g_tree, &stale));
    OK(rkv_tree_unlock(g_tree, &old));
    CHECK();
}

/* A lease from another tree is refused, in both directions, even where
 * both trees hold the same number of leases at the same depth. */
Test(tree, lease_from_another_tree_refused)
{
    rkv_pool *p2;
    rkv_tree *t2;
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = 64;
    pc.page_size = g_page;
    OK(rkv_pool_create(&pc, &p2));
    OK(rkv_tree_create(p2, NULL, &t2));
    int32_t a[8];
    tf_seq(a, 8, 1);
    rkv_insert_result r = insert_release(0, a, 8);
    rkv_block_id b[2];
    rkv_insert_result r2;
    OK(rkv_tree_alloc_blocks(t2, 2, b));
    OK(rkv_tree_insert(t2, 0, a, 8, b, NULL, &r2));
    OK(rkv_pool_unref_n(p2, 2, b));
    rkv_lease l1, l2;
    OK(rkv_tree_lock(g_tree, r.node, &l1));
    OK(rkv_tree_lock(t2, r2.node, &l2));
    cr_assert_neq(l1.id, l2.id);
    rkv_lease c1 = l1, c2 = l2;
    ERR(RKV_ERR_STATE, rkv_tree_unlock(t2, &c1));
    ERR(RKV_ERR_STATE, rkv_tree_unlock(g_tree, &c2));
    CHECK();
    OK(rkv_tree_check(t2));
    cr_assert_eq(stats().locked_blocks, 2);
    /* a tree destroyed and re-created on the same pool: new leases */
    OK(rkv_tree_unlock(t2, &l2));
    rkv_tree_destroy(t2);
    OK(rkv_tree_create(p2, NULL, &t2));
    OK(rkv_tree_alloc_blocks(t2, 2, b));
    OK(rkv_tree_insert(t2, 0, a, 8, b, NULL, &r2));
    OK(rkv_pool_unref_n(p2, 2, b));
    OK(rkv_tree_lock(t2, r2.node, &l2));
    ERR(RKV_ERR_STATE, rkv_tree_unlock(t2, &c2));
    ERR(RKV_ERR_STATE, rkv_tree_unlock(t2, &c1));
    OK(rkv_tree_unlock(t2, &l2));
    OK(rkv_tree_check(t2));
    OK(rkv_tree_unlock(g_tree, &l1));
    CHECK();
    rkv_tree_destroy(t2);
    cr_assert_eq(rkv_pool_num_free(p2), 64);
    rkv_pool_destroy(p2);
}

/* A lease keeps naming its node across a split above it and releases
 * exactly what it locked. */
Test(tree, lease_survives_split)
{
    int32_t a[16];
    rkv_lease l;
    rkv_insert_result r = insert_locked(0, a, 16, &l); /* one node, 4 pages */
    rkv_match m = match(0, a, 8, NULL, 0); /* splits the locked node */
    cr_assert_eq(stats().splits, 1);
    cr_assert_eq(node_depth(r.node), 16);
    rkv_lease lh;
    OK(rkv_tree_lock(g_tree, m.node, &lh));
    CHECK();
    OK(rkv_tree_unlock(g_tree, &l));
    CHECK();
    rkv_tree_stats s = stats();
    cr_assert_eq(s.locked_blocks, 2, "only the head stays locked");
    cr_assert_eq(s.evictable_blocks, 2);
    OK(rkv_tree_unlock(g_tree, &lh));
    CHECK();
    cr_assert_eq(stats().locked_blocks, 0);
}

/* issue 10 item 4: one tree per pool */
Test(tree, one_tree_per_pool)
{
    int32_t a[8];
    tf_seq(a, 8, 1);
    rkv_insert_result r = insert_release(0, a, 8);
    rkv_block_id got[2];
    match(0, a, 8, got, RKV_MATCH_PEEK);
    snap s;
    snap_take(&s);
    rkv_tree *t2 = NULL;
    ERR(RKV_ERR_BUSY, rkv_tree_create(g_pool, NULL, &t2));
    cr_assert_null(t2);
    CHECK();
    snap_same(&s, 0);
    cr_assert_eq(rkv_tree_pool(g_tree), g_pool);
    (void)r;
    /* after destroy the pool takes a new tree, and the hashes it writes
     * are its own */
    rkv_tree_destroy(g_tree);
    g_tree = NULL;
    cr_assert_eq(rkv_pool_num_free(g_pool), 64);
    OK(rkv_tree_create(g_pool, NULL, &g_tree));
    ERR(RKV_ERR_BUSY, rkv_tree_create(g_pool, NULL, &t2));
    int32_t other[8];
    tf_seq(other, 8, 900);
    insert_release(5, other, 8);
    insert_release(0, a, 8);
    CHECK();
    cr_assert_eq(match(0, a, 8, NULL, RKV_MATCH_PEEK).matched_tokens, 8);
}

Test(tree, lock_of_leaf_protects_the_leaf_itself)
{
    int32_t a[8], b[8];
    tf_seq(a, 8, 1);
    tf_seq(b, 8, 500);
    rkv_insert_result ra = insert_release(0, a, 8);
    insert_release(0, b, 8);
    rkv_lease la;
    OK(rkv_tree_lock(g_tree, ra.node, &la)); /* a single-node path: the leaf */
    CHECK();
    rkv_tree_stats s = stats();
    cr_assert_eq(s.locked_blocks, 2);
    cr_assert_eq(s.evictable_blocks, 2);
    snap sn;
    snap_take(&sn);
    uint32_t freed = 99;
    ERR(RKV_ERR_NO_SPACE, rkv_tree_evict(g_tree, 3, &freed));
    CHECK();
    snap_same(&sn, 0);
    OK(rkv_tree_evict(g_tree, 2, &freed));
    CHECK();
    cr_assert_eq(freed, 2);
    cr_assert_eq(match(0, a, 8, NULL, RKV_MATCH_PEEK).matched_tokens, 8);
    cr_assert_eq(match(0, b, 8, NULL, RKV_MATCH_PEEK).matched_tokens, 0);
    ERR(RKV_ERR_NO_SPACE, rkv_tree_evict(g_tree, 1, &freed));
    OK(rkv_tree_unlock(g_tree, &la));
    CHECK();
    OK(rkv_tree_evict(g_tree, 2, &freed));
    CHECK();
    cr_assert_eq(stats().cached_blocks, 0);
    cr_assert_eq(rkv_pool_num_free(g_pool), 64);
}

Test(tree, eviction_order_is_lru)
{
    int32_t t[3][8];
    for (int i = 0; i < 3; i++)
        tf_seq(t[i], 8, 1000 * (i + 1));
    for (int i = 0; i < 3; i++)
        insert_release(0, t[i], 8);
    match(0, t[0], 8, NULL, 0); /* order of use now: 1, 2, 0 */
    match(0, t[1], 8, NULL, RKV_MATCH_PEEK); /* a peek is not a use */
    uint32_t freed;
    OK(rkv_tree_evict(g_tree, 2, &freed));
    CHECK();
    cr_assert_eq(match(0, t[1], 8, NULL, RKV_MATCH_PEEK).matched_tokens, 0);
    cr_assert_eq(match(0, t[2], 8, NULL, RKV_MATCH_PEEK).matched_tokens, 8);
    cr_assert_eq(match(0, t[0], 8, NULL, RKV_MATCH_PEEK).matched_tokens, 8);
    OK(rkv_tree_evict(g_tree, 2, &freed));
    CHECK();
    cr_assert_eq(match(0, t[2], 8, NULL, RKV_MATCH_PEEK).matched_tokens, 0);
    cr_assert_eq(match(0, t[0], 8, NULL, RKV_MATCH_PEEK).matched_tokens, 8);
    rkv_tree_stats s = stats();
    cr_assert_eq(s.evicted_blocks, 4);
    cr_assert_eq(s.evicted_nodes, 2);
}

Test(tree, unlock_counts_as_use)
{
    int32_t a[4], b[4];
    tf_seq(a, 4, 10);
    tf_seq(b, 4, 20);
    rkv_insert_result ra = insert_release(0, a, 4);
    rkv_lease la;
    OK(rkv_tree_lock(g_tree, ra.node, &la));
    insert_release(0, b, 4); /* b used after a was locked */
    OK(rkv_tree_unlock(g_tree, &la)); /* a in use until now */
    CHECK();
    uint32_t freed;
    OK(rkv_tree_evict(g_tree, 1, &freed));
    CHECK();
    cr_assert_eq(match(0, b, 4, NULL, RKV_MATCH_PEEK).matched_tokens, 0);
    cr_assert_eq(match(0, a, 4, NULL, RKV_MATCH_PEEK).matched_tokens, 4);
}

Test(tree, tail_page_eviction)
{
    int32_t tok[16];
    tf_seq(tok, 16, 1);
    rkv_insert_result r = insert_release(0, tok, 16);
    rkv_block_id before[4];
    match(0, tok, 16, before, 0);
    uint32_t freed;
    OK(rkv_tree_evict(g_tree, 1, &freed));
    CHECK();
    cr_assert_eq(freed, 1);
    cr_assert_eq(rkv_pool_refcount(g_pool, before[3]), 0, "the tail page went");
    cr_assert_eq(rkv_pool_refcount(g_pool, before[0]), 1);
    rkv_lease l;
    ERR(RKV_ERR_STALE_HANDLE, rkv_tree_lock(g_tree, r.node, &l));
    rkv_node_info info;
    ERR(RKV_ERR_STALE_HANDLE, rkv_tree_node_info(g_tree, r.node, &info));
    rkv_block_id got[4];
    rkv_match m = match(0, tok, 16, got, 0);
    cr_assert_eq(m.matched_tokens, 12);
    cr_assert_eq(memcmp(got, before, 3 * sizeof *got), 0);
    cr_assert_eq(stats().nodes, 1);
    /* an epoch change was visible to the parent */
    OK(rkv_tree_evict(g_tree, 3, &freed));
    CHECK();
    cr_assert_eq(stats().nodes, 0);
    cr_assert_eq(stats().namespaces, 0, "an empty namespace root goes too");
    ERR(RKV_ERR_STALE_HANDLE, rkv_tree_lock(g_tree, m.node, &l));
}

Test(tree, parent_joins_lru_when_it_becomes_a_leaf)
{
    /* S (2 pages) with children X, Y; then an unrelated Z used after */
    int32_t x[12], y[12], z[8];
    tf_seq(x, 12, 1);
    memcpy(y, x, 8 * sizeof(int32_t));
    tf_seq(x + 8, 4, 100);
    tf_seq(y + 8, 4, 200);
    tf_seq(z, 8, 5000);
    insert_release(0, x, 12);
    insert_release(0, y, 12);
    insert_release(0, z, 8);
    rkv_tree_stats s = stats();
    cr_assert_eq(s.evictable_blocks, 2 + 1 + 1 + 2);
    uint32_t freed;
    OK(rkv_tree_evict(g_tree, 2, &freed)); /* X and Y */
    CHECK();
    cr_assert_eq(match(0, x, 8, NULL, RKV_MATCH_PEEK).matched_tokens, 8);
    /* S, last used before Z, is now the oldest leaf */
    OK(rkv_tree_evict(g_tree, 2, &freed));
    CHECK();
    cr_assert_eq(match(0, x, 8, NULL, RKV_MATCH_PEEK).matched_tokens, 0);
    cr_assert_eq(match(0, z, 8, NULL, RKV_MATCH_PEEK).matched_tokens, 8);
}

Test(tree, parent_placed_in_the_middle_of_the_lru)
{
    /* leaves used in the order A, S/X, B; X goes first by hand so S must
     * be placed between A and B */
    int32_t a[4], x[8], b[4], c[4];
    tf_seq(a, 4, 1);
    tf_seq(x, 8, 100);
    tf_seq(b, 4, 200);
    tf_seq(c, 4, 300);
    insert_release(0, a, 4);
    insert_release(0, x, 8); /* S = x[0..4) + X = x[4..8) one node ... */
    match(0, x, 4, NULL, 0); /* split: S and X, S used now */
    insert_release(0, b, 4);
    insert_release(0, c, 4);
    match(0, a, 4, NULL, 0); /* A newest; LRU: X, B, C, A */
    uint32_t freed;
    OK(rkv_tree_evict(g_tree, 1, &freed)); /* X; S (used before B) placed */
    CHECK();
    OK(rkv_tree_evict(g_tree, 1, &freed));
    CHECK();
    cr_assert_eq(match(0, x, 4, NULL, RKV_MATCH_PEEK).matched_tokens, 0, "S next");
    cr_assert_eq(match(0, b, 4, NULL, RKV_MATCH_PEEK).matched_tokens, 4);
}

Test(tree, evictable_accounting_with_shared_prefix)
{
    int32_t a[16], b[16];
    tf_seq(a, 16, 1);
    memcpy(b, a, 12 * sizeof(int32_t));
    tf_seq(b + 12, 4, 999);
    insert_release(0, a, 16);
    insert_release(0, b, 16);
    rkv_match ma = match(0, a, 16, NULL, 0);
    rkv_match mb = match(0, b, 16, NULL, 0);
    rkv_lease la, lb;
    OK(rkv_tree_lock(g_tree, ma.node, &la));
    OK(rkv_tree_lock(g_tree, mb.node, &lb));
    CHECK();
    rkv_tree_stats s = stats();
    cr_assert_eq(s.cached_blocks, 5);
    cr_assert_eq(s.locked_blocks, 5, "shared prefix counted once");
    cr_assert_eq(s.evictable_blocks, 0);
    OK(rkv_tree_unlock(g_tree, &la));
    CHECK();
    s = stats();
    cr_assert_eq(s.locked_blocks, 4);
    cr_assert_eq(s.evictable_blocks, 1);
    OK(rkv_tree_unlock(g_tree, &lb));
    CHECK();
    s = stats();
    cr_assert_eq(s.evictable_blocks, 5);
    uint32_t freed;
    OK(rkv_tree_evict(g_tree, 5, &freed));
    CHECK();
    cr_assert_eq(freed, 5);
    cr_assert_eq(rkv_pool_num_free(g_pool), 64);
}

Test(tree, exhaustion_changes_nothing)
{
    /* fill the pool: 64 blocks = 16 paths of 4 pages, all locked */
    rkv_lease locked[16];
    int32_t tok[16];
    for (int i = 0; i < 16; i++) {
        tf_seq(tok, 16, 10000 * (i + 1));
        rkv_insert_result r = insert_release(0, tok, 16);
        OK(rkv_tree_lock(g_tree, r.node, &locked[i]));
    }
    CHECK();
    cr_assert_eq(rkv_pool_num_free(g_pool), 0);
    snap s;
    snap_take(&s);
    rkv_block_id b[2];
    ERR(RKV_ERR_NO_SPACE, rkv_tree_alloc_blocks(g_tree, 1, b));
    ERR(RKV_ERR_NO_SPACE, rkv_tree_evict(g_tree, 1, NULL));
    CHECK();
    snap_same(&s, 0);
    /* one path unlocked: 4 evictable; asking 5 changes nothing */
    OK(rkv_tree_unlock(g_tree, &locked[3]));
    snap_take(&s);
    rkv_block_id b5[5];
    ERR(RKV_ERR_NO_SPACE, rkv_tree_alloc_blocks(g_tree, 5, b5));
    CHECK();
    snap_same(&s, 0);
    OK(rkv_tree_alloc_blocks(g_tree, 2, b));
    CHECK();
    cr_assert_eq(stats().evicted_blocks, 2);
    OK(rkv_pool_unref_n(g_pool, 2, b));
    for (int i = 0; i < 16; i++)
        if (i != 3)
            OK(rkv_tree_unlock(g_tree, &locked[i]));
    CHECK();
}

Test(tree, reset_while_locked_and_stale_handles)
{
    int32_t tok[8];
    rkv_lease l;
    rkv_insert_result r = insert_locked(3, tok, 8, &l);
    rkv_lease copy = l;
    snap s;
    snap_take(&s);
    ERR(RKV_ERR_BUSY, rkv_tree_reset(g_tree));
    CHECK();
    snap_same(&s, 0);
    OK(rkv_tree_unlock(g_tree, &l));
    OK(rkv_tree_reset(g_tree));
    CHECK();
    rkv_tree_stats st = stats();
    cr_assert_eq(st.cached_blocks, 0);
    cr_assert_eq(st.nodes, 0);
    cr_assert_eq(st.namespaces, 0);
    cr_assert_eq(rkv_pool_num_free(g_pool), 64);
    ERR(RKV_ERR_STALE_HANDLE, rkv_tree_lock(g_tree, r.node, &l));
    ERR(RKV_ERR_STATE, rkv_tree_unlock(g_tree, &copy));
    rkv_match m;
    ERR(RKV_ERR_STALE_HANDLE, rkv_tree_match_from(g_tree, r.node, 8, tok, 8, NULL, &m));
    /* the slot is reused by a new node: the old handle stays stale */
    rkv_insert_result r2 = insert_release(3, tok, 8);
    (void)r2;
    ERR(RKV_ERR_STALE_HANDLE, rkv_tree_lock(g_tree, r.node, &l));
    cr_assert_eq(match(3, tok, 8, NULL, 0).matched_tokens, 8);
}

Test(tree, invalid_arguments)
{
    int32_t tok[8];
    tf_seq(tok, 8, 1);
    rkv_block_id b[2];
    OK(rkv_tree_alloc_blocks(g_tree, 2, b));
    rkv_insert_result r;
    rkv_match m;
    snap s;
    snap_take(&s);
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_insert(NULL, 0, tok, 8, b, NULL, &r));
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_insert(g_tree, 0, NULL, 8, b, NULL, &r));
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_insert(g_tree, 0, tok, 8, NULL, NULL, &r));
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_match(NULL, 0, tok, 8, NULL, 0, &m));
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_match(g_tree, 0, tok, 8, NULL, 0, NULL));
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_match(g_tree, 0, NULL, 8, NULL, 0, &m));
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_match(g_tree, 0, tok, 8, NULL, 0x10, &m));
    tok[5] = -3;
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_insert(g_tree, 0, tok, 8, b, NULL, &r));
    tok[5] = 5;
    rkv_block_id bad[2] = {b[0], 63}; /* 63 is free */
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_insert(g_tree, 0, tok, 8, bad, NULL, &r));
    rkv_block_id out_of_range[2] = {b[0], 64};
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_insert(g_tree, 0, tok, 8, out_of_range, NULL, &r));
    rkv_block_id same[2] = {b[0], b[0]}; /* one block for two pages */
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_insert(g_tree, 0, tok, 8, same, NULL, &r));
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_get_stats(NULL, NULL));
    CHECK();
    snap_same(&s, 0);
    /* a block already cached for another page cannot be reused */
    OK(rkv_tree_insert(g_tree, 0, tok, 8, b, NULL, &r));
    int32_t other[4];
    tf_seq(other, 4, 300);
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_insert(g_tree, 0, other, 4, b, NULL, &r));
    CHECK();
    /* a negative id in a query is never cached: it ends the match */
    int32_t neg[8];
    memcpy(neg, tok, sizeof neg);
    neg[6] = -1;
    OK(rkv_tree_match(g_tree, 0, neg, 8, NULL, RKV_MATCH_PEEK, &m));
    cr_assert_eq(m.matched_tokens, 4);
    /* empty inputs are fine */
    OK(rkv_tree_insert(g_tree, 0, tok, 3, NULL, NULL, &r));
    cr_assert_eq(r.cached_tokens, 0);
    OK(rkv_tree_match(g_tree, 0, NULL, 0, NULL, 0, &m));
    cr_assert_eq(m.matched_tokens, 0);
    CHECK();
    OK(rkv_pool_unref_n(g_pool, 2, b));
    /* pool page sizes the tree refuses are refused by the pool */
    rkv_pool_config cfg;
    rkv_pool_config_init(&cfg);
    cfg.num_blocks = 4;
    rkv_pool *p = NULL;
    cfg.page_size = 0;
    ERR(RKV_ERR_INVALID_ARG, rkv_pool_create(&cfg, &p));
    cfg.page_size = RKV_MAX_PAGE_SIZE + 1;
    ERR(RKV_ERR_INVALID_ARG, rkv_pool_create(&cfg, &p));
    CHECK();
}

Test(tree, peek_and_match_from)
{
    int32_t tok[24];
    tf_seq(tok, 24, 1);
    insert_release(0, tok, 12); /* node A: 3 pages */
    insert_release(0, tok, 24); /* node B: 3 more pages under A */
    rkv_tree_stats s0 = stats();
    rkv_block_id got[6];
    memset(got, 0xff, sizeof got);
    /* peek ending inside B: handle = A, matched reaches into B */
    rkv_match m = match(0, tok, 18, got, RKV_MATCH_PEEK);
    cr_assert_eq(m.matched_tokens, 16);
    cr_assert_eq(node_depth(m.node), 12);
    rkv_tree_stats s1 = stats();
    cr_assert(memcmp(&s0, &s1, sizeof s0) == 0, "a peek changes no stats");
    /* continue from A with the full request */
    rkv_block_id got2[6];
    memset(got2, 0xff, sizeof got2);
    rkv_match m2;
    OK(rkv_tree_match_from(g_tree, m.node, 12, tok, 24, got2, &m2));
    CHECK();
    cr_assert_eq(m2.matched_tokens, 24);
    cr_assert_eq(node_depth(m2.node), 24);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(got2[i], 0xffffffffu, "blocks before from_tokens untouched");
    rkv_block_id full[6];
    match(0, tok, 24, full, RKV_MATCH_PEEK);
    cr_assert_eq(memcmp(got2 + 3, full + 3, 3 * sizeof *full), 0);
    cr_assert_eq(memcmp(got, full, 4 * sizeof *full), 0);
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_match_from(g_tree, m.node, 5, tok, 24, NULL, &m2));
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_match_from(g_tree, m.node, 28, tok, 24, NULL, &m2));
    /* children_epoch of A moves when its child B changes */
    rkv_node_info ia, ib;
    OK(rkv_tree_node_info(g_tree, m.node, &ia));
    cr_assert_eq(ia.num_children, 1);
    uint32_t freed;
    OK(rkv_tree_evict(g_tree, 1, &freed)); /* trims B */
    OK(rkv_tree_node_info(g_tree, m.node, &ib));
    cr_assert_neq(ia.children_epoch, ib.children_epoch);
    CHECK();
}

Test(tree, node_info_fields)
{
    int32_t tok[12];
    tf_seq(tok, 12, 1);
    rkv_insert_result r = insert_release(9, tok, 12);
    rkv_match head = match(9, tok, 4, NULL, 0); /* split at 1 page */
    rkv_node_info info;
    OK(rkv_tree_node_info(g_tree, r.node, &info));
    cr_assert_eq(info.ns, 9);
    cr_assert_eq(info.depth_tokens, 12);
    cr_assert_eq(info.num_pages, 2);
    cr_assert_eq(info.num_children, 0);
    cr_assert_eq(info.parent.id, head.node.id);
    cr_assert_eq(info.parent.gen, head.node.gen);
    cr_assert_eq(info.lock_count, 0);
    rkv_lease l;
    OK(rkv_tree_lock(g_tree, r.node, &l));
    rkv_node_info hi;
    OK(rkv_tree_node_info(g_tree, head.node, &hi));
    cr_assert_eq(hi.lock_count, 1, "lock walks through ancestors");
    cr_assert_eq(hi.num_children, 1);
    cr_assert_eq(hi.num_pages, 1);
    cr_assert_geq(hi.last_access, info.last_access);
    rkv_node_info ri;
    OK(rkv_tree_node_info(g_tree, hi.parent, &ri));
    cr_assert_eq(ri.depth_tokens, 0);
    cr_assert_eq(ri.parent.id, 0);
    cr_assert_eq(ri.lock_count, 1);
    OK(rkv_tree_unlock(g_tree, &l));
    CHECK();
}

Test(tree, oom_leaves_tree_unchanged)
{
    int32_t a[16], b[16];
    tf_seq(a, 16, 1);
    memcpy(b, a, 8 * sizeof(int32_t));
    tf_seq(b + 8, 8, 300);
    insert_release(0, a, 16);
    rkv_block_id bb[4];
    OK(rkv_tree_alloc_blocks(g_tree, 4, bb));
    /* an insert that splits and adds a node, failing at each allocation */
    int failed = 0;
    for (int64_t k = 0;; k++) {
        snap s;
        snap_take(&s);
        int64_t live = rkv_tree_debug_live_allocs(g_tree);
        uint64_t calls = rkv_tree_debug_alloc_calls(g_tree);
        rkv_tree_debug_fail_alloc_after(g_tree, k);
        rkv_insert_result r;
        rkv_status st = rkv_tree_insert(g_tree, 0, b, 16, bb, NULL, &r);
        rkv_tree_debug_fail_alloc_after(g_tree, -1);
        CHECK();
        if (st == RKV_OK) {
            free(s.ref);
            free(s.hash);
            break;
        }
        cr_assert_eq(st, RKV_ERR_NOMEM);
        cr_assert_gt(rkv_tree_debug_alloc_calls(g_tree), calls);
        cr_assert_eq(rkv_tree_debug_live_allocs(g_tree), live, "leak on failure");
        snap_same(&s, 0);
        failed++;
    }
    cr_assert_geq(failed, 3, "split head, split tail and leaf arrays");
    cr_assert_eq(match(0, b, 16, NULL, 0).matched_tokens, 16);
    OK(rkv_pool_unref_n(g_pool, 4, bb));
    CHECK();
}

Test(tree_big, thousands_of_children)
{
    /* one system-prompt page, then 5000 sessions diverging after it */
    const int nsess = 5000;
    int32_t tok[48];
    tf_seq(tok, 16, 7);
    for (int i = 0; i < nsess; i++) {
        tf_seq(tok + 16, 32, 100000 + 32 * i);
        uint32_t np = 3;
        rkv_block_id b[3];
        OK(rkv_tree_alloc_blocks(g_tree, np, b));
        rkv_insert_result r;
        OK(rkv_tree_insert(g_tree, 0, tok, 48, b, NULL, &r));
        OK(rkv_pool_unref_n(g_pool, np, b));
        if (i % 1000 == 0)
            CHECK();
    }
    CHECK();
    rkv_tree_stats s = stats();
    cr_assert_eq(s.cached_blocks, 1 + 2 * (uint64_t)nsess);
    cr_assert_eq(s.nodes, 1 + (uint64_t)nsess);
    rkv_match head = match(0, tok, 16, NULL, RKV_MATCH_PEEK);
    rkv_node_info info;
    OK(rkv_tree_node_info(g_tree, head.node, &info));
    cr_assert_eq(info.num_children, (uint32_t)nsess);
    for (int i = nsess - 1; i >= 0; i--) {
        tf_seq(tok + 16, 32, 100000 + 32 * i);
        rkv_match m;
        OK(rkv_tree_match(g_tree, 0, tok, 48, NULL, 0, &m)); /* checked below */
        cr_assert_eq(m.matched_tokens, 48, "session %d", i);
    }
    CHECK();
    /* the first-used sessions are now the newest: evict half the leaves */
    uint32_t freed;
    OK(rkv_tree_evict(g_tree, (uint32_t)nsess, &freed));
    CHECK();
    tf_seq(tok + 16, 32, 100000 + 32 * (nsess - 1));
    cr_assert_eq(match(0, tok, 48, NULL, RKV_MATCH_PEEK).matched_tokens, 16);
    tf_seq(tok + 16, 32, 100000);
    cr_assert_eq(match(0, tok, 48, NULL, RKV_MATCH_PEEK).matched_tokens, 48);
}

static void setup_mid(void) { setup_sized(4096, 16); }
TestSuite(tree_mid, .init = setup_mid, .fini = tf_close);

Test(tree_mid, random_ops_check_every_step)
{
    uint64_t seed = rkv_test_seed("tree_mid::random_ops_check_every_step");
    rkv_rng rng;
    rkv_rng_init(&rng, seed);
    enum { MAXP = 12 };
    int32_t tok[MAXP * 16 + 16];
    rkv_lease locked[64];
    int nlocked = 0;
    for (int step = 0; step < 3000; step++) {
        /* tokens from a small alphabet of pages so prefixes are shared */
        uint32_t np = 1 + (uint32_t)rkv_rng_below(&rng, MAXP);
        for (uint32_t pg = 0; pg < np; pg++) {
            int32_t v = (int32_t)rkv_rng_below(&rng, 3);
            for (uint32_t k = 0; k < 16; k++)
                tok[pg * 16 + k] = v * 1000 + (int32_t)(pg * 16 + k);
        }
        size_t n = np * 16 + rkv_rng_below(&rng, 16);
        for (size_t k = np * 16; k < n; k++)
            tok[k] = 7;
        rkv_namespace ns = rkv_rng_below(&rng, 2);
        uint64_t op = rkv_rng_below(&rng, 10);
        if (op < 4) {
            rkv_block_id b[MAXP];
            if (rkv_tree_alloc_blocks(g_tree, np, b) != RKV_OK)
                continue;
            rkv_insert_result r;
            rkv_block_id dups[MAXP];
            OK(rkv_tree_insert(g_tree, ns, tok, n, b, dups, &r));
            cr_assert_eq(r.cached_tokens, np * 16);
            OK(rkv_pool_unref_n(g_pool, np, b));
        } else if (op < 7) {
            rkv_match m = match(ns, tok, n, NULL, rkv_rng_below(&rng, 2) ? RKV_MATCH_PEEK : 0);
            if (nlocked < 64 && m.node.id != 0 && rkv_rng_below(&rng, 2))
                OK(rkv_tree_lock(g_tree, m.node, &locked[nlocked++]));
        } else if (op < 9) {
            if (nlocked > 0) {
                uint32_t i = (uint32_t)rkv_rng_below(&rng, (uint64_t)nlocked);
                OK(rkv_tree_unlock(g_tree, &locked[i]));
                locked[i] = locked[--nlocked];
            }
        } else {
            uint32_t want = (uint32_t)rkv_rng_below(&rng, 20);
            rkv_tree_stats s = stats();
            rkv_status st = rkv_tree_evict(g_tree, want, NULL);
            cr_assert_eq(st, s.evictable_blocks >= want ? RKV_OK : RKV_ERR_NO_SPACE);
        }
        CHECK();
    }
    while (nlocked > 0)
        OK(rkv_tree_unlock(g_tree, &locked[--nlocked]));
    CHECK();
}

/* Random operations with injected allocation failures, resets, external
 * references and match_from, at page sizes 1, 3 and 16; every failing call
 * must leave the tree and pool exactly as before. */
static void random_stress(uint32_t page, uint64_t seed, int steps)
{
    setup_sized(512, page);
    rkv_rng rng;
    rkv_rng_init(&rng, seed);
    enum { MAXP = 10 };
    int32_t tok[MAXP * 16 + 16];
    rkv_lease locked[32];
    int nlocked = 0;
    rkv_block_id held[64]; /* blocks the "caller" keeps referencing */
    int nheld = 0;
    int nomem = 0;
    for (int step = 0; step < steps; step++) {
        uint32_t np = (uint32_t)rkv_rng_below(&rng, MAXP + 1);
        size_t n = (size_t)np * page + rkv_rng_below(&rng, page);
        for (size_t pg = 0; pg * page < n; pg++) {
            int32_t v = (int32_t)rkv_rng_below(&rng, 2);
            for (uint32_t k = 0; k < page && pg * page + k < n; k++)
                tok[pg * page + k] = v * 100000 + (int32_t)(pg * page + k);
        }
        rkv_namespace ns = rkv_rng_below(&rng, 3);
        int inject = rkv_rng_below(&rng, 4) == 0;
        snap s;
        snap_take(&s);
        int64_t live = rkv_tree_debug_live_allocs(g_tree);
        if (inject)
            rkv_tree_debug_fail_alloc_after(g_tree, (int64_t)rkv_rng_below(&rng, 4));
        uint64_t op = rkv_rng_below(&rng, 100);
        rkv_status st = RKV_OK;
        if (op < 35) {
            rkv_block_id b[MAXP];
            if (rkv_tree_alloc_blocks(g_tree, np, b) == RKV_OK) {
                free(s.ref);
                free(s.hash);
                snap_take(&s);
                live = rkv_tree_debug_live_allocs(g_tree);
                rkv_insert_result r;
                st = rkv_tree_insert(g_tree, ns, tok, n, b, NULL, &r);
                if (st == RKV_OK) {
                    cr_assert_eq(r.cached_tokens, (size_t)np * page);
                } else {
                    /* compare before the caller releases its blocks */
                    rkv_tree_debug_fail_alloc_after(g_tree, -1);
                    cr_assert_eq(st, RKV_ERR_NOMEM, "%s", rkv_last_error());
                    nomem++;
                    CHECK();
                    cr_assert_eq(rkv_tree_debug_live_allocs(g_tree), live);
                    snap_same(&s, 0);
                    snap_take(&s);
                    st = RKV_OK;
                }
                /* keep a few references as a running request would */
                uint32_t keep = 0;
                if (np > 0 && nheld < 64 && rkv_rng_below(&rng, 4) == 0)
                    held[nheld++] = b[keep++];
                OK(rkv_pool_unref_n(g_pool, np - keep, b + keep));
            }
        } else if (op < 65) {
            rkv_match m;
            unsigned flags = rkv_rng_below(&rng, 3) == 0 ? RKV_MATCH_PEEK : 0;
            st = rkv_tree_match(g_tree, ns, tok, n, NULL, flags, &m);
            if (st == RKV_OK && m.node.id != 0) {
                rkv_node_info info;
                OK(rkv_tree_node_info(g_tree, m.node, &info));
                cr_assert_eq(info.ns, ns);
                if (flags == 0)
                    cr_assert_eq(info.depth_tokens, m.matched_tokens);
                rkv_match m2;
                OK(rkv_tree_match_from(g_tree, m.node, info.depth_tokens, tok, n,
                                       NULL, &m2));
                cr_assert_eq(m2.matched_tokens, m.matched_tokens);
                if (nlocked < 32 && rkv_rng_below(&rng, 2)) {
                    /* the injection may still be armed: a lock that
                     * fails (the lease table could not grow) must change
                     * nothing since the match */
                    free(s.ref);
                    free(s.hash);
                    snap_take(&s);
                    live = rkv_tree_debug_live_allocs(g_tree);
                    st = rkv_tree_lock(g_tree, m.node, &locked[nlocked]);
                    if (st == RKV_OK)
                        nlocked++;
                    else
                        cr_assert_eq(locked[nlocked].id, 0);
                }
            }
        } else if (op < 85) {
            if (nlocked > 0) {
                uint32_t i = (uint32_t)rkv_rng_below(&rng, (uint64_t)nlocked);
                OK(rkv_tree_unlock(g_tree, &locked[i]));
                locked[i] = locked[--nlocked];
            }
            if (nheld > 0 && rkv_rng_below(&rng, 2))
                OK(rkv_pool_unref(g_pool, held[--nheld]));
        } else if (op < 97) {
            uint32_t want = (uint32_t)rkv_rng_below(&rng, 40);
            uint32_t freed = 0;
            rkv_tree_stats before = stats();
            st = rkv_tree_evict(g_tree, want, &freed);
            if (before.evictable_blocks < want)
                cr_assert_eq(st, RKV_ERR_NO_SPACE);
            else if (st == RKV_OK)
                cr_assert_geq(freed, want);
            if (st != RKV_OK && before.evictable_blocks >= want) {
                /* external references: everything evictable went */
                cr_assert_eq(stats().evictable_blocks, 0);
                st = RKV_OK; /* not an "unchanged" failure */
            }
        } else {
            st = rkv_tree_reset(g_tree);
            cr_assert_eq(st, nlocked > 0 ? RKV_ERR_BUSY : RKV_OK);
        }
        rkv_tree_debug_fail_alloc_after(g_tree, -1);
        CHECK();
        if (st != RKV_OK) {
            nomem += st == RKV_ERR_NOMEM;
            cr_assert(st == RKV_ERR_NOMEM || st == RKV_ERR_BUSY ||
                      st == RKV_ERR_NO_SPACE, "status %d: %s", st,
                      rkv_last_error());
            cr_assert_eq(rkv_tree_debug_live_allocs(g_tree), live);
            snap_same(&s, 0);
        } else {
            free(s.ref);
            free(s.hash);
        }
    }
    while (nlocked > 0)
        OK(rkv_tree_unlock(g_tree, &locked[--nlocked]));
    while (nheld > 0)
        OK(rkv_pool_unref(g_pool, held[--nheld]));
    CHECK();
    /* the scenario really exercised the tree */
    rkv_tree_stats fin = stats();
    cr_assert_gt(fin.splits, 0);
    cr_assert_gt(fin.evicted_nodes, 0);
    cr_assert_gt(fin.hit_tokens, 0);
    cr_assert_gt(nomem, 10, "only %d injected failures hit", nomem);
}

Test(tree_stress, random_ops_with_failures, .fini = tf_close)
{
    uint64_t seed = rkv_test_seed("tree_stress::random_ops_with_failures");
    static const uint32_t pages[3] = {1, 3, 16};
    for (int i = 0; i < 3; i++) {
        random_stress(pages[i], seed + (uint64_t)i, 4000);
        if (i < 2)
            tf_close();
    }
}

/* rkv_tree_check catches each peer bug when it is planted by hand. */
Test(tree, check_detects_planted_bugs)
{
    int32_t a[8], b[8];
    tf_seq(a, 8, 1);
    memcpy(b, a, 4 * sizeof(int32_t));
    tf_seq(b + 4, 4, 50);
    insert_release(0, a, 8);
    rkv_insert_result rb = insert_release(0, b, 8);
    rkv_lease lb;
    OK(rkv_tree_lock(g_tree, rb.node, &lb));
    CHECK();
    rkv_tnode *x = &g_tree->nodes[rb.node.id];
    /* a lock walk that skipped the node itself */
    x->lock_count--;
    ERR(RKV_ERR_CORRUPT, rkv_tree_check(g_tree));
    x->lock_count++;
    CHECK();
    /* evictable pages double-counted */
    g_tree->evictable_blocks++;
    ERR(RKV_ERR_CORRUPT, rkv_tree_check(g_tree));
    g_tree->evictable_blocks--;
    /* a tree block whose reference the caller dropped (freed dup) */
    rkv_block_id blk = rkv_tnode_blocks(g_tree, x)[0];
    g_pool->refcount[blk]--;
    ERR(RKV_ERR_CORRUPT, rkv_tree_check(g_tree));
    g_pool->refcount[blk]++;
    /* a wrong chained hash */
    g_pool->hash[blk] ^= 1;
    ERR(RKV_ERR_CORRUPT, rkv_tree_check(g_tree));
    g_pool->hash[blk] ^= 1;
    /* a token changed under the index (the child is no longer findable) */
    x->u.tokens[0] ^= 0x40;
    ERR(RKV_ERR_CORRUPT, rkv_tree_check(g_tree));
    x->u.tokens[0] ^= 0x40;
    /* a lease slot naming another node than the one it locked */
    uint32_t ls = UINT32_MAX;
    for (uint32_t i = 0; i < g_tree->leases_used; i++)
        if (g_tree->leases[i].node == rb.node.id)
            ls = i;
    cr_assert_neq(ls, UINT32_MAX);
    uint32_t parent = x->parent;
    g_tree->leases[ls].node = parent;
    ERR(RKV_ERR_CORRUPT, rkv_tree_check(g_tree));
    g_tree->leases[ls].node = rb.node.id;
    /* a lease slot freed behind the table's back (a lock with no lease) */
    g_tree->leases[ls].node = 0;
    ERR(RKV_ERR_CORRUPT, rkv_tree_check(g_tree));
    g_tree->leases[ls].node = rb.node.id;
    /* the pool taken by another tree */
    const rkv_tree *owner = g_pool->tree;
    g_pool->tree = NULL;
    ERR(RKV_ERR_CORRUPT, rkv_tree_check(g_tree));
    g_pool->tree = owner;
    CHECK();
    /* an unlocked leaf missing from the LRU list */
    OK(rkv_tree_unlock(g_tree, &lb));
    CHECK();
    uint32_t head = g_tree->lru_head[0];
    g_tree->lru_head[0] = g_tree->nodes[head].lru_next;
    ERR(RKV_ERR_CORRUPT, rkv_tree_check(g_tree));
    g_tree->lru_head[0] = head;
    CHECK();
}

/* Review note "radix, namespace roots": an empty namespace root must not
 * outlive its last lock (it used to stay until reset, so one-off
 * namespaces accumulated). */
Test(tree, empty_namespace_root_goes_with_its_last_lease)
{
    int32_t a[8];
    tf_seq(a, 8, 1);
    /* locked while empty: a match that creates the root, lock, unlock */
    rkv_match m = match(41, a, 3, NULL, 0); /* less than a page */
    cr_assert_eq(stats().namespaces, 1);
    rkv_lease l1, l2;
    OK(rkv_tree_lock(g_tree, m.node, &l1));
    OK(rkv_tree_lock(g_tree, m.node, &l2));
    OK(rkv_tree_unlock(g_tree, &l1));
    CHECK();
    cr_assert_eq(stats().namespaces, 1, "still locked by l2");
    OK(rkv_tree_unlock(g_tree, &l2));
    CHECK();
    cr_assert_eq(stats().namespaces, 0);
    rkv_node_info info;
    ERR(RKV_ERR_STALE_HANDLE, rkv_tree_node_info(g_tree, m.node, &info));
    /* emptied under a lock: its pages evicted while the root was locked */
    insert_release(42, a, 8);
    m = match(42, a, 0, NULL, 0); /* the root's handle */
    OK(rkv_tree_lock(g_tree, m.node, &l1));
    uint32_t freed;
    OK(rkv_tree_evict(g_tree, 2, &freed));
    CHECK();
    cr_assert_eq(stats().cached_blocks, 0);
    cr_assert_eq(stats().namespaces, 1, "a locked root stays");
    OK(rkv_tree_unlock(g_tree, &l1));
    CHECK();
    cr_assert_eq(stats().namespaces, 0);
    /* a root with pages stays after its lease goes */
    insert_release(43, a, 8);
    m = match(43, a, 0, NULL, 0);
    OK(rkv_tree_lock(g_tree, m.node, &l1));
    OK(rkv_tree_unlock(g_tree, &l1));
    CHECK();
    cr_assert_eq(stats().namespaces, 1);
    cr_assert_eq(match(43, a, 8, NULL, RKV_MATCH_PEEK).matched_tokens, 8);
}
