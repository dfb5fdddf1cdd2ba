/*
 * tests/sim/test_cudasim.cu -- positive controls of the CUDA simulator
 * (attention/sim/): deliberately broken small kernels and calls that it
 * must report, so its checks cannot decay silently; plus the behaviours
 * test_attention_gpu relies on (NaN poison, deferred pinned copies,
 * schedules that expose a race). Built and run only with -DRKV_CUDA=SIM
 * (compiled as C++ with cudasim.h force-included, like the kernels).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include <cuda_runtime.h>
#include <cublas_v2.h>

#include "attention/cp_async.h"
#include "attention/launch.h"

#define CK(x) cr_assert_eq((x), cudaSuccess, "%s: %s", #x, rkvsim_last_message())

/* Kernels run at launch, so their errors come back from cudaGetLastError
 * (CI also runs this file with RKV_CUDASIM_DEFER=1; the deferred test
 * turns deferral on itself). */
static void eager(void) { rkvsim_set_deferred(0); }
TestSuite(cudasim, .init = eager);

/* The last error is `want` and the simulator's message contains `frag`. */
static void expect(cudaError_t got, cudaError_t want, const char *frag)
{
    cr_assert_eq(got, want, "got %d (%s), want %d", (int)got, cudaGetErrorString(got),
                 (int)want);
    cr_assert(strstr(cudaGetErrorString(got), frag) != NULL, "message \"%s\" lacks \"%s\"",
              cudaGetErrorString(got), frag);
}

/* ---- kernels (each broken on purpose unless named ok_) ---- */

__global__ void read_at(const float *p, size_t i, float *out)
{
    if (threadIdx.x == 0)
        out[0] = p[i];
}

__global__ void write_at(float *p, size_t i)
{
    if (threadIdx.x == 0)
        p[i] = 1.0f;
}

__global__ void barrier_in_branch(float *out)
{
    if (threadIdx.x < 16)
        __syncthreads();
    out[threadIdx.x] = 1.0f;
}

__global__ void exit_before_barrier(float *out)
{
    if (threadIdx.x == 5)
        return;
    __syncthreads();
    out[threadIdx.x] = 1.0f;
}

__global__ void two_barriers(float *out)
{
    if (threadIdx.x & 1)
        __syncthreads();
    else
        __syncthreads();
    out[threadIdx.x] = 1.0f;
}

__global__ void shfl_half_mask(float *out)
{
    float v = (float)threadIdx.x;
    v += __shfl_xor_sync(0x0000ffffu, v, 16); /* lanes 0-15 read lanes 16-31 */
    out[threadIdx.x] = v;
}

__global__ void shfl_exited_lane(float *out)
{
    if (threadIdx.x == 31)
        return;
    float v = (float)threadIdx.x;
    v += __shfl_down_sync(0xffffffffu, v, 1);
    out[threadIdx.x] = v;
}

__global__ void shfl_full_mask(float *out) /* fine with 32k threads, not with 48 */
{
    float v = (float)threadIdx.x;
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    out[threadIdx.x] = v;
}

__global__ void racy_neighbour(float *out)
{
    __shared__ float sh[64];
    sh[threadIdx.x] = (float)threadIdx.x;
    /* missing __syncthreads() */
    out[threadIdx.x] = sh[(threadIdx.x + 1) % 64];
}

__global__ void ok_neighbour(float *out)
{
    __shared__ float sh[64];
    sh[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = sh[(threadIdx.x + 1) % 64];
}

__global__ void shared_left_over(float *out)
{
    __shared__ float sh[1];
    if (blockIdx.x == 0)
        sh[0] = 42.0f;
    __syncthreads();
    out[blockIdx.x] = sh[0]; /* block 1 reads what block 0 left: must not see it */
}

__global__ void ok_copy(const float *in, float *out, unsigned n)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = in[i];
}

static float *dev_floats(size_t n)
{
    void *p = NULL;
    CK(cudaMalloc(&p, n * sizeof(float)));
    return (float *)p;
}

Test(cudasim, out_of_bounds_read_past_the_end)
{
    float *p = dev_floats(64), *o = dev_floats(1);
    RKV_LAUNCH(1, 32, 0, 0, read_at)(p, 64, o);
    expect(cudaGetLastError(), cudaErrorIllegalAddress, "0 bytes past the end");
    RKV_LAUNCH(1, 32, 0, 0, read_at)(p, 63, o); /* the last element is fine */
    CK(cudaGetLastError());
    CK(cudaFree(p));
    CK(cudaFree(o));
}

Test(cudasim, out_of_bounds_write_in_alignment_slack)
{
    float *p = dev_floats(10), *o = dev_floats(1); /* 40 bytes: slack up to 256 */
    RKV_LAUNCH(1, 32, 0, 0, write_at)(p, 12);
    expect(cudaGetLastError(), cudaErrorIllegalAddress, "wrote outside the 40-byte");
    (void)cudaFree(p);
    CK(cudaFree(o));
}

Test(cudasim, use_after_free)
{
    float *p = dev_floats(64), *o = dev_floats(1);
    CK(cudaFree(p));
    RKV_LAUNCH(1, 32, 0, 0, read_at)(p, 0, o);
    expect(cudaGetLastError(), cudaErrorIllegalAddress, "freed");
    CK(cudaFree(o));
}

Test(cudasim, host_pointer_argument)
{
    float host[4] = {0};
    float *o = dev_floats(1);
    RKV_LAUNCH(1, 32, 0, 0, read_at)(host, 0, o);
    expect(cudaGetLastError(), cudaErrorIllegalAddress, "not device memory");
    CK(cudaFree(o));
}

Test(cudasim, divergent_barriers)
{
    float *o = dev_floats(64);
    RKV_LAUNCH(1, 64, 0, 0, barrier_in_branch)(o);
    expect(cudaGetLastError(), cudaErrorIllegalInstruction, "barrier divergence");
    RKV_LAUNCH(1, 64, 0, 0, exit_before_barrier)(o);
    expect(cudaGetLastError(), cudaErrorIllegalInstruction, "has exited");
    RKV_LAUNCH(1, 64, 0, 0, two_barriers)(o);
    expect(cudaGetLastError(), cudaErrorIllegalInstruction, "barrier divergence");
    CK(cudaFree(o));
}

Test(cudasim, bad_shuffle_masks)
{
    float *o = dev_floats(64);
    RKV_LAUNCH(1, 32, 0, 0, shfl_half_mask)(o);
    expect(cudaGetLastError(), cudaErrorIllegalInstruction, "outside mask");
    RKV_LAUNCH(1, 32, 0, 0, shfl_exited_lane)(o);
    expect(cudaGetLastError(), cudaErrorIllegalInstruction, "has exited");
    RKV_LAUNCH(1, 48, 0, 0, shfl_full_mask)(o); /* lanes 48..63 are absent */
    expect(cudaGetLastError(), cudaErrorIllegalInstruction, "absent");
    RKV_LAUNCH(1, 64, 0, 0, shfl_full_mask)(o);
    CK(cudaGetLastError());
    float h[64];
    CK(cudaMemcpy(h, o, sizeof h, cudaMemcpyDeviceToHost));
    cr_assert_eq(h[0], 496.0f); /* 0 + 1 + ... + 31 */
    cr_assert_eq(h[40], 32.0f * 32 + 496.0f);
    CK(cudaFree(o));
}

Test(cudasim, bad_launch_configurations)
{
    float *o = dev_floats(64);
    RKV_LAUNCH(1, 2048, 0, 0, ok_neighbour)(o);
    expect(cudaGetLastError(), cudaErrorInvalidConfiguration, "block (2048");
    RKV_LAUNCH(dim3(1, 70000), 64, 0, 0, ok_neighbour)(o);
    expect(cudaGetLastError(), cudaErrorInvalidConfiguration, "grid (1,70000");
    RKV_LAUNCH(0, 64, 0, 0, ok_neighbour)(o);
    expect(cudaGetLastError(), cudaErrorInvalidConfiguration, "grid (0");
    RKV_LAUNCH(1, 64, 64 << 10, 0, ok_neighbour)(o);
    expect(cudaGetLastError(), cudaErrorInvalidValue, "dynamic shared memory");
    rkvsim_set_max_grid_x(8);
    RKV_LAUNCH(9, 64, 0, 0, ok_neighbour)(o);
    expect(cudaGetLastError(), cudaErrorInvalidConfiguration, "grid (9");
    rkvsim_set_max_grid_x(0);
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    CK(cudaSetDevice(1));
    RKV_LAUNCH(1, 64, 0, s, ok_neighbour)(o);
    expect(cudaGetLastError(), cudaErrorInvalidResourceHandle, "stream of device 0");
    CK(cudaSetDevice(0));
    CK(cudaStreamDestroy(s));
    CK(cudaFree(o));
}

static void run_racy(int order, float *h, bool racy)
{
    float *o = dev_floats(64);
    rkvsim_set_schedule(order, 7);
    if (racy)
        RKV_LAUNCH(1, 64, 0, 0, racy_neighbour)(o);
    else
        RKV_LAUNCH(1, 64, 0, 0, ok_neighbour)(o);
    CK(cudaGetLastError());
    CK(cudaMemcpy(h, o, 64 * sizeof(float), cudaMemcpyDeviceToHost));
    rkvsim_set_schedule(RKVSIM_FORWARD, 0);
    CK(cudaFree(o));
}

Test(cudasim, schedules_expose_a_race)
{
    float f[64], r[64], x[64];
    run_racy(RKVSIM_FORWARD, f, true);
    run_racy(RKVSIM_REVERSE, r, true);
    cr_assert(memcmp(f, r, sizeof f) != 0, "a missing barrier gave the same result both ways");
    cr_assert(isnan(f[0]), "forward: thread 0 reads shared memory not yet written (poison)");
    run_racy(RKVSIM_FORWARD, f, false);
    run_racy(RKVSIM_REVERSE, r, false);
    run_racy(RKVSIM_RANDOM, x, false);
    cr_assert(memcmp(f, r, sizeof f) == 0 && memcmp(f, x, sizeof f) == 0);
    cr_assert_eq(f[63], 0.0f);
}

Test(cudasim, shared_memory_is_per_block)
{
    float *o = dev_floats(2);
    RKV_LAUNCH(2, 32, 0, 0, shared_left_over)(o);
    CK(cudaGetLastError());
    float h[2];
    CK(cudaMemcpy(h, o, sizeof h, cudaMemcpyDeviceToHost));
    cr_assert_eq(h[0], 42.0f);
    cr_assert(isnan(h[1]), "block 1 saw block 0's shared memory: %g", h[1]);
    CK(cudaFree(o));
}

Test(cudasim, memory_is_poisoned_and_copies_are_checked)
{
    float *d = dev_floats(16), h[16];
    CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 16; i++)
        cr_assert(isnan(h[i]));
    expect(cudaMemcpy(d, h, 17 * sizeof(float), cudaMemcpyHostToDevice), cudaErrorInvalidValue,
           "overrun");
    expect(cudaMemcpy(h, d, sizeof h, cudaMemcpyHostToDevice), cudaErrorInvalidValue,
           "destination is host");
    expect(cudaMemcpy(d, h, sizeof h, cudaMemcpyDeviceToDevice), cudaErrorInvalidValue,
           "source host");
    expect(cudaMemset(d + 8, 0, 9 * sizeof(float)), cudaErrorInvalidValue, "overrun");
    CK(cudaFree(d));
    expect(cudaFree(d), cudaErrorInvalidValue, "double free");
}

Test(cudasim, deferred_copies_read_pinned_memory_late)
{
    rkvsim_set_deferred(1);
    float *d = dev_floats(4), *pin = NULL, page[4] = {1, 2, 3, 4}, h[4];
    CK(cudaHostAlloc((void **)&pin, sizeof page, cudaHostAllocDefault));
    memcpy(pin, page, sizeof page);
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaMemcpyAsync(d, pin, sizeof page, cudaMemcpyHostToDevice, s));
    pin[0] = 100; /* a pinned source is read when the copy runs */
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    cr_assert_eq(h[0], 100.0f);
    CK(cudaMemcpyAsync(d, page, sizeof page, cudaMemcpyHostToDevice, s));
    page[0] = 200; /* a pageable source is staged by the call */
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    cr_assert_eq(h[0], 1.0f);
    /* a kernel waits in its stream until something synchronises */
    float *e = dev_floats(4);
    RKV_LAUNCH(1, 32, 0, s, ok_copy)(d, e, 4);
    CK(cudaGetLastError());
    CK(cudaMemcpy(h, e, sizeof h, cudaMemcpyDeviceToHost)); /* legacy: s is non-blocking */
    cr_assert(isnan(h[0]), "the kernel ran before its stream was synchronised");
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(h, e, sizeof h, cudaMemcpyDeviceToHost));
    cr_assert_eq(h[0], 1.0f);
    /* errors of deferred kernels come back from the synchronisation */
    RKV_LAUNCH(1, 32, 0, s, read_at)(d, 64, e);
    CK(cudaGetLastError());
    expect(cudaStreamSynchronize(s), cudaErrorIllegalAddress, "past the end");
    CK(cudaStreamDestroy(s));
    CK(cudaFreeHost(pin));
    CK(cudaFree(d));
    CK(cudaFree(e));
    rkvsim_set_deferred(0);
}

struct __align__(16) f4 {
    float v[4];
};

/* Thread 0 copies in[0] into shared memory by cp.async and records what
 * it reads: out[0] after commit (and wait when `wait`), out[1] after a
 * wait; then copies in[1] without committing it, waits, and reads out[2].
 * With misaligned, one copy is misaligned. */
__global__ void cp_async_reads(const f4 *in, float *out, int wait, int misaligned)
{
    __shared__ f4 buf[2];
    if (threadIdx.x != 0)
        return;
    buf[0].v[0] = -1.0f;
    buf[1].v[0] = -1.0f;
    if (misaligned) {
        cp_async16((f4 *)((char *)&buf[0] + 4), in);
        return;
    }
    cp_async16(&buf[0], in);
    cp_async_commit();
    if (wait)
        cp_async_wait<0>();
    out[0] = buf[0].v[0];
    cp_async_wait<0>();
    out[1] = buf[0].v[0];
    cp_async16(&buf[1], in + 1);
    cp_async_wait<0>(); /* an uncommitted copy is in no group */
    out[2] = buf[1].v[0];
    cp_async_commit();
    cp_async_wait<0>();
}

/* cp.async lands at issue; deferred, only at the wait that completes its
 * committed group, so a read before the wait (or after a wait that did
 * not cover the copy) sees what was there before. */
Test(cudasim, deferred_cp_async_lands_at_its_wait)
{
    const float in_h[8] = {7, 0, 0, 0, 9, 0, 0, 0};
    float *in = dev_floats(8), *out = dev_floats(3), h[3];
    CK(cudaMemcpy(in, in_h, sizeof in_h, cudaMemcpyHostToDevice));
    for (int defer = 0; defer < 2; defer++)
        for (int wait = 0; wait < 2; wait++) {
            rkvsim_set_deferred(defer);
            RKV_LAUNCH(1, 32, 0, 0, cp_async_reads)((const f4 *)in, out, wait, 0);
            CK(cudaDeviceSynchronize());
            CK(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
            const int late = defer && !wait;
            cr_assert_eq(h[0], late ? -1.0f : 7.0f, "defer %d wait %d: %g", defer, wait,
                         (double)h[0]);
            cr_assert_eq(h[1], 7.0f);
            cr_assert_eq(h[2], defer ? -1.0f : 9.0f, "defer %d: uncommitted copy read %g",
                         defer, (double)h[2]);
        }
    rkvsim_set_deferred(0);
    RKV_LAUNCH(1, 32, 0, 0, cp_async_reads)((const f4 *)in, out, 1, 1);
    expect(cudaGetLastError(), cudaErrorIllegalInstruction, "cp.async of 16 bytes");
    CK(cudaFree(in));
    CK(cudaFree(out));
}

Test(cudasim, deferred_events_report_not_ready_once)
{
    rkvsim_set_deferred(1);
    float *d = dev_floats(4), *pin = NULL, h[4];
    CK(cudaHostAlloc((void **)&pin, 4 * sizeof(float), cudaHostAllocDefault));
    for (int i = 0; i < 4; i++)
        pin[i] = (float)i;
    cudaStream_t s;
    cudaEvent_t ev;
    CK(cudaStreamCreate(&s));
    CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CK(cudaMemcpy2DAsync(d, 2 * sizeof(float), pin, 2 * sizeof(float), 2 * sizeof(float), 2,
                         cudaMemcpyHostToDevice, s));
    CK(cudaEventRecord(ev, s));
    pin[0] = 50; /* the copy has not run: the DMA reads it later */
    cr_assert_eq(cudaEventQuery(ev), cudaErrorNotReady, "first query after the record");
    /* recorded as the last error, and cleared by reading it */
    cr_assert_eq(cudaGetLastError(), cudaErrorNotReady);
    CK(cudaGetLastError());
    CK(cudaEventQuery(ev)); /* the second runs the work before the event */
    pin[0] = 60;
    CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    cr_assert_eq(h[0], 50.0f);
    /* a record again: not ready once more; a sync clears it */
    CK(cudaEventRecord(ev, s));
    CK(cudaEventSynchronize(ev));
    CK(cudaEventQuery(ev));
    cudaEvent_t bad;
    expect(cudaEventCreateWithFlags(&bad, 0x80), cudaErrorInvalidValue, "flags 0x80");
    CK(cudaEventDestroy(ev));
    CK(cudaStreamDestroy(s));
    CK(cudaFreeHost(pin));
    CK(cudaFree(d));
    rkvsim_set_deferred(0);
}

Test(cudasim, cublas_argument_rules_and_extents)
{
    cublasHandle_t h;
    cr_assert_eq(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    float *a = dev_floats(6), *b = dev_floats(6), *c = dev_floats(4);
    float ha[6] = {1, 2, 3, 4, 5, 6}, hb[6] = {1, 0, 0, 1, 1, 1}, hc[4];
    CK(cudaMemcpy(a, ha, sizeof ha, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(b, hb, sizeof hb, cudaMemcpyHostToDevice));
    const float one = 1, zero = 0;
    /* C (2x2) = A (2x3, ld 2) . B (3x2, ld 3); C is NaN-poisoned, beta = 0
     * must not read it */
    cr_assert_eq(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, a,
                                            CUDA_R_32F, 2, 6, b, CUDA_R_32F, 3, 6, &zero, c,
                                            CUDA_R_32F, 2, 4, 1, CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT),
                 CUBLAS_STATUS_SUCCESS);
    CK(cudaMemcpy(hc, c, sizeof hc, cudaMemcpyDeviceToHost));
    cr_assert(hc[0] == 1 && hc[1] == 2 && hc[2] == 1 + 3 + 5 + 0 && hc[3] == 2 + 4 + 6,
              "%g %g %g %g", hc[0], hc[1], hc[2], hc[3]);
    cublasStatus_t s = cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, a,
                                                  CUDA_R_32F, 1, 6, b, CUDA_R_32F, 3, 6, &zero,
                                                  c, CUDA_R_32F, 2, 4, 1, CUBLAS_COMPUTE_32F,
                                                  CUBLAS_GEMM_DEFAULT);
    cr_assert_eq(s, CUBLAS_STATUS_INVALID_VALUE);
    cr_assert(strstr(cublasGetStatusString(s), "lda 1") != NULL, "%s", cublasGetStatusString(s));
    s = cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, a, CUDA_R_32F, 2,
                                   6, b, CUDA_R_32F, 3, 6, &zero, c, CUDA_R_32F, 2, 4, 2,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT); /* batch 2 */
    cr_assert_eq(s, CUBLAS_STATUS_INVALID_VALUE);
    cr_assert(strstr(cublasGetStatusString(s), "operand A") != NULL, "%s",
              cublasGetStatusString(s));
    s = cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, a, CUDA_R_16F, 2,
                                   6, b, CUDA_R_32F, 3, 6, &zero, c, CUDA_R_32F, 2, 4, 1,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    cr_assert_eq(s, CUBLAS_STATUS_NOT_SUPPORTED);
    cr_assert_eq(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(c));
}

Test(cudasim, expf_is_approximate_but_close)
{
    for (float x = -80.0f; x < 80.0f; x += 0.37f) {
        double want = exp((double)x), got = __expf(x);
        cr_assert(fabs(got - want) <= 1e-5 * want + 1e-37, "x %g: %g vs %g", x, got, want);
    }
    cr_assert_eq(__expf(-INFINITY), 0.0f);
}

/* ---- traffic meter (scripts/attn-traffic relies on its counts) ---- */

#include "attention/devmem.h"

__global__ void ok_metered_sum(const float *a, const float *b, float *out, unsigned n)
{
    float s = 0.0f;
    for (unsigned i = threadIdx.x; i < n; i += blockDim.x)
        s += ld_global(a + i) + ld_global(b + i) + ld_global(b + i); /* b twice */
    st_global(out + blockIdx.x * blockDim.x + threadIdx.x, s);
}

/* Exact counts per kernel and region: a read once, b twice, out written
 * once per thread; a host copy, a memset, a malloc and a sync counted as
 * such; nothing counted while the meter is off. */
Test(cudasim, meter_counts_accesses_per_kernel_and_region)
{
    const unsigned n = 1000, blocks = 3, threads = 64;
    float *a, *b, *o;
    CK(cudaMalloc((void **)&a, n * 4));
    CK(cudaMalloc((void **)&b, n * 4));
    CK(cudaMalloc((void **)&o, blocks * threads * 4));
    rkvsim_meter_reset();
    cr_assert_eq(rkvsim_meter_region(a, n * 4), 1);
    cr_assert_eq(rkvsim_meter_region(b, n * 4), 2);
    rkvsim_meter_enable(1);
    float host[1000] = {0};
    CK(cudaMemcpy(a, host, sizeof host, cudaMemcpyHostToDevice));
    CK(cudaMemset(b, 0, n * 4));
    RKV_LAUNCH(blocks, threads, 0, 0, ok_metered_sum)(a, b, o, n);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    void *extra;
    CK(cudaMalloc(&extra, 16));
    rkvsim_meter_enable(0);
    RKV_LAUNCH(1, 32, 0, 0, ok_metered_sum)(a, b, o, n); /* not counted */
    CK(cudaDeviceSynchronize());
    const char *k = "ok_metered_sum";
    cr_assert_eq(rkvsim_meter_get(k, -1, RKVSIM_METER_LAUNCHES), 1);
    cr_assert_eq(rkvsim_meter_get(k, 1, RKVSIM_METER_READ), (uint64_t)blocks * n * 4);
    cr_assert_eq(rkvsim_meter_get(k, 2, RKVSIM_METER_READ), (uint64_t)blocks * n * 8);
    cr_assert_eq(rkvsim_meter_get(k, 0, RKVSIM_METER_READ), 0);
    cr_assert_eq(rkvsim_meter_get(k, 0, RKVSIM_METER_WRITE), (uint64_t)blocks * threads * 4);
    cr_assert_eq(rkvsim_meter_get("[H2D]", 1, RKVSIM_METER_WRITE), (uint64_t)n * 4);
    cr_assert_eq(rkvsim_meter_get("[memset]", 2, RKVSIM_METER_WRITE), (uint64_t)n * 4);
    cr_assert_eq(rkvsim_meter_get("[malloc]", -1, RKVSIM_METER_LAUNCHES), 1);
    /* cudaMemcpy, cudaMemset (both blocking here) and cudaDeviceSynchronize */
    cr_assert_eq(rkvsim_meter_get("[sync]", -1, RKVSIM_METER_LAUNCHES), 3);
    rkvsim_meter_reset();
    cr_assert_null(rkvsim_meter_name(0));
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(o));
    CK(cudaFree(extra));
}

/* ---- tensor-core wrapper (attention/mma.h) ---- */

#include "attention/mma.h"

/* One m16n8k16 through the wrapper: lane fragments built from row-major
 * A (16x16), B (16x8 as k x n) and C per the PTX layout, D written back
 * row-major. */
template <typename T>
__global__ void ok_mma(const unsigned short *A, const unsigned short *B, const float *C,
                       float *D)
{
    const unsigned lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    auto pk = [](unsigned short lo, unsigned short hi) { return (uint32_t)lo | (uint32_t)hi << 16; };
    uint32_t a[4] = {pk(A[g * 16 + 2 * t], A[g * 16 + 2 * t + 1]),
                     pk(A[(g + 8) * 16 + 2 * t], A[(g + 8) * 16 + 2 * t + 1]),
                     pk(A[g * 16 + 2 * t + 8], A[g * 16 + 2 * t + 9]),
                     pk(A[(g + 8) * 16 + 2 * t + 8], A[(g + 8) * 16 + 2 * t + 9])};
    uint32_t b[2] = {pk(B[(2 * t) * 8 + g], B[(2 * t + 1) * 8 + g]),
                     pk(B[(2 * t + 8) * 8 + g], B[(2 * t + 9) * 8 + g])};
    float c[4] = {C[g * 8 + 2 * t], C[g * 8 + 2 * t + 1], C[(g + 8) * 8 + 2 * t],
                  C[(g + 8) * 8 + 2 * t + 1]};
    float d[4];
    mma_16816<T>(d, a, b, c);
    D[g * 8 + 2 * t] = d[0];
    D[g * 8 + 2 * t + 1] = d[1];
    D[(g + 8) * 8 + 2 * t] = d[2];
    D[(g + 8) * 8 + 2 * t + 1] = d[3];
}

/* D = A.B + C against a plain triple loop, for f16 and bf16 inputs that are
 * small integers (every product and sum exact): a fragment read from the
 * wrong lane or register shows as a wrong element. */
Test(cudasim, mma_16816_matches_a_matrix_product)
{
    unsigned short A[256], B[128];
    float C[128], want[128], got[128];
    for (int bf = 0; bf < 2; bf++) {
        float av[256], bv[128];
        for (int i = 0; i < 256; i++) {
            av[i] = (float)((i * 7 + 3) % 9 - 4);
            A[i] = bf ? __bfloat16_as_ushort(__float2bfloat16_rn(av[i]))
                      : __half_as_ushort(__float2half_rn(av[i]));
        }
        for (int i = 0; i < 128; i++) {
            bv[i] = (float)((i * 5 + 1) % 7 - 3);
            B[i] = bf ? __bfloat16_as_ushort(__float2bfloat16_rn(bv[i]))
                      : __half_as_ushort(__float2half_rn(bv[i]));
            C[i] = (float)(i % 11) - 5.0f;
        }
        for (int m = 0; m < 16; m++)
            for (int n = 0; n < 8; n++) {
                float s = C[m * 8 + n];
                for (int k = 0; k < 16; k++)
                    s += av[m * 16 + k] * bv[k * 8 + n];
                want[m * 8 + n] = s;
            }
        unsigned short *dA, *dB;
        float *dC, *dD;
        CK(cudaMalloc((void **)&dA, sizeof A));
        CK(cudaMalloc((void **)&dB, sizeof B));
        CK(cudaMalloc((void **)&dC, sizeof C));
        CK(cudaMalloc((void **)&dD, sizeof got));
        CK(cudaMemcpy(dA, A, sizeof A, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dB, B, sizeof B, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dC, C, sizeof C, cudaMemcpyHostToDevice));
        if (bf)
            RKV_LAUNCH(1, 32, 0, 0, ok_mma<mma_bf16>)(dA, dB, dC, dD);
        else
            RKV_LAUNCH(1, 32, 0, 0, ok_mma<mma_f16>)(dA, dB, dC, dD);
        CK(cudaGetLastError());
        CK(cudaMemcpy(got, dD, sizeof got, cudaMemcpyDeviceToHost));
        for (int i = 0; i < 128; i++)
            cr_assert_eq(got[i], want[i], "%s: D[%d][%d] = %g, want %g", bf ? "bf16" : "f16",
                         i / 8, i % 8, got[i], want[i]);
        CK(cudaFree(dA));
        CK(cudaFree(dB));
        CK(cudaFree(dC));
        CK(cudaFree(dD));
    }
}

/* Fewer than 32 lanes: the simulator reports it, as the GPU requires the
 * whole warp (the wrapper's shuffles name absent lanes). */
Test(cudasim, mma_16816_needs_the_whole_warp)
{
    unsigned short *dA, *dB;
    float *dC, *dD;
    CK(cudaMalloc((void **)&dA, 512));
    CK(cudaMalloc((void **)&dB, 256));
    CK(cudaMalloc((void **)&dC, 512));
    CK(cudaMalloc((void **)&dD, 512));
    CK(cudaMemset(dA, 0, 512));
    CK(cudaMemset(dB, 0, 256));
    CK(cudaMemset(dC, 0, 512));
    RKV_LAUNCH(1, 16, 0, 0, ok_mma<mma_f16>)(dA, dB, dC, dD);
    cr_assert_neq(cudaGetLastError(), cudaSuccess);
    CK(cudaFree(dA));
    CK(cudaFree(dB));
    CK(cudaFree(dC));
    CK(cudaFree(dD));
}
