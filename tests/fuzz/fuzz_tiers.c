/*
 * tests/fuzz/fuzz_tiers.c -- libFuzzer harness: random sequences of tier
 * and retention calls over one pool, its tree and the lower tiers below it
 * (a host store, a host over a disk, or a disk alone), decoded from the
 * input, as an embedding server would make them: inserts of its own
 * blocks, matches (rkv_tree_match_tiers), loads and polls, swap-outs
 * (rkv_tree_store_prefix), allocation pressure and evictions, priorities
 * and TTL pins of a few sessions (rkv_tree_retain), session release and
 * extend, time that only moves forward, locks, resets, and the tiers
 * detached or attached again with another write policy.
 *
 * Fault injection is one of the operations: a store's I/O or copy fails
 * (rkv_store_fail_after), the tree's node memory runs out
 * (radix/tree_debug.h), and -- with real KV bytes and a disk -- the disk
 * file is overwritten behind the store's back, so failure paths run too.
 *
 * Input: 5 bytes of configuration (page size, real KV bytes or metadata
 * only, evict policy, pool size, tier layout and capacities, write policy,
 * store queue, drop_pinned, pin cap), then operations of one opcode byte
 * plus the bytes it reads (reading past the end gives zeros, so every
 * input is a valid program). One tree in two keeps 3-byte ids
 * (rkv_tree_config.token_bytes = 3; a bit of the evict policy's byte that
 * the policy does not read), and its keys are ids near 2^24 that differ
 * in one of their three bytes: every path of the tiers reads its ids
 * through the layout. The disk store's file is made with mkstemp
 * under $TMPDIR (or /tmp) and unlinked once the store has it open.
 *
 * The harness is an honest caller: it inserts only blocks it holds,
 * unrefs only references it holds, releases only leases it took, never
 * moves time backwards except to see it refused. What must hold:
 *   - no call returns RKV_ERR_CORRUPT, and no poll reports it, except a
 *     load's ticket after the disk file was corrupted; rkv_pool_check,
 *     rkv_tree_check and rkv_store_check of each store pass after every
 *     call;
 *   - with real KV bytes, every page that matches on the device holds its
 *     own KV (a tag of its prefix written at insert): whatever went down a
 *     tier and came back came back with its bytes;
 *   - what an insert says it cached matches on the device right after;
 *     matched blocks are allocated; a match's lower part follows its device
 *     part within the key (matched + lower <= n, lower = host + disk);
 *   - a load's blocks are allocated; its lease cannot be released before
 *     its ticket is reported (RKV_ERR_BUSY) and releases once after; poll
 *     reports only tickets the harness was given, each once; a load
 *     reported done matches on the device up to the prefix it promised,
 *     in the blocks it named; a failed load reports no pages, a swap-out
 *     at most the pages it queued (all of them when it succeeded);
 *   - a pin the harness made keeps its pages in the tree (device prefix
 *     then lower tiers) until its deadline, its session's release, a
 *     reset, or a revocation anywhere (pins_revoked moves);
 *   - once time passes every deadline (TTLs are at most 64 ms), and after
 *     every session is released or the tree reset, no pin is left: none
 *     lowered, no pinned page on any medium, nothing yieldable;
 *   - moving time backwards is RKV_ERR_INVALID_ARG;
 *   - a lease the harness took releases exactly once (and is zeroed);
 *     a successful reset, detach or attach happens only with no lease
 *     held, and leaves both stores empty;
 *   - after the harness drops what it holds and releases every session,
 *     rkv_tree_reset succeeds, every block of the pool is free and both
 *     stores are empty; after destroy too.
 * Any violation aborts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "radix/tree_debug.h"
#include "radixkv.h"
#include "tests/fuzz/fuzz_die.h"
#include "tests/fuzz/fuzz_input.h"
#include "tier/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_HELD 32u    /* block references the harness holds          */
#define MAX_NODES 16u   /* node handles it remembers                   */
#define MAX_LOCKS 16u   /* leases it holds (locks and loads)           */
#define MAX_TICKETS 32u /* swap-out tickets awaiting their report      */
#define MAX_OWNERS 4u   /* sessions 1..MAX_OWNERS                      */
#define MAX_TOKENS 32u  /* key length                                  */
#define MAX_OPS 300u

typedef struct lease_rec {
    rkv_lease lease;
    uint64_t ticket; /* a load's ticket not reported yet, else 0 */
    /* a load: its key, the device prefix it promises, its blocks */
    uint64_t ns;
    uint32_t n, num_pages;
    size_t device_tokens;
    int32_t key[MAX_TOKENS];
    rkv_block_id blocks[MAX_TOKENS];
} lease_rec;

/* A pin the harness made and believes alive: until its deadline, its
 * session's release, a reset, or any revocation (pins_revoked moves),
 * its pages stay in the tree. */
typedef struct pin_rec {
    uint64_t owner, ns, deadline, revoked; /* revoked: pins_revoked then */
    uint32_t n, tokens;                     /* key length, pinned tokens */
    int32_t key[MAX_TOKENS];
} pin_rec;
#define MAX_PINS 8u

typedef struct world {
    rkv_pool *pool;
    rkv_tree *tree;
    rkv_store *host, *disk;
    int disk_fd;           /* the disk file (unlinked), or -1            */
    int corrupted;         /* the disk file was overwritten              */
    uint32_t P, nblocks;
    uint64_t now;
    rkv_block_id held[MAX_HELD];
    uint32_t nheld;
    rkv_node nodes[MAX_NODES];
    uint32_t nnodes;
    lease_rec locks[MAX_LOCKS];
    uint32_t nlocks;
    uint64_t swaps[MAX_TICKETS]; /* swap-out tickets not reported yet */
    uint32_t swap_pages[MAX_TICKETS]; /* and the pages each queued     */
    uint32_t nswaps;
    pin_rec pins[MAX_PINS];
    uint32_t npins;
    int attached;          /* the tiers are attached (op_tiers detaches) */
    uint8_t *kv_k, *kv_v;  /* real KV bytes: layer 0's K and V, or NULL  */
    size_t half;           /* bytes of one block in K (and in V)         */
    uint32_t op;           /* for messages                              */
} world;

#define die(w, ...) fuzz_die("fuzz_tiers", &(w)->op, __VA_ARGS__)

static void check_all(const world *w, const char *what)
{
    if (rkv_pool_check(w->pool) != RKV_OK)
        die(w, "%s: rkv_pool_check", what);
    if (rkv_tree_check(w->tree) != RKV_OK)
        die(w, "%s: rkv_tree_check", what);
    if (w->host != NULL && rkv_store_check(w->host) != RKV_OK)
        die(w, "%s: rkv_store_check(host)", what);
    if (w->disk != NULL && rkv_store_check(w->disk) != RKV_OK)
        die(w, "%s: rkv_store_check(disk)", what);
}

#include "tests/fuzz/fuzz_world.h"

/* This input's tree keeps 3-byte ids (its keys' letters near 2^24). */
static int g_tok3;

/* Letter v (< 3) as an id: v, or near 2^24 on a 3-byte tree (the second
 * and third differ from the first in its top and its middle byte). */
static int32_t letter_id(uint32_t v)
{
    static const int32_t ids3[3] = {0xffffff, 0x7fffff, 0xff7fff};
    return g_tok3 ? ids3[v] : (int32_t)v;
}

/* Keys from a tiny alphabet over a few namespaces, so they share prefixes;
 * n >= min. */
static uint32_t get_key(in *s, int32_t *t, uint32_t min, uint64_t *ns)
{
    uint8_t c = get8(s);
    *ns = c % 2;
    uint32_t n = min + below(s, MAX_TOKENS - min + 1);
    uint8_t alpha = (uint8_t)(c >> 1) % 3 + 1;
    for (uint32_t i = 0; i < n; i++)
        t[i] = letter_id(get8(s) % alpha);
    return n;
}

/* With real KV bytes every cached page carries a tag of its prefix
 * (namespace and tokens up to its end) in its K and V bytes: written at
 * insert, checked wherever a page matches on the device, so a page that
 * went down a tier and came back must come back with its own bytes. */
static uint8_t tag_byte(uint64_t ns, const int32_t *t, uint32_t end,
                        size_t j)
{
    uint64_t h = 1469598103934665603ull ^ ns;
    for (uint32_t i = 0; i < end; i++)
        h = (h ^ (uint32_t)t[i]) * 1099511628211ull;
    return (uint8_t)(h >> (8 * (j % 8))) ^ (uint8_t)j;
}

static void tag_write(const world *w, rkv_block_id b, uint64_t ns,
                      const int32_t *t, uint32_t page)
{
    if (w->kv_k == NULL)
        return;
    for (size_t j = 0; j < w->half; j++) {
        uint8_t x = tag_byte(ns, t, (page + 1) * w->P, j);
        w->kv_k[(size_t)b * w->half + j] = x;
        w->kv_v[(size_t)b * w->half + j] = (uint8_t)~x;
    }
}

static void tag_check(const world *w, const rkv_block_id *b, uint32_t from,
                      uint32_t to, uint64_t ns, const int32_t *t,
                      const char *what)
{
    if (w->kv_k == NULL)
        return;
    for (uint32_t i = from; i < to; i++)
        for (size_t j = 0; j < w->half; j++) {
            uint8_t x = tag_byte(ns, t, (i + 1) * w->P, j);
            uint8_t nx = (uint8_t)~x;
            if (w->kv_k[(size_t)b[i] * w->half + j] != x ||
                w->kv_v[(size_t)b[i] * w->half + j] != nx)
                die(w, "%s: page %u in block %u holds another page's KV",
                    what, i, b[i]);
        }
}

static void check_no_pins(const world *w, const char *when);

static lease_rec *take_lease(world *w, rkv_lease l, uint64_t ticket)
{
    if (w->nlocks >= MAX_LOCKS)
        die(w, "harness: too many leases");
    lease_rec *r = &w->locks[w->nlocks++];
    memset(r, 0, sizeof *r);
    r->lease = l;
    r->ticket = ticket;
    return r;
}

/* A load reported done: its pages match on the device now, under the
 * blocks it named (its lease keeps them there). */
static void check_loaded(const world *w, const lease_rec *r)
{
    rkv_block_id b[MAX_TOKENS];
    rkv_match m;
    if (called(w, rkv_tree_match(w->tree, r->ns, r->key, r->n, b,
                                 RKV_MATCH_PEEK, &m), "match after load") !=
        RKV_OK)
        die(w, "a peek match after a load failed");
    if (m.matched_tokens < r->device_tokens)
        die(w, "load promised %zu device tokens, a match finds %zu",
            r->device_tokens, m.matched_tokens);
    uint32_t first = (uint32_t)(r->device_tokens / w->P) - r->num_pages;
    for (uint32_t i = 0; i < r->num_pages; i++)
        if (b[first + i] != r->blocks[i])
            die(w, "loaded page %u is in block %u, the load named %u",
                first + i, b[first + i], r->blocks[i]);
    tag_check(w, b, 0, m.num_blocks, r->ns, r->key, "match after a load");
}

/* ---- operations ------------------------------------------------------------ */

/* Caches a key: fresh blocks for every full page (allocation may evict and
 * demote), insert, then drop the harness's references (the tree keeps its
 * own; duplicates are freed). */
static void op_insert(world *w, in *s)
{
    int32_t t[MAX_TOKENS];
    uint64_t ns;
    uint32_t n = get_key(s, t, 1, &ns);
    uint32_t pages = n / w->P;
    if (pages == 0)
        return;
    rkv_block_id b[MAX_TOKENS], dups[MAX_TOKENS];
    rkv_status st = called(w, rkv_tree_alloc_blocks(w->tree, pages, b),
                           "insert's alloc");
    if (st != RKV_OK)
        return;
    for (uint32_t i = 0; i < pages; i++)
        tag_write(w, b[i], ns, t, i);
    rkv_insert_result res;
    st = called(w, rkv_tree_insert(w->tree, ns, t, n, b, dups, &res),
                "insert");
    if (st == RKV_OK) {
        remember_node(w, res.node);
        if (res.cached_tokens > (size_t)pages * w->P)
            die(w, "insert cached %zu tokens of %u", res.cached_tokens, n);
        /* what it cached is on the device now (under the caller's
         * references still) */
        rkv_block_id mb[MAX_TOKENS];
        rkv_match m;
        if (called(w, rkv_tree_match(w->tree, ns, t, n, mb, RKV_MATCH_PEEK,
                                     &m), "match after insert") != RKV_OK ||
            m.matched_tokens < res.cached_tokens)
            die(w, "insert cached %zu tokens, a match finds %zu on the device",
                res.cached_tokens, m.matched_tokens);
        tag_check(w, mb, 0, m.num_blocks, ns, t, "match after insert");
    }
    for (uint32_t i = 0; i < pages; i++)
        if (rkv_pool_unref(w->pool, b[i]) != RKV_OK)
            die(w, "unref of an inserted block %u", b[i]);
    check_all(w, "insert's unref");
}

static void op_match(world *w, in *s)
{
    int32_t t[MAX_TOKENS];
    rkv_block_id b[MAX_TOKENS];
    uint64_t ns;
    uint32_t n = get_key(s, t, 0, &ns);
    unsigned flags = get8(s) & 1 ? RKV_MATCH_PEEK : 0;
    rkv_match m;
    rkv_tier_match tm;
    rkv_status st = called(w, rkv_tree_match_tiers(w->tree, ns, t, n, b, flags,
                                                   &m, &tm), "match_tiers");
    if (st != RKV_OK)
        return;
    check_allocated(w, b, m.num_blocks, "match_tiers");
    tag_check(w, b, 0, m.num_blocks, ns, t, "match_tiers");
    if (m.matched_tokens != (size_t)m.num_blocks * w->P ||
        m.matched_tokens > n)
        die(w, "match of %zu tokens, %u blocks, key %u", m.matched_tokens,
            m.num_blocks, n);
    if (tm.lower_tokens != tm.host_tokens + tm.disk_tokens ||
        m.matched_tokens + tm.lower_tokens > n ||
        m.matched_tokens + tm.loading_tokens > n)
        die(w, "match_tiers: device %zu, host %zu, disk %zu, lower %zu, "
               "loading %zu of %u", m.matched_tokens, tm.host_tokens,
            tm.disk_tokens, tm.lower_tokens, tm.loading_tokens, n);
    if (tm.lower_tokens > 0 && tm.loading_ticket != 0)
        die(w, "match_tiers: lower pages that are loading");
    remember_node(w, m.node);
}

static void op_load(world *w, in *s)
{
    int32_t t[MAX_TOKENS];
    rkv_block_id b[MAX_TOKENS];
    uint64_t ns;
    uint32_t n = get_key(s, t, 1, &ns);
    uint32_t max_pages = below(s, 10);
    if (w->nlocks >= MAX_LOCKS)
        return;
    rkv_load ld;
    memset(&ld, 0xa5, sizeof ld);
    rkv_status st = called(w, rkv_tree_load(w->tree, ns, t, n, max_pages, b,
                                            &ld), "load");
    if (st != RKV_OK)
        return;
    if (ld.ticket == 0) {
        if (ld.num_pages != 0 || ld.lease.id != 0)
            die(w, "a load of nothing did not zero its result");
        return;
    }
    if (ld.num_pages == 0 || ld.num_pages > max_pages ||
        ld.num_pages > n / w->P || ld.disk_pages > ld.num_pages ||
        ld.lease.id == 0 || ld.device_tokens > n)
        die(w, "load: %u pages (%u from disk) of at most %u, lease %llu",
            ld.num_pages, ld.disk_pages, max_pages,
            (unsigned long long)ld.lease.id);
    check_allocated(w, b, ld.num_pages, "load");
    if (ld.device_tokens < (size_t)ld.num_pages * w->P)
        die(w, "load: device prefix %zu under its %u pages",
            ld.device_tokens, ld.num_pages);
    lease_rec *r = take_lease(w, ld.lease, ld.ticket);
    r->ns = ns;
    r->n = n;
    r->num_pages = ld.num_pages;
    r->device_tokens = ld.device_tokens;
    memcpy(r->key, t, n * sizeof *t);
    memcpy(r->blocks, b, ld.num_pages * sizeof *b);
}

static void op_poll(world *w, in *s)
{
    rkv_transfer_done done[4];
    uint32_t max = below(s, 5), nd = 99;
    rkv_status st = called(w, rkv_tree_tier_poll(w->tree, done, max, &nd),
                           "poll");
    if (st != RKV_OK)
        return;
    if (nd > max)
        die(w, "poll reported %u of at most %u", nd, max);
    for (uint32_t k = 0; k < nd; k++) {
        const rkv_transfer_done *d = &done[k];
        int found = 0;
        if (d->kind == RKV_TRANSFER_LOAD) {
            for (uint32_t i = 0; i < w->nlocks && !found; i++)
                if (w->locks[i].ticket == d->ticket) {
                    w->locks[i].ticket = 0;
                    found = 1;
                    if (d->status == RKV_OK) {
                        if (d->num_pages != w->locks[i].num_pages)
                            die(w, "load of %u pages reported %u",
                                w->locks[i].num_pages, d->num_pages);
                        check_loaded(w, &w->locks[i]);
                    }
                }
            if (d->status == RKV_ERR_CORRUPT && !w->corrupted)
                die(w, "a load failed verification with nothing corrupted");
            if (found && d->status != RKV_OK && d->num_pages != 0)
                die(w, "a failed load reported %u pages", d->num_pages);
        } else if (d->kind == RKV_TRANSFER_SWAP_OUT) {
            /* a swap-out's pages are stored one by one: a failed one
             * reports the pages that did arrive */
            for (uint32_t i = 0; i < w->nswaps && !found; i++)
                if (w->swaps[i] == d->ticket) {
                    if (d->num_pages > w->swap_pages[i] ||
                        (d->status == RKV_OK &&
                         d->num_pages != w->swap_pages[i]))
                        die(w, "swap-out %s: %u of %u pages",
                            rkv_strerror(d->status), d->num_pages,
                            w->swap_pages[i]);
                    w->nswaps--;
                    w->swaps[i] = w->swaps[w->nswaps];
                    w->swap_pages[i] = w->swap_pages[w->nswaps];
                    found = 1;
                }
            if (d->status == RKV_ERR_CORRUPT)
                die(w, "a swap-out reported RKV_ERR_CORRUPT");
        }
        if (!found)
            die(w, "poll reported ticket %llu (kind %d), not outstanding",
                (unsigned long long)d->ticket, d->kind);
    }
}

static void op_store_prefix(world *w, in *s)
{
    int32_t t[MAX_TOKENS];
    rkv_block_id b[MAX_TOKENS];
    uint64_t ns;
    uint32_t n = get_key(s, t, 1, &ns);
    uint64_t ticket = 0;
    uint32_t pages = 0;
    rkv_status st = called(w, rkv_tree_store_prefix(w->tree, ns, t, n, b,
                                                    &ticket, &pages),
                           "store_prefix");
    if (st != RKV_OK)
        return;
    if ((ticket == 0) != (pages == 0) || pages > n / w->P)
        die(w, "store_prefix: ticket %llu, %u pages of key %u",
            (unsigned long long)ticket, pages, n);
    check_allocated(w, b, pages, "store_prefix");
    if (ticket != 0) {
        if (w->nswaps >= MAX_TICKETS)
            die(w, "harness: too many swap-outs outstanding");
        w->swap_pages[w->nswaps] = pages;
        w->swaps[w->nswaps++] = ticket;
    }
}

/* Pressure: hold blocks (evicting / demoting for them) or drop some. */
static void op_alloc(world *w, in *s)
{
    uint8_t c = get8(s);
    if (c & 1) {
        if (w->nheld > 0)
            drop_held(w, below(s, w->nheld));
        return;
    }
    uint32_t n = 1 + (c >> 1) % 4;
    if (w->nheld + n > MAX_HELD)
        return;
    rkv_block_id b[4];
    rkv_status st = (c & 2) ? rkv_tree_alloc_blocks(w->tree, n, b)
                            : rkv_pool_alloc_n(w->pool, n, b);
    st = called(w, st, "alloc");
    if (st == RKV_OK)
        for (uint32_t i = 0; i < n; i++)
            w->held[w->nheld++] = b[i];
}

static void op_evict(world *w, in *s)
{
    uint32_t freed = 0;
    called(w, rkv_tree_evict(w->tree, below(s, 8), &freed), "evict");
}

static uint64_t advance(world *w, in *s)
{
    uint8_t c = get8(s);
    /* mostly small steps, sometimes past every TTL */
    return w->now + (c < 200 ? c % 16 : (uint64_t)(c - 199) * 1000);
}

static void op_retain(world *w, in *s)
{
    int32_t t[MAX_TOKENS];
    uint64_t ns;
    uint32_t n = get_key(s, t, 1, &ns);
    rkv_retention r;
    rkv_retention_init(&r);
    uint8_t c = get8(s);
    if (c & 1)
        r.priority = (int)below(s, RKV_PRIORITY_MAX + 1);
    if ((c & 1) && (c & 4)) /* a priority that reverts (bits 3..5: when) */
        r.priority_duration_ms = 1 + ((c >> 3) & 7) * 4u;
    r.prio_begin = below(s, n + 1);
    r.prio_end = r.prio_begin + below(s, n + 1 - (uint32_t)r.prio_begin);
    uint64_t ttl = 0;
    if (c & 2) {
        r.pin_tokens = 1 + below(s, n);
        ttl = r.ttl_ms = 1 + below(s, 64);
        r.owner = 1 + below(s, MAX_OWNERS);
    }
    /* the same TTL as the namespace's default instead (the table is never
     * full here: keys use few namespaces) */
    if ((c & 2) && (c & 64)) {
        if (called(w, rkv_tree_set_namespace_ttl(w->tree, ns, r.ttl_ms),
                   "set_namespace_ttl") != RKV_OK)
            die(w, "set_namespace_ttl refused");
        r.ttl_ms = 0;
    }
    uint64_t now = advance(w, s);
    rkv_retain_result res;
    rkv_status st = called(w, rkv_tree_retain(w->tree, ns, t, n, &r, now,
                                              &res), "retain");
    w->now = now; /* the time moves even when the rest fails */
    if (st == RKV_OK && res.new_pinned_pages > res.pinned_pages)
        die(w, "retain: %u new of %u pinned pages", res.new_pinned_pages,
            res.pinned_pages);
    if (st == RKV_OK && res.pinned_pages > 0) {
        if ((size_t)res.pinned_pages * w->P > r.pin_tokens)
            die(w, "retain pinned %u pages of %zu tokens", res.pinned_pages,
                r.pin_tokens);
        rkv_retention_stats rs;
        if (rkv_tree_retention_stats(w->tree, &rs) != RKV_OK)
            die(w, "retention_stats refused");
        pin_rec *pr = &w->pins[w->npins < MAX_PINS ? w->npins++
                                                   : w->op % MAX_PINS];
        pr->owner = r.owner;
        pr->ns = ns;
        pr->deadline = now + ttl;
        pr->revoked = rs.pins_revoked;
        pr->n = n;
        pr->tokens = res.pinned_pages * w->P;
        memcpy(pr->key, t, n * sizeof *t);
    }
}

static void op_session(world *w, in *s)
{
    uint8_t c = get8(s);
    uint64_t owner = 1 + (c >> 1) % MAX_OWNERS;
    uint32_t count = 0;
    if (c & 1) {
        if (called(w, rkv_tree_pins_release(w->tree, owner, &count),
                   "pins_release") == RKV_OK)
            for (uint32_t i = 0; i < w->npins; i++)
                if (w->pins[i].owner == owner)
                    w->pins[i].deadline = 0; /* gone */
    } else {
        uint64_t now = advance(w, s);
        uint64_t ttl = 1 + below(s, 64);
        rkv_status st = called(w, rkv_tree_pins_extend(w->tree, owner, ttl,
                                                       now, &count),
                               "pins_extend");
        if (st == RKV_OK) {
            w->now = now;
            for (uint32_t i = 0; i < w->npins; i++)
                if (w->pins[i].owner == owner && w->pins[i].deadline > now &&
                    w->pins[i].deadline < now + ttl)
                    w->pins[i].deadline = now + ttl;
        }
    }
}

static void op_time(world *w, in *s)
{
    uint8_t c = get8(s);
    if (c == 0 && w->now > 0) {
        rkv_status st = called(w, rkv_tree_set_time(w->tree, w->now - 1),
                               "set_time backwards");
        if (st != RKV_ERR_INVALID_ARG)
            die(w, "time moved backwards: %s", rkv_strerror(st));
        return;
    }
    uint64_t before = w->now, now = advance(w, s);
    if (called(w, rkv_tree_set_time(w->tree, now), "set_time") != RKV_OK)
        die(w, "set_time forwards refused");
    w->now = now;
    if (now - before > 64) /* past every deadline: TTLs are at most 64 */
        check_no_pins(w, "every TTL passed");
    uint64_t y;
    called(w, rkv_tree_pins_yieldable(w->tree, &y), "pins_yieldable");
}

static void op_lock(world *w, in *s)
{
    uint8_t c = get8(s);
    if ((c & 1) && w->nlocks > 0) {
        uint32_t i = below(s, w->nlocks);
        rkv_lease copy = w->locks[i].lease;
        rkv_status st = called(w, rkv_tree_unlock(w->tree, &w->locks[i].lease),
                               "unlock");
        if (w->locks[i].ticket != 0) {
            if (st != RKV_ERR_BUSY || w->locks[i].lease.id != copy.id)
                die(w, "unlock of a loading lease: %s", rkv_strerror(st));
            return;
        }
        if (st != RKV_OK)
            die(w, "unlock of a lease the harness holds: %s",
                rkv_strerror(st));
        if (w->locks[i].lease.id != 0)
            die(w, "unlock did not zero the lease");
        w->locks[i] = w->locks[--w->nlocks];
        if (rkv_tree_unlock(w->tree, &copy) != RKV_ERR_STATE)
            die(w, "a lease released twice");
        return;
    }
    rkv_lease l;
    if (lock_some_node(w, s, &l))
        take_lease(w, l, 0);
}

static void op_reset(world *w, in *s)
{
    (void)s;
    rkv_status st = called(w, rkv_tree_reset(w->tree), "reset");
    if (st == RKV_OK && w->nlocks > 0)
        die(w, "reset succeeded with %u leases held", w->nlocks);
    if (st == RKV_OK) {
        w->nnodes = 0;
        w->nswaps = 0; /* reset forgets queued transfers */
        w->npins = 0;
        if ((w->host != NULL && rkv_store_used_blocks(w->host) != 0) ||
            (w->disk != NULL && rkv_store_used_blocks(w->disk) != 0))
            die(w, "stores not empty after a reset");
        check_no_pins(w, "after a reset");
    }
}

/* Faults: a store's k-th next I/O or copy fails; the tree's k-th next
 * node allocation fails; the disk file is overwritten behind the store. */
static void op_fault(world *w, in *s)
{
    uint8_t c = get8(s);
    switch (c % 4) {
    case 0:
        if (w->host != NULL)
            rkv_store_fail_after(w->host, 1 + (c >> 2) % 8);
        break;
    case 1:
        if (w->disk != NULL)
            rkv_store_fail_after(w->disk, 1 + (c >> 2) % 8);
        break;
    case 2:
        rkv_tree_debug_fail_alloc_after(w->tree, (c >> 2) % 8);
        break;
    default:
        if (w->disk_fd >= 0) {
            off_t end = lseek(w->disk_fd, 0, SEEK_END);
            uint8_t junk[64];
            memset(junk, get8(s), sizeof junk);
            off_t off = 4096 + (off_t)below(s, 1u << 16);
            if (end > 4096 && off < end) {
                if (pwrite(w->disk_fd, junk, sizeof junk, off) < 0)
                    die(w, "harness: pwrite");
                w->corrupted = 1;
            }
        }
        break;
    }
}

static void op_stats(world *w, in *s)
{
    (void)s;
    rkv_tier_stats ts;
    rkv_retention_stats rs;
    if (called(w, rkv_tree_tier_stats(w->tree, &ts), "tier_stats") != RKV_OK ||
        called(w, rkv_tree_retention_stats(w->tree, &rs), "retention_stats") !=
            RKV_OK)
        die(w, "stats refused");
    if (w->host != NULL &&
        ts.resident_pages[RKV_MEDIUM_HOST] > rkv_store_used_blocks(w->host))
        die(w, "%llu host pages, %llu host slots used",
            (unsigned long long)ts.resident_pages[RKV_MEDIUM_HOST],
            (unsigned long long)rkv_store_used_blocks(w->host));
    if (rs.now_ms != w->now)
        die(w, "tree time %llu, harness %llu", (unsigned long long)rs.now_ms,
            (unsigned long long)w->now);
    if (rs.pins_lowered > rs.pins)
        die(w, "%llu lowered of %llu pins", (unsigned long long)rs.pins_lowered,
            (unsigned long long)rs.pins);
}

/* No pin left anywhere (every session released, or after a reset). */
static void check_no_pins(const world *w, const char *when)
{
    rkv_retention_stats rs;
    if (rkv_tree_retention_stats(w->tree, &rs) != RKV_OK)
        die(w, "retention_stats refused");
    uint64_t by = rs.pinned_by_medium[0] + rs.pinned_by_medium[1] +
                  rs.pinned_by_medium[2];
    if (rs.pins != 0 || rs.pinned_blocks != 0 || rs.pins_lowered != 0 ||
        by != 0)
        die(w, "%s: %llu pins (%llu lowered), %llu pinned blocks, "
               "%llu pinned pages by medium", when,
            (unsigned long long)rs.pins, (unsigned long long)rs.pins_lowered,
            (unsigned long long)rs.pinned_blocks, (unsigned long long)by);
    uint64_t y = 1;
    if (rkv_tree_pins_yieldable(w->tree, &y) != RKV_OK || y != 0)
        die(w, "%s: %llu yieldable pinned blocks", when,
            (unsigned long long)y);
}

/* Every pin believed alive still has its pages in the tree: on the
 * device, then in lower tiers (a load in flight over them: not checked). */
static void check_pins(const world *w)
{
    rkv_retention_stats rs;
    if (rkv_tree_retention_stats(w->tree, &rs) != RKV_OK)
        die(w, "retention_stats refused");
    for (uint32_t i = 0; i < w->npins; i++) {
        const pin_rec *pr = &w->pins[i];
        if (pr->deadline <= w->now || pr->revoked != rs.pins_revoked)
            continue;
        rkv_block_id b[MAX_TOKENS];
        rkv_match m;
        rkv_tier_match tm;
        if (rkv_tree_match_tiers(w->tree, pr->ns, pr->key, pr->n, b,
                                 RKV_MATCH_PEEK, &m, &tm) != RKV_OK)
            die(w, "peek match_tiers of a pinned key failed");
        if (tm.loading_ticket == 0 &&
            m.matched_tokens + tm.lower_tokens < pr->tokens)
            die(w, "pin of session %llu over %u tokens (deadline %llu, now "
                   "%llu, nothing revoked): %zu on the device, %zu lower",
                (unsigned long long)pr->owner, pr->tokens,
                (unsigned long long)pr->deadline, (unsigned long long)w->now,
                m.matched_tokens, tm.lower_tokens);
    }
}

static void tier_config(const world *w, rkv_tier_config *cfg, uint8_t c3)
{
    rkv_tier_config_init(cfg);
    cfg->host = w->host;
    cfg->disk = w->disk;
    cfg->write_policy = c3 % 3;
    cfg->selective_hits = 1 + (c3 >> 2) % 3;
    if (c3 & 0x40)
        cfg->store_queue = 1 + (c3 >> 4) % 4;
    cfg->drop_pinned = c3 >> 7;
}

/* Detach the tiers or attach them again with another configuration: only
 * an empty tree (nothing cached, no lease) accepts it (else BUSY); after
 * it the stores are empty. */
static void op_tiers(world *w, in *s)
{
    uint8_t c = get8(s);
    rkv_tier_config cfg;
    tier_config(w, &cfg, get8(s));
    int detach = w->attached && (c & 1);
    rkv_status st = called(w, rkv_tree_attach_tiers(w->tree,
                                                    detach ? NULL : &cfg),
                           detach ? "detach_tiers" : "attach_tiers");
    if (st != RKV_OK)
        return;
    if (w->nlocks > 0)
        die(w, "tiers changed with %u leases held", w->nlocks);
    w->attached = !detach;
    w->nswaps = 0; /* (an empty tree has none left to report) */
    if ((w->host != NULL && rkv_store_used_blocks(w->host) != 0) ||
        (w->disk != NULL && rkv_store_used_blocks(w->disk) != 0))
        die(w, "stores not empty after the tiers changed");
}

static rkv_store *make_store(world *w, int medium, uint32_t cap,
                             const char *path)
{
    rkv_store_config sc;
    rkv_store_config_init(&sc, medium);
    sc.capacity_blocks = cap;
    sc.block_bytes = rkv_pool_bytes_per_block(w->pool);
    sc.pinned = 0;
    sc.path = path;
    sc.direct_io = 0;
    sc.io_uring = 0;
    rkv_store *out = NULL;
    if (rkv_store_create(&sc, &out) != RKV_OK)
        die(w, "store setup failed");
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    in s = {data, size};
    world w;
    memset(&w, 0, sizeof w);
    w.disk_fd = -1;
    uint8_t c0 = get8(&s), c1 = get8(&s), c2 = get8(&s), c3 = get8(&s),
            c4 = get8(&s);
    w.P = 1u << (c0 % 3);
    int real_kv = (c0 >> 2) & 1;
    w.nblocks = 4 + c1 % 28;
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = w.nblocks;
    pc.page_size = w.P;
    if (real_kv) {
        pc.num_layers = 1;
        pc.num_kv_heads = 1;
        pc.head_dim = 2;
    }
    rkv_tree_config tc;
    rkv_tree_config_init(&tc);
    tc.use_jemalloc = 0;
    tc.evict_policy = (c0 >> 3) % 3;
    g_tok3 = ((c0 >> 3) / 3) & 1;
    tc.token_bytes = g_tok3 ? 3 : 4;
    tc.max_pinned_pct = (c4 >> 5) * 15 > 100 ? 100 : (c4 >> 5) * 15u;
    if (rkv_pool_create(&pc, &w.pool) != RKV_OK ||
        rkv_tree_create(w.pool, &tc, &w.tree) != RKV_OK)
        die(&w, "setup failed");
    if (real_kv) {
        void *k = NULL, *v = NULL;
        if (rkv_pool_layer_kv(w.pool, 0, &k, &v) != RKV_OK)
            die(&w, "layer_kv");
        w.kv_k = k;
        w.kv_v = v;
        w.half = rkv_pool_bytes_per_block(w.pool) / 2;
    }
    uint32_t layout = c2 % 3; /* 0: host, 1: host over disk, 2: disk */
    if (layout != 2)
        w.host = make_store(&w, RKV_MEDIUM_HOST, 1 + (c2 >> 2) % 16, NULL);
    char path[256] = "";
    if (layout != 0) {
        if (real_kv) {
            const char *dir = getenv("TMPDIR");
            snprintf(path, sizeof path, "%s/rkv-fuzz-tiers-XXXXXX",
                     dir != NULL && dir[0] != '\0' ? dir : "/tmp");
            w.disk_fd = mkstemp(path);
            if (w.disk_fd < 0)
                die(&w, "harness: mkstemp %s", path);
        }
        w.disk = make_store(&w, RKV_MEDIUM_DISK, 1 + c4 % 24,
                            real_kv ? path : NULL);
        if (real_kv)
            (void)unlink(path);
    }
    rkv_tier_config cfg;
    tier_config(&w, &cfg, c3);
    if (rkv_tree_attach_tiers(w.tree, &cfg) != RKV_OK)
        die(&w, "attach_tiers failed");
    w.attached = 1;
    check_all(&w, "setup");
    /* 32 opcode slots, fixed: a new operation takes a free (NULL) slot so
     * the meaning of existing corpus and regression inputs stays put */
    static void (*const ops[32])(world *, in *) = {
        op_insert, op_insert, op_insert, op_match, op_match, op_load,
        op_load, op_poll, op_poll, op_poll, op_store_prefix, op_alloc,
        op_alloc, op_evict, op_retain, op_retain, op_session, op_time,
        op_lock, op_lock, op_reset, op_fault, op_stats, op_insert,
        op_load, op_poll, op_retain, op_match, op_tiers,
    };
    for (w.op = 0; s.n > 0 && w.op < MAX_OPS; w.op++) {
        void (*op)(world *, in *) = ops[get8(&s) % 32];
        if (op == NULL)
            continue;
        op(&w, &s);
        check_pins(&w);
    }
    /* wind down: no more faults, every ticket reported, every lease
     * released, every session ended, every block dropped */
    rkv_tree_debug_fail_alloc_after(w.tree, -1);
    if (w.host != NULL)
        rkv_store_fail_after(w.host, 0);
    if (w.disk != NULL)
        rkv_store_fail_after(w.disk, 0);
    for (uint32_t round = 0; round < 64; round++) {
        int waiting = w.nswaps > 0;
        for (uint32_t i = 0; i < w.nlocks; i++)
            waiting |= w.locks[i].ticket != 0;
        if (!waiting)
            break;
        uint8_t four = 4;
        in all = {&four, 1};
        op_poll(&w, &all);
    }
    for (uint32_t i = 0; i < w.nlocks; i++)
        if (w.locks[i].ticket != 0)
            die(&w, "load ticket %llu never reported",
                (unsigned long long)w.locks[i].ticket);
    if (w.nswaps > 0)
        die(&w, "swap-out ticket %llu never reported",
            (unsigned long long)w.swaps[0]);
    while (w.nlocks > 0) {
        uint8_t unlock[2] = {1, 0};
        in u = {unlock, 2};
        op_lock(&w, &u);
    }
    for (uint64_t owner = 1; owner <= MAX_OWNERS; owner++)
        called(&w, rkv_tree_pins_release(w.tree, owner, NULL), "pins_release");
    check_no_pins(&w, "every session released");
    while (w.nheld > 0)
        drop_held(&w, w.nheld - 1);
    if (called(&w, rkv_tree_reset(w.tree), "final reset") != RKV_OK)
        die(&w, "the final reset failed");
    if (rkv_pool_num_free(w.pool) != w.nblocks)
        die(&w, "%u of %u blocks free after the final reset",
            rkv_pool_num_free(w.pool), w.nblocks);
    if ((w.host != NULL && rkv_store_used_blocks(w.host) != 0) ||
        (w.disk != NULL && rkv_store_used_blocks(w.disk) != 0))
        die(&w, "stores not empty after the final reset: host %llu, disk %llu",
            (unsigned long long)(w.host ? rkv_store_used_blocks(w.host) : 0),
            (unsigned long long)(w.disk ? rkv_store_used_blocks(w.disk) : 0));
    destroy_tree_all_free(&w);
    if ((w.host != NULL && rkv_store_used_blocks(w.host) != 0) ||
        (w.disk != NULL && rkv_store_used_blocks(w.disk) != 0))
        die(&w, "stores not empty after destroy");
    rkv_store_destroy(w.host);
    rkv_store_destroy(w.disk);
    if (w.disk_fd >= 0)
        (void)close(w.disk_fd);
    rkv_pool_destroy(w.pool);
    return 0;
}
