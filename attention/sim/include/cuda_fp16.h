/* attention/sim/include/cuda_fp16.h -- the simulator build's stand-in for CUDA's
 * cuda_fp16.h: everything is in attention/sim/cudasim.h. */
#ifndef RKVSIM_CUDA_FP16_H
#define RKVSIM_CUDA_FP16_H
#include "attention/sim/cudasim.h"
#endif
