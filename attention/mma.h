/*
 * attention/mma.h -- one warp-wide tensor-core operation for the kernels:
 *   mma_16816<T>(d, a, b, c)   D (16x8, fp32) = A (16x16) . B (16x8) + C
 * with T = mma_f16 or mma_bf16 (the input type), exactly the PTX instruction
 * mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32
 * (sm_80+), and its fragment layouts (PTX ISA, "Matrix fragments for
 * mma.m16n8k16"), with g = lane / 4 and t = lane % 4:
 *   a[0] = A[g][2t..2t+1]      a[1] = A[g+8][2t..2t+1]
 *   a[2] = A[g][2t+8..2t+9]    a[3] = A[g+8][2t+8..2t+9]
 *   b[0] = B[2t..2t+1][g]      b[1] = B[2t+8..2t+9][g]
 *   c[0..1] = C[g][2t..2t+1]   c[2..3] = C[g+8][2t..2t+1]   (d likewise)
 * each 32-bit register holding two 16-bit values, the lower-indexed one in
 * the low half. Every lane of the warp must call it together (it is a
 * warp collective).
 * In the simulator build (RKV_CUDASIM) it is the same operation built from
 * warp shuffles: each lane gathers the A row and B column it needs from
 * the lanes that hold them, and accumulates the 16 products in fp32 in k
 * order (the products of 16-bit inputs are exact in fp32; a GPU's
 * summation order is unspecified, so results agree to fp32 rounding).
 */
#ifndef RKV_ATTENTION_MMA_H
#define RKV_ATTENTION_MMA_H

#include <stdint.h>

struct mma_f16 {};
struct mma_bf16 {};

/* Two 16-bit values of T packed in a register, as fp32 (x: the low half). */
template <typename T> struct mma_cvt;
template <> struct mma_cvt<mma_f16> {
    static __device__ __forceinline__ void two(uint32_t r, float *x, float *y)
    {
        *x = __half2float(__ushort_as_half((unsigned short)(r & 0xffffu)));
        *y = __half2float(__ushort_as_half((unsigned short)(r >> 16)));
    }
};
template <> struct mma_cvt<mma_bf16> {
    static __device__ __forceinline__ void two(uint32_t r, float *x, float *y)
    {
        *x = __bfloat162float(__ushort_as_bfloat16((unsigned short)(r & 0xffffu)));
        *y = __bfloat162float(__ushort_as_bfloat16((unsigned short)(r >> 16)));
    }
};

#ifdef RKV_CUDASIM
template <typename T>
static __device__ __forceinline__ void mma_16816(float d[4], const uint32_t a[4],
                                                 const uint32_t b[2], const float c[4])
{
    const unsigned lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    float acc[4] = {c[0], c[1], c[2], c[3]};
    /* k runs over 4 groups of 2 (k = 2s, 2s+1) and their +8 twins */
    for (unsigned half = 0; half < 2; half++)
        for (unsigned s = 0; s < 4; s++) {
            /* A[g][..] and A[g+8][..] at k = 2s + 8*half: lane 4g + s holds them */
            const unsigned asrc = g * 4 + s;
            const uint32_t ar0 = __shfl_sync(0xffffffffu, a[half ? 2 : 0], asrc);
            const uint32_t ar1 = __shfl_sync(0xffffffffu, a[half ? 3 : 1], asrc);
            for (unsigned j = 0; j < 2; j++) {
                /* B[k][n] with n = 2t + j: lane 4n + s holds it */
                const unsigned bsrc = (2 * t + j) * 4 + s;
                const uint32_t bc = __shfl_sync(0xffffffffu, b[half], bsrc);
                float b0, b1, x0, x1, y0, y1;
                mma_cvt<T>::two(bc, &b0, &b1);
                mma_cvt<T>::two(ar0, &x0, &x1);
                mma_cvt<T>::two(ar1, &y0, &y1);
                acc[j] += x0 * b0;
                acc[j] += x1 * b1;
                acc[2 + j] += y0 * b0;
                acc[2 + j] += y1 * b1;
            }
        }
    for (int i = 0; i < 4; i++)
        d[i] = acc[i];
}
#else
template <typename T> struct mma_ptx;
/* One m16n8k16 specialisation per input type; only the PTX type differs. */
#define RKV_MMA_PTX(TAG, PTXTYPE)                                                    \
    template <> struct mma_ptx<TAG> {                                                \
        static __device__ __forceinline__ void run(float d[4], const uint32_t a[4],  \
                                                   const uint32_t b[2],              \
                                                   const float c[4])                 \
        {                                                                            \
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." PTXTYPE "."       \
                         PTXTYPE ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "      \
                         "{%10,%11,%12,%13};\n"                                      \
                         : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])            \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),    \
                           "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));    \
        }                                                                            \
    };
RKV_MMA_PTX(mma_f16, "f16")
RKV_MMA_PTX(mma_bf16, "bf16")
#undef RKV_MMA_PTX
template <typename T>
static __device__ __forceinline__ void mma_16816(float d[4], const uint32_t a[4],
                                                 const uint32_t b[2], const float c[4])
{
    mma_ptx<T>::run(d, a, b, c);
}
#endif

#endif
