/*
 * common/dtype.h -- facts about a KV dtype that several layers need (the
 * pool sizes rows by them, attention picks its loads, the cost model its
 * bytes), stated once so the layers cannot disagree.
 */
#ifndef RKV_COMMON_DTYPE_H
#define RKV_COMMON_DTYPE_H

#include "radixkv.h"

/* 1 for the dtypes stored as codes plus f32 scales (radixkv/pool.h). */
static inline int rkv_dtype_quantized(rkv_dtype d)
{
    return d == RKV_DTYPE_FP8_E4M3 || d == RKV_DTYPE_FP8_E5M2 ||
           d == RKV_DTYPE_INT8 || d == RKV_DTYPE_INT4;
}

#endif
