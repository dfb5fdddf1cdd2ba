/*
 * radix/tree_lease.c -- owned locks: the lease table, rkv_tree_lock and
 * rkv_tree_unlock.
 *
 * Why leases: with bare lock counts any caller could release a lock it did
 * not take (a second unlock released the scheduler's lock on a running
 * request's path, and eviction then removed the request's prefix). Now
 * every lock is one slot of a table and the caller gets the slot's lease;
 * unlock takes the lease, so only its holder can release that lock.
 *
 * Invariants (verified by rkv_lease_check, called from rkv_tree_check):
 *   - slots [0, leases_used) exist; a slot is live iff node != 0, and a live
 *     slot names a node in use with lock_count > 0. lock_total == live
 *     slots, and each node's lock_count == live slots naming it + its
 *     children's lock_count.
 *   - the released slots form a FIFO list (lease_free_head .. tail) of
 *     exactly the free slots below leases_used. FIFO spreads reuse over all
 *     free slots, so a slot's generation advances as slowly as possible.
 *   - gen is in 1 .. 2^RKV_LEASE_GEN_BITS - 1 and advances at each release;
 *     a live lease's id is never 0.
 * A lease id is E_k(gen << 24 | slot), E_k the Speck64/128 block cipher
 * (Beaulieu et al., "The SIMON and SPECK Families of Lightweight Block
 * Ciphers", 2013; the 64-bit block, 128-bit key variant, 27 rounds) under
 * the tree's 128-bit key k, drawn from getrandom(2) at create. So ids
 * decipher to (gen, slot) only with the key: a value that is not a held
 * lease -- guessed, changed from a held one, made from several held ones,
 * or from another tree -- deciphers to an unrelated (gen, slot), which is
 * live with probability about (live leases) / 2^64, and holding leases
 * does not reveal the key short of breaking the cipher. A released lease
 * is refused until its slot has been released 2^40 - 1 more times (its
 * generation wraps). Without a random source (getrandom fails: old kernel,
 * sandbox) the key is derived from addresses and a counter, like the old
 * XOR key: ids of other trees and honest mistakes are still refused, but a
 * caller that holds a lease may work the key out; leases then guard
 * against mistakes, not against an adversary sharing the tree.
 *
 * The table grows by doubling through the tree allocator (so OOM injection
 * reaches it) before lock changes anything: RKV_ERR_NOMEM leaves the tree
 * as it was. It never shrinks: slots keep their generations across reset,
 * so leases released before a reset stay refused after it.
 */
#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>

#include "alloc/pool_internal.h"
#include "common/status.h"
#include "radix/tree_core.h"
#include "radix/tree_lease.h"
#include "radix/tree_lru.h"

#define RKV_LEASE_SLOT_MASK ((uint64_t)RKV_LEASE_MAX_SLOTS - 1)
#define RKV_LEASE_GEN_MAX ((UINT64_C(1) << RKV_LEASE_GEN_BITS) - 1)
#define RKV_LEASE_FIRST_CAP 8u

/* ---- the id cipher: Speck64/128 -------------------------------------------- */

static uint32_t rkv_ror32(uint32_t x, unsigned r)
{
    return (x >> r) | (x << (32 - r));
}

static uint32_t rkv_rol32(uint32_t x, unsigned r)
{
    return (x << r) | (x >> (32 - r));
}

/* Round keys from the key words (l2, l1, l0, k0) = key[3], key[2],
 * key[1], key[0]. */
static void rkv_speck_schedule(uint32_t rk[RKV_LEASE_ROUNDS],
                               const uint32_t key[4])
{
    uint32_t l[RKV_LEASE_ROUNDS + 2];
    l[0] = key[1];
    l[1] = key[2];
    l[2] = key[3];
    rk[0] = key[0];
    for (uint32_t i = 0; i + 1 < RKV_LEASE_ROUNDS; i++) {
        l[i + 3] = (rk[i] + rkv_ror32(l[i], 8)) ^ i;
        rk[i + 1] = rkv_rol32(rk[i], 3) ^ l[i + 3];
    }
}

/* Enciphers the block (x, y) = (high, low word of v). */
static uint64_t rkv_speck_enc(const uint32_t rk[RKV_LEASE_ROUNDS], uint64_t v)
{
    uint32_t x = (uint32_t)(v >> 32), y = (uint32_t)v;
    for (int i = 0; i < RKV_LEASE_ROUNDS; i++) {
        x = (rkv_ror32(x, 8) + y) ^ rk[i];
        y = rkv_rol32(y, 3) ^ x;
    }
    return (uint64_t)x << 32 | y;
}

static uint64_t rkv_speck_dec(const uint32_t rk[RKV_LEASE_ROUNDS], uint64_t v)
{
    uint32_t x = (uint32_t)(v >> 32), y = (uint32_t)v;
    for (int i = RKV_LEASE_ROUNDS - 1; i >= 0; i--) {
        y = rkv_ror32(y ^ x, 3);
        x = rkv_rol32((x ^ rk[i]) - y, 8);
    }
    return (uint64_t)x << 32 | y;
}

/* The cipher against its published test vector (the paper's appendix):
 * key 1b1a1918 13121110 0b0a0908 03020100, plaintext 3b726574 7475432d,
 * ciphertext 8c6fa548 454e028b. For tests. */
int rkv_lease_cipher_selftest(void)
{
    static const uint32_t key[4] = {0x03020100u, 0x0b0a0908u, 0x13121110u,
                                    0x1b1a1918u};
    uint32_t rk[RKV_LEASE_ROUNDS];
    rkv_speck_schedule(rk, key);
    uint64_t p = UINT64_C(0x3b7265747475432d), c = UINT64_C(0x8c6fa548454e028b);
    return rkv_speck_enc(rk, p) == c && rkv_speck_dec(rk, c) == p;
}

static uint64_t rkv_mix64(uint64_t z)
{
    z += UINT64_C(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* n bytes from the OS (getrandom, no blocking: a tree made before the
 * kernel's pool is ready falls back). 1 if they came. */
static int rkv_os_random(void *buf, size_t n)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t got = getrandom(p, n, GRND_NONBLOCK);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return 0;
        p += got;
        n -= (size_t)got;
    }
    return 1;
}

void rkv_lease_init(rkv_tree *t)
{
    uint32_t key[4];
    t->lease_key_random = rkv_os_random(key, sizeof key);
    if (!t->lease_key_random) {
        /* distinct for trees alive at the same time (distinct addresses)
         * and for successive trees of one pool (trees_made) */
        uint64_t a = rkv_mix64((uint64_t)(uintptr_t)t) ^
                     rkv_mix64((uint64_t)(uintptr_t)t->pool ^
                               rkv_mix64(t->pool->trees_made));
        uint64_t b = rkv_mix64(a);
        key[0] = (uint32_t)a;
        key[1] = (uint32_t)(a >> 32);
        key[2] = (uint32_t)b;
        key[3] = (uint32_t)(b >> 32);
    }
    rkv_speck_schedule(t->lease_rk, key);
    t->lease_zero = rkv_speck_dec(t->lease_rk, 0);
    memset(key, 0, sizeof key);
    t->leases = NULL;
    t->leases_cap = t->leases_used = 0;
    t->lease_free_head = t->lease_free_tail = RKV_NIL;
}

void rkv_lease_fini(rkv_tree *t)
{
    rkv_node_mem_free(&t->mem, t->leases,
                      (size_t)t->leases_cap * sizeof *t->leases);
    t->leases = NULL;
    t->leases_cap = 0;
}

static uint64_t rkv_lease_raw(uint64_t gen, uint32_t slot)
{
    return (gen << RKV_LEASE_SLOT_BITS) | slot;
}

uint32_t rkv_lease_find(const rkv_tree *t, uint64_t id)
{
    if (id == 0)
        return RKV_NIL;
    uint64_t raw = rkv_speck_dec(t->lease_rk, id);
    uint32_t slot = (uint32_t)(raw & RKV_LEASE_SLOT_MASK);
    if (slot >= t->leases_used)
        return RKV_NIL;
    const rkv_lease_slot *e = &t->leases[slot];
    if (e->node == 0 || e->gen != raw >> RKV_LEASE_SLOT_BITS)
        return RKV_NIL;
    return slot;
}

rkv_status rkv_lease_reserve(rkv_tree *t, const char *fn)
{
    if (t->lease_free_head != RKV_NIL || t->leases_used < t->leases_cap)
        return RKV_OK;
    if (t->leases_cap >= RKV_LEASE_MAX_SLOTS)
        return rkv_set_error(RKV_ERR_STATE, "%s: %u leases are held (the limit)",
                             fn, RKV_LEASE_MAX_SLOTS);
    uint32_t cap = t->leases_cap ? t->leases_cap * 2 : RKV_LEASE_FIRST_CAP;
    rkv_lease_slot *fresh = rkv_node_mem_alloc(&t->mem, (size_t)cap * sizeof *fresh);
    if (fresh == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory for the lease "
                             "table (%u slots)", fn, cap);
    if (t->leases_used > 0)
        memcpy(fresh, t->leases, (size_t)t->leases_used * sizeof *fresh);
    rkv_lease_fini(t);
    t->leases = fresh;
    t->leases_cap = cap;
    return RKV_OK;
}

/* Takes a reserved slot for node; returns the lease id. */
static uint64_t rkv_lease_take(rkv_tree *t, uint32_t node)
{
    uint32_t slot = t->lease_free_head;
    rkv_lease_slot *e;
    if (slot != RKV_NIL) {
        e = &t->leases[slot];
        t->lease_free_head = e->next;
        if (t->lease_free_head == RKV_NIL)
            t->lease_free_tail = RKV_NIL;
    } else {
        slot = t->leases_used++;
        e = &t->leases[slot];
        e->gen = 1;
    }
    if (rkv_lease_raw(e->gen, slot) == t->lease_zero) /* id would be 0 */
        e->gen = e->gen == RKV_LEASE_GEN_MAX ? 1 : e->gen + 1;
    e->node = node;
    e->next = RKV_NIL;
    return rkv_speck_enc(t->lease_rk, rkv_lease_raw(e->gen, slot));
}

void rkv_lease_release(rkv_tree *t, uint32_t slot)
{
    rkv_lease_slot *e = &t->leases[slot];
    e->node = 0;
    e->gen = e->gen == RKV_LEASE_GEN_MAX ? 1 : e->gen + 1;
    e->next = RKV_NIL;
    if (t->lease_free_tail != RKV_NIL)
        t->leases[t->lease_free_tail].next = slot;
    else
        t->lease_free_head = slot;
    t->lease_free_tail = slot;
}

/* ---- lock / unlock -------------------------------------------------------- */

rkv_status rkv_tree_lock(rkv_tree *tree, rkv_node node, rkv_lease *out)
{
    static const char fn[] = "rkv_tree_lock";
    if (out != NULL)
        out->id = 0;
    if (tree == NULL || out == NULL)
        return rkv_null_arg(fn, tree, "tree", "out");
    if (!rkv_tree_handle_ok(tree, node))
        return rkv_tree_stale(node, fn);
    rkv_tree *t = tree;
    rkv_status st = rkv_lease_reserve(t, fn);
    if (st != RKV_OK)
        return st;
    /* the node itself first, then every ancestor up to its namespace root */
    for (uint32_t y = node.id; y != 0; y = t->nodes[y].parent) {
        rkv_tnode *x = &t->nodes[y];
        if (x->lock_count == 0) {
            if (rkv_tree_in_lru(x))
                rkv_lru_unlink(t, y);
            t->evictable_blocks -= x->num_pages;
            t->locked_blocks += x->num_pages;
        }
        t->retain.yield_blocks -= rkv_yield_pages(t, y);
        x->lock_count++;
        t->retain.yield_blocks += rkv_yield_pages(t, y);
    }
    out->id = rkv_lease_take(t, node.id);
    t->lock_total++;
    return RKV_OK;
}

void rkv_lease_unlock_slot(rkv_tree *t, uint32_t slot, int stamp)
{
    uint32_t id = t->leases[slot].node, root = id;
    uint64_t c = stamp ? ++t->clock : 0;
    for (uint32_t y = id; y != 0; y = t->nodes[y].parent) {
        rkv_tnode *z = &t->nodes[y];
        root = y;
        if (stamp)
            z->last_access = c;
        t->retain.yield_blocks -= rkv_yield_pages(t, y);
        --z->lock_count;
        t->retain.yield_blocks += rkv_yield_pages(t, y);
        if (z->lock_count == 0) {
            t->evictable_blocks += z->num_pages;
            t->locked_blocks -= z->num_pages;
            if (rkv_tree_in_lru(z)) {
                if (stamp)
                    rkv_lru_push_tail(t, y); /* newest: in use until now */
                else
                    rkv_lru_place(t, y);
            }
        }
    }
    rkv_lease_release(t, slot);
    t->lock_total--;
    /* a namespace root emptied while it was locked (or locked while empty:
     * a request that computed no full page) would otherwise stay until
     * reset */
    if (t->nodes[root].lock_count == 0 && t->nodes[root].first_child == RKV_NIL &&
        !rkv_tree_has_lower_child(t, root))
        rkv_tree_free_root(t, root);
}

rkv_status rkv_tree_unlock(rkv_tree *tree, rkv_lease *lease)
{
    static const char fn[] = "rkv_tree_unlock";
    if (tree == NULL || lease == NULL)
        return rkv_null_arg(fn, tree, "tree", "lease");
    rkv_tree *t = tree;
    uint32_t slot = rkv_lease_find(t, lease->id);
    if (slot == RKV_NIL)
        return rkv_set_error(RKV_ERR_STATE,
                             "%s: lease %#llx is not held in this tree (zero, "
                             "already released, forged or from another tree)",
                             fn, (unsigned long long)lease->id);
    if (RKV_UNLIKELY(t->tiers.tn != NULL) &&
        (t->tiers.tn[t->leases[slot].node].flags & RKV_TN_LOADING))
        return rkv_set_error(RKV_ERR_BUSY, "%s: the lease's load has not "
                             "completed (rkv_tree_tier_poll first)", fn);
    rkv_lease_unlock_slot(t, slot, 1);
    lease->id = 0;
    return RKV_OK;
}

rkv_status rkv_tree_lease_node(const rkv_tree *tree, const rkv_lease *lease,
                               rkv_node *out)
{
    if (tree == NULL || lease == NULL || out == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_tree_lease_node: NULL");
    uint32_t slot = rkv_lease_find(tree, lease->id);
    if (slot == RKV_NIL)
        return rkv_set_error(RKV_ERR_STATE, "rkv_tree_lease_node: lease %#llx "
                             "is not held", (unsigned long long)lease->id);
    out->id = tree->leases[slot].node;
    out->gen = tree->nodes[out->id].gen;
    return RKV_OK;
}

/* ---- check ------------------------------------------------------------------ */

#define CORRUPT(...) rkv_set_error(RKV_ERR_CORRUPT, "rkv_tree_check: " __VA_ARGS__)

rkv_status rkv_lease_check(const rkv_tree *t, uint32_t *own)
{
    if (rkv_speck_enc(t->lease_rk, t->lease_zero) != 0)
        return CORRUPT("lease cipher: the id-0 block is not lease_zero");
    if (t->leases_used > t->leases_cap || t->leases_cap > RKV_LEASE_MAX_SLOTS ||
        (t->leases_cap > 0) != (t->leases != NULL))
        return CORRUPT("lease table: %u slots used of %u", t->leases_used,
                       t->leases_cap);
    uint64_t live = 0, nfree = 0;
    for (uint32_t s = 0; s < t->leases_used; s++) {
        const rkv_lease_slot *e = &t->leases[s];
        if (e->gen == 0 || e->gen > RKV_LEASE_GEN_MAX)
            return CORRUPT("lease slot %u has generation %llu", s,
                           (unsigned long long)e->gen);
        if (e->node == 0) {
            nfree++;
            continue;
        }
        if (e->node >= t->nodes_used || t->nodes[e->node].parent == RKV_NIL ||
            t->nodes[e->node].lock_count == 0)
            return CORRUPT("lease slot %u names node %u, which is not a locked "
                           "node", s, e->node);
        if (rkv_lease_raw(e->gen, s) == t->lease_zero)
            return CORRUPT("lease slot %u would hand out id 0", s);
        own[e->node]++;
        live++;
    }
    uint64_t listed = 0;
    uint32_t last = RKV_NIL;
    for (uint32_t s = t->lease_free_head; s != RKV_NIL; s = t->leases[s].next) {
        if (s >= t->leases_used || t->leases[s].node != 0)
            return CORRUPT("lease free list holds slot %u, which is not free", s);
        if (++listed > nfree)
            return CORRUPT("lease free list is longer than the %llu free slots",
                           (unsigned long long)nfree);
        last = s;
    }
    if (listed != nfree || last != t->lease_free_tail)
        return CORRUPT("lease free list: %llu slots listed, %llu free, tail %u "
                       "(list ends at %u)", (unsigned long long)listed,
                       (unsigned long long)nfree, t->lease_free_tail, last);
    if (live != t->lock_total)
        return CORRUPT("%llu leases live, %llu locks counted",
                       (unsigned long long)live,
                       (unsigned long long)t->lock_total);
    return RKV_OK;
}
