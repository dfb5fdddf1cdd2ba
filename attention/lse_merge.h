/*
 * attention/lse_merge.h -- the weights that merge two attention states by
 * their log-sum-exp, as one inline function for the CPU reference (C) and
 * the CUDA merge kernel (CUDA or the simulator), so both treat an empty
 * state (lse -inf) the same way: weight 0, skipped rather than multiplied,
 * since its values may be anything, NaN included.
 */
#ifndef RKV_ATTENTION_LSE_MERGE_H
#define RKV_ATTENTION_LSE_MERGE_H

#include <math.h>

#ifdef __CUDACC__
#define RKV_LSE_FN static __host__ __device__ __forceinline__
#else
#define RKV_LSE_FN static inline
#endif

/* Sets *wa, *wb (summing to 1) for states whose lse are la and lb and
 * returns the merged lse; both weights 0 and -inf when both are empty. */
RKV_LSE_FN float rkv_lse_merge_weights(float la, float lb, float *wa, float *wb)
{
    float m = la > lb ? la : lb;
    *wa = 0.0f;
    *wb = 0.0f;
    if (m == -INFINITY)
        return -INFINITY;
    float ea = expf(la - m), eb = expf(lb - m);
    float inv = 1.0f / (ea + eb);
    *wa = ea * inv;
    *wb = eb * inv;
    return m + logf(ea + eb);
}

#endif
