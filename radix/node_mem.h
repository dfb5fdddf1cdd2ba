/*
 * radix/node_mem.h -- the one allocator behind every allocation of a tree.
 *
 * The allocator hook (in the spirit of rax_malloc.h): every node, token and
 * index array of a tree goes through here, so the backing allocator is
 * chosen in one file, per library: node_mem.c is compiled once for the
 * static library (with jemalloc when RKV_HAVE_JEMALLOC) and once for the
 * shared one (malloc only, so that dlopen works).
 * Owns: a dedicated jemalloc arena (when built with jemalloc and asked for
 * it; else malloc/free), the OOM-injection counter of radix/tree_debug.h, and
 * byte/allocation accounting. Invariants: live == allocations not yet freed;
 * bytes == sum of the sizes of live allocations (what stats.host_bytes
 * reports); the process-wide live counter is the sum of every tree's live.
 * Callers pass the allocation size back to free (sized deallocation).
 */
#ifndef RKV_RADIX_NODE_MEM_H
#define RKV_RADIX_NODE_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "radixkv.h"

typedef struct rkv_node_mem {
    unsigned arena;       /* jemalloc arena index when use_jemalloc      */
    int use_jemalloc;
    int64_t fail_after;   /* < 0: no injection; k: the (k+1)-th call fails */
    uint64_t calls;       /* allocations attempted                       */
    int64_t live;         /* allocations not freed                        */
    size_t bytes;         /* bytes of live allocations                    */
} rkv_node_mem;

/* 1 when this library's node memory can come from jemalloc (the static
 * library built with RKV_JEMALLOC; never the shared one, which must stay
 * loadable by dlopen: see CMakeLists.txt), else 0. The tree config's
 * default. */
int rkv_node_mem_has_jemalloc(void);
/* use_jemalloc is honoured only when rkv_node_mem_has_jemalloc(). */
rkv_status rkv_node_mem_init(rkv_node_mem *m, int use_jemalloc);
/* Every allocation must have been freed. Releases the arena. */
void rkv_node_mem_fini(rkv_node_mem *m);
/* NULL on failure (real or injected); size > 0. */
void *rkv_node_mem_alloc(rkv_node_mem *m, size_t size);
/* Live allocations of every tree in the process (the leak check's count,
 * radix/tree_debug.h). */
int64_t rkv_node_mem_live_global(void);
/* p may be NULL (then nothing happens); size is what was asked for. */
void rkv_node_mem_free(rkv_node_mem *m, void *p, size_t size);

/* Where the arena's memory is (jemalloc's arena statistics, refreshed by
 * the call), in bytes: what the tree asked for (== bytes), what its size
 * classes hand out for that, the pages of live extents and slabs, freed
 * pages the arena keeps (never purged, see node_mem.c) and what is
 * resident. For measurement only (benches): 0 and *r zeroed where node
 * memory is not a jemalloc arena. */
typedef struct rkv_node_mem_report {
    size_t asked, allocated, active, dirty, resident;
} rkv_node_mem_report;
int rkv_node_mem_report_get(const rkv_node_mem *m, rkv_node_mem_report *r);

#endif
