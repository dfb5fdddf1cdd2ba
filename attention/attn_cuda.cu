/*
 * attention/attn_cuda.cu -- the CUDA backend of paged attention (see
 * attn_internal.h for the "rows" every operation is lowered to).
 *
 * Kernels:
 *   - append: one block per token copies its K and V rows into their slots.
 *   - rows (decode and prefill): flash-decoding. Grid (row, kv head [x
 *     group of up to 16 of its query heads], KV split). Per tile of 32
 *     tokens the block stages K and V in shared memory with 16-byte
 *     cp.async copies issued a tile ahead (attention/cp_async.h), then
 *     every query head of the GQA group scores and accumulates from
 *     that tile (one warp per head, up to 4 heads a warp): K/V are read
 *     once per group. A head's online softmax lives in one warp; the block
 *     writes an fp32 partial (o, lse) per split. A finalize kernel merges
 *     the splits (and, for cascade, the shared-prefix state) by
 *     log-sum-exp and rounds once into the output dtype (with one split
 *     and no shared prefix the rows kernel writes the output itself).
 *   - tiles (prefill/extend without a shared prefix, and a cascade's shared
 *     prefix): FlashAttention-2 style, K/V tiles in shared memory for 64
 *     (prefix: 128) score rows a block, on tensor cores for f16/bf16 and
 *     fp32 FMAs for f32 (see attn_tile_kernel). A cascade runs the rows
 *     kernel over each row's own KV, the tile kernel over the prefix (its
 *     fp32 state per split, no scores in global memory) and merges both
 *     in finalize: three launches.
 * Every launch is followed by cudaGetLastError; every runtime call is
 * checked and turned into RKV_ERR_CUDA with its message. The
 * one-shot calls' workspace (uploaded index arrays, partial states, cascade
 * buffers) is one device allocation that only grows; it is reused in
 * stream order. A plan (rkv_attn_cuda_plan) lays the same arrays out in
 * the caller's workspace once; rkv_attn_cuda_run only launches.
 * Kernels touch global memory only through ld_global / st_global
 * (attention/devmem.h) and cp_async16 (attention/cp_async.h), so the
 * simulator's meter sees every access.
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

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attn_internal.h"
#include "attention/cp_async.h"
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
    void *ws;            /* device workspace */
    size_t ws_bytes;
    size_t cascade_budget; /* bytes of a shared prefix's fp32 split states */
    unsigned max_grid_x;   /* the device's limit; larger 1D grids are split */
};

/* ---- error plumbing ------------------------------------------------------ */

/* Device selection and runtime errors: common/cuda_guard.h. */
#define LAUNCH_CHECK(what) RKV_CU_TRY(cudaGetLastError(), what)

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

/* The quantized-KV and window fields of rows_args or tile_args from a
 * geometry. */
template <typename A> static void rows_quant(A &a, const rkv_attn_geom *g)
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
template <typename E, typename A>
static __device__ __forceinline__ void kvq_chunk(const A &a, const void *base,
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

/* The first tile start >= tb (in steps of tn) that a window does not hide
 * entirely (t1 if none): a tile of keys [tb, tb + n) is hidden when it
 * lies before the window's first position wlo and after the sinks. */
static __device__ __forceinline__ unsigned visible_tile(unsigned tb, unsigned t1, unsigned wlo,
                                                        unsigned sinks, unsigned tn)
{
    while (tb < t1 && tb >= sinks && tb + min(tn, t1 - tb) <= wlo)
        tb += tn;
    return tb;
}

/* Starts loading the K and V rows stok[0 .. n) into sk / sv: 16-byte
 * cp.async copies (the caller commits and waits), or for a quantized pool
 * dequantized through registers, rounded to E's type (the compute path
 * then runs as for E's own K/V). */
template <typename E, int D, int TN, int KP>
static __device__ __forceinline__ void rows_stage(const rows_args &a,
                                                  const typename E::raw *kb,
                                                  const typename E::raw *vb,
                                                  const size_t *stok, unsigned n,
                                                  typename E::raw (*sk)[KP],
                                                  typename E::raw (*sv)[KP])
{
    typedef typename E::raw raw;
    const int VE = 16 / sizeof(raw), VR = D / VE;
    typedef rvec<raw, VE> vec;
    if (a.kvq != 0) {
        const unsigned C = a.kvq == RKV_DTYPE_INT4 ? min(a.qgroup, 32u) : 32u;
        const unsigned nch = D / C;
        for (unsigned i = threadIdx.x; i < n * nch; i += blockDim.x) {
            const unsigned j = i / nch, c0 = (i % nch) * C;
            kvq_chunk<E>(a, a.kb, stok[j], c0, C, &sk[j][c0]);
            kvq_chunk<E>(a, a.vb, stok[j], c0, C, &sv[j][c0]);
        }
        return;
    }
    for (unsigned i = threadIdx.x; i < n * VR; i += blockDim.x) {
        const unsigned j = i / VR, c = i % VR;
        const size_t at = stok[j] * D + c * VE;
        cp_async16(reinterpret_cast<vec *>(&sk[j][c * VE]),
                   reinterpret_cast<const vec *>(kb + at));
        cp_async16(reinterpret_cast<vec *>(&sv[j][c * VE]),
                   reinterpret_cast<const vec *>(vb + at));
    }
}

/* One block per (row, kv head[, group of up to 16 of its query heads],
 * split): every query head of a GQA group reads the same K/V tile, so K/V
 * cross the memory bus once per group whatever G (up to 16). Per tile of
 * 32 tokens (16 at f32) the block copies K and V into shared memory with
 * 16-byte cp.async copies issued one tile ahead, so the next tile is in
 * flight while this one is scored (rows padded by one vector so the
 * per-lane row reads of the scoring hit distinct banks); warp w then
 * serves heads w, w + 4, ...: lane t scores
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
    /* tokens per tile: 32 (one per lane when scoring); 16 at f32, so that
     * two tiles (the one scored and the one in flight) fit 48 KiB */
    const int TN = sizeof(raw) == 4 ? TT / 2 : TT;
    typedef rvec<raw, VE> vec;
    typedef rvec<raw, EL> lvec;
    __shared__ __align__(16) raw sk[2][TN][KP];
    __shared__ __align__(16) raw sv[2][TN][KP];
    __shared__ float sq[NW * HPW][D];
    __shared__ size_t stok[2][TN];

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
    /* Two tile buffers: while the block scores tile tb from buffer b, the
     * copies of the next visible tile into b ^ 1 are in flight (cp.async;
     * quantized tiles are dequantized through registers instead). A tile
     * the window hides entirely is skipped (block-uniform), so every tile
     * scored has a visible token. */
    unsigned tb = visible_tile(t0, t1, wlo, a.sinks, TN), b = 0;
    if (tb < t1 && threadIdx.x < min((unsigned)TN, t1 - tb))
        stok[0][threadIdx.x] = kv_row(pages, tb + threadIdx.x, a.P, a.Hkv, kvh);
    __syncthreads(); /* q and the first tile's rows stored */
    if (tb < t1)
        rows_stage<E, D, TN, KP>(a, kb, vb, stok[0], min((unsigned)TN, t1 - tb), sk[0], sv[0]);
    cp_async_commit();
    while (tb < t1) {
        const unsigned n = min((unsigned)TN, t1 - tb);
        const unsigned nx = visible_tile(tb + TN, t1, wlo, a.sinks, TN);
        if (nx < t1 && threadIdx.x < min((unsigned)TN, t1 - nx))
            stok[b ^ 1][threadIdx.x] = kv_row(pages, nx + threadIdx.x, a.P, a.Hkv, kvh);
        __syncthreads(); /* next rows stored; buffer b ^ 1 consumed */
        if (nx < t1)
            rows_stage<E, D, TN, KP>(a, kb, vb, stok[b ^ 1], min((unsigned)TN, t1 - nx),
                                     sk[b ^ 1], sv[b ^ 1]);
        cp_async_commit();
        cp_async_wait<1>(); /* this thread's copies of tile tb have landed */
        __syncthreads();    /* and every thread's */
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
                    const vec kv = *reinterpret_cast<const vec *>(&sk[b][lane][c * VE]);
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
                const lvec vv = *reinterpret_cast<const lvec *>(&sv[b][j][lane * EL]);
#pragma unroll
                for (int e = 0; e < EL; e++)
                    acc[h][e] += pj * E::cvt(vv.v[e]);
            }
            m[h] = mn;
        }
        tb = nx;
        b ^= 1;
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
    /* cascade shared state [xsplits][Hkv][rows * G][D] (score row m =
     * row * G + head % G), or NULL */
    const float *xo, *xlse;
    void *out;
    float *lse;
    unsigned rows, Hq, G, D, splits, xsplits;
};

#define SPLITS_MAX 1024 /* KV splits of a row (choose_split), and of a prefix */

/* grid.x = row * Hq + head, block = D threads. The states' lse are read
 * once each into shared memory (not once per thread). */
template <typename T>
__global__ void finalize_kernel(fin_args f, size_t b0)
{
    typedef elem<T> E;
    __shared__ float sl[2 * SPLITS_MAX];
    const size_t idx = b0 + blockIdx.x;
    const unsigned d = threadIdx.x;
    const size_t n = (size_t)f.rows * f.Hq; /* = Hkv * rows * G: a split's states */
    const unsigned row = (unsigned)(idx / f.Hq), h = (unsigned)(idx % f.Hq);
    const unsigned xs = f.xo != NULL ? f.xsplits : 0;
    const size_t xi = ((size_t)(h / f.G) * f.rows + row) * f.G + h % f.G;
    for (unsigned s = d; s < f.splits; s += blockDim.x)
        sl[s] = ld_global(f.plse + s * n + idx);
    for (unsigned s = d; s < xs; s += blockDim.x)
        sl[SPLITS_MAX + s] = ld_global(f.xlse + s * n + xi);
    __syncthreads();
    float M = -INFINITY;
    for (unsigned s = 0; s < f.splits; s++)
        M = fmaxf(M, sl[s]);
    for (unsigned s = 0; s < xs; s++)
        M = fmaxf(M, sl[SPLITS_MAX + s]);
    float L = 0.0f, O = 0.0f;
    if (M != -INFINITY) {
        for (unsigned s = 0; s < f.splits; s++) {
            const float ls = sl[s], w = ls == -INFINITY ? 0.0f : __expf(ls - M);
            L += w;
            if (w != 0.0f)
                O += w * ld_global(f.po + (s * n + idx) * f.D + d);
        }
        for (unsigned s = 0; s < xs; s++) {
            const float ls = sl[SPLITS_MAX + s], w = ls == -INFINITY ? 0.0f : __expf(ls - M);
            L += w;
            if (w != 0.0f)
                O += w * ld_global(f.xo + (s * n + xi) * f.D + d);
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

/* ---- tiles: prefill/extend and a cascade's shared prefix ----------------- */

/* FlashAttention-2 style: a block takes a tile of 16 * W score rows of one
 * kv head (score row m = query row m / G, head m % G of the GQA group, so
 * the group's heads share every K/V tile), each of its W warps 16 rows.
 * Per K/V tile of KT tokens (16-byte loads into shared memory): S = Q.K^T
 * in fp32, scale and mask, an online softmax per row, then O += P.V. A
 * lane holds the accumulators of the m16n8 MMA layout (attention/mma.h):
 * rows g and g + 8 of its warp's 16, columns 2t, 2t + 1 of each 8-wide
 * slice. 16-bit types multiply on tensor cores (m16n8k16, P rounded to the
 * input type and taken straight from S's registers, whose layout is the A
 * operand's); f32 computes the same accumulators with fp32 FMAs from
 * shared memory (tile_math below).
 * Two modes:
 *   - prefill/extend (tiles != NULL): a tile of one request's rows, causal
 *     (and windowed) per row; K/V up to its last row's position only; the
 *     output is written in the dtype.
 *   - shared prefix (tiles == NULL): every row of the call sees the whole
 *     prefix (pages), cut into splits of `chunk` tokens (grid z); the
 *     block writes the fp32 state (o, lse) of its split to xo / xl
 *     [split][Hkv][M][D], which finalize merges with the rows' own part.
 *     No scores or P leave the block: each K/V tile is read once per tile
 *     of score rows. */
struct tile_args {
    const void *q;
    const void *kb, *vb;
    const unsigned *row_len, *kv_indptr, *kv_indices;
    const unsigned *tiles; /* [ntiles][4]: request, first query row, query rows, m0 */
    const unsigned *pages; /* shared prefix: its page table */
    void *out;
    float *lse;
    float *xo, *xl; /* shared prefix: fp32 state per split */
    unsigned Hq, Hkv, G, P;
    unsigned tile0; /* first tile of this launch */
    unsigned rows;  /* shared prefix: query rows of the call */
    unsigned len, chunk; /* shared prefix: its tokens, tokens per split */
    unsigned window, sinks; /* as rows_args */
    float scale;
    /* quantized KV, as rows_args: tiles are dequantized on load */
    int kvq;
    unsigned qgroup, qnsc;
    size_t qblk, qcb, qscale_off;
};

#define TILE_ROWS 64 /* score rows of a prefill tile (W = 4) */

template <typename R> static __device__ __forceinline__ uint32_t pack2(R lo, R hi)
{
    return (uint32_t)lo | (uint32_t)hi << 16;
}

/* The two products of a tile per element type: qk fills S (NT = KT / 8
 * slices of 8 tokens), pv adds P.V to O (DT = D / 8 slices of 8 dims);
 * p holds the unrounded probabilities in S's layout. */
template <typename T, typename MT> struct tile_mma {
    typedef unsigned short raw;
    template <int D, int KT, int KP>
    static __device__ __forceinline__ void qk(float sc[][4], const raw (*sq)[KP],
                                              const raw (*sk)[KP], unsigned r0, unsigned r1,
                                              unsigned gq, unsigned tq)
    {
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++) {
            const int c0 = ks * 16 + 2 * tq;
            uint32_t af[4] = {pack2(sq[r0][c0], sq[r0][c0 + 1]), pack2(sq[r1][c0], sq[r1][c0 + 1]),
                              pack2(sq[r0][c0 + 8], sq[r0][c0 + 9]),
                              pack2(sq[r1][c0 + 8], sq[r1][c0 + 9])};
#pragma unroll
            for (int nt = 0; nt < KT / 8; nt++) {
                const unsigned kr = nt * 8 + gq;
                uint32_t bf[2] = {pack2(sk[kr][c0], sk[kr][c0 + 1]),
                                  pack2(sk[kr][c0 + 8], sk[kr][c0 + 9])};
                mma_16816<MT>(sc[nt], af, bf, sc[nt]);
            }
        }
    }
    template <int D, int KT, int KP>
    static __device__ __forceinline__ void pv(float o[][4], const float p[][4],
                                              const raw (*sv)[KP], unsigned gq, unsigned tq)
    {
        typedef elem<T> E;
#pragma unroll
        for (int kk = 0; kk < KT / 16; kk++) {
            uint32_t af[4] = {pack2(E::bits(p[2 * kk][0]), E::bits(p[2 * kk][1])),
                              pack2(E::bits(p[2 * kk][2]), E::bits(p[2 * kk][3])),
                              pack2(E::bits(p[2 * kk + 1][0]), E::bits(p[2 * kk + 1][1])),
                              pack2(E::bits(p[2 * kk + 1][2]), E::bits(p[2 * kk + 1][3]))};
            const unsigned k0 = kk * 16 + 2 * tq;
#pragma unroll
            for (int dt = 0; dt < D / 8; dt++) {
                const unsigned dc = dt * 8 + gq;
                uint32_t bf[2] = {pack2(sv[k0][dc], sv[k0 + 1][dc]),
                                  pack2(sv[k0 + 8][dc], sv[k0 + 9][dc])};
                mma_16816<MT>(o[dt], af, bf, o[dt]);
            }
        }
    }
};

/* f32: the same accumulators by fp32 FMAs. A lane's P values of rows g and
 * g + 8 at the tokens its quad's other lanes hold come by shuffle. */
struct tile_fma {
    template <int D, int KT, int KP>
    static __device__ __forceinline__ void qk(float sc[][4], const float (*sq)[KP],
                                              const float (*sk)[KP], unsigned r0, unsigned r1,
                                              unsigned gq, unsigned tq)
    {
        (void)gq;
#pragma unroll
        for (int nt = 0; nt < KT / 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float *qr = sq[e < 2 ? r0 : r1], *kr = sk[nt * 8 + 2 * tq + (e & 1)];
                float dot = 0.0f;
#pragma unroll 8
                for (int d = 0; d < D; d++)
                    dot += qr[d] * kr[d];
                sc[nt][e] += dot;
            }
    }
    template <int D, int KT, int KP>
    static __device__ __forceinline__ void pv(float o[][4], const float p[][4],
                                              const float (*sv)[KP], unsigned gq, unsigned tq)
    {
#pragma unroll
        for (int nt = 0; nt < KT / 8; nt++)
#pragma unroll
            for (int s = 0; s < 4; s++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const float x = __shfl_sync(0xffffffffu, p[nt][e], gq * 4 + s);
                    const float y = __shfl_sync(0xffffffffu, p[nt][2 + e], gq * 4 + s);
                    const float *vr = sv[nt * 8 + 2 * s + e];
#pragma unroll
                    for (int dt = 0; dt < D / 8; dt++) {
                        const float v0 = vr[dt * 8 + 2 * tq], v1 = vr[dt * 8 + 2 * tq + 1];
                        o[dt][0] += x * v0;
                        o[dt][1] += x * v1;
                        o[dt][2] += y * v0;
                        o[dt][3] += y * v1;
                    }
                }
    }
};

template <typename T> struct tile_math_of;
template <> struct tile_math_of<f16_t> { typedef tile_mma<f16_t, mma_f16> type; };
template <> struct tile_math_of<bf16_t> { typedef tile_mma<bf16_t, mma_bf16> type; };
template <> struct tile_math_of<float> { typedef tile_fma type; };

template <typename T, int D, int W, int KT>
__global__ void __launch_bounds__(W * 32) attn_tile_kernel(tile_args a)
{
    typedef elem<T> E;
    typedef typename E::raw raw;
    typedef typename tile_math_of<T>::type MATH;
    const int ROWS = 16 * W, VE = 16 / sizeof(raw), VR = D / VE, KP = D + VE;
    const int NT = KT / 8, DT = D / 8;
    /* quantized KV is dequantized into 16-bit tiles only: at f32 the extra
     * code spills on sm_90 (f32 activations over quantized KV prefill on
     * the rows kernel) */
    const bool QUANT = sizeof(raw) == 2;
    typedef rvec<raw, VE> vec;
    __shared__ __align__(16) raw sq[ROWS][KP];
    __shared__ __align__(16) raw sk[KT][KP];
    __shared__ __align__(16) raw sv[KT][KP];
    __shared__ unsigned slen[ROWS];
    __shared__ size_t stok[KT];

    const bool prefix = a.tiles == NULL;
    unsigned qlo = 0, qn = a.rows, m0, kbeg = 0, kend;
    const unsigned *pages = a.pages;
    const unsigned kvh = blockIdx.y, G = a.G;
    if (!prefix) {
        const unsigned *tile = a.tiles + (size_t)(a.tile0 + blockIdx.x) * 4;
        const unsigned req = ld_global(tile);
        qlo = ld_global(tile + 1);
        qn = ld_global(tile + 2);
        m0 = ld_global(tile + 3);
        pages = a.kv_indices + ld_global(a.kv_indptr + req);
    } else {
        m0 = (a.tile0 + blockIdx.x) * ROWS;
        kbeg = blockIdx.z * a.chunk;
    }
    const unsigned M = qn * G;
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned gq = lane >> 2, tq = lane & 3;
    const raw *q = (const raw *)a.q, *kb = (const raw *)a.kb, *vb = (const raw *)a.vb;
    if (prefix)
        kend = min(a.len, kbeg + a.chunk);
    else /* the last row's length: the longest of the tile */
        kend = ld_global(a.row_len + qlo + (min(m0 + ROWS, M) - 1) / G);

    for (unsigned i = threadIdx.x; i < ROWS * D; i += blockDim.x) {
        const unsigned r = i / D, d = i % D, m = m0 + r;
        raw x = 0;
        if (m < M) /* q may be unaligned: element loads */
            x = ld_global(q + ((size_t)(qlo + m / G) * a.Hq + kvh * G + m % G) * D + d);
        sq[r][d] = x;
    }
    for (unsigned r = threadIdx.x; r < ROWS; r += blockDim.x)
        slen[r] = m0 + r >= M ? 0 : prefix ? kend : ld_global(a.row_len + qlo + (m0 + r) / G);

    const unsigned r0 = warp * 16 + gq, r1 = r0 + 8; /* this lane's two rows */
    float o[DT][4], mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.0f, 0.0f};
#pragma unroll
    for (int dt = 0; dt < DT; dt++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            o[dt][e] = 0.0f;
    for (unsigned kt = kbeg; kt < kend; kt += KT) {
        const unsigned n = min((unsigned)KT, kend - kt);
        __syncthreads(); /* q and lengths stored; the previous tile consumed */
        if (threadIdx.x < n)
            stok[threadIdx.x] = kv_row(pages, kt + threadIdx.x, a.P, a.Hkv, kvh);
        __syncthreads();
        if (QUANT && a.kvq != 0) {
            /* quantized: dequantized into the tile, rounded to T, in chunks
             * that share one scale (as the rows kernel does) */
            const unsigned C = a.kvq == RKV_DTYPE_INT4 ? min(a.qgroup, 32u) : 32u;
            const unsigned nch = D / C;
            for (unsigned i = threadIdx.x; i < KT * nch; i += blockDim.x) {
                const unsigned j = i / nch, c0 = (i % nch) * C;
                if (j < n) {
                    kvq_chunk<E>(a, a.kb, stok[j], c0, C, &sk[j][c0]);
                    kvq_chunk<E>(a, a.vb, stok[j], c0, C, &sv[j][c0]);
                } else { /* masked tokens: P is 0, and 0 * V must not be NaN */
                    for (unsigned e = 0; e < C; e++)
                        sk[j][c0 + e] = sv[j][c0 + e] = 0;
                }
            }
        }
        for (unsigned i = threadIdx.x; !(QUANT && a.kvq != 0) && i < KT * VR;
             i += blockDim.x) {
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
        MATH::template qk<D, KT, KP>(sc, sq, sk, r0, r1, gq, tq);
        /* scale, mask, online softmax; sc[nt][0..1] are row r0 at tokens
         * kt + nt*8 + 2tq + {0,1}, sc[nt][2..3] row r1. A row at position
         * len - 1 sees t < len with t + window >= len - 1 or t < sinks. */
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const unsigned tok = kt + nt * 8 + 2 * tq + (e & 1);
                const unsigned len = slen[e < 2 ? r0 : r1];
                const bool ok = tok < len && (a.window == 0 || tok + a.window + 1 >= len ||
                                              tok < a.sinks);
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
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                sc[nt][e] = sc[nt][e] == -INFINITY ? 0.0f : __expf(sc[nt][e] - mn[e >> 1]);
                ps[e >> 1] += sc[nt][e];
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
        MATH::template pv<D, KT, KP>(o, sc, sv, gq, tq);
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const unsigned m = m0 + (h ? r1 : r0);
        if (m >= M)
            continue;
        /* a row that saw no key (a window can hide them all from a prefix
         * split) has the empty state */
        const bool empty = lrow[h] == 0.0f;
        const float ls = empty ? -INFINITY : mrow[h] + logf(lrow[h]);
        if (prefix) {
            const size_t xi = ((size_t)blockIdx.z * a.Hkv + kvh) * M + m;
#pragma unroll
            for (int dt = 0; dt < DT; dt++)
#pragma unroll
                for (int e = 0; e < 2; e++)
                    st_global(a.xo + xi * D + dt * 8 + 2 * tq + e,
                              empty ? 0.0f : o[dt][2 * h + e] / lrow[h]);
            if (tq == 0)
                st_global(a.xl + xi, ls);
            continue;
        }
        const size_t vi = (size_t)(qlo + m / G) * a.Hq + kvh * G + m % G;
#pragma unroll
        for (int dt = 0; dt < DT; dt++)
#pragma unroll
            for (int e = 0; e < 2; e++)
                E::store((raw *)a.out, vi * D + dt * 8 + 2 * tq + e,
                         empty ? 0.0f : o[dt][2 * h + e] / lrow[h]);
        if (tq == 0 && a.lse != NULL)
            st_global(a.lse + vi, ls);
    }
}

/* Prefill tiles: 64 rows, tiles of 32 tokens at 16 bits, 8 at f32 (its Q
 * tile is twice the bytes); shared-prefix tiles at 16 bits take 128 rows
 * (16-token K/V tiles keep the block's shared memory under 48 KiB), so
 * that a prefix is read once per 128 score rows. */
template <typename T> struct tile_shape;
template <> struct tile_shape<f16_t> { enum { W = 4, KT = 32, XW = 8, XKT = 16 }; };
template <> struct tile_shape<bf16_t> { enum { W = 4, KT = 32, XW = 8, XKT = 16 }; };
template <> struct tile_shape<float> { enum { W = 4, KT = 8, XW = 4, XKT = 8 }; };

template <typename T, int D>
static void launch_tile_d(dim3 grid, cudaStream_t s, const tile_args &a)
{
    typedef tile_shape<T> S;
    if (a.tiles != NULL)
        RKV_LAUNCH(grid, S::W * 32, 0, s, attn_tile_kernel<T, D, S::W, S::KT>)(a);
    else
        RKV_LAUNCH(grid, S::XW * 32, 0, s, attn_tile_kernel<T, D, S::XW, S::XKT>)(a);
}

/* Score rows a shared-prefix block of dtype dt takes. */
static unsigned prefix_rows(rkv_dtype dt)
{
    return dt == RKV_DTYPE_F32 ? 16 * tile_shape<float>::XW : 16 * tile_shape<f16_t>::XW;
}

/* Launches the tile kernel (grid y = kv head, z = prefix splits) over
 * nx tiles of rows. */
static rkv_status launch_tiles(rkv_attn_cuda *c, const rkv_attn_geom *g, const char *fn,
                               tile_args &a, size_t nx, unsigned nz)
{
    if (g->num_kv_heads > 65535 || nz > 65535)
        return rkv_set_error(RKV_ERR_UNSUPPORTED, "%s: %u kv heads or %u splits exceed a grid",
                             fn, g->num_kv_heads, nz);
    return launch_1d(c, nx, fn, [&](unsigned nb, size_t b0) {
        dim3 grid(nb, g->num_kv_heads, nz);
        a.tile0 = (unsigned)b0;
        const bool d64 = g->head_dim == 64;
        switch (g->dtype) {
        case RKV_DTYPE_F16:
            d64 ? launch_tile_d<f16_t, 64>(grid, c->stream, a)
                : launch_tile_d<f16_t, 128>(grid, c->stream, a);
            break;
        case RKV_DTYPE_BF16:
            d64 ? launch_tile_d<bf16_t, 64>(grid, c->stream, a)
                : launch_tile_d<bf16_t, 128>(grid, c->stream, a);
            break;
        default:
            d64 ? launch_tile_d<float, 64>(grid, c->stream, a)
                : launch_tile_d<float, 128>(grid, c->stream, a);
            break;
        }
    });
}

/* tile_args with the geometry's fields set, the rest zero. */
static tile_args tile_args_of(const rkv_attn_geom *g, const void *kbase, const void *vbase,
                              const void *q, float sm_scale)
{
    tile_args a;
    memset(&a, 0, sizeof a);
    a.q = q;
    a.kb = kbase;
    a.vb = vbase;
    a.Hq = g->num_qo_heads;
    a.Hkv = g->num_kv_heads;
    a.G = a.Hq / a.Hkv;
    a.P = g->page_size;
    rows_quant(a, g);
    a.scale = sm_scale;
    return a;
}

/* Tiles of TILE_ROWS score rows, none spanning two requests (a request's
 * rows are contiguous): the count, and with tl != NULL the tiles
 * (request, first query row, query rows, first score row). */
static size_t prefill_tiles(const rkv_attn_rows *rows, unsigned G, uint32_t *tl)
{
    size_t k = 0;
    for (uint32_t i = 0; i < rows->num_rows;) {
        uint32_t j = i;
        while (j < rows->num_rows && rows->row_req[j] == rows->row_req[i])
            j++;
        for (size_t m0 = 0; m0 < (size_t)(j - i) * G; m0 += TILE_ROWS, k++)
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

/* The tile path takes prefill/extend rows (some request has several query
 * rows) without a shared prefix. */
static bool use_tiles(const rkv_attn_geom *g, const rkv_attn_rows *rows)
{
    /* quantized KV with f32 activations: the rows kernel dequantizes */
    return (g->kv_dtype == g->dtype || g->dtype != RKV_DTYPE_F32) &&
           rows->num_rows > rows->num_reqs;
}

/* Launches the prefill tiles over uploaded lengths, table and tiles. */
static rkv_status launch_prefill_tiles(rkv_attn_cuda *c, const rkv_attn_geom *g,
                                       const char *fn, const char *ws, size_t off_len,
                                       size_t off_ind, size_t off_idx, size_t off_t,
                                       size_t ntiles, const void *kbase, const void *vbase,
                                       const void *q, float sm_scale, void *out, float *lse)
{
    tile_args a = tile_args_of(g, kbase, vbase, q, sm_scale);
    a.row_len = (const unsigned *)(ws + off_len);
    a.kv_indptr = (const unsigned *)(ws + off_ind);
    a.kv_indices = (const unsigned *)(ws + off_idx);
    a.tiles = (const unsigned *)(ws + off_t);
    a.out = out;
    a.lse = lse;
    return launch_tiles(c, g, fn, a, ntiles, 1);
}

/* Prefill/extend by tiles: the host cuts each request's score rows into
 * tiles and uploads them with the table into the context's workspace. */
static rkv_status prefill_by_tiles(rkv_attn_cuda *c, const rkv_attn_geom *g,
                                   const void *kbase, const void *vbase,
                                   const rkv_attn_rows *rows, const void *q, float sm_scale,
                                   void *out, float *lse)
{
    static const char fn[] = "rkv_attn_prefill";
    const unsigned G = g->num_qo_heads / g->num_kv_heads;
    const uint32_t nrows = rows->num_rows, nreq = rows->num_reqs;
    const uint32_t total_pages = rows->kv_indptr[nreq];
    const size_t ntiles = prefill_tiles(rows, G, NULL);
    carve cv;
    const size_t off_len = cv.add((size_t)nrows * 4), off_ind = cv.add(((size_t)nreq + 1) * 4);
    const size_t off_idx = cv.add((size_t)total_pages * 4), off_t = cv.add(ntiles * 16);
    char *stage = (char *)calloc(1, cv.total);
    if (stage == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", fn);
    memcpy(stage + off_len, rows->row_len, (size_t)nrows * 4);
    memcpy(stage + off_ind, rows->kv_indptr, ((size_t)nreq + 1) * 4);
    memcpy(stage + off_idx, rows->kv_indices, (size_t)total_pages * 4);
    prefill_tiles(rows, G, (uint32_t *)(stage + off_t));
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
    return launch_prefill_tiles(c, g, fn, (const char *)c->ws, off_len, off_ind, off_idx,
                                off_t, ntiles, kbase, vbase, q, sm_scale, out, lse);
}

/* ---- cascade: shared prefix by tiles -------------------------------------- */

/* Splits of a shared prefix of S tokens for M score rows a kv head (grid
 * z): enough blocks to fill the GPU, at least 1024 tokens each (every
 * split adds an fp32 state of the rows to write and merge), their states
 * within the cascade budget. */
static unsigned prefix_splits(const rkv_attn_cuda *c, const rkv_attn_geom *g, size_t S,
                              size_t M)
{
    const size_t pr = prefix_rows(g->dtype);
    const size_t blocks = (M + pr - 1) / pr * g->num_kv_heads;
    const size_t per = (size_t)g->num_kv_heads * M * (g->head_dim + 1) * 4;
    size_t want = ((size_t)c->num_sms * 2 + blocks - 1) / blocks;
    const size_t by_len = (S + 1023) / 1024, by_mem = c->cascade_budget / per;
    if (want > by_len)
        want = by_len;
    if (want > by_mem)
        want = by_mem;
    if (want > SPLITS_MAX)
        want = SPLITS_MAX;
    return want < 1 ? 1 : (unsigned)want;
}

/* The shared prefix's fp32 state of every (kv head, score row) per split
 * into xo [splits][Hkv][M][D] and xl, by the tile kernel: the prefix's
 * K/V are read once per tile of score rows, and no scores leave a block. */
static rkv_status cascade_shared(rkv_attn_cuda *c, const rkv_attn_geom *g, const char *fn,
                                 const void *kbase, const void *vbase,
                                 const rkv_attn_rows *rows, const unsigned *pages, size_t S,
                                 unsigned splits, unsigned chunk, const void *q, float scale,
                                 float *xo, float *xl)
{
    const size_t M = (size_t)rows->num_rows * (g->num_qo_heads / g->num_kv_heads);
    const size_t pr = prefix_rows(g->dtype);
    tile_args a = tile_args_of(g, kbase, vbase, q, scale);
    a.pages = pages;
    a.xo = xo;
    a.xl = xl;
    a.rows = rows->num_rows;
    a.len = (unsigned)S;
    a.chunk = chunk;
    return launch_tiles(c, g, fn, a, (M + pr - 1) / pr, splits);
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
    if (splits > SPLITS_MAX)
        splits = SPLITS_MAX;
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
                                     const float *xo, const float *xlse,
                                     unsigned xsplits, void *out, float *lse)
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
    f.xsplits = xsplits;
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
    if (shared == NULL && use_tiles(g, rows))
        return prefill_by_tiles(c, g, kbase, vbase, rows, q, sm_scale, out, lse);
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
    size_t off_xo = 0, off_xl = 0, S = 0;
    unsigned xsplits = 0, xchunk = 0;
    if (shared != NULL) {
        /* the prefix's fp32 state per split, [xsplits][Hkv][M][D] and lse */
        const size_t M = (size_t)nrows * G;
        S = (size_t)shared->num_pages * g->page_size;
        xsplits = prefix_splits(c, g, S, M);
        xchunk = (unsigned)((S + xsplits - 1) / xsplits);
        xsplits = (unsigned)((S + xchunk - 1) / xchunk);
        off_xo = cv.add((size_t)xsplits * Hkv * M * D * 4);
        off_xl = cv.add((size_t)xsplits * Hkv * M * 4);
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
        st = cascade_shared(c, g, fn, kbase, vbase, rows, (const unsigned *)(ws + off_pages),
                            S, xsplits, xchunk, q, sm_scale, (float *)(ws + off_xo),
                            (float *)(ws + off_xl));
        if (st != RKV_OK)
            return st;
    }
    return launch_finalize_at(c, g, fn, &L, ws, xo, xlse, xsplits, out, lse);
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
    p.tiled = use_tiles(g, rows);
    p.ntiles = p.tiled ? prefill_tiles(rows, g->num_qo_heads / Hkv, NULL) : 0;
    p.off_t = cv.add(p.ntiles * 16);
    const size_t host_bytes = cv.total;
    p.direct = sc.splits == 1 || p.tiled;
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
    if (p.tiled)
        prefill_tiles(rows, g->num_qo_heads / Hkv, (uint32_t *)(stage + p.off_t));
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
    if (p->tiled)
        return launch_prefill_tiles(c, g, fn, w, p->off_len, p->off_ind, p->off_idx, p->off_t,
                                  p->ntiles, kbase, vbase, q, sm_scale, out, lse);
    rkv_status st = launch_rows_at(c, g, fn, p, w, kbase, vbase, q, sm_scale, out, lse);
    if (st != RKV_OK || p->direct)
        return st;
    return launch_finalize_at(c, g, fn, p, w, NULL, NULL, 0, out, lse);
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
