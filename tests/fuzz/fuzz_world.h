/*
 * tests/fuzz/fuzz_world.h -- the bookkeeping the two API harnesses
 * (fuzz_api.c, fuzz_tiers.c) keep on their world of one pool and its tree:
 * the check after every call, remembered node handles, held block
 * references, locks taken on remembered nodes, and the last check that
 * every block is free once the tree is gone.
 *
 * Included by a harness after it defines `world` -- with fields pool,
 * tree, nblocks, held[MAX_HELD], nheld, nodes[MAX_NODES], nnodes, nlocks,
 * op -- the limits MAX_HELD, MAX_NODES and MAX_LOCKS, die(w, ...), and
 * check_all(w, what) (its own checks after each call). Each harness is one
 * translation unit, so these stay private to it.
 */
#ifndef RKV_TESTS_FUZZ_WORLD_H
#define RKV_TESTS_FUZZ_WORLD_H

#include "radixkv.h"
#include "tests/fuzz/fuzz_input.h"

/* A call's status: anything but CORRUPT is a legal answer to a legal
 * program (NO_SPACE, STATE, BUSY, IO, NOMEM, PIN_CAP, STALE_HANDLE ...). */
static rkv_status called(const world *w, rkv_status st, const char *what)
{
    if (st == RKV_ERR_CORRUPT)
        die(w, "%s returned RKV_ERR_CORRUPT", what);
    check_all(w, what);
    return st;
}

static void remember_node(world *w, rkv_node n)
{
    if (n.id == 0)
        return;
    if (w->nnodes < MAX_NODES)
        w->nodes[w->nnodes++] = n;
    else
        w->nodes[n.id % MAX_NODES] = n;
}

static void check_allocated(const world *w, const rkv_block_id *b, uint32_t n,
                            const char *what)
{
    for (uint32_t i = 0; i < n; i++)
        if (b[i] >= w->nblocks || rkv_pool_refcount(w->pool, b[i]) == 0)
            die(w, "%s returned block %u, not allocated", what, b[i]);
}

static void drop_held(world *w, uint32_t i)
{
    rkv_status st = rkv_pool_unref(w->pool, w->held[i]);
    if (st != RKV_OK)
        die(w, "unref of a held block %u: %s", w->held[i], rkv_strerror(st));
    w->held[i] = w->held[--w->nheld];
    check_all(w, "unref");
}

/* Locks a remembered node the input picks, if one is remembered and a lock
 * can still be held: 1 with the lease in *l, else 0. A lease handed back
 * is never all-zero; a failed lock leaves *l zero. */
static int lock_some_node(world *w, in *s, rkv_lease *l)
{
    if (w->nnodes == 0 || w->nlocks >= MAX_LOCKS)
        return 0;
    rkv_node n = w->nodes[below(s, w->nnodes)];
    *l = (rkv_lease){12345};
    rkv_status st = called(w, rkv_tree_lock(w->tree, n, l), "lock");
    if (st == RKV_OK && l->id == 0)
        die(w, "lock handed back an all-zero lease");
    if (st != RKV_OK && l->id != 0)
        die(w, "a failed lock left *out non-zero");
    return st == RKV_OK;
}

/* Destroys the tree; the pool must then pass its check with every block
 * free. */
static void destroy_tree_all_free(world *w)
{
    rkv_tree_destroy(w->tree);
    if (rkv_pool_check(w->pool) != RKV_OK)
        die(w, "pool check after destroy");
    if (rkv_pool_num_free(w->pool) != w->nblocks)
        die(w, "%u of %u blocks free after destroy",
            rkv_pool_num_free(w->pool), w->nblocks);
}

#endif
