/*
 * alloc/pool_copy.h -- the pool's block copies beyond the public
 * rkv_pool_copy_blocks / _to_host / _from_host, in two halves:
 *   - core (alloc/pool_copy.c, libradixkv): rkv_pool_copy_async, the
 *     queued copies of the tier (residency/tier_copy.c), and
 *     rkv_pool_copy_pairs, the batched synchronous copies of its demotions
 *     and a host pool's loads;
 *   - backend (alloc/pool_copy.cu, libradixkv_cuda): what the core reaches
 *     through the backend table (common/cuda_backend.h) -- the synchronous
 *     block copies of a CUDA pool, and the copy stream, asynchronous block
 *     copies and events of the tier's two-phase copies (backend ABI 4).
 *
 * Layout of the backend copies: a block's `height` (2 * num_layers)
 * segments of seg bytes sit at stride `stride` from base + id * seg; a
 * host block holds them packed in order (seg * height bytes).
 */
#ifndef RKV_ALLOC_POOL_COPY_H
#define RKV_ALLOC_POOL_COPY_H

#include <stddef.h>
#include <stdint.h>

#include "radixkv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- core ---------------------------------------------------------------- */

/* Queues copies of n blocks of a CUDA pool to (to_host) or from one host
 * pointer per block (bytes_per_block each) on `stream`, after the checks of
 * rkv_pool_copy_to_host; returns once they are queued, not done.
 * RKV_ERR_STATE on a host pool. */
rkv_status rkv_pool_copy_async(rkv_pool *pool, void *stream, uint32_t n,
                               const rkv_block_id *ids, void *const *host,
                               int to_host);

/* The batched copy of the tier's synchronous paths (demotion, a host
 * pool's loads): n blocks to (to_host) or from one host pointer per block
 * (bytes_per_block each), done on return, after the checks of
 * rkv_pool_copy_to_host / _from_host. A host pool copies block by block; a
 * CUDA pool waits for all work on the device, queues the n copies on
 * `stream` in one batched call (NULL: the legacy stream, one copy call a
 * block), then waits for the device again. On failure no block named is
 * read or written by a copy still running. */
rkv_status rkv_pool_copy_pairs(rkv_pool *pool, void *stream, uint32_t n,
                               const rkv_block_id *ids, void *const *host, int to_host);

/* ---- backend ------------------------------------------------------------- */

/* Synchronous: ordered after all work on the device, done on return. */
rkv_status rkv_copy_blocks(int device, void *base, size_t seg, size_t stride,
                           uint32_t height, uint32_t n, const uint32_t *src,
                           const uint32_t *dst);
rkv_status rkv_copy_host(int device, void *base, size_t seg, size_t stride,
                         uint32_t height, uint32_t n, const uint32_t *ids,
                         void *host, int to_host);

/* Asynchronous: ordered only by their stream. */
rkv_status rkv_copy_stream_create(int device, void **out);
void rkv_copy_stream_destroy(int device, void *stream);
rkv_status rkv_copy_stream_sync(int device, void *stream);
rkv_status rkv_copy_host_async(int device, void *stream, void *base, size_t seg,
                               size_t stride, uint32_t height, uint32_t n,
                               const uint32_t *ids, void *const *host,
                               int to_host);
rkv_status rkv_copy_event_create(int device, void **out);
rkv_status rkv_copy_event_record(int device, void *event, void *stream);
rkv_status rkv_copy_event_query(int device, void *event, int *done);
rkv_status rkv_copy_event_sync(int device, void *event);
void rkv_copy_event_destroy(int device, void *event);

#ifdef __cplusplus
}
#endif

#endif
