/*
 * tests/test_cuda_linked.c -- a program that links a CUDA backend itself
 * (here the "nodevice" stand-in of tests/fake/, linked as a shared library
 * under a name no search would find) gets that backend when it creates a
 * CUDA pool: the core resolves the backend's entry at link time and never
 * searches. With RKV_CUDA_BACKEND set, the setting wins.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "radixkv.h"
#include "tests/support/handles.h"

Test(cuda_linked, linked_backend_used)
{
    cr_assert_eq(unsetenv("RKV_CUDA_BACKEND"), 0);
    rkv_pool *p = NULL;
    cr_assert_eq(tu_cuda_pool(4, 64, &p), RKV_ERR_NO_DEVICE);
    cr_assert_null(p);
    cr_assert_not_null(strstr(rkv_last_error(), "fake backend"), "%s", rkv_last_error());
}

Test(cuda_linked, environment_wins)
{
    cr_assert_eq(setenv("RKV_CUDA_BACKEND", "/nonexistent/libradixkv_cuda.so.0", 1), 0);
    rkv_pool *p = NULL;
    cr_assert_eq(tu_cuda_pool(4, 64, &p), RKV_ERR_NO_DEVICE);
    cr_assert_not_null(strstr(rkv_last_error(), "/nonexistent/libradixkv_cuda.so.0"), "%s",
                       rkv_last_error());
}
