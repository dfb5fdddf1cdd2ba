/*
 * attention/mla_cuda.cu -- the CUDA kernels of multi-head latent attention
 * in the absorbed form (radixkv/attention.h; semantics: mla_cpu.c).
 *
 * The latent cache is one row of W = rank + rope elements per token,
 * shared by every query head, so decode is multi-query attention over it:
 *   - append: one block per token copies its c_kv and k_pe into its row.
 *   - rows (decode and prefill): flash-decoding. Grid (row, group of up to
 *     HG query heads, KV split). Per tile of TT tokens the block stages the
 *     tile's latent rows in shared memory, once, and every head of the
 *     group scores against it (thread (h, t): one W-long dot product with
 *     the head's query, also in shared memory) and accumulates P.c_kv from
 *     it (thread i owns output dims i, i + 128, ... of every head). So each
 *     latent page crosses the memory bus once per group of HG heads: once
 *     in all for num_heads <= HG (DeepSeek-V3 under 8-way tensor
 *     parallelism has 16 heads a GPU). A head's online softmax (m, l) is
 *     kept by one thread between barriers. With one split the block writes
 *     o_latent and lse itself; else fp32 partials, merged by log-sum-exp
 *     in a combine kernel that rounds once into the dtype. A split covers at
 *     least 256 tokens: its partial (16 heads x rank fp32, written and read
 *     back) is then under a third of the latent bytes it stands for.
 * Limits (checked by the front end, mla.c): rank % 4 == 0, rank <= 512,
 * rank + rope <= 576 (DeepSeek-V2/V3's 512 + 64): the static shared
 * memory is sized for that. Loads are scalar: the kernel is written for
 * the simulator first; no GPU has run it yet.
 *
 * Every global access goes through ld_global / st_global (devmem.h), so
 * the simulator's traffic meter sees it; launches through RKV_LAUNCH.
 * Workspace: one device allocation per context that only grows (after
 * waiting for the stream), holding the uploaded index arrays (one copy
 * per call) and the split partials.
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attn_internal.h"
#include "attention/devmem.h"
#include "attention/launch.h"
#include "common/cuda_guard.h"
#include "common/status.h"

#define MLA_THREADS 128
#define MLA_MAX_W 576  /* rank + rope */
#define MLA_MAX_R 512  /* rank */
#define MLA_DJ (MLA_MAX_R / MLA_THREADS) /* output dims a thread owns */
#define MLA_TT 8       /* tokens per tile */
#define MLA_MIN_CHUNK 256 /* tokens per KV split, at least */
#define MLA_MAX_SPLITS 1024

struct rkv_mla_cuda {
    int device;
    int num_sms;
    void *ws;
    size_t ws_bytes;
};

/* ---- host plumbing -------------------------------------------------------- */

/* A failed runtime call as RKV_ERR_CUDA, its (non-sticky) error cleared so
 * a later launch check does not report it again. */
static rkv_status cuda_fail(cudaError_t e, const char *fn, const char *what)
{
    (void)cudaGetLastError();
    return rkv_set_error(RKV_ERR_CUDA, "%s: %s: %s", fn, what, cudaGetErrorString(e));
}

static size_t up256(size_t x) { return (x + 255) & ~(size_t)255; }

/* Grows the workspace to at least `bytes`; queued work may still read the
 * old one, so the stream is drained first. */
static rkv_status mla_ws(rkv_mla_cuda *c, cudaStream_t s, size_t bytes, const char *fn)
{
    if (bytes <= c->ws_bytes)
        return RKV_OK;
    cudaError_t e = cudaStreamSynchronize(s);
    if (e != cudaSuccess)
        return cuda_fail(e, fn, "waiting for the stream");
    size_t want = bytes + bytes / 4;
    void *p = NULL;
    if ((e = cudaMalloc(&p, want)) != cudaSuccess)
        return cuda_fail(e, fn, "workspace");
    if (c->ws != NULL)
        (void)cudaFree(c->ws);
    c->ws = p;
    c->ws_bytes = want;
    return RKV_OK;
}

/* One copy of `bytes` of host memory to the workspace's start. The source
 * is pageable, so CUDA stages it before the call returns and the caller
 * may free it at once. */
static rkv_status mla_upload(rkv_mla_cuda *c, cudaStream_t s, const void *host,
                             size_t bytes, const char *fn)
{
    cudaError_t e = cudaMemcpyAsync(c->ws, host, bytes, cudaMemcpyHostToDevice, s);
    return e == cudaSuccess ? RKV_OK : cuda_fail(e, fn, "upload");
}

static rkv_status mla_launched(const char *fn)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? RKV_OK : cuda_fail(e, fn, "launch");
}

extern "C" rkv_status rkv_mla_cuda_create(int device, rkv_mla_cuda **out)
{
    static const char fn[] = "rkv_attn_mla (CUDA context)";
    RKV_DEVICE_GUARD(device, fn);
    int sms = 0;
    cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (e != cudaSuccess)
        return cuda_fail(e, fn, "device attributes");
    rkv_mla_cuda *c = (rkv_mla_cuda *)calloc(1, sizeof *c);
    if (c == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", fn);
    c->device = device;
    c->num_sms = sms > 0 ? sms : 1;
    *out = c;
    return RKV_OK;
}

extern "C" void rkv_mla_cuda_destroy(rkv_mla_cuda *c)
{
    if (c == NULL)
        return;
    rkv_device_guard dg(c->device);
    if (c->ws != NULL) {
        (void)cudaDeviceSynchronize(); /* work on any stream may still read it */
        (void)cudaFree(c->ws);
    }
    free(c);
}

/* ---- elements ------------------------------------------------------------- */

struct mla_f16 { typedef unsigned short raw; };
struct mla_bf16 { typedef unsigned short raw; };
struct mla_f32 { typedef float raw; };

static __device__ __forceinline__ float to_f(mla_f16, unsigned short r)
{
    return __half2float(__ushort_as_half(r));
}
static __device__ __forceinline__ float to_f(mla_bf16, unsigned short r)
{
    return __bfloat162float(__ushort_as_bfloat16(r));
}
static __device__ __forceinline__ float to_f(mla_f32, float r) { return r; }
static __device__ __forceinline__ unsigned short from_f(mla_f16, float x)
{
    return __half_as_ushort(__float2half_rn(x));
}
static __device__ __forceinline__ unsigned short from_f(mla_bf16, float x)
{
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}
static __device__ __forceinline__ float from_f(mla_f32, float x) { return x; }

/* ---- append --------------------------------------------------------------- */

/* Block i: token i's c_kv then k_pe into row slots[i] of the plane. */
template <typename T>
__global__ void __launch_bounds__(MLA_THREADS)
mla_append_kernel(typename T::raw *plane, const typename T::raw *ckv,
                  const typename T::raw *kpe, const unsigned *slots, unsigned R,
                  unsigned E)
{
    const size_t i = blockIdx.x, W = (size_t)R + E;
    typename T::raw *row = plane + (size_t)ld_global(slots + i) * W;
    for (unsigned d = threadIdx.x; d < R; d += blockDim.x)
        st_global(row + d, ld_global(ckv + i * R + d));
    for (unsigned d = threadIdx.x; d < E; d += blockDim.x)
        st_global(row + R + d, ld_global(kpe + i * E + d));
}

extern "C" rkv_status rkv_mla_cuda_append(rkv_mla_cuda *c, void *stream,
                                          const rkv_mla_geom *g, void *base, uint32_t n,
                                          const uint32_t *slots, const void *c_kv,
                                          const void *k_pe)
{
    static const char fn[] = "rkv_attn_mla_append";
    RKV_DEVICE_GUARD(c->device, fn);
    cudaStream_t s = (cudaStream_t)stream;
    rkv_status st = mla_ws(c, s, (size_t)n * 4, fn);
    if (st == RKV_OK)
        st = mla_upload(c, s, slots, (size_t)n * 4, fn);
    if (st != RKV_OK)
        return st;
    const unsigned *ws = (const unsigned *)c->ws;
    switch (g->dtype) {
    case RKV_DTYPE_F16:
        RKV_LAUNCH(n, MLA_THREADS, 0, s, mla_append_kernel<mla_f16>)(
            (unsigned short *)base, (const unsigned short *)c_kv,
            (const unsigned short *)k_pe, ws, g->rank, g->rope);
        break;
    case RKV_DTYPE_BF16:
        RKV_LAUNCH(n, MLA_THREADS, 0, s, mla_append_kernel<mla_bf16>)(
            (unsigned short *)base, (const unsigned short *)c_kv,
            (const unsigned short *)k_pe, ws, g->rank, g->rope);
        break;
    default:
        RKV_LAUNCH(n, MLA_THREADS, 0, s, mla_append_kernel<mla_f32>)(
            (float *)base, (const float *)c_kv, (const float *)k_pe, ws, g->rank,
            g->rope);
        break;
    }
    return mla_launched(fn);
}

/* ---- rows ----------------------------------------------------------------- */

struct mla_args {
    const void *plane, *ql, *qpe;
    const unsigned *row_req, *row_len, *kv_indptr, *kv_indices;
    float *po, *plse; /* [splits][rows][H][R], [splits][rows][H] */
    void *out;        /* non-NULL: one split, the block writes the result */
    float *lse;       /* with out: optional */
    unsigned H, R, E, P, chunk, ngroups;
    float scale;
};

/* Heads a block serves: the query tile and the latent tile of HG heads
 * and MLA_TT tokens fit the 48 KiB of static shared memory. */
template <typename T> struct mla_hg { enum { v = sizeof(typename T::raw) == 2 ? 16 : 8 }; };

template <typename T>
__global__ void __launch_bounds__(MLA_THREADS) mla_rows_kernel(mla_args a)
{
    typedef typename T::raw raw;
    const int HG = mla_hg<T>::v;
    __shared__ raw sq[HG][MLA_MAX_W];     /* the group's queries: q_latent, q_pe */
    __shared__ raw sl[MLA_TT][MLA_MAX_W]; /* the tile's latent rows */
    __shared__ float sp[HG][MLA_TT];      /* scores, then probabilities */
    __shared__ float sm[HG], sl_sum[HG], salpha[HG];
    __shared__ size_t srow[MLA_TT];       /* element offset of each tile row */

    const unsigned row = blockIdx.x, h0 = blockIdx.y * HG, split = blockIdx.z;
    const unsigned gn = min(a.H - h0, (unsigned)HG);
    const unsigned R = a.R, E = a.E, W = R + E, tid = threadIdx.x;
    const unsigned req = ld_global(a.row_req + row), len = ld_global(a.row_len + row);
    const unsigned t0 = split * a.chunk, t1 = min(len, t0 + a.chunk);
    const unsigned *pages = a.kv_indices + ld_global(a.kv_indptr + req);
    const raw *plane = (const raw *)a.plane;
    const raw *ql = (const raw *)a.ql, *qpe = (const raw *)a.qpe;

    for (unsigned i = tid; i < gn * W; i += MLA_THREADS) {
        const unsigned h = i / W, d = i % W;
        const size_t qh = (size_t)row * a.H + h0 + h;
        sq[h][d] = d < R ? ld_global(ql + qh * R + d) : ld_global(qpe + qh * E + (d - R));
    }
    if (tid < (unsigned)HG) {
        sm[tid] = -INFINITY;
        sl_sum[tid] = 0.0f;
    }
    float acc[HG][MLA_DJ];
#pragma unroll
    for (int h = 0; h < HG; h++)
#pragma unroll
        for (int j = 0; j < MLA_DJ; j++)
            acc[h][j] = 0.0f;

    for (unsigned tb = t0; tb < t1; tb += MLA_TT) {
        const unsigned nt = min((unsigned)MLA_TT, t1 - tb);
        __syncthreads(); /* the previous tile is consumed */
        if (tid < nt) { /* the tile's rows: one page-table read a token */
            const unsigned t = tb + tid;
            srow[tid] = ((size_t)ld_global(pages + t / a.P) * a.P + t % a.P) * W;
        }
        __syncthreads();
        for (unsigned i = tid; i < nt * W; i += MLA_THREADS)
            sl[i / W][i % W] = ld_global(plane + srow[i / W] + i % W);
        __syncthreads();
        {
            const unsigned h = tid / MLA_TT, t = tid % MLA_TT;
            if (h < gn && t < nt) {
                float s = 0.0f;
                for (unsigned d = 0; d < W; d++)
                    s += to_f(T(), sq[h][d]) * to_f(T(), sl[t][d]);
                sp[h][t] = s * a.scale;
            }
        }
        __syncthreads();
        if (tid < gn) {
            float mx = sm[tid];
            for (unsigned t = 0; t < nt; t++)
                mx = fmaxf(mx, sp[tid][t]);
            const float alpha = __expf(sm[tid] - mx); /* 0 on the first tile */
            float sum = 0.0f;
            for (unsigned t = 0; t < (unsigned)MLA_TT; t++) {
                const float p = t < nt ? __expf(sp[tid][t] - mx) : 0.0f;
                sp[tid][t] = p;
                sum += p;
            }
            sm[tid] = mx;
            sl_sum[tid] = sl_sum[tid] * alpha + sum;
            salpha[tid] = alpha;
        }
        __syncthreads();
#pragma unroll
        for (int j = 0; j < MLA_DJ; j++) {
            const unsigned d = tid + j * MLA_THREADS;
            if (d >= R)
                break;
            float v[MLA_TT];
#pragma unroll
            for (int t = 0; t < MLA_TT; t++)
                v[t] = (unsigned)t < nt ? to_f(T(), sl[t][d]) : 0.0f;
#pragma unroll
            for (int h = 0; h < HG; h++) {
                if ((unsigned)h >= gn)
                    break;
                float x = acc[h][j] * salpha[h];
#pragma unroll
                for (int t = 0; t < MLA_TT; t++)
                    x += sp[h][t] * v[t];
                acc[h][j] = x;
            }
        }
    }
    /* an empty split (a row shorter than this split's start) leaves l 0 */
    __syncthreads();
#pragma unroll
    for (int h = 0; h < HG; h++) {
        if ((unsigned)h >= gn)
            break;
        const float l = sl_sum[h];
        const size_t st = (size_t)row * a.H + h0 + h;
#pragma unroll
        for (int j = 0; j < MLA_DJ; j++) {
            const unsigned d = tid + j * MLA_THREADS;
            if (d >= R)
                break;
            if (a.out != NULL)
                st_global((raw *)a.out + st * R + d, from_f(T(), acc[h][j] / l));
            else
                st_global(a.po + ((size_t)split * gridDim.x * a.H + st) * R + d,
                          l > 0.0f ? acc[h][j] / l : 0.0f);
        }
        if (tid == 0) {
            const float lse = l > 0.0f ? sm[h] + logf(l) : -INFINITY;
            if (a.out != NULL) {
                if (a.lse != NULL)
                    st_global(a.lse + st, lse);
            } else {
                st_global(a.plse + (size_t)split * gridDim.x * a.H + st, lse);
            }
        }
    }
}

/* Block (row, head): merges the splits' partials by log-sum-exp. */
template <typename T>
__global__ void __launch_bounds__(MLA_THREADS)
mla_combine_kernel(const float *po, const float *plse, typename T::raw *out, float *lse,
                   unsigned nst, unsigned R, unsigned splits)
{
    __shared__ float w[MLA_MAX_SPLITS]; /* each split's weight, read once */
    __shared__ float m_sum[2];
    const size_t st = blockIdx.x;
    for (unsigned s = threadIdx.x; s < splits; s += blockDim.x)
        w[s] = ld_global(plse + (size_t)s * nst + st);
    __syncthreads();
    if (threadIdx.x == 0) {
        float m = -INFINITY, sum = 0.0f;
        for (unsigned s = 0; s < splits; s++)
            m = fmaxf(m, w[s]);
        for (unsigned s = 0; s < splits; s++)
            sum += (w[s] = __expf(w[s] - m));
        m_sum[0] = m;
        m_sum[1] = sum;
    }
    __syncthreads();
    const float inv = 1.0f / m_sum[1];
    for (unsigned d = threadIdx.x; d < R; d += blockDim.x) {
        float x = 0.0f;
        for (unsigned s = 0; s < splits; s++)
            if (w[s] != 0.0f) /* an empty split's partial is skipped */
                x += w[s] * ld_global(po + ((size_t)s * nst + st) * R + d);
        st_global(out + st * R + d, from_f(T(), x * inv));
    }
    if (threadIdx.x == 0 && lse != NULL)
        st_global(lse + st, m_sum[0] + logf(m_sum[1]));
}

template <typename T>
static void mla_launch(cudaStream_t s, dim3 grid, const mla_args &a, unsigned splits,
                       unsigned nst, void *out, float *lse)
{
    RKV_LAUNCH(grid, MLA_THREADS, 0, s, mla_rows_kernel<T>)(a);
    if (splits > 1)
        RKV_LAUNCH(nst, MLA_THREADS, 0, s, mla_combine_kernel<T>)(
            a.po, a.plse, (typename T::raw *)out, lse, nst, a.R, splits);
}

extern "C" rkv_status rkv_mla_cuda_rows(rkv_mla_cuda *c, void *stream,
                                        const rkv_mla_geom *g, const void *base,
                                        const rkv_attn_rows *rows, const void *q_latent,
                                        const void *q_pe, float sm_scale, void *out,
                                        float *lse)
{
    static const char fn[] = "rkv_attn_mla";
    RKV_DEVICE_GUARD(c->device, fn);
    cudaStream_t s = (cudaStream_t)stream;
    const unsigned HG = g->dtype == RKV_DTYPE_F32 ? 8 : 16;
    const unsigned ngroups = (g->num_heads + HG - 1) / HG, nrows = rows->num_rows;
    /* splits: about two blocks per SM in all, each split >= MLA_MIN_CHUNK
     * tokens, so a split's fp32 partial (written and read back) stays small
     * beside the latent it summarises */
    const size_t base_blocks = (size_t)nrows * ngroups;
    size_t want = ((size_t)c->num_sms * 2 + base_blocks - 1) / base_blocks;
    const size_t most = (rows->max_len + MLA_MIN_CHUNK - 1) / MLA_MIN_CHUNK;
    want = want < 1 ? 1 : want > most ? most : want;
    want = want > MLA_MAX_SPLITS ? MLA_MAX_SPLITS : want;
    unsigned chunk = (unsigned)((rows->max_len + want - 1) / want);
    chunk = (chunk + MLA_TT - 1) / MLA_TT * MLA_TT;
    const unsigned splits = (rows->max_len + chunk - 1) / chunk;
    if (nrows > 2147483647u || ngroups > 65535u)
        return rkv_set_error(RKV_ERR_UNSUPPORTED, "%s: %u rows x %u head groups", fn,
                             nrows, ngroups);

    const size_t npages = rows->kv_indptr[rows->num_reqs];
    const size_t nst = (size_t)nrows * g->num_heads;
    const size_t o_req = 0, o_len = up256(o_req + (size_t)nrows * 4);
    const size_t o_ind = up256(o_len + (size_t)nrows * 4);
    const size_t o_idx = up256(o_ind + ((size_t)rows->num_reqs + 1) * 4);
    const size_t host_bytes = o_idx + npages * 4;
    const size_t o_po = up256(host_bytes);
    const size_t o_pl = up256(o_po + (splits > 1 ? splits * nst * g->rank * 4 : 0));
    const size_t total = o_pl + (splits > 1 ? splits * nst * 4 : 0);
    char *stage = (char *)calloc(1, host_bytes);
    if (stage == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", fn);
    memcpy(stage + o_req, rows->row_req, (size_t)nrows * 4);
    memcpy(stage + o_len, rows->row_len, (size_t)nrows * 4);
    memcpy(stage + o_ind, rows->kv_indptr, ((size_t)rows->num_reqs + 1) * 4);
    memcpy(stage + o_idx, rows->kv_indices, npages * 4);
    rkv_status st = mla_ws(c, s, total, fn);
    if (st == RKV_OK)
        st = mla_upload(c, s, stage, host_bytes, fn);
    free(stage);
    if (st != RKV_OK)
        return st;

    char *ws = (char *)c->ws;
    mla_args a;
    a.plane = base;
    a.ql = q_latent;
    a.qpe = q_pe;
    a.row_req = (const unsigned *)(ws + o_req);
    a.row_len = (const unsigned *)(ws + o_len);
    a.kv_indptr = (const unsigned *)(ws + o_ind);
    a.kv_indices = (const unsigned *)(ws + o_idx);
    a.po = splits > 1 ? (float *)(ws + o_po) : NULL;
    a.plse = splits > 1 ? (float *)(ws + o_pl) : NULL;
    a.out = splits > 1 ? NULL : out;
    a.lse = lse;
    a.H = g->num_heads;
    a.R = g->rank;
    a.E = g->rope;
    a.P = g->page_size;
    a.chunk = chunk;
    a.ngroups = ngroups;
    a.scale = sm_scale;
    dim3 grid(nrows, ngroups, splits);
    switch (g->dtype) {
    case RKV_DTYPE_F16: mla_launch<mla_f16>(s, grid, a, splits, (unsigned)nst, out, lse); break;
    case RKV_DTYPE_BF16: mla_launch<mla_bf16>(s, grid, a, splits, (unsigned)nst, out, lse); break;
    default: mla_launch<mla_f32>(s, grid, a, splits, (unsigned)nst, out, lse); break;
    }
    return mla_launched(fn);
}
