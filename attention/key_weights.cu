/*
 * attention/key_weights.cu -- per-key attention weights on the device
 * (attention/key_weights_cuda.h; semantics: the CPU reference,
 * key_weights_cpu in attention/kv_evict.c), what H2O accumulates and
 * SnapKV's observation window votes with.
 *
 *   - key_probs_kernel: grid (row, query head), 128 threads. Each thread
 *     scores keys t = tid, tid + 128, ... (masked keys -inf) into the
 *     (row, head)'s line of the scratch, the block reduces max and sum in
 *     shared memory, and each thread rewrites its keys as exp(s - m) / l
 *     (a line with no visible key is all 0, as the CPU's empty state).
 *   - key_sum_kernel: one thread per key adds its line entries, rows and
 *     heads in order, to weights[t]: no atomics, so the result does not
 *     depend on the thread schedule.
 * The sums are in another order than the CPU's (a block tree, not left to
 * right), so results agree to rounding, not bit for bit. Loads are scalar:
 * written for the simulator first; no GPU has run it yet. Every global
 * access goes through ld_global / st_global (devmem.h); launches through
 * RKV_LAUNCH.
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#include <math.h>

#include "attention/devmem.h"
#include "attention/key_weights_cuda.h"
#include "attention/launch.h"
#include "common/cuda_guard.h"
#include "common/status.h"

#define KW_THREADS 128

/* Element i of a dtype-DT array (f16, bf16 or f32) as f32. */
template <int DT>
static __device__ __forceinline__ float kw_load(const void *base, size_t i)
{
    if (DT == RKV_DTYPE_F32)
        return ld_global((const float *)base + i);
    unsigned short r = ld_global((const unsigned short *)base + i);
    return DT == RKV_DTYPE_F16 ? __half2float(__ushort_as_half(r))
                               : __bfloat162float(__ushort_as_bfloat16(r));
}

struct kw_args {
    const char *kbase;
    const uint32_t *pages;
    const void *q;
    float *scratch;
    float *weights;
    size_t block, token, head;
    uint32_t P, Hq, G, D, kv_len, num_rows, window, sinks;
    float scale;
};

/* Block-wide reduction of v over KW_THREADS threads (max or sum). */
template <bool MAX>
static __device__ __forceinline__ float kw_reduce(float *red, float v)
{
    red[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = KW_THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            float o = red[threadIdx.x + s];
            red[threadIdx.x] = MAX ? fmaxf(red[threadIdx.x], o) : red[threadIdx.x] + o;
        }
        __syncthreads();
    }
    float r = red[0];
    __syncthreads(); /* red is reused by the next reduction */
    return r;
}

template <int DT>
__global__ void __launch_bounds__(KW_THREADS) key_probs_kernel(kw_args a)
{
    __shared__ float red[KW_THREADS];
    const uint32_t row = blockIdx.x, hq = blockIdx.y, h = hq / a.G;
    const uint32_t len = a.kv_len - a.num_rows + row + 1, qpos = len - 1;
    const size_t q0 = ((size_t)row * a.Hq + hq) * a.D;
    float *sc = a.scratch + ((size_t)row * a.Hq + hq) * a.kv_len;
    float mx = -INFINITY;
    for (uint32_t t = threadIdx.x; t < len; t += KW_THREADS) {
        bool vis = a.window == 0 || t < a.sinks || t + a.window >= qpos;
        float s = -INFINITY;
        if (vis) {
            uint32_t pg = ld_global(a.pages + t / a.P);
            const char *k = a.kbase + pg * a.block + (t % a.P) * a.token + h * a.head;
            float dot = 0.0f;
            for (uint32_t d = 0; d < a.D; d++)
                dot += kw_load<DT>(a.q, q0 + d) * kw_load<DT>(k, d);
            s = dot * a.scale;
        }
        st_global(sc + t, s);
        mx = fmaxf(mx, s);
    }
    const float m = kw_reduce<true>(red, mx);
    float l = 0.0f;
    for (uint32_t t = threadIdx.x; t < len; t += KW_THREADS) {
        float s = ld_global(sc + t);
        float e = m == -INFINITY || s == -INFINITY ? 0.0f : expf(s - m);
        st_global(sc + t, e);
        l += e;
    }
    const float sum = kw_reduce<false>(red, l);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (uint32_t t = threadIdx.x; t < a.kv_len; t += KW_THREADS)
        st_global(sc + t, t < len ? ld_global(sc + t) * inv : 0.0f);
}

__global__ void __launch_bounds__(KW_THREADS) key_sum_kernel(kw_args a)
{
    const uint32_t t = blockIdx.x * KW_THREADS + threadIdx.x;
    if (t >= a.kv_len)
        return;
    float acc = ld_global(a.weights + t);
    const size_t lines = (size_t)a.num_rows * a.Hq;
    for (size_t i = 0; i < lines; i++)
        acc += ld_global(a.scratch + i * a.kv_len + t);
    st_global(a.weights + t, acc);
}

extern "C" size_t rkv_kw_scratch_floats(const rkv_kw_geom *g)
{
    return (size_t)g->num_rows * g->num_qo_heads * g->kv_len;
}

extern "C" rkv_status rkv_kw_cuda_launch(const rkv_kw_geom *g, const void *kbase,
                                         const uint32_t *pages, const void *q,
                                         float *scratch, float *weights, void *stream)
{
    static const char fn[] = "rkv_attn_key_weights (CUDA)";
    if (g->num_rows == 0 || g->num_rows > g->kv_len || g->num_kv_heads == 0 ||
        g->num_qo_heads % g->num_kv_heads != 0 || g->num_rows > 2147483647u ||
        g->num_qo_heads > 65535) /* grid x and y limits */
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: bad geometry", fn);
    kw_args a;
    a.kbase = (const char *)kbase;
    a.pages = pages;
    a.q = q;
    a.scratch = scratch;
    a.weights = weights;
    a.block = g->block_stride;
    a.token = g->token_stride;
    a.head = g->head_stride;
    a.P = g->page_size;
    a.Hq = g->num_qo_heads;
    a.G = g->num_qo_heads / g->num_kv_heads;
    a.D = g->head_dim;
    a.kv_len = g->kv_len;
    a.num_rows = g->num_rows;
    a.window = g->window;
    a.sinks = g->sinks;
    a.scale = g->scale;
    cudaStream_t s = (cudaStream_t)stream;
    dim3 grid(g->num_rows, g->num_qo_heads), block(KW_THREADS);
    if (g->dtype == RKV_DTYPE_F16)
        RKV_LAUNCH(grid, block, 0, s, key_probs_kernel<RKV_DTYPE_F16>)(a);
    else if (g->dtype == RKV_DTYPE_BF16)
        RKV_LAUNCH(grid, block, 0, s, key_probs_kernel<RKV_DTYPE_BF16>)(a);
    else if (g->dtype == RKV_DTYPE_F32)
        RKV_LAUNCH(grid, block, 0, s, key_probs_kernel<RKV_DTYPE_F32>)(a);
    else
        return rkv_set_error(RKV_ERR_UNSUPPORTED,
                             "%s: K/V dtype %d (f16, bf16 or f32)", fn, (int)g->dtype);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return rkv_cuda_fail(fn, e);
    dim3 sgrid((g->kv_len + KW_THREADS - 1) / KW_THREADS);
    RKV_LAUNCH(sgrid, block, 0, s, key_sum_kernel)(a);
    e = cudaGetLastError();
    return e == cudaSuccess ? RKV_OK : rkv_cuda_fail(fn, e);
}
