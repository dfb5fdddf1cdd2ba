/*
 * router/index.c -- the router's block table: open addressing over the
 * entries themselves, keyed by (namespace, chained hash, slot group) (layout
 * and invariants: router/router_internal.h).
 * Growth happens only in rkv_index_reserve, before any change, so a caller
 * that reserved can add without failing, up to the memory budget
 * (r->limit entries, rkv_index_full): the table never grows past what the
 * budget allows, and callers refuse an add once it is reached.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/status.h"
#include "router/router_internal.h"

/* A zeroed table of cap entries, 64-byte aligned. A large table is looked up at random
 * (one access per page of every query and every event hash): on 4 KiB
 * pages nearly every lookup also misses the TLB, so a table of 2 MiB and
 * more is 2 MiB-aligned and asks for transparent huge pages (a hint; the
 * kernel may ignore it). */
static rkv_index_entry *rkv_index_table_alloc(size_t cap)
{
    size_t bytes = cap * sizeof(rkv_index_entry);
    const size_t huge = (size_t)2 << 20;
    void *p = NULL;
    /* cache-line aligned even when small: an entry never spans two lines */
    if (posix_memalign(&p, bytes < huge ? 64 : huge, bytes) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (bytes >= huge)
        (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
    memset(p, 0, bytes);
    return p;
}

static uint32_t rkv_index_log2(uint32_t x)
{
    uint32_t k = 0;
    while ((1u << k) < x)
        k++;
    return k;
}

/* The budget (config max_entries / max_table_bytes) as an entry count:
 * the largest table max_table_bytes allows holds half its size. */
static uint32_t rkv_index_budget(const rkv_router_config *cfg)
{
    uint64_t limit = 1u << 29;
    if (cfg->max_entries && cfg->max_entries < limit)
        limit = cfg->max_entries;
    if (cfg->max_table_bytes) {
        uint64_t cap = 64;
        while (cap * 2 * sizeof(rkv_index_entry) <= cfg->max_table_bytes &&
               cap < (1u << 30))
            cap *= 2;
        if (cap / 2 < limit)
            limit = cap / 2;
    }
    return (uint32_t)limit;
}

rkv_status rkv_index_index_init(rkv_router *r, uint32_t initial)
{
    uint32_t cap = 64;
    r->limit = rkv_index_budget(&r->cfg);
    if (initial > r->limit)
        initial = r->limit;
    while (cap < 2ull * initial && cap < (1u << 31))
        cap *= 2;
    r->entries = rkv_index_table_alloc(cap);
    if (r->entries == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_router_create: index table");
    r->table_cap = cap;
    r->shift = 64 - rkv_index_log2(cap);
    r->count = 0;
    return RKV_OK;
}

void rkv_index_index_fini(rkv_router *r)
{
    free(r->entries);
    r->entries = NULL;
}

static uint32_t rkv_index_free_slot(const rkv_router *r, uint64_t key)
{
    uint32_t mask = r->table_cap - 1, i = rkv_index_home(r, key);
    while (r->entries[i].mask != 0)
        i = (i + 1) & mask;
    return i;
}

rkv_status rkv_index_reserve(rkv_router *r, uint32_t more)
{
    uint64_t need = (uint64_t)r->count + more;
    if (need > r->limit) /* the adds past it are refused one by one */
        need = r->limit;
    if (need * 2 <= r->table_cap)
        return RKV_OK;
    uint64_t cap = r->table_cap;
    while (cap < need * 2)
        cap *= 2;
    rkv_index_entry *t = rkv_index_table_alloc((size_t)cap);
    if (t == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_router: index table");
    rkv_index_entry *old = r->entries;
    uint32_t old_cap = r->table_cap;
    r->entries = t;
    r->table_cap = (uint32_t)cap;
    r->shift = 64 - rkv_index_log2((uint32_t)cap);
    for (uint32_t i = 0; i < old_cap; i++)
        if (old[i].mask != 0)
            t[rkv_index_free_slot(r, old[i].key)] = old[i];
    free(old);
    return RKV_OK;
}

uint32_t rkv_index_add(rkv_router *r, uint64_t key)
{
    uint32_t i = rkv_index_free_slot(r, key);
    rkv_index_entry *e = &r->entries[i];
    e->key = key;
    e->mask = 0;
    r->count++;
    if (rkv_index_medium(e) != RKV_MEDIUM_DEVICE)
        r->offdev[rkv_index_group(e)]++;
    return i;
}

void rkv_index_remove(rkv_router *r, uint32_t i)
{
    uint32_t mask = r->table_cap - 1;
    rkv_index_entry *t = r->entries;
    if (rkv_index_medium(&t[i]) != RKV_MEDIUM_DEVICE)
        r->offdev[rkv_index_group(&t[i])]--;
    uint32_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (t[j].mask == 0)
            break;
        uint32_t k = rkv_index_home(r, t[j].key);
        /* t[j] may move to i iff its home is not cyclically in (i, j] */
        int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            t[i] = t[j];
            i = j;
        }
    }
    memset(&t[i], 0, sizeof t[i]);
    r->count--;
}
