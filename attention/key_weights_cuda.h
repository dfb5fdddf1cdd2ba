/*
 * attention/key_weights_cuda.h -- the device side of the per-key attention
 * weights (rkv_attn_key_weights, include/radixkv/kv_evict.h; semantics:
 * the CPU reference in attention/kv_evict.c): one request, q rows at its
 * last num_rows positions, weights[t] += sum over rows and query heads of
 * softmax probability of key t (window and sinks as rkv_attn_params).
 *
 * Not yet in the backend table (common/cuda_backend.h): the kernels are
 * tested on the CUDA simulator against the CPU reference
 * (tests/sim/test_key_weights.cu), and a front end reaches them once the
 * table carries the entry.
 */
#ifndef RKV_ATTENTION_KEY_WEIGHTS_CUDA_H
#define RKV_ATTENTION_KEY_WEIGHTS_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "radixkv.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rkv_kw_geom {
    rkv_dtype dtype;        /* K and q: f16, bf16 or f32 (else unsupported) */
    uint32_t page_size;
    uint32_t num_kv_heads, num_qo_heads, head_dim;
    size_t block_stride, token_stride, head_stride; /* bytes (pool strides) */
    uint32_t kv_len;        /* the request's tokens                         */
    uint32_t num_rows;      /* 1 .. kv_len                                  */
    uint32_t window, sinks; /* rkv_attn_params window_left, num_sink_tokens */
    float scale;            /* sm_scale                                     */
} rkv_kw_geom;

/* Device floats of scratch the launch needs: num_rows * num_qo_heads *
 * kv_len. */
size_t rkv_kw_scratch_floats(const rkv_kw_geom *g);

/* Queues the two kernels on stream (a cudaStream_t; NULL: the default):
 * kbase the layer's K plane, pages the request's block ids (device),
 * q [num_rows][num_qo_heads][head_dim] (device, dtype), scratch and
 * weights [kv_len] (device floats, accumulated into). RKV_ERR_UNSUPPORTED
 * for another dtype; RKV_ERR_CUDA when a launch fails. */
rkv_status rkv_kw_cuda_launch(const rkv_kw_geom *g, const void *kbase,
                              const uint32_t *pages, const void *q,
                              float *scratch, float *weights, void *stream);

#ifdef __cplusplus
}
#endif

#endif
