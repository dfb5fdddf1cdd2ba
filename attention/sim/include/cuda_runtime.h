/* attention/sim/include/cuda_runtime.h -- the simulator build's stand-in for CUDA's
 * cuda_runtime.h: everything is in attention/sim/cudasim.h. */
#ifndef RKVSIM_CUDA_RUNTIME_H
#define RKVSIM_CUDA_RUNTIME_H
#include "attention/sim/cudasim.h"
#endif
