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

static rkv_status make_cuda_pool(rkv_pool **out)
{
    rkv_pool_config cfg;
    rkv_pool_config_init(&cfg);
    cfg.num_blocks = 4;
    cfg.num_layers = 1;
    cfg.num_kv_heads = 1;
    cfg.head_dim = 64;
    cfg.device = RKV_DEVICE_CUDA;
    return rkv_pool_create(&cfg, out);
}

Test(cuda_linked, linked_backend_used)
{
    cr_assert_eq(unsetenv("RKV_CUDA_BACKEND"), 0);
    rkv_pool *p = NULL;
    cr_assert_eq(make_cuda_pool(&p), RKV_ERR_NO_DEVICE);
    cr_assert_null(p);
    cr_assert_not_null(strstr(rkv_last_error(), "fake backend"), "%s", rkv_last_error());
}

Test(cuda_linked, environment_wins)
{
    cr_assert_eq(setenv("RKV_CUDA_BACKEND", "/nonexistent/libradixkv_cuda.so.0", 1), 0);
    rkv_pool *p = NULL;
    cr_assert_eq(make_cuda_pool(&p), RKV_ERR_NO_DEVICE);
    cr_assert_not_null(strstr(rkv_last_error(), "/nonexistent/libradixkv_cuda.so.0"), "%s",
                       rkv_last_error());
}
