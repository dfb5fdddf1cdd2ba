/*
 * common/cuda_backend.h -- the CUDA backend's function table: the one
 * interface between the core library (libradixkv, which has no CUDA
 * dependency) and the CUDA backend (libradixkv_cuda: alloc/ *.cu,
 * attention/ *.cu; the table itself is attention/cuda_backend.cu).
 *
 * The backend exports exactly one function, RKV_CUDA_BACKEND_ENTRY, which
 * returns a constant table of function pointers; the core finds and
 * validates it in common/cuda_loader.c (common/cuda_loader.h). A table
 * whose abi differs from RKV_CUDA_BACKEND_ABI, or whose size is smaller
 * than this struct, is refused (RKV_ERR_NO_DEVICE).
 *
 * This header names the attention backend's types only as incomplete
 * struct tags (attention/attn_internal.h defines them), so the loader, the
 * pool and the tiers see the table without attention/ internals.
 *
 * Invariants: the table is immutable and lives as long as the library is
 * loaded; every backend function returns an rkv_status and, on failure,
 * leaves a sentence in the backend's own thread-local message, read through
 * last_error() (the backend carries its own copy of common/status.c, so
 * nothing is shared between the two libraries but this table). The core
 * copies that sentence into its rkv_last_error() (rkv_cuda_status).
 * Change the table's layout: bump RKV_CUDA_BACKEND_ABI.
 */
#ifndef RKV_COMMON_CUDA_BACKEND_H
#define RKV_COMMON_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "radixkv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 6: the MLA entries; 7: rkv_attn_geom grew the quantized-KV and window
 * fields; 8: same layout, but the core now relies on attn_rows / run
 * masking windows on prefill plans and running a shared prefix over
 * quantized KV, which a 7 backend does wrongly */
#define RKV_CUDA_BACKEND_ABI 8u
#define RKV_CUDA_BACKEND_ENTRY rkv_cuda_backend_v1
#define RKV_CUDA_BACKEND_ENTRY_NAME "rkv_cuda_backend_v1"
#define RKV_CUDA_BACKEND_SONAME "libradixkv_cuda.so.0"
#define RKV_CUDA_BACKEND_ENV "RKV_CUDA_BACKEND"

/* The attention backend's types (attention/attn_internal.h). */
struct rkv_attn_cuda;
struct rkv_attn_geom;
struct rkv_attn_rows;
struct rkv_attn_shared;
struct rkv_attn_plan_layout;
struct rkv_mla_cuda;
struct rkv_mla_geom;

typedef struct rkv_cuda_backend {
    uint32_t abi;  /* RKV_CUDA_BACKEND_ABI of the backend's build */
    uint32_t size; /* sizeof(rkv_cuda_backend) of the backend's build */
    /* The backend's message for its last failing call on this thread. */
    const char *(*last_error)(void);

    /* Pool memory: checks that `device` exists (RKV_ERR_NO_DEVICE if no
     * device is present), then, if bytes > 0, one zeroed cudaMalloc. */
    rkv_status (*mem_alloc)(int device, size_t bytes, void **out);
    void (*mem_free)(int device, void *p);

    /* Paged attention (attention/attn_internal.h) and the pool's
     * synchronous block copies (alloc/pool_copy.h). */
    rkv_status (*attn_create)(int device, struct rkv_attn_cuda **out);
    void (*attn_destroy)(struct rkv_attn_cuda *c);
    rkv_status (*attn_set_stream)(struct rkv_attn_cuda *c, void *stream);
    rkv_status (*attn_sync)(struct rkv_attn_cuda *c);
    rkv_status (*attn_append)(struct rkv_attn_cuda *c, const struct rkv_attn_geom *g,
                              void *kbase, void *vbase, uint32_t n,
                              const uint32_t *slots, const void *k,
                              const void *v);
    rkv_status (*attn_rows)(struct rkv_attn_cuda *c, const struct rkv_attn_geom *g,
                            const void *kbase, const void *vbase,
                            const struct rkv_attn_rows *rows,
                            const struct rkv_attn_shared *shared, const void *q,
                            float sm_scale, void *out, float *lse);
    rkv_status (*attn_merge)(struct rkv_attn_cuda *c, const struct rkv_attn_geom *g,
                             uint32_t n, const void *v_a, const float *lse_a,
                             const void *v_b, const float *lse_b, void *v_out,
                             float *lse_out);
    rkv_status (*copy_blocks)(int device, void *base, size_t seg,
                              size_t stride, uint32_t height, uint32_t n,
                              const uint32_t *src, const uint32_t *dst);
    rkv_status (*copy_host)(int device, void *base, size_t seg, size_t stride,
                            uint32_t height, uint32_t n, const uint32_t *ids,
                            void *host, int to_host);
    /* Bytes the cascade path may use for its chunk buffers (internal
     * tunable, so tests reach the many-chunk path); 0 = default. */
    void (*attn_set_cascade_budget)(struct rkv_attn_cuda *c, size_t bytes);

    /* Page-locked host memory (cudaHostAlloc) for a host tier store
     * (tier/host_store.c), so the pool's copies to and from it are DMA.
     * Fails (RKV_ERR_CUDA) without a usable device; the store then falls
     * back to aligned host memory. Added in ABI 3. */
    rkv_status (*host_alloc)(size_t bytes, void **out);
    void (*host_free)(void *p);

    /* The tier's asynchronous copies (alloc/pool_copy.cu; added in ABI 4).
     * A copy stream (a blocking stream: ordered with the legacy default
     * stream), block copies queued on a stream between a pool laid out as
     * copy_host's (seg, stride, height) and one host pointer per block
     * (bytes_per_block each, segments in order), and events recorded after
     * a batch of them. event_query sets *done (0: still running) and fails
     * only on an error of the event or of the work before it. Every failure
     * is RKV_ERR_CUDA with the runtime's reason; nothing is freed or
     * changed that the caller owns. */
    rkv_status (*stream_create)(int device, void **out);
    void (*stream_destroy)(int device, void *stream);
    rkv_status (*stream_sync)(int device, void *stream);
    rkv_status (*copy_host_async)(int device, void *stream, void *base,
                                  size_t seg, size_t stride, uint32_t height,
                                  uint32_t n, const uint32_t *ids,
                                  void *const *host, int to_host);
    rkv_status (*event_create)(int device, void **out);
    rkv_status (*event_record)(int device, void *event, void *stream);
    rkv_status (*event_query)(int device, void *event, int *done);
    rkv_status (*event_sync)(int device, void *event);
    void (*event_destroy)(int device, void *event);

    /* Plan / run of attention batches (attention/attn_internal.h; added in
     * ABI 5). */
    rkv_status (*attn_plan)(struct rkv_attn_cuda *c, const struct rkv_attn_geom *g,
                            const struct rkv_attn_rows *rows, void *ws, size_t ws_bytes,
                            struct rkv_attn_plan_layout *out);
    rkv_status (*attn_run)(struct rkv_attn_cuda *c, const struct rkv_attn_geom *g,
                           const struct rkv_attn_plan_layout *p, void *ws, const void *kbase,
                           const void *vbase, const void *q, float sm_scale, void *out,
                           float *lse);

    /* Multi-head latent attention over an MLA pool (attention/
     * attn_internal.h; added in ABI 6). */
    rkv_status (*mla_create)(int device, struct rkv_mla_cuda **out);
    void (*mla_destroy)(struct rkv_mla_cuda *c);
    rkv_status (*mla_append)(struct rkv_mla_cuda *c, void *stream, const struct rkv_mla_geom *g,
                             void *base, uint32_t n, const uint32_t *slots,
                             const void *c_kv, const void *k_pe);
    rkv_status (*mla_rows)(struct rkv_mla_cuda *c, void *stream, const struct rkv_mla_geom *g,
                           const void *base, const struct rkv_attn_rows *rows,
                           const void *q_latent, const void *q_pe, float sm_scale,
                           void *out, float *lse);
} rkv_cuda_backend;

/* The backend's one exported symbol (defined in attention/cuda_backend.cu). */
typedef const rkv_cuda_backend *(*rkv_cuda_backend_entry_fn)(void);

/* Turns a backend status into a core one: on failure the backend's message
 * becomes rkv_last_error(). */
static inline rkv_status rkv_cuda_status(const rkv_cuda_backend *be,
                                         rkv_status st)
{
    if (st == RKV_OK)
        return st;
    return rkv_set_error(st, "%s", be->last_error());
}

#ifdef __cplusplus
}
#endif

#endif
