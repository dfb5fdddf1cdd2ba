/*
 * attention/attn_cuda.cu -- the CUDA backend of paged attention (see
 * attn_internal.h for the "rows" every operation is lowered to).
 *
 * Kernels:
 *   - append: one block per token copies its K and V rows into their slots.
 *   - rows (decode and prefill): flash-decoding. Grid (row, kv head [x
 *     group of up to 16 of its query heads], KV split). Per tile of 32
 *     tokens the block stages K and V in shared memory with 16-byte loads,
 *     then every query head of the GQA group scores and accumulates from
 *     that tile (one warp per head, up to 4 heads a warp): K/V are read
 *     once per group. A head's online softmax lives in one warp; the block
 *     writes an fp32 partial (o, lse) per split. A finalize kernel merges
 *     the splits (and, for cascade, the shared-prefix state) by
 *     log-sum-exp and rounds once into the output dtype (with one split
 *     and no shared prefix the rows kernel writes the output itself).
 *     f32 prefill uses the same kernel with causal row lengths (each row
 *     re-reads its prefix).
 *   - prefill_tensor_core (prefill/extend of f16/bf16, no shared prefix): tensor
 *     cores, FlashAttention-2 style (see prefill_tensor_core_kernel).
 *   - cascade shared prefix: per KV chunk of C tokens the prefix's K and V
 *     are gathered into [Hkv][C][D]; per block of Mb score rows the queries
 *     are packed to [Hkv][Mb][D]; two strided-batched cuBLAS GEMMs (scores
 *     = Q K^T in fp32, then P V with P rounded to the dtype) with a row
 *     softmax between them, and an online merge of the chunk states in
 *     fp32. C and Mb keep every chunk buffer within the cascade budget.
 * Every launch is followed by cudaGetLastError; every runtime and cuBLAS
 * call is checked and turned into RKV_ERR_CUDA with its message. The
 * one-shot calls' workspace (uploaded index arrays, partial states, cascade
 * buffers) is one device allocation that only grows; it is reused in
 * stream order. A plan (rkv_attn_cuda_plan) lays the same arrays out in
 * the caller's workspace once; rkv_attn_cuda_run only launches.
 * Kernels touch global memory only through ld_global / st_global
 * (attention/devmem.h), so the simulator's meter sees every access.
 *
 * Launches go through RKV_LAUNCH (attention/launch.h) so that the same
 * kernel bodies also build against the CPU simulator (-DRKV_CUDA=SIM),
 * where test_attention_gpu runs them in CI.
 *
 * NOTE: these kernels have been compiled (sm_90 + PTX) and run on the CPU
 * simulator but, at the time of writing, not yet on a GPU.
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cublas_v2.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attn_internal.h"
#include "attention/devmem.h"
#include "attention/kv_codec.h"
#include "attention/mma.h"
#include "attention/launch.h"
#include "common/cuda_guard.h"
#include "common/status.h"

struct rkv_attn_cuda {
    int device;
    int num_sms;
    cudaStream_t stream;
    cublasHandle_t blas; /* created lazily (cascade only) */
    void *ws;            /* device workspace */
    size_t ws_bytes;
    size_t cascade_budget; /* bytes of shared-prefix chunk buffers */
    unsigned max_grid_x;   /* the device's limit; larger 1D grids are split */
};

/* ---- error plumbing ------------------------------------------------------ */

/* Device selection and runtime errors: common/cuda_guard.h. */
#define LAUNCH_CHECK(what) RKV_CU_TRY(cudaGetLastError(), what)

#define ST_TRY(expr)                                                             \
    do {                                                                         \
        rkv_status st_ = (expr);                                                 \
        if (st_ != RKV_OK)                                                       \
            return st_;                                                          \
    } while (0)

#define BLAS_TRY(call, what)                                                     \
    do {                                                                         \
        cublasStatus_t s_ = (call);                                              \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                         \
            return rkv_set_error(RKV_ERR_CUDA, "%s: cuBLAS: %s", (what),         \
                                 cublasGetStatusString(s_));                     \
    } while (0)

/* ---- element access ------------------------------------------------------ */

struct f16_t { unsigned short b; };
struct bf16_t { unsigned short b; };

template <typename T> struct elem;
template <> struct elem<f16_t> {
    typedef unsigned short raw;
    static __device__ __forceinline__ float cvt(raw r) { return __half2float(__ushort_as_half(r)); }
    static __device__ __forceinline__ raw bits(float x) { return __half_as_ushort(__float2half_rn(x)); }
    static __device__ __forceinline__ float load(const raw *p, size_t i)
    {
        return cvt(ld_global(p + i));
    }
    static __device__ __forceinline__ void store(raw *p, size_t i, float x)
    {
        st_global(p + i, __half_as_ushort(__float2half_rn(x)));
    }
};
template <> struct elem<bf16_t> {
    typedef unsigned short raw;
    static __device__ __forceinline__ float cvt(raw r)
    {
        return __bfloat162float(__ushort_as_bfloat16(r));
    }
    static __device__ __forceinline__ raw bits(float x)
    {
        return __bfloat16_as_ushort(__float2bfloat16_rn(x));
    }
    static __device__ __forceinline__ float load(const raw *p, size_t i)
    {
        return cvt(ld_global(p + i));
    }
    static __device__ __forceinline__ void store(raw *p, size_t i, float x)
    {
        st_global(p + i, __bfloat16_as_ushort(__float2bfloat16_rn(x)));
    }
};
template <> struct elem<float> {
    typedef float raw;
    static __device__ __forceinline__ float cvt(raw r) { return r; }
    static __device__ __forceinline__ raw bits(float x) { return x; }
    static __device__ __forceinline__ float load(const raw *p, size_t i) { return ld_global(p + i); }
    static __device__ __forceinline__ void store(raw *p, size_t i, float x) { st_global(p + i, x); }
};

/* An aligned vector of N raw elements, for one wide load. */
template <typename R, int N> struct __align__(sizeof(R) * N) rvec {
    R v[N];
};

/* Loads EL contiguous elements at p[i..i+EL) (i * sizeof(raw) * EL-aligned:
 * the pool's rows are, as D * elem_size is a multiple of 128 bytes). */
template <typename T, int EL>
static __device__ __forceinline__ void load_vec(const typename elem<T>::raw *p, size_t i,
                                                float *out)
{
    typedef typename elem<T>::raw raw;
    rvec<raw, EL> r = ld_global(reinterpret_cast<const rvec<raw, EL> *>(p + i));
#pragma unroll
    for (int e = 0; e < EL; e++)
        out[e] = elem<T>::cvt(r.v[e]);
}

/* ---- workspace ------------------------------------------------------------ */

static size_t align_up(size_t x) { return (x + 255) & ~(size_t)255; }

/* Carves a workspace: add() reserves, then base + offset. */
struct carve {
    size_t total;
    carve() : total(0) {}
    size_t add(size_t bytes)
    {
        size_t off = total;
        total += align_up(bytes);
        return off;
    }
};

static rkv_status ws_reserve(rkv_attn_cuda *c, size_t bytes, const char *fn)
{
    if (bytes <= c->ws_bytes)
        return RKV_OK;
    size_t want = bytes + bytes / 4;
    void *p = NULL;
    /* the old buffer may still be read by queued work: wait for it */
    RKV_CU_TRY(cudaStreamSynchronize(c->stream), fn);
    cudaError_t e = cudaMalloc(&p, want);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return rkv_set_error(RKV_ERR_CUDA, "%s: workspace of %zu bytes: %s", fn, want,
                             cudaGetErrorString(e));
    }
    if (c->ws != NULL)
        (void)cudaFree(c->ws);
    c->ws = p;
    c->ws_bytes = want;
    return RKV_OK;
}

/* ---- launches ------------------------------------------------------------- */

/* A 1D launch of n blocks (counted in 64 bits) as grids of at most the
 * device's max grid x: launch(blocks, first) for each, where first is the
 * index of its first block, which the kernel adds to blockIdx.x. */
template <typename F>
static rkv_status launch_1d(const rkv_attn_cuda *c, size_t n, const char *fn, F launch)
{
    for (size_t b0 = 0; b0 < n; b0 += c->max_grid_x) {
        size_t nb = n - b0 < c->max_grid_x ? n - b0 : c->max_grid_x;
        launch((unsigned)nb, b0);
        LAUNCH_CHECK(fn);
    }
    return RKV_OK;
}

/* ---- context -------------------------------------------------------------- */

extern "C" rkv_status rkv_attn_cuda_create(int device, rkv_attn_cuda **out)
{
    RKV_DEVICE_GUARD(device, "rkv_attn_create");
    int sms = 0, gx = 0;
    RKV_CU_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
           "rkv_attn_create");
    RKV_CU_TRY(cudaDeviceGetAttribute(&gx, cudaDevAttrMaxGridDimX, device), "rkv_attn_create");
    rkv_attn_cuda *c = (rkv_attn_cuda *)calloc(1, sizeof *c);
    if (c == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_attn_create: out of memory");
    c->device = device;
    c->num_sms = sms > 0 ? sms : 1;
    c->stream = 0;
    c->cascade_budget = RKV_ATTN_CASCADE_BUDGET;
    c->max_grid_x = gx > 0 ? (unsigned)gx : 65535u;
    *out = c;
    return RKV_OK;
}

extern "C" void rkv_attn_cuda_destroy(rkv_attn_cuda *c)
{
    if (c == NULL)
        return;
    rkv_device_guard g(c->device);
    if (c->stream != 0 || c->ws != NULL)
        (void)cudaStreamSynchronize(c->stream);
    if (c->blas != NULL)
        (void)cublasDestroy(c->blas);
    if (c->ws != NULL)
        (void)cudaFree(c->ws);
    free(c);
}

extern "C" rkv_status rkv_attn_cuda_set_stream(rkv_attn_cuda *c, void *stream)
{
    static const char fn[] = "rkv_attn_set_stream";
    cudaStream_t next = (cudaStream_t)stream;
    if (next == c->stream)
        return RKV_OK;
    /* stream 0 names the current device's default stream */
    RKV_DEVICE_GUARD(c->device, fn);
    /* the workspace is reused in stream order: work queued on the old
     * stream may still read it when the new stream overwrites it; and a
     * plan's upload queued there must land before a run on the new one */
    RKV_CU_TRY(cudaStreamSynchronize(c->stream), fn);
    if (c->blas != NULL)
        BLAS_TRY(cublasSetStream(c->blas, next), fn);
    c->stream = next;
    return RKV_OK;
}

extern "C" void rkv_attn_cuda_set_cascade_budget(rkv_attn_cuda *c, size_t bytes)
{
    c->cascade_budget = bytes != 0 ? bytes : RKV_ATTN_CASCADE_BUDGET;
}

extern "C" rkv_status rkv_attn_cuda_sync(rkv_attn_cuda *c)
{
    RKV_DEVICE_GUARD(c->device, "rkv_attn_sync");
    RKV_CU_TRY(cudaStreamSynchronize(c->stream), "rkv_attn_sync");
    return RKV_OK;
}

/* ---- append --------------------------------------------------------------- */

/* Copies one token's rows as 16-bit units (every row is an even number of
 * bytes). grid.x = token. */
__global__ void append_kernel(unsigned short *kb, unsigned short *vb,
                              const unsigned short *k, const unsigned short *v,
                              const unsigned *slots, unsigned row_units, size_t b0)
{
    const size_t t = b0 + blockIdx.x;
    size_t src = t * row_units;
    size_t dst = (size_t)ld_global(slots + t) * row_units;
    for (unsigned i = threadIdx.x; i < row_units; i += blockDim.x) {
        st_global(kb + dst + i, ld_global(k + src + i));
        st_global(vb + dst + i, ld_global(v + src + i));
    }
}

/* Quantizing append: one thread per (token, kv head, K or V) row reads
 * the row (activation type), quantizes it with the host's codec
 * (kv_codec.h: the same codes bit for bit) in registers / local memory and
 * stores codes and scales as 32-bit words. grid.x = token. */
struct quant_args {
    int kvq;
    unsigned H, D, P, group, nsc;
    size_t blk, cb, scale_off;
};

template <typename T>
__global__ void append_quant_kernel(char *kb, char *vb, const void *k, const void *v,
                                    const unsigned *slots, quant_args q, size_t b0)
{
    typedef elem<T> E;
    typedef typename E::raw raw;
    const size_t t = b0 + blockIdx.x;
    const unsigned slot = ld_global(slots + t), page = slot / q.P, tok = slot % q.P;
    float x[128];
    uint32_t codes[32]; /* up to 128 bytes of codes */
    float sc[64];
    for (unsigned r = threadIdx.x; r < 2 * q.H; r += blockDim.x) {
        const unsigned h = r >> 1;
        const raw *src = (const raw *)((r & 1) ? v : k) + (t * q.H + h) * q.D;
        for (unsigned d = 0; d < q.D; d++)
            x[d] = E::load(src, d);
        rkv_kvq_quant_row(q.kvq, q.group, x, q.D, (uint8_t *)codes, sc);
        char *blk = ((r & 1) ? vb : kb) + (size_t)page * q.blk;
        const size_t within = (size_t)tok * q.H + h;
        uint32_t *cdst = (uint32_t *)(blk + within * q.cb);
        for (unsigned w = 0; w < q.cb / 4; w++)
            st_global(cdst + w, codes[w]);
        float *sdst = (float *)(blk + q.scale_off + within * q.nsc * 4);
        for (unsigned i = 0; i < q.nsc; i++)
            st_global(sdst + i, sc[i]);
    }
}

extern "C" rkv_status rkv_attn_cuda_append(rkv_attn_cuda *c, const rkv_attn_geom *g,
                                           void *kbase, void *vbase, uint32_t n,
                                           const uint32_t *slots, const void *k,
                                           const void *v)
{
    static const char fn[] = "rkv_attn_append";
    RKV_DEVICE_GUARD(c->device, fn);
    rkv_status st = ws_reserve(c, (size_t)n * 4, fn);
    if (st != RKV_OK)
        return st;
    /* the caller may reuse slots on return; a pinned array would be read
     * when the copy runs: upload a private copy (pageable, so CUDA stages
     * it before the call returns, as the rows path does) */
    uint32_t *stage = (uint32_t *)malloc((size_t)n * 4 + 4);
    if (stage == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", fn);
    memcpy(stage, slots, (size_t)n * 4);
    cudaError_t e = cudaMemcpyAsync(c->ws, stage, (size_t)n * 4, cudaMemcpyHostToDevice,
                                    c->stream);
    free(stage);
    RKV_CU_TRY(e, fn);
    unsigned units = (unsigned)((size_t)g->num_kv_heads * g->head_dim * g->elem_size / 2);
    const unsigned short *ws = (const unsigned short *)c->ws;
    if (g->kv_dtype != g->dtype) {
        quant_args qa;
        qa.kvq = (int)g->kv_dtype;
        qa.H = g->num_kv_heads;
        qa.D = g->head_dim;
        qa.P = g->page_size;
        qa.group = g->quant_group;
        qa.nsc = g->nsc;
        qa.cb = g->kv_dtype == RKV_DTYPE_INT4 ? g->head_dim / 2 : g->head_dim;
        qa.blk = (size_t)qa.P * qa.H * (qa.cb + 4 * (size_t)qa.nsc);
        qa.scale_off = g->scale_off;
        return launch_1d(c, n, fn, [&](unsigned nb, size_t b0) {
            char *K = (char *)kbase, *V = (char *)vbase;
            const unsigned *sl = (const unsigned *)ws;
            switch (g->dtype) {
            case RKV_DTYPE_F16:
                RKV_LAUNCH(nb, 32, 0, c->stream, append_quant_kernel<f16_t>)(K, V, k, v, sl, qa, b0);
                break;
            case RKV_DTYPE_BF16:
                RKV_LAUNCH(nb, 32, 0, c->stream, append_quant_kernel<bf16_t>)(K, V, k, v, sl, qa, b0);
                break;
            default:
                RKV_LAUNCH(nb, 32, 0, c->stream, append_quant_kernel<float>)(K, V, k, v, sl, qa, b0);
                break;
            }
        });
    }
    return launch_1d(c, n, fn, [&](unsigned nb, size_t b0) {
        RKV_LAUNCH(nb, 128, 0, c->stream, append_kernel)(
            (unsigned short *)kbase, (unsigned short *)vbase, (const unsigned short *)k,
            (const unsigned short *)v, (const unsigned *)ws, units, b0);
    });
}

/* ---- rows: split-KV flash-decoding ---------------------------------------- */

struct rows_args {
    const void *q;
    const void *kb, *vb;
    const unsigned *row_req, *row_len, *kv_indptr, *kv_indices;
    float *po, *plse; /* [splits][rows][Hq][D], [splits][rows][Hq] */
    void *out;        /* non-NULL: one split, write the result directly */
    float *lse;       /* with out: optional lse */
    unsigned rows, Hq, Hkv, G, P, chunk;
    unsigned ng;   /* blocks per kv head: ceil(G / 16) query-head groups */
    unsigned row0; /* first row of this launch (grids are split in x) */
    float scale;
    /* quantized KV (kvq = the pool's dtype, 0 = not quantized): a block's
     * segment is qblk bytes, its codes qcb bytes a row, then qnsc f32
     * scales a row from qscale_off; INT4 groups of qgroup elements */
    int kvq;
    unsigned qgroup, qnsc;
    size_t qblk, qcb, qscale_off;
    /* sliding window (0 = none): row position p = len - 1 sees keys t
     * with t + window >= p or t < sinks */
    unsigned window, sinks;
};

/* The quantized-KV fields of rows_args from a geometry. */
static void rows_quant(rows_args &a, const rkv_attn_geom *g)
{
    const bool q = g->kv_dtype != g->dtype;
    a.kvq = q ? (int)g->kv_dtype : 0;
    a.qgroup = g->quant_group;
    a.qnsc = g->nsc;
    a.qcb = g->kv_dtype == RKV_DTYPE_INT4 ? g->head_dim / 2 : g->head_dim;
    a.qblk = (size_t)g->page_size * g->num_kv_heads * (a.qcb + 4 * (size_t)g->nsc);
    a.qscale_off = g->scale_off;
    a.window = g->window;
    a.sinks = g->sinks;
}

/* Dequantizes elements c0 .. c0 + C (32, or a smaller INT4 group) of
 * the K or V row r (= (page * P + t) * Hkv + kv head) of a quantized
 * segment at base into dst, rounded to E's type. A chunk shares one scale (C <= an INT4 group), so each scale
 * is read once a chunk and every code once; 8-bit codes move as 32-bit
 * words (rows and segments are multiples of 4 bytes). */
template <typename E>
static __device__ __forceinline__ void kvq_chunk(const rows_args &a, const void *base,
                                                 size_t r, unsigned c0, unsigned C,
                                                 typename E::raw *dst)
{
    const size_t per = (size_t)a.P * a.Hkv, page = r / per, within = r % per;
    const char *blk = (const char *)base + page * a.qblk;
    const uint8_t *codes = (const uint8_t *)(blk + within * a.qcb);
    const float *sc = (const float *)(blk + a.qscale_off + within * a.qnsc * 4);
    if (a.kvq == RKV_DTYPE_INT4) {
        const float s = ld_global(sc + c0 / a.qgroup);
        for (unsigned e = 0; e < C; e += 2) {
            const unsigned b = ld_global(codes + (c0 + e) / 2);
            const int lo = (int)(b & 0xfu), hi = (int)(b >> 4);
            dst[e] = E::bits((float)(lo >= 8 ? lo - 16 : lo) * s);
            dst[e + 1] = E::bits((float)(hi >= 8 ? hi - 16 : hi) * s);
        }
        return;
    }
    const float s = ld_global(sc);
    const uint32_t *w = (const uint32_t *)(codes + c0);
    for (unsigned k = 0; k < C / 4; k++) {
        const uint32_t u = ld_global(w + k);
#pragma unroll
        for (int b = 0; b < 4; b++)
            dst[4 * k + b] = E::bits(rkv_kvq_dec8(a.kvq, (uint8_t)(u >> (8 * b)), s));
    }
}

#define NW 4  /* warps per block */
#define TT 32 /* tokens per K/V tile: one per lane when scoring */
#define HG_MAX 16 /* query heads per block (NW warps x up to 4 heads) */

/* The pool row (token, kv head) that token t of a request with page table
 * `pages` reads, in units of head_dim elements: what the rows and the
 * tensor-core kernels stage per K/V tile. */
static __device__ __forceinline__ size_t kv_row(const unsigned *pages, unsigned t,
                                                unsigned P, unsigned Hkv, unsigned kvh)
{
    return ((size_t)ld_global(pages + t / P) * P + t % P) * Hkv + kvh;
}

/* One block per (row, kv head[, group of up to 16 of its query heads],
 * split): every query head of a GQA group reads the same K/V tile, so K/V
 * cross the memory bus once per group whatever G (up to 16). Per tile of
 * 32 tokens the block copies K and V into shared memory with 16-byte loads
 * (rows padded by one vector so the per-lane row reads of the scoring hit
 * distinct banks); warp w then serves heads w, w + 4, ...: lane t scores
 * token t against the head's q (fp32, in shared memory), the warp folds
 * the tile into its online softmax and accumulates P.V with lane l owning
 * dims l*D/32 .. +D/32. A head's state lives in one warp, so no cross-warp
 * merge is needed; the output (or the split's fp32 partial) is written
 * once. The final o = acc / l is a division (not a reciprocal multiply):
 * an exact mean stays correctly rounded. */
template <typename T, int D, int HPW>
__global__ void __launch_bounds__(NW * 32) rows_kernel(rows_args a)
{
    typedef elem<T> E;
    typedef typename E::raw raw;
    const int EL = D / 32;            /* dims per lane in P.V */
    const int VE = 16 / sizeof(raw);  /* elements per 16-byte vector */
    const int VR = D / VE;            /* vectors per K/V row */
    const int KP = D + VE;            /* padded shared row */
    typedef rvec<raw, VE> vec;
    typedef rvec<raw, EL> lvec;
    __shared__ __align__(16) raw sk[TT][KP];
    __shared__ __align__(16) raw sv[TT][KP];
    __shared__ float sq[NW * HPW][D];
    __shared__ size_t stok[TT];

    const unsigned row = a.row0 + blockIdx.x, split = blockIdx.z;
    const unsigned kvh = blockIdx.y / a.ng, g0 = (blockIdx.y % a.ng) * (NW * HPW);
    const unsigned gn = min(a.G - g0, (unsigned)(NW * HPW)); /* heads of this block */
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned req = ld_global(a.row_req + row), len = ld_global(a.row_len + row);
    /* the window's first position (keys before it, but the sinks, are
     * hidden); 0 without a window */
    const unsigned wlo = a.window != 0 && len - 1 > a.window ? len - 1 - a.window : 0;
    const unsigned t0 = split * a.chunk;
    const unsigned t1 = min(len, t0 + a.chunk);
    const unsigned *pages = a.kv_indices + ld_global(a.kv_indptr + req);
    const raw *q = (const raw *)a.q, *kb = (const raw *)a.kb, *vb = (const raw *)a.vb;
    const size_t qh0 = (size_t)kvh * a.G + g0; /* first query head of the block */

    for (unsigned i = threadIdx.x; i < gn * D; i += blockDim.x) /* q may be unaligned */
        sq[i / D][i % D] = E::load(q, ((size_t)row * a.Hq + qh0) * D + i);
    float acc[HPW][EL], m[HPW], l[HPW];
#pragma unroll
    for (int h = 0; h < HPW; h++) {
#pragma unroll
        for (int e = 0; e < EL; e++)
            acc[h][e] = 0.0f;
        m[h] = -INFINITY;
        l[h] = 0.0f;
    }
    for (unsigned tb = t0; tb < t1; tb += TT) {
        const unsigned n = min((unsigned)TT, t1 - tb);
        /* a tile the window hides entirely is skipped (block-uniform), so
         * every tile scored has a visible token */
        if (tb >= a.sinks && tb + n <= wlo)
            continue;
        __syncthreads(); /* q stored; the previous tile consumed */
        if (threadIdx.x < n) {
            stok[threadIdx.x] = kv_row(pages, tb + threadIdx.x, a.P, a.Hkv, kvh);
        }
        __syncthreads();
        if (a.kvq != 0) {
            /* quantized: dequantized into the tile, rounded to T (the
             * compute path then runs as for T's own K/V) */
            const unsigned C = a.kvq == RKV_DTYPE_INT4 ? min(a.qgroup, 32u) : 32u;
            const unsigned nch = D / C;
            for (unsigned i = threadIdx.x; i < n * nch; i += blockDim.x) {
                const unsigned j = i / nch, c0 = (i % nch) * C;
                kvq_chunk<E>(a, a.kb, stok[j], c0, C, &sk[j][c0]);
                kvq_chunk<E>(a, a.vb, stok[j], c0, C, &sv[j][c0]);
            }
        } else {
            for (unsigned i = threadIdx.x; i < n * VR; i += blockDim.x) {
                const unsigned j = i / VR, c = i % VR;
                const size_t at = stok[j] * D + c * VE;
                *reinterpret_cast<vec *>(&sk[j][c * VE]) =
                    ld_global(reinterpret_cast<const vec *>(kb + at));
                *reinterpret_cast<vec *>(&sv[j][c * VE]) =
                    ld_global(reinterpret_cast<const vec *>(vb + at));
            }
        }
        __syncthreads();
#pragma unroll
        for (int h = 0; h < HPW; h++) {
            const unsigned g = warp + h * NW;
            if (g >= gn) /* warp-uniform */
                break;
            float s = -INFINITY;
            const unsigned tl = tb + lane;
            if (lane < n && (tl >= wlo || tl < a.sinks)) {
                float dot = 0.0f;
#pragma unroll
                for (int c = 0; c < VR; c++) {
                    const vec kv = *reinterpret_cast<const vec *>(&sk[lane][c * VE]);
#pragma unroll
                    for (int e = 0; e < VE; e++)
                        dot += sq[g][c * VE + e] * E::cvt(kv.v[e]);
                }
                s = dot * a.scale;
            }
            float tm = s;
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
                tm = fmaxf(tm, __shfl_xor_sync(0xffffffffu, tm, o));
            const float mn = fmaxf(m[h], tm); /* finite: the tile has a token */
            const float corr = __expf(m[h] - mn);
            const float p = s != -INFINITY ? __expf(s - mn) : 0.0f;
            float ps = p;
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
                ps += __shfl_xor_sync(0xffffffffu, ps, o);
            l[h] = l[h] * corr + ps;
#pragma unroll
            for (int e = 0; e < EL; e++)
                acc[h][e] *= corr;
            for (unsigned j = 0; j < n; j++) {
                const float pj = __shfl_sync(0xffffffffu, p, j);
                const lvec vv = *reinterpret_cast<const lvec *>(&sv[j][lane * EL]);
#pragma unroll
                for (int e = 0; e < EL; e++)
                    acc[h][e] += pj * E::cvt(vv.v[e]);
            }
            m[h] = mn;
        }
    }
#pragma unroll
    for (int h = 0; h < HPW; h++) {
        const unsigned g = warp + h * NW;
        if (g >= gn)
            break;
        const size_t sidx = ((size_t)split * a.rows + row) * a.Hq + qh0 + g;
        const bool empty = m[h] == -INFINITY;
        const float ls = empty ? -INFINITY : m[h] + logf(l[h]);
#pragma unroll
        for (int e = 0; e < EL; e++) {
            const float o = empty ? 0.0f : acc[h][e] / l[h];
            const size_t at = sidx * D + lane * EL + e;
            if (a.out != NULL) /* split == 0 here: sidx is the output index */
                E::store((raw *)a.out, at, o);
            else
                st_global(a.po + at, o);
        }
        if (lane == 0) {
            if (a.out != NULL) {
                if (a.lse != NULL)
                    st_global(a.lse + sidx, ls);
            } else {
                st_global(a.plse + sidx, ls);
            }
        }
    }
}

struct fin_args {
    const float *po, *plse;
    const float *xo, *xlse; /* cascade shared state [Hkv][rows][G][D], or NULL */
    void *out;
    float *lse;
    unsigned rows, Hq, G, D, splits;
};

/* grid.x = row * Hq + head, block = D threads. */
template <typename T>
__global__ void finalize_kernel(fin_args f, size_t b0)
{
    typedef elem<T> E;
    const size_t idx = b0 + blockIdx.x;
    const unsigned d = threadIdx.x;
    const size_t n = (size_t)f.rows * f.Hq;
    const unsigned row = (unsigned)(idx / f.Hq), h = (unsigned)(idx % f.Hq);
    size_t xi = 0;
    if (f.xo != NULL)
        xi = ((size_t)(h / f.G) * f.rows + row) * f.G + h % f.G;
    float M = -INFINITY;
    for (unsigned s = 0; s < f.splits; s++)
        M = fmaxf(M, ld_global(f.plse + s * n + idx));
    if (f.xo != NULL)
        M = fmaxf(M, ld_global(f.xlse + xi));
    float L = 0.0f, O = 0.0f;
    if (M != -INFINITY) {
        for (unsigned s = 0; s < f.splits; s++) {
            float ls = ld_global(f.plse + s * n + idx);
            float w = ls == -INFINITY ? 0.0f : __expf(ls - M);
            L += w;
            O += w * ld_global(f.po + (s * n + idx) * f.D + d);
        }
        if (f.xo != NULL) {
            float ls = ld_global(f.xlse + xi);
            float w = ls == -INFINITY ? 0.0f : __expf(ls - M);
            L += w;
            O += w * ld_global(f.xo + xi * f.D + d);
        }
    }
    E::store((typename E::raw *)f.out, idx * f.D + d, M == -INFINITY ? 0.0f : O / L);
    if (f.lse != NULL && d == 0)
        st_global(f.lse + idx, M == -INFINITY ? -INFINITY : M + logf(L));
}

template <typename T, int D>
static void launch_rows_d(dim3 grid, cudaStream_t s, const rows_args &a, unsigned hpw)
{
    switch (hpw) {
    case 4: RKV_LAUNCH(grid, NW * 32, 0, s, rows_kernel<T, D, 4>)(a); break;
    case 3: RKV_LAUNCH(grid, NW * 32, 0, s, rows_kernel<T, D, 3>)(a); break;
    case 2: RKV_LAUNCH(grid, NW * 32, 0, s, rows_kernel<T, D, 2>)(a); break;
    default: RKV_LAUNCH(grid, NW * 32, 0, s, rows_kernel<T, D, 1>)(a); break;
    }
}

template <typename T>
static void launch_rows(dim3 grid, cudaStream_t s, const rows_args &a, unsigned D,
                        unsigned hpw)
{
    if (D == 64)
        launch_rows_d<T, 64>(grid, s, a, hpw);
    else
        launch_rows_d<T, 128>(grid, s, a, hpw);
}

/* ---- cascade: shared prefix by GEMM ------------------------------------- */

/* Qp[h][i][:] = q[row][h*G+g][:] for score rows m = m0 + i = row*G + g of
 * one row block of mb. grid.x = i * Hkv + h. */
__global__ void pack_q_kernel(const unsigned short *q, unsigned short *qp, size_t m0,
                              size_t mb, unsigned Hkv, unsigned G, unsigned row_units,
                              size_t b0)
{
    const size_t bi = b0 + blockIdx.x, i = bi / Hkv, m = m0 + i;
    const unsigned h = (unsigned)(bi % Hkv), qh = h * G + (unsigned)(m % G);
    size_t src = ((m / G) * Hkv * G + qh) * row_units;
    size_t dst = ((size_t)h * mb + i) * row_units;
    for (unsigned u = threadIdx.x; u < row_units; u += blockDim.x)
        st_global(qp + dst + u, ld_global(q + src + u));
}

/* Kg[h][j][:] = K[token c0 + j of the shared pages][h][:] for one KV chunk
 * of cn tokens (V likewise). grid.x = j * Hkv + h. */
__global__ void gather_kv_kernel(const unsigned short *kb, const unsigned short *vb,
                                 unsigned short *kg, unsigned short *vg,
                                 const unsigned *pages, size_t c0, size_t cn,
                                 unsigned Hkv, unsigned P, unsigned row_units, size_t b0)
{
    const size_t bi = b0 + blockIdx.x, j = bi / Hkv, s = c0 + j;
    const unsigned h = (unsigned)(bi % Hkv);
    size_t tok = (size_t)ld_global(pages + s / P) * P + s % P;
    size_t src = (tok * Hkv + h) * row_units;
    size_t dst = ((size_t)h * cn + j) * row_units;
    for (unsigned u = threadIdx.x; u < row_units; u += blockDim.x) {
        st_global(kg + dst + u, ld_global(kb + src + u));
        st_global(vg + dst + u, ld_global(vb + src + u));
    }
}

__global__ void fill_kernel(float *p, size_t n, float x, size_t b0)
{
    size_t i = (b0 + blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n)
        st_global(p + i, x);
}

/* Row softmax of one score chunk: p = exp(scale*s - m) rounded to T;
 * cm/cl get m and the sum of the rounded p. grid.x = score row, 256 thr. */
template <typename T>
__global__ void softmax_kernel(const float *scores, void *p, float *cm, float *cl,
                               unsigned cols, float scale, size_t b0)
{
    typedef elem<T> E;
    __shared__ float red[256 / 32];
    const size_t r = b0 + blockIdx.x, base = r * cols;
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float mx = -INFINITY;
    for (unsigned i = threadIdx.x; i < cols; i += blockDim.x)
        mx = fmaxf(mx, ld_global(scores + base + i) * scale);
    for (int o = 16; o > 0; o >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    if (lane == 0)
        red[warp] = mx;
    __syncthreads();
    mx = red[0];
    for (unsigned w = 1; w < blockDim.x / 32; w++)
        mx = fmaxf(mx, red[w]);
    __syncthreads();
    float sum = 0.0f;
    for (unsigned i = threadIdx.x; i < cols; i += blockDim.x) {
        E::store((typename E::raw *)p, base + i, __expf(ld_global(scores + base + i) * scale - mx));
        sum += E::load((const typename E::raw *)p, base + i);
    }
    for (int o = 16; o > 0; o >>= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0)
        red[warp] = sum;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.0f;
        for (unsigned w = 0; w < blockDim.x / 32; w++)
            t += red[w];
        st_global(cm + r, mx);
        st_global(cl + r, t);
    }
}

/* acc <- merge(acc, chunk): chunk o = oc / cl, lse = cm + log(cl). The
 * chunk covers score rows m0 .. m0+mb of every kv head; acc holds all M.
 * grid.x = h * mb + i, block = D. */
__global__ void combine_kernel(float *ao, float *alse, const float *oc, const float *cm,
                               const float *cl, unsigned D, size_t m0, size_t mb, size_t M,
                               size_t b0)
{
    const size_t r = b0 + blockIdx.x;
    const size_t a = (r / mb) * M + m0 + r % mb;
    const unsigned d = threadIdx.x;
    const float cmr = ld_global(cm + r), clr = ld_global(cl + r);
    float lc = cmr + logf(clr);
    float la = ld_global(alse + a);
    float Mx = fmaxf(la, lc);
    float wa = la == -INFINITY ? 0.0f : __expf(la - Mx);
    float wc = __expf(lc - Mx);
    float s = wa + wc;
    st_global(ao + a * D + d, (ld_global(ao + a * D + d) * wa + ld_global(oc + r * D + d) / clr * wc) / s);
    __syncthreads(); /* every thread has read alse[a] */
    if (d == 0)
        st_global(alse + a, Mx + logf(s));
}

static cudaDataType_t blas_type(rkv_dtype dt)
{
    switch (dt) {
    case RKV_DTYPE_F16: return CUDA_R_16F;
    case RKV_DTYPE_BF16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
    }
}

template <typename T>
static rkv_status launch_softmax(const rkv_attn_cuda *c, size_t nrows, const float *sc,
                                 void *p, float *cm, float *cl, unsigned cols, float scale,
                                 const char *fn)
{
    return launch_1d(c, nrows, fn, [&](unsigned nb, size_t b0) {
        RKV_LAUNCH(nb, 256, 0, c->stream, softmax_kernel<T>)(sc, p, cm, cl, cols, scale, b0);
    });
}

/* Shared-prefix state of every (row, head) into xo [Hkv][rows*G][D], xl,
 * in KV chunks of C tokens (gathered once each) and score-row blocks of
 * Mb rows, so that the chunk buffers stay within the cascade budget. */
static rkv_status cascade_shared(rkv_attn_cuda *c, const rkv_attn_geom *g,
                                 const void *kbase, const void *vbase,
                                 const rkv_attn_rows *rows, const rkv_attn_shared *sh,
                                 const void *q, float scale, char *ws, size_t off_pages,
                                 size_t off_qp, size_t off_kg, size_t off_vg,
                                 size_t off_sc, size_t off_p, size_t off_oc, size_t off_cm,
                                 size_t off_cl, float *xo, float *xl, unsigned C, unsigned Mb)
{
    static const char fn[] = "rkv_attn_cascade";
    const unsigned Hkv = g->num_kv_heads, Hq = g->num_qo_heads, G = Hq / Hkv;
    const unsigned D = g->head_dim;
    const size_t S = (size_t)sh->num_pages * g->page_size, M = (size_t)rows->num_rows * G;
    const unsigned row_bytes = (unsigned)(D * g->elem_size);
    if (c->blas == NULL) {
        BLAS_TRY(cublasCreate(&c->blas), fn);
        BLAS_TRY(cublasSetStream(c->blas, c->stream), fn);
    }
    size_t nst = (size_t)Hkv * M;
    RKV_CU_TRY(cudaMemsetAsync(xo, 0, nst * D * sizeof(float), c->stream), fn);
    ST_TRY(launch_1d(c, (nst + 255) / 256, fn, [&](unsigned nb, size_t b0) {
        RKV_LAUNCH(nb, 256, 0, c->stream, fill_kernel)(xl, nst, -INFINITY, b0);
    }));
    const cudaDataType_t dt = blas_type(g->dtype);
    const float one = 1.0f, zero = 0.0f;
    float *cm = (float *)(ws + off_cm), *cl = (float *)(ws + off_cl);
    for (size_t c0 = 0; c0 < S; c0 += C) {
        const unsigned Cn = (unsigned)(S - c0 < C ? S - c0 : C);
        /* row_bytes / 2: the copy kernels move 16-bit units */
        ST_TRY(launch_1d(c, (size_t)Cn * Hkv, fn, [&](unsigned nb, size_t b0) {
            RKV_LAUNCH(nb, 64, 0, c->stream, gather_kv_kernel)(
                (const unsigned short *)kbase, (const unsigned short *)vbase,
                (unsigned short *)(ws + off_kg), (unsigned short *)(ws + off_vg),
                (const unsigned *)(ws + off_pages), c0, (size_t)Cn, Hkv, g->page_size,
                row_bytes / 2, b0);
        }));
        for (size_t m0 = 0; m0 < M; m0 += Mb) {
            const size_t mb = M - m0 < Mb ? M - m0 : Mb;
            const size_t nsb = Hkv * mb;
            ST_TRY(launch_1d(c, nsb, fn, [&](unsigned nb, size_t b0) {
                RKV_LAUNCH(nb, 64, 0, c->stream, pack_q_kernel)(
                    (const unsigned short *)q, (unsigned short *)(ws + off_qp), m0, mb, Hkv,
                    G, row_bytes / 2, b0);
            }));
            /* scores[h] (mb x Cn, row-major) = Qp[h] (mb x D) . Kg[h]^T */
            BLAS_TRY(cublasGemmStridedBatchedEx(
                         c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)Cn, (int)mb, (int)D, &one,
                         ws + off_kg, dt, (int)D, (long long)Cn * D, ws + off_qp, dt, (int)D,
                         (long long)mb * D, &zero, ws + off_sc, CUDA_R_32F, (int)Cn,
                         (long long)mb * Cn, (int)Hkv, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     fn);
            const float *sc = (const float *)(ws + off_sc);
            switch (g->dtype) {
            case RKV_DTYPE_F16:
                ST_TRY(launch_softmax<f16_t>(c, nsb, sc, ws + off_p, cm, cl, Cn, scale, fn));
                break;
            case RKV_DTYPE_BF16:
                ST_TRY(launch_softmax<bf16_t>(c, nsb, sc, ws + off_p, cm, cl, Cn, scale, fn));
                break;
            default:
                ST_TRY(launch_softmax<float>(c, nsb, sc, ws + off_p, cm, cl, Cn, scale, fn));
                break;
            }
            /* oc[h] (mb x D) = P[h] (mb x Cn) . Vg[h] (Cn x D) */
            BLAS_TRY(cublasGemmStridedBatchedEx(
                         c->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)D, (int)mb, (int)Cn, &one,
                         ws + off_vg, dt, (int)D, (long long)Cn * D, ws + off_p, dt, (int)Cn,
                         (long long)mb * Cn, &zero, ws + off_oc, CUDA_R_32F, (int)D,
                         (long long)mb * D, (int)Hkv, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     fn);
            ST_TRY(launch_1d(c, nsb, fn, [&](unsigned nb, size_t b0) {
                RKV_LAUNCH(nb, D, 0, c->stream, combine_kernel)(
                    xo, xl, (const float *)(ws + off_oc), cm, cl, D, m0, mb, M, b0);
            }));
        }
    }
    return RKV_OK;
}

/* ---- prefill / extend on tensor cores ------------------------------------ */

/* FlashAttention-2 style for f16/bf16: a block takes a tile of 64 score rows
 * of one request and kv head (score row m = query row m / G, head m % G of
 * the GQA group, so the group's heads share every K/V tile), each of its 4
 * warps 16 rows. Per K/V tile of 32 tokens (16-byte loads into shared
 * memory): S = Q.K^T by m16n8k16 MMAs (fp32), scale and causal mask, an
 * online softmax per row, then O += P.V with P rounded to the input type
 * and taken straight from S's accumulator registers (their layout is the
 * A operand's). A tile reads K/V up to its last row's position only. */
struct tensor_core_args {
    const void *q;
    const void *kb, *vb;
    const unsigned *row_len, *kv_indptr, *kv_indices;
    const unsigned *tiles; /* [ntiles][4]: request, first query row, query rows, m0 */
    void *out;
    float *lse;
    unsigned Hq, Hkv, G, P;
    unsigned tile0; /* first tile of this launch */
    float scale;
};

#define TENSOR_CORE_ROWS 64
#define TENSOR_CORE_TOKENS 32

template <typename R> static __device__ __forceinline__ uint32_t pack2(R lo, R hi)
{
    return (uint32_t)lo | (uint32_t)hi << 16;
}

template <typename T, typename MT, int D>
__global__ void __launch_bounds__(NW * 32) prefill_tensor_core_kernel(tensor_core_args a)
{
    typedef elem<T> E;
    typedef unsigned short raw;
    const int VE = 8, VR = D / VE, KP = D + 8, NT = TENSOR_CORE_TOKENS / 8, DT = D / 8;
    typedef rvec<raw, VE> vec;
    __shared__ __align__(16) raw sq[TENSOR_CORE_ROWS][KP];
    __shared__ __align__(16) raw sk[TENSOR_CORE_TOKENS][KP];
    __shared__ __align__(16) raw sv[TENSOR_CORE_TOKENS][KP];
    __shared__ unsigned slen[TENSOR_CORE_ROWS];
    __shared__ size_t stok[TENSOR_CORE_TOKENS];

    const unsigned *tile = a.tiles + (size_t)(a.tile0 + blockIdx.x) * 4;
    const unsigned req = ld_global(tile), qlo = ld_global(tile + 1);
    const unsigned qn = ld_global(tile + 2), m0 = ld_global(tile + 3);
    const unsigned kvh = blockIdx.y, G = a.G, M = qn * G;
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned gq = lane >> 2, tq = lane & 3;
    const unsigned *pages = a.kv_indices + ld_global(a.kv_indptr + req);
    const raw *q = (const raw *)a.q, *kb = (const raw *)a.kb, *vb = (const raw *)a.vb;
    const unsigned mlast = min(m0 + TENSOR_CORE_ROWS, M) - 1;
    const unsigned maxlen = ld_global(a.row_len + qlo + mlast / G);

    for (unsigned i = threadIdx.x; i < TENSOR_CORE_ROWS * D; i += blockDim.x) {
        const unsigned r = i / D, d = i % D, m = m0 + r;
        raw x = 0;
        if (m < M) /* q may be unaligned: element loads */
            x = ld_global(q + ((size_t)(qlo + m / G) * a.Hq + kvh * G + m % G) * D + d);
        sq[r][d] = x;
    }
    for (unsigned r = threadIdx.x; r < TENSOR_CORE_ROWS; r += blockDim.x)
        slen[r] = m0 + r < M ? ld_global(a.row_len + qlo + (m0 + r) / G) : 0;

    const unsigned r0 = warp * 16 + gq, r1 = r0 + 8; /* this lane's two rows */
    float o[DT][4], mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.0f, 0.0f};
#pragma unroll
    for (int dt = 0; dt < DT; dt++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            o[dt][e] = 0.0f;
    for (unsigned kt = 0; kt < maxlen; kt += TENSOR_CORE_TOKENS) {
        const unsigned n = min((unsigned)TENSOR_CORE_TOKENS, maxlen - kt);
        __syncthreads(); /* q and lengths stored; the previous tile consumed */
        if (threadIdx.x < n) {
            stok[threadIdx.x] = kv_row(pages, kt + threadIdx.x, a.P, a.Hkv, kvh);
        }
        __syncthreads();
        for (unsigned i = threadIdx.x; i < TENSOR_CORE_TOKENS * VR; i += blockDim.x) {
            const unsigned j = i / VR, c = i % VR;
            vec kx, vx;
            if (j < n) {
                const size_t at = stok[j] * D + c * VE;
                kx = ld_global(reinterpret_cast<const vec *>(kb + at));
                vx = ld_global(reinterpret_cast<const vec *>(vb + at));
            } else { /* masked tokens: P is 0, and 0 * V must not be NaN */
                for (int e = 0; e < VE; e++)
                    kx.v[e] = vx.v[e] = 0;
            }
            *reinterpret_cast<vec *>(&sk[j][c * VE]) = kx;
            *reinterpret_cast<vec *>(&sv[j][c * VE]) = vx;
        }
        __syncthreads();
        float sc[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                sc[nt][e] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++) {
            const int c0 = ks * 16 + 2 * tq;
            uint32_t af[4] = {pack2(sq[r0][c0], sq[r0][c0 + 1]), pack2(sq[r1][c0], sq[r1][c0 + 1]),
                              pack2(sq[r0][c0 + 8], sq[r0][c0 + 9]),
                              pack2(sq[r1][c0 + 8], sq[r1][c0 + 9])};
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                const unsigned kr = nt * 8 + gq;
                uint32_t bf[2] = {pack2(sk[kr][c0], sk[kr][c0 + 1]),
                                  pack2(sk[kr][c0 + 8], sk[kr][c0 + 9])};
                mma_16816<MT>(sc[nt], af, bf, sc[nt]);
            }
        }
        /* scale, mask, online softmax; sc[nt][0..1] are row r0 at tokens
         * kt + nt*8 + 2tq + {0,1}, sc[nt][2..3] row r1 */
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const unsigned tok = kt + nt * 8 + 2 * tq + (e & 1);
                const bool ok = tok < slen[e < 2 ? r0 : r1];
                sc[nt][e] = ok ? sc[nt][e] * a.scale : -INFINITY;
                mx[e >> 1] = fmaxf(mx[e >> 1], sc[nt][e]);
            }
        float corr[2], mn[2], ps[2] = {0.0f, 0.0f};
#pragma unroll
        for (int h = 0; h < 2; h++) {
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
            mn[h] = fmaxf(mrow[h], mx[h]);
            corr[h] = mrow[h] == -INFINITY ? 0.0f : __expf(mrow[h] - mn[h]);
        }
        uint32_t pf[NT][2];
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            float p[4];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                p[e] = sc[nt][e] == -INFINITY ? 0.0f : __expf(sc[nt][e] - mn[e >> 1]);
                ps[e >> 1] += p[e];
            }
            pf[nt][0] = pack2(E::bits(p[0]), E::bits(p[1]));
            pf[nt][1] = pack2(E::bits(p[2]), E::bits(p[3]));
        }
#pragma unroll
        for (int h = 0; h < 2; h++) {
            ps[h] += __shfl_xor_sync(0xffffffffu, ps[h], 1);
            ps[h] += __shfl_xor_sync(0xffffffffu, ps[h], 2);
            lrow[h] = lrow[h] * corr[h] + ps[h];
            mrow[h] = mn[h];
        }
#pragma unroll
        for (int dt = 0; dt < DT; dt++) {
            o[dt][0] *= corr[0];
            o[dt][1] *= corr[0];
            o[dt][2] *= corr[1];
            o[dt][3] *= corr[1];
        }
#pragma unroll
        for (int kk = 0; kk < TENSOR_CORE_TOKENS / 16; kk++) {
            uint32_t af[4] = {pf[2 * kk][0], pf[2 * kk][1], pf[2 * kk + 1][0],
                              pf[2 * kk + 1][1]};
            const unsigned k0 = kk * 16 + 2 * tq;
#pragma unroll
            for (int dt = 0; dt < DT; dt++) {
                const unsigned dc = dt * 8 + gq;
                uint32_t bf[2] = {pack2(sv[k0][dc], sv[k0 + 1][dc]),
                                  pack2(sv[k0 + 8][dc], sv[k0 + 9][dc])};
                mma_16816<MT>(o[dt], af, bf, o[dt]);
            }
        }
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const unsigned m = m0 + (h ? r1 : r0);
        if (m >= M)
            continue;
        const size_t vi = (size_t)(qlo + m / G) * a.Hq + kvh * G + m % G;
#pragma unroll
        for (int dt = 0; dt < DT; dt++)
#pragma unroll
            for (int e = 0; e < 2; e++)
                E::store((raw *)a.out, vi * D + dt * 8 + 2 * tq + e, o[dt][2 * h + e] / lrow[h]);
        if (tq == 0 && a.lse != NULL)
            st_global(a.lse + vi, mrow[h] + logf(lrow[h]));
    }
}

template <typename T, typename MT>
static void dispatch_tensor_core(dim3 grid, cudaStream_t s, const tensor_core_args &a,
                                 unsigned D)
{
    if (D == 64)
        RKV_LAUNCH(grid, NW * 32, 0, s, prefill_tensor_core_kernel<T, MT, 64>)(a);
    else
        RKV_LAUNCH(grid, NW * 32, 0, s, prefill_tensor_core_kernel<T, MT, 128>)(a);
}

/* Tiles of TENSOR_CORE_ROWS score rows, none spanning two requests (a
 * request's rows are contiguous): the count, and with tl != NULL the tiles
 * (request, first query row, query rows, first score row). */
static size_t tensor_core_tiles(const rkv_attn_rows *rows, unsigned G, uint32_t *tl)
{
    size_t k = 0;
    for (uint32_t i = 0; i < rows->num_rows;) {
        uint32_t j = i;
        while (j < rows->num_rows && rows->row_req[j] == rows->row_req[i])
            j++;
        for (size_t m0 = 0; m0 < (size_t)(j - i) * G; m0 += TENSOR_CORE_ROWS, k++)
            if (tl != NULL) {
                tl[4 * k] = rows->row_req[i];
                tl[4 * k + 1] = i;
                tl[4 * k + 2] = j - i;
                tl[4 * k + 3] = (uint32_t)m0;
            }
        i = j;
    }
    return k;
}

/* The tensor-core path takes prefill/extend rows (some request has several
 * query rows) of 16-bit types without a shared prefix. */
static bool use_tensor_cores(const rkv_attn_geom *g, const rkv_attn_rows *rows)
{
    /* quantized KV: the rows kernel dequantizes; the MMA path reads raw
     * 16-bit tiles only, and masks causally only (no window) */
    return g->dtype != RKV_DTYPE_F32 && g->kv_dtype == g->dtype && g->window == 0 &&
           rows->num_rows > rows->num_reqs;
}

/* Launches the tensor-core prefill over uploaded lengths, table and tiles. */
static rkv_status launch_tensor_core(rkv_attn_cuda *c, const rkv_attn_geom *g,
                                     const char *fn, const char *ws, size_t off_len,
                                     size_t off_ind, size_t off_idx, size_t off_t,
                                     size_t ntiles, const void *kbase, const void *vbase,
                                     const void *q, float sm_scale, void *out, float *lse)
{
    const unsigned Hq = g->num_qo_heads, Hkv = g->num_kv_heads;
    tensor_core_args a;
    a.q = q;
    a.kb = kbase;
    a.vb = vbase;
    a.row_len = (const unsigned *)(ws + off_len);
    a.kv_indptr = (const unsigned *)(ws + off_ind);
    a.kv_indices = (const unsigned *)(ws + off_idx);
    a.tiles = (const unsigned *)(ws + off_t);
    a.out = out;
    a.lse = lse;
    a.Hq = Hq;
    a.Hkv = Hkv;
    a.G = Hq / Hkv;
    a.P = g->page_size;
    a.scale = sm_scale;
    if (Hkv > 65535)
        return rkv_set_error(RKV_ERR_UNSUPPORTED, "%s: %u kv heads exceed a grid's y", fn, Hkv);
    return launch_1d(c, ntiles, fn, [&](unsigned nb, size_t b0) {
        dim3 grid(nb, Hkv);
        a.tile0 = (unsigned)b0;
        if (g->dtype == RKV_DTYPE_F16)
            dispatch_tensor_core<f16_t, mma_f16>(grid, c->stream, a, g->head_dim);
        else
            dispatch_tensor_core<bf16_t, mma_bf16>(grid, c->stream, a, g->head_dim);
    });
}

/* Prefill/extend on tensor cores: the host cuts each request's score rows
 * into tiles and uploads them with the table into the context's workspace. */
static rkv_status prefill_tensor_core(rkv_attn_cuda *c, const rkv_attn_geom *g,
                                      const void *kbase, const void *vbase,
                                      const rkv_attn_rows *rows, const void *q,
                                      float sm_scale, void *out, float *lse)
{
    static const char fn[] = "rkv_attn_prefill";
    const unsigned G = g->num_qo_heads / g->num_kv_heads;
    const uint32_t nrows = rows->num_rows, nreq = rows->num_reqs;
    const uint32_t total_pages = rows->kv_indptr[nreq];
    const size_t ntiles = tensor_core_tiles(rows, G, NULL);
    carve cv;
    const size_t off_len = cv.add((size_t)nrows * 4), off_ind = cv.add(((size_t)nreq + 1) * 4);
    const size_t off_idx = cv.add((size_t)total_pages * 4), off_t = cv.add(ntiles * 16);
    char *stage = (char *)calloc(1, cv.total);
    if (stage == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", fn);
    memcpy(stage + off_len, rows->row_len, (size_t)nrows * 4);
    memcpy(stage + off_ind, rows->kv_indptr, ((size_t)nreq + 1) * 4);
    memcpy(stage + off_idx, rows->kv_indices, (size_t)total_pages * 4);
    tensor_core_tiles(rows, G, (uint32_t *)(stage + off_t));
    rkv_status st = ws_reserve(c, cv.total, fn);
    if (st == RKV_OK) {
        cudaError_t e = cudaMemcpyAsync(c->ws, stage, cv.total, cudaMemcpyHostToDevice,
                                        c->stream);
        if (e != cudaSuccess)
            st = rkv_set_error(RKV_ERR_CUDA, "%s: upload: %s", fn, cudaGetErrorString(e));
    }
    free(stage);
    if (st != RKV_OK)
        return st;
    return launch_tensor_core(c, g, fn, (const char *)c->ws, off_len, off_ind, off_idx, off_t,
                              ntiles, kbase, vbase, q, sm_scale, out, lse);
}

/* How the rows kernel partitions a batch: a block serves up to HG_MAX query
 * heads of one kv head (ng blocks per kv head, hpw heads per warp); the KV
 * of a row is cut into `splits` chunks of `chunk` tokens (whole tiles),
 * enough blocks to fill the GPU with at least 64 tokens each. */
struct split_choice {
    unsigned ng, hpw, chunk;
    size_t splits;
};

static split_choice choose_split(const rkv_attn_cuda *c, const rkv_attn_geom *g,
                                 const rkv_attn_rows *rows)
{
    const unsigned G = g->num_qo_heads / g->num_kv_heads;
    split_choice sc;
    sc.ng = (G + HG_MAX - 1) / HG_MAX;
    sc.hpw = ((G < HG_MAX ? G : HG_MAX) + NW - 1) / NW;
    size_t blocks = (size_t)rows->num_rows * g->num_kv_heads * sc.ng;
    size_t want = ((size_t)c->num_sms * 4 + blocks - 1) / blocks;
    size_t maxs = (rows->max_len + 63) / 64;
    size_t splits = want < maxs ? want : maxs;
    if (splits < 1)
        splits = 1;
    if (splits > 1024)
        splits = 1024;
    unsigned chunk = (unsigned)((rows->max_len + splits - 1) / splits);
    chunk = (chunk + TT - 1) / TT * TT;
    splits = (rows->max_len + chunk - 1) / chunk;
    sc.splits = splits < 1 ? 1 : splits;
    sc.chunk = chunk;
    return sc;
}

/* A zeroed layout whose first parts are the rows' index arrays (row_req,
 * row_len, kv_indptr, kv_indices), carved from cv. */
static void carve_rows(carve &cv, rkv_attn_plan_layout *p, const rkv_attn_rows *rows)
{
    memset(p, 0, sizeof *p);
    p->off_req = cv.add((size_t)rows->num_rows * 4);
    p->off_len = cv.add((size_t)rows->num_rows * 4);
    p->off_ind = cv.add(((size_t)rows->num_reqs + 1) * 4);
    p->off_idx = cv.add((size_t)rows->kv_indptr[rows->num_reqs] * 4);
}

/* Copies the rows' index arrays into a host staging buffer at p's offsets
 * (uploaded to the workspace in one copy). */
static void stage_rows(char *stage, const rkv_attn_plan_layout *p, const rkv_attn_rows *rows)
{
    const size_t nrows = rows->num_rows, nreq = rows->num_reqs;
    memcpy(stage + p->off_req, rows->row_req, nrows * 4);
    memcpy(stage + p->off_len, rows->row_len, nrows * 4);
    memcpy(stage + p->off_ind, rows->kv_indptr, (nreq + 1) * 4);
    memcpy(stage + p->off_idx, rows->kv_indices, (size_t)rows->kv_indptr[nreq] * 4);
}

/* The rows kernel over the index arrays and split partials that p places
 * in workspace ws; with p->direct (one split) it writes out / lse itself. */
static rkv_status launch_rows_at(rkv_attn_cuda *c, const rkv_attn_geom *g, const char *fn,
                                 const rkv_attn_plan_layout *p, char *ws, const void *kbase,
                                 const void *vbase, const void *q, float sm_scale, void *out,
                                 float *lse)
{
    const unsigned Hq = g->num_qo_heads, Hkv = g->num_kv_heads, D = g->head_dim;
    rows_args a;
    a.q = q;
    a.kb = kbase;
    a.vb = vbase;
    a.row_req = (const unsigned *)(ws + p->off_req);
    a.row_len = (const unsigned *)(ws + p->off_len);
    a.kv_indptr = (const unsigned *)(ws + p->off_ind);
    a.kv_indices = (const unsigned *)(ws + p->off_idx);
    a.po = (float *)(ws + p->off_po);
    a.plse = (float *)(ws + p->off_pl);
    a.out = p->direct ? out : NULL;
    a.lse = p->direct ? lse : NULL;
    a.rows = p->num_rows;
    a.Hq = Hq;
    a.Hkv = Hkv;
    a.G = Hq / Hkv;
    a.P = g->page_size;
    a.chunk = p->chunk;
    a.ng = p->ng;
    a.scale = sm_scale;
    rows_quant(a, g);
    return launch_1d(c, p->num_rows, fn, [&](unsigned nb, size_t b0) {
        dim3 grid(nb, Hkv * p->ng, p->splits);
        a.row0 = (unsigned)b0;
        switch (g->dtype) {
        case RKV_DTYPE_F16: launch_rows<f16_t>(grid, c->stream, a, D, p->hpw); break;
        case RKV_DTYPE_BF16: launch_rows<bf16_t>(grid, c->stream, a, D, p->hpw); break;
        default: launch_rows<float>(grid, c->stream, a, D, p->hpw); break;
        }
    });
}

/* Merges the split partials p places in ws, and a cascade's shared-prefix
 * state (xo, xlse; NULL without one), into out / lse. */
static rkv_status launch_finalize_at(rkv_attn_cuda *c, const rkv_attn_geom *g, const char *fn,
                                     const rkv_attn_plan_layout *p, const char *ws,
                                     const float *xo, const float *xlse, void *out,
                                     float *lse)
{
    const unsigned Hq = g->num_qo_heads, D = g->head_dim;
    fin_args f;
    f.po = (const float *)(ws + p->off_po);
    f.plse = (const float *)(ws + p->off_pl);
    f.xo = xo;
    f.xlse = xlse;
    f.out = out;
    f.lse = lse;
    f.rows = p->num_rows;
    f.Hq = Hq;
    f.G = Hq / g->num_kv_heads;
    f.D = D;
    f.splits = p->splits;
    return launch_1d(c, (size_t)p->num_rows * Hq, fn, [&](unsigned nb, size_t b0) {
        switch (g->dtype) {
        case RKV_DTYPE_F16: RKV_LAUNCH(nb, D, 0, c->stream, finalize_kernel<f16_t>)(f, b0); break;
        case RKV_DTYPE_BF16:
            RKV_LAUNCH(nb, D, 0, c->stream, finalize_kernel<bf16_t>)(f, b0);
            break;
        default: RKV_LAUNCH(nb, D, 0, c->stream, finalize_kernel<float>)(f, b0); break;
        }
    });
}

extern "C" rkv_status rkv_attn_cuda_rows(rkv_attn_cuda *c, const rkv_attn_geom *g,
                                         const void *kbase, const void *vbase,
                                         const rkv_attn_rows *rows,
                                         const rkv_attn_shared *shared, const void *q,
                                         float sm_scale, void *out, float *lse)
{
    const char *fn = shared ? "rkv_attn_cascade" : "rkv_attn_rows";
    RKV_DEVICE_GUARD(c->device, fn);
    /* prefill/extend of 16-bit types (some request has several query rows)
     * runs on tensor cores */
    if (shared == NULL && use_tensor_cores(g, rows))
        return prefill_tensor_core(c, g, kbase, vbase, rows, q, sm_scale, out, lse);
    const unsigned Hq = g->num_qo_heads, Hkv = g->num_kv_heads, G = Hq / Hkv;
    const unsigned D = g->head_dim, nrows = rows->num_rows;
    const split_choice sc = choose_split(c, g, rows);
    const size_t splits = sc.splits;

    const size_t nst = (size_t)nrows * Hq;
    carve cv;
    /* this call's workspace, laid out as a plan's (plus the cascade's) */
    rkv_attn_plan_layout L;
    carve_rows(cv, &L, rows);
    size_t off_pages = shared ? cv.add((size_t)shared->num_pages * 4) : 0;
    size_t host_bytes = cv.total; /* the index arrays, uploaded in one copy */
    /* one split and no shared prefix: the rows kernel writes the output */
    L.direct = splits == 1 && shared == NULL;
    L.off_po = cv.add(L.direct ? 0 : splits * nst * D * 4);
    L.off_pl = cv.add(L.direct ? 0 : splits * nst * 4);
    L.splits = (uint32_t)splits;
    L.chunk = sc.chunk;
    L.ng = sc.ng;
    L.hpw = sc.hpw;
    L.num_rows = nrows;
    size_t off_qp = 0, off_kg = 0, off_vg = 0, off_sc = 0, off_p = 0;
    size_t off_oc = 0, off_cm = 0, off_cl = 0, off_xo = 0, off_xl = 0;
    unsigned C = 0, MB = 0;
    if (shared != NULL) {
        const size_t S = (size_t)shared->num_pages * g->page_size, M = (size_t)nrows * G;
        const size_t es = g->elem_size;
        /* Chunk buffers per kv head: Mb*(D*es + D*4 + 8) for packed q,
         * chunk output and chunk m/l; 2*C*D*es for the gathered K and V;
         * Mb*C*(4 + es) for scores and P. Keep them within the budget: all
         * rows with the largest C (>= 64) that fits, else fewer rows. */
        const size_t per_row = D * es + D * 4 + 8, per_tok = 2 * D * es;
        const size_t bud = c->cascade_budget / Hkv;
        size_t Mb = M, cmax = 0;
        if (bud > M * (per_row + 64 * (4 + es)) + 64 * per_tok)
            cmax = (bud - M * per_row) / (per_tok + M * (4 + es)) / 64 * 64;
        if (cmax < 64) {
            cmax = 64;
            size_t fit = bud > 64 * per_tok ? (bud - 64 * per_tok) / (per_row + 64 * (4 + es)) : 0;
            Mb = fit < 1 ? 1 : fit < M ? fit : M;
        }
        C = (unsigned)(S < cmax ? S : cmax);
        MB = (unsigned)Mb;
        off_qp = cv.add(Hkv * Mb * D * es);
        off_kg = cv.add(Hkv * C * D * es);
        off_vg = cv.add(Hkv * C * D * es);
        off_sc = cv.add(Hkv * Mb * C * 4);
        off_p = cv.add(Hkv * Mb * C * es);
        off_oc = cv.add(Hkv * Mb * D * 4);
        off_cm = cv.add(Hkv * Mb * 4);
        off_cl = cv.add(Hkv * Mb * 4);
        off_xo = cv.add(Hkv * M * D * 4);
        off_xl = cv.add(Hkv * M * 4);
    }
    char *stage = (char *)calloc(1, host_bytes);
    if (stage == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", fn);
    stage_rows(stage, &L, rows);
    if (shared != NULL)
        memcpy(stage + off_pages, shared->pages, (size_t)shared->num_pages * 4);
    rkv_status st = ws_reserve(c, cv.total, fn);
    if (st == RKV_OK) {
        cudaError_t e = cudaMemcpyAsync(c->ws, stage, host_bytes, cudaMemcpyHostToDevice,
                                        c->stream);
        /* a pageable source is staged before the call returns */
        if (e != cudaSuccess)
            st = rkv_set_error(RKV_ERR_CUDA, "%s: upload: %s", fn, cudaGetErrorString(e));
    }
    free(stage);
    if (st != RKV_OK)
        return st;
    char *ws = (char *)c->ws;

    if ((size_t)Hkv * L.ng > 65535)
        return rkv_set_error(RKV_ERR_UNSUPPORTED,
                             "%s: %zu query head groups exceed a grid's y (65535)", fn,
                             (size_t)Hkv * L.ng);
    st = launch_rows_at(c, g, fn, &L, ws, kbase, vbase, q, sm_scale, out, lse);
    if (st != RKV_OK || L.direct)
        return st;

    const float *xo = NULL, *xlse = NULL;
    if (shared != NULL) {
        xo = (const float *)(ws + off_xo);
        xlse = (const float *)(ws + off_xl);
        st = cascade_shared(c, g, kbase, vbase, rows, shared, q, sm_scale, ws, off_pages,
                            off_qp, off_kg, off_vg, off_sc, off_p, off_oc, off_cm, off_cl,
                            (float *)(ws + off_xo), (float *)(ws + off_xl), C, MB);
        if (st != RKV_OK)
            return st;
    }
    return launch_finalize_at(c, g, fn, &L, ws, xo, xlse, out, lse);
}

/* ---- plan / run ----------------------------------------------------------- */

/* Plan: the split choice and the layout of the caller's workspace: the
 * uploaded index arrays (one copy, queued on the context's stream from a
 * staged host buffer), then the fp32 split partials. */
extern "C" rkv_status rkv_attn_cuda_plan(rkv_attn_cuda *c, const rkv_attn_geom *g,
                                         const rkv_attn_rows *rows, void *ws,
                                         size_t ws_bytes, rkv_attn_plan_layout *out)
{
    static const char fn[] = "rkv_attn_plan_create";
    const unsigned Hkv = g->num_kv_heads, G = g->num_qo_heads / Hkv;
    const split_choice sc = choose_split(c, g, rows);
    if ((size_t)Hkv * sc.ng > 65535)
        return rkv_set_error(RKV_ERR_UNSUPPORTED,
                             "%s: %zu query head groups exceed a grid's y (65535)", fn,
                             (size_t)Hkv * sc.ng);
    (void)G;
    const uint32_t nrows = rows->num_rows;
    const size_t nst = (size_t)nrows * g->num_qo_heads;
    carve cv;
    rkv_attn_plan_layout p;
    carve_rows(cv, &p, rows);
    p.tensor_core = use_tensor_cores(g, rows);
    p.ntiles = p.tensor_core ? tensor_core_tiles(rows, g->num_qo_heads / Hkv, NULL) : 0;
    p.off_t = cv.add(p.ntiles * 16);
    const size_t host_bytes = cv.total;
    p.direct = sc.splits == 1 || p.tensor_core;
    p.off_po = cv.add(p.direct ? 0 : sc.splits * nst * g->head_dim * 4);
    p.off_pl = cv.add(p.direct ? 0 : sc.splits * nst * 4);
    p.ws_bytes = cv.total;
    p.splits = (uint32_t)sc.splits;
    p.chunk = sc.chunk;
    p.ng = sc.ng;
    p.hpw = sc.hpw;
    p.num_rows = nrows;
    if (ws == NULL) { /* size query */
        *out = p;
        return RKV_OK;
    }
    if (ws_bytes < p.ws_bytes)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: workspace of %zu bytes, %zu needed",
                             fn, ws_bytes, p.ws_bytes);
    if (((uintptr_t)ws & 255) != 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: workspace %p not 256-byte aligned",
                             fn, ws);
    RKV_DEVICE_GUARD(c->device, fn);
    char *stage = (char *)calloc(1, host_bytes);
    if (stage == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", fn);
    stage_rows(stage, &p, rows);
    if (p.tensor_core)
        tensor_core_tiles(rows, g->num_qo_heads / Hkv, (uint32_t *)(stage + p.off_t));
    /* a pageable source is staged before the call returns */
    cudaError_t e = cudaMemcpyAsync(ws, stage, host_bytes, cudaMemcpyHostToDevice, c->stream);
    free(stage);
    RKV_CU_TRY(e, fn);
    *out = p;
    return RKV_OK;
}

/* Run: kernel launches only (no copy, allocation or synchronisation), so a
 * stream capture records it whole. */
extern "C" rkv_status rkv_attn_cuda_run(rkv_attn_cuda *c, const rkv_attn_geom *g,
                                        const rkv_attn_plan_layout *p, void *ws,
                                        const void *kbase, const void *vbase, const void *q,
                                        float sm_scale, void *out, float *lse)
{
    static const char fn[] = "rkv_attn_run";
    RKV_DEVICE_GUARD(c->device, fn);
    char *w = (char *)ws;
    if (p->tensor_core)
        return launch_tensor_core(c, g, fn, w, p->off_len, p->off_ind, p->off_idx, p->off_t,
                                  p->ntiles, kbase, vbase, q, sm_scale, out, lse);
    rkv_status st = launch_rows_at(c, g, fn, p, w, kbase, vbase, q, sm_scale, out, lse);
    if (st != RKV_OK || p->direct)
        return st;
    return launch_finalize_at(c, g, fn, p, w, NULL, NULL, out, lse);
}

/* ---- merge ---------------------------------------------------------------- */

template <typename T>
__global__ void merge_kernel(const void *va, const float *la, const void *vb,
                             const float *lb, void *vo, float *lo, unsigned D, size_t b0)
{
    typedef elem<T> E;
    typedef typename E::raw raw;
    const size_t i = b0 + blockIdx.x;
    const unsigned d = threadIdx.x;
    float a = ld_global(la + i), b = ld_global(lb + i);
    float M = fmaxf(a, b);
    float wa = 0.0f, wb = 0.0f, ls = -INFINITY;
    if (M != -INFINITY) {
        wa = __expf(a - M);
        wb = __expf(b - M);
        ls = M + logf(wa + wb);
        float inv = 1.0f / (wa + wb);
        wa *= inv;
        wb *= inv;
    }
    /* an empty state (weight 0) is skipped, not multiplied: its values
     * may be anything, NaN included */
    float x = 0.0f;
    if (wa != 0.0f)
        x += E::load((const raw *)va, i * D + d) * wa;
    if (wb != 0.0f)
        x += E::load((const raw *)vb, i * D + d) * wb;
    __syncthreads(); /* every thread has read its inputs before out may alias them */
    E::store((raw *)vo, i * D + d, x);
    if (lo != NULL && d == 0)
        st_global(lo + i, ls);
}

extern "C" rkv_status rkv_attn_cuda_merge(rkv_attn_cuda *c, const rkv_attn_geom *g,
                                          uint32_t n, const void *v_a, const float *lse_a,
                                          const void *v_b, const float *lse_b, void *v_out,
                                          float *lse_out)
{
    static const char fn[] = "rkv_attn_merge";
    RKV_DEVICE_GUARD(c->device, fn);
    const unsigned D = g->head_dim;
    return launch_1d(c, n, fn, [&](unsigned nb, size_t b0) {
        switch (g->dtype) {
        case RKV_DTYPE_F16:
            RKV_LAUNCH(nb, D, 0, c->stream, merge_kernel<f16_t>)(v_a, lse_a, v_b, lse_b, v_out,
                                                                 lse_out, D, b0);
            break;
        case RKV_DTYPE_BF16:
            RKV_LAUNCH(nb, D, 0, c->stream, merge_kernel<bf16_t>)(v_a, lse_a, v_b, lse_b, v_out,
                                                                  lse_out, D, b0);
            break;
        default:
            RKV_LAUNCH(nb, D, 0, c->stream, merge_kernel<float>)(v_a, lse_a, v_b, lse_b, v_out,
                                                                 lse_out, D, b0);
            break;
        }
    });
}
