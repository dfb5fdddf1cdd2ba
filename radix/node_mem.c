/*
 * radix/node_mem.c -- the tree's allocator (see node_mem.h).
 *
 * Why a dedicated jemalloc arena: node arrays are many small, long-lived
 * objects of a few size classes; an arena keeps them together, away from the
 * server's other allocations, and the thread cache is bypassed
 * (MALLOCX_TCACHE_NONE) so memory freed by eviction returns to this arena and
 * the whole arena can be destroyed with the tree. Sized deallocation
 * (sdallocx) skips the size lookup. This file is compiled twice (see
 * node_mem.h): the shared library's copy has no RKV_HAVE_JEMALLOC and
 * uses malloc, because libjemalloc.so.2 cannot be loaded late by dlopen.
 *
 * OOM injection: fail_after counts down on each attempted allocation; the
 * call that finds it at 0 fails and disarms the injection.
 */
#include "radix/node_mem.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "common/status.h"

#ifdef RKV_HAVE_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

static _Atomic int64_t rkv_live_tree_allocs_global;

int64_t rkv_node_mem_live_global(void)
{
    return atomic_load(&rkv_live_tree_allocs_global);
}

int rkv_node_mem_has_jemalloc(void)
{
#ifdef RKV_HAVE_JEMALLOC
    return 1;
#else
    return 0;
#endif
}

rkv_status rkv_node_mem_init(rkv_node_mem *m, int use_jemalloc)
{
    m->arena = 0;
    m->use_jemalloc = 0;
    m->fail_after = -1;
    m->calls = 0;
    m->live = 0;
    m->bytes = 0;
#ifdef RKV_HAVE_JEMALLOC
    if (use_jemalloc) {
        unsigned ind = 0;
        size_t sz = sizeof ind;
        if (mallctl("arenas.create", &ind, &sz, NULL, 0) != 0)
            return rkv_set_error(RKV_ERR_NOMEM,
                                 "rkv_tree_create: jemalloc arenas.create failed");
        m->arena = ind;
        m->use_jemalloc = 1;
        /* Never purge: the tree's memory is bounded by the pool (pages
         * cached <= blocks), so freed extents are kept for the next nodes
         * instead of being returned to the kernel and faulted in again
         * (measured on the trace replay: purging doubled match+insert
         * time). The arena is destroyed with the tree. */
        ssize_t never = -1;
        char name[64];
        snprintf(name, sizeof name, "arena.%u.dirty_decay_ms", ind);
        (void)mallctl(name, NULL, NULL, &never, sizeof never);
        snprintf(name, sizeof name, "arena.%u.muzzy_decay_ms", ind);
        (void)mallctl(name, NULL, NULL, &never, sizeof never);
    }
#else
    (void)use_jemalloc;
#endif
    return RKV_OK;
}

void rkv_node_mem_fini(rkv_node_mem *m)
{
#ifdef RKV_HAVE_JEMALLOC
    if (m->use_jemalloc) {
        char name[64];
        snprintf(name, sizeof name, "arena.%u.destroy", m->arena);
        (void)mallctl(name, NULL, NULL, NULL, 0);
        m->use_jemalloc = 0;
    }
#else
    (void)m;
#endif
}

void *rkv_node_mem_alloc(rkv_node_mem *m, size_t size)
{
    m->calls++;
    if (m->fail_after >= 0) {
        if (m->fail_after == 0) {
            m->fail_after = -1;
            return NULL;
        }
        m->fail_after--;
    }
    void *p;
#ifdef RKV_HAVE_JEMALLOC
    if (m->use_jemalloc)
        p = mallocx(size, MALLOCX_ARENA(m->arena) | MALLOCX_TCACHE_NONE);
    else
        p = malloc(size);
#else
    p = malloc(size);
#endif
    if (p == NULL)
        return NULL;
    m->live++;
    m->bytes += size;
    atomic_fetch_add(&rkv_live_tree_allocs_global, 1);
    return p;
}

#ifdef RKV_HAVE_JEMALLOC
static size_t rkv_arena_stat(unsigned arena, const char *what)
{
    char name[96];
    size_t v = 0, sz = sizeof v;
    snprintf(name, sizeof name, "stats.arenas.%u.%s", arena, what);
    return mallctl(name, &v, &sz, NULL, 0) == 0 ? v : 0;
}
#endif

int rkv_node_mem_report_get(const rkv_node_mem *m, rkv_node_mem_report *r)
{
    memset(r, 0, sizeof *r);
#ifdef RKV_HAVE_JEMALLOC
    if (!m->use_jemalloc)
        return 0;
    uint64_t epoch = 1;
    size_t sz = sizeof epoch;
    (void)mallctl("epoch", &epoch, &sz, &epoch, sz);
    size_t page = 4096;
    sz = sizeof page;
    (void)mallctl("arenas.page", &page, &sz, NULL, 0);
    r->asked = m->bytes;
    r->allocated = rkv_arena_stat(m->arena, "small.allocated") +
                   rkv_arena_stat(m->arena, "large.allocated");
    r->active = rkv_arena_stat(m->arena, "pactive") * page;
    r->dirty = rkv_arena_stat(m->arena, "pdirty") * page;
    r->resident = rkv_arena_stat(m->arena, "resident");
    return 1;
#else
    (void)m;
    return 0;
#endif
}

void rkv_node_mem_free(rkv_node_mem *m, void *p, size_t size)
{
    if (p == NULL)
        return;
    m->live--;
    m->bytes -= size;
    atomic_fetch_sub(&rkv_live_tree_allocs_global, 1);
#ifdef RKV_HAVE_JEMALLOC
    if (m->use_jemalloc) {
        sdallocx(p, size, MALLOCX_TCACHE_NONE);
        return;
    }
#endif
    free(p);
}
