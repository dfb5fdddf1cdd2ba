/*
 * alloc/pool_cuda.h -- device memory of a CUDA pool (alloc/pool_cuda.cu).
 * Backend-only: the core reaches these through common/cuda_backend.h.
 */
#ifndef RKV_ALLOC_POOL_CUDA_H
#define RKV_ALLOC_POOL_CUDA_H

#include <stddef.h>

#include "radixkv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* RKV_ERR_NO_DEVICE without a device, RKV_ERR_INVALID_ARG for a device
 * index out of range; bytes == 0 only checks the device (*out = NULL). */
rkv_status rkv_pool_cuda_alloc(int device, size_t bytes, void **out);
void rkv_pool_cuda_free(int device, void *p);

/* Page-locked host memory for the host tier (cudaHostAlloc / cudaFreeHost):
 * RKV_ERR_CUDA with the runtime's reason when it cannot be had. */
rkv_status rkv_pinned_alloc(size_t bytes, void **out);
void rkv_pinned_free(void *p);

#ifdef __cplusplus
}
#endif

#endif
