/*
 * alloc/pool_cuda.cu -- the device memory of a CUDA pool, in the CUDA
 * backend (libradixkv_cuda). The core's alloc/pool.c reaches these through
 * the backend table (common/cuda_backend.h), so the core never links the
 * CUDA runtime.
 *
 * Invariants: the caller's current device is restored on every path; a
 * failing allocation leaves nothing allocated; memory is zeroed before it
 * is handed out (a pool's KV starts as zeros on every device).
 */
#include <cuda_runtime.h>

#include "alloc/pool_cuda.h"
#include "common/status.h"

extern "C" rkv_status rkv_pool_cuda_alloc(int device, size_t bytes, void **out)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count <= 0) {
        (void)cudaGetLastError();
        return rkv_set_error(RKV_ERR_NO_DEVICE,
                             "rkv_pool_create: no CUDA device is present");
    }
    if (device < 0 || device >= count)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_pool_create: cuda_device %d of %d devices", device,
                             count);
    *out = NULL;
    if (bytes == 0)
        return RKV_OK;
    int prev = 0;
    if (cudaGetDevice(&prev) != cudaSuccess)
        prev = device;
    void *p = NULL;
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess)
        e = cudaMalloc(&p, bytes);
    if (e == cudaSuccess) {
        e = cudaMemset(p, 0, bytes);
        if (e != cudaSuccess) {
            (void)cudaFree(p);
            p = NULL;
        }
    }
    (void)cudaSetDevice(prev);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return rkv_set_error(RKV_ERR_CUDA, "rkv_pool_create: cudaMalloc of %zu bytes: %s",
                             bytes, cudaGetErrorString(e));
    }
    *out = p;
    return RKV_OK;
}

extern "C" void rkv_pool_cuda_free(int device, void *p)
{
    if (p == NULL)
        return;
    int prev = 0;
    if (cudaGetDevice(&prev) != cudaSuccess)
        prev = device;
    (void)cudaSetDevice(device);
    (void)cudaFree(p);
    (void)cudaSetDevice(prev);
}

extern "C" rkv_status rkv_pinned_alloc(size_t bytes, void **out)
{
    void *p = NULL;
    cudaError_t e = cudaHostAlloc(&p, bytes > 0 ? bytes : 1, cudaHostAllocDefault);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return rkv_set_error(RKV_ERR_CUDA,
                             "rkv_store_create: cudaHostAlloc of %zu bytes: %s", bytes,
                             cudaGetErrorString(e));
    }
    *out = p;
    return RKV_OK;
}

extern "C" void rkv_pinned_free(void *p)
{
    if (p != NULL)
        (void)cudaFreeHost(p);
}
