/*
 * alloc/pool_copy.cu -- the device side of a CUDA pool's block copies (the
 * host side is alloc/pool_copy.c), in the CUDA backend: one 2D copy per
 * block (a block's 2 * num_layers segments are the rows of one
 * cudaMemcpy2D), either synchronous (rkv_pool_copy_blocks / _to_host /
 * _from_host: ordered after all work on the device, done on return) or
 * queued for the tier (backend ABI 4): a copy stream, block copies queued
 * on it, and events that say when a batch of them is done. The tree's tier
 * (radix/tree_copy.c) issues a batch in one poll and finishes it in a
 * later poll that finds its event complete.
 *
 * Invariants: the caller's current device is restored on every path; every
 * CUDA error returns RKV_ERR_CUDA with the runtime's reason, clears the
 * runtime's last error (a stale non-sticky error must not be blamed on a
 * later call) and changes nothing the caller owns: a failed create leaves
 * nothing allocated, a failed copy leaves the copies queued before it
 * queued (the caller synchronises before it reuses their memory).
 * Ordering: the queued copies are ordered only by their stream. The library's
 * own stream is a blocking stream (ordered with the legacy default stream);
 * work on other streams is ordered by the embedder's choice of stream
 * (rkv_tree_tier_set_stream), never by a device-wide synchronisation.
 */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/pool_copy.h"
#include "common/cuda_guard.h"
#include "common/status.h"

/* ---- synchronous block copies (rkv_pool_copy_blocks / _to_host /
 * _from_host of a pool-owned CUDA pool) ---------------------------------- */

extern "C" rkv_status rkv_copy_blocks(int device, void *base, size_t seg, size_t stride,
                                      uint32_t height, uint32_t n, const uint32_t *src,
                                      const uint32_t *dst)
{
    static const char fn[] = "rkv_pool_copy_blocks";
    RKV_DEVICE_GUARD(device, fn);
    char *b = (char *)base;
    /* stream 0 does not wait for non-blocking streams that may still
     * write these blocks: order after all work, as copy_host does */
    RKV_CU_TRY(cudaDeviceSynchronize(), fn);
    for (uint32_t i = 0; i < n; i++) {
        if (src[i] == dst[i])
            continue;
        RKV_CU_TRY(cudaMemcpy2DAsync(b + (size_t)dst[i] * seg, stride,
                                     b + (size_t)src[i] * seg, stride, seg, height,
                                     cudaMemcpyDeviceToDevice, 0),
                   fn);
    }
    RKV_CU_TRY(cudaDeviceSynchronize(), fn);
    return RKV_OK;
}

extern "C" rkv_status rkv_copy_host(int device, void *base, size_t seg, size_t stride,
                                    uint32_t height, uint32_t n, const uint32_t *ids,
                                    void *host, int to_host)
{
    const char *fn = to_host ? "rkv_pool_copy_to_host" : "rkv_pool_copy_from_host";
    RKV_DEVICE_GUARD(device, fn);
    char *b = (char *)base, *h = (char *)host;
    const size_t bpb = seg * height;
    /* other streams may still write these blocks: order after all work */
    RKV_CU_TRY(cudaDeviceSynchronize(), fn);
    for (uint32_t i = 0; i < n; i++) {
        char *blk = b + (size_t)ids[i] * seg;
        if (to_host)
            RKV_CU_TRY(cudaMemcpy2D(h + i * bpb, seg, blk, stride, seg, height,
                                    cudaMemcpyDeviceToHost),
                       fn);
        else
            RKV_CU_TRY(cudaMemcpy2D(blk, stride, h + i * bpb, seg, seg, height,
                                    cudaMemcpyHostToDevice),
                       fn);
    }
    RKV_CU_TRY(cudaDeviceSynchronize(), fn);
    return RKV_OK;
}

/* ---- the tier's asynchronous copies ------------------------------------- */

extern "C" rkv_status rkv_copy_stream_create(int device, void **out)
{
    static const char fn[] = "tier copy stream: cudaStreamCreate";
    RKV_DEVICE_GUARD(device, fn);
    cudaStream_t s = NULL;
    cudaError_t e = cudaStreamCreate(&s);
    if (e != cudaSuccess)
        return rkv_cuda_fail(fn, e);
    *out = (void *)s;
    return RKV_OK;
}

extern "C" void rkv_copy_stream_destroy(int device, void *stream)
{
    if (stream == NULL)
        return;
    rkv_device_guard guard_(device);
    (void)cudaStreamDestroy((cudaStream_t)stream);
    (void)cudaGetLastError();
}

extern "C" rkv_status rkv_copy_stream_sync(int device, void *stream)
{
    static const char fn[] = "tier copy stream: cudaStreamSynchronize";
    RKV_DEVICE_GUARD(device, fn);
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)stream);
    return e == cudaSuccess ? RKV_OK : rkv_cuda_fail(fn, e);
}

/* One cudaMemcpyBatchAsync over the n blocks' n * height segments where
 * the runtime has it (CUDA 13's signature; the simulator's is the same):
 * one API call for a whole batch instead of one cudaMemcpy2DAsync per
 * block. 0: not taken (no batch API, the legacy stream, which the batch
 * API refuses, or a driver without it -- then nothing was queued and the
 * caller copies block by block); 1: *e is the call's result. */
#if defined(RKV_CUDASIM) || (defined(CUDART_VERSION) && CUDART_VERSION >= 13000)
static int copy_host_batch(cudaStream_t s, char *b, size_t seg, size_t stride,
                           uint32_t height, uint32_t n, const uint32_t *ids,
                           void *const *host, int to_host, cudaError_t *e)
{
    if (s == NULL)
        return 0;
#ifdef cudaStreamLegacy
    if (s == cudaStreamLegacy)
        return 0;
#endif
    const size_t count = (size_t)n * height;
    void **ptr = (void **)malloc(count * 2 * sizeof *ptr + count * sizeof(size_t));
    if (ptr == NULL)
        return 0; /* block by block needs no memory */
    void **dst = ptr, **src = ptr + count;
    size_t *sizes = (size_t *)(ptr + 2 * count);
    for (uint32_t i = 0, k = 0; i < n; i++)
        for (uint32_t h = 0; h < height; h++, k++) {
            char *dev = b + (size_t)ids[i] * seg + (size_t)h * stride;
            char *hb = (char *)host[i] + (size_t)h * seg;
            dst[k] = to_host ? (void *)hb : (void *)dev;
            src[k] = to_host ? (void *)dev : (void *)hb;
            sizes[k] = seg;
        }
    /* stream order: the device blocks were written by earlier work on it */
    cudaMemcpyAttributes attr;
    memset(&attr, 0, sizeof attr);
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
    size_t idx = 0;
    *e = cudaMemcpyBatchAsync(dst, (const void *const *)src, sizes, count, &attr, &idx, 1, s);
    free(ptr);
    if (*e == cudaErrorNotSupported || *e == cudaErrorCallRequiresNewerDriver) {
        (void)cudaGetLastError(); /* refused whole: nothing queued */
        return 0;
    }
    return 1;
}
#else
static int copy_host_batch(cudaStream_t, char *, size_t, size_t, uint32_t, uint32_t,
                           const uint32_t *, void *const *, int, cudaError_t *)
{
    return 0;
}
#endif

extern "C" rkv_status rkv_copy_host_async(int device, void *stream, void *base,
                                          size_t seg, size_t stride, uint32_t height,
                                          uint32_t n, const uint32_t *ids,
                                          void *const *host, int to_host)
{
    const char *fn = to_host ? "tier store: cudaMemcpy2DAsync (device to host)"
                             : "tier load: cudaMemcpy2DAsync (host to device)";
    RKV_DEVICE_GUARD(device, fn);
    char *b = (char *)base;
    cudaStream_t s = (cudaStream_t)stream;
    cudaError_t e = cudaSuccess;
    if (n > 1 && copy_host_batch(s, b, seg, stride, height, n, ids, host, to_host, &e))
        return e == cudaSuccess
                   ? RKV_OK
                   : rkv_cuda_fail(to_host ? "tier store: cudaMemcpyBatchAsync (device to host)"
                                           : "tier load: cudaMemcpyBatchAsync (host to device)",
                                   e);
    for (uint32_t i = 0; i < n; i++) {
        char *blk = b + (size_t)ids[i] * seg;
        e = to_host ? cudaMemcpy2DAsync(host[i], seg, blk, stride, seg, height,
                                        cudaMemcpyDeviceToHost, s)
                    : cudaMemcpy2DAsync(blk, stride, host[i], seg, seg, height,
                                        cudaMemcpyHostToDevice, s);
        if (e != cudaSuccess)
            return rkv_cuda_fail(fn, e);
    }
    return RKV_OK;
}

extern "C" rkv_status rkv_copy_event_create(int device, void **out)
{
    static const char fn[] = "tier copy event: cudaEventCreateWithFlags";
    RKV_DEVICE_GUARD(device, fn);
    cudaEvent_t ev = NULL;
    /* no timing: the library reads no clock, and timing events cost more */
    cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e != cudaSuccess)
        return rkv_cuda_fail(fn, e);
    *out = (void *)ev;
    return RKV_OK;
}

extern "C" rkv_status rkv_copy_event_record(int device, void *event, void *stream)
{
    static const char fn[] = "tier copy event: cudaEventRecord";
    RKV_DEVICE_GUARD(device, fn);
    cudaError_t e = cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream);
    return e == cudaSuccess ? RKV_OK : rkv_cuda_fail(fn, e);
}

extern "C" rkv_status rkv_copy_event_query(int device, void *event, int *done)
{
    static const char fn[] = "tier copy event: cudaEventQuery";
    *done = 0;
    RKV_DEVICE_GUARD(device, fn);
    cudaError_t e = cudaEventQuery((cudaEvent_t)event);
    if (e == cudaErrorNotReady) {
        /* still running, not a failure; the runtime may record it as the
         * thread's last error, which a later launch check would then
         * report: clear it, as PyTorch's event query does */
        (void)cudaGetLastError();
        return RKV_OK;
    }
    if (e != cudaSuccess)
        return rkv_cuda_fail(fn, e);
    *done = 1;
    return RKV_OK;
}

extern "C" rkv_status rkv_copy_event_sync(int device, void *event)
{
    static const char fn[] = "tier copy event: cudaEventSynchronize";
    RKV_DEVICE_GUARD(device, fn);
    cudaError_t e = cudaEventSynchronize((cudaEvent_t)event);
    return e == cudaSuccess ? RKV_OK : rkv_cuda_fail(fn, e);
}

extern "C" void rkv_copy_event_destroy(int device, void *event)
{
    if (event == NULL)
        return;
    rkv_device_guard guard_(device);
    (void)cudaEventDestroy((cudaEvent_t)event);
    (void)cudaGetLastError();
}
