/*
 * attention/cp_async.h -- asynchronous global-to-shared copies (sm_80+):
 *   cp_async16(dst, src)   one 16-byte copy, src in global memory, dst in
 *                          shared memory (both 16-byte aligned): PTX
 *                          cp.async.cg.shared.global (L2 only, no L1)
 *   cp_async_commit()      closes the thread's current group of copies
 *   cp_async_wait<N>()     waits until at most the N most recent committed
 *                          groups of this thread are pending
 * A copy is visible to the thread that issued it after its wait, and to
 * the block after the wait and a __syncthreads. Like ld_global
 * (attention/devmem.h) this is a global-memory accessor: in the simulator
 * build it is rkvsim_cp_async, which meters the read and, in deferred
 * mode, lands the copy only at the wait that completes its group, so a
 * kernel that reads before waiting fails its tests there.
 */
#ifndef RKV_ATTENTION_CP_ASYNC_H
#define RKV_ATTENTION_CP_ASYNC_H

template <typename T> static __device__ __forceinline__ void cp_async16(T *dst, const T *src)
{
    static_assert(sizeof(T) == 16, "cp_async16 copies 16 bytes");
#ifdef RKV_CUDASIM
    rkvsim_cp_async(dst, src, 16, __FILE__, __LINE__);
#else
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src) : "memory");
#endif
}

static __device__ __forceinline__ void cp_async_commit()
{
#ifdef RKV_CUDASIM
    rkvsim_cp_commit();
#else
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

template <int N> static __device__ __forceinline__ void cp_async_wait()
{
#ifdef RKV_CUDASIM
    rkvsim_cp_wait(N);
#else
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

#endif
