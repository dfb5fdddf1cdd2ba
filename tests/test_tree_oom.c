/*
 * tests/test_tree_oom.c -- out-of-memory injection across a realistic radix
 * tree scenario (radix/tree_debug.h).
 *
 * The scenario (sc_run, a few hundred calls) is a server's life in small:
 * a shared system prompt, a hundred sessions branching under it (the child
 * index and the slot table must grow), matches and inserts that end inside
 * nodes (splits), other namespaces, locks held across evictions (enough of
 * them at once that the lease table grows twice), unlocks of leases not
 * held (zero, released), alloc_blocks with eviction, reset while locked
 * (BUSY) and after, and a long sequence matched at many depths.
 *
 * First a baseline run without injection records, per call, its status and
 * how many node-memory allocations came before it (N in all). Then for every
 * k in 0..N, a fresh pool + tree runs the scenario with the (k+1)-th
 * allocation failing. Every call must return its baseline status or
 * RKV_ERR_NOMEM; exactly one call (the one the baseline predicts) returns
 * NOMEM, and after it the tree and pool pass their checks and are exactly as
 * before the call: stats (host bytes included), live allocations, pool free
 * count and every ref count, a peek match of every sequence the scenario
 * uses (matched length and block ids), and node_info of every stored handle.
 * The call is then retried (the injection has disarmed) and the scenario
 * goes on; its final state must equal the baseline's. After destroy, the
 * process-wide live tree allocation count is back where it started.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "radix/tree_debug.h"
#include "radixkv.h"

#define P 4u
#define NUM_BLOCKS 256u
#define MAX_STEPS 1024
#define MAX_SEQS 512
#define MAX_TOK 160
#define MAX_HANDLES 64
#define MAX_LEASES 64

typedef struct seq {
    uint64_t ns;
    uint32_t n;
    int32_t tok[MAX_TOK];
} seq;

/* Everything observable about the tree and pool, for before/after. */
typedef struct snap {
    rkv_tree_stats stats;
    int64_t live;
    uint32_t pool_free;
    uint32_t refcount[NUM_BLOCKS];
    uint32_t matched[MAX_SEQS];
    rkv_block_id blocks[MAX_SEQS][MAX_TOK / P];
    rkv_status info_st[MAX_HANDLES];
    rkv_node_info info[MAX_HANDLES];
} snap;

typedef struct ctx {
    rkv_pool *pool;
    rkv_tree *tree;
    int baseline;
    int64_t k;              /* armed failure, -1 in the baseline           */
    uint64_t calls0;        /* alloc calls when the scenario started        */
    uint32_t step;
    /* baseline results, per step */
    rkv_status base_status[MAX_STEPS];
    uint64_t base_calls[MAX_STEPS + 1]; /* allocations before step i     */
    uint32_t nsteps;
    uint64_t total_allocs;
    /* this run */
    uint32_t nomem_steps;
    uint64_t extra_calls;   /* allocations made by the failed attempt      */
    uint32_t fire_step;     /* step expected to see the failure             */
    seq seqs[MAX_SEQS];
    uint32_t nseqs;
    rkv_node h[MAX_HANDLES];
    uint32_t nh;
    rkv_lease leases[MAX_LEASES]; /* zero: never taken, or released     */
    uint32_t nl;
    snap *before, *after;
} ctx;

/* ---- observation ------------------------------------------------------------------ */

static void take_snap(ctx *c, snap *s)
{
    memset(s, 0, sizeof *s);
    cr_assert_eq(rkv_tree_get_stats(c->tree, &s->stats), RKV_OK);
    s->live = rkv_tree_debug_live_allocs(c->tree);
    s->pool_free = rkv_pool_num_free(c->pool);
    for (uint32_t b = 0; b < NUM_BLOCKS; b++)
        s->refcount[b] = rkv_pool_refcount(c->pool, b);
    for (uint32_t i = 0; i < c->nseqs; i++) {
        rkv_match m;
        cr_assert_eq(rkv_tree_match(c->tree, c->seqs[i].ns, c->seqs[i].tok,
                                    c->seqs[i].n, s->blocks[i], RKV_MATCH_PEEK,
                                    &m), RKV_OK);
        s->matched[i] = m.num_blocks;
    }
    for (uint32_t i = 0; i < c->nh; i++) {
        s->info_st[i] = rkv_tree_node_info(c->tree, c->h[i], &s->info[i]);
        if (s->info_st[i] != RKV_OK)
            memset(&s->info[i], 0, sizeof s->info[i]);
    }
}

static void compare_snaps(ctx *c, const snap *a, const snap *b, const char *what)
{
    cr_assert(memcmp(&a->stats, &b->stats, sizeof a->stats) == 0,
              "k=%lld step %u: stats changed (%s)", (long long)c->k, c->step, what);
    cr_assert_eq(a->live, b->live, "k=%lld step %u: live allocations %lld -> %lld (%s)",
                 (long long)c->k, c->step, (long long)a->live, (long long)b->live,
                 what);
    cr_assert_eq(a->pool_free, b->pool_free, "k=%lld step %u: pool free changed (%s)",
                 (long long)c->k, c->step, what);
    cr_assert(memcmp(a->refcount, b->refcount, sizeof a->refcount) == 0,
              "k=%lld step %u: ref counts changed (%s)", (long long)c->k, c->step,
              what);
    for (uint32_t i = 0; i < c->nseqs; i++) {
        cr_assert_eq(a->matched[i], b->matched[i],
                     "k=%lld step %u: sequence %u matched %u pages, now %u (%s)",
                     (long long)c->k, c->step, i, a->matched[i], b->matched[i], what);
        cr_assert(memcmp(a->blocks[i], b->blocks[i],
                         a->matched[i] * sizeof(rkv_block_id)) == 0,
                  "k=%lld step %u: sequence %u block ids changed (%s)",
                  (long long)c->k, c->step, i, what);
    }
    for (uint32_t i = 0; i < c->nh; i++) {
        cr_assert_eq(a->info_st[i], b->info_st[i],
                     "k=%lld step %u: handle %u validity changed (%s)",
                     (long long)c->k, c->step, i, what);
        cr_assert(memcmp(&a->info[i], &b->info[i], sizeof a->info[i]) == 0,
                  "k=%lld step %u: handle %u node info changed (%s)",
                  (long long)c->k, c->step, i, what);
    }
}

static void checks(ctx *c)
{
    cr_assert_eq(rkv_tree_check(c->tree), RKV_OK, "k=%lld step %u: %s",
                 (long long)c->k, c->step, rkv_last_error());
    cr_assert_eq(rkv_pool_check(c->pool), RKV_OK, "k=%lld step %u: %s",
                 (long long)c->k, c->step, rkv_last_error());
}

/* ---- one scenario call -------------------------------------------------------------- */

typedef enum op_kind { OP_INSERT, OP_MATCH, OP_LOCK, OP_UNLOCK, OP_EVICT,
                       OP_RESET } op_kind;

typedef struct op {
    op_kind kind;
    uint32_t seq;       /* OP_INSERT / OP_MATCH                              */
    uint32_t handle;    /* OP_LOCK                                           */
    uint32_t lease;     /* OP_LOCK (receives it) / OP_UNLOCK                 */
    uint32_t n;         /* OP_EVICT                                          */
} op;

static rkv_status op_call(ctx *c, const op *o, rkv_node *node_out,
                          const rkv_block_id *fresh)
{
    const seq *s = &c->seqs[o->seq];
    switch (o->kind) {
    case OP_INSERT: {
        rkv_insert_result r;
        rkv_block_id dups[MAX_TOK / P];
        rkv_status st = rkv_tree_insert(c->tree, s->ns, s->tok, s->n, fresh,
                                        dups, &r);
        if (st == RKV_OK)
            *node_out = r.node;
        return st;
    }
    case OP_MATCH: {
        rkv_match m;
        rkv_block_id b[MAX_TOK / P];
        rkv_status st = rkv_tree_match(c->tree, s->ns, s->tok, s->n, b, 0, &m);
        if (st == RKV_OK)
            *node_out = m.node;
        return st;
    }
    case OP_LOCK: {
        rkv_status st = rkv_tree_lock(c->tree, c->h[o->handle],
                                      &c->leases[o->lease]);
        if (st != RKV_OK)
            cr_assert_eq(c->leases[o->lease].id, 0,
                         "k=%lld step %u: a failed lock left a lease",
                         (long long)c->k, c->step);
        return st;
    }
    case OP_UNLOCK: {
        rkv_lease before = c->leases[o->lease];
        rkv_status st = rkv_tree_unlock(c->tree, &c->leases[o->lease]);
        cr_assert_eq(c->leases[o->lease].id, st == RKV_OK ? 0 : before.id,
                     "k=%lld step %u: unlock left the lease wrong",
                     (long long)c->k, c->step);
        return st;
    }
    case OP_EVICT: {
        uint32_t freed;
        return rkv_tree_evict(c->tree, o->n, &freed);
    }
    case OP_RESET:
        return rkv_tree_reset(c->tree);
    }
    return RKV_ERR_INVALID_ARG;
}

/* Runs one call; returns the handle index it stored (or -1). */
static int sc_step(ctx *c, const op *o)
{
    cr_assert(c->step < MAX_STEPS, "scenario too long");
    uint32_t np = o->kind == OP_INSERT ? c->seqs[o->seq].n / P : 0;
    rkv_block_id fresh[MAX_TOK / P];
    if (np > 0) {
        /* the caller's blocks: alloc_blocks evicts, never allocates nodes */
        cr_assert_eq(rkv_tree_alloc_blocks(c->tree, np, fresh), RKV_OK,
                     "k=%lld step %u: alloc_blocks(%u): %s", (long long)c->k,
                     c->step, np, rkv_last_error());
    }
    uint64_t calls = rkv_tree_debug_alloc_calls(c->tree) - c->calls0 -
                     c->extra_calls;
    if (c->baseline)
        c->base_calls[c->step] = calls;
    else
        cr_assert_eq(calls, c->base_calls[c->step],
                     "k=%lld step %u: %llu allocations so far, baseline %llu",
                     (long long)c->k, c->step, (unsigned long long)calls,
                     (unsigned long long)c->base_calls[c->step]);
    int expect_fire = !c->baseline && c->step == c->fire_step;
    if (expect_fire)
        take_snap(c, c->before);
    rkv_node node = {0, 0};
    uint64_t calls_before = rkv_tree_debug_alloc_calls(c->tree);
    rkv_status st = op_call(c, o, &node, fresh);
    if (st == RKV_ERR_NOMEM) {
        c->extra_calls = rkv_tree_debug_alloc_calls(c->tree) - calls_before;
        cr_assert_eq(calls_before - c->calls0 + c->extra_calls - 1, (uint64_t)c->k,
                     "k=%lld step %u: the failure came at another allocation",
                     (long long)c->k, c->step);
        cr_assert(expect_fire, "k=%lld step %u: NOMEM where none was expected",
                  (long long)c->k, c->step);
        c->nomem_steps++;
        checks(c);
        take_snap(c, c->after);
        compare_snaps(c, c->before, c->after, "after NOMEM");
        st = op_call(c, o, &node, fresh); /* the injection has disarmed */
    } else {
        cr_assert(!expect_fire, "k=%lld step %u: allocation %lld was to fail "
                  "here, the call returned %d", (long long)c->k, c->step,
                  (long long)c->k, (int)st);
    }
    if (c->baseline)
        c->base_status[c->step] = st;
    else
        cr_assert_eq(st, c->base_status[c->step],
                     "k=%lld step %u: status %d, baseline %d", (long long)c->k,
                     c->step, (int)st, (int)c->base_status[c->step]);
    if (np > 0) /* the caller's own references (duplicates included) */
        cr_assert_eq(rkv_pool_unref_n(c->pool, np, fresh), RKV_OK);
    checks(c);
    c->step++;
    int idx = -1;
    if (st == RKV_OK && (o->kind == OP_INSERT || o->kind == OP_MATCH) &&
        c->nh < MAX_HANDLES) {
        idx = (int)c->nh;
        c->h[c->nh++] = node;
    }
    return idx;
}

/* ---- the scenario ------------------------------------------------------------------ */

static uint32_t add_seq(ctx *c, uint64_t ns, const int32_t *tok, uint32_t n)
{
    cr_assert(c->nseqs < MAX_SEQS && n <= MAX_TOK);
    seq *s = &c->seqs[c->nseqs];
    s->ns = ns;
    s->n = n;
    memcpy(s->tok, tok, n * sizeof *tok);
    return c->nseqs++;
}

static int sc_insert(ctx *c, uint64_t ns, const int32_t *tok, uint32_t n)
{
    op o = {OP_INSERT, add_seq(c, ns, tok, n), 0, 0, 0};
    return sc_step(c, &o);
}

static int sc_match(ctx *c, uint64_t ns, const int32_t *tok, uint32_t n)
{
    op o = {OP_MATCH, add_seq(c, ns, tok, n), 0, 0, 0};
    return sc_step(c, &o);
}

/* Locks handle h; returns the index of its lease (or -1 without h). */
static int sc_lock(ctx *c, int h)
{
    if (h < 0)
        return -1;
    cr_assert(c->nl < MAX_LEASES, "too many leases");
    op o = {OP_LOCK, 0, (uint32_t)h, c->nl++, 0};
    sc_step(c, &o);
    return (int)o.lease;
}

/* A lease index that was never locked: unlock gives STATE. */
static int sc_no_lease(ctx *c)
{
    cr_assert(c->nl < MAX_LEASES, "too many leases");
    return (int)c->nl++;
}

static void sc_unlock(ctx *c, int l)
{
    if (l < 0)
        return;
    op o = {OP_UNLOCK, 0, 0, (uint32_t)l, 0};
    sc_step(c, &o);
}

static void sc_evict(ctx *c, uint32_t n)
{
    op o = {OP_EVICT, 0, 0, 0, n};
    sc_step(c, &o);
}

static void sc_reset(ctx *c)
{
    op o = {OP_RESET, 0, 0, 0, 0};
    sc_step(c, &o);
}

#define SYS 64u /* system prompt tokens (16 pages) */

static void sc_run(ctx *c)
{
    int32_t sys[SYS], t[MAX_TOK];
    for (uint32_t i = 0; i < SYS; i++)
        sys[i] = (int32_t)(1000 + i);
    int hsys = sc_insert(c, 0, sys, SYS);
    int lsys = sc_lock(c, hsys); /* the system prompt stays pinned a while */

    /* a hundred sessions under the system prompt: 2 pages each (child
     * index and slot table growth); every 10th is matched part way,
     * which splits the session's node */
    int hsess[100], lsess[100];
    memcpy(t, sys, sizeof sys);
    for (uint32_t i = 0; i < 100; i++) {
        for (uint32_t j = 0; j < 8; j++)
            t[SYS + j] = (int32_t)(2000 + i * 8 + j);
        hsess[i] = sc_insert(c, 0, t, SYS + 8);
        if (i % 10 == 3) {
            t[SYS + 4] = 7; /* diverges in the second page */
            sc_match(c, 0, t, SYS + 8);
        }
        lsess[i] = i % 25 == 0 ? sc_lock(c, hsess[i]) : -1;
    }

    if (c->baseline) {
        /* more nodes than the initial 64 slots and 96 index entries: both
         * tables grew inside the scenario */
        rkv_tree_stats st;
        cr_assert_eq(rkv_tree_get_stats(c->tree, &st), RKV_OK);
        cr_assert(st.nodes >= 100, "only %llu nodes", (unsigned long long)st.nodes);
    }

    /* matches ending inside the system prompt's node: splits */
    int hm32 = sc_match(c, 0, sys, 32);
    int lm32 = sc_lock(c, hm32);
    memcpy(t, sys, 48 * sizeof *t);
    t[48] = 5;
    t[49] = 6;
    t[50] = 7;
    t[51] = 8;
    sc_match(c, 0, t, 52);
    /* insert ending inside a node and branching off it */
    memcpy(t, sys, 40 * sizeof *t);
    for (uint32_t j = 0; j < 12; j++)
        t[40 + j] = (int32_t)(3000 + j);
    int hbranch = sc_insert(c, 0, t, 52);
    sc_insert(c, 0, sys, 24); /* ends inside, no new page */
    sc_insert(c, 0, sys, 22); /* partial last page ignored */

    /* other namespaces, same tokens: no sharing */
    int hns1 = sc_insert(c, 1, sys, SYS);
    sc_match(c, UINT64_MAX, sys, SYS); /* unknown namespace: a new root */
    sc_insert(c, UINT64_MAX, sys, 32);
    sc_match(c, 1, sys, 36);

    /* locks, bad unlocks, eviction with locks held */
    int lbranch = sc_lock(c, hbranch);
    (void)hns1;
    sc_unlock(c, sc_no_lease(c)); /* a zero lease: STATE */
    sc_unlock(c, lsys);
    sc_unlock(c, lsys);           /* second unlock: STATE */
    sc_evict(c, 20);
    sc_evict(c, 100000);       /* more than evictable: NO_SPACE */
    for (uint32_t i = 0; i < 30; i++) {
        memcpy(t, sys, sizeof sys);
        for (uint32_t j = 0; j < 16; j++)
            t[SYS + j] = (int32_t)(5000 + i * 16 + j);
        int h = sc_insert(c, i % 3 == 0 ? 1 : 0, t, SYS + 16);
        if (i % 7 == 0)
            sc_match(c, 0, t, SYS + 8);
        if (i % 10 == 0)
            sc_unlock(c, sc_lock(c, h));
    }
    sc_unlock(c, lsess[0]);

    /* reset refused while locked, then done for real */
    sc_reset(c);
    sc_unlock(c, lm32);
    sc_unlock(c, lbranch);
    for (uint32_t i = 25; i < 100; i += 25)
        sc_unlock(c, lsess[i]);
    sc_reset(c);
    sc_reset(c); /* nothing cached: OK */
    sc_unlock(c, lsess[0]); /* released before the reset: STATE */
    sc_reset(c);

    /* after the reset: a long sequence matched at many depths */
    for (uint32_t i = 0; i < 120; i++)
        t[i] = (int32_t)(9000 + i);
    int hlong = sc_insert(c, 0, t, 120);
    int llong = sc_lock(c, hlong);
    /* nested locks: 18 leases at once, the lease table grows 8 -> 32 */
    int lnest[17];
    for (uint32_t i = 0; i < 17; i++)
        lnest[i] = sc_lock(c, hlong);
    for (uint32_t d = 116; d >= 8 && d <= 116; d -= 12)
        sc_match(c, 0, t, d);
    for (uint32_t i = 0; i < 17; i += 2)
        sc_unlock(c, lnest[i]);
    for (uint32_t i = 0; i < 17; i += 2)
        sc_unlock(c, lnest[i]); /* second unlocks: STATE */
    for (uint32_t i = 0; i < 20; i++) {
        t[60 + (i % 50)] = (int32_t)(20000 + i);
        sc_insert(c, 0, t, 120 - i);
    }
    for (uint32_t i = 1; i < 17; i += 2)
        sc_unlock(c, lnest[i]);
    sc_unlock(c, llong);
    sc_evict(c, 40);
    sc_match(c, 0, sys, SYS);
}

static void run_once(ctx *c, int64_t k)
{
    rkv_pool_config cfg;
    rkv_pool_config_init(&cfg);
    cfg.num_blocks = NUM_BLOCKS;
    cfg.page_size = P;
    cr_assert_eq(rkv_pool_create(&cfg, &c->pool), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(rkv_tree_create(c->pool, NULL, &c->tree), RKV_OK, "%s",
                 rkv_last_error());
    c->k = k;
    c->step = 0;
    c->nseqs = 0;
    c->nh = 0;
    c->nl = 0;
    memset(c->leases, 0, sizeof c->leases);
    c->nomem_steps = 0;
    c->extra_calls = 0;
    c->calls0 = rkv_tree_debug_alloc_calls(c->tree);
    c->fire_step = UINT32_MAX;
    if (!c->baseline && k >= 0) {
        /* the step during which allocation number k happens */
        for (uint32_t s = 0; s < c->nsteps; s++)
            if (c->base_calls[s] <= (uint64_t)k && (uint64_t)k < c->base_calls[s + 1])
                c->fire_step = s;
    }
    rkv_tree_debug_fail_alloc_after(c->tree, k);
    sc_run(c);
    rkv_tree_debug_fail_alloc_after(c->tree, -1);
    if (c->baseline) {
        c->nsteps = c->step;
        c->base_calls[c->step] = rkv_tree_debug_alloc_calls(c->tree) - c->calls0;
        c->total_allocs = c->base_calls[c->step];
    } else {
        cr_assert_eq(c->step, c->nsteps);
        cr_assert_eq(c->nomem_steps, c->fire_step == UINT32_MAX ? 0u : 1u,
                     "k=%lld: %u calls failed", (long long)k, c->nomem_steps);
    }
}

static void finish(ctx *c)
{
    rkv_tree_destroy(c->tree);
    cr_assert_eq(rkv_pool_num_free(c->pool), NUM_BLOCKS);
    rkv_pool_destroy(c->pool);
    c->tree = NULL;
    c->pool = NULL;
}

Test(tree_oom, every_allocation_of_a_scenario)
{
    ctx *c = calloc(1, sizeof *c);
    cr_assert_not_null(c);
    c->before = calloc(1, sizeof *c->before);
    c->after = calloc(1, sizeof *c->after);
    snap *final_base = calloc(1, sizeof *final_base);
    snap *final_k = calloc(1, sizeof *final_k);
    cr_assert(c->before && c->after && final_base && final_k);
    int64_t live0 = rkv_debug_live_tree_allocs_global();

    c->baseline = 1;
    run_once(c, -1);
    take_snap(c, final_base);
    finish(c);
    cr_assert_eq(rkv_debug_live_tree_allocs_global(), live0, "baseline leaked");
    /* the scenario must do what it claims */
    cr_assert(final_base->stats.splits >= 10, "only %llu splits",
              (unsigned long long)final_base->stats.splits);
    cr_assert(final_base->stats.evicted_blocks > 0);
    cr_assert(c->total_allocs >= 100, "only %llu allocations",
              (unsigned long long)c->total_allocs);
    int saw_busy = 0, saw_state = 0, saw_nospace = 0;
    for (uint32_t s = 0; s < c->nsteps; s++) {
        rkv_status st = c->base_status[s];
        cr_assert(st == RKV_OK || st == RKV_ERR_BUSY || st == RKV_ERR_STATE ||
                      st == RKV_ERR_NO_SPACE || st == RKV_ERR_STALE_HANDLE,
                  "baseline step %u: status %d", s, (int)st);
        saw_busy |= st == RKV_ERR_BUSY;
        saw_state |= st == RKV_ERR_STATE;
        saw_nospace |= st == RKV_ERR_NO_SPACE;
    }
    cr_assert(saw_busy && saw_state && saw_nospace,
              "the scenario must hit BUSY, STATE and NO_SPACE");
    fprintf(stderr, "[tree_oom] scenario: %u calls, %llu node allocations, "
            "%llu splits, %llu evicted pages\n", c->nsteps,
            (unsigned long long)c->total_allocs,
            (unsigned long long)final_base->stats.splits,
            (unsigned long long)final_base->stats.evicted_blocks);

    c->baseline = 0;
    for (int64_t k = 0; k <= (int64_t)c->total_allocs; k++) {
        run_once(c, k);
        take_snap(c, final_k);
        compare_snaps(c, final_base, final_k, "final state vs baseline");
        finish(c);
        cr_assert_eq(rkv_debug_live_tree_allocs_global(), live0,
                     "k=%lld: live tree allocations %lld after destroy, %lld "
                     "before", (long long)k,
                     (long long)rkv_debug_live_tree_allocs_global(),
                     (long long)live0);
    }
    free(final_base);
    free(final_k);
    free(c->before);
    free(c->after);
    free(c);
}
