/*
 * common/status.c -- status texts and the thread-local last-error message.
 *
 * Owns: rkv_strerror(), rkv_last_error() and rkv_set_error(), which every
 * module calls when it returns a failing status so that an embedding server
 * can log a precise sentence. Invariant: the message buffer always holds a
 * NUL-terminated string (possibly empty); formatting never allocates, so
 * reporting an out-of-memory condition cannot itself fail.
 */
#include "common/status.h"

#include <stdarg.h>
#include <stdio.h>

/* Room for a full path (PATH_MAX 4096) plus the sentence around it, so a
 * message never cuts the name it is about. */
static _Thread_local char rkv_error_buf[8192];

const char *rkv_strerror(rkv_status status)
{
    switch (status) {
    case RKV_OK: return "ok";
    case RKV_ERR_INVALID_ARG: return "invalid argument";
    case RKV_ERR_NOMEM: return "out of host memory";
    case RKV_ERR_NO_SPACE: return "no free KV block, even after eviction";
    case RKV_ERR_STATE: return "operation not valid in the current state";
    case RKV_ERR_STALE_HANDLE: return "stale node handle";
    case RKV_ERR_BUSY: return "busy: locks are held, requests are running or the pool has a tree";
    case RKV_ERR_NOT_FOUND: return "not found";
    case RKV_ERR_DUPLICATE: return "duplicate id";
    case RKV_ERR_CUDA: return "CUDA error";
    case RKV_ERR_NO_DEVICE: return "no CUDA device (or built without CUDA)";
    case RKV_ERR_UNSUPPORTED: return "unsupported configuration";
    case RKV_ERR_FORMAT: return "malformed input";
    case RKV_ERR_IO: return "I/O error";
    case RKV_ERR_CORRUPT: return "invariant violated";
    case RKV_ERR_PIN_CAP: return "pin refused: pinned pages would exceed the cap";
    }
    return "unknown status";
}

const char *rkv_last_error(void)
{
    return rkv_error_buf;
}

rkv_status rkv_set_error(rkv_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rkv_error_buf, sizeof rkv_error_buf, fmt, ap);
    va_end(ap);
    return status;
}

rkv_status rkv_null_arg(const char *fn, const void *a, const char *a_name,
                        const char *b_name)
{
    return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL %s", fn,
                         a == NULL ? a_name : b_name);
}

void rkv_clear_error(void)
{
    rkv_error_buf[0] = '\0';
}
