/*
 * tests/test_cuda_backend.c -- how the core finds the CUDA backend
 * (common/cuda_loader.c) when a CUDA pool is created, on any machine: no
 * GPU is needed, because every case here either refuses the backend before
 * a device is touched or accepts RKV_ERR_NO_DEVICE from the real backend.
 *
 * Each Criterion test runs in its own process, so setenv stays local.
 * FAKE_CUDA_* name the stand-in modules of tests/fake/; RKV_CUDA_BACKEND_FILE
 * names the real backend when this build made one.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "radixkv.h"
#include "tests/support/handles.h"

#define SONAME "libradixkv_cuda.so.0"
#define NOT_LOADED "cannot load the CUDA backend"

/* Creating a CUDA pool with RKV_CUDA_BACKEND=path fails with NO_DEVICE,
 * leaves *out alone, and the message contains every piece of `want`. */
static void refused(const char *path, const char *want1, const char *want2)
{
    cr_assert_eq(setenv("RKV_CUDA_BACKEND", path, 1), 0);
    rkv_pool *p = NULL;
    rkv_status st = tu_cuda_pool(4, 64, &p);
    cr_assert_eq(st, RKV_ERR_NO_DEVICE, "status %d: %s", st, rkv_last_error());
    cr_assert_null(p);
    const char *msg = rkv_last_error();
    cr_assert_not_null(strstr(msg, want1), "message lacks \"%s\": %s", want1, msg);
    cr_assert_not_null(strstr(msg, want2), "message lacks \"%s\": %s", want2, msg);
}

Test(cuda_backend, missing_file_is_no_device_naming_it)
{
    refused("/nonexistent/radixkv-test/" SONAME, "/nonexistent/radixkv-test/" SONAME,
            "RKV_CUDA_BACKEND");
}

Test(cuda_backend, wrong_abi_version_refused)
{
    refused(FAKE_CUDA_BADABI, FAKE_CUDA_BADABI, "ABI version 999");
}

Test(cuda_backend, library_without_entry_refused)
{
    refused(FAKE_CUDA_NOSYM, FAKE_CUDA_NOSYM, "no symbol rkv_cuda_backend_v1");
}

Test(cuda_backend, backend_message_passed_on)
{
    /* the table is valid: the failure and its sentence are the backend's */
    refused(FAKE_CUDA_NODEVICE, "fake backend: no CUDA device in this test", "fake");
}

Test(cuda_backend, host_pool_loads_nothing)
{
    cr_assert_eq(setenv("RKV_CUDA_BACKEND", "/nonexistent/" SONAME, 1), 0);
    rkv_pool_config cfg;
    rkv_pool_config_init(&cfg);
    cfg.num_blocks = 4;
    rkv_pool *p = NULL;
    cr_assert_eq(rkv_pool_create(&cfg, &p), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(rkv_pool_check(p), RKV_OK, "%s", rkv_last_error());
    rkv_pool_destroy(p);
}

/* Without RKV_CUDA_BACKEND: the backend next to the program (this test
 * links libradixkv statically, so "next to libradixkv" is its own
 * directory, where the build puts libradixkv_cuda) -- or, in a build
 * without one, NO_DEVICE naming the soname. */
Test(cuda_backend, default_search)
{
    cr_assert_eq(unsetenv("RKV_CUDA_BACKEND"), 0);
    rkv_pool *p = NULL;
    rkv_status st = tu_cuda_pool(4, 64, &p);
#ifdef RKV_CUDA_BACKEND_FILE
    cr_assert(st == RKV_OK || st == RKV_ERR_NO_DEVICE, "status %d: %s", st,
              rkv_last_error());
    if (st == RKV_OK) {
        cr_assert_eq(rkv_pool_check(p), RKV_OK, "%s", rkv_last_error());
        rkv_pool_destroy(p);
    } else {
        cr_assert_null(strstr(rkv_last_error(), NOT_LOADED), "%s", rkv_last_error());
    }
#else
    cr_assert_eq(st, RKV_ERR_NO_DEVICE, "status %d: %s", st, rkv_last_error());
    cr_assert_null(p);
    cr_assert_not_null(strstr(rkv_last_error(), NOT_LOADED " " SONAME), "%s",
                       rkv_last_error());
#endif
}

#ifdef RKV_CUDA_BACKEND_FILE
Test(cuda_backend, env_selects_the_built_backend)
{
    cr_assert_eq(setenv("RKV_CUDA_BACKEND", RKV_CUDA_BACKEND_FILE, 1), 0);
    rkv_pool *p = NULL;
    rkv_status st = tu_cuda_pool(4, 64, &p);
    cr_assert(st == RKV_OK || st == RKV_ERR_NO_DEVICE, "status %d: %s", st,
              rkv_last_error());
    if (st == RKV_OK)
        rkv_pool_destroy(p);
    else
        cr_assert_null(strstr(rkv_last_error(), NOT_LOADED), "%s", rkv_last_error());
}
#endif
