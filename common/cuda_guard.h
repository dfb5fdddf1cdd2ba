/*
 * common/cuda_guard.h -- for the CUDA backend's sources (alloc/ *.cu,
 * attention/ *.cu) only: a scope that runs on one device and restores the
 * caller's, and the turning of a runtime error into RKV_ERR_CUDA.
 *
 * Invariant: every failure reported here also clears the runtime's last
 * error, so that a stale non-sticky error is never blamed on a later call
 * (a launch check reads it).
 */
#ifndef RKV_COMMON_CUDA_GUARD_H
#define RKV_COMMON_CUDA_GUARD_H

#include <cuda_runtime.h>

#include "common/status.h"

/* Runs on `dev` and restores the caller's device; ok is false (and nothing
 * is restored) when the device could not be selected. */
struct rkv_device_guard {
    int prev;
    bool ok;
    explicit rkv_device_guard(int dev) : prev(0), ok(false)
    {
        if (cudaGetDevice(&prev) == cudaSuccess && cudaSetDevice(dev) == cudaSuccess)
            ok = true;
        else
            (void)cudaGetLastError();
    }
    ~rkv_device_guard()
    {
        if (ok)
            (void)cudaSetDevice(prev);
    }
};

/* RKV_ERR_CUDA "what: <the runtime's reason>". */
static inline rkv_status rkv_cuda_fail(const char *what, cudaError_t e)
{
    (void)cudaGetLastError();
    return rkv_set_error(RKV_ERR_CUDA, "%s: %s", what, cudaGetErrorString(e));
}

/* Returns RKV_ERR_CUDA from the enclosing function when call fails. */
#define RKV_CU_TRY(call, what)                                                   \
    do {                                                                         \
        cudaError_t e_ = (call);                                                 \
        if (e_ != cudaSuccess)                                                   \
            return rkv_cuda_fail((what), e_);                                    \
    } while (0)

/* Selects dev for the rest of the scope, or returns RKV_ERR_CUDA. */
#define RKV_DEVICE_GUARD(dev, what)                                              \
    rkv_device_guard guard_(dev);                                                \
    if (!guard_.ok)                                                              \
        return rkv_set_error(RKV_ERR_CUDA, "%s: cannot select CUDA device %d",  \
                             (what), (dev));

#endif
