/*
 * swa/swa_check.c -- rkv_swa_check: every invariant of swa/swa.h, from
 * the tables alone, O(blocks of both pools + leases * window). Part of
 * rkv_tree_check on a hybrid tree.
 */
#include <stdlib.h>

#include "alloc/pool_internal.h"
#include "common/status.h"
#include "radix/tree_lease.h"
#include "swa/swa.h"

#define NO RKV_NO_BLOCK

static rkv_status rkv_swa_corrupt(const char *what, uint32_t a, uint32_t b)
{
    return rkv_set_error(RKV_ERR_CORRUPT, "rkv_tree_check (SWA): %s (%u, %u)",
                         what, a, b);
}

/* Pins recomputed from the lease entries must equal pin[]; every entry's
 * core lease must be live. */
static rkv_status rkv_swa_check_leases(const rkv_tree *t)
{
    const rkv_swa *s = t->swa;
    uint32_t *cnt = calloc(s->nmain ? s->nmain : 1, sizeof *cnt);
    if (cnt == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_tree_check: SWA scratch");
    rkv_status st = RKV_OK;
    for (uint32_t k = 0; k < s->nleases && st == RKV_OK; k++) {
        const rkv_swa_lease_ent *e = &s->leases[k];
        if (rkv_lease_find(t, e->id) == RKV_NIL)
            st = rkv_set_error(RKV_ERR_CORRUPT,
                               "rkv_tree_check (SWA): SWA lease %#llx has no "
                               "core lease (released by rkv_tree_unlock?)",
                               (unsigned long long)e->id);
        else if (e->n > s->wp)
            st = rkv_swa_corrupt("lease pins more than a window", k, e->n);
        for (uint32_t i = 0; i < e->n && st == RKV_OK; i++) {
            rkv_block_id b = s->lease_blocks[(size_t)k * s->wp + i];
            if (b >= s->nmain || !rkv_tree_owned(t, b))
                st = rkv_swa_corrupt("lease pins a page not cached", k, b);
            else
                cnt[b]++;
        }
    }
    for (uint32_t b = 0; b < s->nmain && st == RKV_OK; b++)
        if (cnt[b] != s->pin[b])
            st = rkv_swa_corrupt("pin count differs from the leases", b,
                                 s->pin[b]);
    free(cnt);
    return st;
}

rkv_status rkv_swa_check(const rkv_tree *t)
{
    const rkv_swa *s = t->swa;
    if (s == NULL)
        return RKV_OK;
    if (s->nmain != t->pool->cfg.num_blocks || s->nswa != s->pool->cfg.num_blocks ||
        s->pool->tree != t || t->hooks.page_dropped == NULL)
        return rkv_swa_corrupt("SWA state does not match its pools", s->nmain,
                               s->nswa);
    uint64_t attached = 0, unpinned = 0;
    for (uint32_t b = 0; b < s->nmain; b++) {
        uint32_t sb = s->of[b];
        if (sb == NO)
            continue;
        attached++;
        unpinned += s->pin[b] == 0;
        if (!rkv_tree_owned(t, b))
            return rkv_swa_corrupt("SWA page of a page not cached", b, sb);
        if (sb >= s->nswa || s->owner[sb] != b)
            return rkv_swa_corrupt("SWA page and owner disagree", b, sb);
        if (s->pool->refcount[sb] == 0)
            return rkv_swa_corrupt("SWA page is free", b, sb);
    }
    for (uint32_t sb = 0; sb < s->nswa; sb++)
        if (s->owner[sb] != NO &&
            (s->owner[sb] >= s->nmain || s->of[s->owner[sb]] != sb))
            return rkv_swa_corrupt("owner of an SWA block disagrees", sb,
                                   s->owner[sb]);
    if (attached != s->attached || unpinned != s->listed ||
        attached > t->cached_blocks)
        return rkv_swa_corrupt("attached / listed counts", (uint32_t)attached,
                               (uint32_t)s->attached);
    /* the list: exactly the attached unpinned pages, links both ways */
    uint64_t steps = 0;
    uint32_t prev = NO;
    for (uint32_t b = s->head; b != NO; prev = b, b = s->next[b]) {
        if (++steps > s->listed || b >= s->nmain)
            return rkv_swa_corrupt("release list longer than listed", b,
                                   (uint32_t)s->listed);
        if (s->prev[b] != prev || s->of[b] == NO || s->pin[b] != 0)
            return rkv_swa_corrupt("release list entry", b, s->prev[b]);
    }
    if (steps != s->listed || s->tail != prev)
        return rkv_swa_corrupt("release list length or tail", (uint32_t)steps,
                               s->tail);
    return rkv_swa_check_leases(t);
}
