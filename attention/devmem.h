/*
 * attention/devmem.h -- the kernels' global-memory accessors:
 *   ld_global(p)      one load of *p (any trivially copyable T: a scalar or
 *                     an aligned rvec for a 16-byte load)
 *   st_global(p, v)   one store
 * On a GPU they are plain loads and stores. In the simulator build they
 * also feed its traffic meter (rkvsim_meter_*, attention/sim/cudasim.h),
 * which scripts/attn-traffic reads: a kernel access that bypasses them is
 * not counted, so every global access of attention kernels goes through
 * them or cp_async16 (attention/cp_async.h; shared memory and registers
 * need not).
 */
#ifndef RKV_ATTENTION_DEVMEM_H
#define RKV_ATTENTION_DEVMEM_H

template <typename T> static __device__ __forceinline__ T ld_global(const T *p)
{
#ifdef RKV_CUDASIM
    if (rkvsim_metering)
        rkvsim_meter_access(p, sizeof(T), 0);
#endif
    return *p;
}

template <typename T> static __device__ __forceinline__ void st_global(T *p, const T &v)
{
#ifdef RKV_CUDASIM
    if (rkvsim_metering)
        rkvsim_meter_access(p, sizeof(T), 1);
#endif
    *p = v;
}

#endif
