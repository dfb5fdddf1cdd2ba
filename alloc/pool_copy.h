/*
 * alloc/pool_copy.h -- the copy stream, asynchronous block copies and
 * events of the tier's two-phase copies (alloc/pool_copy.cu, backend ABI
 * 4). Backend-only: the core reaches these through common/cuda_backend.h.
 */
#ifndef RKV_ALLOC_POOL_COPY_H
#define RKV_ALLOC_POOL_COPY_H

#include <stddef.h>
#include <stdint.h>

#include "radixkv.h"

#ifdef __cplusplus
extern "C" {
#endif

rkv_status rkv_copy_stream_create(int device, void **out);
void rkv_copy_stream_destroy(int device, void *stream);
rkv_status rkv_copy_stream_sync(int device, void *stream);
rkv_status rkv_copy_host_async(int device, void *stream, void *base, size_t seg,
                               size_t stride, uint32_t height, uint32_t n,
                               const uint32_t *ids, void *const *host,
                               int to_host);
rkv_status rkv_copy_event_create(int device, void **out);
rkv_status rkv_copy_event_record(int device, void *event, void *stream);
rkv_status rkv_copy_event_query(int device, void *event, int *done);
rkv_status rkv_copy_event_sync(int device, void *event);
void rkv_copy_event_destroy(int device, void *event);

#ifdef __cplusplus
}
#endif

#endif
