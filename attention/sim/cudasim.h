/*
 * attention/sim/cudasim.h -- the CUDA surface radixkv's kernels and host
 * code use, implemented on the CPU (runtime: cudasim_rt.cpp). With
 * -DRKV_CUDA=SIM the .cu sources are compiled as C++ with this header
 * force-included; C files reach it through the forwarding headers in
 * attention/sim/include (cuda_runtime.h, cuda_fp16.h, cuda_bf16.h,
 * cublas_v2.h).
 *
 * What it models, strictly:
 *   - Blocks run one at a time; each CUDA thread is a fibre with its own
 *     stack that switches only at __syncthreads and warp collectives.
 *     __shared__ variables are per block (poisoned with NaN bytes 0xff
 *     before every block).
 *   - __syncthreads is a barrier that reports divergence: a thread that
 *     exits, or waits at another barrier or collective, while others wait.
 *   - Warp collectives (__shfl*_sync, __syncwarp, __ballot_sync, __any_sync,
 *     __all_sync) run in lockstep; a mask naming an absent or exited lane,
 *     a lane waiting elsewhere, or a shuffle source outside the mask is an
 *     error.
 *   - Launch limits (block 1024 threads, 1024/1024/64; grid x <= the
 *     device's max grid x, y, z <= 65535; dynamic shared memory <= 48 KiB;
 *     the stream's device is the current one); pointer kernel arguments
 *     must be device memory of the current device.
 *   - Device memory: every allocation is its own mapping between guard
 *     pages (a read or write past the end or before the start faults and
 *     is reported as cudaErrorIllegalAddress), filled with 0xff (NaN in
 *     f32, f16 and bf16) on allocation; freed memory is kept inaccessible
 *     for a while, so a use after free faults too; the alignment slack
 *     after an allocation is checked for stray writes. Copies and memsets
 *     are checked for direction and bounds; a capacity limit per device.
 *   - Streams (legacy default stream per device, blocking and non-blocking
 *     streams) and events. In deferred mode (RKV_CUDASIM_DEFER=1 or
 *     rkvsim_set_deferred) every asynchronous operation waits in its
 *     stream until something synchronises with it; copies from pageable
 *     memory are staged at the call (as CUDA does) but copies from/to
 *     pinned memory (cudaHostAlloc) read/write the host at execution, as
 *     DMA does; when a stream is synchronised, the other streams of its
 *     device first complete the copies at their heads (copy engines run
 *     ahead of kernels), a legal order that exposes unordered buffer reuse.
 *   - Thread schedule: the order fibres (and blocks) run between
 *     synchronisation points is forward, reverse or random
 *     (RKV_CUDASIM_SCHEDULE=forward|reverse|random[:seed]), so races
 *     between barriers change results.
 *   - cp.async (attention/cp_async.h): a copy into shared memory lands at
 *     issue, or in deferred mode only when a cp.async.wait_group of its
 *     thread completes its committed group, so a read before the wait (or
 *     a copy never committed) sees stale shared memory; a misaligned copy
 *     is an error.
 *   - __expf is approximated as the GPU does it (exp2 of x*log2(e) rounded
 *     to float, subnormal results flushed to zero).
 *   - cuBLAS: cublasGemmStridedBatchedEx with cuBLAS's argument rules
 *     (transposes, leading dimensions, type/compute combinations) and each
 *     operand's extent checked against its device allocation; fp32
 *     accumulation; beta == 0 never reads C.
 *   - Traffic meter (rkvsim_meter_*, below): bytes each kernel reads and
 *     writes through attention/devmem.h's accessors, and host-side copies,
 *     allocations and synchronisations.
 *   - Errors are CUDA error codes; cudaGetErrorString of the latest error
 *     names what the simulator found.
 * What it does NOT model: timing or performance of any kind, occupancy,
 * registers, memory coalescing, bank conflicts, caches, concurrent blocks
 * or inter-block memory ordering, the exact rounding of GPU math (results
 * are not bit-exact with a GPU), inline PTX (mma.sync is reached through
 * attention/mma.h, which has a shuffle-built simulator version), dynamic
 * (extern) shared memory, __launch_bounds__, sticky errors (an error is
 * reported once, the context stays usable), unified/mapped memory, reads
 * of host memory through a pointer hidden in a struct argument, reads
 * within the < 256-byte alignment slack after an allocation.
 * The runtime keeps process-wide state (it stands in for a driver) and
 * serialises API calls with one lock.
 */
#ifndef RKV_CUDASIM_H
#define RKV_CUDASIM_H

#ifndef RKV_CUDASIM
#define RKV_CUDASIM 1
#endif

#include <stddef.h>
#include <stdint.h>
#include <math.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RKVSIM_API __attribute__((visibility("default")))

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorCallRequiresNewerDriver = 36,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchOutOfResources = 701,
    cudaErrorIllegalInstruction = 715,
    cudaErrorLaunchFailure = 719,
    cudaErrorNotSupported = 801,
    cudaErrorUnknown = 999
} cudaError_t;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
};

enum cudaDeviceAttr {
    cudaDevAttrMaxThreadsPerBlock = 1,
    cudaDevAttrMaxBlockDimX = 2,
    cudaDevAttrMaxBlockDimY = 3,
    cudaDevAttrMaxBlockDimZ = 4,
    cudaDevAttrMaxGridDimX = 5,
    cudaDevAttrMaxGridDimY = 6,
    cudaDevAttrMaxGridDimZ = 7,
    cudaDevAttrMaxSharedMemoryPerBlock = 8,
    cudaDevAttrWarpSize = 10,
    cudaDevAttrMultiProcessorCount = 16
};

#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaHostAllocDefault 0x00
#define cudaEventDefault 0x00
#define cudaEventDisableTiming 0x02

typedef struct rkvsim_stream *cudaStream_t;
typedef struct rkvsim_event *cudaEvent_t;

struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    int warpSize;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    int multiProcessorCount;
    int major, minor;
};

RKVSIM_API cudaError_t cudaGetDeviceCount(int *count);
RKVSIM_API cudaError_t cudaSetDevice(int dev);
RKVSIM_API cudaError_t cudaGetDevice(int *dev);
RKVSIM_API cudaError_t cudaGetLastError(void);
RKVSIM_API cudaError_t cudaPeekAtLastError(void);
RKVSIM_API const char *cudaGetErrorString(cudaError_t e);
RKVSIM_API const char *cudaGetErrorName(cudaError_t e);
RKVSIM_API cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int dev);
RKVSIM_API cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int dev);
RKVSIM_API cudaError_t cudaDeviceSynchronize(void);
RKVSIM_API cudaError_t cudaMalloc(void **p, size_t n);
RKVSIM_API cudaError_t cudaFree(void *p);
RKVSIM_API cudaError_t cudaHostAlloc(void **p, size_t n, unsigned flags);
RKVSIM_API cudaError_t cudaMallocHost(void **p, size_t n);
RKVSIM_API cudaError_t cudaFreeHost(void *p);
RKVSIM_API cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b);
RKVSIM_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t n,
                                  enum cudaMemcpyKind k);
RKVSIM_API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n,
                                       enum cudaMemcpyKind k, cudaStream_t s);
RKVSIM_API cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch,
                                    size_t width, size_t height, enum cudaMemcpyKind k);
RKVSIM_API cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src,
                                         size_t spitch, size_t width, size_t height,
                                         enum cudaMemcpyKind k, cudaStream_t s);
/* Batched copies (CUDA 12.8; this is CUDA 13's signature, without
 * failIdx): count 1D copies in one call, in stream order as a whole, each
 * with its attributes (attrs[k] from copy attrsIdxs[k] on); not on the
 * legacy stream. Metered once under "[batch]" (calls: API calls, bytes:
 * all) beside each copy's own "[H2D]"/"[D2H]"/"[D2D]" row. */
enum cudaMemcpySrcAccessOrder {
    cudaMemcpySrcAccessOrderInvalid = 0x0,
    cudaMemcpySrcAccessOrderStream = 0x1,
    cudaMemcpySrcAccessOrderDuringApiCall = 0x2,
    cudaMemcpySrcAccessOrderAny = 0x3,
    cudaMemcpySrcAccessOrderMax = 0x7FFFFFFF
};
enum cudaMemcpyFlags { cudaMemcpyFlagDefault = 0x0, cudaMemcpyFlagPreferOverlapWithCompute = 0x1 };
enum cudaMemLocationType {
    cudaMemLocationTypeInvalid = 0,
    cudaMemLocationTypeDevice = 1,
    cudaMemLocationTypeHost = 2
};
struct cudaMemLocation {
    enum cudaMemLocationType type;
    int id;
};
struct cudaMemcpyAttributes {
    enum cudaMemcpySrcAccessOrder srcAccessOrder;
    struct cudaMemLocation srcLocHint;
    struct cudaMemLocation dstLocHint;
    unsigned int flags;
};
RKVSIM_API cudaError_t cudaMemcpyBatchAsync(void *const *dsts, const void *const *srcs,
                                            const size_t *sizes, size_t count,
                                            struct cudaMemcpyAttributes *attrs,
                                            size_t *attrsIdxs, size_t numAttrs,
                                            cudaStream_t s);
RKVSIM_API cudaError_t cudaMemset(void *p, int v, size_t n);
RKVSIM_API cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s);
RKVSIM_API cudaError_t cudaStreamCreate(cudaStream_t *s);
RKVSIM_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
RKVSIM_API cudaError_t cudaStreamDestroy(cudaStream_t s);
RKVSIM_API cudaError_t cudaStreamSynchronize(cudaStream_t s);
RKVSIM_API cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags);
RKVSIM_API cudaError_t cudaEventCreate(cudaEvent_t *e);
RKVSIM_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
/* cudaSuccess once the work recorded before e has run (running it first
 * when deferred), cudaErrorNotReady while it has not. Deferred mode's
 * realism knob: the first query after each record reports
 * cudaErrorNotReady even when nothing is left to run, so a caller that
 * polls must really come back (two-phase completion is exercised).
 * cudaErrorNotReady is also recorded as the last error (cudaGetLastError
 * returns and clears it), as the CUDA runtime may do -- PyTorch clears it
 * after each such query -- so a caller that forgets fails its next launch
 * check here rather than only on a GPU. */
RKVSIM_API cudaError_t cudaEventQuery(cudaEvent_t e);
RKVSIM_API cudaError_t cudaEventDestroy(cudaEvent_t e);
RKVSIM_API cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
RKVSIM_API cudaError_t cudaEventSynchronize(cudaEvent_t e);
RKVSIM_API cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);

/* ---- cuBLAS subset ---- */
typedef struct rkvsim_blas *cublasHandle_t;
typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_NOT_SUPPORTED = 15
} cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;
typedef enum { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 } cudaDataType_t;
typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;

RKVSIM_API cublasStatus_t cublasCreate(cublasHandle_t *h);
RKVSIM_API cublasStatus_t cublasDestroy(cublasHandle_t h);
RKVSIM_API cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s);
RKVSIM_API const char *cublasGetStatusString(cublasStatus_t s);
RKVSIM_API cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
    const void *alpha, const void *A, cudaDataType_t at, int lda, long long sa, const void *B,
    cudaDataType_t bt, int ldb, long long sb, const void *beta, void *C, cudaDataType_t ct,
    int ldc, long long sc, int batch, cublasComputeType_t compute, cublasGemmAlgo_t algo);

/* ---- simulator controls (tests) ---- */
enum { RKVSIM_FORWARD = 0, RKVSIM_REVERSE = 1, RKVSIM_RANDOM = 2 };
RKVSIM_API void rkvsim_set_schedule(int order, uint64_t seed);
RKVSIM_API int rkvsim_schedule(void);
RKVSIM_API void rkvsim_set_deferred(int on);
RKVSIM_API int rkvsim_deferred(void);
/* Max grid x of every device (default 2^31 - 1): simulates a smaller one. */
RKVSIM_API void rkvsim_set_max_grid_x(unsigned v);
/* Device memory capacity in bytes per device (default 16 GiB). */
RKVSIM_API void rkvsim_set_mem_limit(size_t bytes);
RKVSIM_API size_t rkvsim_mem_in_use(int device);
/* The message of the latest error the simulator reported. */
RKVSIM_API const char *rkvsim_last_message(void);

/* Traffic meter: while enabled, every device-memory access a kernel makes
 * through the accessors of attention/devmem.h (ld_global, st_global) is
 * counted per kernel (name up to any '<') and per region; cuBLAS GEMMs
 * count each operand once (an ideal GEMM); host-side operations count
 * under bracketed names: "[H2D]", "[D2H]", "[D2D]", "[memset]" (bytes and
 * calls), "[malloc]", "[free]", "[sync]" (calls: cudaMalloc, cudaFree and
 * every host-blocking synchronisation). Regions are address ranges named
 * with rkvsim_meter_region (returns 1..7, or -1 when full); region 0 is
 * all other memory. Counts accrue when the work runs (deferred mode: when
 * it is synchronised). reset forgets counts and regions. */
enum { RKVSIM_METER_READ = 0, RKVSIM_METER_WRITE = 1, RKVSIM_METER_LAUNCHES = 2 };
RKVSIM_API void rkvsim_meter_reset(void);
RKVSIM_API void rkvsim_meter_enable(int on);
RKVSIM_API int rkvsim_meter_region(const void *p, size_t n);
/* The i-th name counted so far, NULL past the end. */
RKVSIM_API const char *rkvsim_meter_name(size_t i);
/* Bytes read/written or launches (what) of name (NULL: all) in region
 * (-1: all). */
RKVSIM_API uint64_t rkvsim_meter_get(const char *name, int region, int what);
/* Device side: the accessors' hook (nonzero while the meter is on). */
RKVSIM_API extern int rkvsim_metering;
RKVSIM_API void rkvsim_meter_access(const void *p, size_t n, int write);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* ==== device side (C++ only) ==== */
#ifdef __cplusplus
#include <string.h>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__ __restrict
/* Static storage in one section: the runtime poisons the whole section
 * before every block, which makes it per-block memory (blocks run one at
 * a time). */
#define __shared__ static __attribute__((section("rkv_sim_shared")))

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
    dim3(uint3 u) : x(u.x), y(u.y), z(u.z) {}
};

/* What a running fibre sees; the runtime points rkvsim_cur at it. */
struct rkvsim_thread_view {
    uint3 tidx, bidx, bdim, gdim;
};
extern "C" RKVSIM_API rkvsim_thread_view *rkvsim_cur;

#define threadIdx (rkvsim_cur->tidx)
#define blockIdx (rkvsim_cur->bidx)
#define blockDim (rkvsim_cur->bdim)
#define gridDim (rkvsim_cur->gdim)
static const int warpSize = 32;

enum {
    RKVSIM_SHFL_IDX,
    RKVSIM_SHFL_XOR,
    RKVSIM_SHFL_DOWN,
    RKVSIM_SHFL_UP,
    RKVSIM_SYNCWARP,
    RKVSIM_BALLOT,
    RKVSIM_ANY,
    RKVSIM_ALL
};
extern "C" RKVSIM_API void rkvsim_syncthreads(const char *file, int line);
/* cp.async (attention/cp_async.h): one copy of n (4, 8, 16) bytes from
 * global to shared memory, metered as a read; commit closes the thread's
 * group; wait completes all but the `pending` most recent groups. */
extern "C" RKVSIM_API void rkvsim_cp_async(void *dst, const void *src, unsigned n,
                                           const char *file, int line);
extern "C" RKVSIM_API void rkvsim_cp_commit(void);
extern "C" RKVSIM_API void rkvsim_cp_wait(unsigned pending);
extern "C" RKVSIM_API uint64_t rkvsim_warp_op(int kind, unsigned mask, uint64_t bits, int arg,
                                              int width, const char *file, int line);

template <typename T>
static inline T rkvsim_shfl(int kind, unsigned mask, T v, int arg, int width, const char *f,
                            int l)
{
    static_assert(sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
    uint64_t b = 0;
    memcpy(&b, &v, sizeof v);
    b = rkvsim_warp_op(kind, mask, b, arg, width, f, l);
    T r;
    memcpy(&r, &b, sizeof r);
    return r;
}
#define RKVSIM_SHFL_(kind, mask, v, arg, ...)                                          \
    rkvsim_shfl(kind, mask, v, arg, rkvsim_width_(0, ##__VA_ARGS__), __FILE__, __LINE__)
static inline int rkvsim_width_(int, int w = 32) { return w; }
#define __shfl_sync(mask, v, src, ...) RKVSIM_SHFL_(RKVSIM_SHFL_IDX, mask, v, src, ##__VA_ARGS__)
#define __shfl_xor_sync(mask, v, lm, ...)                                              \
    RKVSIM_SHFL_(RKVSIM_SHFL_XOR, mask, v, lm, ##__VA_ARGS__)
#define __shfl_down_sync(mask, v, d, ...)                                              \
    RKVSIM_SHFL_(RKVSIM_SHFL_DOWN, mask, v, d, ##__VA_ARGS__)
#define __shfl_up_sync(mask, v, d, ...) RKVSIM_SHFL_(RKVSIM_SHFL_UP, mask, v, d, ##__VA_ARGS__)
#define __syncwarp(...) ((void)rkvsim_warp_op(RKVSIM_SYNCWARP, rkvsim_mask_(0, ##__VA_ARGS__), \
                                               0, 0, 32, __FILE__, __LINE__))
static inline unsigned rkvsim_mask_(int, unsigned m = 0xffffffffu) { return m; }
#define __ballot_sync(mask, p)                                                         \
    ((unsigned)rkvsim_warp_op(RKVSIM_BALLOT, mask, (p) != 0, 0, 32, __FILE__, __LINE__))
#define __any_sync(mask, p) ((int)rkvsim_warp_op(RKVSIM_ANY, mask, (p) != 0, 0, 32, __FILE__, __LINE__))
#define __all_sync(mask, p) ((int)rkvsim_warp_op(RKVSIM_ALL, mask, (p) != 0, 0, 32, __FILE__, __LINE__))
#define __syncthreads() rkvsim_syncthreads(__FILE__, __LINE__)

/* ---- math ---- */
#define __expf(x) rkvsim_expf(x)
#define __logf(x) logf(x)
static inline float rkvsim_expf(float x)
{
    float y = exp2f((float)(x * 1.44269504088896341f));
    return fabsf(y) < 1.17549435e-38f ? 0.0f : y;
}
static inline float __fdividef(float a, float b) { return a / b; }
template <typename A, typename B>
static inline typename std::common_type<A, B>::type min(A a, B b)
{
    typedef typename std::common_type<A, B>::type T;
    return (T)a < (T)b ? (T)a : (T)b;
}
template <typename A, typename B>
static inline typename std::common_type<A, B>::type max(A a, B b)
{
    typedef typename std::common_type<A, B>::type T;
    return (T)a > (T)b ? (T)a : (T)b;
}

/* ---- atomics: a fibre is never pre-empted, so plain updates are atomic ---- */
template <typename T> static inline T atomicAdd(T *p, T v) { T o = *p; *p = o + v; return o; }
template <typename T> static inline T atomicSub(T *p, T v) { T o = *p; *p = o - v; return o; }
template <typename T> static inline T atomicExch(T *p, T v) { T o = *p; *p = v; return o; }
template <typename T> static inline T atomicMax(T *p, T v) { T o = *p; if (v > o) *p = v; return o; }
template <typename T> static inline T atomicMin(T *p, T v) { T o = *p; if (v < o) *p = v; return o; }
template <typename T> static inline T atomicCAS(T *p, T c, T v) { T o = *p; if (o == c) *p = v; return o; }
static inline void __threadfence(void) {}
static inline void __threadfence_block(void) {}

/* ---- 16-bit floats: round to nearest even, as __float2half_rn does ---- */
struct __half {
    unsigned short x;
};
struct __nv_bfloat16 {
    unsigned short x;
};
static inline float rkvsim_bits_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t rkvsim_f_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float __half2float(__half h)
{
    uint32_t s = (uint32_t)(h.x & 0x8000) << 16, e = (h.x >> 10) & 31, m = h.x & 0x3ff;
    if (e == 31)
        return rkvsim_bits_f(s | 0x7f800000u | (m << 13));
    if (e == 0) {
        float f = (float)m * 5.9604644775390625e-8f; /* 2^-24 */
        return s ? -f : f;
    }
    return rkvsim_bits_f(s | ((e + 112) << 23) | (m << 13));
}
static inline __half __float2half_rn(float f)
{
    uint32_t u = rkvsim_f_bits(f), s = (u >> 16) & 0x8000;
    uint32_t a = u & 0x7fffffffu;
    __half h;
    if (a >= 0x7f800000u) { /* inf / nan */
        h.x = (unsigned short)(s | 0x7c00 | (a > 0x7f800000u ? 0x200 : 0));
        return h;
    }
    if (a >= 0x477ff000u) { /* rounds to >= 65520: inf */
        h.x = (unsigned short)(s | 0x7c00);
        return h;
    }
    if (a < 0x38800000u) { /* subnormal half: multiples of 2^-24 */
        float v = rkvsim_bits_f(a) * 16777216.0f; /* exact */
        uint32_t q = (uint32_t)v;
        float r = v - (float)q;
        if (r > 0.5f || (r == 0.5f && (q & 1)))
            q++;
        h.x = (unsigned short)(s | q);
        return h;
    }
    uint32_t m = a + 0xfff + ((a >> 13) & 1) - (112u << 23);
    h.x = (unsigned short)(s | (m >> 13));
    return h;
}
static inline __half __float2half(float f) { return __float2half_rn(f); }
static inline __half __ushort_as_half(unsigned short u) { __half h; h.x = u; return h; }
static inline unsigned short __half_as_ushort(__half h) { return h.x; }
static inline float __bfloat162float(__nv_bfloat16 b) { return rkvsim_bits_f((uint32_t)b.x << 16); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f)
{
    uint32_t u = rkvsim_f_bits(f);
    __nv_bfloat16 b;
    if ((u & 0x7fffffffu) > 0x7f800000u)
        b.x = (unsigned short)((u >> 16) | 0x40);
    else
        b.x = (unsigned short)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
    return b;
}
static inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { __nv_bfloat16 b; b.x = u; return b; }
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.x; }

/* ---- launches ---- */
typedef std::function<void()> rkvsim_body;
/* Runs (or, deferred, queues) grid x block fibres of body. The section
 * bounds name this module's __shared__ storage. */
extern "C++" RKVSIM_API void rkvsim_launch(const char *name, dim3 grid, dim3 block,
                                           size_t smem, cudaStream_t s,
                                           const rkvsim_body &body, char *sh_begin,
                                           char *sh_end, int bad_arg, const void *bad_ptr);
/* 0 when p may be passed to a kernel (NULL or device memory of the current
 * device), else nonzero. */
extern "C" RKVSIM_API int rkvsim_check_arg(const void *p);

extern "C" char __start_rkv_sim_shared[] __attribute__((weak, visibility("hidden")));
extern "C" char __stop_rkv_sim_shared[] __attribute__((weak, visibility("hidden")));

template <typename... P> struct rkvsim_launcher {
    void (*k)(P...);
    const char *name;
    dim3 g, b;
    size_t smem;
    cudaStream_t s;
    template <typename... A> void operator()(A &&...a) const
    {
        static_assert(sizeof...(A) == sizeof...(P), "kernel argument count");
        std::tuple<typename std::decay<P>::type...> args(std::forward<A>(a)...);
        int bad = -1;
        const void *bad_ptr = nullptr;
        check_args(args, bad, bad_ptr, std::index_sequence_for<P...>());
        void (*kern)(P...) = k;
        rkvsim_body body = [kern, args]() { std::apply(kern, args); };
        rkvsim_launch(name, g, b, smem, s, body, __start_rkv_sim_shared,
                      __stop_rkv_sim_shared, bad, bad_ptr);
    }
    template <typename Tup, size_t... I>
    static void check_args(const Tup &t, int &bad, const void *&bp, std::index_sequence<I...>)
    {
        (check_one<I>(std::get<I>(t), bad, bp), ...);
    }
    template <size_t I, typename X> static void check_one(const X &x, int &bad, const void *&bp)
    {
        if constexpr (std::is_pointer<X>::value) {
            if (bad < 0 && rkvsim_check_arg((const void *)x) != 0) {
                bad = (int)I;
                bp = (const void *)x;
            }
        }
    }
};
template <typename... P>
static inline rkvsim_launcher<P...> rkvsim_make_launcher(void (*k)(P...), const char *name,
                                                         dim3 g, dim3 b, size_t smem,
                                                         cudaStream_t s)
{
    return rkvsim_launcher<P...>{k, name, g, b, smem, s};
}
#endif /* __cplusplus */

#endif
