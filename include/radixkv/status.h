/*
 * radixkv/status.h -- status codes, the thread-local error text and the version of the library running.
 *
 * Part of the public API; include <radixkv.h> for all of it (the
 * conventions every call follows are stated there).
 */
#ifndef RADIXKV_STATUS_H
#define RADIXKV_STATUS_H

#include <stddef.h>
#include <stdint.h>

/* RKV_VERSION_MAJOR, _MINOR, _PATCH and RKV_VERSION_STRING ("0.1.0"),
 * generated from the build's project(VERSION): the version compiled
 * against. rkv_version() gives the version of the library running. */
#include "radixkv_version.h"

/* Every public header opens and closes its declarations with these: C
 * linkage for C++ callers, and default visibility, because the library
 * is built with -fvisibility=hidden and exports exactly what the public
 * headers declare (tests/scripts/check_exports.sh verifies it). */
#ifdef __cplusplus
#define RKV_BEGIN_DECLS extern "C" { _Pragma("GCC visibility push(default)")
#define RKV_END_DECLS _Pragma("GCC visibility pop") }
#else
#define RKV_BEGIN_DECLS _Pragma("GCC visibility push(default)")
#define RKV_END_DECLS _Pragma("GCC visibility pop")
#endif

RKV_BEGIN_DECLS

/* The version of the library running ("0.1.0"); RKV_VERSION_STRING is the
 * one compiled against. */
const char *rkv_version(void);

typedef enum rkv_status {
    RKV_OK = 0,
    RKV_ERR_INVALID_ARG = 1,  /* NULL, out of range, wrong length, bad token  */
    RKV_ERR_NOMEM = 2,        /* host memory allocation failed                */
    RKV_ERR_NO_SPACE = 3,     /* no free KV block, even after eviction        */
    RKV_ERR_STATE = 4,        /* not valid now: unlock without lock, unref of
                                 a free block, commit without a step ...      */
    RKV_ERR_STALE_HANDLE = 5, /* node handle from before a reset or eviction  */
    RKV_ERR_BUSY = 6,         /* refused while paths are locked / requests
                                 run, or the pool already has a tree        */
    RKV_ERR_NOT_FOUND = 7,    /* unknown request id                           */
    RKV_ERR_DUPLICATE = 8,    /* request id already submitted                 */
    RKV_ERR_CUDA = 9,         /* a CUDA runtime or cuBLAS call failed         */
    RKV_ERR_NO_DEVICE = 10,   /* built without CUDA, or no usable GPU         */
    RKV_ERR_UNSUPPORTED = 11, /* valid but not supported (e.g. head_dim 96
                                 on the GPU path)                             */
    RKV_ERR_FORMAT = 12,      /* malformed input data (e.g. a trace line)     */
    RKV_ERR_IO = 13,          /* file could not be read or written            */
    RKV_ERR_CORRUPT = 14,     /* a *_check() found a broken invariant         */
    RKV_ERR_PIN_CAP = 15      /* a pin would take pinned pages past the
                                 tree's cap (rkv_tree_config.max_pinned_pct) */
} rkv_status;

/* Short fixed text for a status ("invalid argument"). Never NULL. */
const char *rkv_strerror(rkv_status status);

/* Detail of the last failing call on this thread ("rkv_tree_unlock: lease
 * ... is not held in this tree"). Empty string if none. Valid until the
 * next failing call. */
const char *rkv_last_error(void);

RKV_END_DECLS

#endif /* RADIXKV_STATUS_H */
