/* attention/sim/include/cuda_bf16.h -- the simulator build's stand-in for CUDA's
 * cuda_bf16.h: everything is in attention/sim/cudasim.h. */
#ifndef RKVSIM_CUDA_BF16_H
#define RKVSIM_CUDA_BF16_H
#include "attention/sim/cudasim.h"
#endif
