/*
 * router/index.c -- the router's block table: open addressing over the
 * entries themselves, keyed by (namespace, chained hash, slot group) (layout
 * and invariants: router/router_internal.h).
 * Growth happens only in rkv_index_reserve, before any change, so a caller
 * that reserved can add without failing, up to the memory budget
 * (r->limit entries, rkv_index_full): the table never grows past what the
 * budget allows, and callers refuse an add once it is reached.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/status.h"
#include "router/router_internal.h"

/* A zeroed table of cap entries, 64-byte aligned (an entry never spans
 * two cache lines). A large table is looked up at random (one access per
 * page of every query and every event hash): on 4 KiB pages nearly every
 * lookup also misses the TLB, and the page walks, not the cache misses,
 * bound how many lookups are in flight at once. So a table of 2 MiB and
 * more is its own mapping, 2 MiB-aligned, asking for transparent huge
 * pages before its first touch (a hint: the kernel may ignore it). From
 * malloc it would often reuse memory already faulted in 4 KiB pages. */
#define RKV_INDEX_HUGE ((size_t)2 << 20)

static size_t rkv_index_map_bytes(size_t cap)
{
    size_t bytes = cap * sizeof(rkv_index_entry);
    return (bytes + RKV_INDEX_HUGE - 1) & ~(RKV_INDEX_HUGE - 1);
}

static rkv_index_entry *rkv_index_table_alloc(size_t cap)
{
    size_t bytes = cap * sizeof(rkv_index_entry);
    if (bytes < RKV_INDEX_HUGE) {
        void *p = NULL;
        if (posix_memalign(&p, 64, bytes) != 0)
            return NULL;
        memset(p, 0, bytes);
        return p;
    }
    size_t len = rkv_index_map_bytes(cap);
    /* map one huge page more, then trim to an aligned start */
    char *m = mmap(NULL, len + RKV_INDEX_HUGE, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    uintptr_t a = ((uintptr_t)m + RKV_INDEX_HUGE - 1) & ~(uintptr_t)(RKV_INDEX_HUGE - 1);
    char *p = (char *)a;
    if (p > m)
        (void)munmap(m, (size_t)(p - m));
    if (p + len < m + len + RKV_INDEX_HUGE)
        (void)munmap(p + len, (size_t)(m + len + RKV_INDEX_HUGE - (p + len)));
#ifdef MADV_HUGEPAGE
    (void)madvise(p, len, MADV_HUGEPAGE);
#endif
    /* anonymous memory reads as zero; touching it now keeps the page
     * faults out of the event path */
    memset(p, 0, len);
    return (rkv_index_entry *)p;
}

static void rkv_index_table_free(rkv_index_entry *t, size_t cap)
{
    if (t == NULL)
        return;
    if (cap * sizeof(rkv_index_entry) < RKV_INDEX_HUGE)
        free(t);
    else
        (void)munmap(t, rkv_index_map_bytes(cap));
}

/* The largest table max_table_bytes allows (a multiple of 4 entries),
 * 2^31 without one. */
static uint64_t rkv_index_cap_most(const rkv_router_config *cfg)
{
    if (cfg->max_table_bytes == 0)
        return 1ull << 31;
    uint64_t cap = cfg->max_table_bytes / sizeof(rkv_index_entry) & ~(uint64_t)3;
    return cap < (1ull << 31) ? cap : 1ull << 31;
}

/* Past this size a power of two wastes up to half the table for a few
 * cycles a probe: 2 GiB for a 1,024 x 1M-token fleet where 1.9 GB holds
 * it. Tables this large are sized exactly (below) even without a budget;
 * smaller ones keep the shift, where the multiply and the fuller table
 * cost 8-10 % of a query (bench/RESULTS.md). */
#define RKV_INDEX_POW2_MAX_BYTES ((uint64_t)1 << 30)

/* A table for n entries: a power of two at most half full (a shift finds
 * the home), or, where that power of two is past the bytes budget or
 * RKV_INDEX_POW2_MAX_BYTES, the smallest multiple of 4 entries at most
 * 17/32 full (a multiply). */
static uint64_t rkv_index_cap_for(const rkv_router_config *cfg, uint64_t n)
{
    uint64_t cap = 64;
    while (cap / 2 < n)
        cap *= 2;
    if (cap <= rkv_index_cap_most(cfg) &&
        cap * sizeof(rkv_index_entry) <= RKV_INDEX_POW2_MAX_BYTES)
        return cap;
    cap = (n * 32 / 17 + 3) & ~(uint64_t)3;
    while (rkv_index_load_max(cap) < n || (cap & (cap - 1)) == 0)
        cap += 4;
    return cap;
}

/* The budget (config max_entries / max_table_bytes) as an entry count:
 * what the largest table max_table_bytes allows may hold. */
static uint32_t rkv_index_budget(const rkv_router_config *cfg)
{
    uint64_t limit = 1u << 29;
    if (cfg->max_entries && cfg->max_entries < limit)
        limit = cfg->max_entries;
    uint64_t most = rkv_index_load_max(rkv_index_cap_most(cfg));
    return (uint32_t)(most < limit ? most : limit);
}

static void rkv_index_set_cap(rkv_router *r, uint64_t cap)
{
    r->table_cap = (uint32_t)cap;
    r->shift = (cap & (cap - 1)) == 0 ? 64 - (uint32_t)__builtin_ctzll(cap) : 0;
}

rkv_status rkv_index_index_init(rkv_router *r, uint32_t initial)
{
    r->limit = rkv_index_budget(&r->cfg);
    if (initial > r->limit)
        initial = r->limit;
    uint64_t cap = rkv_index_cap_for(&r->cfg, initial);
    r->entries = rkv_index_table_alloc((size_t)cap);
    if (r->entries == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_router_create: index table");
    rkv_index_set_cap(r, cap);
    r->count = 0;
    return RKV_OK;
}

void rkv_index_index_fini(rkv_router *r)
{
    rkv_index_table_free(r->entries, r->table_cap);
    r->entries = NULL;
}

static uint32_t rkv_index_free_slot(const rkv_router *r, uint64_t key)
{
    uint32_t i = rkv_index_home(r, key);
    while (r->entries[i].mask != 0)
        i = rkv_index_succ(r, i);
    return i;
}

rkv_status rkv_index_reserve(rkv_router *r, uint32_t more)
{
    uint64_t need = (uint64_t)r->count + more;
    if (need > r->limit) /* the adds past it are refused one by one */
        need = r->limit;
    if (need <= rkv_index_load_max(r->table_cap))
        return RKV_OK;
    /* doubling keeps the rehashes amortized; an exactly sized table
     * grows by half at least instead (up to the budget), which amortizes
     * them as well without doubling a table already past a gigabyte */
    uint64_t cap = rkv_index_cap_for(&r->cfg, need > r->table_cap ? need : r->table_cap);
    if ((cap & (cap - 1)) != 0) {
        uint64_t grown = (uint64_t)rkv_index_load_max(r->table_cap) * 3 / 2;
        uint64_t n = need > grown ? need : grown;
        cap = rkv_index_cap_for(&r->cfg, n < r->limit ? n : r->limit);
    }
    rkv_index_entry *t = rkv_index_table_alloc((size_t)cap);
    if (t == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_router: index table");
    rkv_index_entry *old = r->entries;
    uint32_t old_cap = r->table_cap;
    r->entries = t;
    rkv_index_set_cap(r, cap);
    for (uint32_t i = 0; i < old_cap; i++)
        if (old[i].mask != 0)
            t[rkv_index_free_slot(r, old[i].key)] = old[i];
    rkv_index_table_free(old, old_cap);
    return RKV_OK;
}

uint32_t rkv_index_add(rkv_router *r, uint64_t key)
{
    uint32_t i = rkv_index_free_slot(r, key);
    rkv_index_add_at(r, i, key);
    return i;
}

void rkv_index_remove(rkv_router *r, uint32_t i)
{
    rkv_index_entry *t = r->entries;
    uint32_t cap = r->table_cap;
    if (rkv_index_medium(&t[i]) != RKV_MEDIUM_DEVICE)
        r->offdev[rkv_index_group(&t[i])]--;
    /* d: how far j is past i (the hole) */
    for (uint32_t j = i, d = 0;;) {
        if (++j == cap)
            j = 0;
        d++;
        if (t[j].mask == 0)
            break;
        uint32_t k = rkv_index_home(r, t[j].key);
        /* t[j] may move to i iff its home k is not cyclically in (i, j]:
         * iff k is at least d slots before j (k == i moves) */
        uint32_t dk = j - k + (j < k ? cap : 0);
        if (dk >= d) {
            t[i] = t[j];
            i = j;
            d = 0;
        }
    }
    memset(&t[i], 0, sizeof t[i]);
    r->count--;
}
