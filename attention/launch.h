/*
 * attention/launch.h -- RKV_LAUNCH, the one way radixkv launches a kernel:
 *   RKV_LAUNCH(grid, block, smem, stream, kernel)(args...);
 * Under nvcc it is kernel<<<grid, block, smem, stream>>>(args...); in the
 * simulator build (-DRKV_CUDA=SIM, RKV_CUDASIM defined by
 * attention/sim/cudasim.h) it hands the kernel to the CPU simulator. The
 * kernel comes last so a template kernel's commas need no parentheses.
 * Kernel bodies are the same in both builds.
 */
#ifndef RKV_ATTENTION_LAUNCH_H
#define RKV_ATTENTION_LAUNCH_H

#ifdef RKV_CUDASIM
#define RKV_LAUNCH(grid, block, smem, stream, ...)                                      \
    rkvsim_make_launcher(__VA_ARGS__, #__VA_ARGS__, grid, block, smem, stream)
#else
#define RKV_LAUNCH(grid, block, smem, stream, ...) __VA_ARGS__<<<grid, block, smem, stream>>>
#endif

#endif
