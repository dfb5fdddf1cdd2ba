/*
 * tests/support/cuda_buf.h -- device buffers for the CUDA tests (real GPU or
 * the simulator): a copy of host bytes on the device, or a poisoned one
 * (0xff bytes, NaN in every float dtype) for outputs, so a kernel that skips
 * an element is caught; and the copy back. Header-only because only the
 * CUDA test targets have the CUDA runtime; include after <cuda_runtime.h>.
 * Every CUDA call is asserted.
 */
#ifndef RKV_TEST_CUDA_BUF_H
#define RKV_TEST_CUDA_BUF_H

#include <criterion/criterion.h>
#include <stddef.h>

/* h != NULL: a device copy of h's bytes; h == NULL: bytes of 0xff. */
static inline void *tu_dev_copy(const void *h, size_t bytes)
{
    void *d = NULL;
    cr_assert_eq(cudaMalloc(&d, bytes ? bytes : 1), cudaSuccess);
    if (h != NULL)
        cr_assert_eq(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    else
        cr_assert_eq(cudaMemset(d, 0xff, bytes ? bytes : 1), cudaSuccess);
    return d;
}

static inline void tu_host_of(void *h, const void *d, size_t bytes)
{
    cr_assert_eq(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
}

#endif
