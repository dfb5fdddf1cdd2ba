/*
 * common/cuda_loader.h -- finding and loading the CUDA backend
 * (libradixkv_cuda) for a CUDA pool or a pinned host tier
 * (common/cuda_loader.c). The table it hands out is common/cuda_backend.h.
 *
 * Search order:
 *   1. $RKV_CUDA_BACKEND, if set and not empty: that file and nothing else;
 *   2. a backend the application linked (the entry resolves at link or load
 *      time, no dlopen);
 *   3. dlopen(RKV_CUDA_BACKEND_SONAME) through the usual library path;
 *   4. RKV_CUDA_BACKEND_SONAME in the directory libradixkv itself was loaded
 *      from (dladdr), so an installed prefix works without ld.so.cache.
 *
 * Invariant: a loaded rkv_cuda_lib's table has passed the ABI check and
 * stays valid until rkv_cuda_unload.
 */
#ifndef RKV_COMMON_CUDA_LOADER_H
#define RKV_COMMON_CUDA_LOADER_H

#include "common/cuda_backend.h"

/* A loaded backend: handle is the dlopen handle (NULL when the application
 * linked the backend), be the validated table (NULL when none). */
typedef struct rkv_cuda_lib {
    void *handle;
    const rkv_cuda_backend *be;
} rkv_cuda_lib;

/* Finds, loads and validates the backend (order above). fn names the public
 * call in the message. On failure: RKV_ERR_NO_DEVICE naming every file it
 * tried, *out untouched. */
rkv_status rkv_cuda_load(const char *fn, rkv_cuda_lib *out);
/* Releases what rkv_cuda_load took; zeroes *lib. NULL / zeroed: no-op. */
void rkv_cuda_unload(rkv_cuda_lib *lib);

#endif
