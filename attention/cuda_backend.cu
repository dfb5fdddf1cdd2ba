/*
 * attention/cuda_backend.cu -- the one symbol libradixkv_cuda exports: the
 * table the core loads (see common/cuda_backend.h). It sits in attention/,
 * the highest layer whose code it gathers (alloc/ *.cu, attention/ *.cu).
 * Everything else in the backend is hidden (-fvisibility=hidden), so its
 * copy of the error reporting (common/status.c) never clashes with the
 * core's.
 *
 * Invariant: the table is a constant; entries are in the order of the
 * struct and every one is set (the core does not check for NULL entries).
 */
#include "alloc/pool_copy.h"
#include "alloc/pool_cuda.h"
#include "attention/attn_internal.h"
#include "common/cuda_backend.h"

static const rkv_cuda_backend rkv_cuda_table = {
    RKV_CUDA_BACKEND_ABI,
    (uint32_t)sizeof(rkv_cuda_backend),
    rkv_last_error,
    rkv_pool_cuda_alloc,
    rkv_pool_cuda_free,
    rkv_attn_cuda_create,
    rkv_attn_cuda_destroy,
    rkv_attn_cuda_set_stream,
    rkv_attn_cuda_sync,
    rkv_attn_cuda_append,
    rkv_attn_cuda_rows,
    rkv_attn_cuda_merge,
    rkv_copy_blocks,
    rkv_copy_host,
    rkv_attn_cuda_set_cascade_budget,
    rkv_pinned_alloc,
    rkv_pinned_free,
    rkv_copy_stream_create,
    rkv_copy_stream_destroy,
    rkv_copy_stream_sync,
    rkv_copy_host_async,
    rkv_copy_event_create,
    rkv_copy_event_record,
    rkv_copy_event_query,
    rkv_copy_event_sync,
    rkv_copy_event_destroy,
    rkv_attn_cuda_plan,
    rkv_attn_cuda_run,
    rkv_mla_cuda_create,
    rkv_mla_cuda_destroy,
    rkv_mla_cuda_append,
    rkv_mla_cuda_rows,
};

extern "C" __attribute__((visibility("default"))) const rkv_cuda_backend *
RKV_CUDA_BACKEND_ENTRY(void)
{
    return &rkv_cuda_table;
}
