/*
 * tests/fake/fake_cuda_backend.c -- stand-ins for libradixkv_cuda, built as
 * three loadable modules for tests/test_cuda_backend.c:
 *   FAKE_BADABI    exports the entry, table ABI version 999 (refused);
 *   FAKE_NOSYM     exports no entry (refused);
 *   FAKE_NODEVICE  a valid table whose mem_alloc fails with NO_DEVICE and
 *                  its own message (the core must pass that message on).
 * Only abi, size, last_error, mem_alloc and (tests/test_store.c, which
 * loads the "nodevice" one through $RKV_CUDA_BACKEND) host_alloc /
 * host_free are ever reached: the fake "pinned" memory is aligned host
 * memory, so a host store's pinned path runs without a GPU.
 */
#include <stddef.h>
#include <stdlib.h>

#include "common/cuda_backend.h"

static const char *fake_last_error(void)
{
    return "fake backend: no CUDA device in this test";
}

static rkv_status fake_mem_alloc(int device, size_t bytes, void **out)
{
    (void)device;
    (void)bytes;
    (void)out;
    return RKV_ERR_NO_DEVICE;
}

static rkv_status fake_host_alloc(size_t bytes, void **out)
{
    return posix_memalign(out, 4096, bytes > 0 ? bytes : 1) == 0 ? RKV_OK
                                                                : RKV_ERR_CUDA;
}

static void fake_host_free(void *p)
{
    free(p);
}

static const rkv_cuda_backend fake_table = {
#ifdef FAKE_BADABI
    .abi = 999u,
#else
    .abi = RKV_CUDA_BACKEND_ABI,
#endif
    .size = (uint32_t)sizeof(rkv_cuda_backend),
    .last_error = fake_last_error,
    .mem_alloc = fake_mem_alloc,
    .host_alloc = fake_host_alloc,
    .host_free = fake_host_free,
};

#ifdef FAKE_NOSYM
const rkv_cuda_backend *fake_cuda_backend_unnamed(void);
const rkv_cuda_backend *fake_cuda_backend_unnamed(void)
#else
const rkv_cuda_backend *RKV_CUDA_BACKEND_ENTRY(void);
const rkv_cuda_backend *RKV_CUDA_BACKEND_ENTRY(void)
#endif
{
    return &fake_table;
}
