/*
 * alloc/pool_copy.c -- rkv_pool_copy_blocks / _to_host / _from_host
 * (declared in the pool section of radixkv.h) and the tier's queued
 * rkv_pool_copy_async (alloc/pool_copy.h): the host side of the pool's
 * block copies, written against the public pool API (plus the pool's CUDA
 * backend table for a CUDA pool, whose device side is alloc/pool_copy.cu).
 *
 * A block's KV is 2 * num_layers segments (K[l], V[l] pages; an MLA pool:
 * num_layers latent pages) of seg =
 * page_size * num_kv_heads * head_dim * sizeof(dtype) bytes; in the pool's
 * one allocation they sit at stride num_blocks * seg starting at
 * K[0] + id * seg. The host buffer of to/from_host holds block i at i *
 * bytes_per_block, its segments in the same order (K[0], V[0], K[1], ...),
 * each packed [page_size][num_kv_heads][head_dim], whatever the pool's
 * layout.
 *
 * A server-owned pool (rkv_pool_create_external) has one base per segment
 * and its own strides: on the host a segment moves as one run when dense,
 * else one run per token (heads adjacent) or per (token, head); on a CUDA
 * pool (always dense) one backend copy per segment replaces the pool-owned
 * layout's one 2D copy per block. The pool-owned path is unchanged.
 *
 * Invariants: every id is validated (in range, allocated; copy_blocks also:
 * no destination twice, no destination that is also a source, since the
 * result would depend on order) before any byte moves; on a CUDA pool the
 * copies have completed when the call returns -- except rkv_pool_copy_async
 * (the tier's two-phase copies), whose copies are only queued on a stream.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc/pool_copy.h"
#include "alloc/pool_internal.h"
#include "common/cuda_backend.h"
#include "common/status.h"

typedef struct seg_layout {
    rkv_pool_config cfg;
    char *base;
    size_t seg, stride, bpb;
    uint32_t height;
    /* server-owned pools: strides, a head's bytes, and the layout class */
    int external, dense;
    size_t bs, ts, hs, row;
} seg_layout;

static rkv_status layout_of(rkv_pool *pool, const char *fn, seg_layout *L)
{
    if (pool == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL pool", fn);
    rkv_status st = rkv_pool_get_config(pool, &L->cfg);
    if (st != RKV_OK)
        return st;
    if (L->cfg.num_layers == 0)
        return rkv_set_error(RKV_ERR_STATE, "%s: pool has no KV memory", fn);
    void *k, *v;
    if ((st = rkv_pool_layer_kv(pool, 0, &k, &v)) != RKV_OK)
        return st;
    L->base = k;
    L->row = rkv_pool_config_row_bytes(&L->cfg); /* codes + scales */
    L->seg = (size_t)L->cfg.page_size * L->cfg.num_kv_heads * L->row;
    L->external = rkv_pool_kv_external(pool);
    if ((st = rkv_pool_kv_strides(pool, &L->bs, &L->ts, &L->hs)) != RKV_OK)
        return st;
    L->dense = L->hs == L->row && L->ts == L->row * L->cfg.num_kv_heads &&
               L->bs == L->seg;
    L->stride = L->seg * L->cfg.num_blocks;
    L->height = (L->cfg.layout == RKV_LAYOUT_MLA ? 1 : 2) * L->cfg.num_layers;
    L->bpb = rkv_pool_bytes_per_block(pool);
    if (L->bpb != L->seg * L->height)
        return rkv_set_error(RKV_ERR_CORRUPT,
                             "%s: bytes_per_block %zu disagrees with the layout (%zu)", fn,
                             L->bpb, L->seg * L->height);
    return RKV_OK;
}

static rkv_status check_ids(const rkv_pool *pool, const char *fn, uint32_t nb,
                            uint32_t n, const uint32_t *ids)
{
    for (uint32_t i = 0; i < n; i++) {
        if (ids[i] >= nb)
            return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: block %u out of range", fn,
                                 ids[i]);
        if (rkv_pool_refcount(pool, ids[i]) == 0)
            return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: block %u is not allocated", fn,
                                 ids[i]);
    }
    return RKV_OK;
}

static void host_copy(const seg_layout *L, char *dst, size_t dpitch, const char *src,
                      size_t spitch)
{
    for (uint32_t h = 0; h < L->height; h++)
        memcpy(dst + h * dpitch, src + h * spitch, L->seg);
}

/* Segment s's base in a server-owned pool. */
static char *seg_base(rkv_pool *pool, uint32_t s)
{
    void *k = NULL, *v = NULL;
    rkv_pool_config cfg;
    (void)rkv_pool_get_config(pool, &cfg);
    if (cfg.layout == RKV_LAYOUT_MLA) { /* one latent plane a layer */
        (void)rkv_pool_layer_kv(pool, s, &k, NULL);
        return (char *)k;
    }
    (void)rkv_pool_layer_kv(pool, s / 2, &k, &v); /* s < height: cannot fail */
    return (char *)(s % 2 ? v : k);
}

/* Copies one block's segment of a server-owned pool from `from` to `to`,
 * each either at the block's address in a segment (the pool's strides) or
 * packed ([P][H][D], seg bytes): one run when the pool is dense, else one
 * per token (a token's heads adjacent) or per (token, head). */
static void seg_copy(const seg_layout *L, char *to, int to_packed, const char *from,
                     int from_packed)
{
    if (L->dense) {
        memcpy(to, from, L->seg);
        return;
    }
    const uint32_t P = L->cfg.page_size, H = L->cfg.num_kv_heads;
    int tok_run = L->hs == L->row;
    size_t len = tok_run ? L->row * H : L->row;
    for (uint32_t t = 0; t < P; t++)
        for (uint32_t h = 0; h < (tok_run ? 1u : H); h++) {
            size_t strided = t * L->ts + h * L->hs;
            size_t packed = ((size_t)t * H + h) * L->row;
            memcpy(to + (to_packed ? packed : strided),
                   from + (from_packed ? packed : strided), len);
        }
}

/* Block src -> dst, every segment, in a server-owned host pool. */
static void ext_copy_block(rkv_pool *pool, const seg_layout *L, uint32_t src,
                           uint32_t dst)
{
    for (uint32_t s = 0; s < L->height; s++) {
        char *b = seg_base(pool, s);
        seg_copy(L, b + (size_t)dst * L->bs, 0, b + (size_t)src * L->bs, 0);
    }
}

/* A server-owned CUDA pool (dense): n blocks to or from one host pointer
 * per block (bytes_per_block each), one backend copy per segment, queued
 * on stream. */
static rkv_status ext_cuda_host(rkv_pool *pool, const seg_layout *L,
                                const char *fn, void *stream, uint32_t n,
                                const rkv_block_id *ids, void *const *host,
                                int to_host)
{
    const rkv_cuda_backend *be = rkv_pool_cuda_backend(pool);
    void **hp = malloc((size_t)n * sizeof *hp);
    if (hp == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", fn);
    rkv_status st = RKV_OK;
    for (uint32_t s = 0; s < L->height && st == RKV_OK; s++) {
        for (uint32_t i = 0; i < n; i++)
            hp[i] = (char *)host[i] + (size_t)s * L->seg;
        st = rkv_cuda_status(be, be->copy_host_async(L->cfg.cuda_device, stream,
                                                     seg_base(pool, s), L->seg,
                                                     L->seg, 1, n, ids, hp,
                                                     to_host));
    }
    free(hp);
    return st;
}

/* Waits for all work on the device: the backend's block copy of no block
 * synchronises the device before and after (what the synchronous copies
 * of the pool-owned layout do around their copies). */
static rkv_status cuda_device_sync(rkv_pool *pool, const seg_layout *L)
{
    const rkv_cuda_backend *be = rkv_pool_cuda_backend(pool);
    return rkv_cuda_status(be, be->copy_blocks(L->cfg.cuda_device, L->base, L->seg,
                                               L->seg, 1, 0, NULL, NULL));
}

/* Queues the copies of blocks ids[i] <-> host[i] on stream: through the
 * external layout's segment copies, or the backend's one call. */
static rkv_status cuda_host_queue(rkv_pool *pool, const seg_layout *L,
                                  const char *fn, void *stream, uint32_t n,
                                  const rkv_block_id *ids, void *const *host,
                                  int to_host)
{
    if (L->external)
        return ext_cuda_host(pool, L, fn, stream, n, ids, host, to_host);
    const rkv_cuda_backend *be = rkv_pool_cuda_backend(pool);
    return rkv_cuda_status(be, be->copy_host_async(L->cfg.cuda_device, stream, L->base,
                                                   L->seg, L->stride, L->height, n, ids,
                                                   host, to_host));
}

/* cuda_host_queue as a synchronous copy: after all work on the device,
 * done on return (two device-wide waits around it). */
static rkv_status cuda_host_synced(rkv_pool *pool, const seg_layout *L,
                                   const char *fn, void *stream, uint32_t n,
                                   const rkv_block_id *ids, void *const *host,
                                   int to_host)
{
    rkv_status st = cuda_device_sync(pool, L);
    if (st == RKV_OK)
        st = cuda_host_queue(pool, L, fn, stream, n, ids, host, to_host);
    rkv_status st2 = cuda_device_sync(pool, L);
    return st != RKV_OK ? st : st2;
}

/* Duplicate checks cost O(n log n) in the ids given, never O(pool): a tier
 * load or store copies one block of a pool that may hold millions. */
static int cmp_id(const void *a, const void *b)
{
    rkv_block_id x = *(const rkv_block_id *)a, y = *(const rkv_block_id *)b;
    return (x > y) - (x < y);
}

/* Sorted copy of ids[0..n), leaving out each ids[i] equal to skip_equal[i]
 * (when given); NULL on OOM. */
static rkv_block_id *sorted_ids(uint32_t n, const rkv_block_id *ids,
                                const rkv_block_id *skip_equal, uint32_t *m)
{
    rkv_block_id *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (v == NULL)
        return NULL;
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        if (skip_equal == NULL || skip_equal[i] != ids[i])
            v[k++] = ids[i];
    qsort(v, k, sizeof *v, cmp_id);
    *m = k;
    return v;
}

static rkv_status check_distinct(const char *fn, uint32_t n,
                                 const rkv_block_id *ids)
{
    uint32_t m;
    rkv_block_id *v = sorted_ids(n, ids, NULL, &m);
    if (v == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", fn);
    rkv_status st = RKV_OK;
    for (uint32_t i = 1; i < m && st == RKV_OK; i++)
        if (v[i] == v[i - 1])
            st = rkv_set_error(RKV_ERR_INVALID_ARG, "%s: block %u listed twice",
                               fn, v[i]);
    free(v);
    return st;
}

/* Pairs src[i] -> dst[i] with src[i] != dst[i] (the others are no-ops): no
 * destination twice, no destination that is also a source. */
static rkv_status check_copy_pairs(const char *fn, uint32_t n,
                                   const rkv_block_id *src,
                                   const rkv_block_id *dst)
{
    uint32_t ns = 0, nd = 0;
    rkv_block_id *s = sorted_ids(n, src, NULL, &ns);
    rkv_block_id *d = s ? sorted_ids(n, dst, src, &nd) : NULL;
    rkv_status st = RKV_OK;
    if (d == NULL)
        st = rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", fn);
    for (uint32_t i = 1; st == RKV_OK && i < nd; i++)
        if (d[i] == d[i - 1])
            st = rkv_set_error(RKV_ERR_INVALID_ARG,
                               "%s: destination %u listed twice", fn, d[i]);
    for (uint32_t i = 0, j = 0; st == RKV_OK && i < nd && j < ns;) {
        if (d[i] == s[j])
            st = rkv_set_error(RKV_ERR_INVALID_ARG,
                               "%s: block %u is both a source and a destination",
                               fn, d[i]);
        else if (d[i] < s[j])
            i++;
        else
            j++;
    }
    free(s);
    free(d);
    return st;
}

rkv_status rkv_pool_copy_blocks(rkv_pool *pool, uint32_t n, const rkv_block_id *src,
                                const rkv_block_id *dst)
{
    static const char fn[] = "rkv_pool_copy_blocks";
    seg_layout L;
    rkv_status st = layout_of(pool, fn, &L);
    if (st != RKV_OK || n == 0)
        return st;
    if (src == NULL || dst == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL ids", fn);
    if ((st = check_ids(pool, fn, L.cfg.num_blocks, n, src)) != RKV_OK ||
        (st = check_ids(pool, fn, L.cfg.num_blocks, n, dst)) != RKV_OK)
        return st;
    if ((st = check_copy_pairs(fn, n, src, dst)) != RKV_OK)
        return st;
    if (L.cfg.device == RKV_DEVICE_CUDA) {
        const rkv_cuda_backend *be = rkv_pool_cuda_backend(pool);
        if (!L.external)
            return rkv_cuda_status(be, be->copy_blocks(L.cfg.cuda_device, L.base,
                                                       L.seg, L.stride, L.height,
                                                       n, src, dst));
        for (uint32_t s = 0; s < L.height && st == RKV_OK; s++)
            st = rkv_cuda_status(be, be->copy_blocks(L.cfg.cuda_device,
                                                     seg_base(pool, s), L.seg,
                                                     L.seg, 1, n, src, dst));
        return st;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (src[i] == dst[i])
            continue;
        if (L.external)
            ext_copy_block(pool, &L, src[i], dst[i]);
        else
            host_copy(&L, L.base + (size_t)dst[i] * L.seg, L.stride,
                      L.base + (size_t)src[i] * L.seg, L.stride);
    }
    return RKV_OK;
}

/* Block id of a host pool to (to_host) or from hb (bytes_per_block, its
 * segments packed in order). */
static void cpu_block_host(rkv_pool *pool, const seg_layout *L, rkv_block_id id, char *hb,
                           int to_host)
{
    if (L->external) {
        for (uint32_t s = 0; s < L->height; s++) {
            char *blk = seg_base(pool, s) + (size_t)id * L->bs;
            char *packed = hb + (size_t)s * L->seg;
            if (to_host)
                seg_copy(L, packed, 1, blk, 0);
            else
                seg_copy(L, blk, 0, packed, 1);
        }
        return;
    }
    char *blk = L->base + (size_t)id * L->seg;
    if (to_host)
        host_copy(L, hb, L->seg, blk, L->stride);
    else
        host_copy(L, blk, L->stride, hb, L->seg);
}

/* The checks of a copy between n blocks and host memory (host: the
 * buffer or the pointer list): *L filled; RKV_OK with n == 0 copies
 * nothing. */
static rkv_status host_copy_checks(rkv_pool *pool, const char *fn, uint32_t n,
                                   const rkv_block_id *ids, const void *host, int to_host,
                                   seg_layout *L)
{
    rkv_status st = layout_of(pool, fn, L);
    if (st != RKV_OK || n == 0)
        return st;
    if (ids == NULL || host == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL ids or buffer", fn);
    if ((st = check_ids(pool, fn, L->cfg.num_blocks, n, ids)) != RKV_OK)
        return st;
    /* the same block twice would make the result depend on order */
    if (!to_host && (st = check_distinct(fn, n, ids)) != RKV_OK)
        return st;
    return RKV_OK;
}

static rkv_status copy_host(rkv_pool *pool, const char *fn, uint32_t n,
                            const rkv_block_id *ids, void *host, int to_host)
{
    seg_layout L;
    rkv_status st = host_copy_checks(pool, fn, n, ids, host, to_host, &L);
    if (st != RKV_OK || n == 0)
        return st;
    if (L.cfg.device == RKV_DEVICE_CUDA) {
        const rkv_cuda_backend *be = rkv_pool_cuda_backend(pool);
        if (!L.external)
            return rkv_cuda_status(be, be->copy_host(L.cfg.cuda_device, L.base,
                                                     L.seg, L.stride, L.height, n,
                                                     ids, host, to_host));
        void **hb = malloc((size_t)n * sizeof *hb);
        if (hb == NULL)
            return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", fn);
        for (uint32_t i = 0; i < n; i++)
            hb[i] = (char *)host + (size_t)i * L.bpb;
        /* as the pool-owned copy: after all work, done on return (on the
         * legacy default stream between two device-wide waits) */
        st = cuda_host_synced(pool, &L, fn, NULL, n, ids, hb, to_host);
        free(hb);
        return st;
    }
    for (uint32_t i = 0; i < n; i++)
        cpu_block_host(pool, &L, ids[i], (char *)host + (size_t)i * L.bpb, to_host);
    return RKV_OK;
}

rkv_status rkv_pool_copy_to_host(rkv_pool *pool, uint32_t n, const rkv_block_id *ids,
                                 void *host_buf)
{
    return copy_host(pool, "rkv_pool_copy_to_host", n, ids, host_buf, 1);
}

rkv_status rkv_pool_copy_from_host(rkv_pool *pool, uint32_t n, const rkv_block_id *ids,
                                   const void *host_buf)
{
    return copy_host(pool, "rkv_pool_copy_from_host", n, ids, (void *)host_buf, 0);
}

rkv_status rkv_pool_copy_async(rkv_pool *pool, void *stream, uint32_t n,
                               const rkv_block_id *ids, void *const *host,
                               int to_host)
{
    const char *fn = to_host ? "rkv_pool_copy_async (to host)"
                             : "rkv_pool_copy_async (from host)";
    seg_layout L;
    rkv_status st = layout_of(pool, fn, &L);
    if (st != RKV_OK || n == 0)
        return st;
    if (L.cfg.device != RKV_DEVICE_CUDA)
        return rkv_set_error(RKV_ERR_STATE, "%s: not a CUDA pool", fn);
    if ((st = check_ids(pool, fn, L.cfg.num_blocks, n, ids)) != RKV_OK)
        return st;
    return cuda_host_queue(pool, &L, fn, stream, n, ids, host, to_host);
}

rkv_status rkv_pool_copy_pairs(rkv_pool *pool, void *stream, uint32_t n,
                               const rkv_block_id *ids, void *const *host, int to_host)
{
    const char *fn = to_host ? "rkv_pool_copy_pairs (to host)"
                             : "rkv_pool_copy_pairs (from host)";
    seg_layout L;
    rkv_status st = host_copy_checks(pool, fn, n, ids, host, to_host, &L);
    if (st != RKV_OK || n == 0)
        return st;
    if (L.cfg.device != RKV_DEVICE_CUDA) {
        for (uint32_t i = 0; i < n; i++)
            cpu_block_host(pool, &L, ids[i], host[i], to_host);
        return RKV_OK;
    }
    /* as copy_host: after all work, done on return */
    return cuda_host_synced(pool, &L, fn, stream, n, ids, host, to_host);
}
