/*
 * sched/sched_map.c -- a u64 -> u64 open-addressing hash map for the
 * scheduler (request ids, dedup page hashes, per-refresh node memo).
 *
 * Invariants: cap is 0 or a power of two; count <= cap / 2 after every
 * reserve; linear probing with backward-shift deletion, so no tombstones and
 * every key sits in the probe run that starts at its home slot.
 */
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "sched/sched_internal.h"

static uint32_t rkv_u64map_home(const rkv_u64map *m, uint64_t key)
{
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    return (uint32_t)h & (m->cap - 1);
}

void rkv_u64map_fini(rkv_u64map *m)
{
    free(m->keys);
    free(m->vals);
    free(m->used);
    memset(m, 0, sizeof *m);
}

rkv_status rkv_u64map_reserve(rkv_u64map *m, uint32_t extra)
{
    uint64_t need = (uint64_t)m->count + extra;
    if (m->cap != 0 && need * 2 <= m->cap)
        return RKV_OK;
    uint64_t cap = m->cap ? m->cap : 16;
    while (need * 2 > cap)
        cap *= 2;
    if (cap > (1ull << 31))
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_u64map: %llu entries",
                             (unsigned long long)need);
    rkv_u64map f;
    memset(&f, 0, sizeof f);
    f.cap = (uint32_t)cap;
    f.keys = rkv_sched_mem_malloc(cap * sizeof *f.keys);
    f.vals = rkv_sched_mem_malloc(cap * sizeof *f.vals);
    f.used = rkv_sched_mem_calloc(cap, 1);
    if (f.keys == NULL || f.vals == NULL || f.used == NULL) {
        rkv_u64map_fini(&f);
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_u64map: out of memory");
    }
    for (uint32_t i = 0; i < m->cap; i++) {
        if (m->used[i])
            *rkv_u64map_put(&f, m->keys[i]) = m->vals[i];
    }
    rkv_u64map_fini(m);
    *m = f;
    return RKV_OK;
}

uint64_t *rkv_u64map_get(const rkv_u64map *m, uint64_t key)
{
    if (m->cap == 0)
        return NULL;
    for (uint32_t i = rkv_u64map_home(m, key);; i = (i + 1) & (m->cap - 1)) {
        if (!m->used[i])
            return NULL;
        if (m->keys[i] == key)
            return &m->vals[i];
    }
}

uint64_t *rkv_u64map_put(rkv_u64map *m, uint64_t key)
{
    uint32_t i = rkv_u64map_home(m, key);
    for (; m->used[i]; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key)
            return &m->vals[i];
    }
    m->used[i] = 1;
    m->keys[i] = key;
    m->vals[i] = 0;
    m->count++;
    return &m->vals[i];
}

void rkv_u64map_del(rkv_u64map *m, uint64_t key)
{
    if (m->cap == 0)
        return;
    uint32_t mask = m->cap - 1, i = rkv_u64map_home(m, key);
    for (;; i = (i + 1) & mask) {
        if (!m->used[i])
            return;
        if (m->keys[i] == key)
            break;
    }
    /* backward shift: pull later members of the run into the hole when
     * their home does not lie cyclically in (hole, j] */
    uint32_t hole = i;
    for (uint32_t j = (i + 1) & mask; m->used[j]; j = (j + 1) & mask) {
        uint32_t home = rkv_u64map_home(m, m->keys[j]);
        int in_range = hole <= j ? (home > hole && home <= j)
                                 : (home > hole || home <= j);
        if (in_range)
            continue;
        m->keys[hole] = m->keys[j];
        m->vals[hole] = m->vals[j];
        hole = j;
    }
    m->used[hole] = 0;
    m->count--;
}
