/*
 * router/index.c -- the router's block table: open addressing over the
 * dense entry array (layout and invariants: router/router_internal.h).
 * Growth happens only in rkv_rt_reserve, before any change, so a caller
 * that reserved can add without failing.
 */
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "router/router_internal.h"

static uint32_t rkv_rt_log2(uint32_t x)
{
    uint32_t k = 0;
    while ((1u << k) < x)
        k++;
    return k;
}

static rkv_rt_slot *rkv_rt_table_new(uint32_t cap)
{
    rkv_rt_slot *t = malloc((size_t)cap * sizeof *t);
    if (t == NULL)
        return NULL;
    for (uint32_t i = 0; i < cap; i++)
        t[i].idx = RKV_RT_EMPTY;
    return t;
}

rkv_status rkv_rt_index_init(rkv_router *r, uint32_t initial)
{
    uint32_t cap = 64;
    while (cap < 2ull * initial && cap < (1u << 31))
        cap *= 2;
    r->table = rkv_rt_table_new(cap);
    r->entries_cap = cap / 2;
    r->entries = malloc((size_t)r->entries_cap * sizeof *r->entries);
    if (r->table == NULL || r->entries == NULL) {
        free(r->table);
        free(r->entries);
        r->table = NULL;
        r->entries = NULL;
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_router_create: index tables");
    }
    r->table_cap = cap;
    r->shift = 64 - rkv_rt_log2(cap);
    r->count = 0;
    return RKV_OK;
}

void rkv_rt_index_fini(rkv_router *r)
{
    free(r->table);
    free(r->entries);
    r->table = NULL;
    r->entries = NULL;
}

uint32_t rkv_rt_find(const rkv_router *r, uint64_t hash)
{
    uint32_t mask = r->table_cap - 1;
    for (uint32_t i = rkv_rt_home(r, hash);; i = (i + 1) & mask) {
        const rkv_rt_slot *s = &r->table[i];
        if (s->idx == RKV_RT_EMPTY)
            return RKV_RT_EMPTY;
        if (s->hash == hash)
            return s->idx;
    }
}

uint32_t rkv_rt_table_slot(const rkv_router *r, uint64_t hash)
{
    uint32_t mask = r->table_cap - 1;
    uint32_t i = rkv_rt_home(r, hash);
    while (r->table[i].hash != hash || r->table[i].idx == RKV_RT_EMPTY)
        i = (i + 1) & mask;
    return i;
}

static void rkv_rt_table_put(rkv_rt_slot *t, uint32_t mask, uint32_t home,
                             uint64_t hash, uint32_t idx)
{
    uint32_t i = home;
    while (t[i].idx != RKV_RT_EMPTY)
        i = (i + 1) & mask;
    t[i].hash = hash;
    t[i].idx = idx;
}

rkv_status rkv_rt_reserve(rkv_router *r, uint32_t more)
{
    uint64_t need = (uint64_t)r->count + more;
    if (need > (1u << 30))
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_router: index full (%llu "
                             "entries)", (unsigned long long)need);
    if (need > r->entries_cap) {
        uint64_t cap = r->entries_cap;
        while (cap < need)
            cap *= 2;
        rkv_rt_entry *e = realloc(r->entries, (size_t)cap * sizeof *e);
        if (e == NULL)
            return rkv_set_error(RKV_ERR_NOMEM, "rkv_router: entry array");
        r->entries = e;
        r->entries_cap = (uint32_t)cap;
    }
    if (need * 2 > r->table_cap) {
        uint64_t cap = r->table_cap;
        while (cap < need * 2)
            cap *= 2;
        rkv_rt_slot *t = rkv_rt_table_new((uint32_t)cap);
        if (t == NULL)
            return rkv_set_error(RKV_ERR_NOMEM, "rkv_router: hash table");
        free(r->table);
        r->table = t;
        r->table_cap = (uint32_t)cap;
        r->shift = 64 - rkv_rt_log2((uint32_t)cap);
        for (uint32_t i = 0; i < r->count; i++)
            rkv_rt_table_put(t, r->table_cap - 1,
                             rkv_rt_home(r, r->entries[i].hash),
                             r->entries[i].hash, i);
    }
    return RKV_OK;
}

uint32_t rkv_rt_add(rkv_router *r, uint64_t hash, uint64_t ns, uint64_t parent)
{
    uint32_t idx = r->count++;
    rkv_rt_entry *e = &r->entries[idx];
    memset(e, 0, sizeof *e);
    e->hash = hash;
    e->ns = ns;
    e->parent = parent;
    rkv_rt_table_put(r->table, r->table_cap - 1, rkv_rt_home(r, hash), hash,
                     idx);
    return idx;
}

/* Backward-shift deletion of table slot i. */
static void rkv_rt_table_delete(rkv_router *r, uint32_t i)
{
    uint32_t mask = r->table_cap - 1;
    rkv_rt_slot *t = r->table;
    uint32_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (t[j].idx == RKV_RT_EMPTY)
            break;
        uint32_t k = rkv_rt_home(r, t[j].hash);
        /* t[j] may move to i iff its home is not cyclically in (i, j] */
        int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            t[i] = t[j];
            i = j;
        }
    }
    t[i].idx = RKV_RT_EMPTY;
}

void rkv_rt_remove(rkv_router *r, uint32_t idx)
{
    rkv_rt_table_delete(r, rkv_rt_table_slot(r, r->entries[idx].hash));
    uint32_t last = --r->count;
    if (idx != last) {
        r->entries[idx] = r->entries[last];
        r->table[rkv_rt_table_slot(r, r->entries[idx].hash)].idx = idx;
    }
}
